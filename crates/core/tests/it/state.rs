//! The session-state store behaves the same in memory and in a JetStream
//! key-value bucket on a real nats-server; the JetStream store also
//! survives restarts, fails closed while nats-server is down and is shared
//! exactly between replicas.

use std::time::Duration;

use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::state::{JetStreamConfig, MAX_VALUE_BYTES, SessionStore, StateError};
use code_mode_core::testing::NatsServer;
use serde_json::{Value, json};

const SESSION: &str = "3f2b6c1e-8a47-4d0e-9b35-2f6a1c7d9e04";
const OTHER_SESSION: &str = "b71d0e55-1c9a-4f3e-8e2d-64a0f9c3b812";

async fn connect(server: &NatsServer) -> NatsTransport {
    let options = NatsOptions { url: server.url(), ..Default::default() };
    NatsTransport::connect(&options).await.expect("connects to the test nats-server")
}

async fn jetstream_store(server: &NatsServer, timeout: Duration) -> SessionStore {
    let config = JetStreamConfig { timeout, ..Default::default() };
    SessionStore::over_nats(&connect(server).await, config).await.expect("the bucket opens")
}

/// A store of the named kind; the server (if any) lives as long as the guard.
async fn store(kind: &str) -> Option<(SessionStore, Option<NatsServer>)> {
    match kind {
        "memory" => Some((SessionStore::in_memory(), None)),
        _ => {
            let server = NatsServer::start(&[])?;
            let store = jetstream_store(&server, Duration::from_secs(2)).await;
            Some((store, Some(server)))
        }
    }
}

macro_rules! over_both_backends {
    ($($name:ident),* $(,)?) => {
        mod in_memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name("memory").await })*
        }
        mod over_jetstream {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name("jetstream").await })*
        }
    };
}

over_both_backends!(
    a_key_never_written_reads_as_none,
    a_created_value_reads_back_with_its_revision,
    creating_a_key_twice_conflicts_and_keeps_the_first_value,
    compare_and_set_with_a_stale_revision_conflicts_and_with_the_current_one_wins,
    concurrent_updates_from_four_tasks_lose_no_increment,
    sessions_do_not_see_each_others_state,
    session_ids_with_dots_and_wildcards_are_kept_apart_from_lookalikes,
    a_deleted_key_reads_as_none_and_can_be_created_again,
    bad_names_and_oversized_values_are_invalid_and_write_nothing,
);

async fn a_key_never_written_reads_as_none(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    assert_eq!(store.get(SESSION, "taint").await.unwrap(), None);
}

async fn a_created_value_reads_back_with_its_revision(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    let value = json!({"private": true, "sources": ["read_mail"]});
    let revision = store.create(SESSION, "taint", &value).await.unwrap();
    let entry = store.get(SESSION, "taint").await.unwrap().expect("the value is there");
    assert_eq!(entry.value, value);
    assert_eq!(entry.revision, revision);
}

async fn creating_a_key_twice_conflicts_and_keeps_the_first_value(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    store.create(SESSION, "taint", &json!("first")).await.unwrap();
    let err = store.create(SESSION, "taint", &json!("second")).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict(_)), "{err:?}");
    assert_eq!(store.get(SESSION, "taint").await.unwrap().unwrap().value, json!("first"));
}

async fn compare_and_set_with_a_stale_revision_conflicts_and_with_the_current_one_wins(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    let first = store.create(SESSION, "calls", &json!(1)).await.unwrap();
    let second = store.compare_and_set(SESSION, "calls", &json!(2), first).await.unwrap();
    assert!(second > first);

    let err = store.compare_and_set(SESSION, "calls", &json!(99), first).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict(_)), "{err:?}");
    let entry = store.get(SESSION, "calls").await.unwrap().unwrap();
    assert_eq!((entry.value, entry.revision), (json!(2), second));

    let third = store.compare_and_set(SESSION, "calls", &json!(3), second).await.unwrap();
    assert_eq!(store.get(SESSION, "calls").await.unwrap().unwrap().revision, third);
    // A key that does not exist has no revision to match.
    let err = store.compare_and_set(SESSION, "absent", &json!(1), third).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict(_)), "{err:?}");
    assert_eq!(store.get(SESSION, "absent").await.unwrap(), None);
}

fn increment(current: Option<Value>) -> Value {
    json!(current.and_then(|v| v.as_u64()).unwrap_or(0) + 1)
}

