//! Kept containers: one client session's container, living across its
//! cells (`--keep-variables`).
//!
//! A session's first cell arrives on the queue group with
//! [`RunCell::keep`] and no key: the runner takes a slot and a ready
//! container (warm or cold) as for any cell and hands both to
//! `KeptSet::adopt`. From then on one task, a `KeptActor`, owns that
//! container, its attach streams and its slot (a kept container counts
//! against the runner's capacity for its whole life), and runs the
//! session's cells one at a time: each with its own deadline, output caps
//! and call budget, each call relayed with that cell's id and call index.
//! The session's later cells reach it through the runner's own subject
//! ([`code_mode_proto::subjects::runner`]) with the key this runner made,
//! which is bound to the session: a key presented for another session is
//! unknown.
//!
//! Between cells the container may still hold code an earlier cell left
//! running. Nothing it sends counts: printed text is dropped, a call is
//! refused without reaching the bridge, a flood (more than the cell's
//! `stop_output` bytes between two cells) or any other message ends the
//! container.
//!
//! The container is removed when its session ends ([`KeptSet::end`]),
//! after `idle_ms` without a cell, `max_ms` after its first cell (checked
//! between cells), when a cell is stopped (deadline, protocol violation,
//! the container died or ran out of memory, an output flood), or on
//! shutdown. A session whose next cell finds no container under its key
//! gets [`KeptError::Lost`] and starts fresh; the registry remembers for a
//! while ([`REMEMBERED`], at most [`MAX_REMEMBERED`] keys) why each key's
//! container went, so that a stateless client presenting its handle late
//! hears that it expired and why ([`KeptError::Expired`]), and a key of
//! another session is refused as such ([`KeptError::Foreign`]) rather than
//! as unknown.
//!
//! [`KeptSet`] is the handle on the registry actor that owns the map from
//! key to kept container and the `JoinSet` of their tasks; on shutdown it
//! waits until each has removed its container.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use code_mode_core::bus::Bus;
use code_mode_core::lease::Progress;
use code_mode_proto::{CellRan, CellReport, KeptContainer, RunCell, ToolReply};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Slot;
use crate::cell::{self, End, ReadyContainer, Run, Streams};
use crate::container::Container;
use crate::kept_files::{FileStores, SessionFiles};
use crate::protocol::{self, FromRunner, Violation};
use crate::wire;

/// Commands that may wait at the registry.
const REQUESTS: usize = 64;
/// Cells that may wait at one kept container (its session sends one at a
/// time).
const CELLS: usize = 2;
/// How long the registry remembers why a key's container was removed.
pub const REMEMBERED: Duration = Duration::from_secs(60 * 60);
/// Most removed keys remembered (the oldest are forgotten first): a few
/// hundred kilobytes at most.
pub const MAX_REMEMBERED: usize = 4096;

/// Why a kept session's cell cannot run in its container.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeptError {
    /// No container of this session under this key: it was removed (idle,
    /// past its time, stopped, the session ended) or never was here.
    #[error("this sandbox-runner holds no kept container under that key for this session (it was removed)")]
    Lost,
    /// A cell is running in it already.
    #[error("a cell of this session is running in its kept container already")]
    Busy,
    /// The container under that key was removed a while ago.
    #[error("the kept container under that key was removed: {why}")]
    Expired {
        /// Why it was removed.
        why: String,
    },
    /// The key names a container (live or removed) of another session.
    #[error("the kept container under that key belongs to another session")]
    Foreign,
}

/// How long a kept container lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lifetime {
    idle: Duration,
    max: Duration,
}

impl Lifetime {
    /// The lifetime a cell asks for.
    pub fn of(keep: &code_mode_proto::Keep) -> Lifetime {
        Lifetime { idle: Duration::from_millis(keep.idle_ms), max: Duration::from_millis(keep.max_ms) }
    }
}

/// What one cell's run in a kept container goes by: its deadline, where
/// its progress goes (for its lease to say), and its own cancel (its
/// request is gone).
#[derive(Debug, Clone)]
pub struct Turn {
    /// When the run is stopped.
    pub deadline: Instant,
    /// Where the code's progress goes.
    pub progress: Progress,
    /// Fired when the cell's request is cancelled.
    pub cancel: CancellationToken,
}

