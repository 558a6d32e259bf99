//! Per-identity upstream accounts (issue 41) when a part fails between the
//! connect link and the callback, each with the real process killed: the
//! deployment of [`crate::accounts`] (oidc-provider as the authorization
//! server, the test server's `whoami`, a bridge and a frontend over NATS).
//!
//! - The frontend killed after the link was begun and before the
//!   callback: a new frontend on the same address takes the callback;
//!   the call that waited ends at its client within the approval bound
//!   (rmcp's client and the Python SDK's `ClientSession` resume its
//!   stream there and get the clear error; `mcp.Client`, stateless, has
//!   no stream to resume and its SDK ends it with the transport's error);
//!   the retry acts as the person; another identity's resume learns
//!   nothing.
//! - The authorization server killed between the begin and the callback:
//!   the finish is refused naming it, nothing is saved, and once it is
//!   back (same port, its key and clients kept) a new link connects.
//! - nats-server restarted (JetStream's files kept) between the begin and
//!   the callback: the flow's record survives and the finish completes.

use std::time::{Duration, Instant};

use code_mode_proto::{AccountsReply, AccountsRequest, subjects};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RoleClient};

use crate::accounts::{Deployment, ask, deploy, flow_in, follow_to, frontend, listed, param, subject, text};
use crate::auth::Client;
use crate::oauth::Issuer;

/// A client that declares URL-mode elicitation and "opens" every link it
/// is given (accepts, and passes the link on to the test).
#[derive(Clone)]
struct Opener {
    links: tokio::sync::mpsc::UnboundedSender<String>,
}

impl ClientHandler for Opener {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::UrlElicitationParams { url, .. } = request {
            let _ = self.links.send(url);
            return Ok(ElicitResult::new(ElicitationAction::Accept));
        }
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }
}

/// Begin the flow of `refusal`'s link on the bus as `identity` in
/// `browser`, log in at the authorization server as `account`: the URL it
/// sends the browser back to.
async fn begun(d: &Deployment, refusal: &str, identity: &str, account: &str, browser: &str) -> String {
    let begin = AccountsRequest::Begin {
        flow: flow_in(refusal),
        viewer: identity.into(),
        browser: browser.into(),
        redirect_uri: d.callback(),
    };
    let AccountsReply::Redirect { url } = ask(&d.bus, begin).await else { panic!("the begin redirects") };
    let (status, body) =
        crate::oauth::http(&d.up.issuer.url, "POST", &format!("/test/account?name={account}"), &[], "");
    assert_eq!(status, 204, "{body}");
    follow_to(&url, &d.callback()).await
}

/// The finish of the callback `back` in `browser`.
fn finish(back: &str, browser: &str) -> AccountsRequest {
    AccountsRequest::Finish {
        state: param(back, "state").expect("a state"),
        code: param(back, "code").expect("a code"),
        iss: param(back, "iss"),
        browser: browser.into(),
    }
}

/// The port of a loopback URL.
fn port_of(url: &str) -> u16 {
    reqwest::Url::parse(url).unwrap().port().expect("a port")
}

