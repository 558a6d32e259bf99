//! One run of one cell: bringing a started container to `ready`, then the
//! task that owns it until its removal.
//!
//! [`ReadyContainer::start`] creates, attaches and starts a container and
//! waits for the runner's `ready` line. The warm pool ([`crate::pool`]) does
//! that ahead of need and a cold cell does it on the spot, so every run
//! begins the same way: with a container whose runner waits for its cell.
//!
//! [`run`] sends the cell, reads the container's protocol lines as untrusted
//! input, relays each tool call to the bridge in its own task (so
//! `asyncio.gather` runs calls concurrently), writes results back, keeps at
//! most the configured output, and ends the run at `done`, at the deadline,
//! on a protocol violation, when the container dies, or on shutdown. The
//! report is made as soon as the code can do nothing more (at `done`, after
//! which nothing of the container is read or relayed; on any other end once
//! the container is killed), and the container's kill and removal are
//! handed to the runner's [`Remover`], off the cell's path. The
//! container is removed on every path, including when it never became ready.

use std::collections::HashSet;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use code_mode_core::bus::Bus;
use code_mode_core::lease::Progress;
use code_mode_proto::{CellReport, Op, RunCell, Target, ToolCall, ToolReply, subjects};
use code_mode_telemetry::CellOutcome;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::container::{BACKSTOP_MARGIN, Container, Input, Lockdown, Output};
use crate::error::SandboxError;
use crate::hold::{Hold, Pauser};
use crate::protocol::{self, Backstop, FromRunner, LineReader, RunnerLimits, ToRunner, Violation};
use crate::remover::Remover;
use crate::wire;

/// Bytes of the container's stderr kept for diagnostics (it is /dev/null
/// once the runner is up, so only start-up failures land there).
const STDERR_KEPT: usize = 2048;
/// Longest line accepted before `ready`: the only valid line then is
/// `{"type": "ready"}`.
const READY_LINE_MAX: usize = 1024;

/// A started container whose runner has sent `ready` and waits for its
/// cell. It runs exactly one cell ([`run`] consumes it); dropped unused, it
/// is removed in the background.
pub struct ReadyContainer {
    container: Container,
    output: Output,
    input: Input,
    warm: bool,
    /// When its runner said `ready`: it ends by itself
    /// [`crate::container::UNCLAIMED`] after its start unless it gets a cell.
    ready_at: Instant,
}

impl std::fmt::Debug for ReadyContainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadyContainer").field("id", &self.id()).field("warm", &self.warm).finish()
    }
}

/// Why a container did not become ready. It has been removed already.
#[derive(Debug)]
pub enum NotReady {
    /// It could not be created, attached or started.
    Start(SandboxError),
    /// No `ready` before the deadline.
    Deadline,
    /// Something other than `ready` came first.
    Violation(Violation),
    /// It exited (exit code, OOM-killed) or closed its output first.
    Died(Option<(i64, bool)>),
    /// Shutdown came first.
    Shutdown,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Start(e) => write!(f, "{e}"),
            NotReady::Deadline => f.write_str("the runner sent no ready in time"),
            NotReady::Violation(v) => write!(f, "protocol violation: {v}"),
            NotReady::Died(state) => f.write_str(&died_message(*state, false)),
            NotReady::Shutdown => f.write_str("shutting down"),
        }
    }
}

impl NotReady {
    /// The report of a cell whose container never became ready; a container
    /// that could not even be started is an error of the runner instead.
    pub fn into_report(self, cell: &RunCell) -> Result<CellReport, SandboxError> {
        let (end, died) = match self {
            NotReady::Start(e) => {
                code_mode_telemetry::cell_ended_without_run(CellOutcome::StartFailed);
                return Err(e);
            }
            NotReady::Deadline => (End::Deadline, None),
            NotReady::Violation(v) => (End::Violation(v), None),
            NotReady::Died(state) => (End::Died, state),
            NotReady::Shutdown => (End::Shutdown, None),
        };
        code_mode_telemetry::cell_ended_without_run(outcome(&end));
        let (error, stopped) = end_message(end, cell, died, false);
        Ok(CellReport { error, stopped, ..CellReport::default() })
    }
}

