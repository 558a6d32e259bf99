//! Fault tolerance, with real processes: a sandbox-runner killed in the
//! middle of a cell, a bridge killed and started again, nats-server stopped
//! and started again, and a wrapped server that crashes.
//!
//! Every wait is bounded; deadlines are short (10 s) so a fault costs
//! seconds, not the default 90 s.

use std::process::Stdio;
use std::time::Duration;

use code_mode_core::defaults::HOP_MARGIN;
use rmcp::model::CallToolResult;
use tokio::time::Instant;

use crate::support::{
    self, Client, Deployment, children_of, containers_of, eventually, kill9, pid_alive, report, run_python,
    spawn_service, start,
};

/// The deadline the tests give a cell.
const DEADLINE: Duration = Duration::from_secs(10);

/// The text of a result that is a tool error, or the test fails.
fn error_text(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "expected an error, got {result:?}");
    result.content.iter().find_map(|c| c.as_text()).expect("a text block").text.clone()
}

/// The printed output of a cell that ran, or None when `run_python` failed.
fn stdout_of(result: &CallToolResult) -> Option<String> {
    if result.is_error == Some(true) {
        return None;
    }
    report(result)["stdout"].as_str().map(str::to_string)
}

/// Run `code` until its output is `expected`, up to `within`; returns what
/// the failed tries gave (the error texts or other outputs).
async fn until_output(client: &Client, code: &str, expected: &str, within: Duration) -> Vec<String> {
    let give_up = Instant::now() + within;
    let mut failed = Vec::new();
    loop {
        let result = tokio::time::timeout(DEADLINE + HOP_MARGIN + Duration::from_secs(5), run_python(client, code))
            .await
            .expect("run_python answers within the deadline and its margin");
        match stdout_of(&result) {
            Some(out) if out == expected => return failed,
            Some(out) => failed.push(out),
            None => failed.push(error_text(&result)),
        }
        assert!(Instant::now() < give_up, "no {expected:?} within {within:?}; got {failed:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

const ADD: &str = "print(await add({'a': 2, 'b': 3}))";
const SUM: &str = "{\"sum\":5}\n";

#[tokio::test]
async fn a_runner_killed_mid_cell_fails_that_cell_within_5_s_and_a_live_runner_reaps_its_containers() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("runner-killed");
    // A deadline far off: what ends the cell is the runner's lease, not it.
    let (client, _, mut guards) =
        start(Deployment::OverNats, &["--deadline", "90"], &["--log", log.to_str().unwrap()]).await;
    let nats = guards.nats_url();
    let mut runner = guards.runner.take().expect("a runner");
    let runner_pid = runner.id().expect("the runner runs");

    // The cell makes a call (so it is surely running on the first runner),
    // then sleeps. A second runner starts and serves (its warm pool is up);
    // then the first is killed.
    let code = "await add({'a': 1, 'b': 1})\nimport time\ntime.sleep(80)";
    let sent = Instant::now();
    let mut peer = None;
    let killed = async {
        let running = eventually(Duration::from_secs(30), || !support::logged_calls(&log).is_empty()).await;
        assert!(running, "the cell's call never reached the server");
        let started = spawn_service(&nats, guards.users(), "sandbox-runner", &[], None);
        let peer_pid = started.id().expect("the second runner runs");
        peer = Some(started);
        let serving = eventually(Duration::from_secs(60), || !containers_of(peer_pid).is_empty()).await;
        assert!(serving, "the second runner started no warm container");
        let containers = containers_of(runner_pid);
        assert!(containers.len() >= 2, "the running cell and the warm pool have containers: {containers:?}");
        kill9(runner_pid);
        let killed_at = Instant::now();
        // Reaped, so its pid is free (a zombie would still look like an owner).
        runner.wait().await.expect("the killed runner is reaped");
        (killed_at, containers)
    };
    let (result, (killed_at, left)) =
        tokio::time::timeout(Duration::from_secs(120), async { tokio::join!(run_python(&client, code), killed) })
            .await
            .expect("the client gets an answer for the cell, never a hang");
    let seen = killed_at.elapsed();
    let text = error_text(&result);
    assert!(
        text.contains("sandbox-runner") && text.contains("was lost") && text.contains("stopped answering"),
        "{text}"
    );
    assert!(seen <= Duration::from_secs(5), "the cell's error came {seen:?} after the kill: {text}");
    eprintln!(
        "runner killed {:?} after the cell was sent; the client had its error {seen:?} after the kill",
        killed_at - sent
    );

    // The live runner removes the killed one's containers (the cell's and
    // its warm pool) on its next rounds, without a restart of anything.
    let reaped = eventually(code_mode_sandbox_runner::REAP_EVERY + Duration::from_secs(10), || {
        containers_of(runner_pid).is_empty()
    })
    .await;
    assert!(reaped, "containers of the killed runner left: {:?} (it had {left:?})", containers_of(runner_pid));
    eprintln!("the killed runner's {} containers were gone {:?} after the kill", left.len(), killed_at.elapsed());
    guards.runner = peer;
    let failed = until_output(&client, "print('again')", "again\n", Duration::from_secs(30)).await;
    assert!(failed.is_empty(), "the live runner took the next cell at once: {failed:?}");
    client.cancel().await.unwrap();
}

/// A live runner whose report is lost on its way (here nats-server refuses
/// to carry it: larger than its `max_payload`) says on the cell's lease that
/// the cell ended: the cell fails within seconds saying its report was lost
/// and how the cell ended, not at its 60 s deadline, and the runner serves
/// the next cell.
#[tokio::test]
async fn a_cell_whose_report_is_lost_on_its_way_fails_within_seconds_saying_the_runner_finished_it() {
    if !support::sandbox_available() {
        return;
    }
    // The deployment's users and permissions, and messages of at most
    // 16 KiB: 8000 control characters printed make a report of about 48 KB
    // (each is six bytes as JSON); the catalog, the cell and small reports
    // fit.
    let users = code_mode_core::testing::NatsUsers::generate();
    let Some(nats) = support::nats_with_max_payload(&users, 16384) else { return };
    let url = nats.url();
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&[]));
    let _runner = spawn_service(&url, &users, "sandbox-runner", &["--warm", "1"], None);
    let mut frontend = support::service_command(&url, &users, "frontend", &["--deadline", "60"], None);
    frontend.stdin(Stdio::piped());
    let (client, _) = support::connect_client(frontend).await;
    let small = run_python(&client, "print('small')").await;
    assert_eq!(stdout_of(&small).as_deref(), Some("small\n"), "a small report gets through: {small:?}");

    let sent = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(40), run_python(&client, "print('\\x01' * 8000)"))
        .await
        .expect("the cell is answered long before its 60 s deadline");
    let took = sent.elapsed();
    let text = error_text(&result);
    assert!(text.contains("report of this cell was lost") && text.contains("it ran to its end"), "{text}");
    assert!(took < Duration::from_secs(15), "the lost report was seen {took:?} after the cell was sent: {text}");
    eprintln!("lost report: the client had its error {took:?} after sending the cell");

    let next = run_python(&client, "print('next')").await;
    assert_eq!(stdout_of(&next).as_deref(), Some("next\n"), "the runner serves the next cell: {next:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_bridge_killed_and_started_again_fails_calls_clearly_meanwhile_then_serves_them() {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, mut guards) = start(Deployment::OverNats, &["--deadline", "10"], &[]).await;
    let nats = guards.nats_url();
    assert_eq!(until_output(&client, ADD, SUM, Duration::from_secs(30)).await, Vec::<String>::new());

    let mut bridge = guards.bridge.take().expect("a bridge");
    let bridge_pid = bridge.id().expect("the bridge runs");
    let wrapped = children_of(bridge_pid);
    assert_eq!(wrapped.len(), 1, "the bridge runs its wrapped server: {wrapped:?}");
    kill9(bridge_pid);
    bridge.wait().await.expect("the killed bridge is reaped");
    // Its server sees its stdin close and goes too.
    assert!(eventually(Duration::from_secs(10), || !pid_alive(wrapped[0])).await, "the orphaned server still runs");

    // During the outage a call fails at once with a clear error the code can catch.
    let code = "try:\n    print(await add({'a': 2, 'b': 3}))\nexcept ToolError as e:\n    print('ToolError:', e)";
    let during = tokio::time::timeout(Duration::from_secs(10), run_python(&client, code))
        .await
        .expect("a call during the outage fails at once");
    assert_eq!(report(&during)["stdout"], "ToolError: BridgeUnavailable\n");

    let bridge = spawn_service(&nats, guards.users(), "bridge", &[], Some(&[]));
    let bridge_pid = bridge.id().expect("the new bridge runs");
    guards.bridge = Some(bridge);
    until_output(&client, ADD, SUM, Duration::from_secs(30)).await;
    assert_eq!(children_of(bridge_pid).len(), 1, "the new bridge started its wrapped server");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn nats_stopped_and_started_again_fails_requests_clearly_meanwhile_and_the_services_serve_again() {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, mut guards) = start(Deployment::OverNats, &["--deadline", "10"], &[]).await;
    assert_eq!(until_output(&client, ADD, SUM, Duration::from_secs(30)).await, Vec::<String>::new());

    guards.nats.as_mut().expect("nats").stop();
    let during = tokio::time::timeout(Duration::from_secs(10), run_python(&client, ADD))
        .await
        .expect("a request during the outage fails at once");
    let text = error_text(&during);
    assert!(text.contains("NATS"), "{text}");
    eprintln!("during the NATS outage: {text}");

    let restarted = Instant::now();
    guards.nats.as_mut().expect("nats").restart();
    let failed = until_output(&client, ADD, SUM, Duration::from_secs(30)).await;
    eprintln!("served again {:?} after nats-server restarted; tries before: {failed:?}", restarted.elapsed());
    for service in [guards.bridge.as_mut(), guards.runner.as_mut()] {
        let service = service.expect("a split deployment");
        assert!(service.try_wait().expect("try_wait").is_none(), "a service exited during the outage");
    }
    client.cancel().await.unwrap();
}

