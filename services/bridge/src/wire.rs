//! What the bridge puts on the bus when a call does not simply succeed, or
//! a request cannot be answered: decided here and nowhere else.
//!
//! The code in the sandbox sees exactly what [`tool_reply`] makes of a
//! [`CallFailure`]: a refusal's message cut to the configured length (500
//! characters by default), or, for a fault on the host side, only the
//! fault's [`ErrorKind`], a type name with no detail (details go to the
//! log). A request the bridge cannot answer at all gets the [`WireError`]
//! of [`service_error`]. What a checked call came to ([`Answer`]) takes its
//! caller's shape here too ([`Answer::for_code`], [`Answer::for_direct`]),
//! and so does a failure of the console's requests ([`board_error`]).

use code_mode_proto::{DirectReply, ErrorKind, ToolReply, WireError};
use rmcp::model::CallToolResult;
use rmcp::service::ServiceError;
use serde_json::Value;

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

/// What a checked call came to, before it takes its caller's shape.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The result as code receives it.
    Text(String),
    /// The same with the result's blocks other than text, for code.
    Content {
        /// The string code gets.
        value: String,
        /// The blocks other than text, as the server sent them.
        blocks: Vec<Value>,
    },
    /// The result as the server sent it (direct calls).
    Result(Box<CallToolResult>),
    /// The result of a request other than a tool call, as JSON.
    Value(Value),
    /// A request other than a tool call that its server refused with a
    /// JSON-RPC error: its message (cut) and code.
    ServerRefused {
        /// The server's message, led by the request.
        message: String,
        /// The server's error code.
        code: i32,
        /// The error's data.
        data: Option<Value>,
    },
    /// Refused (the bridge's message, cut) or a host fault (its kind
    /// only), as [`tool_reply`] puts it on the wire.
    Failed(ToolReply),
}

impl Answer {
    /// The answer as code receives it.
    pub(crate) fn for_code(self) -> ToolReply {
        match self {
            Answer::Text(value) => ToolReply::Ok { value },
            Answer::Content { value, blocks } => ToolReply::Content { value, blocks },
            Answer::Result(result) => ToolReply::Ok { value: crate::answer::result_text(&result) },
            Answer::Value(value) => ToolReply::Ok { value: value.to_string() },
            Answer::ServerRefused { message, .. } => ToolReply::Refused { message },
            Answer::Failed(reply) => reply,
        }
    }

    /// The answer as a client's direct call receives it: a result in its
    /// MCP shape (text as one text block), a server's JSON-RPC refusal with
    /// its code, the bridge's refusal, or a fault's kind.
    pub(crate) fn for_direct(self) -> DirectReply {
        match self {
            Answer::Result(result) => match serde_json::to_value(&*result) {
                Ok(result) => DirectReply::Ok { result },
                Err(_) => DirectReply::Fault { kind: ErrorKind::UnexpectedResponse },
            },
            Answer::Value(result) => DirectReply::Ok { result },
            Answer::ServerRefused { message, code, data } => DirectReply::Refused { message, code: Some(code), data },
            Answer::Text(text)
            | Answer::Failed(ToolReply::Ok { value: text })
            | Answer::Content { value: text, .. }
            | Answer::Failed(ToolReply::Content { value: text, .. }) => {
                DirectReply::Ok { result: serde_json::json!({"content": [{"type": "text", "text": text}]}) }
            }
            Answer::Failed(ToolReply::Refused { message }) => DirectReply::Refused { message, code: None, data: None },
            Answer::Failed(ToolReply::Fault { kind }) => DirectReply::Fault { kind },
        }
    }
}

/// A failure of the approval board (the web console's requests) on the
/// wire: the state store failing is `state_unavailable`, anything else the
/// request's fault.
pub(crate) fn board_error(e: crate::board::BoardError) -> WireError {
    let kind = match e {
        crate::board::BoardError::State(_) => ErrorKind::Other(STATE_UNAVAILABLE.into()),
        _ => ErrorKind::BadRequest,
    };
    WireError { kind, message: e.to_string() }
}

/// The kind of a console request's failure when the state store fails.
const STATE_UNAVAILABLE: &str = "state_unavailable";