impl ReadyContainer {
    /// Create, attach and start a container (labelled with `cell`, the cell
    /// it is for, or a placeholder for a warm one), then wait for its
    /// runner's `ready` until `until`. On any failure the container is
    /// removed before this returns.
    pub async fn start(
        docker: &Docker,
        lockdown: &Lockdown,
        cell: &str,
        until: Instant,
        cancel: &CancellationToken,
    ) -> Result<ReadyContainer, NotReady> {
        let (container, mut output, input) = Container::start(docker, lockdown, cell).await.map_err(NotReady::Start)?;
        let mut lines = LineReader::new(READY_LINE_MAX);
        let mut stderr: Vec<u8> = Vec::new();
        let failed = loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break NotReady::Deadline,
                _ = cancel.cancelled() => break NotReady::Shutdown,
                chunk = output.next() => {
                    let bytes = match chunk {
                        Some(Ok(LogOutput::StdOut { message })) => message,
                        Some(Ok(LogOutput::StdErr { message })) => {
                            let room = STDERR_KEPT.saturating_sub(stderr.len());
                            stderr.extend_from_slice(&message[..message.len().min(room)]);
                            continue;
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => {
                            tracing::warn!(container = %container.id(), error = %e, "attach stream failed before ready");
                            break NotReady::Died(None);
                        }
                        None => break NotReady::Died(None),
                    };
                    let parsed = match lines.feed(&bytes) {
                        Ok(parsed) => parsed,
                        Err(v) => break NotReady::Violation(v),
                    };
                    let Some(first) = parsed.first() else { continue };
                    match protocol::parse(first) {
                        // The runner waits for its cell after `ready`: nothing may follow it yet.
                        Ok(FromRunner::Ready {}) if parsed.len() == 1 && !lines.has_partial() => {
                            return Ok(ReadyContainer { container, output, input, warm: false, ready_at: Instant::now() });
                        }
                        Ok(FromRunner::Ready {}) => {
                            break NotReady::Violation(Violation::OutOfOrder("a message between ready and the cell"));
                        }
                        Ok(_) => break NotReady::Violation(Violation::OutOfOrder("a message before ready")),
                        Err(v) => break NotReady::Violation(v),
                    }
                }
            }
        };
        let failed = match failed {
            NotReady::Died(_) => {
                if !stderr.is_empty() {
                    tracing::warn!(container = %container.id(), stderr = %String::from_utf8_lossy(&stderr), "sandbox stderr");
                }
                NotReady::Died(container.exit_state().await)
            }
            other => other,
        };
        container.remove().await;
        Err(failed)
    }

    /// The container id.
    pub fn id(&self) -> &str {
        self.container.id()
    }

    /// True when it came from the warm pool.
    pub fn is_warm(&self) -> bool {
        self.warm
    }

    /// When its runner said `ready`.
    pub(crate) fn ready_at(&self) -> Instant {
        self.ready_at
    }

    /// Mark it as kept in the warm pool.
    pub(crate) fn into_warm(self) -> Self {
        Self { warm: true, ..self }
    }

    /// The output stream, for the pool to notice a container that dies (or
    /// speaks out of turn) while it waits.
    pub(crate) fn output_mut(&mut self) -> &mut Output {
        &mut self.output
    }

    /// Kill and remove it unused.
    pub async fn remove(self) {
        self.container.remove().await;
    }

    /// The container and its attach streams, for an owner that runs
    /// several cells in it ([`crate::kept`]).
    pub(crate) fn into_parts(self) -> (Container, Streams, bool) {
        (self.container, Streams { output: self.output, input: self.input, lines: None }, self.warm)
    }
}

/// A ready container's attach streams, and the line reader that splits its
/// output (kept across the cells of a kept container, so a line cut
/// between two chunks is never lost).
pub(crate) struct Streams {
    pub output: Output,
    pub input: Input,
    pub lines: Option<LineReader>,
}

impl Streams {
    /// The line reader, made on first use, accepting lines of `max` bytes.
    pub fn lines(&mut self, max: usize) -> &mut LineReader {
        let lines = self.lines.get_or_insert_with(|| LineReader::new(max));
        lines.set_max(max);
        lines
    }

