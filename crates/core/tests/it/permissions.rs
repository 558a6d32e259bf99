//! `deploy/nats-server.conf` gives each service its own user that may
//! publish and subscribe only what the service needs. These tests run a real
//! nats-server with that file and try what each service must not do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use code_mode_core::bus::{Bus, BusError};
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::testing::{NatsServer, NatsUsers};
use code_mode_proto::{WireError, queue_groups, subjects};
use tokio_util::sync::CancellationToken;

async fn connect(server: &NatsServer, users: &NatsUsers, user: &str) -> Bus {
    let options = NatsOptions {
        url: server.url(),
        credentials: Some((user.to_string(), users.password(user).to_string())),
        name: Some(user.to_string()),
        inbox_prefix: Some(format!("_INBOX.{user}")),
        ..Default::default()
    };
    Bus::new(NatsTransport::connect(&options).await.unwrap_or_else(|e| panic!("{user} connects: {e}")))
}

/// Serve `subject` in `group` on `bus`, counting the requests that arrive.
async fn counting_service(bus: &Bus, subject: &str, group: &str) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    bus.serve(subject, group, CancellationToken::new(), move |_: serde_json::Value| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, WireError>("served".to_string()) }
    })
    .await
    .expect("the subscription is sent");
    count
}

async fn ask(bus: &Bus, subject: &str) -> Result<String, BusError> {
    bus.call::<_, String>(subject, &serde_json::json!({}), Duration::from_millis(700)).await
}

#[tokio::test]
async fn a_connection_without_the_right_password_is_refused() {
    let Some((server, _users)) = NatsServer::start_secured() else { return };
    let anonymous = NatsOptions { url: server.url(), ..Default::default() };
    assert!(NatsTransport::connect(&anonymous).await.is_err(), "anonymous connections are refused");
    let wrong = NatsOptions {
        url: server.url(),
        credentials: Some(("bridge".into(), "not-the-password".into())),
        ..Default::default()
    };
    assert!(NatsTransport::connect(&wrong).await.is_err(), "a wrong password is refused");
}

#[tokio::test]
async fn each_service_reaches_the_next_with_its_own_user() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let bridge = connect(&server, &users, "bridge").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    counting_service(&bridge, subjects::CATALOG_GET, queue_groups::BRIDGE).await;
    counting_service(&bridge, subjects::TOOL_CALL, queue_groups::BRIDGE).await;
    counting_service(&runner, subjects::CELL_RUN, queue_groups::SANDBOX_RUNNER).await;
    assert_eq!(ask(&frontend, subjects::CATALOG_GET).await.unwrap(), "served");
    assert_eq!(ask(&frontend, subjects::CELL_RUN).await.unwrap(), "served");
    assert_eq!(ask(&runner, subjects::TOOL_CALL).await.unwrap(), "served");
}

#[tokio::test]
async fn a_frontend_cannot_pose_as_the_bridge_or_call_tools() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let bridge = connect(&server, &users, "bridge").await;
    // The frontend tries to answer tool calls: the server drops its subscription.
    let impostor = counting_service(&frontend, subjects::TOOL_CALL, queue_groups::BRIDGE).await;
    let err = ask(&runner, subjects::TOOL_CALL).await.unwrap_err();
    assert!(matches!(err, BusError::NoResponders { .. } | BusError::Timeout { .. }), "{err:?}");
    assert_eq!(impostor.load(Ordering::SeqCst), 0, "the impostor never saw a tool call");
    // Nor may it send tool calls itself (only sandbox-runners relay calls).
    let real = counting_service(&bridge, subjects::TOOL_CALL, queue_groups::BRIDGE).await;
    assert!(ask(&frontend, subjects::TOOL_CALL).await.is_err());
    assert_eq!(real.load(Ordering::SeqCst), 0, "the bridge never got the frontend's call");
}

