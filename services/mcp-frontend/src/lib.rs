//! The MCP frontend: the server an MCP client sees, with one tool,
//! `run_python`.
//!
//! At start it asks the bridge for the tool catalog and builds the tool's
//! description ([`description`]). Each `run_python` call is checked (code
//! size), waits for one of a bounded number of slots, and is sent to a
//! sandbox-runner as a [`RunCell`]; the [`CellReport`] comes back to the
//! client as structured content (with an output schema) and as the same JSON
//! in a text block. Errors of code-mode itself come back as tool errors
//! saying what went wrong.
//!
//! The bridge's catalog can change while the frontend runs (a wrapped
//! server's tools changed). The bus only carries requests, so the frontend
//! asks: before and after each cell, and every [`CATALOG_POLL`] while it
//! serves, naming the fingerprint of the catalog it holds, so that an
//! unchanged catalog comes back as "unchanged" without its tools. When the
//! tools differ from the ones it holds, it swaps in the new
//! catalog and description (later cells and `tools/list` use them) and sends
//! the MCP client `notifications/tools/list_changed`.
//!
//! A [`FrontendFactory`] fetches the catalog once per process and makes one
//! [`Frontend`] per client session: the stdio client, or each MCP session
//! of the HTTP server ([`http`]).
//!
//! When a policy holds a tool call for approval, the bridge asks this
//! session on its own approval subject; the frontend routes the question to
//! the `run_python` request running the cell, which asks the client through
//! elicitation ([`approval`]).

pub mod approval;
pub mod description;
pub mod http;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use code_mode_core::bus::{Bus, BusError};
use code_mode_core::defaults;
use code_mode_proto::{
    ApprovalReply, ApprovalRequest, Catalog, CatalogRequest, CellLimits, CellReport, ErrorKind, RunCell, ToolStub,
    subjects,
};
use code_mode_telemetry::FrontendCellResult;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, Implementation, InputRequest,
    InputRequests, InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, ServiceError};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::approval::{Asking, Pending};
use crate::description::RunFacts;

/// The one tool's name.
pub const TOOL_NAME: &str = "run_python";

/// Errors of the frontend layer.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The code is over the size limit.
    #[error("the code is {size} bytes, over the {max} byte limit: send a shorter program")]
    CodeTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A service could not be reached or failed.
    #[error("{0}")]
    Bus(#[from] BusError),
    /// The sandbox-runner that took the cell never answered: it was killed,
    /// crashed or lost its connection while running it.
    #[error(
        "the sandbox-runner running this cell was lost: no answer within {waited:?} (the run's deadline plus \
         {margin:?}); it crashed or lost its connection, so the cell's outcome is unknown: run it again"
    )]
    RunnerLost {
        /// How long the frontend waited.
        waited: Duration,
        /// The margin over the deadline.
        margin: Duration,
    },
    /// The sandbox-runner that took the cell stopped answering its lease
    /// (`code_mode_core::lease`): killed, crashed or cut off from NATS.
    #[error(
        "the sandbox-runner running this cell was lost: it stopped answering for {silent:.1?} (killed, crashed \
         or cut off from NATS), so the cell's outcome is unknown and calls it made may have happened: run it \
         again if that is safe"
    )]
    RunnerSilent {
        /// How long it had not answered.
        silent: Duration,
    },
    /// No sandbox-runner had a free slot in time.
    #[error("no sandbox-runner had room for the cell within {waited:?}: try again later")]
    NoCapacity {
        /// How long the cell waited.
        waited: Duration,
    },
    /// The MCP transport failed.
    #[error("MCP transport: {0}")]
    Transport(String),
    /// The MCP HTTP server could not listen.
    #[error("cannot serve MCP over HTTP on {addr}: {reason}")]
    Http {
        /// The address asked for.
        addr: String,
        /// Why.
        reason: std::io::Error,
    },
}

impl FrontendError {
    /// How a cell's request ended, for `codemode_frontend_cells_total`.
    pub fn metric_result<T>(result: &Result<T, FrontendError>) -> FrontendCellResult {
        match result {
            Ok(_) => FrontendCellResult::Reported,
            Err(FrontendError::CodeTooLarge { .. }) => FrontendCellResult::CodeTooLarge,
            Err(FrontendError::NoCapacity { .. }) => FrontendCellResult::NoCapacity,
            Err(FrontendError::RunnerLost { .. } | FrontendError::RunnerSilent { .. }) => {
                FrontendCellResult::RunnerLost
            }
            Err(FrontendError::Bus(BusError::NoResponders { .. })) => FrontendCellResult::NoRunner,
            Err(_) => FrontendCellResult::Failed,
        }
    }
}

