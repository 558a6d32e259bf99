//! Connecting an identity's own accounts at wrapped servers (issue 41):
//! the browser side of the authorization-code flow a call starts when its
//! identity has no account at a server whose `auth` block is
//! `"per": "identity"`.
//!
//! - `GET /console/connect/{flow}`: the link the client was given (a
//!   URL-mode elicitation, or the refusal's text). The viewer must be
//!   logged in to the console (else to the login page and back here); the
//!   browser gets the connect cookie ([`COOKIE`]: random, HttpOnly,
//!   SameSite=Lax so the authorization server's redirect back carries it,
//!   Path=/console/connect, Secure over TLS), and the bridges are asked to
//!   begin the flow for this viewer ([`AccountsRequest::Begin`], which
//!   refuses a flow issued to another identity, expired or used). The
//!   answer is a 303 to the authorization URL the bridge built: the only
//!   place this module ever redirects to, and only when it is an `http(s)`
//!   URL.
//! - `GET /console/connect/callback?code&state[&iss]` (or `?error`): the
//!   authorization server sends the browser back here. No console cookie
//!   is needed (SameSite=Strict is not sent on another site's redirect):
//!   the connect cookie binds the answer to the browser that began the
//!   flow, and the bridge checks the state, the browser, the issuer and
//!   that the flow is used once ([`AccountsRequest::Finish`]). The page
//!   says which server connected as which subject, or why not; it never
//!   shows the code.
//! - `GET /console/accounts`: the viewer's connected accounts (server,
//!   subject, scopes, expiry), each with a Disconnect form (`POST
//!   /console/accounts/disconnect`, CSRF and Origin as every console form).
//! - The operations view shows how many identities connected an account
//!   at each server ([`counts`]), never a token.
//!
//! The bridges own the flows and the grants (in the upstream-auth vault);
//! this module only carries the browser's part on [`subjects::ACCOUNTS`].

use std::fmt::Write as _;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use code_mode_core::bus::BusError;
use code_mode_proto::{AccountInfo, AccountsReply, AccountsRequest, subjects};
use sha2::{Digest, Sha256};

use super::html::{self, Frame, SHORT, escape, shown, utc};
use super::{BRIDGE_TIMEOUT, Console, PATH, form_fields, guard, html_answer};
use crate::Shared;

/// The cookie binding a connect flow to the browser that began it.
pub const COOKIE: &str = "codemode_connect";
/// Where the connect pages live (the cookie's path).
pub const CONNECT_PATH: &str = "/console/connect";
/// Where the authorization server sends the browser back.
pub const CALLBACK_PATH: &str = "/console/connect/callback";
/// The viewer's accounts page.
pub const ACCOUNTS_PATH: &str = "/console/accounts";
/// How long the connect cookie lives, in seconds (a flow ends sooner: at
/// the approval bound).
const COOKIE_MAX_AGE: u64 = 3600;
/// Longest flow id taken from a URL.
const MAX_FLOW: usize = 200;

/// The link a client is given for connect flow `flow`, when this process
/// serves the console.
pub(crate) fn connect_link(shared: &Shared, flow: &str) -> Option<String> {
    shared.console_base.get().map(|base| format!("{base}{CONNECT_PATH}/{}", html::path_segment(flow)))
}

/// The `Set-Cookie` value of the connect cookie: HttpOnly, SameSite=Lax
/// (the authorization server's redirect back is a top-level GET from its
/// site, which a Strict cookie would not follow), Path=/console/connect,
/// Secure over TLS; `max_age` 0 removes it.
pub fn cookie(value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={value}; Path={CONNECT_PATH}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}")
}

/// What the bridge keeps of the connect cookie: hex SHA-256 of its value
/// (the value itself never leaves the browser and this request).
pub fn browser_of(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))
}

/// Whether `flow` can be a flow id (URL-safe base64 or hex, bounded):
/// anything else is refused before the bridges are asked.
pub fn flow_ok(flow: &str) -> bool {
    !flow.is_empty() && flow.len() <= MAX_FLOW && flow.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
}

