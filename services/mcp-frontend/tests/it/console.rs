//! The web console over real HTTP: an HTTP frontend with a token file on
//! an in-process bus, whose fake bridge answers the console's requests
//! (`codemode.v1.approvals`) with values meant to break the page, and
//! keeps every request it was sent. Checks the login and its cookie, the
//! redirect to it, CSRF and Origin, the headers, the escaping, the
//! operators' view, what the frontend asks the bridges for each viewer
//! (which calls wait for whom is the real bridge's to decide: its
//! `board` tests and `team::*` in the cli's tests) and a revoked token.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_mcp_frontend::auth::AuthOptions;
use code_mode_mcp_frontend::auth::static_tokens::new_token;
use code_mode_mcp_frontend::http::{HttpOptions, McpHttpServer};
use code_mode_mcp_frontend::{FrontendConfig, FrontendFactory};
use code_mode_proto::{
    AccountsRequest, Catalog, CatalogRequest, ConsoleReply, ConsoleRequest, Decision, ErrorKind, Viewer, WaitingCall,
    WireError, queue_groups, subjects,
};
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use tokio_util::sync::CancellationToken;

/// What would run as script or leave an attribute, were it not escaped.
pub(crate) const HOSTILE: &str = "\"><img src=x onerror=alert(1)><script>alert(2)</script>";

fn catalog() -> Catalog {
    Catalog {
        version: 1,
        tools: Vec::new(),
        max_calls: 50,
        call_timeout_ms: 30_000,
        approval_timeout_ms: 0,
        ask_timeout_ms: 0,
        fingerprint: String::new(),
        unchanged: false,
        withheld: Vec::new(),
        stateless_idle_ms: 3_600_000,
        unavailable: Vec::new(),
        features: None,
        listed: String::new(),
        // A runner has named its packages (the standard library only).
        packages: Some(Vec::new()),
    }
}

fn waiting(id: &str) -> WaitingCall {
    WaitingCall {
        id: id.into(),
        session: "s-1".into(),
        identity: Some("carol".into()),
        cell_id: "c-1".into(),
        server: HOSTILE.into(),
        tool: format!("delete{HOSTILE}"),
        arguments: HOSTILE.into(),
        args: Some(serde_json::json!({"path": HOSTILE})),
        rule: "/tools/delete".into(),
        reason: Some(HOSTILE.into()),
        approvers: vec!["alice".into(), "group:security".into()],
        asked_ms: 1,
        timeout_ms: 60_000,
        question_sha256: "ab".repeat(32),
        code: Some(format!("files = await list_files()\nawait delete(path='{HOSTILE}')")),
        still_waited: Some(true),
    }
}

/// The fake bridge's console: `alice` may decide `q-1`; any other
/// decision is refused with a hostile message.
async fn console_bridge(request: ConsoleRequest) -> Result<ConsoleReply, WireError> {
    match request {
        ConsoleRequest::Board { viewer } => Ok(ConsoleReply::Board {
            waiting: if viewer.name == "alice" { vec![waiting("q-1")] } else { Vec::new() },
            others: 2,
            recent: Vec::new(),
        }),
        ConsoleRequest::Decide { viewer, id, approve, note } if viewer.name == "alice" && id == "q-1" => {
            Ok(ConsoleReply::Decided(Decision {
                id,
                server: "files".into(),
                tool: "delete".into(),
                identity: Some("carol".into()),
                outcome: if approve { "approved" } else { "declined" }.into(),
                by: Some(viewer.name),
                note,
                at_ms: 2,
                question_sha256: "ab".repeat(32),
                approvers: vec!["alice".into()],
            }))
        }
        ConsoleRequest::Decide { .. } => {
            Err(WireError { kind: ErrorKind::BadRequest, message: format!("not yours to decide {HOSTILE}") })
        }
        ConsoleRequest::Audit { lines } => Ok(ConsoleReply::Audit {
            records: vec![format!("{{\"n\":{lines},\"tool\":\"{}\"}}", HOSTILE.replace('"', "'"))],
            chain: "verified (1 records)".into(),
        }),
        ConsoleRequest::Runners => Ok(ConsoleReply::Runners {
            runners: vec![code_mode_proto::RunnerStatus {
                id: format!("runner{HOSTILE}"),
                capacity: 4,
                free: 3,
                warm: 1,
                at_ms: 1,
                // A runner has named its packages (the standard library only).
                packages: Some(Vec::new()),
            }],
        }),
        ConsoleRequest::Sessions { ids } => Ok(ConsoleReply::Sessions { tainted: ids }),
        ConsoleRequest::Reloads => Ok(ConsoleReply::Reloads {
            reloads: vec![code_mode_proto::ReloadStatus {
                bridge: "host-a:41".into(),
                at_ms: 1,
                result: "invalid".into(),
                source: "/etc/code-mode/servers.json".into(),
                error: Some(format!("servers.json: server \"files\": key \"policy\": {HOSTILE}")),
            }],
        }),
    }
}

