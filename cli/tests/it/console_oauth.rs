//! Signing in to the web console through the OAuth issuer, against a real
//! authorization server: npm `oidc-provider`
//! (`testing/peers/oidc_login_issuer.mjs`, its development login and
//! consent pages). A person signs in with Debian's chromium, driven by
//! selenium (`testing/console/oauth_sign_in.py`), the console and the
//! issuer on two sites (`localhost` and `127.0.0.1`), so the browser
//! enforces the cookies' SameSite attributes the sign-in is built around.
//! The attacks on the callback (a wrong state, a spent code) use a small
//! browser made of reqwest and a cookie jar, which follows the redirects and
//! submits the issuer's forms as a person would, and lets the test keep and
//! replay what an attacker would; the console's callback is a real
//! redirect from the issuer with a real code.

use std::sync::Mutex;

use crate::oauth::{Issuer, encode};
use crate::support;

/// oidc-provider with its own login and consent pages, for `base`'s
/// resource and console callback; `None` off CI when the peers are not
/// installed (under `CI=true` a missing one fails the test).
fn issuer(base: &str) -> Option<Issuer> {
    Issuer::spawn("oidc_login_issuer.mjs", &[&format!("{base}/mcp"), &format!("{base}/console/login/callback")])
}

/// `serve --http` with OAuth and `extra` options, and its base URL.
struct Served {
    base: String,
    _serve: tokio::process::Child,
}

/// The `serve --http` command listening on 127.0.0.1:`port`, reached by
/// people at `http://<host>:<port>` (its `--public-url` when `host` is
/// another name), with OAuth at `issuer` (the groups in the `groups`
/// claim) and `extra` options.
fn serve_command(port: u16, host: &str, issuer: &str, extra: &[&str]) -> tokio::process::Command {
    let base = format!("http://{host}:{port}");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve
        .args(["serve", "--warm", "0", "--http", &format!("127.0.0.1:{port}"), "--oauth-issuer", issuer])
        .args(["--oauth-resource", &format!("{base}/mcp"), "--oauth-scope", "mcp:run"])
        .args(["--oauth-groups-claim", "groups"])
        .args(extra);
    if host != "127.0.0.1" {
        serve.args(["--public-url", &base]);
    }
    serve.arg("--").arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    serve
}

/// `serve` with `extra` options and an issuer nobody answers at (for pages
/// that need none), on a free port (another one if that was taken first).
async fn serve_without_issuer(extra: &[&str]) -> Served {
    let (serve, printed, _log, port) =
        crate::http::spawn_http_on_free_port(|port| serve_command(port, "127.0.0.1", "http://127.0.0.1:9", extra))
            .await;
    let base = format!("http://127.0.0.1:{port}");
    assert_eq!(printed, format!("{base}/mcp"));
    Served { base, _serve: serve }
}

/// A cookie a browser keeps: where it goes, and its value.
#[derive(Clone, Debug)]
struct Cookie {
    authority: String,
    path: String,
    name: String,
    value: String,
}

/// What a browser needs of HTTP here: cookies kept per authority and path,
/// redirects followed one by one (so the test can stop before one).
struct Browser {
    http: reqwest::Client,
    jar: Mutex<Vec<Cookie>>,
}

/// An answer: status, `Set-Cookie` values, `Location`, body.
struct Page {
    status: u16,
    set_cookies: Vec<String>,
    location: Option<String>,
    body: String,
}

impl Page {
    /// The value cookie `name` is set to, if this answer sets it.
    fn sets(&self, name: &str) -> Option<String> {
        self.set_cookies.iter().find_map(|c| Some(c.strip_prefix(&format!("{name}="))?.split(';').next()?.to_string()))
    }
}

fn authority_and_path(url: &str) -> (String, String) {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    (authority.to_string(), if path.is_empty() { "/".into() } else { path.to_string() })
}

