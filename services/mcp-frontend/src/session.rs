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
//! Approval questions from the bridge arrive on the session's subject; the
//! subscription's handler asks the actor, on a channel of its own, where the
//! question goes (the `run_python` request running the cell, the local
//! asker, or nobody) and waits for the answer itself, so the actor never
//! waits on a person. That channel does not keep the actor alive: a
//! session whose handles are gone still routes the questions of its
//! running cells (a stateless client answers them on a later request).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use code_mode_core::bus::BusError;
use code_mode_proto::{ApprovalReply, ApprovalRequest, CellLimits, CellReport, ErrorKind, RunCell, ToolStub, subjects};
use rmcp::RoleServer;
use rmcp::service::Peer;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::approval::{LocalAsker, Pending};
use crate::catalog::View;
use crate::{CELL_MARGIN, CellOptions, FrontendError, RETRY_PAUSE, Shared};

/// Commands that may wait at a session actor.
const COMMANDS: usize = 32;
/// Route requests (approval questions) that may wait at a session actor.
const ROUTE_REQUESTS: usize = 64;
/// Approval questions of one cell that may wait for its request to take
/// them (one per concurrent call at most).
pub(crate) const QUESTIONS_PER_CELL: usize = 64;
/// How long telling the bridge that a session ended may take.
const SESSION_END_TIMEOUT: Duration = Duration::from_secs(2);

/// A cell started for a request: its report to come, and its approval
/// questions as they arrive.
#[derive(Debug)]
pub(crate) struct CellRun {
    /// The report (or why there is none).
    pub result: oneshot::Receiver<Result<CellReport, FrontendError>>,
    /// The questions the bridge asks about the cell's calls.
    pub approvals: mpsc::Receiver<Pending>,
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

enum Command {
    Listen { reply: oneshot::Sender<Result<(), FrontendError>> },
    Run { order: CellOrder, reply: oneshot::Sender<Result<CellReport, FrontendError>> },
    AskLocally(Arc<dyn LocalAsker>),
    KnowClient(Peer<RoleServer>),
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
}

impl SessionHandle {
    /// Start the actor of a new session with its own id.
    pub fn start(shared: Arc<Shared>) -> SessionHandle {
        let id = uuid::Uuid::new_v4().to_string();
        let (commands, inbox) = mpsc::channel(COMMANDS);
        let (route_requests, routes_inbox) = mpsc::channel(ROUTE_REQUESTS);
        let actor = SessionActor {
            id: id.clone(),
            shared,
            routes: HashMap::new(),
            local: None,
            client: None,
            ran: false,
            subscription: None,
            route_requests,
            cells: JoinSet::new(),
            cell_ids: HashMap::new(),
            side: JoinSet::new(),
        };
        tokio::spawn(actor.run(inbox, routes_inbox));
        SessionHandle { commands, id: id.into(), told_client: Arc::new(AtomicBool::new(false)) }
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
    pub async fn run(&self, order: CellOrder) -> oneshot::Receiver<Result<CellReport, FrontendError>> {
        let (reply, result) = oneshot::channel();
        if let Err(mpsc::error::SendError(Command::Run { reply, .. })) =
            self.commands.send(Command::Run { order, reply }).await
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
    /// Where each running cell's questions go, by cell id.
    routes: HashMap<String, mpsc::Sender<Pending>>,
    local: Option<Arc<dyn LocalAsker>>,
    client: Option<Peer<RoleServer>>,
    /// A cell ran, so the bridge may hold state for the session.
    ran: bool,
    subscription: Option<Subscription>,
    /// Handed to the subscription's handler.
    route_requests: mpsc::Sender<RouteRequest>,
    /// The running cells.
    cells: JoinSet<()>,
    /// Cell id of each cell task.
    cell_ids: HashMap<tokio::task::Id, String>,
    /// Notifications to the client in flight.
    side: JoinSet<()>,
}

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
                    let id = match ended {
                        Ok((id, ())) => id,
                        Err(e) => {
                            tracing::error!(session = %self.id, error = %e, "a cell's task failed");
                            e.id()
                        }
                    };
                    if let Some(cell_id) = self.cell_ids.remove(&id) {
                        self.routes.remove(&cell_id);
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
            Command::AskLocally(asker) => {
                self.local.get_or_insert(asker);
            }
            Command::KnowClient(peer) => {
                self.client.get_or_insert(peer);
            }
            Command::End { .. } => unreachable!("handled by the loop"),
        }
    }

