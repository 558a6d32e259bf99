//! A client's changed roots reach the servers it talks to: a client that
//! declares roots with `listChanged` (the Python SDK's `ClientSession`
//! does) and calls a tool gets a session of its own with that server; when
//! it then sends `notifications/roots/list_changed`, the gateway passes it
//! on to that session (the frontend tells every bridge on
//! `codemode.v1.roots.changed`, the bridge holding the session tells the
//! server), and the server, asking `roots/list` again, gets the new roots
//! from the client. Through `code-mode serve` over stdio and over
//! streamable HTTP, and over NATS (frontend and bridge apart, the
//! deployment's users and permissions). `mcp.Client` at its defaults (the
//! stateless 2026-07-28 revision, where roots are deprecated) calls over no
//! session of its own: its change fails nothing and reaches no server.
//! The test server records the notification and the roots it then got.
//! With the bridge holding the session killed, a change reaches nobody and
//! fails nothing, and the next session (at a new bridge) gets the next one.

use std::path::PathBuf;

use code_mode_core::testing::NatsServer;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::support::{self, log_path, python_sdk, service_command};

const FIRST: &str = "file:///srv/project";

/// The client of `api` (`session`: `ClientSession`; `client`:
/// `mcp.Client` at its defaults), one root declared (so roots with
/// `listChanged`).
fn client_options(api: &str) -> Vec<String> {
    ["--api", api, "--roots", FIRST].iter().map(|s| s.to_string()).collect()
}

/// A direct call (a session client's own session with the server opens),
/// the roots changed to two others, a pause for the server to ask again
/// (up to 10 s for `ClientSession`, 1 s for a client nobody will ask),
/// then what the client was asked.
fn steps(api: &str) -> Value {
    let asked = match api {
        "session" => json!({"op": "asked", "at_least": 1, "wait": 10}),
        _ => json!({"op": "asked", "at_least": 0, "wait": 1}),
    };
    json!([
        {"op": "call", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"op": "set_roots", "roots": ["file:///srv/a", "file:///srv/b"]},
        asked,
    ])
}

/// The test server's arguments: every request and notification it hears
/// recorded in `log`.
fn server_args(log: &std::path::Path) -> Vec<String> {
    vec!["--log".into(), log.display().to_string()]
}

/// `ClientSession`: the server heard the change once and got the new roots
/// when it asked; the client was asked `roots/list` once, after its change.
/// `mcp.Client`: its change fails nothing, it is asked nothing and the
/// server is told nothing.
async fn check(api: &str, results: &[Value], stderr: &str, log: &PathBuf) {
    assert_eq!(results.len(), 3, "{api}: {results:?} {stderr}");
    assert_eq!(results[0]["result"]["structuredContent"]["sum"], 3, "{api}: the call: {} {stderr}", results[0]);
    assert!(results[1].get("error").is_none(), "{api}: the change is sent: {}", results[1]);
    let asked: Vec<&str> =
        results[2]["result"].as_array().into_iter().flatten().filter_map(|a| a["method"].as_str()).collect();
    let heard = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines
    };
    let told = |lines: &[String]| lines.iter().filter(|l| l.starts_with("notifications/roots/list_changed")).count();
    if api != "session" {
        assert_eq!(asked, Vec::<&str>::new(), "a stateless client is asked nothing: {stderr}");
        assert_eq!(told(&heard()), 0, "no server is told of a stateless client's change: {:?}", heard());
        return;
    }
    assert_eq!(asked, ["roots/list"], "the client is asked for its roots once, after it changed them: {stderr}");
    let got = "asked roots/list 2 root(s) file:///srv/a file:///srv/b";
    let reached = support::eventually(std::time::Duration::from_secs(10), || heard().iter().any(|l| l == got)).await;
    let lines = heard();
    assert!(reached, "the server asked again and got the new roots: {lines:?}");
    assert_eq!(told(&lines), 1, "the server is told once: {lines:?}");
}

/// Each client, `mcp.Client` first, run with `line()` (how it reaches
/// code-mode) and its options, its steps checked against the server's
/// `log`.
async fn run_and_check(line: impl Fn() -> Vec<String>, log: &PathBuf) {
    for api in ["client", "session"] {
        let mut line = line();
        line.extend(client_options(api));
        let args: Vec<&str> = line.iter().map(String::as_str).collect();
        let Some((results, stderr)) = python_sdk(&args, &steps(api)).await else { return };
        check(api, &results, &stderr, log).await;
    }
    let _ = std::fs::remove_file(log);
}

