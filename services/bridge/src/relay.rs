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
//!   ([`crate::Bridge::relay_ask`]: the server's policy, the private-data
//!   rule for a sampling answer, the audit record) and then reaches the
//!   client through its frontend ([`code_mode_proto::subjects::client`]).
//!
//! Within a client's own session, a message is tied to the call it came
//! during when the transport says so (a streamable HTTP server sends it on
//! that request's stream) or when exactly one call is in flight; else it
//! is the session's.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use code_mode_proto::{AskKind, ClientLink, Note};
use rmcp::ClientHandler;
#[allow(deprecated)] // Sampling, roots and logging are deprecated from 2026-07-28 on; older servers use them.
use rmcp::model::{
    ClientCapabilities, ClientInfo, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ErrorData, Implementation, ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, RequestId,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient};
use tokio::sync::Notify;

use crate::Inner;

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
    /// Its notes on their way to the client (see [`Relaying::settled`]).
    pub(crate) relaying: Relaying,
}

/// How many notes of one call are on their way to its client: a call's
/// result waits for them ([`Relaying::settled`]), so that its last progress
/// note reaches the client before the result does.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relaying {
    count: Arc<std::sync::atomic::AtomicUsize>,
    done: Arc<Notify>,
}

/// How long a call's result gives the notes its server sent just before it
/// to start their way (rmcp hands each notification to a task of its own).
const NOTE_GRACE: Duration = Duration::from_millis(25);

/// How long a call's result waits at most for its notes to be delivered.
const NOTE_SETTLE: Duration = Duration::from_secs(1);

impl Relaying {
    /// One more note on its way; it is delivered when the guard drops.
    fn start(&self) -> RelayGuard {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RelayGuard(self.clone())
    }

    /// Wait until the notes the server sent before the result are
    /// delivered (bounded).
    pub(crate) async fn settled(&self) {
        tokio::time::sleep(NOTE_GRACE).await;
        let deadline = tokio::time::Instant::now() + NOTE_SETTLE;
        loop {
            let done = self.done.notified();
            if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                return;
            }
        }
    }
}

/// A note on its way (see [`Relaying`]).
struct RelayGuard(Relaying);

impl Drop for RelayGuard {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.done.notify_waiters();
    }
}

/// The calls in flight on one session, by the progress token rmcp gave
/// each request. Cheap to clone; shared by the session's handler and the
/// calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flights {
    inner: Arc<std::sync::Mutex<HashMap<String, Flight>>>,
    added: Arc<Notify>,
}

impl Flights {
    /// Note a call in flight under its request's progress token; it stays
    /// until the guard is dropped.
    pub(crate) fn enter(&self, token: String, flight: Flight) -> FlightGuard {
        code_mode_core::sync::lock(&self.inner).insert(token.clone(), flight);
        self.added.notify_waiters();
        FlightGuard { flights: self.clone(), token }
    }

    /// The flight of a progress token, waiting briefly for one that is
    /// about to be noted.
    async fn of_token(&self, token: &str) -> Option<Flight> {
        let deadline = tokio::time::Instant::now() + LATE_FLIGHT;
        loop {
            let added = self.added.notified();
            if let Some(flight) = code_mode_core::sync::lock(&self.inner).get(token) {
                return Some(flight.clone());
            }
            if tokio::time::timeout_at(deadline, added).await.is_err() {
                return None;
            }
        }
    }

    /// The call a message of the server belongs to: the one whose
    /// request's stream it came on, else the only one in flight.
    fn of_message(&self, origin: Option<&InboundStreamOrigin>) -> Option<Flight> {
        let flights = code_mode_core::sync::lock(&self.inner);
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin {
            return flights.values().find(|f| &f.request_id == id).cloned();
        }
        let mut all = flights.values();
        match (all.next(), all.next()) {
            (Some(only), None) => Some(only.clone()),
            _ => None,
        }
    }