/// Settings of the frontend.
#[derive(Debug, Clone, Copy)]
pub struct FrontendConfig {
    /// Largest code accepted, in bytes.
    pub max_code: usize,
    /// `run_python` calls that run at once; more wait.
    pub max_concurrent_cells: usize,
    /// Deadline of one run.
    pub deadline: Duration,
    /// Bytes of output kept.
    pub max_output: u32,
    /// Bytes of output after which a run is stopped.
    pub stop_output: u32,
    /// Longest protocol line accepted from a container.
    pub max_line: u32,
    /// Characters of the tool description.
    pub description_budget: usize,
    /// How long a cell waits for a sandbox-runner with a free slot.
    pub capacity_wait: Duration,
    /// How long to wait for the bridge's catalog at start (services may start
    /// in any order).
    pub catalog_wait: Duration,
}

impl Default for FrontendConfig {
    fn default() -> Self {
        Self {
            max_code: defaults::MAX_CODE,
            max_concurrent_cells: defaults::MAX_CONCURRENT_CELLS,
            deadline: defaults::DEADLINE,
            max_output: defaults::MAX_OUTPUT,
            stop_output: defaults::STOP_OUTPUT,
            max_line: defaults::MAX_LINE,
            description_budget: defaults::DESCRIPTION_BUDGET,
            capacity_wait: defaults::CAPACITY_WAIT,
            catalog_wait: CATALOG_WAIT,
        }
    }
}

/// How often a serving frontend asks the bridge whether the catalog changed
/// (it also asks before and after each cell).
pub const CATALOG_POLL: Duration = Duration::from_secs(3);

/// How long to wait for the bridge's catalog at start, by default.
pub const CATALOG_WAIT: Duration = Duration::from_secs(30);
/// How long one catalog request may take.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a catalog refresh may take; the current catalog stays on a
/// timeout (kept short: it runs before and after each cell).
const REFRESH_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between two tries of a request that found no service free.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Margin over the deadline for a cell's reply. The runner counts the
/// deadline from the cell's arrival (container start included), so this
/// covers removing the container and the hops. A runner that has not
/// answered by then is taken as lost: a killed runner costs the client the
/// deadline plus this, not a hang.
pub const CELL_MARGIN: Duration = Duration::from_secs(5);

/// The frontend of one client session: a cheap handle.
#[derive(Clone, Debug)]
pub struct Frontend {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    session: String,
    /// The catalog and description offered now; replaced whole.
    view: std::sync::RwLock<Arc<View>>,
    /// The MCP client, once known, to tell it when the tools changed.
    client: std::sync::OnceLock<Peer<RoleServer>>,
    /// Cells running on a `run_python` request, by cell id: where the
    /// approvals the bridge asks for reach that request.
    cells: Mutex<HashMap<String, mpsc::UnboundedSender<Pending>>>,
    /// Set once this session answers on its approval subject.
    approvals: tokio::sync::OnceCell<()>,
    /// Who answers approvals for cells that run outside an MCP request.
    local: std::sync::OnceLock<Arc<dyn approval::LocalAsker>>,
    /// The session ran a cell, so the bridge may hold state for it (told
    /// to forget it when the session ends).
    ran: std::sync::atomic::AtomicBool,
    /// Ends the approval subscription when the frontend is dropped.
    stop: CancellationToken,
}

/// What every client session of one frontend process shares.
#[derive(Debug)]
struct Shared {
    bus: Bus,
    config: FrontendConfig,
    /// The catalog a new session starts from; kept current by the sessions'
    /// refreshes (and, over HTTP, by a poll).
    view: std::sync::RwLock<Arc<View>>,
    /// `run_python` calls that run at once, across the process's sessions.
    slots: Semaphore,
    /// Cells whose request returned an input-required result, by its
    /// `requestState`, until the client calls again with the answers. Shared:
    /// over stateless HTTP the retried call reaches a new session object.
    parked: Mutex<HashMap<String, Parked>>,
}

/// Makes the [`Frontend`] of each client session of one process: fetches the
/// bridge's catalog once, then makes sessions without waiting (the MCP
/// HTTP transport asks for one per session, or per request from a stateless
/// client). Cheap to clone.
#[derive(Clone, Debug)]
pub struct FrontendFactory {
    shared: Arc<Shared>,
}

