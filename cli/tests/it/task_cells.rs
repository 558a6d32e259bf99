//! `run_python` as an MCP task (the Tasks extension): a client that
//! declared the extension gets a task handle at once, polls `tasks/get`
//! (working with a status message saying how far the cell is, then the
//! result inline as a normal `run_python` result), stops it with
//! `tasks/cancel` (its container ends), and its task ids mean nothing to
//! another identity. `serve` over HTTP with real Docker cells and rmcp's
//! client, of protocol 2025-11-25 and stateless 2026-07-28.

use std::time::{Duration, Instant, SystemTime};

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig, GetTaskParams,
    GetTaskResult, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::auth::{Client, TokenFile, serve, token_new};
use crate::support::{self, SplitHttp};

/// A client that declared the Tasks extension.
#[derive(Clone, Default)]
pub(crate) struct TaskClient;

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::builder().enable_tasks().build();
        info
    }
}

pub(crate) type Connected = RunningService<RoleClient, TaskClient>;

pub(crate) fn stateless() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
}

/// An rmcp client declaring tasks, sending `client`'s token.
pub(crate) async fn connect_as(url: &str, client: &Client, lifecycle: ClientLifecycleMode) -> Connected {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(client.token.clone());
    let transport = StreamableHttpClientTransport::from_config(config);
    TaskClient.serve_with_lifecycle(transport, lifecycle).await.expect("the MCP client connects with its token")
}

/// Call run_python with `code` (and `meta`, if any); the task's id, and
/// how long the handle took to come.
pub(crate) async fn start(client: &Connected, code: &str, meta: Option<Value>) -> (String, Duration) {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    let keyed = meta.is_some();
    if let Some(Value::Object(meta)) = meta {
        params.meta = Some(rmcp::model::RequestMetaObject::from(meta));
    }
    let sent = Instant::now();
    let answer = client.peer().call_tool_once(params).await.expect("run_python answers");
    let took = sent.elapsed();
    match answer {
        CallToolResponse::Task(created) => {
            // A new task is working; one named again by an idempotency key
            // may have settled already.
            assert!(keyed || created.task.status == TaskStatus::Working, "{created:?}");
            (created.task.task_id, took)
        }
        other => panic!("a client that declared tasks gets a task handle, not {other:?}"),
    }
}

pub(crate) async fn get<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    id: &str,
) -> Result<GetTaskResult, rmcp::ServiceError> {
    client.peer().get_task(GetTaskParams::new(id)).await
}

/// Poll the task until it has settled (at most `within`); every state seen.
pub(crate) async fn settled<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    id: &str,
    within: Duration,
) -> (GetTaskResult, Vec<GetTaskResult>) {
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < within {
        let now = get(client, id).await.expect("tasks/get answers the task's owner");
        seen.push(now.clone());
        if now.task.status().is_terminal() {
            return (now, seen);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("the task did not settle within {within:?}: last {:?}", seen.last());
}

/// The report of a completed task's inline result.
pub(crate) fn report_of(done: &GetTaskResult) -> Value {
    match &done.task.payload {
        TaskPayload::Completed { result } => {
            let result: rmcp::model::CallToolResult = serde_json::from_value(Value::Object(result.clone())).unwrap();
            support::report(&result)
        }
        other => panic!("the task completed with a result, not {other:?}"),
    }
}

const COUNTS_THEN_PRINTS: &str = "\
import time
for step in range(1, 4):
    report_progress(step, 3, f'step {step}')
    time.sleep(1.5)
print('done after three steps')
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_answers_at_once_reports_its_progress_then_its_result_and_is_not_found_by_another_identity() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_serve, url, _log) = serve(&["--auth-tokens", tokens.arg()]).await;
    for lifecycle in [crate::http::LEGACY(), stateless()] {
        let client = connect_as(&url, &alice, lifecycle).await;
        let (id, took) = start(&client, COUNTS_THEN_PRINTS, None).await;
        eprintln!("measured: the task handle came {} ms after the call", took.as_millis());
        assert!(took < Duration::from_secs(2), "the handle came at once, not after {took:?}");
        let (done, seen) = settled(&client, &id, Duration::from_secs(60)).await;
        assert_eq!(done.task.status(), TaskStatus::Completed, "{done:?}");
        assert_eq!(report_of(&done)["stdout"], "done after three steps\n");
        let said: Vec<String> = seen.iter().filter_map(|s| s.task.task.status_message.clone()).collect();
        assert!(
            seen.iter().any(|s| s.task.status() == TaskStatus::Working)
                && said.iter().any(|m| m.contains("the cell has run for") && m.contains("progress")),
            "while it ran, tasks/get said how far the cell is: {said:?}"
        );
        // Polled again, the result stays.
        assert_eq!(get(&client, &id).await.unwrap().task.status(), TaskStatus::Completed);

        // Another identity: "not found", as an id nobody made.
        let other = connect_as(&url, &bob, stateless()).await;
        let stolen = get(&other, &id).await.expect_err("bob cannot read alice's task");
        let unknown_id = uuid::Uuid::new_v4().to_string();
        let unknown = get(&other, &unknown_id).await.expect_err("an unknown id is not found");
        assert_eq!(stolen.to_string().replace(&id, "ID"), unknown.to_string().replace(&unknown_id, "ID"));
        assert!(stolen.to_string().contains("no task"), "{stolen}");
        other.peer().cancel_task(CancelTaskParams::new(&id)).await.expect_err("nor cancel it");
        client.cancel().await.ok();
        other.cancel().await.ok();
    }
}

