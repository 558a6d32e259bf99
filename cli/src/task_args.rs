//! The options of `run_python` run as an MCP task (`serve` and
//! `frontend`): how long a task's cell may run, and how long a finished
//! task's result is kept (docs/tasks.md).

use std::time::Duration;

use clap::Args;

use code_mode_core::nats::NatsTransport;
use code_mode_core::reports::CellReports;
use code_mode_core::state::{JetStreamConfig, SessionStore};

use crate::ranges;

/// How long tasks run and are kept.
#[derive(Debug, Args)]
pub struct TaskArgs {
    /// Deadline of a run_python cell run as a task (a client that declared
    /// the MCP Tasks extension gets a task handle and polls; no request is
    /// held open), in seconds: default 3600, at most 86400 (0.001 to 86400).
    #[arg(long, default_value = "3600", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub task_deadline: Duration,
    /// How long a finished task's result is kept for tasks/get, in seconds
    /// after it finished; then it is gone (0.001 to 86400).
    #[arg(long, default_value = "3600", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub task_ttl: Duration,
}

impl TaskArgs {
    /// `config` with these settings.
    pub fn apply(&self, config: &mut code_mode_mcp_frontend::FrontendConfig) {
        config.task_deadline = self.task_deadline;
        config.task_ttl = self.task_ttl;
    }
}

/// Where a split frontend keeps its tasks: the JetStream bucket
/// `codemode_tasks` (every replica answers for every task), created with
/// `replicas` when missing. A NATS user without the bucket (an older
/// `nats-server.conf`) keeps them in this process, saying so at start.
pub async fn task_store(transport: &NatsTransport, replicas: usize) -> SessionStore {
    let config = JetStreamConfig {
        bucket: code_mode_mcp_frontend::TASKS_BUCKET.to_string(),
        replicas,
        ..JetStreamConfig::default()
    };
    match SessionStore::over_nats(transport, config).await {
        Ok(store) => store,
        Err(e) => {
            tracing::warn!(
                error = %e,
                "the tasks' JetStream bucket cannot be opened: run_python tasks are kept in this process only \
                 (another replica, or this one restarted, will not know them); grant the frontend's NATS user \
                 the bucket codemode_tasks (deploy/nats-server.conf)"
            );
            SessionStore::in_memory()
        }
    }
}

/// Where task cells' final reports are kept over NATS (the JetStream bucket
/// `codemode_cell_reports`, created with `replicas` when missing): a
/// runner writes a task cell's report there before replying, and a
/// frontend replica settles from it a task whose driving frontend is gone.
/// `None`, saying so, for a NATS user without the bucket (an older
/// `nats-server.conf`): a task then fails when its frontend dies.
pub async fn cell_reports(transport: &NatsTransport, replicas: usize, service: &str) -> Option<CellReports> {
    match CellReports::over_nats(transport, replicas).await {
        Ok(reports) => Some(reports),
        Err(e) => {
            tracing::warn!(
                error = %e,
                "the cell reports' JetStream bucket cannot be opened: a run_python task whose frontend dies while \
                 its cell runs loses its result; grant the {service} NATS user the bucket codemode_cell_reports \
                 (deploy/nats-server.conf)"
            );
            None
        }
    }
}
