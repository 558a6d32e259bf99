//! Issue 36: a client's own session with a wrapped server never decides
//! the tools other clients are offered. A client that sets a log level, or
//! declares sampling, elicitation or roots, gets a session of its own with
//! each server, initialized with its own capabilities; npm
//! `@modelcontextprotocol/server-everything` then registers only the tools
//! that client can use and announces its list changed there. The catalog
//! every client gets stays what the shared session (which declares every
//! capability) lists. Tried with the official Python SDK's two clients
//! over `serve --http` in one process and over a real nats-server with the
//! services apart.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_mode_core::testing::NatsServer;
use code_mode_core::testing::peers::{npm_bin, venv_bin, workspace_root};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::support::{self, log_path, python_sdk, service_command};

/// A socket no Docker engine listens on: the gateway needs none.
const NO_DOCKER: &str = "unix:///nonexistent/code-mode-test/docker.sock";

/// The bridge's log filter: its server actors say when they listed again
/// and found nothing changed.
const LOG_FILTER: &str = "info,code_mode_bridge::server=debug";

/// The tools server-everything registers only for a client that declared
/// sampling, elicitation or roots.
/// (As a gateway offers them: the server's own names, one server wrapped.)
const GATED: [&str; 4] =
    ["get-roots-list", "trigger-elicitation-request", "trigger-sampling-request", "trigger-url-elicitation"];

/// A `--config` naming server-everything `everything`.
fn everything_config(tag: &str) -> Option<std::path::PathBuf> {
    let everything = npm_bin("mcp-server-everything")?;
    let config = log_path(tag).with_extension("json");
    let servers = json!({"mcpServers": {"everything": {"command": everything, "args": ["stdio"]}}});
    std::fs::write(&config, servers.to_string()).expect("the config is written");
    Some(config)
}

/// Keep the lines `stderr` carries (passed on to ours as `tag: line`).
fn keep_lines(stderr: tokio::process::ChildStderr, tag: &'static str) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    let stderr = stderr.into_owned_fd().expect("a file descriptor");
    std::thread::spawn(move || {
        for line in BufReader::new(std::fs::File::from(stderr)).lines().map_while(Result::ok) {
            eprintln!("{tag}: {line}");
            kept.lock().unwrap().push(line);
        }
    });
    lines
}

/// How many times the bridge has listed a server's tools again after an
/// announced change (the catalog refreshed, or found unchanged).
fn relistings(log: &Mutex<Vec<String>>) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|l| {
            l.contains("the server's tool list changed: refreshing the catalog")
                || l.contains("the server's tool list changed: listed again, unchanged")
        })
        .count()
}

/// Wait (at most 20 s) until the bridge has listed again more than
/// `before` times: the change a client's own session announced is dealt
/// with.
async fn relisted_after(log: &Mutex<Vec<String>>, before: usize) {
    let dealt = support::eventually(Duration::from_secs(20), || relistings(log) > before).await;
    assert!(dealt, "the bridge listed the tools again within 20 s of the own session's announcement");
}

/// The tool names of a `list_tools` step.
fn names(step: &Value) -> BTreeSet<String> {
    step["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {step}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The Python SDK client on `url` with `args`, running `steps` while the
/// test reads each step's line as it comes and tells it when to go on
/// past a `pause` step.
pub(crate) struct Paused {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    stdin: tokio::process::ChildStdin,
}

impl Paused {
    pub(crate) fn start(url: &str, args: &[&str], steps: &Value) -> Option<Self> {
        let python = venv_bin("python")?;
        let script = workspace_root().join("testing/peers/mcp_client.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .args(["--url", url])
            .args(args)
            .arg(steps.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the Python SDK client runs");
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let stdin = child.stdin.take().unwrap();
        Some(Self { child, lines, stdin })
    }

    /// The next step's output (a `pause` step's comes once it is over).
    pub(crate) async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("a step within 60 s")
            .expect("the client's output")
            .expect("one more step");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("a JSON line ({e}): {line}"))
    }

    /// Go on past the pause; the outputs of the remaining steps.
    pub(crate) async fn go_on(mut self) -> Vec<Value> {
        self.stdin.write_all(b"go\n").await.expect("the client reads its stdin");
        let mut rest = Vec::new();
        while let Ok(Some(line)) = self.lines.next_line().await {
            rest.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("a JSON line ({e}): {line}")));
        }
        let status = self.child.wait().await.expect("the client exits");
        assert!(status.success(), "the Python SDK client failed: {status}");
        rest
    }
}

