//! The NATS transport of the [`Bus`](crate::bus::Bus).
//!
//! Requests are NATS requests (a reply inbox per request); responders are
//! queue subscriptions, so each request reaches one member of the group and
//! replicas of a service share the load. The async-nats `Client` is itself a
//! handle on one connection task, which reconnects on its own.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::bus::{BusError, Request, Responder, Transport};

/// A bus transport over one NATS connection.
#[derive(Clone, Debug)]
pub struct NatsTransport {
    client: async_nats::Client,
}

/// How to reach and log in to NATS.
#[derive(Clone, Debug, Default)]
pub struct NatsOptions {
    /// `nats://host:port`, comma-separated for several servers.
    pub url: String,
    /// User and password, when the server requires them.
    pub credentials: Option<(String, String)>,
    /// A name for this connection in the server's monitoring.
    pub name: Option<String>,
    /// The prefix of this connection's reply subjects (default `_INBOX`).
    /// Each service uses its own (`_INBOX.<service>`), so the server can let
    /// it subscribe to its own replies only.
    pub inbox_prefix: Option<String>,
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
        let client = connect
            .connect(options.url.as_str())
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
    async fn request(&self, subject: &str, payload: Bytes, timeout: Duration) -> Result<Bytes, BusError> {
        // While the client reconnects, a request would wait in its queue for
        // the whole timeout: fail at once instead, saying why.
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Err(BusError::Transport(format!(
                "not connected to NATS (reconnecting): the request on {subject} was not sent; try again shortly"
            )));
        }
        let request = async_nats::client::Request::new().payload(payload).timeout(Some(timeout));
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
                let request = Request {
                    payload: message.payload,
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
