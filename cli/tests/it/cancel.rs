//! A cancel that stops the cell: a client's `notifications/cancelled` for
//! a `run_python` request (or, for a 2026-07-28 client over HTTP, the
//! request's stream closed) ends the cell's container at once, cancels the
//! call it has in flight at its server, and the audit record says
//! `cancelled`; in one process and over NATS, with rmcp's client and the
//! Python SDK's two clients.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientConfig, ClientRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleClient};
use serde_json::json;
use tokio::sync::mpsc;

use crate::support::{self, Deployment, log_path, python_sdk};

/// The cell says which container runs it (its host name is the
/// container's short id), then waits on the test server's `sleep`.
const SAYS_WHERE_THEN_SLEEPS: &str = "\
import socket
report_progress(1, 2, socket.gethostname())
await sleep(seconds=60)
print('never printed')
";

/// A client handler passing on the progress messages it gets.
struct Progress {
    seen: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Progress {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        if let Some(message) = params.message {
            let _ = self.seen.send(message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_serve_a_cancelled_run_python_ends_its_container_within_a_second_and_cancels_its_call_at_the_server() {
    a_cancel_stops_the_cell(Deployment::AllInOne).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_cancelled_run_python_ends_its_container_within_a_second_and_cancels_its_call_at_the_server() {
    a_cancel_stops_the_cell(Deployment::OverNats).await;
}

async fn a_cancel_stops_the_cell(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let log = log_path("cell-cancel");
    let audit = log_path("cell-cancel-audit");
    let (seen, mut heard) = mpsc::unbounded_channel();
    let args = ["--audit", audit.to_str().unwrap()];
    let (client, _pid, _guards) =
        support::start_with(deployment, &args, &["--log", log.to_str().unwrap()], Progress { seen }).await;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": SAYS_WHERE_THEN_SLEEPS}).as_object().unwrap().clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let host = tokio::time::timeout(Duration::from_secs(30), heard.recv())
        .await
        .ok()
        .flatten()
        .expect("the cell says its container's host name");
    assert!(
        support::server_logged(&log, "tools/call sleep", Duration::from_secs(20)).await,
        "the call reached the server"
    );
    let container = full_id(&host).expect("the cell's container runs");
    assert_eq!(crate::team::state_of(&container), "running");
    let sent = SystemTime::now();
    handle.cancel(Some("the person pressed stop".into())).await.expect("the cancel is sent");
    // The engine's own record: the container's `die` event.
    let died = died_at(&container, sent, Duration::from_secs(10)).expect("the engine saw the container die");
    let after = died.duration_since(sent).unwrap_or_default();
    eprintln!("measured: the container died {} ms after the cancel was sent", after.as_millis());
    assert!(after < Duration::from_secs(1), "the container died {after:?} after the cancel, not within 1 s");
    assert!(
        support::server_logged(&log, "notifications/cancelled", Duration::from_secs(5)).await,
        "the server heard of the cancel: {:?}",
        std::fs::read_to_string(&log)
    );
    let recorded = support::eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(&audit).unwrap_or_default().contains(r#""outcome":"cancelled""#)
    })
    .await;
    assert!(
        recorded,
        "the cell's audit record says cancelled: {}",
        std::fs::read_to_string(&audit).unwrap_or_default()
    );
    // The session goes on.
    let next = crate::http::run_python(&client, "print(6 * 7)").await;
    assert_eq!(support::stdout_of(&next), "42\n");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(log);
    let _ = std::fs::remove_file(audit);
}

#[tokio::test]
async fn a_cancel_that_comes_after_the_cell_ended_is_no_error_and_stops_nothing() {
    if !support::sandbox_available() {
        return;
    }
    let audit = log_path("late-cancel-audit");
    let (client, _pid, _guards) =
        support::start(Deployment::AllInOne, &["--audit", audit.to_str().unwrap()], &[]).await;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": "print('done')"}).as_object().unwrap().clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let id = handle.id.clone();
    let result = handle.await_response().await.expect("the cell answers");
    assert!(format!("{result:?}").contains("done"), "{result:?}");
    // rmcp's handle is spent: the cancel goes out as a plain notification.
    let late = rmcp::model::CancelledNotificationParam::new(Some(id), Some("too late".into()));
    client.peer().notify_cancelled(late).await.expect("the late cancel is sent");
    let next = support::run_python(&client, "print('still here')").await;
    assert_eq!(support::stdout_of(&next), "still here\n");
    let records = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(!records.contains(r#""outcome":"cancelled""#), "nothing was cancelled: {records}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(audit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_python_sdk_clients_that_give_up_on_a_cell_stop_it_and_its_call_at_the_server_over_stdio_and_http() {
    if !support::sandbox_available() {
        return;
    }
    let code_mode = support::code_mode().display().to_string();
    let server = support::test_server().display().to_string();
    let code = "await sleep(seconds=60)\nprint('never printed')";
    for api in ["client", "session"] {
        // Over stdio: the SDK sends notifications/cancelled when its
        // caller's scope is cancelled.
        let log = log_path("sdk-cancel");
        let audit = log_path("sdk-cancel-audit");
        let args = [
            "--stdio",
            &code_mode,
            "serve",
            "--audit",
            audit.to_str().unwrap(),
            "--",
            &server,
            "--log",
            log.to_str().unwrap(),
            "--",
            "--api",
            api,
        ];
        let steps = json!([
            {"op": "call", "tool": "run_python", "arguments": {"code": code}, "give_up_after": 4},
            {"op": "call", "tool": "run_python", "arguments": {"code": "print(6 * 7)"}},
        ]);
        let started = Instant::now();
        let (results, stderr) = python_sdk(&args, &steps).await.expect("the Python SDK is installed");
        assert_eq!(results[0]["gave_up"], true, "{api}: {results:?} {stderr}");
        assert_eq!(results[1]["result"]["structuredContent"]["stdout"], "42\n", "{api}: {results:?}");
        assert!(started.elapsed() < Duration::from_secs(40), "{api}: the 60 s cell did not hold the session");
        assert!(
            support::server_logged(&log, "notifications/cancelled", Duration::from_secs(5)).await,
            "{api}: the server heard"
        );
        let recorded = support::eventually(Duration::from_secs(10), || {
            std::fs::read_to_string(&audit).unwrap_or_default().contains(r#""outcome":"cancelled""#)
        })
        .await;
        assert!(recorded, "{api}: the audit says cancelled");
        let _ = std::fs::remove_file(log);
        let _ = std::fs::remove_file(audit);
    }
    // Over streamable HTTP: mcp.Client (2026-07-28) closes the request's
    // stream; ClientSession (2025-11-25) posts notifications/cancelled.
    for api in ["client", "session"] {
        let log = log_path("sdk-http-cancel");
        let audit = log_path("sdk-http-cancel-audit");
        let mut serve = tokio::process::Command::new(support::code_mode());
        serve
            .args(["serve", "--http", "127.0.0.1:0", "--audit", audit.to_str().unwrap(), "--"])
            .arg(support::test_server())
            .args(["--log", log.to_str().unwrap()])
            .kill_on_drop(true);
        let (_serve, url, _lines) = crate::http::spawn_http(&mut serve).await;
        let steps = json!([
            {"op": "call", "tool": "run_python", "arguments": {"code": code}, "give_up_after": 4},
            {"op": "call", "tool": "run_python", "arguments": {"code": "print(6 * 7)"}},
        ]);
        let (results, stderr) =
            python_sdk(&["--url", &url, "--api", api], &steps).await.expect("the Python SDK is installed");
        assert_eq!(results[0]["gave_up"], true, "{api} over HTTP: {results:?} {stderr}");
        assert_eq!(results[1]["result"]["structuredContent"]["stdout"], "42\n", "{api} over HTTP: {results:?}");
        assert!(
            support::server_logged(&log, "notifications/cancelled", Duration::from_secs(5)).await,
            "{api} over HTTP: the server heard of the cancel: {:?}",
            std::fs::read_to_string(&log)
        );
        let recorded = support::eventually(Duration::from_secs(10), || {
            std::fs::read_to_string(&audit).unwrap_or_default().contains(r#""outcome":"cancelled""#)
        })
        .await;
        assert!(recorded, "{api} over HTTP: the audit says cancelled");
        let _ = std::fs::remove_file(log);
        let _ = std::fs::remove_file(audit);
    }
}

/// A client asked to approve a call, that never answers: it notes the
/// question and whether the question was withdrawn (its request
/// cancelled at the client).
#[derive(Clone, Default)]
struct Undecided {
    asked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    withdrawn: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ClientHandler for Undecided {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        use std::sync::atomic::Ordering;
        self.asked.store(true, Ordering::SeqCst);
        if tokio::time::timeout(Duration::from_secs(60), context.ct.cancelled()).await.is_ok() {
            self.withdrawn.store(true, Ordering::SeqCst);
        }
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        info
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_python_withdraws_its_approval_question_at_the_client_and_the_call_never_goes_out() {
    use std::sync::atomic::Ordering;
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("cancel-approval-policy").with_extension("json");
    std::fs::write(&policy, r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#)
        .expect("the policy is written");
    let log = log_path("cancel-approval-calls");
    let audit = log_path("cancel-approval-audit");
    let person = Undecided::default();
    let args = ["--policy", policy.to_str().unwrap(), "--audit", audit.to_str().unwrap()];
    let (client, _pid, _guards) =
        support::start_with(Deployment::AllInOne, &args, &["--log", log.to_str().unwrap()], person.clone()).await;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": "print(await echo({'text': 'pay 5'}))"}).as_object().unwrap().clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let asked = support::eventually(Duration::from_secs(30), || person.asked.load(Ordering::SeqCst)).await;
    assert!(asked, "the client was asked to approve the call");
    handle.cancel(Some("never mind".into())).await.expect("the cancel is sent");
    let withdrawn = support::eventually(Duration::from_secs(5), || person.withdrawn.load(Ordering::SeqCst)).await;
    assert!(withdrawn, "the approval question was cancelled at the client");
    let recorded = support::eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(&audit).unwrap_or_default().contains(r#""outcome":"cancelled""#)
    })
    .await;
    assert!(recorded, "the cell's audit record says cancelled");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = support::logged_calls(&log);
    assert!(!calls.iter().any(|c| c.contains("echo")), "the call never reached the server: {calls:?}");
    client.cancel().await.ok();
    for path in [policy, log, audit] {
        let _ = std::fs::remove_file(path);
    }
}

/// The engine's full id of the running container `short` names.
pub(crate) fn full_id(short: &str) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.Id}}", short])
        .output()
        .expect("docker inspect runs");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !id.is_empty()).then_some(id)
}

/// When the engine recorded the container's death (its `die` event, with
/// the engine's own time), waiting up to `within` for it.
pub(crate) fn died_at(container: &str, since: SystemTime, within: Duration) -> Option<SystemTime> {
    let started = Instant::now();
    let from = since.duration_since(UNIX_EPOCH).unwrap().as_secs().saturating_sub(1);
    while started.elapsed() < within {
        let until = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 1;
        let out = std::process::Command::new("docker")
            .args(["events", "--since", &from.to_string(), "--until", &until.to_string()])
            .args(["--filter", &format!("container={container}"), "--filter", "event=die"])
            .args(["--format", "{{.TimeNano}}"])
            .output()
            .expect("docker events runs");
        if let Some(nanos) = String::from_utf8_lossy(&out.stdout).lines().next().and_then(|l| l.trim().parse().ok()) {
            return Some(UNIX_EPOCH + Duration::from_nanos(nanos));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}
