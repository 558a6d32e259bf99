//! Asking a client's person to connect their own account at a wrapped
//! server (issue 41): the bridge's [`ApprovalRequest`] with
//! [`ApprovalRequest::connect`] set means "the call waits until the
//! identity connects its account at this server".
//!
//! The client is asked with a URL-mode elicitation (its elicitation id the
//! flow, its url the console's connect link,
//! [`crate::console::accounts::connect_link`]): as an `elicitation/create`
//! request on the call (2025-11-25), as an entry of an input-required
//! result (2026-07-28), or as an entry of a task's `inputRequests`. A URL
//! accept only means the person opened the link: the frontend answers
//! [`ApprovalReply::Approved`] and the bridge waits for the grant. Decline
//! and cancel answer as for an approval. A client that declared no URL
//! elicitation, or a frontend that serves no console to connect through,
//! answers [`ApprovalReply::Unavailable`] whose reason holds the whole link
//! and what to do: the bridge ends the call with a `ToolError` quoting it.

use std::time::Duration;

use code_mode_proto::{ApprovalReply, ApprovalRequest, ConnectAsk};
use futures::stream::FuturesUnordered;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::{RequestContext, ServiceError};
use tokio_util::sync::CancellationToken;

use crate::approval::{self, Pending};
use crate::auth::Identity;
use crate::{Frontend, questions};

/// The futures a request drives beside its call (its questions to the
/// client).
pub(crate) type Asking = FuturesUnordered<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>;

/// The URL-mode elicitation asking to connect the account (`link`: the
/// console's connect page of the flow).
pub fn question(
    request: &ApprovalRequest,
    ask: &ConnectAsk,
    link: &str,
    identity: Option<&Identity>,
) -> ElicitRequestParams {
    let whose = identity.map(|i| format!(" of {i}")).unwrap_or_default();
    let message = format!(
        "code-mode: the code{whose} calls the tool {tool:?} of the server {server:?}, which acts as your own account \
         there, and you have not connected one. Open the link to connect your account at {server:?}: the call waits \
         (at most {secs} s) and goes on once it is connected.",
        tool = request.tool,
        server = ask.server,
        secs = request.timeout_ms / 1000,
    );
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url: link.to_string(),
        elicitation_id: ask.flow.clone(),
    }
}

/// The answer for a client that cannot be asked to open the link: its
/// reason holds the whole link (or why there is none) and what to do.
pub fn unavailable(ask: &ConnectAsk, link: Option<&str>, why: &str) -> ApprovalReply {
    let reason = match link {
        Some(link) => {
            format!("{why}: open {link} to connect your account at {server:?}, then call again", server = ask.server)
        }
        None => format!(
            "{why}, and this frontend serves no web console to connect an account through (it needs clients to \
             authenticate): the account at {server:?} cannot be connected here",
            server = ask.server
        ),
    };
    ApprovalReply::Unavailable { reason }
}

/// What a client's answer to the connect question gives: any accept (a
/// URL-mode accept carries no content) means the link was opened.
pub fn answer_of(result: &ElicitResult) -> ApprovalReply {
    match result.action {
        ElicitationAction::Accept => ApprovalReply::Approved,
        ElicitationAction::Decline => ApprovalReply::Declined,
        ElicitationAction::Cancel => ApprovalReply::Cancelled,
        _ => ApprovalReply::Unavailable { reason: "the client answered with an action code-mode does not know".into() },
    }
}

/// [`answer_of`] for an answer in a retried call's `inputResponses` or a
/// task's answers.
pub fn answer_of_value(value: Option<&serde_json::Value>) -> ApprovalReply {
    match value.map(|v| serde_json::from_value::<ElicitResult>(v.clone())) {
        Some(Ok(result)) => answer_of(&result),
        Some(Err(e)) => {
            ApprovalReply::Unavailable { reason: format!("the client's answer was not an elicitation result: {e}") }
        }
        None => ApprovalReply::Unavailable { reason: "the client answered without this question's answer".into() },
    }
}

/// The elicitation an approval question (a connect question or a plain
/// one) is put to the client as, in an input-required result.
pub(crate) fn elicitation(
    frontend: &Frontend,
    request: &ApprovalRequest,
    identity: Option<&Identity>,
    console_link: Option<&str>,
) -> ElicitRequestParams {
    match &request.connect {
        Some(ask) => {
            let link = crate::console::accounts::connect_link(&frontend.shared, &ask.flow).unwrap_or_default();
            question(request, ask, &link, identity)
        }
        None => approval::question_linked(request, identity, console_link),
    }
}

/// The reply an answer in `inputResponses` gives to an approval question.
pub(crate) fn reply_of_value(request: &ApprovalRequest, value: Option<&serde_json::Value>) -> ApprovalReply {
    if request.connect.is_some() { answer_of_value(value) } else { approval::answer_of_value(value) }
}

