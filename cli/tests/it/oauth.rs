//! OAuth 2.1 on MCP over HTTP, against a real authorization server: npm
//! `oidc-provider` (`testing/peers/oidc_issuer.mjs`) with a
//! client_credentials client and resource indicators, issuing RS256 JWT
//! access tokens for our resource. The official Python SDK's
//! `ClientCredentialsOAuthProvider` finds the issuer from our Protected
//! Resource Metadata; each way a token can be wrong is its own test, with
//! the token minted by the test's issuer process (its own key, a key it
//! does not publish, HS256 keyed with its public key, or no signature).
//!
//! The issuer's keys are fetched off the request path: a server started
//! before its issuer says so on `/healthz` and `/readyz`, refuses tokens as
//! "cannot be checked yet" (503), and accepts the first token once the
//! issuer is up; an issuer killed later leaves its known keys in force.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, log_path};

/// The test's authorization server; killed when dropped.
pub(crate) struct Issuer {
    pub(crate) url: String,
    _child: std::process::Child,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self._child.kill();
        let _ = self._child.wait();
    }
}

impl Issuer {
    /// Start oidc-provider for `resource`; `None` off CI when the peers
    /// are not installed.
    fn start(resource: &str) -> Option<Issuer> {
        Self::spawn("oidc_issuer.mjs", &[resource])
    }

    /// Kill the issuer now (it answers nothing from then on).
    pub(crate) fn kill(&mut self) {
        let _ = self._child.kill();
        let _ = self._child.wait();
    }

    /// Start the issuer script `script` of `testing/peers` with `args`; the
    /// URL it prints. `None` off CI when the peers are not installed. An
    /// issuer that prints no URL within 60 s (one did so once, on a loaded
    /// CI machine) is killed and started once more; one that fails twice
    /// fails the test with what it wrote on stderr.
    pub(crate) fn spawn(script: &str, args: &[&str]) -> Option<Issuer> {
        code_mode_core::testing::peers::npm_package("oidc-provider")?;
        let script = code_mode_core::testing::peers::workspace_root().join("testing/peers").join(script);
        let mut said = String::new();
        for attempt in 1..=2 {
            let log = std::env::temp_dir().join(format!("cm-issuer-{}.log", uuid::Uuid::new_v4().simple()));
            let stderr = std::fs::File::create(&log).expect("a file for the issuer's stderr");
            let mut child = std::process::Command::new("node")
                .arg(&script)
                .args(args)
                .stdout(std::process::Stdio::piped())
                .stderr(stderr)
                .spawn()
                .expect("node runs the issuer");
            let stdout = child.stdout.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(url) = line.strip_prefix("issuer=") {
                        let _ = tx.send(url.to_string());
                    }
                }
            });
            let started = rx.recv_timeout(Duration::from_secs(60));
            if let Ok(url) = started {
                let _ = std::fs::remove_file(&log);
                return Some(Issuer { url, _child: child });
            }
            let _ = child.kill();
            let _ = child.wait();
            said = format!("{started:?}; its stderr: {}", std::fs::read_to_string(&log).unwrap_or_default());
            let _ = std::fs::remove_file(&log);
            eprintln!("the issuer {} printed no URL (attempt {attempt}): {said}", script.display());
        }
        panic!("the issuer {} does not start within 60 s, twice: {said}", script.display())
    }

    /// A token the issuer would never issue: `claims` signed as `how`.
    pub(crate) fn mint(&self, claims: &Value, how: &str) -> String {
        let (status, body) =
            http(&self.url, "POST", "/test/mint", &[], &json!({"claims": claims, "sign": how}).to_string());
        assert_eq!(status, 200, "{body}");
        body
    }

    /// A real access token from the token endpoint (client_credentials).
    fn token(&self, resource: &str, scope: Option<&str>) -> String {
        let mut form = format!("grant_type=client_credentials&resource={}", encode(resource));
        if let Some(scope) = scope {
            form.push_str(&format!("&scope={}", encode(scope)));
        }
        let headers = [("Content-Type", "application/x-www-form-urlencoded")];
        let form = format!("{form}&client_id=code-mode-test&client_secret=test-secret");
        let (status, body) = http(&self.url, "POST", "/token", &headers, &form);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["access_token"].as_str().unwrap().to_string()
    }

    /// Claims a valid token of this issuer for `resource` would carry.
    fn claims(&self, resource: &str) -> Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        json!({"iss": self.url, "aud": resource, "sub": "svc-a", "iat": now, "exp": now + 300,
               "scope": "mcp:run", "client_id": "code-mode-test"})
    }
}

pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// One HTTP/1.1 request to `base` (`http://host:port`); the status and body.
pub(crate) fn http(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let answered = request(base, method, path, headers, body);
    (answered.0, answered.2)
}

/// One HTTP/1.1 request; the status, the headers (names in lower case) and
/// the body.
fn request(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let authority = base.trim_start_matches("http://").split('/').next().unwrap();
    support::raw_http(authority, method, path, headers, body)
}

/// `serve --http` with OAuth against a fresh issuer; dropping it stops both.
struct Served {
    url: String,
    issuer: Issuer,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _serve: tokio::process::Child,
}

async fn serve_with_oauth(extra: &[&str]) -> Option<Served> {
    code_mode_core::testing::peers::npm_package("oidc-provider")?;
    // The resource URI names the port, so the port is chosen first (and
    // chosen again, with a new issuer for the new URI, if it was taken).
    let mut issuer = None;
    let (serve, printed, log, port) = crate::http::spawn_http_on_free_port(|port| {
        let url = format!("http://127.0.0.1:{port}/mcp");
        let started = Issuer::start(&url).expect("the issuer starts: its peers are installed");
        let mut serve = tokio::process::Command::new(support::code_mode());
        serve
            .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--oauth-issuer", &started.url])
            .args(["--oauth-resource", &url, "--oauth-scope", "mcp:run"])
            .args(extra)
            .arg("--")
            .arg(support::test_server());
        serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
        issuer = Some(started);
        serve
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    assert_eq!(printed, url);
    Some(Served { url, issuer: issuer.expect("an issuer was started"), log, _serve: serve })
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// `initialize` with `token` (if any): the status, the `WWW-Authenticate`
/// header and the body.
fn initialize(served: &Served, token: Option<&str>) -> (u16, String, String) {
    let (status, headers, body) = initialize_at(&served.url, token);
    let challenge = headers.into_iter().find(|(n, _)| n == "www-authenticate").map(|(_, v)| v).unwrap_or_default();
    (status, challenge, body)
}

/// `initialize` at the MCP endpoint `url` with `token` (if any): the
/// status, the headers and the body.
fn initialize_at(url: &str, token: Option<&str>) -> (u16, Vec<(String, String)>, String) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    request(url, "POST", "/mcp", &headers, INITIALIZE)
}

/// `token` is refused with 401 `invalid_token` pointing at the metadata,
/// the log saying `why`, while a well-made token of the same issuer passes,
/// and the log holds no part of the token.
async fn assert_refused(served: &Served, token: &str, why: &str) {
    let (status, challenge, body) = initialize(served, Some(token));
    assert_eq!(status, 401, "{body}");
    let metadata = format!("resource_metadata=\"{}\"", metadata_url(served));
    assert!(challenge.contains("error=\"invalid_token\"") && challenge.contains(&metadata), "{challenge}");
    let good = served.issuer.mint(&served.issuer.claims(&served.url), "issuer-key");
    assert_eq!(initialize(served, Some(&good)).0, 200, "a well-made token passes");
    let signature = token.rsplit('.').next().unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    while !served.log.lock().unwrap().iter().any(|l| l.contains("bearer token is not valid") && l.contains(why)) {
        assert!(std::time::Instant::now() < give_up, "no log line says {why:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = served.log.lock().unwrap().join("\n");
    assert!(signature.len() < 8 || !log.contains(signature), "a token reached the log");
    assert!(!body.contains(token.split('.').nth(1).unwrap()), "the answer quotes the token: {body}");
}

fn metadata_url(served: &Served) -> String {
    served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
}

#[tokio::test]
async fn the_python_sdk_finds_the_issuer_from_our_metadata_gets_a_token_and_runs_a_cell_as_its_client() {
    if !support::sandbox_available() {
        return;
    }
    let audit = log_path("oauth-audit");
    let Some(served) = serve_with_oauth(&["--audit", audit.to_str().unwrap()]).await else { return };
    let steps = json!([{"op": "call", "tool": "run_python", "arguments": {"code": "print(await add(a=2, b=3))"}}]);
    let oauth = ["--oauth", &served.issuer.url, "code-mode-test", "test-secret", "mcp:run"];
    let mut args = vec!["--url", served.url.as_str(), "--mode", "legacy"];
    args.extend(oauth);
    let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
    assert_eq!(results[0]["result"]["structuredContent"]["stdout"], "{\"sum\":5}\n", "{results:?} {stderr}");
    let records: Vec<Value> =
        std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let cell = records.iter().find(|r| r["kind"] == "cell").expect("a cell record");
    assert_eq!(cell["identity"], "code-mode-test", "the token's sub is the identity");
    let call = records.iter().find(|r| r["kind"] == "call").expect("a call record");
    assert_eq!(call["identity"], "code-mode-test");
    let _ = std::fs::remove_file(audit);
}

#[tokio::test]
async fn a_request_without_a_token_gets_401_pointing_at_the_protected_resource_metadata_which_names_the_issuer() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let (status, challenge, _) = initialize(&served, None);
    assert_eq!(status, 401);
    assert_eq!(challenge, format!("Bearer realm=\"code-mode\", resource_metadata=\"{}\"", metadata_url(&served)));
    let path = metadata_url(&served).replace(&served.url.replace("/mcp", ""), "");
    let (status, body) = http(&served.url, "GET", &path, &[], "");
    assert_eq!(status, 200, "{body}");
    let metadata: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(metadata["resource"], served.url);
    assert_eq!(metadata["authorization_servers"], json!([served.issuer.url]));
    assert_eq!(metadata["scopes_supported"], json!(["mcp:run"]));
    let (root_status, _) = http(&served.url, "GET", "/.well-known/oauth-protected-resource", &[], "");
    assert_eq!(root_status, 200);
}

#[tokio::test]
async fn a_token_for_another_audience_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let mut claims = served.issuer.claims(&served.url);
    claims["aud"] = json!("http://127.0.0.1:1/mcp");
    assert_refused(&served, &served.issuer.mint(&claims, "issuer-key"), "for another audience").await;
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let mut claims = served.issuer.claims(&served.url);
    let now = claims["iat"].as_u64().unwrap();
    claims["exp"] = json!(now - 120);
    assert_refused(&served, &served.issuer.mint(&claims, "issuer-key"), "has expired").await;
}

#[tokio::test]
async fn a_token_from_another_issuer_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let mut claims = served.issuer.claims(&served.url);
    claims["iss"] = json!("http://127.0.0.1:1");
    assert_refused(&served, &served.issuer.mint(&claims, "issuer-key"), "from another issuer").await;
}

#[tokio::test]
async fn a_token_whose_signature_was_tampered_with_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let claims = served.issuer.claims(&served.url);
    // Signed by a key the issuer does not publish, under its key's kid.
    assert_refused(&served, &served.issuer.mint(&claims, "other-key"), "signature does not verify").await;
    // A real token whose claims were changed after signing.
    let real = served.issuer.token(&served.url, Some("mcp:run"));
    let parts: Vec<&str> = real.split('.').collect();
    let mut changed: Value = serde_json::from_slice(&base64_url_decode(parts[1])).expect("the token's claims are JSON");
    changed["sub"] = json!("admin");
    let forged = format!("{}.{}.{}", parts[0], base64_url_encode(changed.to_string().as_bytes()), parts[2]);
    assert_refused(&served, &forged, "signature does not verify").await;
}

