//! Per-identity upstream accounts (issue 41), end to end over NATS with the
//! real processes: a remote server whose `auth` block is `{"type": "oauth",
//! "per": "identity"}` behind a real authorization server (oidc-provider,
//! `oidc_upstream_issuer.mjs`, whose test route picks the account each
//! login approves) and a real resource server (the test server, whose
//! `whoami` answers the token's subject); a bridge and a frontend over HTTP
//! with the token identities alice, bob and carol; the deployment's own
//! `code-mode login` grant (account `deploy-account`) for listing the
//! catalog only.
//!
//! The console's `/console/connect` pages are driven in a real browser by
//! `accounts_browser.rs`; here the test takes the console's part itself,
//! to reach the bridge's answers directly: it speaks `codemode.v1.accounts` (begin, finish,
//! list, disconnect, counts) on the bus as the frontend's NATS user, with
//! the link's flow id, a browser hash of its own and the frontend's
//! callback URL, and follows the authorization redirects as a browser
//! would. Everything else is the product's own path: the call asks, the
//! frontend answers with the link (this client declares no URL
//! elicitation), the bridge exchanges the code and keeps the grant.

use std::collections::HashMap;
use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_proto::{AccountsReply, AccountsRequest, subjects};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::Value;

use crate::auth::{Client, TokenFile, connect_as, token_new};
use crate::support::{self, log_path};
use crate::upstream::{Upstream, browser_get};

pub(crate) type Mcp = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// A bus client as the frontend's NATS user (what the console uses).
pub(crate) async fn console_bus(nats_url: &str, users: &code_mode_core::testing::NatsUsers) -> Bus {
    let options = NatsOptions {
        url: nats_url.to_string(),
        credentials: Some(("frontend".into(), users.password("frontend").into())),
        inbox_prefix: Some("_INBOX.frontend".into()),
        ..Default::default()
    };
    Bus::new(NatsTransport::connect(&options).await.expect("the test connects as the frontend user"))
}

pub(crate) async fn ask(bus: &Bus, request: AccountsRequest) -> AccountsReply {
    bus.call::<_, AccountsReply>(subjects::ACCOUNTS, &request, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("the bridge answers {request:?}: {e}"))
}

pub(crate) fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

async fn whoami(client: &Mcp) -> CallToolResult {
    client.call_tool(CallToolRequestParams::new("whoami")).await.expect("the call is answered")
}

/// The subject `whoami` answers, or the refusal's text.
pub(crate) async fn subject(client: &Mcp) -> Result<String, String> {
    let result = whoami(client).await;
    if result.is_error == Some(true) {
        return Err(text(&result));
    }
    let claims = result.structured_content.clone().unwrap_or_else(|| serde_json::from_str(&text(&result)).unwrap());
    Ok(claims["sub"].as_str().unwrap_or_default().to_string())
}

