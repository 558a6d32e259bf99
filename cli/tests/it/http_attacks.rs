//! The attacks of issue 29 on the HTTP endpoint, each tried against a real
//! `code-mode serve --http` process: made-up session ids past the session
//! limits, a second `initialize`, approval answers that break the form,
//! malformed `Host` values and absolute-form targets, slow and huge
//! bodies, probing another identity's session ids, and ending a session
//! nobody opened. Raw HTTP over a `TcpStream` where a client library would
//! not send such a request. Then those of issue 36: `Origin` values that
//! are not one serialized origin, at `/mcp` and at the console.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleClient};
use serde_json::{Value, json};

use crate::auth::{Client, TokenFile, bearer, serve, token_new};
use crate::support::{self, log_path, report};

/// An answer read off the wire: status, headers (names in lower case),
/// body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `host:port` of a server's URL.
fn authority(url: &str) -> String {
    url.trim_start_matches("http://").trim_end_matches("/mcp").to_string()
}

/// Write `raw` (a whole request, head and body) to the server and read
/// the answer until the server closes the connection or `wait` passes
/// without a byte.
fn exchange(authority: &str, raw: &[u8], wait: Duration) -> Answer {
    let mut stream = TcpStream::connect(authority).expect("the server listens");
    stream.set_read_timeout(Some(wait)).unwrap();
    let _ = stream.write_all(raw);
    read_answer(&mut stream)
}

fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut answer = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
        }
    }
    parse(&answer)
}

fn parse(answer: &[u8]) -> Answer {
    let (status, headers, body) = support::http_answer(answer);
    Answer { status, headers, body }
}

/// A `POST` (or other `method`) to `/mcp` in origin form, with `Host:
/// host`, the MCP content headers, `headers` and `body`.
fn raw(method: &str, host: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    format!("{head}\r\n{body}").into_bytes()
}

/// A request to the server of `url`, as a well-behaved client would send
/// it but for `headers`.
fn request(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let at = authority(url);
    exchange(&at, &raw(method, &at, headers, body), Duration::from_secs(60))
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// Open a session of protocol 2025-11-25 as `client` (declaring
/// `capabilities`); its id.
fn open_session(url: &str, client: &Client, capabilities: Value) -> String {
    let auth = bearer(client);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "raw", "version": "1"}}});
    let opened = request(url, "POST", &[("Authorization", &auth)], &initialize.to_string());
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.header("mcp-session-id").expect("a session id").to_string();
    let done = request(url, "POST", &in_session(&auth, &session), INITIALIZED);
    assert_eq!(done.status, 202, "{done:?}");
    session
}

fn in_session<'a>(auth: &'a str, session: &'a str) -> [(&'a str, &'a str); 3] {
    [("Authorization", auth), ("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-11-25")]
}

/// A stateless (2026-07-28) `tools/call` of `run_python` running `code`,
/// with the headers that protocol wants.
fn stateless_call(code: &str) -> (String, [(&'static str, &'static str); 3]) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": code},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "run_python")];
    (body.to_string(), headers)
}

