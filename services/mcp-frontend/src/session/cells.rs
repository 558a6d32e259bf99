//! Sending a cell: the [`RunCell`] of an order over the current catalog,
//! a slot of the process, the runners' queue group (offered again while
//! every runner is full, until `--capacity-wait`), the cell's lease
//! watched meanwhile.

use code_mode_core::bus::BusError;
use code_mode_core::defaults::HOP_MARGIN;
use code_mode_core::lease::{Gone, Heard};
use code_mode_proto::{
    CellLimits, CellRan, CellReport, ErrorKind, KeptContainer, Note, RunCell, ServerNote, ToolStub, subjects,
};
use tokio::sync::mpsc;

use super::CellOrder;
use crate::auth::Identity;
use crate::catalog::View;
use crate::questions::Question;
use crate::{FrontendError, RETRY_PAUSE, Shared};

/// Where a session's cells and direct calls count (`session`: the client
/// session, or a stateless request's identity scope) and who asks about
/// their approvals (`asker`, when not `session`).
#[derive(Debug, Clone)]
pub(super) struct At {
    pub(super) session: String,
    pub(super) asker: Option<String>,
}

/// Run one cell: wait for one of the process's cell slots, refresh the
/// catalog, send the cell to a sandbox-runner.
pub(super) async fn run_cell(
    shared: &Shared,
    at: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
) -> Result<CellReport, FrontendError> {
    let (_slot, staged, cell) = prepare(shared, at, identity, order).await?;
    let ran = send_fresh(shared, &cell, order.route.as_ref()).await;
    staged.purge().await;
    Ok(ran.map_err(|(e, _)| e)?.report)
}

/// What every cell goes through before it is sent, fresh or kept: its
/// code within the size limit, one of the process's cell slots (held while
/// the permit lives), the catalog refreshed, and its [`RunCell`] over it,
/// its larger inline files in written to the bucket over NATS (purge them
/// with [`Staged::purge`] when the call ends).
pub(super) async fn prepare<'s>(
    shared: &'s Shared,
    at: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
) -> Result<(tokio::sync::SemaphorePermit<'s>, Staged, RunCell), FrontendError> {
    let max = shared.config.max_code;
    if order.code.len() > max {
        return Err(FrontendError::CodeTooLarge { size: order.code.len(), max });
    }
    let slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let mut cell = cell_message(shared, at, identity, order, &view);
    crate::files_in::stage(shared.config.shared_inputs.as_ref(), &mut cell).await.map_err(FrontendError::FilesIn)?;
    Ok((slot, Staged::of(shared, &cell), cell))
}

/// The inline files in a call wrote to the bucket (over NATS), purged when
/// the call ends, however it ends: nobody reads them after. A runner that
/// took the cell read them before its code started (a report means it
/// did); a call that failed is over for its caller, and a retry is a new
/// call that writes its files again, under new ids; a runner still at a
/// cell its frontend gave up on (lost, silent, past the wait) finds the
/// chunks gone and fails a cell nobody waits for. So a finished call
/// leaves the bucket's room to others at once instead of after the
/// bucket's lifetime (or never, in a bucket without one). A call dropped
/// before its end (its session ended) purges them from a task of its own.
/// Best effort: what a purge misses expires.
pub(super) struct Staged {
    inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
    stored: Vec<code_mode_proto::StoredInput>,
}

impl Staged {
    fn of(shared: &Shared, cell: &RunCell) -> Self {
        let stored: Vec<_> = cell.inputs.iter().filter_map(|input| input.stored.clone()).collect();
        let inputs = shared.config.shared_inputs.clone().filter(|_| !stored.is_empty());
        Self { inputs, stored }
    }

    /// Purge the call's files now.
    pub(super) async fn purge(mut self) {
        if let Some(purging) = self.take() {
            purging.await;
        }
    }

    /// The purge of the files not purged yet (none after the first take).
    fn take(&mut self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let inputs = self.inputs.take()?;
        let stored = std::mem::take(&mut self.stored);
        Some(async move {
            for stored in &stored {
                inputs.discard(stored).await;
            }
        })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if let Some(purging) = self.take() {
            runtime.spawn(purging);
        }
    }
}

/// What the cell's lease says, where it goes: the progress the code
/// reports to the request running the cell, which passes it on to a
/// client that asked for progress (a full queue drops it: it is only
/// news); how long the cell was held to this process's activity (the
/// operations view, and the request's heartbeat, read it there).
pub(super) fn heard_by<'a>(
    shared: &'a Shared,
    route: Option<&'a mpsc::Sender<Question>>,
    cell_id: &'a str,
) -> impl FnMut(Heard<'_>) + 'a {
    move |heard: Heard<'_>| match heard {
        Heard::Held(time) => shared.activity.cell_held(cell_id, time),
        Heard::Progress(reported) => {
            let Some(route) = route else { return };
            let Ok(progress) = reported.progress.parse::<f64>() else { return };
            let total = reported.total.as_deref().and_then(|t| t.parse::<f64>().ok());
            let note = Note::Progress { progress, total, message: reported.message.clone() };
            let note = ServerNote { call_id: Some(cell_id.to_string()), server: CODE.to_string(), note };
            let _ = route.try_send(Question::Note(note));
        }
    }
}

