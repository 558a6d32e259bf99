//! The sandbox-runner: runs each cell of code in a fresh, locked-down Docker
//! container and relays its tool calls to the bridge.
//!
//! - [`image`]: the sandbox image (Python + `runner.py` and its search), built offline or
//!   from a registry.
//! - [`container`]: the lockdown of one container, its lifecycle, and the
//!   label-based reaper of containers left by dead owners.
//! - [`protocol`]: the untrusted line protocol with `runner.py`.
//! - [`cell`]: bringing a container to `ready`, and the task that owns one
//!   run.
//! - [`pool`]: the warm pool of ready containers.
//! - [`posture`]: the posture check of `code-mode doctor`, from inside a
//!   throwaway container under the real lockdown.
//! - [`kept`]: the containers of kept sessions (`--keep-variables`), each
//!   living across its session's cells.
//! - [`remover`]: the actor that removes finished cells' containers off
//!   their path.
//! - [`error`]: why the runner cannot start, and why a cell fails.
//!
//! [`SandboxRunner`] serves [`subjects::CELL_RUN`] in the `sandbox-runner`
//! queue group, running at most `capacity` cells at once (a kept
//! container holds one of those slots for its whole life). With an audit
//! sink, each cell is recorded before its code reaches a container (a
//! cell whose start cannot be recorded is refused) and again, synced, when
//! it ends. While it serves, its pool keeps containers ready, `warm` at
//! least and more while cells come fast (up to `warm_max` or the capacity:
//! [`pool`]); a cell takes one when there is one and starts a cold one
//! otherwise. It also
//! serves its own subject, [`subjects::runner`] of its
//! [`SandboxRunner::id`], where the later cells of the kept sessions it
//! holds arrive, and their ends. While a cell runs (fresh or kept), the
//! runner holds its lease (`code_mode_core::lease`), so the frontend
//! learns of the runner's death within seconds, and of a report lost on
//! its way soon after the cell's end; every [`REAP_EVERY`] it removes the
//! containers that dead runners on its engine left.

pub mod cell;
pub mod container;
pub mod error;
mod files;
mod files_in;
pub mod hold;
pub mod image;
pub mod kept;
pub mod kept_files;
pub mod pool;
pub mod posture;
pub mod protocol;
pub mod remover;
mod reports;
pub mod wire;

// The cargo-fuzz targets' entry points: only with the `fuzzing` feature
// (the fuzz crate enables it) and in this crate's tests.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bollard::Docker;
use code_mode_audit::record::{self, Body, CellOutcome};
use code_mode_audit::{AuditSink, Durability};
use code_mode_core::bus::{Bus, BusError};
use code_mode_core::lease::Progress;
use code_mode_core::reports::CellReports;
use code_mode_proto::{
    CancelCell, CellCancelled, CellEnded, CellRan, CellReport, KeptReply, KeptRequest, RunCell, RunnerStatus,
    StatusNoted, queue_groups, subjects,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::cell::ReadyContainer;
use crate::container::Lockdown;
use crate::kept::{KeptError, KeptSet, Lifetime};
use crate::pool::Pool;
use crate::remover::Remover;

/// The errors, where they always were for the crates that use the runner.
pub use crate::error::{SandboxError, StartError};

/// Connect to the engine named by `DOCKER_HOST` (or the default socket) and
/// agree on an API version; fail with a clear message when none answers.
pub async fn connect_docker() -> Result<Docker, StartError> {
    let host = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let no_engine = |reason: String| StartError::NoEngine { host: host.clone(), reason };
    let docker = Docker::connect_with_defaults().map_err(|e| no_engine(e.to_string()))?;
    let docker = tokio::time::timeout(Duration::from_secs(10), docker.negotiate_version())
        .await
        .map_err(|_| no_engine("no answer within 10 s".into()))?
        .map_err(|e| no_engine(e.to_string()))?;
    docker.ping().await.map_err(|e| no_engine(e.to_string()))?;
    Ok(docker)
}

/// Settings of a sandbox-runner.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The container restrictions (and image).
    pub lockdown: Lockdown,
    /// Cells run at once; a cell arriving when all are taken is declined
    /// with [`code_mode_proto::ErrorKind::NoCapacity`], so the frontend can
    /// try another runner.
    pub capacity: usize,
    /// Containers kept started and ready ahead of need while serving, each
    /// for one cell, even when no cell comes (the warm pool's floor); 0
    /// with no `warm_max` starts every cell cold. They do not count against
    /// `capacity`.
    pub warm: usize,
    /// Most containers the warm pool keeps when cells come fast (it follows
    /// the recent arrival rate, [`pool`]); `None`: the capacity when `warm`
    /// is above 0, else no pool. Never above the capacity, never below
    /// `warm`.
    pub warm_max: Option<usize>,
    /// How far back the warm pool counts arrivals, and so how long after
    /// the last cell it is back at its floor.
    pub warm_window: Duration,
    /// The audit sink: a `cell_start` record before each cell's code reaches
    /// its container, a `cell` record (synced) when it ends. A cell whose
    /// start cannot be recorded does not run.
    pub audit: Option<AuditSink>,
    /// Where the files a cell's code writes to `/tmp/out` are kept for the
    /// client (shared with the frontend in one process); `None`: they are
    /// not handed out, and the report says so (issue 42).
    pub files: Option<code_mode_core::files::FileStore>,
    /// Where the final report of a cell that asks for it
    /// ([`RunCell::keep_report`]: a task's cell) is kept for any frontend
    /// to read, before the reply goes (over NATS: the bucket
    /// [`code_mode_core::reports::REPORTS_BUCKET`]); `None` (`serve`, one
    /// process): the reply only.
    pub reports: Option<CellReports>,
    /// Over NATS, where the files of `files` go for the frontends once the
    /// cell ended (the bucket [`code_mode_core::files_shared::FILES_BUCKET`]);
    /// `None` (`serve`): they stay in `files`, shared in memory.
    pub shared_files: Option<code_mode_core::files_shared::SharedFiles>,
    /// Over NATS: where the files in past the bridge's reply bound come
    /// from ([`code_mode_core::files_in_shared`]).
    pub shared_inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
}

