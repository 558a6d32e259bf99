//! Authentication of the MCP HTTP endpoint, and the identity it gives each
//! client session.
//!
//! Every request to `/mcp` passes one gate ([`gate`], actix-web middleware
//! in front of the MCP transport), in this order:
//!
//! 1. **Origin** ([`origin`]): a request carrying an `Origin` that is not
//!    allowed gets 403 (the `Host` check stays with the transport).
//! 2. **Bearer token**: with `--auth-tokens` ([`static_tokens`]) or an OAuth
//!    issuer ([`oauth`]: JWT access tokens) a request without a valid token
//!    gets 401 and a `WWW-Authenticate: Bearer` challenge
//!    (`error="invalid_token"` when one was sent; with OAuth it names the
//!    Protected Resource Metadata), a token lacking a required scope 403
//!    `insufficient_scope`; with OAuth, a token that cannot be checked
//!    because the issuer's keys could not be loaded gets 503 with
//!    `Retry-After` (`temporarily_unavailable`, saying why). The token
//!    never reaches a log line or an answer; the transport strips the
//!    `Authorization` header before the MCP handlers see the request.
//! 3. **Body** ([`body`]): a `POST`'s body is read here, within `--max-body`
//!    (a larger declared `Content-Length` gets 413 before the body arrives)
//!    and within [`body::BODY_TIMEOUT`] (else 408, the connection closed),
//!    and put back for the transport.
//! 4. **Session** ([`owners`]): a request naming an MCP session
//!    (`Mcp-Session-Id`) goes on only when that session is open and was
//!    opened by this identity; any other id gets 404 before anything is
//!    served, whatever the method and protocol version, and another
//!    identity's session gets the very same answer (so ids cannot be
//!    probed) while the session is not touched. An `initialize` naming a
//!    session is refused (400): a session has one handshake, so its
//!    declared capabilities cannot change. A request that may open a
//!    session (a `POST` without `Mcp-Session-Id`) and a request the
//!    transport serves statelessly (protocol 2026-07-28), whatever session
//!    it names, take a place within `--max-sessions` and
//!    `--max-sessions-per-identity`, or get 429 with a JSON-RPC error
//!    saying which limit.
//!
//! (The syntax of `Host`, and an absolute-form target's authority, are
//! checked before the gate for every path: [`crate::host`].)
//!
//! An OAuth caller's token that passed is kept, sealed, as that identity's
//! current one ([`code_mode_upstream_auth::CallerTokens`], when the
//! frontend is given one): the bridge exchanges it for a token of a remote
//! server whose `auth` block is `token_exchange`, so the token reaches the
//! bridge through the state store, never through a cell or the runner.
//!
//! What passes carries a [`Caller`] (the identity, and the session's place)
//! to the MCP handlers through the request's extensions; the session's
//! actor keeps it for the session's life, names the identity in its cells
//! (so in the audit records of the cell and of every tool call), in its
//! log lines and in its approval questions.
//!
//! Without authentication (`--insecure-no-auth`, or a loopback address)
//! every caller has no identity and the gate still checks origins and
//! limits. Listening on an address that is not loopback without
//! authentication is refused unless `--insecure-no-auth` says so.

pub mod body;
pub mod oauth;
pub mod origin;
pub(crate) mod owners;
pub mod static_tokens;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse};
use rmcp::RoleServer;
use rmcp::service::RequestContext;

use self::oauth::{OAuth, OAuthOptions, Refusal};
pub use self::origin::Origins;
use self::owners::{Lease, Owners};
pub use self::owners::{LimitError, SessionLimits};
pub use self::static_tokens::StaticTokens;

/// Who a client is: a static token's name, or an access token's subject,
/// and the groups it belongs to (the token file's `groups=`, or the claim
/// `--oauth-groups-claim` names), which the web console's approver rules
/// and `--console-operators` match.
///
/// Two identities are the same when their names are: the groups are what
/// the token says now (a reread token file may change them), not part of
/// who owns a session.
#[derive(Clone, Debug)]
pub struct Identity {
    name: Arc<str>,
    groups: Arc<[String]>,
}

impl Identity {
    /// An identity of this name, in no group.
    pub fn new(name: &str) -> Self {
        Self { name: name.into(), groups: Arc::new([]) }
    }

