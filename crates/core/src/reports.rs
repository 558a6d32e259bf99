//! Cell reports kept for the frontends: where a sandbox-runner leaves the
//! final report of a cell that asked for it ([`RunCell::keep_report`], a
//! `run_python` task's cell), so that the task gets its result even when
//! the frontend that sent the cell is gone by the time it ends (killed,
//! restarted, cut off): another frontend replica reads the report here and
//! settles the task.
//!
//! Over NATS it is the JetStream key-value bucket [`REPORTS_BUCKET`]: the
//! runners write it, the frontends only read it (`deploy/nats-server.conf`),
//! and each report goes [`KEPT_FOR`] after it was written (the bucket's
//! `max_age`). A report is keyed by its cell id, an unguessable UUID that
//! only the task's record (under its owner's identity) names.
//!
//! [`RunCell::keep_report`]: code_mode_proto::RunCell::keep_report

use std::time::Duration;

use code_mode_proto::CellRan;

use crate::nats::NatsTransport;
use crate::state::{JetStreamConfig, SessionStore, StateError};

/// The JetStream key-value bucket of the kept cell reports.
pub const REPORTS_BUCKET: &str = "codemode_cell_reports";

/// How long a kept report stays after its cell ended: a task nobody polled
/// for this long after its cell ended loses its result.
pub const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);

/// The store scope of every report (a key is `cell.<cell id>`).
const SCOPE: &str = "cell";

/// The kept reports: a handle on their store, cheap to clone.
#[derive(Debug, Clone)]
pub struct CellReports {
    store: SessionStore,
}

impl CellReports {
    /// Reports kept in `store` (any backend; tests use memory).
    pub fn in_store(store: SessionStore) -> Self {
        Self { store }
    }

    /// The bucket [`REPORTS_BUCKET`] over NATS, created (with `replicas`,
    /// each report kept [`KEPT_FOR`]) when missing.
    pub async fn over_nats(transport: &NatsTransport, replicas: usize) -> Result<Self, StateError> {
        let config = JetStreamConfig {
            bucket: REPORTS_BUCKET.to_string(),
            replicas,
            max_age: KEPT_FOR,
            ..JetStreamConfig::default()
        };
        Ok(Self { store: SessionStore::over_nats(transport, config).await? })
    }

    /// Keep the report of `cell_id`. A report already kept (a write that
    /// timed out but happened, tried again) is no error.
    pub async fn keep(&self, cell_id: &str, ran: &CellRan) -> Result<(), StateError> {
        let value = serde_json::to_value(ran).map_err(|e| StateError::Invalid(format!("a cell report: {e}")))?;
        match self.store.create(SCOPE, cell_id, &value).await {
            Ok(_) | Err(StateError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The kept report of `cell_id`, `None` when none is (not ended yet,
    /// never kept, or gone after [`KEPT_FOR`]).
    pub async fn kept(&self, cell_id: &str) -> Result<Option<CellRan>, StateError> {
        let Some(entry) = self.store.get(SCOPE, cell_id).await? else { return Ok(None) };
        serde_json::from_value(entry.value)
            .map(Some)
            .map_err(|e| StateError::Invalid(format!("the kept report of cell {cell_id} is not readable: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_kept_report_reads_back_once_kept_and_keeping_it_twice_is_no_error() {
        let reports = CellReports::in_store(SessionStore::in_memory());
        let cell = "5f0e2b7a-1c3d-4e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(reports.kept(cell).await.unwrap(), None);
        let mut ran = CellRan { report: code_mode_proto::CellReport::default(), kept: None };
        ran.report.stdout = "done\n".into();
        reports.keep(cell, &ran).await.unwrap();
        reports.keep(cell, &ran).await.unwrap();
        assert_eq!(reports.kept(cell).await.unwrap(), Some(ran));
    }
}
