//! The private-data rule against the real test server: after a session
//! calls a private tool it may call only private tools; calls refused before
//! they go out do not taint, calls that fail after going out do; the labels
//! must name kept tools and show in the stubs. The taint lives in the
//! session-state store: in memory, or JetStream on a real nats-server, where
//! it is shared by bridges, survives them, and fails closed while
//! nats-server is down.

use std::time::Duration;

use code_mode_bridge::BridgeError;
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_core::testing::NatsServer;
use code_mode_proto::{ErrorKind, ToolCall, ToolReply};
use serde_json::{Value, json};

use crate::support::{Harness, Setup, calls_in_log, ok, refused};

/// A call of `tool` in `session`, the first of its run.
async fn call_in(h: &Harness, session: &str, tool: &str, arguments: Value) -> ToolReply {
    call_at(h, session, tool, arguments, 1).await
}

/// A call of `tool` in `session` with this index in its run.
async fn call_at(h: &Harness, session: &str, tool: &str, arguments: Value, call_index: u32) -> ToolReply {
    let call = ToolCall {
        session: session.into(),
        asker: None,
        identity: None,
        cell_id: format!("{session}-cell"),
        call_index,
        target: code_mode_proto::Target::Tool(tool.into()),
        arguments,
        link: None,
        file_in: false,
    };
    h.bridge.call(&call).await
}

fn add() -> Value {
    json!({"a": 2, "b": 3})
}

const SUM: &str = r#"{"sum":5}"#;

/// The refusal of a call the rule refused because the session is tainted.
fn assert_tainted_refusal(reply: ToolReply, tool: &str, by: &str) {
    let message = refused(reply);
    assert!(message.starts_with(&format!("{tool}: refused by the private-data rule")), "{message}");
    assert!(message.contains(&format!("called the private tool {by}")), "{message}");
}

/// A JetStream session store over its own connection to `server`.
async fn jetstream_store(server: &NatsServer) -> SessionStore {
    let transport = NatsTransport::connect(&NatsOptions { url: server.url(), ..Default::default() })
        .await
        .expect("connects to the test nats-server");
    let config = JetStreamConfig { timeout: Duration::from_secs(1), ..Default::default() };
    SessionStore::over_nats(&transport, config).await.expect("the bucket opens")
}

#[tokio::test]
async fn after_a_private_call_a_session_may_call_only_private_tools() {
    let h = Setup::server(&[]).private(&["get_env", "count"]).start().await.expect("starts");
    assert_eq!(ok(call_in(&h, "s1", "add", add()).await), SUM, "untainted, add goes out");
    assert!(!ok(call_in(&h, "s1", "get_env", json!({"name": "HOME"})).await).is_empty());

    let message = refused(call_in(&h, "s1", "add", add()).await);
    assert_eq!(
        message,
        "add: refused by the private-data rule: this session has called the private tool get_env, so from then on \
         it may call only private tools (get_env, count). The rule lasts for the rest of the client session: call \
         other tools before the first private call, or in a new session"
    );
    refused(call_in(&h, "s1", "echo", json!({"text": "leak"})).await);
    // Private tools still work, in this session and in later runs of it.
    ok(call_in(&h, "s1", "get_env", json!({"name": "PATH"})).await);
    ok(call_at(&h, "s1", "count", json!({}), 7).await);
    // Another session is not tainted.
    assert_eq!(ok(call_in(&h, "s2", "add", add()).await), SUM);
    assert_eq!(h.calls_seen(), ["add", "get_env", "get_env", "count", "add"], "refused calls never went out");
    h.close().await;
}

#[tokio::test]
async fn a_private_call_refused_before_it_goes_out_does_not_taint() {
    let limits =
        code_mode_bridge::CallLimits { max_calls: 5, call_timeout: Duration::from_secs(10), ..Default::default() };
    let h = Setup { limits, ..Setup::server(&[]) }.private(&["get_env"]).start().await.expect("starts");
    // Refused by its schema (no name; an unnamed property), by the budget,
    // and as call 0 of the run.
    let message = refused(call_in(&h, "s", "get_env", json!({})).await);
    assert!(message.starts_with("get_env: arguments do not match the schema"), "{message}");
    refused(call_in(&h, "s", "get_env", json!({"name": "HOME", "extra": 1})).await);
    let message = refused(call_at(&h, "s", "get_env", json!({"name": "HOME"}), 6).await);
    assert!(message.contains("used all of its 5 tool calls"), "{message}");
    refused(call_at(&h, "s", "get_env", json!({"name": "HOME"}), 0).await);
    // A non-private call refused by its schema does not taint either (nor count as private).
    refused(call_in(&h, "s", "add", json!({"a": "two"})).await);

    assert_eq!(ok(call_in(&h, "s", "add", add()).await), SUM, "the session is still clean");
    assert_eq!(h.calls_seen(), ["add"]);
    h.close().await;
}

