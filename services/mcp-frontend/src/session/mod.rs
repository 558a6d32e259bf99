//! One client session as an actor.
//!
//! Every piece of a session's state has this one owner: its id, the cells
//! it runs (each a task in the actor's own `JoinSet`) and where their
//! approval questions go, its approval subscription, who answers
//! approvals outside an MCP request, the MCP client to notify when the
//! tools change, and whether it ran a cell (so the bridge must be told
//! when it ends). [`SessionHandle`]s reach it over a bounded channel;
//! replies come back over `oneshot`s.
//!
//! The actor ends when it is told to ([`SessionHandle::end`]: the stdio
//! client went away, `code-mode run` is done; running cells are stopped
//! then), or when its last handle is gone and its last cell has ended (an
//! HTTP session closed, a stateless request was answered). Either way it
//! cancels its approval subscription and, if it ran a cell, tells the
//! bridge that the session ended, so the bridge forgets its taint and
//! `grant` counters.
//!
//! A kept session (`--keep-variables`) also owns where its container lives
//! (which runner, under which key) and why its variables were lost, if they
//! were: its cells run one at a time, the first in a new container taken
//! from the runners' queue group, the later ones on the runner holding it
//! ([`subjects::runner`]). A runner that no longer holds the container
//! (idle expiry, past its longest life, a stopped cell, a runner that died
//! or restarted) makes the cell start in a fresh container, and its output
//! then starts with a line saying that earlier variables are gone. When
//! the session ends, the runner is told to remove the container.
//!
//! A session object of a stateless (MCP 2026-07-28) HTTP request
//! ([`SessionHandle::stateless`]) lives for that request only, so the
//! state that must outlive it is held elsewhere: its cells and direct
//! calls count in its identity's scope at the bridge
//! ([`subjects::stateless_scope`]: taint, `grant` limits, direct calls),
//! its cells share the identity's `--max-cells-per-session` slots with the
//! identity's other requests in this process, and its variables live in a
//! container named by a session handle ([`crate::handle`]) the client
//! passes back. It answers approvals under its own id (the cells name it
//! as their `asker`), and never tells the bridge that it ended: a scope
//! ends only by time.
//!
//! Approval questions from the bridge arrive on the session's subject; the
//! subscription's handler asks the actor, on a channel of its own, where the
//! question goes (the `run_python` request running the cell, the local
//! asker, or nobody) and waits for the answer itself, so the actor never
//! waits on a person. That channel does not keep the actor alive: a
//! session whose handles are gone still routes the questions of its
//! running cells (a stateless client answers them on a later request).
//!
//! This file is the actor and its handle; [`routes`] routes the approval
//! questions, [`kept`] is the client of a kept container (and of a
//! stateless client's handle), [`cells`] sends a cell to the runners.

mod cells;
mod kept;
mod routes;

use self::cells::{At, run_cell};
use self::kept::{Container, Kept, end_kept, run_handle_cell, run_kept_cell};
use self::routes::{Route, RouteRequest, approve, relay};

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use code_mode_proto::{
    ApprovalRequest, CellReport, ClientLink, DirectCall, KeptContainer, Op, Target, ToClient, subjects,
};
use rmcp::RoleServer;
#[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
use rmcp::model::LoggingLevel;
use rmcp::service::Peer;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use tracing::Instrument;

use crate::approval::LocalAsker;
use crate::auth::{Caller, Identity, shown};
use crate::handle::HandleError;
use crate::notices::{Notice, Notices, Notifier};
use crate::questions::Question;
use crate::wire::Outcome;
use crate::{CellOptions, FrontendError, KeepConfig, Shared};

/// Commands that may wait at a session actor.
const COMMANDS: usize = 32;

/// Route requests (approval questions) that may wait at a session actor.
const ROUTE_REQUESTS: usize = 64;

/// Approval questions of one cell that may wait for its request to take
/// them (one per concurrent call at most).
pub(crate) const QUESTIONS_PER_CELL: usize = 64;