/// The name progress of the code itself goes under (no server has it: a
/// server's name is a config key or its command).
pub(crate) const CODE: &str = "code-mode";

/// The error of a cell whose report will not come, as its lease told.
pub(super) fn gone_error(cell: &str, gone: Gone) -> FrontendError {
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
            deadline_ms: order.options.deadline.unwrap_or(config.deadline).as_millis() as u64,
            max_calls,
            call_timeout_ms: view.catalog.call_timeout_ms,
            approval_timeout_ms: view.catalog.answer_wait_ms(order.link.as_ref()),
            max_output: config.max_output,
            stop_output: config.stop_output,
            max_line: config.max_line,
        },
        keep: None,
        link: order.link.clone(),
        keep_report: order.options.keep_report,
        inputs: order.inputs.clone(),
    }
}

/// Send a cell to the runners' queue group. A runner with every slot taken
/// declines at once; the queue group then offers the cell to the next.
/// Gives up after `capacity_wait`.
///
/// An error comes with the kept container the cell ran in when its report
/// was lost but the runner's lease named one (a kept session's first cell).
pub(super) async fn send_fresh(
    shared: &Shared,
    cell: &RunCell,
    route: Option<&mpsc::Sender<Question>>,
) -> Result<CellRan, (FrontendError, Option<KeptContainer>)> {
    let config = &shared.config;
    let started = tokio::time::Instant::now();
    loop {
        // A cell held while a person decides runs that much longer (at
        // most its approval allowance in all).
        let deadline = std::time::Duration::from_millis(cell.limits.deadline_ms);
        let wait = deadline + std::time::Duration::from_millis(cell.limits.approval_timeout_ms) + HOP_MARGIN;
        let bus = &shared.bus;
        // The runner that takes the cell holds its lease until it replies
        // (and says how the cell ended a while after); a runner that dies
        // stops answering it.
        let call = bus.call(subjects::CELL_RUN, cell, wait);
        let answer =
            match code_mode_core::lease::watched_with(bus, &cell.cell_id, call, heard_by(shared, route, &cell.cell_id))
                .await
            {
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
                return Err((FrontendError::RunnerLost { waited: wait, margin: HOP_MARGIN }, None));
            }
            other => return other.map_err(|e| (e.into(), None)),
        };
        if started.elapsed() >= config.capacity_wait {
            let error = match last {
                // Nobody declined: there is no runner at all.
                Some(BusError::NoResponders { subject }) => {
                    FrontendError::NoRunner { subject, waited: started.elapsed() }
                }
                Some(other) => other.into(),
                None => FrontendError::NoCapacity { waited: started.elapsed() },
            };
            return Err((error, None));
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// How often a cancelled cell's runner is asked again to stop it while
/// nobody answers on its cancel subject (the runner may not have taken the
/// cell yet).
const CANCEL_AGAIN: std::time::Duration = std::time::Duration::from_millis(200);
/// How long one cancel may wait for the runner's answer.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Run `cell` (one cell's whole run, fresh or kept, to its report); when
/// `cancel` fires first, stop it: the bridges cancel its calls in flight
/// at their servers and withdraw its questions ([`crate::direct::cancel`]
/// names the cell), and the runner running it kills its container
/// ([`subjects::cell_cancel`]; asked again every [`CANCEL_AGAIN`] until a
/// runner answers, since the cell may still be on its way to one). The
/// cell's report still comes, saying it was stopped, and is returned. A
/// cancel after the report does nothing.
pub(super) async fn cancellable<T>(
    shared: &Shared,
    cell_id: &str,
    cancel: &tokio_util::sync::CancellationToken,
    cell: impl Future<Output = T>,
) -> T {
    tokio::pin!(cell);
    tokio::select! {
        biased;
        ended = &mut cell => return ended,
        () = cancel.cancelled() => {}
    }
    tracing::info!(cell = %cell_id, "the cell's request was cancelled: stopping the cell");
    let stopping = async {
        let bridges = crate::direct::cancel(shared, cell_id);
        let runner = stop_at_runner(shared, cell_id);
        tokio::join!(bridges, runner);
        std::future::pending::<()>().await
    };
    tokio::select! {
        ended = &mut cell => ended,
        () = stopping => unreachable!("pending"),
    }
}

/// Ask the runner running `cell_id` to stop it, until one answers (or the
/// id names no subject).
async fn stop_at_runner(shared: &Shared, cell_id: &str) {
    use code_mode_proto::{CancelCell, CellCancelled};
    let Some(subject) = subjects::cell_cancel(cell_id) else { return };
    let request = CancelCell { reason: Some("the request that ran the cell was cancelled".into()) };
    loop {
        match shared.bus.call_quiet::<_, CellCancelled>(&subject, &request, CANCEL_WAIT).await {
            Ok(CellCancelled { stopped }) => {
                tracing::info!(cell = %cell_id, stopped, "the runner heard the cell's cancel");
                return;
            }
            Err(e) => tracing::debug!(cell = %cell_id, error = %e, "no runner heard the cell's cancel yet"),
        }
        tokio::time::sleep(CANCEL_AGAIN).await;
    }
}