#[tokio::test]
async fn a_private_call_that_fails_after_going_out_still_taints() {
    let limits = code_mode_bridge::CallLimits { call_timeout: Duration::from_secs(1), ..Default::default() };
    let h = Setup { limits, ..Setup::server(&[]) }.private(&["fail", "sleep", "crash"]).start().await.expect("starts");

    // The tool reports an error.
    let message = refused(call_in(&h, "by-fail", "fail", json!({"message": "boom"})).await);
    assert_eq!(message, "fail failed: boom");
    assert_tainted_refusal(call_in(&h, "by-fail", "add", add()).await, "add", "fail");

    // The tool does not answer in time.
    let message = refused(call_in(&h, "by-timeout", "sleep", json!({"seconds": 3})).await);
    assert!(message.contains("no answer within 1 s"), "{message}");
    assert_tainted_refusal(call_in(&h, "by-timeout", "add", add()).await, "add", "sleep");

    // The server dies under the call.
    assert_eq!(
        call_in(&h, "by-crash", "crash", json!({})).await,
        ToolReply::Fault { kind: ErrorKind::TransportClosed }
    );
    assert_tainted_refusal(call_in(&h, "by-crash", "add", add()).await, "add", "crash");

    let seen = h.calls_seen();
    assert!(seen.starts_with(&["fail".into(), "sleep".into(), "crash".into()]), "{seen:?}");
    assert!(!seen.contains(&"add".to_string()), "no add went out: {seen:?}");
    h.close().await;
}

