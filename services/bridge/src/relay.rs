//! What a wrapped server sends the bridge on its own, relayed: the client
//! handler ([`Relay`]) of every session with a wrapped server, and the
//! calls in flight on each session ([`Flights`]), by which its messages
//! find the client they are for.
//!
//! A server's messages are of three kinds:
//!
//! - **List changes** (`notifications/tools/list_changed`, `resources/…`,
//!   `prompts/…`) wake the server's actor, which lists again on the
//!   *shared* session ([`Relisting`]); the catalog follows. A change heard
//!   on a client's own session is only a reason to list the shared session
//!   again: the own session declares that client's capabilities and may
//!   hold that client's state, so what it lists is never what other
//!   clients are offered.
//! - **Notifications for a client**: progress carries the progress token of
//!   the request it is about (rmcp puts a token of its own on every request
//!   it sends), so it is routed to that call's client on any session. A
//!   log message or a resource update carries no mark at all, so it is
//!   passed on only from a client's *own* session (see
//!   [`crate::upstream`]), where every message is that client's.
//! - **Requests to the client** (`sampling/createMessage`,
//!   `elicitation/create`, `roots/list`): likewise answered only on a
//!   client's own session, which declares the client's capabilities; the
//!   shared session declares none, and a server asking there anyway hears
//!   that nobody can answer. Each question passes the bridge's checks first
//!   (the server's policy, the private-data rule for a sampling answer, the
//!   audit record) and then reaches the client through its frontend
//!   ([`code_mode_proto::subjects::client`]).
//!
//! The handler knows nothing of the bridge above it: notes and questions go
//! up one bounded channel it is handed ([`Upward`]), whose other end the
//! bridge serves ([`crate::questions`]).
//!
//! Within a client's own session, a message is tied to the call it came
//! during when the transport says so (a streamable HTTP server sends it on
//! that request's stream) or when exactly one call is in flight; else it
//! is the session's. A message that comes while a call is starting (its
//! request already out, its id not yet known to the call) waits for that
//! call to be noted, briefly ([`Flights::starting`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{AskKind, ClientLink, Note};
use rmcp::ClientHandler;
#[allow(deprecated)] // Sampling, roots and logging are deprecated from 2026-07-28 on; older servers use them.
use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientInfo, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorData, Implementation, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, RequestId, ResourceUpdatedNotificationParam, TaskStatusNotificationParams,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::arrivals::Arrivals;
use crate::wire::{Unanswered, question_error};

/// How long a progress notification that raced ahead of its call's
/// registration waits for it (rmcp picks a request's token as it sends it,
/// so the call learns its token only once the request is on its way).
const LATE_FLIGHT: Duration = Duration::from_millis(200);

/// One call in flight on a session with a wrapped server.
#[derive(Debug, Clone)]
pub(crate) struct Flight {
    /// The call (a cell's id, or a direct call's).
    pub(crate) call_id: String,
    /// The request's id on that session.
    pub(crate) request_id: RequestId,
    /// The frontend session object to tell ([`code_mode_proto::subjects::client`]).
    pub(crate) asker: String,
    /// Its client asked for progress.
    pub(crate) progress: bool,
}

/// The calls in flight on one session, by the progress token rmcp gave
/// each request, and the calls about to be ([`Flights::starting`]). Cheap
/// to clone; shared by the session's handler and the calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flights {
    inner: Arc<std::sync::Mutex<InFlight>>,
    /// Woken when a call is noted in flight or a starting one gives up.
    added: Arc<Notify>,
    /// The session's notes, numbered as they arrive ([`crate::arrivals`]).
    arrivals: Arrivals,
}

#[derive(Debug, Default)]
struct InFlight {
    by_token: HashMap<String, Flight>,
    /// Calls whose request may be on its way to the server but that are
    /// not noted yet: rmcp picks a request's id and token as it sends it,
    /// and the server may answer with a question before the call has
    /// them (on a loaded machine the sending thread can stall right
    /// there while the server's question is already being handled).
    starting: usize,
}

