//! What reaches an MCP request while its cell or direct call runs, besides
//! its result: the bridge's approval questions ([`crate::approval`]), and
//! a wrapped server's own questions (sampling, elicitation, roots) and
//! notes (progress), relayed by the bridge on
//! [`code_mode_proto::subjects::client`] (see the bridge's `relay.rs`).
//!
//! A question is asked the way the client's protocol allows: as a request
//! of its own during the call (2025-11-25 and older), or as an entry of an
//! input-required result that the client answers in its retried call
//! (2026-07-28). An elicitation is shown with the name of the server that
//! asks, so the person knows who wants the answer; a sampling request goes
//! to the client's model as the server wrote it.
//!
//! The bridge has checked every question before it gets here (the server's
//! policy, the private-data rule for a sampling answer): this module only
//! carries it and its answer.

use std::time::Duration;

use code_mode_proto::{AskKind, FromClient, ServerAsk, ServerNote};
use rmcp::RoleServer;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{CancelledNotificationParam, ClientResult, InputRequest, ServerRequest};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::approval::Pending;

/// One thing for the request running a cell or call.
#[derive(Debug)]
pub(crate) enum Question {
    /// The bridge asks whether a call may go out.
    Approval(Pending),
    /// A wrapped server asks the client something.
    Ask(PendingAsk),
    /// A wrapped server's progress of the call.
    Note(ServerNote),
}

/// A server's question waiting for the client's answer.
#[derive(Debug)]
pub(crate) struct PendingAsk {
    /// The question.
    pub ask: ServerAsk,
    /// Where the answer goes (the bridge's request waits on it).
    pub answer: oneshot::Sender<FromClient>,
    /// Cancelled when the server withdraws the question.
    pub withdrawn: CancellationToken,
}

/// The questions asked by id, until answered, so a server can withdraw
/// one ([`code_mode_proto::ToClient::Withdraw`]). Owned by the session's
/// relay subscription; each entry goes when its question is answered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Withdrawals {
    asked: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl Withdrawals {
    /// Register a question; the entry goes when the guard drops.
    pub fn register(&self, id: Option<&str>) -> (CancellationToken, WithdrawalGuard) {
        let token = CancellationToken::new();
        if let Some(id) = id {
            self.lock().insert(id.to_string(), token.clone());
        }
        let guard = WithdrawalGuard { withdrawals: self.clone(), id: id.map(str::to_string) };
        (token, guard)
    }

    /// The server withdrew question `id`: cancel it, if it is still asked.
    pub fn withdraw(&self, id: &str) {
        if let Some(token) = self.lock().remove(id) {
            token.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Removes a question from [`Withdrawals`] once it is settled.
#[derive(Debug)]
pub(crate) struct WithdrawalGuard {
    withdrawals: Withdrawals,
    id: Option<String>,
}

impl Drop for WithdrawalGuard {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.withdrawals.lock().remove(id);
        }
    }
}

/// The longest time a question may wait, whatever its sender says.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

impl PendingAsk {
    /// How long the client has.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.ask.timeout_ms).min(MAX_WAIT)
    }
}

/// The question's parameters as the client sees them: an elicitation's
/// message names the server that asks.
pub(crate) fn shown_params(ask: &ServerAsk) -> Value {
    let mut params = ask.params.clone();
    if ask.ask == AskKind::Elicitation
        && let Some(Value::String(message)) = params.get_mut("message")
    {
        *message = format!("The server {:?} asks (through code-mode): {message}", ask.server);
    }
    if ask.ask == AskKind::Roots {
        params = json!({});
    }
    params
}

/// Why a question is cancelled at the client when the request it belongs
/// to is gone.
pub(crate) const REQUEST_GONE: &str = "the request that asked is gone (cancelled, or its client left)";

