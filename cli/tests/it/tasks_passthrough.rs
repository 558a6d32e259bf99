//! MCP Tasks (the tasks extension, SEP-2663) of wrapped servers: the
//! conformance suite's ten `tasks-*` server scenarios against
//! `code-mode-test-server --tasks` alone, and against code-mode in gateway
//! mode (`--expose-tools=only`) in front of it, in one process (`serve`,
//! the server over stdio and over streamable HTTP) and over NATS (the
//! frontend and the bridge apart); a task id answers only the identity
//! whose call created it; and a cell's call that the server makes a task
//! of waits for the task's result, and a cancelled cell cancels the task.

use std::time::Duration;

use code_mode_core::testing::NatsServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ClientRequest, GetTaskParams, Implementation, TaskStatus,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::auth::{TokenFile, token_new};
use crate::conformance::tasks_scenarios_pass;
use crate::support::{self, Deployment, log_path, service_command};
use crate::upstream::Server;

/// A socket no Docker engine listens on: the gateway needs none.
const NO_DOCKER: &str = "unix:///nonexistent/code-mode-test/docker.sock";

/// A gateway frontend (`serve ...` or `frontend ...`) on a free port: its
/// process, URL and log.
async fn gateway(
    mut command: tokio::process::Command,
) -> (tokio::process::Child, String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    command.env("DOCKER_HOST", NO_DOCKER).stdin(std::process::Stdio::null()).kill_on_drop(true);
    crate::http::spawn_http(&mut command).await
}

#[tokio::test]
async fn the_test_servers_task_fixtures_pass_the_ten_tasks_scenarios_alone() {
    let server = Server::start(0, &["--tasks"]);
    tasks_scenarios_pass("code-mode-test-server --tasks alone", &server.url).await;
}

#[tokio::test]
async fn through_serve_in_gateway_mode_a_wrapped_servers_tasks_pass_the_ten_tasks_scenarios() {
    // The task server over stdio.
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--"]).arg(support::test_server());
    serve.arg("--tasks");
    let (_stdio, url, _log) = gateway(serve).await;
    if tasks_scenarios_pass("serve --expose-tools=only -- test server --tasks (stdio)", &url).await.is_none() {
        return;
    }
    // Over streamable HTTP (`serve --url`).
    let server = Server::start(0, &["--tasks"]);
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--url", &server.url]);
    let (_http, url, _log) = gateway(serve).await;
    tasks_scenarios_pass("serve --expose-tools=only --url test server --tasks (HTTP)", &url).await;
}

#[tokio::test]
async fn over_nats_in_gateway_mode_a_wrapped_servers_tasks_pass_the_ten_tasks_scenarios() {
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let server = support::test_server().display().to_string();
    let mut bridge = service_command(&nats.url(), &users, "bridge", &["--", &server, "--tasks"], None);
    let _bridge = bridge.spawn().expect("the bridge starts");
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.args(["frontend", "--nats", &nats.url(), "--expose-tools=only", "--http", "127.0.0.1:0"]);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let (_frontend, url, _log) = gateway(frontend).await;
    tasks_scenarios_pass("frontend and bridge over NATS -- test server --tasks (stdio)", &url).await;
}

/// A client of the tasks extension.
fn tasks_client() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::builder().enable_tasks().build(), Implementation::new("tasks-test", "1"))
}

fn rpc_error(error: rmcp::service::ServiceError) -> (i32, String) {
    match error {
        rmcp::service::ServiceError::McpError(e) => (e.code.0, e.message.to_string()),
        other => panic!("a JSON-RPC error, not {other}"),
    }
}

