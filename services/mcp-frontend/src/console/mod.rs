//! The web console: where a team approves tool calls whose policy rule
//! names approvers (`"approvers": ["alice", "group:security"]`), and where
//! operators look at this frontend's sessions, its last cells and the
//! audit log's tail.
//!
//! Served under `/console` on the same actix app, address, TLS and `Host`
//! check as `/mcp`, and only when clients authenticate (static tokens or
//! OAuth): a viewer is an [`Identity`] with its groups, proved by the same
//! bearer token it uses for MCP. Server-rendered HTML ([`html`]), no
//! JavaScript.
//!
//! - `GET /console/login` asks for the token (and, with an OAuth issuer and
//!   `--console-client-id`, offers "Sign in with" the issuer: [`oauth`]);
//!   `POST /console/login` checks
//!   it with the gate of `/mcp` and [starts the session](Console::start_session):
//!   a cookie holding the token ([`guard`]: HttpOnly, SameSite=Strict,
//!   Path=/console, Secure over TLS). Nothing is stored server-side, so a
//!   restart or another replica accepts the cookie; every request checks
//!   the token again, so an expired or revoked one logs the viewer out.
//!   `POST /console/logout` removes the cookie.
//! - `GET /console`: the calls waiting that the viewer may decide, each
//!   with Approve and Decline, the recent decisions, how many questions
//!   wait for others; it refreshes every 5 s.
//! - `GET /console/approvals/{id}`: one question (the link its client was
//!   given); `POST` there decides it.
//! - `GET /console/operations`: for the `--console-operators` group only:
//!   the bridges' last config reloads (one that did not apply first), this
//!   frontend's sessions, the cells running now (held ones marked, their
//!   held time not counted as run time), its last cells, the runners, the
//!   audit log's tail, the connected accounts per server.
//! - `GET /console/connect/{flow}`, `GET /console/connect/callback`,
//!   `GET /console/accounts`, `POST /console/accounts/disconnect`: an
//!   identity connecting its own account at a wrapped server, and its
//!   accounts ([`accounts`]). A connect link opened before logging in comes
//!   back to itself after the login (`?next=`, only such a console path).
//!
//! The bridges own the questions: the console asks them on
//! [`subjects::APPROVALS`] ([`ConsoleRequest`] -> [`ConsoleReply`]), and
//! they decide who may see and decide what (the rule's approvers,
//! self-approval) and write the audit records. This module owns no state.
//!
//! Every POST carries a `csrf` field, the [`guard::csrf_of`] the cookie's
//! token, compared in constant time, and an `Origin`, if it sends one, of
//! the console itself; otherwise 403. Every response carries a strict
//! Content-Security-Policy, `nosniff`, `same-origin` referrers and `no-store`
//! ([`guard::HEADERS`]).

pub mod accounts;
pub mod guard;
pub mod html;
pub mod oauth;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::middleware::{DefaultHeaders, Next, from_fn};
use actix_web::{HttpRequest, HttpResponse, web};
use code_mode_core::bus::BusError;
use code_mode_proto::{ConsoleReply, ConsoleRequest, Viewer, subjects};

use self::html::{Frame, SHORT, escape, shown};
pub use self::oauth::{ConsoleClient, ConsoleClientError};
use self::oauth::{OAuthSignIn, SignInError};
use crate::auth::{Gate, Identity};
use crate::{FrontendFactory, Shared};

/// Where the console is served.
pub const PATH: &str = "/console";
/// The group whose members see the operations view, by default.
pub const DEFAULT_OPERATORS: &str = "operators";
/// How long one request to the bridges may take.
const BRIDGE_TIMEOUT: Duration = Duration::from_secs(5);
/// Audit records the operations view shows.
const AUDIT_LINES: u32 = 20;
/// Longest note a decider may write, in characters.
const MAX_NOTE: usize = 500;
/// Largest form body accepted.
const MAX_FORM: usize = 64 * 1024;

