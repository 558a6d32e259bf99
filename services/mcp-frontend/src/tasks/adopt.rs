//! A task whose driving frontend is gone (killed, restarted, cut off): the
//! cell runs on at its sandbox-runner, which keeps the cell's final report
//! where every frontend can read it (`code_mode_core::reports`, when the
//! services run apart). Any replica that reads such a task (its record
//! unwritten for [`STALE`](super::STALE)):
//!
//! - settles it from the kept report, exactly as its driver would have;
//! - else, while the cell's lease is answered, adopts it: writes the
//!   record with compare-and-set on the revision it read (of two replicas
//!   adopting at once one wins, the other reads what the winner wrote),
//!   then follows the cell ([`TaskBook::follow_cell`]): its lease for the
//!   status message, the kept report for its end;
//! - else (the cell's runner is gone and no report was kept) fails it,
//!   saying why.
//!
//! A driver that loses sight of its own cell (its lease silent while NATS
//! restarts, its report lost on the way) follows it the same way before
//! it gives up on it. In one process (`serve`) nothing is kept and nothing
//! here runs: a silent driver's task fails, as before.

use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_core::lease::{LOST_AFTER, PING, REPORT_GRACE};
use code_mode_core::reports::CellReports;
use code_mode_core::state::StateError;
use code_mode_proto::{CellRan, LeaseCheck, LeaseHeld, subjects};
use rmcp::model::TaskPayload;
use tokio::time::Instant;

use super::run::{progress_text, settled};
use super::{Record, TaskBook, TaskError, error_object, now_ms, record_name};
use crate::session::Ran;
use crate::{FrontendError, wire};

/// What a frontend needs to settle tasks it did not drive: the runners'
/// kept reports, and the bus to ask after a cell's lease.
#[derive(Debug, Clone)]
pub(crate) struct Follow {
    /// The kept reports of task cells.
    pub reports: CellReports,
    /// The services' bus.
    pub bus: Bus,
}

/// How often a followed cell is looked at.
const EVERY: Duration = Duration::from_secs(1);

/// How often a followed task's record is written (its driver's pace).
const WRITE_EVERY: Duration = Duration::from_secs(2);

/// How long a cell's lease may go unanswered once the store itself did
/// not answer (NATS restarting): every service reconnects meanwhile.
const LOST_AFTER_OUTAGE: Duration = Duration::from_secs(10);

/// How many times a replica that finds a silent driver asks the cell's
/// lease before it takes the cell for gone ([`LOST_AFTER`] in all).
const LEASE_TRIES: u32 = 3;

/// The JSON-RPC code of a task that failed for code-mode's own reason.
const INTERNAL: i32 = -32603;

/// Why a task fails whose driver and cell are both gone.
const GONE: &str = "the frontend driving this task stopped (killed or cut off) and its cell's sandbox-runner no longer \
                    answers for the cell, and no report of the cell was kept: its result is lost; calls it made may \
                    have happened";

/// Why a task fails whose cell ended with no report kept.
const UNKEPT: &str = "the cell ended at its sandbox-runner but its report was not kept (the runner could not write it) \
                      and the frontend that drove this task is gone: its result is lost; calls it made have happened";

/// What a cell's lease says.
enum Lease {
    /// The cell runs.
    Running(LeaseHeld),
    /// The cell ended (its report, if kept, is there already).
    Ended,
    /// Nobody answered.
    Silent,
}

/// Ask the lease of `cell` once.
async fn ask_lease(bus: &Bus, cell: &str) -> Lease {
    let Some(subject) = subjects::cell_lease(cell) else { return Lease::Silent };
    let check = LeaseCheck { cell_id: cell.to_string() };
    match tokio::time::timeout(PING, bus.call_quiet::<_, LeaseHeld>(&subject, &check, PING)).await {
        Ok(Ok(held)) if held.ended.is_some() => Lease::Ended,
        Ok(Ok(held)) => Lease::Running(held),
        _ => Lease::Silent,
    }
}

impl TaskBook {
    /// The running task `id`, whose driver has not written it for
    /// `silent_ms` (its record read at `revision`): settled from its kept
    /// report, adopted while its cell runs, or failed saying why.
    pub(super) async fn driver_silent(
        &self,
        scope: &str,
        id: &str,
        record: Record,
        revision: u64,
        silent_ms: u64,
    ) -> Result<Record, TaskError> {
        let Some(follow) = &self.follow else {
            let message = format!(
                "the frontend driving this task stopped writing it {} s ago (stopped or killed): the cell's result \
                 is lost; calls it made may have happened",
                silent_ms / 1000
            );
            return self.fail(scope, id, &message).await;
        };
        if let Some(ran) = follow.reports.kept(&record.cell).await? {
            return self.settle_reported(scope, id, &record, ran).await;
        }
        let mut lease = Lease::Silent;
        for _ in 0..LEASE_TRIES {
            lease = ask_lease(&follow.bus, &record.cell).await;
            if !matches!(lease, Lease::Silent) {
                break;
            }
            tokio::time::sleep(PING / 2).await;
        }
        if let Lease::Running(_) = lease {
            return self.claim(scope, id, record, revision, silent_ms).await;
        }
        // The report is kept before the lease says the cell ended: the
        // cell may have ended since the first look.
        if let Some(ran) = follow.reports.kept(&record.cell).await? {
            return self.settle_reported(scope, id, &record, ran).await;
        }
        let why = if let Lease::Ended = lease { UNKEPT } else { GONE };
        tracing::warn!(task = %id, cell = %record.cell, "a task whose frontend died has no result: {why}");
        self.fail(scope, id, why).await
    }