/// How long telling the bridge that a session ended may take (and the
/// runner, that a kept container may go).
const SESSION_END_TIMEOUT: Duration = Duration::from_secs(2);

/// A cell (or a direct tool call) started for a request: its MCP result to
/// come, and its approval questions as they arrive.
pub(crate) struct CellRun {
    /// The result (or why there is none): complete, or (a direct call of a
    /// stateless client) the server's own input-required result.
    pub result: std::pin::Pin<Box<dyn Future<Output = Result<Outcome, FrontendError>> + Send>>,
    /// The questions asked about its calls (the bridge's approvals, a
    /// wrapped server's own questions) and its servers' progress.
    pub questions: mpsc::Receiver<Question>,
    /// The tool the request called (`run_python`, or a wrapped tool called
    /// directly), named in an error.
    pub tool: String,
    /// What runs: a cell or a direct call.
    pub running: Running,
    /// What the client's request does: [`Op::Tool`] for a tool call
    /// (`run_python`, or a wrapped tool called directly), whose result may
    /// ask a stateless client questions; else the gateway request (a read,
    /// a prompt, a completion, ...), whose result cannot.
    pub op: Op,
}

/// What a [`CellRun`] runs, which says how its client's cancel stops it.
pub(crate) enum Running {
    /// A cell.
    Cell {
        /// Its id (its heartbeat reads how long it was held).
        id: String,
        /// Its stop: dropped (with the run, or when its request is
        /// cancelled) it fires the cell's [`CellOrder::cancel`]: the
        /// container is killed, its calls are cancelled at their servers
        /// and its questions withdrawn.
        stop: Option<tokio_util::sync::DropGuard>,
    },
    /// A wrapped tool (or another request) a client calls directly.
    Direct {
        /// Its id: a client's cancel names it to the bridges.
        call_id: String,
    },
}

impl std::fmt::Debug for CellRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellRun").field("tool", &self.tool).finish_non_exhaustive()
    }
}

/// A wrapped tool a client calls directly (`--expose-tools`).
#[derive(Debug)]
pub(crate) struct DirectOrder {
    /// The call's id (approval questions name it).
    pub call_id: String,
    /// What the client asks: a tool by its name as `tools/list` offered
    /// it, or another request for the gateway's servers.
    pub target: Target,
    /// The arguments as the client sent them.
    pub arguments: serde_json::Value,
    /// What the client can answer and wants to hear.
    pub link: Option<ClientLink>,
    /// A stateless client's retry of the server's own input-required
    /// result.
    pub retry: Option<code_mode_proto::Retry>,
    /// Where its questions go: the request making it.
    pub route: mpsc::Sender<Question>,
}

/// A cell to run.
#[derive(Debug)]
pub(crate) struct CellOrder {
    /// Its id (approval questions name it).
    pub cell_id: String,
    /// The code.
    pub code: String,
    /// Its files in (`/tmp/in`, issue 42).
    pub inputs: Vec<code_mode_proto::CellInput>,
    /// Where its questions go: the request running it; `None`: the local
    /// asker, if any.
    pub route: Option<mpsc::Sender<Question>>,
    /// What the client running it can answer and wants to hear (its calls'
    /// servers may ask it through the bridge).
    pub link: Option<ClientLink>,
    /// Per-cell options.
    pub options: CellOptions,
    /// Where it runs.
    pub keep: CellKeep,
    /// Fired when the request running it is gone (cancelled by its client,
    /// or dropped with its connection): the cell is stopped
    /// ([`cells::cancellable`]).
    pub cancel: CancellationToken,
}

/// Where a cell runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CellKeep {
    /// In a fresh container, removed after it.
    Fresh,
    /// In the session's kept container when the session keeps variables
    /// (a fresh one otherwise).
    Session,
    /// In the kept container a stateless client's handle names, or (`None`)
    /// in a new one whose handle the result carries. Never silently in a
    /// fresh container instead.
    Handle(Option<KeptContainer>),
}

