//! Sessions of one client's own with the wrapped servers.
//!
//! A wrapped server's questions (sampling, elicitation, roots) and its log
//! messages carry no mark of the call they belong to on stdio, so on a
//! session shared by every client they could reach the wrong one. A client
//! that can be asked or listens to logs ([`ClientLink::wants_own_session`])
//! therefore talks to each server it uses over a session of its own,
//! opened on its first call to that server: a new child process of a stdio
//! server, a new MCP session of a remote one, initialized with that
//! client's capabilities. Everything the server sends there is that
//! client's ([`crate::relay`]). A subscription to a resource also needs
//! one, since its updates come later, outside any call.
//!
//! The registry owns every such session, by the frontend session object it
//! serves (a client session, or a stateless request's own object) and the
//! server. Each session's task owns the MCP session itself ([`open_own`]).
//! A session goes:
//!
//! - when its client session ends (the bridge that hears of the end closes
//!   that client's sessions; other bridge replicas close theirs when idle);
//! - for a stateless request, as soon as its last call ends (the request is
//!   the whole conversation);
//! - after [`OWN_IDLE`] without a call (checked every [`REAP_EVERY`]);
//! - when the server exits (the next call opens a new one);
//! - on shutdown.
//!
//! At most [`MAX_OWN`] are open at once per bridge: a new one closes the
//! one unused the longest that has no call in flight, and when every one is
//! busy the call goes over the shared session, where the server's
//! questions find nobody to answer them (logged).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::ClientLink;
use rmcp::service::{Peer, RoleClient};
use tokio::sync::OnceCell;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::relay::{BridgeRef, Flights, Owner, Relay};
use crate::server::{self, CallError, ServerHandle};

/// Sessions of clients' own open at once, per bridge.
pub const MAX_OWN: usize = 64;

/// A client's own session closes after this long without a call.
pub const OWN_IDLE: Duration = Duration::from_secs(600);

/// How often idle sessions are looked for.
pub const REAP_EVERY: Duration = Duration::from_secs(30);

/// How long setting a server's log level may take before a call goes on
/// without it.
const SET_LEVEL_TIMEOUT: Duration = Duration::from_secs(2);

/// The registry key of a server's shared session of the stateless
/// revision (no frontend session object is named so: ids are UUIDs).
const STATELESS: &str = "(stateless)";

/// How long a server found not to speak the stateless revision is not
/// asked again.
const LEGACY_RECHECK: Duration = Duration::from_secs(600);

/// One client's own session with one server, once open.
#[derive(Debug, Clone)]
pub(crate) struct Own {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) flights: Flights,
    close: CancellationToken,
    last_used: Arc<std::sync::Mutex<Instant>>,
    /// The log level last set on the server (`logging/setLevel`).
    level: Arc<std::sync::Mutex<Option<String>>>,
}

impl Own {
    /// Set the server's log level to the client's, when it changed (a
    /// server that takes no levels is not asked).
    pub(crate) async fn follow_level(&self, level: Option<&str>, logging: bool) {
        let Some(level) = level else { return };
        if !logging || code_mode_core::sync::lock(&self.level).as_deref() == Some(level) {
            return;
        }
        let request = serde_json::json!({"method": "logging/setLevel", "params": {"level": level}});
        let Ok(request) = serde_json::from_value::<rmcp::model::ClientRequest>(request) else { return };
        match tokio::time::timeout(SET_LEVEL_TIMEOUT, self.peer.send_request(request)).await {
            Ok(Ok(_)) => *code_mode_core::sync::lock(&self.level) = Some(level.to_string()),
            Ok(Err(e)) => tracing::debug!(error = %e, "the server did not take the client's log level"),
            Err(_) => tracing::debug!("the server did not answer logging/setLevel in time"),
        }
    }

    fn touch(&self) {
        *code_mode_core::sync::lock(&self.last_used) = Instant::now();
    }

    fn idle_since(&self) -> Instant {
        *code_mode_core::sync::lock(&self.last_used)
    }

    fn busy(&self) -> bool {
        self.flights.count() > 0
    }
}

/// A place in the registry: the session once it is open (opened once, by
/// the first call that needs it; concurrent calls wait for that opening).
type Slot = Arc<OnceCell<Result<Own, String>>>;

/// The registry of clients' own sessions (see the module doc). A std mutex
/// guards the map: it is held only to look up, insert or remove, never
/// across an await.
#[derive(Debug)]
pub(crate) struct Upstreams {
    slots: std::sync::Mutex<HashMap<(String, usize), Slot>>,
    bridge: BridgeRef,
    cancel: CancellationToken,
    tasks: TaskTracker,
    /// Servers found not to speak the stateless revision, and when.
    legacy: std::sync::Mutex<HashMap<usize, Instant>>,
}