/// `serve --http` with one token per name and `args`; the server, its URL
/// and the clients.
async fn serve_for(
    names: &[&str],
    args: &[&str],
) -> (tokio::process::Child, String, Vec<Client>, TokenFile, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let clients: Vec<Client> = names.iter().map(|n| token_new(n)).collect();
    let tokens = TokenFile::of(&clients.iter().collect::<Vec<_>>());
    let mut all = vec!["--warm", "0", "--auth-tokens", tokens.arg()];
    all.extend_from_slice(args);
    let (child, url, log) = serve(&all).await;
    (child, url, clients, tokens, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_made_up_session_id_is_refused_with_404_for_every_method_and_version_and_a_stateless_call_takes_a_place_whatever_it_names()
 {
    if !support::sandbox_available() {
        return;
    }
    let limits = ["--max-sessions", "8", "--max-sessions-per-identity", "6"];
    let (_serve, url, clients, _tokens, _log) = serve_for(&["alice"], &limits).await;
    let auth = bearer(&clients[0]);
    let (call, stateless) = stateless_call("print('ran')");

    // Every method, every protocol version: 404 before anything is served.
    let made_up = [("Authorization", auth.as_str()), ("Mcp-Session-Id", "made-up-1")];
    let legacy = [made_up[0], made_up[1], ("MCP-Protocol-Version", "2025-11-25")];
    let modern = [made_up[0], made_up[1], stateless[0], stateless[1], stateless[2]];
    let tried = [
        ("POST tools/list 2025-11-25", request(&url, "POST", &legacy, LIST_TOOLS)),
        ("POST tools/call 2026-07-28", request(&url, "POST", &modern, &call)),
        ("POST tools/list, no version", request(&url, "POST", &made_up, LIST_TOOLS)),
        ("POST initialize", request(&url, "POST", &made_up, INITIALIZE)),
        ("GET", request(&url, "GET", &[made_up[0], made_up[1], ("Accept", "text/event-stream")], "")),
        ("DELETE", request(&url, "DELETE", &legacy, "")),
    ];
    for (what, answer) in &tried {
        assert_eq!(answer.status, 404, "{what}: {answer:?}");
        assert!(answer.body.contains("unknown_session"), "{what}: {}", answer.body);
        assert!(!answer.body.contains("ran"), "{what} ran a cell: {}", answer.body);
    }

    // Ten concurrent stateless calls of one identity, each naming a
    // made-up session: none is served.
    let sleepy = "import asyncio\nawait asyncio.sleep(3)\nprint('ran')";
    let statuses = |session_of: &dyn Fn(usize) -> String| {
        let (call, stateless) = stateless_call(sleepy);
        let threads: Vec<_> = (0..10)
            .map(|i| {
                let (url, auth, call, session) = (url.clone(), auth.clone(), call.clone(), session_of(i));
                std::thread::spawn(move || {
                    let mut headers = vec![("Authorization", auth.as_str()), ("Mcp-Session-Id", session.as_str())];
                    headers.extend_from_slice(&stateless);
                    let answer = request(&url, "POST", &headers, &call);
                    (answer.status, answer.body.contains("ran"))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
    };
    let answers = tokio::task::block_in_place(|| statuses(&|i| format!("made-up-{i}")));
    assert!(answers.iter().all(|(status, ran)| *status == 404 && !ran), "made-up ids: {answers:?}");

    // Naming the identity's own open session, a stateless call still takes
    // a place: with the session holding one of six, five run and five get
    // 429.
    let session = open_session(&url, &clients[0], json!({}));
    let answers = tokio::task::block_in_place(|| statuses(&|_| session.clone()));
    let served = answers.iter().filter(|(status, ran)| *status == 200 && *ran).count();
    let refused = answers.iter().filter(|(status, _)| *status == 429).count();
    assert_eq!((served, refused), (5, 5), "a real session id: {answers:?}");
}

#[tokio::test]
async fn another_identitys_token_gets_the_same_404_on_a_real_session_id_as_on_a_made_up_one_and_deleting_an_unknown_session_is_404()
 {
    if !support::sandbox_available() {
        return;
    }
    let (_serve, url, clients, _tokens, log) = serve_for(&["alice", "mallory"], &[]).await;
    let session = open_session(&url, &clients[0], json!({}));
    let mallory = bearer(&clients[1]);
    let on_real = request(&url, "POST", &in_session(&mallory, &session), LIST_TOOLS);
    let on_made_up = request(&url, "POST", &in_session(&mallory, "0123456789abcdef"), LIST_TOOLS);
    assert_eq!(on_real.status, 404, "{on_real:?}");
    assert_eq!((on_real.status, &on_real.body), (on_made_up.status, &on_made_up.body), "no probing");
    let ended = request(&url, "DELETE", &in_session(&mallory, &session), "");
    assert_eq!((ended.status, &ended.body), (on_made_up.status, &on_made_up.body), "{ended:?}");
    assert!(
        support::log_shows(&log, |l| l.contains("refused a request naming an MCP session another identity opened"))
            .await,
        "the log tells the two apart"
    );

    // An unknown session cannot be ended; alice's own session goes on and
    // ends once.
    let alice = bearer(&clients[0]);
    let unknown = request(&url, "DELETE", &in_session(&alice, "no-such-session"), "");
    assert_eq!(unknown.status, 404, "{unknown:?}");
    let listed = request(&url, "POST", &in_session(&alice, &session), LIST_TOOLS);
    assert!(listed.status == 200 && listed.body.contains("run_python"), "{listed:?}");
    assert_eq!(request(&url, "DELETE", &in_session(&alice, &session), "").status, 200);
}

/// `echo` needs approval.
const POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;

const ONE_ECHO: &str = "\
try:
    print(await echo({'text': 'launch-code-4711'}))
except ToolError as e:
    print('refused:', e)
";

/// The lines of the server-sent events of `body` that carry JSON-RPC
/// messages.
fn events(body: &str) -> Vec<Value> {
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}

#[tokio::test]
async fn a_second_initialize_on_a_live_session_is_refused_and_the_session_keeps_the_capabilities_it_declared() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("attack-policy").with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    let (_serve, url, clients, _tokens, _log) = serve_for(&["alice"], &["--policy", policy.to_str().unwrap()]).await;
    let auth = bearer(&clients[0]);
    // Opened declaring no elicitation: it cannot be asked for approvals.
    let session = open_session(&url, &clients[0], json!({}));
    let again = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "raw", "version": "2"}}});
    let refused = request(&url, "POST", &in_session(&auth, &session), &again.to_string());
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.body.contains("already initialized"), "{}", refused.body);

    // The call needing approval is refused as for a client that cannot be
    // asked, without a question (a question would wait here for an answer
    // that never comes: the read gives up after 20 s).
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "run_python", "arguments": {"code": ONE_ECHO}}});
    let at = authority(&url);
    let ran =
        exchange(&at, &raw("POST", &at, &in_session(&auth, &session), &call.to_string()), Duration::from_secs(20));
    assert_eq!(ran.status, 200, "{ran:?}");
    let messages = events(&ran.body);
    assert!(!messages.iter().any(|m| m["method"] == "elicitation/create"), "asked anyway: {}", ran.body);
    let result = messages.iter().find(|m| m["id"] == 4).unwrap_or_else(|| panic!("no result: {}", ran.body));
    let stdout = result["result"]["structuredContent"]["stdout"].as_str().unwrap_or_default();
    assert!(stdout.starts_with("refused:") && stdout.contains("elicitation"), "{result}");
    let _ = std::fs::remove_file(&policy);
}

