//! Keeping a task cell's final report where any frontend can read it
//! (`code_mode_core::reports`), before the runner replies: the frontend
//! that sent the cell may be gone by then, and another one settles the
//! task from the kept report.

use std::time::Duration;

use code_mode_core::reports::CellReports;
use code_mode_core::state::StateError;
use code_mode_proto::CellRan;
use tokio_util::sync::CancellationToken;

/// How long a report that cannot be written (NATS restarting, JetStream
/// electing a leader) is tried again; the cell's lease says it runs
/// meanwhile, so no frontend takes it for lost.
const KEEP_TRYING: Duration = Duration::from_secs(120);

/// How long between two tries.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Keep `ran`, the report of `cell_id`, trying again while the store does
/// not answer, for at most [`KEEP_TRYING`] (or until the runner stops).
/// A report that cannot be kept is logged: its task then fails saying no
/// report was kept, unless its own frontend gets the reply.
pub(crate) async fn keep(reports: &CellReports, cell_id: &str, ran: &CellRan, shutdown: &CancellationToken) {
    let started = tokio::time::Instant::now();
    loop {
        match reports.keep(cell_id, ran).await {
            Ok(()) => {
                tracing::debug!(cell = %cell_id, "the cell's report is kept for its task");
                return;
            }
            Err(e @ StateError::Invalid(_)) => {
                tracing::error!(cell = %cell_id, error = %e, "the cell's report cannot be kept for its task");
                return;
            }
            Err(e) if started.elapsed() >= KEEP_TRYING || shutdown.is_cancelled() => {
                tracing::error!(cell = %cell_id, error = %e, tried_s = started.elapsed().as_secs(),
                    "the cell's report could not be kept for its task: only its frontend's reply carries it");
                return;
            }
            Err(e) => {
                tracing::warn!(cell = %cell_id, error = %e, "the cell's report could not be kept yet; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(AGAIN_AFTER) => {}
                    _ = shutdown.cancelled() => {}
                }
            }
        }
    }
}