impl Browser {
    fn new() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Self { http, jar: Mutex::new(Vec::new()) }
    }

    fn cookies_for(&self, url: &str) -> String {
        let (authority, path) = authority_and_path(url);
        let jar = self.jar.lock().unwrap();
        jar.iter()
            .filter(|c| c.authority == authority && path.starts_with(&c.path))
            .map(|c| format!("{}={}", c.name, c.value))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&self, request: reqwest::RequestBuilder, url: &str) -> Page {
        let cookies = self.cookies_for(url);
        let request = if cookies.is_empty() { request } else { request.header("cookie", cookies) };
        let answer = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
        let status = answer.status().as_u16();
        let set_cookies: Vec<String> =
            answer.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect();
        let location = answer.headers().get("location").and_then(|v| v.to_str().ok()).map(|l| absolute(url, l));
        let body = answer.text().await.unwrap();
        let (authority, _) = authority_and_path(url);
        let mut jar = self.jar.lock().unwrap();
        for header in &set_cookies {
            let mut parts = header.split(';').map(str::trim);
            let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else { continue };
            let mut path = "/".to_string();
            let mut gone = value.is_empty();
            for attribute in parts {
                let lower = attribute.to_ascii_lowercase();
                if let Some(p) = attribute.strip_prefix("Path=").or_else(|| attribute.strip_prefix("path=")) {
                    path = p.to_string();
                }
                if lower == "max-age=0" || lower.contains("1970") {
                    gone = true;
                }
            }
            jar.retain(|c| !(c.authority == authority && c.name == name && c.path == path));
            if !gone {
                jar.push(Cookie { authority: authority.clone(), path, name: name.into(), value: value.into() });
            }
        }
        Page { status, set_cookies, location, body }
    }

    async fn get(&self, url: &str) -> Page {
        self.send(self.http.get(url), url).await
    }

    async fn post_form(&self, url: &str, form: &str) -> Page {
        let request =
            self.http.post(url).header("content-type", "application/x-www-form-urlencoded").body(form.to_string());
        self.send(request, url).await
    }

    /// Follow `page`'s redirects (as GETs) until an answer that is not a
    /// redirect, or until the next one would go to a URL starting with
    /// `stop_at`: the last page, and the URL not visited.
    async fn follow(&self, mut page: Page, stop_at: &str) -> (Page, Option<String>) {
        for _ in 0..20 {
            let Some(next) = page.location.clone().filter(|_| (300..400).contains(&page.status)) else {
                return (page, None);
            };
            if next.starts_with(stop_at) {
                return (page, Some(next));
            }
            page = self.get(&next).await;
        }
        panic!("more than 20 redirects");
    }
}

/// `location` made absolute against `url`.
fn absolute(url: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let scheme_end = url.find("://").unwrap() + 3;
    let origin_end = url[scheme_end..].find('/').map_or(url.len(), |i| scheme_end + i);
    format!("{}{location}", &url[..origin_end])
}

/// The `action` of the first form of an issuer's page, made absolute.
fn form_action(issuer: &str, page: &str) -> String {
    let at = page.find("<form").expect("a form on the issuer's page");
    let at = at + page[at..].find("action=\"").expect("a form action") + "action=\"".len();
    absolute(issuer, &page[at..at + page[at..].find('"').unwrap()])
}

fn query_value(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| Some(pair.strip_prefix(&format!("{name}="))?.to_string()))
}

/// A person named `login` clicks "Sign in with" on the console's login
/// page, signs in at the issuer and consents: the URL the issuer sends the
/// browser back to (not visited yet).
async fn sign_in_at_issuer(browser: &Browser, served: &Served, issuer: &Issuer, login: &str) -> String {
    sign_in_from(browser, served, issuer, login, "").await
}

