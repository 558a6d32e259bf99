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
//!
//! A rule that names approvers puts its question in the web console
//! ([`ApprovalRequest::console`], [`crate::console`]): the client is told
//! where (the `approval_asked` log notification with the link, and a
//! URL-mode elicitation to a client that declared one: [`console_question`])
//! and, unless the rule says `ask_client`, answered at once with
//! [`IN_CONSOLE`], which the bridge ignores: the console's decision counts.
//! With `ask_client` the form question is asked as above, its message
//! giving the link too ([`question_linked`]).

use code_mode_proto::{ApprovalReply, ApprovalRequest, ConsoleAsk};
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

/// The question the person sees, as an elicitation form with no fields.
pub fn question(request: &ApprovalRequest) -> ElicitRequestParams {
    question_for(request, None)
}

/// [`question`] for a session opened by `identity`, which the question
/// names (so a person answering for several identities knows whose code
/// asks).
pub fn question_for(request: &ApprovalRequest, identity: Option<&Identity>) -> ElicitRequestParams {
    question_linked(request, identity, None)
}

/// [`question_for`], its message also giving the console's page of the
/// question (`link`), when it waits there too.
pub fn question_linked(
    request: &ApprovalRequest,
    identity: Option<&Identity>,
    link: Option<&str>,
) -> ElicitRequestParams {
    let mut message = match identity {
        Some(identity) => message(request).replacen("the code wants", &format!("the code of {identity} wants"), 1),
        None => message(request),
    };
    if let (Some(ask), Some(link)) = (&request.console, link) {
        message.push_str(&format!("\nIt also waits in the web console for {}: {link}", approvers(ask)));
    }
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: empty_form() }
}

/// The answer to the bridge for a question that waits in the console and
/// is not asked of the client: the bridge ignores it.
pub const IN_CONSOLE: &str = "the question waits in the console";

/// The approvers a rule names, for a message: `alice, group:security`.
pub fn approvers(ask: &ConsoleAsk) -> String {
    let named: Vec<&str> = ask.approvers.iter().map(String::as_str).take(20).collect();
    if named.is_empty() { "its approvers".into() } else { named.join(", ") }
}

/// The URL-mode elicitation pointing a client's person at the console's
/// page of a question. Its answer decides nothing: a URL-mode accept only
/// means the person opened the link.
pub fn console_question(request: &ApprovalRequest, ask: &ConsoleAsk, link: &str) -> ElicitRequestParams {
    let message = format!(
        "code-mode: the code wants to call the tool {tool:?} of the server {server:?}, which the policy rule {rule} \
         lets go out only with the approval of {who}. It waits in the web console (answer within {secs} s).",
        tool = request.tool,
        server = request.server,
        rule = request.rule,
        who = approvers(ask),
        secs = request.timeout_ms / 1000,
    );
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url: link.to_string(),
        elicitation_id: ask.id.clone(),
    }
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

/// The approval a client's elicitation result gives. Only a well-formed
/// accept approves: `action: "accept"` with `content` an object holding the
/// fields the form asked for, which are none ([`question_linked`] asks an
/// empty form). An accept whose content is missing, not an object (`"yes"`,
/// `["no"]`) or holds fields nobody asked for approves nothing: it may be a
/// client's misreading of a refusal, and the call is refused saying why.
pub fn answer_of(result: &ElicitResult) -> ApprovalReply {
    match result.action {
        ElicitationAction::Accept => match malformed_accept(result.content.as_ref()) {
            None => ApprovalReply::Approved,
            Some(why) => {
                tracing::info!(%why, "an approval answer that breaks the question's form approves nothing");
                ApprovalReply::Unavailable { reason: format!("the client's answer approves nothing: {why}") }
            }
        },
        ElicitationAction::Decline => ApprovalReply::Declined,
        ElicitationAction::Cancel => ApprovalReply::Cancelled,
        // An action of a later protocol: not an approval.
        _ => ApprovalReply::Unavailable { reason: "the client answered with an action code-mode does not know".into() },
    }
}

