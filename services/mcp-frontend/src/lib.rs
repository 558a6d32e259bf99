//! The MCP frontend: the server an MCP client sees, with one tool,
//! `run_python` (and, with `--expose-tools`, the wrapped tools themselves,
//! called directly under the bridge's checks: [`direct`]).
//!
//! At start it asks the bridge for the tool catalog and builds the tool's
//! description ([`description`]). Each `run_python` call is checked (code
//! size), waits for one of a bounded number of slots, and is sent to a
//! sandbox-runner as a `RunCell`; the [`CellReport`] comes back to the
//! client as structured content (with an output schema) and as the same JSON
//! in a text block. Errors of code-mode itself come back as tool errors
//! saying what went wrong.
//!
//! State has owners, each a plain tokio actor behind a cheap handle:
//!
//! - [`catalog`]: one watcher per process owns the bridge's catalog and the
//!   description made from it. It asks the bridge every [`CATALOG_POLL`]
//!   and before and after each cell, naming the fingerprint of the catalog
//!   it holds (an unchanged catalog comes back without its tools), and
//!   publishes a changed one through a `watch` channel: later cells and
//!   `tools/list` use it, and every session tells its MCP client
//!   (`notifications/tools/list_changed`).
//! - `session`: one actor per client session (the stdio client, or each
//!   MCP session of the HTTP server, [`http`]) owns its cells, where their
//!   approval questions go, its approval subscription and its client.
//! - `parking`: one actor per process owns the cells waiting for a
//!   stateless client's retried call.
//!
//! A [`FrontendFactory`] fetches the catalog once per process, starts the
//! watcher and the parking lot, and makes one [`Frontend`] (a handle on a
//! session actor, and the rmcp [`ServerHandler`](rmcp::ServerHandler)) per client session.
//!
//! A client that sets a log level (`logging/setLevel`) hears of its own
//! session's notable events as MCP log notifications ([`notices`]).
//!
//! The files: this one holds the settings, the factory and the
//! [`Frontend`] handle's own API; `handler` is the rmcp [`ServerHandler`](rmcp::ServerHandler)
//! (what one MCP request does); `wire` is the one mapping of reports and
//! errors to what the client gets; `error` the frontend's errors.
//!
//! When a policy holds a tool call for approval, the bridge asks this
//! session on its own approval subject; the session routes the question to
//! the `run_python` request running the cell, which asks the client through
//! elicitation ([`approval`]).

pub mod activity;
pub mod approval;
pub mod auth;
pub mod catalog;
pub mod connect;
pub mod console;
pub mod description;
pub mod direct;
pub mod handle;
pub mod host;
pub mod http;
pub mod lifetimes;
pub mod notices;
mod parking;
mod progress;
pub mod resumable;
mod session;
mod tasks;
pub mod tls;

mod closed;
mod error;
#[cfg(test)]
mod fake_bridge;
mod files_in;
mod files_out;
mod gateway;
mod handler;
pub(crate) mod json_reads;
mod questions;
mod run_python_tool;
mod task_relay;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use code_mode_core::bus::{Bus, BusError};
use code_mode_core::defaults;
use code_mode_proto::{Catalog, CatalogRequest, CellReport, subjects};
use rmcp::ServiceExt;
use rmcp::model::Tool;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use crate::catalog::CATALOG_POLL;
use crate::catalog::CatalogHandle;
pub use crate::direct::Expose;
pub use crate::handle::HandleError;
use crate::parking::ParkingLot;
use crate::session::{CellKeep, CellOrder, SessionHandle};

pub use crate::error::FrontendError;
pub use crate::wire::report_result;

/// The one tool's name.
pub const TOOL_NAME: &str = "run_python";

/// The JetStream key-value bucket of the `run_python` tasks of the split
/// deployment (`deploy/nats-server.conf` grants it to the frontend user).
pub const TASKS_BUCKET: &str = "codemode_tasks";

