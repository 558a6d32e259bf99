//! The options of `run_python` run as an MCP task (`serve` and
//! `frontend`): how long a task's cell may run, and how long a finished
//! task's result is kept (docs/tasks.md).

use std::time::Duration;

use clap::Args;

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