impl Flights {
    /// A call is about to send its request: until the returned value is
    /// noted in flight ([`Starting::enter`]) or dropped, a message of the
    /// server that finds no call waits for it ([`Flights::of_message`]).
    pub(crate) fn starting(&self) -> Starting {
        code_mode_core::sync::lock(&self.inner).starting += 1;
        Starting { flights: self.clone(), noted: false }
    }

    /// Note a call in flight under its request's progress token, without
    /// its start ([`Starting::enter`] does both); it stays until the guard
    /// is dropped.
    #[cfg(test)]
    pub(crate) fn enter(&self, token: String, flight: Flight) -> FlightGuard {
        code_mode_core::sync::lock(&self.inner).by_token.insert(token.clone(), flight);
        self.added.notify_waiters();
        FlightGuard { flights: self.clone(), token }
    }

    /// The flight of a progress token, waiting briefly for one that is
    /// about to be noted.
    async fn of_token(&self, token: &str) -> Option<Flight> {
        let deadline = tokio::time::Instant::now() + LATE_FLIGHT;
        loop {
            let added = self.added.notified();
            if let Some(flight) = code_mode_core::sync::lock(&self.inner).by_token.get(token) {
                return Some(flight.clone());
            }
            if tokio::time::timeout_at(deadline, added).await.is_err() {
                return None;
            }
        }
    }

    /// The call a message of the server belongs to: the one whose
    /// request's stream it came on, else the only one in flight. While a
    /// call is starting the answer waits (at most [`LATE_FLIGHT`]) until
    /// it is noted: the message may be the first of that call, sent
    /// before the call learnt its request's id.
    async fn of_message(&self, origin: Option<&InboundStreamOrigin>) -> Option<Flight> {
        let deadline = tokio::time::Instant::now() + LATE_FLIGHT;
        let mut waited = false;
        loop {
            let added = self.added.notified();
            let (found, starting) = {
                let flights = code_mode_core::sync::lock(&self.inner);
                (flights.belonging(origin, true), flights.starting)
            };
            if found.is_some() || starting == 0 {
                if waited {
                    let call = found.as_ref().map(|f| f.call_id.as_str());
                    tracing::debug!(
                        ?call,
                        "a server's message came while its call was starting: it waited for the call"
                    );
                }
                return found;
            }
            if tokio::time::timeout_at(deadline, added).await.is_err() {
                // A call stalled before its request went out: the message
                // is not its.
                return code_mode_core::sync::lock(&self.inner).belonging(origin, false);
            }
            waited = true;
        }
    }

    /// The session's notes as its transport numbered them.
    pub(crate) fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }

    /// How many calls are in flight.
    pub(crate) fn count(&self) -> usize {
        code_mode_core::sync::lock(&self.inner).by_token.len()
    }
}

impl InFlight {
    /// The call of the request whose stream a message came on, else the
    /// only call in flight (none when two are: the message is the
    /// session's). With `starting_counts`, `None` too while a call is
    /// starting and one other is in flight: the message may be either's
    /// until the new one is noted.
    fn belonging(&self, origin: Option<&InboundStreamOrigin>, starting_counts: bool) -> Option<Flight> {
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin {
            return self.by_token.values().find(|f| &f.request_id == id).cloned();
        }
        let mut all = self.by_token.values();
        match (all.next(), all.next()) {
            (Some(only), None) if !starting_counts || self.starting == 0 => Some(only.clone()),
            _ => None,
        }
    }
}

/// A call about to be in flight ([`Flights::starting`]).
#[derive(Debug)]
pub(crate) struct Starting {
    flights: Flights,
    noted: bool,
}

impl Starting {
    /// The call's request is on its way: note it in flight under its
    /// progress token, until the guard drops.
    pub(crate) fn enter(mut self, token: String, flight: Flight) -> FlightGuard {
        {
            let mut flights = code_mode_core::sync::lock(&self.flights.inner);
            flights.by_token.insert(token.clone(), flight);
            flights.starting = flights.starting.saturating_sub(1);
        }
        self.noted = true;
        self.flights.added.notify_waiters();
        FlightGuard { flights: self.flights.clone(), token }
    }
}

