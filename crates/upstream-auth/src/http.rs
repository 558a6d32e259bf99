//! The HTTP client of every remote server's MCP session: rmcp's reqwest
//! client, configured as rmcp's default one, with the server's
//! [`Upstream`] authorization around each request.
//!
//! Each request carries the server's current access token (and only to
//! that server: the client is made per server and the token is the
//! grant stored under its URL). A `401` is answered by one renewal and one
//! retry; a `403 insufficient_scope` by a step-up where one can be made
//! without a person (a machine account, or `login`), else by an error
//! naming the scope and the login. The reasons travel as an
//! [`UpstreamError`] inside the transport error, for
//! [`refusal`] to find.
//!
//! A server without an `auth` block goes through the same client, which
//! notes a `401` challenge ([`AuthorizedHttp::challenge`]) so that startup
//! can say the server needs one instead of an opaque transport error.
//!
//! The client also says when a session's standalone stream (the `GET`
//! rmcp opens once the server names a session) has been answered
//! ([`AuthorizedHttp::standalone_stream_settled`]). A server sends the
//! requests it makes outside any call of ours (an elicitation the
//! TypeScript SDK's `server.request` makes while a tool runs) on that
//! stream only, and drops them while it is not open; a session's first
//! call waits for it so that such a request is not lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use crate::error::UpstreamError;
use crate::upstream::Upstream;

type HttpError = StreamableHttpError<reqwest::Error>;

/// The largest number of tries of one request (a renewal, then a step-up).
const MAX_TRIES: usize = 3;

/// A remote server's HTTP client, authorizing each request.
#[derive(Clone)]
pub struct AuthorizedHttp {
    http: reqwest::Client,
    auth: Option<Upstream>,
    challenge: Arc<Mutex<Option<String>>>,
    /// Whether a server's answer named a session (rmcp then opens the
    /// standalone stream).
    session_named: Arc<AtomicBool>,
    /// Whether that stream's `GET` has been answered (opened or refused).
    standalone: Arc<tokio::sync::watch::Sender<bool>>,
}

impl std::fmt::Debug for AuthorizedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizedHttp").field("auth", &self.auth).finish_non_exhaustive()
    }
}

