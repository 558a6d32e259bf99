//! A wrapped server that adds a tool while code-mode runs: the MCP client is
//! told (`notifications/tools/list_changed`), the `run_python` description
//! then carries the new stub, and later cells see and call the tool; a client
//! that set a log level also hears `tools_changed`.
//!
//! The server is a remote one, whose one process serves every session: the
//! client set a log level, so its cell's call goes over a session of its
//! own, where alone the server announces the change; the bridge lists the
//! tools again on the shared session, which has the new tool too. (A tool a
//! stdio server adds in a client's own process is offered to nobody: bridge
//! `list_changed::a_tool_a_stdio_server_adds_on_one_clients_own_session_is_offered_to_nobody`.)

#![allow(deprecated)] // MCP logging is deprecated from 2026-07-28 on; these clients speak 2025-11-25.

use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RoleClient};
use serde_json::json;
use tokio::sync::mpsc;

use code_mode_core::testing::HttpTestServer;

use crate::support::{self, Deployment, start_remote_with, stdout_of};

/// A client handler that records each `notifications/tools/list_changed`
/// and the `event` of each log notification.
struct Recorder {
    seen: mpsc::Sender<()>,
    logged: mpsc::Sender<String>,
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.seen.try_send(());
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        let _ = self.logged.try_send(params.data["event"].as_str().unwrap_or_default().to_string());
    }
}

async fn run_python(peer: &Peer<RoleClient>, code: &str) -> CallToolResult {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    peer.call_tool(params).await.expect("run_python answers")
}

async fn description(peer: &Peer<RoleClient>) -> String {
    let tools = peer.list_all_tools().await.expect("tools/list answers");
    assert_eq!(tools.len(), 1);
    tools[0].description.as_deref().unwrap().to_string()
}

mod all_in_one {
    #[tokio::test]
    async fn a_tool_a_wrapped_server_adds_reaches_the_client_and_later_cells() {
        super::a_tool_a_wrapped_server_adds_reaches_the_client_and_later_cells(super::Deployment::AllInOne).await
    }
}

mod over_nats {
    #[tokio::test]
    async fn a_tool_a_wrapped_server_adds_reaches_the_client_and_later_cells() {
        super::a_tool_a_wrapped_server_adds_reaches_the_client_and_later_cells(super::Deployment::OverNats).await
    }
}

async fn a_tool_a_wrapped_server_adds_reaches_the_client_and_later_cells(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (seen, mut notified) = mpsc::channel(16);
    let (logged, mut log) = mpsc::channel(16);
    let server = HttpTestServer::start("127.0.0.1:0", &["--add-tool"]);
    let (client, _, _guards) = start_remote_with(deployment, &[], &server.url, Recorder { seen, logged }).await;
    let peer = client.peer().clone();
    peer.set_level(SetLevelRequestParams::new(LoggingLevel::Info)).await.expect("setLevel answers");
    let before = description(&peer).await;
    assert!(before.contains("async def add_tool("), "{before}");
    assert!(!before.contains("late_tool"), "{before}");

    let added = stdout_of(&run_python(&peer, "print(await add_tool({'name': 'late-tool'}))").await);
    assert_eq!(added.trim(), "added late-tool");

    tokio::time::timeout(Duration::from_secs(20), notified.recv())
        .await
        .expect("the client is told within 20 s that the tool list changed")
        .expect("the handler is alive");
    // At info, the session's log says so too (its cells' events are debug).
    let event = tokio::time::timeout(Duration::from_secs(10), log.recv()).await.expect("a log notification");
    assert_eq!(event.as_deref(), Some("tools_changed"));
    let after = description(&peer).await;
    assert!(after.contains("async def late_tool("), "the description carries the new stub: {after}");
    assert!(after.contains("Added at runtime by add_tool."), "{after}");

    let code = "print('late_tool' in TOOLS)\nprint(list(search_tools('late_tool'))[0])\nprint(await late_tool({}))";
    let lines: Vec<String> = stdout_of(&run_python(&peer, code).await).lines().map(str::to_string).collect();
    assert_eq!(lines[0], "True", "TOOLS has the new tool: {lines:?}");
    assert_eq!(lines[1], "late_tool", "search_tools finds it: {lines:?}");
    assert_eq!(lines[2], "ok late-tool", "the cell calls it: {lines:?}");
    client.cancel().await.unwrap();
}
