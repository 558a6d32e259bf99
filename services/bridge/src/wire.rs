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
//! and so does a failure of the console's requests ([`board_error`]). A
//! wrapped server's question to a client that gets no answer
//! ([`Unanswered`]) is the JSON-RPC error its server hears
//! ([`question_error`]).

use code_mode_proto::{AskKind, DirectReply, ErrorKind, ToolReply, WireError};
use rmcp::model::{ErrorCode, ErrorData};
use rmcp::service::ServiceError;

use crate::SessionEndError;
use crate::answer::Answer;
use crate::error::CallError;

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
    /// The server's answer is not the result its request returns (a fault
    /// too: only its kind reaches the code).
    Unexpected,
}

/// The one mapping of a call's failure to the wire: a refusal's message is
/// cut to `max_message_chars`; a host fault becomes its type name only.
pub fn tool_reply(failure: CallFailure, max_message_chars: usize) -> ToolReply {
    match failure {
        CallFailure::Refused(message) => {
            ToolReply::Refused { message: crate::stubs::cut_chars(&message, max_message_chars) }
        }
        CallFailure::Host(e) => ToolReply::Fault { kind: fault_kind(&e) },
        CallFailure::Unexpected => ToolReply::Fault { kind: ErrorKind::UnexpectedResponse },
    }
}

/// The kind the sandbox may see of a host fault, never its details.
pub(crate) fn fault_kind(e: &CallError) -> ErrorKind {
    match e {
        CallError::Timeout(_) => ErrorKind::TimeoutError,
        CallError::Restarting => ErrorKind::ServerRestarting,
        CallError::Closed => ErrorKind::ServerClosed,
        CallError::Own(_) | CallError::NeedsLogin(_) | CallError::NoAccount(_) => ErrorKind::ServiceError,
        CallError::Task(_) => ErrorKind::McpError,
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
        let reply = tool_reply(CallFailure::Unexpected, 500);
        assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::UnexpectedResponse });
    }

    #[test]
    fn a_failing_state_store_is_state_unavailable_on_the_wire_and_any_other_board_failure_a_bad_request() {
        use crate::board::BoardError;
        use code_mode_core::state::StateError;
        let failed = board_error(BoardError::State(StateError::Unavailable("nats down".into())));
        assert_eq!(failed.kind, ErrorKind::StateUnavailable);
        assert_eq!(
            serde_json::to_value(&failed).unwrap()["kind"],
            "state_unavailable",
            "the spelling the wire always carried"
        );
        assert_eq!(board_error(BoardError::Unknown("q1".into())).kind, ErrorKind::BadRequest);
        assert_eq!(board_error(BoardError::Full).kind, ErrorKind::BadRequest);
    }

    #[test]
    fn a_servers_unanswered_question_is_an_invalid_request_when_refused_and_keeps_a_clients_own_code() {
        let refused = question_error(Unanswered::Refused("sampling/createMessage: denied".into()));
        assert_eq!(refused.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(refused.message, "sampling/createMessage: denied");
        let by_client = question_error(Unanswered::ByClient { message: "no roots".into(), code: Some(-32601) });
        assert_eq!(by_client.code, ErrorCode(-32601));
        let by_client = question_error(Unanswered::ByClient { message: "no".into(), code: None });
        assert_eq!(by_client.code, ErrorCode::INVALID_REQUEST);
        let shared = question_error(Unanswered::NoClient(AskKind::Roots));
        assert_eq!(shared.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(
            shared.message.starts_with("roots/list: the client of this call cannot answer it"),
            "{}",
            shared.message
        );
        for internal in [Unanswered::ShuttingDown, Unanswered::Unreachable, Unanswered::NotAnswered] {
            assert_eq!(question_error(internal).code, ErrorCode::INTERNAL_ERROR);
        }
    }
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

    /// The message of a refusal by one of the checks' steps (a server's
    /// question is refused with it as a JSON-RPC error).
    pub(crate) fn refusal(self) -> String {
        match self.for_code() {
            ToolReply::Refused { message } => message,
            ToolReply::Fault { kind } => kind.to_string(),
            ToolReply::Ok { value } | ToolReply::Content { value, .. } => value,
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
/// wire: the state store failing is [`ErrorKind::StateUnavailable`],
/// anything else the request's fault.
pub(crate) fn board_error(e: crate::board::BoardError) -> WireError {
    let kind = match e {
        crate::board::BoardError::State(_) => ErrorKind::StateUnavailable,
        _ => ErrorKind::BadRequest,
    };
    WireError { kind, message: e.to_string() }
}

/// Why a wrapped server's question to a client (sampling, elicitation,
/// roots) got no answer. Its server hears it as the JSON-RPC error
/// [`question_error`] makes of it.
#[derive(Debug)]
pub(crate) enum Unanswered {
    /// The question could not be read (its parameters are not JSON).
    BadParams(String),
    /// Asked on the shared session, which stands for no client.
    NoClient(AskKind),
    /// Refused by the bridge's checks (the client's capability, the
    /// server's policy, the private-data rule), or no client session can
    /// be reached: the message says which.
    Refused(String),
    /// The server withdrew its request while the client was asked.
    Withdrawn,
    /// The client refused to answer: its message and JSON-RPC code.
    ByClient {
        /// The client's message.
        message: String,
        /// The client's code (absent: invalid request).
        code: Option<i32>,
    },
    /// The client's frontend took the question but gave no answer.
    NotAnswered,
    /// The client could not be asked (its session is gone or silent).
    Unreachable,
    /// The question's audit record could not be written, so its answer is
    /// withheld.
    NotRecorded(String),
    /// The client's answer is not the result the question's method returns.
    BadAnswer {
        /// The question.
        kind: AskKind,
        /// What was wrong with the answer.
        why: String,
    },
    /// The gateway is shutting down (or no bridge serves the session).
    ShuttingDown,
}

/// The one mapping of a server's unanswered question to the JSON-RPC error
/// its server hears: the bridge's refusals and a withdrawn question as an
/// invalid request, a client's own refusal with its code, a question on
/// the shared session as a method not found, the rest as internal errors.
pub(crate) fn question_error(failure: Unanswered) -> ErrorData {
    match failure {
        Unanswered::BadParams(why) => ErrorData::invalid_params(why, None),
        Unanswered::NoClient(kind) => ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "{}: the client of this call cannot answer it (code-mode relays a server's questions only to a \
                 client that declared the capability)",
                kind.method()
            ),
            None,
        ),
        Unanswered::Refused(why) => ErrorData::invalid_request(why, None),
        Unanswered::Withdrawn => ErrorData::invalid_request("the server withdrew its request", None),
        Unanswered::ByClient { message, code } => {
            ErrorData::new(code.map_or(ErrorCode::INVALID_REQUEST, ErrorCode), message, None)
        }
        Unanswered::NotAnswered => ErrorData::internal_error("the client's frontend did not answer the question", None),
        Unanswered::Unreachable => {
            ErrorData::internal_error("the client could not be asked (its session is gone or did not answer)", None)
        }
        Unanswered::NotRecorded(e) => {
            ErrorData::internal_error(format!("the gateway could not record the answer: {e}"), None)
        }
        Unanswered::BadAnswer { kind, why } => {
            ErrorData::internal_error(format!("the client's answer is not a {} result: {why}", kind.method()), None)
        }
        Unanswered::ShuttingDown => ErrorData::internal_error("the gateway is shutting down", None),
    }
}
