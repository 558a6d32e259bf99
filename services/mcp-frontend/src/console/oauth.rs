//! Logging in to the console through the OAuth issuer whose access tokens
//! `/mcp` takes (`--oauth-issuer`): the authorization-code flow with PKCE
//! (RFC 6749, RFC 7636), the console being a client of that issuer
//! (`--console-client-id`; confidential with `--console-client-secret-file`,
//! else public).
//!
//! - `GET /console/login/oauth` makes a PKCE verifier (32 random bytes,
//!   base64url) and a random `state`, keeps both in a [sealed](Sealer)
//!   cookie ([`COOKIE`]: HttpOnly, SameSite=Lax, Path=/console/login, 10
//!   minutes) and sends the browser to the issuer's
//!   `authorization_endpoint` with the S256 challenge, the scopes
//!   ([`scope_to_ask`]) and the frontend's resource (RFC 8707), so the
//!   token's audience is `/mcp`'s.
//! - `GET /console/login/callback` checks `state` against the cookie in
//!   constant time, exchanges the code at the `token_endpoint` with the
//!   verifier (and the client secret), checks the access token with the
//!   very gate `/mcp` uses (issuer, audience, expiry, scopes, groups), and
//!   only then starts the console session with it. The cookie is removed
//!   whatever the outcome.
//!
//! Lax, not Strict, because the issuer sends the browser back with a
//! top-level GET from its own site, which a Strict cookie would not
//! follow. The cookie is sealed with AES-256-GCM under a key made at
//! startup and never stored: the browser can neither read the verifier
//! nor forge a state; a restart (or a callback reaching another replica)
//! between the redirect and the callback only means signing in again.
//!
//! The endpoints come from the issuer's metadata
//! ([`issuer_metadata`](crate::auth::oauth::issuer_metadata), as the key
//! actor finds the JWKS), read at the first sign-in and kept once read.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::OnceCell;

use crate::auth::oauth::{ISSUER_TIMEOUT, OAuthOptions, issuer_metadata};

/// The cookie holding a sign-in's sealed state and verifier.
pub const COOKIE: &str = "codemode_console_oauth";
/// The only paths that cookie is sent to.
pub const COOKIE_PATH: &str = "/console/login";
/// Where the sign-in starts.
pub const START_PATH: &str = "/console/login/oauth";
/// Where the issuer sends the browser back (the `redirect_uri`).
pub const CALLBACK_PATH: &str = "/console/login/callback";
/// How long a sign-in may take, from the redirect to the callback.
pub const SIGN_IN_TTL: Duration = Duration::from_secs(600);
/// Longest time the token request may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// What the sealed cookie is bound to: a fixed label, so no other sealed
/// value of this process could pass for one.
const SEAL_LABEL: &[u8] = b"code-mode console oauth sign-in v1";
/// Longest `error` or `error_description` of the issuer shown, in
/// characters.
const MAX_ISSUER_TEXT: usize = 300;

/// The console as an OAuth client of the issuer (`--console-client-id`,
/// `--console-client-secret-file`).
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleClient {
    /// Its `client_id` at the issuer.
    pub client_id: String,
    /// Its secret (a confidential client); `None`: a public client, which
    /// PKCE alone protects.
    pub client_secret: Option<String>,
}

impl fmt::Debug for ConsoleClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsoleClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "(hidden)"))
            .finish()
    }
}