impl Upstreams {
    pub(crate) fn new(bridge: BridgeRef, cancel: CancellationToken) -> Self {
        Self { slots: Default::default(), bridge, cancel, tasks: TaskTracker::new(), legacy: Default::default() }
    }

    /// The server's shared session of the stateless 2026-07-28 revision,
    /// for the direct calls of stateless clients: each request carries its
    /// client's capabilities, and the server's questions come back as its
    /// own input-required result, passed to the client as it is. `None`
    /// for a server that speaks only the handshake revisions (found once,
    /// asked again after [`LEGACY_RECHECK`]).
    pub(crate) async fn stateless(&self, index: usize, server: &ServerHandle) -> Option<Own> {
        let found_legacy = code_mode_core::sync::lock(&self.legacy).get(&index).copied();
        if found_legacy.is_some_and(|at| at.elapsed() < LEGACY_RECHECK) {
            return None;
        }
        let owner =
            Owner { asker: STATELESS.to_string(), session: String::new(), identity: None, link: ClientLink::default() };
        match self.get_as(index, server, &owner, true).await {
            Ok(own) => own,
            Err(e) => {
                tracing::info!(server = %server.name(), error = %e, "the server does not speak the stateless revision: its stateless clients' questions are relayed");
                code_mode_core::sync::lock(&self.legacy).insert(index, Instant::now());
                None
            }
        }
    }

    /// The tasks owning the sessions, to wait for at shutdown.
    pub(crate) fn tasks(&self) -> TaskTracker {
        self.tasks.clone()
    }

    /// The session of `owner`'s client with `server` (at index `index`),
    /// opened if it has none (or its last one ended); `Ok(None)` when none
    /// can be had now (every place is taken by a busy one), so the call
    /// goes over the shared session.
    pub(crate) async fn get(
        &self,
        index: usize,
        server: &ServerHandle,
        owner: &Owner,
    ) -> Result<Option<Own>, CallError> {
        self.get_as(index, server, owner, false).await
    }

    async fn get_as(
        &self,
        index: usize,
        server: &ServerHandle,
        owner: &Owner,
        stateless: bool,
    ) -> Result<Option<Own>, CallError> {
        let key = (owner.asker.clone(), index);
        // A session found ended is forgotten and opened anew, once.
        for _ in 0..2 {
            let Some(slot) = self.slot(&key, server) else { return Ok(None) };
            let opened = slot.get_or_init(|| self.open(index, server, owner, stateless)).await;
            match opened {
                Ok(own) if !own.close.is_cancelled() && !own.peer.is_transport_closed() => {
                    own.touch();
                    return Ok(Some(own.clone()));
                }
                Ok(_) => self.forget(&key),
                Err(why) => {
                    self.forget(&key);
                    return Err(CallError::Own(why.clone()));
                }
            }
        }
        Err(CallError::Closed)
    }

    /// The place of `key`, made if it has none; `None` when the registry
    /// is full of busy sessions.
    fn slot(&self, key: &(String, usize), server: &ServerHandle) -> Option<Slot> {
        let mut slots = code_mode_core::sync::lock(&self.slots);
        if let Some(slot) = slots.get(key) {
            return Some(slot.clone());
        }
        if slots.len() >= MAX_OWN && !self.make_room(&mut slots) {
            tracing::warn!(server = %server.name(), open = slots.len(), "every place for a client's own session is busy: this call goes over the shared session, where the server cannot ask the client anything");
            return None;
        }
        let slot = Slot::default();
        slots.insert(key.clone(), slot.clone());
        Some(slot)
    }

    /// Open `owner`'s session with `server`; its task is tracked, so
    /// shutdown waits until it closed.
    async fn open(&self, index: usize, server: &ServerHandle, owner: &Owner, stateless: bool) -> Result<Own, String> {
        let relay = match stateless {
            // Shared by every stateless client: nobody's in particular.
            true => Relay::shared(index, server.name(), self.bridge.clone()),
            false => Relay::own(index, server.name(), owner.clone(), server.relisting(), self.bridge.clone()),
        };
        let flights = relay.flights().clone();
        let close = self.cancel.child_token();
        match server::open_own(server.spec(), relay, close.clone(), stateless).await {
            Ok((peer, task)) => {
                tracing::info!(server = %server.name(), client = %owner.asker, "opened a client's own session with the server");
                self.tasks.spawn(async move {
                    let _ = task.await;
                });
                Ok(Own {
                    peer,
                    flights,
                    close,
                    last_used: Arc::new(std::sync::Mutex::new(Instant::now())),
                    level: Default::default(),
                })
            }
            Err(e) => {
                tracing::warn!(server = %server.name(), error = %e, "a client's own session with the server could not be opened");
                Err(e.to_string())
            }
        }
    }

