//! Ending a client session: the bridge forgets the session's private-data
//! taint and its `grant` rate-limit counters, keeps the `global` ones and
//! other sessions' state, and refuses to end the `global` pseudo-session.
//! Against the real test server, with the state in a real JetStream bucket.

use std::time::Duration;

use code_mode_bridge::SessionEndError;
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_core::testing::NatsServer;
use code_mode_proto::{ToolCall, ToolReply};
use serde_json::{Value, json};

use crate::support::Setup;

/// `add` twice an hour per session, `count` once an hour for everyone;
/// `echo` may see private data.
const POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {
    "add": {"limits": [{"counter": "adds", "window": "hour", "max": 2}]},
    "count": {"limits": [{"counter": "everyone", "window": "hour", "max": 1, "scope": "global"}]}}}"#;

fn call(session: &str, index: u32, tool: &str, arguments: Value) -> ToolCall {
    ToolCall {
        session: session.into(),
        asker: None,
        identity: None,
        cell_id: format!("{session}-cell"),
        call_index: index,
        target: code_mode_proto::Target::Tool(tool.into()),
        arguments,
        link: None,
        file_in: false,
    }
}

fn passed(reply: &ToolReply) -> bool {
    matches!(reply, ToolReply::Ok { .. })
}

#[tokio::test]
async fn ending_a_session_forgets_its_taint_and_grant_counters_but_not_global_counters_or_other_sessions() {
    let Some(nats) = NatsServer::start(&[]) else { return };
    let transport = NatsTransport::connect(&NatsOptions { url: nats.url(), ..Default::default() })
        .await
        .expect("connects to the test nats-server");
    let store =
        SessionStore::over_nats(&transport, JetStreamConfig { timeout: Duration::from_secs(5), ..Default::default() })
            .await
            .expect("the bucket opens");
    let h = Setup::default().private(&["echo"]).policy(POLICY).state(store.clone()).start().await.expect("it starts");
    let taints = |event: &str| code_mode_telemetry::metrics().session_taints.with_label_values(&[event]).get();
    let (set_before, forgotten_before) = (taints("set"), taints("forgotten"));
    let add = json!({"a": 1, "b": 2});
    for session in ["s-1", "s-2"] {
        assert!(passed(&h.bridge.call(&call(session, 1, "add", add.clone())).await));
        assert!(passed(&h.bridge.call(&call(session, 2, "add", add.clone())).await));
        assert!(!passed(&h.bridge.call(&call(session, 3, "add", add.clone())).await), "the grant limit is used up");
        assert!(passed(&h.bridge.call(&call(session, 4, "echo", json!({"text": "x"}))).await), "private call");
    }
    // (A tainted session may call only echo: the global count goes from a fresh one.)
    assert!(passed(&h.bridge.call(&call("s-9", 1, "count", json!({}))).await));
    assert!(store.get("s-1", "taint").await.unwrap().is_some());

    assert_eq!(taints("set"), set_before + 2, "two sessions were tainted (each once)");
    assert_eq!(h.bridge.end_session("s-1").await.expect("it ends"), 2, "the taint and the adds counter");
    assert_eq!(taints("forgotten"), forgotten_before + 1, "one tainted session was forgotten");
    assert!(store.get("s-1", "taint").await.unwrap().is_none());
    assert!(store.get("s-1", "rate.adds").await.unwrap().is_none());
    // The other session keeps its taint and its count ...
    assert!(store.get("s-2", "taint").await.unwrap().is_some());
    assert!(!passed(&h.bridge.call(&call("s-2", 5, "add", add.clone())).await));
    // ... and the global counter is still used up, for everyone.
    assert!(!passed(&h.bridge.call(&call("s-3", 1, "count", json!({}))).await));
    // Nothing left to forget the second time.
    assert_eq!(h.bridge.end_session("s-1").await.unwrap(), 0);

    for not_a_session in ["_global", "a.b", "", "x y"] {
        let err = h.bridge.end_session(not_a_session).await.expect_err("refused");
        assert!(matches!(err, SessionEndError::NotASession { .. }), "{not_a_session:?}: {err:?}");
    }
    assert!(!passed(&h.bridge.call(&call("s-4", 1, "count", json!({}))).await), "the global count survived");
    h.close().await;
}