    /// Write one message; a write error means the container is gone, which
    /// the output side notices.
    pub async fn send(&mut self, message: &ToRunner<'_>) {
        self.send_line(&protocol::encode(message)).await;
    }

    /// Write one encoded message (with its newline), as [`Streams::send`].
    pub async fn send_line(&mut self, line: &[u8]) {
        let _ = self.input.write_all(line).await;
        let _ = self.input.flush().await;
    }
}

/// How one run ended, before it becomes a [`CellReport`].
#[derive(Debug)]
pub(crate) enum End {
    Done {
        error: Option<String>,
        truncated: bool,
        stopped: bool,
    },
    Deadline,
    Violation(Violation),
    Died,
    Shutdown,
    /// The request that ran the cell was cancelled (or its client went
    /// away).
    Cancelled,
}

/// What may stop a run before its end: the runner's shutdown, and the
/// cancel of the request that ran the cell (`codemode.v1.cell.cancel.<cell>`).
#[derive(Debug, Clone, Copy)]
pub struct Stops<'a> {
    /// The runner (or the kept session) is shutting down.
    pub shutdown: &'a CancellationToken,
    /// The cell's own cancel.
    pub cancel: &'a CancellationToken,
}

/// Where what a run leaves goes: its container (to the runner's remover,
/// or removed on the cell's path without one) and the files its code wrote
/// (to the store shared with the frontend, or dropped with a note).
#[derive(Debug, Clone, Copy, Default)]
pub struct Leftovers<'a> {
    /// The runner's remover.
    pub remover: Option<&'a Remover>,
    /// The store of kept files.
    pub files: Option<&'a code_mode_core::files::FileStore>,
    /// Over NATS: where files in past the bridge's reply bound come from.
    pub inputs: Option<&'a code_mode_core::files_in_shared::SharedInputs>,
}

/// The state of one run that the loop owns.
pub(crate) struct Run<'a> {
    cell: &'a RunCell,
    output: String,
    truncated: bool,
    calls_seen: HashSet<u64>,
    calls_sent: u32,
    /// Questions by meaning asked (not calls: no budget of the cell's).
    meaning_asks: u32,
    timing: Timing,
    /// What the code handed back to the model, and its bytes of data.
    content: Vec<serde_json::Value>,
    content_bytes: usize,
    /// Where the code's progress goes for the cell's lease to say.
    progress: Progress,
    /// The files of its output folder (issue 42).
    pub(crate) files: crate::files::Collector,
    /// Over NATS: where its files in past the bridge's reply bound come
    /// from (issue 42).
    pub(crate) inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
}

/// When the phases of one run happened, for `codemode_cell_phase_seconds`.
#[derive(Debug, Default)]
struct Timing {
    /// Writing the cell into the container took this.
    deliver: Option<Duration>,
    /// The first line back came this long after delivery.
    first_line: Option<Duration>,
    /// When the cell had been written.
    delivered: Option<std::time::Instant>,
}

impl Timing {
    /// Record the phases of a fresh container's run: `ran` from sending
    /// the cell to the end of the run, `killed` the kill on the cell's path
    /// (a run that ended at `done` is killed by the remover, off the path).
    fn record(&self, ran: Duration, killed: Option<Duration>) {
        use code_mode_telemetry::{Phase, cell_phase};
        if let Some(deliver) = self.deliver {
            cell_phase(Phase::Deliver, deliver);
        }
        if let Some(first) = self.first_line {
            cell_phase(Phase::FirstOutput, first);
        }
        cell_phase(Phase::Done, ran);
        if let Some(killed) = killed {
            cell_phase(Phase::Kill, killed);
        }
    }
}

impl<'a> Run<'a> {
    /// A run of `cell` that has printed nothing yet.
    pub fn new(cell: &'a RunCell, progress: Progress) -> Self {
        Run {
            cell,
            output: String::new(),
            truncated: false,
            calls_seen: HashSet::new(),
            calls_sent: 0,
            meaning_asks: 0,
            timing: Timing::default(),
            content: Vec::new(),
            content_bytes: 0,
            progress,
            files: crate::files::Collector::default(),
            inputs: None,
        }
    }