    /// Close the least recently used session with no call in flight; false
    /// when every one is busy.
    fn make_room(&self, slots: &mut HashMap<(String, usize), Slot>) -> bool {
        let oldest = slots
            .iter()
            .filter_map(|(key, slot)| match slot.get() {
                Some(Ok(own)) if !own.busy() => Some((key.clone(), own.idle_since())),
                _ => None,
            })
            .min_by_key(|(_, since)| *since)
            .map(|(key, _)| key);
        match oldest {
            Some(key) => {
                close_where(slots, |k, _| *k == key);
                true
            }
            None => false,
        }
    }

    fn forget(&self, key: &(String, usize)) {
        close_where(&mut code_mode_core::sync::lock(&self.slots), |k, _| k == key);
    }

    /// Close every session of the frontend session object `asker` (its
    /// client session ended, or its stateless request was answered).
    pub(crate) fn close_for(&self, asker: &str) -> usize {
        close_where(&mut code_mode_core::sync::lock(&self.slots), |(a, _), _| a == asker)
    }

    /// Close every client's own session with the server at `index` (a
    /// reload removed it); its stateless shared session too.
    pub(crate) fn close_server(&self, index: usize) {
        close_where(&mut code_mode_core::sync::lock(&self.slots), |(_, i), _| *i == index);
    }

    /// Close `asker`'s sessions that have no call in flight (a stateless
    /// request's, once its calls ended).
    pub(crate) fn close_idle_of(&self, asker: &str) {
        close_where(&mut code_mode_core::sync::lock(&self.slots), |(a, _), slot| {
            a == asker && matches!(slot.get(), Some(Ok(own)) if !own.busy())
        });
    }

    /// Close the sessions unused for [`OWN_IDLE`] with no call in flight.
    pub(crate) fn reap(&self) {
        let now = Instant::now();
        close_where(&mut code_mode_core::sync::lock(&self.slots), |(client, _), slot| {
            let stale = matches!(slot.get(),
                Some(Ok(own)) if !own.busy() && now.duration_since(own.idle_since()) >= OWN_IDLE);
            if stale {
                tracing::info!(%client, "closing a client's own session unused for {} s", OWN_IDLE.as_secs());
            }
            stale
        });
    }
}

/// Remove the slots `pick` chooses, closing the session of each one that
/// holds an open session; how many were removed.
fn close_where(
    slots: &mut HashMap<(String, usize), Slot>,
    mut pick: impl FnMut(&(String, usize), &Slot) -> bool,
) -> usize {
    let before = slots.len();
    slots.retain(|key, slot| {
        if !pick(key, slot) {
            return true;
        }
        if let Some(Ok(own)) = slot.get() {
            own.close.cancel();
        }
        false
    });
    before - slots.len()
}

/// True when calls of a client with `link` go over sessions of its own.
pub(crate) fn wants_own(link: Option<&ClientLink>) -> bool {
    link.is_some_and(ClientLink::wants_own_session)
}

/// Close clients' own sessions unused for [`OWN_IDLE`], every
/// [`REAP_EVERY`], until shutdown or the bridge is gone.
pub(crate) async fn reaper(bridge: std::sync::Weak<crate::Inner>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(REAP_EVERY) => {}
        }
        let Some(inner) = bridge.upgrade() else { return };
        inner.upstreams.reap();
    }
}

