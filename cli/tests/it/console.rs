//! The web console end to end: `serve --http --auth-tokens` with a policy
//! whose rule names approvers; a client's code calls the tool and waits;
//! the client hears where the question waits (a URL-mode elicitation with
//! the console's link, and no form question); an approver logs in to the
//! console over HTTP, sees the call and approves it, and the code goes on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, UrlElicitationCapability,
};
use rmcp::service::{ClientServiceExt, RequestContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::auth::{TokenFile, serve, token_new};
use crate::http::{LEGACY, run_python, stdout};
use crate::support::{self, log_path};

/// `echo` waits for alice or the security group.
const POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {
    "action": "approve", "approvers": ["alice", "group:security"], "reason": "echo speaks for the team"}}}"#;

/// A client that declares form and URL elicitation and notes what it is
/// asked: URL-mode links, and form messages (accepting neither).
#[derive(Clone, Default)]
struct Watcher {
    links: Arc<Mutex<Vec<String>>>,
    forms: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Watcher {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        match request {
            ElicitRequestParams::UrlElicitationParams { url, .. } => self.links.lock().unwrap().push(url),
            ElicitRequestParams::FormElicitationParams { message, .. } => self.forms.lock().unwrap().push(message),
            _ => {}
        }
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::default()),
        );
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }
}

/// The value of cookie `name` a response sets.
pub(crate) fn set_cookie(answer: &reqwest::Response, name: &str) -> Option<String> {
    answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|header| Some(header.strip_prefix(&format!("{name}="))?.split(';').next()?.to_string()))
}