/// The cell says which container runs it, then sleeps.
const SAYS_WHERE_THEN_SLEEPS: &str = "\
import socket, time
report_progress(1, 2, socket.gethostname())
time.sleep(120)
print('never printed')
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_ends_the_cells_container_within_a_second_and_the_task_says_cancelled() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, tokens) = support::alice();
    let (_serve, url, _log) = serve(&["--auth-tokens", tokens.arg()]).await;
    let client = connect_as(&url, &alice, stateless()).await;
    let (id, _) = start(&client, SAYS_WHERE_THEN_SLEEPS, None).await;
    // The status message carries the code's progress: its host name.
    let started = Instant::now();
    let host = loop {
        let now = get(&client, &id).await.unwrap();
        let message = now.task.task.status_message.unwrap_or_default();
        if let Some(host) = message.split(" (").nth(1).map(|h| h.trim_end_matches(')').to_string()) {
            break host;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no progress in the status: {message}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let container = crate::cancel::full_id(&host).expect("the cell's container runs");
    assert_eq!(crate::team::state_of(&container), "running");
    let sent = SystemTime::now();
    client.peer().cancel_task(CancelTaskParams::new(&id)).await.expect("tasks/cancel is acknowledged");
    let died = crate::cancel::died_at(&container, sent, Duration::from_secs(10)).expect("the engine saw it die");
    let after = died.duration_since(sent).unwrap_or_default();
    eprintln!("measured: the container died {} ms after tasks/cancel", after.as_millis());
    assert!(after < Duration::from_secs(1), "the container died {after:?} after tasks/cancel, not within 1 s");
    let (done, _) = settled(&client, &id, Duration::from_secs(10)).await;
    assert_eq!(done.task.status(), TaskStatus::Cancelled, "{done:?}");
    // A second cancel of a settled task changes nothing.
    client.peer().cancel_task(CancelTaskParams::new(&id)).await.expect("a late cancel is no error");
    assert_eq!(get(&client, &id).await.unwrap().task.status(), TaskStatus::Cancelled);
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cell_runs_past_deadline_up_to_task_deadline_and_no_longer() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, tokens) = support::alice();
    let args = ["--auth-tokens", tokens.arg(), "--deadline", "1", "--task-deadline", "5", "--task-ttl", "3"];
    let (_serve, url, _log) = serve(&args).await;
    let client = connect_as(&url, &alice, stateless()).await;
    let (past, _) = start(&client, "import time\ntime.sleep(2.5)\nprint('past --deadline')", None).await;
    let (long, _) = start(&client, "import time\ntime.sleep(60)\nprint('never printed')", None).await;
    let (done, _) = settled(&client, &past, Duration::from_secs(30)).await;
    assert_eq!(report_of(&done)["stdout"], "past --deadline\n", "{done:?}");
    let started = Instant::now();
    let (stopped, _) = settled(&client, &long, Duration::from_secs(30)).await;
    let report = report_of(&stopped);
    assert_eq!(report["stopped"], true, "the cell stopped at --task-deadline: {report}");
    assert!(report["error"].as_str().unwrap_or_default().contains("deadline"), "{report}");
    assert!(started.elapsed() < Duration::from_secs(15), "stopped at --task-deadline, not later");
    // --task-ttl after it finished, the result is gone.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let gone = get(&client, &past).await.expect_err("the finished task is gone after --task-ttl");
    assert!(gone.to_string().contains("no task"), "{gone}");
    client.cancel().await.ok();
}