#[tokio::test]
async fn a_wrapped_servers_task_answers_only_the_identity_that_created_it_and_another_identity_finds_no_such_task() {
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let audit = log_path("tasks-identity-audit");
    let calls = log_path("tasks-identity-server");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()]);
    serve.args(["--audit", audit.to_str().unwrap(), "--"]).arg(support::test_server());
    serve.args(["--tasks", "--log", calls.to_str().unwrap()]);
    let (_serve, url, _log) = gateway(serve).await;
    let as_alice = crate::auth::connect_as(&url, &alice, tasks_client()).await;
    let as_bob = crate::auth::connect_as(&url, &bob, tasks_client()).await;

    let mut params = CallToolRequestParams::new("slow_compute");
    params.arguments = json!({"seconds": 60, "label": "alice's"}).as_object().cloned();
    let created = match as_alice.call_tool_once(params).await.expect("the call is answered") {
        CallToolResponse::Task(created) => created,
        other => panic!("a task handle, not {other:?}"),
    };
    let id = created.task.task_id.clone();
    let got = as_alice.get_task(GetTaskParams::new(&id)).await.expect("alice sees her task");
    assert_eq!(got.task.status(), TaskStatus::Working);

    // Bob holds the real id: it is as unknown to him as an id nobody made.
    let foreign = rpc_error(as_bob.get_task(GetTaskParams::new(&id)).await.unwrap_err());
    let unknown = rpc_error(as_bob.get_task(GetTaskParams::new("no-such-task")).await.unwrap_err());
    assert_eq!(foreign.0, -32602, "{foreign:?}");
    assert_eq!((foreign.0, foreign.1.replace(&id, "ID")), (unknown.0, unknown.1.replace("no-such-task", "ID")));
    let cancel = rpc_error(as_bob.cancel_task(CancelTaskParams::new(&id)).await.unwrap_err());
    assert_eq!(cancel.0, -32602, "{cancel:?}");
    let still = as_alice.get_task(GetTaskParams::new(&id)).await.expect("alice still sees it");
    assert_eq!(still.task.status(), TaskStatus::Working, "bob's cancel did not reach it");
    // Bob's attempts never reached the server: only alice's requests did.
    let reached = std::fs::read_to_string(&calls).unwrap_or_default();
    assert_eq!(reached.matches("tasks/get").count(), 2, "{reached}");
    assert!(!reached.contains("tasks/cancel"), "{reached}");

    as_alice.cancel_task(CancelTaskParams::new(&id)).await.expect("alice cancels her task");
    let mut status = TaskStatus::Working;
    for _ in 0..50 {
        status = as_alice.get_task(GetTaskParams::new(&id)).await.expect("alice polls").task.status();
        if status.is_terminal() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, TaskStatus::Cancelled);

    // Each request is audited as a call, under its identity; bob's refused.
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .filter(|r: &Value| r["kind"] == "call")
        .collect();
    let of = |who: &str| records.iter().filter(|r| r["identity"] == who).count();
    assert!(of("alice") >= 5, "the call, three polls and a cancel at least: {records:#?}");
    assert_eq!(of("bob"), 3, "{records:#?}");
    assert!(records.iter().filter(|r| r["identity"] == "bob").all(|r| r["decision"] != "allowed"), "{records:#?}");
    as_alice.cancel().await.ok();
    as_bob.cancel().await.ok();
}

/// A cell calling the task fixtures: a task it may make (slow_compute), one
/// it must (failing_job, which ends in a tool error) and one that fails
/// with a protocol error.
const CALLS_TASK_TOOLS: &str = "\
print('got:', await slow_compute({'seconds': 1, 'label': 'from a cell'}))
try:
    await failing_job({})
except ToolError as e:
    print('failing_job:', e)
try:
    await protocol_error_job({})
