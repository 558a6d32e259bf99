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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use code_mode_core::bus::BusError;
use code_mode_core::lease::Gone;
use code_mode_proto::{
    ApprovalReply, ApprovalRequest, CellLimits, CellRan, CellReport, DirectCall, ErrorKind, Keep, KeptContainer,
    KeptEnd, KeptReply, KeptRequest, RunCell, ToolStub, subjects,
};
use rmcp::RoleServer;
#[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
use rmcp::model::{CallToolResult, LoggingLevel};
use rmcp::service::Peer;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use tracing::Instrument;

use crate::approval::{LocalAsker, Pending};
use crate::auth::{Caller, Identity, shown};
use crate::catalog::View;
use crate::handle::HandleError;
use crate::notices::{Notice, Notices, Notifier};
use crate::{CELL_MARGIN, CellOptions, FrontendError, KeepConfig, RETRY_PAUSE, Shared};

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
    /// The result (or why there is none).
    pub result: std::pin::Pin<Box<dyn Future<Output = Result<CallToolResult, FrontendError>> + Send>>,
    /// The questions the bridge asks about its calls.
    pub approvals: mpsc::Receiver<Pending>,
    /// The tool the request called (`run_python`, or a wrapped tool called
    /// directly), named in an error.
    pub tool: String,
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
    /// The tool's name, as `tools/list` offered it.
    pub tool: String,
    /// The arguments as the client sent them.
    pub arguments: serde_json::Value,
    /// Where its approval questions go: the request making it.
    pub route: mpsc::Sender<Pending>,
}

