//! The frontend's errors: why a cell or a call got no result, and why the
//! frontend cannot start (its authentication, TLS or HTTP settings).

use std::time::Duration;

use code_mode_core::bus::BusError;
use code_mode_telemetry::FrontendCellResult;

pub use crate::handle::HandleError;
use crate::{auth, tls};

/// Errors of the frontend layer.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The code is over the size limit.
    #[error("the code is {size} bytes, over the {max} byte limit: send a shorter program")]
    CodeTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A service could not be reached or failed.
    #[error("{0}")]
    Bus(#[from] BusError),
    /// The sandbox-runner that took the cell never answered: it was killed,
    /// crashed or lost its connection while running it.
    #[error(
        "the sandbox-runner running this cell was lost: no answer within {waited:?} (the run's deadline plus \
         {margin:?}); it crashed or lost its connection, so the cell's outcome is unknown: run it again"
    )]
    RunnerLost {
        /// How long the frontend waited.
        waited: Duration,
        /// The margin over the deadline.
        margin: Duration,
    },
    /// The sandbox-runner that took the cell stopped answering its lease
    /// (`code_mode_core::lease`): killed, crashed or cut off from NATS.
    #[error(
        "the sandbox-runner running this cell was lost: it stopped answering for {silent:.1?} (killed, crashed \
         or cut off from NATS), so the cell's outcome is unknown and calls it made may have happened: run it \
         again if that is safe"
    )]
    RunnerSilent {
        /// How long it had not answered.
        silent: Duration,
    },
    /// The sandbox-runner finished the cell, as its lease said, but the
    /// report never arrived (a failed publish, a missed reply).
    #[error(
        "the report of this cell was lost between its sandbox-runner and this frontend: the runner finished it \
         ({ended}) but its report never arrived, so its output is unknown and calls it made have happened"
    )]
    ReportLost {
        /// How the runner said the cell ended.
        ended: code_mode_proto::CellEnded,
    },
    /// No sandbox-runner had a free slot in time.
    #[error("no sandbox-runner had room for the cell within {waited:?}: try again later")]
    NoCapacity {
        /// How long the cell waited.
        waited: Duration,
    },
    /// No sandbox-runner answered on the cells' subject at all (none runs,
    /// or none can reach NATS or subscribe there).
    #[error(
        "no sandbox-runner answers for cells (nothing answers on {subject} within {waited:.1?}): start one \
         (`code-mode sandbox-runner`) or check that it reaches NATS as its user"
    )]
    NoRunner {
        /// The subject the cell was sent on.
        subject: String,
        /// How long the cell waited.
        waited: Duration,
    },
    /// The client session ended before the cell did.
    #[error("the client session has ended, and its cells with it")]
    SessionEnded,
    /// The session already runs (or queues) its most cells.
    #[error(
        "this session already runs {max} cell(s) at once (--max-cells-per-session): wait for one to end, or use \
         another session"
    )]
    SessionBusy {
        /// The limit.
        max: usize,
    },
    /// A stateless client's session handle cannot be used.
    #[error(transparent)]
    Handle(#[from] HandleError),
    /// A `run_python` call without its code.
    #[error("the call needs a string argument \"code\" (the Python source)")]
    CodeMissing,
    /// `run_python`'s `files` cannot be taken (issue 42): which entry, why.
    #[error("{0}")]
    FilesIn(String),
    /// A retried call names a `requestState` no cell waits under.
    #[error(
        "no cell waits for answers under this requestState (answered already, or it waited too long and was \
         dropped): run the code again"
    )]
    NotParked,
    /// The wrapped server refused the client's request with a JSON-RPC
    /// error about the request itself (its arguments, a capability the
    /// client lacks, an altered `requestState`): the client gets the
    /// error as the server gave it.
    #[error("{message}")]
    ServerRefused {
        /// The server's JSON-RPC error code.
        code: i32,
        /// The bridge's message about it.
        message: String,
        /// The error's data, as the server gave it.
        data: Option<serde_json::Value>,
    },
    /// The MCP transport failed.
    #[error("MCP transport: {0}")]
    Transport(String),
    /// Authentication's settings are wrong or missing.
    #[error(transparent)]
    Auth(#[from] auth::AuthError),
    /// TLS cannot be set up (`--tls-cert`, `--tls-key`).
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The MCP HTTP server could not listen.
    #[error("cannot serve MCP over HTTP on {addr}: {reason}")]
    Http {
        /// The address asked for.
        addr: String,
        /// Why.
        #[source]
        reason: std::io::Error,
    },
}

impl FrontendError {
    /// How a cell's request ended, for `codemode_frontend_cells_total`.
    pub fn metric_result<T>(result: &Result<T, FrontendError>) -> FrontendCellResult {
        match result {
            Ok(_) => FrontendCellResult::Reported,
            Err(FrontendError::CodeTooLarge { .. }) => FrontendCellResult::CodeTooLarge,
            Err(FrontendError::NoCapacity { .. }) => FrontendCellResult::NoCapacity,
            Err(
                FrontendError::RunnerLost { .. }
                | FrontendError::RunnerSilent { .. }
                | FrontendError::ReportLost { .. },
            ) => FrontendCellResult::RunnerLost,
            Err(FrontendError::NoRunner { .. } | FrontendError::Bus(BusError::NoResponders { .. })) => {
                FrontendCellResult::NoRunner
            }
            Err(_) => FrontendCellResult::Failed,
        }
    }
}