/// A client answering every approval question with an accept whose
/// content is `content`.
#[derive(Debug, Clone)]
struct Sloppy {
    content: Value,
}

impl ClientHandler for Sloppy {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(self.content.clone()))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }
}

#[tokio::test]
async fn an_approval_answer_that_breaks_the_form_approves_nothing_over_a_session_or_in_a_stateless_retry_and_says_why()
{
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("attack-policy").with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve
        .args(["serve", "--http", "127.0.0.1:0", "--warm", "0", "--policy", policy.to_str().unwrap()])
        .arg("--")
        .arg(support::test_server())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let lifecycles = [
        ("a session", ClientLifecycleMode::Initialize),
        (
            "a stateless retry",
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        ),
    ];
    for (how, lifecycle) in lifecycles {
        for content in [json!("yes"), json!(["no"]), json!({"approved": true})] {
            let client = crate::http::connect(&url, Sloppy { content: content.clone() }, lifecycle.clone()).await;
            let result = crate::http::run_python(&client, ONE_ECHO).await;
            let stdout = report(&result)["stdout"].as_str().unwrap_or_default().to_string();
            assert!(stdout.starts_with("refused:"), "{how}, {content}: {stdout}");
            assert!(stdout.contains("the client's answer approves nothing"), "{how}, {content}: {stdout}");
            client.cancel().await.ok();
        }
        // A well-formed accept still approves.
        let client = crate::http::connect(&url, Sloppy { content: json!({}) }, lifecycle.clone()).await;
        let stdout = crate::http::stdout(&crate::http::run_python(&client, ONE_ECHO).await);
        assert!(stdout.contains("launch-code-4711") && !stdout.contains("refused"), "{how}: {stdout}");
        client.cancel().await.ok();
    }
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn malformed_host_values_get_400_and_an_absolute_form_target_is_judged_by_its_own_authority() {
    if !support::sandbox_available() {
        return;
    }
    let (_serve, url, clients, _tokens, _log) = serve_for(&["alice"], &[]).await;
    let auth = bearer(&clients[0]);
    let at = authority(&url);
    let port = at.rsplit(':').next().unwrap().to_string();
    for host in [
        "[::1].evil.com".to_string(),
        "[127.0.0.1].evil.com".into(),
        "[localhost]".into(),
        "evil.com@127.0.0.1".into(),
        "a:b@localhost".into(),
        "127.0.0.1:abc".into(),
        "127.0.0.1:-1".into(),
        format!("evil.com@127.0.0.1:{port}"),
        format!("[::1].evil.com:{port}"),
    ] {
        let answer =
            exchange(&at, &raw("POST", &host, &[("Authorization", &auth)], INITIALIZE), Duration::from_secs(30));
        assert_eq!(answer.status, 400, "Host: {host}: {answer:?}");
        assert!(answer.body.contains("malformed"), "Host: {host}: {}", answer.body);
    }
    // Two Host fields are refused too; a well-formed loopback one passes.
    let twice =
        String::from_utf8(raw("POST", &at, &[("Authorization", &auth), ("Host", "evil.com")], INITIALIZE)).unwrap();
    assert_eq!(exchange(&at, twice.as_bytes(), Duration::from_secs(30)).status, 400);
    let fine = exchange(&at, &raw("POST", &at, &[("Authorization", &auth)], INITIALIZE), Duration::from_secs(30));
    assert_eq!(fine.status, 200, "{fine:?}");

    // The absolute form: the target's authority decides, not Host.
    let absolute = |target: &str, host: &str| {
        let request = String::from_utf8(raw("POST", host, &[("Authorization", &auth)], INITIALIZE)).unwrap();
        let request = request.replacen("POST /mcp ", &format!("POST {target} "), 1);
        exchange(&at, request.as_bytes(), Duration::from_secs(30))
    };
    let evil = absolute("http://evil.com/mcp", "127.0.0.1");
    assert_eq!(evil.status, 403, "{evil:?}");
    let userinfo = absolute(&format!("http://evil.com@127.0.0.1:{port}/mcp"), "127.0.0.1");
    assert_eq!(userinfo.status, 400, "{userinfo:?}");
    let own = absolute(&format!("http://127.0.0.1:{port}/mcp"), "evil.com");
    assert_eq!(own.status, 200, "the target names this server: {own:?}");
}

#[tokio::test]
async fn a_slow_body_is_cut_off_after_10_s_and_a_declared_huge_body_gets_413_before_it_arrives() {
    if !support::sandbox_available() {
        return;
    }
    let (_serve, url, clients, _tokens, _log) = serve_for(&["alice"], &[]).await;
    let auth = bearer(&clients[0]);
    let at = authority(&url);

    // A 10 GB body declared: 413 at once, none of it sent.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {at}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 10000000000\r\n\r\n"
    );
    let mut stream = TcpStream::connect(&at).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let started = Instant::now();
    // The time to the answer's head, then the rest.
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let mut took = None;
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
        }
        if took.is_none() && answer.windows(4).any(|w| w == b"\r\n\r\n") {
            took = Some(started.elapsed());
        }
    }
    let huge = parse(&answer);
    let took = took.unwrap_or_else(|| panic!("no answer: {huge:?}"));
    assert_eq!(huge.status, 413, "{huge:?}");
    assert!(huge.body.contains("--max-body"), "{}", huge.body);
    assert!(took < Duration::from_millis(500), "413 took {took:?}");
    eprintln!("a declared 10 GB body got 413 in {took:?}");

    // A body trickled a byte a second: cut off with 408 within the bound,
    // the connection closed.
    let body = INITIALIZE;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {at}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = TcpStream::connect(&at).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    for byte in body.bytes() {
        if stream.write_all(&[byte]).is_err() || started.elapsed() > Duration::from_secs(40) {
            break;
        }
        // Whatever has come back so far.
        let give_up = Instant::now() + Duration::from_secs(1);
        let mut closed = false;
        while Instant::now() < give_up {
            match stream.read(&mut buffer) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        if closed {
            break;
        }
    }
    let took = started.elapsed();
    let cut = parse(&answer);
    assert_eq!(cut.status, 408, "{cut:?}");
    assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(13), "cut after {took:?}");
    eprintln!("a body trickled at a byte a second was cut off after {took:?}");
}