/// (Boxed where large: a ready container and a cell.)
enum Command {
    Adopt {
        ready: Box<ReadyContainer>,
        permit: Slot,
        lifetime: Lifetime,
        cell: Box<RunCell>,
        deadline: Instant,
        progress: Progress,
        cancel: CancellationToken,
        reply: oneshot::Sender<Result<CellRan, KeptError>>,
    },
    Run {
        cell: Box<RunCell>,
        deadline: Instant,
        progress: Progress,
        cancel: CancellationToken,
        reply: oneshot::Sender<Result<CellRan, KeptError>>,
    },
    End {
        session: String,
        key: String,
        reply: oneshot::Sender<bool>,
    },
    Count {
        reply: oneshot::Sender<usize>,
    },
}

/// A handle on the registry of one runner's kept containers. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct KeptSet {
    requests: mpsc::Sender<Command>,
}

impl KeptSet {
    /// Start the registry of runner `runner` (its id, named in the replies)
    /// relaying calls over `bus`; on `cancel` every kept container is
    /// removed before the returned task ends.
    /// The files its cells write go to `files` (issue 42).
    pub fn start(
        runner: String,
        bus: Bus,
        files: FileStores,
        cancel: CancellationToken,
    ) -> (KeptSet, tokio::task::JoinHandle<()>) {
        let (requests, inbox) = mpsc::channel(REQUESTS);
        let registry = Registry {
            runner,
            bus,
            files,
            cancel,
            containers: HashMap::new(),
            tasks: JoinSet::new(),
            task_keys: HashMap::new(),
            removed: HashMap::new(),
        };
        (KeptSet { requests }, tokio::spawn(registry.run(inbox)))
    }

    /// Make `ready` the kept container of `cell`'s session (holding
    /// `permit`, a slot of the runner, until it is removed) and run `cell`
    /// in it.
    pub(crate) async fn adopt(
        &self,
        ready: ReadyContainer,
        permit: Slot,
        lifetime: Lifetime,
        cell: RunCell,
        turn: Turn,
    ) -> Result<CellRan, KeptError> {
        let Turn { deadline, progress, cancel } = turn;
        let (reply, ran) = oneshot::channel();
        let command = Command::Adopt {
            ready: Box::new(ready),
            permit,
            lifetime,
            cell: Box::new(cell),
            deadline,
            progress,
            cancel,
            reply,
        };
        self.requests.send(command).await.map_err(|_| KeptError::Lost)?;
        ran.await.map_err(|_| KeptError::Lost)?
    }

    /// Run a kept session's next cell in the container its key names.
    pub async fn run(&self, cell: RunCell, turn: Turn) -> Result<CellRan, KeptError> {
        let Turn { deadline, progress, cancel } = turn;
        let (reply, ran) = oneshot::channel();
        let command = Command::Run { cell: Box::new(cell), deadline, progress, cancel, reply };
        self.requests.send(command).await.map_err(|_| KeptError::Lost)?;
        ran.await.map_err(|_| KeptError::Lost)?
    }

    /// Remove the session's kept container (stopping a cell running in it);
    /// true when there was one. Returns once it is removed.
    pub async fn end(&self, session: &str, key: &str) -> bool {
        let (reply, done) = oneshot::channel();
        let command = Command::End { session: session.to_string(), key: key.to_string(), reply };
        if self.requests.send(command).await.is_err() {
            return false;
        }
        done.await.unwrap_or(false)
    }

    /// Kept containers alive now.
    pub async fn count(&self) -> usize {
        let (reply, count) = oneshot::channel();
        if self.requests.send(Command::Count { reply }).await.is_err() {
            return 0;
        }
        count.await.unwrap_or(0)
    }
}

/// One kept container as the registry knows it.
struct Entry {
    session: String,
    cells: mpsc::Sender<KeptCell>,
    /// Fires to remove it (its session ended).
    end: CancellationToken,
    /// Waiting for its removal.
    ended: Vec<oneshot::Sender<bool>>,
    /// When it last took a cell (or was made).
    used: Instant,
    /// Why it is being removed, when the registry removed it (its actor
    /// only sees that it was told to end).
    why: Option<String>,
}

/// A key whose container was removed, remembered for [`REMEMBERED`].
struct Removed {
    session: String,
    why: String,
    at: Instant,
}

/// The state the registry owns.
struct Registry {
    runner: String,
    bus: Bus,
    /// Where kept cells' files go.
    files: FileStores,
    cancel: CancellationToken,
    containers: HashMap<String, Entry>,
    /// Each task returns why its container went.
    tasks: JoinSet<String>,
    task_keys: HashMap<tokio::task::Id, String>,
    /// Keys whose containers were removed, and why.
    removed: HashMap<String, Removed>,
}