/// Why the console's client settings are refused (at startup).
#[derive(Debug, thiserror::Error)]
pub enum ConsoleClientError {
    /// The secret file cannot be read.
    #[error("cannot read the console client secret file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The secret file holds no secret, or more than one line.
    #[error("the console client secret file {} must hold the secret on one line: {reason}", path.display())]
    BadSecret {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
    /// The client id is empty or holds a space or a control character.
    #[error("--console-client-id {0:?} is not a client id (empty, or a space or control character)")]
    BadId(String),
}

impl ConsoleClient {
    /// A public client.
    pub fn public(client_id: &str) -> Result<Self, ConsoleClientError> {
        if client_id.is_empty() || client_id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ConsoleClientError::BadId(client_id.chars().take(100).collect()));
        }
        Ok(Self { client_id: client_id.to_string(), client_secret: None })
    }

    /// A confidential client whose secret is the one line of `secret_file`
    /// (its line end and surrounding white space dropped).
    pub fn confidential(client_id: &str, secret_file: &Path) -> Result<Self, ConsoleClientError> {
        let text = std::fs::read_to_string(secret_file)
            .map_err(|source| ConsoleClientError::Unreadable { path: secret_file.to_path_buf(), source })?;
        let secret = text.trim();
        let bad = |reason| ConsoleClientError::BadSecret { path: secret_file.to_path_buf(), reason };
        if secret.is_empty() {
            return Err(bad("it is empty"));
        }
        if secret.chars().any(char::is_control) {
            return Err(bad("it holds more than one line or a control character"));
        }
        Ok(Self { client_secret: Some(secret.to_string()), ..Self::public(client_id)? })
    }
}

/// Why a sign-in did not end in a session: each becomes one page
/// ([`super::sign_in_failed`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignInError {
    /// The issuer's metadata cannot be read, or lacks an endpoint.
    #[error("the issuer's metadata: {0}")]
    Metadata(String),
    /// The issuer sent the browser back with `error` (its text).
    #[error("the issuer answered {error}: {description}")]
    Refused {
        /// Its `error`.
        error: String,
        /// Its `error_description` (may be empty).
        description: String,
    },
    /// No sign-in cookie, or one that does not open (another process's,
    /// forged, or older than [`SIGN_IN_TTL`]).
    #[error("no sign-in in progress (missing, expired or foreign cookie)")]
    NoSignIn,
    /// The `state` is not the cookie's.
    #[error("the state is not this browser's")]
    State,
    /// The callback's `iss` (RFC 9207) names another issuer.
    #[error("the answer names another issuer")]
    OtherIssuer,
    /// No `code`.
    #[error("no code")]
    NoCode,
    /// The token endpoint refused the code (`invalid_grant` for a code
    /// used twice).
    #[error("the token endpoint refused the code: {error}")]
    Exchange {
        /// Its `error`.
        error: String,
        /// Its `error_description` (may be empty).
        description: String,
    },
    /// The token endpoint could not be asked, or answered nonsense.
    #[error("the token request failed: {0}")]
    TokenRequest(String),
    /// The token does not pass the gate of `/mcp` (why: our text).
    #[error("the access token is not accepted here: {0}")]
    Token(String),
}

/// What the issuer's metadata gives the sign-in.
#[derive(Debug, Clone)]
struct Endpoints {
    authorization: String,
    token: String,
    /// The scope parameter ([`scope_to_ask`]).
    scope: String,
    /// Send the secret with HTTP Basic (`client_secret_basic`, the default
    /// of RFC 8414) rather than in the form (`client_secret_post`).
    basic: bool,
}

/// The scopes the console asks for: every scope `/mcp` requires of a
/// token (`--oauth-scope`, without which the token would be refused),
/// and `openid` when the issuer lists it in `scopes_supported` (many
/// issuers run their sign-in and single sign-on only for OpenID requests;
/// the ID token is not used: the identity is the access token's `sub`).
pub(crate) fn scope_to_ask(required: &[String], metadata: &Value) -> String {
    let openid = metadata["scopes_supported"].as_array().is_some_and(|s| s.iter().any(|v| v == "openid"));
    let mut scopes: Vec<&str> = Vec::new();
    if openid {
        scopes.push("openid");
    }
    for scope in required {
        if !scopes.contains(&scope.as_str()) {
            scopes.push(scope);
        }
    }
    scopes.join(" ")
}

/// A sign-in in progress, as the cookie holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The `state` sent to the issuer.
    pub state: String,
    /// The PKCE `code_verifier`.
    pub verifier: String,
}

