//! The NATS transport of the [`Bus`](crate::bus::Bus).
//!
//! Requests are NATS requests (a reply inbox per request); responders are
//! queue subscriptions, so each request reaches one member of the group and
//! replicas of a service share the load. The async-nats `Client` is itself a
//! handle on one connection task, which reconnects on its own.
//!
//! A request's trace context travels as NATS message headers
//! (`traceparent`, `tracestate`; nats-server supports headers by default,
//! no configuration needed); a request without one carries no headers.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::bus::{BusError, Request, Responder, TraceHeaders, Transport};

/// A bus transport over one NATS connection.
#[derive(Clone, Debug)]
pub struct NatsTransport {
    client: async_nats::Client,
}

/// How to reach and log in to NATS.
#[derive(Clone, Debug, Default)]
pub struct NatsOptions {
    /// `nats://host:port`, comma-separated for several servers (see
    /// [`server_list`]).
    pub url: String,
    /// User and password, when the server requires them.
    pub credentials: Option<(String, String)>,
    /// A name for this connection in the server's monitoring.
    pub name: Option<String>,
    /// The prefix of this connection's reply subjects (default `_INBOX`).
    /// Each service uses its own (`_INBOX.<service>`), so the server can let
    /// it subscribe to its own replies only.
    pub inbox_prefix: Option<String>,
    /// TLS: the roots to trust and this client's certificate.
    pub tls: NatsTls,
}

/// TLS of a NATS connection. With any of it set, the connection requires
/// TLS (as a `tls://` URL does).
#[derive(Clone, Debug, Default)]
pub struct NatsTls {
    /// PEM file of the certificate authorities that sign the servers'
    /// certificates (added to the system's roots).
    pub ca: Option<std::path::PathBuf>,
    /// PEM files of this client's certificate and key, for servers that
    /// verify clients (`verify: true`).
    pub cert_and_key: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl NatsTls {
    /// Whether anything is set.
    pub fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert_and_key.is_some()
    }

    /// Every file named must be readable now: a missing one stops startup
    /// naming what it was for, instead of failing later inside the TLS
    /// handshake.
    fn check(&self) -> Result<(), BusError> {
        let mut files = Vec::new();
        if let Some(ca) = &self.ca {
            files.push(("the CA file", ca));
        }
        if let Some((cert, key)) = &self.cert_and_key {
            files.push(("the client certificate", cert));
            files.push(("the client key", key));
        }
        for (what, path) in files {
            std::fs::File::open(path)
                .map_err(|e| BusError::Transport(format!("NATS TLS: {what} {}: {e}", path.display())))?;
        }
        Ok(())
    }
}

impl NatsTransport {
    /// Connect. The first connection must succeed; later disconnections are
    /// retried by the client forever.
    pub async fn connect(options: &NatsOptions) -> Result<Self, BusError> {
        let mut connect =
            async_nats::ConnectOptions::new().max_reconnects(None::<usize>).connection_timeout(Duration::from_secs(5));
        if let Some((user, password)) = &options.credentials {
            connect = connect.user_and_password(user.clone(), password.clone());
        }
        if let Some(name) = &options.name {
            connect = connect.name(name.clone());
        }
        if let Some(prefix) = &options.inbox_prefix {
            connect = connect.custom_inbox_prefix(prefix);
        }
        if options.tls.is_set() {
            options.tls.check()?;
            connect = connect.require_tls(true);
            if let Some(ca) = &options.tls.ca {
                connect = connect.add_root_certificates(ca.clone());
            }
            if let Some((cert, key)) = &options.tls.cert_and_key {
                connect = connect.add_client_certificate(cert.clone(), key.clone());
            }
        }
        let url = options.url.clone();
        connect = connect.event_callback(move |event| {
            let url = url.clone();
            async move {
                match event {
                    async_nats::Event::Connected => tracing::info!(%url, "connected to NATS"),
                    async_nats::Event::Disconnected => tracing::warn!(%url, "disconnected from NATS; reconnecting"),
                    other => tracing::warn!(%url, "NATS: {other}"),
                }
            }
        });
        let servers = server_list(&options.url)?;
        let client = connect
            .connect(servers)
            .await
            .map_err(|e| BusError::Transport(format!("cannot connect to NATS at {}: {e}", options.url)))?;
        Ok(Self { client })
    }

    /// Wait until the server has processed everything this connection sent
    /// so far (a subscription included): a message to a fresh inbox of ours
    /// comes back only after it. (`flush` only empties the write buffer.)
    async fn barrier(&self) -> Result<(), BusError> {
        let inbox = self.client.new_inbox();
        let fail = |what: &str, e: &dyn std::fmt::Display| BusError::Transport(format!("barrier {what}: {e}"));
        let mut echo = self.client.subscribe(inbox.clone()).await.map_err(|e| fail("subscribe", &e))?;
        self.client.publish(inbox, Bytes::new()).await.map_err(|e| fail("publish", &e))?;
        match tokio::time::timeout(Duration::from_secs(5), echo.next()).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(BusError::Transport("barrier: the subscription closed".into())),
            Err(_) => Err(BusError::Transport("barrier: no echo from the server within 5 s".into())),
        }
    }

    /// The underlying client (for JetStream).
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }
}

