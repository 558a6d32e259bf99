//! Request/reply on named subjects with queue groups.
//!
//! The services talk only through a [`Bus`]: a requester sends bytes on a
//! subject and waits for one reply; a responder serves a subject in a queue
//! group, and each request reaches one member of the group. That is the
//! NATS model, so the in-process [`InProcess`] transport built here and the
//! NATS transport behave alike and the same tests run over both.
//!
//! On top of raw bytes, [`Bus::call`] and [`Bus::serve`] carry typed JSON
//! messages wrapped in the [`Reply`] envelope of `code-mode-proto`.
//!
//! Each request also carries the caller's trace context ([`TraceHeaders`]:
//! W3C `traceparent`/`tracestate`, NATS message headers over NATS), and
//! each handler runs under it, so the spans the handler makes are children
//! of the caller's (`docs/tracing.md`). The headers are empty when nothing
//! is traced.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use code_mode_proto::{ErrorKind, Reply, WireError};
pub use code_mode_telemetry::trace::TraceHeaders;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Errors of the bus layer.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// Nobody serves the subject.
    #[error("no service answers on {subject}")]
    NoResponders {
        /// The subject.
        subject: String,
    },
    /// The responder did not answer in time.
    #[error("no reply on {subject} within {after:?}")]
    Timeout {
        /// The subject.
        subject: String,
        /// How long the requester waited.
        after: Duration,
    },
    /// The responder dropped the request without answering.
    #[error("the service on {subject} dropped the request")]
    Dropped {
        /// The subject.
        subject: String,
    },
    /// A message could not be encoded or decoded.
    #[error("bad message on {subject}: {source}")]
    Codec {
        /// The subject.
        subject: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The service answered with an error.
    #[error("{subject}: {}", .error.message)]
    Remote {
        /// The subject.
        subject: String,
        /// What the service said.
        error: WireError,
    },
    /// The transport itself failed.
    #[error("bus transport: {0}")]
    Transport(String),
}

impl BusError {
    /// A fixed word naming the error, the `kind` label of
    /// `codemode_bus_request_errors_total`.
    /// Every [`BusError::kind`] value (the metric's `kind` label values).
    pub const KINDS: [&'static str; 6] = ["no_responders", "timeout", "dropped", "codec", "remote", "transport"];

    pub fn kind(&self) -> &'static str {
        match self {
            BusError::NoResponders { .. } => "no_responders",
            BusError::Timeout { .. } => "timeout",
            BusError::Dropped { .. } => "dropped",
            BusError::Codec { .. } => "codec",
            BusError::Remote { .. } => "remote",
            BusError::Transport(_) => "transport",
        }
    }

    /// The host fault of a tool call whose request to the bridge failed on
    /// the bus (a runner relaying a cell's call, a frontend sending a
    /// direct one): only this kind reaches the code or the client, never
    /// the error's details.
    pub fn tool_call_fault(&self) -> ErrorKind {
        match self {
            BusError::NoResponders { .. } => ErrorKind::BridgeUnavailable,
            BusError::Timeout { .. } => ErrorKind::BridgeTimeout,
            _ => ErrorKind::BridgeError,
        }
    }
}

/// A reply channel for one request.
#[async_trait]
pub trait Responder: Send {
    /// Send the reply.
    async fn respond(self: Box<Self>, payload: Bytes) -> Result<(), BusError>;
}

/// One request as a responder receives it.
pub struct Request {
    /// The request body.
    pub payload: Bytes,
    /// The caller's trace context (empty when it traces nothing).
    pub headers: TraceHeaders,
    /// Where the reply goes.
    pub responder: Box<dyn Responder>,
}

/// The transport under a [`Bus`]: in-process now, NATS later.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Send a request (with the caller's trace context) and wait for one
    /// reply.
    async fn request(
        &self,
        subject: &str,
        headers: &TraceHeaders,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError>;
    /// Receive the requests on `subject` as a member of `queue_group`.
    async fn subscribe(&self, subject: &str, queue_group: &str) -> Result<mpsc::Receiver<Request>, BusError>;
}

/// A cheap, cloneable handle on a transport.
#[derive(Clone)]
pub struct Bus {
    transport: Arc<dyn Transport>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bus")
    }
}