#[tokio::test]
async fn through_serve_a_clients_changed_roots_reach_the_server_of_its_own_session_which_gets_the_new_ones() {
    let log = log_path("roots-changed-serve");
    run_and_check(|| support::gateway_stdio(&[], &server_args(&log)), &log).await;
}

#[tokio::test]
async fn over_nats_a_clients_changed_roots_reach_the_server_of_its_own_session_at_the_bridge_which_gets_the_new_ones() {
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let log = log_path("roots-changed-nats");
    let server = server_args(&log);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let mut bridge = service_command(&nats.url(), &users, "bridge", &[], Some(&server));
    let mut bridge = bridge.kill_on_drop(true).spawn().expect("the bridge starts");
    run_and_check(|| support::frontend_stdio(&nats.url(), &users, &["--expose-tools=only"]), &log).await;
    let _ = bridge.kill().await;
}

#[tokio::test]
async fn over_http_a_session_clients_changed_roots_reach_the_server_of_its_own_session_which_gets_the_new_ones() {
    let log = log_path("roots-changed-http");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--expose-tools=only", "--"]).arg(support::test_server());
    serve.args(server_args(&log)).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, _) = crate::http::spawn_http(&mut serve).await;
    run_and_check(|| vec!["--url".into(), url.clone()], &log).await;
}

/// The bridge holding a client's own session is killed (`kill -9`): the
/// session goes with it. A change of roots then reaches no server (the new
/// bridge holds no session of that client) and fails nothing; the client's
/// next call opens a new own session at the new bridge, and the next
/// change reaches that server, which gets the roots as they are then.
#[tokio::test]
async fn over_nats_after_the_bridge_holding_its_session_is_killed_a_clients_next_change_of_roots_reaches_the_server_of_its_new_session()
 {
    let Some(split) = support::SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let log = log_path("roots-changed-killed");
    let server = server_args(&log);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let first = support::spawn_service(&split.nats.url(), &split.users, "bridge", &[], Some(&server));
    let (_frontend, url) = split.frontend_with(&tokens, &["--expose-tools=only"]).await;
    let add = json!({"op": "call", "tool": "add", "arguments": {"a": 1, "b": 2}});
    let steps = json!([
        add,
        {"op": "pause"},
        {"op": "set_roots", "roots": ["file:///srv/c"]},
        add,
        {"op": "set_roots", "roots": ["file:///srv/d"]},
        {"op": "asked", "at_least": 1, "wait": 10},
    ]);
    let bearer = format!("Authorization: Bearer {}", alice.token);
    let args = ["--header", bearer.as_str(), "--api", "session", "--roots", FIRST];
    let Some(mut client) = crate::shared_catalog::Paused::start(&url, &args, &steps) else { return };
    let called = client.next().await;
    assert_eq!(called["result"]["structuredContent"]["sum"], 3, "{called}");
    support::kill9(first.id().expect("the bridge runs"));
    // A new bridge, serving before the client goes on.
    let mut second = support::service_command(&split.nats.url(), &split.users, "bridge", &[], Some(&server));
    let mut second = second.stderr(std::process::Stdio::piped()).spawn().expect("the new bridge starts");
    let (ready, mut serving) = tokio::sync::watch::channel(false);
    let mut lines = tokio::io::BufReader::new(second.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("bridge serving over NATS") {
                let _ = ready.send(true);
            }
        }
    });
    tokio::time::timeout(std::time::Duration::from_secs(30), serving.wait_for(|ready| *ready))
        .await
        .expect("the new bridge is ready within 30 s")
        .expect("its log is read");
    let rest = client.go_on().await;
    assert_eq!(rest.len(), 5, "{rest:?}");
    assert!(rest[1].get("error").is_none(), "a change nobody holds a session for fails nothing: {}", rest[1]);
    assert_eq!(rest[2]["result"]["structuredContent"]["sum"], 3, "the next call, at the new bridge: {}", rest[2]);
    let asked: Vec<&str> =
        rest[4]["result"].as_array().into_iter().flatten().filter_map(|a| a["method"].as_str()).collect();
    assert_eq!(asked, ["roots/list"], "asked once, by the server of the new session: {rest:?}");
    let heard = || std::fs::read_to_string(&log).unwrap_or_default();
    let got = "asked roots/list 1 root(s) file:///srv/d";
    let reached = support::eventually(std::time::Duration::from_secs(10), || heard().lines().any(|l| l == got)).await;
    assert!(reached, "the new session's server got the roots as they are now: {}", heard());
    let told = heard().lines().filter(|l| l.starts_with("notifications/roots/list_changed")).count();
    assert_eq!(told, 1, "only the change after the new session opened reached a server: {}", heard());
    let _ = std::fs::remove_file(&log);
}