/// The console's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleOptions {
    /// Members of this group see the operations view
    /// (`--console-operators`).
    pub operators: String,
    /// Where people reach this server (`--public-url`, e.g.
    /// `https://mcp.example.com`): the links given to clients start with
    /// it. `None`: `http(s)://` and the address listened on.
    pub public_url: Option<String>,
    /// The console as an OAuth client of the issuer `/mcp` takes tokens
    /// from (`--console-client-id`, `--console-client-secret-file`): the
    /// login page then offers signing in there ([`oauth`]). `None`, or no
    /// OAuth issuer: only the token form.
    pub oauth_client: Option<ConsoleClient>,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        Self { operators: DEFAULT_OPERATORS.into(), public_url: None, oauth_client: None }
    }
}

/// The base URL of a server: `public_url` without a trailing `/`, else the
/// scheme and the address it listens on.
pub fn base_url(public_url: Option<&str>, addr: std::net::SocketAddr, tls: bool) -> String {
    match public_url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => format!("{}://{addr}", if tls { "https" } else { "http" }),
    }
}

/// The console's page of question `id`, when this process serves the
/// console.
pub(crate) fn approval_link(shared: &Shared, id: &str) -> Option<String> {
    shared.console_base.get().map(|base| format!("{base}{PATH}/approvals/{}", html::path_segment(id)))
}

/// The console of one HTTP server. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Console {
    inner: Arc<Inner>,
}

struct Inner {
    gate: Gate,
    shared: Arc<Shared>,
    operators: String,
    secure: bool,
    allowed_hosts: Vec<String>,
    /// Signing in through the OAuth issuer, when offered.
    sign_in: Option<OAuthSignIn>,
}

/// What a page knows of its viewer.
struct Seen {
    identity: Identity,
    csrf: String,
    operator: bool,
}

impl Seen {
    fn viewer(&self) -> Viewer {
        Viewer { name: self.identity.as_str().to_string(), groups: self.identity.groups().to_vec() }
    }

    fn frame(&self, refresh: bool) -> Frame<'_> {
        Frame { viewer: Some(self.identity.as_str()), csrf: &self.csrf, operator: self.operator, refresh }
    }
}

impl Console {
    /// The console of a server whose clients pass `gate`; `secure` when it
    /// serves HTTPS; `allowed_hosts` as `--allowed-host` (empty: loopback).
    pub(crate) fn new(
        factory: &FrontendFactory,
        gate: Gate,
        options: &ConsoleOptions,
        allowed_hosts: Vec<String>,
        secure: bool,
    ) -> Self {
        let sign_in = match (&options.oauth_client, gate.oauth()) {
            (Some(client), Some(oauth)) => OAuthSignIn::new(client.clone(), oauth),
            (Some(_), None) => {
                tracing::error!(
                    "a console OAuth client is set but tokens are not checked by an OAuth issuer: only the token \
                     form is offered"
                );
                None
            }
            (None, _) => None,
        };
        let inner = Inner {
            gate,
            shared: factory.shared.clone(),
            operators: options.operators.clone(),
            secure,
            allowed_hosts,
            sign_in,
        };
        Self { inner: Arc::new(inner) }
    }

    /// Mount the console's routes on an app.
    pub(crate) fn configure(&self, config: &mut web::ServiceConfig) {
        let mut headers = DefaultHeaders::new();
        for (name, value) in guard::HEADERS {
            headers = headers.add((name, value));
        }
        let console = self.clone();
        let scope = web::scope(PATH)
            .app_data(web::Data::new(self.clone()))
            .app_data(web::PayloadConfig::new(MAX_FORM))
            .wrap(from_fn(move |request, next| host_check(console.clone(), request, next)))
            .wrap(headers)
            .route("", web::get().to(board))
            .route("/", web::get().to(board))
            .route("/style.css", web::get().to(style))
            .route("/login", web::get().to(login_form))
            .route("/login", web::post().to(login))
            .route("/login/oauth", web::get().to(sign_in_start))
            .route("/login/callback", web::get().to(sign_in_callback))
            .route("/logout", web::post().to(logout))
            .route("/approvals/{id}", web::get().to(question))
            .route("/approvals/{id}", web::post().to(decide))
            .route("/operations", web::get().to(operations))
            .route("/connect/callback", web::get().to(accounts::callback))
            .route("/connect/{flow}", web::get().to(accounts::connect))
            .route("/accounts", web::get().to(accounts::accounts))
            .route("/accounts/disconnect", web::post().to(accounts::disconnect))
            .default_service(web::to(not_found));
        config.service(scope);
    }

