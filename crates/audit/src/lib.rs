//! The audit record: a tamper-evident log of every cell and every decision
//! on a tool call.
//!
//! - [`record`]: the format (version 1): what each kind of record holds,
//!   the canonical bytes that are hashed, how records chain.
//! - [`sink`]: [`AuditSink`], the handle services write through; one task
//!   per sink owns the chain head and the backend: an append-only
//!   [`file`] (rotation keeps the chain across files), stderr, or a
//!   [`jetstream`] stream shared by every replica of a stack.
//! - [`verify`]: checking a chain and naming the first record that was
//!   altered, removed, reordered or inserted.
//! - [`show`]: reading records back, filtered.
//!
//! Who writes what: the sandbox-runner writes a `cell_start` record before
//! a cell's code reaches its container and a `cell` record when it ends
//! (it knows the runtime and image; the cell's session and identity come
//! with the cell); the bridge writes a `tools` record per wrapped server
//! and a `call` record for every call it judges. A write that fails is an
//! error to the writer, which refuses what it was about to do (fail
//! closed): no cell runs and no call goes out unrecorded while the sink
//! cannot be written.

pub mod file;
pub mod jetstream;
pub mod record;
pub mod show;
pub mod sink;
pub mod verify;

pub use record::{Body, Decision};
pub use sink::{AuditSink, Durability, SinkOptions};

/// Errors of the audit layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// The sink could not be opened at start.
    #[error("the audit log {sink} cannot be opened: {reason}")]
    Open {
        /// The sink (file or stream).
        sink: String,
        /// Why.
        reason: String,
    },
    /// An existing file ends in something its chain cannot continue from.
    #[error("the audit log {file}, line {line}: {reason}")]
    Corrupt {
        /// The file.
        file: String,
        /// The line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A record could not be written.
    #[error(
        "the audit log {sink} cannot be written ({reason}): nothing runs unrecorded, so this is refused until it can \
         be written again (fail closed)"
    )]
    Unwritable {
        /// The sink.
        sink: String,
        /// Why.
        reason: String,
    },
    /// The writer task has stopped (shutdown).
    #[error("the audit log is closed (shutting down): refused, as it could not be recorded")]
    Closed,
}
