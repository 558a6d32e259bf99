//! Token exchange (RFC 8693, issue 41): a remote server whose `auth` block
//! is `token_exchange` is reached as each caller. Real components only:
//! the frontend's issuer is oidc-provider (`oidc_issuer.mjs`, tokens for
//! alice and bob signed with its published key), the upstream's
//! authorization server is another oidc-provider
//! (`oidc_exchange_issuer.mjs`) with a token-exchange grant registered
//! that trusts the frontend issuer's tokens, and the upstream is the test
//! server over streamable HTTP checking that authorization server's
//! tokens, whose `whoami` answers the token's `sub`, `aud` and `act`. The
//! clients are the official Python SDK's (`mcp.Client` and
//! `ClientSession`) with a bearer header.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::oauth::{Issuer, http};
use crate::support::{self, log_path};
use crate::upstream::{Server, free_port};

/// `serve --http` with OAuth in front of a token-exchange server, its
/// authorization server, the frontend's issuer, the audit file and the
/// serve's stderr; dropping it stops them all.
struct Exchanging {
    url: String,
    front: Issuer,
    upstream_as: Issuer,
    upstream_url: String,
    audit: PathBuf,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    state: PathBuf,
    _server: Server,
    _serve: tokio::process::Child,
    /// Split services: the bridge and nats-server.
    _split: Option<(tokio::process::Child, code_mode_core::testing::NatsServer)>,
}

/// How the gateway runs and checks its callers.
#[derive(Clone, Copy)]
enum Gateway<'a> {
    /// `serve`, callers checked by the OAuth issuer.
    OAuth,
    /// `serve`, callers checked by this static token file.
    Static(&'a str),
    /// `frontend` (OAuth) and `bridge` apart over NATS, direct tools only.
    Split,
}

impl Drop for Exchanging {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.audit);
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// The `auth` block of the upstream: code-mode's client at its
/// authorization server, the secret from the environment.
/// The token key of the gateway's processes (the same on frontend and bridge).
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

const BLOCK: &str = r#"{"type": "token_exchange", "client_id": "code-mode-gw", "client_secret": "${GW_SECRET}", "scopes": ["mcp:read"]}"#;

