//! `--tasks`: the fixtures the official conformance suite's `tasks-*`
//! server scenarios call (the MCP Tasks extension, SEP-2663), built on
//! rmcp's [`TaskManager`].
//!
//! - `greet {name}`: never a task; answers `Hello, {name}!`.
//! - `slow_compute {seconds, label}`: a task when the request declares the
//!   tasks extension (at the session or in its `_meta`), else answered at
//!   once; sleeps `seconds`, settles `cancelled` on `tasks/cancel`.
//! - `failing_job`: task required (-32021 without the extension); after
//!   about a second it completes with a tool error (`isError`).
//! - `protocol_error_job`: a task that fails with a protocol error.
//! - `confirm_delete {filename}`: a task that asks one `elicitation/create`
//!   (input required) and completes with the answer.
//! - `multi_input`: a task that asks two questions at once.
//! - `test_tool_with_task`: task required; asks `user_name` first by an
//!   input-required result, then answers the retried call with a task whose
//!   result greets that name.
//!
//! Each task's status changes are sent to the client that called
//! (`notifications/tasks`), as rmcp's manager reports them.
//!
//! One [`TaskManager`] serves every session (clones share it), so a
//! stateless client's `tasks/get` finds a task another request created.

use std::{sync::Arc, time::Duration};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ContentBlock,
        CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, InputRequest, InputRequiredResult, JsonObject,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, ServerNotification,
        TaskStatusNotification, TaskStatusNotificationParams, Tool, UpdateTaskParams,
    },
    service::RequestContext,
    task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions},
};
use serde_json::{Value, json};

/// The task fixtures. Clones share the task store.
#[derive(Clone, Default)]
pub struct TaskFixtures {
    tasks: TaskManager,
    /// Every `tools/call` that reached the server, in order (`--log`).
    log: Option<Arc<crate::server::LogFile>>,
}

impl std::fmt::Debug for TaskFixtures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskFixtures").field("running", &self.tasks.running_task_count()).finish()
    }
}

/// How quickly clients are told to poll (milliseconds).
const POLL_MS: u64 = 200;

impl TaskFixtures {
    pub fn new(log: Option<Arc<crate::server::LogFile>>) -> Self {
        Self { tasks: TaskManager::new(), log }
    }

    fn note(&self, method: &str, what: &str) {
        if let Some(log) = &self.log {
            log.record(method, what);
        }
    }

    /// Run `work` as a task and answer with its handle; each change of the
    /// task's status is told the client (`notifications/tasks`), as seen
    /// every [`POLL_MS`] / 2.
    fn spawn<F>(&self, context: &RequestContext<RoleServer>, work: F) -> CallToolResponse
    where
        F: FnOnce(TaskContext) -> TaskFuture,
    {
        let options = TaskOptions::new().with_poll_interval_ms(POLL_MS);
        let created = self.tasks.spawn(options, work);
        let (tasks, peer, id) = (self.tasks.clone(), context.peer.clone(), created.task_id.clone());
        tokio::spawn(async move {
            let mut told = None;
            // At most ten minutes of watching.
            for _ in 0..(600_000 / (POLL_MS / 2)) {
                let Ok(now) = tasks.get_task(&id) else { return };
                let status = now.status();
                if told != Some(status) {
                    told = Some(status);
                    let note = ServerNotification::TaskStatusNotification(TaskStatusNotification::new(
                        TaskStatusNotificationParams::new(now),
                    ));
                    // A client gone or unable to hear notes: it polls.
                    let _ = peer.send_notification(note).await;
                }
                if status.is_terminal() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(POLL_MS / 2)).await;
            }
        });
        CallToolResponse::Task(CreateTaskResult::new(created))
    }
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else { unreachable!("the schemas below are objects") };
    Tool::new(name, description, Arc::new(schema))
}