/// [`sign_in_at_issuer`] from the login page at `/console/login{query}`
/// (`?next=...`: a connect link sent the browser there), whose offer to
/// sign in carries the same query.
async fn sign_in_from(browser: &Browser, served: &Served, issuer: &Issuer, login: &str, query: &str) -> String {
    let page = browser.get(&format!("{}/console/login{query}", served.base)).await;
    assert_eq!(page.status, 200);
    let offered = format!("href=\"/console/login/oauth{query}\">Sign in with {}</a>", issuer.url);
    assert!(page.body.contains(&offered), "{}", page.body);
    let started = browser.get(&format!("{}/console/login/oauth{query}", served.base)).await;
    assert_eq!(started.status, 303, "{}", started.body);
    let sealed = started.sets("codemode_console_oauth").expect("a sign-in cookie");
    let cookie = started.set_cookies.iter().find(|c| c.starts_with("codemode_console_oauth=")).unwrap();
    for flag in ["Path=/console/login", "HttpOnly", "SameSite=Lax", "Max-Age=600"] {
        assert!(cookie.contains(flag), "{flag} missing: {cookie}");
    }
    let to_issuer = started.location.clone().unwrap();
    assert!(to_issuer.starts_with(&format!("{}/auth?", issuer.url)), "{to_issuer}");
    for part in ["response_type=code", "code_challenge_method=S256", "scope=openid%20mcp%3Arun", "client_id=code-mode-"]
    {
        assert!(to_issuer.contains(part), "{part} missing: {to_issuer}");
    }
    let resource = format!("resource={}", encode(&format!("{}/mcp", served.base)));
    assert!(to_issuer.contains(&resource), "{to_issuer}");
    let verifier_hidden = !sealed.contains(&query_value(&to_issuer, "state").unwrap());
    assert!(verifier_hidden, "the sign-in cookie is sealed, not the state in clear");

    let callback = format!("{}/console/login/callback", served.base);
    let (login_page, _) = browser.follow(started, &callback).await;
    assert_eq!(login_page.status, 200, "the issuer's login page: {}", login_page.body);
    let form = format!("prompt=login&login={login}&password=anything");
    let submitted = browser.post_form(&form_action(&issuer.url, &login_page.body), &form).await;
    let (consent_page, _) = browser.follow(submitted, &callback).await;
    assert_eq!(consent_page.status, 200, "the issuer's consent page: {}", consent_page.body);
    let consented = browser.post_form(&form_action(&issuer.url, &consent_page.body), "prompt=consent").await;
    let (_, back) = browser.follow(consented, &callback).await;
    let back = back.expect("the issuer sends the browser back to the console");
    assert!(query_value(&back, "code").is_some(), "{back}");
    back
}

/// Whether an answer starts a console session (sets the session cookie to
/// a value).
fn starts_a_session(page: &Page) -> bool {
    page.sets("codemode_console").is_some_and(|v| !v.is_empty())
}

/// A port, an issuer for it and the server with the console's client,
/// which people reach at `http://<host>:<port>`; the client secret file is
/// removed at the end of the test by the caller. The issuer must know the
/// server's port before it starts, so a port another process took before
/// the server bound it means another port and issuer.
async fn served_with_sign_in(public: bool, host: &str) -> Option<(Issuer, Served, std::path::PathBuf)> {
    let secret = support::log_path("console-client-secret");
    std::fs::write(&secret, "console-secret\n").unwrap();
    let file = secret.to_str().unwrap().to_string();
    let extra: Vec<&str> = if public {
        vec!["--console-client-id", "code-mode-console-public"]
    } else {
        vec!["--console-client-id", "code-mode-console", "--console-client-secret-file", &file]
    };
    for _ in 0..5 {
        let port = code_mode_core::testing::free_port();
        let base = format!("http://{host}:{port}");
        let issuer = issuer(&base)?;
        let (mut serve, printed, log) =
            crate::http::try_spawn_http(&mut serve_command(port, host, &issuer.url, &extra)).await;
        match printed {
            Ok(printed) => {
                assert_eq!(printed, format!("http://127.0.0.1:{port}/mcp"));
                return Some((issuer, Served { base, _serve: serve }, secret));
            }
            Err(_) if log.lock().unwrap().iter().any(|l| l.contains("Address already in use")) => {
                eprintln!("port {port} was taken before serve bound it: another port and issuer");
                let _ = serve.wait().await;
            }
            Err(e) => panic!("serve prints its URL within 60 s: {e}"),
        }
    }
    panic!("five free ports were each taken before serve bound them")
}