/// Settings of the frontend.
#[derive(Debug, Clone)]
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
    /// How long to wait at start, once the bridge answers, for a
    /// sandbox-runner to have named its image's packages, so that the
    /// first `tools/list` already says what the code can import (only
    /// when `run_python` is offered; zero: do not wait, e.g. `run`, where
    /// no client reads the description).
    pub packages_wait: Duration,
    /// Keep each session's variables between its cells (`--keep-variables`):
    /// `None` runs every cell in a fresh container.
    pub keep: Option<KeepConfig>,
    /// Cells one session may run (or queue) at once
    /// (`--max-cells-per-session`); `None`: no limit but the process's
    /// slots.
    pub max_cells_per_session: Option<usize>,
    /// Offer the wrapped tools directly beside `run_python`, or instead of
    /// it (`--expose-tools`).
    pub expose: Expose,
    /// Direct tool calls one client session may make
    /// (`--max-direct-calls`); `None`: no limit.
    pub max_direct_calls: Option<u32>,
    /// How long a cell run as a task may run (`--task-deadline`).
    pub task_deadline: Duration,
    /// How long a finished task's result is kept (`--task-ttl`).
    pub task_ttl: Duration,
    /// Where the files a cell writes to `/tmp/out` are kept for the client
    /// (`resources/read` of `code-mode://files/...`); shared with the
    /// sandbox-runner in one process (`serve`); `None`: not offered
    /// (issue 42).
    pub files: Option<code_mode_core::files::FileStore>,
    /// Over NATS, where the runners hand the files out (the bucket
    /// [`code_mode_core::files_shared::FILES_BUCKET`]): any frontend
    /// replica reads them from there.
    pub shared_files: Option<code_mode_core::files_shared::SharedFiles>,
    /// Over NATS, where inline files in the cell message cannot carry go
    /// to the runners (the bucket
    /// [`code_mode_core::files_in_shared::INLINE_BUCKET`], which this
    /// frontend writes); `None` (`serve`): they ride in the cell message.
    pub shared_inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
}

/// How long a kept session's container lives (`--keep-variables`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepConfig {
    /// Removed after this long without a cell (`--session-idle`).
    pub idle: Duration,
    /// Removed this long after it started, whatever happens (`--session-max`).
    pub max: Duration,
    /// Kept containers one stateless client (identity) holds at once on a
    /// runner through handles (`--max-handles`); starting one more removes
    /// its container unused the longest.
    pub most_handles: u32,
}

impl Default for KeepConfig {
    fn default() -> Self {
        Self { idle: defaults::SESSION_IDLE, max: defaults::SESSION_MAX, most_handles: defaults::MAX_HANDLES }
    }
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
            packages_wait: PACKAGES_WAIT,
            keep: None,
            max_cells_per_session: None,
            expose: Expose::Off,
            max_direct_calls: None,
            task_deadline: tasks::DEFAULT_TASK_DEADLINE,
            task_ttl: tasks::DEFAULT_TASK_TTL,
            files: None,
            shared_files: None,
            shared_inputs: None,
        }
    }
}

/// Options of one cell, beyond the frontend's settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CellOptions {
    /// Tool calls this cell may make, at most the bridge's `--max-calls`
    /// (`None`: that many).
    pub max_calls: Option<u32>,
    /// This cell's deadline instead of `--deadline` (a task's cell runs
    /// up to `--task-deadline`).
    pub deadline: Option<Duration>,
    /// The runner keeps the cell's report for any frontend too (a task's
    /// cell, when the services run apart: [`code_mode_proto::RunCell::keep_report`]).
    pub keep_report: bool,
}