impl Drop for Starting {
    /// A call that never sent its request no longer holds messages back.
    fn drop(&mut self) {
        if !self.noted {
            let mut flights = code_mode_core::sync::lock(&self.flights.inner);
            flights.starting = flights.starting.saturating_sub(1);
            drop(flights);
            self.flights.added.notify_waiters();
        }
    }
}

/// Removes its call from the flights when dropped (the call ended, however).
#[derive(Debug)]
pub(crate) struct FlightGuard {
    flights: Flights,
    token: String,
}

impl Drop for FlightGuard {
    fn drop(&mut self) {
        code_mode_core::sync::lock(&self.flights.inner).by_token.remove(&self.token);
    }
}

/// The questions a server put on one session that are still being asked,
/// by the server's request id: each one's token is cancelled when its
/// asking ends (answered, refused, or withdrawn with the client told), so
/// that the server's withdrawal note is relayed only then
/// ([`Relay::on_cancelled`]) and a call's result never overtakes it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Asking {
    inner: Arc<std::sync::Mutex<HashMap<RequestId, CancellationToken>>>,
}

impl Asking {
    /// A question of this id is being asked until the guard drops.
    fn enter(&self, id: RequestId) -> AskingGuard {
        let ended = CancellationToken::new();
        code_mode_core::sync::lock(&self.inner).insert(id.clone(), ended.clone());
        AskingGuard { asking: self.clone(), id, ended }
    }

    /// The end of the question of this id, if it is being asked.
    fn ended(&self, id: &RequestId) -> Option<CancellationToken> {
        code_mode_core::sync::lock(&self.inner).get(id).cloned()
    }
}

/// Ends a question's asking when dropped.
struct AskingGuard {
    asking: Asking,
    id: RequestId,
    ended: CancellationToken,
}

impl Drop for AskingGuard {
    fn drop(&mut self) {
        code_mode_core::sync::lock(&self.asking.inner).remove(&self.id);
        self.ended.cancel();
    }
}

/// Wake-ups of a server's actor: list the tools again, or the rest of
/// what the server offers, always on the shared session. A client's own
/// session passes on the changes it hears as wake-ups too (a server whose
/// lists are the same for every session may announce a change only on the
/// session whose call made it), but never its own lists: it declares one
/// client's capabilities, so a server offering some tools only to capable
/// clients lists fewer there, and a server keeping lists per session (or
/// per process, for a stdio server) lists that client's there. The shared
/// session declares every capability and stands for no client: its lists
/// are the catalog of every client (issue 36).
#[derive(Debug, Clone, Default)]
pub(crate) struct Relisting {
    pub(crate) tools: Arc<Notify>,
    pub(crate) offering: Arc<Notify>,
}

/// Whom a client's own session serves.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    /// The frontend session object that hears the server's messages.
    pub(crate) asker: String,
    /// Where its calls count (for the private-data rule of a sampling
    /// answer): the client session, or a stateless identity's scope.
    pub(crate) session: String,
    /// Who the client is, for the audit record.
    pub(crate) identity: Option<String>,
    /// What the client can answer and wants to hear.
    pub(crate) link: ClientLink,
}

/// What a session's handler asks of the bridge above it.
#[derive(Debug)]
pub(crate) enum Upcall {
    /// Tell the frontend session object `asker` a note of server `server`;
    /// `delivered` is told once it was passed on (or could not be).
    Tell { asker: String, call_id: Option<String>, server: usize, note: Note, delivered: oneshot::Sender<()> },
    /// Judge a server's question and ask its owner's client; the client's
    /// answer (or why there is none) comes back on `answer`.
    Ask { question: Question, answer: oneshot::Sender<Result<serde_json::Value, Unanswered>> },
    /// Pass a server's `notifications/tasks` (its `task`) to the client
    /// whose call created that task, if any did ([`crate::wrapped_tasks`]).
    TaskStatus { server: usize, task: serde_json::Value },
}