    /// An identity of this name in these groups.
    pub fn with_groups(name: &str, groups: Vec<String>) -> Self {
        Self { name: name.into(), groups: groups.into() }
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// Its groups.
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// Whether it is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

impl PartialEq for Identity {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Identity {}

impl std::hash::Hash for Identity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl PartialOrd for Identity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Identity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name.cmp(&other.name)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Longest group name accepted (from a token file or a claim).
pub const MAX_GROUP: usize = 64;

/// Why a group name is refused, if it is: 1 to [`MAX_GROUP`] characters,
/// none of them white space or a control character, no comma.
pub fn check_group(group: &str) -> Result<(), String> {
    if group.is_empty() || group.chars().count() > MAX_GROUP {
        return Err(format!("a group name must be 1 to {MAX_GROUP} characters"));
    }
    if group.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',') {
        return Err(format!("the group name {group:?} may hold no space, comma or control character"));
    }
    Ok(())
}

/// How an identity is shown in log lines: `anonymous` without
/// authentication.
pub(crate) fn shown(identity: Option<&Identity>) -> &str {
    identity.map_or("anonymous", Identity::as_str)
}

/// Errors of authentication's settings.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A line of the token file is wrong.
    #[error("{}, line {line}: {reason}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Its line (from 1).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The token file cannot be read.
    #[error("cannot read the token file {}: {source}", path.display())]
    TokenFileUnreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An OAuth setting is wrong.
    #[error("{name}: {reason}")]
    OAuthSetting {
        /// The flag.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// An `--allowed-origin` that is not an origin.
    #[error("--allowed-origin {origin:?} is not an origin (`scheme://host[:port]`): {reason}")]
    AllowedOrigin {
        /// The value given.
        origin: String,
        /// What is wrong.
        reason: origin::OriginError,
    },
    /// Listening on the network with nobody checked.
    #[error(
        "refusing to serve MCP on {addr} without authentication: it is not a loopback address, so anyone who \
         reaches the port could run code and call every tool. Give --auth-tokens FILE (see `code-mode token new`) \
         or --oauth-issuer URL with --oauth-resource URI, or --insecure-no-auth to serve it open anyway"
    )]
    Unauthenticated {
        /// The address asked for.
        addr: String,
    },
}

/// How the HTTP endpoint checks its callers.
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// The static token file (`--auth-tokens`).
    pub tokens_file: Option<PathBuf>,
    /// The OAuth issuer and this resource (`--oauth-issuer`,
    /// `--oauth-resource`, `--oauth-scope`).
    pub oauth: Option<OAuthOptions>,
    /// Browser origins allowed (`--allowed-origin`); none by default.
    pub allowed_origins: Vec<String>,
    /// Serve without authentication on an address that is not loopback
    /// (`--insecure-no-auth`).
    pub insecure_no_auth: bool,
    /// Open sessions allowed.
    pub limits: SessionLimits,
    /// Where an OAuth caller's current token is kept for token exchange
    /// (the bridge reads it there); `None`: not kept.
    pub caller_tokens: Option<code_mode_upstream_auth::CallerTokens>,
}

impl AuthOptions {
    /// Whether any authentication is configured.
    pub fn authenticates(&self) -> bool {
        self.tokens_file.is_some() || self.oauth.is_some()
    }
}

/// What the gate learned of a request, handed to the MCP handlers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Caller {
    /// Who it is (`None` without authentication).
    pub identity: Option<Identity>,
    /// The place of the session it may open (a request without a session
    /// id); the session's actor keeps it while it lives.
    pub lease: Option<Lease>,
}

/// The caller of an MCP request, as the gate left it (`None` over stdio).
pub(crate) fn caller_of(context: &RequestContext<RoleServer>) -> Option<Caller> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<rmcp::model::Extensions>()?.get::<Caller>().cloned()
}

/// Copy the gate's [`Caller`] from the actix request into the MCP
/// request's extensions (the transport's `on_request` hook).
pub(crate) fn carry_caller(request: &actix_web::HttpRequest, extensions: &mut rmcp::model::Extensions) {
    if let Some(caller) = request.extensions().get::<Caller>() {
        extensions.insert(caller.clone());
    }
}

/// What checks a bearer token.
#[derive(Debug, Clone)]
enum Verifier {
    /// Nobody is checked.
    Open,
    /// `--auth-tokens`.
    Static(StaticTokens),
    /// An OAuth issuer's access tokens.
    OAuth(OAuth),
}

/// What a token check says.
enum Verdict {
    /// Let in, as this identity.
    Pass(Option<Identity>),
    /// No bearer token.
    Missing,
    /// A token that is not valid here (why, for the log).
    Invalid(String),
    /// A valid token without a required scope.
    Insufficient,
    /// The token cannot be checked now: the OAuth issuer's keys could not
    /// be loaded (why, for the log and the answer).
    Unavailable(String),
}