/// The flow id in a refusal's connect link.
pub(crate) fn flow_in(refusal: &str) -> String {
    let at = refusal.find("/console/connect/").unwrap_or_else(|| panic!("a connect link in {refusal:?}"));
    refusal[at + "/console/connect/".len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// Follow `url` as a browser does (cookies kept) until the authorization
/// server sends it to `callback`: that redirect's URL.
pub(crate) async fn follow_to(url: &str, callback: &str) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut cookies: HashMap<String, String> = HashMap::new();
    let mut next = url.to_string();
    for _ in 0..12 {
        if next.starts_with(callback) {
            return next;
        }
        let parsed = reqwest::Url::parse(&next).unwrap();
        let response = browser_get(&client, parsed.clone(), &mut cookies).await;
        let location = response
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_else(|| panic!("a redirect from {parsed} ({})", response.status()));
        next = parsed.join(location).unwrap().to_string();
    }
    panic!("the login redirected more than 12 times from {url}");
}

pub(crate) fn param(url: &str, name: &str) -> Option<String> {
    reqwest::Url::parse(url).unwrap().query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// The parts of one test: the upstream, nats-server, the bus, the frontend's URL.
pub(crate) struct Deployment {
    pub(crate) up: Upstream,
    pub(crate) bus: Bus,
    pub(crate) url: String,
    pub(crate) base: String,
    pub(crate) audit: std::path::PathBuf,
    pub(crate) nats_url: String,
    pub(crate) users: code_mode_core::testing::NatsUsers,
    pub(crate) nats: code_mode_core::testing::NatsServer,
    _bridge: tokio::process::Child,
    /// The bridge's arguments and environment, for [`Deployment::another_bridge`].
    bridge_args: Vec<String>,
    pub(crate) frontend: tokio::process::Child,
    pub(crate) tokens: TokenFile,
}

impl Deployment {
    /// One more bridge replica, as the first was started (the same
    /// server, token key and state folder), in the bridges' queue group.
    pub(crate) fn another_bridge(&self) -> tokio::process::Child {
        // Its own audit log, beside the first's: [`Deployment::second_audit`].
        let second = self.second_audit();
        let mut args: Vec<&str> = self.bridge_args.iter().map(String::as_str).collect();
        if let Some(at) = args.iter().position(|a| *a == "--audit") {
            args[at + 1] = second.to_str().unwrap();
        }
        let mut bridge = support::service_command(&self.nats_url, &self.users, "bridge", &args, None);
        bridge.env("CODE_MODE_TOKEN_KEY", &self.up.key).env("CODE_MODE_STATE_DIR", &self.up.state);
        bridge.spawn().expect("another bridge starts")
    }

    /// The audit log of [`Deployment::another_bridge`].
    pub(crate) fn second_audit(&self) -> std::path::PathBuf {
        self.audit.with_extension("second.jsonl")
    }

    /// The callback URL the console would give.
    pub(crate) fn callback(&self) -> String {
        format!("{}/console/connect/callback", self.base)
    }

    /// Connect `identity`'s account, named `account` at the authorization
    /// server, through the flow of `refusal`'s link, in the browser
    /// `browser`: the finish's answer.
    pub(crate) async fn connect(&self, refusal: &str, identity: &str, account: &str, browser: &str) -> AccountsReply {
        let flow = flow_in(refusal);
        let begun = ask(
            &self.bus,
            AccountsRequest::Begin {
                flow,
                viewer: identity.into(),
                browser: browser.into(),
                redirect_uri: self.callback(),
            },
        )
        .await;
        let AccountsReply::Redirect { url } = begun else { panic!("begin redirects: {begun:?}") };
        let (status, body) =
            crate::oauth::http(&self.up.issuer.url, "POST", &format!("/test/account?name={account}"), &[], "");
        assert_eq!(status, 204, "{body}");
        let back = follow_to(&url, &self.callback()).await;
        let finish = AccountsRequest::Finish {
            state: param(&back, "state").expect("a state"),
            code: param(&back, "code").expect("a code"),
            iss: param(&back, "iss"),
            browser: browser.into(),
        };
        ask(&self.bus, finish).await
    }
}

/// A frontend over HTTP on `listen` with the identities of `tokens`: the
/// process and its MCP URL.
pub(crate) async fn frontend(
    nats_url: &str,
    users: &code_mode_core::testing::NatsUsers,
    tokens: &TokenFile,
    listen: &str,
) -> (tokio::process::Child, String) {
    let mut frontend = support::service_command(
        nats_url,
        users,
        "frontend",
        &["--http", listen, "--auth-tokens", tokens.arg(), "--expose-tools=only"],
        None,
    );
    let (frontend, url, _log) = crate::http::spawn_http(&mut frontend).await;
    (frontend, url)
}

/// Start the deployment: the deployment's login (as `deploy-account`), a
/// bridge with the per-identity server, a frontend over HTTP with alice,
/// bob and carol (the issuer started with `issuer_args` too); `None` off
/// CI without the peers.
pub(crate) async fn deploy(tag: &str, issuer_args: &[&str]) -> Option<(Deployment, Client, Client, Client)> {
    deploy_with(tag, issuer_args, &[]).await
}

/// [`deploy`] with more arguments for the bridge (such as `--policy`).
pub(crate) async fn deploy_with(
    tag: &str,
    issuer_args: &[&str],
    more_bridge_args: &[&str],
) -> Option<(Deployment, Client, Client, Client)> {
    let up = Upstream::start_with(60, issuer_args, &[])?;
    let (nats, users) = code_mode_core::testing::NatsServer::start_secured()?;
    let nats_url = nats.url();
    let (status, body) = crate::oauth::http(&up.issuer.url, "POST", "/test/account?name=deploy-account", &[], "");
    assert_eq!(status, 204, "{body}");
    let as_bridge = [("CODE_MODE_NATS_USER", "bridge"), ("CODE_MODE_NATS_PASSWORD", users.password("bridge"))];
    let login = ["login", "--nats", &nats_url, "--url", &up.url, "--no-browser", "--timeout", "30"];
    let (ok, said) = up.login_command_env(&login, &as_bridge, str::to_string).await;
    assert!(ok, "the deployment's login succeeds: {said}");
    let audit = log_path(&format!("{tag}-audit"));
    let auth = r#"{"type": "oauth", "per": "identity"}"#;
    let mut bridge_args =
        vec!["--url", up.url.as_str(), "--auth", auth, "--audit", audit.to_str().unwrap(), "--approval-timeout", "60"];
    bridge_args.extend_from_slice(more_bridge_args);
    let mut bridge = support::service_command(&nats_url, &users, "bridge", &bridge_args, None);
    bridge.env("CODE_MODE_TOKEN_KEY", &up.key).env("CODE_MODE_STATE_DIR", &up.state);
    let bridge = bridge.spawn().expect("the bridge starts");
    let bridge_args = bridge_args.iter().map(|a| a.to_string()).collect();
    let (alice, bob, carol) = (token_new("alice"), token_new("bob"), token_new("carol"));
    let tokens = TokenFile::of(&[&alice, &bob, &carol]);
    let (frontend, url) = frontend(&nats_url, &users, &tokens, "127.0.0.1:0").await;
    let base = url.trim_end_matches("/mcp").to_string();
    let bus = console_bus(&nats_url, &users).await;
    let deployment =
        Deployment { up, bus, url, base, audit, nats_url, users, nats, _bridge: bridge, bridge_args, frontend, tokens };
    Some((deployment, alice, bob, carol))
}

/// How many ok `whoami` calls of `identity` the audit record names with
/// the upstream account `subject`.
pub(crate) fn audited_calls(d: &Deployment, identity: &str, subject: &str) -> usize {
    std::fs::read_to_string(&d.audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "call" && r["tool"] == "whoami" && r["identity"] == identity && r["result"] == "ok")
        .filter(|r| r["upstream_subject"] == subject)
        .count()
}

/// Connect as `client` and wait until the server's tool is listed.
pub(crate) async fn client_of(d: &Deployment, client: &Client) -> Mcp {
    listed(&d.url, client, ()).await
}

/// Connect to `url` as `client` with `handler` and wait until the
/// server's tool is listed.
pub(crate) async fn listed<H: rmcp::ClientHandler>(
    url: &str,
    client: &Client,
    handler: H,
) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
    let mcp = connect_as(url, client, handler).await;
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let names: Vec<String> =
            mcp.peer().list_all_tools().await.unwrap_or_default().iter().map(|t| t.name.to_string()).collect();
        if names.iter().any(|n| n == "whoami") {
            return mcp;
        }
        assert!(std::time::Instant::now() < give_up, "whoami is listed within 60 s: {names:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_connects_its_own_account_through_the_link_and_its_calls_act_as_that_account_and_nobody_elses() {
    let Some((d, alice, bob, carol)) = deploy("accounts", &[]).await else { return };
    let (a, b) = (client_of(&d, &alice).await, client_of(&d, &bob).await);
    let tools = a.peer().list_all_tools().await.unwrap();
    let whoami = tools.iter().find(|t| t.name == "whoami").unwrap();
    let description = whoami.description.as_deref().unwrap_or_default();
    assert!(!description.contains("shared account"), "each caller's own account: {description}");

    // Alice has no account: her call is asked to connect one; this client
    // declares no URL elicitation, so it gets a ToolError with the link.
    let refusal = subject(&a).await.expect_err("no account yet: the call is refused");
    assert!(refusal.contains("/console/connect/") && refusal.contains("connect your account"), "{refusal}");
    assert!(!refusal.contains("deploy-account"), "never the deployment's account: {refusal}");

    // Bob cannot begin alice's flow, and bob's browser cannot finish it.
    let flow = flow_in(&refusal);
    let begun = ask(
        &d.bus,
        AccountsRequest::Begin {
            flow: flow.clone(),
            viewer: "bob".into(),
            browser: "bob-browser".into(),
            redirect_uri: d.callback(),
        },
    )
    .await;
    assert!(matches!(&begun, AccountsReply::Refused { reason } if reason.contains("another identity")), "{begun:?}");
    let begun = ask(
        &d.bus,
        AccountsRequest::Begin {
            flow: flow.clone(),
            viewer: "alice".into(),
            browser: "alice-browser".into(),
            redirect_uri: d.callback(),
        },
    )
    .await;
    let AccountsReply::Redirect { url } = begun else { panic!("alice's begin redirects: {begun:?}") };
    assert_eq!(param(&url, "redirect_uri").as_deref(), Some(d.callback().as_str()));
    assert!(param(&url, "code_challenge").is_some() && param(&url, "state").is_some(), "PKCE and state: {url}");
    let (status, _) = crate::oauth::http(&d.up.issuer.url, "POST", "/test/account?name=alice-upstream", &[], "");
    assert_eq!(status, 204);
    let back = follow_to(&url, &d.callback()).await;
    let finish = |browser: &str| AccountsRequest::Finish {
        state: param(&back, "state").unwrap(),
        code: param(&back, "code").unwrap(),
        iss: param(&back, "iss"),
        browser: browser.into(),
    };
    let stolen = ask(&d.bus, finish("bob-browser")).await;
    assert!(matches!(&stolen, AccountsReply::Refused { reason } if reason.contains("another browser")), "{stolen:?}");
    let done = ask(&d.bus, finish("alice-browser")).await;
    assert!(matches!(&done, AccountsReply::Connected { subject, .. } if subject == "alice-upstream"), "{done:?}");
    let replayed = ask(&d.bus, finish("alice-browser")).await;
    assert!(
        matches!(&replayed, AccountsReply::Refused { reason } if reason.contains("taken once") || reason.contains("no connect flow")),
        "a replayed callback is refused: {replayed:?}"
    );

    // The retry acts as alice's own account.
    assert_eq!(subject(&a).await.unwrap(), "alice-upstream");

    // Bob connects his, through his own link.
    let refusal = subject(&b).await.expect_err("bob has no account yet");
    assert!(!refusal.contains("alice-upstream"), "never alice's account: {refusal}");
    let done = d.connect(&refusal, "bob", "bob-upstream", "bob-browser").await;
    assert!(matches!(&done, AccountsReply::Connected { subject, .. } if subject == "bob-upstream"), "{done:?}");
    assert_eq!(subject(&b).await.unwrap(), "bob-upstream");

    // 100 interleaved calls: each answered with its caller's own subject.
    let calls = (0..100).map(|i| {
        let (client, who) = if i % 2 == 0 { (&a, "alice-upstream") } else { (&b, "bob-upstream") };
        async move { (who, subject(client).await) }
    });
    let answers = futures::future::join_all(calls).await;
    let wrong: Vec<_> = answers.iter().filter(|(who, got)| got.as_deref() != Ok(*who)).collect();
    assert!(
        wrong.is_empty(),
        "{} of 100 calls got another subject or failed: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );

    // Carol has no account: never alice's, bob's or the deployment's token.
    let c = client_of(&d, &carol).await;
    for _ in 0..3 {
        let refusal = subject(&c).await.expect_err("carol has no account: refused");
        for other in ["alice-upstream", "bob-upstream", "deploy-account"] {
            assert!(!refusal.contains(other), "{other} in carol's refusal: {refusal}");
        }
        assert!(refusal.contains("/console/connect/"), "{refusal}");
    }

    // The console's view: alice's account, the counts, a disconnect.
    let listed = ask(&d.bus, AccountsRequest::List { identity: "alice".into() }).await;
    let AccountsReply::Accounts { accounts } = &listed else { panic!("{listed:?}") };
    assert_eq!(accounts.len(), 1, "{listed:?}");
    assert_eq!(accounts[0].subject, "alice-upstream");
    let server = accounts[0].server.clone();
    let counts = ask(&d.bus, AccountsRequest::Counts).await;
    assert_eq!(counts, AccountsReply::Counts { servers: vec![(server.clone(), 2)] });
    let gone = ask(&d.bus, AccountsRequest::Disconnect { identity: "alice".into(), server }).await;
    assert_eq!(gone, AccountsReply::Disconnected { revoked: true }, "oidc-provider offers RFC 7009 revocation");
    let refusal = subject(&a).await.expect_err("alice disconnected: asked again");
    assert!(refusal.contains("/console/connect/"), "{refusal}");
    assert_eq!(subject(&b).await.unwrap(), "bob-upstream", "bob's account stays");

    // The audit record names the upstream account beside the caller.
    let records: Vec<Value> = std::fs::read_to_string(&d.audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &Value| r["kind"] == "call" && r["tool"] == "whoami")
        .collect();
    let alice_ok = records
        .iter()
        .find(|r| r["identity"] == "alice" && r["result"] == "ok")
        .unwrap_or_else(|| panic!("an ok call record of alice in {records:?}"));
    assert_eq!(alice_ok["upstream_subject"], "alice-upstream", "{alice_ok}");
    assert!(
        records
            .iter()
            .filter(|r| r["identity"] == "bob" && r["result"] == "ok")
            .all(|r| r["upstream_subject"] == "bob-upstream"),
        "every ok call of bob's names bob's account"
    );
    let text = std::fs::read_to_string(&d.audit).unwrap_or_default();
    assert!(!text.contains(&d.up.key), "no token key in the audit log");
    // The upstream's tokens are JWTs (oidc-provider): none is in the audit
    // log, nor in any refusal the callers were given.
    assert_eq!(support::jwt_in(&text), None, "no upstream token in the audit log");
    assert_eq!(support::jwt_in(&refusal), None, "no upstream token in a refusal: {refusal}");
    for client in [a, b, c] {
        client.cancel().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_an_identity_to_a_per_identity_server_is_refused_and_never_sent_with_the_deployments_account() {
    let Some((d, _alice, _bob, _carol)) = deploy("accounts-anonymous", &[]).await else { return };
    // A frontend over stdio: its client has no identity.
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.args(["frontend", "--nats", &d.nats_url, "--expose-tools=only"]);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", d.users.password("frontend"));
    let (client, _) = support::connect_client(frontend).await;
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while !client.peer().list_all_tools().await.unwrap_or_default().iter().any(|t| t.name == "whoami") {
        assert!(std::time::Instant::now() < give_up, "whoami is listed");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let result = client.call_tool(CallToolRequestParams::new("whoami")).await.expect("answered");
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let said = text(&result);
    assert!(said.contains("has no identity") && !said.contains("deploy-account"), "{said}");
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_connect_rule_that_denies_refuses_a_caller_without_an_account_with_its_reason_and_gives_no_link() {
    let policy = support::log_path("accounts-connect-denied-policy");
    let rule = r#"{"version": "1", "default": "allow",
        "connect": {"action": "deny", "reason": "accounts here are connected by the help desk"}}"#;
    std::fs::write(&policy, rule).unwrap();
    let more = ["--policy", policy.to_str().unwrap()];
    let Some((d, alice, _bob, _carol)) = deploy_with("accounts-connect-denied", &[], &more).await else { return };
    let a = client_of(&d, &alice).await;
    let refusal = subject(&a).await.expect_err("no account and the policy refuses");
    assert!(refusal.contains("accounts here are connected by the help desk"), "{refusal}");
    assert!(!refusal.contains("/console/connect/"), "no link is given: {refusal}");
    let counts = ask(&d.bus, AccountsRequest::Counts).await;
    assert!(matches!(&counts, AccountsReply::Counts { servers } if servers.iter().all(|(_, n)| *n == 0)), "{counts:?}");
    a.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}

/// The `whoami` records of `identity` in the audit log at `path`: how many
/// were answered and how many refused.
fn whoami_records(path: &std::path::Path, identity: &str) -> (usize, usize) {
    let records: Vec<Value> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &Value| r["kind"] == "call" && r["tool"] == "whoami" && r["identity"] == identity)
        .collect();
    let ok = records.iter().filter(|r| r["result"] == "ok").count();
    (ok, records.len() - ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_through_one_bridge_replica_stops_the_accounts_calls_through_every_replica_at_the_next_call() {
    let Some((d, alice, _bob, _carol)) = deploy("accounts-two-bridges", &[]).await else { return };
    let _second = d.another_bridge();
    let a = client_of(&d, &alice).await;
    let refusal = subject(&a).await.expect_err("no account yet");
    let done = d.connect(&refusal, "alice", "alice-upstream", "alice-browser").await;
    assert!(matches!(&done, AccountsReply::Connected { subject, .. } if subject == "alice-upstream"), "{done:?}");

    // Calls go to either bridge (a queue group): each replica acts as
    // alice at least once, so each holds an upstream session of hers with
    // her token in memory.
    let (first, second) = (d.audit.clone(), d.second_audit());
    let mut calls = 0;
    while whoami_records(&first, "alice").0 == 0 || whoami_records(&second, "alice").0 == 0 {
        assert!(calls < 60, "both bridge replicas answered alice's calls within 60: {first:?} {second:?}");
        assert_eq!(subject(&a).await.as_deref(), Ok("alice-upstream"));
        calls += 1;
    }
    let before = (whoami_records(&first, "alice").1, whoami_records(&second, "alice").1);

    // She disconnects (the console's request goes to one replica); every
    // next call, through either replica, asks her to connect again with a
    // new link and never acts as her with the token that replica held.
    let listed = ask(&d.bus, AccountsRequest::List { identity: "alice".into() }).await;
    let AccountsReply::Accounts { accounts } = &listed else { panic!("{listed:?}") };
    let gone =
        ask(&d.bus, AccountsRequest::Disconnect { identity: "alice".into(), server: accounts[0].server.clone() }).await;
    assert!(matches!(gone, AccountsReply::Disconnected { .. }), "{gone:?}");
    let mut calls = 0;
    loop {
        let refused = (whoami_records(&first, "alice").1 - before.0, whoami_records(&second, "alice").1 - before.1);
        if refused.0 > 0 && refused.1 > 0 {
            break;
        }
        assert!(calls < 60, "both replicas refused a call of alice's within 60 calls: {refused:?}");
        let answer = subject(&a).await;
        let refusal = answer.expect_err("disconnected: no call acts as alice");
        assert!(refusal.contains("/console/connect/"), "the bridge asks her to connect again: {refusal}");
        assert!(!refusal.contains("alice-upstream"), "{refusal}");
        calls += 1;
    }
    a.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_authorization_server_forgot_code_modes_client_a_link_that_never_came_back_makes_the_next_one_register_anew()
 {
    let keep = std::env::temp_dir().join(format!("cm-issuer-forgets-{}.json", uuid::Uuid::new_v4().simple()));
    let keep_arg = keep.to_str().unwrap().to_string();
    let Some((mut d, alice, bob, _carol)) = deploy("accounts-forgotten-client", &["--keep", &keep_arg]).await else {
        return;
    };
    // Alice connects: code-mode registers its client for the callback and
    // keeps it for the next flows.
    let a = client_of(&d, &alice).await;
    let refusal = subject(&a).await.expect_err("no account yet");
    let done = d.connect(&refusal, "alice", "alice-upstream", "alice-browser").await;
    assert!(matches!(&done, AccountsReply::Connected { .. }), "{done:?}");

    // The authorization server restarts without its registrations (its
    // signing key kept, so alice's tokens stay good).
    let issuer = d.up.issuer.url.clone();
    d.up.issuer.kill();
    let mut kept: Value = serde_json::from_str(&std::fs::read_to_string(&keep).unwrap()).unwrap();
    assert!(!kept["clients"].as_array().unwrap().is_empty(), "the issuer kept code-mode's client: {kept}");
    kept["clients"] = serde_json::json!([]);
    std::fs::write(&keep, kept.to_string()).unwrap();
    let port = reqwest::Url::parse(&issuer).unwrap().port().unwrap().to_string();
    d.up.issuer = crate::oauth::Issuer::spawn(
        "oidc_upstream_issuer.mjs",
        &[&d.up.url, "--ttl", "60", "--port", &port, "--keep", &keep_arg],
    )
    .expect("the issuer starts again");
    assert_eq!(d.up.issuer.url, issuer);

    // Bob's first link still names the forgotten client: the server stops
    // his browser on its own error page, never at the callback.
    let b = client_of(&d, &bob).await;
    let refusal = subject(&b).await.expect_err("bob has no account");
    let begun = ask(
        &d.bus,
        AccountsRequest::Begin {
            flow: flow_in(&refusal),
            viewer: "bob".into(),
            browser: "bob-browser".into(),
            redirect_uri: d.callback(),
        },
    )
    .await;
    let AccountsReply::Redirect { url } = begun else { panic!("bob's begin redirects: {begun:?}") };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let stopped = http.get(&url).send().await.unwrap();
    let status = stopped.status();
    let page = stopped.text().await.unwrap_or_default();
    assert!(!status.is_redirection(), "the server does not know the client: {status} {page}");

    // He calls again: that login never came back, so the new link
    // registers a new client, and he connects.
    let refusal = subject(&b).await.expect_err("still no account");
    let done = d.connect(&refusal, "bob", "bob-upstream", "bob-browser").await;
    assert!(matches!(&done, AccountsReply::Connected { subject, .. } if subject == "bob-upstream"), "{done:?}");
    assert_eq!(subject(&b).await.unwrap(), "bob-upstream");
    assert_eq!(subject(&a).await.unwrap(), "alice-upstream", "alice's account is untouched");
    for client in [a, b] {
        client.cancel().await.ok();
    }
    let _ = std::fs::remove_file(&keep);
}
