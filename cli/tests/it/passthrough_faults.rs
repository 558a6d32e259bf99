//! Faults under the gateway's relaying of a wrapped server's questions
//! (`--expose-tools`), with real processes: a client that can be asked
//! (it declares sampling) gets a session of its own with each wrapped
//! server (for a stdio server, a child process of its own), and the
//! server's questions reach it through its frontend. These tests kill
//! what such a session depends on and check that the gateway neither
//! hangs nor stops serving:
//!
//! - the wrapped server's process behind a client's own session dies (its
//!   `crash` tool): the call in flight fails, and the next call opens a new
//!   session whose questions reach the client again (through `serve`, and
//!   over a real nats-server with the bridge and the frontend as processes
//!   of their own; for a stateless 2026-07-28 client, the session is the
//!   bridge's stateless session with the server, reopened the same way);
//! - the frontend is killed (`kill -9`) while a server's question waits
//!   for its client's answer: the bridge keeps serving a new frontend's
//!   clients at once, and gives the orphaned question up within its
//!   question timeout (`--approval-timeout` plus the hop margin), which its
//!   audit record shows.
//!
//! Every wait is bounded, so a hang fails the test instead of stalling it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use code_mode_core::testing::NatsServer;
use rmcp::ClientHandler;
#[allow(deprecated)] // Sampling is deprecated from 2026-07-28 on; the test server still asks with it.
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, CreateMessageRequestParams, CreateMessageResult,
    ErrorData, SamplingCapability,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleClient, RunningService};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::support::{self, kill9, log_path, python_sdk, service_command, spawn_service};

/// What the clients' model answers.
const MODEL_TEXT: &str = "the client's model answers";

/// What the test server makes of the model's answer.
fn model_wrote() -> String {
    format!("the model wrote: {MODEL_TEXT}")
}

/// How long one Python client's whole run may take: a hang fails the test.
const RUN_WITHIN: Duration = Duration::from_secs(90);

