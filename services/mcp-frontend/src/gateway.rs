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
//! path of its session, with its [`Target`], and is checked there exactly as
//! a tool call is: budget, size, audit, the server's policy, the
//! private-data rule. Its answer comes back as an [`crate::wire::Outcome`]:
//! the server's result, or a JSON-RPC error carrying the server's own code
//! when the server refused it (`-32602` for a refusal of the gateway's
//! checks).
//!
//! The capabilities the frontend declares follow what the servers offer:
//! resources (with subscriptions when a server takes them) and prompts with
//! their `listChanged`, completions, logging.

use code_mode_proto::Target;
use rmcp::RoleServer;
use rmcp::model::ServerCapabilities;
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
    // run_python answers a client that declared tasks with a task
    // (`tasks`), and in gateway mode a wrapped server's task passes through
    // to its client (`task_relay`): one of the two always holds.
    caps["extensions"] = serde_json::json!({rmcp::model::TASKS_EXTENSION_ID: {}});
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
            return Err(wire::rpc::not_offered(key));
        }
    };
    let mut list = serde_json::Map::new();
    list.insert(key.to_string(), Value::Array(items));
    // A 2026-07-28 client needs the result type (rmcp leaves it out for
    // older ones).
    list.insert("resultType".into(), Value::String("complete".into()));
    serde_json::from_value(Value::Object(list)).map_err(|e| wire::rpc::internal(key, e))
}

/// Send one request of `target` to the bridge through the session,
/// answering its questions on this request: the server's result, or the
/// JSON-RPC error the request ended in ([`wire::Outcome::result`]).
pub(crate) async fn request(
    frontend: &Frontend,
    target: Target,
    arguments: Value,
    retry: Option<code_mode_proto::Retry>,
    context: &RequestContext<RoleServer>,
) -> Result<Value, McpError> {
    frontend.prologue(context).await;
    let method = target.method();
    let run = match frontend.start_direct(target, arguments, context, retry).await {
        Ok(run) => run,
        Err(e) => return Err(wire::rpc::internal(method, e)),
    };
    frontend.drive(run, context).await.result(method)
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
    serde_json::from_value(value).map_err(|e| wire::rpc::internal("the server's result is not of its kind", e))
}