    /// How many calls are in flight.
    pub(crate) fn count(&self) -> usize {
        code_mode_core::sync::lock(&self.inner).len()
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
        code_mode_core::sync::lock(&self.flights.inner).remove(&self.token);
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

/// The bridge, as a session's handler reaches it: set once the bridge is
/// built (its servers' shared sessions start before it exists).
pub(crate) type BridgeRef = Arc<std::sync::OnceLock<Weak<Inner>>>;

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
    bridge: BridgeRef,
}

impl Relay {
    /// The handler of a server's shared session (and of each session after
    /// a restart: the same flights and wake-ups).
    pub(crate) fn shared(server: usize, name: &str, bridge: BridgeRef) -> Self {
        Self {
            server,
            name: name.into(),
            flights: Flights::default(),
            relisting: Relisting::default(),
            owner: None,
            bridge,
        }
    }

    /// The handler of a client's own session with the server; the
    /// server's list changes heard there wake the server's actor
    /// (`relisting`), which lists again on the shared session.
    pub(crate) fn own(server: usize, name: &str, owner: Owner, relisting: Relisting, bridge: BridgeRef) -> Self {
        Self { server, name: name.into(), flights: Flights::default(), relisting, owner: Some(Arc::new(owner)), bridge }
    }

    /// The calls in flight on this session.
    pub(crate) fn flights(&self) -> &Flights {
        &self.flights
    }

    /// The wake-ups of the shared session's actor.
    pub(crate) fn relisting(&self) -> Relisting {
        self.relisting.clone()
    }

    fn bridge(&self) -> Option<crate::Bridge> {
        self.bridge.get().and_then(Weak::upgrade).map(|inner| crate::Bridge { inner })
    }

    /// Tell the client a note from the server (nothing when it has no
    /// bridge to go through any more).
    async fn tell(&self, asker: &str, call_id: Option<String>, note: Note) {
        if let Some(bridge) = self.bridge() {
            bridge.tell_client(asker, call_id, self.server, note).await;
        }
    }

    /// Relay one question of the server to the owner's client; its answer
    /// as the result the server expects.
    async fn ask<R: serde::de::DeserializeOwned>(
        &self,
        kind: AskKind,
        params: &impl serde::Serialize,
        context: &RequestContext<RoleClient>,
    ) -> Result<R, ErrorData> {
        let params = serde_json::to_value(params).map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let origin = origin_of(context);
        let Some(owner) = &self.owner else {
            tracing::info!(server = %self.name, method = kind.method(), "a server asked on its shared session, where no client can answer");
            return Err(ErrorData::method_not_found_for(
                kind.method(),
                "the client of this call cannot answer it (code-mode relays a server's questions only to a client that declared the capability)",
            ));
        };
        let Some(bridge) = self.bridge() else {
            return Err(ErrorData::internal_error("the gateway is shutting down", None));
        };
        let call_id = self.flights.of_message(origin).map(|f| f.call_id);
        let answer = bridge.relay_ask(owner, call_id, self.server, kind, params, &context.ct).await?;
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(format!("the client's answer is not a {} result: {e}", kind.method()), None)
        })
    }
}

/// An `ErrorData` for a method the client does not serve.
trait MethodNotFound {
    fn method_not_found_for(method: &str, why: &str) -> ErrorData;
}