    /// Keep printed text up to the limit, on a character boundary.
    fn keep_output(&mut self, data: &str) {
        let room = (self.cell.limits.max_output as usize).saturating_sub(self.output.len());
        if data.len() <= room {
            self.output.push_str(data);
            return;
        }
        let mut end = room;
        while !data.is_char_boundary(end) {
            end -= 1;
        }
        self.output.push_str(&data[..end]);
        self.truncated = true;
    }
}

/// Run one cell in a ready container until `deadline` and report it; the
/// container goes to `remover` (or is removed here without one).
///
/// The report waits for nothing the code can still change. At `done` the
/// runner has stopped reading its channel's input and exits (it is the
/// container's init, so every process of the code goes with it); from then
/// on nothing of the container is read and no call of it is relayed, so
/// even code that forged a `done` and kept running can no longer reach
/// anything outside its container, and the remover kills it first thing.
/// On any other end the code may still be running: the container is killed
/// before the report says it was stopped.
pub async fn run(
    ready: ReadyContainer,
    cell: &RunCell,
    bus: &Bus,
    deadline: Instant,
    stops: Stops<'_>,
    leftovers: Leftovers<'_>,
    progress: Progress,
) -> CellReport {
    let Leftovers { remover, files, inputs } = leftovers;
    let (container, streams, warm) = ready.into_parts();
    let mut streams = streams;
    let mut run = Run::new(cell, progress);
    run.files.store = files.cloned();
    run.inputs = inputs.cloned();
    // With somewhere to keep it, the whole printed output is kept too.
    if files.is_some() {
        run.files.output_bound = code_mode_proto::MAX_OUTPUT_KEPT;
    }
    let started = std::time::Instant::now();
    let end = run_in(&mut run, &mut streams, None, bus, deadline, stops, container.pauser()).await;
    let ran = started.elapsed();
    // Nothing of it is read from here on.
    drop(streams);
    let died = if matches!(end, End::Died) { container.exit_state().await } else { None };
    let killed = !matches!(end, End::Done { .. });
    let kill = if killed {
        let stopping = std::time::Instant::now();
        container.kill().await;
        Some(stopping.elapsed())
    } else {
        None
    };
    run.timing.record(ran, kill);
    let id = container.id().to_string();
    match remover {
        Some(remover) => remover.remove(container, killed).await,
        None => container.remove().await,
    }
    tracing::info!(
        cell = %cell.cell_id,
        identity = cell.identity.as_deref().unwrap_or("anonymous"),
        container = %id,
        warm,
        elapsed_ms = started.elapsed().as_millis() as u64,
        ran_us = ran.as_micros() as u64,
        killed,
        end = ?end,
        "cell ended"
    );
    code_mode_telemetry::cell_ended(outcome(&end), started.elapsed());
    report_of(run, end, died)
}

/// Run `run` (one cell, fresh or kept, from its lease to its report) in its
/// trace span `cell.run`, a child of the frontend's `cell` (the bus runs
/// this handler under the frontend's context): every call the cell makes
/// is relayed from within it, so the bridge's spans are its children.
pub(crate) async fn traced(
    cell: &RunCell,
    run: impl std::future::Future<Output = Result<code_mode_proto::CellRan, SandboxError>>,
) -> Result<code_mode_proto::CellRan, SandboxError> {
    use code_mode_telemetry::trace;
    use tracing::Instrument;
    let span = trace::cell_run_span(&cell.cell_id, cell.keep.is_some());
    let ran = run.instrument(span.clone()).await;
    match &ran {
        Ok(ran) if ran.report.stopped => trace::ended(&span, "stopped", None),
        Ok(ran) if ran.report.error.is_some() => trace::ended(&span, "error", None),
        Ok(_) => trace::ended(&span, "ok", None),
        Err(e) => trace::ended(&span, "failed", Some(wire::service_error(e).kind.as_str())),
    }
    ran
}

