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

use crate::relay::{Flights, Owner, Relay, Upward};
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
    /// The identity whose session it is.
    identity: Option<String>,
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
    /// Handed to each session's handler: its way up to the bridge.
    upward: Upward,
    cancel: CancellationToken,
    tasks: TaskTracker,
    /// Servers found not to speak the stateless revision, and when.
    legacy: std::sync::Mutex<HashMap<usize, Instant>>,
}

impl Upstreams {
    pub(crate) fn new(upward: Upward, cancel: CancellationToken) -> Self {
        Self { slots: Default::default(), upward, cancel, tasks: TaskTracker::new(), legacy: Default::default() }
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
            let Some(slot) = self.slot(&key, server.name()) else { return Ok(None) };
            let opened = slot.get_or_init(|| self.open(index, server, owner, stateless)).await;
            match opened {
                Ok(own) if own.identity != owner.identity && server.per_identity_auth().is_some() => {
                    // Never another identity's session of such a server.
                    return Err(CallError::NoAccount(format!(
                        "{}: this client's session of the server belongs to another identity: refused",
                        server.name()
                    )));
                }
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
    fn slot(&self, key: &(String, usize), server: &str) -> Option<Slot> {
        let mut slots = code_mode_core::sync::lock(&self.slots);
        if let Some(slot) = slots.get(key) {
            return Some(slot.clone());
        }
        if slots.len() >= MAX_OWN && !self.make_room(&mut slots) {
            tracing::warn!(%server, open = slots.len(), "every place for a client's own session is busy: this call goes over the shared session, where the server cannot ask the client anything");
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
            true => Relay::shared(index, server.name(), self.upward.clone()),
            false => Relay::own(index, server.name(), owner.clone(), server.relisting(), self.upward.clone()),
        };
        let flights = relay.flights().clone();
        let close = self.cancel.child_token();
        // A server that acts as each caller: this session carries the
        // owner's own token, and no other.
        let mut spec = server.spec().clone();
        if let Some(auth) = server.per_identity_auth() {
            let Some(identity) = owner.identity.as_deref() else {
                return Err("the server acts upstream as each caller, and this client has no identity".into());
            };
            if let server::Transport::Http(http) = &mut spec.transport {
                http.auth = Some(auth.for_identity(identity));
            }
        }
        match server::open_own(&spec, relay, close.clone(), stateless).await {
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
                    identity: owner.identity.clone(),
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

    /// Tell the server of each of `asker`'s open sessions that the client's
    /// roots changed (`notifications/roots/list_changed`); returns how
    /// many were told. A server that cannot be told (it is gone) is
    /// skipped: its next call opens a new session, which asks afresh.
    pub(crate) async fn roots_changed(&self, asker: &str) -> u32 {
        let open: Vec<Own> = code_mode_core::sync::lock(&self.slots)
            .iter()
            .filter(|((a, _), _)| a == asker)
            .filter_map(|(_, slot)| slot.get().and_then(|opened| opened.as_ref().ok()).cloned())
            .collect();
        let mut told = 0;
        for own in open {
            match own.peer.notify_roots_list_changed().await {
                Ok(()) => told += 1,
                Err(e) => tracing::debug!(error = %e, "a server could not be told that its client's roots changed"),
            }
        }
        told
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
/// [`REAP_EVERY`], until shutdown.
pub(crate) async fn reaper(upstreams: Arc<Upstreams>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(REAP_EVERY) => {}
        }
        upstreams.reap();
    }
}

#[cfg(test)]
mod tests {
    //! The registry's bookkeeping under paused time: the bound of
    //! [`MAX_OWN`] sessions, the shared session as the fallback when every
    //! place is busy, and idle reaping. The sessions share one peer of an
    //! in-process MCP session (the registry never looks past its own
    //! bookkeeping at them).

    use super::*;
    use crate::relay::{Flight, FlightGuard};
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A client peer of an in-process session whose other end answers the
    /// initialize handshake (and any later request with an empty result).
    async fn peer() -> Peer<RoleClient> {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let (read, mut write) = tokio::io::split(server_io);
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                let Some(id) = message.get("id") else { continue };
                let result = match message.get("method").and_then(serde_json::Value::as_str) {
                    Some("initialize") => serde_json::json!({
                        "protocolVersion": message.pointer("/params/protocolVersion").cloned().unwrap_or_default(),
                        "capabilities": {},
                        "serverInfo": {"name": "registry-test", "version": "0"},
                    }),
                    _ => serde_json::json!({}),
                };
                let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
                if write.write_all(format!("{reply}\n").as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        let running = ().serve(client_io).await.expect("the in-process session initializes");
        let peer = running.peer().clone();
        // The session lives as long as the test's runtime.
        std::mem::forget(running);
        peer
    }

    fn registry() -> Upstreams {
        Upstreams::new(Upward::default(), CancellationToken::new())
    }

    /// Put an open session of `asker` with server 0 in the registry.
    fn put(upstreams: &Upstreams, peer: &Peer<RoleClient>, asker: &str) -> Own {
        let own = Own {
            peer: peer.clone(),
            flights: Flights::default(),
            close: upstreams.cancel.child_token(),
            last_used: Arc::new(std::sync::Mutex::new(Instant::now())),
            level: Default::default(),
            identity: None,
        };
        let slot = Slot::new(OnceCell::new_with(Some(Ok(own.clone()))));
        code_mode_core::sync::lock(&upstreams.slots).insert((asker.to_string(), 0), slot);
        own
    }

    /// Note a call in flight on `own` until the guard drops.
    fn busy(own: &Own, call: &str) -> FlightGuard {
        let flight = Flight {
            call_id: call.into(),
            request_id: rmcp::model::RequestId::Number(1),
            asker: call.into(),
            progress: false,
        };
        own.flights.enter(call.into(), flight)
    }

    fn open(upstreams: &Upstreams) -> usize {
        code_mode_core::sync::lock(&upstreams.slots).len()
    }

    fn holds(upstreams: &Upstreams, asker: &str) -> bool {
        code_mode_core::sync::lock(&upstreams.slots).contains_key(&(asker.to_string(), 0))
    }

    #[tokio::test(start_paused = true)]
    async fn a_sixty_fifth_session_closes_the_one_unused_the_longest_that_has_no_call_in_flight() {
        let (peer, upstreams) = (peer().await, registry());
        let mut owns = Vec::new();
        for i in 0..MAX_OWN {
            owns.push(put(&upstreams, &peer, &format!("client-{i}")));
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        // The oldest one is busy: the next oldest goes.
        let _call = busy(&owns[0], "call-0");
        let server = "s";
        assert!(upstreams.slot(&("new-1".to_string(), 0), server).is_some(), "a place is made");
        assert_eq!(open(&upstreams), MAX_OWN, "never more than {MAX_OWN}");
        assert!(holds(&upstreams, "client-0"), "the busy one stays");
        assert!(
            !holds(&upstreams, "client-1") && owns[1].close.is_cancelled(),
            "the least recently used idle one is closed"
        );
        // Used again, a session is no longer the oldest.
        owns[2].touch();
        assert!(upstreams.slot(&("new-2".to_string(), 0), server).is_some());
        assert!(holds(&upstreams, "client-2") && !holds(&upstreams, "client-3"), "the touched one stays");
    }

    #[tokio::test(start_paused = true)]
    async fn with_every_place_busy_a_call_goes_over_the_shared_session_until_one_call_ends() {
        let (peer, upstreams) = (peer().await, registry());
        let mut calls = Vec::new();
        for i in 0..MAX_OWN {
            let own = put(&upstreams, &peer, &format!("client-{i}"));
            calls.push(busy(&own, &format!("call-{i}")));
        }
        let server = "s";
        let key = ("new".to_string(), 0);
        assert!(upstreams.slot(&key, server).is_none(), "no place: the shared session it is");
        assert_eq!(open(&upstreams), MAX_OWN, "and no busy session was closed");
        drop(calls.remove(7));
        assert!(upstreams.slot(&key, server).is_some(), "a session whose call ended makes room");
        assert!(!holds(&upstreams, "client-7"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_reaper_closes_sessions_idle_for_own_idle_but_not_a_busy_one_or_one_used_since() {
        let (peer, upstreams) = (peer().await, Arc::new(registry()));
        let idle = put(&upstreams, &peer, "idle");
        let working = put(&upstreams, &peer, "working");
        let _call = busy(&working, "call");
        let used = put(&upstreams, &peer, "used");
        let stop = CancellationToken::new();
        let reaping = tokio::spawn(reaper(upstreams.clone(), stop.clone()));
        tokio::time::sleep(OWN_IDLE / 2).await;
        used.touch();
        tokio::time::sleep(OWN_IDLE / 2 - REAP_EVERY).await;
        assert_eq!(open(&upstreams), 3, "nothing idle for {} s yet", OWN_IDLE.as_secs());
        tokio::time::sleep(REAP_EVERY * 2).await;
        assert!(!holds(&upstreams, "idle") && idle.close.is_cancelled(), "idle past OWN_IDLE: closed");
        assert!(holds(&upstreams, "working"), "a session with a call in flight stays however old");
        assert!(holds(&upstreams, "used"), "a session used since stays");
        tokio::time::sleep(OWN_IDLE).await;
        assert!(!holds(&upstreams, "used") && holds(&upstreams, "working"));
        stop.cancel();
        reaping.await.expect("the reaper ends with its token");
    }
}