/// A server's question for the client a session of its own serves.
#[derive(Debug)]
pub(crate) struct Question {
    /// Whom the session serves.
    pub(crate) owner: Arc<Owner>,
    /// The call it came during, if one is known.
    pub(crate) call_id: Option<String>,
    /// The server's index in the bridge.
    pub(crate) server: usize,
    /// What it asks.
    pub(crate) kind: AskKind,
    /// The request's parameters.
    pub(crate) params: serde_json::Value,
    /// Cancelled when the server withdraws its request.
    pub(crate) withdrawn: CancellationToken,
}

/// How many upcalls may wait for the bridge to take them.
const UPCALLS: usize = 256;

/// The session layer's one way up to the bridge: a bounded channel made
/// before the servers start and served once the bridge is built
/// ([`crate::questions::serve`], until the bridge's token fires). A handler
/// with no bridge above it ([`Upward::default`], or once the bridge
/// stopped) tells nobody and answers each question that the gateway is
/// shutting down.
#[derive(Debug, Clone, Default)]
pub(crate) struct Upward(Option<mpsc::Sender<Upcall>>);

impl Upward {
    /// The way up and the end the bridge serves.
    pub(crate) fn channel() -> (Self, mpsc::Receiver<Upcall>) {
        let (tx, rx) = mpsc::channel(UPCALLS);
        (Self(Some(tx)), rx)
    }

    /// Tell a client a note; returns once it was passed on (or dropped).
    async fn tell(&self, asker: &str, call_id: Option<String>, server: usize, note: Note) {
        let Some(up) = &self.0 else { return };
        let (delivered, done) = oneshot::channel();
        let upcall = Upcall::Tell { asker: asker.to_string(), call_id, server, note, delivered };
        if up.send(upcall).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Hand the bridge a server's status note of one of its tasks, for the
    /// client whose call created it (the bridge knows which).
    async fn task_status(&self, server: usize, task: serde_json::Value) {
        let Some(up) = &self.0 else { return };
        let _ = up.send(Upcall::TaskStatus { server, task }).await;
    }

    /// Ask a client a question through the bridge's checks; `None` when no
    /// bridge takes it.
    async fn ask(&self, question: Question) -> Option<Result<serde_json::Value, Unanswered>> {
        let up = self.0.as_ref()?;
        let (answer, answered) = oneshot::channel();
        up.send(Upcall::Ask { question, answer }).await.ok()?;
        answered.await.ok()
    }
}

/// The client handler of one session with a wrapped server.
#[derive(Debug, Clone)]
pub(crate) struct Relay {
    /// The server's index in the bridge.
    server: usize,
    /// The server's name, for logs.
    name: Arc<str>,
    /// The calls in flight on this session.
    flights: Flights,
    /// The shared session's wake-ups of its actor.
    relisting: Relisting,
    /// The client a session of its own serves; `None` for the shared one.
    owner: Option<Arc<Owner>>,
    /// The server's questions being asked on this session.
    asking: Asking,
    /// The way up to the bridge.
    upward: Upward,
}

impl Relay {
    /// The notes of this handler's session, which its transport numbers
    /// ([`crate::arrivals::Noting`]).
    pub(crate) fn arrivals(&self) -> Arrivals {
        self.flights.arrivals().clone()
    }

    /// The handler of a server's shared session (and of each session after
    /// a restart: the same flights and wake-ups).
    pub(crate) fn shared(server: usize, name: &str, upward: Upward) -> Self {
        Self {
            server,
            name: name.into(),
            flights: Flights::default(),
            relisting: Relisting::default(),
            owner: None,
            asking: Asking::default(),
            upward,
        }
    }

    /// The handler of a client's own session with the server; the
    /// server's list changes heard there wake the server's actor
    /// (`relisting`), which lists again on the shared session.
    pub(crate) fn own(server: usize, name: &str, owner: Owner, relisting: Relisting, upward: Upward) -> Self {
        Self {
            server,
            name: name.into(),
            flights: Flights::default(),
            relisting,
            owner: Some(Arc::new(owner)),
            asking: Asking::default(),
            upward,
        }
    }