impl MethodNotFound for ErrorData {
    fn method_not_found_for(method: &str, why: &str) -> ErrorData {
        ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, format!("{method}: {why}"), None)
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
                "roots": if link.roots { Some(serde_json::json!({"listChanged": false})) } else { None },
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
        let _delivering = flight.relaying.start();
        let note = Note::Progress { progress: params.progress, total: params.total, message: params.message };
        self.tell(&flight.asker, Some(flight.call_id), note).await;
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
        let flight = self.flights.of_message(origin);
        let _delivering = flight.as_ref().map(|f| f.relaying.start());
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

impl crate::Bridge {
    /// Judge a server's question to the client before it is asked: the
    /// server's policy (`sampling`, `elicitation`, `roots`), and for
    /// sampling the private-data rule (the client's model writes the
    /// answer, so once `session` read private data only a private server
    /// may have it). The decision goes into `trail`; `Err` holds the
    /// refusal.
    pub(crate) async fn judge_question(
        &self,
        current: &crate::current::Current,
        session: &str,
        server: usize,
        kind: AskKind,
        trail: &mut crate::trail::Trail,
    ) -> Result<(), String> {
        let name = self.server_name(server);
        if let Some(applied) = &current.policies[server] {
            let site = crate::policy::CallSite { session, server: &name, tool: kind.method() };
            match applied.policy.ask(kind.into()) {
                crate::policy::Admission::Allow { rule } => {
                    self.decided(trail, site, crate::policy::AuditDecision::Allowed, &rule, None);
                }
                crate::policy::Admission::Deny { reason, rule } => {
                    self.decided(trail, site, crate::policy::AuditDecision::Denied, &rule, Some(reason.clone()));
                    let why = format!("{}: denied by the gateway's policy ({rule}): {reason}", kind.method());
                    tracing::info!(server = %name, "{why}");
                    return Err(why);
                }
            }
        }
        if kind == AskKind::Sampling
            && let Some(rule) = &current.rule
            && !current.offers.is_private(server)
        {
            let mut state = crate::check::StateKey::new(self, session);
            let key = match state.get().await {
                Ok(key) => key.to_string(),
                Err(e) => {
                    let why = format!(
                        "{}: session state failed, refusing under the private-data rule (fail closed): {e}",
                        kind.method()
                    );
                    trail.refused("bridge:private_data", &why);
                    return Err(why);
                }
            };
            let judged = format!("a sampling answer to {name}");
            if let Err(refusal) = rule.judge(&key, &judged, false).await {
                trail.tainted = Some(true);
                trail.refused("bridge:private_data", &refusal.to_string());
                return Err(refusal.to_string());
            }
            trail.tainted = Some(false);
        }
        Ok(())
    }

    /// A stateless server's input-required result on its way to the
    /// client: each question in it is judged as a relayed one (and
    /// audited), and an elicitation's message names the server. `Err`:
    /// a question is refused, and with it the whole result.
    pub(crate) async fn vet_questions(
        &self,
        current: &crate::current::Current,
        server: usize,
        call: &code_mode_proto::ToolCall,
        result: &mut serde_json::Value,
    ) -> Result<(), String> {
        let name = self.server_name(server);
        let Some(serde_json::Value::Object(requests)) = result.get_mut("inputRequests") else { return Ok(()) };
        for (_, request) in requests.iter_mut() {
            let kind = match request.get("method").and_then(serde_json::Value::as_str) {
                Some("sampling/createMessage") => AskKind::Sampling,
                Some("elicitation/create") => AskKind::Elicitation,
                Some("roots/list") => AskKind::Roots,
                other => return Err(format!("the server asked for {other:?}, which code-mode does not relay")),
            };
            let record = code_mode_proto::ToolCall {
                tool: kind.method().to_string(),
                arguments: request.get("params").cloned().unwrap_or_default(),
                op: code_mode_proto::Op::Tool,
                link: None,
                ..call.clone()
            };
            let mut trail = crate::trail::Trail::new(&record);
            trail.method = Some(kind.method().to_string());
            trail.at(&name, kind.method());
            let judged = self.judge_question(current, &call.session, server, kind, &mut trail).await;
            if judged.is_ok() {
                trail.went_out();
            }
            if let Some(audit) = &self.inner.audit
                && let Err(e) = audit.append(trail.record(&record), code_mode_audit::Durability::Written).await
            {
                return Err(format!("the gateway could not record the server's question: {e}"));
            }
            judged?;
            if kind == AskKind::Elicitation
                && let Some(serde_json::Value::String(message)) = request.pointer_mut("/params/message")
            {
                *message = format!("The server {name:?} asks (through code-mode): {message}");
            }
        }
        Ok(())
    }
}

/// How long telling a client a note (or that a question was withdrawn)
/// may take (notes are not retried: a lost one is only logged).
const NOTE_TIMEOUT: Duration = Duration::from_secs(2);

/// Send one message for a client to its frontend session object's
/// `subject` (counted under the client subject's metrics label).
async fn to_client(
    bus: &code_mode_core::bus::Bus,
    subject: &str,
    message: &code_mode_proto::ToClient,
    timeout: Duration,
) -> Result<code_mode_proto::FromClient, code_mode_core::bus::BusError> {
    bus.call_counted_as(subject, code_mode_proto::subjects::CLIENT, message, timeout).await
}

impl crate::Bridge {
    /// Pass a server's note to the frontend session object `asker`.
    pub(crate) async fn tell_client(&self, asker: &str, call_id: Option<String>, server: usize, note: Note) {
        let Some(bus) = self.inner.approvals.get() else { return };
        let Some(subject) = code_mode_proto::subjects::client(asker) else { return };
        let message = code_mode_proto::ToClient::Note(code_mode_proto::ServerNote {
            call_id,
            server: self.server_name(server),
            note,
        });
        if let Err(e) = to_client(bus, &subject, &message, NOTE_TIMEOUT).await {
            tracing::debug!(client = %asker, error = %e, "a server's note did not reach its client");
        }
    }

