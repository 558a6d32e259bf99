//! Authentication of MCP over HTTP: static bearer tokens (`--auth-tokens`,
//! made by `code-mode token new`), the `Origin` check, sessions bound to the
//! identity that opened them, session limits, and the refusal to serve an
//! address that is not loopback without authentication. Clients are the
//! official Python SDK (with a bearer header), rmcp's client, and raw
//! HTTP/1.1 requests where a test needs to see the status and headers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::service::{ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use code_mode_core::testing::TempDir;

use crate::approval::{Answer, Person};
use crate::http::{LEGACY, run_python, spawn_http, stdout};
use crate::policy::{calls_of, gather_add, replica};
use crate::support::{self, log_path};

/// A client made with `code-mode token new NAME`: its token and line.
pub(crate) struct Client {
    pub(crate) token: String,
    pub(crate) line: String,
}

pub(crate) fn token_new(name: &str) -> Client {
    let out = std::process::Command::new(support::code_mode()).args(["token", "new", name]).output().unwrap();
    assert!(out.status.success(), "token new: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |label: &str| {
        text.lines().find_map(|l| l.strip_prefix(label)).unwrap_or_else(|| panic!("no {label} in {text}")).to_string()
    };
    Client { token: field("token: "), line: field("line: ") }
}

pub(crate) fn write_tokens(path: &Path, clients: &[&Client]) {
    let lines: Vec<&str> = clients.iter().map(|c| c.line.as_str()).collect();
    std::fs::write(path, format!("# code-mode clients\n{}\n", lines.join("\n"))).unwrap();
}

/// A token file naming some clients, in a folder of its own that goes with
/// it (also when a test fails).
pub(crate) struct TokenFile {
    _dir: TempDir,
    path: PathBuf,
}

impl TokenFile {
    /// A file with the lines of `clients`.
    pub(crate) fn of(clients: &[&Client]) -> TokenFile {
        let dir = TempDir::new("tokens");
        let path = dir.0.join("clients.tokens");
        write_tokens(&path, clients);
        TokenFile { _dir: dir, path }
    }

