//! When a request over streamable HTTP is gone: its response stream closed.
//!
//! At protocol 2026-07-28 a client cancels a request over streamable HTTP
//! by closing that request's response stream (the revision has no
//! client-to-server notifications over HTTP; the Python SDK's `mcp.Client`
//! aborts the POST), and a client that goes away closes it too. rmcp
//! keeps a stateless request running when its stream closes (it keeps the
//! events for a resumption), so the HTTP server marks each request
//! ([`watched`]): a token in the request's extensions, fired when actix
//! drops the response body, which it does when the body ended or the
//! connection closed. The handler ([`Frontend::drive`](crate::Frontend))
//! reads it for a 2026-07-28 request only: at 2025-11-25 and before, a
//! closed stream is no cancel (the client may resume the stream, and
//! cancels with `notifications/cancelled`).
//!
//! A client with an MCP session over HTTP that ends it (`DELETE`, taken by
//! the session manager) is gone too: the session's running requests end at
//! once ([`session_end`]) rather than when rmcp stops waiting for them (it
//! lets a closed session's handlers run on for 5 s).

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::HttpMessage;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::web::Bytes;
use rmcp::service::{RequestContext, RoleServer};
use tokio_util::sync::{CancellationToken, DropGuard};

/// Fired once the request's response stream is closed (ended, or cut by
/// the client).
#[derive(Debug, Clone)]
pub(crate) struct StreamClosed(CancellationToken);

/// The actix middleware: mark the request with a [`StreamClosed`] token
/// that fires when its response body is dropped.
pub(crate) fn watched<S, B>(
    request: ServiceRequest,
    service: &S,
) -> impl Future<Output = Result<ServiceResponse, actix_web::Error>> + use<S, B>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody + 'static,
{
    let token = CancellationToken::new();
    request.extensions_mut().insert(StreamClosed(token.clone()));
    // A session's end (a DELETE the session manager took) ends the
    // session's requests at once, not when rmcp gives up on them (5 s).
    let ending = (request.method() == actix_web::http::Method::DELETE)
        .then(|| request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string))
        .flatten();
    let answer = service.call(request);
    async move {
        let response = answer.await?;
        if let Some(session) = ending
            && response.status().is_success()
        {
            SESSIONS.end(&session);
        }
        let closed = token.drop_guard();
        Ok(response.map_body(move |_, body| BoxBody::new(Watched { body: body.boxed(), _closed: closed })))
    }
}

/// The header naming a request's MCP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// The MCP sessions over HTTP whose requests are running, each with a
/// token fired when the client ends the session.
static SESSIONS: Sessions = Sessions { ending: std::sync::Mutex::new(None) };

struct Sessions {
    ending: std::sync::Mutex<Option<std::collections::HashMap<String, std::sync::Weak<CancellationToken>>>>,
}

impl Sessions {
    /// The token of `session`'s end, shared by its running requests (an
    /// entry lives while one of them holds it).
    fn watch(&self, session: &str) -> std::sync::Arc<CancellationToken> {
        let mut ending = code_mode_core::sync::lock(&self.ending);
        let ending = ending.get_or_insert_with(Default::default);
        if let Some(token) = ending.get(session).and_then(std::sync::Weak::upgrade) {
            return token;
        }
        ending.retain(|_, token| token.strong_count() > 0);
        let token = std::sync::Arc::new(CancellationToken::new());
        ending.insert(session.to_string(), std::sync::Arc::downgrade(&token));
        token
    }

    fn end(&self, session: &str) {
        let token = code_mode_core::sync::lock(&self.ending).as_mut().and_then(|e| e.remove(session));
        if let Some(token) = token.and_then(|t| t.upgrade()) {
            tracing::info!(session, "the client ended its MCP session: its running requests are gone");
            token.cancel();
        }
    }
}

/// The token of the end of `context`'s MCP session over streamable HTTP
/// (the client's DELETE), while the caller holds it.
pub(crate) fn session_end(context: &RequestContext<RoleServer>) -> Option<std::sync::Arc<CancellationToken>> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    let session = parts.headers.get(SESSION_HEADER)?.to_str().ok()?;
    Some(SESSIONS.watch(session))
}

/// Copy the request's [`StreamClosed`] into the MCP request's extensions
/// (part of the transport's `on_request` hook).
pub(crate) fn carry(request: &actix_web::HttpRequest, extensions: &mut rmcp::model::Extensions) {
    if let Some(closed) = request.extensions().get::<StreamClosed>() {
        extensions.insert(closed.clone());
    }
}

/// The token of the stream of `context`'s request, when it came over
/// streamable HTTP.
pub(crate) fn of(context: &RequestContext<RoleServer>) -> Option<CancellationToken> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<rmcp::model::Extensions>()?.get::<StreamClosed>().map(|c| c.0.clone())
}

/// Resolves once the request is gone: cancelled by its client, (when
/// `closed` is given) its response stream closed, or (when `ended` is
/// given) its MCP session ended.
pub(crate) async fn gone(
    cancelled: &CancellationToken,
    closed: Option<&CancellationToken>,
    ended: Option<&CancellationToken>,
) {
    let closed = async {
        match closed {
            Some(closed) => closed.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let ended = async {
        match ended {
            Some(ended) => ended.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = cancelled.cancelled() => {}
        () = closed => {}
        () = ended => {}
    }
}

/// A response body that fires its guard when dropped.
struct Watched {
    body: BoxBody,
    _closed: DropGuard,
}

impl MessageBody for Watched {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
}