impl Frontend {
    /// Put a connect question to the request's client: answered now when
    /// the client cannot be asked, asked by `elicitation/create` in
    /// `asking` (2025-11-25); returned when it must go into an
    /// input-required result (2026-07-28).
    pub(crate) fn ask_connect(
        &self,
        first: Pending,
        context: &RequestContext<RoleServer>,
        identity: Option<&Identity>,
        gone: &CancellationToken,
        asking: &mut Asking,
    ) -> Option<Pending> {
        let ask = &ask_of(&first.request);
        let link = crate::console::accounts::connect_link(&self.shared, &ask.flow);
        let url_mode = crate::handler::accepts_url_elicitation(context);
        let Some(link) = link.clone().filter(|_| url_mode) else {
            let why = if url_mode {
                "the account cannot be connected through the client"
            } else {
                "the MCP client did not declare URL-mode elicitation, so it cannot be asked to open the link"
            };
            tracing::info!(server = %ask.server, "a connect question cannot be put to the client");
            let _ = first.answer.send(unavailable(ask, link.as_deref(), why));
            return None;
        };
        tracing::info!(server = %ask.server, "asking the client to connect an account (URL-mode elicitation)");
        if crate::handler::input_required(context) {
            return Some(first);
        }
        let peer = context.peer.clone();
        let question = question(&first.request, ask, &link, identity);
        let timeout = Duration::from_millis(first.request.timeout_ms);
        let gone = gone.clone();
        asking.push(Box::pin(async move {
            let answer = match questions::elicit_unless_gone(&peer, question, timeout, &gone).await {
                None => ApprovalReply::Unavailable { reason: questions::REQUEST_GONE.into() },
                Some(Ok(result)) => answer_of(&result),
                Some(Err(ServiceError::Timeout { .. })) => ApprovalReply::TimedOut,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "a connect elicitation failed");
                    let why: String = format!("the client could not be asked ({e})").chars().take(200).collect();
                    unavailable(&ask_of(&first.request), Some(&link), &why)
                }
            };
            let _ = first.answer.send(answer);
        }));
        None
    }
}

/// The connect ask of a request known to have one.
fn ask_of(request: &ApprovalRequest) -> ConnectAsk {
    request.connect.clone().unwrap_or_else(|| ConnectAsk { flow: String::new(), server: request.server.clone() })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            session: "s".into(),
            cell_id: "c".into(),
            server: "notes".into(),
            tool: "whoami".into(),
            arguments: "{}".into(),
            rule: String::new(),
            timeout_ms: 300_000,
            console: None,
            connect: Some(ConnectAsk { flow: "f-1".into(), server: "notes".into() }),
        }
    }

    #[test]
    fn the_connect_question_is_a_url_elicitation_of_the_flow_naming_the_server_and_the_wait() {
        let request = request();
        let link = "https://mcp.example.com/console/connect/f-1";
        let ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id, .. } =
            question(&request, request.connect.as_ref().unwrap(), link, Some(&Identity::new("alice")))
        else {
            panic!("a URL-mode question");
        };
        assert_eq!((url.as_str(), elicitation_id.as_str()), (link, "f-1"));
        for part in ["\"notes\"", "\"whoami\"", "of alice", "the call waits", "300 s", "connect your account"] {
            assert!(message.contains(part), "{part} missing from {message}");
        }
    }

    #[test]
    fn a_url_accept_without_content_means_opened_and_other_answers_refuse() {
        assert_eq!(answer_of_value(Some(&json!({"action": "accept"}))), ApprovalReply::Approved);
        assert_eq!(answer_of_value(Some(&json!({"action": "accept", "content": {}}))), ApprovalReply::Approved);
        assert_eq!(answer_of_value(Some(&json!({"action": "decline"}))), ApprovalReply::Declined);
        assert_eq!(answer_of_value(Some(&json!({"action": "cancel"}))), ApprovalReply::Cancelled);
        assert!(matches!(answer_of_value(None), ApprovalReply::Unavailable { .. }));
        // The same accept to a plain approval's form approves nothing.
        let plain = ApprovalRequest { connect: None, ..request() };
        assert!(matches!(
            reply_of_value(&plain, Some(&json!({"action": "accept"}))),
            ApprovalReply::Unavailable { .. }
        ));
        assert_eq!(reply_of_value(&request(), Some(&json!({"action": "accept"}))), ApprovalReply::Approved);
    }

    #[test]
    fn a_client_without_url_elicitation_gets_the_whole_link_and_what_to_do() {
        let ask = request().connect.unwrap();
        let link = "https://mcp.example.com/console/connect/f-1";
        let ApprovalReply::Unavailable { reason } = unavailable(&ask, Some(link), "no URL mode") else {
            panic!("unavailable");
        };
        assert_eq!(
            reason,
            "no URL mode: open https://mcp.example.com/console/connect/f-1 to connect your account at \"notes\", then \
             call again"
        );
        let ApprovalReply::Unavailable { reason } = unavailable(&ask, None, "no URL mode") else { panic!() };
        assert!(reason.contains("serves no web console"), "{reason}");
    }
}