except ToolError as e:
    print('protocol_error_job:', e)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_serve_a_cell_waits_for_a_wrapped_servers_task_and_gets_its_result_or_its_failure() {
    a_cell_waits_for_wrapped_tasks(Deployment::AllInOne).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_cell_waits_for_a_wrapped_servers_task_and_gets_its_result_or_its_failure() {
    a_cell_waits_for_wrapped_tasks(Deployment::OverNats).await;
}

async fn a_cell_waits_for_wrapped_tasks(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let calls = log_path("cell-tasks-server");
    let audit = log_path("cell-tasks-audit");
    let server_args = ["--tasks", "--log", calls.to_str().unwrap()];
    let (client, _pid, _guards) = support::start(deployment, &["--audit", audit.to_str().unwrap()], &server_args).await;
    let result = crate::http::run_python(&client, CALLS_TASK_TOOLS).await;
    let stdout = support::stdout_of(&result);
    assert!(stdout.contains("got: computed from a cell in 1 s"), "slow_compute's task result: {stdout}");
    assert!(stdout.contains("failing_job:") && stdout.contains("the job failed"), "the tool error: {stdout}");
    assert!(
        stdout.contains("protocol_error_job:") && stdout.contains("task failed (error -32603): the job broke down"),
        "the failed task's error: {stdout}"
    );
    // The bridge asked for tasks and polled them.
    let reached = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(reached.lines().filter(|l| l.starts_with("tasks/get")).count() >= 3, "{reached}");
    // One audit record per call, none per poll.
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .filter(|r: &Value| r["kind"] == "call")
        .collect();
    let tools: Vec<&str> = records.iter().filter_map(|r| r["tool"].as_str()).collect();
    assert_eq!(tools, ["slow_compute", "failing_job", "protocol_error_job"], "{records:#?}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(calls);
    let _ = std::fs::remove_file(audit);
}

/// The cell says which container runs it, then waits on a long task.
const WAITS_ON_A_LONG_TASK: &str = "\
import socket
report_progress(1, 2, socket.gethostname())
await slow_compute({'seconds': 60, 'label': 'long'})
print('never printed')
";

/// A client that hears progress, and declared tasks when `.1`.
#[derive(Clone)]
struct TaskProgress(tokio::sync::mpsc::UnboundedSender<String>, bool);

impl rmcp::ClientHandler for TaskProgress {
    fn get_info(&self) -> ClientConfig {
        match self.1 {
            true => tasks_client(),
            false => ClientConfig::default(),
        }
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::service::RoleClient>,
    ) {
        if let Some(message) = params.message {
            let _ = self.0.send(message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_serve_a_cancelled_run_python_cancels_the_wrapped_task_its_cell_waits_on() {
    if !support::sandbox_available() {
        return;
    }
    let calls = log_path("cell-task-cancel-server");
    let server_args = ["--tasks", "--log", calls.to_str().unwrap()];
    let (seen, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let (client, _pid, _guards) =
        support::start_with(Deployment::AllInOne, &[], &server_args, TaskProgress(seen, false)).await;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": WAITS_ON_A_LONG_TASK}).as_object().unwrap().clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let host = tokio::time::timeout(Duration::from_secs(30), heard.recv()).await.ok().flatten();
    assert!(host.is_some(), "the cell started");
    assert!(support::server_logged(&calls, "tasks/get", Duration::from_secs(20)).await, "the task is polled");
    handle.cancel(Some("the person pressed stop".into())).await.expect("the cancel is sent");
    assert!(
        support::server_logged(&calls, "tasks/cancel", Duration::from_secs(5)).await,
        "the server heard its task cancelled: {:?}",
        std::fs::read_to_string(&calls)
    );
    client.cancel().await.ok();
    let _ = std::fs::remove_file(calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_tasks_cancel_of_a_run_python_task_cancels_the_wrapped_task_its_cell_waits_on() {
    if !support::sandbox_available() {
        return;
    }
    let calls = log_path("cell-task-taskcancel-server");
    let server_args = ["--tasks", "--log", calls.to_str().unwrap()];
    let (seen, _heard) = tokio::sync::mpsc::unbounded_channel();
    let (client, _pid, _guards) =
        support::start_with(Deployment::OverNats, &[], &server_args, TaskProgress(seen, true)).await;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": WAITS_ON_A_LONG_TASK}).as_object().unwrap().clone());
    let id = match client.peer().call_tool_once(params).await.expect("run_python answers") {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task handle, not {other:?}"),
    };
    assert!(support::server_logged(&calls, "tasks/get", Duration::from_secs(30)).await, "the task is polled");
    client.peer().cancel_task(CancelTaskParams::new(&id)).await.expect("tasks/cancel is acknowledged");
    assert!(
        support::server_logged(&calls, "tasks/cancel", Duration::from_secs(5)).await,
        "the server heard its task cancelled: {:?}",
        std::fs::read_to_string(&calls)
    );
    client.cancel().await.ok();
    let _ = std::fs::remove_file(calls);
}

/// A client that answers every form elicitation by accepting, confirmed,
/// and counts the questions.
#[derive(Clone, Default)]
struct Confirms(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl rmcp::ClientHandler for Confirms {
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::service::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
            .with_content(json!({"confirm": true})))
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new().with_form(rmcp::model::FormElicitationCapability::default()),
        );
        info
    }
}

const CONFIRMS_A_DELETE: &str = "\
try:
    print('got:', await confirm_delete({'filename': 'notes.txt'}))
except ToolError as e:
    print('refused:', e)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_tasks_question_during_a_cell_reaches_the_cells_client_as_the_policys_question_rule_allows() {
    if !support::sandbox_available() {
        return;
    }
    for (rule, expected) in [
        (r#"{"action": "allow"}"#, "got: deleted notes.txt"),
        (r#"{"action": "deny", "reason": "no questions from tasks"}"#, "denied by policy"),
    ] {
        let policy = log_path("cell-task-question-policy").with_extension("json");
        std::fs::write(&policy, format!(r#"{{"version": "1", "default": "allow", "elicitation": {rule}}}"#)).unwrap();
        let calls = log_path("cell-task-question-server");
        let audit = log_path("cell-task-question-audit");
        let person = Confirms::default();
        let args = ["--policy", policy.to_str().unwrap(), "--audit", audit.to_str().unwrap()];
        let server_args = ["--tasks", "--log", calls.to_str().unwrap()];
        let (client, _pid, _guards) =
            support::start_with(Deployment::AllInOne, &args, &server_args, person.clone()).await;
        let result = crate::http::run_python(&client, CONFIRMS_A_DELETE).await;
        let stdout = support::stdout_of(&result);
        assert!(stdout.contains(expected), "with the rule {rule}: {stdout}");
        let asked = person.0.load(std::sync::atomic::Ordering::SeqCst);
        let records = std::fs::read_to_string(&audit).unwrap_or_default();
        assert!(records.contains("elicitation/create"), "the question is audited: {records}");
        let reached = std::fs::read_to_string(&calls).unwrap_or_default();
        if expected.starts_with("got") {
            assert_eq!(asked, 1, "the client answered the task's question once");
            assert!(reached.contains("tasks/update"), "the answer went back to the task: {reached}");
        } else {
            assert_eq!(asked, 0, "a denied question never reaches the client");
            assert!(support::server_logged(&calls, "tasks/cancel", Duration::from_secs(5)).await, "{reached}");
        }
        client.cancel().await.ok();
        for path in [policy, calls, audit] {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A client of the tasks extension that keeps the task status notes it
/// hears: (task id, status).
#[derive(Clone, Default)]
struct HearsTasks(std::sync::Arc<std::sync::Mutex<Vec<(String, TaskStatus)>>>);

impl rmcp::ClientHandler for HearsTasks {
    fn get_info(&self) -> ClientConfig {
        tasks_client()
    }

    async fn on_task_status(
        &self,
        params: rmcp::model::TaskStatusNotificationParams,
        _context: rmcp::service::NotificationContext<rmcp::service::RoleClient>,
    ) {
        self.0.lock().unwrap().push((params.task.task.task_id.clone(), params.task.status()));
    }
}

#[tokio::test]
async fn a_wrapped_servers_task_status_notes_reach_the_client_that_created_the_task_and_no_other() {
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--auth-tokens", tokens.arg(), "--"]);
    serve.arg(support::test_server()).arg("--tasks");
    let (_serve, url, _log) = gateway(serve).await;
    let (heard_by_alice, heard_by_bob) = (HearsTasks::default(), HearsTasks::default());
    let as_alice = crate::auth::connect_as(&url, &alice, heard_by_alice.clone()).await;
    let as_bob = crate::auth::connect_as(&url, &bob, heard_by_bob.clone()).await;
    let mut params = CallToolRequestParams::new("slow_compute");
    params.arguments = json!({"seconds": 1, "label": "noted"}).as_object().cloned();
    let id = match as_alice.peer().call_tool_once(params).await.expect("the call is answered") {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task handle, not {other:?}"),
    };
    let completed = support::eventually(Duration::from_secs(15), || {
        heard_by_alice.0.lock().unwrap().contains(&(id.clone(), TaskStatus::Completed))
    })
    .await;
    assert!(completed, "alice heard her task complete: {:?}", heard_by_alice.0.lock().unwrap());
    assert!(heard_by_bob.0.lock().unwrap().is_empty(), "bob heard nothing: {:?}", heard_by_bob.0.lock().unwrap());
    as_alice.cancel().await.ok();
    as_bob.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cells_wait_on_a_wrapped_task_ends_at_the_call_timeout_and_cancels_the_task() {
    if !support::sandbox_available() {
        return;
    }
    let calls = log_path("cell-task-timeout-server");
    let server_args = ["--tasks", "--log", calls.to_str().unwrap()];
    let (client, _pid, _guards) = support::start(Deployment::AllInOne, &["--call-timeout", "2"], &server_args).await;
    let code = "\
try:
    await slow_compute({'seconds': 60, 'label': 'too long'})
except ToolError as e:
    print('refused:', e)
";
    let started = std::time::Instant::now();
    let result = crate::http::run_python(&client, code).await;
    let stdout = support::stdout_of(&result);
    assert!(stdout.contains("refused:") && stdout.contains("no answer within 2 s"), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(30), "the wait ended at the call timeout");
    assert!(
        support::server_logged(&calls, "tasks/cancel", Duration::from_secs(5)).await,
        "the server heard its task cancelled: {:?}",
        std::fs::read_to_string(&calls)
    );
    client.cancel().await.ok();
    let _ = std::fs::remove_file(calls);
}

/// A bridge replica over NATS wrapping the task server at `server_url`,
/// once it says it is ready (its log read on, so it never blocks).
async fn task_bridge(
    nats: &NatsServer,
    users: &code_mode_core::testing::NatsUsers,
    server_url: &str,
) -> tokio::process::Child {
    use tokio::io::AsyncBufReadExt;
    let mut command = service_command(&nats.url(), users, "bridge", &["--url", server_url], None);
    command.stderr(std::process::Stdio::piped());
    let mut bridge = command.spawn().expect("the bridge starts");
    let mut lines = tokio::io::BufReader::new(bridge.stderr.take().expect("its stderr")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("bridge ready") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "the bridge said it was ready");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    // It subscribes just after saying so.
    tokio::time::sleep(Duration::from_secs(1)).await;
    bridge
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_wrapped_servers_task_is_answered_by_another_bridge_replica_only_for_the_identity_that_created_it()
{
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let calls = log_path("tasks-replicas-server");
    let server = Server::start(0, &["--tasks", "--log", calls.to_str().unwrap()]);
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let mut first = task_bridge(&nats, &users, &server.url).await;
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.args(["frontend", "--nats", &nats.url(), "--expose-tools=only", "--http", "127.0.0.1:0"]);
    frontend.args(["--auth-tokens", tokens.arg()]);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let (_frontend, url, _log) = gateway(frontend).await;
    let as_alice = crate::auth::connect_as(&url, &alice, tasks_client()).await;
    let as_bob = crate::auth::connect_as(&url, &bob, tasks_client()).await;

    // Two tasks created through the first bridge (the only one there is).
    let mut ids = Vec::new();
    for (seconds, label) in [(3, "short"), (120, "long")] {
        let mut params = CallToolRequestParams::new("slow_compute");
        params.arguments = json!({"seconds": seconds, "label": label}).as_object().cloned();
        match as_alice.call_tool_once(params).await.expect("the call is answered") {
            CallToolResponse::Task(created) => ids.push(created.task.task_id.clone()),
            other => panic!("a task handle, not {other:?}"),
        }
    }
    let (short, long) = (ids[0].clone(), ids[1].clone());

    // A second replica starts, and the first is killed: every request
    // from now on reaches the second, which handed out neither task.
    let _second = task_bridge(&nats, &users, &server.url).await;
    first.kill().await.expect("the first bridge is killed");

    let mut status = TaskStatus::Working;
    for _ in 0..100 {
        let got = as_alice.get_task(GetTaskParams::new(&short)).await.expect("the other replica answers alice");
        status = got.task.status();
        if status.is_terminal() {
            assert!(format!("{got:?}").contains("short"), "the result is inline: {got:?}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(status, TaskStatus::Completed);

    // Bob holds the real ids: to the other replica they are as unknown as an
    // id nobody made, and his requests never reach the server.
    let unknown = rpc_error(as_bob.get_task(GetTaskParams::new("no-such-task")).await.unwrap_err());
    for id in [&short, &long] {
        let foreign = rpc_error(as_bob.get_task(GetTaskParams::new(id)).await.unwrap_err());
        assert_eq!(foreign.0, -32602, "{foreign:?}");
        assert_eq!((foreign.0, foreign.1.replace(id, "ID")), (unknown.0, unknown.1.replace("no-such-task", "ID")));
    }
    let cancel = rpc_error(as_bob.cancel_task(CancelTaskParams::new(&long)).await.unwrap_err());
    assert_eq!(cancel.0, -32602, "{cancel:?}");
    let reached = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(!reached.contains("tasks/cancel"), "{reached}");

    as_alice.cancel_task(CancelTaskParams::new(&long)).await.expect("the other replica cancels alice's task");
    let mut status = TaskStatus::Working;
    for _ in 0..50 {
        status = as_alice.get_task(GetTaskParams::new(&long)).await.expect("alice polls").task.status();
        if status.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, TaskStatus::Cancelled);
    let reached = std::fs::read_to_string(&calls).unwrap_or_default();
    assert_eq!(reached.matches("tasks/cancel").count(), 1, "alice's cancel only: {reached}");
    as_alice.cancel().await.ok();
    as_bob.cancel().await.ok();
}

/// A client of the tasks extension that answers elicitation (a task's
/// questions it answers by `tasks/update`).
fn asked_tasks_client() -> ClientConfig {
    let capabilities = ClientCapabilities::builder().enable_elicitation().enable_tasks().build();
    ClientConfig::new(capabilities, Implementation::new("tasks-asked", "1"))
}

#[tokio::test]
async fn a_wrapped_tasks_question_reaches_the_clients_tasks_get_only_as_the_policys_question_rule_allows() {
    for allowed in [true, false] {
        let rule = match allowed {
            true => r#"{"action": "allow"}"#,
            false => r#"{"action": "deny", "reason": "no questions from tasks"}"#,
        };
        let policy = log_path("direct-task-question-policy").with_extension("json");
        std::fs::write(&policy, format!(r#"{{"version": "1", "default": "allow", "elicitation": {rule}}}"#)).unwrap();
        let calls = log_path("direct-task-question-server");
        let audit = log_path("direct-task-question-audit");
        let alice = token_new("alice");
        let tokens = TokenFile::of(&[&alice]);
        let mut serve = tokio::process::Command::new(support::code_mode());
        serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()]);
        serve.args(["--policy", policy.to_str().unwrap(), "--audit", audit.to_str().unwrap(), "--"]);
        serve.arg(support::test_server()).args(["--tasks", "--log", calls.to_str().unwrap()]);
        let (_serve, url, _log) = gateway(serve).await;
        let client = crate::auth::connect_as(&url, &alice, asked_tasks_client()).await;

        let mut params = CallToolRequestParams::new("confirm_delete");
        params.arguments = json!({"filename": "notes.txt"}).as_object().cloned();
        let id = match client.call_tool_once(params).await.expect("the call is answered") {
            CallToolResponse::Task(created) => created.task.task_id,
            other => panic!("a task handle, not {other:?}"),
        };
        // Poll until the task asks (or, its question refused, ends).
        let mut seen = Vec::new();
        let mut last = Value::Null;
        for _ in 0..100 {
            let got = client.get_task(GetTaskParams::new(&id)).await.expect("the client polls its task");
            last = serde_json::to_value(&got).unwrap();
            seen.push(last["status"].clone());
            if got.task.status() == TaskStatus::InputRequired || got.task.status().is_terminal() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let records = std::fs::read_to_string(&audit).unwrap_or_default();
        let question = records.lines().find(|l| l.contains("elicitation/create"));
        assert!(question.is_some(), "the task's question is audited: {records}");
        if allowed {
            assert_eq!(last["status"], "input_required", "{last:#}");
            let asked = &last["inputRequests"]["confirm"];
            assert_eq!(asked["method"], "elicitation/create", "the question reaches the client unchanged: {last:#}");
            assert_eq!(asked["params"]["message"], "Delete notes.txt?", "{last:#}");
        } else {
            assert!(seen.iter().all(|s| s != "input_required"), "the client never sees the question: {seen:?}");
            assert!(last.get("inputRequests").is_none(), "{last:#}");
            assert!(question.unwrap().contains("no questions from tasks"), "the refusal is audited: {records}");
            let reached = std::fs::read_to_string(&calls).unwrap_or_default();
            assert!(reached.contains("tasks/update"), "the server was answered: {reached}");
            // The server took the refusal as a declined question.
            let mut done = last.clone();
            for _ in 0..100 {
                done = serde_json::to_value(client.get_task(GetTaskParams::new(&id)).await.expect("polls")).unwrap();
                if done["status"] == "completed" {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(done["status"], "completed", "{done:#}");
            assert!(done.to_string().contains("kept notes.txt"), "the server got a decline: {done:#}");
        }
        client.cancel().await.ok();
        for path in [policy, calls, audit] {
            let _ = std::fs::remove_file(path);
        }
    }
}