impl AuthorizedHttp {
    /// The client of a server authorized by `auth` (`None`: no `auth`
    /// block).
    pub fn new(auth: Option<Upstream>) -> Self {
        crate::ensure_crypto();
        // As rmcp's default client: no idle pooling (a delayed-ACK stall),
        // only same-origin 307/308 redirects, which keep method and body.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let keeps_body = matches!(
                    attempt.status(),
                    reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
                );
                let same_origin =
                    attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
                if !keeps_body || !same_origin || attempt.previous().len() > 10 {
                    attempt.stop()
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .unwrap_or_default();
        Self {
            http,
            auth,
            challenge: Arc::default(),
            session_named: Arc::default(),
            standalone: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Wait, at most `within`, until the standalone stream of the session
    /// this client serves has been answered; at once when no answer named
    /// a session (a stateless server has no such stream). `false` when
    /// the wait ran out.
    pub async fn standalone_stream_settled(&self, within: Duration) -> bool {
        if !self.session_named.load(Ordering::Acquire) {
            return true;
        }
        let mut settled = self.standalone.subscribe();
        tokio::time::timeout(within, settled.wait_for(|answered| *answered)).await.is_ok_and(|r| r.is_ok())
    }

    /// Note a `POST`'s answer: whether it named a session.
    fn noted_post(
        &self,
        response: Result<StreamableHttpPostResponse, HttpError>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        if let Ok(StreamableHttpPostResponse::Json(_, Some(_)) | StreamableHttpPostResponse::Sse(_, Some(_))) =
            &response
        {
            self.session_named.store(true, Ordering::Release);
        }
        response
    }

    /// Note a `GET`'s answer: the standalone stream is settled.
    fn noted_get<T>(&self, response: Result<T, HttpError>) -> Result<T, HttpError> {
        self.standalone.send_replace(true);
        response
    }

    /// The `WWW-Authenticate` challenge of the last `401` a server without
    /// an `auth` block answered.
    pub fn challenge(&self) -> Option<String> {
        code_mode_core::sync::lock(&self.challenge).clone()
    }

    /// Send with the current token, reacting to the server's verdict.
    async fn authorized<T, F, Fut>(&self, auth_header: Option<String>, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let Some(auth) = &self.auth else {
            let result = call(auth_header).await;
            if let Err(StreamableHttpError::AuthRequired(e)) = &result {
                *code_mode_core::sync::lock(&self.challenge) = Some(e.www_authenticate_header.clone());
            }
            return result;
        };
        let mut token = auth.token().await.map_err(refused)?;
        let mut renewed = false;
        for _ in 0..MAX_TRIES {
            match call(token.clone()).await {
                Err(StreamableHttpError::AuthRequired(e)) => {
                    if renewed && token.is_some() {
                        return Err(refused(auth.refused_fresh().await));
                    }
                    token = Some(auth.rejected(token.as_deref(), &e.www_authenticate_header).await.map_err(refused)?);
                    renewed = true;
                }
                Err(StreamableHttpError::InsufficientScope(e)) => {
                    token =
                        Some(auth.insufficient(token.as_deref(), &e.www_authenticate_header).await.map_err(refused)?);
                }
                other => return other,
            }
        }
        Err(refused(UpstreamError::StillInsufficient {
            server: auth.server().to_string(),
            scope: "as challenged".into(),
        }))
    }
}

/// An [`UpstreamError`] as a transport error (the `Io` variant carries it
/// as its inner error, where [`refusal`] finds it).
fn refused(error: UpstreamError) -> HttpError {
    StreamableHttpError::Io(std::io::Error::other(error))
}

/// The authorization problem inside `error` (a failed request's error
/// chain), if that is why it failed.
pub fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<UpstreamError> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<UpstreamError>() {
            return Some(found.clone());
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(found) = io.get_ref().and_then(|inner| inner.downcast_ref::<UpstreamError>())
        {
            return Some(found.clone());
        }
        if let Some(found) = e.downcast_ref::<HttpError>().and_then(|e| match e {
            StreamableHttpError::Io(io) => io.get_ref().and_then(|inner| inner.downcast_ref::<UpstreamError>()),
            _ => None,
        }) {
            return Some(found.clone());
        }
        current = e.source();
    }
    None
}

impl StreamableHttpClient for AuthorizedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .authorized(auth_header, |token| {
                let (uri, message, session_id, headers) =
                    (uri.clone(), message.clone(), session_id.clone(), custom_headers.clone());
                async move { self.http.post_message(uri, message, session_id, token, headers).await }
            })
            .await;
        self.noted_post(response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .authorized(auth_header, |token| {
                let (uri, message, session_id, headers) =
                    (uri.clone(), message.clone(), session_id.clone(), custom_headers.clone());
                async move {
                    self.http
                        .post_message_with_max_sse_event_size(
                            uri,
                            message,
                            session_id,
                            token,
                            headers,
                            max_sse_event_size,
                        )
                        .await
                }
            })
            .await;
        self.noted_post(response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let response = self
            .authorized(auth_header, |token| {
                let (uri, message, session_id, headers) =
                    (uri.clone(), message.clone(), session_id.clone(), custom_headers.clone());
                async move {
                    self.http.post_message_with_response_limits(uri, message, session_id, token, headers, limits).await
                }
            })
            .await;
        self.noted_post(response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.authorized(auth_header, |token| {
            let (uri, session_id, headers) = (uri.clone(), session_id.clone(), custom_headers.clone());
            async move { self.http.delete_session(uri, session_id, token, headers).await }
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let response = self
            .authorized(auth_header, |token| {
                let (uri, session_id, last, headers) =
                    (uri.clone(), session_id.clone(), last_event_id.clone(), custom_headers.clone());
                async move { self.http.get_stream(uri, session_id, last, token, headers).await }
            })
            .await;
        self.noted_get(response)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let response = self
            .authorized(auth_header, |token| {
                let (uri, session_id, last, headers) =
                    (uri.clone(), session_id.clone(), last_event_id.clone(), custom_headers.clone());
                async move {
                    self.http
                        .get_stream_with_max_sse_event_size(uri, session_id, last, token, headers, max_sse_event_size)
                        .await
                }
            })
            .await;
        self.noted_get(response)
    }
}
