//! MCP log notifications (`logging/setLevel`): real clients set a level and
//! hear of their own session's notable events (a cell stopped at its
//! deadline, an approval asked, a cell refused by `--max-cells-per-session`,
//! a cell that found no runner with room over NATS)
//! at or above it, with the logger `code-mode`; a level above an event's
//! keeps it back, and another session never hears of them. The official
//! Python SDK over streamable HTTP with bearer tokens, and rmcp's client
//! over stdio, against the real sandbox.

#![allow(deprecated)] // MCP logging is deprecated from 2026-07-28 on; these clients speak 2025-11-25.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Value, json};

use crate::auth::{TokenFile, bearer, serve, token_new};
use crate::http::run_python;
use crate::support::{self, Deployment, report};

/// The events of a list of notifications as the Python client prints them.
fn events(logs: &Value) -> Vec<String> {
    logs.as_array().unwrap().iter().map(|l| l["data"]["event"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test]
async fn log_notifications_reach_only_their_own_session_at_or_above_the_level_it_chose() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    // The deadline stops Alice's stuck cells; Bob's one-second cells fit in
    // it with room for a cold container's start on a loaded machine (at 3 s
    // one of them was once stopped there).
    let (_serve, url, _log) = serve(&["--auth-tokens", tokens.arg(), "--deadline", "6"]).await;

    let stuck = json!({"op": "call", "tool": "run_python", "arguments": {"code": "import time\ntime.sleep(60)"}});
    // Alice hears of warnings: her cell stopped at the deadline; at error,
    // a second one stopped is kept back.
    let alice_steps = json!([
        {"op": "set_level", "level": "warning"},
        {"op": "call", "tool": "run_python", "arguments": {"code": "print('fine')"}},
        stuck,
        {"op": "logs", "at_least": 1, "wait": 14},
        {"op": "set_level", "level": "error"},
        stuck,
        {"op": "logs", "at_least": 2, "wait": 4},
    ]);
    // Bob hears of everything of his own, while Alice's cells run and stop.
    let bob_steps = json!([
        {"op": "set_level", "level": "debug"},
        {"op": "call", "tool": "run_python", "arguments": {"code": "import time\ntime.sleep(1)\nprint('bob')"}},
        {"op": "call", "tool": "run_python", "arguments": {"code": "import time\ntime.sleep(1)\nprint('bob')"}},
        {"op": "logs", "at_least": 4, "wait": 10},
    ]);
    let (alice_header, bob_header) =
        (format!("Authorization: {}", bearer(&alice)), format!("Authorization: {}", bearer(&bob)));
    let alice_args = ["--url", &url, "--mode", "legacy", "--header", &alice_header];
    let bob_args = ["--url", &url, "--mode", "legacy", "--header", &bob_header];
    let (alice_ran, bob_ran) =
        tokio::join!(support::python_sdk(&alice_args, &alice_steps), support::python_sdk(&bob_args, &bob_steps));
    let (Some((alice_results, _)), Some((bob_results, _))) = (alice_ran, bob_ran) else { return };
    for result in alice_results.iter().chain(&bob_results) {
        assert!(result.get("error").is_none(), "a step failed: {result}");
    }
    assert_eq!(alice_results[2]["result"]["structuredContent"]["stopped"], true, "{alice_results:?}");

    let alice_logs = &alice_results[3]["result"];
    assert_eq!(events(alice_logs), ["cell_stopped"], "warnings only: {alice_logs}");
    let stopped = &alice_logs[0];
    assert_eq!((stopped["level"].as_str(), stopped["logger"].as_str()), (Some("warning"), Some("code-mode")));
    assert!(stopped["data"]["message"].as_str().unwrap().contains("deadline"), "{stopped}");
    assert_eq!(events(&alice_results[6]["result"]), ["cell_stopped"], "a warning is kept back at error");

    let bob_logs = &bob_results[3]["result"];
    assert_eq!(events(bob_logs), ["cell_started", "cell_ended", "cell_started", "cell_ended"], "{bob_logs}");
    assert!(bob_logs.as_array().unwrap().iter().all(|l| l["level"] == "debug" && l["logger"] == "code-mode"));
    let alice_cell = stopped["data"]["cell"].as_str().unwrap();
    for (name, logs) in [("bob", bob_logs), ("alice", alice_logs)] {
        let text = logs.to_string();
        assert!(!text.contains(&alice.token[3..]) && !text.contains(&bob.token[3..]), "a token in {name}'s: {text}");
    }
    assert!(!bob_logs.to_string().contains(alice_cell), "bob heard of alice's cell: {bob_logs}");
}

/// An MCP client that approves every question (unless it declares no
/// elicitation) and keeps the log notifications it gets.
#[derive(Clone, Default)]
struct Listener {
    heard: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    no_elicitation: bool,
}

impl Listener {
    async fn heard(&self, at_least: usize) -> Vec<LoggingMessageNotificationParam> {
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while self.heard.lock().unwrap().len() < at_least && std::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.heard.lock().unwrap().clone()
    }
}

impl ClientHandler for Listener {
    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        self.heard.lock().unwrap().push(params);
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({})))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if !self.no_elicitation {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }
}

