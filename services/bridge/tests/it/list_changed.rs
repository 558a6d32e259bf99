//! A wrapped server whose tool list changes while the bridge runs
//! (`notifications/tools/list_changed`, or other tools after a restart):
//! the bridge rebuilds its catalog with the same rules and a higher version.

use code_mode_core::testing::HttpTestServer;
use std::time::Duration;

use code_mode_bridge::server::{HttpSpec, ServerSpec, Transport};
use code_mode_bridge::{Bridge, BridgeConfig, CallLimits, WrappedServer};
use code_mode_core::state::SessionStore;
use code_mode_proto::{ErrorKind, ToolReply};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{Harness, Setup, ok, refused, tool_call};

/// Wait until the catalog's version is above `version`; return the new one.
async fn version_above(h: &Harness, version: u64) -> u64 {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = h.bridge.catalog_version();
        if now > version {
            return now;
        }
        assert!(tokio::time::Instant::now() < give_up, "the catalog stayed at version {version} for 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_tool_the_server_adds_at_runtime_joins_the_catalog_with_a_higher_version_and_can_be_called() {
    let h = Harness::with_args(&["--add-tool"]).await;
    let before = h.bridge.catalog_version();
    assert!(h.bridge.catalog().get("late_tool").is_none());
    assert!(refused(h.call("late_tool", json!({})).await).contains("there is no tool named"));

    assert_eq!(ok(h.call("add_tool", json!({"name": "late-tool"})).await), "added late-tool");
    let after = version_above(&h, before).await;

    let catalog = h.bridge.catalog();
    let tool = catalog.get("late_tool").expect("the new tool is in the catalog under its Python name");
    assert_eq!(tool.mcp_name, "late-tool");
    assert!(tool.stub.contains("late_tool("), "{}", tool.stub);
    assert!(catalog.get("add").is_some(), "the other tools stay");
    let message = h.bridge.catalog_message();
    assert_eq!(message.version, after);
    assert!(message.tools.iter().any(|t| t.name == "late_tool" && t.stub.contains("Added at runtime")));

    assert_eq!(ok(h.call("late_tool", json!({})).await), "ok late-tool");
    assert_eq!(h.calls_seen(), ["add_tool", "late-tool"]);
    h.close().await;
}

#[tokio::test]
async fn with_an_allowlist_a_tool_the_server_adds_at_runtime_stays_out() {
    let h = Setup::server(&["--add-tool"]).allow(&["add_tool", "echo"]).start().await.expect("starts");
    let before = h.bridge.catalog_version();

    assert_eq!(ok(h.call("add_tool", json!({"name": "late"})).await), "added late");
    version_above(&h, before).await;

    let catalog = h.bridge.catalog();
    assert!(catalog.get("late").is_none(), "the allowlist is explicit");
    assert!(catalog.is_not_kept("late"), "the new tool is known as listed but not kept");
    let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "add_tool"]);
    assert!(refused(h.call("late", json!({})).await).contains("not on the allowlist"));
    assert_eq!(h.calls_seen(), ["add_tool"], "the refused call never reached the server");
    h.close().await;
}

#[tokio::test]
async fn a_restarted_server_with_other_tools_refreshes_the_catalog() {
    let h = Harness::with_args(&["--add-tool"]).await;
    assert_eq!(ok(h.call("add_tool", json!({"name": "late"})).await), "added late");
    let with_late = version_above(&h, 1).await;
    assert!(h.bridge.catalog().get("late").is_some());

    // The restarted process lists only its built-in tools.
    assert_eq!(h.call("crash", json!({})).await, ToolReply::Fault { kind: ErrorKind::TransportClosed });
    version_above(&h, with_late).await;
    assert!(h.bridge.catalog().get("late").is_none(), "the tool the old process added is gone");
    assert!(refused(h.call("late", json!({})).await).contains("there is no tool named"));
    h.close().await;
}

#[tokio::test]
async fn a_change_that_would_clash_keeps_the_old_catalog() {
    let h = Harness::with_args(&["--add-tool"]).await;
    // `get_weather` would take the Python name of the listed `get-weather`.
    assert_eq!(ok(h.call("add_tool", json!({"name": "get_weather"})).await), "added get_weather");
    // A later, valid change is refused too while the clash stays: wait long
    // enough for a refresh to have happened, then check nothing moved.
    assert_eq!(ok(h.call("add_tool", json!({"name": "fine"})).await), "added fine");
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(h.bridge.catalog_version(), 1, "no catalog with a clash");
    let catalog = h.bridge.catalog();
    assert_eq!(catalog.get("get_weather").expect("kept").mcp_name, "get-weather", "the old catalog stays");
    assert!(catalog.get("fine").is_none());
    assert_eq!(ok(h.call("get_weather", json!({"city": "Oslo"})).await), "ok get-weather");
    h.close().await;
}

