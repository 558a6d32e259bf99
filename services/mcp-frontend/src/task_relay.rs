//! Tasks of wrapped servers (the MCP tasks extension, SEP-2663) passed
//! through to a gateway client (`--expose-tools`).
//!
//! A client that declared the extension (at its handshake or in a
//! request's `_meta`) calls a wrapped tool as any direct call: the bridge
//! checks it as any (allowlist, schema, policy, budget, private-data rule)
//! and audits it, and sends it to the server with the extension declared.
//! A server that answers with a task hands the client its task as it is
//! ([`created`]); the bridge notes which server holds it and which identity
//! created it. The client's `tasks/get`, `tasks/update` and `tasks/cancel`
//! go to the bridge on the same direct path, each its own audited request,
//! to that server, for that identity only: another identity's id (or an id
//! nobody created) is refused alike, as an unknown id is (`-32602`).
//!
//! What is not relayed: the servers' `notifications/tasks` (status
//! notifications on `subscriptions/listen`); a client polls `tasks/get`.

use code_mode_proto::Target;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams, GetTaskResult, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use crate::Frontend;

/// True when a server's result is a task it made of the call
/// (`resultType: "task"`).
pub(crate) fn is_task(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("task")
}

/// The server's task handle as the client's answer to its tool call.
pub(crate) fn created(tool: &str, result: Value) -> CallToolResponse {
    match serde_json::from_value::<CreateTaskResult>(result) {
        Ok(task) => CallToolResponse::Task(task),
        Err(e) => {
            tracing::warn!(%tool, error = %e, "the server's task handle is malformed");
            let kind = code_mode_proto::ErrorKind::UnexpectedResponse.as_str().to_string();
            rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(kind)]).into()
        }
    }
}

/// `tasks/get` of a wrapped server's task, through the bridge.
pub(crate) async fn get(
    frontend: &Frontend,
    request: GetTaskParams,
    context: &RequestContext<RoleServer>,
) -> Result<GetTaskResult, McpError> {
    let target = Target::GetTask(request.task_id);
    let value = crate::gateway::request(frontend, target, serde_json::json!({}), None, context).await?;
    crate::gateway::typed::<GetTaskResult>(value)
}

/// `tasks/update`: the client's answers to a task's input requests,
/// through the bridge.
pub(crate) async fn update(
    frontend: &Frontend,
    request: UpdateTaskParams,
    context: &RequestContext<RoleServer>,
) -> Result<(), McpError> {
    let answers = serde_json::to_value(&request.input_responses).unwrap_or_default();
    let target = Target::UpdateTask(request.task_id);
    crate::gateway::request(frontend, target, serde_json::json!({"inputResponses": answers}), None, context).await?;
    Ok(())
}

/// `tasks/cancel` of a wrapped server's task, through the bridge.
pub(crate) async fn cancel(
    frontend: &Frontend,
    request: CancelTaskParams,
    context: &RequestContext<RoleServer>,
) -> Result<(), McpError> {
    let target = Target::CancelTask(request.task_id);
    crate::gateway::request(frontend, target, serde_json::json!({}), None, context).await?;
    Ok(())
}