#[tokio::test]
async fn a_token_with_alg_none_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    assert_refused(&served, &served.issuer.mint(&served.issuer.claims(&served.url), "none"), "algorithm \"none\"")
        .await;
}

#[tokio::test]
async fn an_hs256_token_keyed_with_the_issuers_public_key_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    assert_refused(
        &served,
        &served.issuer.mint(&served.issuer.claims(&served.url), "hmac-public"),
        "algorithm \"HS256\"",
    )
    .await;
}

/// How many times the issuer's key set was read so far.
fn jwks_fetches(issuer: &Issuer) -> u64 {
    let (status, body) = http(&issuer.url, "GET", "/test/jwks-fetches", &[], "");
    assert_eq!(status, 200, "{body}");
    body.trim().parse().expect("a count")
}

#[tokio::test]
async fn a_flood_of_tokens_naming_unknown_keys_costs_the_issuer_at_most_one_key_fetch_per_interval() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let good = served.issuer.mint(&served.issuer.claims(&served.url), "issuer-key");
    assert_eq!(initialize(&served, Some(&good)).0, 200, "a well-made token passes");
    let before = jwks_fetches(&served.issuer);
    assert!(before >= 1, "the keys were fetched to check the first token");
    // Each token names a key the issuer never had: each is refused, and
    // the keys are fetched again at most once (REFETCH_EVERY is 30 s;
    // without the limit this would be 25 fetches).
    for n in 0..25 {
        let claims = served.issuer.claims(&served.url);
        let forged = served.issuer.mint(&claims, &format!("unknown-kid:made-up-{n}"));
        let (status, challenge, _) = initialize(&served, Some(&forged));
        assert_eq!(status, 401, "a token under an unknown kid is refused");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    }
    let after = jwks_fetches(&served.issuer);
    assert!(after - before <= 1, "{} fetches of the issuer's keys for 25 unknown kids", after - before);
    // The keys held still serve a well-made token at once.
    assert_eq!(initialize(&served, Some(&good)).0, 200);
    let log = served.log.lock().unwrap().join("\n");
    assert!(!log.contains(good.rsplit('.').next().unwrap()), "a token reached the log");
}