    /// The calls in flight on this session.
    pub(crate) fn flights(&self) -> &Flights {
        &self.flights
    }

    /// The wake-ups of the shared session's actor.
    pub(crate) fn relisting(&self) -> Relisting {
        self.relisting.clone()
    }

    /// Tell the client a note from the server (nothing when it has no
    /// bridge to go through any more).
    async fn tell(&self, asker: &str, call_id: Option<String>, note: Note) {
        self.upward.tell(asker, call_id, self.server, note).await;
    }

    /// Relay one question of the server to the owner's client; its answer
    /// as the result the server expects, or why there is none, as the
    /// JSON-RPC error the server hears ([`crate::wire::question_error`]).
    async fn ask<R: serde::de::DeserializeOwned>(
        &self,
        kind: AskKind,
        params: &impl serde::Serialize,
        context: &RequestContext<RoleClient>,
    ) -> Result<R, ErrorData> {
        self.answer(kind, params, context).await.map_err(question_error)
    }

    /// [`Relay::ask`] before its failure is put as the server hears it.
    async fn answer<R: serde::de::DeserializeOwned>(
        &self,
        kind: AskKind,
        params: &impl serde::Serialize,
        context: &RequestContext<RoleClient>,
    ) -> Result<R, Unanswered> {
        let _asking = self.asking.enter(context.id.clone());
        let params = serde_json::to_value(params).map_err(|e| Unanswered::BadParams(e.to_string()))?;
        let origin = origin_of(context);
        let Some(owner) = &self.owner else {
            tracing::info!(server = %self.name, method = kind.method(), "a server asked on its shared session, where no client can answer");
            return Err(Unanswered::NoClient(kind));
        };
        let call_id = self.flights.of_message(origin).await.map(|f| f.call_id);
        let question = Question {
            owner: owner.clone(),
            call_id,
            server: self.server,
            kind,
            params,
            withdrawn: context.ct.clone(),
        };
        let asked = self.upward.ask(question).await;
        let answer = asked.ok_or(Unanswered::ShuttingDown)??;
        serde_json::from_value(answer).map_err(|e| Unanswered::BadAnswer { kind, why: e.to_string() })
    }
}

/// The request's stream, when the transport tells it (streamable HTTP).
fn origin_of(context: &RequestContext<RoleClient>) -> Option<&InboundStreamOrigin> {
    context.extensions.get::<InboundStreamOrigin>()
}

#[allow(deprecated)] // Sampling, roots and logging are deprecated from 2026-07-28 on; older servers use them.
impl ClientHandler for Relay {
    /// A client's own session declares what that client can answer. The
    /// shared session declares all of it, as the gateway can relay it for
    /// clients that can answer (over their own sessions): servers that offer
    /// some tools only to clients able to answer them list those tools to
    /// the catalog, and a question asked on the shared session, whose
    /// client cannot answer it, is refused ([`Relay::ask`]).
    fn get_info(&self) -> ClientInfo {
        let shared =
            ClientLink { sampling: true, elicitation: true, elicitation_url: true, roots: true, ..Default::default() };
        let link = match &self.owner {
            Some(owner) => &owner.link,
            None => &shared,
        };
        let capabilities = {
            let caps = serde_json::json!({
                "sampling": if link.sampling { Some(serde_json::json!({})) } else { None },
                // Changes of a client's roots are passed on to its own
                // sessions (`Bridge::roots_changed`) when it sends them.
                "roots": link.roots.then(|| serde_json::json!({"listChanged": link.roots_list_changed})),
                "elicitation": if link.elicitation || link.elicitation_url {
                    let mut modes = serde_json::Map::new();
                    if link.elicitation { modes.insert("form".into(), serde_json::json!({})); }
                    if link.elicitation_url { modes.insert("url".into(), serde_json::json!({})); }
                    Some(serde_json::Value::Object(modes))
                } else { None },
            });
            let caps = match caps {
                serde_json::Value::Object(map) => {
                    serde_json::Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
                }
                other => other,
            };
            serde_json::from_value::<ClientCapabilities>(caps).unwrap_or_default()
        };
        ClientInfo::new(capabilities, Implementation::new("code-mode", env!("CARGO_PKG_VERSION")))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.ask(AskKind::Sampling, &params, &context).await
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.ask(AskKind::Elicitation, &params, &context).await
    }

