//! Serving over the bus, and closing.

use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_proto::{self as proto, CatalogRequest, ErrorKind, ToolCall, ToolReply, subjects};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{Setup, child_with_arg, gone_within, read_proc, tool_call};

#[tokio::test]
async fn the_bridge_answers_catalog_requests_and_tool_calls_over_the_in_process_bus() {
    let h = Setup::default().start().await.expect("starts");
    let bus = Bus::in_process();
    let serving = CancellationToken::new();
    let tasks = h.bridge.serve(&bus, serving.clone()).await.expect("serves");
    let timeout = Duration::from_secs(10);

    let catalog: proto::Catalog = bus
        .call(subjects::CATALOG_GET, &CatalogRequest { session: "it".into(), known: None, direct: false }, timeout)
        .await
        .expect("the catalog comes back");
    assert_eq!(catalog, h.bridge.catalog_message());
    assert!(catalog.tools.iter().any(|t| t.name == "na_ve" && t.mcp_name == "naïve"));

    let call = tool_call("add", json!({"a": 2, "b": 3}), 1);
    let reply: ToolReply = bus.call(subjects::TOOL_CALL, &call, timeout).await.expect("a reply");
    assert_eq!(reply, ToolReply::Ok { value: r#"{"sum":5}"#.into() });

    let call = ToolCall {
        target: code_mode_proto::Target::Tool("add".into()),
        arguments: json!({"a": "x", "b": 3}),
        ..tool_call("", json!({}), 2)
    };
    let reply: ToolReply = bus.call(subjects::TOOL_CALL, &call, timeout).await.expect("a reply");
    assert!(matches!(&reply, ToolReply::Refused { message } if message.contains("at /a")), "{reply:?}");

    let reply: ToolReply =
        bus.call(subjects::TOOL_CALL, &tool_call("protocol_error", json!({}), 3), timeout).await.expect("a reply");
    assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::McpError });
    assert_eq!(h.calls_seen(), ["add", "protocol_error"]);

    serving.cancel();
    for task in tasks {
        tokio::time::timeout(timeout, task).await.expect("serving stops").expect("no panic");
    }
    h.close().await;
}

#[tokio::test]
async fn cancelling_the_token_and_awaiting_closed_leaves_no_server_process() {
    let h = Setup::default().start().await.expect("starts");
    let log = h.log.display().to_string();
    let child = child_with_arg(&log).expect("the test server is a child of this process");
    // The kernel keeps 15 characters of the name.
    assert_eq!(child.comm, "code-mode-test-");
    assert!(read_proc(child.pid).is_some());

    h.cancel.cancel();
    tokio::time::timeout(Duration::from_secs(15), h.closer.closed()).await.expect("closes within 15 s");
    // Closed means reaped: no process, not even a zombie, right away.
    assert!(read_proc(child.pid).is_none(), "after closed(): {:?}", read_proc(child.pid));
    assert!(child_with_arg(&log).is_none());
    // The bridge handle outlives the servers and answers with faults, not hangs.
    let reply = tokio::time::timeout(Duration::from_secs(10), h.bridge.call(&tool_call("count", json!({}), 1)))
        .await
        .expect("a closed bridge answers");
    assert!(matches!(reply, ToolReply::Fault { .. }), "{reply:?}");
    assert!(gone_within(child.pid, Duration::from_millis(1)).await);
}

#[tokio::test]
async fn dropping_every_bridge_handle_closes_the_server() {
    let h = Setup::default().start().await.expect("starts");
    let log = h.log.display().to_string();
    let child = child_with_arg(&log).expect("the test server is a child of this process");
    drop(h.bridge);
    tokio::time::timeout(Duration::from_secs(15), h.closer.closed()).await.expect("closes within 15 s");
    assert!(read_proc(child.pid).is_none(), "after closed(): {:?}", read_proc(child.pid));
}