/// Log in to the console at `base` with `token` as a browser would (the
/// login form's cookie and CSRF value, then the token): the session
/// cookie, as a `Cookie` header value.
pub(crate) async fn login(http: &reqwest::Client, base: &str, token: &str) -> String {
    let form = http.get(format!("{base}/console/login")).send().await.unwrap();
    let login = set_cookie(&form, "codemode_console_login").expect("a login cookie");
    let csrf = csrf_in(&form.text().await.unwrap());
    let logged_in = http
        .post(format!("{base}/console/login"))
        .header("cookie", format!("codemode_console_login={login}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(logged_in.status(), 303, "the login is taken");
    format!("codemode_console={}", set_cookie(&logged_in, "codemode_console").expect("a session"))
}

/// Post a decision (`approve` or `decline`, the note form-encoded) on the
/// question page `link` with the session `cookie` and its `csrf` value.
pub(crate) async fn decide(
    http: &reqwest::Client,
    base: &str,
    cookie: &str,
    link: &str,
    decision: &str,
    note: &str,
    csrf: &str,
) -> reqwest::Response {
    http.post(format!("{base}{link}"))
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("decision={decision}&note={note}&csrf={csrf}"))
        .send()
        .await
        .unwrap()
}

pub(crate) fn csrf_in(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_string()
}

#[tokio::test]
async fn an_approver_approves_a_waiting_call_in_the_console_and_the_client_was_pointed_there_by_a_url_elicitation() {
    if !support::sandbox_available() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (carol, alice) = (token_new("carol"), token_new("alice"));
    let tokens = TokenFile::of(&[&carol, &alice]);
    let policy = log_path("console-policy").with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    let (_serve, url, _log) =
        serve(&["--warm", "0", "--auth-tokens", tokens.arg(), "--policy", policy.to_str().unwrap()]).await;
    let base = url.trim_end_matches("/mcp").to_string();

    let watcher = Watcher::default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(carol.token.clone());
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = watcher.clone().serve_with_lifecycle(transport, LEGACY()).await.expect("carol connects");
    let running = tokio::spawn(async move {
        let result = run_python(&client, "print(await echo({'text': 'team-approved'}))").await;
        client.cancel().await.ok();
        result
    });

    // Alice logs in to the console with her MCP token.
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = login(&http, &base, &alice.token).await;

    // The call waits on her board; the client was given its page.
    let started = Instant::now();
    let (page, csrf) = loop {
        let board = http.get(format!("{base}/console")).header("cookie", &cookie).send().await.unwrap();
        assert_eq!(board.status(), 200);
        let page = board.text().await.unwrap();
        if page.contains("/console/approvals/") {
            let csrf = csrf_in(&page);
            break (page, csrf);
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no call waited for alice: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(page.contains("echo speaks for the team") && page.contains("carol"), "{page}");
    let at = page.find("/console/approvals/").unwrap();
    let link = page[at..].split('"').next().unwrap().to_string();
    for _ in 0..50 {
        if !watcher.links.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(*watcher.links.lock().unwrap(), [format!("{base}{link}")], "a URL-mode elicitation with the link");

    let decided = decide(&http, &base, &cookie, &link, "approve", "ok+for+the+team", &csrf).await;
    let status = decided.status();
    let page = decided.text().await.unwrap();
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("approved"), "{page}");

    let result = tokio::time::timeout(Duration::from_secs(60), running).await.expect("the cell ends").unwrap();
    assert_eq!(stdout(&result), "team-approved\n");
    assert!(watcher.forms.lock().unwrap().is_empty(), "the rule does not ask the client: no form question");
}

/// The operations view as `cookie`'s viewer sees it.
async fn operations(http: &reqwest::Client, base: &str, cookie: &str) -> String {
    let page = http.get(format!("{base}/console/operations")).header("cookie", cookie).send().await.unwrap();
    assert_eq!(page.status(), 200, "the operations view");
    page.text().await.unwrap()
}

/// The seconds of `what` in a heartbeat message (`... held for 12 s ...`).
fn seconds_after(message: &str, what: &str) -> Option<u64> {
    message.split(what).nth(1)?.split_whitespace().next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_waiting_for_its_approvers_is_listed_held_in_the_operations_view_its_heartbeat_leaves_the_hold_out_of_its_run_time_and_the_approver_reads_its_code()
 {
    if !support::sandbox_available() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let carol = token_new("carol");
    // Alice approves, and operates: her line names the operators' group.
    let alice = token_new("alice");
    let alice_line =
        crate::auth::Client { token: alice.token.clone(), line: format!("{} groups=operators", alice.line) };
    let tokens = TokenFile::of(&[&carol, &alice_line]);
    let policy = log_path("console-held-policy").with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    let args = [
        "--warm",
        "0",
        "--auth-tokens",
        tokens.arg(),
        "--policy",
        policy.to_str().unwrap(),
        "--approval-timeout",
        "120",
    ];
    let (_serve, url, _log) = serve(&args).await;
    let base = url.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = login(&http, &base, &alice.token).await;
    let idle = operations(&http, &base, &cookie).await;
    assert!(idle.contains("No cell runs now."), "{idle}");

    // Carol's code, by the Python SDK's `mcp.Client` at its defaults asking
    // for progress: two seconds of work, then a call that waits for alice.
    let code = "import time\ntime.sleep(2)\nprint(await echo({'text': 'held-then-approved'}))";
    let steps =
        serde_json::json!([{"op": "call", "tool": "run_python", "arguments": {"code": code}, "progress": true}]);
    let header = format!("Authorization: Bearer {}", carol.token);
    let client = tokio::spawn(async move { support::python_sdk(&["--url", &url, "--header", &header], &steps).await });

    // The operations view lists the cell, held, while it waits.
    let started = Instant::now();
    let held_page = loop {
        let page = operations(&http, &base, &cookie).await;
        if page.contains("<strong>held</strong>") {
            break page;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the cell never showed held: {page}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let running = held_page.split("<h2>Cells running now</h2>").nth(1).unwrap().split("<h2>").next().unwrap();
    assert!(running.contains("carol") && running.contains("a call waits for a person"), "{running}");
    // The approver reads the code that made the call beside its arguments.
    let board =
        http.get(format!("{base}/console")).header("cookie", &cookie).send().await.unwrap().text().await.unwrap();
    assert!(board.contains("Code of the cell") && board.contains("time.sleep(2)"), "{board}");
    assert!(board.contains("held-then-approved"), "the arguments: {board}");
    // Held long enough for two heartbeats, then approved.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let csrf = csrf_in(&board);
    let at = board.find("/console/approvals/").unwrap();
    let link = board[at..].split('"').next().unwrap().to_string();
    let decided = decide(&http, &base, &cookie, &link, "approve", "fine", &csrf).await;
    assert_eq!(decided.status(), 200);

    let (results, stderr) =
        tokio::time::timeout(Duration::from_secs(90), client).await.expect("the cell ends").unwrap().expect("the SDK");
    let result = &results[0];
    assert_eq!(result["result"]["structuredContent"]["stdout"], "held-then-approved\n", "{result} {stderr}");
    let messages: Vec<String> = result["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["message"].as_str().map(str::to_string))
        .collect();
    let held: Vec<&String> = messages.iter().filter(|m| m.contains("is held while a person decides")).collect();
    assert!(held.len() >= 2, "heartbeats while held: {messages:#?}");
    for message in &held {
        let ran = seconds_after(message, "run for ").expect("the run time");
        assert!(ran <= 5, "the hold is not run time: {message} ({messages:#?})");
        assert!(seconds_after(message, "held for ").is_some(), "{message}");
    }
    let held_secs: Vec<u64> = held.iter().filter_map(|m| seconds_after(m, "held for ")).collect();
    assert!(held_secs.windows(2).all(|w| w[0] < w[1]), "the held time grows: {messages:#?}");
    // Once it ran again, the view lists it no more.
    let after = operations(&http, &base, &cookie).await;
    assert!(after.contains("No cell runs now."), "{after}");
}

#[tokio::test]
async fn a_config_reload_that_did_not_apply_shows_first_in_the_operations_view_and_an_applied_one_too() {
    if !support::sandbox_available() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let alice = token_new("alice");
    let operator = crate::auth::Client { token: alice.token.clone(), line: format!("{} groups=operators", alice.line) };
    let tokens = TokenFile::of(&[&operator]);
    let policy = log_path("console-reload-policy").with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    let pid_file = log_path("console-reload").with_extension("pid");
    let args = [
        "--warm",
        "0",
        "--auth-tokens",
        tokens.arg(),
        "--policy",
        policy.to_str().unwrap(),
        "--pid-file",
        pid_file.to_str().unwrap(),
    ];
    let (_serve, url, _log) = serve(&args).await;
    let base = url.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = login(&http, &base, &alice.token).await;
    assert!(operations(&http, &base, &cookie).await.contains("No bridge has reloaded its config"));
    let hangup = || {
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let status = std::process::Command::new("kill").args(["-HUP", pid.trim()]).status().unwrap();
        assert!(status.success());
    };
    // A policy with a mistake: the running one stays, and the view says why.
    std::fs::write(&policy, r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "perhaps"}}}"#)
        .unwrap();
    hangup();
    let started = Instant::now();
    let page = loop {
        let page = operations(&http, &base, &cookie).await;
        if page.contains("did not apply") {
            break page;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the failed reload never showed: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let refusal = page.split("<p class=\"refusal\">").nth(1).unwrap().split("</p>").next().unwrap();
    assert!(refusal.contains("(invalid)") && refusal.contains("the running config stays"), "{refusal}");
    assert!(refusal.contains("perhaps") && refusal.contains("/tools/echo"), "it names the key: {refusal}");
    assert!(page.find("did not apply").unwrap() < page.find("Live sessions").unwrap(), "first on the page");
    // Fixed: the next reload applies, and the view says so.
    std::fs::write(&policy, POLICY).unwrap();
    hangup();
    let started = Instant::now();
    loop {
        let page = operations(&http, &base, &cookie).await;
        if !page.contains("did not apply") && page.contains("class=\"approve\">ok</td>") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the applied reload never showed: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