/// What a kept container's runner is told of its session, for its
/// backstops: the session's idle time and the rest of its longest life.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeptBounds {
    pub idle: Duration,
    pub left: Duration,
}

/// The backstop of a run ending at `deadline` (held at most `allowance`),
/// and of the session it belongs to: each bound plus [`BACKSTOP_MARGIN`].
pub(crate) fn backstop(deadline: Instant, allowance: Duration, kept: Option<KeptBounds>) -> Backstop {
    let run = deadline.saturating_duration_since(Instant::now()) + allowance + BACKSTOP_MARGIN;
    Backstop {
        run: run.as_secs_f64(),
        between: kept.map(|k| (k.idle + BACKSTOP_MARGIN).as_secs_f64()),
        session: kept.map(|k| (k.left + BACKSTOP_MARGIN).as_secs_f64()),
    }
}

/// Send `cell` to the runner in the container (`kept`: it stays for the
/// session's next cell) and drive it to its end.
pub(crate) async fn run_in(
    run: &mut Run<'_>,
    streams: &mut Streams,
    kept: Option<KeptBounds>,
    bus: &Bus,
    deadline: Instant,
    stops: Stops<'_>,
    pauser: Pauser,
) -> End {
    let cell = run.cell;
    // While a call waits for a person the bridge holds the cell: paused,
    // its deadline stopped, for at most the approval timeout in all.
    let allowance = Duration::from_millis(cell.limits.approval_timeout_ms);
    // Output kept whole is kept up to its bound, and the flood stop moves
    // there (issue 42): a run is not stopped short of what it may keep.
    let keep_output = u32::try_from(run.files.output_bound).unwrap_or(u32::MAX);
    // Files in (issue 42): read before the code starts; one that cannot be
    // had ends the cell here, naming it. Each read waits as a call of the
    // code would, and never past the run's deadline (plus what a person's
    // approval may add): the frontend waits no longer for the report, and
    // would take a runner still waiting on a lost bridge for a lost runner.
    let call_wait = Duration::from_millis(cell.limits.call_timeout_ms.saturating_add(cell.limits.approval_timeout_ms))
        + code_mode_core::defaults::HOP_MARGIN;
    let wait = crate::files_in::Wait { call: call_wait, until: deadline + allowance };
    let inputs = match crate::files_in::resolve(cell, &mut run.calls_sent, bus, wait, run.inputs.as_ref()).await {
        Ok(inputs) => inputs,
        Err(error) => return End::Done { error: Some(error), truncated: false, stopped: false },
    };
    let message = ToRunner::Cell {
        code: &cell.code,
        tools: &cell.tools,
        withheld: &cell.withheld,
        limits: RunnerLimits {
            max_output: cell.limits.max_output,
            stop_output: cell.limits.stop_output.max(keep_output),
            max_line: cell.limits.max_line,
            keep_output,
        },
        keep: kept.is_some(),
        inputs: &inputs.iter().map(|input| input.file.clone()).collect::<Vec<_>>(),
    };
    let sending = std::time::Instant::now();
    streams.send_line(&protocol::encode_cell(&message, backstop(deadline, allowance, kept))).await;
    // The files' bytes follow the message, raw (issue 42).
    for input in inputs {
        streams.send_line(&input.bytes).await;
    }
    run.timing.deliver = Some(sending.elapsed());
    run.timing.delivered = Some(std::time::Instant::now());
    // A call may first wait for a person's approval, then for the server.
    let call_timeout =
        Duration::from_millis(cell.limits.call_timeout_ms.saturating_add(cell.limits.approval_timeout_ms));
    let stop = CancellationToken::new();
    let _serving = stop.clone().drop_guard();
    let hold = match allowance.is_zero() {
        true => Hold::none(),
        false => Hold::serve(bus, cell, pauser, allowance, run.progress.clone(), stop).await,
    };
    let end = drive(run, streams, bus, Clock { base: deadline, hold: &hold }, call_timeout, stops).await;
    hold.finish().await;
    end
}

/// A cell's deadline: `base` plus the time it was held.
struct Clock<'a> {
    base: Instant,
    hold: &'a Hold,
}