/// A running HTTP frontend with a token file naming alice (an operator)
/// and bob.
pub(crate) struct Served {
    pub base: String,
    pub alice: String,
    pub bob: String,
    tokens: PathBuf,
    cancel: CancellationToken,
    pub http: reqwest::Client,
    /// Every request the fake bridge was sent, in order.
    asked: Arc<Mutex<Vec<ConsoleRequest>>>,
    /// Every request the fake bridge's accounts subject was sent, in order.
    pub accounts: Arc<Mutex<Vec<AccountsRequest>>>,
}

impl Served {
    /// The requests the bridge was sent so far, forgotten once read.
    fn asked(&self) -> Vec<ConsoleRequest> {
        std::mem::take(&mut *self.asked.lock().unwrap())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.cancel.cancel();
        let _ = std::fs::remove_file(&self.tokens);
    }
}

pub(crate) async fn serve(bridge_answers_the_console: bool, authenticate: bool) -> Served {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cancel = CancellationToken::new();
    let bus = Bus::in_process();
    bus.serve(subjects::CATALOG_GET, queue_groups::BRIDGE, cancel.clone(), |_: CatalogRequest| async { Ok(catalog()) })
        .await
        .unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    if bridge_answers_the_console {
        let kept = asked.clone();
        let bridge = move |request: ConsoleRequest| {
            kept.lock().unwrap().push(request.clone());
            console_bridge(request)
        };
        bus.serve(subjects::APPROVALS, queue_groups::BRIDGE, cancel.clone(), bridge).await.unwrap();
    }
    let accounts = Arc::new(Mutex::new(Vec::new()));
    if bridge_answers_the_console {
        let kept = accounts.clone();
        let bridge = move |request: AccountsRequest| {
            let earlier = kept.lock().unwrap().clone();
            kept.lock().unwrap().push(request.clone());
            crate::accounts::bridge(request, earlier)
        };
        bus.serve(subjects::ACCOUNTS, queue_groups::BRIDGE, cancel.clone(), bridge).await.unwrap();
    }
    let (alice, alice_line) = new_token("alice").unwrap();
    let (bob, bob_line) = new_token("bob").unwrap();
    let tokens = std::env::temp_dir().join(format!("console-tokens-{}", uuid::Uuid::new_v4()));
    std::fs::write(&tokens, format!("{alice_line} groups=operators,security\n{bob_line}\n")).unwrap();
    let factory = FrontendFactory::connect(bus, FrontendConfig::default()).await.unwrap();
    let options = HttpOptions {
        addr: "127.0.0.1:0".into(),
        allowed_hosts: Vec::new(),
        auth: AuthOptions { tokens_file: authenticate.then(|| tokens.clone()), ..Default::default() },
        max_body: None,
        tls: None,
        console: Default::default(),
    };
    let server = McpHttpServer::start(factory, &options, cancel.clone()).await.unwrap();
    let base = format!("http://{}", server.local_addr());
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    Served { base, alice, bob, tokens, cancel, http, asked, accounts }
}

/// The value of cookie `name` a response sets, and the whole header.
pub(crate) fn set_cookie(headers: &HeaderMap, name: &str) -> Option<(String, String)> {
    headers.get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|header| {
        let value = header.strip_prefix(&format!("{name}="))?.split(';').next()?.to_string();
        Some((value, header.to_string()))
    })
}

