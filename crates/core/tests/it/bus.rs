//! The bus behaves the same over both transports: every test here runs once
//! in process and once over a real nats-server.

use std::collections::HashSet;
use std::time::Duration;

use code_mode_core::bus::{Bus, BusError};
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::testing::NatsServer;
use code_mode_proto::WireError;
use tokio_util::sync::CancellationToken;

/// A bus of the named kind; the server (if any) lives as long as the guard.
async fn bus(kind: &str) -> Option<(Bus, Option<NatsServer>)> {
    match kind {
        "in_process" => Some((Bus::in_process(), None)),
        _ => {
            let server = NatsServer::start(&[])?;
            let options = NatsOptions { url: server.url(), ..Default::default() };
            let transport = NatsTransport::connect(&options).await.expect("connects to the test nats-server");
            Some((Bus::new(transport), Some(server)))
        }
    }
}

async fn echo_service(bus: &Bus, tag: &'static str, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    bus.serve("t.echo", "g", cancel, move |q: String| async move { Ok::<_, WireError>(format!("{tag}:{q}")) })
        .await
        .unwrap()
}

macro_rules! over_both_transports {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(#[tokio::test] async fn $name() { super::$name("in_process").await })*
        }
        mod over_nats {
            $(#[tokio::test] async fn $name() { super::$name("nats").await })*
        }
    };
}

over_both_transports!(
    a_request_gets_the_typed_reply_of_its_service,
    a_queue_group_spreads_requests_over_its_members,
    a_subject_nobody_serves_fails_at_once_with_no_responders,
    a_cancelled_service_stops_answering,
    a_malformed_request_gets_a_bad_request_error,
    a_slow_service_times_out,
);

async fn a_request_gets_the_typed_reply_of_its_service(kind: &str) {
    let Some((bus, _server)) = bus(kind).await else { return };
    echo_service(&bus, "a", CancellationToken::new()).await;
    let reply: String = bus.call("t.echo", &"hi", Duration::from_secs(2)).await.unwrap();
    assert_eq!(reply, "a:hi");
}

async fn a_queue_group_spreads_requests_over_its_members(kind: &str) {
    let Some((bus, _server)) = bus(kind).await else { return };
    echo_service(&bus, "a", CancellationToken::new()).await;
    echo_service(&bus, "b", CancellationToken::new()).await;
    let mut seen = HashSet::new();
    for _ in 0..40 {
        let reply: String = bus.call("t.echo", &"x", Duration::from_secs(2)).await.unwrap();
        seen.insert(reply);
    }
    assert_eq!(seen.len(), 2, "both members answered: {seen:?}");
}

async fn a_subject_nobody_serves_fails_at_once_with_no_responders(kind: &str) {
    let Some((bus, _server)) = bus(kind).await else { return };
    let err = bus.call::<_, String>("t.none", &"x", Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, BusError::NoResponders { .. }), "{err:?}");
}

async fn a_cancelled_service_stops_answering(kind: &str) {
    let Some((bus, _server)) = bus(kind).await else { return };
    let cancel = CancellationToken::new();
    let handle = echo_service(&bus, "a", cancel.clone()).await;
    cancel.cancel();
    handle.await.unwrap();
    // The subscription is gone once the forwarding task sees the close.
    let mut last = None;
    for _ in 0..50 {
        match bus.call::<_, String>("t.echo", &"x", Duration::from_millis(500)).await {
            Err(BusError::NoResponders { .. }) => return,
            other => last = Some(other),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("still answered after cancel: {last:?}");
}

async fn a_malformed_request_gets_a_bad_request_error(kind: &str) {
    let Some((bus, _server)) = bus(kind).await else { return };
    bus.serve("t.num", "g", CancellationToken::new(), |q: u32| async move { Ok::<_, WireError>(q + 1) }).await.unwrap();
    let err = bus.call::<_, u32>("t.num", &"not a number", Duration::from_secs(2)).await.unwrap_err();
    match err {
        BusError::Remote { error, .. } => assert_eq!(error.kind, code_mode_proto::ErrorKind::BadRequest),
        other => panic!("unexpected {other:?}"),
    }
}

async fn a_slow_service_times_out(kind: &str) {
    let Some((bus, _server)) = bus(kind).await else { return };
    bus.serve("t.slow", "g", CancellationToken::new(), |_: u32| async move {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok::<_, WireError>(0u32)
    })
    .await
    .unwrap();
    let err = bus.call::<_, u32>("t.slow", &1u32, Duration::from_millis(200)).await.unwrap_err();
    assert!(matches!(err, BusError::Timeout { .. }), "{err:?}");
}