    /// Relay one question of server `server` to `owner`'s client, once it
    /// passed the checks: the server's policy (`sampling`, `elicitation`,
    /// `roots`), and for a sampling answer the private-data rule (the
    /// client's model writes it, so after private data was read only a
    /// private server may receive it). Every question is one audit record.
    pub(crate) async fn relay_ask(
        &self,
        owner: &Owner,
        call_id: Option<String>,
        server: usize,
        kind: AskKind,
        params: serde_json::Value,
        withdrawn: &tokio_util::sync::CancellationToken,
    ) -> Result<serde_json::Value, ErrorData> {
        let current = self.current();
        let name = self.server_name(server);
        let record = code_mode_proto::ToolCall {
            session: owner.session.clone(),
            asker: Some(owner.asker.clone()),
            identity: owner.identity.clone(),
            cell_id: call_id.clone().unwrap_or_default(),
            call_index: 0,
            tool: kind.method().to_string(),
            arguments: params.clone(),
            op: code_mode_proto::Op::Tool,
            link: None,
        };
        let mut trail = crate::trail::Trail::new(&record);
        trail.method = Some(kind.method().to_string());
        trail.at(&name, kind.method());
        let answer = self.judge_and_ask(&current, owner, call_id, server, kind, params, withdrawn, &mut trail).await;
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.append(trail.record(&record), code_mode_audit::Durability::Written).await
        {
            tracing::error!(server = %name, error = %e, "a server's question could not be recorded: its answer is withheld");
            return Err(ErrorData::internal_error(format!("the gateway could not record the answer: {e}"), None));
        }
        answer
    }