#[tokio::test]
async fn a_remote_server_that_adds_a_tool_over_http_refreshes_the_catalog() {
    let server = HttpTestServer::start("127.0.0.1:0", &["--add-tool"]);
    let url = server.url.clone();
    let config = BridgeConfig {
        servers: vec![WrappedServer {
            spec: ServerSpec {
                name: "remote".into(),
                transport: Transport::Http(HttpSpec { url, headers: Vec::new(), auth: None }),
                start_timeout: Duration::from_secs(20),
            },
            allow: None,
            private: Vec::new(),
            policy: None,
            origin: code_mode_bridge::Origin::Flags,
        }],
        prefixed: false,
        limits: CallLimits { call_timeout: Duration::from_secs(10), ..CallLimits::default() },
        catalog: Default::default(),
        state: SessionStore::in_memory(),
        policy_options: Default::default(),
    };
    let cancel = CancellationToken::new();
    let (bridge, closer) = Bridge::start(config, cancel.clone()).await.expect("the bridge starts");

    assert_eq!(ok(bridge.call(&tool_call("add_tool", json!({"name": "late"}), 1)).await), "added late");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while bridge.catalog_version() == 1 {
        assert!(tokio::time::Instant::now() < give_up, "the catalog was not refreshed within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(bridge.catalog().get("late").is_some());
    assert_eq!(ok(bridge.call(&tool_call("late", json!({}), 2)).await), "ok late");

    cancel.cancel();
    closer.closed().await;
}

/// A call of a client that set a log level: it goes over a session of that
/// client's own with the server (a child process of its own for a stdio
/// server).
fn own_session_call(tool: &str, arguments: serde_json::Value) -> code_mode_proto::ToolCall {
    let link = code_mode_proto::ClientLink { log_level: Some("info".into()), ..Default::default() };
    code_mode_proto::ToolCall {
        session: "listening".into(),
        asker: Some("listening".into()),
        link: Some(link),
        file_in: false,
        ..tool_call(tool, arguments, 1)
    }
}

#[tokio::test]
async fn a_tool_a_stdio_server_adds_on_one_clients_own_session_is_offered_to_nobody() {
    let h = Harness::with_args(&["--add-tool"]).await;
    // The client's own child process adds the tool and announces it there:
    // the bridge lists again on the shared session, which has no such tool.
    assert_eq!(ok(h.bridge.call(&own_session_call("add_tool", json!({"name": "own-tool"}))).await), "added own-tool");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.bridge.catalog_version(), 1, "the catalog did not follow the client's own session");
    assert!(h.bridge.catalog().get("own_tool").is_none());
    assert!(refused(h.call("own_tool", json!({})).await).contains("there is no tool named"));
    // A change on the shared session still reaches the catalog.
    assert_eq!(ok(h.call("add_tool", json!({"name": "shared-tool"})).await), "added shared-tool");
    version_above(&h, 1).await;
    let catalog = h.bridge.catalog();
    assert!(catalog.get("shared_tool").is_some());
    assert!(catalog.get("own_tool").is_none(), "still offered to nobody");
    h.close().await;
}

#[tokio::test]
async fn a_tool_a_remote_server_announces_only_on_one_clients_own_session_is_listed_on_the_shared_one() {
    // One process serves every session, so what one session adds all have;
    // the server announces it only on the session whose call added it.
    let server = HttpTestServer::start("127.0.0.1:0", &["--add-tool"]);
    let config = BridgeConfig {
        servers: vec![WrappedServer {
            spec: ServerSpec {
                name: "remote".into(),
                transport: Transport::Http(HttpSpec { url: server.url.clone(), headers: Vec::new(), auth: None }),
                start_timeout: Duration::from_secs(20),
            },
            allow: None,
            private: Vec::new(),
            policy: None,
            origin: code_mode_bridge::Origin::Flags,
        }],
        prefixed: false,
        limits: CallLimits { call_timeout: Duration::from_secs(10), ..CallLimits::default() },
        catalog: Default::default(),
        state: SessionStore::in_memory(),
        policy_options: Default::default(),
    };
    let cancel = CancellationToken::new();
    let (bridge, closer) = Bridge::start(config, cancel.clone()).await.expect("the bridge starts");

    assert_eq!(ok(bridge.call(&own_session_call("add_tool", json!({"name": "late"}))).await), "added late");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while bridge.catalog_version() == 1 {
        assert!(tokio::time::Instant::now() < give_up, "the catalog was not refreshed within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(bridge.catalog().get("late").is_some());
    // Called over the shared session, which lists it.
    assert_eq!(ok(bridge.call(&tool_call("late", json!({}), 2)).await), "ok late");

    cancel.cancel();
    closer.closed().await;
}