impl Bus {
    /// A bus over the given transport.
    pub fn new(transport: impl Transport) -> Self {
        Self { transport: Arc::new(transport) }
    }

    /// A bus whose services all live in this process.
    pub fn in_process() -> Self {
        Self::new(InProcess::default())
    }

    /// Send a typed request and decode the typed reply. It counts in
    /// `codemode_bus_requests_total{subject}`, a failure in
    /// `codemode_bus_request_errors_total{subject, kind}`.
    pub async fn call<Q, R>(&self, subject: &str, request: &Q, timeout: Duration) -> Result<R, BusError>
    where
        Q: Serialize + Sync,
        R: DeserializeOwned,
    {
        self.call_counted_as(subject, subject, request, timeout).await
    }

    /// [`Bus::call`] on a subject made per session (such as an approval
    /// subject), counted under `metric_subject` so that the metric's label
    /// values stay few.
    pub async fn call_counted_as<Q, R>(
        &self,
        subject: &str,
        metric_subject: &str,
        request: &Q,
        timeout: Duration,
    ) -> Result<R, BusError>
    where
        Q: Serialize + Sync,
        R: DeserializeOwned,
    {
        code_mode_telemetry::bus_request(metric_subject, &BusError::KINDS);
        let result = self.call_unrecorded(subject, request, timeout).await;
        if let Err(e) = &result {
            code_mode_telemetry::bus_request_error(metric_subject, e.kind());
        }
        result
    }

    /// [`Bus::call`] without counting it in the bus metrics: for lease
    /// checks, sent every second per running cell and expected to find
    /// nobody once the cell has ended, which are no errors of the bus.
    pub async fn call_quiet<Q, R>(&self, subject: &str, request: &Q, timeout: Duration) -> Result<R, BusError>
    where
        Q: Serialize + Sync,
        R: DeserializeOwned,
    {
        self.call_unrecorded(subject, request, timeout).await
    }

    async fn call_unrecorded<Q, R>(&self, subject: &str, request: &Q, timeout: Duration) -> Result<R, BusError>
    where
        Q: Serialize + Sync,
        R: DeserializeOwned,
    {
        let codec = |source| BusError::Codec { subject: subject.to_string(), source };
        let payload = serde_json::to_vec(request).map_err(codec)?;
        let headers = TraceHeaders::current();
        let answer = self.transport.request(subject, &headers, Bytes::from(payload), timeout).await?;
        match serde_json::from_slice::<Reply<R>>(&answer).map_err(codec)? {
            Reply::Ok(reply) => Ok(reply),
            Reply::Err(error) => Err(BusError::Remote { subject: subject.to_string(), error }),
        }
    }

    /// Serve `subject` in `queue_group` with the default [`Serving`]
    /// bounds: each request is decoded and handled in its own task, so a
    /// slow request never holds up the next. Stops taking requests when
    /// `cancel` fires; the returned handle ends once the requests in flight
    /// are answered, or at the drain deadline.
    pub async fn serve<Q, R, F, Fut>(
        &self,
        subject: &str,
        queue_group: &str,
        cancel: CancellationToken,
        handler: F,
    ) -> Result<tokio::task::JoinHandle<()>, BusError>
    where
        Q: DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(Q) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, WireError>> + Send + 'static,
    {
        self.serve_with(subject, queue_group, Serving::default(), cancel, handler).await
    }