/// How often a serving runner removes the containers of dead owners on its
/// engine: a runner killed with cells and warm containers leaves them to
/// the other runners on the same engine.
pub const REAP_EVERY: Duration = Duration::from_secs(5);

/// How often a serving runner tells the bridges its slots.
pub const STATUS_EVERY: Duration = Duration::from_secs(5);

/// How soon a status no bridge noted is sent again, until one is.
const STATUS_FIRST_RETRY: Duration = Duration::from_millis(250);

/// How long one status report may take.
const STATUS_WAIT: Duration = Duration::from_secs(2);

/// The warm pool of a long-running runner (`serve`, `sandbox-runner`) when
/// nothing else is configured. The library default is 0: a runner that
/// runs one cell (`run`) would only start containers to remove them.
pub const DEFAULT_WARM: usize = 2;

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            lockdown: Lockdown::default(),
            capacity: code_mode_core::defaults::MAX_CONCURRENT_CELLS,
            warm: 0,
            warm_max: None,
            warm_window: pool::DEFAULT_WINDOW,
            audit: None,
            files: None,
            reports: None,
            shared_files: None,
            shared_inputs: None,
        }
    }
}

impl RunnerConfig {
    /// The warm pool's sizing: `warm` as its floor, `warm_max` (or the
    /// capacity) as its ceiling, at most the capacity and at least the
    /// floor.
    pub fn pool_sizing(&self) -> pool::Sizing {
        let capacity = self.capacity.max(1);
        let wanted = match self.warm_max {
            Some(max) => max,
            None if self.warm > 0 => capacity,
            None => 0,
        };
        pool::Sizing { floor: self.warm, ceiling: wanted.min(capacity).max(self.warm), window: self.warm_window }
    }
}

/// A sandbox-runner: a cheap handle.
#[derive(Clone, Debug)]
pub struct SandboxRunner {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// This runner's id: its own subject ends with it.
    id: String,
    docker: Docker,
    config: RunnerConfig,
    /// Running cells and kept containers.
    slots: Arc<Semaphore>,
    bus: Bus,
    /// Set by the first [`SandboxRunner::serve`].
    pool: OnceLock<Pool>,
    /// The runtime and image as cell records name them, found once.
    sandbox: tokio::sync::OnceCell<(String, String)>,
    /// Set by the first [`SandboxRunner::serve`].
    kept: OnceLock<KeptSet>,
    /// Set by the first [`SandboxRunner::serve`]; without it a cell removes
    /// its container itself before its report.
    remover: OnceLock<Remover>,
}