    /// Take the task `id` over from its silent driver: its record written
    /// by this process (compare-and-set on `revision`), then followed. A
    /// replica that wrote it first wins; this one answers what it wrote.
    async fn claim(
        &self,
        scope: &str,
        id: &str,
        mut record: Record,
        revision: u64,
        silent_ms: u64,
    ) -> Result<Record, TaskError> {
        record.updated_ms = now_ms();
        record.task.task.last_updated_at = rmcp::task_manager::current_timestamp();
        let mut said = format!(
            "the frontend that drove this task went silent {} s ago; another frontend follows its cell, which runs on",
            silent_ms / 1000
        );
        // Its questions went with the frontend that asked them: their
        // calls are refused at the bridge, and nothing can answer them here.
        if matches!(record.task.payload, TaskPayload::InputRequired { .. }) {
            record.task = rmcp::model::DetailedTask::new(record.task.task.clone(), TaskPayload::Working);
            said.push_str(" (the questions it asked went with that frontend)");
        }
        record.answers.clear();
        record.task.task.status_message = Some(said);
        match self.store.compare_and_set(scope, &record_name(id), &record.to_value(), revision).await {
            Ok(_) => {
                tracing::info!(task = %id, cell = %record.cell, silent_ms, "adopted a task whose frontend went silent");
                let (book, scope, id) = (self.clone(), scope.to_string(), id.to_string());
                tokio::spawn(async move { book.follow_cell(scope, id, None).await });
                Ok(record)
            }
            Err(StateError::Conflict(_)) => {
                let entry = self.store.get(scope, &record_name(id)).await?;
                let entry = entry.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
                Ok(Record::from_value(entry.value)?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Follow the cell of the task `id` until the task is settled: from
    /// its kept report when there is one; failed when its lease went
    /// silent (or said it ended) and no report was kept, with `lost` (the
    /// driver's own loss of it) or else saying the cell is gone. Writes
    /// the task's status message meanwhile, as a driver does.
    pub(crate) async fn follow_cell(self, scope: String, id: String, lost: Option<FrontendError>) {
        let Some(follow) = self.follow.clone() else { return };
        // A cancel through this replica stops the cell at its runner now.
        code_mode_core::sync::lock(&self.stops).remove(&id);
        // A driver that lost its cell already waited LOST_AFTER for it.
        let mut silent_since =
            lost.as_ref().map(|_| Instant::now().checked_sub(LOST_AFTER).unwrap_or_else(Instant::now));
        let mut outage = false;
        let mut ended_since: Option<Instant> = None;
        let mut written: Option<Instant> = None;
        let mut lost = lost;
        loop {
            let record = match self.store.get(&scope, &record_name(&id)).await {
                Ok(Some(entry)) => match Record::from_value(entry.value) {
                    Ok(record) => Some(record),
                    Err(e) => {
                        tracing::warn!(task = %id, error = %e, "a followed task cannot be read");
                        return;
                    }
                },
                Ok(None) => return,
                Err(_) => None,
            };
            let kept = match &record {
                Some(record) if record.task.status().is_terminal() => return,
                Some(record) => follow.reports.kept(&record.cell).await,
                None => Err(StateError::Unavailable("the task store does not answer".into())),
            };
            let record = match (record, kept) {
                (Some(record), Ok(Some(ran))) => {
                    let _ = self.settle_reported(&scope, &id, &record, ran).await;
                    return;
                }
                (Some(record), Ok(None)) => record,
                (_, _) => {
                    // NATS (or JetStream) does not answer: nothing is known,
                    // and a silent lease means nothing meanwhile.
                    outage = true;
                    silent_since = None;
                    tokio::time::sleep(EVERY).await;
                    continue;
                }
            };
            match ask_lease(&follow.bus, &record.cell).await {
                Lease::Running(held) => {
                    silent_since = None;
                    ended_since = None;
                    if written.is_none_or(|at| at.elapsed() >= WRITE_EVERY) {
                        let message = status_message(&record, &held);
                        let wrote =
                            self.update(&scope, &id, |r| r.task.task.status_message = Some(message.clone())).await;
                        if let Err(e) = wrote {
                            tracing::warn!(task = %id, error = %e, "a followed task's progress could not be written");
                        }
                        written = Some(Instant::now());
                    }
                }
                Lease::Ended => {
                    let since = *ended_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= REPORT_GRACE {
                        let _ = self.fail(&scope, &id, UNKEPT).await;
                        return;
                    }
                }
                Lease::Silent => {
                    let since = *silent_since.get_or_insert_with(Instant::now);
                    let bound = if outage { LOST_AFTER_OUTAGE } else { LOST_AFTER };
                    if since.elapsed() >= bound {
                        // One more look: kept just before the lease went?
                        match follow.reports.kept(&record.cell).await {
                            Ok(Some(ran)) => {
                                let _ = self.settle_reported(&scope, &id, &record, ran).await;
                            }
                            Ok(None) => {
                                tracing::warn!(task = %id, cell = %record.cell, "a followed task's cell is gone with no report");
                                let ran = Duration::from_millis(now_ms().saturating_sub(record.created_ms));
                                let (payload, message) = match lost.take() {
                                    Some(lost) => settled(Err(lost), ran),
                                    None => failed(GONE),
                                };
                                let _ = self.settle(&scope, &id, payload, message).await;
                            }
                            Err(_) => {
                                outage = true;
                                silent_since = None;
                                continue;
                            }
                        }
                        return;
                    }
                }
            }
            tokio::time::sleep(EVERY).await;
        }
    }

    /// Settle the task `id` (its `record` as last read) from its cell's
    /// kept report, as its driver would have: its result (a stateless
    /// client's kept container's handle too), or cancelled when its client
    /// asked so.
    async fn settle_reported(&self, scope: &str, id: &str, record: &Record, ran: CellRan) -> Result<Record, TaskError> {
        let took = Duration::from_millis(now_ms().saturating_sub(record.created_ms));
        let (payload, message) = if record.cancel_requested {
            (TaskPayload::Cancelled, format!("cancelled: the cell was stopped after {} s", took.as_secs()))
        } else {
            let ran = Ran { report: ran.report, kept: if record.handle { ran.kept } else { None } };
            settled(Ok(wire::Outcome::Tool(wire::ran_result(&ran).into())), took)
        };
        tracing::info!(task = %id, cell = %record.cell, "a task is settled from its cell's kept report");
        self.settle(scope, id, payload, message).await
    }

    /// Fail the task `id`, saying `why`.
    async fn fail(&self, scope: &str, id: &str, why: &str) -> Result<Record, TaskError> {
        let (payload, message) = failed(why);
        self.settle(scope, id, payload, message).await
    }

    /// Write how the task `id` ended (a result too large for the store
    /// fails it, saying so), and forget it after `--task-ttl` (a read after
    /// that time finds it expired anyway, should this process be gone).
    pub(super) async fn settle(
        &self,
        scope: &str,
        id: &str,
        payload: TaskPayload,
        message: String,
    ) -> Result<Record, TaskError> {
        let status = payload.status();
        let finished = match self.finish(scope, id, payload, message).await {
            Err(TaskError::Store(StateError::Invalid(why))) => {
                let error = error_object(INTERNAL, &format!("run_python: the result could not be kept: {why}"));
                self.finish(scope, id, TaskPayload::Failed { error }, "failed: its result is too large".into()).await
            }
            other => other,
        };
        match &finished {
            Ok(_) => tracing::info!(task = %id, ?status, "a run_python task ended"),
            Err(e) => tracing::warn!(task = %id, error = %e, "a run_python task's end could not be written"),
        }
        let (ttl, store, scope, name) = (self.ttl, self.store.clone(), scope.to_string(), record_name(id));
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let _ = store.delete(&scope, &name).await;
        });
        finished
    }
}

/// A failed task's payload and status message, saying `why`.
fn failed(why: &str) -> (TaskPayload, String) {
    let error = error_object(INTERNAL, &format!("run_python: {why}"));
    (TaskPayload::Failed { error }, format!("failed: {why}"))
}

/// A followed cell's status message, from its lease: as its driver says
/// it (how long it ran, the time held apart, its code's progress).
fn status_message(record: &Record, held: &LeaseHeld) -> String {
    let elapsed = Duration::from_millis(now_ms().saturating_sub(record.created_ms));
    let mut message = crate::progress::heartbeat_message(elapsed, held.held);
    if let Some(progress) = &held.progress
        && let Ok(done) = progress.progress.parse::<f64>()
    {
        let total = progress.total.as_deref().and_then(|t| t.parse::<f64>().ok());
        message = format!("{message}; its code reported {}", progress_text(done, total, progress.message.as_deref()));
    }
    message
}