    async fn list_roots(&self, context: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        if self.owner.is_none() {
            // The shared session stands for no client: it has no roots
            // (servers ask for them as soon as they start).
            return Ok(ListRootsResult::default());
        }
        self.ask(AskKind::Roots, &serde_json::json!({}), &context).await
    }

    /// The server withdrew a request: rmcp has already cancelled the
    /// request's handler; if it is a question being asked, wait (bounded)
    /// until its asking ended, the client told, so that the note (numbered
    /// by [`crate::arrivals::Noting`], held in `_context`) counts as relayed
    /// only then and the result of the call that asked does not overtake it.
    async fn on_cancelled(&self, params: CancelledNotificationParam, _context: NotificationContext<RoleClient>) {
        let Some(ended) = params.request_id.as_ref().and_then(|id| self.asking.ended(id)) else { return };
        let _ = tokio::time::timeout(crate::arrivals::NOTE_SETTLE, ended.cancelled()).await;
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let token = match serde_json::to_value(&params.progress_token) {
            Ok(serde_json::Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(_) => return,
        };
        let Some(flight) = self.flights.of_token(&token).await else {
            tracing::debug!(server = %self.name, %token, "progress of no call in flight: dropped");
            return;
        };
        if !flight.progress {
            return;
        }
        let note = Note::Progress { progress: params.progress, total: params.total, message: params.message };
        self.tell(&flight.asker, Some(flight.call_id), note).await;
    }

    /// A task's status, from any session: the bridge finds the client
    /// whose call created the task by its id.
    async fn on_task_status(&self, params: TaskStatusNotificationParams, _context: NotificationContext<RoleClient>) {
        let Ok(task) = serde_json::to_value(&params.task) else { return };
        self.upward.task_status(self.server, task).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let Some(owner) = &self.owner else {
            tracing::debug!(server = %self.name, "a log message on the shared session: no client is listening");
            return;
        };
        let level = match serde_json::to_value(params.level) {
            Ok(serde_json::Value::String(level)) => level,
            _ => return,
        };
        let origin = context.extensions.get::<InboundStreamOrigin>();
        let flight = self.flights.of_message(origin).await;
        let note = Note::Log { level, logger: params.logger, data: params.data };
        self.tell(&owner.asker, flight.map(|f| f.call_id), note).await;
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(owner) = &self.owner else { return };
        self.tell(&owner.asker, None, Note::ResourceUpdated { uri: params.uri }).await;
    }

    // On any session, the shared one or a client's own: the actor lists
    // again on the shared session (see `Relisting`).
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relisting.tools.notify_one();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relisting.offering.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relisting.offering.notify_one();
    }
}

#[cfg(test)]
mod tests {
    //! The bookkeeping of calls in flight and of their notes, under paused
    //! time: each wait is bounded and ends as soon as what it waits for
    //! happens.

    use super::*;
    use tokio::time::Instant;

