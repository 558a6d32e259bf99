//! A read of a kept file answered as `application/json` over streamable
//! HTTP (issue 42). rmcp answers every request of an MCP session (and, at
//! its defaults, every stateless one) as a server-sent event stream; the
//! Python SDK's client takes at most 1 MiB per event at its defaults
//! (`max_sse_event_size`, `mcp/client/streamable_http.py`'s
//! `DEFAULT_MAX_SSE_EVENT_SIZE`, enforced by `EventSource`), but reads an
//! `application/json` answer whole (`_handle_json_response`, no bound). The
//! protocol lets the server answer a `POST` either way when the client
//! accepts both; so a `resources/read` of a `code-mode://files/` URI from a
//! client that accepts `application/json` ([`wants_json`], marked by the
//! gate that reads the body) has its event stream read here up to its
//! response, which goes out as the JSON body, with the stream's headers
//! (the session id). A stream carrying anything else before the response (a
//! notification, a request) goes out as it came, nothing lost.

use std::pin::Pin;

use actix_web::HttpMessage;
use actix_web::body::{BodyStream, BoxBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::web::{Bytes, BytesMut};

/// The mark of a request whose answer goes out as JSON.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AnswerAsJson;

/// A `resources/read` of a kept file's URI, from a client that accepts
/// `application/json`.
pub(crate) fn wants_json(body: &[u8], headers: &HeaderMap) -> bool {
    let accepts = headers.get_all(header::ACCEPT).filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',')
            .any(|kind| kind.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json"))
    });
    if !accepts {
        return false;
    }
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(body) else { return false };
    message["method"] == "resources/read"
        && message["params"]["uri"].as_str().is_some_and(|uri| uri.starts_with(code_mode_core::files::URI_PREFIX))
}

/// The actix middleware: a marked request's event stream, answered as JSON.
pub(crate) fn answered<S, B>(
    request: ServiceRequest,
    service: &S,
) -> impl Future<Output = Result<ServiceResponse, actix_web::Error>> + use<S, B>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody + 'static,
{
    let marked = request.extensions().get::<AnswerAsJson>().is_some();
    let answer = service.call(request);
    async move {
        let response = answer.await?.map_into_boxed_body();
        let is_stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !marked || !is_stream || response.status() != actix_web::http::StatusCode::OK {
            return Ok(response);
        }
        let (request, response) = response.into_parts();
        let (mut head, body) = response.into_parts();
        let (read, rest) = first_answer(body).await;
        let body = match read {
            Read::Answer(json) => {
                head.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                head.headers_mut().remove(header::CONTENT_LENGTH);
                BoxBody::new(json)
            }
            // As it came: what was read, then the rest of the stream.
            Read::Other(seen) => {
                let stream =
                    futures::stream::once(async move { Ok::<_, Box<dyn std::error::Error>>(seen) }).chain_rest(rest);
                BoxBody::new(BodyStream::new(stream))
            }
        };
        Ok(ServiceResponse::new(request, head.set_body(body)))
    }
}

enum Read {
    /// The JSON-RPC response, the first message of the stream.
    Answer(Bytes),
    /// The bytes read before something else came (or the stream ended).
    Other(Bytes),
}

/// Read `body`'s events up to its first message: the response when it is
/// one, else what was read; and the body, for what is left.
async fn first_answer(mut body: BoxBody) -> (Read, BoxBody) {
    let mut seen = BytesMut::new();
    loop {
        // Each complete event read so far, up to the first with data.
        while let Some(end) = event_end(&seen) {
            let event = seen.split_to(end);
            let data = event_data(&event);
            if data.is_empty() {
                continue; // A priming event (an id and a retry, no data).
            }
            let is_answer = serde_json::from_slice::<serde_json::Value>(&data)
                .is_ok_and(|m| m.get("id").is_some() && (m.get("result").is_some() || m.get("error").is_some()));
            if is_answer {
                return (Read::Answer(Bytes::from(data)), body);
            }
            let mut all = BytesMut::from(&event[..]);
            all.extend_from_slice(&seen);
            return (Read::Other(all.freeze()), body);
        }
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_next(cx)).await {
            Some(Ok(chunk)) => seen.extend_from_slice(&chunk),
            _ => return (Read::Other(seen.freeze()), body),
        }
    }
}

/// Where the first complete event of `buffer` ends (after its blank line).
fn event_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The data of one event: its `data:` lines joined with newlines.
fn event_data(event: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    let mut first = true;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(value) = line.strip_prefix(b"data:") else { continue };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if !first {
            data.push(b'\n');
        }
        data.extend_from_slice(value);
        first = false;
    }
    data
}

/// A stream followed by what is left of a body.
trait ChainRest: futures::Stream<Item = Result<Bytes, Box<dyn std::error::Error>>> + Sized {
    fn chain_rest(
        self,
        mut rest: BoxBody,
    ) -> impl futures::Stream<Item = Result<Bytes, Box<dyn std::error::Error>>> + 'static
    where
        Self: 'static,
    {
        use futures::StreamExt as _;
        let tail = futures::stream::poll_fn(move |cx| Pin::new(&mut rest).poll_next(cx));
        self.chain(tail)
    }
}

impl<S: futures::Stream<Item = Result<Bytes, Box<dyn std::error::Error>>> + Sized> ChainRest for S {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_read_of_a_kept_file_from_a_client_accepting_json_is_answered_as_json() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let read = |uri: &str| {
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}})
                .to_string()
        };
        assert!(wants_json(read("code-mode://files/0123/a.bin").as_bytes(), &headers));
        assert!(!wants_json(read("test://wiki/small").as_bytes(), &headers));
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python"}}"#;
        assert!(!wants_json(call.as_bytes(), &headers));
        let mut sse_only = HeaderMap::new();
        sse_only.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        assert!(!wants_json(read("code-mode://files/0123/a.bin").as_bytes(), &sse_only));
    }

    #[test]
    fn an_events_data_lines_are_joined_and_events_end_at_a_blank_line() {
        let stream = b"id: 0\nretry: 3000\ndata:\n\ndata: {\"a\":\ndata: 1}\nid: 1\n\nrest";
        let end = event_end(stream).unwrap();
        assert_eq!(event_data(&stream[..end]), b"");
        let second = &stream[end..];
        let end = event_end(second).unwrap();
        assert_eq!(event_data(&second[..end]), b"{\"a\":\n1}");
        assert_eq!(event_end(b"data: x\r\n\r\n"), Some(11));
    }
}
