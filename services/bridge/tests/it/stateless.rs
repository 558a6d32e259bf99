//! Stateless scopes: the calls of an identity's stateless (MCP 2026-07-28)
//! requests arrive under its scope, each from a session object of its own
//! (another `asker`, often another frontend), and must share one taint,
//! one `grant` count and one direct-call budget, held by two bridge
//! replicas over one real JetStream bucket; a frontend cannot end a scope;
//! only time without calls does.

use std::time::Duration;

use code_mode_bridge::{CallLimits, SessionEndError};
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_core::testing::NatsServer;
use code_mode_proto::{DirectCall, DirectReply, ToolCall, ToolReply, subjects};
use serde_json::{Value, json};

use crate::support::{Harness, Setup};

/// `add` three times a day per session.
const GRANT_3: &str = r#"{"version": "1", "default": "allow", "tools": {
    "add": {"limits": [{"counter": "adds", "window": "day", "max": 3}]}}}"#;

/// One stateless request's call: its own session object (`asker`), the
/// identity's scope, always the first call of its cell.
fn call(identity: &str, tool: &str, arguments: Value) -> ToolCall {
    let asker = uuid::Uuid::new_v4().to_string();
    ToolCall {
        session: subjects::stateless_scope(Some(identity)),
        asker: Some(asker.clone()),
        identity: Some(identity.into()),
        cell_id: format!("{asker}-cell"),
        call_index: 1,
        target: code_mode_proto::Target::Tool(tool.into()),
        arguments,
        link: None,
        file_in: false,
    }
}

fn passed(reply: &ToolReply) -> bool {
    matches!(reply, ToolReply::Ok { .. })
}

async fn jetstream(nats: &NatsServer) -> SessionStore {
    let transport = NatsTransport::connect(&NatsOptions { url: nats.url(), ..Default::default() })
        .await
        .expect("connects to the test nats-server");
    SessionStore::over_nats(&transport, JetStreamConfig { timeout: Duration::from_secs(5), ..Default::default() })
        .await
        .expect("the bucket opens")
}

/// Two bridge replicas over one bucket.
async fn replicas(store: &SessionStore, policy: &str) -> (Harness, Harness) {
    let one = Setup::default().private(&["echo"]).policy(policy).state(store.clone()).start().await.expect("starts");
    let two = Setup::default().private(&["echo"]).policy(policy).state(store.clone()).start().await.expect("starts");
    (one, two)
}

