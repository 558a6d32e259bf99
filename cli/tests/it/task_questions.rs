//! Questions inside a task: what a `run_python` task's cell asks its
//! client (an approval whose rule has no approvers in the web console, a
//! wrapped server's elicitation) puts the task in `input_required` with the
//! question in `inputRequests`, and the client's `tasks/update` answers it,
//! through any frontend replica; an approval a team decides stays the web
//! console's, the task `working` and its cell paused, for minutes. Real
//! Docker cells, the real test server, rmcp's client; `serve` over HTTP,
//! and the services over a real nats-server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, InputRequest, InputResponses, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::auth::{Client, TokenFile, token_new};
use crate::support::{self, SplitHttp, log_path, logged_calls};
use crate::task_cells::{get, report_of, settled, stateless};

/// A client that declared tasks and form elicitation, and counts the
/// elicitations sent to it as requests of their own (a task's questions
/// must come through the task instead).
#[derive(Clone, Default)]
struct Asked {
    requests: Arc<AtomicUsize>,
}

impl ClientHandler for Asked {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        let mut capabilities = ClientCapabilities::builder().enable_tasks().build();
        capabilities.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        info.capabilities = capabilities;
        info
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }
}

type Connected = RunningService<RoleClient, Asked>;

async fn connect(url: &str, client: &Client, lifecycle: ClientLifecycleMode) -> (Connected, Asked) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(client.token.clone());
    let handler = Asked::default();
    let connected = handler
        .clone()
        .serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("the MCP client connects with its token");
    (connected, handler)
}

/// Start `code` as a task; its id.
async fn start(client: &Connected, code: &str) -> String {
    let mut params = rmcp::model::CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    match client.peer().call_tool_once(params).await.expect("run_python answers") {
        rmcp::model::CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a client that declared tasks gets a task handle, not {other:?}"),
    }
}