    /// Start a console session for a bearer token already verified (by
    /// `POST /console/login`, or a later OAuth authorization-code login
    /// once it has exchanged its code): the answer sets the cookie and
    /// sends the browser to the board.
    pub(crate) fn start_session(&self, token: &str) -> HttpResponse {
        HttpResponse::SeeOther()
            .insert_header((header::LOCATION, PATH))
            .append_header((header::SET_COOKIE, guard::session_cookie(token, self.inner.secure)))
            .append_header((header::SET_COOKIE, guard::cookie(guard::LOGIN_COOKIE, "", 0, self.inner.secure)))
            .finish()
    }

    /// [`start_session`](Self::start_session) at the end of a redirect
    /// from another site (the OAuth callback), or before one (a login
    /// going on to a connect link): a page that sends the
    /// browser on to the board itself (a meta refresh, and a link), rather
    /// than a 303. After a chain of redirects that began on the issuer's
    /// site a browser would not send the SameSite=Strict session cookie to
    /// the board; a navigation started by the console's own page does.
    /// `to`: the console path to go on to (a connect link the sign-in
    /// began from, [`accounts::return_path`]), else the board.
    fn start_session_from_elsewhere(&self, token: &str, identity: &Identity, to: Option<&str>) -> HttpResponse {
        let answer = self.start_session(token);
        let to = to.unwrap_or(PATH);
        let body = format!(
            "<p class=\"done\">Signed in as <strong>{}</strong>.</p>\n<p><a href=\"{}\">Go on</a></p>\n",
            shown(identity.as_str(), SHORT),
            escape(to),
        );
        let frame = Frame { viewer: None, csrf: "", operator: false, refresh: false };
        let page = html::page_going_to("Signed in", &frame, &body, to);
        let mut done = html_answer(StatusCode::OK, page);
        for cookie in answer.headers().get_all(header::SET_COOKIE) {
            done.headers_mut().append(header::SET_COOKIE, cookie.clone());
        }
        done
    }

    /// The viewer of a request, by its cookie's token checked now; else
    /// the answer sending it to the login page (removing a cookie whose
    /// token no longer passes).
    async fn seen(&self, request: &HttpRequest) -> Result<(Seen, String), HttpResponse> {
        let Some(token) = guard::cookie_of(request, guard::COOKIE) else {
            return Err(to_login(None));
        };
        match self.inner.gate.identify(&token).await {
            Ok(identity) => {
                let operator = identity.in_group(&self.inner.operators);
                Ok((Seen { identity, csrf: guard::csrf_of(&token), operator }, token))
            }
            Err(why) => {
                tracing::info!(%why, "a console cookie's token no longer passes: logged out");
                Err(to_login(Some(guard::cookie(guard::COOKIE, "", 0, self.inner.secure))))
            }
        }
    }

    /// The viewer of a POST: its `Origin` (if any) the console's, its
    /// cookie present and its form's `csrf` derived from it (else 403),
    /// then its token checked as for a page.
    async fn seen_posting(
        &self,
        request: &HttpRequest,
        form: &HashMap<String, String>,
    ) -> Result<(Seen, String), HttpResponse> {
        if !self.origin_ok(request) {
            return Err(forbidden("This form was not sent from the console's own pages (Origin)."));
        }
        let Some(token) = guard::cookie_of(request, guard::COOKIE) else {
            return Err(forbidden("You are not logged in to the console."));
        };
        if !guard::csrf_matches(&token, form.get("csrf").map_or("", String::as_str)) {
            return Err(forbidden("This form's CSRF value is missing or wrong: reload the page and try again."));
        }
        self.seen(request).await
    }

    fn origin_ok(&self, request: &HttpRequest) -> bool {
        let base = self.inner.shared.console_base.get().map(String::as_str);
        let ok = guard::origin_allowed(request, base, self.inner.secure);
        if !ok {
            tracing::info!("refused a console form from another origin");
        }
        ok
    }

    /// Ask the bridges.
    async fn ask(&self, request: &ConsoleRequest) -> Result<ConsoleReply, BusError> {
        self.inner.shared.bus.call::<ConsoleRequest, ConsoleReply>(subjects::APPROVALS, request, BRIDGE_TIMEOUT).await
    }
}

