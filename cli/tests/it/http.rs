//! MCP over streamable HTTP (`code-mode frontend --http ADDR`): the split
//! services over a real nats-server, and real rmcp clients connecting to
//! the URL, both as a client of protocol 2025-11-25 (an `initialize`
//! handshake and an `Mcp-Session-Id`) and as a stateless 2026-07-28 client.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

use code_mode_core::testing::{NatsServer, NatsUsers};
use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

use crate::approval::{Answer, Person};
use crate::support::{self, log_path, logged_calls, report, service_command, spawn_service};

/// nats-server, a bridge (with `bridge_args`), a runner and an HTTP
/// frontend; the MCP URL. Dropping it stops everything.
struct Split {
    url: String,
    /// The frontend's log lines so far.
    log: Arc<Mutex<Vec<String>>>,
    _processes: Vec<tokio::process::Child>,
    _nats: NatsServer,
    _users: NatsUsers,
}

async fn split(bridge_args: &[&str], server_args: &[&str]) -> Split {
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let bridge = spawn_service(&nats.url(), &users, "bridge", bridge_args, Some(server_args));
    let runner = spawn_service(&nats.url(), &users, "sandbox-runner", &[], None);
    let mut frontend = service_command(&nats.url(), &users, "frontend", &["--http", "127.0.0.1:0"], None);
    let (frontend, url, log) = spawn_http(&mut frontend).await;
    Split { url, log, _processes: vec![bridge, runner, frontend], _nats: nats, _users: users }
}

/// Spawn a `--http` command; the child, the URL it prints once it listens,
/// and its log lines (kept as they come).
pub(crate) async fn spawn_http(
    command: &mut tokio::process::Command,
) -> (tokio::process::Child, String, Arc<Mutex<Vec<String>>>) {
    let (child, url, log) = try_spawn_http(command).await;
    let url = url.expect("the frontend prints its URL within 60 s");
    (child, url, log)
}

/// Spawn a `--http` command: the child, the URL it printed once it listened
/// (an error when it exited or said nothing for 60 s), and its log lines.
pub(crate) async fn try_spawn_http(
    command: &mut tokio::process::Command,
) -> (tokio::process::Child, Result<String, std::sync::mpsc::RecvTimeoutError>, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    let mut child = command.stderr(std::process::Stdio::piped()).spawn().expect("the frontend starts");
    let stderr = child.stderr.take().expect("stderr is piped").into_owned_fd().expect("a file descriptor");
    // The frontend prints its URL once it listens; the rest of its log is
    // passed on to ours.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(std::fs::File::from(stderr)).lines().map_while(Result::ok) {
            if !sent && let Some(url) = line.strip_prefix("code-mode: MCP on ") {
                let _ = tx.send(url.to_string());
                sent = true;
            }
            eprintln!("frontend: {line}");
            kept.lock().unwrap().push(line);
        }
    });
    let url = tokio::task::spawn_blocking(move || rx.recv_timeout(std::time::Duration::from_secs(60))).await.unwrap();
    (child, url, log)
}

/// [`spawn_http`] on a port chosen before the command starts (because an
/// argument must name it, as an OAuth resource URI does): `command(port)`
/// on a free port, again on another one (at most 5 tries) when the port
/// was taken in between by another process (`Address already in use`).
pub(crate) async fn spawn_http_on_free_port(
    mut command: impl FnMut(u16) -> tokio::process::Command,
) -> (tokio::process::Child, String, Arc<Mutex<Vec<String>>>, u16) {
    for _ in 0..5 {
        let port = code_mode_core::testing::free_port();
        let (mut child, url, log) = try_spawn_http(&mut command(port)).await;
        match url {
            Ok(url) => return (child, url, log, port),
            Err(_) if log.lock().unwrap().iter().any(|l| l.contains("Address already in use")) => {
                eprintln!("port {port} was taken before the frontend bound it: another port");
                let _ = child.wait().await;
            }
            Err(e) => panic!("the frontend prints its URL within 60 s: {e}"),
        }
    }
    panic!("five free ports were each taken before the frontend bound them")
}

pub(crate) async fn connect<H: ClientHandler>(
    url: &str,
    handler: H,
    lifecycle: ClientLifecycleMode,
) -> RunningService<RoleClient, H> {
    // reqwest's rustls needs a crypto provider (ring, as async-nats uses).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    handler.serve_with_lifecycle(transport, lifecycle).await.expect("the MCP client connects over HTTP")
}

pub(crate) async fn run_python<H: ClientHandler>(client: &RunningService<RoleClient, H>, code: &str) -> CallToolResult {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    client.call_tool(params).await.expect("run_python answers")
}

pub(crate) fn stdout(result: &CallToolResult) -> String {
    report(result)["stdout"].as_str().unwrap().to_string()
}

pub(crate) const LEGACY: fn() -> ClientLifecycleMode = || ClientLifecycleMode::Initialize;
const STATELESS: fn() -> ClientLifecycleMode =
    || ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };

const TAINT_THEN_ADD: &str = "\
print(await echo({'text': 'secret'}))
try:
    print(await add({'a': 1, 'b': 2}))
except ToolError as e:
    print('refused:', e)
";