/// The gate in front of the MCP transport (see the module's doc).
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    verifier: Verifier,
    origins: Origins,
    owners: Owners,
    /// The largest request body (`--max-body`).
    max_body: usize,
    /// Where OAuth callers' tokens are kept for token exchange.
    caller_tokens: Option<code_mode_upstream_auth::CallerTokens>,
}

impl Gate {
    /// The gate of `options`: the token file is read now (a bad one stops
    /// startup) and reread on SIGHUP until `cancel` fires; an OAuth
    /// issuer's keys are fetched by their own task from now until `cancel`
    /// fires (startup does not wait for the issuer).
    pub async fn new(options: &AuthOptions, cancel: tokio_util::sync::CancellationToken) -> Result<Self, AuthError> {
        let verifier = match (&options.tokens_file, &options.oauth) {
            (Some(path), _) => Verifier::Static(StaticTokens::open(path, cancel)?),
            (None, Some(oauth)) => Verifier::OAuth(OAuth::start(oauth.clone(), cancel)?),
            (None, None) => Verifier::Open,
        };
        Ok(Self {
            verifier,
            origins: Origins::new(&options.allowed_origins)
                .map_err(|(origin, reason)| AuthError::AllowedOrigin { origin, reason })?,
            owners: Owners::start(options.limits),
            max_body: body::DEFAULT_MAX_BODY,
            caller_tokens: options.caller_tokens.clone(),
        })
    }

    /// The gate, refusing request bodies over `max` bytes (`None`: the
    /// default, 4 MiB).
    pub fn reading_bodies_up_to(mut self, max: Option<usize>) -> Self {
        self.max_body = max.unwrap_or(body::DEFAULT_MAX_BODY);
        self
    }

    async fn verify(&self, request: &ServiceRequest) -> Verdict {
        self.verify_token(bearer(request)).await
    }

    /// Check a bearer token as `/mcp` does (the web console checks the
    /// token its cookie holds with this, on every request).
    async fn verify_token(&self, token: Option<&str>) -> Verdict {
        match (&self.verifier, token) {
            (Verifier::Open, _) => Verdict::Pass(None),
            (_, None) => Verdict::Missing,
            (Verifier::Static(tokens), Some(token)) => match tokens.identify(token) {
                Some(identity) => Verdict::Pass(Some(identity)),
                None => Verdict::Invalid("no client of the token file has this token".into()),
            },
            (Verifier::OAuth(oauth), Some(token)) => match oauth.verify(token).await {
                Ok(verified) => {
                    self.keep_caller_token(&verified, token).await;
                    Verdict::Pass(Some(verified.identity))
                }
                Err(Refusal::Scope) => Verdict::Insufficient,
                Err(refusal @ Refusal::KeysUnavailable(_)) => Verdict::Unavailable(refusal.to_string()),
                Err(refusal) => Verdict::Invalid(refusal.to_string()),
            },
        }
    }

    /// Keep an OAuth caller's token that passed as its identity's current
    /// one, for token exchange. A store that cannot be written does not
    /// refuse the request (it may not need an exchange): an exchange then
    /// uses the last token kept, or refuses for want of one.
    async fn keep_caller_token(&self, verified: &oauth::Verified, token: &str) {
        let Some(tokens) = &self.caller_tokens else { return };
        if let Err(e) = tokens.remember(verified.identity.as_str(), token, verified.expires_at).await {
            tracing::warn!(identity = %verified.identity, error = %e, "could not keep the caller's OAuth token for token exchange");
        }
    }

    /// The identity of a bearer token, as the gate of `/mcp` would let it
    /// in; `Err` says why not (for the log: never the token). Without
    /// authentication nobody has an identity, so this refuses everything.
    pub async fn identify(&self, token: &str) -> Result<Identity, String> {
        match self.verify_token(Some(token)).await {
            Verdict::Pass(Some(identity)) => Ok(identity),
            Verdict::Pass(None) => Err("clients do not authenticate here".into()),
            Verdict::Missing => Err("no token".into()),
            Verdict::Invalid(why) => Err(why),
            Verdict::Insufficient => Err("the token lacks a required scope".into()),
            Verdict::Unavailable(why) => Err(why),
        }
    }

    /// The OAuth settings, when tokens come from an issuer.
    pub fn oauth(&self) -> Option<&OAuthOptions> {
        match &self.verifier {
            Verifier::OAuth(oauth) => Some(oauth.options()),
            _ => None,
        }
    }