/// Refuse a request whose `Host` the server is not reached by (as the MCP
/// transport does for `/mcp`), or whose `Origin` is not one serialized
/// origin (as `/mcp` does; a POST's must moreover be the console's own).
async fn host_check(
    console: Console,
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    if !guard::host_allowed(request.request(), &console.inner.allowed_hosts) {
        tracing::info!("refused a console request for a Host not allowed");
        let answer = HttpResponse::Forbidden()
            .content_type("text/plain; charset=utf-8")
            .body("this Host is not allowed (--allowed-host)");
        return Ok(request.into_response(answer).map_into_right_body());
    }
    if let Err(why) = crate::auth::origin::of_request(request.headers()) {
        tracing::info!(%why, "refused a console request whose Origin is not a serialized origin");
        let answer = forbidden(&format!("The Origin header is not one serialized origin (RFC 6454): {why}."));
        return Ok(request.into_response(answer).map_into_right_body());
    }
    Ok(next.call(request).await?.map_into_left_body())
}

/// An HTML answer.
fn html_answer(status: StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status).content_type("text/html; charset=utf-8").body(body)
}

/// 303 to the login page, removing a cookie if `clear` says so.
fn to_login(clear: Option<String>) -> HttpResponse {
    let mut answer = HttpResponse::SeeOther();
    answer.insert_header((header::LOCATION, format!("{PATH}/login")));
    if let Some(clear) = clear {
        answer.append_header((header::SET_COOKIE, clear));
    }
    answer.finish()
}

/// A 403 page saying why (`why`: our own text).
fn forbidden(why: &str) -> HttpResponse {
    let frame = Frame { viewer: None, csrf: "", operator: false, refresh: false };
    html_answer(StatusCode::FORBIDDEN, html::page("Forbidden", &frame, &html::message(&escape(why))))
}

/// The page of a failed request to the bridges.
fn bridge_failed(seen: &Seen, error: &BusError) -> HttpResponse {
    let (status, title, text) = match error {
        BusError::NoResponders { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "No bridge answers",
            "No bridge answers the console: the questions live in the bridges, so nothing can be shown or decided \
             until one runs."
                .to_string(),
        ),
        BusError::Timeout { after, .. } => (
            StatusCode::GATEWAY_TIMEOUT,
            "The bridge is slow",
            format!("No bridge answered within {} s: try again.", after.as_secs()),
        ),
        BusError::Remote { error, .. } => {
            (StatusCode::CONFLICT, "Refused", format!("The bridge refused: {}", shown(&error.message, 1000)))
        }
        other => {
            tracing::warn!(error = %other, "the console's request to the bridges failed");
            (StatusCode::BAD_GATEWAY, "The bridge failed", "The request to the bridges failed.".to_string())
        }
    };
    let body = format!("<p class=\"refusal\">{text}</p>\n<p><a href=\"{PATH}\">Back to the waiting calls</a></p>\n");
    html_answer(status, html::page(title, &seen.frame(false), &body))
}

/// The fields of a form body (`application/x-www-form-urlencoded`), each
/// name once (the last wins); a body that is not such a form has none.
fn form_fields(body: &[u8]) -> HashMap<String, String> {
    let Ok(text) = std::str::from_utf8(body) else { return HashMap::new() };
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name), percent_decode(value))
        })
        .collect()
}

/// `+` as a space and `%XX` as its byte; a bad escape stays as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

async fn style() -> HttpResponse {
    HttpResponse::Ok().content_type("text/css; charset=utf-8").body(include_str!("style.css"))
}

async fn not_found() -> HttpResponse {
    let frame = Frame { viewer: None, csrf: "", operator: false, refresh: false };
    html_answer(StatusCode::NOT_FOUND, html::page("Not found", &frame, &html::message("No such console page.")))
}

/// `GET /console/login`: the form, with a fresh login cookie its CSRF
/// value derives from; a viewer already logged in goes to the board.
async fn login_form(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let query = form_fields(request.query_string().as_bytes());
    let next = query.get("next").and_then(|n| accounts::return_path(n));
    if let Some(token) = guard::cookie_of(&request, guard::COOKIE)
        && console.inner.gate.identify(&token).await.is_ok()
    {
        return HttpResponse::SeeOther().insert_header((header::LOCATION, next.unwrap_or(PATH))).finish();
    }
    login_page(&console, StatusCode::OK, None, next)
}