/// A cell that outlives the frontend killed a second after it started.
const ORPHAN: &str = "import time\nreport_progress(1, 2)\ntime.sleep(25)\nprint('outlived its frontend')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_any_frontend_replica_answers_for_a_task_a_restarted_one_too_and_another_cancels_it() {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_bridge, _runner) = split.services(&[], &[], &[]);
    let (mut first, first_url) = split.frontend(&tokens).await;
    let (_second, second_url) = split.frontend(&tokens).await;
    let through_first = connect_as(&first_url, &alice, stateless()).await;
    let through_second = connect_as(&second_url, &alice, stateless()).await;

    // Made through the first, polled through the second.
    let (id, _) = start(&through_first, COUNTS_THEN_PRINTS, None).await;
    let (done, seen) = settled(&through_second, &id, Duration::from_secs(60)).await;
    assert_eq!(report_of(&done)["stdout"], "done after three steps\n", "{done:?}");
    assert!(
        seen.iter().any(|s| s.task.task.status_message.as_deref().is_some_and(|m| m.contains("progress"))),
        "the other replica saw the cell's progress: {seen:?}"
    );
    let bobs = connect_as(&second_url, &bob, stateless()).await;
    let stolen = get(&bobs, &id).await.expect_err("another identity's tasks/get through any replica");
    assert!(stolen.to_string().contains("no task"), "{stolen}");

    // The first frontend killed (one of its tasks still running), a new
    // one started: it answers for the finished task, and for the running
    // one, whose result its runner kept (task_adopt.rs has the long run).
    let (orphan, _) = start(&through_first, ORPHAN, None).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    support::kill9(first.id().unwrap());
    first.wait().await.ok();
    let (_third, third_url) = split.frontend(&tokens).await;
    let through_third = connect_as(&third_url, &alice, stateless()).await;
    let again = get(&through_third, &id).await.expect("a restarted frontend answers for the task");
    assert_eq!(report_of(&again)["stdout"], "done after three steps\n");
    assert!(get(&connect_as(&third_url, &bob, stateless()).await, &id).await.is_err());
    let (adopted, _) = settled(&through_third, &orphan, Duration::from_secs(60)).await;
    assert_eq!(report_of(&adopted)["stdout"], "outlived its frontend\n", "{adopted:?}");

    // Started through the second, cancelled through the third.
    let (sleeping, _) = start(&through_second, SAYS_WHERE_THEN_SLEEPS, None).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = Instant::now();
    through_third
        .peer()
        .cancel_task(CancelTaskParams::new(&sleeping))
        .await
        .expect("tasks/cancel through another replica");
    let (cancelled, _) = settled(&through_third, &sleeping, Duration::from_secs(20)).await;
    eprintln!("measured: cancelled through another replica, settled {} ms later", sent.elapsed().as_millis());
    assert_eq!(cancelled.task.status(), TaskStatus::Cancelled, "{cancelled:?}");
    for client in [through_first, through_second, through_third, bobs] {
        client.cancel().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_task_whose_runner_is_killed_fails_within_seconds_saying_why() {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, mut runner) = split.services(&[], &[], &[]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, stateless()).await;
    let (id, _) = start(&client, SAYS_WHERE_THEN_SLEEPS, None).await;
    let started = Instant::now();
    while !get(&client, &id).await.unwrap().task.task.status_message.unwrap_or_default().contains("progress") {
        assert!(started.elapsed() < Duration::from_secs(30), "the cell never ran");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    support::kill9(runner.id().unwrap());
    let killed = Instant::now();
    runner.wait().await.ok();
    let (failed, _) = settled(&client, &id, Duration::from_secs(30)).await;
    let after = killed.elapsed();
    eprintln!("measured: the task failed {} ms after its runner was killed", after.as_millis());
    assert_eq!(failed.task.status(), TaskStatus::Failed, "{failed:?}");
    let TaskPayload::Failed { error } = &failed.task.payload else { unreachable!() };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("sandbox-runner"), "the error says the runner was lost: {message}");
    assert!(after < Duration::from_secs(10), "failed {after:?} after the runner died, not within seconds");
    client.cancel().await.ok();
}
