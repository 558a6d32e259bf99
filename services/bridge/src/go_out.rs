//! Step 7 of a call's pipeline ([`crate::check`]): the call itself, sent
//! to its server ([`crate::send`]), and its outcome turned into the answer
//! (the result, a refusal with the server's own message, a timeout, an
//! authorization failure said with what fixes it, or a host fault).

use code_mode_audit::record::CallResult;
use code_mode_proto::{self as proto, Op, ToolCall};
use proto::Target as Asked;
use serde_json::Value;

use crate::answer::{Answer, Caller};
use crate::current::Current;
use crate::target::Target;
use crate::trail::Trail;
use crate::{Bridge, server, wire};

impl Bridge {
    /// Step 7, the call: to its server (over the shared session, or the
    /// client's own when it can be asked or listens, see
    /// [`crate::upstream`]), within the call timeout; its result (refused
    /// when the tool failed or the result is over the limit) or the host
    /// fault. A list for code is answered from the catalog.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn go_out(
        &self,
        current: &Current,
        target: &Target<'_>,
        call: &ToolCall,
        arguments: serde_json::Map<String, Value>,
        caller: Caller,
        trail: &mut Trail,
        cancel: tokio_util::sync::CancellationToken,
        retry: Option<&proto::Retry>,
    ) -> Answer {
        let limits = &self.inner.limits;
        trail.went_out();
        let name = target.name(call);
        let Some(index) = target.server() else {
            let items = match call.target {
                Asked::ListTemplates => current.offers.templates_for_code(),
                _ => current.offers.resources_for_code(),
            };
            let value = Value::Array(items);
            trail.result = Some((CallResult::Ok, Some(value.to_string())));
            return Answer::Value(value);
        };
        let server = &current.servers[index];
        let params = target.params(arguments);
        let direct = matches!(caller, Caller::Direct { .. });
        // A client that can be asked may take as long as a person may to
        // answer the server's questions, on top of the call's own time.
        let asks = call.link.as_ref().is_some_and(code_mode_proto::ClientLink::can_be_asked);
        let timeout = if asks { limits.call_timeout + limits.approval_timeout } else { limits.call_timeout };
        // A tool by its server's name; anything else by its method, never a
        // URI or name the code chose.
        let what = match target {
            Target::Tool(tool) => tool.mcp_name.as_str(),
            _ => call.target.method(),
        };
        let wrapped = code_mode_telemetry::trace::wrapped_call_span(server.name(), what);
        let by_client = cancel.clone();
        let sent = tracing::Instrument::instrument(
            self.send(index, call, params, timeout, cancel, direct, retry),
            wrapped.clone(),
        )
        .await;
        match &sent {
            Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => {
                code_mode_telemetry::trace::ended(&wrapped, "tool_error", None)
            }
            Ok(_) => code_mode_telemetry::trace::ended(&wrapped, "ok", None),
            Err(e) => code_mode_telemetry::trace::ended(&wrapped, "fault", Some(wire::fault_kind(e).as_str())),
        }
        match sent {
            Ok(mut result) if direct && result.get("resultType").and_then(Value::as_str) == Some("input_required") => {
                // The server's own questions for a stateless client: judged
                // as relayed ones before the client sees them.
                if let Err(why) = self.vet_questions(current, index, call, &mut result).await {
                    trail.result = Some((CallResult::Error, Some(why.clone())));
                    return self.refuse(format!("{name}: {why}"));
                }
                let (answer, kind, text) = self.result_answer(&name, call.target.op(), result, caller);
                trail.result = Some((kind, Some(text)));
                answer
            }
            Ok(result) if call.file_in => self.file_in_answer(&name, call.target.op(), result, trail).await,
            Ok(mut result) => {
                if direct && let Err(why) = self.judge_task_inputs(current, index, call, &mut result).await {
                    trail.result = Some((CallResult::Error, Some(why.clone())));
                    return self.refuse(format!("{name}: {why}"));
                }
                if direct && call.target.op() == Op::Tool {
                    let asker = call.asker.as_deref().unwrap_or(&call.session);
                    self.inner.wrapped_tasks.created(server.name(), call.identity.as_deref(), asker, &result).await;
                }
                let (answer, kind, text) = self.result_answer(&name, call.target.op(), result, caller);
                if kind == CallResult::Ok {
                    self.learn(target, &answer);
                }
                trail.result = Some((kind, Some(text)));
                answer
            }
            Err(server::CallError::Timeout(after)) => {
                tracing::warn!(tool = %name, server = %server.name(), "call timed out");
                trail.result = Some((CallResult::Timeout, None));
                self.refuse(format!("{name}: no answer within {} s", after.as_secs_f64()))
            }
            Err(server::CallError::Service(rmcp::service::ServiceError::Cancelled { .. }))
                if by_client.is_cancelled() =>
            {
                trail.result = Some((CallResult::Fault, None));
                self.refuse(format!("{name}: cancelled by the client"))
            }
            Err(server::CallError::Service(rmcp::service::ServiceError::McpError(error)))
                if call.target.op() == Op::Tool && direct && CLIENT_ERRORS.contains(&error.code.0) =>
            {
                // The server refused the client's own request (its
                // arguments, a capability it lacks, a state it altered):
                // the client gets the code and what was wrong with it.
                tracing::info!(tool = %name, server = %server.name(), code = error.code.0, "the server refused the request");
                trail.result = Some((CallResult::Error, Some(error.message.to_string())));
                let message = crate::stubs::cut_chars(
                    &format!("{name}: the server refused the request (error {}): {}", error.code.0, error.message),
                    limits.max_message_chars,
                );
                Answer::ServerRefused { message, code: error.code.0, data: error.data }
            }
            Err(server::CallError::Service(rmcp::service::ServiceError::McpError(error)))
                if call.target.op() != Op::Tool =>
            {
                // A server's own refusal of a resource or prompt (not
                // found, bad arguments) is its answer: passed on as a
                // refusal with its message, cut like any.
                tracing::info!(op = call.target.method(), server = %server.name(), code = error.code.0, "the server refused the request");
                trail.result = Some((CallResult::Error, Some(error.message.to_string())));
                let message = crate::stubs::cut_chars(
                    &format!("{name} failed: {} (error {})", error.message, error.code.0),
                    limits.max_message_chars,
                );
                Answer::ServerRefused { message, code: error.code.0, data: error.data }
            }
            Err(server::CallError::Task(why)) => {
                tracing::info!(tool = %name, server = %server.name(), "the server's task of the call ended without a result: {why}");
                trail.result = Some((CallResult::Error, Some(why.clone())));
                self.refuse(format!("{name}: {why}"))
            }
            Err(server::CallError::NoAccount(why)) => {
                tracing::info!(tool = %name, server = %server.name(), "refused: the caller has no token of its own for the server");
                trail.result = Some((CallResult::Error, Some(why.clone())));
                self.refuse(format!("{name}: {why}"))
            }
            Err(server::CallError::NeedsLogin(why)) => {
                tracing::info!(tool = %name, server = %server.name(), "refused: the server needs a login");
                trail.result = Some((CallResult::Error, Some(why.clone())));
                self.refuse(format!("{name}: {why}"))
            }
            Err(server::CallError::Service(ref e)) if code_mode_upstream_auth::refusal(e).is_some() => {
                // The server's authorization failed (a login needed, a
                // scope missing, the authorization server down): said with
                // the command that fixes it, never with a token.
                let why = code_mode_upstream_auth::refusal(e).map(|r| r.to_string()).unwrap_or_default();
                tracing::warn!(tool = %name, server = %server.name(), %why, "refused: the server's authorization failed");
                trail.result = Some((CallResult::Error, Some(why.clone())));
                self.refuse(format!("{name}: {why}"))
            }
            Err(_) if server.login_needed_now().is_some() => {
                let why = server.login_needed_now().unwrap_or_default();
                // The login was withdrawn while the call was out (its
                // session closed under it): said as the login it needs.
                tracing::info!(tool = %name, server = %server.name(), "refused: the server needs a login");
                trail.result = Some((CallResult::Error, Some(why.clone())));
                self.refuse(format!("{name}: {why}"))
            }
            Err(e) => {
                tracing::warn!(tool = %name, server = %server.name(), error = %e, "call failed on the host");
                trail.result = Some((CallResult::Fault, None));
                Answer::Failed(wire::tool_reply(wire::CallFailure::Host(e), limits.max_message_chars))
            }
        }
    }
}

/// JSON-RPC error codes a server answers a direct tool call with that
/// are about the client's own request, so the client gets them (with the
/// server's message): invalid params (a missing argument, an altered
/// `requestState`) and a client capability the call needs (2026-07-28).
/// Every other error stays a host fault, named by its kind only.
const CLIENT_ERRORS: [i32; 2] = [-32602, -32021];