impl Clock<'_> {
    /// When to look at the deadline next: the deadline, or in a second
    /// while the cell is held.
    async fn next(&self) -> Instant {
        match self.hold.deadline(self.base).await {
            Some(at) => at,
            None => Instant::now() + Duration::from_secs(1),
        }
    }

    /// At a wake-up: true when the deadline has passed. While the cell is
    /// held, lapsed holds are dropped instead.
    async fn passed(&self) -> bool {
        match self.hold.deadline(self.base).await {
            Some(at) => at <= Instant::now(),
            None => {
                self.hold.lapse().await;
                false
            }
        }
    }
}

/// The report of a run that ended with `end` (`died`: the exit state of a
/// container that died).
pub(crate) fn report_of(mut run: Run<'_>, end: End, died: Option<(i64, bool)>) -> CellReport {
    // Code that broke the protocol hands nothing back, even blocks that
    // passed their checks before it did.
    if matches!(end, End::Violation(_)) {
        run.content.clear();
        run.files = crate::files::Collector::default();
    }
    let (error, stopped) = match end {
        End::Done { error, truncated, stopped } => {
            run.truncated |= truncated;
            (error, stopped)
        }
        end => end_message(end, run.cell, died, true),
    };
    let (files, files_notes) = run.files.finish(run.cell.identity.as_deref().unwrap_or_default(), stopped);
    CellReport {
        stdout: run.output,
        error,
        truncated: run.truncated,
        stopped,
        content: run.content,
        files,
        files_notes,
    }
}

/// The error and `stopped` of a run: `died` is the exit state of a container
/// that died, `ready` whether its runner had sent `ready`.
pub(crate) fn end_message(end: End, cell: &RunCell, died: Option<(i64, bool)>, ready: bool) -> (Option<String>, bool) {
    let deadline_s = cell.limits.deadline_ms as f64 / 1000.0;
    match end {
        End::Done { error, stopped, .. } => (error, stopped),
        End::Deadline => {
            (Some(format!("stopped: the run passed its {deadline_s} s deadline. {}", longer_job(cell))), true)
        }
        End::Violation(v) => (Some(format!("stopped: protocol violation: {v}")), true),
        End::Died => (Some(died_message(died, ready)), true),
        End::Shutdown => (Some("stopped: code-mode is shutting down".into()), true),
        End::Cancelled => (Some("stopped: the request that ran this code was cancelled".into()), true),
    }
}

/// What to do with a job longer than one run's deadline, after a run
/// stopped at it: the code cannot change the deadline, so it is told how
/// to split the work (a kept session's variables carry it from run to
/// run) and who can.
fn longer_job(cell: &RunCell) -> &'static str {
    match cell.keep {
        Some(_) => {
            "For a longer job, do it in shorter runs: this session keeps its variables from one run to the next; \
             the operator of code-mode can give every run longer with --deadline."
        }
        None => {
            "For a longer job, do it in shorter runs, each printing what the next needs (a run keeps nothing); the \
             operator of code-mode can keep variables between runs (--keep-variables) or give every run longer \
             (--deadline)."
        }
    }
}

/// The `outcome` label of a run's end.
pub(crate) fn outcome(end: &End) -> CellOutcome {
    match end {
        End::Done { error: None, .. } => CellOutcome::Finished,
        End::Done { .. } => CellOutcome::Error,
        End::Deadline => CellOutcome::Deadline,
        End::Violation(_) => CellOutcome::Violation,
        End::Died => CellOutcome::Died,
        End::Shutdown => CellOutcome::Shutdown,
        End::Cancelled => CellOutcome::Cancelled,
    }
}

fn died_message(state: Option<(i64, bool)>, ready: bool) -> String {
    match state {
        Some((_, true)) => "stopped: the sandbox ran out of memory and was killed".into(),
        Some((code, false)) if !ready => format!("stopped: the sandbox runner failed to start (exit code {code})"),
        Some((code, false)) => format!("stopped: the sandbox exited (code {code}) before the code finished"),
        None => "stopped: the sandbox closed its channel before the code finished".into(),
    }
}