    /// The `WWW-Authenticate` challenge of a refusal (RFC 6750, and RFC
    /// 9728's `resource_metadata` with OAuth).
    fn challenge(&self, error: Option<&str>) -> String {
        let mut value = String::from("Bearer realm=\"code-mode\"");
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        if let Some(oauth) = self.oauth() {
            if error == Some("insufficient_scope") {
                value.push_str(&format!(", scope=\"{}\"", oauth.scopes.join(" ")));
            }
            value.push_str(&format!(", resource_metadata=\"{}\"", oauth.metadata_url()));
        }
        value
    }
}

/// The bearer token of a request, if it sent one (`None` for another
/// scheme or a header that is not text).
fn bearer(request: &ServiceRequest) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The MCP session a request names.
const SESSION_HEADER: &str = "mcp-session-id";

/// The gate as actix-web middleware (`middleware::from_fn`).
pub(crate) async fn gate(
    gate: Gate,
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let origin = match origin::of_request(request.headers()) {
        Ok(origin) => origin,
        Err(why) => {
            tracing::info!(%why, "refused an MCP request whose Origin is not a serialized origin");
            let message = format!("the Origin header is not one serialized origin (RFC 6454): {why}");
            return Ok(refusal(request, StatusCode::FORBIDDEN, json_error("forbidden_origin", &message)));
        }
    };
    if !gate.origins.admits(origin.as_ref(), Some(request.app_config().local_addr())) {
        let origin = origin.map(|o| o.to_string()).unwrap_or_default();
        tracing::info!(%origin, "refused an MCP request from an origin not allowed");
        let message = "this Origin is not allowed (--allowed-origin)";
        return Ok(refusal(request, StatusCode::FORBIDDEN, json_error("forbidden_origin", message)));
    }
    let identity = match gate.verify(&request).await {
        Verdict::Pass(identity) => identity,
        Verdict::Missing => {
            tracing::info!(peer = ?request.peer_addr(), "refused an MCP request without a bearer token");
            let mut answer = refusal(request, StatusCode::UNAUTHORIZED, json_error("unauthorized", "no bearer token"));
            set_challenge(&mut answer, &gate.challenge(None));
            return Ok(answer);
        }
        Verdict::Invalid(why) => {
            tracing::info!(peer = ?request.peer_addr(), %why, "refused an MCP request whose bearer token is not valid");
            let description = "the bearer token is not valid for this server";
            let mut answer = refusal(request, StatusCode::UNAUTHORIZED, json_error("invalid_token", description));
            set_challenge(&mut answer, &gate.challenge(Some("invalid_token")));
            return Ok(answer);
        }
        Verdict::Insufficient => {
            tracing::info!(peer = ?request.peer_addr(), "refused an MCP request whose token lacks a required scope");
            let description = "the access token lacks a scope this server requires";
            let mut answer = refusal(request, StatusCode::FORBIDDEN, json_error("insufficient_scope", description));
            set_challenge(&mut answer, &gate.challenge(Some("insufficient_scope")));
            return Ok(answer);
        }
        Verdict::Unavailable(why) => {
            // Not the token's fault: 503, so the client tries again rather
            // than throwing a good token away.
            tracing::warn!(peer = ?request.peer_addr(), %why, "refused an MCP request: its token cannot be checked yet");
            let mut answer =
                refusal(request, StatusCode::SERVICE_UNAVAILABLE, json_error("temporarily_unavailable", &why));
            answer.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(answer);
        }
    };
    let message = if request.method() == actix_web::http::Method::POST {
        match body::read(&mut request, gate.max_body).await {
            Ok(bytes) => {
                if crate::json_reads::wants_json(&bytes, request.headers()) {
                    request.extensions_mut().insert(crate::json_reads::AnswerAsJson);
                }
                Some(body::classify(&bytes, request.headers()))
            }
            Err(refused) => return Ok(body_refusal(request, &refused)),
        }
    } else {
        None
    };
    let session = request.headers().get(SESSION_HEADER).map(|v| v.to_str().map(str::to_string));
    let opens = match session {
        // A session id is a claim: only an id of a session open now, opened
        // by this identity, goes on. Another identity's session is answered
        // as an id nobody opened, so ids cannot be probed.
        Some(session) => {
            let owner = match &session {
                Ok(session) => gate.owners.owner(session).await,
                Err(_) => None,
            };
            match owner {
                Some(owner) if owner == identity => {}
                Some(owner) => {
                    tracing::warn!(
                        identity = shown(identity.as_ref()),
                        owner = shown(owner.as_ref()),
                        "refused a request naming an MCP session another identity opened"
                    );
                    return Ok(unknown_session(request));
                }
                None => {
                    tracing::info!(
                        identity = shown(identity.as_ref()),
                        method = %request.method(),
                        "refused a request naming an MCP session that is not open"
                    );
                    return Ok(unknown_session(request));
                }
            }
            match message {
                Some(body::Message::Initialize) => {
                    tracing::info!(identity = shown(identity.as_ref()), "refused a second initialize on a session");
                    let message = "this MCP session is already initialized: a session has one handshake; open a new \
                                   session (a request without Mcp-Session-Id) to initialize again";
                    return Ok(refusal(request, StatusCode::BAD_REQUEST, jsonrpc_error(INVALID_REQUEST, message)));
                }
                // Served outside the session it names: a place of its own.
                Some(body::Message::Stateless) => true,
                _ => false,
            }
        }
        None => message.is_some(),
    };
    let mut lease = None;
    if opens {
        match gate.owners.reserve(identity.clone()).await {
            Ok(granted) => lease = Some(granted),
            Err(limit) => {
                tracing::info!(identity = shown(identity.as_ref()), %limit, "refused a new MCP session");
                let refused = jsonrpc_error(LIMIT_ERROR_CODE, &limit.to_string());
                return Ok(refusal(request, StatusCode::TOO_MANY_REQUESTS, refused));
            }
        }
    }
    request.extensions_mut().insert(Caller { identity, lease: lease.clone() });
    let response = next.call(request).await?;
    if let Some(lease) = &lease
        && let Some(session) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())
    {
        gate.owners.bind(lease, session.to_string()).await;
    }
    Ok(response.map_into_left_body())
}