/// How long to wait for the bridge's catalog at start, by default.
pub const CATALOG_WAIT: Duration = Duration::from_secs(30);
/// How long one catalog request may take at start.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait at start for a sandbox-runner's word on its packages,
/// by default: a runner names them within a second of its start (it tells
/// the bridges again every 250 ms until one has noted it), so this bounds
/// only a stack whose runners start late (e.g. building their image).
pub const PACKAGES_WAIT: Duration = Duration::from_secs(10);
/// How often the catalog is asked again while the packages are unknown at
/// start.
const PACKAGES_POLL: Duration = Duration::from_millis(100);
/// Pause between two tries of a request that found no service free.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What the sessions of one frontend process share: the bus, the settings,
/// the cell slots, and handles on the catalog watcher and the parking lot.
/// Nothing here is guarded by a lock: each piece of state has its actor.
#[derive(Debug)]
pub(crate) struct Shared {
    pub bus: Bus,
    pub config: FrontendConfig,
    /// `run_python` calls that run at once, across the process's sessions.
    pub slots: Semaphore,
    pub catalog: CatalogHandle,
    pub parking: ParkingLot,
    /// Each identity's `--max-cells-per-session` slots for its stateless
    /// requests.
    pub stateless_slots: StatelessSlots,
    /// The live sessions and last cells, for the web console's operators.
    pub activity: activity::Activity,
    /// Where the web console is reached (`https://host:port`, no path),
    /// once an HTTP server serves it: approval questions of rules with
    /// approvers link to it.
    pub console_base: std::sync::OnceLock<String>,
    /// The `run_python` tasks: their records and this process's cells.
    pub tasks: tasks::TaskBook,
}

/// The `--max-cells-per-session` slots of each identity's stateless
/// requests in this process: a stateless request is a session object of its
/// own, so the slots its identity shares must live beside them.
///
/// A map behind a `std::sync::Mutex` rather than an actor: each access is
/// one short lookup or insert that never awaits while holding the lock. An
/// entry lives while some request holds its slots (a `Weak` in the map);
/// dead entries are swept on the next insert.
#[derive(Debug)]
pub(crate) struct StatelessSlots {
    max: Option<usize>,
    scopes: std::sync::Mutex<std::collections::HashMap<String, std::sync::Weak<Semaphore>>>,
}

impl StatelessSlots {
    fn new(max: Option<usize>) -> Self {
        Self { max, scopes: Default::default() }
    }

    /// The slots of `scope` (`None` without `--max-cells-per-session`).
    pub fn of(&self, scope: &str) -> Option<Arc<Semaphore>> {
        let max = self.max?;
        // A panic while holding the lock cannot leave the map half-written
        // (each change is one insert or a retain), so keep going.
        let mut scopes = code_mode_core::sync::lock(&self.scopes);
        if let Some(slots) = scopes.get(scope).and_then(std::sync::Weak::upgrade) {
            return Some(slots);
        }
        scopes.retain(|_, slots| slots.strong_count() > 0);
        let slots = Arc::new(Semaphore::new(max));
        scopes.insert(scope.to_string(), Arc::downgrade(&slots));
        Some(slots)
    }
}