#[tokio::test]
async fn a_private_call_taints_its_session_before_it_goes_out() {
    let h = Setup::server(&[]).private(&["sleep"]).start().await.expect("starts");
    let slow = call_in(&h, "s", "sleep", json!({"seconds": 2}));
    let meanwhile = async {
        // Once the private call has reached the server...
        let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
        while calls_in_log(&h.log).is_empty() {
            assert!(tokio::time::Instant::now() < give_up, "the private call never reached the server");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // ...a concurrent call of another tool in its session is refused,
        // though the private call has not answered yet.
        call_in(&h, "s", "add", add()).await
    };
    let (slow, meanwhile) = tokio::join!(slow, meanwhile);
    assert_eq!(ok(slow), "slept");
    assert_tainted_refusal(meanwhile, "add", "sleep");
    assert_eq!(h.calls_seen(), ["sleep"]);
    h.close().await;
}

#[tokio::test]
async fn concurrent_private_calls_in_one_session_all_go_out() {
    let h = Setup::server(&[]).private(&["echo"]).start().await.expect("starts");
    let calls = (0..16).map(|i| call_in(&h, "s", "echo", json!({"text": format!("t{i}")})));
    for (i, reply) in futures::future::join_all(calls).await.into_iter().enumerate() {
        assert_eq!(ok(reply), format!("t{i}"), "a private call that finds the taint already written still goes out");
    }
    assert_tainted_refusal(call_in(&h, "s", "add", add()).await, "add", "echo");
    h.close().await;
}

#[tokio::test]
async fn private_labels_must_name_kept_tools_and_accept_python_names() {
    let err = Setup::server(&[]).private(&["get_envv"]).start().await.unwrap_err();
    assert!(matches!(err, BridgeError::UnknownPrivate { .. }), "{err:?}");
    assert!(err.to_string().contains("--private get_envv: the server lists no such tool"), "{err}");

    let err = Setup::server(&[]).allow(&["add"]).private(&["get_env"]).start().await.unwrap_err();
    assert!(matches!(err, BridgeError::PrivateNotKept { .. }), "{err:?}");
    assert!(err.to_string().contains("--private get_env: it is not on the allowlist"), "{err}");

    let err = Setup::server(&["--deep-schema"]).private(&["bad_schema"]).start().await.unwrap_err();
    assert!(matches!(err, BridgeError::PrivateNotKept { .. }), "{err:?}");
    assert!(err.to_string().contains("--private bad_schema: its schema cannot be checked"), "{err}");

    // `get-weather` is listed; its Python name is accepted too.
    let h = Setup::server(&[]).private(&["get_weather"]).start().await.expect("starts");
    ok(call_in(&h, "s", "get_weather", json!({})).await);
    assert_tainted_refusal(call_in(&h, "s", "add", add()).await, "add", "get_weather");
    h.close().await;
}

#[tokio::test]
async fn private_tools_say_private_in_their_stubs_and_summaries() {
    let h = Setup::server(&[]).private(&["get_env"]).start().await.expect("starts");
    let catalog = h.bridge.catalog_message();
    let get_env = catalog.tools.iter().find(|t| t.name == "get_env").expect("get_env");
    assert!(get_env.summary.starts_with("get_env(name: str) [private]  "), "{}", get_env.summary);
    assert!(get_env.stub.contains("    [private]\n"), "{}", get_env.stub);
    assert!(get_env.stub.contains("this session can call only [private] tools"), "{}", get_env.stub);
    for other in catalog.tools.iter().filter(|t| t.name != "get_env") {
        assert!(!other.summary.contains("[private]") && !other.stub.contains("[private]"), "{other:?}");
    }
    h.close().await;
}

#[tokio::test]
async fn without_private_tools_the_session_state_is_never_touched() {
    let Some(mut nats) = NatsServer::start(&[]) else { return };
    let store = jetstream_store(&nats).await;
    let h = Setup::server(&[]).state(store).start().await.expect("starts");
    // A store that cannot answer changes nothing: no call consults it.
    nats.stop();
    assert!(!ok(call_in(&h, "s", "get_env", json!({"name": "HOME"})).await).is_empty());
    assert_eq!(ok(call_in(&h, "s", "add", add()).await), SUM);
    h.close().await;
}

#[tokio::test]
async fn with_the_session_state_unreachable_every_judged_call_is_refused_until_it_is_back() {
    let Some(mut nats) = NatsServer::start(&[]) else { return };
    let h = Setup::server(&[]).private(&["get_env"]).state(jetstream_store(&nats).await).start().await.expect("starts");
    ok(call_in(&h, "tainted", "get_env", json!({"name": "HOME"})).await);
    assert_eq!(ok(call_in(&h, "clean", "add", add()).await), SUM);

    nats.stop();
    for (session, tool, arguments) in
        [("clean", "add", add()), ("clean", "get_env", json!({"name": "HOME"})), ("tainted", "add", add())]
    {
        let reply = tokio::time::timeout(Duration::from_secs(10), call_in(&h, session, tool, arguments))
            .await
            .expect("the store's timeout bounds the call");
        assert_eq!(
            refused(reply),
            format!("{tool}: session state unavailable: refusing the call under the private-data rule (fail closed)")
        );
    }
    // Checks before the rule still answer as before.
    assert!(refused(call_in(&h, "clean", "add", json!({})).await).contains("do not match the schema"));

    nats.restart();
    // A taint write refused during the outage may still land after the
    // reconnect (the client sends what it held): that can only taint
    // "clean", never clear a taint, so the recovery is checked in a session
    // that tried nothing during the outage.
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match call_in(&h, "after", "add", add()).await {
            ToolReply::Ok { value } => {
                assert_eq!(value, SUM);
                break;
            }
            other => assert!(tokio::time::Instant::now() < give_up, "not back within 30 s: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The taint written before the outage is still there (file storage).
    assert_tainted_refusal(call_in(&h, "tainted", "add", add()).await, "add", "get_env");
    let seen = h.calls_seen();
    assert_eq!(seen, ["get_env", "add", "add"], "nothing went out while the state was unknown");
    h.close().await;
}

#[tokio::test]
async fn bridges_over_one_jetstream_bucket_share_the_taint_and_it_outlives_them() {
    let Some(nats) = NatsServer::start(&[]) else { return };
    let first = Setup::server(&[]).private(&["get_env"]).state(jetstream_store(&nats).await).start().await.unwrap();
    let second = Setup::server(&[]).private(&["get_env"]).state(jetstream_store(&nats).await).start().await.unwrap();
    ok(call_in(&first, "s", "get_env", json!({"name": "HOME"})).await);
    assert_tainted_refusal(call_in(&second, "s", "add", add()).await, "add", "get_env");
    assert_eq!(ok(call_in(&second, "other", "add", add()).await), SUM);
    first.close().await;
    second.close().await;

    // A bridge started later, on a new connection, still finds it.
    let third = Setup::server(&[]).private(&["get_env"]).state(jetstream_store(&nats).await).start().await.unwrap();
    assert_tainted_refusal(call_in(&third, "s", "add", add()).await, "add", "get_env");
    assert_eq!(calls_in_log(&third.log), Vec::<String>::new());
    third.close().await;
}