#[tokio::test]
async fn over_stdio_a_client_at_notice_hears_of_an_approval_asked_and_a_cell_refused_by_the_session_limit() {
    if !support::sandbox_available() {
        return;
    }
    let policy = support::log_path("log-policy").with_extension("json");
    std::fs::write(&policy, r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#)
        .unwrap();
    let listener = Listener::default();
    let args = ["--policy", policy.to_str().unwrap(), "--max-cells-per-session", "1"];
    let (client, _pid, _guards) = support::start_with(Deployment::AllInOne, &args, &[], listener.clone()).await;

    // Before a level is set, nothing is told.
    let ran = run_python(&client, "print(await echo({'text': 'hi'}))").await;
    assert_eq!(report(&ran)["stdout"], "hi\n");
    assert!(listener.heard(0).await.is_empty(), "nothing before logging/setLevel");

    client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Notice)).await.expect("setLevel answers");
    let ran = run_python(&client, "print(await echo({'text': 'launch-code-4711'}))").await;
    assert_eq!(report(&ran)["stdout"], "launch-code-4711\n");
    let heard = listener.heard(1).await;
    assert_eq!(heard.len(), 1, "only the approval, no debug cell events: {heard:?}");
    assert_eq!((heard[0].level, heard[0].logger.as_deref()), (LoggingLevel::Notice, Some("code-mode")));
    assert_eq!(heard[0].data["event"], "approval_asked");
    assert_eq!((heard[0].data["tool"].as_str(), heard[0].data["rule"].as_str()), (Some("echo"), Some("/tools/echo")));
    assert!(!heard[0].data.to_string().contains("launch-code"), "no argument values: {}", heard[0].data);

    // A second cell while the first runs is over --max-cells-per-session.
    let slow = run_python(&client, "import asyncio\nawait asyncio.sleep(3)\nprint('slow')");
    let second = async {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        run_python(&client, "print('second')").await
    };
    let (slow, second) = tokio::join!(slow, second);
    assert_eq!(report(&slow)["stdout"], "slow\n");
    assert_eq!(second.is_error, Some(true));
    let heard = listener.heard(2).await;
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert_eq!((heard[1].level, heard[1].data["event"].as_str()), (LoggingLevel::Warning, Some("cell_refused")));
    assert_eq!(heard[1].data["limit"], "--max-cells-per-session");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(policy);
}

#[tokio::test]
async fn a_client_at_warning_that_cannot_be_asked_hears_that_a_call_needing_approval_was_refused() {
    if !support::sandbox_available() {
        return;
    }
    let policy = support::log_path("log-refused").with_extension("json");
    std::fs::write(&policy, r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#)
        .unwrap();
    let listener = Listener { no_elicitation: true, ..Listener::default() };
    let args = ["--policy", policy.to_str().unwrap()];
    let (client, _pid, _guards) = support::start_with(Deployment::AllInOne, &args, &[], listener.clone()).await;
    client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Warning)).await.expect("setLevel answers");
    let code = "try:\n    await echo({'text': 'launch-code-4711'})\nexcept ToolError as e:\n    print('refused')";
    assert_eq!(report(&run_python(&client, code).await)["stdout"], "refused\n");
    let heard = listener.heard(1).await;
    assert_eq!(heard.len(), 1, "only the refusal, no debug cell events: {heard:?}");
    assert_eq!((heard[0].level, heard[0].data["event"].as_str()), (LoggingLevel::Warning, Some("approval_refused")));
    assert_eq!((heard[0].data["tool"].as_str(), heard[0].data["rule"].as_str()), (Some("echo"), Some("/tools/echo")));
    assert!(!heard[0].data.to_string().contains("launch-code"), "no argument values: {}", heard[0].data);
    client.cancel().await.ok();
    let _ = std::fs::remove_file(policy);
}

#[tokio::test]
async fn over_nats_a_client_at_error_hears_that_a_cell_failed_for_no_capacity_and_nothing_less() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else {
        panic!("nats-server is needed for the split deployment");
    };
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    let _runner = support::spawn_service(&nats.url(), &users, "sandbox-runner", &["--capacity", "1"], None);
    let frontend = support::service_command(&nats.url(), &users, "frontend", &["--capacity-wait", "1"], None);
    let listener = Listener::default();
    let (client, _pid) = support::connect_client_with(frontend, listener.clone()).await;
    client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Error)).await.expect("setLevel answers");

    // The one runner slot is taken by the first cell; the second waits 1 s
    // for a slot (--capacity-wait) and fails.
    let slow = run_python(&client, "import time\ntime.sleep(4)\nprint('slow')");
    let second = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        run_python(&client, "print('second')").await
    };
    let (slow, second) = tokio::join!(slow, second);
    assert_eq!(report(&slow)["stdout"], "slow\n");
    assert_eq!(second.is_error, Some(true), "{second:?}");
    assert!(format!("{:?}", second.content).contains("no sandbox-runner had room"), "{second:?}");
    let heard = listener.heard(1).await;
    assert_eq!(heard.len(), 1, "only the failure, nothing below error: {heard:?}");
    assert_eq!((heard[0].level, heard[0].logger.as_deref()), (LoggingLevel::Error, Some("code-mode")));
    assert_eq!(
        (heard[0].data["event"].as_str(), heard[0].data["reason"].as_str()),
        (Some("cell_failed"), Some("no_capacity"))
    );
    assert!(heard[0].data["message"].as_str().unwrap().contains("no sandbox-runner had room"), "{heard:?}");
    client.cancel().await.ok();
}
