//! The private-data rule end to end (`--private TOOL`): the real binary, the
//! real sandbox and the real test server, all in one process (`serve`,
//! `run`) and split over a real nats-server, where the taint lives in
//! JetStream and outlives a killed bridge. A session is one frontend
//! process: the taint lasts for its later runs, and a new frontend process
//! starts clean.

use std::time::Duration;

use code_mode_core::testing::NatsServer;
use tokio::time::Instant;

use crate::support::{self, Client, Deployment, connect_client, kill9, run_python, spawn_service, start, stdout_of};

/// Call `add`; print its result, or `refused:` and the ToolError.
const TRY_ADD: &str = "try:\n    print(await add({'a': 2, 'b': 3}))\nexcept ToolError as e:\n    print('refused:', e)";

const SUM: &str = "{\"sum\":5}\n";

/// What `add` prints when the session is tainted by `get_env`.
fn add_refused_after(by: &str, private: &str) -> String {
    format!(
        "refused: add: refused by the private-data rule: this session has called the private tool {by}, so from \
         then on it may call only private tools ({private}). The rule lasts for the rest of the client session: \
         call other tools before the first private call, or in a new session\n"
    )
}

/// A second frontend process (a new session) on the same deployment.
async fn another_frontend(
    deployment: Deployment,
    guards: &support::Guards,
    args: &[&str],
) -> (Client, Option<support::Guards>) {
    match deployment {
        // One process is one session: a new `serve` is a new process.
        Deployment::AllInOne => {
            let (client, _, guards) = start(Deployment::AllInOne, args, &[]).await;
            (client, Some(guards))
        }
        // Same nats-server, same bridge, same bucket; a new frontend.
        Deployment::OverNats => {
            let cmd = support::service_command(&guards.nats_url(), guards.users(), "frontend", &[], None);
            (connect_client(cmd).await.0, None)
        }
    }
}

mod all_in_one {
    #[tokio::test]
    async fn after_a_private_call_later_runs_of_the_session_may_call_only_private_tools_and_a_new_session_starts_clean()
    {
        super::after_a_private_call_later_runs_of_the_session_may_call_only_private_tools_and_a_new_session_starts_clean(
            super::Deployment::AllInOne,
        )
        .await
    }
}

mod over_nats {
    #[tokio::test]
    async fn after_a_private_call_later_runs_of_the_session_may_call_only_private_tools_and_a_new_session_starts_clean()
    {
        super::after_a_private_call_later_runs_of_the_session_may_call_only_private_tools_and_a_new_session_starts_clean(
            super::Deployment::OverNats,
        )
        .await
    }
}

async fn after_a_private_call_later_runs_of_the_session_may_call_only_private_tools_and_a_new_session_starts_clean(
    deployment: Deployment,
) {
    if !support::sandbox_available() {
        return;
    }
    let args = ["--private", "get_env", "--deadline", "20"];
    let (client, _, guards) = start(deployment, &args, &[]).await;

    let first = format!("{TRY_ADD}\nprint(await get_env({{'name': 'NO_SUCH_VARIABLE'}}))\n{TRY_ADD}");
    let out = stdout_of(&run_python(&client, &first).await);
    assert_eq!(out, format!("{SUM}<unset>\n{}", add_refused_after("get_env", "get_env")));

    // A later run of the same session: still tainted; the private tool works.
    let later = format!("{TRY_ADD}\nprint(await get_env({{'name': 'NO_SUCH_VARIABLE'}}))");
    let out = stdout_of(&run_python(&client, &later).await);
    assert_eq!(out, format!("{}<unset>\n", add_refused_after("get_env", "get_env")));

    // A new frontend process is a new session.
    let (fresh, _fresh_guards) = another_frontend(deployment, &guards, &args).await;
    assert_eq!(stdout_of(&run_python(&fresh, TRY_ADD).await), SUM);
    // And the first session is still tainted.
    assert_eq!(stdout_of(&run_python(&client, TRY_ADD).await), add_refused_after("get_env", "get_env"));
    fresh.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

#[test]
fn a_private_call_refused_before_it_goes_out_does_not_taint() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("private-refused");
    let code = format!(
        "try:\n    await get_env({{'nam': 'HOME'}})\nexcept ToolError as e:\n    print('schema:', e)\n{TRY_ADD}"
    );
    let ran = support::run(&["--private", "get_env"], &code, &["--log", log.to_str().unwrap()]);
    let out = ran.ok();
    assert!(out.starts_with("schema: get_env: "), "{out}");
    assert!(out.ends_with(&format!("\n{SUM}")) && out.lines().count() == 2, "{out}");
    let calls = support::logged_calls(&log);
    assert_eq!(calls, ["tools/call add"], "only add reached the server");
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_private_call_that_fails_at_its_server_still_taints() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("private-failed");
    let code = format!(
        "try:\n    await fail({{'message': 'no mail today'}})\nexcept ToolError as e:\n    print('failed:', e)\n{TRY_ADD}"
    );
    let ran = support::run(&["--private", "fail", "--private", "get_env"], &code, &["--log", log.to_str().unwrap()]);
    assert_eq!(ran.ok(), format!("failed: fail failed: no mail today\n{}", add_refused_after("fail", "fail, get_env")));
    assert_eq!(support::logged_calls(&log), ["tools/call fail"], "the refused add never reached the server");
    let _ = std::fs::remove_file(&log);
}