/// What a cell gives back: its report, and the kept container it leaves
/// for a handle (a [`CellKeep::Handle`] cell whose container lives on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ran {
    /// The report.
    pub report: CellReport,
    /// The container the next cell of the handle runs in.
    pub kept: Option<KeptContainer>,
}

#[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
enum Command {
    Listen { reply: oneshot::Sender<Result<(), FrontendError>> },
    Run { order: CellOrder, reply: CellReply },
    Direct { order: DirectOrder, reply: oneshot::Sender<Result<Outcome, FrontendError>> },
    AskLocally(Arc<dyn LocalAsker>),
    KnowClient(Peer<RoleServer>),
    KnowCaller(Caller),
    Prologue(Prologue),
    SetLevel(LoggingLevel),
    End { reply: oneshot::Sender<()> },
}

/// What a request tells its session before it starts anything, in one
/// message: the MCP client (the first request's, to tell it when the tools
/// change), who calls, whether this is a stateless request, and the log
/// level it carries.
#[derive(Debug, Default)]
#[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
pub(crate) struct Prologue {
    /// The client, to hand the actor once per session (set by
    /// [`SessionHandle::prologue`]).
    pub client: Option<Peer<RoleServer>>,
    /// Who calls, when the frontend authenticates clients (the first one
    /// told stays).
    pub caller: Option<Caller>,
    /// The request is a stateless one (MCP 2026-07-28 over HTTP): its cells
    /// and direct calls count in its caller's stateless scope.
    pub stateless: bool,
    /// The log level the request carries (a 2026-07-28 client sends it
    /// with each request).
    pub level: Option<LoggingLevel>,
}

/// A handle on a session actor. Cheap to clone; the session ends once
/// every handle is gone and its cells have ended (or at [`SessionHandle::end`]).
#[derive(Clone, Debug)]
pub(crate) struct SessionHandle {
    commands: mpsc::Sender<Command>,
    id: Arc<str>,
    /// The MCP client was handed to the actor (sent once per session).
    told_client: Arc<AtomicBool>,
    /// The session's log level and client, to tell of events.
    notifier: Notifier,
}