/// Start everything; `frontend_auth` chooses how the frontend checks its
/// callers: `None` by the OAuth issuer, `Some(file)` by a static token file.
async fn start(gateway: Gateway<'_>) -> Option<Exchanging> {
    code_mode_core::testing::peers::npm_package("oidc-provider")?;
    let nats = match gateway {
        Gateway::Split => Some(code_mode_core::testing::NatsServer::start_secured()?),
        _ => None,
    };
    let mut bridge = None;
    let upstream_port = free_port();
    let upstream_url = format!("http://127.0.0.1:{upstream_port}/mcp");
    let audit = log_path("token-exchange-audit");
    let state = std::env::temp_dir().join(format!("cm-xchg-{}", uuid::Uuid::new_v4().simple()));
    let mut issuers = None;
    let mut server = None;
    let (serve, printed, log, port) = crate::http::spawn_http_on_free_port(|port| {
        let url = format!("http://127.0.0.1:{port}/mcp");
        let front = Issuer::spawn("oidc_issuer.mjs", &[&url]).expect("the frontend's issuer starts");
        let upstream_as = Issuer::spawn(
            "oidc_exchange_issuer.mjs",
            &[&upstream_url, "--subject-issuer", &front.url, "--subject-audience", &url],
        )
        .expect("the upstream's authorization server starts");
        drop(server.take());
        server = Some(Server::start(upstream_port, &["--oauth-issuer", &upstream_as.url, "--oauth-scope", "mcp:read"]));
        let http = format!("127.0.0.1:{port}");
        let oauth = ["--oauth-issuer", &front.url, "--oauth-resource", &url, "--oauth-scope", "mcp:run"];
        let upstream = ["--audit", audit.to_str().unwrap(), "--url", &upstream_url, "--auth", BLOCK];
        let mut serve = match (gateway, &nats) {
            (Gateway::Split, Some((nats, users))) => {
                let mut command = support::service_command(&nats.url(), users, "bridge", &upstream, None);
                command.env("GW_SECRET", "gw-secret").env("CODE_MODE_TOKEN_KEY", KEY);
                drop(bridge.take());
                bridge = Some(command.spawn().expect("the bridge starts"));
                let mut frontend = support::service_command(
                    &nats.url(),
                    users,
                    "frontend",
                    &["--http", &http, "--expose-tools=only"],
                    None,
                );
                frontend.args(oauth);
                frontend
            }
            _ => {
                let mut serve = tokio::process::Command::new(support::code_mode());
                serve.args(["serve", "--http", &http, "--warm", "0", "--expose-tools"]).args(upstream);
                match gateway {
                    Gateway::Static(file) => serve.args(["--auth-tokens", file]),
                    _ => serve.args(oauth),
                };
                serve.env("GW_SECRET", "gw-secret").stdin(std::process::Stdio::null()).kill_on_drop(true);
                serve
            }
        };
        serve.env("CODE_MODE_STATE_DIR", &state).env("CODE_MODE_TOKEN_KEY", KEY);
        issuers = Some((front, upstream_as));
        serve
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    assert_eq!(printed, url);
    let (front, upstream_as) = issuers.expect("the issuers were started");
    Some(Exchanging {
        url,
        front,
        upstream_as,
        upstream_url,
        audit,
        log,
        state,
        _server: server.expect("the upstream was started"),
        _serve: serve,
        _split: bridge.zip(nats.map(|(nats, _)| nats)),
    })
}

impl Exchanging {
    /// An access token of the frontend's issuer for `sub`.
    fn token_of(&self, sub: &str) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let claims = json!({"iss": self.front.url, "aud": self.url, "sub": sub, "iat": now, "exp": now + 300,
            "scope": "mcp:run", "client_id": "code-mode-test"});
        self.front.mint(&claims, "issuer-key")
    }

    /// The token requests the upstream's authorization server served.
    fn counts(&self) -> Value {
        let (status, body) = http(&self.upstream_as.url, "GET", "/test/counts", &[], "");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Run `steps` with the Python SDK's `api` client, bearing `token`.
    async fn steps(&self, api: &str, token: &str, steps: &Value) -> Option<(Vec<Value>, String)> {
        let header = format!("Authorization: Bearer {token}");
        let args = ["--url", self.url.as_str(), "--api", api, "--header", header.as_str()];
        support::python_sdk(&args, steps).await
    }

    /// Everything a token must never reach: the serve's stderr and the
    /// audit records.
    fn leaks(&self) -> String {
        let mut all = self.log.lock().unwrap().join("\n");
        all.push_str(&std::fs::read_to_string(&self.audit).unwrap_or_default());
        all
    }
}

/// `whoami` directly, and from a cell when cells can run.
fn whoami_steps() -> Value {
    let mut steps = vec![json!({"op": "call", "tool": "whoami", "arguments": {}})];
    if support::sandbox_available() {
        let code = "import json\nr = await whoami()\nprint(r if isinstance(r, str) else json.dumps(r))";
        steps.push(json!({"op": "call", "tool": "run_python", "arguments": {"code": code}}));
    }
    Value::Array(steps)
}

/// The `whoami` answers in `results` (direct, and a cell's printed one).
fn answers(results: &[Value]) -> Vec<Value> {
    results
        .iter()
        .map(|r| {
            let structured = &r["result"]["structuredContent"];
            match structured.get("stdout").and_then(Value::as_str) {
                Some(printed) => serde_json::from_str(printed.trim()).expect("the cell printed whoami's answer"),
                None => structured.clone(),
            }
        })
        .collect()
}

#[tokio::test]
async fn an_oauth_caller_reaches_the_upstream_as_its_own_subject_by_token_exchange_cached_until_expiry_and_no_token_is_logged()
 {
    let Some(up) = start(Gateway::OAuth).await else { return };
    let listed = up.counts();
    assert_eq!(listed["token_exchange"], 0, "nothing exchanged before a call: {listed}");
    let mut tokens = Vec::new();
    for (person, api) in [("alice", "client"), ("bob", "session"), ("alice", "session"), ("bob", "client")] {
        let token = up.token_of(person);
        let Some((results, stderr)) = up.steps(api, &token, &whoami_steps()).await else { return };
        for (result, answer) in results.iter().zip(answers(&results)) {
            assert_ne!(result["result"]["isError"], true, "{person} ({api}): {result} {stderr}");
            assert_eq!(answer["sub"], person, "{person} ({api}) acts upstream as itself: {answer}");
            assert_eq!(answer["aud"], up.upstream_url.as_str(), "a token for the upstream: {answer}");
            assert_eq!(answer["act"]["sub"], "code-mode-gw", "the act claim the server issued is kept: {answer}");
        }
        tokens.push(token);
    }
    let counts = up.counts();
    assert_eq!(counts["token_exchange"], 2, "one exchange per identity, cached until expiry: {counts}");
    assert_eq!(counts["refused"], 0, "{counts}");
    // No caller's token (nor any JWT: an exchanged token) in the log or the audit.
    let leaks = up.leaks();
    for token in &tokens {
        let signature = token.rsplit('.').next().unwrap();
        assert!(!leaks.contains(signature), "a caller's token reached the log or the audit");
    }
    assert_eq!(support::jwt_in(&leaks), None, "a JWT reached the log or the audit");
    let audit = std::fs::read_to_string(&up.audit).unwrap();
    let calls: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "call" && r["tool"].as_str().is_some_and(|t| t.contains("whoami")))
        .collect();
    assert!(calls.iter().any(|r| r["identity"] == "alice") && calls.iter().any(|r| r["identity"] == "bob"), "{audit}");
}

#[tokio::test]
async fn a_static_token_caller_is_refused_saying_why_and_nothing_is_exchanged() {
    let file = code_mode_core::testing::TempDir::new("cm-xchg-tokens");
    let carol = crate::auth::token_new("carol");
    let path = file.0.join("tokens");
    crate::auth::write_tokens(&path, &[&carol]);
    let Some(up) = start(Gateway::Static(path.to_str().unwrap())).await else { return };
    let Some((results, stderr)) = up.steps("session", &carol.token, &whoami_steps()).await else { return };
    for result in &results {
        let result = &result["result"];
        let text = result.to_string();
        assert!(
            text.contains("did not authenticate by OAuth") && text.contains("carol"),
            "the refusal names the caller and why: {result} {stderr}"
        );
        assert!(!text.contains(&carol.token), "the error holds no token");
    }
    let counts = up.counts();
    assert_eq!(counts["token_exchange"], 0, "{counts}");
    assert!(!up.leaks().contains(&carol.token), "carol's token reached the log or the audit");
}

#[tokio::test]
async fn over_nats_the_frontend_hands_the_callers_token_to_the_split_bridge_which_exchanges_it_per_identity() {
    let Some(up) = start(Gateway::Split).await else { return };
    let steps = json!([{"op": "call", "tool": "whoami", "arguments": {}}]);
    let mut tokens = Vec::new();
    for (person, api) in [("alice", "client"), ("bob", "session"), ("alice", "session")] {
        let token = up.token_of(person);
        let Some((results, stderr)) = up.steps(api, &token, &steps).await else { return };
        let answer = &answers(&results)[0];
        assert_eq!(answer["sub"], person, "{person} ({api}) acts upstream as itself over NATS: {results:?} {stderr}");
        assert_eq!(answer["act"]["sub"], "code-mode-gw", "{answer}");
        tokens.push(token);
    }
    let counts = up.counts();
    assert_eq!(counts["token_exchange"], 2, "one exchange per identity: {counts}");
    let log = up.leaks();
    for token in &tokens {
        assert!(!log.contains(token.rsplit('.').next().unwrap()), "a caller's token reached the frontend's log");
    }
}