async fn a_crashed_server_reaches_the_code_as_a_tool_error_and_is_back_for_later_calls(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--deadline", "10"], &[]).await;
    let code = r#"import asyncio
try:
    await crash()
except ToolError as e:
    print("crash:", e)
for _ in range(100):
    try:
        print("add:", await add({"a": 2, "b": 3}))
        break
    except ToolError as e:
        await asyncio.sleep(0.1)"#;
    let result = run_python(&client, code).await;
    assert_eq!(report(&result)["stdout"], "crash: TransportClosed\nadd: {\"sum\":5}\n", "{result:?}");
    // Later cells find the server running.
    assert_eq!(report(&run_python(&client, ADD).await)["stdout"], SUM);
    client.cancel().await.unwrap();
}

mod all_in_one {
    #[tokio::test]
    async fn a_crashed_server_reaches_the_code_as_a_tool_error_and_is_back_for_later_calls() {
        super::a_crashed_server_reaches_the_code_as_a_tool_error_and_is_back_for_later_calls(
            super::Deployment::AllInOne,
        )
        .await
    }
}

mod over_nats {
    #[tokio::test]
    async fn a_crashed_server_reaches_the_code_as_a_tool_error_and_is_back_for_later_calls() {
        super::a_crashed_server_reaches_the_code_as_a_tool_error_and_is_back_for_later_calls(
            super::Deployment::OverNats,
        )
        .await
    }
}

