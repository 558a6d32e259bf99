//! The body of a `POST` to `/mcp`, read by the gate before the transport
//! sees it: within a bound of size and of time, and read once to learn
//! what the request is (an `initialize`, a request the transport serves
//! statelessly), which decides whether it takes a place among the open
//! sessions.
//!
//! - A declared `Content-Length` over the largest body (`--max-body`, 4 MiB
//!   by default) gets 413 at once, before any of the body arrives; a body
//!   without a declared length that grows past it gets 413 when it does.
//! - The whole body must arrive within [`BODY_TIMEOUT`] of the request's
//!   head (which actix-web itself bounds to 5 s); a slower one gets 408 and
//!   the connection is closed, so a client trickling a body cannot hold a
//!   connection open.
//!
//! The body read is put back for the transport, which parses it again.

use std::time::Duration;

use actix_web::HttpMessage;
use actix_web::dev::ServiceRequest;
use actix_web::http::header;
use actix_web::web::{Bytes, BytesMut};
use futures::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, ProtocolVersion};

/// How long a request's body may take to arrive, in all.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest body when `--max-body` is not given (the transport's own
/// default).
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;

/// Why a body was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BodyError {
    /// Larger than allowed (declared, or as it arrived).
    #[error("the request body is larger than {max} bytes (--max-body)")]
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// Not all there within the time allowed.
    #[error("the request body did not arrive within {} s", after.as_secs())]
    Slow {
        /// The bound.
        after: Duration,
    },
    /// The connection failed while it arrived.
    #[error("the request body could not be read: {0}")]
    Broken(String),
}

/// Read `request`'s body (at most `max` bytes, within [`BODY_TIMEOUT`])
/// and put it back for the transport; the bytes read.
pub(crate) async fn read(request: &mut ServiceRequest, max: usize) -> Result<Bytes, BodyError> {
    let declared =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return Err(BodyError::TooLarge { max });
    }
    let mut payload = request.take_payload();
    let mut body = BytesMut::new();
    let reading = async {
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
            if chunk.len() > max.saturating_sub(body.len()) {
                return Err(BodyError::TooLarge { max });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(())
    };
    match tokio::time::timeout(BODY_TIMEOUT, reading).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(BodyError::Slow { after: BODY_TIMEOUT }),
    }
    let body = body.freeze();
    request.set_payload(actix_web::dev::Payload::from(body.clone()));
    Ok(body)
}

/// What the gate needs to know of a `POST`'s message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    /// An `initialize` request: it opens a session, or, naming one, would
    /// handshake again.
    Initialize,
    /// A request the transport serves on its own, outside any session (the
    /// stateless protocol 2026-07-28): it takes a place among the open
    /// sessions while it runs, whatever session id it names.
    Stateless,
    /// Anything else: a request, notification or answer within a session,
    /// a stateless notification or answer (the transport serves nothing for
    /// those), or a body the transport will refuse.
    Other,
}

/// What `body`, sent with `headers`, is to the transport. This follows
/// rmcp's routing (`is_legacy_request` in its streamable HTTP server): an
/// `initialize` is served in a session; another request is served
/// statelessly when its `_meta` carries the 2026-07-28 per-request keys,
/// or when the protocol version it names (in `_meta`, else the
/// `MCP-Protocol-Version` header, else 2025-03-26) has no handshake.
pub(crate) fn classify(body: &[u8], headers: &header::HeaderMap) -> Message {
    let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(body) else {
        return Message::Other;
    };
    let ClientJsonRpcMessage::Request(request) = message else {
        return Message::Other;
    };
    if matches!(request.request, ClientRequest::InitializeRequest(_)) {
        return Message::Initialize;
    }
    let meta = request.request.get_meta();
    let discover = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28).is_empty();
    let version = meta
        .protocol_version()
        .or_else(|| {
            let named = headers.get("mcp-protocol-version")?.to_str().ok()?;
            serde_json::from_value(serde_json::Value::String(named.to_string())).ok()
        })
        .unwrap_or(ProtocolVersion::V_2025_03_26);
    if discover || !version.has_initialize() { Message::Stateless } else { Message::Other }
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};

    use super::*;

    fn with(version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(version) = version {
            headers.insert(HeaderName::from_static("mcp-protocol-version"), HeaderValue::from_str(version).unwrap());
        }
        headers
    }

    #[test]
    fn requests_are_told_apart_as_the_transport_routes_them() {
        let initialize = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}"#;
        assert_eq!(classify(initialize, &with(None)), Message::Initialize);
        let list = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        assert_eq!(classify(list, &with(Some("2025-11-25"))), Message::Other);
        assert_eq!(classify(list, &with(None)), Message::Other, "no version: 2025-03-26, a session's");
        assert_eq!(classify(list, &with(Some("2026-07-28"))), Message::Stateless);
        let meta = br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        assert_eq!(classify(meta, &with(Some("2025-11-25"))), Message::Stateless, "the body's _meta decides");
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(classify(note, &with(Some("2026-07-28"))), Message::Other);
        assert_eq!(classify(b"not json", &with(Some("2026-07-28"))), Message::Other);
    }
}