#[tokio::test]
async fn in_chromium_a_person_signs_in_through_an_issuer_on_another_site_and_lands_on_the_console_as_herself_with_her_groups()
 {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = crate::console_browser::browser_available() else { return };
    // The console at localhost, the issuer at 127.0.0.1: two sites to the
    // browser (the test checks it below), as a console and its company's
    // issuer would be.
    let Some((issuer, served, secret)) = served_with_sign_in(false, "localhost").await else { return };
    assert!(issuer.url.starts_with("http://127.0.0.1:") && served.base.starts_with("http://localhost:"));
    let script = code_mode_core::testing::peers::workspace_root().join("testing/console/oauth_sign_in.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["--console", &served.base, "--issuer", &issuer.url, "--login", "alice"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("the browser script runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser script failed: {stderr}");
    let seen: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("JSON from the script ({e}): {stderr}"));
    eprintln!("the browser saw: {seen:#}");
    assert_eq!(seen["offered"], format!("Sign in with {}", issuer.url), "{seen}");
    assert_eq!(seen["at_issuer"].as_str().map(|u| u.starts_with(&issuer.url)), Some(true), "{seen}");
    // Back from the issuer's site, the sign-in cookie (SameSite=Lax) came
    // with the callback and the board opened with the session cookie
    // (SameSite=Strict), which the console's own page sent the browser on
    // with: she is herself there, with her groups.
    assert_eq!(seen["landed"], format!("{}/console", served.base), "{seen}");
    assert_eq!(seen["who"], "alice", "{seen}");
    assert_eq!(seen["operations_link"], true, "her groups came with the token: {seen}");
    assert_eq!(seen["operations_title"].as_str().map(|t| t.contains("Operations")), Some(true), "{seen}");
    // What the browser keeps: the session cookie alone, HttpOnly and
    // Strict; the sign-in cookie is gone.
    let cookies = seen["cookies"].as_array().expect("the cookies");
    let names: Vec<&str> = cookies.iter().filter_map(|c| c["name"].as_str()).collect();
    assert!(!names.contains(&"codemode_console_oauth"), "the sign-in cookie is removed: {cookies:?}");
    let session = cookies.iter().find(|c| c["name"] == "codemode_console").expect("the session cookie");
    assert_eq!(
        (&session["sameSite"], &session["httpOnly"], &session["path"]),
        (&"Strict".into(), &true.into(), &"/console".into())
    );
    // The browser takes the two names for two sites: the same navigation
    // to the board goes to the login page when the issuer's page starts it
    // (no Strict cookie), and to the board when the console's page does.
    assert_eq!(seen["from_the_issuer"], format!("{}/console/login", served.base), "{seen}");
    assert_eq!(seen["from_the_console"], format!("{}/console", served.base), "{seen}");
    assert_eq!(seen["who_then"], "alice", "{seen}");
    let _ = std::fs::remove_file(secret);
}

#[tokio::test]
async fn a_callback_with_a_wrong_state_is_refused_sets_no_session_and_leaves_the_code_unspent() {
    if !support::sandbox_available() {
        return;
    }
    let Some((issuer, served, secret)) = served_with_sign_in(false, "127.0.0.1").await else { return };
    let browser = Browser::new();
    let back = sign_in_at_issuer(&browser, &served, &issuer, "mallory").await;
    let state = query_value(&back, "state").unwrap();
    let kept_cookie = browser.cookies_for(&back);
    let forged = back.replace(&format!("state={state}"), "state=AAAA%3Cb%3Ewrong%3C%2Fb%3E");
    let refused = browser.get(&forged).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(!starts_a_session(&refused), "{:?}", refused.set_cookies);
    assert!(refused.body.contains("does not belong to the sign-in this browser started"), "{}", refused.body);
    assert!(!refused.body.contains("<b>wrong"), "nothing of the request reaches the page unescaped");

    // Without the sign-in cookie the real state is refused too.
    let stranger = Browser::new();
    let no_cookie = stranger.get(&back).await;
    assert_eq!(no_cookie.status, 400, "{}", no_cookie.body);
    assert!(!starts_a_session(&no_cookie));

    // The refused answers spent nothing: the code and the right state,
    // with the sign-in cookie the browser held, still sign her in.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plain = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let right = plain.get(&back).header("cookie", &kept_cookie).send().await.unwrap();
    assert_eq!(right.status(), 200);
    let body = right.text().await.unwrap();
    assert!(body.contains("Signed in as <strong>mallory</strong>"), "{body}");
    let _ = std::fs::remove_file(secret);
}