    fn flight(call: &str, request: i64) -> Flight {
        Flight {
            call_id: call.into(),
            request_id: RequestId::Number(request),
            asker: format!("asker-{call}"),
            progress: true,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn progress_that_races_ahead_of_its_call_finds_it_when_the_call_is_noted_in_time() {
        let flights = Flights::default();
        let later = flights.clone();
        let noted = tokio::spawn(async move {
            tokio::time::sleep(LATE_FLIGHT / 2).await;
            later.enter("token-1".into(), flight("call-1", 1))
        });
        let started = Instant::now();
        let found = flights.of_token("token-1").await.expect("the call noted within the wait");
        assert_eq!(found.call_id, "call-1");
        assert_eq!(started.elapsed(), LATE_FLIGHT / 2, "found as soon as it was noted");
        let guard = noted.await.unwrap();
        assert_eq!(flights.count(), 1);
        drop(guard);
        assert_eq!(flights.count(), 0, "a call that ended leaves the flights");
        let started = Instant::now();
        assert!(flights.of_token("token-1").await.is_none(), "an ended call's token finds nothing");
        assert_eq!(started.elapsed(), LATE_FLIGHT, "and waits no longer than the bound");
    }

    #[tokio::test(start_paused = true)]
    async fn a_servers_message_belongs_to_the_call_of_its_stream_else_to_the_only_call_in_flight() {
        let flights = Flights::default();
        let started = Instant::now();
        assert!(flights.of_message(None).await.is_none(), "no call in flight: nobody's");
        let one = flights.enter("t1".into(), flight("call-1", 1));
        assert_eq!(flights.of_message(None).await.unwrap().call_id, "call-1", "the only call in flight");
        let two = flights.enter("t2".into(), flight("call-2", 2));
        assert!(flights.of_message(None).await.is_none(), "two calls and no stream: it is the session's");
        let on_two = InboundStreamOrigin::OutboundRequest(RequestId::Number(2));
        let of_two = flights.of_message(Some(&on_two)).await;
        assert_eq!(of_two.unwrap().call_id, "call-2", "the call whose stream it came on");
        drop(two);
        assert!(flights.of_message(Some(&on_two)).await.is_none(), "a stream whose call ended belongs to no call");
        drop(one);
        assert_eq!(flights.count(), 0);
        assert_eq!(started.elapsed(), Duration::ZERO, "with no call starting, nothing waits");
    }

    #[tokio::test(start_paused = true)]
    async fn a_question_that_comes_before_its_call_is_noted_in_flight_waits_for_the_call_and_finds_it() {
        // The race: the call's request is out (the server answers with a
        // question at once) while the call has not yet noted its token.
        for origin in [None, Some(InboundStreamOrigin::OutboundRequest(RequestId::Number(1)))] {
            let flights = Flights::default();
            let starting = flights.starting();
            let later = tokio::spawn(async move {
                tokio::time::sleep(LATE_FLIGHT / 4).await;
                starting.enter("t1".into(), flight("call-1", 1))
            });
            let started = Instant::now();
            let found = flights.of_message(origin.as_ref()).await;
            assert_eq!(found.map(|f| f.call_id).as_deref(), Some("call-1"), "the starting call's ({origin:?})");
            assert_eq!(started.elapsed(), LATE_FLIGHT / 4, "found as soon as it was noted");
            let _in_flight = later.await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_while_a_second_call_starts_waits_and_a_call_that_never_sends_holds_nothing_back() {
        let flights = Flights::default();
        let _one = flights.enter("t1".into(), flight("call-1", 1));
        // A second call starts: the message may be its first, so it is
        // nobody's until the call is noted (then two are in flight).
        let starting = flights.starting();
        let later = tokio::spawn(async move {
            tokio::time::sleep(LATE_FLIGHT / 4).await;
            starting.enter("t2".into(), flight("call-2", 2))
        });
        assert!(flights.of_message(None).await.is_none(), "two calls in flight: the session's");
        let two = later.await.unwrap();
        drop(two);
        // A start given up (its send failed) releases the waiting message.
        let starting = flights.starting();
        let given_up = tokio::spawn(async move {
            tokio::time::sleep(LATE_FLIGHT / 4).await;
            drop(starting);
        });
        let started = Instant::now();
        assert_eq!(flights.of_message(None).await.unwrap().call_id, "call-1", "the only call in flight");
        assert_eq!(started.elapsed(), LATE_FLIGHT / 4, "released when the start was given up");
        given_up.await.unwrap();
        // A start that stalls holds a message no longer than the bound.
        let _stalled = flights.starting();
        let started = Instant::now();
        assert_eq!(flights.of_message(None).await.unwrap().call_id, "call-1");
        assert_eq!(started.elapsed(), LATE_FLIGHT, "waits no longer than the bound");
    }
}