    /// [`Bus::serve`] within `bounds`: at most `bounds.in_flight` requests
    /// are handled at once (the next waits in the subscription, so a flood
    /// meets back-pressure instead of an unbounded number of tasks), and
    /// after `cancel` the requests in flight get `bounds.drain` to finish
    /// before they are dropped (their requesters then hear nothing and time
    /// out, as they would from a dead service). Each phase is logged.
    pub async fn serve_with<Q, R, F, Fut>(
        &self,
        subject: &str,
        queue_group: &str,
        bounds: Serving,
        cancel: CancellationToken,
        handler: F,
    ) -> Result<tokio::task::JoinHandle<()>, BusError>
    where
        Q: DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(Q) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, WireError>> + Send + 'static,
    {
        let mut requests = self.transport.subscribe(subject, queue_group).await?;
        let subject = subject.to_string();
        let handler = Arc::new(handler);
        let slots = Arc::new(tokio::sync::Semaphore::new(bounds.in_flight.max(1)));
        Ok(tokio::spawn(async move {
            let mut in_flight = tokio::task::JoinSet::new();
            loop {
                // A slot first: at the bound, the next request waits where
                // it is (the subscription's buffer, or NATS).
                let slot = tokio::select! {
                    _ = cancel.cancelled() => break,
                    slot = slots.clone().acquire_owned() => match slot { Ok(slot) => slot, Err(_) => break },
                };
                let request = tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = requests.recv() => match r { Some(r) => r, None => break },
                };
                let handler = handler.clone();
                let subject = subject.clone();
                in_flight.spawn(async move {
                    let _slot = slot;
                    answer(&subject, request, handler.as_ref()).await;
                });
                // Reap finished tasks so the set does not grow without bound.
                while in_flight.try_join_next().is_some() {}
            }
            drop(requests);
            if !in_flight.is_empty() {
                tracing::debug!(%subject, in_flight = in_flight.len(), drain = ?bounds.drain, "stopped taking requests; draining");
            }
            let drained = tokio::time::timeout(bounds.drain, async { while in_flight.join_next().await.is_some() {} });
            if drained.await.is_err() {
                tracing::warn!(%subject, dropped = in_flight.len(), drain = ?bounds.drain, "requests still in flight at the drain deadline were dropped");
                in_flight.abort_all();
                while in_flight.join_next().await.is_some() {}
            }
        }))
    }
}

/// How a subscription is served ([`Bus::serve_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serving {
    /// Requests handled at once.
    pub in_flight: usize,
    /// How long the requests in flight get to finish after the stop.
    pub drain: Duration,
}

impl Default for Serving {
    /// [`crate::defaults::MAX_IN_FLIGHT`] at once, [`crate::defaults::DRAIN`]
    /// to finish.
    fn default() -> Self {
        Self { in_flight: crate::defaults::MAX_IN_FLIGHT, drain: crate::defaults::DRAIN }
    }
}

/// Decode one request, run the handler (under the caller's trace context),
/// send its reply (or the error).
async fn answer<Q, R, F, Fut>(subject: &str, request: Request, handler: &F)
where
    Q: DeserializeOwned,
    R: Serialize,
    F: Fn(Q) -> Fut,
    Fut: Future<Output = Result<R, WireError>>,
{
    let reply = match serde_json::from_slice::<Q>(&request.payload) {
        Ok(q) => match code_mode_telemetry::trace::within(&request.headers, handler(q)).await {
            Ok(r) => Reply::Ok(r),
            Err(e) => Reply::Err(e),
        },
        Err(e) => Reply::Err(WireError {
            kind: ErrorKind::BadRequest,
            message: format!("request on {subject} is not valid: {e}"),
        }),
    };
    let bytes = match serde_json::to_vec(&reply) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(%subject, error = %e, "reply could not be encoded");
            return;
        }
    };
    if let Err(e) = request.responder.respond(Bytes::from(bytes)).await {
        tracing::warn!(%subject, error = %e, "reply not delivered");
    }
}

/// The in-process transport: subjects map to queue groups of channels.
///
/// The routing table is behind a std `Mutex`: it is held only to pick a
/// member, never across an `.await`.
#[derive(Default, Clone)]
pub struct InProcess {
    routes: Arc<Mutex<HashMap<String, Vec<Group>>>>,
}

struct Group {
    name: String,
    members: Vec<mpsc::Sender<Request>>,
    next: usize,
}

struct OneshotResponder(oneshot::Sender<Bytes>);

#[async_trait]
impl Responder for OneshotResponder {
    async fn respond(self: Box<Self>, payload: Bytes) -> Result<(), BusError> {
        self.0.send(payload).map_err(|_| BusError::Transport("the requester is gone".into()))
    }
}

impl InProcess {
    /// Pick one live member of the first group that has one (round robin
    /// inside the group), dropping members whose receiver is gone.
    fn pick(&self, subject: &str) -> Option<mpsc::Sender<Request>> {
        let mut routes = crate::sync::lock(&self.routes);
        let groups = routes.get_mut(subject)?;
        for group in groups.iter_mut() {
            group.members.retain(|m| !m.is_closed());
            if group.members.is_empty() {
                continue;
            }
            group.next = (group.next + 1) % group.members.len();
            return Some(group.members[group.next].clone());
        }
        None
    }
}