/// The login form; `next`: the console path to go to once logged in (a
/// connect link), already checked by [`accounts::return_path`].
fn login_page(console: &Console, status: StatusCode, error: Option<&str>, next: Option<&str>) -> HttpResponse {
    let Some(secret) = guard::random_hex() else {
        return html_answer(StatusCode::INTERNAL_SERVER_ERROR, "no randomness from the system".into());
    };
    let issuer = console.inner.sign_in.as_ref().map(OAuthSignIn::issuer);
    let mut answer = html_answer(status, html::login(&guard::csrf_of(&secret), error, issuer, next));
    if let Ok(value) = header::HeaderValue::from_str(&guard::cookie(
        guard::LOGIN_COOKIE,
        &secret,
        guard::COOKIE_MAX_AGE,
        console.inner.secure,
    )) {
        answer.headers_mut().append(header::SET_COOKIE, value);
    }
    answer
}

/// `POST /console/login`: check the pasted token as `/mcp` would, then
/// start the session.
async fn login(console: web::Data<Console>, request: HttpRequest, body: web::Bytes) -> HttpResponse {
    let form = form_fields(&body);
    if !console.origin_ok(&request) {
        return forbidden("This form was not sent from the console's own pages (Origin).");
    }
    let Some(secret) = guard::cookie_of(&request, guard::LOGIN_COOKIE) else {
        return forbidden("The login form has expired: open the login page again.");
    };
    if !guard::csrf_matches(&secret, form.get("csrf").map_or("", String::as_str)) {
        return forbidden("This form's CSRF value is missing or wrong: open the login page again.");
    }
    let token = form.get("token").map_or("", |t| t.trim());
    let next = form.get("next").and_then(|n| accounts::return_path(n));
    if !guard::cookie_safe(token) {
        let why = Some("That is not a token this console can take.");
        return login_page(&console, StatusCode::UNAUTHORIZED, why, next);
    }
    match console.inner.gate.identify(token).await {
        Ok(identity) => {
            tracing::info!(identity = %identity, "console login");
            match next {
                // On to a connect link, which sends the browser on to
                // another site: by a page of the console's own, since the
                // CSP's `form-action 'self'` would stop a redirect chain
                // that began with this form's POST from leaving the site.
                Some(next) => console.start_session_from_elsewhere(token, &identity, Some(next)),
                None => console.start_session(token),
            }
        }
        Err(why) => {
            tracing::info!(%why, "refused a console login");
            login_page(&console, StatusCode::UNAUTHORIZED, Some("That token is not valid here."), next)
        }
    }
}

/// The console's `redirect_uri`: its public base and the callback path.
fn redirect_uri(console: &Console) -> String {
    let base = console.inner.shared.console_base.get().map_or("", String::as_str);
    format!("{base}{}", oauth::CALLBACK_PATH)
}

/// `GET /console/login/oauth`: start signing in at the issuer (see
/// [`oauth`]).
async fn sign_in_start(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let Some(sign_in) = &console.inner.sign_in else { return not_found().await };
    let query = form_fields(request.query_string().as_bytes());
    let next = query.get("next").and_then(|n| accounts::return_path(n));
    let ttl = oauth::SIGN_IN_TTL.as_secs();
    match sign_in.start(&redirect_uri(&console)).await {
        Ok((location, sealed)) => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, location))
            .append_header((header::SET_COOKIE, guard::sign_in_cookie(&sealed, ttl, console.inner.secure)))
            .append_header((header::SET_COOKIE, guard::next_cookie(next.unwrap_or(""), ttl, console.inner.secure)))
            .finish(),
        Err(e) => sign_in_failed(&console, &e),
    }
}