impl SandboxRunner {
    /// A runner on `docker`, relaying tool calls over `bus`. Stops when the
    /// engine does not have the lockdown's runtime registered as it needs;
    /// removes the containers that dead owners left behind first.
    pub async fn new(docker: Docker, config: RunnerConfig, bus: Bus) -> Result<Self, StartError> {
        container::check_runtime(&docker, config.lockdown.runtime).await?;
        let reaped = container::reap_orphans(&docker).await?;
        if reaped > 0 {
            tracing::info!(reaped, "removed leftover sandbox containers");
        }
        let config = RunnerConfig { capacity: config.capacity.max(1), ..config };
        let slots = Arc::new(Semaphore::new(config.capacity));
        code_mode_telemetry::set_runner_capacity(config.capacity);
        code_mode_telemetry::set_runner_cells_running(0);
        let id = uuid::Uuid::new_v4().simple().to_string();
        let inner = Inner {
            id,
            docker,
            config,
            slots,
            bus,
            pool: OnceLock::new(),
            sandbox: Default::default(),
            kept: OnceLock::new(),
            remover: OnceLock::new(),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// This runner's id (a new one at every start): the later cells of the
    /// kept sessions it holds come on [`subjects::runner`] of it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Kept sessions' containers this runner holds now.
    pub async fn kept_containers(&self) -> usize {
        match self.inner.kept.get() {
            Some(kept) => kept.count().await,
            None => 0,
        }
    }

    /// The Docker client.
    pub fn docker(&self) -> &Docker {
        &self.inner.docker
    }

    /// The warm pool: disabled until [`SandboxRunner::serve`] starts it (and
    /// with `warm` 0).
    pub fn pool(&self) -> Pool {
        self.inner.pool.get().cloned().unwrap_or_else(Pool::disabled)
    }

    /// Containers ready in the warm pool now.
    pub fn pool_size(&self) -> usize {
        self.inner.pool.get().map_or(0, Pool::size)
    }

    /// Run one cell in a free slot: take a warm container or start a cold
    /// one, run, remove it. A runner with every slot taken declines at once
    /// with [`SandboxError::NoCapacity`]. The deadline counts from here, so
    /// a cold start counts against it. A cell with [`RunCell::keep`] (and no
    /// key) starts its session's kept container instead, which keeps the
    /// slot after the cell ([`kept`]; needs [`SandboxRunner::serve`]).
    pub async fn run_cell(&self, cell: &RunCell, cancel: &CancellationToken) -> Result<CellRan, SandboxError> {
        wire::check_limits(&cell.limits)?;
        let Ok(slot) = self.inner.slots.clone().try_acquire_owned() else {
            return Err(SandboxError::NoCapacity { capacity: self.inner.config.capacity });
        };
        let slot = Slot::counted(slot, &self.inner);
        let progress = Progress::default();
        let cancelled = CancellationToken::new();
        let stops = cell::Stops { shutdown: cancel, cancel: &cancelled };
        let run = self.run_in_slot(cell, slot, stops, progress.clone());
        self.leased(cell, stops, progress, self.audited(cell, &cancelled, run)).await
    }

    /// Run `run` (one cell) holding `cell`'s lease: answered while it runs,
    /// so the frontend sees this runner's death within seconds, and then
    /// saying how it ended (and which kept container lives on after it), so a report lost on its way is seen within
    /// seconds too (`code_mode_core::lease`). A cell whose lease cannot be
    /// held is refused (NATS is unreachable: its report could not go back
    /// either).
    ///
    /// Meanwhile the runner answers on the cell's cancel subject
    /// ([`subjects::cell_cancel`]): a cancel stops the run through
    /// `stops.cancel` (its container is killed, its calls dropped); one that
    /// comes after the run ended, or after another cancel, stops nothing.
    async fn leased(
        &self,
        cell: &RunCell,
        stops: cell::Stops<'_>,
        progress: Progress,
        run: impl Future<Output = Result<CellRan, SandboxError>>,
    ) -> Result<CellRan, SandboxError> {
        let runner = container::owner_label();
        let lease =
            code_mode_core::lease::hold_reporting(&self.inner.bus, &cell.cell_id, &runner, stops.shutdown, progress)
                .await
                .map_err(SandboxError::Lease)?;
        let _cancels = self.serve_cancel(cell, stops).await;
        let mut ran = cell::traced(cell, run).await;
        if let (Some(local), Some(shared), Ok(ran)) =
            (&self.inner.config.files, &self.inner.config.shared_files, &mut ran)
        {
            files::hand_over(local, shared, &mut ran.report).await;
        }
        // Kept before the lease says the cell ended: a frontend that finds
        // the lease ended (or gone) and no report knows none will come.
        if let (true, Some(reports), Ok(ran)) = (cell.keep_report, &self.inner.config.reports, &ran) {
            reports::keep(reports, &cell.cell_id, ran, stops.shutdown).await;
        }
        if let Some(lease) = lease {
            let how = match &ran {
                Ok(ran) if ran.report.stopped => CellEnded::Stopped,
                Ok(ran) if ran.report.error.is_some() => CellEnded::Error,
                Ok(_) => CellEnded::Ok,
                Err(_) => CellEnded::Failed,
            };
            lease.end(how, ran.as_ref().ok().and_then(|ran| ran.kept.clone()));
        }
        ran
    }

    /// Answer on `cell`'s cancel subject until the returned guard drops:
    /// the first cancel fires `stops.cancel`. `None` when the cell id is
    /// not a subject token or the subject cannot be served (the cell then
    /// runs to its end or its deadline; the frontend's cancel finds no
    /// responder and says so in its log).
    async fn serve_cancel(&self, cell: &RunCell, stops: cell::Stops<'_>) -> Option<tokio_util::sync::DropGuard> {
        let subject = subjects::cell_cancel(&cell.cell_id)?;
        let serving = stops.shutdown.child_token();
        let cancel = stops.cancel.clone();
        let cell_id = cell.cell_id.clone();
        let served = self
            .inner
            .bus
            .serve(&subject, queue_groups::SANDBOX_RUNNER, serving.clone(), move |request: CancelCell| {
                let stopped = !cancel.is_cancelled();
                if stopped {
                    let reason = request.reason.as_deref().unwrap_or("no reason given");
                    tracing::info!(cell = %cell_id, reason, "the cell's request was cancelled: stopping it");
                    cancel.cancel();
                }
                async move { Ok(CellCancelled { stopped }) }
            })
            .await;
        match served {
            Ok(_) => Some(serving.drop_guard()),
            Err(e) => {
                tracing::warn!(cell = %cell.cell_id, error = %e, "the cell cannot be cancelled: its cancel subject could not be served");
                None
            }
        }
    }

    /// Run `run` (one cell), recording its start first and its end after
    /// when this runner has an audit sink: no record, no run; a cell whose
    /// end cannot be recorded has its report withheld. A run that ends
    /// after `cancelled` fired without finishing its work is recorded
    /// `cancelled`: stopped, or ended by an error first (the cancel also
    /// takes its calls away at the bridge: a call waiting for approval is
    /// refused as the requester is gone, and the code may end on that
    /// before the stop reaches it). One that finished is `ok`.
    async fn audited(
        &self,
        cell: &RunCell,
        cancelled: &CancellationToken,
        run: impl Future<Output = Result<CellRan, SandboxError>>,
    ) -> Result<CellRan, SandboxError> {
        let Some(audit) = &self.inner.config.audit else { return run.await };
        // Recorded before the code reaches a container: no record, no run.
        let facts = self.cell_facts(cell).await;
        let start = SystemTime::now();
        let inputs = crate::files_in::records(cell);
        let started = Body::CellStart(record::CellStart { cell: facts.clone(), inputs });
        if let Err(e) = audit.append(started, Durability::Written).await {
            tracing::error!(cell = %cell.cell_id, error = %e, "cell refused: its start cannot be recorded");
            return Err(SandboxError::Audit(e));
        }
        let ran = run.await;
        let outcome = audit_outcome(ran.as_ref().ok().map(|ran| &ran.report), cancelled.is_cancelled());
        let end = Body::Cell(record::Cell {
            cell: facts,
            start: record::rfc3339(start),
            end: record::rfc3339(SystemTime::now()),
            outcome,
        });
        if let Err(e) = audit.append(end, Durability::Synced).await {
            tracing::error!(cell = %cell.cell_id, error = %e, "the cell's end could not be recorded: its report is withheld");
            return Err(SandboxError::Audit(e));
        }
        ran
    }

    /// What a cell record says of `cell` and of this runner's sandbox.
    async fn cell_facts(&self, cell: &RunCell) -> record::CellFacts {
        let (runtime, image) = self
            .inner
            .sandbox
            .get_or_init(|| async {
                let lockdown = &self.inner.config.lockdown;
                // Always named to the engine, whatever its default.
                let runtime = lockdown.runtime.name().to_string();
                let image = match self.inner.docker.inspect_image(&lockdown.image).await.ok().and_then(|i| i.id) {
                    Some(id) => format!("{}@{id}", lockdown.image),
                    None => lockdown.image.clone(),
                };
                (runtime, image)
            })
            .await
            .clone();
        let (code_bytes, code_sha256) = record::size_and_hash(cell.code.as_bytes());
        record::CellFacts {
            session: cell.session.clone(),
            identity: cell.identity.clone(),
            cell: cell.cell_id.clone(),
            code_bytes,
            code_sha256,
            runtime,
            image,
        }
    }

    async fn run_in_slot(
        &self,
        cell: &RunCell,
        slot: Slot,
        stops: cell::Stops<'_>,
        progress: Progress,
    ) -> Result<CellRan, SandboxError> {
        let cancel = stops.shutdown;
        if cancel.is_cancelled() {
            return Ok(CellRan { report: shutdown_report(), kept: None });
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(cell.limits.deadline_ms);
        let taking = std::time::Instant::now();
        let warm = match self.inner.pool.get() {
            Some(pool) => pool.take().await,
            None => None,
        };
        let ready = match warm {
            Some(ready) => {
                code_mode_telemetry::cell_phase(code_mode_telemetry::Phase::Take, taking.elapsed());
                ready
            }
            None => {
                let (docker, lockdown) = (&self.inner.docker, &self.inner.config.lockdown);
                let starting = std::time::Instant::now();
                match ReadyContainer::start(docker, lockdown, &cell.cell_id, deadline, cancel).await {
                    Ok(ready) => {
                        code_mode_telemetry::cell_phase(code_mode_telemetry::Phase::ColdStart, starting.elapsed());
                        ready
                    }
                    Err(not_ready) => return Ok(CellRan { report: not_ready.into_report(cell)?, kept: None }),
                }
            }
        };
        match &cell.keep {
            None => {
                let remover = self.inner.remover.get();
                let leftovers = cell::Leftovers {
                    remover,
                    files: self.inner.config.files.as_ref(),
                    inputs: self.inner.config.shared_inputs.as_ref(),
                };
                let report = cell::run(ready, cell, &self.inner.bus, deadline, stops, leftovers, progress).await;
                Ok(CellRan { report, kept: None })
            }
            Some(keep) if keep.key.is_some() => {
                ready.remove().await;
                Err(SandboxError::BadRequest(format!(
                    "a kept session's later cells go to the runner holding its container ({}), not to {}",
                    subjects::RUNNER,
                    subjects::CELL_RUN
                )))
            }
            Some(keep) => {
                let Some(kept) = self.inner.kept.get() else {
                    ready.remove().await;
                    return Err(SandboxError::BadRequest("kept sessions need a serving runner".into()));
                };
                let cancel = stops.cancel.clone();
                let turn = kept::Turn { deadline, progress, cancel };
                Ok(kept.adopt(ready, slot, Lifetime::of(keep), cell.clone(), turn).await?)
            }
        }
    }

    /// Answer a request on this runner's own subject: the next cell of a
    /// kept session it holds (the deadline counts from here), or a session's
    /// end.
    pub async fn kept_request(
        &self,
        request: KeptRequest,
        cancel: &CancellationToken,
    ) -> Result<KeptReply, SandboxError> {
        match request {
            KeptRequest::Run(cell) => {
                if cell.keep.as_ref().and_then(|k| k.key.as_ref()).is_none() {
                    return Err(SandboxError::BadRequest(
                        "a cell on a runner's own subject names its kept container".into(),
                    ));
                }
                if cancel.is_cancelled() {
                    return Ok(KeptReply::Ran(CellRan { report: shutdown_report(), kept: None }));
                }
                let deadline = tokio::time::Instant::now() + Duration::from_millis(cell.limits.deadline_ms);
                let Some(kept) = self.inner.kept.get() else { return Err(KeptError::Lost.into()) };
                let progress = Progress::default();
                let cancelled = CancellationToken::new();
                let stops = cell::Stops { shutdown: cancel, cancel: &cancelled };
                let turn = kept::Turn { deadline, progress: progress.clone(), cancel: cancelled.clone() };
                let run = async { Ok(kept.run(cell.clone(), turn).await?) };
                let audited = self.audited(&cell, &cancelled, run);
                Ok(KeptReply::Ran(self.leased(&cell, stops, progress.clone(), audited).await?))
            }
            KeptRequest::End(end) => {
                let removed = match self.inner.kept.get() {
                    Some(kept) => kept.end(&end.session, &end.key).await,
                    None => false,
                };
                Ok(KeptReply::Ended { removed })
            }
        }
    }

    /// This runner's slots now, and its image's `packages` (as
    /// [`image::installed_packages`] read them).
    pub fn status(&self, packages: Option<Vec<String>>) -> RunnerStatus {
        let warm = self.inner.pool.get().map_or(0, |pool| pool.size());
        RunnerStatus {
            id: self.inner.id.clone(),
            capacity: self.inner.config.capacity as u32,
            free: self.inner.slots.available_permits() as u32,
            warm: warm as u32,
            at_ms: 0,
            packages,
        }
    }

    /// Tell the bridges this runner's slots and its image's packages every
    /// [`STATUS_EVERY`] until `cancel` (for the web console and the
    /// `run_python` description; a bridge that does not answer is simply
    /// told again next time). The packages are read from the image once;
    /// when that fails they are not named (the bridges then promise none
    /// of this runner).
    async fn report_status(self, cancel: CancellationToken) {
        let image = &self.inner.config.lockdown.image;
        let packages = match image::installed_packages(&self.inner.docker, image).await {
            Ok(packages) => Some(packages),
            Err(e) => {
                tracing::warn!(%image, error = %e, "the image's packages could not be read: none is named to the model");
                None
            }
        };
        // Until a bridge has noted one, statuses go out every
        // STATUS_FIRST_RETRY: a runner starting before its bridge (as
        // `serve` and a stack's start do) names its packages at once.
        let mut noted = false;
        loop {
            let status = self.status(packages.clone());
            match self.inner.bus.call_quiet::<_, StatusNoted>(subjects::RUNNER_STATUS, &status, STATUS_WAIT).await {
                Ok(_) => noted = true,
                Err(e) => tracing::debug!(error = %e, "no bridge noted this runner's status"),
            }
            let wait = if noted { STATUS_EVERY } else { STATUS_FIRST_RETRY };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Serve cells on the bus until `cancel` (on the queue group's subject,
    /// and the kept sessions' cells on this runner's own), and keep the warm
    /// pool filled meanwhile (the first call starts it). Cells in flight are
    /// stopped and their containers removed, and so is every pooled and
    /// kept container, before the returned task ends.
    pub async fn serve(&self, cancel: CancellationToken) -> Result<tokio::task::JoinHandle<()>, BusError> {
        // Started before the first cell can arrive; finished (its queue
        // removed) after the last cell has handed its container over.
        let remover_task = {
            let (remover, task) = Remover::start(self.inner.config.capacity);
            match self.inner.remover.set(remover) {
                Ok(()) => Some(task),
                Err(remover) => {
                    remover.finish();
                    let _ = task.await;
                    None
                }
            }
        };
        let files = kept_files::FileStores {
            local: self.inner.config.files.clone(),
            shared: self.inner.config.shared_files.clone(),
            inputs: self.inner.config.shared_inputs.clone(),
        };
        let (kept, kept_task) = KeptSet::start(self.inner.id.clone(), self.inner.bus.clone(), files, cancel.clone());
        let kept_task = match self.inner.kept.set(kept) {
            Ok(()) => Some(kept_task),
            Err(_) => {
                kept_task.abort();
                None
            }
        };
        let me = self.clone();
        let token = cancel.clone();
        let served = self
            .inner
            .bus
            .serve(subjects::CELL_RUN, queue_groups::SANDBOX_RUNNER, cancel.clone(), move |cell: RunCell| {
                let me = me.clone();
                let token = token.clone();
                async move {
                    me.run_cell(&cell, &token).await.map_err(|e| {
                        if !matches!(e, SandboxError::NoCapacity { .. } | SandboxError::Audit(_)) {
                            tracing::error!(cell = %cell.cell_id, error = %e, "cell could not run");
                        }
                        wire::service_error(&e)
                    })
                }
            })
            .await?;
        let own = subjects::runner(&self.inner.id).expect("runner ids are one subject token");
        let me = self.clone();
        let token = cancel.clone();
        let kept_served = self
            .inner
            .bus
            .serve(&own, queue_groups::SANDBOX_RUNNER, cancel.clone(), move |request: KeptRequest| {
                let me = me.clone();
                let token = token.clone();
                async move {
                    me.kept_request(request, &token).await.map_err(|e| {
                        tracing::info!(error = %e, "a kept session's request could not be served");
                        wire::service_error(&e)
                    })
                }
            })
            .await?;
        let reaper = tokio::spawn(container::reap_every(self.inner.docker.clone(), REAP_EVERY, cancel.clone()));
        let status = tokio::spawn(self.clone().report_status(cancel.clone()));
        let pool = self.start_pool(cancel);
        let me = self.clone();
        Ok(tokio::spawn(async move {
            let _ = served.await;
            let _ = kept_served.await;
            if let Some(kept) = kept_task {
                let _ = kept.await;
            }
            let _ = reaper.await;
            let _ = status.await;
            if let Some(pool) = pool {
                let _ = pool.await;
            }
            // Every cell has ended and handed its container over.
            if let Some(task) = remover_task {
                if let Some(remover) = me.inner.remover.get() {
                    remover.finish();
                }
                let _ = task.await;
            }
        }))
    }

    /// Start the warm pool once; its task ends after it removed its
    /// containers.
    fn start_pool(&self, cancel: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        let inner = &self.inner;
        let sizing = inner.config.pool_sizing();
        if sizing.ceiling == 0 {
            return None;
        }
        let mut task = None;
        inner.pool.get_or_init(|| {
            let (pool, started) = Pool::start(inner.docker.clone(), inner.config.lockdown.clone(), sizing, cancel);
            task = Some(started);
            pool
        });
        task
    }
}

/// A taken slot that keeps `codemode_runner_cells_running` equal to the
/// slots in use while it lives (a cell's, or a kept container's for its
/// whole life).
pub(crate) struct Slot {
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    slots: Arc<Semaphore>,
    capacity: usize,
}

impl Slot {
    fn counted(permit: tokio::sync::OwnedSemaphorePermit, inner: &Inner) -> Self {
        let capacity = inner.config.capacity;
        code_mode_telemetry::set_runner_cells_running(capacity - inner.slots.available_permits());
        Self { permit: Some(permit), slots: inner.slots.clone(), capacity }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.permit.take());
        code_mode_telemetry::set_runner_cells_running(self.capacity - self.slots.available_permits());
    }
}

fn shutdown_report() -> CellReport {
    code_mode_telemetry::cell_ended_without_run(code_mode_telemetry::CellOutcome::Shutdown);
    CellReport { error: Some("stopped: code-mode is shutting down".into()), stopped: true, ..CellReport::default() }
}

/// A run's outcome in its audit record: `report` is its report (`None`:
/// the run failed), `cancelled` whether its cancel fired before it ended.
/// A cancelled run that did not finish its work (stopped, or ended by an
/// error the cancel may have caused first) is `cancelled`.
fn audit_outcome(report: Option<&CellReport>, cancelled: bool) -> CellOutcome {
    match report {
        Some(report) if cancelled && (report.stopped || report.error.is_some()) => CellOutcome::Cancelled,
        Some(report) if report.stopped => CellOutcome::Stopped,
        Some(report) if report.error.is_some() => CellOutcome::Error,
        Some(_) => CellOutcome::Ok,
        None => CellOutcome::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_run_that_ended_on_an_error_or_stopped_is_recorded_cancelled_and_one_that_finished_is_ok() {
        let error = CellReport {
            error: Some("ToolError: needs approval: nobody could be asked".into()),
            ..CellReport::default()
        };
        let stopped = CellReport { error: Some("stopped".into()), stopped: true, ..CellReport::default() };
        let finished = CellReport::default();
        assert_eq!(audit_outcome(Some(&error), true), CellOutcome::Cancelled);
        assert_eq!(audit_outcome(Some(&stopped), true), CellOutcome::Cancelled);
        assert_eq!(audit_outcome(Some(&finished), true), CellOutcome::Ok);
        assert_eq!(audit_outcome(Some(&error), false), CellOutcome::Error);
        assert_eq!(audit_outcome(Some(&stopped), false), CellOutcome::Stopped);
        assert_eq!(audit_outcome(None, true), CellOutcome::Failed);
    }
}
