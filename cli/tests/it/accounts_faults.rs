//! Per-identity upstream accounts (issue 41) when a part fails between the
//! connect link and the callback, each with the real process killed: the
//! deployment of [`crate::accounts`] (oidc-provider as the authorization
//! server, the test server's `whoami`, a bridge and a frontend over NATS).
//!
//! - The frontend killed after the link was begun and before the
//!   callback: a new frontend on the same address takes the callback;
//!   what the call that waited gets, and the retry.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_killed_between_the_link_and_the_callback_loses_nothing_a_new_frontend_takes_the_callback_and_the_retry_acts_as_the_person()
 {
    let Some((mut d, alice, _bob, _carol)) = deploy("accounts-frontend-killed", &[]).await else { return };
    let port = port_of(&d.url);
    let (links, mut opened) = tokio::sync::mpsc::unbounded_channel();
    let a = listed(&d.url, &alice, Opener { links }).await;

    // Alice's call waits while her client is asked to open the link.
    let peer = a.peer().clone();
    let asked = Instant::now();
    let waiting = tokio::spawn(async move {
        let answer = peer.call_tool(CallToolRequestParams::new("whoami")).await;
        (asked.elapsed(), answer)
    });
    let link = tokio::time::timeout(Duration::from_secs(60), opened.recv())
        .await
        .expect("the client is asked to open a link within 60 s")
        .unwrap();
    assert!(link.starts_with(&format!("{}/console/connect/", d.base)), "{link}");

    // Her browser opens it: the console login, the connect cookie, the
    // authorization server's login, and the way back to the callback.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let console = crate::console::login(&http, &d.base, &alice.token).await;
    let opened_link = http.get(&link).header("cookie", &console).send().await.unwrap();
    assert_eq!(opened_link.status(), 303, "the link sends the browser to the authorization server");
    let connect = crate::console::set_cookie(&opened_link, "codemode_connect").expect("the connect cookie");
    let to = opened_link.headers()["location"].to_str().unwrap().to_string();
    let (status, _) = crate::oauth::http(&d.up.issuer.url, "POST", "/test/account?name=alice-upstream", &[], "");
    assert_eq!(status, 204);
    let back = follow_to(&to, &d.callback()).await;

    // The frontend dies before the browser is back; a new one starts on
    // the same address (as behind a load balancer).
    d.frontend.kill().await.unwrap();
    let killed = Instant::now();
    let (again, url) = frontend(&d.nats_url, &d.users, &d.tokens, &format!("127.0.0.1:{port}")).await;
    d.frontend = again;
    assert_eq!(url, d.url);
    let page = http.get(&back).header("cookie", format!("codemode_connect={connect}")).send().await.unwrap();
    let status = page.status();
    let page = page.text().await.unwrap();
    assert_eq!(status, 200, "the new frontend takes the callback: {page}");
    assert!(page.contains("alice-upstream"), "the page names the account connected: {page}");
    eprintln!("callback through the new frontend {:?} after the kill", killed.elapsed());

    // The retry, through the new frontend, acts as alice, asking nothing.
    let retried = Instant::now();
    let (links, mut asked_again) = tokio::sync::mpsc::unbounded_channel();
    let again = listed(&d.url, &alice, Opener { links }).await;
    let result = again.call_tool(CallToolRequestParams::new("whoami")).await.expect("the retry is answered");
    assert!(text(&result).contains("alice-upstream"), "{}", text(&result));
    assert!(asked_again.try_recv().is_err(), "connected: the retry asks nothing");
    eprintln!("the retry answered as alice in {:?}", retried.elapsed());

    // The request that waited died with the frontend that held its
    // connection: it never completes at the client. At the bridge the
    // call went on as alice once she connected (its answer went to the
    // dead frontend): two ok calls of hers in the audit record.
    let give_up = Instant::now() + Duration::from_secs(10);
    while crate::accounts::audited_calls(&d, "alice", "alice-upstream") < 2 {
        assert!(Instant::now() < give_up, "the call that waited went on at the bridge as alice");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!waiting.is_finished(), "the waiting request ended at the client: {:?}", waiting.await);
    waiting.abort();
    // What its client hears when it comes back to the new frontend with
    // its old session: a 404 saying to open a new session (MCP's signal to
    // start again), the retry above being that new session.
    let bearer = format!("Bearer {}", alice.token);
    let authority = format!("127.0.0.1:{port}");
    let (status, _, body) = crate::support::raw_http(
        &authority,
        "GET",
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", "a-session-of-the-killed-frontend"),
            ("Accept", "text/event-stream"),
        ],
        "",
    );
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("open a new session"), "{body}");
    again.cancel().await.ok();
    a.cancel().await.ok();
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