impl SessionHandle {
    /// Start the actor of a new session with its own id (`keep`: its cells
    /// share one kept container).
    pub fn start(shared: Arc<Shared>, keep: Option<KeepConfig>) -> SessionHandle {
        let id = uuid::Uuid::new_v4().to_string();
        let (commands, inbox) = mpsc::channel(COMMANDS);
        let (route_requests, routes_inbox) = mpsc::channel(ROUTE_REQUESTS);
        let notices = Notices::new();
        let notifier = notices.notifier();
        let cell_slots = shared.config.max_cells_per_session.map(|max| Arc::new(Semaphore::new(max)));
        shared.activity.session_started(&id);
        let actor = SessionActor {
            id: id.clone(),
            shared,
            cell_slots,
            routes: HashMap::new(),
            local: None,
            client: None,
            ran: false,
            subscription: None,
            route_requests,
            cells: JoinSet::new(),
            cell_ids: HashMap::new(),
            side: JoinSet::new(),
            keep,
            kept: Kept::default(),
            identity: None,
            lease: None,
            direct_calls: 0,
            notices,
            scope: None,
        };
        tokio::spawn(actor.run(inbox, routes_inbox));
        SessionHandle { commands, id: id.into(), told_client: Arc::new(AtomicBool::new(false)), notifier }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Answer the bridge's approval questions for this session from now on.
    pub async fn listen(&self) -> Result<(), FrontendError> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Listen { reply }).await.map_err(|_| FrontendError::SessionEnded)?;
        answer.await.map_err(|_| FrontendError::SessionEnded)?
    }

    /// Start a cell; its report comes on the returned receiver.
    pub async fn run(&self, order: CellOrder) -> oneshot::Receiver<Result<Ran, FrontendError>> {
        let (reply, result) = oneshot::channel();
        if let Err(mpsc::error::SendError(Command::Run { reply, .. })) =
            self.commands.send(Command::Run { order, reply }).await
        {
            let _ = reply.send(Err(FrontendError::SessionEnded));
        }
        result
    }

    /// Call a wrapped tool directly; its MCP result comes on the returned
    /// receiver.
    pub async fn direct(&self, order: DirectOrder) -> oneshot::Receiver<Result<Outcome, FrontendError>> {
        let (reply, result) = oneshot::channel();
        if let Err(mpsc::error::SendError(Command::Direct { reply, .. })) =
            self.commands.send(Command::Direct { order, reply }).await
        {
            let _ = reply.send(Err(FrontendError::SessionEnded));
        }
        result
    }

    /// Ask `asker` about approvals of cells run outside an MCP request (the
    /// first one set stays).
    pub fn ask_locally(&self, asker: Arc<dyn LocalAsker>) {
        if self.commands.try_send(Command::AskLocally(asker)).is_err() {
            tracing::warn!(session = %self.id, "the session could not take the local asker");
        }
    }

    /// Hand the actor the MCP client, to tell it when the tools change (the
    /// first one seen).
    pub fn know_client(&self, peer: &Peer<RoleServer>) {
        if !self.told_client.swap(true, Ordering::SeqCst)
            && self.commands.try_send(Command::KnowClient(peer.clone())).is_err()
        {
            // Busy: the next request tries again.
            self.told_client.store(false, Ordering::SeqCst);
        }
    }

    /// Tell the actor who its caller is (the first one told stays: the HTTP
    /// gate refuses requests of another identity on an open session). The
    /// actor keeps the caller's session place while it lives.
    pub async fn know_caller(&self, caller: Caller) {
        let _ = self.commands.send(Command::KnowCaller(caller)).await;
    }

    /// Tell the actor what a request brings before it starts anything
    /// ([`Prologue`]), in one message; the client `peer` goes with it the
    /// first time. A stateless request makes this session object serve one
    /// stateless request of its caller: from then on its cells and direct
    /// calls count in the caller's stateless scope, and its cells share
    /// the caller's `--max-cells-per-session` slots in this process.
    pub async fn prologue(&self, peer: &Peer<RoleServer>, mut prologue: Prologue) {
        let first = !self.told_client.swap(true, Ordering::SeqCst);
        if first {
            prologue.client = Some(peer.clone());
        }
        if self.commands.send(Command::Prologue(prologue)).await.is_err() && first {
            self.told_client.store(false, Ordering::SeqCst);
        }
    }

    /// The client chose the level of the log notifications it gets
    /// (`logging/setLevel`, or a stateless request's `_meta`).
    #[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
    pub async fn set_level(&self, level: LoggingLevel) {
        let _ = self.commands.send(Command::SetLevel(level)).await;
    }

    /// A view of the session's log level and client, to tell it of events.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// End the session now: stop its cells, stop answering approvals, and
    /// tell the bridge (if it ran a cell). Returns once done.
    pub async fn end(&self) {
        let (reply, done) = oneshot::channel();
        if self.commands.send(Command::End { reply }).await.is_ok() {
            let _ = done.await;
        }
    }
}

/// The approval and client subscriptions: their tasks end once `stop` is
/// cancelled.
struct Subscription {
    stop: CancellationToken,
    _tasks: [tokio::task::JoinHandle<()>; 2],
}