impl Registry {
    async fn run(mut self, mut inbox: mpsc::Receiver<Command>) {
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                command = inbox.recv() => match command {
                    None => break,
                    Some(command) => self.handle(command),
                },
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    let (id, why) = match done {
                        Ok((id, why)) => (id, why),
                        Err(e) => {
                            tracing::error!(error = %e, "a kept container's task failed");
                            (e.id(), "its task failed".to_string())
                        }
                    };
                    self.forget(id, why);
                }
            }
        }
        // Each kept container sees the cancel (or the end of its inbox) and
        // removes itself; wait for all of them.
        drop(inbox);
        for entry in self.containers.values() {
            entry.end.cancel();
        }
        while let Some(done) = self.tasks.join_next_with_id().await {
            let id = done.map(|(id, _)| id).unwrap_or_else(|e| e.id());
            self.forget(id, String::new());
        }
        tracing::debug!("kept containers removed");
    }

    fn forget(&mut self, task: tokio::task::Id, why: String) {
        let Some(key) = self.task_keys.remove(&task) else { return };
        if let Some(entry) = self.containers.remove(&key) {
            for waiter in entry.ended {
                let _ = waiter.send(true);
            }
            self.remember(key, entry.session, entry.why.unwrap_or(why));
        }
    }

    /// Make room for one more kept container of `session`, which may hold
    /// at most `most`: remove its containers unused the longest until it
    /// holds fewer.
    fn make_room(&mut self, session: &str, most: usize) {
        loop {
            let live: Vec<(&String, &Entry)> =
                self.containers.iter().filter(|(_, e)| e.session == session && e.why.is_none()).collect();
            if live.len() < most.max(1) {
                return;
            }
            let Some(oldest) = live.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| (*k).clone()) else { return };
            if let Some(entry) = self.containers.get_mut(&oldest) {
                tracing::info!(%session, most, "a kept container makes room for a newer one of its session");
                entry.why = Some(format!(
                    "a newer kept session of this client took its place: it may hold {most} at once (--max-handles)"
                ));
                entry.end.cancel();
            }
        }
    }

    /// Remember why `key`'s container went, forgetting keys older than
    /// [`REMEMBERED`] and, past [`MAX_REMEMBERED`], the oldest.
    fn remember(&mut self, key: String, session: String, why: String) {
        let now = Instant::now();
        self.removed.retain(|_, r| now.duration_since(r.at) < REMEMBERED);
        if self.removed.len() >= MAX_REMEMBERED
            && let Some(oldest) = self.removed.iter().min_by_key(|(_, r)| r.at).map(|(k, _)| k.clone())
        {
            self.removed.remove(&oldest);
        }
        self.removed.insert(key, Removed { session, why, at: now });
    }

    /// Why a cell of `session` cannot run under `key`, which names no live
    /// container of that session.
    fn refusal(&self, key: &str, session: &str) -> KeptError {
        match self.containers.get(key) {
            Some(e) if e.session != session => return KeptError::Foreign,
            // Being removed by the registry.
            Some(Entry { why: Some(why), .. }) => return KeptError::Expired { why: why.clone() },
            _ => {}
        }
        match self.removed.get(key) {
            Some(removed) if removed.session != session => KeptError::Foreign,
            Some(removed) if Instant::now().duration_since(removed.at) < REMEMBERED => {
                KeptError::Expired { why: removed.why.clone() }
            }
            _ => KeptError::Lost,
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Adopt { ready, permit, lifetime, cell, deadline, progress, cancel, reply } => {
                let key = uuid::Uuid::new_v4().simple().to_string();
                let session = cell.session.clone();
                if let Some(most) = cell.keep.as_ref().and_then(|k| k.most) {
                    self.make_room(&session, most as usize);
                }
                let (cells, inbox) = mpsc::channel(CELLS);
                let end = self.cancel.child_token();
                let (container, streams, warm) = ready.into_parts();
                let cell = *cell;
                tracing::info!(session = %cell.session, container = %container.id(), warm, "a kept session's container starts");
                let actor = KeptActor {
                    kept: KeptContainer { runner: self.runner.clone(), key: key.clone() },
                    session: session.clone(),
                    container,
                    streams,
                    _permit: permit,
                    lifetime,
                    born: Instant::now(),
                    bus: self.bus.clone(),
                    shutdown: self.cancel.clone(),
                    end: end.clone(),
                    between: 0,
                    files: SessionFiles::new(self.files.clone()),
                };
                let first = KeptCell { cell, deadline, progress, cancel, reply };
                let _ = cells.try_send(first);
                let task = self.tasks.spawn(actor.run(inbox));
                self.task_keys.insert(task.id(), key.clone());
                let entry = Entry { session, cells, end, ended: Vec::new(), used: Instant::now(), why: None };
                self.containers.insert(key, entry);
            }
            Command::Run { cell, deadline, progress, cancel, reply } => {
                let key = cell.keep.as_ref().and_then(|k| k.key.clone()).unwrap_or_default();
                let refusal = self.refusal(&key, &cell.session);
                let Some(entry) =
                    self.containers.get_mut(&key).filter(|e| e.session == cell.session && e.why.is_none())
                else {
                    let _ = reply.send(Err(refusal));
                    return;
                };
                entry.used = Instant::now();
                match entry.cells.try_send(KeptCell { cell: *cell, deadline, progress, cancel, reply }) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(cell)) => {
                        let _ = cell.reply.send(Err(KeptError::Busy));
                    }
                    Err(mpsc::error::TrySendError::Closed(cell)) => {
                        let _ = cell.reply.send(Err(KeptError::Lost));
                    }
                }
            }
            Command::End { session, key, reply } => match self.containers.get_mut(&key) {
                Some(entry) if entry.session == session => {
                    entry.end.cancel();
                    entry.ended.push(reply);
                }
                _ => {
                    let _ = reply.send(false);
                }
            },
            Command::Count { reply } => {
                let _ = reply.send(self.containers.len());
            }
        }
    }
}