/// The servers of a `--nats` value: one URL, or several separated by
/// commas (the nodes of a cluster; the client connects to one and fails
/// over to the others, and learns further nodes from the cluster itself).
/// An entry that is not a URL is an error naming it.
pub fn server_list(urls: &str) -> Result<Vec<async_nats::ServerAddr>, BusError> {
    let servers: Vec<async_nats::ServerAddr> = urls
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| {
            u.parse::<async_nats::ServerAddr>()
                .map_err(|e| BusError::Transport(format!("{u:?} in the NATS server list is not a NATS URL: {e}")))
        })
        .collect::<Result<_, _>>()?;
    if servers.is_empty() {
        return Err(BusError::Transport(format!("no NATS server URL in {urls:?}")));
    }
    Ok(servers)
}

/// Wait (up to `within`) until a JetStream stream answers with a leader.
/// A stream or key-value bucket just created with several replicas answers
/// reads only once its replicas have elected one (a few hundred ms in a
/// cluster); a stream on a single server has one at once. Returns whether
/// it has one; the caller's next request fails, saying why, if not.
pub async fn wait_for_stream_leader(stream: &async_nats::jetstream::stream::Stream, within: Duration) -> bool {
    let started = tokio::time::Instant::now();
    let give_up = started + within;
    let name = &stream.cached_info().config.name;
    let mut told = false;
    loop {
        if let Ok(info) = stream.get_info().await
            && info.cluster.as_ref().is_none_or(|c| c.leader.is_some())
        {
            if told {
                tracing::info!(stream = %name, waited_ms = started.elapsed().as_millis() as u64, "the stream has a leader");
            }
            return true;
        }
        if tokio::time::Instant::now() >= give_up {
            tracing::warn!(stream = %name, waited_ms = started.elapsed().as_millis() as u64,
                "the stream elected no leader in time: its requests fail until it does");
            return false;
        }
        // Say so once it takes long enough to be seen at start.
        if !told && started.elapsed() >= Duration::from_secs(1) {
            tracing::info!(stream = %name, "waiting for the replicated stream to elect a leader");
            told = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A request's trace context as NATS headers.
fn nats_headers(headers: &TraceHeaders) -> async_nats::HeaderMap {
    let mut map = async_nats::HeaderMap::new();
    for (name, value) in headers.iter() {
        map.insert(name, value);
    }
    map
}

/// The trace context among a message's NATS headers (nothing else of them).
fn trace_headers(map: &async_nats::HeaderMap) -> TraceHeaders {
    use code_mode_telemetry::trace::{TRACEPARENT, TRACESTATE};
    TraceHeaders::from_pairs(
        [TRACEPARENT, TRACESTATE].into_iter().filter_map(|name| map.get(name).map(|v| (name, v.as_str()))),
    )
}

struct NatsResponder {
    client: async_nats::Client,
    reply: async_nats::Subject,
}

#[async_trait]
impl Responder for NatsResponder {
    async fn respond(self: Box<Self>, payload: Bytes) -> Result<(), BusError> {
        self.client.publish(self.reply, payload).await.map_err(|e| BusError::Transport(e.to_string()))
    }
}

#[async_trait]
impl Transport for NatsTransport {
    async fn request(
        &self,
        subject: &str,
        headers: &TraceHeaders,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError> {
        // While the client reconnects, a request would wait in its queue for
        // the whole timeout: fail at once instead, saying why.
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Err(BusError::Transport(format!(
                "not connected to NATS (reconnecting): the request on {subject} was not sent; try again shortly"
            )));
        }
        let mut request = async_nats::client::Request::new().payload(payload).timeout(Some(timeout));
        if !headers.is_empty() {
            request = request.headers(nats_headers(headers));
        }
        match self.client.send_request(subject.to_string(), request).await {
            Ok(message) => Ok(message.payload),
            Err(e) => Err(match e.kind() {
                async_nats::RequestErrorKind::NoResponders => BusError::NoResponders { subject: subject.to_string() },
                async_nats::RequestErrorKind::TimedOut => {
                    BusError::Timeout { subject: subject.to_string(), after: timeout }
                }
                _ => BusError::Transport(format!("request on {subject}: {e}")),
            }),
        }
    }

    async fn subscribe(&self, subject: &str, queue_group: &str) -> Result<mpsc::Receiver<Request>, BusError> {
        let mut subscription = self
            .client
            .queue_subscribe(subject.to_string(), queue_group.to_string())
            .await
            .map_err(|e| BusError::Transport(format!("subscribe to {subject}: {e}")))?;
        self.barrier().await?;
        let (tx, rx) = mpsc::channel(256);
        let client = self.client.clone();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    // The service stopped serving: leave the queue group at once, so
                    // requests go to other members (or fail with no responders).
                    _ = tx.closed() => break,
                    m = subscription.next() => match m { Some(m) => m, None => break },
                };
                let Some(reply) = message.reply else { continue };
                let headers = match &message.headers {
                    Some(h) => trace_headers(h),
                    None => TraceHeaders::default(),
                };
                let request = Request {
                    payload: message.payload,
                    headers,
                    responder: Box::new(NatsResponder { client: client.clone(), reply }),
                };
                if tx.send(request).await.is_err() {
                    break;
                }
            }
            let _ = subscription.unsubscribe().await;
        });
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comma_separated_list_names_every_server_and_a_bad_entry_is_named() {
        let servers = server_list("nats://a:4222, nats://b:4223,nats://c:4224").unwrap();
        assert_eq!(servers.len(), 3);
        assert_eq!(server_list("nats://only:4222").unwrap().len(), 1);
        let err = server_list("nats://a:4222,nats://b:notaport").unwrap_err().to_string();
        assert!(err.contains("\"nats://b:notaport\" in the NATS server list"), "{err}");
        assert!(server_list(" , ").is_err());
    }
}
