//! Every kind of failure that crosses the bus, and the reply envelope that
//! carries a service's error.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// Every kind of failure that crosses the bus: why a service could not
/// answer a request ([`WireError::kind`]) and which host fault ended a tool
/// call ([`ToolReply::Fault`]). One enum, so a kind is spelled once and
/// consumers match on variants, not strings.
///
/// Each variant keeps the spelling the wire has always carried: `snake_case`
/// words for a service's errors, an exception type name for a host fault
/// (that name is what the code sees as its `ToolError`). Older peers
/// therefore read the same bytes.
///
/// **Kinds from a newer peer.** A kind this version does not know decodes as
/// [`ErrorKind::Other`] holding its text (an untagged last variant, so any
/// string is accepted and nothing fails to decode), and it encodes back to
/// the same text. Consumers treat `Other` as the generic case of where it
/// arrived: a service error that fails the request (never retried as
/// `NoCapacity` is), or a fault whose name is shown to the code as it came.
/// Never construct `Other` with a known kind's spelling: it would not be
/// equal to that variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ErrorKind {
    /// A service's error: the request did not decode or its values are out
    /// of the accepted range.
    #[serde(rename = "bad_request")]
    BadRequest,
    /// A service's error: a sandbox-runner with every slot taken declines a
    /// cell, so the frontend offers it again (the queue group picks anew).
    #[serde(rename = "no_capacity")]
    NoCapacity,
    /// A service's error: the sandbox-runner could not run the cell (Docker
    /// failed, the image is missing, ...).
    #[serde(rename = "sandbox")]
    Sandbox,
    /// A service's error: the bridge could not forget an ended session.
    #[serde(rename = "session_end_failed")]
    SessionEndFailed,
    /// A service's error: the audit sink cannot be written, so the cell is
    /// refused (fail closed).
    #[serde(rename = "audit_unwritable")]
    AuditUnwritable,
    /// A service's error: the sandbox-runner holds no kept container under
    /// the key a kept session's cell names, so the session's variables are
    /// gone (its next cell starts a fresh container, saying so).
    #[serde(rename = "kept_lost")]
    KeptLost,
    /// A service's error: the kept container is running another cell of
    /// its session.
    #[serde(rename = "kept_busy")]
    KeptBusy,
    /// A service's error: the kept container a cell names was removed a
    /// while ago (the message says why: idle, past its longest life, a
    /// stopped cell, its session ended).
    #[serde(rename = "kept_expired")]
    KeptExpired,
    /// A service's error: the kept container a cell names belongs to
    /// another session (for a stateless client's handle: another identity).
    #[serde(rename = "kept_foreign")]
    KeptForeign,
    /// A service's error: the session-state store failed, so the bridge
    /// could not answer a console request (the approval board, the
    /// runners, the reloads).
    #[serde(rename = "state_unavailable")]
    StateUnavailable,
    /// A host fault: the wrapped server answered with a JSON-RPC error.
    McpError,
    /// A host fault: the wrapped server's transport closed (it crashed).
    TransportClosed,
    /// A host fault: a request could not be sent to the wrapped server.
    TransportSendError,
    /// A host fault: the wrapped server answered with the wrong message.
    UnexpectedResponse,
    /// A host fault: the request to the wrapped server was cancelled.
    Cancelled,
    /// A host fault: the MCP session failed some other way.
    ServiceError,
    /// A host fault: the MCP layer timed out.
    TimeoutError,
    /// A host fault: the wrapped server exited and is being restarted.
    ServerRestarting,
    /// A host fault: the wrapped server was closed (shutdown).
    ServerClosed,
    /// A host fault: no bridge answers tool calls.
    BridgeUnavailable,
    /// A host fault: the bridge did not answer the call in time.
    BridgeTimeout,
    /// A host fault: the call failed between the runner and the bridge some
    /// other way.
    BridgeError,
    /// A kind this version does not know (from a newer peer), as it came.
    #[serde(untagged)]
    Other(String),
}

impl ErrorKind {
    /// The kind as it travels: the service error's word or the fault's type
    /// name.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::NoCapacity => "no_capacity",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::SessionEndFailed => "session_end_failed",
            ErrorKind::AuditUnwritable => "audit_unwritable",
            ErrorKind::KeptLost => "kept_lost",
            ErrorKind::KeptBusy => "kept_busy",
            ErrorKind::KeptExpired => "kept_expired",
            ErrorKind::KeptForeign => "kept_foreign",
            ErrorKind::StateUnavailable => "state_unavailable",
            ErrorKind::McpError => "McpError",
            ErrorKind::TransportClosed => "TransportClosed",
            ErrorKind::TransportSendError => "TransportSendError",
            ErrorKind::UnexpectedResponse => "UnexpectedResponse",
            ErrorKind::Cancelled => "Cancelled",
            ErrorKind::ServiceError => "ServiceError",
            ErrorKind::TimeoutError => "TimeoutError",
            ErrorKind::ServerRestarting => "ServerRestarting",
            ErrorKind::ServerClosed => "ServerClosed",
            ErrorKind::BridgeUnavailable => "BridgeUnavailable",
            ErrorKind::BridgeTimeout => "BridgeTimeout",
            ErrorKind::BridgeError => "BridgeError",
            ErrorKind::Other(kind) => kind,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a service could not answer a request at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireError {
    /// What went wrong, for programs.
    pub kind: ErrorKind,
    /// A message for people.
    pub message: String,
}

/// The envelope of every reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply<T> {
    /// The typed answer.
    Ok(T),
    /// The service could not answer.
    Err(WireError),
}
