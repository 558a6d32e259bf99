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
    let answer = service.call(request);
    async move {
        let response = answer.await?;
        let closed = token.drop_guard();
        Ok(response.map_body(move |_, body| BoxBody::new(Watched { body: body.boxed(), _closed: closed })))
    }
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

/// Resolves once the request is gone: cancelled by its client, or (when
/// `closed` is given) its response stream closed.
pub(crate) async fn gone(cancelled: &CancellationToken, closed: Option<&CancellationToken>) {
    match closed {
        Some(closed) => tokio::select! {
            () = cancelled.cancelled() => {}
            () = closed.cancelled() => {}
        },
        None => cancelled.cancelled().await,
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
