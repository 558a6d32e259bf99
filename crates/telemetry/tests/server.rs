//! The metrics server live on a loopback port: scraped over a real socket,
//! its exposition parsed, its health endpoint answered, and its stop on the
//! cancellation token.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use code_mode_telemetry::scrape::{Exposition, HttpResponse, http_get};
use code_mode_telemetry::{CellOutcome, Decision, MetricsServer};
use tokio_util::sync::CancellationToken;

async fn get(addr: SocketAddr, path: &'static str) -> HttpResponse {
    tokio::task::spawn_blocking(move || http_get(addr, path)).await.unwrap().expect("the server answers")
}

async fn scrape(addr: SocketAddr) -> Exposition {
    let response = get(addr, "/metrics").await;
    assert_eq!(response.status, 200, "{response:?}");
    assert!(response.header("content-type").unwrap_or("").starts_with("text/plain; version=0.0.4"), "{response:?}");
    Exposition::parse(&response.body).expect("the scrape is valid exposition text")
}

#[tokio::test]
async fn a_scrape_shows_what_was_recorded_with_its_labels_and_types() {
    let cancel = CancellationToken::new();
    let server = MetricsServer::start("127.0.0.1:0", "sandbox-runner", cancel.clone()).await.unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0, "the real port is reported");

    let before = scrape(addr).await;
    code_mode_telemetry::cell_ended(CellOutcome::Finished, Duration::from_millis(300));
    code_mode_telemetry::cell_ended(CellOutcome::Deadline, Duration::from_secs(91));
    code_mode_telemetry::cell_ended(CellOutcome::Deadline, Duration::from_secs(95));
    code_mode_telemetry::tool_call("srv-a", "add", Decision::Ok, Duration::from_millis(3));
    code_mode_telemetry::tool_call("srv-a", "add", Decision::Refused, Duration::from_micros(80));
    code_mode_telemetry::container_started();
    code_mode_telemetry::container_removed(true);
    code_mode_telemetry::containers_reaped(2);
    code_mode_telemetry::bus_request("test.subject.scrape", &["no_responders", "timeout"]);
    code_mode_telemetry::bus_request("test.subject.scrape", &["no_responders", "timeout"]);
    code_mode_telemetry::bus_request_error("test.subject.scrape", "no_responders");
    code_mode_telemetry::set_warm_pool_size(4);
    let after = scrape(addr).await;

    let delta =
        |name: &str, labels: &[(&str, &str)]| after.value_or_zero(name, labels) - before.value_or_zero(name, labels);
    assert_eq!(delta("codemode_cells_total", &[("outcome", "finished")]), 1.0);
    assert_eq!(delta("codemode_cells_total", &[("outcome", "deadline")]), 2.0);
    assert_eq!(delta("codemode_cell_duration_seconds_count", &[("outcome", "deadline")]), 2.0);
    // 91 s and 95 s both fall above the 90 s bucket and within 120 s.
    assert_eq!(delta("codemode_cell_duration_seconds_bucket", &[("outcome", "deadline"), ("le", "90")]), 0.0);
    assert_eq!(delta("codemode_cell_duration_seconds_bucket", &[("outcome", "deadline"), ("le", "120")]), 2.0);
    let call = |decision| [("server", "srv-a"), ("tool", "add"), ("decision", decision)];
    assert_eq!(delta("codemode_tool_calls_total", &call("ok")), 1.0);
    assert_eq!(delta("codemode_tool_calls_total", &call("refused")), 1.0);
    assert_eq!(delta("codemode_tool_calls_total", &call("fault")), 0.0);
    assert_eq!(delta("codemode_tool_call_duration_seconds_count", &call("ok")), 1.0);
    assert_eq!(delta("codemode_containers_started_total", &[]), 1.0);
    assert_eq!(delta("codemode_containers_removed_total", &[("result", "removed")]), 1.0);
    assert_eq!(delta("codemode_containers_reaped_total", &[]), 2.0);
    assert_eq!(
        delta("codemode_bus_request_errors_total", &[("subject", "test.subject.scrape"), ("kind", "no_responders")]),
        1.0
    );
    assert_eq!(delta("codemode_bus_requests_total", &[("subject", "test.subject.scrape")]), 2.0);
    assert_eq!(
        after.value("codemode_bus_request_errors_total", &[("subject", "test.subject.scrape"), ("kind", "timeout")]),
        Some(0.0),
        "the first request of a subject starts its error series at 0"
    );
    assert_eq!(after.value("codemode_warm_pool_size", &[]), Some(4.0));
    assert_eq!(
        after.value("codemode_service_info", &[("service", "sandbox-runner"), ("version", env!("CARGO_PKG_VERSION"))]),
        Some(1.0)
    );

    assert_eq!(after.types["codemode_cells_total"], "counter");
    assert_eq!(after.types["codemode_cell_duration_seconds"], "histogram");
    assert_eq!(after.types["codemode_tool_call_duration_seconds"], "histogram");
    assert_eq!(after.types["codemode_warm_pool_size"], "gauge");

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), server.stopped()).await.expect("the server stops on its token");
}

#[tokio::test]
async fn healthz_answers_200_with_the_service_name() {
    let cancel = CancellationToken::new();
    let server = MetricsServer::start("127.0.0.1:0", "bridge", cancel.clone()).await.unwrap();
    let response = get(server.local_addr(), "/healthz").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_str(&response.body).expect("JSON");
    assert_eq!(body, serde_json::json!({ "service": "bridge", "ok": true }));
    assert_eq!(get(server.local_addr(), "/nothing-here").await.status, 404);
    cancel.cancel();
    server.stopped().await;
}

#[tokio::test]
async fn once_its_token_fires_the_server_stops_listening() {
    let cancel = CancellationToken::new();
    let server = MetricsServer::start("127.0.0.1:0", "frontend", cancel.clone()).await.unwrap();
    let addr = server.local_addr();
    assert_eq!(get(addr, "/healthz").await.status, 200);
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), server.stopped()).await.expect("the server stops on its token");
    let refused = tokio::task::spawn_blocking(move || http_get(addr, "/healthz")).await.unwrap();
    assert!(refused.is_err(), "nothing answers after the stop: {refused:?}");
}

#[tokio::test]
async fn an_address_already_in_use_is_an_error_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = MetricsServer::start(&addr, "bridge", CancellationToken::new()).await.unwrap_err();
    assert!(err.to_string().contains(&addr), "{err}");
}