#[tokio::test]
async fn a_real_token_lacking_the_required_scope_gets_403_insufficient_scope() {
    if !support::sandbox_available() {
        return;
    }
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let unscoped = served.issuer.token(&served.url, None);
    let (status, challenge, body) = initialize(&served, Some(&unscoped));
    assert_eq!(status, 403, "{body}");
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp:run\""),
        "{challenge}"
    );
    assert!(body.contains("insufficient_scope") && !body.contains(unscoped.split('.').nth(1).unwrap()), "{body}");
    let scoped = served.issuer.token(&served.url, Some("mcp:run"));
    assert_eq!(initialize(&served, Some(&scoped)).0, 200);
}

/// `/healthz` of the metrics address `addr` (`host:port`).
fn healthz(addr: &str) -> Value {
    let (status, _, body) = support::raw_http(addr, "GET", "/healthz", &[], "");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("JSON health")
}

/// The value of the unlabelled series `name` on `/metrics` of `addr`.
fn gauge(addr: &str, name: &str) -> Option<String> {
    let (status, _, body) = support::raw_http(addr, "GET", "/metrics", &[], "");
    assert_eq!(status, 200, "{body}");
    body.lines().find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string))
}

/// Wait up to `within` for `/healthz` at `addr` to satisfy `test`; the last
/// body seen.
async fn healthz_until(addr: &str, within: Duration, test: impl Fn(&Value) -> bool) -> Value {
    let give_up = std::time::Instant::now() + within;
    loop {
        let health = healthz(addr);
        if test(&health) {
            return health;
        }
        assert!(std::time::Instant::now() < give_up, "/healthz never got there: {health}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_server_started_before_its_issuer_says_so_on_healthz_and_accepts_the_first_token_once_the_issuer_is_up() {
    if !support::sandbox_available() || code_mode_core::testing::peers::npm_package("oidc-provider").is_none() {
        return;
    }
    // The issuer's port is reserved, but nothing listens there yet.
    let ports = code_mode_core::testing::distinct_ports(3);
    let (port, metrics_port, issuer_port) = (ports[0], ports[1], ports[2]);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let issuer_url = format!("http://127.0.0.1:{issuer_port}");
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--oauth-issuer", &issuer_url])
        .args(["--oauth-resource", &url, "--oauth-scope", "mcp:run", "--warm", "0", "--metrics-addr", &metrics])
        .arg("--")
        .arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let started = std::time::Instant::now();
    let (_serve, printed, log) = crate::http::spawn_http(&mut serve).await;
    assert_eq!(printed, url);
    eprintln!("serve listened {} ms after it was started, without its issuer", started.elapsed().as_millis());

    // /healthz: alive, not ready, the issuer not reached and why.
    let health =
        healthz_until(&metrics, Duration::from_secs(5), |h| h["oauth_issuer"]["reachable"] == json!(false)).await;
    assert_eq!(health["ok"], true, "{health}");
    assert_eq!(health["ready"], false, "{health}");
    let issuer = &health["oauth_issuer"];
    assert_eq!(issuer["issuer"], issuer_url.as_str());
    assert_eq!(issuer["keys_loaded"], false);
    let error = issuer["error"].as_str().expect("the error is shown");
    assert!(error.contains(&issuer_port.to_string()), "the error names the issuer's address: {error}");
    assert!(issuer["since"].as_str().is_some_and(|s| s.ends_with('Z')), "{issuer}");
    let (status, _, body) = support::raw_http(&metrics, "GET", "/readyz", &[], "");
    assert_eq!(status, 503, "not ready while no key is held: {body}");
    assert_eq!(gauge(&metrics, "codemode_oauth_keys_loaded").as_deref(), Some("0"));

    // Without a token: 401 as always. With a well-formed token: refused
    // quickly and clearly as "cannot be checked yet", not as a bad token.
    assert_eq!(initialize_at(&url, None).0, 401);
    let part = |v: Value| base64_url_encode(v.to_string().as_bytes());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = json!({"iss": issuer_url, "aud": url, "sub": "svc-a", "exp": now + 300, "scope": "mcp:run"});
    let early = format!("{}.{}.{}", part(json!({"alg": "RS256", "kid": "test-key"})), part(claims), "AAAA");
    let asked = std::time::Instant::now();
    let (status, headers, body) = initialize_at(&url, Some(&early));
    let refused_in = asked.elapsed();
    assert_eq!(status, 503, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("a JSON error");
    assert_eq!(answer["error"], "temporarily_unavailable", "{answer}");
    let description = answer["error_description"].as_str().unwrap();
    assert!(description.contains("issuer's keys could not be loaded"), "{description}");
    assert!(headers.iter().any(|(n, v)| n == "retry-after" && v == "1"), "{headers:?}");
    assert!(refused_in < Duration::from_millis(2500), "the refusal took {refused_in:?}");
    eprintln!("a token before the issuer was up was refused (503) in {} ms", refused_in.as_millis());

    // The issuer comes up on its port; the first token it issues is
    // accepted by the first request that carries it.
    let issuer = Issuer::spawn("oidc_issuer.mjs", &[&url, &issuer_port.to_string()]).expect("the peers are installed");
    let up = std::time::Instant::now();
    assert_eq!(issuer.url, issuer_url);
    let token = issuer.token(&url, Some("mcp:run"));
    let got_token = up.elapsed();
    let asked = std::time::Instant::now();
    let (status, _, body) = initialize_at(&url, Some(&token));
    let answered_in = asked.elapsed();
    let since_up = up.elapsed();
    assert_eq!(status, 200, "the first request with the first token is accepted: {body}");
    eprintln!(
        "issuer up -> token issued in {} ms; the first request with it was accepted in {} ms ({} ms after the \
         issuer was up)",
        got_token.as_millis(),
        answered_in.as_millis(),
        since_up.as_millis()
    );
    assert!(answered_in < Duration::from_secs(2), "the first accepted request took {answered_in:?}");

    let health = healthz(&metrics);
    assert_eq!(health["ready"], true, "{health}");
    assert_eq!(health["oauth_issuer"]["reachable"], true, "{health}");
    assert_eq!(health["oauth_issuer"]["keys_loaded"], true, "{health}");
    assert_eq!(health["oauth_issuer"]["error"], Value::Null, "{health}");
    assert_eq!(support::raw_http(&metrics, "GET", "/readyz", &[], "").0, 200);
    assert_eq!(gauge(&metrics, "codemode_oauth_keys_loaded").as_deref(), Some("1"));
    let log = log.lock().unwrap().join("\n");
    assert!(!log.contains(token.rsplit('.').next().unwrap()), "a token reached the log");
}

#[tokio::test]
async fn an_issuer_killed_after_its_keys_were_loaded_leaves_tokens_signed_by_its_known_keys_accepted() {
    if !support::sandbox_available() {
        return;
    }
    let Some(mut served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    let real = served.issuer.token(&served.url, Some("mcp:run"));
    let minted = served.issuer.mint(&served.issuer.claims(&served.url), "issuer-key");
    let unknown = served.issuer.mint(&served.issuer.claims(&served.url), "unknown-kid:made-up");
    assert_eq!(initialize(&served, Some(&real)).0, 200, "the keys are loaded");
    served.issuer.kill();
    for (token, what) in [(&real, "a token from the token endpoint"), (&minted, "another token under its key")] {
        let asked = std::time::Instant::now();
        let (status, _, body) = initialize(&served, Some(token));
        assert_eq!(status, 200, "{what} is still accepted: {body}");
        assert!(asked.elapsed() < Duration::from_secs(1), "{what} waited {:?} on a dead issuer", asked.elapsed());
    }
    // A key the issuer never had is still no key: refused as a bad token,
    // at once (keys are held, so the dead issuer is not waited on).
    let asked = std::time::Instant::now();
    let (status, challenge, _) = initialize(&served, Some(&unknown));
    assert_eq!(status, 401);
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(asked.elapsed() < Duration::from_secs(2), "the refusal took {:?}", asked.elapsed());
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64_url_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn base64_url_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut n, mut bits) = (0u32, 0);
    for c in text.bytes() {
        let v = B64.iter().position(|b| *b == c).expect("base64url") as u32;
        n = (n << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((n >> bits) as u8);
        }
    }
    out
}

/// The OAuth snippet of docs/deployment.md.
fn oauth_snippet() -> String {
    let doc = std::fs::read_to_string(code_mode_core::testing::peers::workspace_root().join("docs/deployment.md"))
        .expect("docs/deployment.md");
    doc.split("```python\n")
        .skip(1)
        .filter_map(|b| b.split("\n```").next())
        .find(|b| b.contains("ClientCredentialsOAuthProvider("))
        .expect("the OAuth snippet")
        .to_string()
}

#[tokio::test]
async fn the_oauth_example_of_the_docs_runs_as_written_through_a_cell_longer_than_httpxs_default_timeout() {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = code_mode_core::testing::peers::venv_bin("python") else { return };
    let Some(served) = serve_with_oauth(&["--warm", "0"]).await else { return };
    // As written, with the test issuer's client and URL in place of the
    // placeholders; then the connection "as above" with `mcp.Client` at its
    // defaults, and a cell that takes longer than httpx's default 5 s.
    let snippet = oauth_snippet()
        .replace("client_id=\"...\"", "client_id=\"code-mode-test\"")
        .replace("client_secret=\"...\"", "client_secret=\"test-secret\"")
        .replace("https://login.example.com/realms/tools", &served.issuer.url);
    let program = format!(
        "import asyncio, sys\nfrom mcp import Client\nfrom mcp.client.streamable_http import streamable_http_client\n\
         url = sys.argv[1]\n{snippet}\n\n\
         async def main():\n    async with Client(streamable_http_client(url, http_client=http)) as client:\n        \
         r = await client.call_tool('run_python', {{'code': 'import time\\ntime.sleep(7)\\nprint(\"waited\")'}})\n        \
         print(r.structured_content['stdout'], end='')\n\n\
         asyncio.run(main())\n"
    );
    let out = tokio::process::Command::new(&python).args(["-c", &program, &served.url]).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the snippet failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "waited\n", "{stderr}");
}