    fn start_cell(&mut self, order: CellOrder, reply: oneshot::Sender<Result<CellReport, FrontendError>>) {
        self.ran = true;
        let cell_id = order.cell_id.clone();
        if let Some(route) = order.route.clone() {
            self.routes.insert(cell_id.clone(), route);
        }
        let (shared, session) = (self.shared.clone(), self.id.clone());
        let task = self.cells.spawn(async move {
            let result = run_cell(&shared, &session, &order).await;
            code_mode_telemetry::frontend_cell(FrontendError::metric_result(&result));
            let _ = reply.send(result);
            // A cell may have changed the tools (a wrapped server's tool
            // did): the clients hear of it right after the cell.
            shared.catalog.refresh().await;
        });
        self.cell_ids.insert(task.id(), cell_id);
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

    fn tell_client_tools_changed(&mut self) {
        let Some(client) = self.client.clone() else { return };
        self.side.spawn(async move {
            if let Err(e) = client.notify_tool_list_changed().await {
                tracing::warn!(error = %e, "could not tell the client that the tool list changed");
            }
        });
    }

    /// Stop everything the session owns; tell the bridge if a cell ran.
    async fn end(&mut self) {
        self.cells.abort_all();
        while self.cells.join_next().await.is_some() {}
        self.side.abort_all();
        if let Some(subscription) = self.subscription.take() {
            subscription.stop.cancel();
        }
        if std::mem::take(&mut self.ran) {
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

/// Run one cell: wait for one of the process's cell slots, refresh the
/// catalog, send the cell to a sandbox-runner.
async fn run_cell(shared: &Shared, session: &str, order: &CellOrder) -> Result<CellReport, FrontendError> {
    let config = &shared.config;
    if order.code.len() > config.max_code {
        return Err(FrontendError::CodeTooLarge { size: order.code.len(), max: config.max_code });
    }
    let _slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let cell = cell_message(shared, session, order, &view);
    send_fresh(shared, &cell).await
}

/// The [`RunCell`] of `order` over the catalog of `view`.
fn cell_message(shared: &Shared, session: &str, order: &CellOrder, view: &View) -> RunCell {
    let config = &shared.config;
    let max_calls = match order.options.max_calls {
        Some(budget) => budget.min(view.catalog.max_calls),
        None => view.catalog.max_calls,
    };
    RunCell {
        cell_id: order.cell_id.clone(),
        session: session.to_string(),
        identity: None,
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
    }
}

/// Send a cell to the runners' queue group. A runner with every slot taken
/// declines at once; the queue group then offers the cell to the next.
/// Gives up after `capacity_wait`.
async fn send_fresh(shared: &Shared, cell: &RunCell) -> Result<CellReport, FrontendError> {
    let config = &shared.config;
    let started = tokio::time::Instant::now();
    loop {
        let wait = config.deadline + CELL_MARGIN;
        let last = match shared.bus.call(subjects::CELL_RUN, cell, wait).await {
            Err(BusError::Remote { error, .. }) if error.kind == ErrorKind::NoCapacity => None,
            Err(e @ BusError::NoResponders { .. }) => Some(e),
            // A runner took the cell and never answered (or dropped it).
            Err(BusError::Timeout { .. } | BusError::Dropped { .. }) => {
                tracing::warn!(cell = %cell.cell_id, "the sandbox-runner running the cell was lost");
                return Err(FrontendError::RunnerLost { waited: wait, margin: CELL_MARGIN });
            }
            other => return Ok(other?),
        };
        if started.elapsed() >= config.capacity_wait {
            return Err(match last {
                // Nobody declined: there is no runner at all.
                Some(no_runner) => no_runner.into(),
                None => FrontendError::NoCapacity { waited: started.elapsed() },
            });
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