/// `GET /console/login/callback?code&state` (or `?error`): check the state
/// against the sign-in cookie, exchange the code, check the token as
/// `/mcp` would, start the session. The sign-in cookie goes in every case.
async fn sign_in_callback(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let Some(sign_in) = &console.inner.sign_in else { return not_found().await };
    let query = form_fields(request.query_string().as_bytes());
    let field = |name: &str| query.get(name).map(String::as_str).filter(|v| !v.is_empty());
    let outcome = async {
        if let Some(error) = field("error") {
            return Err(oauth::refusal_of(error, field("error_description")));
        }
        // RFC 9207: an issuer that names itself must be ours.
        if field("iss").is_some_and(|iss| iss != sign_in.issuer()) {
            return Err(SignInError::OtherIssuer);
        }
        let cookie = guard::cookie_of(&request, oauth::COOKIE);
        let pending = sign_in.pending(cookie.as_deref(), field("state"))?;
        let code = field("code").ok_or(SignInError::NoCode)?;
        let token = sign_in.exchange(code, &pending, &redirect_uri(&console)).await?;
        if !guard::cookie_safe(&token) {
            return Err(SignInError::Token("it cannot be kept in a cookie (too long or not cookie-safe)".into()));
        }
        let identity = console.inner.gate.identify(&token).await.map_err(SignInError::Token)?;
        Ok((token, identity))
    }
    .await;
    let mut answer = match outcome {
        Ok((token, identity)) => {
            tracing::info!(identity = %identity, "console login through the OAuth issuer");
            let next = guard::cookie_of(&request, guard::NEXT_COOKIE);
            console.start_session_from_elsewhere(&token, &identity, next.as_deref().and_then(accounts::return_path))
        }
        Err(e) => sign_in_failed(&console, &e),
    };
    for clear in [guard::sign_in_cookie("", 0, console.inner.secure), guard::next_cookie("", 0, console.inner.secure)] {
        if let Ok(clear) = header::HeaderValue::from_str(&clear) {
            answer.headers_mut().append(header::SET_COOKIE, clear);
        }
    }
    answer
}

/// The page of a sign-in that did not end in a session; every text from
/// the issuer or the request is escaped.
fn sign_in_failed(console: &Console, error: &SignInError) -> HttpResponse {
    tracing::info!(%error, "a console sign-in through the OAuth issuer failed");
    let issuer = console.inner.sign_in.as_ref().map_or("", OAuthSignIn::issuer);
    let (status, text) = match error {
        SignInError::Metadata(_) => (
            StatusCode::BAD_GATEWAY,
            format!(
                "The issuer {} cannot be reached or does not describe itself: try again later.",
                shown(issuer, SHORT)
            ),
        ),
        SignInError::Refused { error, description } => (
            StatusCode::BAD_REQUEST,
            format!(
                "The issuer did not sign you in: <code>{}</code>{}",
                shown(error, SHORT),
                if description.is_empty() { String::new() } else { format!(" ({})", shown(description, 300)) }
            ),
        ),
        SignInError::NoSignIn => (
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser, has taken more than 10 minutes, or the console restarted \
             meanwhile: sign in again."
                .to_string(),
        ),
        SignInError::State => (
            StatusCode::BAD_REQUEST,
            "This answer of the issuer does not belong to the sign-in this browser started (state): sign in again."
                .to_string(),
        ),
        SignInError::OtherIssuer => (
            StatusCode::BAD_REQUEST,
            "This answer names another issuer than the console's (iss): sign in again.".to_string(),
        ),
        SignInError::NoCode => (StatusCode::BAD_REQUEST, "The issuer sent no code: sign in again.".to_string()),
        SignInError::Exchange { error, description } => (
            StatusCode::BAD_REQUEST,
            format!(
                "The issuer refused to give a token for this code: <code>{}</code>{}. A code serves once: sign in \
                 again.",
                shown(error, SHORT),
                if description.is_empty() { String::new() } else { format!(" ({})", shown(description, 300)) }
            ),
        ),
        SignInError::TokenRequest(_) => (
            StatusCode::BAD_GATEWAY,
            "The issuer's token endpoint could not be asked or gave no usable token: try again.".to_string(),
        ),
        SignInError::Token(why) => (
            StatusCode::FORBIDDEN,
            format!(
                "The issuer signed you in, but its token is not accepted here: {}. Ask whoever runs this server.",
                shown(why, SHORT)
            ),
        ),
    };
    let body = format!("<p class=\"refusal\">{text}</p>\n<p><a href=\"{PATH}/login\">Back to the login page</a></p>\n");
    let frame = Frame { viewer: None, csrf: "", operator: false, refresh: false };
    html_answer(status, html::page("Not signed in", &frame, &body))
}