/// Seals and opens the sign-in cookie: AES-256-GCM under a key of this
/// process, a random nonce per cookie, the expiry inside.
pub(crate) struct Sealer {
    key: LessSafeKey,
}

impl Sealer {
    /// A sealer with a fresh random key (`None`: no randomness).
    pub fn new() -> Option<Self> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes).ok()?;
        Some(Self { key: LessSafeKey::new(key) })
    }

    /// `pending` sealed until `expires` (Unix seconds), as cookie-safe
    /// base64url.
    pub fn seal(&self, pending: &Pending, expires: u64) -> Option<String> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).ok()?;
        let mut data = format!("{expires}.{}.{}", pending.state, pending.verifier).into_bytes();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(SEAL_LABEL), &mut data)
            .ok()?;
        let mut sealed = nonce.to_vec();
        sealed.extend(data);
        Some(URL_SAFE_NO_PAD.encode(sealed))
    }

    /// The sign-in a cookie holds, if this process sealed it and it has
    /// not expired at `now` (Unix seconds).
    pub fn open(&self, cookie: &str, now: u64) -> Option<Pending> {
        let mut sealed = URL_SAFE_NO_PAD.decode(cookie).ok()?;
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let data = sealed.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&sealed).ok()?;
        let mut data = data;
        let plain = self.key.open_in_place(nonce, Aad::from(SEAL_LABEL), &mut data).ok()?;
        let text = std::str::from_utf8(plain).ok()?;
        let mut parts = text.splitn(3, '.');
        let expires: u64 = parts.next()?.parse().ok()?;
        let (state, verifier) = (parts.next()?, parts.next()?);
        (now < expires).then(|| Pending { state: state.into(), verifier: verifier.into() })
    }
}

/// 32 random bytes as base64url (43 characters): a state or a verifier.
pub(crate) fn random_b64() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(URL_SAFE_NO_PAD.encode(bytes))
}

/// The S256 `code_challenge` of a verifier.
pub(crate) fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether the `state` sent back is the cookie's, compared in constant
/// time.
pub(crate) fn state_matches(expected: &str, sent: &str) -> bool {
    expected.len() == sent.len() && bool::from(expected.as_bytes().ct_eq(sent.as_bytes()))
}

/// Unix seconds now.
pub(crate) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `text` percent-encoded for a query or a form (everything but the
/// unreserved characters).
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `name=value&…`, each part encoded.
fn form(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(name, value)| format!("{}={}", encode(name), encode(value))).collect::<Vec<_>>().join("&")
}

/// The sign-in through the issuer, for one console.
pub(crate) struct OAuthSignIn {
    client: ConsoleClient,
    issuer: String,
    resource: String,
    scopes: Vec<String>,
    sealer: Sealer,
    http: reqwest::Client,
    endpoints: OnceCell<Endpoints>,
}

