//! Each member of a team acts upstream as themselves (issue 41), in a real
//! browser: oidc-provider (`testing/peers/oidc_upstream_issuer.mjs --pages`,
//! its own login and consent pages: the name typed is the account's `sub`)
//! is the authorization server of the test server over streamable HTTP
//! (`--oauth-issuer`: its `whoami` answers the token's claims); `serve
//! --http` has two token identities, alice and bob, and that server as
//! `notes` with `"auth": {"type": "oauth", "per": "identity"}`.
//!
//! For each of alice and bob, with `mcp.Client` at its defaults (the
//! stateless 2026-07-28 protocol: the question comes in an input-required
//! result) and with `ClientSession` (2025-11-25: `elicitation/create` during
//! the call), a cell calls `whoami`: the client is asked by a URL-mode
//! elicitation to open the console's connect link; chromium (selenium,
//! `testing/peers/connect_browser.py`) opens it, logs in to the console
//! with the identity's token, is sent on to the provider, signs in there
//! as that person's upstream account (ada for alice, bert for bob),
//! consents and lands on the console's callback page; the cell prints ada's
//! subject for alice and bert's for bob, and a direct call after it too,
//! asking nothing more. Between runs the account is disconnected in the
//! console, so each client is asked afresh. A client without URL
//! elicitation gets a `ToolError` with the link, and the retry after
//! connecting acts as the person (bob, opening alice's link, is refused
//! on the console's page); over NATS, a link asked on one frontend
//! replica is completed on the other.

use serde_json::{Value, json};

use crate::auth::{TokenFile, token_new};
use crate::console_browser::browser_available;
use crate::support::{self, SplitHttp};
use crate::upstream::Upstream;

/// The test server as `notes`, each identity with its own account there.
fn config(url: &str) -> String {
    json!({"mcpServers": {"notes": {"url": url, "auth": {"type": "oauth", "per": "identity"}}}}).to_string()
}

