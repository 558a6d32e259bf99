//! Status notifications of `run_python` tasks: the client session that
//! created a task hears each change of its status (`notifications/tasks`,
//! the task as `tasks/get` would answer it), working, input required while
//! its cell waits for an answer, working again, then how it ended; another
//! client session hears nothing of it. `serve` over HTTP with a real Docker
//! cell, the real test server and rmcp's client (2025-11-25, which keeps a
//! session to be told on).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, DetailedTask, ElicitationCapability, FormElicitationCapability, InputResponses,
    TaskPayload, TaskStatus, TaskStatusNotificationParams, UpdateTaskParams,
};
use rmcp::service::{ClientServiceExt, NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::auth::{Client, TokenFile, token_new};
use crate::support::{self, log_path};

/// A client that declared tasks and form elicitation, keeping the task
/// status notes it hears.
#[derive(Clone, Default)]
struct Hears(Arc<Mutex<Vec<DetailedTask>>>);

impl Hears {
    fn statuses(&self, id: &str) -> Vec<TaskStatus> {
        self.0.lock().unwrap().iter().filter(|t| t.task.task_id == id).map(DetailedTask::status).collect()
    }
}

impl ClientHandler for Hears {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        let mut capabilities = ClientCapabilities::builder().enable_tasks().build();
        capabilities.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        info.capabilities = capabilities;
        info
    }

    async fn on_task_status(&self, params: TaskStatusNotificationParams, _context: NotificationContext<RoleClient>) {
        self.0.lock().unwrap().push(params.task);
    }
}

async fn connect(url: &str, client: &Client) -> (RunningService<RoleClient, Hears>, Hears) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(client.token.clone());
    let handler = Hears::default();
    let connected = handler
        .clone()
        .serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), crate::http::LEGACY())
        .await
        .expect("the MCP client connects with its token");
    (connected, handler)
}

/// `echo` needs the client's approval (no approvers in the console).
const ECHO_APPROVED_BY_CLIENT: &str =
    r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_python_tasks_status_changes_reach_the_session_that_created_it_and_no_other() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("task-notes").with_extension("json");
    std::fs::write(&policy, ECHO_APPROVED_BY_CLIENT).expect("the policy is written");
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--auth-tokens", tokens.arg(), "--policy"]);
    serve.arg(&policy).args(["--approval-timeout", "120", "--"]).arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let (as_alice, heard_by_alice) = connect(&url, &alice).await;
    let (as_bob, heard_by_bob) = connect(&url, &bob).await;

    let mut params = rmcp::model::CallToolRequestParams::new("run_python");
    let code = "import time\ntime.sleep(3)\nprint(await echo({'text': 'told'}))\n";
    params.arguments = json!({ "code": code }).as_object().cloned();
    let id = match as_alice.peer().call_tool_once(params).await.expect("run_python answers") {
        rmcp::model::CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a client that declared tasks gets a task handle, not {other:?}"),
    };
    // The note of input_required carries the question: answered from it.
    let asked = support::eventually(Duration::from_secs(60), || {
        heard_by_alice.statuses(&id).contains(&TaskStatus::InputRequired)
    })
    .await;
    assert!(asked, "alice heard her task ask: {:?}", heard_by_alice.statuses(&id));
    let key = heard_by_alice.0.lock().unwrap().iter().find_map(|task| match &task.payload {
        TaskPayload::InputRequired { input_requests } => input_requests.keys().next().cloned(),
        _ => None,
    });
    let mut responses = InputResponses::new();
    responses.insert(key.expect("the note carries the input request"), json!({"action": "accept", "content": {}}));
    as_alice.peer().update_task(UpdateTaskParams::new(&id, responses)).await.expect("tasks/update answers");
    let ended = support::eventually(Duration::from_secs(60), || {
        heard_by_alice.statuses(&id).last().is_some_and(|status| status.is_terminal())
    })
    .await;
    assert!(ended, "alice heard her task end: {:?}", heard_by_alice.statuses(&id));
    // Each change once: not every refresh of the status message.
    let expected = [TaskStatus::Working, TaskStatus::InputRequired, TaskStatus::Working, TaskStatus::Completed];
    assert_eq!(heard_by_alice.statuses(&id), expected);
    let completed = heard_by_alice.0.lock().unwrap().last().cloned().unwrap();
    let TaskPayload::Completed { result } = completed.payload else { panic!("{completed:?}") };
    let result: rmcp::model::CallToolResult = serde_json::from_value(result.into()).unwrap();
    assert_eq!(support::report(&result)["stdout"], "told\n", "the note carries the result inline");
    assert!(heard_by_bob.0.lock().unwrap().is_empty(), "bob heard nothing: {:?}", heard_by_bob.0.lock().unwrap());
    as_alice.cancel().await.ok();
    as_bob.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}
