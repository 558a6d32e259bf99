//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`,
//! pinned in `testing/peers`) run against code-mode in gateway mode, in
//! front of our reference peer (`testing/conformance/peer/server.py`, which
//! passes every scored server scenario of both requirement sets alone; the
//! suite's own fixture server is not published to a registry). The measure:
//! through code-mode, every scenario the peer passes alone, under the
//! 2025-11-25 and the 2026-07-28 requirement sets, with the peer wrapped
//! over stdio and over streamable HTTP, in one process and over NATS. In
//! code mode (`run_python` alone) the measure is the same for every
//! scenario that does not call one of the peer's tools by name: those tools
//! are reached from code there, not by the client. So that the measure
//! cannot shrink unseen, each test first holds the peer alone to every
//! scenario the suite's `conformance list` scores, and the suite runner's
//! exit status to its outcome; through code-mode nothing fails but, in
//! code mode, the scenarios left out.

use std::collections::BTreeSet;
use std::path::PathBuf;

use code_mode_core::testing::NatsServer;
use code_mode_core::testing::peers::{npm_bin, venv_bin, workspace_root};
use serde_json::Value;

use crate::support::{self, service_command};

/// A socket no Docker engine listens on: the gateway needs none.
const NO_DOCKER: &str = "unix:///nonexistent/code-mode-test/docker.sock";

const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

fn peer() -> PathBuf {
    workspace_root().join("testing/conformance/peer/server.py")
}

/// The suite's outcome against `target` (`--url URL`, or `--peer`), both
/// requirement sets; `None` where the test may skip (no suite, no SDK).
async fn suite(target: &[&str]) -> Option<Value> {
    run_suite(target, &REVISIONS, &[]).await
}

/// The conformance suite's ten server scenarios of the tasks extension
/// (`conformance list`: `[extension]`), run at 2026-07-28.
pub(crate) const TASKS_SCENARIOS: [&str; 10] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// The ten `tasks-*` scenarios against `url` (they are scored by no
/// requirement set, so they come back under `not_scored`); each must
/// pass. `None` where the test may skip (no suite, no Python).
pub(crate) async fn tasks_scenarios_pass(label: &str, url: &str) -> Option<()> {
    let outcome = run_suite(&["--url", url], &["2026-07-28"], &TASKS_SCENARIOS).await?;
    let report = &outcome["2026-07-28"]["not_scored"];
    let passed: BTreeSet<&str> =
        report["passed"].as_array().unwrap_or_else(|| panic!("{outcome}")).iter().filter_map(Value::as_str).collect();
    let missing: Vec<&str> = TASKS_SCENARIOS.iter().copied().filter(|s| !passed.contains(s)).collect();
    assert!(missing.is_empty(), "{label}: these tasks scenarios fail: {missing:?}: {}", report["failed"]);
    println!("{label}: {} of the {} tasks-* scenarios pass", passed.len(), TASKS_SCENARIOS.len());
    Some(())
}