/// Poll until the task is `input_required`; its input requests.
async fn input_required(client: &Connected, id: &str, within: Duration) -> Vec<(String, InputRequest)> {
    let started = Instant::now();
    loop {
        let now = get(client, id).await.expect("tasks/get answers the task's owner");
        match now.task.payload {
            TaskPayload::InputRequired { input_requests } => return input_requests.into_iter().collect(),
            ref payload if now.task.status().is_terminal() => panic!("the task settled without asking: {payload:?}"),
            _ => {}
        }
        assert!(started.elapsed() < within, "the task did not ask within {within:?}: {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The message of an elicitation input request.
fn message_of(request: &InputRequest) -> String {
    match request {
        InputRequest::Elicitation(asked) => match &asked.params {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            other => panic!("a form elicitation, not {other:?}"),
        },
        other => panic!("an elicitation, not {other:?}"),
    }
}

async fn answer(client: &Connected, id: &str, key: &str, value: Value) -> Result<(), rmcp::ServiceError> {
    let mut responses = InputResponses::new();
    responses.insert(key.to_string(), value);
    client.peer().update_task(UpdateTaskParams::new(id, responses)).await
}

fn policy_file(tag: &str, policy: &str) -> std::path::PathBuf {
    let path = log_path(tag).with_extension("json");
    std::fs::write(&path, policy).expect("the policy is written");
    path
}

/// `serve --http` with `args`, wrapping the test server with `server_args`.
async fn serve(args: &[&str], server_args: &[&str]) -> (tokio::process::Child, String) {
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0"]).args(args).arg("--").arg(support::test_server()).args(server_args);
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (child, url, _log) = crate::http::spawn_http(&mut serve).await;
    (child, url)
}

/// `echo` needs the client's approval (no approvers in the console).
const ECHO_APPROVED_BY_CLIENT: &str =
    r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;

const ECHO_ONCE: &str = "\
try:
    print(await echo({'text': 'launch-code-4711'}))
except ToolError as e:
    print('refused:', e)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cells_approval_is_an_input_request_answered_by_tasks_update_accepted_it_runs_declined_it_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let policy = policy_file("task-approval", ECHO_APPROVED_BY_CLIENT);
    let calls = log_path("task-approval-calls");
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let args = ["--auth-tokens", tokens.arg(), "--policy", policy.to_str().unwrap(), "--approval-timeout", "120"];
    let (_serve, url) = serve(&args, &["--log", calls.to_str().unwrap()]).await;
    let (bobs, _) = connect(&url, &bob, stateless()).await;
    let cases = [
        (crate::http::LEGACY(), json!({"action": "accept", "content": {}}), true),
        (stateless(), json!({"action": "accept", "content": {}}), true),
        (stateless(), json!({"action": "decline"}), false),
    ];
    for (round, (lifecycle, reply, approved)) in cases.into_iter().enumerate() {
        let (client, handler) = connect(&url, &alice, lifecycle).await;
        let id = start(&client, ECHO_ONCE).await;
        let asked = input_required(&client, &id, Duration::from_secs(60)).await;
        assert_eq!(asked.len(), 1, "one question: {asked:?}");
        let (key, request) = &asked[0];
        let message = message_of(request);
        assert!(message.contains("\"echo\"") && message.contains("launch-code-4711"), "{message}");
        assert!(message.contains("the code of alice"), "the question names whose code asks: {message}");
        // Another identity's answer: "not found", and nothing changes.
        let stolen = answer(&bobs, &id, key, json!({"action": "accept", "content": {}})).await;
        assert!(stolen.expect_err("bob cannot answer alice's task").to_string().contains("no task"));
        // An answer under a key the task did not ask is ignored.
        answer(&client, &id, "approval-999", json!({"action": "accept", "content": {}})).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let still = get(&client, &id).await.unwrap();
        assert_eq!(still.task.status(), TaskStatus::InputRequired, "{still:?}");
        assert!(logged_calls(&calls).len() == round.min(2), "echo went out unasked: {:?}", logged_calls(&calls));

        answer(&client, &id, key, reply).await.expect("tasks/update answers the question");
        let (done, _) = settled(&client, &id, Duration::from_secs(60)).await;
        assert_eq!(done.task.status(), TaskStatus::Completed, "{done:?}");
        let stdout = report_of(&done)["stdout"].as_str().unwrap_or_default().to_string();
        if approved {
            assert_eq!(stdout, "launch-code-4711\n", "the approved call ran: {done:?}");
        } else {
            assert!(stdout.starts_with("refused: ") && stdout.contains("declined"), "{stdout}");
        }
        assert_eq!(handler.requests.load(Ordering::SeqCst), 0, "the client was asked through the task only");
        client.cancel().await.ok();
    }
    let went_out = logged_calls(&calls).iter().filter(|c| c.as_str() == "tools/call echo").count();
    assert_eq!(went_out, 2, "echo reached the server for the two accepts only");
    bobs.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_question_nobody_answers_lapses_at_the_approval_timeout_the_call_refused_and_the_task_working_again() {
    if !support::sandbox_available() {
        return;
    }
    let policy = policy_file("task-approval-lapse", ECHO_APPROVED_BY_CLIENT);
    let (alice, tokens) = support::alice();
    let args = ["--auth-tokens", tokens.arg(), "--policy", policy.to_str().unwrap(), "--approval-timeout", "3"];
    let (_serve, url) = serve(&args, &[]).await;
    let (client, _) = connect(&url, &alice, stateless()).await;
    let code = format!("{ECHO_ONCE}import time\ntime.sleep(3)\nprint('after')");
    let id = start(&client, &code).await;
    let asked = input_required(&client, &id, Duration::from_secs(60)).await;
    let (key, _) = &asked[0];
    // Unanswered, the question lapses: the task is working again with no
    // input request, then completes with the call refused.
    let started = Instant::now();
    loop {
        let now = get(&client, &id).await.unwrap();
        if now.task.status() == TaskStatus::Working {
            break;
        }
        assert_eq!(now.task.status(), TaskStatus::InputRequired, "{now:?}");
        assert!(started.elapsed() < Duration::from_secs(15), "the question did not lapse: {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A late answer is ignored.
    answer(&client, &id, key, json!({"action": "accept", "content": {}})).await.unwrap();
    let (done, _) = settled(&client, &id, Duration::from_secs(60)).await;
    let stdout = report_of(&done)["stdout"].as_str().unwrap_or_default().to_string();
    assert!(stdout.starts_with("refused: ") && stdout.contains("no answer within 3 s"), "{stdout}");
    assert!(stdout.ends_with("after\n"), "the cell went on: {stdout}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}

const ASKS_A_PERSON: &str = "\
print(await ask_person({'question': 'Your name?'}))
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_servers_elicitation_inside_a_task_cell_is_answered_through_tasks_update() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, tokens) = support::alice();
    let (_serve, url) = serve(&["--auth-tokens", tokens.arg()], &["--resources"]).await;
    let accept = json!({"action": "accept", "content": {"name": "Ann"}});
    let accepted = "the person answered accept with {\"name\":\"Ann\"}\n";
    for (lifecycle, reply, said) in [
        (crate::http::LEGACY(), accept.clone(), accepted),
        (stateless(), accept, accepted),
        (crate::http::LEGACY(), json!({"action": "decline"}), "the person answered decline with none\n"),
    ] {
        let (client, handler) = connect(&url, &alice, lifecycle).await;
        let id = start(&client, ASKS_A_PERSON).await;
        let asked = input_required(&client, &id, Duration::from_secs(60)).await;
        assert_eq!(asked.len(), 1, "{asked:?}");
        let (key, request) = &asked[0];
        let message = message_of(request);
        assert!(
            message.starts_with("The server ") && message.ends_with("asks (through code-mode): Your name?"),
            "{message}"
        );
        answer(&client, &id, key, reply).await.expect("tasks/update answers the server's question");
        let (done, _) = settled(&client, &id, Duration::from_secs(60)).await;
        assert_eq!(report_of(&done)["stdout"], said, "{done:?}");
        assert_eq!(handler.requests.load(Ordering::SeqCst), 0, "the client was asked through the task only");
        client.cancel().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_tasks_update_through_the_replica_not_driving_the_task_resumes_its_cell() {
    let Some(split) = SplitHttp::start() else { return };
    let policy = policy_file("task-approval-nats", ECHO_APPROVED_BY_CLIENT);
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) =
        split.services(&["--policy", policy.to_str().unwrap(), "--approval-timeout", "120"], &[], &[]);
    let (_first, first_url) = split.frontend(&tokens).await;
    let (_second, second_url) = split.frontend(&tokens).await;
    let (through_first, _) = connect(&first_url, &alice, stateless()).await;
    let (through_second, _) = connect(&second_url, &alice, stateless()).await;

    let id = start(&through_first, ECHO_ONCE).await;
    let asked = input_required(&through_second, &id, Duration::from_secs(60)).await;
    let (key, _) = &asked[0];
    let sent = Instant::now();
    answer(&through_second, &id, key, json!({"action": "accept", "content": {}}))
        .await
        .expect("tasks/update through the other replica");
    let (done, _) = settled(&through_second, &id, Duration::from_secs(60)).await;
    eprintln!("measured: answered through the other replica, settled {} ms later", sent.elapsed().as_millis());
    assert_eq!(report_of(&done)["stdout"], "launch-code-4711\n", "{done:?}");
    through_first.cancel().await.ok();
    through_second.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}

/// CPU time the container used, in nanoseconds, as the Docker engine's API
/// reports it (`GET /containers/{id}/stats`, `cpu_stats.cpu_usage.total_usage`).
fn engine_cpu_ns(container: &str) -> u64 {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--unix-socket", "/var/run/docker.sock"])
        .arg(format!("http://localhost/containers/{container}/stats?stream=false&one-shot=true"))
        .output()
        .expect("curl runs");
    let stats: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the engine's stats: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    stats["cpu_stats"]["cpu_usage"]["total_usage"].as_u64().unwrap_or_else(|| panic!("no CPU usage in {stats}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_inside_a_task_answered_five_minutes_later_in_the_web_console_resumes_the_cell_whose_container_used_no_cpu_meanwhile()
 {
    let Some(split) = SplitHttp::start() else { return };
    let policy = policy_file("task-team", crate::team::TEAM_POLICY);
    let calls = log_path("task-team-calls");
    let bridge_args = ["--policy", policy.to_str().unwrap(), "--approval-timeout", "600"];
    // No warm pool: the cell's own container carries its id as a label.
    let (_bridge, _runner) = split.services(&bridge_args, &["--log", calls.to_str().unwrap()], &["--warm", "0"]);
    let alice = token_new("alice");
    let mut bob = token_new("bob");
    bob.line.push_str(" groups=security");
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let (client, handler) = connect(&url, &alice, stateless()).await;
    let id = start(&client, ECHO_ONCE).await;

    // Bob, of the security group, is asked in the web console.
    let options = code_mode_core::nats::NatsOptions {
        url: split.nats.url(),
        credentials: Some(("frontend".into(), split.users.password("frontend").into())),
        inbox_prefix: Some("_INBOX.frontend".into()),
        ..Default::default()
    };
    let bus = code_mode_core::bus::Bus::new(
        code_mode_core::nats::NatsTransport::connect(&options).await.expect("the test connects as the frontend user"),
    );
    let waiting =
        crate::team::first_waiting(&bus, &crate::team::viewer("bob", &["security"]), Duration::from_secs(60)).await;
    // The task says where the call waits, and asks its client nothing.
    let started = Instant::now();
    let said = loop {
        let now = get(&client, &id).await.unwrap();
        assert_eq!(now.task.status(), TaskStatus::Working, "a console's question is not the client's: {now:?}");
        let said = now.task.task.status_message.unwrap_or_default();
        if said.contains("web console") {
            break said;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the status never named the console: {said}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(said.contains("alice, group:security"), "the status names who is asked: {said}");
    // The caller's client cannot approve it: no key of the task asks it.
    answer(&client, &id, "approval-1", json!({"action": "accept", "content": {}})).await.unwrap();
    let container = crate::team::container_of_cell(&waiting.cell_id);
    let started = Instant::now();
    while crate::team::state_of(&container) != "paused" {
        assert!(started.elapsed() < Duration::from_secs(20), "the container was not paused");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (engine_before, cgroup_before) = (engine_cpu_ns(&container), crate::team::cpu_used_ns(&container));
    let asked = Instant::now();
    tokio::time::sleep(Duration::from_secs(300)).await;
    let (engine_after, cgroup_after) = (engine_cpu_ns(&container), crate::team::cpu_used_ns(&container));
    assert_eq!(crate::team::state_of(&container), "paused", "still paused after 5 minutes");
    assert_eq!(engine_after, engine_before, "the engine counts no CPU time while it waited");
    assert_eq!(cgroup_after, cgroup_before, "nor does the cgroup");
    let now = get(&client, &id).await.unwrap();
    assert_eq!(now.task.status(), TaskStatus::Working, "{now:?}");
    assert!(logged_calls(&calls).is_empty(), "echo went out before the decision");

    let base = url.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = crate::console::login(&http, &base, &bob.token).await;
    let page = http.get(format!("{base}/console")).header("cookie", &cookie).send().await.unwrap();
    let page = page.text().await.unwrap();
    let link = format!("/console/approvals/{}", waiting.id);
    assert!(page.contains(&link), "the console shows bob the question: {page}");
    let csrf = crate::console::csrf_in(&page);
    let decided = crate::console::decide(&http, &base, &cookie, &link, "approve", "after+five+minutes", &csrf).await;
    assert_eq!(decided.status(), 200, "bob's approval is taken");
    let (done, _) = settled(&client, &id, Duration::from_secs(60)).await;
    assert_eq!(report_of(&done)["stdout"], "launch-code-4711\n", "{done:?}");
    eprintln!(
        "measured: approved {} s after it was asked; the container's CPU time stayed at {engine_before} ns \
         (engine API) / {cgroup_before} ns (cgroup) while it waited",
        asked.elapsed().as_secs()
    );
    assert_eq!(handler.requests.load(Ordering::SeqCst), 0, "the client was asked nothing");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&calls);
}
