//! A request's answer stream outlives its frontend only as a clear error.
//!
//! A client of protocol 2025-11-25 and older that loses the SSE stream of
//! a request it sent (a `tools/call` waiting for an approval or for an
//! upstream account to be connected) comes back with `GET` and the
//! `Last-Event-ID` of the last event it had, to resume. When the frontend
//! that held the request was killed, a new one behind the same address
//! knows neither the session nor the request: a 404 there is not taken as
//! an end by every client (rmcp's client tries the same `GET` again, its
//! back-off doubling, long past the approval bound), so the request would
//! never end at the client.
//!
//! [`Resumable`] wraps the session manager so that every event id of a
//! request's stream names the JSON-RPC id of the request it answers
//! (`<the transport's id>~<tag>`, [`tag`]), stripped again before the
//! transport resumes a stream it still holds. A frontend asked to resume
//! a stream of a session it does not hold answers, when the event id names
//! a request, `200 text/event-stream` with one JSON-RPC error for that
//! request id ([`lost_call`]): the frontend holding the call stopped, the
//! call may have run, call again. Every resuming client matches it to the
//! request that waits. The answer is made of the request's own headers and
//! nothing else: it tells no caller anything about any call, its own or
//! another identity's (a forged event id gets an error naming the id it
//! forged). A request that is not a resume (no `Last-Event-ID`, or one
//! naming no request, or a `POST`) still gets the 404 "open a new session".

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, NumberOrString, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage, SessionId, SessionManager};

/// Between the transport's own event id and the request's tag.
const SEPARATOR: char = '~';

/// The longest string request id carried in an event id (longer ones are
/// not tagged: their stream resumes as before, without the clear error).
const MAX_STRING_ID: usize = 128;

/// The JSON-RPC error code of a call whose frontend stopped before its
/// answer was sent.
pub const LOST_CALL_ERROR_CODE: i32 = -32004;

/// What a client is told of a call whose frontend stopped.
pub const LOST_CALL_MESSAGE: &str = "the code-mode frontend that held this call stopped (restarted or replaced) \
     before it sent the answer, so the answer is lost: the call may have run (an approval or an account connected \
     meanwhile still took effect); call again. A run_python call sent with an idempotency key \
     (_meta \"io.code-mode/idempotency-key\") runs at most once: the same key gets the earlier run's result";

/// The tag of a request id in an event id: `n<number>` or `s<hex of the
/// string>`; `None` for a string id too long to carry.
pub fn tag(id: &RequestId) -> Option<String> {
    match id {
        NumberOrString::Number(n) => Some(format!("n{n}")),
        NumberOrString::String(s) if s.len() <= MAX_STRING_ID => Some(format!("s{}", hex::encode(s.as_bytes()))),
        NumberOrString::String(_) => None,
    }
}

/// The request id an event id names, if it names one.
pub fn request_of(event_id: &str) -> Option<RequestId> {
    let (_, tag) = event_id.rsplit_once(SEPARATOR)?;
    if let Some(n) = tag.strip_prefix('n') {
        return n.parse::<i64>().ok().map(NumberOrString::Number);
    }
    let bytes = hex::decode(tag.strip_prefix('s')?).ok()?;
    if bytes.len() > MAX_STRING_ID {
        return None;
    }
    String::from_utf8(bytes).ok().map(|s| NumberOrString::String(s.into()))
}

/// The transport's own part of an event id (the whole id when it names no
/// request).
fn transport_part(event_id: &str) -> &str {
    event_id.rsplit_once(SEPARATOR).map_or(event_id, |(own, _)| own)
}

/// `stream` with `tag` after each event id.
fn tagged<S>(stream: S, tag: Option<String>) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static
where
    S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
{
    stream.map(move |mut event| {
        if let (Some(id), Some(tag)) = (&event.event_id, &tag) {
            event.event_id = Some(format!("{id}{SEPARATOR}{tag}"));
        }
        event
    })
}

/// The JSON-RPC error answering the lost call `id`.
pub fn lost_call_error(id: RequestId) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(ErrorData::new(ErrorCode(LOST_CALL_ERROR_CODE), LOST_CALL_MESSAGE, None), Some(id))
}

/// The answer to a resume (`GET` with `Last-Event-ID`) of a session this
/// frontend does not hold: one SSE event with the lost call's error, when
/// the event id names a request; `None` otherwise (the caller answers 404).
pub fn lost_call(method: &actix_web::http::Method, headers: &actix_web::http::header::HeaderMap) -> Option<String> {
    if method != actix_web::http::Method::GET {
        return None;
    }
    let last = headers.get("last-event-id")?.to_str().ok()?;
    let id = request_of(last)?;
    let data = serde_json::to_string(&lost_call_error(id)).ok()?;
    Some(format!("event: message\ndata: {data}\n\n"))
}

/// A session manager whose request streams' event ids name their request.
#[derive(Debug, Default)]
pub struct Resumable<M> {
    inner: M,
}

impl<M> Resumable<M> {
    /// Wrap `inner`.
    pub fn new(inner: M) -> Self {
        Self { inner }
    }
}

impl<M: SessionManager> SessionManager for Resumable<M> {
    type Error = M::Error;
    type Transport = M::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let tag = match &message {
            ClientJsonRpcMessage::Request(request) => tag(&request.id),
            _ => None,
        };
        let stream = self.inner.create_stream(id, message).await?;
        Ok(tagged(stream, tag))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let tag = request_of(&last_event_id).as_ref().and_then(tag);
        let stream = self.inner.resume(id, transport_part(&last_event_id).to_string()).await?;
        Ok(tagged(stream, tag))
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<std::sync::Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_names_its_request_and_gives_back_the_transports_own_part() {
        for id in [NumberOrString::Number(7), NumberOrString::String("a~b/c".into())] {
            let event = format!("3/1{SEPARATOR}{}", tag(&id).unwrap());
            assert_eq!(request_of(&event), Some(id));
            assert_eq!(transport_part(&event), "3/1");
        }
        assert_eq!(request_of("3/1"), None, "an untagged id names no request");
        assert_eq!(transport_part("3/1"), "3/1");
        assert_eq!(request_of("0~x12"), None);
        assert_eq!(request_of("0~szz"), None);
        assert!(tag(&NumberOrString::String("x".repeat(MAX_STRING_ID + 1).into())).is_none());
    }

    #[test]
    fn a_resume_naming_a_request_is_answered_with_its_error_and_anything_else_with_nothing() {
        let mut headers = actix_web::http::header::HeaderMap::new();
        let get = actix_web::http::Method::GET;
        assert_eq!(lost_call(&get, &headers), None, "no Last-Event-ID");
        headers.insert("last-event-id".parse().unwrap(), "0/4~n12".parse().unwrap());
        let answer = lost_call(&get, &headers).expect("an answer");
        let data = answer.strip_prefix("event: message\ndata: ").unwrap().trim_end();
        let error: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(error["id"], 12);
        assert_eq!(error["error"]["code"], LOST_CALL_ERROR_CODE);
        assert!(error["error"]["message"].as_str().unwrap().contains("may have run"));
        assert_eq!(lost_call(&actix_web::http::Method::POST, &headers), None, "a POST is no resume");
        headers.insert("last-event-id".parse().unwrap(), "0/4".parse().unwrap());
        assert_eq!(lost_call(&get, &headers), None, "an event id naming no request");
    }
}