#[tokio::test]
async fn an_identitys_stateless_calls_share_one_taint_whichever_replica_and_session_object_they_reach() {
    let Some(nats) = NatsServer::start(&[]) else { return };
    let store = jetstream(&nats).await;
    let (one, two) = replicas(&store, r#"{"version": "1", "default": "allow"}"#).await;
    let add = json!({"a": 1, "b": 2});
    assert!(passed(&one.bridge.call(&call("alice", "add", add.clone())).await));
    assert!(passed(&one.bridge.call(&call("alice", "echo", json!({"text": "secret"}))).await), "the private call");
    // A later request of alice, another session object, the other replica.
    let ToolReply::Refused { message } = two.bridge.call(&call("alice", "add", add.clone())).await else {
        panic!("alice is tainted")
    };
    assert!(message.contains("private-data rule") && message.contains("across all of its runs"), "{message}");
    assert!(passed(&two.bridge.call(&call("alice", "echo", json!({"text": "more"}))).await), "private tools still");
    // Another identity's scope is its own.
    assert!(passed(&two.bridge.call(&call("bob", "add", add)).await), "bob is not tainted");
    assert_eq!(one.calls_seen().iter().chain(two.calls_seen().iter()).filter(|t| *t == "add").count(), 2);
    one.close().await;
    two.close().await;
}

#[tokio::test]
async fn a_grant_limit_of_three_holds_across_five_stateless_calls_and_a_direct_budget_across_requests() {
    // Not across midnight (UTC), where the day's window starts anew.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    if 86_400 - now % 86_400 < 30 {
        std::thread::sleep(Duration::from_secs(86_400 - now % 86_400 + 1));
    }
    let Some(nats) = NatsServer::start(&[]) else { return };
    let store = jetstream(&nats).await;
    let (one, two) = replicas(&store, GRANT_3).await;
    let add = json!({"a": 1, "b": 2});
    let mut passes = Vec::new();
    for i in 0..5 {
        let bridge = if i % 2 == 0 { &one.bridge } else { &two.bridge };
        passes.push(passed(&bridge.call(&call("carol", "add", add.clone())).await));
    }
    assert_eq!(passes, [true, true, true, false, false], "one count for all of carol's stateless calls");
    assert!(passed(&one.bridge.call(&call("dave", "add", add.clone())).await), "dave counts apart");

    // Direct calls: each request is a session object of its own, whose
    // count starts at 1; the scope counts them all.
    let direct = |identity: &str| DirectCall {
        session: subjects::stateless_scope(Some(identity)),
        asker: Some(uuid::Uuid::new_v4().to_string()),
        identity: Some(identity.into()),
        call_id: format!("direct-{}", uuid::Uuid::new_v4()),
        call_index: 1,
        max_calls: Some(2),
        target: code_mode_proto::Target::Tool("echo".into()),
        arguments: json!({"text": "x"}),
        link: None,
        retry: None,
    };
    let mut answers = Vec::new();
    for i in 0..3 {
        let bridge = if i % 2 == 0 { &one.bridge } else { &two.bridge };
        answers.push(bridge.call_direct(&direct("erin")).await);
    }
    assert!(matches!(answers[0], DirectReply::Ok { .. }) && matches!(answers[1], DirectReply::Ok { .. }));
    let DirectReply::Refused { message, .. } = &answers[2] else { panic!("the third is over the budget: {answers:?}") };
    assert!(message.contains("all of its 2 direct tool calls"), "{message}");
    one.close().await;
    two.close().await;
}

#[tokio::test]
async fn ending_a_stateless_scope_is_refused_so_no_frontend_can_clear_its_taint() {
    let h = Setup::default().private(&["echo"]).start().await.expect("starts");
    assert!(passed(&h.bridge.call(&call("alice", "echo", json!({"text": "secret"}))).await));
    let scope = subjects::stateless_scope(Some("alice"));
    let err = h.bridge.end_session(&scope).await.expect_err("refused");
    assert!(matches!(err, SessionEndError::NotASession { .. }), "{err:?}");
    assert!(!passed(&h.bridge.call(&call("alice", "add", json!({"a": 1, "b": 2}))).await), "still tainted");
    h.close().await;
}

#[tokio::test]
async fn a_stateless_scope_idle_past_its_bound_starts_anew_and_its_old_state_is_forgotten() {
    let store = SessionStore::in_memory();
    let idle = Duration::from_millis(800);
    let mut setup = Setup::default().private(&["echo"]).state(store.clone());
    setup.limits = CallLimits { stateless_idle: idle, ..setup.limits };
    let h = setup.start().await.expect("starts");
    let add = json!({"a": 1, "b": 2});
    assert!(passed(&h.bridge.call(&call("alice", "echo", json!({"text": "secret"}))).await));
    // Used more often than the bound: the taint holds however long.
    for _ in 0..4 {
        tokio::time::sleep(idle / 3).await;
        assert!(!passed(&h.bridge.call(&call("alice", "add", add.clone())).await), "tainted while used");
    }
    let scope = subjects::stateless_scope(Some("alice"));
    let first = format!("{scope}~1");
    assert!(store.get(&first, "taint").await.unwrap().is_some());
    tokio::time::sleep(idle + Duration::from_millis(300)).await;
    assert!(passed(&h.bridge.call(&call("alice", "add", add)).await), "after the bound without a call, anew");
    assert!(store.get(&first, "taint").await.unwrap().is_none(), "the old generation's taint is gone");
    h.close().await;
}