#[test]
fn a_server_restarted_with_other_tools_refreshes_the_catalog_and_says_what_changed() {
    if !support::sandbox_available() {
        return;
    }
    // The wrapper starts the plain test server once, then with one more tool.
    let marker = support::log_path("restarted-with-other-tools");
    let script = r#"[ -e "$0" ] && exec "$1" --many 1; : > "$0"; exec "$1""#;
    let code = "import asyncio\ntry:\n    await crash()\nexcept ToolError:\n    pass\nfor _ in range(100):\n    \
                try:\n        print(await add({'a': 2, 'b': 3}))\n        break\n    except ToolError:\n        \
                await asyncio.sleep(0.1)";
    let output = std::process::Command::new(support::code_mode())
        .args(["run", "--deadline", "20", "--code", code, "--", "sh", "-c", script])
        .arg(&marker)
        .arg(support::test_server())
        .stdin(Stdio::null())
        .output()
        .expect("code-mode runs");
    let _ = std::fs::remove_file(&marker);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a report");
    assert_eq!(report["stdout"], SUM, "{stderr}");
    assert!(stderr.contains("the restarted server lists other tools: refreshing the catalog"), "{stderr}");
    assert!(stderr.contains("extra_tool_0000"), "{stderr}");
    assert!(stderr.contains("catalog refreshed version=2"), "{stderr}");
}