async fn drive(
    run: &mut Run<'_>,
    streams: &mut Streams,
    bus: &Bus,
    clock: Clock<'_>,
    call_timeout: Duration,
    stops: Stops<'_>,
) -> End {
    let max_line = run.cell.limits.max_line as usize;
    let mut calls: JoinSet<Relayed> = JoinSet::new();
    let end = loop {
        let wake = clock.next().await;
        tokio::select! {
            // In order: a cancel or shutdown that has fired wins over output
            // read at the same time (the code may end on an error the cancel
            // caused, such as its approval refused, while this loop waited on
            // the hold's pause or resume): the run then ends as cancelled.
            biased;
            _ = tokio::time::sleep_until(wake) => {
                if clock.passed().await {
                    break End::Deadline;
                }
            }
            _ = stops.shutdown.cancelled() => break End::Shutdown,
            // The calls in flight are cancelled at their servers by the
            // bridge, which hears the same cancel; here they are dropped.
            _ = stops.cancel.cancelled() => break End::Cancelled,
            Some(done) = calls.join_next(), if !calls.is_empty() => {
                let Ok((answer, read_at)) = done else { continue };
                streams.send(&answer).await;
                if let Some(read_at) = read_at {
                    code_mode_telemetry::tool_call_host(read_at.elapsed());
                }
            }
            chunk = streams.output.next() => {
                // When the chunk holding a call line was read: the host
                // side of that call counts from here.
                let read_at = std::time::Instant::now();
                let bytes = match chunk {
                    Some(Ok(LogOutput::StdOut { message })) => message,
                    // stderr is /dev/null once the runner is up.
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        tracing::warn!(cell = %run.cell.cell_id, error = %e, "attach stream failed");
                        break End::Died;
                    }
                    None => break End::Died,
                };
                let parsed = match streams.lines(max_line).feed(&bytes) {
                    Ok(l) => l,
                    Err(v) => break End::Violation(v),
                };
                if run.timing.first_line.is_none() && !parsed.is_empty() {
                    run.timing.first_line = run.timing.delivered.map(|at| at.elapsed());
                }
                let mut finished = None;
                for line in parsed {
                    match handle_line(run, &line, streams, &mut calls, bus, call_timeout, read_at).await {
                        Ok(None) => {}
                        Ok(Some(end)) => { finished = Some(end); break; }
                        Err(v) => { finished = Some(End::Violation(v)); break; }
                    }
                }
                if let Some(end) = finished { break end; }
            }
        }
    };
    calls.abort_all();
    end
}