    /// Write the file anew with the lines of `clients`.
    pub(crate) fn write(&self, clients: &[&Client]) {
        write_tokens(&self.path, clients);
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path as an argument.
    pub(crate) fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

/// `serve --http` on a free loopback port with `args`, wrapping the test
/// server; the child, its URL and its log.
pub(crate) async fn serve(args: &[&str]) -> (tokio::process::Child, String, Arc<Mutex<Vec<String>>>) {
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0"]).args(args).arg("--").arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    spawn_http(&mut serve).await
}

/// An answer to a raw request: the status, the headers (names in lower
/// case) and the body.
#[derive(Debug)]
struct Answered {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answered {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Send one HTTP/1.1 request to the MCP endpoint of `url` and read the whole
/// answer.
fn request(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Answered {
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut all = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    all.extend_from_slice(headers);
    let (status, headers, body) = support::raw_http(authority, method, "/mcp", &all, body);
    Answered { status, headers, body }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

pub(crate) fn bearer(client: &Client) -> String {
    format!("Bearer {}", client.token)
}

/// Open an MCP session with raw requests as `client`; its session id.
fn open_session(url: &str, client: &Client) -> String {
    let auth = bearer(client);
    let opened = request(url, "POST", &[("Authorization", &auth)], INITIALIZE);
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.header("mcp-session-id").expect("a session id").to_string();
    let done = request(
        url,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", &session), ("MCP-Protocol-Version", "2025-11-25")],
        INITIALIZED,
    );
    assert_eq!(done.status, 202, "{done:?}");
    session
}

/// `tools/list` on `session` as `client`.
fn list_tools(url: &str, client: &Client, session: &str) -> Answered {
    let auth = bearer(client);
    request(
        url,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-11-25")],
        LIST_TOOLS,
    )
}

/// An rmcp client sending `client`'s token.
pub(crate) async fn connect_as<H: ClientHandler>(
    url: &str,
    client: &Client,
    handler: H,
) -> RunningService<RoleClient, H> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(client.token.clone());
    let transport = StreamableHttpClientTransport::from_config(config);
    handler.serve_with_lifecycle(transport, LEGACY()).await.expect("the MCP client connects with its token")
}

/// Send SIGHUP to our child `pid` (the workspace forbids `unsafe`).
fn hangup(pid: u32) {
    let status = std::process::Command::new("kill").args(["-HUP", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -HUP {pid}: {status}");
}

/// Lines of a JSON-lines audit file.
fn audit_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .collect()
}

const APPROVE_ECHO: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;

#[tokio::test]
async fn clients_with_static_tokens_run_cells_and_their_identity_is_in_audit_records_questions_and_log_lines_but_in_no_metric()
 {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let audit = log_path("auth-identity-audit");
    let policy = log_path("auth-identity-policy").with_extension("json");
    std::fs::write(&policy, APPROVE_ECHO).unwrap();
    let (_serve, url, log) = serve(&[
        "--auth-tokens",
        tokens.arg(),
        "--audit",
        audit.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
    ])
    .await;

    // The official Python SDK with a static bearer header.
    let steps = json!([{"op": "call", "tool": "run_python", "arguments": {"code": "print(await add(a=1, b=2))"}}]);
    let header = format!("Authorization: {}", bearer(&alice));
    let Some((results, _)) =
        support::python_sdk(&["--url", &url, "--mode", "legacy", "--header", &header], &steps).await
    else {
        return;
    };
    assert_eq!(results[0]["result"]["structuredContent"]["stdout"], "{\"sum\":3}\n", "{results:?}");

    // rmcp's client as bob, asked to approve an echo.
    let person = Person::new(Answer::Accept);
    let client = connect_as(&url, &bob, person.clone()).await;
    assert_eq!(stdout(&run_python(&client, "print(await echo({'text': 'hi'}))").await), "hi\n");
    client.cancel().await.ok();
    let asked = person.asked();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].starts_with("code-mode: the code of bob wants to call the tool \"echo\""), "{asked:?}");

    let records = audit_records(&audit);
    let of = |kind: &str, who: &str| records.iter().filter(|r| r["kind"] == kind && r["identity"] == who).count();
    assert_eq!((of("cell_start", "alice"), of("cell", "alice"), of("call", "alice")), (1, 1, 1), "{records:#?}");
    assert_eq!((of("cell_start", "bob"), of("cell", "bob"), of("call", "bob")), (1, 1, 1), "{records:#?}");
    let echo = records.iter().find(|r| r["kind"] == "call" && r["tool"] == "echo").unwrap();
    assert_eq!(echo["decision"], "approved");

    for who in ["alice", "bob"] {
        support::log_shows(&log, |l| l.contains("cell ended") && l.contains(&format!("identity={who}"))).await;
    }
    let log = log.lock().unwrap().join("\n");
    for who in ["alice", "bob"] {
        assert!(log.lines().any(|l| l.contains("cell started") && l.contains(&format!("identity={who}"))), "{log}");
        assert!(log.lines().any(|l| l.contains("cell ended") && l.contains(&format!("identity={who}"))), "{log}");
    }
    for secret in [&alice.token, &bob.token] {
        assert!(!log.contains(&secret[3..]), "a token reached the log");
        assert!(!std::fs::read_to_string(&audit).unwrap().contains(&secret[3..]), "a token reached the audit");
    }

    // Identities, sessions and cells are unbounded: none is a metric label,
    // though the calls they made are counted.
    let metrics = scrape_logged_metrics(&log).await;
    assert!(metrics.contains("codemode_tool_calls_total{") && metrics.contains("tool=\"echo\""), "{metrics}");
    assert!(metrics.contains("codemode_approvals_total{"), "{metrics}");
    let mut unbounded: Vec<String> = vec!["alice".into(), "bob".into()];
    for record in &records {
        for key in ["session", "cell"] {
            if let Some(value) = record[key].as_str() {
                unbounded.push(value.to_string());
            }
        }
    }
    assert!(unbounded.len() > 2, "the audit records name sessions and cells: {records:#?}");
    for value in &unbounded {
        assert!(!metrics.contains(value.as_str()), "{value:?} is in the metrics:\n{metrics}");
    }
    for file in [audit, policy] {
        let _ = std::fs::remove_file(file);
    }
}

/// The text of `GET /metrics` from the address a service logged
/// (`--metrics-addr`).
async fn scrape_logged_metrics(log: &str) -> String {
    let addr = log
        .lines()
        .find_map(crate::metrics::logged_metrics_addr)
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"));
    let response = tokio::task::spawn_blocking(move || code_mode_telemetry::scrape::http_get(addr, "/metrics"))
        .await
        .unwrap()
        .expect("the metrics server answers");
    assert_eq!(response.status, 200, "{response:?}");
    response.body
}

#[tokio::test]
async fn requests_without_a_valid_token_get_401_with_a_bearer_challenge_and_no_token_detail() {
    if !support::sandbox_available() {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (_serve, url, log) = serve(&["--warm", "0", "--auth-tokens", tokens.arg()]).await;

    let none = request(&url, "POST", &[], INITIALIZE);
    assert_eq!(none.status, 401, "{none:?}");
    assert_eq!(none.header("www-authenticate"), Some("Bearer realm=\"code-mode\""));

    let forged = format!("cm_{}", "0".repeat(64));
    for sent in [format!("Bearer {forged}"), format!("Bearer {}x", alice.token), format!("Basic {}", alice.token)] {
        let refused = request(&url, "POST", &[("Authorization", &sent)], INITIALIZE);
        assert_eq!(refused.status, 401, "{refused:?}");
        let challenge = refused.header("www-authenticate").unwrap();
        assert!(challenge.starts_with("Bearer realm=\"code-mode\""), "{challenge}");
        assert!(!refused.body.contains("cm_") && !refused.body.contains(&alice.token[3..]), "{}", refused.body);
    }
    let wrong = request(&url, "POST", &[("Authorization", &format!("Bearer {forged}"))], INITIALIZE);
    assert_eq!(wrong.header("www-authenticate"), Some("Bearer realm=\"code-mode\", error=\"invalid_token\""));
    assert!(wrong.body.contains("invalid_token"), "{}", wrong.body);

    assert_eq!(request(&url, "POST", &[("Authorization", &bearer(&alice))], INITIALIZE).status, 200);
    support::log_shows(&log, |l| l.contains("refused an MCP request whose bearer token is not valid")).await;
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("refused an MCP request whose bearer token is not valid"), "{log}");
    assert!(!log.contains(&forged[3..]) && !log.contains(&alice.token[3..]), "a token reached the log: {log}");
}

#[tokio::test]
async fn another_identitys_token_on_an_open_session_is_refused_and_the_session_goes_on() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, mallory) = (token_new("alice"), token_new("mallory"));
    let tokens = TokenFile::of(&[&alice, &mallory]);
    let (_serve, url, _log) = serve(&["--warm", "0", "--auth-tokens", tokens.arg()]).await;
    let session = open_session(&url, &alice);

    // Refused as a session nobody opened (404): the answer does not tell
    // another identity that the id is real.
    let stolen = list_tools(&url, &mallory, &session);
    assert_eq!(stolen.status, 404, "{stolen:?}");
    assert!(stolen.body.contains("unknown_session"), "{}", stolen.body);
    let auth = bearer(&mallory);
    let ended = request(&url, "DELETE", &[("Authorization", &auth), ("Mcp-Session-Id", &session)], "");
    assert_eq!(ended.status, 404, "another identity cannot end the session: {ended:?}");

    let listed = list_tools(&url, &alice, &session);
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains("run_python"), "the session goes on: {}", listed.body);
}

#[tokio::test]
async fn a_token_added_to_the_file_works_after_sighup_and_a_removed_one_stops_working() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice]);
    let (serve, url, log) = serve(&["--warm", "0", "--auth-tokens", tokens.arg()]).await;
    let status = |client: &Client| request(&url, "POST", &[("Authorization", &bearer(client))], INITIALIZE).status;
    assert_eq!((status(&alice), status(&bob)), (200, 401));

    tokens.write(&[&bob]);
    hangup(serve.id().unwrap());
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while !log.lock().unwrap().iter().any(|l| l.contains("static bearer tokens reread")) {
        assert!(std::time::Instant::now() < give_up, "the file was not reread");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!((status(&alice), status(&bob)), (401, 200));

    // A file that no longer parses keeps the tokens in force.
    std::fs::write(tokens.path(), "bob sha256:nothex\n").unwrap();
    hangup(serve.id().unwrap());
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while !log.lock().unwrap().iter().any(|l| l.contains("the token file was not reread")) {
        assert!(std::time::Instant::now() < give_up, "the bad file was not reported");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(log.lock().unwrap().iter().any(|l| l.contains("line 1")), "the error names the line");
    assert_eq!(status(&bob), 200);
}

#[tokio::test]
async fn a_request_from_an_origin_not_allowed_is_refused_with_403() {
    if !support::sandbox_available() {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (_serve, url, _log) =
        serve(&["--warm", "0", "--auth-tokens", tokens.arg(), "--allowed-origin", "https://app.example.com"]).await;
    let auth = bearer(&alice);
    let from = |origin: &str| request(&url, "POST", &[("Authorization", &auth), ("Origin", origin)], INITIALIZE);
    let evil = from("https://evil.example");
    assert_eq!(evil.status, 403, "{evil:?}");
    assert!(evil.body.contains("Origin is not allowed"), "{}", evil.body);
    assert_eq!(from("null").status, 403);
    assert_eq!(from("https://app.example.com").status, 200);
    assert_eq!(request(&url, "POST", &[("Authorization", &auth)], INITIALIZE).status, 200, "no Origin: not a browser");
    // This server listens on loopback: a page on this machine may call it,
    // a host that only resolves to it may not.
    let port = url.rsplit(':').next().and_then(|p| p.split('/').next()).unwrap_or_default().to_string();
    assert_eq!(from(&format!("http://localhost:{port}")).status, 200, "a loopback origin at a loopback server");
    assert_eq!(from("http://127.0.0.1").status, 200);
    assert_eq!(from("http://localhost.evil.example").status, 403);
}

#[tokio::test]
async fn over_the_session_limits_a_new_session_gets_429_saying_which_limit_until_one_closes_and_a_body_over_max_body_gets_413()
 {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob, carol) = (token_new("alice"), token_new("bob"), token_new("carol"));
    let tokens = TokenFile::of(&[&alice, &bob, &carol]);
    let (_serve, url, _log) = serve(&[
        "--warm",
        "0",
        "--auth-tokens",
        tokens.arg(),
        "--max-sessions",
        "2",
        "--max-sessions-per-identity",
        "1",
        "--max-body",
        "4096",
    ])
    .await;
    let first = open_session(&url, &alice);
    let again = request(&url, "POST", &[("Authorization", &bearer(&alice))], INITIALIZE);
    assert_eq!(again.status, 429, "{again:?}");
    let error: Value = serde_json::from_str(&again.body).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("--max-sessions-per-identity"), "{error}");
    let second = open_session(&url, &bob);
    // A body over --max-body is refused as it streams in.
    let big = format!(r#"{{"jsonrpc":"2.0","id":9,"method":"ping","pad":"{}"}}"#, "x".repeat(8000));
    let auth = bearer(&bob);
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", second.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    let too_big = request(&url, "POST", &headers, &big);
    assert_eq!(too_big.status, 413, "{too_big:?}");
    let full = request(&url, "POST", &[("Authorization", &bearer(&carol))], INITIALIZE);
    assert_eq!(full.status, 429, "{full:?}");
    assert!(full.body.contains("(2, --max-sessions)"), "{}", full.body);

    // Alice ends her session: her place and the server's come back.
    let auth = bearer(&alice);
    let ended = request(&url, "DELETE", &[("Authorization", &auth), ("Mcp-Session-Id", &first)], "");
    assert_eq!(ended.status, 200, "{ended:?}");
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while request(&url, "POST", &[("Authorization", &bearer(&carol))], INITIALIZE).status != 200 {
        assert!(std::time::Instant::now() < give_up, "the ended session's place did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_cell_over_max_cells_per_session_is_refused_at_once_saying_so_while_the_first_runs_and_the_next_after_a_result_is_not()
 {
    if !support::sandbox_available() {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (_serve, url, _log) = serve(&["--auth-tokens", tokens.arg(), "--max-cells-per-session", "1"]).await;
    let client = connect_as(&url, &alice, ()).await;
    let slow = run_python(&client, "import asyncio\nawait asyncio.sleep(4)\nprint('slow done')");
    let second = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let started = std::time::Instant::now();
        (run_python(&client, "print('second')").await, started.elapsed())
    };
    let (slow, (second, waited)) = tokio::join!(slow, second);
    assert_eq!(stdout(&slow), "slow done\n");
    let text = format!("{:?}", second.content);
    assert!(second.is_error == Some(true) && text.contains("--max-cells-per-session"), "{text}");
    assert!(waited < Duration::from_secs(2), "refused at once, not queued: {waited:?}");
    // A cell's place is free by the time its result arrives: cells sent
    // one after the other, each on hearing the last, are never refused.
    for n in 0..10 {
        let ran = run_python(&client, &format!("print({n})")).await;
        assert_eq!(stdout(&ran), format!("{n}\n"), "cell {n} right after the one before: {:?}", ran.content);
    }
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_direct_call_in_flight_does_not_take_the_place_of_a_cell_under_max_cells_per_session() {
    if !support::sandbox_available() {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let args = ["--auth-tokens", tokens.arg(), "--max-cells-per-session", "1", "--expose-tools"];
    let (_serve, url, _log) = serve(&args).await;
    let client = connect_as(&url, &alice, ()).await;
    let mut params = rmcp::model::CallToolRequestParams::new("sleep");
    params.arguments = Some(serde_json::json!({"seconds": 4}).as_object().unwrap().clone());
    let direct = client.peer().call_tool(params);
    let cell = async {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let started = std::time::Instant::now();
        (run_python(&client, "print('beside')").await, started.elapsed())
    };
    let (direct, (cell, took)) = tokio::join!(direct, cell);
    let direct = direct.expect("the direct call answers");
    assert!(format!("{:?}", direct.content).contains("slept"), "{direct:?}");
    assert_eq!(stdout(&cell), "beside\n", "a direct call is not a cell: {:?}", cell.content);
    assert!(took < Duration::from_secs(3), "ran beside the direct call, not after it: {took:?}");
    client.cancel().await.ok();
}

#[tokio::test]
async fn serving_http_on_a_non_loopback_address_without_authentication_refuses_to_start() {
    let out = tokio::process::Command::new(support::code_mode())
        .args(["serve", "--http", "0.0.0.0:0", "--"])
        .arg(support::test_server())
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out).await.expect("it stops at once").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("refusing to serve MCP on 0.0.0.0:0 without authentication")
            && stderr.contains("--auth-tokens")
            && stderr.contains("--insecure-no-auth"),
        "{stderr}"
    );
    let dir = TempDir::new("bad-tokens");
    let bad = dir.0.join("bad.tokens");
    std::fs::write(&bad, "alice sha256:12\n").unwrap();
    let out = tokio::process::Command::new(support::code_mode())
        .args(["serve", "--http", "0.0.0.0:0", "--auth-tokens", bad.to_str().unwrap(), "--"])
        .arg(support::test_server())
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out).await.expect("it stops at once").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("{}, line 1", bad.display())) && stderr.contains("64 hexadecimal"), "{stderr}");
}

#[tokio::test]
async fn insecure_no_auth_serves_a_non_loopback_address_and_says_so_in_a_warning() {
    if !support::sandbox_available() {
        return;
    }
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--warm", "0", "--http", "0.0.0.0:0", "--insecure-no-auth", "--"]).arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, log) = spawn_http(&mut serve).await;
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/mcp");
    let answer = request(&format!("http://127.0.0.1:{port}/mcp"), "POST", &[], INITIALIZE);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(support::log_shows(&log, |l| l.contains("WARN") && l.contains("--insecure-no-auth")).await);
}

/// `add` 10 calls an hour per identity, shared by all its sessions.
const PER_IDENTITY: &str = r#"{"version":"1","default":"allow","tools":{
  "add":{"limits":[{"counter":"add_per_identity","window":"hour","max":10,"scope":"identity"}]}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_an_identity_limit_lets_exactly_ten_of_fifty_concurrent_calls_from_two_sessions_of_one_identity_through()
 {
    if !support::sandbox_available() {
        return;
    }
    crate::policy::inside_one_window(3600, 60);
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else { return };
    let nats_url = nats.url();
    let policy = log_path("identity-limit").with_extension("policy.json");
    std::fs::write(&policy, PER_IDENTITY).unwrap();
    let log = log_path("identity-limit");
    // Two bridge replicas sharing the counters in JetStream, one runner
    // with room for both cells at once, one HTTP frontend with tokens.
    let _bridges = [replica(&nats_url, &users, &policy, &log), replica(&nats_url, &users, &policy, &log)];
    let _runner = support::spawn_service(&nats_url, &users, "sandbox-runner", &["--capacity", "2"], None);
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let http = ["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()];
    let mut frontend = support::service_command(&nats_url, &users, "frontend", &http, None);
    let (_frontend, url, _log) = spawn_http(&mut frontend).await;

    // Two sessions of alice, each gathering 25 calls, both at once.
    let (first, second) = (connect_as(&url, &alice, ()).await, connect_as(&url, &alice, ()).await);
    let gather = gather_add(25);
    let (one, two) = tokio::join!(run_python(&first, &gather), run_python(&second, &gather));
    let passed =
        |out: &str| -> usize { out.lines().next().and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("{out}")) };
    let passed: Vec<usize> = [one, two].iter().map(|r| passed(&stdout(r))).collect();
    assert_eq!(passed.iter().sum::<usize>(), 10, "alice's two sessions share one count: {passed:?}");
    assert_eq!(calls_of(&log, "add"), 10, "only the admitted calls reached the server");

    // Bob has a count of his own; alice in a third session has none left.
    let bobs = connect_as(&url, &bob, ()).await;
    assert_eq!(stdout(&run_python(&bobs, "print(await add({'a': 1, 'b': 1}))").await).trim(), "{\"sum\":2}");
    let third = connect_as(&url, &alice, ()).await;
    let refused = stdout(&run_python(&third, &gather).await);
    assert_eq!(refused.lines().next(), Some("0"), "alice's count is spent in any session of hers: {refused}");
    assert_eq!(calls_of(&log, "add"), 11);
    for client in [first, second, bobs, third] {
        client.cancel().await.ok();
    }
}