#[async_trait]
impl Transport for InProcess {
    async fn request(
        &self,
        subject: &str,
        headers: &TraceHeaders,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError> {
        let member = self.pick(subject).ok_or_else(|| BusError::NoResponders { subject: subject.to_string() })?;
        let (tx, rx) = oneshot::channel();
        let request = Request { payload, headers: headers.clone(), responder: Box::new(OneshotResponder(tx)) };
        member.send(request).await.map_err(|_| BusError::NoResponders { subject: subject.to_string() })?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(BusError::Dropped { subject: subject.to_string() }),
            Err(_) => Err(BusError::Timeout { subject: subject.to_string(), after: timeout }),
        }
    }

    async fn subscribe(&self, subject: &str, queue_group: &str) -> Result<mpsc::Receiver<Request>, BusError> {
        let (tx, rx) = mpsc::channel(256);
        let mut routes = crate::sync::lock(&self.routes);
        let groups = routes.entry(subject.to_string()).or_default();
        match groups.iter_mut().find(|g| g.name == queue_group) {
            Some(group) => group.members.push(tx),
            None => groups.push(Group { name: queue_group.to_string(), members: vec![tx], next: 0 }),
        }
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bus serving `subject` with `bounds`: each request waits for
    /// `release` (or returns at once with `None`), counting how many ran.
    async fn held_service(
        bounds: Serving,
        release: Option<Arc<tokio::sync::Notify>>,
    ) -> (Bus, CancellationToken, tokio::task::JoinHandle<()>, Arc<std::sync::atomic::AtomicUsize>) {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = started.clone();
        let task = bus
            .serve_with("svc", "group", bounds, cancel.clone(), move |n: u32| {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let release = release.clone();
                async move {
                    match release {
                        Some(release) => release.notified().await,
                        None => std::future::pending().await,
                    }
                    Ok(n)
                }
            })
            .await
            .unwrap();
        (bus, cancel, task, started)
    }

    #[tokio::test]
    async fn a_subscription_handles_at_most_its_bound_at_once_and_the_next_waits_for_a_slot() {
        let release = Arc::new(tokio::sync::Notify::new());
        let bounds = Serving { in_flight: 2, drain: Duration::from_secs(1) };
        let (bus, cancel, _task, started) = held_service(bounds, Some(release.clone())).await;
        let calls: Vec<_> = (0..3u32)
            .map(|n| {
                let bus = bus.clone();
                tokio::spawn(async move { bus.call::<_, u32>("svc", &n, Duration::from_secs(10)).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 2, "two at once, the third waits");
        release.notify_one();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 3, "a slot freed: the third runs");
        release.notify_waiters();
        release.notify_one();
        for call in calls {
            tokio::time::timeout(Duration::from_secs(5), call).await.expect("answered").unwrap().unwrap();
        }
        cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_stop_a_request_that_never_finishes_is_dropped_at_the_drain_deadline() {
        let bounds = Serving { in_flight: 8, drain: Duration::from_secs(3) };
        let (bus, cancel, task, started) = held_service(bounds, None).await;
        let call = tokio::spawn(async move { bus.call::<_, u32>("svc", &7, Duration::from_secs(60)).await });
        while started.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stopped = tokio::time::Instant::now();
        cancel.cancel();
        task.await.unwrap();
        assert_eq!(stopped.elapsed(), Duration::from_secs(3), "the serving task ends at the drain deadline");
        let answer = call.await.unwrap();
        assert!(matches!(answer, Err(BusError::Dropped { .. })), "the requester hears the drop: {answer:?}");
    }

    #[test]
    fn a_tool_call_that_never_reached_the_bridge_is_a_bridge_fault_by_kind_only() {
        let none = BusError::NoResponders { subject: "s".into() };
        assert_eq!(none.tool_call_fault(), ErrorKind::BridgeUnavailable);
        let timeout = BusError::Timeout { subject: "s".into(), after: Duration::from_secs(1) };
        assert_eq!(timeout.tool_call_fault(), ErrorKind::BridgeTimeout);
        assert_eq!(BusError::Transport("x".into()).tool_call_fault(), ErrorKind::BridgeError);
        assert_eq!(BusError::Dropped { subject: "s".into() }.tool_call_fault(), ErrorKind::BridgeError);
    }
}
