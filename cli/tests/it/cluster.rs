//! The split services on a cluster of three nats-servers (as the compose
//! profile `cluster` runs them): every service is given the three URLs,
//! the session-state bucket and the audit stream have three replicas, and
//! one server is killed (SIGKILL) in the middle of a load. The services
//! reconnect, the cells in flight end with a report or a clear error within
//! their deadline, and the taint and the rate-limit count set before the
//! kill still hold after it.

use std::time::{Duration, Instant};

use code_mode_core::testing::{NatsCluster, TempDir};

use crate::support::{self, Client, connect_client, outcome, run_python, spawn_service};

/// `count` and `echo` are private (a call taints the session; only they may
/// be called after it), `count` at most 2 calls a day per session (a day, so that no window boundary falls inside the test).
const SERVERS: &str = r#"{"mcpServers": {
  "test": {"command": "TEST_SERVER", "allow": ["add", "echo", "count"], "private": ["echo", "count"],
           "policy": {"version": "1", "default": "allow",
                      "tools": {"count": {"limits": [{"counter": "counts", "window": "day", "max": 2}]}}}}
}}"#;

/// Deadline of the cells (short, so that a cell whose report was lost fails
/// within the test's time).
const DEADLINE: &str = "20";

async fn frontend(urls: &str, users: &code_mode_core::testing::NatsUsers, extra: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("frontend").args(["--nats", urls, "--deadline", DEADLINE]).args(extra);
    cmd.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    connect_client(cmd).await.0
}

/// Stream info as the bridge's user sees it.
async fn replicas_of(urls: &str, users: &code_mode_core::testing::NatsUsers, stream: &str) -> usize {
    let client = async_nats::ConnectOptions::with_user_and_password("bridge".into(), users.password("bridge").into())
        .custom_inbox_prefix("_INBOX.bridge")
        .connect(code_mode_core::nats::server_list(urls).unwrap())
        .await
        .expect("the bridge's user connects to the cluster");
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream(stream).await.unwrap_or_else(|e| panic!("stream {stream}: {e}"));
    stream.info().await.expect("stream info").config.num_replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_of_three_nats_servers_killed_mid_load_the_services_reconnect_and_taints_and_limits_hold() {
    if !support::sandbox_available() {
        return;
    }
    let Some((mut cluster, users)) = NatsCluster::start_secured(3) else { return };
    let urls = cluster.urls();
    let dir = TempDir::new("cluster");
    let servers = dir.0.join("servers.json");
    std::fs::write(&servers, SERVERS.replace("TEST_SERVER", &support::test_server().to_string_lossy())).unwrap();
    let replicated = ["--jetstream-replicas", "3", "--audit", "nats"];
    // A tool call whose request or reply died with the node (NATS
    // request/reply is at most once) fails after the call timeout plus 5 s
    // as BridgeTimeout: kept short here.
    let mut bridge_args = vec!["--config", servers.to_str().unwrap(), "--call-timeout", "3"];
    bridge_args.extend(replicated);
    let _bridge = spawn_service(&urls, &users, "bridge", &bridge_args, None);
    let mut runner_args = vec!["--capacity", "2"];
    runner_args.extend(replicated);
    let _runners: Vec<_> = (0..2).map(|_| spawn_service(&urls, &users, "sandbox-runner", &runner_args, None)).collect();

    // Before the kill: session A calls count once (taints it: count is
    // private) and is then refused add; the counter stands at 1 of 2.
    let session = frontend(&urls, &users, &[]).await;
    let before = outcome(&run_python(&session, "print(await test__count({}))").await).expect("a report");
    assert_eq!(before.1, None, "{before:?}");
    let (stdout, _) = outcome(&run_python(&session, support::ADD_ONCE).await).expect("a report");
    assert!(stdout.contains("has called the private tool test__count"), "tainted before the kill: {stdout}");
    assert_eq!(replicas_of(&urls, &users, "KV_codemode_sessions").await, 3, "the session-state bucket");
    assert_eq!(replicas_of(&urls, &users, "CODEMODE_AUDIT").await, 3, "the audit stream");

    // The load: a second session runs 8 cells, 4 at once, each a tool call
    // and two seconds of work; the node the bridge is connected to is killed
    // a second in.
    let load = frontend(&urls, &users, &["--max-concurrent", "4"]).await;
    let victim = cluster.node_of("code-mode-bridge").expect("the bridge is connected to a node");
    let started = Instant::now();
    let cells = futures::future::join_all((0..8).map(|i| {
        let load = &load;
        async move {
            let code =
                format!("import time\nprint(await test__add({{'a': {i}, 'b': 1}}))\ntime.sleep(2)\nprint('done')");
            (i, run_python(load, &code).await, started.elapsed())
        }
    }));
    let kill = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.kill(victim);
        eprintln!("cluster: killed nats-{} (the bridge's node) {:?} into the load", victim + 1, started.elapsed());
    };
    let (results, ()) = tokio::join!(cells, kill);

    // Each cell completed or failed clearly, none past its deadline and margin.
    let bound = Duration::from_secs(DEADLINE.parse::<u64>().unwrap() + 5 + 10);
    let (mut completed, mut failed) = (0, Vec::new());
    for (i, result, took) in &results {
        assert!(*took < bound, "cell {i} took {took:?}");
        match outcome(result) {
            Ok((stdout, None)) => {
                assert_eq!(stdout, format!("{{\"sum\":{}}}\ndone\n", i + 1), "cell {i}");
                completed += 1;
            }
            Ok((_, Some(error))) => failed.push(format!("cell {i} ({took:?}): {error}")),
            Err(message) => failed.push(format!("cell {i} ({took:?}): {message}")),
        }
    }
    eprintln!("cluster: {completed} of 8 cells completed; failed: {failed:#?}");
    for failure in &failed {
        assert!(support::a_clear_bus_failure(failure), "an unclear failure: {failure}");
    }

    // The services reconnected: new cells run (within a few seconds).
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let result = run_python(&load, "print(await test__add({'a': 40, 'b': 2}))").await;
        if outcome(&result).is_ok_and(|(stdout, error)| error.is_none() && stdout == "{\"sum\":42}\n") {
            break;
        }
        assert!(Instant::now() < give_up, "no cell ran after the kill: {:?}", outcome(&result));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("cluster: cells run again {:?} after the load started", started.elapsed());

    // The taint set before the kill still refuses; the count from before
    // still counts. (Until the state's stream has a leader again such calls
    // are refused fail closed.)
    support::the_taint_and_the_count_held(&session, "test__count", &session, "cluster").await;

    // The audit stream still holds one unbroken chain.
    let verified = std::process::Command::new(support::code_mode())
        .args(["audit", "verify", "--nats", &urls])
        .env("CODE_MODE_NATS_USER", "bridge")
        .env("CODE_MODE_NATS_PASSWORD", users.password("bridge"))
        .output()
        .expect("audit verify runs");
    let said = format!("{}{}", String::from_utf8_lossy(&verified.stdout), String::from_utf8_lossy(&verified.stderr));
    assert!(verified.status.success(), "the audit chain across the kill: {said}");
    session.cancel().await.ok();
    load.cancel().await.ok();
}