impl OAuthSignIn {
    /// The sign-in of `client` at the issuer of `oauth` (`None`, logged:
    /// no randomness or no HTTP client).
    pub fn new(client: ConsoleClient, oauth: &OAuthOptions) -> Option<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let Some(sealer) = Sealer::new() else {
            tracing::error!("no randomness for the console's OAuth sign-in: only the token form is offered");
            return None;
        };
        let http = reqwest::Client::builder()
            .timeout(TOKEN_TIMEOUT.max(ISSUER_TIMEOUT))
            .redirect(reqwest::redirect::Policy::none())
            .build();
        let http = match http {
            Ok(http) => http,
            Err(e) => {
                tracing::error!(error = %e, "no HTTP client for the console's OAuth sign-in: only the token form is offered");
                return None;
            }
        };
        Some(Self {
            client,
            issuer: oauth.issuer.clone(),
            resource: oauth.resource.clone(),
            scopes: oauth.scopes.clone(),
            sealer,
            http,
            endpoints: OnceCell::new(),
        })
    }

    /// The issuer, as the login page names it.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The issuer's endpoints, read once (a failure is tried again at the
    /// next sign-in).
    async fn endpoints(&self) -> Result<&Endpoints, SignInError> {
        self.endpoints
            .get_or_try_init(|| async {
                let (url, metadata) = issuer_metadata(&self.http, &self.issuer).await.map_err(SignInError::Metadata)?;
                let endpoint = |name: &str| {
                    metadata[name]
                        .as_str()
                        .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
                        .map(str::to_string)
                        .ok_or_else(|| SignInError::Metadata(format!("{url} names no {name}")))
                };
                let methods = metadata["token_endpoint_auth_methods_supported"].as_array();
                let basic = methods.is_none_or(|m| m.iter().any(|v| v == "client_secret_basic"));
                let endpoints = Endpoints {
                    authorization: endpoint("authorization_endpoint")?,
                    token: endpoint("token_endpoint")?,
                    scope: scope_to_ask(&self.scopes, &metadata),
                    basic,
                };
                tracing::info!(issuer = %self.issuer, scope = %endpoints.scope, "the console's OAuth sign-in found the issuer's endpoints");
                Ok(endpoints)
            })
            .await
    }

    /// Start a sign-in: the issuer's authorization URL to send the browser
    /// to, and the sealed cookie to set.
    pub async fn start(&self, redirect_uri: &str) -> Result<(String, String), SignInError> {
        let endpoints = self.endpoints().await?;
        let no_randomness = || SignInError::TokenRequest("no randomness from the system".into());
        let pending = Pending {
            state: random_b64().ok_or_else(no_randomness)?,
            verifier: random_b64().ok_or_else(no_randomness)?,
        };
        let sealed = self.sealer.seal(&pending, now() + SIGN_IN_TTL.as_secs()).ok_or_else(no_randomness)?;
        let challenge = challenge_of(&pending.verifier);
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", self.client.client_id.as_str()),
            ("redirect_uri", redirect_uri),
            ("state", pending.state.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("resource", self.resource.as_str()),
        ];
        if !endpoints.scope.is_empty() {
            pairs.push(("scope", endpoints.scope.as_str()));
        }
        let separator = if endpoints.authorization.contains('?') { '&' } else { '?' };
        Ok((format!("{}{separator}{}", endpoints.authorization, form(&pairs)), sealed))
    }

    /// The sign-in a callback's cookie holds, checked against the `state`
    /// it brings.
    pub fn pending(&self, cookie: Option<&str>, state: Option<&str>) -> Result<Pending, SignInError> {
        let pending = cookie.and_then(|c| self.sealer.open(c, now())).ok_or(SignInError::NoSignIn)?;
        if !state_matches(&pending.state, state.unwrap_or("")) {
            return Err(SignInError::State);
        }
        Ok(pending)
    }

    /// Exchange `code` for an access token at the token endpoint.
    pub async fn exchange(&self, code: &str, pending: &Pending, redirect_uri: &str) -> Result<String, SignInError> {
        let endpoints = self.endpoints().await?;
        let mut pairs = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pending.verifier.as_str()),
            ("resource", self.resource.as_str()),
        ];
        let mut request = self
            .http
            .post(&endpoints.token)
            .header(reqwest::header::ACCEPT, "application/json")
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        match &self.client.client_secret {
            // RFC 6749, 2.3.1: both parts form-encoded, then Basic.
            Some(secret) if endpoints.basic => {
                request = request.basic_auth(encode(&self.client.client_id), Some(encode(secret)));
            }
            Some(secret) => {
                pairs.push(("client_id", self.client.client_id.as_str()));
                pairs.push(("client_secret", secret.as_str()));
            }
            None => pairs.push(("client_id", self.client.client_id.as_str())),
        }
        let answer = request.body(form(&pairs)).send().await.map_err(|e| SignInError::TokenRequest(e.to_string()))?;
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let text = |name: &str| body[name].as_str().unwrap_or_default().chars().take(MAX_ISSUER_TEXT).collect();
            let error: String = text("error");
            if error.is_empty() {
                return Err(SignInError::TokenRequest(format!("HTTP {status}")));
            }
            return Err(SignInError::Exchange { error, description: text("error_description") });
        }
        if !body["token_type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("bearer")) {
            return Err(SignInError::TokenRequest("the answer is not a bearer token".into()));
        }
        body["access_token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| SignInError::TokenRequest("the answer holds no access_token".into()))
    }
}