/// `POST /console/logout`: remove the cookie.
async fn logout(console: web::Data<Console>, request: HttpRequest, body: web::Bytes) -> HttpResponse {
    let form = form_fields(&body);
    if let Err(answer) = console.seen_posting(&request, &form).await {
        return answer;
    }
    to_login(Some(guard::cookie(guard::COOKIE, "", 0, console.inner.secure)))
}

/// `GET /console`: the board.
async fn board(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let (seen, _) = match console.seen(&request).await {
        Ok(seen) => seen,
        Err(answer) => return answer,
    };
    match console.ask(&ConsoleRequest::Board { viewer: seen.viewer() }).await {
        Ok(ConsoleReply::Board { waiting, others, recent }) => {
            let body = html::board(&waiting, others, &recent, &seen.csrf);
            html_answer(StatusCode::OK, html::page("Calls waiting for you", &seen.frame(true), &body))
        }
        Ok(_) => bridge_failed(&seen, &BusError::Transport("an answer of another kind".into())),
        Err(e) => bridge_failed(&seen, &e),
    }
}

/// `GET /console/approvals/{id}`: one question, if it still waits for the
/// viewer; else what became of it, as far as the viewer may know.
async fn question(console: web::Data<Console>, request: HttpRequest, id: web::Path<String>) -> HttpResponse {
    let (seen, _) = match console.seen(&request).await {
        Ok(seen) => seen,
        Err(answer) => return answer,
    };
    let id = id.into_inner();
    let (waiting, recent) = match console.ask(&ConsoleRequest::Board { viewer: seen.viewer() }).await {
        Ok(ConsoleReply::Board { waiting, recent, .. }) => (waiting, recent),
        Ok(_) => return bridge_failed(&seen, &BusError::Transport("an answer of another kind".into())),
        Err(e) => return bridge_failed(&seen, &e),
    };
    let title = "Approval question";
    if let Some(call) = waiting.iter().find(|c| c.id == id) {
        let body = html::waiting_call(call, &seen.csrf, html::now_ms());
        return html_answer(StatusCode::OK, html::page(title, &seen.frame(true), &body));
    }
    let body = match recent.iter().find(|d| d.id == id) {
        Some(decision) => format!(
            "<p class=\"done\">This question has ended: <strong>{}</strong>{} at {}.</p>\n{}",
            shown(&decision.outcome, SHORT),
            decision.by.as_deref().map(|by| format!(" by {}", shown(by, SHORT))).unwrap_or_default(),
            html::utc(decision.at_ms),
            html::decisions(std::slice::from_ref(decision)),
        ),
        None => format!(
            "<p>The question <code>{}</code> is not waiting for you: it was decided or has ended, or it is not \
             yours to decide.</p>\n",
            shown(&id, SHORT)
        ),
    };
    html_answer(StatusCode::OK, html::page(title, &seen.frame(false), &format!("{body}{}", html::message(""))))
}

/// `POST /console/approvals/{id}`: approve or decline it.
async fn decide(
    console: web::Data<Console>,
    request: HttpRequest,
    id: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let form = form_fields(&body);
    let (seen, _) = match console.seen_posting(&request, &form).await {
        Ok(seen) => seen,
        Err(answer) => return answer,
    };
    let approve = match form.get("decision").map(String::as_str) {
        Some("approve") => true,
        Some("decline") => false,
        _ => {
            let body = html::message("Choose Approve or Decline.");
            return html_answer(StatusCode::BAD_REQUEST, html::page("No decision", &seen.frame(false), &body));
        }
    };
    let note = html::cut(form.get("note").map_or("", |n| n.trim()), MAX_NOTE);
    let id = id.into_inner();
    let asked = ConsoleRequest::Decide { viewer: seen.viewer(), id: id.clone(), approve, note };
    match console.ask(&asked).await {
        Ok(ConsoleReply::Decided(decision)) => {
            tracing::info!(identity = %seen.identity, question = %html::cut(&id, 80), outcome = %decision.outcome, "console decision");
            let body = format!(
                "<p class=\"done\">Done: <strong>{}</strong>.</p>\n{}{}",
                shown(&decision.outcome, SHORT),
                html::decisions(std::slice::from_ref(&decision)),
                html::message(""),
            );
            html_answer(StatusCode::OK, html::page("Decided", &seen.frame(false), &body))
        }
        Ok(_) => bridge_failed(&seen, &BusError::Transport("an answer of another kind".into())),
        Err(e) => bridge_failed(&seen, &e),
    }
}