/// Issue 36: `Origin` values that are not one serialized origin (RFC 6454:
/// `scheme://host[:port]`, nothing else) get 403 at `/mcp` and at
/// `/console`, whatever host they seem to name; real loopback origins still
/// pass at this loopback server.
#[tokio::test]
async fn origin_values_that_are_not_one_serialized_origin_get_403_at_mcp_and_at_the_console_and_loopback_origins_pass()
{
    let (_serve, url, clients, _tokens, _log) = serve_for(&["alice"], &["--expose-tools=only"]).await;
    let auth = bearer(&clients[0]);
    let at = authority(&url);
    let port = at.rsplit(':').next().unwrap().to_string();
    let mcp = |headers: &[(&str, &str)]| {
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        exchange(&at, &raw("POST", &at, &all, INITIALIZE), Duration::from_secs(30))
    };
    let console = |method: &str, path: &str, origin: &str| {
        let body = if method == "POST" { "csrf=x&token=y" } else { "" };
        let (status, _, body) = support::raw_http(&at, method, path, &[("Origin", origin)], body);
        (status, body)
    };
    for origin in [
        // The values of the issue.
        format!("http://localhost:{port}.evil.com"),
        format!("http://[::1].evil.com:{port}"),
        format!("http://user@localhost:{port}"),
        "http://evil.com@localhost".to_string(),
        "http://localhost:abc".to_string(),
        // More that a lenient parser reads as loopback.
        format!("http://127.0.0.1:{port}/"),
        format!("http://127.0.0.1:{port}/mcp"),
        format!("http://localhost:{port}?x"),
        "http://localhost:".into(),
        "http://localhost:99999".into(),
        format!("http://[localhost]:{port}"),
        format!("http://[::1:{port}"),
        format!("localhost:{port}"),
        format!("http://localhost:{port} http://evil.com"),
    ] {
        let answer = mcp(&[("Origin", &origin)]);
        assert_eq!(answer.status, 403, "Origin: {origin} at /mcp: {answer:?}");
        assert!(answer.body.contains("not one serialized origin"), "Origin: {origin}: {}", answer.body);
        for (method, path) in [("GET", "/console/login"), ("GET", "/console"), ("POST", "/console/login")] {
            let (status, body) = console(method, path, &origin);
            assert_eq!(status, 403, "Origin: {origin} at {method} {path}: {body}");
            assert!(body.contains("not one serialized origin"), "Origin: {origin} at {method} {path}: {body}");
        }
    }
    // Two Origin fields: refused, even when the first is a loopback one.
    let loopback = format!("http://127.0.0.1:{port}");
    let twice = mcp(&[("Origin", &loopback), ("Origin", "http://evil.com")]);
    assert_eq!(twice.status, 403, "{twice:?}");
    // Real loopback origins still pass, at /mcp and at the console.
    for origin in [
        format!("http://localhost:{port}"),
        loopback.clone(),
        format!("http://[::1]:{port}"),
        "http://127.0.0.1".into(),
        "https://localhost".into(),
    ] {
        let answer = mcp(&[("Origin", &origin)]);
        assert_eq!(answer.status, 200, "Origin: {origin} at /mcp: {answer:?}");
    }
    let (status, body) = console("GET", "/console/login", &loopback);
    assert_eq!(status, 200, "the console's own origin: {body}");
    // A well-formed origin that is not allowed still gets the other 403.
    let evil = mcp(&[("Origin", "http://evil.com")]);
    assert_eq!(evil.status, 403, "{evil:?}");
    assert!(evil.body.contains("Origin is not allowed"), "{}", evil.body);
}

#[tokio::test]
async fn an_allowed_origin_that_is_not_an_origin_stops_startup_naming_it() {
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    for (origin, why) in [
        ("http://user@app.example.com", "user information"),
        ("https://app.example.com/app", "no path"),
        ("null", "opaque origin"),
    ] {
        let out = tokio::process::Command::new(support::code_mode())
            .args(["serve", "--http", "127.0.0.1:0", "--expose-tools=only", "--auth-tokens", tokens.arg()])
            .args(["--allowed-origin", origin, "--"])
            .arg(support::test_server())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(60), out).await.expect("serve stops").unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{origin}: {stderr}");
        assert!(stderr.contains(&format!("--allowed-origin {origin:?} is not an origin")), "{origin}: {stderr}");
        assert!(stderr.contains(why), "{origin}: {stderr}");
    }
}