impl crate::Bridge {
    /// Send one checked request of `call` to server `index`: over the
    /// client's own session when its client can be asked or listens (see
    /// the module doc), else the shared one; noted in flight on that
    /// session (its progress and questions find the call), within
    /// `timeout`, cancelled at the server when `cancel` fires. The result
    /// as the server sent it, as JSON.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send(
        &self,
        index: usize,
        call: &code_mode_proto::ToolCall,
        mut params: serde_json::Value,
        timeout: Duration,
        cancel: CancellationToken,
        direct: bool,
        retry: Option<&code_mode_proto::Retry>,
    ) -> Result<serde_json::Value, CallError> {
        let server = &self.current().servers[index].clone();
        let asker = call.asker.clone().unwrap_or_else(|| call.session.clone());
        // A stateless client's direct request goes to a server that speaks
        // that revision too in it: the server's own questions then come
        // back as its input-required result (code, whose questions the
        // frontend asks, always goes through a relaying session).
        let stateless_link = call.link.as_ref().filter(|l| l.stateless && direct);
        let stateless = match stateless_link {
            Some(_) => self.inner.upstreams.stateless(index, server).await,
            None => None,
        };
        let mut options = rmcp::service::PeerRequestOptions::no_options();
        if let (Some(link), Some(_)) = (stateless_link, &stateless) {
            options = options.with_meta(request_meta(link));
            if let (Some(retry), serde_json::Value::Object(map)) = (retry, &mut params) {
                if let Some(state) = &retry.request_state {
                    map.insert("requestState".into(), serde_json::Value::String(state.clone()));
                }
                if !retry.input_responses.is_null() {
                    map.insert("inputResponses".into(), retry.input_responses.clone());
                }
            }
        }
        let own_needed = stateless.is_none()
            && (wants_own(call.link.as_ref())
                || matches!(call.op, code_mode_proto::Op::Subscribe | code_mode_proto::Op::Unsubscribe));
        let own = match (stateless, own_needed) {
            (Some(stateless), _) => Some(stateless),
            (None, true) => {
                let owner = Owner {
                    asker: asker.clone(),
                    session: call.session.clone(),
                    identity: call.identity.clone(),
                    link: call.link.clone().unwrap_or_default(),
                };
                self.inner.upstreams.get(index, server, &owner).await?
            }
            (None, false) => None,
        };
        let own_session = own.is_some();
        let (peer, flights) = match own {
            Some(own) => {
                let logging = server.offering().logging;
                own.follow_level(call.link.as_ref().and_then(|l| l.log_level.as_deref()), logging).await;
                (own.peer, own.flights)
            }
            None => server.shared()?,
        };
        let request: rmcp::model::ClientRequest =
            serde_json::from_value(serde_json::json!({"method": call.op.method(), "params": params}))
                .map_err(|_| CallError::Service(rmcp::service::ServiceError::UnexpectedResponse))?;
        let handle = peer.send_cancellable_request(request, options).await.map_err(CallError::Service)?;
        let token = match serde_json::to_value(&handle.progress_token) {
            Ok(serde_json::Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(_) => String::new(),
        };
        let relaying = crate::relay::Relaying::default();
        let progress = call.link.as_ref().is_some_and(|l| l.progress);
        let flight = crate::relay::Flight {
            call_id: call.cell_id.clone(),
            request_id: handle.id.clone(),
            asker,
            progress,
            relaying: relaying.clone(),
        };
        let _in_flight = flights.enter(token, flight);
        let id = handle.id.clone();
        let peer_for_cancel = handle.peer.clone();
        let response = handle.await_response();
        tokio::pin!(response);
        let result = tokio::select! {
            result = &mut response => result.map_err(CallError::Service),
            _ = tokio::time::sleep(timeout) => {
                cancel_at_server(&peer_for_cancel, id, "the gateway's call timeout passed").await;
                return Err(CallError::Timeout(timeout));
            }
            _ = cancel.cancelled() => {
                cancel_at_server(&peer_for_cancel, id, "the client cancelled the request").await;
                return Err(CallError::Service(rmcp::service::ServiceError::Cancelled {
                    reason: Some("cancelled by the client".into()),
                }));
            }
        }?;
        if progress || own_session {
            // Its last notes go before its result.
            relaying.settled().await;
        }
        serde_json::to_value(&result).map_err(|_| CallError::Service(rmcp::service::ServiceError::UnexpectedResponse))
    }
}

/// The `_meta` of a stateless client's request to a server of that
/// revision: the client's capabilities and log level (its protocol
/// version and identity are the gateway's, set by the session).
fn request_meta(link: &ClientLink) -> rmcp::model::RequestMetaObject {
    let mut meta = rmcp::model::RequestMetaObject::default();
    let mut caps = serde_json::Map::new();
    if link.sampling {
        caps.insert("sampling".into(), serde_json::json!({}));
    }
    if link.roots {
        caps.insert("roots".into(), serde_json::json!({}));
    }
    if link.elicitation || link.elicitation_url {
        let mut modes = serde_json::Map::new();
        if link.elicitation {
            modes.insert("form".into(), serde_json::json!({}));
        }
        if link.elicitation_url {
            modes.insert("url".into(), serde_json::json!({}));
        }
        caps.insert("elicitation".into(), serde_json::Value::Object(modes));
    }
    if let Ok(caps) = serde_json::from_value(serde_json::Value::Object(caps)) {
        meta.set_client_capabilities(caps);
    }
    #[allow(deprecated)] // Logging is deprecated from 2026-07-28 on; clients still send levels.
    if let Some(level) = link.log_level.as_deref()
        && let Ok(level) = serde_json::from_value::<rmcp::model::LoggingLevel>(serde_json::Value::String(level.into()))
    {
        meta.set_log_level(level);
    }
    meta
}

/// Tell the server that the request `id` is cancelled.
async fn cancel_at_server(peer: &Peer<RoleClient>, id: rmcp::model::RequestId, reason: &str) {
    let notification = serde_json::json!({
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason},
    });
    let Ok(notification) = serde_json::from_value::<rmcp::model::ClientNotification>(notification) else { return };
    if let Err(e) = peer.send_notification(notification).await {
        tracing::debug!(error = %e, "could not tell the server that a request was cancelled");
    }
}