/// Every request the test server logged (`<method> <tool, URI or ->`).
fn logged_requests(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The text of a Python step's tool result.
fn text_of(step: &Value) -> String {
    step["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result: {step}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

/// The Python SDK client (`api`: `session` or `client`) answering sampling
/// with [`MODEL_TEXT`], through `gateway` (its `--stdio ... --` command
/// line) to the test server logging to `log`: it asks the model, crashes
/// the server under its own session, and asks the model again.
async fn asks_crashes_and_asks_again(gateway: &[String], log: &Path, what: &str) {
    for api in ["session", "client"] {
        let before = logged_requests(log).len();
        let args: Vec<&str> =
            gateway.iter().map(String::as_str).chain(["--api", api, "--sampling", MODEL_TEXT]).collect();
        let steps = json!([
            {"op": "call", "tool": "ask_model", "arguments": {"prompt": "before the crash"}},
            {"op": "call", "tool": "crash", "arguments": {}},
            {"op": "call", "tool": "ask_model", "arguments": {"prompt": "after the crash"}},
            {"op": "asked"},
        ]);
        let started = Instant::now();
        let ran = tokio::time::timeout(RUN_WITHIN, python_sdk(&args, &steps))
            .await
            .unwrap_or_else(|_| panic!("{what} {api}: the client's steps end within {RUN_WITHIN:?}, never a hang"));
        let Some((results, stderr)) = ran else { return };
        let took = started.elapsed();
        assert_eq!(results.len(), 4, "{what} {api}: {results:?} {stderr}");
        assert_eq!(text_of(&results[0]), model_wrote(), "{what} {api}: the first answer arrives: {stderr}");
        // The server's death is the crash call's error, whichever way the
        // SDK hands it over (an error result or a raised error).
        let crashed = &results[1];
        let failure = match crashed.get("error") {
            Some(error) => error.as_str().unwrap_or_default().to_string(),
            None => {
                assert_eq!(crashed["result"]["isError"], true, "{what} {api}: the crash is an error: {crashed}");
                text_of(crashed)
            }
        };
        assert!(failure.contains("TransportClosed"), "{what} {api}: the server's death is named: {failure}");
        assert_eq!(
            text_of(&results[2]),
            model_wrote(),
            "{what} {api}: after the crash the answer arrives again: {} {stderr}",
            results[2]
        );
        let asked = results[3]["result"].as_array().unwrap_or_else(|| panic!("{}", results[3]));
        let prompts: Vec<&str> =
            asked.iter().filter_map(|a| a["params"]["messages"][0]["content"]["text"].as_str()).collect();
        assert_eq!(
            prompts,
            ["before the crash", "after the crash"],
            "{what} {api}: each question reached the client once: {asked:?}"
        );
        // The server saw the crash and, on a session opened after it, the
        // second call. (ClientSession's calls go over its own session;
        // mcp.Client's, stateless, over the bridge's stateless session of
        // the server, opened the same way: both are opened anew.) The
        // bridge's shared session was not touched: a server started again
        // there lists its tools anew.
        let seen = logged_requests(log)[before..].to_vec();
        let crash = seen.iter().position(|l| l == "tools/call crash").unwrap_or_else(|| panic!("{seen:?}"));
        let again =
            seen[crash..].iter().position(|l| l == "tools/call ask_model").unwrap_or_else(|| panic!("{seen:?}"));
        assert!(
            seen[crash..crash + again].iter().any(|l| l.starts_with("initialize") || l.starts_with("server/discover")),
            "{what} {api}: a new session was opened between the crash and the next call: {seen:?}"
        );
        assert!(!seen[crash..].iter().any(|l| l.starts_with("tools/list")), "{what} {api}: {seen:?}");
        eprintln!("{what} {api}: ask, crash ({failure}), ask again took {took:?}; the server saw {seen:?}");
    }
}

#[tokio::test]
async fn a_wrapped_server_that_dies_under_a_clients_own_session_is_opened_again_for_its_next_call() {
    let log = log_path("passthrough-faults-reopen");
    let server = support::test_server().display().to_string();
    let gateway: Vec<String> = [
        "--stdio",
        &support::code_mode().display().to_string(),
        "serve",
        "--expose-tools=only",
        "--",
        &server,
        "--resources",
        "--log",
        &log.display().to_string(),
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    asks_crashes_and_asks_again(&gateway, &log, "serve").await;
    let _ = std::fs::remove_file(log);
}

#[tokio::test]
async fn over_nats_a_wrapped_server_that_dies_under_a_clients_own_session_is_opened_again_for_its_next_call() {
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let log = log_path("passthrough-faults-reopen-nats");
    let log_arg = log.display().to_string();
    let mut bridge = spawn_service(&nats.url(), &users, "bridge", &[], Some(&["--resources", "--log", &log_arg]));
    let gateway = support::frontend_stdio(&nats.url(), &users, &["--expose-tools=only"]);
    asks_crashes_and_asks_again(&gateway, &log, "over NATS").await;
    assert!(bridge.try_wait().unwrap().is_none(), "the bridge still runs");
    let _ = std::fs::remove_file(log);
}

/// A client's model (sampling): it answers [`MODEL_TEXT`], or (`silent`)
/// never answers; each prompt it is asked goes to `asked`.
#[derive(Clone)]
struct Model {
    silent: bool,
    asked: mpsc::UnboundedSender<String>,
}

#[allow(deprecated)] // Sampling is deprecated from 2026-07-28 on; the test server still asks with it.
impl ClientHandler for Model {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let params = serde_json::to_value(&params).unwrap_or_default();
        let prompt = params["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_string();
        let _ = self.asked.send(prompt);
        if self.silent {
            // Far longer than any timeout of the gateway.
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let answer = json!({"role": "assistant", "content": {"type": "text", "text": MODEL_TEXT},
                            "model": "test-model", "stopReason": "endTurn"});
        Ok(serde_json::from_value(answer).unwrap())
    }

    fn get_info(&self) -> rmcp::model::ClientInfo {
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = Some(SamplingCapability::default());
        let mut info = rmcp::model::ClientInfo::default();
        info.capabilities = capabilities;
        info
    }
}

/// `code-mode frontend --expose-tools=only --http 127.0.0.1:0` over `nats`:
/// the process and its MCP URL.
async fn http_frontend(nats: &str, users: &code_mode_core::testing::NatsUsers) -> (tokio::process::Child, String) {
    let mut frontend =
        service_command(nats, users, "frontend", &["--expose-tools=only", "--http", "127.0.0.1:0"], None);
    let (child, url, _log) = crate::http::spawn_http(&mut frontend).await;
    (child, url)
}

/// Call `tool` with `arguments` within `within`.
async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
    within: Duration,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = Some(arguments.as_object().unwrap().clone());
    tokio::time::timeout(within, client.peer().call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool} answers within {within:?}"))
        .unwrap_or_else(|e| panic!("{tool} answers: {e}"))
}

/// The audit records of sampling questions in `path`.
fn sampling_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "call" && r["method"] == "sampling/createMessage")
        .collect()
}

/// The bridge's question timeout in this test (`--approval-timeout`).
const QUESTION_TIMEOUT: Duration = Duration::from_secs(6);

#[tokio::test]
async fn a_frontend_killed_while_a_server_waits_for_its_clients_answer_leaves_the_bridge_serving_other_clients() {
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let url = nats.url();
    let (log, audit) = (log_path("passthrough-faults-orphan"), log_path("passthrough-faults-orphan-audit"));
    let (log_arg, audit_arg) = (log.display().to_string(), audit.display().to_string());
    let timeout_arg = QUESTION_TIMEOUT.as_secs().to_string();
    // The call's own timeout is far longer than the question's, so what
    // ends the orphaned question is the bridge giving it up.
    let bridge_args = ["--approval-timeout", &timeout_arg, "--call-timeout", "60", "--audit", &audit_arg];
    let mut bridge = spawn_service(&url, &users, "bridge", &bridge_args, Some(&["--resources", "--log", &log_arg]));
    let bridge_pid = bridge.id().expect("the bridge runs");

    // A client whose model never answers asks through the first frontend.
    let (mut first, first_url) = http_frontend(&url, &users).await;
    let (asked_tx, mut asked) = mpsc::unbounded_channel();
    let silent =
        crate::http::connect(&first_url, Model { silent: true, asked: asked_tx }, ClientLifecycleMode::Initialize)
            .await;
    let silent = Arc::new(silent);
    let pending = {
        let silent = silent.clone();
        tokio::spawn(async move {
            let mut params = CallToolRequestParams::new("ask_model");
            params.arguments = Some(json!({"prompt": "nobody answers"}).as_object().unwrap().clone());
            silent.peer().call_tool(params).await
        })
    };
    let prompt = tokio::time::timeout(Duration::from_secs(30), asked.recv())
        .await
        .expect("the server's question reaches the client within 30 s")
        .expect("a question");
    let asked_at = Instant::now();
    assert_eq!(prompt, "nobody answers");

    // The frontend dies with the question pending at the bridge.
    kill9(first.id().expect("the frontend runs"));
    first.wait().await.expect("the killed frontend is reaped");
    let killed_at = Instant::now();
    // The bridge's server processes then: its shared session's and the
    // killed frontend's client's own session's.
    let at_the_kill = support::children_of(bridge_pid);
    assert_eq!(at_the_kill.len(), 2, "the shared session and the dead client's own: {at_the_kill:?}");
    pending.abort();
    drop(silent);

    // A new frontend serves a new client at once: a plain call and a
    // question answered, while the orphaned question still waits.
    let (_second, second_url) = http_frontend(&url, &users).await;
    let (answers_tx, mut answered) = mpsc::unbounded_channel();
    let client =
        crate::http::connect(&second_url, Model { silent: false, asked: answers_tx }, ClientLifecycleMode::Initialize)
            .await;
    let sum = call(&client, "add", json!({"a": 2, "b": 3}), Duration::from_secs(20)).await;
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})), "{sum:?}");
    let add_after = killed_at.elapsed();
    let model = call(&client, "ask_model", json!({"prompt": "a new client asks"}), Duration::from_secs(20)).await;
    let text: String = model.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    assert_eq!(text, model_wrote(), "{model:?}");
    assert_eq!(answered.try_recv().ok().as_deref(), Some("a new client asks"), "the new client was asked");
    let ask_after = killed_at.elapsed();
    assert!(bridge.try_wait().unwrap().is_none(), "the bridge still runs");
    eprintln!("after the kill: the new frontend's add answered at {add_after:?}, its ask_model at {ask_after:?}");

    // The orphaned question ends within the bridge's question timeout (and
    // the hop margin) from when it was asked: its audit record, a fault,
    // is written then.
    let limit = QUESTION_TIMEOUT + code_mode_core::defaults::HOP_MARGIN + Duration::from_secs(5);
    let orphaned = loop {
        let faults: Vec<Value> = sampling_records(&audit).into_iter().filter(|r| r["result"] == "fault").collect();
        if let Some(record) = faults.into_iter().next() {
            break record;
        }
        assert!(
            asked_at.elapsed() < limit,
            "the orphaned question is still pending {:?} after it was asked: {:?}",
            asked_at.elapsed(),
            sampling_records(&audit)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ended_after = asked_at.elapsed();
    eprintln!("the orphaned question was given up {ended_after:?} after it was asked: {orphaned}");
    assert!(
        ended_after >= QUESTION_TIMEOUT.saturating_sub(Duration::from_secs(1)),
        "the question waited for its client's answer, not less: {ended_after:?}"
    );

    // The orphaned call ends with its question (the server hears that its
    // client could not be asked), not at its own 60 s timeout.
    let session = orphaned["session"].clone();
    let call_ended = loop {
        let records: Vec<Value> = std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "call" && r["tool"] == "ask_model" && r["session"] == session)
            .collect();
        if let Some(record) = records.into_iter().next() {
            break record;
        }
        assert!(asked_at.elapsed() < limit + Duration::from_secs(5), "the orphaned call is still pending");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("the orphaned ask_model call ended {:?} after its question was asked: {call_ended}", asked_at.elapsed());
    // Its record: allowed, of the same client session and cell as the
    // question, written after it, and an error result (the server heard its
    // client could not be asked), within seconds of the question's end,
    // not at the call's own 60 s timeout.
    assert_eq!((call_ended["decision"].as_str(), call_ended["result"].as_str()), (Some("allowed"), Some("error")));
    assert_eq!(call_ended["cell"], orphaned["cell"], "{call_ended}");
    assert!(call_ended["seq"].as_u64() > orphaned["seq"].as_u64(), "{call_ended}");
    let at = |record: &Value, field: &str| {
        let text = record[field].as_str().unwrap_or_else(|| panic!("{field} in {record}"));
        code_mode_audit::record::parse_rfc3339(text).unwrap_or_else(|| panic!("{field} is no time: {text}"))
    };
    let after_the_question = at(&call_ended, "time").duration_since(at(&orphaned, "time")).expect("after the question");
    assert!(after_the_question < Duration::from_secs(5), "the call ended {after_the_question:?} after its question");
    let took = at(&call_ended, "time").duration_since(at(&call_ended, "decided")).expect("a time after its start");
    assert!(
        took < Duration::from_secs(30),
        "the call took {took:?}: its own timeout (60 s) ended it, not its question"
    );

    // The bridge and the new client go on.
    let sum = call(&client, "add", json!({"a": 2, "b": 3}), Duration::from_secs(20)).await;
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})), "{sum:?}");
    assert!(bridge.try_wait().unwrap().is_none(), "the bridge still runs");
    assert!(support::pid_alive(bridge_pid));
    // The new client has its own session (a process of its own) while it
    // is connected; when it leaves, that one closes, and what stays is what
    // there was at the kill: the shared session and the killed frontend's
    // client's own session, which no session end will close (it closes
    // when idle, after upstream::OWN_IDLE).
    let with_the_new_client = support::children_of(bridge_pid);
    let its_own: Vec<u32> = with_the_new_client.iter().copied().filter(|p| !at_the_kill.contains(p)).collect();
    assert_eq!(its_own.len(), 1, "the new client's own session: {with_the_new_client:?} (at the kill {at_the_kill:?})");
    client.cancel().await.ok();
    let left = support::eventually(Duration::from_secs(10), || {
        let mut now = support::children_of(bridge_pid);
        now.sort_unstable();
        let mut then = at_the_kill.clone();
        then.sort_unstable();
        now == then
    })
    .await;
    let now = support::children_of(bridge_pid);
    assert!(left, "the bridge's server processes after both clients: {now:?}, at the kill {at_the_kill:?}");
    eprintln!("the bridge's server processes after both clients: {now:?}");
    let _ = (std::fs::remove_file(log), std::fs::remove_file(audit));
}