#[test]
fn private_labels_must_name_kept_tools_or_startup_stops_naming_them() {
    if !support::sandbox_available() {
        return;
    }
    for (args, expected) in [
        (vec!["--private", "get_envv"], "--private get_envv: the server lists no such tool"),
        (vec!["--allow", "add", "--private", "get_env"], "--private get_env: it is not on the allowlist"),
    ] {
        let output = support::command(&args, "print(1)", &[]).output().expect("code-mode runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} started");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "no report: {}", String::from_utf8_lossy(&output.stdout));
    }
}

#[tokio::test]
async fn a_bridge_with_a_private_label_on_an_unknown_tool_stops_at_startup_naming_it() {
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let mut bridge = support::service_command(&nats.url(), &users, "bridge", &["--private", "nope"], Some(&[]));
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        bridge.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).output(),
    )
    .await
    .expect("the bridge stops at once")
    .expect("code-mode runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("--private nope: the server lists no such tool"), "{stderr}");
}

#[tokio::test]
async fn private_tools_say_private_in_the_description_and_in_the_sandbox() {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(Deployment::AllInOne, &["--private", "get_env"], &[]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    let get_env = stub_of(description, "get_env");
    assert!(get_env.contains("    [private]\n") && get_env.contains("only [private] tools"), "{get_env}");
    let add = stub_of(description, "add");
    assert!(!add.contains("[private]"), "add is not private: {add}");
    let out =
        stdout_of(&run_python(&client, "print('[private]' in TOOLS['get_env'], '[private]' in TOOLS['add'])").await);
    assert_eq!(out, "True False\n");
    client.cancel().await.unwrap();

    // One line per tool when the stubs do not fit: the summary says it too.
    let (client, _, _guards) = start(Deployment::AllInOne, &["--private", "get_env"], &["--many", "60"]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.contains("\nget_env(name: str) [private]  Return the value"), "{description}");
    assert!(description.contains("\nadd(a: int, b: int) -> {sum: int}  Add two integers."), "{description}");
    client.cancel().await.unwrap();

    // Names only when the signatures do not fit either: a short mark.
    let args = ["--private", "get_env", "--description-budget", "8000"];
    let (client, _, _guards) = start(Deployment::AllInOne, &args, &["--many", "300"]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.contains(", get_env[private], count, "), "{description}");
    assert!(description.contains("\nadd, echo, "), "{description}");
    client.cancel().await.unwrap();
}

/// The stub of `name` in a `run_python` description: from its `async def`
/// to the next one.
fn stub_of<'a>(description: &'a str, name: &str) -> &'a str {
    let start = description.find(&format!("async def {name}(")).unwrap_or_else(|| panic!("no stub of {name}"));
    let rest = &description[start..];
    let end = rest[1..].find("async def ").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

#[tokio::test]
async fn over_nats_the_taint_survives_killing_and_restarting_the_bridge() {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, mut guards) = start(Deployment::OverNats, &["--private", "get_env", "--deadline", "10"], &[]).await;
    let taint = "print(await get_env({'name': 'NO_SUCH_VARIABLE'}))";
    assert_eq!(stdout_of(&run_python(&client, taint).await), "<unset>\n");

    let mut bridge = guards.bridge.take().expect("a bridge");
    kill9(bridge.id().expect("the bridge runs"));
    bridge.wait().await.expect("the killed bridge is reaped");
    guards.bridge =
        Some(spawn_service(&guards.nats_url(), guards.users(), "bridge", &["--private", "get_env"], Some(&[])));

    // Once the new bridge answers the private tool, it refuses the rest:
    // the taint written by the killed bridge is in JetStream.
    let give_up = Instant::now() + Duration::from_secs(30);
    let probe = "try:\n    print(await get_env({'name': 'NO_SUCH_VARIABLE'}))\nexcept ToolError as e:\n    print(e)";
    loop {
        let out = stdout_of(&run_python(&client, probe).await);
        if out == "<unset>\n" {
            break;
        }
        assert!(Instant::now() < give_up, "the new bridge did not serve within 30 s: {out}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(stdout_of(&run_python(&client, TRY_ADD).await), add_refused_after("get_env", "get_env"));
    client.cancel().await.unwrap();
}
