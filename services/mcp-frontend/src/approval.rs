//! Approvals: the bridge asks this client session's person whether a tool
//! call may go out, and the frontend asks its MCP client through
//! elicitation, on the `run_python` request that runs the cell.
//!
//! How depends on what the client negotiated:
//!
//! - **Protocol 2025-11-25 and older** (an `initialize` handshake): the
//!   frontend sends `elicitation/create` while the `run_python` request is in
//!   flight and waits for the answer.
//! - **Protocol 2026-07-28 and newer** (stateless): a server may no longer
//!   send requests to the client. The `run_python` call returns an
//!   *input-required* result holding the questions and an opaque
//!   `requestState`; the cell keeps running, parked here, its calls waiting.
//!   The client asks the person and sends `tools/call` again with the
//!   answers and the same `requestState`; the frontend hands the answers to
//!   the waiting calls and goes on with the cell (possibly asking again).
//! - A client that declared no form elicitation cannot be asked: the call
//!   is refused saying so.
//!
//! Every answer but an explicit accept refuses the call: decline, dismiss,
//! no answer within the timeout, no way to ask.

use std::time::Duration;

use code_mode_proto::{ApprovalReply, ApprovalRequest};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use tokio::sync::oneshot;

use crate::auth::Identity;

/// One approval the bridge waits for, routed to the request running its
/// cell.
#[derive(Debug)]
pub struct Pending {
    /// What to ask.
    pub request: ApprovalRequest,
    /// Where the answer goes (the bridge's request waits on it).
    pub answer: oneshot::Sender<ApprovalReply>,
}

/// How the client can be asked, from what it negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// `elicitation/create` during the request (protocol before 2026-07-28).
    Request,
    /// An input-required result and a retried call (2026-07-28 and later).
    InputRequired,
    /// The client declared no form elicitation.
    Unsupported,
}

/// Longest time a parked cell waits for the client's retried call beyond
/// the approval timeout, before it is dropped.
pub const PARK_MARGIN: Duration = code_mode_core::defaults::HOP_MARGIN;

/// The question the person sees, as an elicitation form with no fields.
pub fn question(request: &ApprovalRequest) -> ElicitRequestParams {
    question_for(request, None)
}

/// [`question`] for a session opened by `identity`, which the question
/// names (so a person answering for several identities knows whose code
/// asks).
pub fn question_for(request: &ApprovalRequest, identity: Option<&Identity>) -> ElicitRequestParams {
    let message = match identity {
        Some(identity) => message(request).replacen("the code wants", &format!("the code of {identity} wants"), 1),
        None => message(request),
    };
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: empty_form() }
}

/// Someone to ask when a cell does not run on an MCP request (`code-mode
/// run`): the person at the terminal, say. An implementation answers within
/// its own time or is cut off at the request's timeout.
pub trait LocalAsker: Send + Sync + std::fmt::Debug {
    /// Ask about one call.
    fn ask(&self, request: ApprovalRequest) -> std::pin::Pin<Box<dyn Future<Output = ApprovalReply> + Send>>;
}

/// The text of the question: tool, server, arguments, rule, time to answer.
pub fn message(request: &ApprovalRequest) -> String {
    format!(
        "code-mode: the code wants to call the tool {tool:?} of the server {server:?}.\n\
         Arguments: {arguments}\n\
         The policy rule {rule} needs your approval. Accept to let this one call go out; decline to refuse it \
         (answer within {secs} s).",
        tool = request.tool,
        server = request.server,
        arguments = request.arguments,
        rule = request.rule,
        secs = request.timeout_ms / 1000,
    )
}

/// A form with no fields: accepting is the approval.
fn empty_form() -> ElicitationSchema {
    serde_json::from_value(serde_json::json!({"type": "object", "properties": {}}))
        .expect("an empty object schema is a valid elicitation schema")
}

/// The approval a client's elicitation result gives.
pub fn answer_of(result: &ElicitResult) -> ApprovalReply {
    match result.action {
        ElicitationAction::Accept => ApprovalReply::Approved,
        ElicitationAction::Decline => ApprovalReply::Declined,
        ElicitationAction::Cancel => ApprovalReply::Cancelled,
        // An action of a later protocol: not an approval.
        _ => ApprovalReply::Unavailable { reason: "the client answered with an action code-mode does not know".into() },
    }
}

/// The approval an answer in a retried call's `inputResponses` gives; an
/// answer that is not an elicitation result approves nothing.
pub fn answer_of_value(value: Option<&serde_json::Value>) -> ApprovalReply {
    match value.map(|v| serde_json::from_value::<ElicitResult>(v.clone())) {
        Some(Ok(result)) => answer_of(&result),
        Some(Err(e)) => {
            ApprovalReply::Unavailable { reason: format!("the client's answer was not an elicitation result: {e}") }
        }
        None => ApprovalReply::Unavailable { reason: "the client answered without this question's answer".into() },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            session: "s".into(),
            cell_id: "c".into(),
            server: "files".into(),
            tool: "delete_file".into(),
            arguments: r#""path" = "/tmp/a""#.into(),
            rule: "/tools/delete_file".into(),
            timeout_ms: 60_000,
        }
    }

    #[test]
    fn the_question_names_the_tool_the_server_the_arguments_and_the_rule() {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = question(&request()) else {
            panic!("a form question");
        };
        for part in ["\"delete_file\"", "\"files\"", r#""path" = "/tmp/a""#, "/tools/delete_file", "60 s"] {
            assert!(message.contains(part), "{part} missing from {message}");
        }
        assert!(requested_schema.properties.is_empty());
    }

    #[test]
    fn the_question_of_an_authenticated_session_names_its_identity() {
        let ElicitRequestParams::FormElicitationParams { message, .. } =
            question_for(&request(), Some(&Identity::new("alice")))
        else {
            panic!("a form question");
        };
        assert!(
            message.starts_with("code-mode: the code of alice wants to call the tool \"delete_file\""),
            "{message}"
        );
    }

    #[test]
    fn only_an_accept_approves() {
        assert_eq!(answer_of_value(Some(&json!({"action": "accept", "content": {}}))), ApprovalReply::Approved);
        assert_eq!(answer_of_value(Some(&json!({"action": "decline"}))), ApprovalReply::Declined);
        assert_eq!(answer_of_value(Some(&json!({"action": "cancel"}))), ApprovalReply::Cancelled);
        assert!(matches!(answer_of_value(Some(&json!({"action": "yes please"}))), ApprovalReply::Unavailable { .. }));
        assert!(matches!(answer_of_value(None), ApprovalReply::Unavailable { .. }));
    }
}