#[tokio::test]
async fn each_http_session_is_its_own_client_session_and_its_taint_is_forgotten_when_it_closes() {
    if !support::sandbox_available() {
        return;
    }
    let log = log_path("http-private");
    let stack = split(&["--private", "echo"], &["--log", log.to_str().unwrap()]).await;
    let first = connect(&stack.url, (), LEGACY()).await;
    let tools = first.list_all_tools().await.expect("tools/list answers over HTTP");
    assert_eq!(tools.len(), 1);
    assert!(tools[0].description.as_deref().unwrap().contains("async def add("));
    let out = stdout(&run_python(&first, TAINT_THEN_ADD).await);
    assert!(out.starts_with("secret\nrefused: add: "), "the first session is tainted: {out}");
    // The same session stays tainted in its next call ...
    let again = stdout(
        &run_python(&first, "try:\n    await add({'a': 1, 'b': 2})\nexcept ToolError as e:\n    print('refused')")
            .await,
    );
    assert_eq!(again, "refused\n");
    // ... and another client's session is not.
    let second = connect(&stack.url, (), LEGACY()).await;
    assert_eq!(stdout(&run_python(&second, "print(await add({'a': 1, 'b': 2}))").await), "{\"sum\":3}\n");
    assert_eq!(logged_calls(&log).len(), 2, "echo and the second session's add reached the server");
    // Closing the first session tells the bridge, which forgets its taint.
    first.cancel().await.ok();
    let forgotten =
        |log: &[String]| log.iter().any(|l| l.contains("the bridge forgot its state") && l.contains("removed=1"));
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !forgotten(&stack.log.lock().unwrap()) {
        assert!(std::time::Instant::now() < give_up, "the closed session's taint was not forgotten");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    second.cancel().await.ok();
}

const APPROVE_ECHO: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;
const GATHERED_ECHOES: &str = "\
import asyncio
async def attempt(i):
    try:
        return await echo({'text': f'n{i}'})
    except ToolError as e:
        return 'refused: ' + str(e)
print(await asyncio.gather(*[attempt(i) for i in range(3)]))
";

#[tokio::test]
async fn a_stateless_http_client_approves_calls_whose_retried_request_finds_the_waiting_cell() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("http-policy").with_extension("json");
    std::fs::write(&policy, APPROVE_ECHO).expect("the policy is written");
    let stack = split(&["--policy", policy.to_str().unwrap()], &[]).await;
    let yes = Person::new(Answer::Accept);
    let client = connect(&stack.url, yes.clone(), STATELESS()).await;
    assert_eq!(stdout(&run_python(&client, GATHERED_ECHOES).await), "['n0', 'n1', 'n2']\n");
    assert_eq!(yes.asked().len(), 3);
    client.cancel().await.ok();

    let no = Person::new(Answer::Decline);
    let client = connect(&stack.url, no.clone(), LEGACY()).await;
    let out = stdout(&run_python(&client, GATHERED_ECHOES).await);
    assert_eq!(out.matches("the person declined the call").count(), 3, "{out}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn a_request_naming_a_host_that_is_not_allowed_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let stack = split(&[], &[]).await;
    let authority = stack.url.trim_start_matches("http://").trim_end_matches("/mcp").to_string();
    let status = |host: &str| {
        let mut stream = std::net::TcpStream::connect(&authority).expect("the frontend listens");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.lines().next().unwrap_or_default().to_string()
    };
    assert!(status("attacker.example").contains(" 403 "), "a foreign Host is refused");
    assert!(status(&authority).contains(" 200 "), "the loopback address is served");
}

#[tokio::test]
async fn serve_over_http_runs_cells_for_a_session_client_and_a_stateless_one() {
    if !support::sandbox_available() {
        return;
    }
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--"]).arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (mut serve, url, _log) = spawn_http(&mut serve).await;
    for lifecycle in [LEGACY(), STATELESS()] {
        let client = connect(&url, (), lifecycle).await;
        assert_eq!(stdout(&run_python(&client, "print(await add({'a': 40, 'b': 2}))").await), "{\"sum\":42}\n");
        client.cancel().await.ok();
    }
    // A signal drains it: it exits and leaves no container behind.
    let pid = serve.id().expect("serve runs");
    support::terminate(pid);
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), serve.wait()).await;
    assert!(matches!(status, Ok(Ok(s)) if s.success()), "serve exits cleanly on SIGTERM: {status:?}");
    assert!(support::containers_of(pid).is_empty(), "its containers are removed");
}

#[tokio::test]
async fn the_python_sdk_runs_a_cell_over_http_and_ends_its_session_cleanly() {
    if !support::sandbox_available() {
        return;
    }
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--"]).arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, _log) = spawn_http(&mut serve).await;
    let steps = json!([{"op": "call", "tool": "run_python", "arguments": {"code": "print(await add(a=1, b=2))"}}]);
    // The legacy mode holds an MCP session, which the SDK ends with a DELETE.
    let Some((results, stderr)) = support::python_sdk(&["--url", &url, "--mode", "legacy"], &steps).await else {
        return;
    };
    assert_eq!(results[0]["result"]["structuredContent"]["stdout"], "{\"sum\":3}\n", "{results:?}");
    assert!(!stderr.contains("Session termination failed"), "the DELETE is answered as the SDK expects: {stderr}");
}