impl FrontendFactory {
    /// Fetch the catalog from the bridge (waiting up to the configured time
    /// for one to answer: services may start in any order).
    pub async fn connect(bus: Bus, config: FrontendConfig) -> Result<Self, FrontendError> {
        let request = CatalogRequest { session: uuid::Uuid::new_v4().to_string(), known: None };
        let give_up = tokio::time::Instant::now() + config.catalog_wait;
        let catalog: Catalog = loop {
            match bus.call(subjects::CATALOG_GET, &request, CATALOG_TIMEOUT).await {
                Ok(catalog) => break catalog,
                Err(e @ (BusError::NoResponders { .. } | BusError::Timeout { .. }))
                    if tokio::time::Instant::now() < give_up =>
                {
                    tracing::info!(error = %e, "waiting for a bridge");
                    tokio::time::sleep(RETRY_PAUSE * 5).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let shared = Shared {
            view: std::sync::RwLock::new(Arc::new(View::new(catalog, &config))),
            slots: Semaphore::new(config.max_concurrent_cells.max(1)),
            parked: Mutex::new(HashMap::new()),
            bus,
            config,
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// A new client session with its own id, offering the current catalog.
    /// It answers approvals once it runs its first cell (or after
    /// [`Frontend::listen_for_approvals`]).
    pub fn session(&self) -> Frontend {
        let view = self.shared.view.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let inner = Inner {
            shared: self.shared.clone(),
            session: uuid::Uuid::new_v4().to_string(),
            view: std::sync::RwLock::new(view),
            client: std::sync::OnceLock::new(),
            cells: Mutex::new(HashMap::new()),
            approvals: tokio::sync::OnceCell::new(),
            local: std::sync::OnceLock::new(),
            ran: std::sync::atomic::AtomicBool::new(false),
            stop: CancellationToken::new(),
        };
        Frontend { inner: Arc::new(inner) }
    }

    /// Refresh the catalog new sessions start from (a throwaway session
    /// asks the bridge).
    pub async fn refresh_catalog(&self) -> bool {
        self.session().refresh_catalog().await
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
        // The session is over (an HTTP session closed, a stateless request
        // answered): the bridge may forget it, in the background.
        if self.ran.swap(false, std::sync::atomic::Ordering::SeqCst)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (bus, session) = (self.shared.bus.clone(), self.session.clone());
            runtime.spawn(async move { tell_session_ended(&bus, session).await });
        }
    }
}

/// How long telling the bridge that a session ended may take.
const SESSION_END_TIMEOUT: Duration = Duration::from_secs(2);

/// Tell the bridge that `session` ended, so it forgets its state; a
/// failure is only logged (the state then stays, as it did before).
async fn tell_session_ended(bus: &Bus, session: String) {
    let end = code_mode_proto::SessionEnd { session: session.clone() };
    match bus.call::<_, code_mode_proto::SessionEnded>(subjects::SESSION_END, &end, SESSION_END_TIMEOUT).await {
        Ok(ended) => {
            tracing::info!(%session, removed = ended.removed, "client session ended; the bridge forgot its state")
        }
        Err(e) => tracing::info!(%session, error = %e, "client session ended, but the bridge could not be told"),
    }
}

/// A cell running in its own task, and the approvals it waits for.
#[derive(Debug)]
struct CellRun {
    result: tokio::task::JoinHandle<Result<CellReport, FrontendError>>,
    approvals: mpsc::UnboundedReceiver<Pending>,
}

/// A cell whose request asked the client for answers, and the questions.
#[derive(Debug)]
struct Parked {
    run: CellRun,
    pending: Vec<Pending>,
}

/// How long a cell's request waits after one approval for others from the
/// same moment (an `asyncio.gather`), so that they go to the client in one
/// round.
const GATHER_PAUSE: Duration = Duration::from_millis(50);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A catalog and the `run_python` description made from it.
#[derive(Debug)]
struct View {
    catalog: Catalog,
    description: String,
}

impl View {
    fn new(catalog: Catalog, config: &FrontendConfig) -> Self {
        let facts = RunFacts {
            deadline_secs: config.deadline.as_secs(),
            max_calls: catalog.max_calls,
            call_timeout_secs: catalog.call_timeout_ms / 1000,
            max_output: config.max_output,
        };
        let description = description::description(&facts, &catalog.tools, config.description_budget);
        Self { catalog, description }
    }
}

impl Frontend {
    /// Fetch the catalog from the bridge and prepare the tool: one client
    /// session, answering approvals from the start.
    pub async fn connect(bus: Bus, config: FrontendConfig) -> Result<Self, FrontendError> {
        let frontend = FrontendFactory::connect(bus, config).await?.session();
        frontend.listen_for_approvals().await?;
        Ok(frontend)
    }

    /// Start answering the bridge's approval requests for this session, if
    /// not already.
    pub async fn listen_for_approvals(&self) -> Result<(), FrontendError> {
        self.inner.approvals.get_or_try_init(|| self.serve_approvals()).await?;
        Ok(())
    }

    /// Answer the bridge's approval requests for this session (its own
    /// subject; the handler holds the frontend weakly, so dropping the
    /// frontend ends the subscription).
    async fn serve_approvals(&self) -> Result<(), FrontendError> {
        let bus = &self.inner.shared.bus;
        // Session ids are UUIDs: always one subject token.
        let Some(subject) = subjects::approval(&self.inner.session) else {
            return Err(FrontendError::Transport(format!("session id {:?} cannot name a subject", self.inner.session)));
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        bus.serve(&subject, &self.inner.session, stop, move |request: ApprovalRequest| {
            let weak = weak.clone();
            async move {
                Ok(match weak.upgrade() {
                    Some(inner) => Frontend { inner }.approve(request).await,
                    None => ApprovalReply::Unavailable { reason: "the client session has ended".into() },
                })
            }
        })
        .await?;
        Ok(())
    }

    /// Route one approval request to the `run_python` request running its
    /// cell and wait for the answer, at most the request's timeout.
    async fn approve(&self, request: ApprovalRequest) -> ApprovalReply {
        let route = lock(&self.inner.cells).get(&request.cell_id).cloned();
        let timeout = Duration::from_millis(request.timeout_ms);
        let Some(route) = route else {
            if let Some(local) = self.inner.local.get() {
                return tokio::time::timeout(timeout, local.ask(request)).await.unwrap_or(ApprovalReply::TimedOut);
            }
            return ApprovalReply::Unavailable {
                reason: "the cell does not run on an MCP request of this session, so there is nobody to ask".into(),
            };
        };
        let (answer, wait) = oneshot::channel();
        if route.send(Pending { request, answer }).is_err() {
            return ApprovalReply::Unavailable { reason: "the cell has ended".into() };
        }
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => {
                ApprovalReply::Unavailable { reason: "the run_python request ended before the person answered".into() }
            }
            Err(_) => ApprovalReply::TimedOut,
        }
    }

    /// Ask `asker` about the approvals of cells this session runs outside an
    /// MCP request ([`Frontend::run_code`]); the first one set stays.
    pub fn ask_locally_with(&self, asker: Arc<dyn approval::LocalAsker>) {
        let _ = self.inner.local.set(asker);
    }

    /// Tell the bridge now that this session is over (if it ran a cell), so
    /// it forgets the session's state; a later drop sends nothing more.
    pub async fn end_session(&self) {
        if self.inner.ran.swap(false, std::sync::atomic::Ordering::SeqCst) {
            tell_session_ended(&self.inner.shared.bus, self.inner.session.clone()).await;
        }
    }

    /// Start a cell in its own task, with a route for its approvals.
    fn start_cell(&self, code: String) -> CellRun {
        let cell_id = uuid::Uuid::new_v4().to_string();
        let (route, approvals) = mpsc::unbounded_channel();
        lock(&self.inner.cells).insert(cell_id.clone(), route);
        let me = self.clone();
        let result = tokio::spawn(async move {
            let report = me.run_code_as(&cell_id, &code).await;
            lock(&me.inner.cells).remove(&cell_id);
            report
        });
        CellRun { result, approvals }
    }

    /// Wait for a cell's end while answering its approvals; an approval that
    /// needs the client's retried call parks the cell and returns the
    /// input-required result.
    async fn drive(&self, mut run: CellRun, context: &RequestContext<RoleServer>) -> CallToolResponse {
        let asking = asking(context);
        loop {
            tokio::select! {
                joined = &mut run.result => {
                    return match joined {
                        Ok(Ok(report)) => report_result(&report).into(),
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "run_python failed");
                            error_result(&format!("{TOOL_NAME}: {e}")).into()
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "the cell's task failed");
                            error_result(&format!("{TOOL_NAME}: the cell's task failed")).into()
                        }
                    };
                }
                Some(first) = run.approvals.recv() => match asking {
                    Asking::Unsupported => {
                        let reason = "the MCP client did not declare support for (form) elicitation".to_string();
                        let _ = first.answer.send(ApprovalReply::Unavailable { reason });
                    }
                    Asking::Request => {
                        let peer = context.peer.clone();
                        tokio::spawn(async move {
                            let answer = elicit(&peer, &first.request).await;
                            let _ = first.answer.send(answer);
                        });
                    }
                    Asking::InputRequired => {
                        let mut pending = vec![first];
                        tokio::time::sleep(GATHER_PAUSE).await;
                        while let Ok(more) = run.approvals.try_recv() {
                            pending.push(more);
                        }
                        return self.park(run, pending).into();
                    }
                },
            }
        }
    }

    /// Keep `run` until the client calls again with answers to `pending`
    /// (or the longest approval timeout passes); the result asks them.
    fn park(&self, run: CellRun, pending: Vec<Pending>) -> InputRequiredResult {
        let token = uuid::Uuid::new_v4().to_string();
        let mut questions = InputRequests::new();
        for (i, p) in pending.iter().enumerate() {
            let question = ElicitRequest::new(approval::question(&p.request));
            questions.insert(format!("approval-{i}"), InputRequest::Elicitation(question));
        }
        let longest = pending.iter().map(|p| p.request.timeout_ms).max().unwrap_or(0);
        tracing::info!(questions = pending.len(), "asking the client for approval (input required)");
        lock(&self.inner.shared.parked).insert(token.clone(), Parked { run, pending });
        let weak = Arc::downgrade(&self.inner.shared);
        let expired = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(longest) + approval::PARK_MARGIN).await;
            if let Some(shared) = weak.upgrade()
                && lock(&shared.parked).remove(&expired).is_some()
            {
                tracing::warn!("the client never called again with the approval answers: the cell's result is dropped");
            }
        });
        InputRequiredResult::new(Some(questions), Some(token))
    }

    /// The client's retried call: hand its answers to the parked cell's
    /// waiting calls and go on with the cell.
    async fn resume(
        &self,
        token: &str,
        answers: Option<&rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let Some(parked) = lock(&self.inner.shared.parked).remove(token) else {
            return error_result(&format!(
                "{TOOL_NAME}: no cell waits for answers under this requestState (answered already, or it waited too \
                 long and was dropped): run the code again"
            ))
            .into();
        };
        for (i, p) in parked.pending.into_iter().enumerate() {
            let answer = approval::answer_of_value(answers.and_then(|a| a.get(&format!("approval-{i}"))));
            let _ = p.answer.send(answer);
        }
        self.drive(parked.run, context).await
    }

    fn view(&self) -> Arc<View> {
        self.inner.view.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The `run_python` description.
    pub fn description(&self) -> String {
        self.view().description.clone()
    }

    /// The catalog this frontend offers now.
    pub fn catalog(&self) -> Catalog {
        self.view().catalog.clone()
    }

    /// Ask the bridge for its catalog; when its tools differ from the ones
    /// offered now, offer the new ones and tell the MCP client (if known)
    /// that the tool list changed. Returns whether the tools changed. A
    /// failed request keeps the current catalog (logged).
    pub async fn refresh_catalog(&self) -> bool {
        // Only a changed catalog comes back whole.
        let held = self.view().catalog.fingerprint.clone();
        let known = (!held.is_empty()).then_some(held);
        let request = CatalogRequest { session: self.inner.session.clone(), known };
        let catalog: Catalog = match self.inner.shared.bus.call(subjects::CATALOG_GET, &request, REFRESH_TIMEOUT).await
        {
            Ok(catalog) => catalog,
            Err(e) => {
                tracing::debug!(error = %e, "could not refresh the catalog: keeping the current one");
                return false;
            }
        };
        if catalog.unchanged {
            return false;
        }
        {
            let mut view = self.inner.view.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            let old = &view.catalog;
            // Bridge replicas count versions apart: compare what is offered.
            let same = old.tools == catalog.tools
                && old.max_calls == catalog.max_calls
                && old.call_timeout_ms == catalog.call_timeout_ms
                && old.approval_timeout_ms == catalog.approval_timeout_ms;
            if same {
                return false;
            }
            tracing::info!(version = catalog.version, tools = catalog.tools.len(), "the catalog changed");
            let fresh = Arc::new(View::new(catalog, &self.inner.shared.config));
            *view = fresh.clone();
            // Sessions started from now on offer it too.
            *self.inner.shared.view.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh;
        }
        if let Some(client) = self.inner.client.get()
            && let Err(e) = client.notify_tool_list_changed().await
        {
            tracing::warn!(error = %e, "could not tell the client that the tool list changed");
        }
        true
    }

    /// Remember the MCP client to notify (the first one seen).
    fn know_client(&self, peer: &Peer<RoleServer>) {
        if self.inner.client.get().is_none() {
            let _ = self.inner.client.set(peer.clone());
        }
    }

    /// The session id of this frontend.
    pub fn session(&self) -> &str {
        &self.inner.session
    }

    /// Run one cell of code and return its report. Nobody can be asked for
    /// approvals here: a call that needs one is refused (the MCP path,
    /// [`ServerHandler::call_tool`], asks the client).
    pub async fn run_code(&self, code: &str) -> Result<CellReport, FrontendError> {
        self.run_code_as(&uuid::Uuid::new_v4().to_string(), code).await
    }

    async fn run_code_as(&self, cell_id: &str, code: &str) -> Result<CellReport, FrontendError> {
        let result = self.run_code_counted(cell_id, code).await;
        code_mode_telemetry::frontend_cell(FrontendError::metric_result(&result));
        result
    }

    async fn run_code_counted(&self, cell_id: &str, code: &str) -> Result<CellReport, FrontendError> {
        let config = &self.inner.shared.config;
        self.inner.ran.store(true, std::sync::atomic::Ordering::SeqCst);
        if code.len() > config.max_code {
            return Err(FrontendError::CodeTooLarge { size: code.len(), max: config.max_code });
        }
        let _slot = self.inner.shared.slots.acquire().await.expect("the semaphore is never closed");
        self.refresh_catalog().await;
        let report = self.run_cell(cell_id, code).await;
        // A cell may have changed the tools (a wrapped server's tool did):
        // the client hears of it right after the cell.
        self.refresh_catalog().await;
        report
    }

    async fn run_cell(&self, cell_id: &str, code: &str) -> Result<CellReport, FrontendError> {
        let config = &self.inner.shared.config;
        let view = self.view();
        let cell = RunCell {
            cell_id: cell_id.to_string(),
            session: self.inner.session.clone(),
            identity: None,
            code: code.to_string(),
            tools: view.catalog.tools.iter().map(ToolStub::from).collect(),
            withheld: view.catalog.withheld.clone(),
            limits: CellLimits {
                deadline_ms: config.deadline.as_millis() as u64,
                max_calls: view.catalog.max_calls,
                call_timeout_ms: view.catalog.call_timeout_ms,
                approval_timeout_ms: view.catalog.approval_timeout_ms,
                max_output: config.max_output,
                stop_output: config.stop_output,
                max_line: config.max_line,
            },
        };
        // A runner with every slot taken declines at once; the queue group
        // then offers the cell to the next. Give up after `capacity_wait`.
        let started = tokio::time::Instant::now();
        loop {
            let wait = config.deadline + CELL_MARGIN;
            let bus = &self.inner.shared.bus;
            // The runner that takes the cell holds its lease until it
            // replies; a runner that dies stops answering it.
            let answer = tokio::select! {
                answer = bus.call(subjects::CELL_RUN, &cell, wait) => answer,
                silent = code_mode_core::lease::lost(bus, &cell.cell_id) => {
                    tracing::warn!(cell = %cell.cell_id, ?silent, "the sandbox-runner running the cell stopped answering");
                    return Err(FrontendError::RunnerSilent { silent });
                }
            };
            let last = match answer {
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

    /// The `run_python` tool as listed to the client.
    pub fn tool(&self) -> Tool {
        let input = serde_json::json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source; top-level await is allowed."}},
            "required": ["code"],
            "additionalProperties": false,
        });
        let output = serde_json::to_value(schemars_output_schema()).expect("schema is JSON");
        let mut tool = Tool::new(TOOL_NAME, self.description(), Arc::new(as_object(input)));
        tool.output_schema = Some(Arc::new(as_object(output)));
        tool
    }

    /// Serve MCP over this process's stdin/stdout until the client goes
    /// away or `cancel` fires.
    pub async fn serve_stdio(self, cancel: CancellationToken) -> Result<(), FrontendError> {
        let service = self
            .serve_with_ct(rmcp::transport::stdio(), cancel.child_token())
            .await
            .map_err(|e| FrontendError::Transport(e.to_string()))?;
        let frontend = service.service().clone();
        frontend.know_client(service.peer());
        // Stopped below once the session has ended.
        let polling = frontend.clone();
        let poll = tokio::spawn(async move {
            loop {
                tokio::time::sleep(CATALOG_POLL).await;
                polling.refresh_catalog().await;
            }
        });
        let waited = service.waiting().await;
        poll.abort();
        frontend.end_session().await;
        waited.map_err(|e| FrontendError::Transport(e.to_string()))?;
        Ok(())
    }
}

fn as_object(v: serde_json::Value) -> JsonObject {
    match v {
        serde_json::Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The JSON Schema of a `run_python` result, inlined (no `$ref`s) as MCP
/// output schemas must be self-contained.
fn schemars_output_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string", "description": "What the code printed (first bytes kept)."},
            "error": {"type": ["string", "null"], "description": "Null when the code finished; else the end of its traceback or why the run was stopped."},
            "truncated": {"type": "boolean", "description": "The code printed more than was kept."},
            "stopped": {"type": "boolean", "description": "The run did not end on its own (deadline, output flood, protocol violation, the sandbox died)."}
        },
        "required": ["stdout", "error", "truncated", "stopped"],
        "additionalProperties": false
    })
}