/// Why an accept's `content` does not answer the approval form (an object
/// with no fields), if it does not.
fn malformed_accept(content: Option<&serde_json::Value>) -> Option<String> {
    let kind = |value: &serde_json::Value| match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    };
    match content {
        None => {
            Some("an accept must carry `content`, the form's fields as an object (`{}`: the form asks none)".into())
        }
        Some(serde_json::Value::Object(fields)) if fields.is_empty() => None,
        Some(serde_json::Value::Object(fields)) => {
            let named: Vec<&str> = fields.keys().map(String::as_str).take(5).collect();
            Some(format!(
                "the accept's content holds fields the form did not ask for ({}): it asks none",
                named.join(", ")
            ))
        }
        Some(other) => Some(format!(
            "an accept's `content` must be an object holding the form's fields (`{{}}`: the form asks none), not {}",
            kind(other)
        )),
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
            console: None,
            connect: None,
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

    fn in_console(ask_client: bool) -> ApprovalRequest {
        let ask = ConsoleAsk { id: "q-1".into(), approvers: vec!["alice".into(), "group:security".into()], ask_client };
        ApprovalRequest { console: Some(ask), ..request() }
    }

    #[test]
    fn a_console_question_points_at_its_page_and_names_tool_server_and_approvers() {
        let request = in_console(false);
        let link = "https://mcp.example.com/console/approvals/q-1";
        let ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id, .. } =
            console_question(&request, request.console.as_ref().unwrap(), link)
        else {
            panic!("a URL-mode question");
        };
        assert_eq!((url.as_str(), elicitation_id.as_str()), (link, "q-1"));
        for part in ["\"delete_file\"", "\"files\"", "alice, group:security", "/tools/delete_file", "60 s"] {
            assert!(message.contains(part), "{part} missing from {message}");
        }
    }

    #[test]
    fn a_form_question_that_also_waits_in_the_console_gives_the_link() {
        let link = "https://mcp.example.com/console/approvals/q-1";
        let ElicitRequestParams::FormElicitationParams { message, .. } =
            question_linked(&in_console(true), None, Some(link))
        else {
            panic!("a form question");
        };
        assert!(message.ends_with(&format!("web console for alice, group:security: {link}")), "{message}");
        let ElicitRequestParams::FormElicitationParams { message, .. } = question_linked(&request(), None, Some(link))
        else {
            panic!("a form question");
        };
        assert!(!message.contains("console"), "no console question, no link: {message}");
    }

    #[test]
    fn only_an_accept_approves() {
        assert_eq!(answer_of_value(Some(&json!({"action": "accept", "content": {}}))), ApprovalReply::Approved);
        assert_eq!(answer_of_value(Some(&json!({"action": "decline"}))), ApprovalReply::Declined);
        assert_eq!(answer_of_value(Some(&json!({"action": "cancel"}))), ApprovalReply::Cancelled);
        assert!(matches!(answer_of_value(Some(&json!({"action": "yes please"}))), ApprovalReply::Unavailable { .. }));
        assert!(matches!(answer_of_value(None), ApprovalReply::Unavailable { .. }));
    }

    #[test]
    fn an_accept_whose_content_breaks_the_form_approves_nothing_and_says_why() {
        for (content, says) in [
            (json!({"action": "accept", "content": "yes"}), "not a string"),
            (json!({"action": "accept", "content": ["no"]}), "not an array"),
            (json!({"action": "accept", "content": true}), "not a boolean"),
            (json!({"action": "accept", "content": null}), "must carry `content`"),
            (json!({"action": "accept"}), "must carry `content`"),
            (json!({"action": "accept", "content": {"approved": false}}), "did not ask for (approved)"),
        ] {
            match answer_of_value(Some(&content)) {
                ApprovalReply::Unavailable { reason } => {
                    assert!(reason.starts_with("the client's answer approves nothing: "), "{reason}");
                    assert!(reason.contains(says), "{content}: {reason}");
                }
                other => panic!("{content} gave {other:?}"),
            }
        }
    }
}