/// `who`'s browser opens the connect `link` (the console's login, the
/// connect cookie, the authorization server's login as `account`) and is
/// on its way back to the callback when the frontend is killed (kill -9);
/// a new one starts on the same address (as behind a load balancer) and
/// takes the callback. When the kill was.
async fn killed_before_the_callback(d: &mut Deployment, who: &Client, link: &str, account: &str) -> Instant {
    assert!(link.starts_with(&format!("{}/console/connect/", d.base)), "{link}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let console = crate::console::login(&http, &d.base, &who.token).await;
    let opened_link = http.get(link).header("cookie", &console).send().await.unwrap();
    assert_eq!(opened_link.status(), 303, "the link sends the browser to the authorization server");
    let connect = crate::console::set_cookie(&opened_link, "codemode_connect").expect("the connect cookie");
    let to = opened_link.headers()["location"].to_str().unwrap().to_string();
    let (status, _) = crate::oauth::http(&d.up.issuer.url, "POST", &format!("/test/account?name={account}"), &[], "");
    assert_eq!(status, 204);
    let back = follow_to(&to, &d.callback()).await;

    let port = port_of(&d.url);
    d.frontend.kill().await.unwrap();
    let killed = Instant::now();
    let (again, url) = frontend(&d.nats_url, &d.users, &d.tokens, &format!("127.0.0.1:{port}")).await;
    d.frontend = again;
    assert_eq!(url, d.url);
    eprintln!("a new frontend serves {:?} after the kill", killed.elapsed());
    let page = http.get(&back).header("cookie", format!("codemode_connect={connect}")).send().await.unwrap();
    let status = page.status();
    let page = page.text().await.unwrap();
    assert_eq!(status, 200, "the new frontend takes the callback: {page}");
    assert!(page.contains(account), "the page names the account connected: {page}");
    eprintln!("callback through the new frontend {:?} after the kill", killed.elapsed());
    killed
}

/// Whether `said` is the clear error of a call whose frontend stopped.
fn says_the_frontend_stopped(said: &str) -> bool {
    said.contains("frontend that held this call stopped")
        && said.contains("may have run")
        && said.contains("idempotency")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_killed_between_the_link_and_the_callback_ends_the_waiting_rmcp_call_with_a_clear_error_a_new_frontend_takes_the_callback_and_the_retry_acts_as_the_person()
 {
    let Some((mut d, alice, bob, _carol)) = deploy("accounts-frontend-killed", &[]).await else { return };
    let port = port_of(&d.url);
    let (links, mut opened) = tokio::sync::mpsc::unbounded_channel();
    let a = listed(&d.url, &alice, Opener { links }).await;

    // Alice's call waits while her client is asked to open the link.
    let peer = a.peer().clone();
    let waiting = tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("whoami")).await });
    let link = tokio::time::timeout(Duration::from_secs(60), opened.recv())
        .await
        .expect("the client is asked to open a link within 60 s")
        .unwrap();
    let killed = killed_before_the_callback(&mut d, &alice, &link, "alice-upstream").await;

    // The request that waited: its client resumes its stream at the new
    // frontend, which answers the request's id with the clear error, well
    // within the approval bound (60 s).
    let answer = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the waiting request ends within the approval bound (60 s) of the kill")
        .unwrap();
    let ended = killed.elapsed();
    let Err(rmcp::service::ServiceError::McpError(error)) = &answer else {
        panic!("the waiting request ends with a JSON-RPC error: {answer:?}")
    };
    eprintln!("rmcp's client: the waiting request ended {ended:?} after the kill: {}: {}", error.code.0, error.message);
    assert!(says_the_frontend_stopped(&error.message), "{}", error.message);
    assert_eq!(error.code.0, code_mode_mcp_frontend::resumable::LOST_CALL_ERROR_CODE);

    // The retry, through the new frontend, acts as alice, asking nothing.
    let retried = Instant::now();
    let (links, mut asked_again) = tokio::sync::mpsc::unbounded_channel();
    let again = listed(&d.url, &alice, Opener { links }).await;
    let result = again.call_tool(CallToolRequestParams::new("whoami")).await.expect("the retry is answered");
    assert!(text(&result).contains("alice-upstream"), "{}", text(&result));
    assert!(asked_again.try_recv().is_err(), "connected: the retry asks nothing");
    eprintln!("the retry answered as alice in {:?}", retried.elapsed());

    // At the bridge the call that waited went on as alice once she
    // connected (its answer went to the dead frontend): two ok calls of
    // hers in the audit record.
    let give_up = Instant::now() + Duration::from_secs(10);
    while crate::accounts::audited_calls(&d, "alice", "alice-upstream") < 2 {
        assert!(Instant::now() < give_up, "the call that waited went on at the bridge as alice");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // What is not a resume of a request still hears 404 "open a new
    // session": a GET with no Last-Event-ID, or one naming no request, and
    // a POST, with a session the new frontend does not hold.
    let authority = format!("127.0.0.1:{port}");
    let as_alice = format!("Bearer {}", alice.token);
    let as_bob = format!("Bearer {}", bob.token);
    let get = |bearer: &str, session: &str, last: Option<&str>| {
        let mut headers = vec![("Authorization", bearer), ("Mcp-Session-Id", session), ("Accept", "text/event-stream")];
        if let Some(last) = last {
            headers.push(("Last-Event-ID", last));
        }
        crate::support::raw_http(&authority, "GET", "/mcp", &headers, "")
    };
    for last in [None, Some("0/3")] {
        let (status, _, body) = get(&as_alice, "a-session-of-the-killed-frontend", last);
        assert_eq!(status, 404, "{last:?}: {body}");
        assert!(body.contains("open a new session"), "{body}");
    }
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let (status, _, body) = crate::support::raw_http(
        &authority,
        "POST",
        "/mcp",
        &[
            ("Authorization", &as_alice),
            ("Mcp-Session-Id", "a-session-of-the-killed-frontend"),
            ("Last-Event-ID", "0/3~n1"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        ping,
    );
    assert_eq!(status, 404, "a POST is no resume: {body}");

    // Attack: bob resuming alice's stream learns nothing of her call. His
    // resume of a session of hers (the dead one, or one open now) gets the
    // same answer as any id he makes up: the error for the request id he
    // named, nothing else.
    let (status, headers, open) = crate::support::raw_http(
        &authority,
        "POST",
        "/mcp",
        &[
            ("Authorization", &as_alice),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(status, 200, "{open}");
    let hers = headers.iter().find(|(k, _)| k == "mcp-session-id").expect("a session id").1.clone();
    let answers: Vec<(u16, String)> = [hers.as_str(), "a-session-of-the-killed-frontend", "made-up"]
        .iter()
        .map(|session| {
            let (status, _, body) = get(&as_bob, session, Some("0/3~n2"));
            (status, body)
        })
        .collect();
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body, &answers[0].1, "one answer whoever's the session is");
        let data: serde_json::Value =
            serde_json::from_str(body.trim().strip_prefix("event: message\ndata: ").expect("one event")).unwrap();
        assert_eq!(data["id"], 2, "{body}");
        assert!(says_the_frontend_stopped(data["error"]["message"].as_str().unwrap()), "{body}");
        assert!(!body.contains("alice") && !body.contains("whoami"), "{body}");
    }
    again.cancel().await.ok();
    a.cancel().await.ok();
}

/// What a Python SDK client's waiting call came to: how long after the
/// kill its process ended, its output line for the call (none when the
/// client itself failed) and its stderr.
struct Ended {
    after_the_kill: Duration,
    line: Option<serde_json::Value>,
    stderr: String,
}

/// `who`'s `whoami` through the Python SDK's `api` (`client`: `mcp.Client`
/// at its defaults; `session`: `ClientSession`), the frontend killed
/// between the link and the callback.
async fn python_call_across_a_frontend_kill(
    d: &mut Deployment,
    who: &Client,
    account: &str,
    api: &str,
) -> Option<Ended> {
    crate::accounts::client_of(d, who).await.cancel().await.ok();
    let python = code_mode_core::testing::peers::venv_bin("python")?;
    let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/mcp_client.py");
    let noted = std::env::temp_dir().join(format!("cm-link-{}", uuid::Uuid::new_v4().simple()));
    // The "browser" notes the link for the test and returns at once.
    let browser = serde_json::json!([
        "sh",
        "-c",
        r#"printf %s "$1" > "$0.part" && mv "$0.part" "$0"; echo null"#,
        noted.to_str().unwrap()
    ]);
    let steps = serde_json::json!([{"op": "call", "tool": "whoami", "arguments": {}}]);
    let bearer = format!("Authorization: Bearer {}", who.token);
    let client = tokio::process::Command::new(python)
        .arg(script)
        .args(["--url", &d.url, "--header", &bearer, "--api", api, "--url-browser", &browser.to_string()])
        .arg(steps.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Python SDK client starts");
    let give_up = Instant::now() + Duration::from_secs(60);
    let link = loop {
        if let Ok(link) = std::fs::read_to_string(&noted) {
            break link;
        }
        assert!(Instant::now() < give_up, "{api}: the client is asked to open a link within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = std::fs::remove_file(&noted);
    let killed = killed_before_the_callback(d, who, &link, account).await;
    let out = tokio::time::timeout(Duration::from_secs(60), client.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{api}: the waiting call ends within the approval bound (60 s) of the kill"))
        .unwrap();
    let after_the_kill = killed.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().next().map(|l| serde_json::from_str(l).unwrap());
    Some(Ended { after_the_kill, line, stderr: String::from_utf8_lossy(&out.stderr).into_owned() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_killed_between_the_link_and_the_callback_ends_the_waiting_call_of_both_python_clients_within_the_bound_with_a_clear_error_where_the_protocol_resumes()
 {
    let Some((mut d, _alice, bob, carol)) = deploy("accounts-frontend-killed-python", &[]).await else { return };

    // ClientSession (2025-11-25): its request's stream had event ids; it
    // resumes at the new frontend and gets the clear error.
    let Some(session) = python_call_across_a_frontend_kill(&mut d, &carol, "carol-upstream", "session").await else {
        return;
    };
    let said = session.line.as_ref().map(ToString::to_string).unwrap_or_default();
    eprintln!("Python SDK ClientSession: the waiting call ended {:?} after the kill: {said}", session.after_the_kill);
    assert!(says_the_frontend_stopped(&said), "ClientSession: the clear error: {said} {}", session.stderr);

    // mcp.Client at its defaults (2026-07-28, stateless): its request had
    // no stream to resume (no answer's headers were sent while the call
    // waited); the SDK (mcp 2.3.0) ends the client with the transport's
    // error, at once.
    let Some(client) = python_call_across_a_frontend_kill(&mut d, &bob, "bob-upstream", "client").await else {
        return;
    };
    eprintln!(
        "Python SDK mcp.Client: the waiting call ended {:?} after the kill: {:?}",
        client.after_the_kill, client.line
    );
    assert!(client.after_the_kill < Duration::from_secs(10), "{:?}", client.after_the_kill);
    let said = client.line.as_ref().map(ToString::to_string).unwrap_or_default();
    assert!(
        says_the_frontend_stopped(&said) || client.stderr.contains("Server disconnected without sending a response"),
        "mcp.Client: {said} {}",
        client.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_server_down_at_the_callback_refuses_the_finish_naming_it_saves_nothing_and_a_new_link_works_once_it_is_back()
 {
    let keep = std::env::temp_dir().join(format!("cm-issuer-keep-{}.json", uuid::Uuid::new_v4().simple()));
    let keep_arg = keep.to_str().unwrap().to_string();
    let Some((mut d, alice, _bob, _carol)) = deploy("accounts-issuer-down", &["--keep", &keep_arg]).await else {
        return;
    };
    let a = crate::accounts::client_of(&d, &alice).await;
    let refusal = subject(&a).await.expect_err("no account yet");
    let back = begun(&d, &refusal, "alice", "alice-upstream", "alice-browser").await;

    // The authorization server dies before the browser is back.
    let issuer = d.up.issuer.url.clone();
    d.up.issuer.kill();
    let started = Instant::now();
    let refused = ask(&d.bus, finish(&back, "alice-browser")).await;
    let took = started.elapsed();
    eprintln!("finish with the authorization server down: {took:?}: {refused:?}");
    let AccountsReply::Refused { reason } = &refused else { panic!("the finish is refused: {refused:?}") };
    assert!(reason.contains("authorization server") && reason.contains(&issuer), "names it: {reason}");
    assert!(took < Duration::from_secs(10), "refused within 10 s: {took:?}");

    // Nothing half-saved: no account, and the call asks again.
    let listed = ask(&d.bus, AccountsRequest::List { identity: "alice".into() }).await;
    assert_eq!(listed, AccountsReply::Accounts { accounts: vec![] });
    let refusal = subject(&a).await.expect_err("still no account");
    assert!(refusal.contains("/console/connect/"), "{refusal}");
    let replayed = ask(&d.bus, finish(&back, "alice-browser")).await;
    assert!(matches!(replayed, AccountsReply::Refused { .. }), "the failed flow is not taken again: {replayed:?}");

    // The authorization server back on its port (key and clients kept): a
    // new link connects.
    let port = port_of(&issuer).to_string();
    d.up.issuer =
        Issuer::spawn("oidc_upstream_issuer.mjs", &[&d.up.url, "--ttl", "60", "--port", &port, "--keep", &keep_arg])
            .expect("the issuer starts again");
    assert_eq!(d.up.issuer.url, issuer);
    let done = d.connect(&refusal, "alice", "alice-upstream", "alice-browser").await;
    assert!(matches!(&done, AccountsReply::Connected { subject, .. } if subject == "alice-upstream"), "{done:?}");
    assert_eq!(subject(&a).await.unwrap(), "alice-upstream");
    a.cancel().await.ok();
    let _ = std::fs::remove_file(&keep);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_restarted_between_the_link_and_the_callback_keeps_the_flow_and_the_finish_connects_the_account() {
    let Some((mut d, alice, _bob, _carol)) = deploy("accounts-nats-restarted", &[]).await else { return };
    let a = crate::accounts::client_of(&d, &alice).await;
    let refusal = subject(&a).await.expect_err("no account yet");
    let back = begun(&d, &refusal, "alice", "alice-upstream", "alice-browser").await;

    // nats-server killed and started again, JetStream's files kept.
    let restarted = Instant::now();
    d.nats.restart();
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut tries = 0;
    let reply = loop {
        match d
            .bus
            .call::<_, AccountsReply>(subjects::ACCOUNTS, &finish(&back, "alice-browser"), Duration::from_secs(10))
            .await
        {
            Ok(reply) => break reply,
            Err(e) => {
                tries += 1;
                assert!(Instant::now() < give_up, "a bridge answers the finish within 60 s of the restart: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    eprintln!("finish answered {:?} after the restart ({tries} failed tries): {reply:?}", restarted.elapsed());
    assert!(matches!(&reply, AccountsReply::Connected { subject, .. } if subject == "alice-upstream"), "{reply:?}");

    // Alice's calls act as her account once the frontend is back on NATS.
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        match subject(&a).await {
            Ok(got) => {
                assert_eq!(got, "alice-upstream");
                break;
            }
            Err(e) => {
                assert!(Instant::now() < give_up, "alice's call acts as her within 60 s: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    eprintln!("alice's call answered as her {:?} after the restart", restarted.elapsed());
    a.cancel().await.ok();
}
