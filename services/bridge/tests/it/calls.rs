//! Calls that reach the server: results, timeouts, size limits, failures,
//! host faults and concurrency.

use std::time::Duration;

use code_mode_bridge::CallLimits;
use code_mode_proto::{ErrorKind, ToolReply};
use serde_json::json;

use crate::support::{Harness, Setup, ok, refused, tool_call};

#[tokio::test]
async fn structured_content_comes_back_as_compact_json_text() {
    let h = Harness::with_args(&[]).await;
    assert_eq!(h.call("add", json!({"a": 2, "b": 3})).await, ToolReply::Ok { value: r#"{"sum":5}"#.into() });
    assert_eq!(ok(h.call("add", json!({"a": -7, "b": 0})).await), r#"{"sum":-7}"#);
    h.close().await;
}

#[tokio::test]
async fn text_content_comes_back_as_the_text() {
    let h = Harness::with_args(&[]).await;
    assert_eq!(ok(h.call("echo", json!({"text": "hi"})).await), "hi");
    assert_eq!(ok(h.call("echo", json!({"text": "ab\n", "repeat": 3})).await), "ab\nab\nab\n");
    assert_eq!(ok(h.call("echo", json!({"text": "naïve ✓"})).await), "naïve ✓");
    h.close().await;
}

#[tokio::test]
async fn a_failing_tool_is_refused_with_its_message_cut_to_500_characters() {
    let h = Harness::with_args(&[]).await;
    assert_eq!(refused(h.call("fail", json!({"message": "disk full"})).await), "fail failed: disk full");
    let long = "é".repeat(2_000);
    let message = refused(h.call("fail", json!({"message": long})).await);
    assert_eq!(message.chars().count(), 500);
    assert!(message.starts_with("fail failed: éé"), "{message}");
    assert!(message.ends_with("é..."), "{message}");
    h.close().await;
}

#[tokio::test]
async fn a_slow_tool_times_out_with_a_refusal_naming_the_timeout_and_the_session_survives() {
    let limits = CallLimits { call_timeout: Duration::from_millis(500), ..Setup::default().limits };
    let h = Setup { limits, ..Setup::default() }.start().await.expect("starts");
    let started = std::time::Instant::now();
    let message = refused(h.call("sleep", json!({"seconds": 3})).await);
    assert!(started.elapsed() < Duration::from_millis(2_500), "the bridge waited {:?}", started.elapsed());
    assert_eq!(message, "sleep: no answer within 0.5 s");
    assert_eq!(ok(h.call("add", json!({"a": 2, "b": 3})).await), r#"{"sum":5}"#);
    assert_eq!(h.calls_seen(), ["sleep", "add"]);
    h.close().await;
}

#[tokio::test]
async fn a_result_over_the_limit_is_refused_not_cut() {
    let h = Harness::with_args(&[]).await;
    let message = refused(h.call("huge", json!({"bytes": 70_000})).await);
    assert_eq!(message, "huge: the result is 70000 bytes, over the 65536 byte limit (refused, not cut): ask for less");
    h.close().await;
}

#[tokio::test]
async fn a_result_under_the_limit_passes_whole() {
    let h = Harness::with_args(&[]).await;
    let value = ok(h.call("huge", json!({"bytes": 60_000})).await);
    assert_eq!(value.len(), 60_000);
    assert!(value.bytes().all(|b| b == b'x'));
    let value = ok(h.call("huge", json!({"bytes": 65_536})).await);
    assert_eq!(value.len(), 65_536, "exactly the limit passes");
    h.close().await;
}

#[tokio::test]
async fn a_protocol_error_reaches_the_caller_only_as_a_type_name() {
    let h = Harness::with_args(&[]).await;
    let reply = h.call("protocol_error", json!({})).await;
    assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::McpError });
    let wire = serde_json::to_string(&reply).expect("JSON");
    assert_eq!(wire, r#"{"status":"fault","kind":"McpError"}"#, "no message, path or pid on the wire");
    assert_eq!(h.calls_seen(), ["protocol_error"]);
    // The session is fine after a protocol error.
    assert_eq!(ok(h.call("add", json!({"a": 1, "b": 2})).await), r#"{"sum":3}"#);
    h.close().await;
}

#[tokio::test]
async fn a_crashed_server_gives_a_transport_fault_without_details() {
    let h = Harness::with_args(&[]).await;
    let reply = h.call("crash", json!({})).await;
    assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::TransportClosed });
    let wire = serde_json::to_string(&reply).expect("JSON");
    assert_eq!(wire, r#"{"status":"fault","kind":"TransportClosed"}"#, "no exit code, path or pid on the wire");
    // Refusals still come from the bridge itself (restarts: see `restart`).
    assert!(refused(h.call("nope", json!({})).await).starts_with("there is no tool named"));
    assert_eq!(h.calls_seen(), ["crash"]);
    h.close().await;
}

#[tokio::test]
async fn concurrent_calls_through_one_bridge_all_succeed_and_reach_the_server() {
    // Five 1 s sleeps with a 4 s call timeout: made one after another, the
    // later ones would time out; multiplexed on one session, all answer.
    let limits = CallLimits { call_timeout: Duration::from_secs(4), ..Setup::default().limits };
    let h = Setup { limits, ..Setup::default() }.start().await.expect("starts");
    let calls: Vec<_> = (1..=5).map(|i| tool_call("sleep", json!({"seconds": 1}), i)).collect();
    let replies = futures::future::join_all(calls.iter().map(|c| h.bridge.call(c))).await;
    for reply in replies {
        assert_eq!(ok(reply), "slept");
    }
    assert_eq!(ok(h.call("count", json!({})).await), "6", "the server saw five sleeps, then this count");
    assert_eq!(h.calls_seen(), ["sleep", "sleep", "sleep", "sleep", "sleep", "count"]);
    h.close().await;
}
