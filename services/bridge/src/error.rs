//! The bridge's errors: what stops it from starting (or a catalog from
//! being rebuilt), why a call to a wrapped server failed on the host side,
//! and why an ended session's state could not be forgotten.

use crate::policy::PolicyError;

/// Errors that stop the bridge from starting.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A wrapped server could not be started or initialized.
    #[error("wrapped server {server:?} ({command}) could not start: {reason}")]
    ServerStart {
        /// The server's name.
        server: String,
        /// Its command, or its URL for a remote server.
        command: String,
        /// Why.
        reason: String,
    },
    /// `--env NAME` names a variable this process does not have.
    #[error("--env {name}: {name} is not set in code-mode's environment")]
    EnvMissing {
        /// The server's name.
        server: String,
        /// The variable.
        name: String,
    },
    /// An allowlist names a tool the server does not list.
    #[error("{at}: the server lists no such tool (it lists: {listed})")]
    UnknownAllowed {
        /// Where the name was written ([`Origin::setting`]).
        at: String,
        /// The server's name.
        server: String,
        /// The name in the allowlist.
        name: String,
        /// What the server lists.
        listed: String,
    },
    /// `--private` names a tool the server does not list.
    #[error("{at}: the server lists no such tool (it lists: {listed})")]
    UnknownPrivate {
        /// Where the name was written ([`Origin::setting`]).
        at: String,
        /// The server's name.
        server: String,
        /// The name in `--private`.
        name: String,
        /// What the server lists.
        listed: String,
    },
    /// `--private` names a tool the catalog does not keep.
    #[error("{at}: {why}")]
    PrivateNotKept {
        /// Where the name was written ([`Origin::setting`]).
        at: String,
        /// The server's name.
        server: String,
        /// The name in `--private`.
        name: String,
        /// Why the tool is not kept.
        why: String,
    },
    /// A server's policy file cannot be used (the error names the file, the
    /// JSON path and the reason).
    #[error("{at}{error}")]
    Policy {
        /// Before the error: the config entry it belongs to, or nothing for
        /// `--policy` ([`Origin::server_prefix`]).
        at: String,
        /// The server's name.
        server: String,
        /// Why (boxed: it is large, and rare).
        #[source]
        error: Box<PolicyError>,
    },
    /// The audit sink could not be written at start.
    #[error("{0}")]
    Audit(#[source] code_mode_audit::AuditError),
    /// Two kept tools would get the same Python name.
    #[error("tools {first:?} and {second:?} would both be called {python}: allow only one of them")]
    NameClash {
        /// The Python name.
        python: String,
        /// The first tool (`server: tool`).
        first: String,
        /// The second tool.
        second: String,
    },
}

/// Why an ended session's state could not be forgotten
/// ([`crate::Bridge::end_session`]).
#[derive(Debug, thiserror::Error)]
pub enum SessionEndError {
    /// The id is the `global` pseudo-session, an identity's stateless scope
    /// or no session's id.
    #[error("{session:?} is not a client session: refused to forget its state")]
    NotASession {
        /// The id given (cut).
        session: String,
    },
    /// The session-state store failed.
    #[error("session state: {0}")]
    State(#[source] code_mode_core::state::StateError),
}

/// Why a call to the server failed on the host side.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server took too long.
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The MCP session failed (transport closed, protocol error, ...).
    #[error("{0}")]
    Service(#[from] rmcp::service::ServiceError),
    /// The server exited and is not running again yet.
    #[error("the server exited and is being restarted")]
    Restarting,
    /// The server was closed (shutdown).
    #[error("the server was closed")]
    Closed,
    /// A session of the client's own with the server could not be opened
    /// (see [`crate::upstream`]).
    #[error("a session of this client's own with the server could not be opened: {0}")]
    Own(String),
    /// The server needs a login (the message names the command).
    #[error("{0}")]
    NeedsLogin(String),
    /// The server acts upstream as each caller (token exchange) and this
    /// caller has no token of its own for it: the message says why.
    #[error("{0}")]
    NoAccount(String),
    /// A task the server made of a cell's call ended without a result (it
    /// failed, was cancelled by the server, or asked a question that got
    /// no answer): the message says which, with the server's error.
    #[error("{0}")]
    Task(String),
}
