//! MCP beyond tools: what a client gets of the wrapped servers' resources,
//! resource templates, prompts and completions. Neither is a tool, so a
//! client gets them in code mode (`run_python` alone) as in gateway mode
//! (`--expose-tools`).
//!
//! Lists come from the catalog the bridge sends the catalog watcher
//! ([`code_mode_proto::Features`]): names as the bridge offers them, what a
//! server's policy denies left out; a change reaches the client as
//! `notifications/resources/list_changed` or `prompts/list_changed` (the
//! session actor compares each new catalog with the last). Every request
//! that carries data to a server (reading or subscribing to a resource,
//! getting a prompt, a completion) goes to the bridge on the direct-call
//! path of its session, with its [`Op`], and is checked there exactly as
//! a tool call is: budget, size, audit, the server's policy, the
//! private-data rule. Its answer comes back in the envelope of
//! [`crate::wire::gateway_reply`], unwrapped here into the MCP result, or a
//! JSON-RPC error carrying the server's own code when the server refused
//! it (`-32602` for a refusal of the gateway's checks).
//!
//! The capabilities the frontend declares follow what the servers offer:
//! resources (with subscriptions when a server takes them) and prompts with
//! their `listChanged`, completions, logging.

use code_mode_proto::Op;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, ErrorCode, ServerCapabilities};
use rmcp::service::RequestContext;
use serde_json::Value;

use crate::{Frontend, wire};
use rmcp::ErrorData as McpError;

/// The capabilities of the frontend's MCP server: tools (and their list
/// changes) and logging always; whatever the wrapped servers offer
/// besides.
pub(crate) fn capabilities(frontend: &Frontend) -> ServerCapabilities {
    let mut caps = serde_json::json!({
        "tools": {"listChanged": true},
        "logging": {},
    });
    if let Some(features) = &frontend.shared.catalog.current().catalog.features {
        if features.has_resources {
            caps["resources"] = serde_json::json!({"subscribe": features.subscribe, "listChanged": true});
        }
        if features.has_prompts {
            caps["prompts"] = serde_json::json!({"listChanged": true});
        }
        if features.completions {
            caps["completions"] = serde_json::json!({});
        }
    }
    serde_json::from_value(caps).unwrap_or_default()
}

/// One list (`resources`, `resourceTemplates`, `prompts`) as the catalog
/// offers it, whole (no pages: the bridge bounds each server's lists).
pub(crate) fn listed<T: for<'de> rmcp::serde::Deserialize<'de>>(frontend: &Frontend, key: &str) -> Result<T, McpError> {
    let view = frontend.shared.catalog.current();
    let items: Vec<Value> = match &view.catalog.features {
        Some(features) => {
            let offered = match key {
                "resources" => &features.resources,
                "resourceTemplates" => &features.templates,
                _ => &features.prompts,
            };
            offered.iter().map(|o| o.definition.clone()).collect()
        }
        None => {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("{key}: not offered (the bridge is older than this frontend)"),
                None,
            ));
        }
    };
    let mut list = serde_json::Map::new();
    list.insert(key.to_string(), Value::Array(items));
    // A 2026-07-28 client needs the result type (rmcp leaves it out for
    // older ones).
    list.insert("resultType".into(), Value::String("complete".into()));
    serde_json::from_value(Value::Object(list)).map_err(|e| McpError::internal_error(format!("{key}: {e}"), None))
}

/// Send one request of `op` on `target` to the bridge through the
/// session, answering its questions on this request, and unwrap the answer.
pub(crate) async fn request(
    frontend: &Frontend,
    op: Op,
    target: String,
    arguments: Value,
    retry: Option<code_mode_proto::Retry>,
    context: &RequestContext<RoleServer>,
) -> Result<Value, McpError> {
    frontend.session.know_client(&context.peer);
    if let Some(caller) = crate::auth::caller_of(context) {
        frontend.session.know_caller(caller).await;
    }
    if frontend.stateless(context) {
        frontend.session.stateless().await;
    }
    if let Some(level) = context.meta.log_level() {
        frontend.session.set_level(level).await;
    }
    let run = match frontend.start_direct(op, target, arguments, context, retry).await {
        Ok(run) => run,
        Err(e) => return Err(McpError::internal_error(format!("{}: {e}", op.method()), None)),
    };
    let envelope = match frontend.drive(run, context).await? {
        // A server's own questions are answered for a stateless client on
        // this request (see `Frontend::drive`): what is left to ask is a
        // person's approval, which such a client gives only on a tool call.
        CallToolResponse::InputRequired(_) => {
            return Err(McpError::invalid_request(
                format!(
                    "{}: a person's approval is needed, which a stateless client (MCP 2026-07-28) can give only on a tool call",
                    op.method()
                ),
                None,
            ));
        }
        CallToolResponse::Complete(result) => result,
        _ => return Err(McpError::internal_error(format!("{}: no result", op.method()), None)),
    };
    if envelope.is_error == Some(true) {
        let message: String = envelope.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
        let code = envelope
            .meta
            .as_ref()
            .and_then(|m| m.0.get(wire::ERROR_CODE_KEY))
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .map(ErrorCode)
            .unwrap_or(ErrorCode::INVALID_PARAMS);
        let data = envelope.meta.as_ref().and_then(|m| m.0.get(wire::ERROR_DATA_KEY)).cloned();
        return Err(McpError::new(code, message, data));
    }
    Ok(envelope.structured_content.unwrap_or(Value::Object(Default::default())))
}

/// A stateless client's retried request, answering the server's own
/// input-required result.
pub(crate) fn retry_of(
    request_state: Option<String>,
    input_responses: Option<rmcp::model::InputResponses>,
) -> Option<code_mode_proto::Retry> {
    if request_state.is_none() && input_responses.is_none() {
        return None;
    }
    let input_responses = input_responses.map(|a| serde_json::to_value(a).unwrap_or_default()).unwrap_or_default();
    Some(code_mode_proto::Retry { request_state, input_responses })
}

/// The server's result as the MCP type the client gets.
pub(crate) fn typed<T: for<'de> rmcp::serde::Deserialize<'de>>(mut value: Value) -> Result<T, McpError> {
    // A server of an older protocol sends no result type; a 2026-07-28
    // client needs one (rmcp leaves it out for older clients).
    if let Value::Object(map) = &mut value {
        map.entry("resultType").or_insert_with(|| Value::String("complete".into()));
    }
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("the server's result is not of its kind: {e}"), None))
}