/// A cell for a kept container, and where its outcome goes.
struct KeptCell {
    cell: RunCell,
    deadline: Instant,
    /// Where the code's progress goes for its lease to say.
    progress: Progress,
    /// The cell's own cancel (its request is gone).
    cancel: CancellationToken,
    reply: oneshot::Sender<Result<CellRan, KeptError>>,
}

/// The task that owns one kept container.
struct KeptActor {
    kept: KeptContainer,
    session: String,
    container: Container,
    streams: Streams,
    /// The runner's slot, held for the container's life.
    _permit: Slot,
    lifetime: Lifetime,
    born: Instant,
    bus: Bus,
    shutdown: CancellationToken,
    /// Fires on shutdown too (a child of it).
    end: CancellationToken,
    /// Bytes the container sent since its last cell ended.
    between: usize,
    /// The files its cells handed out (issue 42).
    files: SessionFiles,
}

/// Why a kept container ended.
enum Gone {
    Idle,
    PastMax,
    Stopped,
    Ended,
    Shutdown,
    Flood,
    Violation(Violation),
    Died,
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gone::Idle => f.write_str("no run within its idle time (--session-idle)"),
            Gone::PastMax => f.write_str("it reached its longest life (--session-max)"),
            Gone::Stopped => f.write_str("a run in it was stopped"),
            Gone::Ended => f.write_str("its session ended"),
            Gone::Shutdown => f.write_str("shutting down"),
            Gone::Flood => f.write_str("it sent more than a cell's output limit between cells"),
            Gone::Violation(v) => write!(f, "protocol violation between cells: {v}"),
            Gone::Died => f.write_str("it died between cells"),
        }
    }
}

impl KeptActor {
    /// Run the session's cells until the container goes; returns why.
    async fn run(mut self, mut cells: mpsc::Receiver<KeptCell>) -> String {
        let mut idle_until = Instant::now() + self.lifetime.idle;
        let last_moment = self.born + self.lifetime.max;
        // Between cells, the limits of the last cell apply.
        let mut stop_output = usize::MAX;
        // Over NATS the session's files are written to the bucket again
        // while it lives (`kept_files`).
        let every = self.files.refresh_every().unwrap_or(Duration::from_secs(3600));
        let mut refresh = tokio::time::interval_at(Instant::now() + every, every);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let gone = loop {
            tokio::select! {
                _ = refresh.tick() => self.files.refresh(),
                _ = self.end.cancelled() => {
                    break if self.shutdown.is_cancelled() { Gone::Shutdown } else { Gone::Ended };
                }
                _ = tokio::time::sleep_until(idle_until.min(last_moment)) => {
                    break if idle_until <= last_moment { Gone::Idle } else { Gone::PastMax };
                }
                next = cells.recv() => {
                    let Some(KeptCell { cell, deadline, progress, cancel, reply }) = next else { break Gone::Ended };
                    stop_output = cell.limits.stop_output as usize;
                    let (report, lives) = self.run_cell(&cell, deadline, progress, &cancel).await;
                    let past_max = self.born.elapsed() >= self.lifetime.max;
                    let kept = (lives && !past_max).then(|| self.kept.clone());
                    let _ = reply.send(Ok(CellRan { report, kept }));
                    if !lives {
                        break Gone::Stopped;
                    }
                    if past_max {
                        break Gone::PastMax;
                    }
                    idle_until = Instant::now() + self.lifetime.idle;
                    self.between = 0;
                }
                chunk = self.streams.output.next() => {
                    if let Err(gone) = self.between_cells(chunk, stop_output).await {
                        break gone;
                    }
                }
            }
        };
        let id = self.container.id().to_string();
        tracing::info!(session = %self.session, container = %id, why = %gone, "a kept session's container is removed");
        self.container.remove().await;
        self.files.end();
        gone.to_string()
    }