/// The MCP result of a report: structured content plus the same JSON as
/// text, marked `isError` when the report has an error (the code raised, or
/// the run was stopped), so that clients which only look at the flag see the
/// failure.
pub fn report_result(report: &CellReport) -> CallToolResult {
    let mut result = CallToolResult::structured(serde_json::to_value(report).expect("a report is JSON"));
    result.is_error = Some(report.error.is_some());
    result
}

impl ServerHandler for Frontend {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("code-mode", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Call run_python with a short Python program; the wrapped tools are async functions in it.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.know_client(&context.peer);
        Ok(ListToolsResult::with_all_items(vec![self.tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.know_client(&context.peer);
        if request.name != TOOL_NAME {
            return Err(McpError::invalid_params(
                format!("unknown tool {:?}: the only tool is {TOOL_NAME}", request.name),
                None,
            ));
        }
        if let Some(token) = request.request_state.as_deref() {
            return Ok(self.resume(token, request.input_responses.as_ref(), &context).await);
        }
        let code = request.arguments.as_ref().and_then(|a| a.get("code"));
        let Some(serde_json::Value::String(code)) = code else {
            return Ok(error_result(&format!("{TOOL_NAME} needs a string argument \"code\"")).into());
        };
        if code.len() > self.inner.shared.config.max_code {
            let e = FrontendError::CodeTooLarge { size: code.len(), max: self.inner.shared.config.max_code };
            return Ok(error_result(&format!("{TOOL_NAME}: {e}")).into());
        }
        if let Err(e) = self.listen_for_approvals().await {
            tracing::warn!(error = %e, "this session cannot answer approvals");
            return Ok(error_result(&format!("{TOOL_NAME}: {e}")).into());
        }
        let run = self.start_cell(code.clone());
        Ok(self.drive(run, &context).await)
    }
}

/// How this request's client can be asked for an approval.
fn asking(context: &RequestContext<RoleServer>) -> Asking {
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // No mode named means form (the older capability shape).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Asking::Unsupported;
    }
    match context.protocol_version() {
        Some(version) if !version.has_initialize() => Asking::InputRequired,
        _ => Asking::Request,
    }
}

/// Ask the client with `elicitation/create` and wait for the answer, at
/// most the request's timeout.
async fn elicit(peer: &Peer<RoleServer>, request: &ApprovalRequest) -> ApprovalReply {
    let timeout = Duration::from_millis(request.timeout_ms);
    match peer.create_elicitation_with_timeout(approval::question(request), Some(timeout)).await {
        Ok(result) => approval::answer_of(&result),
        Err(ServiceError::Timeout { .. }) => ApprovalReply::TimedOut,
        Err(e) => {
            tracing::warn!(error = %e, "elicitation failed");
            let reason: String = format!("the client could not be asked ({e})").chars().take(200).collect();
            ApprovalReply::Unavailable { reason }
        }
    }
}

fn error_result(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_string())])
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use code_mode_proto::{ToolEntry, queue_groups};

    use super::*;

    fn entry(name: &str) -> ToolEntry {
        ToolEntry {
            name: name.into(),
            mcp_name: name.into(),
            server: None,
            stub: format!("async def {name}(params: dict) -> str:\n    \"\"\"The {name} tool.\"\"\""),
            summary: format!("{name}(params): The {name} tool."),
            mark: String::new(),
            search: Default::default(),
            private: false,
        }
    }

    fn catalog(version: u64, names: &[&str]) -> Catalog {
        Catalog {
            version,
            tools: names.iter().map(|n| entry(n)).collect(),
            max_calls: 50,
            call_timeout_ms: 30_000,
            approval_timeout_ms: 0,
            fingerprint: String::new(),
            unchanged: false,
            withheld: Vec::new(),
        }
    }

    /// A frontend over an in-process bus whose bridge answers whatever
    /// catalog the returned cell holds.
    async fn frontend_over(first: Catalog) -> (Frontend, Arc<Mutex<Catalog>>, CancellationToken) {
        let bus = Bus::in_process();
        let current = Arc::new(Mutex::new(first));
        let cancel = CancellationToken::new();
        let served = current.clone();
        bus.serve(subjects::CATALOG_GET, queue_groups::BRIDGE, cancel.clone(), move |_: CatalogRequest| {
            let catalog = served.lock().unwrap().clone();
            async move { Ok(catalog) }
        })
        .await
        .expect("the fake bridge serves");
        let frontend = Frontend::connect(bus, FrontendConfig::default()).await.expect("connects");
        (frontend, current, cancel)
    }

    #[tokio::test]
    async fn cells_refused_for_their_size_or_finding_no_runner_are_counted_by_result() {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        bus.serve(subjects::CATALOG_GET, queue_groups::BRIDGE, cancel.clone(), |_: CatalogRequest| async {
            Ok(catalog(1, &["add"]))
        })
        .await
        .expect("the bridge side serves");
        let config = FrontendConfig { max_code: 10, capacity_wait: Duration::from_millis(200), ..Default::default() };
        let frontend = Frontend::connect(bus, config).await.expect("connects");
        let count = |result: FrontendCellResult| {
            code_mode_telemetry::metrics().frontend_cells.with_label_values(&[result.as_str()]).get()
        };
        let (large, none) = (count(FrontendCellResult::CodeTooLarge), count(FrontendCellResult::NoRunner));
        let too_large = frontend.run_code("print('far too long')").await;
        assert!(matches!(too_large, Err(FrontendError::CodeTooLarge { .. })), "{too_large:?}");
        // No sandbox-runner serves this bus.
        let no_runner = frontend.run_code("print(1)").await;
        assert!(matches!(no_runner, Err(FrontendError::Bus(BusError::NoResponders { .. }))), "{no_runner:?}");
        assert_eq!(count(FrontendCellResult::CodeTooLarge), large + 1);
        assert_eq!(count(FrontendCellResult::NoRunner), none + 1);
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_catalog_with_other_tools_replaces_the_description_and_the_stubs_of_later_cells() {
        let (frontend, bridge, cancel) = frontend_over(catalog(1, &["add"])).await;
        assert!(!frontend.description().contains("async def late("));
        assert!(!frontend.refresh_catalog().await, "nothing changed yet");

        *bridge.lock().unwrap() = catalog(2, &["add", "late"]);
        assert!(frontend.refresh_catalog().await);
        assert!(frontend.description().contains("async def late("), "{}", frontend.description());
        assert!(frontend.tool().description.unwrap().contains("async def late("));
        let offered = frontend.catalog();
        assert_eq!(offered.version, 2);
        assert_eq!(offered.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["add", "late"]);
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_frontend_holding_the_current_catalog_asks_with_its_fingerprint_and_keeps_it_when_unchanged() {
        let bus = Bus::in_process();
        let mut first = catalog(1, &["add"]);
        first.fingerprint = "f1".into();
        let current = Arc::new(Mutex::new(first));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let cancel = CancellationToken::new();
        let (served, seen) = (current.clone(), asked.clone());
        bus.serve(subjects::CATALOG_GET, queue_groups::BRIDGE, cancel.clone(), move |request: CatalogRequest| {
            seen.lock().unwrap().push(request.known.clone());
            let mut catalog = served.lock().unwrap().clone();
            if request.known.as_deref() == Some(catalog.fingerprint.as_str()) {
                catalog.tools.clear();
                catalog.unchanged = true;
            }
            async move { Ok(catalog) }
        })
        .await
        .expect("the fake bridge serves");
        let frontend = Frontend::connect(bus, FrontendConfig::default()).await.expect("connects");
        assert!(!frontend.refresh_catalog().await);
        assert_eq!(frontend.catalog().tools.len(), 1, "an unchanged reply keeps the tools held");
        let mut second = catalog(2, &["add", "late"]);
        second.fingerprint = "f2".into();
        *current.lock().unwrap() = second;
        assert!(frontend.refresh_catalog().await);
        assert_eq!(frontend.catalog().tools.len(), 2);
        assert_eq!(*asked.lock().unwrap(), [None, Some("f1".to_string()), Some("f1".to_string())]);
        cancel.cancel();
    }

    #[tokio::test]
    async fn another_version_number_with_the_same_tools_is_not_a_change() {
        // Bridge replicas count versions apart: only the tools matter.
        let (frontend, bridge, cancel) = frontend_over(catalog(3, &["add"])).await;
        *bridge.lock().unwrap() = catalog(1, &["add"]);
        assert!(!frontend.refresh_catalog().await);
        assert_eq!(frontend.catalog().version, 3);
        cancel.cancel();
    }
}