/// The issuer's `error` and `error_description` of a callback, cut.
pub(crate) fn refusal_of(error: &str, description: Option<&str>) -> SignInError {
    SignInError::Refused {
        error: error.chars().take(MAX_ISSUER_TEXT).collect(),
        description: description.unwrap_or_default().chars().take(MAX_ISSUER_TEXT).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_sign_in_opens_only_in_this_process_unchanged_and_before_it_expires() {
        let sealer = Sealer::new().unwrap();
        let pending = Pending { state: random_b64().unwrap(), verifier: random_b64().unwrap() };
        let sealed = sealer.seal(&pending, 1000).unwrap();
        assert!(crate::console::guard::cookie_safe(&sealed), "{sealed}");
        assert!(!sealed.contains(&pending.verifier) && !sealed.contains(&pending.state), "nothing readable");
        assert_eq!(sealer.open(&sealed, 999), Some(pending.clone()));
        assert_eq!(sealer.open(&sealed, 1000), None, "expired");
        assert_ne!(sealer.seal(&pending, 1000).unwrap(), sealed, "a fresh nonce each time");
        let other = Sealer::new().unwrap();
        assert_eq!(other.open(&sealed, 0), None, "another process's key (a restart)");
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(sealer.open(&URL_SAFE_NO_PAD.encode(bytes), 0), None, "changed");
        for junk in ["", "AAAA", "not base64!"] {
            assert_eq!(sealer.open(junk, 0), None);
        }
    }

    #[test]
    fn the_challenge_is_s256_of_the_verifier() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(random_b64().unwrap().len(), 43);
    }

    #[test]
    fn the_state_is_compared_whole() {
        assert!(state_matches("abc", "abc"));
        assert!(!state_matches("abc", "ab"));
        assert!(!state_matches("abc", "abd"));
        assert!(!state_matches("abc", ""));
    }

    #[test]
    fn the_scopes_asked_are_the_required_ones_and_openid_where_the_issuer_offers_it() {
        let required = vec!["mcp:run".to_string(), "openid".to_string()];
        assert_eq!(
            scope_to_ask(&required, &serde_json::json!({"scopes_supported": ["openid", "x"]})),
            "openid mcp:run"
        );
        assert_eq!(scope_to_ask(&required[..1], &serde_json::json!({"scopes_supported": ["x"]})), "mcp:run");
        assert_eq!(scope_to_ask(&[], &serde_json::json!({})), "");
    }

    #[test]
    fn the_client_secret_file_must_hold_one_line_and_its_name_is_in_the_error() {
        let dir = std::env::temp_dir().join(format!("cm-console-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret");
        std::fs::write(&file, "s3cret\n").unwrap();
        let client = ConsoleClient::confidential("console", &file).unwrap();
        assert_eq!(client.client_secret.as_deref(), Some("s3cret"));
        assert!(!format!("{client:?}").contains("s3cret"), "Debug hides the secret");
        std::fs::write(&file, "  \n").unwrap();
        let empty = ConsoleClient::confidential("console", &file).unwrap_err().to_string();
        assert!(empty.contains(&file.display().to_string()) && empty.contains("empty"), "{empty}");
        std::fs::write(&file, "a\nb\n").unwrap();
        assert!(ConsoleClient::confidential("console", &file).is_err());
        let missing = ConsoleClient::confidential("console", &dir.join("absent")).unwrap_err().to_string();
        assert!(missing.contains("absent"), "{missing}");
        assert!(ConsoleClient::public("a b").is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("http://a/b c?d=e&f"), "http%3A%2F%2Fa%2Fb%20c%3Fd%3De%26f");
        assert_eq!(form(&[("scope", "openid mcp:run")]), "scope=openid%20mcp%3Arun");
    }
}