/// The deployment's own login at the server (`code-mode login`, with
/// `env` set, as `deploy-account` on the provider's pages in chromium):
/// the bridge lists the server's tools with it; no call of a member goes
/// out with it.
async fn deployment_login(up: &Upstream, python: &str, env: &[(&str, &str)], extra: &[&str]) {
    use tokio::io::AsyncBufReadExt as _;
    let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/oauth_browser_login.py");
    let mut args = vec!["login", "--url", up.url.as_str(), "--no-browser", "--timeout", "90"];
    args.extend_from_slice(extra);
    let mut login = up
        .command(&args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("code-mode login starts");
    let mut lines = tokio::io::BufReader::new(login.stderr.take().unwrap()).lines();
    let mut said = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("http://") {
            let out = tokio::process::Command::new(python)
                .arg(&script)
                .args(["--url", &line, "--name", "deploy-account"])
                .kill_on_drop(true)
                .output()
                .await
                .expect("the browser script runs");
            assert!(
                out.status.success(),
                "the deployment's login in the browser: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    assert!(login.wait().await.unwrap().success(), "the deployment's login succeeds: {said}");
}

/// The console's accounts page as `token` sees it, and its CSRF value.
fn accounts_page(authority: &str, token: &str) -> (String, String) {
    let cookie = format!("codemode_console={token}");
    let (status, _, page) = support::raw_http(authority, "GET", "/console/accounts", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200, "{page}");
    let at = page.find("name=\"csrf\" value=\"").map(|i| i + "name=\"csrf\" value=\"".len());
    let csrf = at.map(|at| page[at..].split('"').next().unwrap_or_default().to_string()).unwrap_or_default();
    (page, csrf)
}

/// The running stack: the upstream (issuer with pages, test server),
/// `serve --http` with alice's and bob's tokens, the Python that drives
/// the browser and the browser step's script.
struct Stack {
    up: Upstream,
    alice: crate::auth::Client,
    bob: crate::auth::Client,
    _tokens: TokenFile,
    _serve: tokio::process::Child,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    config_file: std::path::PathBuf,
    url: String,
    base: String,
    authority: String,
    python: String,
    script: std::path::PathBuf,
    /// Where `serve` answers `/metrics`.
    metrics: String,
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config_file);
    }
}

impl Stack {
    /// `None` where the test may skip (it fails under `CI=true`).
    async fn start() -> Option<Self> {
        if !support::sandbox_available() {
            return None;
        }
        let python = browser_available()?.to_str().unwrap().to_string();
        let up = Upstream::start_with(300, &["--pages"], &[])?;
        deployment_login(&up, &python, &[], &[]).await;
        let (alice, bob) = (token_new("alice"), token_new("bob"));
        let tokens = TokenFile::of(&[&alice, &bob]);
        let config_file = support::log_path("accounts-config").with_extension("json");
        std::fs::write(&config_file, config(&up.url)).unwrap();
        let metrics = format!("127.0.0.1:{}", crate::upstream::free_port());
        let mut serve = up.command(&["serve", "--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()]);
        serve.args(["--config", config_file.to_str().unwrap(), "--expose-tools", "--approval-timeout", "300"]);
        // Debug logging: the most a log ever says, checked for tokens below.
        serve.args(["--metrics-addr", &metrics]).env("RUST_LOG", "debug");
        serve.stdin(std::process::Stdio::null());
        let (child, url, log) = crate::http::spawn_http(&mut serve).await;
        let base = url.trim_end_matches("/mcp").to_string();
        let authority = base.trim_start_matches("http://").to_string();
        let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/connect_browser.py");
        Some(Self {
            up,
            alice,
            bob,
            _tokens: tokens,
            _serve: child,
            log,
            config_file,
            url,
            base,
            authority,
            python,
            script,
            metrics,
        })
    }

    /// The browser step as a command (a JSON list) for `token`, signing
    /// in upstream as `upstream`.
    fn browser(&self, token: &str, upstream: &str) -> Vec<String> {
        let script = self.script.to_str().unwrap();
        [self.python.as_str(), script, "--token", token, "--name", upstream].map(String::from).to_vec()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_member_connects_their_own_account_in_a_real_browser_when_asked_by_url_elicitation_and_a_cell_and_a_direct_call_act_as_them_with_both_python_clients()
 {
    let Some(stack) = Stack::start().await else { return };
    let Stack { up, alice, bob, log, url, base, authority, metrics, .. } = &stack;
    for (who, token, upstream) in [("alice", &alice.token, "ada"), ("bob", &bob.token, "bert")] {
        for api in ["client", "session"] {
            let browser = json!(stack.browser(token, upstream)).to_string();
            let bearer = format!("Authorization: Bearer {token}");
            let args = ["--url", url.as_str(), "--header", &bearer, "--api", api, "--url-browser", &browser];
            let steps = json!([
                {"op": "call", "tool": "run_python", "arguments": {"code": SANDBOX_SCAN}},
                {"op": "call", "tool": "notes__whoami", "arguments": {}},
                {"op": "asked"},
            ]);
            let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
            let case = format!("{who} with {api}");
            let cell = &results[0]["result"];
            assert_ne!(cell["isError"], true, "{case}: {cell} asked: {} {stderr}", results[2]);
            let stdout = cell["structuredContent"]["stdout"].as_str().unwrap_or_default();
            assert!(stdout.contains(&format!("\"sub\":\"{upstream}\"")), "{case}: the cell acts as {upstream}: {cell}");
            assert!(stdout.contains("jwts-in-sandbox: []"), "{case}: no token inside the sandbox: {stdout}");
            let direct = &results[1]["result"];
            assert_ne!(direct["isError"], true, "{case}: {direct}");
            assert_eq!(direct["structuredContent"]["sub"], upstream, "{case}: the direct call acts as {upstream}");

            // Asked once, by URL: the console's connect link of the flow.
            let asked = results[2]["result"].as_array().cloned().unwrap_or_default();
            assert_eq!(asked.len(), 1, "{case}: one question, then the account is there: {asked:?}");
            let params = &asked[0]["params"];
            assert_eq!(params["mode"], "url", "{case}: {params}");
            let link = params["url"].as_str().unwrap();
            let flow = link.strip_prefix(&format!("{base}/console/connect/")).expect("a connect link of this console");
            assert_eq!(params["elicitationId"], flow, "{case}: the elicitation id is the flow");
            assert!(flow.len() >= 22, "{case}: a flow id of at least 128 bits: {flow}");
            let message = params["message"].as_str().unwrap();
            assert!(message.contains("\"notes\"") && message.contains("waits"), "{case}: {message}");
            // The browser: the console's login, the provider's sign-in and
            // consent, the console's callback saying what connected.
            let seen = &asked[0]["browser"];
            let paths: Vec<&str> = seen["paths"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            assert_eq!(paths.len(), 4, "{case}: {seen}");
            assert_eq!(paths[0], format!("{base}/console/login"), "{case}: {seen}");
            assert!(paths[1].starts_with(&up.issuer.url) && paths[2].starts_with(&up.issuer.url), "{case}: {seen}");
            assert_eq!(paths[3], format!("{base}/console/connect/callback"), "{case}: {seen}");
            let text = seen["text"].as_str().unwrap();
            assert!(text.contains(&format!("Connected to notes as {upstream}")), "{case}: {text}");
            assert!(text.contains("return to your client"), "{case}: {text}");

            // The console lists the account; disconnecting it makes the
            // next client connect afresh.
            let (page, csrf) = accounts_page(authority, token);
            assert!(page.contains("<code>notes</code>") && page.contains(upstream), "{case}: {page}");
            let cookie = format!("codemode_console={token}");
            let form = format!("csrf={csrf}&server=notes");
            let headers = [("Cookie", cookie.as_str()), ("Content-Type", "application/x-www-form-urlencoded")];
            let (status, _, done) =
                support::raw_http(authority, "POST", "/console/accounts/disconnect", &headers, &form);
            assert_eq!(status, 200, "{case}: {done}");
            let (page, _) = accounts_page(authority, token);
            assert!(!page.contains("<code>notes</code>"), "{case}: disconnected: {page}");
        }
    }
    // No token reached the frontend's log.
    let logged = log.lock().unwrap().join("\n");
    for secret in [&alice.token, &bob.token] {
        assert!(!logged.contains(secret.as_str()), "a code-mode token in the log");
    }
    assert_eq!(support::jwt_in(&logged), None, "no JWT in the log");
    // Nor in the metrics, which count the logins per server.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scraped = reqwest::get(format!("http://{metrics}/metrics")).await.unwrap().text().await.unwrap();
    assert_eq!(support::jwt_in(&scraped), None, "no JWT in the metrics");
    assert!(
        scraped.lines().any(|l| l.starts_with("codemode_upstream_accounts_total") && l.contains("event=\"login\"")),
        "the logins are counted per server: {scraped}"
    );
}

/// A cell calling `whoami` that also looks for a JWT (`eyJ`) in its own
/// environment and every file it can read under `/tmp`, `/proc/self` and
/// its working folder, and prints where it found one.
const SANDBOX_SCAN: &str = r#"
import os
print(await notes__whoami())
needle = "ey" + "J"  # not written whole, so this code holds none
found = []
if needle in repr(dict(os.environ)):
    found.append("environ")
for top in ["/tmp", os.getcwd()]:
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    if needle.encode() in f.read(1 << 20):
                        found.append(path)
            except OSError:
                pass
for name in ["cmdline", "environ"]:
    try:
        with open("/proc/self/" + name, "rb") as f:
            if needle.encode() in f.read():
                found.append("/proc/self/" + name)
    except OSError:
        pass
print("jwts-in-sandbox:", found)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_url_elicitation_gets_a_tool_error_with_the_link_and_after_connecting_in_the_browser_the_retry_acts_as_the_person()
 {
    let Some(stack) = Stack::start().await else { return };
    let bearer = format!("Authorization: Bearer {}", stack.alice.token);
    // No elicitation callback: the SDK declares no elicitation at all.
    let args = ["--url", stack.url.as_str(), "--header", &bearer, "--api", "session"];
    let call = json!([{"op": "call", "tool": "notes__whoami", "arguments": {}}]);
    let Some((results, stderr)) = support::python_sdk(&args, &call).await else { return };
    let refused = &results[0]["result"];
    assert_eq!(refused["isError"], true, "{refused} {stderr}");
    let text = refused["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let prefix = format!("open {}/console/connect/", stack.base);
    let at = text.find(&prefix).unwrap_or_else(|| panic!("the error holds the link: {text}"));
    let link = text[at + "open ".len()..].split_whitespace().next().unwrap().to_string();
    assert!(text.contains("to connect your account at \"notes\", then call again"), "{text}");
    // Bob, logged in to the console as himself, cannot use alice's link:
    // the page says why and sends his browser nowhere.
    let command = stack.browser(&stack.bob.token, "bert");
    let out = tokio::process::Command::new(&command[0]).args(&command[1..]).arg(&link).output().await.unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "bob never reaches the authorization server: {seen}");
    assert!(seen.contains("This link cannot connect an account for you"), "{seen}");
    // The person opens it in the browser, as the error says.
    let command = stack.browser(&stack.alice.token, "ada");
    let out = tokio::process::Command::new(&command[0]).args(&command[1..]).arg(&link).output().await.unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the browser step: {seen} {}", String::from_utf8_lossy(&out.stderr));
    assert!(seen.contains("Connected to notes as ada"), "{seen}");
    // The retry (a new client, as a person would start again) acts as ada.
    let Some((results, stderr)) = support::python_sdk(&args, &call).await else { return };
    let direct = &results[0]["result"];
    assert_ne!(direct["isError"], true, "{direct} {stderr}");
    assert_eq!(direct["structuredContent"]["sub"], "ada", "{direct}");
    // Bob has no account: never alice's, asked afresh (here: refused with his own link).
    let bearer = format!("Authorization: Bearer {}", stack.bob.token);
    let args = ["--url", stack.url.as_str(), "--header", &bearer, "--api", "session"];
    let Some((results, _)) = support::python_sdk(&args, &call).await else { return };
    let bobs = &results[0]["result"];
    assert_eq!(bobs["isError"], true, "bob never gets alice's account: {bobs}");
    let text = bobs["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains(&prefix) && !text.contains(&link), "a link of bob's own: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_link_asked_on_one_frontend_replica_is_completed_on_the_other_and_the_waiting_cell_goes_on_as_the_person()
 {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = browser_available() else { return };
    let python = python.to_str().unwrap().to_string();
    let Some(up) = Upstream::start_with(300, &["--pages"], &[]) else { return };
    let Some(split) = SplitHttp::start() else { return };
    let nats_url = split.nats.url();
    let as_bridge = [("CODE_MODE_NATS_USER", "bridge"), ("CODE_MODE_NATS_PASSWORD", split.users.password("bridge"))];
    deployment_login(&up, &python, &as_bridge, &["--nats", &nats_url]).await;
    let (alice, tokens) = support::alice();
    let config_file = support::log_path("accounts-nats-config").with_extension("json");
    std::fs::write(&config_file, config(&up.url)).unwrap();
    let mut bridge = support::service_command(
        &split.nats.url(),
        &split.users,
        "bridge",
        &["--config", config_file.to_str().unwrap()],
        None,
    );
    bridge.env("CODE_MODE_TOKEN_KEY", &up.key).env("CODE_MODE_STATE_DIR", &up.state);
    let _bridge = bridge.spawn().expect("the bridge starts");
    let _runner = support::spawn_service(&split.nats.url(), &split.users, "sandbox-runner", &[], None);
    let (_asking, asking_url) = split.frontend(&tokens).await;
    let (_other, other_url) = split.frontend(&tokens).await;
    let other = other_url.trim_end_matches("/mcp").to_string();
    let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/connect_browser.py");
    let browser = json!([python, script, "--token", alice.token, "--name", "ada", "--via", other]).to_string();
    let bearer = format!("Authorization: Bearer {}", alice.token);
    for api in ["session", "client"] {
        let args = ["--url", asking_url.as_str(), "--header", &bearer, "--api", api, "--url-browser", &browser];
        let steps = json!([
            {"op": "call", "tool": "run_python", "arguments": {"code": "print(await notes__whoami())"}},
            {"op": "asked"},
        ]);
        let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
        let cell = &results[0]["result"];
        assert_ne!(cell["isError"], true, "{api}: {cell} {stderr}");
        let stdout = cell["structuredContent"]["stdout"].as_str().unwrap_or_default();
        assert!(stdout.contains("\"sub\":\"ada\""), "{api}: the cell acts as ada: {cell}");
        let asked = results[1]["result"].as_array().cloned().unwrap_or_default();
        assert_eq!(asked.len(), 1, "{api}: {asked:?}");
        let asking = asking_url.trim_end_matches("/mcp");
        assert!(asked[0]["params"]["url"].as_str().unwrap().starts_with(asking), "{api}: asked on the first replica");
        let paths = asked[0]["browser"]["paths"].as_array().cloned().unwrap_or_default();
        assert_eq!(paths.last().and_then(Value::as_str), Some(format!("{other}/console/connect/callback").as_str()));
        // Disconnect on the first replica: the account lives in the state store.
        let authority = asking.trim_start_matches("http://");
        let (page, csrf) = accounts_page(authority, &alice.token);
        assert!(page.contains("<code>notes</code>") && page.contains("ada"), "{api}: {page}");
        let cookie = format!("codemode_console={}", alice.token);
        let headers = [("Cookie", cookie.as_str()), ("Content-Type", "application/x-www-form-urlencoded")];
        let form = format!("csrf={csrf}&server=notes");
        let (status, _, done) = support::raw_http(authority, "POST", "/console/accounts/disconnect", &headers, &form);
        assert_eq!(status, 200, "{api}: {done}");
    }
    let _ = std::fs::remove_file(&config_file);
}