    /// Run one cell; the report, and whether the container lives on.
    async fn run_cell(
        &mut self,
        cell: &RunCell,
        deadline: Instant,
        progress: Progress,
        cancel: &CancellationToken,
    ) -> (CellReport, bool) {
        let started = std::time::Instant::now();
        let mut run = Run::new(cell, progress);
        self.files.prepare(&mut run);
        let pauser = self.container.pauser();
        let bounds =
            cell::KeptBounds { idle: self.lifetime.idle, left: self.lifetime.max.saturating_sub(self.born.elapsed()) };
        let stops = cell::Stops { shutdown: &self.end, cancel };
        let end = cell::run_in(&mut run, &mut self.streams, Some(bounds), &self.bus, deadline, stops, pauser).await;
        let lives = matches!(end, End::Done { stopped: false, .. });
        let died = if matches!(end, End::Died) { self.container.exit_state().await } else { None };
        tracing::info!(cell = %cell.cell_id, identity = cell.identity.as_deref().unwrap_or("anonymous"), container = %self.container.id(), kept = true, elapsed_ms = started.elapsed().as_millis() as u64, end = ?end, "cell ended");
        code_mode_telemetry::cell_ended(cell::outcome(&end), started.elapsed());
        let mut report = cell::report_of(run, end, died);
        self.files.record(&report);
        if !lives {
            let error = report.error.take().unwrap_or_else(|| "stopped".into());
            report.error = Some(format!(
                "{error}\n(the session's sandbox was removed with this run: the next run starts in a fresh one, \
                 without the variables, imports and files of earlier runs)"
            ));
        }
        (report, lives)
    }

    /// What the container sent while no cell ran: text is dropped, a call
    /// is refused without reaching the bridge; anything else, a flood, or
    /// the end of the stream ends the container.
    async fn between_cells(
        &mut self,
        chunk: Option<Result<bollard::container::LogOutput, bollard::errors::Error>>,
        stop_output: usize,
    ) -> Result<(), Gone> {
        let bytes: Bytes = match chunk {
            Some(Ok(bollard::container::LogOutput::StdOut { message })) => message,
            Some(Ok(_)) => return Ok(()),
            Some(Err(_)) | None => return Err(Gone::Died),
        };
        self.between = self.between.saturating_add(bytes.len());
        if self.between > stop_output {
            return Err(Gone::Flood);
        }
        let max = self.streams.lines.as_ref().map_or(code_mode_core::defaults::MAX_LINE as usize, |l| l.max());
        let lines = self.streams.lines(max).feed(&bytes).map_err(Gone::Violation)?;
        for line in lines {
            match protocol::parse(&line).map_err(Gone::Violation)? {
                // Between cells nothing is handed back and nobody listens
                // for progress.
                FromRunner::Output { .. }
                | FromRunner::Content { .. }
                | FromRunner::Progress { .. }
                | FromRunner::File { .. }
                | FromRunner::FileData { .. }
                | FromRunner::FileNote { .. }
                | FromRunner::OutputKept { .. } => {}
                FromRunner::Call { id, tool, .. } => {
                    tracing::info!(session = %self.session, %tool, "refused a call made while no cell runs");
                    let message = format!("{tool}: no cell is running: a call made between cells is refused");
                    self.streams.send(&wire::to_code(id, ToolReply::Refused { message })).await;
                }
                // Code left running between cells ranks by words alone.
                FromRunner::Meaning { id, .. } => {
                    self.streams.send(&protocol::ToRunner::Meaning { id, near: None }).await;
                }
                FromRunner::Ready {} | FromRunner::Done { .. } => {
                    return Err(Gone::Violation(Violation::OutOfOrder("a message between cells")));
                }
            }
        }
        Ok(())
    }
}
