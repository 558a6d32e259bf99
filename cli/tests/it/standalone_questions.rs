//! Questions a remote server asks outside any call, through the gateway.
//!
//! A server built on the official TypeScript SDK sends a request it makes
//! with `server.request` (not the call's own `sendRequest`: the
//! conformance suite's elicitation scenarios do this) on the session's
//! standalone stream, the client's `GET`, and drops it while that stream
//! is not open. code-mode's session with such a server therefore waits for
//! its `GET` to be answered before its first call goes out (at most 2 s).
//! `testing/peers/ts_standalone_server.mjs` holds each `GET` as long as
//! asked, so the race the suite's scenario lost about one run in two on a
//! quiet machine is lost every time without the wait. A stateless server
//! (`--stateless`: its answers name no session) has no such stream and is
//! not waited for; the server's `gap` tool says how long after the
//! handshake the call came.

use std::process::Stdio;

use code_mode_core::testing::peers::{npm_bin, workspace_root};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{self, python_sdk};

/// The TypeScript SDK server, each `GET` held `get_delay_ms`; its URL.
async fn asker(get_delay_ms: u64) -> Option<(tokio::process::Child, String)> {
    asker_with(get_delay_ms, &[]).await
}

/// The same, started with `more` arguments too (`--stateless`).
async fn asker_with(get_delay_ms: u64, more: &[&str]) -> Option<(tokio::process::Child, String)> {
    let node = npm_bin("node")?;
    let script = workspace_root().join("testing/peers/ts_standalone_server.mjs");
    let mut child = tokio::process::Command::new(node)
        .arg(script)
        .args(["--get-delay", &get_delay_ms.to_string()])
        .args(more)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs the server");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the server starts within 30 s")
        .unwrap()
        .unwrap_or_default();
    let url = first.strip_prefix("listening on ").unwrap_or_else(|| panic!("the server's first line: {first}"));
    Some((child, url.to_string()))
}

/// What the `ask` tool answered through `code-mode serve --url URL`, the
/// Python SDK's `api` client answering the question with a name.
async fn asked_through_code_mode(url: &str, api: &str) -> Option<String> {
    called_through_code_mode(url, api, "ask").await
}

/// What the server's `tool` answered through `code-mode serve --url URL`,
/// called once by the Python SDK's `api` client (which can answer a
/// question, so the call goes over a session of its own).
async fn called_through_code_mode(url: &str, api: &str, tool: &str) -> Option<String> {
    let code_mode = support::code_mode().display().to_string();
    let args = [
        "--stdio",
        &code_mode,
        "serve",
        "--url",
        url,
        "--expose-tools=only",
        "--",
        "--api",
        api,
        "--elicit",
        r#"{"name": "Ann"}"#,
    ];
    let steps = json!([{"op": "call", "tool": tool, "arguments": {}}]);
    let (results, stderr) = python_sdk(&args, &steps).await?;
    let content = results[0]["result"]["content"].as_array().unwrap_or_else(|| panic!("{results:?} {stderr}"));
    Some(content.iter().filter_map(|c| c["text"].as_str()).collect())
}

#[tokio::test]
async fn a_question_a_remote_server_asks_on_its_standalone_stream_reaches_both_sdk_clients_when_that_stream_opens_late()
{
    let Some((_server, url)) = asker(800).await else { return };
    for api in ["client", "session"] {
        let Some(text) = asked_through_code_mode(&url, api).await else { return };
        let answer: Value = serde_json::from_str(
            text.strip_prefix("answered: ").unwrap_or_else(|| panic!("{api}: the question was lost: {text}")),
        )
        .unwrap();
        assert_eq!(answer, json!({"action": "accept", "content": {"name": "Ann"}}), "{api}");
    }
}

#[tokio::test]
async fn a_remote_servers_standalone_stream_that_never_opens_delays_the_first_call_but_does_not_hold_it() {
    // The GET answers after 60 s: the session goes on without the stream
    // after its 2 s, the call is served, and the server's question (sent on
    // no open stream) is lost as the server's own 5 s time-out says. Held
    // until the start time-out (30 s) or the GET, the whole run would take
    // 35 s or more.
    let Some((_server, url)) = asker(60_000).await else { return };
    let began = std::time::Instant::now();
    let Some(text) = asked_through_code_mode(&url, "session").await else { return };
    let took = began.elapsed();
    assert!(text.starts_with("lost: ") && text.contains("timed out"), "{text}");
    assert!(took < std::time::Duration::from_secs(25), "the first call waited {took:?} for the stream");
}

#[tokio::test]
async fn a_stateless_remote_server_is_not_waited_for_while_a_session_naming_one_whose_get_is_slow_is() {
    // Both servers hold each GET 60 s. The one that names a session gets
    // its first call 2 s after its initialized notification (the wait for
    // its standalone stream runs out); the stateless one names none, so
    // its call follows the notification at once. Each server measures the
    // gap itself (its `gap` tool); the margins are wide, the question is
    // whether a 2 s wait happens at all.
    let Some((_named, named_url)) = asker(60_000).await else { return };
    let Some((_stateless, stateless_url)) = asker_with(60_000, &["--stateless"]).await else { return };
    let (named, stateless) = tokio::join!(
        called_through_code_mode(&named_url, "session", "gap"),
        called_through_code_mode(&stateless_url, "session", "gap"),
    );
    let (Some(named), Some(stateless)) = (named, stateless) else { return };
    let gap = |text: &str| -> u64 {
        text.strip_prefix("gap: ").and_then(|ms| ms.parse().ok()).unwrap_or_else(|| panic!("the gap: {text}"))
    };
    let (named_ms, stateless_ms) = (gap(&named), gap(&stateless));
    eprintln!("initialized to first call: session-naming {named_ms} ms, stateless {stateless_ms} ms");
    assert!(named_ms >= 1_800, "the session-naming server's first call came {named_ms} ms after the handshake");
    assert!(stateless_ms < 1_000, "the stateless server's first call came {stateless_ms} ms after the handshake");
}