/// Alice (`ClientSession`, no capabilities, no log level: the shared
/// session) lists the tools and keeps her session open while bob
/// (`mcp.Client` at its defaults, stateless, listening to logs) and carol
/// (`ClientSession` declaring elicitation only, at log level info) each
/// call a tool over a session of their own; the bridge's log is `log`.
async fn own_sessions_leave_the_catalog_alone(url: &str, log: &Mutex<Vec<String>>) {
    let alice_steps = json!([
        {"op": "list_tools"},
        {"op": "pause"},
        {"op": "notifications", "at_least": 0, "wait": 1},
        {"op": "list_tools"},
        {"op": "call", "tool": "everything__trigger_sampling_request", "arguments": {"prompt": "hi", "maxTokens": 5}},
    ]);
    let Some(mut alice) = Paused::start(url, &["--api", "session"], &alice_steps) else { return };
    let before = names(&alice.next().await);
    assert!(GATED.iter().all(|t| before.contains(*t)), "the shared session declares every capability: {before:?}");
    // Alice now waits in her pause, her session open.

    let echo = json!({"op": "call", "tool": "everything__echo", "arguments": {"message": "hi"}});
    let relisted = relistings(log);
    let bob = json!([echo, {"op": "list_tools"}]);
    let (bob, stderr) = python_sdk(&["--url", url, "--log-level", "debug"], &bob).await.expect("the SDK");
    assert_eq!(bob[0]["result"]["content"][0]["text"], "Echo: hi", "{bob:?} {stderr}");
    relisted_after(log, relisted).await;
    assert_eq!(names(&bob[1]), before, "bob gets the catalog, not his own session's list");

    let relisted = relistings(log);
    let carol = json!([{"op": "set_level", "level": "info"}, echo, {"op": "list_tools"}]);
    let carol_args = ["--url", url, "--api", "session", "--elicit", "{}"];
    let (carol, stderr) = python_sdk(&carol_args, &carol).await.expect("the SDK");
    assert_eq!(carol[1]["result"]["content"][0]["text"], "Echo: hi", "{carol:?} {stderr}");
    relisted_after(log, relisted).await;
    assert_eq!(names(&carol[2]), before, "carol gets the catalog, not her own session's list");

    let rest = alice.go_on().await;
    assert_eq!(rest[0]["op"], "pause", "{rest:?}");
    let told = rest[1]["result"].as_array().unwrap_or_else(|| panic!("{rest:?}"));
    assert!(
        !told.iter().any(|n| n["method"] == "notifications/tools/list_changed"),
        "alice was never told her tools changed: {told:?}"
    );
    assert_eq!(names(&rest[2]), before, "alice's tools are what they were");
    let called = rest[3].to_string();
    assert!(!called.contains("no tool named"), "alice may still call a gated tool: {called}");
    let refreshed: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("the server's tool list changed: refreshing the catalog"))
        .cloned()
        .collect();
    assert!(refreshed.is_empty(), "no client's own session changed the catalog: {refreshed:?}");
}

#[tokio::test]
async fn over_http_one_clients_own_session_never_changes_the_tools_another_client_gets() {
    let Some(config) = everything_config("shared-catalog-http") else { return };
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--config", config.to_str().unwrap()]);
    serve.env("DOCKER_HOST", NO_DOCKER).env("RUST_LOG", LOG_FILTER).kill_on_drop(true);
    let (_serve, url, log) = crate::http::spawn_http(&mut serve).await;
    own_sessions_leave_the_catalog_alone(&url, &log).await;
    let _ = std::fs::remove_file(&config);
}

#[tokio::test]
async fn over_nats_one_clients_own_session_never_changes_the_tools_another_client_gets() {
    let Some(config) = everything_config("shared-catalog-nats") else { return };
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let mut bridge = service_command(&nats.url(), &users, "bridge", &["--config", config.to_str().unwrap()], None);
    bridge.env("RUST_LOG", LOG_FILTER).stderr(std::process::Stdio::piped());
    let mut bridge = bridge.spawn().expect("the bridge starts");
    let log = keep_lines(bridge.stderr.take().unwrap(), "bridge");
    let mut frontend =
        service_command(&nats.url(), &users, "frontend", &["--expose-tools=only", "--http", "127.0.0.1:0"], None);
    let (_frontend, url, _) = crate::http::spawn_http(&mut frontend).await;
    own_sessions_leave_the_catalog_alone(&url, &log).await;
    let _ = std::fs::remove_file(&config);
}