    #[allow(clippy::too_many_arguments)]
    async fn judge_and_ask(
        &self,
        current: &crate::current::Current,
        owner: &Owner,
        call_id: Option<String>,
        server: usize,
        kind: AskKind,
        params: serde_json::Value,
        withdrawn: &tokio_util::sync::CancellationToken,
        trail: &mut crate::trail::Trail,
    ) -> Result<serde_json::Value, ErrorData> {
        let name = self.server_name(server);
        let refused = |trail: &mut crate::trail::Trail, check: &str, why: String| {
            tracing::info!(server = %name, method = kind.method(), "a server's question was refused: {why}");
            trail.refused(check, &why);
            Err(ErrorData::invalid_request(why, None))
        };
        let link = &owner.link;
        let declared = match kind {
            AskKind::Sampling => link.sampling,
            AskKind::Elicitation => link.elicitation || link.elicitation_url,
            AskKind::Roots => link.roots,
        };
        if !declared {
            return refused(trail, "bridge:capability", format!("{}: the client did not declare it", kind.method()));
        }
        if let Err(why) = self.judge_question(current, &owner.session, server, kind, trail).await {
            return Err(ErrorData::invalid_request(why, None));
        }
        trail.went_out();
        let Some(bus) = self.inner.approvals.get() else {
            return refused(trail, "bridge:no_client", "no client session can be reached".to_string());
        };
        let Some(subject) = code_mode_proto::subjects::client(&owner.asker) else {
            return refused(trail, "bridge:no_client", "the client's session id cannot be addressed".to_string());
        };
        let timeout = self.inner.limits.approval_timeout;
        let id = uuid::Uuid::new_v4().to_string();
        let message = code_mode_proto::ToClient::Ask(code_mode_proto::ServerAsk {
            id: Some(id.clone()),
            call_id,
            server: name.clone(),
            ask: kind,
            params,
            timeout_ms: timeout.as_millis() as u64,
        });
        let wait = timeout + code_mode_core::defaults::HOP_MARGIN;
        let asked = to_client(bus, &subject, &message, wait);
        let reply = tokio::select! {
            reply = asked => reply,
            // The server cancelled its request: so is the question at the
            // client (the server wants no answer: none is sent).
            _ = withdrawn.cancelled() => {
                let withdraw = code_mode_proto::ToClient::Withdraw(code_mode_proto::AskWithdrawn { id, reason: None });
                if let Err(e) = to_client(bus, &subject, &withdraw, NOTE_TIMEOUT).await {
                    tracing::debug!(server = %name, error = %e, "a withdrawn question could not be cancelled at the client");
                }
                trail.result = Some((code_mode_audit::record::CallResult::Error, Some("withdrawn by the server".into())));
                return Err(ErrorData::invalid_request("the server withdrew its request", None));
            }
        };
        match reply {
            Ok(code_mode_proto::FromClient::Answered { result }) => {
                trail.result = Some((code_mode_audit::record::CallResult::Ok, Some(result.to_string())));
                Ok(result)
            }
            Ok(code_mode_proto::FromClient::Refused { message, code }) => {
                trail.result = Some((code_mode_audit::record::CallResult::Error, Some(message.clone())));
                Err(ErrorData::new(
                    code.map_or(rmcp::model::ErrorCode::INVALID_REQUEST, rmcp::model::ErrorCode),
                    message,
                    None,
                ))
            }
            Ok(code_mode_proto::FromClient::Noted) => {
                trail.result = Some((code_mode_audit::record::CallResult::Fault, None));
                Err(ErrorData::internal_error("the client's frontend did not answer the question", None))
            }
            Err(e) => {
                tracing::warn!(server = %name, error = %e, "a server's question did not reach its client");
                trail.result = Some((code_mode_audit::record::CallResult::Fault, None));
                Err(ErrorData::internal_error(
                    "the client could not be asked (its session is gone or did not answer)",
                    None,
                ))
            }
        }
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
            relaying: Relaying::default(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_result_waits_for_its_notes_only_until_the_last_one_is_delivered() {
        let relaying = Relaying::default();
        let note = relaying.start();
        let started = Instant::now();
        let delivered = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(note);
        });
        relaying.settled().await;
        assert_eq!(started.elapsed(), Duration::from_millis(300), "it returned as the note was delivered");
        delivered.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_result_with_no_note_on_its_way_waits_only_the_grace_and_a_stuck_note_at_most_the_settle_time() {
        let relaying = Relaying::default();
        let started = Instant::now();
        relaying.settled().await;
        assert_eq!(started.elapsed(), NOTE_GRACE);
        let _stuck = relaying.start();
        let started = Instant::now();
        relaying.settled().await;
        assert_eq!(started.elapsed(), NOTE_GRACE + NOTE_SETTLE, "a note never delivered holds the result no longer");
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
        assert!(flights.of_message(None).is_none(), "no call in flight: nobody's");
        let one = flights.enter("t1".into(), flight("call-1", 1));
        assert_eq!(flights.of_message(None).unwrap().call_id, "call-1", "the only call in flight");
        let two = flights.enter("t2".into(), flight("call-2", 2));
        assert!(flights.of_message(None).is_none(), "two calls and no stream: it is the session's");
        let on_two = InboundStreamOrigin::OutboundRequest(RequestId::Number(2));
        assert_eq!(flights.of_message(Some(&on_two)).unwrap().call_id, "call-2", "the call whose stream it came on");
        drop(two);
        assert!(flights.of_message(Some(&on_two)).is_none(), "a stream whose call ended belongs to no call");
        drop(one);
        assert_eq!(flights.count(), 0);
    }
}