/// The state the session actor owns.
struct SessionActor {
    id: String,
    shared: Arc<Shared>,
    /// `--max-cells-per-session`: a permit per cell running or queued,
    /// given back by the cell's task just before its result goes to the
    /// client (so a client that sends its next cell on hearing the last
    /// one's result is never refused for it).
    cell_slots: Option<Arc<Semaphore>>,
    /// Where each running cell's questions go, by cell id.
    routes: HashMap<String, mpsc::Sender<Question>>,
    local: Option<Arc<dyn LocalAsker>>,
    pub client: Option<Peer<RoleServer>>,
    /// A cell ran, so the bridge may hold state for the session.
    ran: bool,
    subscription: Option<Subscription>,
    /// Handed to the subscription's handler.
    route_requests: mpsc::Sender<RouteRequest>,
    /// The running cells; a kept cell's task returns what became of the
    /// session's container.
    cells: JoinSet<Option<Container>>,
    /// Cell id of each cell task.
    cell_ids: HashMap<tokio::task::Id, String>,
    /// Notifications to the client in flight.
    side: JoinSet<()>,
    /// Whether (and how long) the session keeps its container.
    keep: Option<KeepConfig>,
    /// The kept container, in a kept session.
    kept: Kept,
    /// Who opened the session (`None`: nobody authenticated).
    identity: Option<Identity>,
    /// The session's place among the open sessions, given back when the
    /// actor ends.
    lease: Option<crate::auth::owners::Lease>,
    /// Direct tool calls the session made (`--max-direct-calls` counts
    /// them; the bridge checks the count).
    direct_calls: u32,
    /// The log level its client chose, and the client to tell.
    notices: Notices,
    /// For a stateless request's session: the identity's scope, under
    /// which its cells and direct calls count at the bridge.
    scope: Option<String>,
}

/// Where a cell's result goes: the request that ran it.
type CellReply = oneshot::Sender<Result<Ran, FrontendError>>;

/// A cell's place among those its session may run at once
/// (`--max-cells-per-session`; `None` without that limit).
type CellSlot = Option<OwnedSemaphorePermit>;