/// The line answering a relayed call (and when the call's line was read)
/// or a question by meaning (no time: it is no tool call).
type Relayed = (ToRunner<'static>, Option<std::time::Instant>);

async fn handle_line(
    run: &mut Run<'_>,
    line: &[u8],
    streams: &mut Streams,
    calls: &mut JoinSet<Relayed>,
    bus: &Bus,
    call_timeout: Duration,
    read_at: std::time::Instant,
) -> Result<Option<End>, Violation> {
    match protocol::parse(line)? {
        FromRunner::Ready {} => return Err(Violation::OutOfOrder("a second ready")),
        FromRunner::Output { data } => run.keep_output(&data),
        FromRunner::Call { id, tool, arguments, op } => {
            if id == 0 || !run.calls_seen.insert(id) {
                return Err(Violation::OutOfOrder("a call id that is zero or reused"));
            }
            if !matches!(op, Op::Tool | Op::ReadResource | Op::ListResources | Op::ListTemplates) {
                // Code reads resources and lists them; other requests are
                // for a client of the gateway.
                let message = format!("{}: not available to code", op.method());
                streams.send(&wire::to_code(id, ToolReply::Refused { message })).await;
                return Ok(None);
            }
            run.calls_sent = run.calls_sent.saturating_add(1);
            if run.calls_sent > run.cell.limits.max_calls {
                // Refused here so a runaway loop costs no bus traffic; the
                // bridge refuses past the budget too.
                let message = format!("{tool}: this run has used all of its {} tool calls", run.cell.limits.max_calls);
                streams.send(&wire::to_code(id, ToolReply::Refused { message })).await;
                return Ok(None);
            }
            let call = ToolCall {
                session: run.cell.session.clone(),
                asker: run.cell.asker.clone(),
                identity: run.cell.identity.clone(),
                cell_id: run.cell.cell_id.clone(),
                call_index: run.calls_sent,
                target: Target::new(op, tool),
                arguments,
                link: run.cell.link.clone(),
                file_in: false,
            };
            let bus = bus.clone();
            // In the cell's span: the call's trace context goes with it.
            let relayed = async move {
                let reply = relay(&bus, &call, call_timeout + code_mode_core::defaults::HOP_MARGIN).await;
                (wire::to_code(id, reply), Some(read_at))
            };
            calls.spawn(tracing::Instrument::in_current_span(relayed));
        }
        FromRunner::Meaning { id, query } => {
            if id == 0 || !run.calls_seen.insert(id) {
                return Err(Violation::OutOfOrder("a call id that is zero or reused"));
            }
            run.meaning_asks = run.meaning_asks.saturating_add(1);
            if run.meaning_asks > code_mode_proto::MAX_MEANING_ASKS_PER_CELL {
                streams.send(&ToRunner::Meaning { id, near: None }).await;
                return Ok(None);
            }
            let ask = code_mode_proto::MeaningAsk {
                query: query.chars().take(code_mode_proto::MAX_MEANING_QUERY_CHARS).collect(),
            };
            let bus = bus.clone();
            let asked = async move { (ToRunner::Meaning { id, near: ask_meaning(&bus, &ask).await }, None) };
            calls.spawn(tracing::Instrument::in_current_span(asked));
        }
        FromRunner::Content { block } => {
            run.content_bytes = protocol::check_block(&block, run.content.len(), run.content_bytes)?;
            run.content.push(block);
        }
        FromRunner::File { name, mime_type, size } => run.files.start(name, mime_type, size)?,
        FromRunner::FileData { data } => run.files.data(&data)?,
        FromRunner::FileNote { note } => run.files.note(&note),
        FromRunner::OutputKept { data } => run.files.output(&data)?,
        FromRunner::Progress { progress, total, message } => {
            // Numbers as the code gave them (finite ones only), a short
            // message: the lease says the latest.
            let number = |n: f64| n.is_finite().then(|| n.to_string());
            if let Some(progress) = number(progress) {
                let message = message.map(|m| m.chars().take(200).collect());
                run.progress.report(progress, total.and_then(number), message);
            }
        }
        FromRunner::Done { error, truncated, stopped } => {
            // Never trust the runner's own account beyond its shape.
            let error = error.map(|e| e.chars().take(4000).collect());
            return Ok(Some(End::Done { error, truncated, stopped }));
        }
    }
    Ok(None)
}

/// Ask the bridge how near a question is to each tool; `None` when it
/// cannot say (no encoder, still reading, busy, or the bus failed).
async fn ask_meaning(bus: &Bus, ask: &code_mode_proto::MeaningAsk) -> Option<Vec<(String, f32)>> {
    let wait = Duration::from_millis(code_mode_proto::MEANING_WAIT_MS);
    match bus.call::<_, code_mode_proto::MeaningReply>(subjects::SEARCH_MEANING, ask, wait).await {
        Ok(code_mode_proto::MeaningReply::Near { tools }) => {
            Some(tools.into_iter().filter(|t| t.cosine.is_finite()).map(|t| (t.tool, t.cosine)).collect())
        }
        Ok(code_mode_proto::MeaningReply::Unavailable { reason }) => {
            tracing::debug!(%reason, "search by meaning: no answer");
            None
        }
        Err(e) => {
            tracing::debug!(error = %e, "search by meaning: the bridge did not answer");
            None
        }
    }
}

/// Send one call to the bridge; bus failures reach the code as a type name.
pub(crate) async fn relay(bus: &Bus, call: &ToolCall, timeout: Duration) -> ToolReply {
    match bus.call::<_, ToolReply>(subjects::TOOL_CALL, call, timeout).await {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(tool = %call.target.name(), cell = %call.cell_id, error = %e, "tool call did not reach the bridge");
            ToolReply::Fault { kind: wire::bus_fault(&e) }
        }
    }
}