fn tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    vec![
        tool(
            "greet",
            "Answers `Hello, {name}!` at once (never a task).",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        tool(
            "slow_compute",
            "Sleeps `seconds`, then answers (a task when the client speaks tasks).",
            json!({"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
                   "required": ["seconds"]}),
        ),
        tool("failing_job", "A task (required) that ends in a tool error after about a second.", none.clone()),
        tool("protocol_error_job", "A task that fails with a protocol error.", none.clone()),
        tool(
            "confirm_delete",
            "A task that asks the client to confirm, then answers.",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
        ),
        tool("multi_input", "A task that asks the client two questions at once.", none.clone()),
        tool("test_tool_with_task", "Asks for `user_name` (input required), then runs a task (required).", none),
    ]
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// An `elicitation/create` form asking for `properties`.
fn elicitation(message: &str, properties: Value) -> Result<InputRequest, McpError> {
    let request = json!({"method": "elicitation/create", "params": {
        "mode": "form", "message": message, "requestedSchema": {"type": "object", "properties": properties}}});
    serde_json::from_value(request).map_err(|e| McpError::internal_error(format!("an elicitation request: {e}"), None))
}

/// `content.<field>` of an elicitation answer, as text.
fn answered(answer: &Value, field: &str) -> String {
    match &answer["content"][field] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn needs_tasks() -> McpError {
    McpError::missing_required_client_capability(ClientCapabilities::builder().enable_tasks().build())
}

impl ServerHandler for TaskFixtures {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("code-mode-test-server", env!("CARGO_PKG_VERSION")))
            .with_instructions("The task fixtures of the MCP conformance suite's tasks scenarios.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.note("tools/list", "-");
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        self.note("tools/call", &name);
        let speaks_tasks = context.client_capabilities().is_some_and(|caps| caps.supports_tasks());
        let args: JsonObject = request.arguments.clone().unwrap_or_default();
        match name.as_str() {
            "greet" => {
                let who = args.get("name").and_then(Value::as_str).unwrap_or("world");
                Ok(text(format!("Hello, {who}!")).into())
            }
            "slow_compute" => {
                let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                let duration = Duration::try_from_secs_f64(seconds)
                    .map_err(|_| McpError::invalid_params("seconds must be a non-negative number", None))?;
                let label = args.get("label").and_then(Value::as_str).unwrap_or("").to_string();
                let answer = format!("computed {label} in {seconds} s");
                if !speaks_tasks {
                    tokio::time::sleep(duration).await;
                    return Ok(text(answer).into());
                }
                Ok(self.spawn(&context, move |task| {
                    Box::pin(async move {
                        tokio::select! {
                            () = task.cancelled() => Err(TaskExit::Cancelled),
                            () = tokio::time::sleep(duration) => Ok(text(answer)),
                        }
                    })
                }))
            }
            "failing_job" => {
                if !speaks_tasks {
                    return Err(needs_tasks());
                }
                Ok(self.spawn(&context, |task| {
                    Box::pin(async move {
                        tokio::select! {
                            () = task.cancelled() => Err(TaskExit::Cancelled),
                            () = tokio::time::sleep(Duration::from_secs(1)) =>
                                Ok(CallToolResult::error(vec![ContentBlock::text("the job failed")])),
                        }
                    })
                }))
            }
            "protocol_error_job" => {
                let failure =
                    McpError::internal_error("the job broke down", Some(json!({"job": "protocol_error_job"})));
                if !speaks_tasks {
                    return Err(failure);
                }
                Ok(self.spawn(&context, |_| Box::pin(async move { Err(TaskExit::Error(failure)) })))
            }
            "confirm_delete" => {
                if !speaks_tasks {
                    return Err(needs_tasks());
                }
                let filename = args.get("filename").and_then(Value::as_str).unwrap_or("the file").to_string();
                let question = elicitation(&format!("Delete {filename}?"), json!({"confirm": {"type": "boolean"}}))?;
                Ok(self.spawn(&context, move |task| {
                    Box::pin(async move {
                        let answer = task.request_input("confirm", question).await?;
                        let confirmed = answer["action"] == "accept" && answer["content"]["confirm"] == true;
                        Ok(text(match confirmed {
                            true => format!("deleted {filename}"),
                            false => format!("kept {filename}"),
                        }))
                    })
                }))
            }
            "multi_input" => {
                if !speaks_tasks {
                    return Err(needs_tasks());
                }
                let first = elicitation("Your name?", json!({"name": {"type": "string"}}))?;
                let second = elicitation("Go ahead?", json!({"confirm": {"type": "boolean"}}))?;
                Ok(self.spawn(&context, move |task| {
                    Box::pin(async move {
                        let (name, confirm) =
                            tokio::join!(task.request_input("name", first), task.request_input("confirm", second));
                        let (name, confirm) = (name?, confirm?);
                        Ok(text(format!("{} {}", answered(&name, "name"), answered(&confirm, "confirm"))))
                    })
                }))
            }
            "test_tool_with_task" => {
                if !speaks_tasks {
                    return Err(needs_tasks());
                }
                let Some(answers) = &request.input_responses else {
                    let ask = json!({"resultType": "input_required", "inputRequests": {"user_name": {
                        "method": "elicitation/create", "params": {"mode": "form", "message": "Your name?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}});
                    let ask: InputRequiredResult = serde_json::from_value(ask)
                        .map_err(|e| McpError::internal_error(format!("an input-required result: {e}"), None))?;
                    return Ok(CallToolResponse::InputRequired(ask));
                };
                let answers = serde_json::to_value(answers).unwrap_or_default();
                let user = answered(&answers["user_name"], "name");
                Ok(self.spawn(&context, move |_| Box::pin(async move { Ok(text(format!("Hello, {user}!"))) })))
            }
            other => Err(McpError::invalid_params(format!("unknown tool: {other}"), None)),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.note("tasks/get", &request.task_id);
        self.tasks.get_task(&request.task_id).map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.note("tasks/update", &request.task_id);
        let responses = serde_json::to_value(&request.input_responses).unwrap_or_default();
        let responses = match responses {
            Value::Object(map) => map.into_iter().collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        self.tasks.update_task(&request.task_id, responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.note("tasks/cancel", &request.task_id);
        self.tasks.cancel_task(&request.task_id)
    }
}