/// The bridge's catalog once it names the sandboxes' packages (a runner
/// told it), asking again every [`PACKAGES_POLL`] for at most `wait`;
/// after that, `first` or the last answer. The description a client lists
/// first then says what the code can import; should the runners name them
/// only later, every client is told (`notifications/tools/list_changed`).
async fn packages_named(bus: &Bus, request: &CatalogRequest, first: Catalog, wait: Duration) -> Catalog {
    let give_up = tokio::time::Instant::now() + wait;
    let mut catalog = first;
    while catalog.packages.is_none() {
        if tokio::time::Instant::now() + PACKAGES_POLL > give_up {
            tracing::warn!(
                waited = ?wait,
                "no sandbox-runner has named its image's packages yet: the description names none until one does \
                 (clients are then told the tools changed)"
            );
            break;
        }
        tokio::time::sleep(PACKAGES_POLL).await;
        match bus.call::<_, Catalog>(subjects::CATALOG_GET, request, CATALOG_TIMEOUT).await {
            Ok(next) => catalog = next,
            Err(e) => tracing::debug!(error = %e, "asking the catalog again for the packages failed"),
        }
    }
    catalog
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
    /// for one to answer: services may start in any order), and start the
    /// catalog watcher.
    pub async fn connect(bus: Bus, config: FrontendConfig) -> Result<Self, FrontendError> {
        Self::connect_with_tasks(bus, config, code_mode_core::state::SessionStore::in_memory(), None).await
    }

    /// [`FrontendFactory::connect`] keeping the `run_python` tasks in
    /// `tasks` (the JetStream bucket [`TASKS_BUCKET`] when the services run
    /// apart, so every frontend replica answers for every task), and
    /// reading their cells' reports, once kept by the runners, from
    /// `reports` (so a replica settles a task whose driving frontend died).
    pub async fn connect_with_tasks(
        bus: Bus,
        config: FrontendConfig,
        tasks: code_mode_core::state::SessionStore,
        reports: Option<code_mode_core::reports::CellReports>,
    ) -> Result<Self, FrontendError> {
        let request =
            CatalogRequest { session: uuid::Uuid::new_v4().to_string(), known: None, direct: config.expose.direct() };
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
        let catalog = match config.expose.run_python() && catalog.packages.is_none() {
            true => packages_named(&bus, &request, catalog, config.packages_wait).await,
            false => catalog,
        };
        let shared = Shared {
            catalog: CatalogHandle::start(bus.clone(), config.clone(), catalog),
            parking: ParkingLot::start(),
            stateless_slots: StatelessSlots::new(config.max_cells_per_session),
            activity: Default::default(),
            console_base: Default::default(),
            tasks: tasks::TaskBook::new(tasks, config.task_deadline, config.task_ttl)
                .following(reports.map(|reports| tasks::Follow { reports, bus: bus.clone() })),
            slots: Semaphore::new(config.max_concurrent_cells.max(1)),
            bus,
            config,
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// A new client session with its own id, offering the current catalog.
    /// It answers approvals once it runs its first cell (or after
    /// [`Frontend::listen_for_approvals`]).
    pub fn session(&self) -> Frontend {
        self.session_keeping(self.shared.config.keep)
    }

    /// A new client session that keeps its variables between cells as
    /// `keep` says (`None`: a fresh container per cell), whatever the
    /// process's setting; the description stays the process's.
    pub fn session_keeping(&self, keep: Option<KeepConfig>) -> Frontend {
        Frontend {
            session: SessionHandle::start(self.shared.clone(), keep),
            shared: self.shared.clone(),
            transport: Transport::Connection,
            handshaken: Arc::default(),
            roots: Arc::default(),
        }
    }

    /// The session object of one MCP HTTP session, or of one stateless
    /// request ([`http`]): which of the two it is, each request's protocol
    /// says.
    pub(crate) fn http_session(&self) -> Frontend {
        Frontend {
            session: SessionHandle::start(self.shared.clone(), self.shared.config.keep),
            shared: self.shared.clone(),
            transport: Transport::Http,
            handshaken: Arc::default(),
            roots: Arc::default(),
        }
    }

    /// Ask the bridge for its catalog now; true when the tools changed.
    pub async fn refresh_catalog(&self) -> bool {
        self.shared.catalog.refresh().await
    }
}

/// The frontend of one client session: a cheap handle on its session actor
/// and the rmcp [`ServerHandler`](rmcp::ServerHandler) of the session.
#[derive(Clone, Debug)]
pub struct Frontend {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: SessionHandle,
    pub(crate) transport: Transport,
    /// Whether the client's `initialize` was answered: a session has one
    /// handshake, and a second (which would declare other capabilities) is
    /// refused.
    pub(crate) handshaken: Arc<std::sync::atomic::AtomicBool>,
    /// The client's changes of roots on their way to the bridges.
    pub(crate) roots: Arc<direct::RootsChanges>,
}

/// How a [`Frontend`]'s client reaches it, which decides what one client
/// session is ([`lifetimes`]): over one connection (stdio, the library)
/// the connection is the session whatever the protocol version; over HTTP
/// an MCP session of 2025-11-25 and older is one, and a stateless
/// 2026-07-28 request is not: its state lives in its identity's scope and
/// its variables behind a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// One connection, one session.
    Connection,
    /// The HTTP endpoint: a session, or one stateless request.
    Http,
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
        self.session.listen().await
    }

    /// Ask `asker` about the approvals of cells this session runs outside an
    /// MCP request ([`Frontend::run_code`]); the first one set stays.
    pub fn ask_locally_with(&self, asker: Arc<dyn approval::LocalAsker>) {
        self.session.ask_locally(asker);
    }

    /// End this session now: its running cells are stopped, and the bridge
    /// is told (if a cell ran) so it forgets the session's state. Later
    /// cells of the session fail with [`FrontendError::SessionEnded`].
    pub async fn end_session(&self) {
        self.session.end().await;
    }

    /// The `run_python` description.
    pub fn description(&self) -> String {
        self.shared.catalog.current().description.clone()
    }

    /// The catalog this frontend offers now.
    pub fn catalog(&self) -> Catalog {
        self.shared.catalog.current().catalog.clone()
    }

    /// Ask the bridge for its catalog now; when its tools differ from the
    /// ones offered, offer the new ones (every session's client is told
    /// that the tool list changed). Returns whether the tools changed. A
    /// failed request keeps the current catalog (logged).
    pub async fn refresh_catalog(&self) -> bool {
        self.shared.catalog.refresh().await
    }

    /// The session id of this frontend.
    pub fn session(&self) -> &str {
        self.session.id()
    }

    /// Run one cell of code and return its report. Nobody can be asked for
    /// approvals here but the local asker ([`Frontend::ask_locally_with`]):
    /// without one, a call that needs approval is refused (the MCP path,
    /// [`ServerHandler::call_tool`](rmcp::ServerHandler::call_tool), asks the client).
    pub async fn run_code(&self, code: &str) -> Result<CellReport, FrontendError> {
        self.run_code_with(code, CellOptions::default()).await
    }

    /// [`Frontend::run_code`] with per-cell options (a smaller call budget).
    pub async fn run_code_with(&self, code: &str, options: CellOptions) -> Result<CellReport, FrontendError> {
        let order = CellOrder {
            cell_id: uuid::Uuid::new_v4().to_string(),
            code: code.to_string(),
            inputs: Vec::new(),
            route: None,
            options,
            keep: CellKeep::Session,
            link: None,
            cancel: Default::default(),
        };
        self.session.run(order).await.await.unwrap_or(Err(FrontendError::SessionEnded)).map(|ran| ran.report)
    }

    /// The `run_python` tool as listed to the client.
    pub fn tool(&self) -> Tool {
        self.tool_for(false)
    }

    /// Serve MCP over this process's stdin/stdout until the client goes
    /// away or `cancel` fires; the session then ends.
    pub async fn serve_stdio(self, cancel: CancellationToken) -> Result<(), FrontendError> {
        let service = self
            .serve_with_ct(rmcp::transport::stdio(), cancel.child_token())
            .await
            .map_err(|e| FrontendError::Transport(e.to_string()))?;
        let frontend = service.service().clone();
        frontend.session.know_client(service.peer());
        let waited = service.waiting().await;
        frontend.end_session().await;
        waited.map_err(|e| FrontendError::Transport(e.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use code_mode_proto::queue_groups;
    use code_mode_telemetry::FrontendCellResult;

    use super::*;
    use crate::fake_bridge::{self, FakeBridge};

    /// The fake bridge's catalog of `names`, at `version`, with no
    /// fingerprint (every refresh gets the whole catalog).
    fn catalog(version: u64, names: &[&str]) -> Catalog {
        Catalog { version, ..fake_bridge::catalog("", names) }
    }

    /// A frontend over an in-process bus whose bridge answers whatever
    /// catalog the returned cell holds.
    async fn frontend_over(first: Catalog) -> (Frontend, Arc<Mutex<Catalog>>, CancellationToken) {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        let bridge = FakeBridge::serve(&bus, &cancel, first).await;
        let frontend = Frontend::connect(bus, FrontendConfig::default()).await.expect("connects");
        (frontend, bridge.catalog, cancel)
    }

    #[tokio::test]
    async fn cells_refused_for_their_size_or_finding_no_runner_are_counted_by_result() {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        FakeBridge::serve(&bus, &cancel, catalog(1, &["add"])).await;
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
        assert!(matches!(no_runner, Err(FrontendError::NoRunner { .. })), "{no_runner:?}");
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
        let cancel = CancellationToken::new();
        let bridge = FakeBridge::serve(&bus, &cancel, first).await;
        let frontend = Frontend::connect(bus, FrontendConfig::default()).await.expect("connects");
        assert!(!frontend.refresh_catalog().await);
        assert_eq!(frontend.catalog().tools.len(), 1, "an unchanged reply keeps the tools held");
        let mut second = catalog(2, &["add", "late"]);
        second.fingerprint = "f2".into();
        bridge.set(second);
        assert!(frontend.refresh_catalog().await);
        assert_eq!(frontend.catalog().tools.len(), 2);
        assert_eq!(*bridge.asked.lock().unwrap(), [None, Some("f1".to_string()), Some("f1".to_string())]);
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

    /// A fake runner whose cells end only when `release` is notified, and a
    /// fake bridge counting session ends; a frontend over them.
    async fn frontend_with_held_cells()
    -> (FrontendFactory, Arc<tokio::sync::Notify>, Arc<Mutex<Vec<String>>>, CancellationToken) {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        FakeBridge::serve(&bus, &cancel, catalog(1, &["add"])).await;
        let ended = Arc::new(Mutex::new(Vec::new()));
        let seen = ended.clone();
        bus.serve(
            subjects::SESSION_END,
            queue_groups::BRIDGE,
            cancel.clone(),
            move |end: code_mode_proto::SessionEnd| {
                seen.lock().unwrap().push(end.session);
                async { Ok(code_mode_proto::SessionEnded { removed: 0 }) }
            },
        )
        .await
        .unwrap();
        let release = Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        bus.serve(
            subjects::CELL_RUN,
            queue_groups::SANDBOX_RUNNER,
            cancel.clone(),
            move |cell: code_mode_proto::RunCell| {
                let held = held.clone();
                async move {
                    held.notified().await;
                    let report = CellReport { stdout: cell.code, ..CellReport::default() };
                    Ok(code_mode_proto::CellRan { report, kept: None })
                }
            },
        )
        .await
        .unwrap();
        let factory = FrontendFactory::connect(bus, FrontendConfig::default()).await.unwrap();
        (factory, release, ended, cancel)
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what} did not happen within 2 s");
    }

    #[tokio::test]
    async fn a_session_whose_handles_are_gone_ends_and_tells_the_bridge_only_after_its_last_cell() {
        let (factory, release, ended, cancel) = frontend_with_held_cells().await;
        let frontend = factory.session();
        let id = frontend.session().to_string();
        let order = CellOrder {
            cell_id: "c1".into(),
            code: "1".into(),
            inputs: Vec::new(),
            route: None,
            options: Default::default(),
            keep: CellKeep::Fresh,
            link: None,
            cancel: Default::default(),
        };
        let report = frontend.session.run(order).await;
        // Every handle is gone while the cell runs: the session lives on.
        drop(frontend);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(ended.lock().unwrap().is_empty(), "the session ended while its cell ran");
        release.notify_one();
        assert_eq!(report.await.unwrap().unwrap().report.stdout, "1");
        until("the session end", || *ended.lock().unwrap() == [id.clone()]).await;
        cancel.cancel();
    }

    #[tokio::test]
    async fn ending_a_session_stops_its_running_cells_and_its_later_cells_fail_saying_so() {
        let (factory, _release, ended, cancel) = frontend_with_held_cells().await;
        let frontend = factory.session();
        let running = tokio::spawn({
            let frontend = frontend.clone();
            async move { frontend.run_code("import time; time.sleep(60)").await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        frontend.end_session().await;
        let stopped = tokio::time::timeout(Duration::from_secs(2), running).await.expect("the cell stopped").unwrap();
        assert!(matches!(stopped, Err(FrontendError::SessionEnded)), "{stopped:?}");
        assert!(matches!(frontend.run_code("print(1)").await, Err(FrontendError::SessionEnded)));
        assert_eq!(*ended.lock().unwrap(), [frontend.session().to_string()], "the bridge was told once");
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_session_that_ran_no_cell_ends_without_telling_the_bridge() {
        let (factory, _release, ended, cancel) = frontend_with_held_cells().await;
        let frontend = factory.session();
        frontend.listen_for_approvals().await.unwrap();
        frontend.end_session().await;
        assert!(ended.lock().unwrap().is_empty());
        cancel.cancel();
    }
}