/// Put an elicitation to the client within `timeout`, unless `gone` fires
/// first: then it is cancelled at the client (`notifications/cancelled`)
/// and the answer is `None`.
pub(crate) async fn elicit_unless_gone(
    peer: &Peer<RoleServer>,
    params: rmcp::model::ElicitRequestParams,
    timeout: Duration,
    gone: &CancellationToken,
) -> Option<Result<rmcp::model::ElicitResult, ServiceError>> {
    let request = ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(params));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(timeout);
    let handle = match peer.send_cancellable_request(request, options).await {
        Ok(handle) => handle,
        Err(e) => return Some(Err(e)),
    };
    let id = handle.id.clone();
    tokio::select! {
        answer = handle.await_response() => Some(match answer {
            Ok(ClientResult::ElicitResult(result)) => Ok(result),
            Ok(_) => Err(ServiceError::UnexpectedResponse),
            Err(e) => Err(e),
        }),
        _ = gone.cancelled() => {
            let cancel = CancelledNotificationParam::new(Some(id), Some(REQUEST_GONE.to_string()));
            if let Err(e) = peer.notify_cancelled(cancel).await {
                tracing::debug!(error = %e, "the client could not be told the question is withdrawn");
            }
            None
        }
    }
}

/// Ask a client of a session the server's question during the request,
/// within its timeout. A question the server withdraws, that times out, or
/// whose asking request is gone (`gone`: the client cancelled the request
/// or left) is cancelled at the client (`notifications/cancelled`).
pub(crate) async fn ask_client(
    peer: &Peer<RoleServer>,
    ask: &ServerAsk,
    timeout: Duration,
    withdrawn: &CancellationToken,
    gone: &CancellationToken,
) -> FromClient {
    let method = ask.ask.method();
    let request = json!({"method": method, "params": shown_params(ask)});
    let request: ServerRequest = match serde_json::from_value(request) {
        Ok(request) => request,
        Err(e) => return FromClient::Refused { message: format!("{method}: malformed request: {e}"), code: None },
    };
    let could_not = |e: &ServiceError| {
        tracing::warn!(error = %e, method, "the client could not be asked a server's question");
        FromClient::Refused { message: format!("{method}: the client could not be asked"), code: None }
    };
    let handle = match peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await {
        Ok(handle) => handle,
        Err(e) => return could_not(&e),
    };
    let id = handle.id.clone();
    let (outcome, why) = tokio::select! {
        answer = tokio::time::timeout(timeout, handle.await_response()) => match answer {
            Ok(Ok(result)) => return answered(ask.ask, &result),
            Ok(Err(ServiceError::McpError(error))) => {
                return FromClient::Refused { message: error.message.to_string(), code: Some(error.code.0) };
            }
            Ok(Err(e)) => return could_not(&e),
            Err(_) => (
                format!("{method}: the client did not answer within {} s", timeout.as_secs()),
                "the question timed out",
            ),
        },
        _ = withdrawn.cancelled() => (format!("{method}: the server withdrew it"), "the server withdrew its request"),
        _ = gone.cancelled() => (format!("{method}: the request that asked is gone"), REQUEST_GONE),
    };
    let cancel = CancelledNotificationParam::new(Some(id), Some(why.to_string()));
    if let Err(e) = peer.notify_cancelled(cancel).await {
        tracing::debug!(error = %e, method, "the client could not be told the question is cancelled");
    }
    FromClient::Refused { message: outcome, code: None }
}

/// The client's result as the answer, when it is the kind asked for.
fn answered(kind: AskKind, result: &ClientResult) -> FromClient {
    let fits = matches!(
        (kind, result),
        (AskKind::Sampling, ClientResult::CreateMessageResult(_))
            | (AskKind::Elicitation, ClientResult::ElicitResult(_))
            | (AskKind::Roots, ClientResult::ListRootsResult(_))
    );
    match (fits, serde_json::to_value(result)) {
        (true, Ok(result)) => FromClient::Answered { result },
        _ => FromClient::Refused {
            message: format!("{}: the client answered with another kind of result", kind.method()),
            code: None,
        },
    }
}

/// The JSON-RPC code of a question that a client cannot answer: MCP's
/// chapter on roots prescribes "method not found" for a client without
/// roots; sampling and elicitation are answered alike.
pub(crate) const NOT_ASKABLE: i32 = -32601;