/// The `csrf` field's value in a page.
pub(crate) fn csrf_in(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_string()
}

pub(crate) fn assert_console_headers(headers: &HeaderMap) {
    let csp = headers.get("content-security-policy").expect("a CSP").to_str().unwrap();
    assert_eq!(
        csp,
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
         base-uri 'none'"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "same-origin");
    assert_eq!(headers["cache-control"], "no-store");
}

impl Served {
    pub(crate) async fn get(&self, path: &str, cookie: Option<&str>) -> reqwest::Response {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send().await.unwrap()
    }

    pub(crate) async fn post(
        &self,
        path: &str,
        cookie: Option<&str>,
        origin: Option<&str>,
        body: &str,
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_string());
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send().await.unwrap()
    }

    /// Log in with `token` through the form: the session cookie's header.
    pub(crate) async fn log_in(&self, token: &str) -> reqwest::Response {
        let form = self.get("/console/login", None).await;
        assert_eq!(form.status(), 200);
        let (login, _) = set_cookie(form.headers(), "codemode_console_login").expect("a login cookie");
        let csrf = csrf_in(&form.text().await.unwrap());
        let cookie = format!("codemode_console_login={login}");
        self.post("/console/login", Some(&cookie), None, &format!("csrf={csrf}&token={token}")).await
    }
}

#[tokio::test]
async fn the_console_without_a_cookie_sends_the_browser_to_the_login_page() {
    let served = serve(true, true).await;
    for path in ["/console", "/console/approvals/q-1", "/console/operations"] {
        let answer = served.get(path, None).await;
        assert_eq!(answer.status(), 303, "{path}");
        assert_eq!(answer.headers()[LOCATION], "/console/login");
        assert_console_headers(answer.headers());
    }
    let answer = served.get("/console", Some("codemode_console=cm_made_up")).await;
    assert_eq!(answer.status(), 303, "a token that does not pass");
    let (cleared, _) = set_cookie(answer.headers(), "codemode_console").expect("the cookie is removed");
    assert!(cleared.is_empty());
}