/// The console path a login may send the browser back to, if `next` is
/// one: a connect link or the accounts page, nothing else (no other site,
/// no other path: the login cannot be made an open redirect).
pub fn return_path(next: &str) -> Option<&str> {
    if next == ACCOUNTS_PATH {
        return Some(next);
    }
    let flow = next.strip_prefix(CONNECT_PATH)?.strip_prefix('/')?;
    (flow_ok(flow) && flow != "callback").then_some(next)
}

/// The login page, sending the browser back to `next` once logged in.
pub fn login_then(next: &str) -> String {
    format!("{PATH}/login?next={}", html::path_segment(next))
}

/// Whether the bridge's authorization URL is one a browser may be sent to:
/// an absolute `http(s)` URL with a host, no whitespace or control.
fn redirect_ok(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else { return false };
    matches!(uri.scheme_str(), Some("https" | "http"))
        && uri.host().is_some_and(|h| !h.is_empty())
        && url.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// Ask the bridges.
async fn ask(console: &Console, request: &AccountsRequest) -> Result<AccountsReply, BusError> {
    console.inner.shared.bus.call::<AccountsRequest, AccountsReply>(subjects::ACCOUNTS, request, BRIDGE_TIMEOUT).await
}

/// The status and text of a failed request to the bridges.
fn bridge_error(error: &BusError) -> (StatusCode, String) {
    match error {
        BusError::NoResponders { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "No bridge answers: the accounts live in the bridges, so nothing can be connected or shown until one \
             runs."
                .into(),
        ),
        BusError::Timeout { after, .. } => {
            (StatusCode::GATEWAY_TIMEOUT, format!("No bridge answered within {} s: try again.", after.as_secs()))
        }
        BusError::Remote { error, .. } => {
            (StatusCode::CONFLICT, format!("The bridge refused: {}", shown(&error.message, 1000)))
        }
        other => {
            tracing::warn!(error = %other, "the console's request about accounts failed");
            (StatusCode::BAD_GATEWAY, "The request to the bridges failed.".into())
        }
    }
}

/// The page when the bridges did not answer (`failed`), or answered with
/// a reply of another kind (`None`).
fn not_answered(title: &str, frame: &Frame<'_>, failed: Option<BusError>) -> HttpResponse {
    let failed = failed.unwrap_or_else(|| BusError::Transport("an answer of another kind".into()));
    let (status, text) = bridge_error(&failed);
    flow_page(status, title, frame, &format!("<p class=\"refusal\">{text}</p>"))
}

/// A page of the connect flow (`text`: our own HTML), for a viewer not
/// known to the page (the callback) or known (`frame`).
fn flow_page(status: StatusCode, title: &str, frame: &Frame<'_>, text: &str) -> HttpResponse {
    html_answer(status, html::page(title, frame, &format!("{text}\n")))
}

const NOBODY: Frame<'static> = Frame { viewer: None, csrf: "", operator: false, refresh: false };

/// `GET /console/connect/{flow}`: begin the flow for the logged-in viewer
/// and send the browser to the authorization server.
pub(super) async fn connect(
    console: web::Data<Console>,
    request: HttpRequest,
    flow: web::Path<String>,
) -> HttpResponse {
    let flow = flow.into_inner();
    if !flow_ok(&flow) {
        let text = "<p class=\"refusal\">This is not a connect link: check that it was copied whole.</p>";
        return flow_page(StatusCode::NOT_FOUND, "Not a connect link", &NOBODY, text);
    }
    let here = format!("{CONNECT_PATH}/{flow}");
    let (seen, _) = match console.seen(&request).await {
        Ok(seen) => seen,
        Err(mut answer) => {
            // Not logged in: to the login page, and back here after it.
            if answer.status() == StatusCode::SEE_OTHER
                && let Ok(to) = header::HeaderValue::from_str(&login_then(&here))
            {
                answer.headers_mut().insert(header::LOCATION, to);
            }
            return answer;
        }
    };
    let secure = console.inner.secure;
    let (value, fresh) = match guard::cookie_of(&request, COOKIE).filter(|v| v.len() == 64 && hex::decode(v).is_ok()) {
        Some(value) => (value, false),
        None => match guard::random_hex() {
            Some(value) => (value, true),
            None => return html_answer(StatusCode::INTERNAL_SERVER_ERROR, "no randomness from the system".into()),
        },
    };
    let base = console.inner.shared.console_base.get().map_or("", String::as_str);
    let asked = AccountsRequest::Begin {
        flow: flow.clone(),
        viewer: seen.identity.as_str().to_string(),
        browser: browser_of(&value),
        redirect_uri: format!("{base}{CALLBACK_PATH}"),
    };
    let frame = seen.frame(false);
    match ask(&console, &asked).await {
        Ok(AccountsReply::Redirect { url }) if redirect_ok(&url) => {
            tracing::info!(identity = %seen.identity, flow = %html::cut(&flow, 16), "connect flow begun: to the authorization server");
            let mut answer = HttpResponse::SeeOther();
            answer.insert_header((header::LOCATION, url));
            if fresh {
                answer.append_header((header::SET_COOKIE, cookie(&value, COOKIE_MAX_AGE, secure)));
            }
            answer.finish()
        }
        Ok(AccountsReply::Redirect { .. }) => {
            tracing::warn!("a bridge answered a connect flow with an authorization URL that is not http(s): refused");
            let text = "<p class=\"refusal\">The bridge gave an authorization address that is not an http(s) URL: \
                        nothing was opened. Tell whoever runs this server.</p>";
            flow_page(StatusCode::BAD_GATEWAY, "Cannot connect", &frame, text)
        }
        Ok(AccountsReply::Refused { reason }) => {
            tracing::info!(identity = %seen.identity, %reason, "a connect link was refused");
            let text = format!(
                "<p class=\"refusal\">This link cannot connect an account for you: {}.</p>\n<p>A link serves the \
                 identity whose call asked for it, once, until the call stops waiting. Call the tool again from \
                 your client for a new link.</p>",
                shown(&reason, 1000)
            );
            flow_page(StatusCode::FORBIDDEN, "Cannot connect", &frame, &text)
        }
        other => not_answered("Cannot connect", &frame, other.err()),
    }
}

/// `GET /console/connect/callback`: finish the flow the connect cookie
/// began.
pub(super) async fn callback(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let query = form_fields(request.query_string().as_bytes());
    let field = |name: &str| query.get(name).map(String::as_str).filter(|v| !v.is_empty());
    let title = "Account not connected";
    if let Some(error) = field("error") {
        let description = field("error_description").map(|d| format!(" ({})", shown(d, 300))).unwrap_or_default();
        tracing::info!(error = %html::cut(error, 80), "the authorization server did not connect an account");
        let text = format!(
            "<p class=\"refusal\">The authorization server did not connect your account: <code>{}</code>{description}.\
             </p>\n<p>Call the tool again from your client for a new link.</p>",
            shown(error, SHORT)
        );
        return flow_page(StatusCode::BAD_REQUEST, title, &NOBODY, &text);
    }
    let (Some(state), Some(code)) = (field("state"), field("code")) else {
        let text = "<p class=\"refusal\">This answer of the authorization server carries no code or no state: \
                    call the tool again from your client for a new link.</p>";
        return flow_page(StatusCode::BAD_REQUEST, title, &NOBODY, text);
    };
    let Some(value) = guard::cookie_of(&request, COOKIE) else {
        let text = "<p class=\"refusal\">This browser did not begin this connection (no connect cookie): open the \
                    link your client gave in this browser, or call the tool again for a new link.</p>";
        return flow_page(StatusCode::BAD_REQUEST, title, &NOBODY, text);
    };
    let asked = AccountsRequest::Finish {
        state: state.to_string(),
        code: code.to_string(),
        iss: field("iss").map(str::to_string),
        browser: browser_of(&value),
    };
    match ask(&console, &asked).await {
        Ok(AccountsReply::Connected { server, subject }) => {
            tracing::info!(%server, "an account was connected");
            let text = format!(
                "<p class=\"done\">Connected to <strong>{}</strong> as <strong>{}</strong>.</p>\n<p>You can return \
                 to your client: the call that waited goes on.</p>\n<p><a href=\"{ACCOUNTS_PATH}\">Your connected \
                 accounts</a></p>",
                shown(&server, SHORT),
                shown(&subject, SHORT)
            );
            flow_page(StatusCode::OK, "Account connected", &NOBODY, &text)
        }
        Ok(AccountsReply::Refused { reason }) => {
            tracing::info!(%reason, "a connect callback was refused");
            let text = format!(
                "<p class=\"refusal\">Your account was not connected: {}.</p>\n<p>Call the tool again from your \
                 client for a new link.</p>",
                shown(&reason, 1000)
            );
            flow_page(StatusCode::BAD_REQUEST, title, &NOBODY, &text)
        }
        other => not_answered(title, &NOBODY, other.err()),
    }
}

/// `GET /console/accounts`: the viewer's connected accounts.
pub(super) async fn accounts(console: web::Data<Console>, request: HttpRequest) -> HttpResponse {
    let (seen, _) = match console.seen(&request).await {
        Ok(seen) => seen,
        Err(answer) => return answer,
    };
    let title = "Your connected accounts";
    let frame = seen.frame(false);
    match ask(&console, &AccountsRequest::List { identity: seen.identity.as_str().to_string() }).await {
        Ok(AccountsReply::Accounts { accounts }) => {
            html_answer(StatusCode::OK, html::page(title, &frame, &accounts_table(&accounts, &seen.csrf)))
        }
        other => not_answered(title, &frame, other.err()),
    }
}

/// The accounts table, each row with its Disconnect form.
pub fn accounts_table(accounts: &[AccountInfo], csrf: &str) -> String {
    if accounts.is_empty() {
        return "<p class=\"muted\">You have connected no account. A call that needs one asks your client to open \
                a link.</p>\n"
            .into();
    }
    let mut out = String::from(
        "<p>The wrapped servers where calls go out as your own account.</p>\n<table>\n<tr><th>Server</th>\
         <th>Subject</th><th>Scopes</th><th>Token expires</th><th></th></tr>\n",
    );
    for a in accounts.iter().take(500) {
        let expires = a.expires_at.map_or_else(|| "-".to_string(), |s| utc(s.saturating_mul(1000)));
        let _ = writeln!(
            out,
            "<tr><td><code>{server}</code></td><td>{}</td><td>{}</td><td>{expires}</td><td><form method=\"post\" \
             action=\"{ACCOUNTS_PATH}/disconnect\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" \
             value=\"{}\"><input type=\"hidden\" name=\"server\" value=\"{server}\"><button type=\"submit\">\
             Disconnect</button></form></td></tr>",
            shown(&a.subject, SHORT),
            shown(&a.scopes.join(" "), 1000),
            escape(csrf),
            server = shown(&a.server, 1000),
        );
    }
    out.push_str("</table>\n");
    out
}

/// `POST /console/accounts/disconnect`: delete the viewer's grant at a
/// server (revoked at its authorization server where it offers RFC 7009).
pub(super) async fn disconnect(console: web::Data<Console>, request: HttpRequest, body: web::Bytes) -> HttpResponse {
    let form = form_fields(&body);
    let (seen, _) = match console.seen_posting(&request, &form).await {
        Ok(seen) => seen,
        Err(answer) => return answer,
    };
    let frame = seen.frame(false);
    let title = "Disconnect";
    let Some(server) = form.get("server").filter(|s| !s.is_empty()) else {
        return flow_page(StatusCode::BAD_REQUEST, title, &frame, "<p class=\"refusal\">Name a server.</p>");
    };
    let asked = AccountsRequest::Disconnect { identity: seen.identity.as_str().to_string(), server: server.clone() };
    match ask(&console, &asked).await {
        Ok(AccountsReply::Disconnected { revoked }) => {
            tracing::info!(identity = %seen.identity, server = %html::cut(server, 200), revoked, "account disconnected");
            let how = if revoked {
                "its token was revoked at the authorization server"
            } else {
                "the authorization server offers no revocation (RFC 7009), so its token lives until it expires there"
            };
            let text = format!(
                "<p class=\"done\">Disconnected from <strong>{}</strong>: {how}. The next call there asks you to \
                 connect again.</p>\n<p><a href=\"{ACCOUNTS_PATH}\">Your connected accounts</a></p>",
                shown(server, SHORT)
            );
            flow_page(StatusCode::OK, title, &frame, &text)
        }
        Ok(AccountsReply::Refused { reason }) => {
            let text = format!("<p class=\"refusal\">Not disconnected: {}.</p>", shown(&reason, 1000));
            flow_page(StatusCode::CONFLICT, title, &frame, &text)
        }
        other => not_answered(title, &frame, other.err()),
    }
}

/// How many identities connected an account at each server, for the
/// operations view; `Err` says why it is unknown.
pub(super) async fn counts(console: &Console) -> Result<Vec<(String, u64)>, String> {
    match ask(console, &AccountsRequest::Counts).await {
        Ok(AccountsReply::Counts { servers }) => Ok(servers),
        Ok(_) => Err("the bridge answered with another kind of reply".into()),
        Err(BusError::NoResponders { .. }) => Err("no bridge answers".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The operations view's section of connected accounts per server.
pub fn counts_html(counts: Result<&[(String, u64)], &str>) -> String {
    let mut out = String::from("<h2>Connected accounts</h2>\n");
    match counts {
        Ok([]) => out.push_str("<p class=\"muted\">No identity has connected an account at a server.</p>\n"),
        Ok(servers) => {
            out.push_str("<table>\n<tr><th>Server</th><th>Identities connected</th></tr>\n");
            for (server, n) in servers.iter().take(500) {
                let _ = writeln!(out, "<tr><td><code>{}</code></td><td>{n}</td></tr>", shown(server, 1000));
            }
            out.push_str("</table>\n");
        }
        Err(why) => {
            let _ = writeln!(out, "<p class=\"refusal\">The connected accounts are unknown: {}</p>", shown(why, SHORT));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connect_cookie_is_http_only_lax_and_only_under_the_connect_path() {
        assert_eq!(
            cookie("v", 3600, true),
            "codemode_connect=v; Path=/console/connect; HttpOnly; SameSite=Lax; Max-Age=3600; Secure"
        );
        assert!(cookie("", 0, false).ends_with("Max-Age=0"));
        let browser = browser_of("abc");
        assert_eq!(browser.len(), 64);
        assert_ne!(browser, "abc");
    }

    #[test]
    fn a_login_returns_only_to_a_connect_link_or_the_accounts_page() {
        assert_eq!(return_path("/console/connect/AbC-_09"), Some("/console/connect/AbC-_09"));
        assert_eq!(return_path("/console/accounts"), Some("/console/accounts"));
        for bad in [
            "https://evil.example/",
            "//evil.example/console/connect/x",
            "/console/connect/",
            "/console/connect/callback",
            "/console/connect/a/b",
            "/console/connect/a?b",
            "/console/connect/../operations",
            "/console/connectx",
            "/console/connect/a%2F..",
            "/console/operations",
            "/console",
            "",
        ] {
            assert_eq!(return_path(bad), None, "{bad}");
        }
        assert_eq!(login_then("/console/connect/f1"), "/console/login?next=%2Fconsole%2Fconnect%2Ff1");
    }

    #[test]
    fn only_an_absolute_http_url_is_a_redirect_target() {
        assert!(redirect_ok("https://as.example/authorize?client_id=a&state=b"));
        assert!(redirect_ok("http://127.0.0.1:4000/auth?x=1"));
        for bad in [
            "javascript:alert(1)",
            "/console",
            "//evil.example",
            "data:text/html,hi",
            "https://as.example/a b",
            "https://as.example/\r\nset-cookie:x",
            "",
        ] {
            assert!(!redirect_ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_accounts_table_escapes_everything_and_each_row_posts_its_server() {
        let hostile = "\"><script>alert(1)</script>";
        let accounts = [AccountInfo {
            server: format!("https://mcp.example/{hostile}"),
            subject: hostile.into(),
            scopes: vec!["read".into(), hostile.into()],
            expires_at: Some(86_400),
        }];
        let page = accounts_table(&accounts, "c5rf");
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("1970-01-02 00:00:00 UTC"), "{page}");
        assert!(
            page.contains("name=\"csrf\" value=\"c5rf\"") && page.contains("action=\"/console/accounts/disconnect\"")
        );
        assert!(page.contains("name=\"server\" value=\"https://mcp.example/&quot;&gt;&lt;script&gt;"), "{page}");
        assert!(accounts_table(&[], "c").contains("no account"));
        let counts = counts_html(Ok(&[(hostile.to_string(), 2)]));
        assert!(counts.contains("<td>2</td>") && !counts.contains("<script"), "{counts}");
        assert!(counts_html(Err("no bridge answers")).contains("unknown: no bridge answers"));
    }
}