#[tokio::test]
async fn only_a_frontend_may_send_direct_tool_calls_and_only_the_bridge_may_answer_them() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let bridge = connect(&server, &users, "bridge").await;
    // A runner taking code's calls past the cell (and its budget) is refused.
    let real = counting_service(&bridge, subjects::TOOL_DIRECT, queue_groups::BRIDGE).await;
    assert!(ask(&runner, subjects::TOOL_DIRECT).await.is_err());
    assert_eq!(real.load(Ordering::SeqCst), 0, "the bridge never got the runner's direct call");
    assert_eq!(ask(&frontend, subjects::TOOL_DIRECT).await.unwrap(), "served");
    // Nobody but the bridge may answer them.
    let impostor_frontend = connect(&server, &users, "frontend").await;
    let impostor = counting_service(&impostor_frontend, subjects::TOOL_DIRECT, queue_groups::BRIDGE).await;
    let runner_impostor = counting_service(&runner, subjects::TOOL_DIRECT, queue_groups::BRIDGE).await;
    for _ in 0..4 {
        assert_eq!(ask(&frontend, subjects::TOOL_DIRECT).await.unwrap(), "served");
    }
    assert_eq!(impostor.load(Ordering::SeqCst) + runner_impostor.load(Ordering::SeqCst), 0);
    assert_eq!(real.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_runner_cannot_send_cells_or_ask_for_the_catalog() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let runner = connect(&server, &users, "sandbox-runner").await;
    let other_runner = connect(&server, &users, "sandbox-runner").await;
    let bridge = connect(&server, &users, "bridge").await;
    let cells = counting_service(&other_runner, subjects::CELL_RUN, queue_groups::SANDBOX_RUNNER).await;
    let catalog = counting_service(&bridge, subjects::CATALOG_GET, queue_groups::BRIDGE).await;
    assert!(ask(&runner, subjects::CELL_RUN).await.is_err());
    assert!(ask(&runner, subjects::CATALOG_GET).await.is_err());
    assert_eq!(cells.load(Ordering::SeqCst), 0);
    assert_eq!(catalog.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_bridge_cannot_run_cells_and_nobody_joins_another_services_queue_group() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let bridge = connect(&server, &users, "bridge").await;
    let frontend = connect(&server, &users, "frontend").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let cells = counting_service(&runner, subjects::CELL_RUN, queue_groups::SANDBOX_RUNNER).await;
    assert!(ask(&bridge, subjects::CELL_RUN).await.is_err());
    assert_eq!(cells.load(Ordering::SeqCst), 0);
    // The runner user may serve cells only in the sandbox-runner group.
    let outsider = counting_service(&runner, subjects::CELL_RUN, "elsewhere").await;
    for _ in 0..5 {
        assert_eq!(ask(&frontend, subjects::CELL_RUN).await.unwrap(), "served");
    }
    assert_eq!(outsider.load(Ordering::SeqCst), 0, "a subscription in another queue group is refused");
    assert_eq!(cells.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn only_the_bridge_may_ask_a_session_for_approval_and_only_a_frontend_may_answer() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let bridge = connect(&server, &users, "bridge").await;
    let frontend = connect(&server, &users, "frontend").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let session = subjects::approval("0b7f3c1e").expect("a session token");
    let answers = counting_service(&frontend, &session, "0b7f3c1e").await;
    assert_eq!(ask(&bridge, &session).await.unwrap(), "served");
    // The runner relays the code's calls: it must not ask (and so cannot
    // flood the person with questions) ...
    assert!(ask(&runner, &session).await.is_err());
    assert_eq!(answers.load(Ordering::SeqCst), 1);
    // ... nor answer a question in the person's place.
    let other = subjects::approval("5d1e9a02").expect("a session token");
    let forged = counting_service(&runner, &other, "5d1e9a02").await;
    let err = ask(&bridge, &other).await.unwrap_err();
    assert!(matches!(err, BusError::NoResponders { .. } | BusError::Timeout { .. }), "{err:?}");
    assert_eq!(forged.load(Ordering::SeqCst), 0, "the runner never saw the question");
}

#[tokio::test]
async fn only_a_frontend_may_end_a_session_so_a_runner_cannot_clear_a_taint() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let bridge = connect(&server, &users, "bridge").await;
    let frontend = connect(&server, &users, "frontend").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let ends = counting_service(&bridge, subjects::SESSION_END, queue_groups::BRIDGE).await;
    assert_eq!(ask(&frontend, subjects::SESSION_END).await.unwrap(), "served");
    // The runner relays the code's calls: were it able to end sessions, a
    // tainted session could be cleared from below.
    assert!(ask(&runner, subjects::SESSION_END).await.is_err());
    assert_eq!(ends.load(Ordering::SeqCst), 1);
}

/// A raw connection as `user` of the deployment's file.
async fn raw(server: &NatsServer, users: &NatsUsers, user: &str) -> async_nats::Client {
    let options = NatsOptions {
        url: server.url(),
        credentials: Some((user.to_string(), users.password(user).to_string())),
        name: Some(user.to_string()),
        inbox_prefix: Some(format!("_INBOX.{user}")),
        ..Default::default()
    };
    NatsTransport::connect(&options).await.unwrap_or_else(|e| panic!("{user} connects: {e}")).client().clone()
}

/// Append `text` to the audit stream as the connection's user; true when
/// the stream acknowledged it.
async fn append_audit(client: &async_nats::Client, text: &str) -> bool {
    let mut js = async_nats::jetstream::new(client.clone());
    js.set_timeout(Duration::from_millis(700));
    match js.publish("codemode.v1.audit", text.to_string().into()).await {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    }
}

/// A JetStream API request as the connection's user: `Ok` with the reply,
/// `Err` when nothing answered (a refused publish is dropped by the server).
async fn js_api(client: &async_nats::Client, api: &str, body: &str) -> Result<String, ()> {
    let request =
        async_nats::client::Request::new().payload(body.to_string().into()).timeout(Some(Duration::from_millis(700)));
    client
        .send_request(format!("$JS.API.{api}"), request)
        .await
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .map_err(|_| ())
}

#[tokio::test]
async fn bridges_and_runners_may_append_to_the_audit_stream_but_nobody_may_rewrite_it_and_a_frontend_may_not_write() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let bridge = raw(&server, &users, "bridge").await;
    let runner = raw(&server, &users, "sandbox-runner").await;
    let frontend = raw(&server, &users, "frontend").await;
    // The first writer creates the stream as the audit sink does.
    let mut js = async_nats::jetstream::new(runner.clone());
    js.set_timeout(Duration::from_secs(2));
    let stream = code_mode_audit::jetstream::open_stream(&js, &Default::default()).await.expect("a runner creates it");
    assert!(stream.cached_info().config.deny_delete && stream.cached_info().config.deny_purge);
    assert!(append_audit(&runner, "from the runner").await, "a runner appends");
    assert!(append_audit(&bridge, "from the bridge").await, "a bridge appends");
    assert!(!append_audit(&frontend, "from the frontend").await, "a frontend may not append");
    let mut attempts = Vec::new();
    for (who, client) in [("bridge", &bridge), ("sandbox-runner", &runner), ("frontend", &frontend)] {
        for (api, body) in [
            ("STREAM.PURGE.CODEMODE_AUDIT", "{}"),
            ("STREAM.MSG.DELETE.CODEMODE_AUDIT", r#"{"seq": 1}"#),
            ("STREAM.DELETE.CODEMODE_AUDIT", "{}"),
            ("STREAM.UPDATE.CODEMODE_AUDIT", r#"{"name": "CODEMODE_AUDIT", "subjects": ["codemode.v1.audit"]}"#),
        ] {
            attempts.push(async move { (who, api, js_api(client, api, body).await) });
        }
    }
    for (who, api, answer) in futures::future::join_all(attempts).await {
        assert!(answer.is_err(), "{who} may not call {api}: {answer:?}");
    }
    // Both appends are still there, in order, and nothing else.
    let info = js_api(&bridge, "STREAM.INFO.CODEMODE_AUDIT", "{}").await.expect("the bridge reads the stream");
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["state"]["messages"], 2, "{info}");
    let last = stream.direct_get(2).await.expect("the bridge's record is the second");
    assert_eq!(&last.payload[..], b"from the bridge");
}

#[tokio::test]
async fn only_a_frontend_may_send_to_a_runners_own_subject_and_only_a_runner_may_serve_it() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let bridge = connect(&server, &users, "bridge").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let other_runner = connect(&server, &users, "sandbox-runner").await;
    let own = subjects::runner("5f2c9a").expect("a runner token");
    let kept = counting_service(&runner, &own, queue_groups::SANDBOX_RUNNER).await;
    // A kept session's later cells: from the frontend to the runner holding it.
    assert_eq!(ask(&frontend, &own).await.unwrap(), "served");
    // Neither the bridge nor another runner (which relays the code's calls)
    // can run cells in a session's kept container or end it.
    assert!(ask(&bridge, &own).await.is_err());
    assert!(ask(&other_runner, &own).await.is_err());
    assert_eq!(kept.load(Ordering::SeqCst), 1);
    // Only runners serve runner subjects: a frontend or bridge that tried
    // would see a kept session's code.
    let other = subjects::runner("77aa01").expect("a runner token");
    let forged_by_frontend = counting_service(&frontend, &other, queue_groups::SANDBOX_RUNNER).await;
    let forged_by_bridge = counting_service(&bridge, &other, queue_groups::SANDBOX_RUNNER).await;
    let err = ask(&frontend, &other).await.unwrap_err();
    assert!(matches!(err, BusError::NoResponders { .. } | BusError::Timeout { .. }), "{err:?}");
    assert_eq!(forged_by_frontend.load(Ordering::SeqCst) + forged_by_bridge.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn only_a_runner_may_hold_a_cells_lease_and_only_a_frontend_may_ask_after_it() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let bridge = connect(&server, &users, "bridge").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let subject = subjects::cell_lease("cell-1").expect("a cell id of one token");
    let held = code_mode_core::lease::hold(&runner, "cell-1", "runner-a", &CancellationToken::new()).await.unwrap();
    assert!(held.is_some());
    let check = code_mode_proto::LeaseCheck { cell_id: "cell-1".into() };
    let answer: code_mode_proto::LeaseHeld =
        frontend.call(&subject, &check, Duration::from_millis(700)).await.expect("the frontend asks the runner");
    assert_eq!(answer.runner, "runner-a");
    // Nobody else asks, and nobody else can keep a dead runner's cell
    // looking alive.
    assert!(bridge.call::<_, code_mode_proto::LeaseHeld>(&subject, &check, Duration::from_millis(700)).await.is_err());
    drop(held);
    let fake = counting_service(&bridge, &subject, queue_groups::SANDBOX_RUNNER).await;
    let also_fake = counting_service(&frontend, &subject, queue_groups::SANDBOX_RUNNER).await;
    assert!(ask(&frontend, &subject).await.is_err(), "a lease held by no runner is not answered");
    assert_eq!((fake.load(Ordering::SeqCst), also_fake.load(Ordering::SeqCst)), (0, 0));
}

#[tokio::test]
async fn only_the_bridge_may_send_a_client_its_servers_questions_and_every_bridge_hears_a_frontends_cancel() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let bridge = connect(&server, &users, "bridge").await;
    let other_bridge = connect(&server, &users, "bridge").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    // A frontend hears what the wrapped servers send its client's session.
    let session = subjects::client("5e551011").expect("a session id");
    let heard = counting_service(&frontend, &session, "5e551011").await;
    assert_eq!(ask(&bridge, &session).await.unwrap(), "served");
    // A runner (code's side) cannot put questions or notes to a client, nor
    // can another frontend.
    let other_frontend = connect(&server, &users, "frontend").await;
    assert!(ask(&runner, &session).await.is_err());
    assert!(ask(&other_frontend, &session).await.is_err());
    assert_eq!(heard.load(Ordering::SeqCst), 1);
    // Every bridge hears a cancel, each in a queue group of its own; only
    // a frontend may send one, and no runner or frontend may listen.
    let first = counting_service(&bridge, subjects::CANCEL, "bridge.first").await;
    let second = counting_service(&other_bridge, subjects::CANCEL, "bridge.second").await;
    let eavesdropper = counting_service(&runner, subjects::CANCEL, "bridge.third").await;
    let frontend_listening = counting_service(&other_frontend, subjects::CANCEL, "bridge.fourth").await;
    assert_eq!(ask(&frontend, subjects::CANCEL).await.unwrap(), "served");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!((first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)), (1, 1));
    assert_eq!(eavesdropper.load(Ordering::SeqCst) + frontend_listening.load(Ordering::SeqCst), 0);
    assert!(ask(&runner, subjects::CANCEL).await.is_err());
    assert!(ask(&bridge, subjects::CANCEL).await.is_err());
    assert_eq!((first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)), (1, 1));
}

#[tokio::test]
async fn every_bridge_hears_a_frontends_changed_roots_and_no_runner_may_send_or_hear_them() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = connect(&server, &users, "frontend").await;
    let bridge = connect(&server, &users, "bridge").await;
    let other_bridge = connect(&server, &users, "bridge").await;
    let runner = connect(&server, &users, "sandbox-runner").await;
    let first = counting_service(&bridge, subjects::ROOTS_CHANGED, "bridge.first").await;
    let second = counting_service(&other_bridge, subjects::ROOTS_CHANGED, "bridge.second").await;
    let eavesdropper = counting_service(&runner, subjects::ROOTS_CHANGED, "bridge.third").await;
    assert_eq!(ask(&frontend, subjects::ROOTS_CHANGED).await.unwrap(), "served");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!((first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)), (1, 1));
    assert_eq!(eavesdropper.load(Ordering::SeqCst), 0, "a runner hears no client's roots");
    // Code's side (a runner) cannot make servers ask a client for roots.
    assert!(ask(&runner, subjects::ROOTS_CHANGED).await.is_err());
    assert_eq!((first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)), (1, 1));
}