impl SessionActor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>, mut routes: mpsc::Receiver<RouteRequest>) {
        let mut catalog = self.shared.catalog.subscribe();
        catalog.mark_unchanged();
        let mut last = catalog.borrow().clone();
        let (mut open, mut watching) = (true, true);
        while open || !self.cells.is_empty() {
            tokio::select! {
                command = commands.recv(), if open => match command {
                    None => open = false,
                    Some(Command::End { reply }) => {
                        self.end().await;
                        let _ = reply.send(());
                        return;
                    }
                    Some(command) => self.handle(command).await,
                },
                Some(request) = routes.recv() => {
                    let _ = request.reply.send(self.route(&request.cell_id));
                }
                Some(ended) = self.cells.join_next_with_id(), if !self.cells.is_empty() => {
                    let (id, container) = match ended {
                        Ok((id, container)) => (id, container),
                        Err(e) => {
                            tracing::error!(session = %self.id, error = %e, "a cell's task failed");
                            (e.id(), None)
                        }
                    };
                    if let Some(cell_id) = self.cell_ids.remove(&id) {
                        self.routes.remove(&cell_id);
                    }
                    if self.kept.running == Some(id) {
                        self.kept.running = None;
                        if let Some(container) = container {
                            self.kept.container = container;
                            let runner = self.kept.container.at.as_ref().map(|at| at.runner.as_str());
                            self.shared.activity.session_kept(&self.id, runner);
                        }
                        if let Some((order, reply, slot)) = self.kept.waiting.pop_front() {
                            self.launch_cell(order, reply, slot);
                        }
                    }
                }
                changed = catalog.changed(), if watching => match changed {
                    Ok(()) => {
                        let now = catalog.borrow_and_update().clone();
                        self.tell_client_lists_changed(&last, &now);
                        last = now;
                    }
                    Err(_) => watching = false,
                },
                Some(_) = self.side.join_next(), if !self.side.is_empty() => {}
            }
        }
        self.end().await;
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Listen { reply } => {
                let _ = reply.send(self.listen().await);
            }
            Command::Run { order, reply } => self.start_cell(order, reply),
            Command::Direct { order, reply } => self.start_direct(order, reply),
            Command::AskLocally(asker) => {
                self.local.get_or_insert(asker);
            }
            Command::KnowClient(peer) => {
                self.notices.know_client(&peer);
                self.client.get_or_insert(peer);
            }
            Command::SetLevel(level) => self.notices.set_level(level),
            Command::KnowCaller(caller) => self.know_caller(caller),
            Command::Prologue(Prologue { client, caller, stateless, level }) => {
                if let Some(peer) = client {
                    self.notices.know_client(&peer);
                    self.client.get_or_insert(peer);
                }
                if let Some(caller) = caller {
                    self.know_caller(caller);
                }
                if stateless && self.scope.is_none() && !self.ran {
                    let scope = subjects::stateless_scope(self.identity.as_ref().map(Identity::as_str));
                    self.cell_slots = self.shared.stateless_slots.of(&scope);
                    self.scope = Some(scope);
                }
                if let Some(level) = level {
                    self.notices.set_level(level);
                }
            }
            Command::End { .. } => unreachable!("handled by the loop"),
        }
    }

    /// The session's caller: the first identity told stays, and so does
    /// its place among the open sessions.
    fn know_caller(&mut self, caller: Caller) {
        if self.identity.is_none() && self.lease.is_none() {
            self.identity = caller.identity;
            self.shared.activity.session_identity(&self.id, self.identity.as_ref().map(Identity::as_str));
        }
        if self.lease.is_none() {
            self.lease = caller.lease;
        }
    }

    /// Take a cell: refused at once when the session already runs (or
    /// queues) its most cells, else started or, in a kept session whose
    /// container is busy, queued.
    fn start_cell(&mut self, order: CellOrder, reply: CellReply) {
        let slot = match &self.cell_slots {
            None => None,
            Some(slots) => match slots.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) => {
                    let max = self.shared.config.max_cells_per_session.unwrap_or_default();
                    tracing::info!(session = %self.id, identity = %shown(self.identity.as_ref()), max, "a cell was refused: the session runs its most cells");
                    let _ = reply.send(Err(FrontendError::SessionBusy { max }));
                    self.tell(Notice::session_busy(max));
                    return;
                }
            },
        };
        self.launch_cell(order, reply, slot);
    }

    /// Run a cell that has its session slot (or queue it behind the kept
    /// cell running now).
    fn launch_cell(&mut self, order: CellOrder, reply: CellReply, slot: CellSlot) {
        let kept = self.keep.filter(|_| order.keep == CellKeep::Session);
        if kept.is_some() && self.kept.running.is_some() {
            // A kept session's cells run one after the other, in order.
            self.kept.waiting.push_back((order, reply, slot));
            return;
        }
        self.ran = true;
        let cell_id = order.cell_id.clone();
        if let Some(route) = order.route.clone() {
            self.routes.insert(cell_id.clone(), route);
        }
        let shared = self.shared.clone();
        let at = self.at();
        let session_id = self.id.clone();
        let container = self.kept.container.clone();
        let identity = self.identity.clone();
        let notifier = self.notices.notifier();
        let handle_keep = self.keep;
        let session = at.session.clone();
        let span = tracing::info_span!("cell", %session, cell = %cell_id, identity = %shown(identity.as_ref()));
        // The exported trace's root (docs/tracing.md): no session, no identity.
        let traced = code_mode_telemetry::trace::cell_span(&cell_id);
        let trace = traced.clone();
        let task = self.cells.spawn(
            async move {
                let began = std::time::Instant::now();
                tracing::info!(code_bytes = order.code.len(), "cell started");
                shared.activity.cell_started(crate::activity::RunningCell {
                    cell_id: order.cell_id.clone(),
                    session: session_id.clone(),
                    identity: identity.as_ref().map(|i| i.to_string()),
                    started: std::time::SystemTime::now(),
                    held: None,
                });
                notifier.tell(Notice::cell_started(&order.cell_id)).await;
                let run = async {
                    match (kept, &order.keep) {
                        (Some(keep), _) => {
                            let (result, container) =
                                run_kept_cell(&shared, &at, identity.as_ref(), &order, keep, container).await;
                            (result.map(|report| Ran { report, kept: None }), Some(container))
                        }
                        (None, CellKeep::Handle(handle)) => {
                            let result = match handle_keep {
                                Some(keep) => {
                                    run_handle_cell(&shared, &at, identity.as_ref(), &order, keep, handle.clone()).await
                                }
                                None => Err(HandleError::NotKept.into()),
                            };
                            (result, None)
                        }
                        (None, _) => {
                            let result = run_cell(&shared, &at, identity.as_ref(), &order).await;
                            (result.map(|report| Ran { report, kept: None }), None)
                        }
                    }
                };
                let (result, container) = cells::cancellable(&shared, &order.cell_id, &order.cancel, run).await;
                let notice = match &result {
                    Ok(Ran { report, .. }) => {
                        tracing::info!(error = report.error.is_some(), stopped = report.stopped, "cell ended");
                        Notice::cell_ended(&order.cell_id, report)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cell failed");
                        Notice::cell_failed(&order.cell_id, e)
                    }
                };
                notifier.tell(notice).await;
                crate::wire::cell_traced(&trace, &result);
                code_mode_telemetry::frontend_cell(FrontendError::metric_result(&result));
                shared.activity.cell_ended(crate::activity::CellRecord {
                    cell_id: order.cell_id.clone(),
                    session: session_id,
                    identity: identity.as_ref().map(|i| i.to_string()),
                    outcome: crate::activity::outcome_of(result.as_ref().map(|ran| &ran.report)).to_string(),
                    duration: began.elapsed(),
                    ended: std::time::SystemTime::now(),
                });
                // The session may take another cell before this one's
                // result reaches the client.
                drop(slot);
                let _ = reply.send(result);
                // A cell may have changed the tools (a wrapped server's tool
                // did): the clients hear of it right after the cell.
                shared.catalog.refresh().await;
                container
            }
            .instrument(span)
            .instrument(traced),
        );
        self.cell_ids.insert(task.id(), cell_id);
        if kept.is_some() {
            self.kept.running = Some(task.id());
        }
    }

    /// Send a direct call to the bridge as a task of the session, like a
    /// cell: its approval questions come to the request making it, the
    /// session's end stops it, and the session counts it (the bridge
    /// refuses calls past `--max-direct-calls` in the place of the run's
    /// budget, and forgets the session's taint when it ends).
    fn start_direct(&mut self, order: DirectOrder, reply: oneshot::Sender<Result<Outcome, FrontendError>>) {
        self.ran = true;
        self.direct_calls = self.direct_calls.saturating_add(1);
        let at = self.at();
        let call = DirectCall {
            session: at.session,
            asker: at.asker,
            identity: self.identity.as_ref().map(|i| i.to_string()),
            call_id: order.call_id.clone(),
            call_index: self.direct_calls,
            max_calls: self.shared.config.max_direct_calls,
            target: order.target,
            arguments: order.arguments,
            link: order.link,
            retry: order.retry,
        };
        self.routes.insert(order.call_id.clone(), order.route);
        let shared = self.shared.clone();
        // No catalog refresh after it: a wrapped server that changes its
        // lists says so to the bridge, which lists them again on its own
        // time (after this call's answer, as a rule), and the catalog
        // watcher's poll finds the new catalog by its fingerprint; a fetch
        // per call found nothing new but cost a round trip.
        let task = self.cells.spawn(async move {
            let _ = reply.send(crate::direct::call(&shared, &call).await);
            None
        });
        self.cell_ids.insert(task.id(), order.call_id);
    }

    /// Where this session's cells and direct calls count, and who asks
    /// about their approvals.
    fn at(&self) -> At {
        match &self.scope {
            None => At { session: self.id.clone(), asker: None },
            Some(scope) => At { session: scope.clone(), asker: Some(self.id.clone()) },
        }
    }

    fn route(&self, cell_id: &str) -> Route {
        match (self.routes.get(cell_id), &self.local) {
            (Some(route), _) => Route::Cell(route.clone()),
            (None, Some(local)) => Route::Local(local.clone()),
            (None, None) => Route::Nobody,
        }
    }

    /// Subscribe to the session's approval subject and to what its
    /// wrapped servers send its client, once.
    async fn listen(&mut self) -> Result<(), FrontendError> {
        if self.subscription.is_some() {
            return Ok(());
        }
        // Session ids are UUIDs: always one subject token.
        let (Some(subject), Some(client_subject)) = (subjects::approval(&self.id), subjects::client(&self.id)) else {
            return Err(FrontendError::Transport(format!("session id {:?} cannot name a subject", self.id)));
        };
        let stop = CancellationToken::new();
        let routes = self.route_requests.clone();
        let approvals = self
            .shared
            .bus
            .serve(&subject, &self.id, stop.clone(), move |request: ApprovalRequest| {
                let routes = routes.clone();
                async move { Ok(approve(&routes, request).await) }
            })
            .await?;
        let routes = self.route_requests.clone();
        let notifier = self.notices.notifier();
        let withdrawals = crate::questions::Withdrawals::default();
        let relayed = self
            .shared
            .bus
            .serve(&client_subject, &self.id, stop.clone(), move |message: ToClient| {
                let routes = routes.clone();
                let notifier = notifier.clone();
                let withdrawals = withdrawals.clone();
                async move { Ok(relay(&routes, &notifier, &withdrawals, message).await) }
            })
            .await;
        let relayed = match relayed {
            Ok(task) => task,
            Err(e) => {
                stop.cancel();
                return Err(e.into());
            }
        };
        self.subscription = Some(Subscription { stop, _tasks: [approvals, relayed] });
        Ok(())
    }

    /// Tell the client of `notice` (if its level asks for it) from a task
    /// of the session's own, so the actor never waits on the client.
    fn tell(&mut self, notice: Notice) {
        let notifier = self.notices.notifier();
        self.side.spawn(async move { notifier.tell(notice).await });
    }

    /// Tell the client which of its lists changed between two catalogs:
    /// the tools (`run_python`'s description or the direct tools), the
    /// resources (and templates), the prompts.
    fn tell_client_lists_changed(&mut self, before: &crate::catalog::View, now: &crate::catalog::View) {
        let crate::catalog::ChangedLists { tools, resources, prompts } = crate::catalog::changed_lists(before, now);
        if tools {
            self.tell(Notice::tools_changed());
        }
        let Some(client) = self.client.clone() else { return };
        self.side.spawn(async move {
            if tools && let Err(e) = client.notify_tool_list_changed().await {
                tracing::warn!(error = %e, "could not tell the client that the tool list changed");
            }
            if resources && let Err(e) = client.notify_resource_list_changed().await {
                tracing::warn!(error = %e, "could not tell the client that the resource list changed");
            }
            if prompts && let Err(e) = client.notify_prompt_list_changed().await {
                tracing::warn!(error = %e, "could not tell the client that the prompt list changed");
            }
        });
    }

    /// Stop everything the session owns: its cells, its kept container
    /// (the runner holding it is told), its approval subscription; tell the
    /// bridge if a cell ran.
    async fn end(&mut self) {
        self.shared.activity.session_ended(&self.id);
        self.cells.abort_all();
        while self.cells.join_next().await.is_some() {}
        self.kept.waiting.clear();
        self.side.abort_all();
        if let Some(subscription) = self.subscription.take() {
            subscription.stop.cancel();
        }
        if let Some(at) = self.kept.container.at.take() {
            end_kept(&self.shared, &self.id, at).await;
        }
        // A stateless request's session keeps nothing at the bridge under
        // its own id, and its scope ends only by time.
        if std::mem::take(&mut self.ran) && self.scope.is_none() {
            tell_session_ended(&self.shared, &self.id).await;
        }
    }
}

/// Tell the bridge that `session` ended, so it forgets its state; a
/// failure is only logged (the state then stays, as it did before).
async fn tell_session_ended(shared: &Shared, session: &str) {
    let end = code_mode_proto::SessionEnd { session: session.to_string() };
    let ended =
        shared.bus.call::<_, code_mode_proto::SessionEnded>(subjects::SESSION_END, &end, SESSION_END_TIMEOUT).await;
    match ended {
        Ok(ended) => {
            tracing::info!(%session, removed = ended.removed, "client session ended; the bridge forgot its state")
        }
        Err(e) => tracing::info!(%session, error = %e, "client session ended, but the bridge could not be told"),
    }
}