#[tokio::test]
async fn logging_in_sets_an_http_only_strict_cookie_holding_the_token_and_the_board_shows_everything_escaped() {
    let served = serve(true, true).await;
    let answer = served.log_in(&served.alice).await;
    assert_eq!(answer.status(), 303);
    assert_eq!(answer.headers()[LOCATION], "/console");
    let (token, header) = set_cookie(answer.headers(), "codemode_console").expect("the session cookie");
    assert_eq!(token, served.alice);
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(header.contains(flag), "{flag} missing from {header}");
    }
    assert!(!header.contains("Secure"), "plain HTTP: no Secure flag");

    let board = served.get("/console", Some(&format!("codemode_console={token}"))).await;
    assert_eq!(board.status(), 200);
    assert_console_headers(board.headers());
    let page = board.text().await.unwrap();
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"5\">"));
    assert!(!page.contains("<script") && !page.contains("<img"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(2)&lt;/script&gt;"));
    assert!(page.contains("Approve") && page.contains("Decline") && page.contains("2 questions wait for other"));
    assert!(page.contains("carol") && page.contains("/tools/delete") && page.contains("Operations"));
    // The code that made the call, beside its arguments, as text.
    assert!(page.contains("Code of the cell") && page.contains("files = await list_files()"), "{page}");

    let css = served.get("/console/style.css", None).await;
    assert_eq!(css.status(), 200);
    assert!(css.headers()["content-type"].to_str().unwrap().starts_with("text/css"));
    assert_console_headers(css.headers());
}

#[tokio::test]
async fn a_login_with_a_token_that_is_not_valid_sets_no_session_cookie() {
    let served = serve(true, true).await;
    let answer = served.log_in("cm_guess").await;
    assert_eq!(answer.status(), 401);
    assert!(set_cookie(answer.headers(), "codemode_console").is_none());
    assert!(answer.text().await.unwrap().contains("That token is not valid here."));
    let without_form = served.post("/console/login", None, None, &format!("token={}", served.alice)).await;
    assert_eq!(without_form.status(), 403, "a login without its form's csrf");
}

#[tokio::test]
async fn posts_without_the_csrf_value_with_a_wrong_one_or_from_another_origin_get_403() {
    let served = serve(true, true).await;
    let cookie = format!("codemode_console={}", served.alice);
    let page = served.get("/console", Some(&cookie)).await.text().await.unwrap();
    let csrf = csrf_in(&page);
    let decide = "/console/approvals/q-1";
    for (body, origin) in [
        ("decision=approve&note=ok".to_string(), None),
        (format!("decision=approve&csrf={}", "0".repeat(64)), None),
        (format!("decision=approve&csrf={}", &csrf[..63]), None),
        (format!("decision=approve&csrf={csrf}"), Some("https://evil.example")),
    ] {
        let answer = served.post(decide, Some(&cookie), origin, &body).await;
        assert_eq!(answer.status(), 403, "{body} from {origin:?}");
        assert_console_headers(answer.headers());
    }
    let no_cookie = served.post(decide, None, None, &format!("decision=approve&csrf={csrf}")).await;
    assert_eq!(no_cookie.status(), 403);
    let logout = served.post("/console/logout", Some(&cookie), None, "").await;
    assert_eq!(logout.status(), 403, "logging out is a form too");

    let own = served.base.clone();
    let decided =
        served.post(decide, Some(&cookie), Some(&own), &format!("decision=approve&note=fine+by+me&csrf={csrf}")).await;
    assert_eq!(decided.status(), 200);
    let page = decided.text().await.unwrap();
    assert!(page.contains("approved") && page.contains("fine by me"), "{page}");

    let refused =
        served.post("/console/approvals/q-2", Some(&cookie), None, &format!("decision=decline&csrf={csrf}")).await;
    assert_eq!(refused.status(), 409);
    let page = refused.text().await.unwrap();
    assert!(page.contains("not yours to decide") && !page.contains("<script"), "{page}");

    let out = served.post("/console/logout", Some(&cookie), None, &format!("csrf={csrf}")).await;
    assert_eq!(out.status(), 303);
    assert!(set_cookie(out.headers(), "codemode_console").unwrap().0.is_empty());
}

#[tokio::test]
async fn only_operators_see_the_operations_view_with_the_audit_tail_and_the_bridges_are_asked_for_each_viewer_as_their_token_names_them()
 {
    let served = serve(true, true).await;
    let bob = format!("codemode_console={}", served.bob);
    let alice = format!("codemode_console={}", served.alice);
    let bob_viewer = Viewer { name: "bob".into(), groups: Vec::new() };
    let alice_viewer = Viewer { name: "alice".into(), groups: vec!["operators".into(), "security".into()] };
    // The board and a question's page ask the bridges for the calls
    // waiting for this viewer, named with the groups of their token line,
    // and show what comes back.
    let board = served.get("/console", Some(&bob)).await.text().await.unwrap();
    assert!(board.contains("Nothing waits for you.") && !board.contains("Operations"), "{board}");
    let question = served.get("/console/approvals/q-1", Some(&bob)).await.text().await.unwrap();
    assert!(question.contains("not waiting for you"), "{question}");
    let for_bob = ConsoleRequest::Board { viewer: bob_viewer.clone() };
    assert_eq!(served.asked(), [for_bob.clone(), for_bob], "what bob's pages asked the bridges");
    let board = served.get("/console", Some(&alice)).await.text().await.unwrap();
    assert!(board.contains("/console/approvals/q-1") && board.contains("Operations"), "{board}");
    assert_eq!(served.asked(), [ConsoleRequest::Board { viewer: alice_viewer.clone() }]);
    // A decision goes to the bridges under the viewer's name and groups
    // (the bridge decides whether they may take it).
    let bobs_csrf = csrf_in(&served.get("/console", Some(&bob)).await.text().await.unwrap());
    let body = format!("decision=approve&note=mine+now&csrf={bobs_csrf}");
    let decided = served.post("/console/approvals/q-1", Some(&bob), None, &body).await;
    assert_eq!(decided.status(), 409, "the fake bridge lets only alice decide");
    let asked = served.asked();
    let decision =
        ConsoleRequest::Decide { viewer: bob_viewer, id: "q-1".into(), approve: true, note: "mine now".into() };
    assert_eq!(asked.last(), Some(&decision), "{asked:?}");

    // Bob is no operator: the frontend refuses him the operations view
    // without asking the bridges for the audit tail or the runners.
    assert_eq!(served.get("/console/operations", Some(&bob)).await.status(), 403);
    assert_eq!(served.asked(), [], "nothing of the operations view was asked for bob");
    let operations = served.get("/console/operations", Some(&alice)).await;
    assert_eq!(operations.status(), 200);
    let page = operations.text().await.unwrap();
    assert!(page.contains("verified (1 records)") && page.contains("&quot;n&quot;:20"), "{page}");
    // The runner's slots and its hostile id, escaped; no script anywhere.
    assert!(page.contains("<td>3</td><td>4</td><td>1</td>") && page.contains("runner&quot;&gt;&lt;img"), "{page}");
    assert!(!page.contains("<script"), "{page}");
    // A reload that did not apply, first and escaped.
    let reload = page.find("did not apply (invalid)").expect("the failed reload is shown");
    assert!(reload < page.find("Live sessions").unwrap(), "the failed reload comes first");
    assert!(page.contains("key &quot;policy&quot;: &quot;&gt;&lt;img src=x"), "{page}");
    let asked = served.asked();
    assert!(
        asked.contains(&ConsoleRequest::Audit { lines: 20 })
            && asked.contains(&ConsoleRequest::Runners)
            && asked.contains(&ConsoleRequest::Reloads),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_request_for_another_host_is_refused_and_an_unknown_page_is_not_found() {
    let served = serve(true, true).await;
    let answer = served.http.get(format!("{}/console/login", served.base)).header("host", "evil.example").send().await;
    let answer = answer.unwrap();
    assert_eq!(answer.status(), 403);
    assert_console_headers(answer.headers());
    let missing = served.get("/console/nothing-here", None).await;
    assert_eq!(missing.status(), 404);
    assert_console_headers(missing.headers());
}

#[tokio::test]
async fn without_a_bridge_answering_the_board_says_so() {
    let served = serve(false, true).await;
    let answer = served.get("/console", Some(&format!("codemode_console={}", served.alice))).await;
    assert_eq!(answer.status(), 503);
    assert!(answer.text().await.unwrap().contains("No bridge answers"));
}

#[tokio::test]
async fn without_authentication_there_is_no_console() {
    let served = serve(true, false).await;
    assert_eq!(served.get("/console/login", None).await.status(), 404);
}

#[tokio::test]
async fn a_token_removed_from_the_file_logs_its_viewer_out_on_the_next_page() {
    let served = serve(true, true).await;
    let cookie = format!("codemode_console={}", served.bob);
    assert_eq!(served.get("/console", Some(&cookie)).await.status(), 200);
    let (_, alice_line) = new_token("alice").unwrap();
    std::fs::write(&served.tokens, format!("{alice_line}\n")).unwrap();
    let hup = std::process::Command::new("kill").args(["-HUP", &std::process::id().to_string()]).status().unwrap();
    assert!(hup.success());
    for _ in 0..50 {
        let answer = served.get("/console", Some(&cookie)).await;
        if answer.status() == 303 {
            assert_eq!(answer.headers()[LOCATION], "/console/login");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("bob's cookie still passes after his token was removed");
}

#[tokio::test]
async fn without_a_bridge_answering_the_accounts_page_says_the_accounts_live_in_the_bridges() {
    let served = serve(false, true).await;
    let answer = served.get("/console/accounts", Some(&format!("codemode_console={}", served.alice))).await;
    assert_eq!(answer.status(), 503);
    let page = answer.text().await.unwrap();
    assert!(page.contains("No bridge answers: the accounts live in the bridges"), "{page}");
    assert!(page.contains("Your connected accounts"), "the page keeps its title: {page}");
}
