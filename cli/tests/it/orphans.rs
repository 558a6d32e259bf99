//! No orphaned approvals: a team's question whose asking request is gone
//! (its client left) is withdrawn from the web console within seconds, and
//! approving it through the console's HTTP API is refused, so the call
//! whose result nobody would receive never runs. While the request is
//! open, the console says someone still waits for the answer.

use std::time::{Duration, Instant};

use rmcp::service::ClientServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::auth::{TokenFile, token_new};
use crate::console::{csrf_in, decide, login};
use crate::http::{LEGACY, run_python};
use crate::support::{self, log_path};

/// `echo` waits for alice.
const POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {
    "action": "approve", "approvers": ["alice"], "reason": "a payment"}}}"#;

const PAYS: &str = "print(await echo({'text': 'pay 5'}))";

/// How a client leaves while its question waits.
#[derive(Debug, Clone, Copy)]
enum Leaves {
    /// The Python SDK's `mcp.Client` (2026-07-28 over HTTP), its process
    /// killed: its connection closes.
    PythonSdkKilled,
    /// rmcp's client (2025-11-25, a session over HTTP), closed: it ends its
    /// session.
    RmcpClosed,
    /// A Python SDK client (`client`: 2026-07-28, `session`: 2025-11-25)
    /// whose own read timeout passes: it abandons the request.
    PythonSdkTimedOut(&'static str),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_python_sdk_client_was_killed_leaves_the_console_within_seconds_and_cannot_be_approved() {
    orphaned(Leaves::PythonSdkKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_python_sdk_clients_timed_out_leaves_the_console_within_seconds_and_cannot_be_approved() {
    orphaned(Leaves::PythonSdkTimedOut("client")).await;
    orphaned(Leaves::PythonSdkTimedOut("session")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_rmcp_client_closed_its_session_leaves_the_console_within_seconds_and_cannot_be_approved() {
    orphaned(Leaves::RmcpClosed).await;
}

async fn orphaned(leaves: Leaves) {
    if !support::sandbox_available() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (carol, alice) = (token_new("carol"), token_new("alice"));
    let tokens = TokenFile::of(&[&carol, &alice]);
    let policy = log_path("orphan-policy").with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    let calls = log_path("orphan-calls");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve
        .args(["serve", "--http", "127.0.0.1:0", "--warm", "0", "--auth-tokens", tokens.arg()])
        .args(["--policy", policy.to_str().unwrap(), "--"])
        .arg(support::test_server())
        .args(["--log", calls.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let base = url.trim_end_matches("/mcp").to_string();

    // Carol's code pays; the call waits for alice.
    let mut python = None;
    let mut rmcp = None;
    match leaves {
        Leaves::PythonSdkKilled | Leaves::PythonSdkTimedOut(_) => {
            let api = match leaves {
                Leaves::PythonSdkTimedOut(api) => api,
                _ => "client",
            };
            let mut step = json!({"op": "call", "tool": "run_python", "arguments": {"code": PAYS}});
            if let Leaves::PythonSdkTimedOut(_) = leaves {
                step["read_timeout"] = json!(8);
            }
            let sdk = code_mode_core::testing::peers::venv_bin("python").expect("the Python SDK is installed");
            let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/mcp_client.py");
            let steps = json!([step]);
            let child = tokio::process::Command::new(sdk)
                .arg(script)
                .args(["--url", &url, "--api", api, "--header", &format!("Authorization: Bearer {}", carol.token)])
                .arg(steps.to_string())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("the Python SDK client runs");
            python = Some(child);
        }
        Leaves::RmcpClosed => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(carol.token.clone());
            let transport = StreamableHttpClientTransport::from_config(config);
            let client = ().serve_with_lifecycle(transport, LEGACY()).await.expect("carol connects");
            let client = std::sync::Arc::new(client);
            let calling = client.clone();
            let running = tokio::spawn(async move { run_python(&calling, PAYS).await });
            rmcp = Some((client, running));
        }
    }

    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = login(&http, &base, &alice.token).await;
    let started = Instant::now();
    let link = loop {
        let page = board(&http, &base, &cookie).await;
        if let Some(at) = page.find("/console/approvals/") {
            break page[at..].split('"').next().unwrap().to_string();
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no call waited for alice: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let question = http.get(format!("{base}{link}")).header("cookie", &cookie).send().await.unwrap();
    let page = question.text().await.unwrap();
    assert!(page.contains("Still waited for") && page.contains("yes: the request that asked is open"), "{page}");
    let csrf = csrf_in(&page);

    // Carol's client leaves.
    let mut left = Instant::now();
    match leaves {
        Leaves::PythonSdkKilled => python.take().unwrap().kill().await.expect("the client is killed"),
        Leaves::PythonSdkTimedOut(api) => {
            let out = python.take().unwrap().wait_with_output().await.expect("the client ends");
            left = Instant::now();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(said.contains(r#""timed_out": true"#), "{api}: the SDK's read timeout passed: {said}");
        }
        Leaves::RmcpClosed => {
            let (client, running) = rmcp.take().unwrap();
            running.abort();
            let _ = running.await;
            let client = std::sync::Arc::try_unwrap(client).unwrap_or_else(|_| panic!("the one handle left"));
            client.cancel().await.ok();
            eprintln!("rmcp's client closed in {} ms", left.elapsed().as_millis());
        }
    }
    let gone = loop {
        let page = board(&http, &base, &cookie).await;
        if !page.contains(&link) {
            break left.elapsed();
        }
        assert!(left.elapsed() < Duration::from_secs(10), "the question is still offered: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "measured ({leaves:?}): the console stopped offering the question {} ms after the client left",
        gone.as_millis()
    );
    assert!(gone < Duration::from_secs(5), "{gone:?}");

    // Approving it now is refused, and nothing runs.
    let decided = decide(&http, &base, &cookie, &link, "approve", "too+late", &csrf).await;
    let status = decided.status();
    let page = decided.text().await.unwrap();
    assert_ne!(status, 200, "the approval is refused: {page}");
    assert!(page.contains("withdrawn"), "the refusal says the question was withdrawn: {page}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let made = support::logged_calls(&calls);
    assert!(!made.iter().any(|c| c.contains("echo")), "the server never ran the call: {made:?}");
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&calls);
}

/// The console's board as `cookie`'s viewer sees it.
async fn board(http: &reqwest::Client, base: &str, cookie: &str) -> String {
    let board = http.get(format!("{base}/console")).header("cookie", cookie).send().await.unwrap();
    assert_eq!(board.status(), 200);
    board.text().await.unwrap()
}