/// Why a bridge's answer says nothing (empty when it does).
fn unknown(answer: &Result<ConsoleReply, BusError>) -> String {
    match answer {
        Ok(ConsoleReply::Runners { .. } | ConsoleReply::Sessions { .. } | ConsoleReply::Reloads { .. }) => {
            String::new()
        }
        Ok(_) => "the bridge answered with another kind of reply".into(),
        Err(BusError::NoResponders { .. }) => "no bridge answers".into(),
        Err(e) => e.to_string(),
    }
}

/// `GET /console/operations`: operators only.
async fn operations(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let (seen, _) = match console.seen(&request).await {
        Ok(seen) => seen,
        Err(answer) => return answer,
    };
    if !seen.operator {
        let text = format!(
            "The operations view is for members of the group <code>{}</code>.",
            shown(&console.inner.operators, SHORT)
        );
        return html_answer(
            StatusCode::FORBIDDEN,
            html::page("Operators only", &seen.frame(false), &html::message(&text)),
        );
    }
    let snapshot = console.inner.shared.activity.snapshot();
    let audit = console.ask(&ConsoleRequest::Audit { lines: AUDIT_LINES }).await;
    let why;
    let audit = match &audit {
        Ok(ConsoleReply::Audit { records, chain }) => Ok((records.as_slice(), chain.as_str())),
        Ok(_) => Err("the bridge answered with another kind of reply"),
        Err(BusError::NoResponders { .. }) => Err("no bridge answers"),
        Err(e) => {
            why = e.to_string();
            Err(why.as_str())
        }
    };
    let runners = console.ask(&ConsoleRequest::Runners).await;
    let ids = snapshot.sessions.iter().map(|s| s.id.clone()).collect();
    let tainted = console.ask(&ConsoleRequest::Sessions { ids }).await;
    let reloads = console.ask(&ConsoleRequest::Reloads).await;
    let counts = accounts::counts(&console).await;
    let (runners_why, tainted_why, reloads_why) = (unknown(&runners), unknown(&tainted), unknown(&reloads));
    let bridges = html::FromBridges {
        runners: match &runners {
            Ok(ConsoleReply::Runners { runners }) => Ok(runners.as_slice()),
            _ => Err(runners_why.as_str()),
        },
        tainted: match &tainted {
            Ok(ConsoleReply::Sessions { tainted }) => Ok(tainted.as_slice()),
            _ => Err(tainted_why.as_str()),
        },
        reloads: match &reloads {
            Ok(ConsoleReply::Reloads { reloads }) => Ok(reloads.as_slice()),
            _ => Err(reloads_why.as_str()),
        },
    };
    let mut body = html::operations(&snapshot, bridges, audit, std::time::SystemTime::now());
    body.push_str(&accounts::counts_html(counts.as_ref().map(Vec::as_slice).map_err(String::as_str)));
    html_answer(StatusCode::OK, html::page("Operations", &seen.frame(true), &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_bodies_decode_plus_and_percent_escapes_and_keep_bad_ones() {
        let form = form_fields(b"csrf=ab12&note=looks+fine%21&decision=approve&bad=%zz%4");
        assert_eq!(form["csrf"], "ab12");
        assert_eq!(form["note"], "looks fine!");
        assert_eq!(form["decision"], "approve");
        assert_eq!(form["bad"], "%zz%4");
        assert!(form_fields(&[0xff, 0xfe]).is_empty());
    }

    #[test]
    fn the_base_url_is_the_public_one_else_the_address_listened_on() {
        let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(base_url(Some("https://mcp.example.com/"), addr, false), "https://mcp.example.com");
        assert_eq!(base_url(None, addr, true), "https://127.0.0.1:8080");
        assert_eq!(base_url(None, addr, false), "http://127.0.0.1:8080");
    }
}