/// The suite's outcome against `target` at `revisions`, all the scenarios
/// each scores or just `scenarios`. The runner's exit status is held to
/// what it says: 0 when no scored scenario failed, 1 when one did; 2 (the
/// suite could not be run) fails.
async fn run_suite(target: &[&str], revisions: &[&str], scenarios: &[&str]) -> Option<Value> {
    npm_bin("conformance")?;
    let python = venv_bin("python")?;
    let out = tokio::process::Command::new(python)
        .arg(workspace_root().join("testing/conformance/run.py"))
        .args(target)
        .args(revisions.iter().flat_map(|r| ["--requirements", r]))
        .args(scenarios.iter().flat_map(|s| ["--scenario", s]))
        .kill_on_drop(true)
        .output()
        .await
        .expect("the suite runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let outcome: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("the suite's outcome ({e}): {stdout} {stderr}"));
    let any_failed = revisions.iter().any(|r| outcome[r]["failed"].as_object().is_none_or(|f| !f.is_empty()));
    assert_eq!(
        out.status.code(),
        Some(i32::from(any_failed)),
        "the suite runner against {target:?} exits 0 when every scored scenario passed, 1 when one failed: {stderr}"
    );
    Some(outcome)
}

/// The server scenarios a requirement set scores, as the suite's own
/// `conformance list` names them (not as the runner reads them).
fn scored(revision: &str) -> BTreeSet<String> {
    let conformance = npm_bin("conformance").expect("the suite ran");
    let bin = conformance.parent().expect("the suite's .bin folder");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new(&conformance)
        .args(["list", "--requirements", revision])
        .env("PATH", path)
        .output()
        .expect("conformance list runs");
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "conformance list --requirements {revision}: {listing}");
    let names: BTreeSet<String> = listing
        .lines()
        .skip_while(|l| !l.starts_with("Server scenarios"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.trim().strip_prefix("- ").map(|n| n.trim().to_string()))
        .collect();
    assert!(!names.is_empty(), "conformance list --requirements {revision} names no server scenario: {listing}");
    names
}

/// The peer alone passes every scenario each set scores, so that "what
/// the peer passes alone" is all of them and a regression of the peer or
/// a suite that stops reporting fails here rather than shrinking the
/// measure.
fn the_peer_passes_everything(alone: &Value) {
    for revision in REVISIONS {
        let scored = scored(revision);
        assert_eq!(
            passed(alone, revision),
            scored,
            "{revision}: the peer alone passes every scored scenario; it fails {}",
            alone[revision]["failed"]
        );
        println!("the peer alone, {revision}: {} of {} scored", scored.len(), scored.len());
    }
}

fn passed(outcome: &Value, revision: &str) -> BTreeSet<String> {
    outcome[revision]["passed"]
        .as_array()
        .unwrap_or_else(|| panic!("{outcome}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The scenarios that call one of the peer's tools by name (or need one of
/// them first): in code mode the client's only tool is `run_python`.
/// `server-stateless` (scored under 2026-07-28) is one of them: besides
/// its discovery, version and routing checks it calls the peer's
/// diagnostic tools `test_missing_capability` (the -32021 refusal and its
/// HTTP 400), `test_streaming_elicitation`, `test_logging_tool` and
/// `test_trigger_tool_change` (the listen stream's notifications) by name.
const CALLS_A_PEER_TOOL: &[&str] = &[
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-list-roots",
    "input-required-result-basic-sampling",
    "input-required-result-capability-check",
    "input-required-result-multi-round",
    "input-required-result-multiple-input-requests",
    "input-required-result-request-state",
    "input-required-result-result-type",
    "input-required-result-tampered-state",
    "server-stateless",
];

/// Every scenario `alone` passed is passed `through` too, for each set,
/// and nothing fails through code-mode.
fn holds(label: &str, alone: &Value, through: &Value) {
    holds_but(label, alone, through, &[]);
    for revision in REVISIONS {
        let failed = through[revision]["failed"].as_object().unwrap_or_else(|| panic!("{through}"));
        assert!(failed.is_empty(), "{label}, {revision}: through code-mode these fail: {failed:?}");
    }
}

/// [`holds`], leaving out the scenarios in `not_applicable`.
fn holds_but(label: &str, alone: &Value, through: &Value, not_applicable: &[&str]) {
    for revision in REVISIONS {
        let mut wanted = passed(alone, revision);
        wanted.retain(|s| !not_applicable.contains(&s.as_str()));
        let got = passed(through, revision);
        let missing: Vec<&String> = wanted.difference(&got).collect();
        println!(
            "{label}, {revision}: {} of the {} the peer passes alone",
            wanted.intersection(&got).count(),
            wanted.len()
        );
        assert!(
            missing.is_empty(),
            "{label}, {revision}: through code-mode these fail: {:?}",
            missing.iter().map(|m| (m, &through[revision]["failed"][m.as_str()])).collect::<Vec<_>>()
        );
    }
}

/// Start a frontend (`serve ...` or `frontend ...`) serving HTTP on a free
/// port; its URL.
async fn http_frontend(mut command: tokio::process::Command) -> (tokio::process::Child, String) {
    command.env("DOCKER_HOST", NO_DOCKER).kill_on_drop(true);
    let (child, url, _log) = crate::http::spawn_http(&mut command).await;
    (child, url)
}

/// The peer over streamable HTTP on a free port: its process and URL.
async fn peer_over_http() -> Option<(tokio::process::Child, String)> {
    let python = venv_bin("python")?;
    let port = code_mode_core::testing::free_port();
    let child = tokio::process::Command::new(python)
        .arg(peer())
        .args(["--port", &port.to_string()])
        .kill_on_drop(true)
        .spawn()
        .expect("the peer starts");
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((child, url));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the peer listens on {port} within 10 s");
}

#[tokio::test]
async fn through_serve_the_conformance_suite_passes_every_scenario_the_peer_passes_alone() {
    let Some(alone) = suite(&["--peer"]).await else { return };
    the_peer_passes_everything(&alone);
    let Some(python) = venv_bin("python") else { return };
    // The peer wrapped over stdio.
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--"]).arg(&python).arg(peer()).arg("--stdio");
    let (_stdio, url) = http_frontend(serve).await;
    let through_stdio = suite(&["--url", &url]).await.expect("the suite ran once");
    holds("serve -- peer over stdio", &alone, &through_stdio);
    // The peer wrapped over streamable HTTP (`serve --url`).
    let (_peer, peer_url) = peer_over_http().await.expect("the SDK is installed");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--url", &peer_url]);
    let (_remote, url) = http_frontend(serve).await;
    let through_http = suite(&["--url", &url]).await.expect("the suite ran once");
    holds("serve --url the peer over HTTP", &alone, &through_http);
}

#[tokio::test]
async fn in_code_mode_the_conformance_suite_passes_every_scenario_the_peer_passes_alone_that_calls_none_of_its_tools() {
    let Some(alone) = suite(&["--peer"]).await else { return };
    the_peer_passes_everything(&alone);
    let Some(python) = venv_bin("python") else { return };
    if !support::sandbox_available() {
        return;
    }
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--"]).arg(&python).arg(peer()).arg("--stdio");
    serve.kill_on_drop(true);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let through = suite(&["--url", &url]).await.expect("the suite ran once");
    holds_but("serve (run_python only) -- peer over stdio", &alone, &through, CALLS_A_PEER_TOOL);
    // What is left out fails for that reason alone: the client calls a
    // tool code mode does not offer it.
    for revision in REVISIONS {
        let failed = through[revision]["failed"].as_object().unwrap_or_else(|| panic!("{through}"));
        for (scenario, why) in failed {
            assert!(CALLS_A_PEER_TOOL.contains(&scenario.as_str()), "{revision}: {scenario} failed: {why}");
        }
    }
}

#[tokio::test]
async fn over_nats_the_conformance_suite_passes_every_scenario_the_peer_passes_alone() {
    let Some(alone) = suite(&["--peer"]).await else { return };
    the_peer_passes_everything(&alone);
    let Some(python) = venv_bin("python") else { return };
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let python = python.display().to_string();
    let peer = peer().display().to_string();
    let mut bridge = service_command(&nats.url(), &users, "bridge", &["--", &python, &peer, "--stdio"], None);
    let _bridge = bridge.spawn().expect("the bridge starts");
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.args(["frontend", "--nats", &nats.url(), "--expose-tools=only", "--http", "127.0.0.1:0"]);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let (_frontend, url) = http_frontend(frontend).await;
    let through = suite(&["--url", &url]).await.expect("the suite ran once");
    holds("frontend and bridge over NATS -- peer over stdio", &alone, &through);
}
