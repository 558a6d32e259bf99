//! What the bridge puts on the bus when a call does not simply succeed, or
//! a request cannot be answered: decided here and nowhere else.
//!
//! The code in the sandbox sees exactly what [`tool_reply`] makes of a
//! [`CallFailure`]: a refusal's message cut to the configured length (500
//! characters by default), or, for a fault on the host side, only the
//! fault's [`ErrorKind`], a type name with no detail (details go to the
//! log). A request the bridge cannot answer at all gets the [`WireError`]
//! of [`service_error`].

use code_mode_proto::{ErrorKind, ToolReply, WireError};
use rmcp::service::ServiceError;

use crate::SessionEndError;
use crate::server::CallError;

/// Why a tool call produced no result.
#[derive(Debug)]
pub enum CallFailure {
    /// Refused by the bridge's checks, the policy, the private-data rule, or
    /// the tool itself (`isError`, a result over the limit, a timeout): the
    /// message is the bridge's own and reaches the code.
    Refused(String),
    /// A fault on the host side (the server's session failed, it is
    /// restarting or closed): only its kind reaches the code.
    Host(CallError),
}

/// The one mapping of a call's failure to the wire: a refusal's message is
/// cut to `max_message_chars`; a host fault becomes its type name only.
pub fn tool_reply(failure: CallFailure, max_message_chars: usize) -> ToolReply {
    match failure {
        CallFailure::Refused(message) => {
            ToolReply::Refused { message: crate::stubs::cut_chars(&message, max_message_chars) }
        }
        CallFailure::Host(e) => ToolReply::Fault { kind: fault_kind(&e) },
    }
}

/// The kind the sandbox may see of a host fault, never its details.
pub(crate) fn fault_kind(e: &CallError) -> ErrorKind {
    match e {
        CallError::Timeout(_) => ErrorKind::TimeoutError,
        CallError::Restarting => ErrorKind::ServerRestarting,
        CallError::Closed => ErrorKind::ServerClosed,
        CallError::Own(_) | CallError::NeedsLogin(_) => ErrorKind::ServiceError,
        CallError::Service(e) => match e {
            ServiceError::McpError(_) => ErrorKind::McpError,
            ServiceError::TransportSend(_) => ErrorKind::TransportSendError,
            ServiceError::TransportClosed => ErrorKind::TransportClosed,
            ServiceError::UnexpectedResponse => ErrorKind::UnexpectedResponse,
            ServiceError::Cancelled { .. } => ErrorKind::Cancelled,
            ServiceError::Timeout { .. } => ErrorKind::TimeoutError,
            _ => ErrorKind::ServiceError,
        },
    }
}

/// The one mapping of a request the bridge could not serve (forgetting an
/// ended session) to the wire. The message goes to the frontend, a trusted
/// peer, never to the code.
pub fn service_error(e: &SessionEndError) -> WireError {
    let kind = match e {
        SessionEndError::NotASession { .. } => ErrorKind::BadRequest,
        _ => ErrorKind::SessionEndFailed,
    };
    WireError { kind, message: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_cut_and_a_fault_carries_only_its_kind() {
        let long = "x".repeat(600);
        let ToolReply::Refused { message } = tool_reply(CallFailure::Refused(long), 500) else { panic!() };
        assert_eq!(message.chars().count(), 500);
        let reply = tool_reply(CallFailure::Host(CallError::Service(ServiceError::TransportClosed)), 500);
        assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::TransportClosed });
        let reply = tool_reply(CallFailure::Host(CallError::Restarting), 500);
        assert_eq!(serde_json::to_string(&reply).unwrap(), r#"{"status":"fault","kind":"ServerRestarting"}"#);
    }
}
