//! Approval end to end: a policy holds `echo` for approval, the code calls
//! it from the real sandbox, the bridge asks the frontend of the session,
//! and the frontend asks a real MCP client (rmcp's, with an elicitation
//! handler standing in for the person) on the `run_python` request. Both
//! ways of asking are tried: `elicitation/create` for a client that
//! negotiated protocol 2025-11-25 with `initialize`, and an input-required
//! result answered by a retried call for a stateless 2026-07-28 client.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleClient};
use serde_json::json;

use crate::support::{self, Deployment, log_path, logged_calls, report};

/// `echo` needs approval; every other tool is allowed.
const POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;

/// What the stand-in person answers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer {
    Accept,
    Decline,
    Cancel,
    /// Answer nothing for this long (then decline).
    Silent(Duration),
}

/// An MCP client handler that answers every elicitation as told and keeps
/// the questions it saw.
#[derive(Debug, Clone)]
pub(crate) struct Person {
    answer: Answer,
    /// Declare form elicitation support.
    capable: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Person {
    pub(crate) fn new(answer: Answer) -> Self {
        Self { answer, capable: true, asked: Arc::default() }
    }

    pub(crate) fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Person {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        let action = match self.answer {
            Answer::Accept => ElicitationAction::Accept,
            Answer::Decline => ElicitationAction::Decline,
            Answer::Cancel => ElicitationAction::Cancel,
            Answer::Silent(wait) => {
                tokio::time::sleep(wait).await;
                ElicitationAction::Decline
            }
        };
        let accepted = matches!(action, ElicitationAction::Accept);
        let result = ElicitResult::new(action);
        Ok(if accepted { result.with_content(json!({})) } else { result })
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.capable {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }
}

const ONE_ECHO: &str = "\
try:
    print(await echo({'text': 'launch-code-4711'}))
except ToolError as e:
    print('refused:', e)
print(await add({'a': 2, 'b': 3}))
";

/// Run `code` through `serve --policy` with `person` as the client; the
/// printed lines and the server's logged calls.
async fn run_with(
    deployment: Deployment,
    person: Person,
    lifecycle: ClientLifecycleMode,
    extra: &[&str],
    code: &str,
) -> (Vec<String>, Vec<String>) {
    let policy = log_path("approval-policy").with_extension("json");
    std::fs::write(&policy, POLICY).expect("the policy is written");
    let log = log_path("approval-calls");
    let mut args = vec!["--policy", policy.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (client, _pid, _guards) =
        support::start_with_lifecycle(deployment, &args, &["--log", log.to_str().unwrap()], person, lifecycle).await;
    let result = run_python_as(&client, code).await;
    let report = report(&result);
    assert!(report["error"].is_null(), "{report}");
    let lines = report["stdout"].as_str().unwrap().lines().map(str::to_string).collect();
    let calls = logged_calls(&log);
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
    (lines, calls)
}

async fn run_python_as(
    client: &rmcp::service::RunningService<RoleClient, Person>,
    code: &str,
) -> rmcp::model::CallToolResult {
    let mut params = rmcp::model::CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    // The running service's call drives input-required rounds through the
    // handler (the peer's own call would not).
    client.call_tool(params).await.expect("run_python answers")
}

/// The audit file once it has `n` call records (written by the serving
/// process as each call ends; give it a moment).
async fn wait_for_lines(path: &std::path::Path, n: usize) -> String {
    for _ in 0..50 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().filter(|l| l.contains("\"kind\":\"call\"")).count() >= n {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::read_to_string(path).unwrap_or_default()
}

fn legacy() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

fn stateless() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
}

#[tokio::test]
async fn an_accepted_question_lets_the_call_out_and_names_the_tool_server_arguments_and_rule() {
    if !support::sandbox_available() {
        return;
    }
    let person = Person::new(Answer::Accept);
    let audit = log_path("approval-audit");
    let audit_arg = ["--audit", audit.to_str().unwrap()];
    let (lines, calls) = run_with(Deployment::AllInOne, person.clone(), legacy(), &audit_arg, ONE_ECHO).await;
    assert_eq!(lines, ["launch-code-4711", "{\"sum\":5}"], "{lines:?}");
    assert_eq!(calls.len(), 2, "echo and add reached the server: {calls:?}");
    // The audit log holds one record per call, without the arguments.
    let text = wait_for_lines(&audit, 2).await;
    assert!(!text.contains("launch-code-4711"), "{text}");
    let decisions: Vec<(String, String)> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|l| l["kind"] == "call")
        .map(|l| (l["tool"].as_str().unwrap().to_string(), l["decision"].as_str().unwrap().to_string()))
        .collect();
    let expected = [("echo", "approved"), ("add", "allowed")].map(|(t, d)| (t.to_string(), d.to_string()));
    assert_eq!(decisions, expected);
    let _ = std::fs::remove_file(&audit);
    let asked = person.asked();
    assert_eq!(asked.len(), 1, "one question for the one echo: {asked:?}");
    let question = &asked[0];
    for part in ["\"echo\"", "code-mode-test-server", r#""text" = "launch-code-4711""#, "/tools/echo"] {
        assert!(question.contains(part), "{part} missing from the question: {question}");
    }
}

#[tokio::test]
async fn a_declined_question_refuses_the_call_and_it_never_reaches_the_server() {
    if !support::sandbox_available() {
        return;
    }
    let (lines, calls) = run_with(Deployment::AllInOne, Person::new(Answer::Decline), legacy(), &[], ONE_ECHO).await;
    assert_eq!(
        lines,
        ["refused: echo: needs approval (/tools/echo): the person declined the call", "{\"sum\":5}"],
        "{lines:?}"
    );
    assert_eq!(calls.len(), 1, "only add reached the server: {calls:?}");
    assert!(calls[0].contains("add"), "{calls:?}");
}

#[tokio::test]
async fn a_dismissed_question_refuses_the_call_saying_so() {
    if !support::sandbox_available() {
        return;
    }
    let (lines, _) = run_with(Deployment::AllInOne, Person::new(Answer::Cancel), legacy(), &[], ONE_ECHO).await;
    assert_eq!(
        lines[0],
        "refused: echo: needs approval (/tools/echo): the person dismissed the question without approving"
    );
}

#[tokio::test]
async fn a_question_left_unanswered_past_the_approval_timeout_refuses_the_call() {
    if !support::sandbox_available() {
        return;
    }
    let person = Person::new(Answer::Silent(Duration::from_secs(6)));
    let (lines, calls) = run_with(Deployment::AllInOne, person, legacy(), &["--approval-timeout", "2"], ONE_ECHO).await;
    assert_eq!(lines[0], "refused: echo: needs approval (/tools/echo): no answer within 2 s, so the call is refused");
    assert_eq!(calls.len(), 1, "{calls:?}");
}

#[tokio::test]
async fn a_client_without_elicitation_support_gets_a_refusal_saying_it_cannot_be_asked() {
    if !support::sandbox_available() {
        return;
    }
    let person = Person { capable: false, ..Person::new(Answer::Accept) };
    let (lines, calls) = run_with(Deployment::AllInOne, person.clone(), legacy(), &[], ONE_ECHO).await;
    assert_eq!(
        lines[0],
        "refused: echo: needs approval (/tools/echo): nobody could be asked: the MCP client did not declare support \
         for (form) elicitation"
    );
    assert!(person.asked().is_empty());
    assert_eq!(calls.len(), 1, "{calls:?}");
}

#[tokio::test]
async fn a_stateless_client_approves_through_an_input_required_round_and_gathered_calls_ask_together() {
    if !support::sandbox_available() {
        return;
    }
    let person = Person::new(Answer::Accept);
    let code = "\
import asyncio
print(await asyncio.gather(*[echo({'text': f'n{i}'}) for i in range(3)]))
print(await add({'a': 1, 'b': 1}))
";
    let (lines, calls) = run_with(Deployment::AllInOne, person.clone(), stateless(), &[], code).await;
    assert_eq!(lines, ["['n0', 'n1', 'n2']", "{\"sum\":2}"], "{lines:?}");
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(person.asked().len(), 3, "one question per gathered call: {:?}", person.asked());
}

#[tokio::test]
async fn a_stateless_client_that_declines_refuses_the_call() {
    if !support::sandbox_available() {
        return;
    }
    let (lines, calls) = run_with(Deployment::AllInOne, Person::new(Answer::Decline), stateless(), &[], ONE_ECHO).await;
    assert_eq!(lines[0], "refused: echo: needs approval (/tools/echo): the person declined the call");
    assert_eq!(calls.len(), 1, "{calls:?}");
}

#[tokio::test]
async fn over_nats_the_bridge_asks_the_frontend_of_the_session_that_ran_the_cell() {
    if !support::sandbox_available() {
        return;
    }
    let person = Person::new(Answer::Accept);
    let (lines, calls) = run_with(Deployment::OverNats, person.clone(), legacy(), &[], ONE_ECHO).await;
    assert_eq!(lines, ["launch-code-4711", "{\"sum\":5}"], "{lines:?}");
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(person.asked().len(), 1);
}

#[test]
fn code_mode_run_has_nobody_to_ask_so_a_call_needing_approval_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("approval-run-policy").with_extension("json");
    std::fs::write(&policy, POLICY).expect("the policy is written");
    let ran = support::run(&["--policy", policy.to_str().unwrap()], ONE_ECHO, &[]);
    let stdout = ran.ok();
    assert!(
        stdout.starts_with("refused: echo: needs approval (/tools/echo): nobody could be asked: the cell does not run on an MCP request"),
        "{stdout}"
    );
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn an_approval_question_for_one_session_never_reaches_another_session() {
    // Two clients of one split deployment: the bridge asks only the frontend
    // whose session ran the cell.
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("approval-two-policy").with_extension("json");
    std::fs::write(&policy, POLICY).expect("the policy is written");
    let first = Person::new(Answer::Accept);
    let (client, _pid, guards) = support::start_with_lifecycle(
        Deployment::OverNats,
        &["--policy", policy.to_str().unwrap()],
        &[],
        first.clone(),
        legacy(),
    )
    .await;
    let second = Person::new(Answer::Decline);
    let mut other = tokio::process::Command::new(support::code_mode());
    other.arg("frontend").args(["--nats", &guards.nats_url()]);
    other.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", guards.users().password("frontend"));
    let (other_client, _) = support::connect_client_lifecycle(other, second.clone(), legacy()).await;
    let a = report(&run_python_as(&client, ONE_ECHO).await);
    let b = report(&run_python_as(&other_client, ONE_ECHO).await);
    assert!(a["stdout"].as_str().unwrap().starts_with("launch-code-4711\n"), "{a}");
    assert!(b["stdout"].as_str().unwrap().starts_with("refused: echo: needs approval"), "{b}");
    assert_eq!((first.asked().len(), second.asked().len()), (1, 1), "each person saw only their own question");
    other_client.cancel().await.ok();
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}

/// Run `code-mode run --ask` on a pseudo-terminal (`script`), answer the
/// terminal's question with `answer` once it is shown, and return the
/// report's stdout and what the terminal showed.
async fn run_on_a_terminal(answer: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = code_mode_core::testing::TempDir::new("approval-tty");
    let policy = dir.0.join("policy.json");
    std::fs::write(&policy, POLICY).expect("the policy is written");
    let code = dir.0.join("cell.py");
    std::fs::write(&code, ONE_ECHO).expect("the code is written");
    let command = format!(
        "{} run --ask --policy {} --file {} -- {} 2>/dev/null",
        support::code_mode().display(),
        policy.display(),
        code.display(),
        support::test_server().display()
    );
    let mut script = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script (util-linux) runs");
    let mut stdin = script.stdin.take().unwrap();
    let mut stdout = script.stdout.take().unwrap();
    let mut shown = String::new();
    let mut buffer = [0u8; 4096];
    let asked = tokio::time::timeout(Duration::from_secs(60), async {
        while !shown.contains("Allow this call? [y/N]") {
            let n = stdout.read(&mut buffer).await.expect("the terminal is read");
            assert!(n > 0, "the run ended without asking: {shown}");
            shown.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    })
    .await;
    assert!(asked.is_ok(), "no question within 60 s: {shown}");
    stdin.write_all(format!("{answer}\n").as_bytes()).await.expect("the answer is typed");
    let mut rest = String::new();
    tokio::time::timeout(Duration::from_secs(60), stdout.read_to_string(&mut rest))
        .await
        .expect("the run ends within 60 s")
        .expect("the terminal is read");
    let report_line = rest.lines().map(|l| l.trim()).find(|l| l.starts_with("{\"stdout\"")).unwrap_or_default();
    let report: serde_json::Value = serde_json::from_str(report_line).unwrap_or_else(|_| panic!("no report in {rest}"));
    (report["stdout"].as_str().unwrap().to_string(), shown)
}

#[tokio::test]
async fn code_mode_run_with_ask_asks_on_the_terminal_and_only_a_yes_lets_the_call_out() {
    if !support::sandbox_available() {
        return;
    }
    let (stdout, shown) = run_on_a_terminal("y").await;
    assert_eq!(stdout, "launch-code-4711\n{\"sum\":5}\n");
    for part in ["\"echo\"", r#""text" = "launch-code-4711""#, "/tools/echo"] {
        assert!(shown.contains(part), "{part} missing from the terminal's question: {shown}");
    }
    let (stdout, _) = run_on_a_terminal("n").await;
    assert_eq!(stdout, "refused: echo: needs approval (/tools/echo): the person declined the call\n{\"sum\":5}\n");
}

#[test]
fn run_with_ask_and_no_terminal_stops_saying_it_needs_one() {
    // setsid: no controlling terminal, whatever runs the tests.
    let out = std::process::Command::new("setsid")
        .arg(support::code_mode())
        .args(["run", "--ask", "--code", "print(1)", "--"])
        .arg(support::test_server())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("setsid (util-linux) runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--ask needs a terminal, and /dev/tty cannot be opened"), "{stderr}");
}
