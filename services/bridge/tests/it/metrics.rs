//! The bridge's metrics, scraped over HTTP from a live metrics server while
//! the bridge decides real calls to the real test server.

use std::net::SocketAddr;
use std::time::Duration;

use code_mode_bridge::server::{ServerSpec, StdioSpec, Transport};
use code_mode_bridge::{Bridge, BridgeConfig, CallLimits, WrappedServer};
use code_mode_proto::{ErrorKind, ToolReply};
use code_mode_telemetry::MetricsServer;
use code_mode_telemetry::scrape::{Exposition, http_get};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{test_server, tool_call, unique_path};

/// A server name no other test uses, so the labels are this test's own.
const SERVER: &str = "metrics-it";

async fn scrape(addr: SocketAddr) -> Exposition {
    let response = tokio::task::spawn_blocking(move || http_get(addr, "/metrics")).await.unwrap().expect("a scrape");
    assert_eq!(response.status, 200);
    Exposition::parse(&response.body).expect("valid exposition text")
}

#[tokio::test]
async fn each_decision_counts_once_by_server_tool_and_decision_and_is_timed() {
    let cancel = CancellationToken::new();
    let metrics = MetricsServer::start("127.0.0.1:0", "bridge", cancel.clone()).await.expect("metrics server");
    let log = unique_path("metrics");
    let config = BridgeConfig {
        servers: vec![WrappedServer {
            spec: ServerSpec {
                name: SERVER.into(),
                transport: Transport::Stdio(StdioSpec {
                    command: test_server(),
                    args: vec!["--log".into(), log.display().to_string()],
                    pass_env: vec![],
                    set_env: vec![],
                }),
                start_timeout: Duration::from_secs(20),
            },
            allow: Some(vec!["add".into(), "protocol_error".into()]),
            private: vec![],
            policy: None,
            origin: code_mode_bridge::Origin::Flags,
        }],
        prefixed: false,
        limits: CallLimits { call_timeout: Duration::from_secs(10), ..CallLimits::default() },
        catalog: Default::default(),
        state: code_mode_core::state::SessionStore::in_memory(),
        policy_options: Default::default(),
    };
    let (bridge, closer) = Bridge::start(config, cancel.child_token()).await.expect("the bridge starts");
    let before = scrape(metrics.local_addr()).await;

    let ok = bridge.call(&tool_call("add", json!({"a": 2, "b": 3}), 1)).await;
    assert!(matches!(ok, ToolReply::Ok { .. }), "{ok:?}");
    let refused = bridge.call(&tool_call("add", json!({"a": "two", "b": 3}), 2)).await;
    assert!(matches!(refused, ToolReply::Refused { .. }), "{refused:?}");
    let refused_again = bridge.call(&tool_call("add", json!({"a": 1, "b": 1}), 10_000)).await;
    assert!(matches!(refused_again, ToolReply::Refused { .. }), "over the budget: {refused_again:?}");
    let fault = bridge.call(&tool_call("protocol_error", json!({}), 3)).await;
    assert_eq!(fault, ToolReply::Fault { kind: ErrorKind::McpError });
    let made_up = bridge.call(&tool_call("tool_the_code_made_up_1234", json!({}), 4)).await;
    assert!(matches!(made_up, ToolReply::Refused { .. }), "{made_up:?}");

    let after = scrape(metrics.local_addr()).await;
    let delta =
        |name: &str, labels: &[(&str, &str)]| after.value_or_zero(name, labels) - before.value_or_zero(name, labels);
    let labels = |tool, decision| [("server", SERVER), ("tool", tool), ("decision", decision)];
    assert_eq!(delta("codemode_tool_calls_total", &labels("add", "ok")), 1.0);
    assert_eq!(delta("codemode_tool_calls_total", &labels("add", "refused")), 2.0);
    assert_eq!(delta("codemode_tool_calls_total", &labels("protocol_error", "fault")), 1.0);
    assert_eq!(delta("codemode_tool_calls_total", &labels("add", "fault")), 0.0);
    assert_eq!(delta("codemode_tool_call_duration_seconds_count", &labels("add", "refused")), 2.0);
    assert_eq!(delta("codemode_tool_call_duration_seconds_count", &labels("protocol_error", "fault")), 1.0);
    assert!(delta("codemode_tool_call_duration_seconds_sum", &labels("add", "ok")) > 0.0, "the ok call took time");
    // A name outside the catalog is counted without becoming a label value.
    let unknown = [("server", "<none>"), ("tool", "<unknown>"), ("decision", "refused")];
    assert!(delta("codemode_tool_calls_total", &unknown) >= 1.0);
    assert!(
        !after.samples.iter().any(|s| s.labels.values().any(|v| v.contains("made_up"))),
        "no series names the made-up tool"
    );

    cancel.cancel();
    closer.closed().await;
    metrics.stopped().await;
}