/// A cell to run.
#[derive(Debug)]
pub(crate) struct CellOrder {
    /// Its id (approval questions name it).
    pub cell_id: String,
    /// The code.
    pub code: String,
    /// Where its approval questions go: the request running it; `None`: the
    /// local asker, if any.
    pub route: Option<mpsc::Sender<Pending>>,
    /// Per-cell options.
    pub options: CellOptions,
    /// Where it runs.
    pub keep: CellKeep,
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

/// Where an approval question goes.
enum Route {
    /// The request running the cell.
    Cell(mpsc::Sender<Pending>),
    /// Whoever answers outside MCP requests.
    Local(Arc<dyn LocalAsker>),
    /// Nobody.
    Nobody,
}

struct RouteRequest {
    cell_id: String,
    reply: oneshot::Sender<Route>,
}

#[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
enum Command {
    Listen { reply: oneshot::Sender<Result<(), FrontendError>> },
    Run { order: CellOrder, reply: CellReply },
    Direct { order: DirectOrder, reply: oneshot::Sender<Result<CallToolResult, FrontendError>> },
    AskLocally(Arc<dyn LocalAsker>),
    KnowClient(Peer<RoleServer>),
    KnowCaller(Caller),
    Stateless,
    SetLevel(LoggingLevel),
    End { reply: oneshot::Sender<()> },
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
    pub async fn direct(&self, order: DirectOrder) -> oneshot::Receiver<Result<CallToolResult, FrontendError>> {
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

    /// This session object serves one stateless request of its caller
    /// (told before, [`SessionHandle::know_caller`]): from now on its cells
    /// and direct calls count in the caller's stateless scope, and its
    /// cells share the caller's `--max-cells-per-session` slots in this
    /// process.
    pub async fn stateless(&self) {
        let _ = self.commands.send(Command::Stateless).await;
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

/// The approval subscription: its task ends once `stop` is cancelled.
struct Subscription {
    stop: CancellationToken,
    _task: tokio::task::JoinHandle<()>,
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
    routes: HashMap<String, mpsc::Sender<Pending>>,
    local: Option<Arc<dyn LocalAsker>>,
    client: Option<Peer<RoleServer>>,
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

/// A kept session's container as its session knows it.
#[derive(Debug, Clone, Default)]
struct Container {
    /// Where it lives, once a cell made it.
    at: Option<KeptContainer>,
    /// When its first cell started.
    born: Option<tokio::time::Instant>,
    /// When its last cell ended.
    last: Option<tokio::time::Instant>,
    /// Why the container that held the session's variables is gone, for the
    /// next cell to say.
    lost: Option<String>,
}

/// The kept side of a session: its container and its cells in order.
#[derive(Default)]
struct Kept {
    container: Container,
    /// The task of the kept cell running now.
    running: Option<tokio::task::Id>,
    /// Kept cells waiting for it, in order, each with its session slot.
    waiting: VecDeque<(CellOrder, CellReply, CellSlot)>,
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
                        }
                        if let Some((order, reply, slot)) = self.kept.waiting.pop_front() {
                            self.launch_cell(order, reply, slot);
                        }
                    }
                }
                changed = catalog.changed(), if watching => match changed {
                    Ok(()) => self.tell_client_tools_changed(),
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
            Command::KnowCaller(caller) => {
                if self.identity.is_none() && self.lease.is_none() {
                    self.identity = caller.identity;
                }
                if self.lease.is_none() {
                    self.lease = caller.lease;
                }
            }
            Command::Stateless => {
                if self.scope.is_none() && !self.ran {
                    let scope = subjects::stateless_scope(self.identity.as_ref().map(Identity::as_str));
                    self.cell_slots = self.shared.stateless_slots.of(&scope);
                    self.scope = Some(scope);
                }
            }
            Command::End { .. } => unreachable!("handled by the loop"),
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
        let container = self.kept.container.clone();
        let identity = self.identity.clone();
        let notifier = self.notices.notifier();
        let handle_keep = self.keep;
        let session = at.session.clone();
        let span = tracing::info_span!("cell", %session, cell = %cell_id, identity = %shown(identity.as_ref()));
        let task = self.cells.spawn(
            async move {
                tracing::info!(code_bytes = order.code.len(), "cell started");
                notifier.tell(Notice::cell_started(&order.cell_id)).await;
                let (result, container) = match (kept, &order.keep) {
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
                };
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
                code_mode_telemetry::frontend_cell(FrontendError::metric_result(&result));
                // The session may take another cell before this one's
                // result reaches the client.
                drop(slot);
                let _ = reply.send(result);
                // A cell may have changed the tools (a wrapped server's tool
                // did): the clients hear of it right after the cell.
                shared.catalog.refresh().await;
                container
            }
            .instrument(span),
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
    fn start_direct(&mut self, order: DirectOrder, reply: oneshot::Sender<Result<CallToolResult, FrontendError>>) {
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
            tool: order.tool,
            arguments: order.arguments,
        };
        self.routes.insert(order.call_id.clone(), order.route);
        let shared = self.shared.clone();
        let task = self.cells.spawn(async move {
            let _ = reply.send(Ok(crate::direct::call(&shared, &call).await));
            // A call may have changed the tools: the clients hear of it now.
            shared.catalog.refresh().await;
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

    /// Subscribe to the session's approval subject, once.
    async fn listen(&mut self) -> Result<(), FrontendError> {
        if self.subscription.is_some() {
            return Ok(());
        }
        // Session ids are UUIDs: always one subject token.
        let Some(subject) = subjects::approval(&self.id) else {
            return Err(FrontendError::Transport(format!("session id {:?} cannot name a subject", self.id)));
        };
        let stop = CancellationToken::new();
        let routes = self.route_requests.clone();
        let task = self
            .shared
            .bus
            .serve(&subject, &self.id, stop.clone(), move |request: ApprovalRequest| {
                let routes = routes.clone();
                async move { Ok(approve(&routes, request).await) }
            })
            .await?;
        self.subscription = Some(Subscription { stop, _task: task });
        Ok(())
    }

    /// Tell the client of `notice` (if its level asks for it) from a task
    /// of the session's own, so the actor never waits on the client.
    fn tell(&mut self, notice: Notice) {
        let notifier = self.notices.notifier();
        self.side.spawn(async move { notifier.tell(notice).await });
    }

    fn tell_client_tools_changed(&mut self) {
        self.tell(Notice::tools_changed());
        let Some(client) = self.client.clone() else { return };
        self.side.spawn(async move {
            if let Err(e) = client.notify_tool_list_changed().await {
                tracing::warn!(error = %e, "could not tell the client that the tool list changed");
            }
        });
    }

    /// Stop everything the session owns: its cells, its kept container
    /// (the runner holding it is told), its approval subscription; tell the
    /// bridge if a cell ran.
    async fn end(&mut self) {
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

/// Tell the runner holding a kept container that its session ended (it
/// stops a cell still running there and removes the container). A runner
/// that cannot be told removes it after the session's idle time.
async fn end_kept(shared: &Shared, session: &str, at: KeptContainer) {
    let Some(subject) = subjects::runner(&at.runner) else { return };
    let end = KeptRequest::End(KeptEnd { session: session.to_string(), key: at.key });
    match shared.bus.call::<_, KeptReply>(&subject, &end, SESSION_END_TIMEOUT + CELL_MARGIN).await {
        Ok(reply) => tracing::info!(%session, ?reply, "client session ended; its kept container was removed"),
        Err(e) => {
            tracing::info!(%session, error = %e, "client session ended, but the runner holding its kept container could not be told")
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

/// Route one approval question and wait for its answer, at most the
/// question's timeout. Runs in the subscription's handler, never in the
/// actor.
async fn approve(routes: &mpsc::Sender<RouteRequest>, request: ApprovalRequest) -> ApprovalReply {
    let timeout = Duration::from_millis(request.timeout_ms);
    let (reply, route) = oneshot::channel();
    let asked = RouteRequest { cell_id: request.cell_id.clone(), reply };
    let route = match routes.send(asked).await {
        Ok(()) => route.await.unwrap_or(Route::Nobody),
        Err(_) => return ApprovalReply::Unavailable { reason: "the client session has ended".into() },
    };
    match route {
        Route::Cell(cell) => {
            let (answer, wait) = oneshot::channel();
            let asked = async {
                if cell.send(Pending { request, answer }).await.is_err() {
                    return ApprovalReply::Unavailable { reason: "the cell has ended".into() };
                }
                wait.await.unwrap_or_else(|_| ApprovalReply::Unavailable {
                    reason: "the run_python request ended before the person answered".into(),
                })
            };
            tokio::time::timeout(timeout, asked).await.unwrap_or(ApprovalReply::TimedOut)
        }
        Route::Local(local) => {
            tokio::time::timeout(timeout, local.ask(request)).await.unwrap_or(ApprovalReply::TimedOut)
        }
        Route::Nobody => ApprovalReply::Unavailable {
            reason: "the cell does not run on an MCP request of this session, so there is nobody to ask".into(),
        },
    }
}

/// Where a session's cells and direct calls count (`session`: the client
/// session, or a stateless request's identity scope) and who asks about
/// their approvals (`asker`, when not `session`).
#[derive(Debug, Clone)]
struct At {
    session: String,
    asker: Option<String>,
}

/// Run one cell: wait for one of the process's cell slots, refresh the
/// catalog, send the cell to a sandbox-runner.
async fn run_cell(
    shared: &Shared,
    at: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
) -> Result<CellReport, FrontendError> {
    let config = &shared.config;
    if order.code.len() > config.max_code {
        return Err(FrontendError::CodeTooLarge { size: order.code.len(), max: config.max_code });
    }
    let _slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let cell = cell_message(shared, at, identity, order, &view);
    Ok(send_fresh(shared, &cell).await.map_err(|(e, _)| e)?.report)
}

/// Run one cell of a stateless client's handle: in the kept container the
/// handle names (`handle`), or in a new kept container, whose handle the
/// result then carries. A container that is gone, or another identity's,
/// fails the cell saying so ([`HandleError`]): never a fresh container in
/// its place.
async fn run_handle_cell(
    shared: &Shared,
    at: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
    keep: KeepConfig,
    handle: Option<KeptContainer>,
) -> Result<Ran, FrontendError> {
    let config = &shared.config;
    if order.code.len() > config.max_code {
        return Err(FrontendError::CodeTooLarge { size: order.code.len(), max: config.max_code });
    }
    let _slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let mut cell = cell_message(shared, at, identity, order, &view);
    let settings = Keep {
        key: None,
        idle_ms: keep.idle.as_millis() as u64,
        max_ms: keep.max.as_millis() as u64,
        most: Some(keep.most_handles),
    };
    let ran = match handle {
        None => {
            cell.keep = Some(settings);
            send_fresh(shared, &cell).await.map_err(|(e, _)| e)?
        }
        Some(container) => {
            cell.keep = Some(Keep { key: Some(container.key.clone()), ..settings });
            match send_to_runner(shared, &container, &cell).await {
                Ok(ran) => ran,
                Err(Next::Lost(lost)) => {
                    tracing::info!(cell = %cell.cell_id, ?lost, "a session handle's container cannot be used");
                    return Err(lost.handle_error().into());
                }
                Err(Next::Fail(e, _)) => return Err(e),
            }
        }
    };
    Ok(Ran { report: ran.report, kept: ran.kept })
}

/// Run one cell of a kept session: in its container when it has one, else
/// (or when that container is gone) in a new one, whose output then starts
/// by saying that earlier variables are gone. Returns the report and what
/// became of the container.
async fn run_kept_cell(
    shared: &Shared,
    at_session: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
    keep: KeepConfig,
    mut container: Container,
) -> (Result<CellReport, FrontendError>, Container) {
    let config = &shared.config;
    if order.code.len() > config.max_code {
        return (Err(FrontendError::CodeTooLarge { size: order.code.len(), max: config.max_code }), container);
    }
    let session = at_session.session.as_str();
    let _slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let mut cell = cell_message(shared, at_session, identity, order, &view);
    let settings =
        Keep { key: None, idle_ms: keep.idle.as_millis() as u64, max_ms: keep.max.as_millis() as u64, most: None };
    let started = tokio::time::Instant::now();
    if let Some(at) = container.at.take() {
        cell.keep = Some(Keep { key: Some(at.key.clone()), ..settings.clone() });
        match send_to_runner(shared, &at, &cell).await {
            // Earlier variables may be gone though the container is known:
            // its first cell's report was lost (below).
            Ok(ran) => {
                let lost = container.lost.take();
                return finish_kept(ran, container, lost);
            }
            Err(Next::Lost(lost)) => {
                let reason = match lost {
                    Lost::Unknown | Lost::Expired(_) | Lost::Foreign => why_removed(&container, keep),
                    Lost::RunnerGone => GONE_RUNNER.to_string(),
                    Lost::NotHeld => "its sandbox-runner no longer holds it".to_string(),
                };
                tracing::info!(%session, %reason, "the kept session's container is gone: starting a fresh one");
                container.lost = Some(reason);
            }
            Err(Next::Fail(e, lost)) => {
                // The container may live on at its runner: keep pointing
                // there unless the runner itself was lost.
                if lost.is_none() {
                    container.at = Some(at);
                }
                container.lost = lost.or(container.lost);
                return (Err(e), container);
            }
        }
    }
    let lost = container.lost.take();
    cell.keep = Some(settings);
    let ran = match send_fresh(shared, &cell).await {
        Ok(ran) => ran,
        Err((e, kept)) => {
            // A lost report of the container's first cell: its runner's
            // lease named the container, which lives on there, so the next
            // cell runs in it rather than leave it until `--session-idle`.
            if let Some(at) = kept {
                tracing::info!(%session, runner = %at.runner, "the kept container of a cell whose report was lost lives on");
                container.at = Some(at);
                container.born = Some(started);
                container.last = Some(tokio::time::Instant::now());
            }
            container.lost = lost;
            return (Err(e), container);
        }
    };
    container.born = Some(started);
    finish_kept(ran, container, lost)
}

/// Why a runner no longer holds a kept container, as far as the session's
/// own clocks tell.
fn why_removed(container: &Container, keep: KeepConfig) -> String {
    let now = tokio::time::Instant::now();
    if container.last.is_some_and(|last| now.duration_since(last) >= keep.idle) {
        format!("it was removed after {} s without a run (--session-idle)", keep.idle.as_secs())
    } else if container.born.is_some_and(|born| now.duration_since(born) >= keep.max) {
        format!("it reached the session's longest life, {} s (--session-max)", keep.max.as_secs())
    } else {
        "its sandbox-runner no longer holds it".into()
    }
}

/// What to do when a kept cell could not run in its container.
enum Next {
    /// The container is not there: a session starts a fresh one, saying
    /// why the old one is gone; a handle's cell fails.
    Lost(Lost),
    /// Fail the cell (and, with a reason, forget the container).
    Fail(FrontendError, Option<String>),
}

/// Why a kept container could not be reached, as its runner told.
#[derive(Debug)]
enum Lost {
    /// The runner holds nothing under the key, and knows of nothing.
    Unknown,
    /// The runner removed it a while ago, for this reason.
    Expired(String),
    /// The key names another session's container.
    Foreign,
    /// Nobody serves the runner's subject: it stopped or restarted.
    RunnerGone,
    /// The runner answered that it holds no such container.
    NotHeld,
}

/// The reason of [`Lost::RunnerGone`].
const GONE_RUNNER: &str = "its sandbox-runner stopped or restarted";

impl Lost {
    /// What a stateless client is told about its handle.
    fn handle_error(self) -> HandleError {
        match self {
            Lost::Unknown => HandleError::Unknown,
            Lost::Expired(why) => HandleError::Ended { why },
            Lost::Foreign => HandleError::Foreign,
            Lost::RunnerGone => HandleError::Ended { why: GONE_RUNNER.into() },
            Lost::NotHeld => HandleError::Ended { why: "its sandbox-runner no longer holds it".into() },
        }
    }
}

/// The error of a cell whose report will not come, as its lease told.
fn gone_error(cell: &str, gone: Gone) -> FrontendError {
    match gone {
        Gone::Silent(silent) => {
            tracing::warn!(%cell, ?silent, "the sandbox-runner running the cell stopped answering");
            FrontendError::RunnerSilent { silent }
        }
        Gone::ReportLost { how: ended, .. } => {
            tracing::warn!(%cell, %ended, "the sandbox-runner finished the cell but its report never came");
            FrontendError::ReportLost { ended }
        }
    }
}

/// Send a kept session's cell to the runner holding its container.
async fn send_to_runner(shared: &Shared, at: &KeptContainer, cell: &RunCell) -> Result<CellRan, Next> {
    let Some(subject) = subjects::runner(&at.runner) else { return Err(Next::Lost(Lost::RunnerGone)) };
    let wait = shared.config.deadline + CELL_MARGIN;
    // The runner holds the cell's lease while it runs, as for a fresh cell:
    // its death is seen within seconds, not at the deadline.
    let request = KeptRequest::Run(cell.clone());
    let call = shared.bus.call::<_, KeptReply>(&subject, &request, wait);
    let answer = match code_mode_core::lease::watched(&shared.bus, &cell.cell_id, call).await {
        Ok(answer) => answer,
        // Only the report was lost: the container lives on at its runner
        // (or, stopped, was removed: the next cell learns it from there).
        Err(gone @ Gone::ReportLost { .. }) => return Err(Next::Fail(gone_error(&cell.cell_id, gone), None)),
        Err(gone @ Gone::Silent(_)) => {
            return Err(Next::Fail(
                gone_error(&cell.cell_id, gone),
                Some("its sandbox-runner was lost during an earlier run".into()),
            ));
        }
    };
    match answer {
        Ok(KeptReply::Ran(ran)) => Ok(ran),
        Ok(KeptReply::Ended { .. }) => Err(Next::Lost(Lost::NotHeld)),
        Err(BusError::Remote { subject, error }) => match error.kind {
            ErrorKind::KeptLost => Err(Next::Lost(Lost::Unknown)),
            ErrorKind::KeptExpired => {
                // The runner's message ends with why.
                let why = error.message.split_once(": ").map_or(error.message.as_str(), |(_, why)| why);
                Err(Next::Lost(Lost::Expired(why.chars().take(200).collect())))
            }
            ErrorKind::KeptForeign => Err(Next::Lost(Lost::Foreign)),
            ErrorKind::KeptBusy => Err(Next::Fail(HandleError::Busy.into(), None)),
            _ => Err(Next::Fail(BusError::Remote { subject, error }.into(), None)),
        },
        Err(BusError::NoResponders { .. }) => Err(Next::Lost(Lost::RunnerGone)),
        Err(BusError::Timeout { .. } | BusError::Dropped { .. }) => {
            tracing::warn!(cell = %cell.cell_id, "the sandbox-runner holding the kept container was lost");
            Err(Next::Fail(
                FrontendError::RunnerLost { waited: wait, margin: CELL_MARGIN },
                Some("its sandbox-runner was lost during an earlier run".into()),
            ))
        }
        Err(e) => Err(Next::Fail(e.into(), None)),
    }
}

/// The report of a kept cell (its output led by `lost`, when the session's
/// earlier variables are gone) and what became of the container.
fn finish_kept(
    ran: CellRan,
    mut container: Container,
    lost: Option<String>,
) -> (Result<CellReport, FrontendError>, Container) {
    let mut report = ran.report;
    if let Some(reason) = lost {
        report.stdout = format!("{}\n{}", lost_line(&reason), report.stdout);
    }
    container.last = Some(tokio::time::Instant::now());
    container.lost = None;
    container.at = ran.kept;
    if container.at.is_none() {
        // The runner removed the container at the end of this cell.
        container.born = None;
        container.lost = Some(if report.stopped {
            "the previous run was stopped, which removed it".into()
        } else {
            "it reached the session's longest life (--session-max)".into()
        });
    }
    (Ok(report), container)
}

/// The line that leads the output of a kept session's cell whose earlier
/// variables are gone.
fn lost_line(reason: &str) -> String {
    let why = if reason.is_empty() { String::new() } else { format!(" ({reason})") };
    format!(
        "code-mode: the session's sandbox is gone{why}: this run starts in a fresh one, and the variables, imports \
         and files of earlier runs are gone."
    )
}

/// The [`RunCell`] of `order` over the catalog of `view`.
fn cell_message(shared: &Shared, at: &At, identity: Option<&Identity>, order: &CellOrder, view: &View) -> RunCell {
    let config = &shared.config;
    let max_calls = match order.options.max_calls {
        Some(budget) => budget.min(view.catalog.max_calls),
        None => view.catalog.max_calls,
    };
    RunCell {
        cell_id: order.cell_id.clone(),
        session: at.session.clone(),
        asker: at.asker.clone(),
        identity: identity.map(|i| i.to_string()),
        code: order.code.clone(),
        tools: view.catalog.tools.iter().map(ToolStub::from).collect(),
        withheld: view.catalog.withheld.clone(),
        limits: CellLimits {
            deadline_ms: config.deadline.as_millis() as u64,
            max_calls,
            call_timeout_ms: view.catalog.call_timeout_ms,
            approval_timeout_ms: view.catalog.approval_timeout_ms,
            max_output: config.max_output,
            stop_output: config.stop_output,
            max_line: config.max_line,
        },
        keep: None,
    }
}

/// Send a cell to the runners' queue group. A runner with every slot taken
/// declines at once; the queue group then offers the cell to the next.
/// Gives up after `capacity_wait`.
///
/// An error comes with the kept container the cell ran in when its report
/// was lost but the runner's lease named one (a kept session's first cell).
async fn send_fresh(shared: &Shared, cell: &RunCell) -> Result<CellRan, (FrontendError, Option<KeptContainer>)> {
    let config = &shared.config;
    let started = tokio::time::Instant::now();
    loop {
        let wait = config.deadline + CELL_MARGIN;
        let bus = &shared.bus;
        // The runner that takes the cell holds its lease until it replies
        // (and says how the cell ended a while after); a runner that dies
        // stops answering it.
        let answer =
            match code_mode_core::lease::watched(bus, &cell.cell_id, bus.call(subjects::CELL_RUN, cell, wait)).await {
                Ok(answer) => answer,
                Err(gone) => {
                    let kept = match &gone {
                        Gone::ReportLost { kept, .. } => kept.clone(),
                        Gone::Silent(_) => None,
                    };
                    return Err((gone_error(&cell.cell_id, gone), kept));
                }
            };
        let last = match answer {
            Err(BusError::Remote { error, .. }) if error.kind == ErrorKind::NoCapacity => None,
            Err(e @ BusError::NoResponders { .. }) => Some(e),
            // A runner took the cell and never answered (or dropped it).
            Err(BusError::Timeout { .. } | BusError::Dropped { .. }) => {
                tracing::warn!(cell = %cell.cell_id, "the sandbox-runner running the cell was lost");
                return Err((FrontendError::RunnerLost { waited: wait, margin: CELL_MARGIN }, None));
            }
            other => return other.map_err(|e| (e.into(), None)),
        };
        if started.elapsed() >= config.capacity_wait {
            let error = match last {
                // Nobody declined: there is no runner at all.
                Some(no_runner) => no_runner.into(),
                None => FrontendError::NoCapacity { waited: started.elapsed() },
            };
            return Err((error, None));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