/// Answer `request` with `status` and a JSON body, without passing it on.
fn refusal<B>(request: ServiceRequest, status: StatusCode, body: serde_json::Value) -> ServiceResponse<EitherBody<B>> {
    let answer = HttpResponse::build(status).content_type("application/json").body(body.to_string());
    request.into_response(answer).map_into_right_body()
}

/// Put a `WWW-Authenticate` challenge on a refusal.
fn set_challenge<B>(answer: &mut ServiceResponse<B>, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        answer.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
}

/// An OAuth-style error body: a code and a description, never the token.
fn json_error(code: &str, description: &str) -> serde_json::Value {
    serde_json::json!({"error": code, "error_description": description})
}

/// A JSON-RPC error body (the request's id is not read).
fn jsonrpc_error(code: i64, message: &str) -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
}

/// JSON-RPC's code of an invalid request.
const INVALID_REQUEST: i64 = -32600;

/// The one answer to a request naming a session that is not open, or that
/// another identity opened: 404, as MCP asks for an unknown session (the
/// client starts a new one).
///
/// A resume (`GET` with a `Last-Event-ID` naming a request) is answered
/// instead with that request's error: the frontend that held it stopped
/// ([`crate::resumable`]); the same answer whoever's the session was.
fn unknown_session<B>(request: ServiceRequest) -> ServiceResponse<EitherBody<B>> {
    if let Some(event) = crate::resumable::lost_call(request.method(), request.headers()) {
        tracing::info!("answered the resume of a request this frontend does not hold: its frontend stopped");
        let answer = HttpResponse::Ok()
            .content_type("text/event-stream")
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .body(event);
        return request.into_response(answer).map_into_right_body();
    }
    let message = "no MCP session of this client is open under this Mcp-Session-Id: open a new session (a request \
                   without Mcp-Session-Id)";
    refusal(request, StatusCode::NOT_FOUND, json_error("unknown_session", message))
}

/// The answer to a body that was not read: 413 or 408 (the connection is
/// closed then, so what is left of the body is never waited for), or 400.
fn body_refusal<B>(request: ServiceRequest, refused: &body::BodyError) -> ServiceResponse<EitherBody<B>> {
    let (status, code) = match refused {
        body::BodyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        body::BodyError::Slow { .. } => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
        body::BodyError::Broken(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
    };
    tracing::info!(peer = ?request.peer_addr(), why = %refused, "refused an MCP request's body");
    let mut answer = refusal(request, status, json_error(code, &refused.to_string()));
    answer.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    answer
}

/// The JSON-RPC error code of a refusal by a limit.
pub const LIMIT_ERROR_CODE: i64 = -32001;