/// One task per store, each adding 1 to `calls` 25 times, all at once.
async fn add_25_from_each(stores: Vec<SessionStore>) {
    let tasks: Vec<_> = stores
        .into_iter()
        .map(|store| {
            tokio::spawn(async move {
                for _ in 0..25 {
                    store.update(SESSION, "calls", increment).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

async fn concurrent_updates_from_four_tasks_lose_no_increment(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    add_25_from_each(vec![store.clone(); 4]).await;
    assert_eq!(store.get(SESSION, "calls").await.unwrap().unwrap().value, json!(100));
}

async fn sessions_do_not_see_each_others_state(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    store.create(SESSION, "taint", &json!(true)).await.unwrap();
    assert_eq!(store.get(OTHER_SESSION, "taint").await.unwrap(), None);
    store.create(OTHER_SESSION, "taint", &json!(false)).await.unwrap();
    store.delete(OTHER_SESSION, "taint").await.unwrap();
    assert_eq!(store.get(SESSION, "taint").await.unwrap().unwrap().value, json!(true));
    assert_eq!(store.get(OTHER_SESSION, "taint").await.unwrap(), None);
}

async fn session_ids_with_dots_and_wildcards_are_kept_apart_from_lookalikes(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    // Raw, "a.b" + "c" and "a" + "b.c" would both be the key a.b.c; ">" and
    // "*" are wildcards in NATS subjects.
    let sessions = ["a.b", "a", "a_2Eb", "a>", "*", "with space", "ünïcode"];
    for (i, session) in sessions.iter().enumerate() {
        let name = if *session == "a" { "b.c" } else { "c" };
        store.create(session, name, &json!(i)).await.unwrap();
    }
    for (i, session) in sessions.iter().enumerate() {
        let name = if *session == "a" { "b.c" } else { "c" };
        assert_eq!(store.get(session, name).await.unwrap().unwrap().value, json!(i), "{session}");
    }
}

async fn a_deleted_key_reads_as_none_and_can_be_created_again(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    let old = store.create(SESSION, "taint", &json!(1)).await.unwrap();
    store.delete(SESSION, "taint").await.unwrap();
    assert_eq!(store.get(SESSION, "taint").await.unwrap(), None);
    let err = store.compare_and_set(SESSION, "taint", &json!(2), old).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict(_)), "a revision from before the delete is stale: {err:?}");
    let new = store.create(SESSION, "taint", &json!(3)).await.unwrap();
    assert!(new > old);
    assert_eq!(store.get(SESSION, "taint").await.unwrap().unwrap().value, json!(3));
    // update starts from nothing again after a delete.
    store.delete(SESSION, "taint").await.unwrap();
    assert_eq!(store.update(SESSION, "taint", increment).await.unwrap().value, json!(1));
}

async fn bad_names_and_oversized_values_are_invalid_and_write_nothing(kind: &str) {
    let Some((store, _server)) = store(kind).await else { return };
    for name in ["", "a b", "rate.>", "*", ".taint", "taint."] {
        let err = store.create(SESSION, name, &json!(1)).await.unwrap_err();
        assert!(matches!(err, StateError::Invalid(_)), "{name:?}: {err:?}");
    }
    let err = store.get("", "taint").await.unwrap_err();
    assert!(matches!(err, StateError::Invalid(_)), "{err:?}");
    let huge = json!("x".repeat(MAX_VALUE_BYTES));
    let err = store.create(SESSION, "taint", &huge).await.unwrap_err();
    assert!(matches!(err, StateError::Invalid(_)), "{err:?}");
    assert_eq!(store.get(SESSION, "taint").await.unwrap(), None);
}

/// Wait for the client to reconnect after a restart: the first calls may
/// still fail as unavailable.
async fn get_when_back(store: &SessionStore, session: &str, name: &str) -> Option<code_mode_core::state::Entry> {
    let mut last = None;
    for _ in 0..150 {
        match store.get(session, name).await {
            Ok(entry) => return entry,
            Err(e @ StateError::Unavailable(_)) => last = Some(e),
            Err(other) => panic!("unexpected {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the store did not come back: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_written_survives_a_restart_of_nats_server() {
    let Some(mut server) = NatsServer::start(&[]) else { return };
    let store = jetstream_store(&server, Duration::from_secs(2)).await;
    let revision = store.create(SESSION, "taint", &json!({"private": true})).await.unwrap();
    store.update(SESSION, "calls", increment).await.unwrap();

    server.restart();

    let entry = get_when_back(&store, SESSION, "taint").await.expect("the taint survived");
    assert_eq!(entry.value, json!({"private": true}));
    assert_eq!(entry.revision, revision);
    assert_eq!(store.update(SESSION, "calls", increment).await.unwrap().value, json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_outlives_the_connection_that_wrote_it_like_a_restarted_bridge() {
    let Some(server) = NatsServer::start(&[]) else { return };
    {
        let store = jetstream_store(&server, Duration::from_secs(2)).await;
        store.create(SESSION, "taint", &json!(true)).await.unwrap();
    }
    let restarted = jetstream_store(&server, Duration::from_secs(2)).await;
    assert_eq!(restarted.get(SESSION, "taint").await.unwrap().unwrap().value, json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_nats_server_is_down_fails_closed_then_recovers_by_itself() {
    let Some(mut server) = NatsServer::start(&[]) else { return };
    let store = jetstream_store(&server, Duration::from_millis(500)).await;
    store.create(SESSION, "taint", &json!(true)).await.unwrap();

    server.stop();

    // Generous outer bound: the point is that it returns at all, and with
    // Unavailable, not that it is fast.
    let bound = Duration::from_secs(10);
    let read = tokio::time::timeout(bound, store.get(SESSION, "taint")).await.expect("the read does not hang");
    assert!(matches!(read, Err(StateError::Unavailable(_))), "{read:?}");
    let write =
        tokio::time::timeout(bound, store.update(SESSION, "calls", increment)).await.expect("the write does not hang");
    assert!(matches!(write, Err(StateError::Unavailable(_))), "{write:?}");
    let message = read.unwrap_err().to_string();
    assert!(message.contains("unavailable") && message.contains("refused"), "{message}");
    let metrics = code_mode_telemetry::metrics();
    assert_eq!(metrics.state_store_up.get(), 0, "codemode_state_store_up says the store is gone");
    assert!(metrics.state_store_operations.with_label_values(&["unavailable"]).get() >= 2);

    server.restart();

    let entry = get_when_back(&store, SESSION, "taint").await.expect("the taint is still there");
    assert_eq!(entry.value, json!(true));
    assert_eq!(metrics.state_store_up.get(), 1, "and back once it answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_of_a_watched_store_shows_an_idle_store_going_away_and_coming_back() {
    let Some(mut server) = NatsServer::start(&[]) else { return };
    let store = jetstream_store(&server, Duration::from_millis(500)).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let watching = store.watch(Duration::from_millis(200), cancel.clone());
    let up = || code_mode_telemetry::metrics().state_store_up.get();
    let until = |want: i64| async move {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
        while up() != want {
            assert!(tokio::time::Instant::now() < give_up, "codemode_state_store_up stayed {} (want {want})", up());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    until(1).await;
    server.stop();
    until(0).await;
    server.restart();
    until(1).await;
    cancel.cancel();
    watching.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_a_store_while_nats_server_is_down_is_unavailable() {
    let Some(mut server) = NatsServer::start(&[]) else { return };
    let transport = connect(&server).await;
    server.stop();
    let config = JetStreamConfig { timeout: Duration::from_millis(500), ..Default::default() };
    let opened = tokio::time::timeout(Duration::from_secs(10), SessionStore::over_nats(&transport, config))
        .await
        .expect("opening does not hang");
    assert!(matches!(opened, Err(StateError::Unavailable(_))), "{opened:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_separate_connections_share_state_and_compare_and_set_exactly() {
    let Some(server) = NatsServer::start(&[]) else { return };
    let a = jetstream_store(&server, Duration::from_secs(2)).await;
    let b = jetstream_store(&server, Duration::from_secs(2)).await;

    let revision = a.create(SESSION, "taint", &json!("from a")).await.unwrap();
    let seen = b.get(SESSION, "taint").await.unwrap().expect("b sees a's write");
    assert_eq!((seen.value, seen.revision), (json!("from a"), revision));

    // Both read revision r; b writes first; a's write on r must lose.
    let b_revision = b.compare_and_set(SESSION, "taint", &json!("from b"), revision).await.unwrap();
    let err = a.compare_and_set(SESSION, "taint", &json!("lost"), revision).await.unwrap_err();
    assert!(matches!(err, StateError::Conflict(_)), "{err:?}");
    assert_eq!(a.get(SESSION, "taint").await.unwrap().unwrap().revision, b_revision);

    add_25_from_each(vec![a.clone(), a, b.clone(), b.clone()]).await;
    assert_eq!(b.get(SESSION, "calls").await.unwrap().unwrap().value, json!(100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_deployed_permissions_only_the_bridge_user_reaches_the_session_state() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let as_user = |user: &str| NatsOptions {
        url: server.url(),
        credentials: Some((user.to_string(), users.password(user).to_string())),
        inbox_prefix: Some(format!("_INBOX.{user}")),
        ..Default::default()
    };
    let config = || JetStreamConfig { timeout: Duration::from_secs(1), ..Default::default() };

    let bridge = NatsTransport::connect(&as_user("bridge")).await.unwrap();
    let store = SessionStore::over_nats(&bridge, config()).await.expect("the bridge user opens the bucket");
    store.create(SESSION, "taint", &json!(true)).await.unwrap();
    store.update(SESSION, "calls", increment).await.unwrap();
    store.delete(SESSION, "calls").await.unwrap();
    assert_eq!(store.get(SESSION, "taint").await.unwrap().unwrap().value, json!(true));

    // The runner relays what the untrusted code sends: it must not be able
    // to read or clear a session's taint.
    for user in ["sandbox-runner", "frontend"] {
        let transport = NatsTransport::connect(&as_user(user)).await.unwrap();
        let opened = SessionStore::over_nats(&transport, config()).await;
        assert!(matches!(opened, Err(StateError::Unavailable(_))), "{user}: {opened:?}");
    }
}