/// The answer, for a stateless (2026-07-28) client, to a server's question
/// that came while no tool call of it was in flight to carry it (`during`:
/// the client's request that was, such as a read, a prompt or a
/// completion; else none): only a tool call's result may ask such a client
/// something, and no request may be sent to it, so for the server this
/// client cannot answer ([`NOT_ASKABLE`]), as if it had not declared the
/// capability. An empty list of roots would tell the server that the
/// client has none (a filesystem server would narrow its folders to
/// nothing); an error leaves the server as it was.
pub(crate) fn not_askable(ask: &ServerAsk, during: Option<code_mode_proto::Op>) -> FromClient {
    let when = match during {
        Some(op) => format!("its request in flight is {}", op.method()),
        None => "none is in flight".to_string(),
    };
    FromClient::Refused {
        message: format!(
            "{}: the client (MCP 2026-07-28) can be asked only on a tool call, and {when}",
            ask.ask.method()
        ),
        code: Some(NOT_ASKABLE),
    }
}

/// The server's question as an entry of an input-required result.
pub(crate) fn input_request(ask: &ServerAsk) -> Option<InputRequest> {
    let request = json!({"method": ask.ask.method(), "params": shown_params(ask)});
    serde_json::from_value(request).ok()
}

/// The answer a stateless client gave in its retried call (`value`, the
/// entry of its `inputResponses`), checked to be the kind asked for.
#[allow(deprecated)] // Sampling and roots are deprecated from 2026-07-28 on; older servers use them.
pub(crate) fn answer_of_value(ask: &ServerAsk, value: Option<&Value>) -> FromClient {
    let Some(value) = value else {
        return FromClient::Refused {
            message: format!("{}: the client answered without this question's answer", ask.ask.method()),
            code: None,
        };
    };
    let fits = match ask.ask {
        AskKind::Sampling => serde_json::from_value::<rmcp::model::CreateMessageResult>(value.clone()).is_ok(),
        AskKind::Elicitation => serde_json::from_value::<rmcp::model::ElicitResult>(value.clone()).is_ok(),
        AskKind::Roots => serde_json::from_value::<rmcp::model::ListRootsResult>(value.clone()).is_ok(),
    };
    if fits {
        FromClient::Answered { result: value.clone() }
    } else {
        FromClient::Refused {
            message: format!("{}: the client's answer is not of the kind asked for", ask.ask.method()),
            code: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(kind: AskKind, params: Value) -> ServerAsk {
        ServerAsk { id: None, call_id: None, server: "notes".into(), ask: kind, params, timeout_ms: 1000 }
    }

    #[test]
    fn an_elicitation_names_the_server_that_asks() {
        let shown = shown_params(&ask(
            AskKind::Elicitation,
            json!({"mode": "form", "message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}),
        ));
        assert_eq!(shown["message"], "The server \"notes\" asks (through code-mode): Your name?");
        let request = input_request(&ask(AskKind::Sampling, json!({"messages": [], "maxTokens": 5})));
        assert!(matches!(request, Some(InputRequest::CreateMessage(_))), "{request:?}");
    }

    #[test]
    fn a_question_a_stateless_client_cannot_take_is_answered_method_not_found_naming_the_request_in_flight() {
        let roots = ask(AskKind::Roots, json!({}));
        let FromClient::Refused { message, code } = not_askable(&roots, Some(code_mode_proto::Op::Complete)) else {
            panic!("a refusal")
        };
        assert_eq!(code, Some(-32601), "what MCP prescribes for a client without roots");
        assert!(message.starts_with("roots/list: ") && message.ends_with("completion/complete"), "{message}");
        let FromClient::Refused { message, .. } = not_askable(&roots, None) else { panic!("a refusal") };
        assert!(message.ends_with("none is in flight"), "{message}");
    }

    #[test]
    fn a_retried_answer_of_another_kind_is_refused() {
        let sampling = ask(AskKind::Sampling, json!({"messages": [], "maxTokens": 5}));
        let elicit_answer = json!({"action": "accept", "content": {}});
        assert!(matches!(answer_of_value(&sampling, Some(&elicit_answer)), FromClient::Refused { .. }));
        let model_answer = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"});
        assert!(matches!(answer_of_value(&sampling, Some(&model_answer)), FromClient::Answered { .. }));
        assert!(matches!(answer_of_value(&sampling, None), FromClient::Refused { .. }));
    }
}