#[tokio::test]
async fn a_sign_in_begun_from_a_connect_link_goes_back_to_that_link_and_a_next_elsewhere_is_ignored() {
    if !support::sandbox_available() {
        return;
    }
    let Some((issuer, served, secret)) = served_with_sign_in(false, "127.0.0.1").await else { return };
    for (query, to) in [
        ("?next=%2Fconsole%2Fconnect%2Ff-1", "/console/connect/f-1"),
        ("?next=https%3A%2F%2Fevil.example%2F", "/console"),
    ] {
        let browser = Browser::new();
        // The login page offers no way to elsewhere: its sign-in link
        // carries the query only when it is a connect link.
        let page = browser.get(&format!("{}/console/login{query}", served.base)).await;
        if to == "/console" {
            assert!(!page.body.contains("evil.example"), "{}", page.body);
            let started = browser.get(&format!("{}/console/login/oauth{query}", served.base)).await;
            assert_eq!(started.sets("codemode_console_next").as_deref(), Some(""), "no way back kept");
            continue;
        }
        let back = sign_in_from(&browser, &served, &issuer, "carol", query).await;
        let done = browser.get(&back).await;
        assert_eq!(done.status, 200, "{}", done.body);
        assert!(starts_a_session(&done));
        let refresh = format!("<meta http-equiv=\"refresh\" content=\"0; url={to}\">");
        assert!(done.body.contains(&refresh), "the page goes on to {to}: {}", done.body);
        assert_eq!(done.sets("codemode_console_next").as_deref(), Some(""), "the way back is spent");
    }
    let _ = std::fs::remove_file(secret);
}

#[tokio::test]
async fn a_callback_whose_code_was_already_used_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    // The public client: PKCE alone.
    let Some((issuer, served, secret)) = served_with_sign_in(true, "127.0.0.1").await else { return };
    let browser = Browser::new();
    let back = sign_in_at_issuer(&browser, &served, &issuer, "bob").await;
    // What an attacker would replay: the callback URL and the sign-in
    // cookie as they were before the callback.
    let kept_cookie = browser.cookies_for(&back);
    assert!(kept_cookie.contains("codemode_console_oauth="), "{kept_cookie}");
    let first = browser.get(&back).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(starts_a_session(&first));

    let _ = rustls::crypto::ring::default_provider().install_default();
    let replay = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let again = replay.get(&back).header("cookie", &kept_cookie).send().await.unwrap();
    assert_eq!(again.status(), 400);
    let sets: Vec<String> =
        again.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect();
    assert!(
        !sets.iter().any(|c| c.starts_with("codemode_console=") && !c.starts_with("codemode_console=;")),
        "{sets:?}"
    );
    let body = again.text().await.unwrap();
    assert!(body.contains("<code>invalid_grant</code>") && body.contains("A code serves once"), "{body}");
    let _ = std::fs::remove_file(secret);
}

#[tokio::test]
async fn an_error_from_the_issuer_is_shown_escaped_and_starts_no_session() {
    if !support::sandbox_available() {
        return;
    }
    // No issuer answers here: an error callback needs none.
    let served = serve_without_issuer(&["--console-client-id", "code-mode-console"]).await;
    let url = format!(
        "{}/console/login/callback?error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        served.base
    );
    let answer = Browser::new().get(&url).await;
    assert_eq!(answer.status, 400);
    assert!(!starts_a_session(&answer));
    assert!(answer.body.contains("<code>access_denied</code>"), "{}", answer.body);
    assert!(answer.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !answer.body.contains("<script"));
}

#[tokio::test]
async fn the_login_page_without_a_console_client_id_offers_only_the_token_form() {
    if !support::sandbox_available() {
        return;
    }
    let served = serve_without_issuer(&[]).await;
    let browser = Browser::new();
    let page = browser.get(&format!("{}/console/login", served.base)).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("name=\"token\""), "{}", page.body);
    assert!(!page.body.contains("Sign in with") && !page.body.contains("/console/login/oauth"), "{}", page.body);
    assert_eq!(browser.get(&format!("{}/console/login/oauth", served.base)).await.status, 404);
    assert_eq!(browser.get(&format!("{}/console/login/callback?code=x&state=y", served.base)).await.status, 404);
}

#[tokio::test]
async fn a_client_secret_file_that_cannot_be_read_stops_startup_naming_the_file() {
    let missing = support::log_path("console-secret-missing");
    let output = tokio::process::Command::new(support::code_mode())
        .args(["serve", "--http", "127.0.0.1:0", "--oauth-issuer", "http://127.0.0.1:9"])
        .args(["--oauth-resource", "http://127.0.0.1:1/mcp", "--console-client-id", "code-mode-console"])
        .arg("--console-client-secret-file")
        .arg(&missing)
        .arg("--")
        .arg(support::test_server())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("console client secret file") && stderr.contains(&*missing.to_string_lossy()), "{stderr}");
}
