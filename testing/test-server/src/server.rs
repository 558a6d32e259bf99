//! The MCP handler: `tools/list` returns the catalog, `tools/call` runs a tool,
//! and [`RequestLog`] (stdio) or [`HttpLog`] (HTTP) wraps it to record the
//! requests that arrive in a [`LogFile`].

use std::{
    fs::File,
    io::Write,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, Service,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest, ContentBlock,
        ErrorCode, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
        ServerCapabilities, ServerConfig, ServerResult, Tool,
    },
    service::{NotificationContext, RequestContext},
};
use serde_json::{Value, json};

use crate::catalog::{Behavior, Catalog};

/// The test server's tools. Clones share the catalog and the call count
/// (one clone serves each HTTP session).
#[derive(Debug, Clone)]
pub struct TestServer {
    /// Written only by `add_tool`.
    catalog: Arc<RwLock<Catalog>>,
    calls: Arc<AtomicU64>,
    /// Offers resources, a template, a prompt and completions (`--resources`).
    resources: bool,
    /// What every URI starts with: `test://`, or `test://<host>/`.
    base: Arc<str>,
    /// Names `publish` added: each a resource and a prompt.
    published: Arc<RwLock<Vec<String>>>,
    /// Asks the client questions while it reads (`--ask-on-reads`).
    ask_on_reads: bool,
    /// Where the outcomes of those questions are recorded.
    asks_log: Option<Arc<LogFile>>,
    /// Speaks only the revisions with an initialize handshake.
    handshake_only: bool,
}

/// A 1x1 PNG, for the image resource.
const TINY_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The text of `test://secret`.
pub const SECRET: &str = "the secret of the test server";

impl TestServer {
    pub fn new(catalog: Catalog) -> Self {
        Self {
            catalog: Arc::new(RwLock::new(catalog)),
            calls: Arc::new(AtomicU64::new(0)),
            resources: false,
            base: "test://".into(),
            published: Default::default(),
            ask_on_reads: false,
            asks_log: None,
            handshake_only: false,
        }
    }

    /// The same, speaking only the revisions with an initialize handshake
    /// (no `server/discover`, no stateless 2026-07-28) when `only`.
    pub fn handshake_only(self, only: bool) -> Self {
        Self { handshake_only: only, ..self }
    }

    /// The same, asking the client `roots/list` and `elicitation/create`
    /// (as far as it declared them) before answering a read, a prompt or a
    /// completion, and recording the outcomes in `log`.
    pub fn asking_on_reads(self, ask: bool, log: Option<Arc<LogFile>>) -> Self {
        Self { ask_on_reads: ask, asks_log: log, ..self }
    }

    /// With `--ask-on-reads`: put the client the questions it declared it
    /// answers, within the request of `context`, and record how each went.
    #[allow(deprecated)] // Roots are deprecated from 2026-07-28 on; this server speaks older revisions too.
    async fn ask_first(&self, context: &RequestContext<RoleServer>) {
        if !self.ask_on_reads {
            return;
        }
        let caps = context.peer.peer_info().map(|info| info.capabilities.clone()).unwrap_or_default();
        let outcome = |error: rmcp::service::ServiceError| match error {
            rmcp::service::ServiceError::McpError(e) => format!("error {}", e.code.0),
            other => format!("failed {other}"),
        };
        if caps.roots.is_some() {
            let said = match context.peer.list_roots().await {
                Ok(list) => format!("{} root(s)", list.roots.len()),
                Err(e) => outcome(e),
            };
            self.note_asked("roots/list", &said);
        }
        if caps.elicitation.is_some() {
            let request = json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Which colour?",
                                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}});
            let said = match serde_json::from_value::<rmcp::model::ServerRequest>(request) {
                Ok(request) => match context.peer.send_request(request).await {
                    Ok(answer) => {
                        let answer = serde_json::to_value(answer).unwrap_or_default();
                        answer["action"].as_str().unwrap_or("no action").to_string()
                    }
                    Err(e) => outcome(e),
                },
                Err(e) => format!("failed {e}"),
            };
            self.note_asked("elicitation/create", &said);
        }
    }

    fn note_asked(&self, method: &str, said: &str) {
        if let Some(log) = &self.asks_log {
            log.record("asked", &format!("{method} {said}"));
        }
    }

    /// The same, offering resources, a template, a prompt and completions
    /// (their URIs under `test://<host>/` when a host is given).
    pub fn with_resources(self, resources: bool, host: Option<&str>) -> Self {
        let base = match host {
            Some(host) => format!("test://{host}/"),
            None => "test://".to_string(),
        };
        Self { resources, base: base.into(), ..self }
    }

    fn published(&self) -> Vec<String> {
        self.published.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// `publish`: a resource and a prompt named `name` more, and the client
    /// told that both lists changed.
    async fn publish(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let name = str_arg(args, "name")?.ok_or_else(|| missing("name"))?.to_string();
        self.published.write().unwrap_or_else(|poisoned| poisoned.into_inner()).push(name.clone());
        let _ = context.peer.notify_resource_list_changed().await;
        let _ = context.peer.notify_prompt_list_changed().await;
        Ok(text_result(format!("published {name}")))
    }

    fn not_offered<T>(&self, what: &str) -> Result<T, McpError> {
        Err(McpError::new(ErrorCode::METHOD_NOT_FOUND, format!("{what}: start with --resources"), None))
    }

    fn catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn run(
        &self,
        name: &str,
        behavior: Behavior,
        args: &JsonObject,
        calls_so_far: u64,
        headers: Option<&http::HeaderMap>,
    ) -> Result<CallToolResult, McpError> {
        let result = match behavior {
            Behavior::Add => {
                let a = int_arg(args, "a")?.ok_or_else(|| missing("a"))?;
                let b = int_arg(args, "b")?.ok_or_else(|| missing("b"))?;
                let sum = a.checked_add(b).ok_or_else(|| McpError::invalid_params("a + b overflows i64", None))?;
                CallToolResult::structured(json!({ "sum": sum }))
            }
            Behavior::Echo => {
                let text = str_arg(args, "text")?.ok_or_else(|| missing("text"))?;
                let repeat = int_arg(args, "repeat")?.unwrap_or(1);
                let repeat = usize::try_from(repeat)
                    .map_err(|_| McpError::invalid_params("repeat must not be negative", None))?;
                text_result(text.repeat(repeat))
            }
            Behavior::Sleep => {
                let seconds = num_arg(args, "seconds")?.ok_or_else(|| missing("seconds"))?;
                let duration = Duration::try_from_secs_f64(seconds)
                    .map_err(|_| McpError::invalid_params("seconds must be a non-negative number", None))?;
                tokio::time::sleep(duration).await;
                text_result("slept")
            }
            Behavior::Huge => {
                let bytes = int_arg(args, "bytes")?.ok_or_else(|| missing("bytes"))?;
                let bytes =
                    usize::try_from(bytes).map_err(|_| McpError::invalid_params("bytes must not be negative", None))?;
                text_result("x".repeat(bytes))
            }
            Behavior::Report => {
                let owner = str_arg(args, "owner")?.ok_or_else(|| missing("owner"))?;
                let secret = str_arg(args, "secret")?.unwrap_or("none");
                let report = json!({
                    "repository": {"owner": owner, "name": secret, "stars": 7, "private": false},
                    "issues": [
                        {"number": 1, "title": secret, "labels": ["wontfix"], "score": 0.5},
                        {"number": 2, "title": "quokka", "labels": [], "assignee": null}
                    ],
                    "filed_by": {format!("{owner}@example.com"): 1, "bob@example.com": 1},
                    "raw": json!({"owner": owner}).to_string()
                });
                text_result(report.to_string())
            }
            Behavior::Fail => {
                let message = str_arg(args, "message")?.ok_or_else(|| missing("message"))?;
                CallToolResult::error(vec![ContentBlock::text(message)])
            }
            Behavior::ProtocolError => {
                return Err(McpError::internal_error(
                    format!("internal failure at /srv/secret/path pid {}", std::process::id()),
                    Some(json!({ "path": "/srv/secret/path", "pid": std::process::id() })),
                ));
            }
            Behavior::Crash => {
                tracing::warn!("crash tool called: exiting with code 3");
                std::process::exit(3);
            }
            Behavior::GetEnv => {
                let var = str_arg(args, "name")?.ok_or_else(|| missing("name"))?;
                let value = std::env::var_os(var)
                    .map(|value| value.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "<unset>".to_owned());
                text_result(value)
            }
            Behavior::GetHeader => {
                let header = str_arg(args, "name")?.ok_or_else(|| missing("name"))?;
                let value = headers
                    .and_then(|headers| headers.get(header))
                    .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
                    .unwrap_or_else(|| "<unset>".to_owned());
                text_result(value)
            }
            Behavior::Count => text_result(calls_so_far.to_string()),
            Behavior::Whoami => CallToolResult::structured(crate::oauth::whoami(headers)),
            Behavior::AddTool => {
                let new = str_arg(args, "name")?.ok_or_else(|| missing("name"))?;
                let mut catalog = self.catalog.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                catalog.add_runtime_tool(new).map_err(|message| McpError::invalid_params(message, None))?;
                text_result(format!("added {new}"))
            }
            Behavior::Ok => text_result(format!("ok {name}")),
            Behavior::EchoArguments => text_result(Value::Object(args.clone()).to_string()),
            Behavior::Extra => {
                let x = args.get("x").cloned().unwrap_or(Value::Null);
                text_result(format!("ok {name} x={x}"))
            }
            Behavior::AskModel | Behavior::AskPerson | Behavior::Publish => {
                unreachable!("answered in call_tool, which has the client")
            }
        };
        Ok(result)
    }

    /// `ask_model`: ask the client's model and answer with what it wrote:
    /// by a request of its own (2025-11-25), or (2026-07-28, where a
    /// server sends no requests) by an input-required result answered in
    /// the retried call.
    async fn ask_model(
        &self,
        args: &JsonObject,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let prompt = str_arg(args, "prompt")?.ok_or_else(|| missing("prompt"))?;
        let stateless = context.protocol_version().is_some_and(|v| !v.has_initialize());
        if stateless && let Some(answers) = &request.input_responses {
            let answer = serde_json::to_value(answers).unwrap_or_default();
            let text = answer["model"]["content"]["text"].as_str().unwrap_or_default().to_string();
            return Ok(text_result(format!("the model wrote: {text}")).into());
        }
        if let Some(seconds) = num_arg(args, "delay")? {
            let delay = Duration::try_from_secs_f64(seconds)
                .map_err(|_| McpError::invalid_params("delay must be a non-negative number", None))?;
            tokio::time::sleep(delay).await;
        }
        let params =
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 50});
        if stateless {
            let asked = json!({"resultType": "input_required",
                               "inputRequests": {"model": {"method": "sampling/createMessage", "params": params}}});
            let asked: rmcp::model::InputRequiredResult = from_json(asked)?;
            return Ok(CallToolResponse::InputRequired(asked));
        }
        let request = json!({"method": "sampling/createMessage", "params": params});
        let request: rmcp::model::ServerRequest =
            serde_json::from_value(request).map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let handle = context
            .peer
            .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        // With `withdraw_after`, the server cancels its own question when
        // no answer came by then.
        let withdraw_after = match num_arg(args, "withdraw_after")? {
            Some(seconds) => Some(
                Duration::try_from_secs_f64(seconds)
                    .map_err(|_| McpError::invalid_params("withdraw_after must be a non-negative number", None))?,
            ),
            None => None,
        };
        let answer = match withdraw_after {
            None => handle.await_response().await,
            Some(after) => {
                let id = handle.id.clone();
                let peer = handle.peer.clone();
                match tokio::time::timeout(after, handle.await_response()).await {
                    Ok(answer) => answer,
                    Err(_) => {
                        let cancel =
                            rmcp::model::CancelledNotificationParam::new(Some(id), Some("no longer needed".into()));
                        let _ = peer.notify_cancelled(cancel).await;
                        return Ok(text_result("withdrawn".to_string()).into());
                    }
                }
            }
        };
        match answer {
            Ok(answer) => {
                let answer = serde_json::to_value(answer).unwrap_or_default();
                let text = answer["content"]["text"].as_str().unwrap_or_default().to_string();
                Ok(text_result(format!("the model wrote: {text}")).into())
            }
            Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(format!("sampling failed: {e}"))]).into()),
        }
    }
}

impl TestServer {
    /// `ask_person`: ask the client's person the question (a form with one
    /// `name` field) and answer with the answer's action and content: by a
    /// request of its own (2025-11-25), or (2026-07-28) by an
    /// input-required result answered in the retried call.
    async fn ask_person(
        &self,
        args: &JsonObject,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let question = str_arg(args, "question")?.ok_or_else(|| missing("question"))?;
        let said = |answer: &Value| {
            let content = answer.get("content").map(Value::to_string).unwrap_or_else(|| "none".into());
            text_result(format!("the person answered {} with {content}", answer["action"].as_str().unwrap_or("?")))
        };
        let stateless = context.protocol_version().is_some_and(|v| !v.has_initialize());
        if stateless && let Some(answers) = &request.input_responses {
            let answer = answers.get("person").cloned().unwrap_or_default();
            return Ok(said(&answer).into());
        }
        let params = json!({"mode": "form", "message": question,
                            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}});
        if stateless {
            let asked = json!({"resultType": "input_required",
                               "inputRequests": {"person": {"method": "elicitation/create", "params": params}}});
            let asked: rmcp::model::InputRequiredResult = from_json(asked)?;
            return Ok(CallToolResponse::InputRequired(asked));
        }
        let request: rmcp::model::ServerRequest = from_json(json!({"method": "elicitation/create", "params": params}))?;
        match context.peer.send_request(request).await {
            Ok(answer) => Ok(said(&serde_json::to_value(answer).unwrap_or_default()).into()),
            Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(format!("elicitation failed: {e}"))]).into()),
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = match self.resources {
            false => ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build(),
            true => ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_prompts()
                .enable_completions()
                .build(),
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("code-mode-test-server", env!("CARGO_PKG_VERSION")))
            .with_instructions("A test server for the code-mode integration tests.")
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        match self.handshake_only {
            false => std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
            true => ProtocolVersion::KNOWN_VERSIONS.iter().filter(|v| v.has_initialize()).cloned().collect(),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        if !self.resources {
            return self.not_offered("resources/list");
        }
        let base = &self.base;
        let mut resources = vec![
            json!({"uri": format!("{base}small"), "name": "small", "description": "A small text.", "mimeType": "text/plain"}),
            json!({"uri": format!("{base}secret"), "name": "secret", "description": "A secret text.", "mimeType": "text/plain"}),
            json!({"uri": format!("{base}image"), "name": "image", "description": "A 1x1 PNG.", "mimeType": "image/png"}),
        ];
        for name in self.published() {
            resources.push(json!({"uri": format!("{base}published/{name}"), "name": name, "mimeType": "text/plain"}));
        }
        from_json(json!({ "resources": resources }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        if !self.resources {
            return self.not_offered("resources/templates/list");
        }
        from_json(json!({"resourceTemplates": [
            {"uriTemplate": format!("{}big/{{bytes}}", self.base), "name": "big", "description": "That many bytes of text.", "mimeType": "text/plain"},
        ]}))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        if !self.resources {
            return self.not_offered("resources/read");
        }
        self.ask_first(&context).await;
        let uri = request.uri.as_str();
        let text = |text: String| json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]});
        let local = uri.strip_prefix(&*self.base).unwrap_or("");
        let contents = match local {
            "small" => text("small".into()),
            "secret" => text(SECRET.into()),
            "image" => json!({"contents": [{"uri": uri, "mimeType": "image/png", "blob": TINY_PNG}]}),
            other => match other.strip_prefix("big/").and_then(|n| n.parse::<usize>().ok()) {
                Some(bytes) if bytes <= 1 << 24 => text("x".repeat(bytes)),
                _ => {
                    return Err(McpError::new(
                        ErrorCode(-32002),
                        format!("resource not found: {uri}"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        from_json::<rmcp::model::ReadResourceResult>(contents).map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        if !self.resources {
            return self.not_offered("prompts/list");
        }
        let mut prompts = vec![
            json!({"name": "greet", "description": "Greet someone.", "arguments": [{"name": "name", "required": true}]}),
        ];
        prompts.extend(self.published().into_iter().map(|name| json!({"name": name})));
        from_json(json!({ "prompts": prompts }))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        if !self.resources {
            return self.not_offered("prompts/get");
        }
        self.ask_first(&context).await;
        if request.name != "greet" {
            return Err(McpError::invalid_params(format!("unknown prompt: {}", request.name), None));
        }
        let name = request.arguments.as_ref().and_then(|a| a.get("name")).and_then(Value::as_str);
        let Some(name) = name else { return Err(missing("name")) };
        let result = json!({"description": "A greeting.", "messages": [
            {"role": "user", "content": {"type": "text", "text": format!("Hello, {name}!")}},
        ]});
        from_json::<rmcp::model::GetPromptResult>(result).map(Into::into)
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        if !self.resources {
            return self.not_offered("completion/complete");
        }
        self.ask_first(&context).await;
        let request = serde_json::to_value(&request).unwrap_or_default();
        let typed = request["argument"]["value"].as_str().unwrap_or_default();
        let values: Vec<&str> = ["Ann", "Anton", "Bob"].into_iter().filter(|v| v.starts_with(typed)).collect();
        from_json(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.catalog().tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.catalog().tool(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let calls_so_far = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let name = request.name.as_ref();
        let behavior = self
            .catalog()
            .behavior(name)
            .ok_or_else(|| McpError::invalid_params(format!("unknown tool: {name}"), None))?;
        let args = request.arguments.clone().unwrap_or_default();
        let headers = context.extensions.get::<http::request::Parts>().map(|parts| &parts.headers);
        if behavior == Behavior::AskModel {
            return self.ask_model(&args, &request, &context).await;
        }
        if behavior == Behavior::AskPerson {
            return self.ask_person(&args, &request, &context).await;
        }
        if behavior == Behavior::Publish {
            return self.publish(&args, &context).await.map(CallToolResponse::from);
        }
        let result = self.run(name, behavior, &args, calls_so_far, headers).await?;
        if behavior == Behavior::AddTool
            && let Err(error) = context.peer.notify_tool_list_changed().await
        {
            tracing::warn!(%error, "cannot send notifications/tools/list_changed");
        }
        Ok(CallToolResponse::from(result))
    }
}

/// The `--log FILE`: one line `<method> <tool name or ->` per request.
#[derive(Debug)]
pub struct LogFile(Mutex<File>);

impl LogFile {
    pub fn new(file: File) -> Self {
        Self(Mutex::new(file))
    }

    pub(crate) fn record(&self, method: &str, tool: &str) {
        let line = format!("{method} {tool}\n");
        let mut file = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            tracing::error!(%error, "cannot write the request log");
        }
    }
}

/// Wraps the handler and records every request that reaches the server
/// over stdio, before handling it.
#[derive(Debug)]
pub struct RequestLog<S> {
    inner: S,
    file: Option<Arc<LogFile>>,
}

impl<S> RequestLog<S> {
    pub fn new(inner: S, file: Option<File>) -> Self {
        Self { inner, file: file.map(|file| Arc::new(LogFile::new(file))) }
    }

    fn record(&self, request: &ClientRequest) {
        let Some(file) = &self.file else { return };
        let tool = match request {
            ClientRequest::CallToolRequest(call) => call.params.name.as_ref(),
            ClientRequest::ReadResourceRequest(read) => read.params.uri.as_str(),
            ClientRequest::GetPromptRequest(prompt) => prompt.params.name.as_str(),
            _ => "-",
        };
        file.record(request.method(), tool);
    }
}

/// Wraps the handler of one HTTP session and records its `tools/list` and
/// `tools/call` requests (the HTTP service takes a [`ServerHandler`], so
/// other requests are not seen here).
#[derive(Debug, Clone)]
pub struct HttpLog {
    inner: TestServer,
    file: Option<Arc<LogFile>>,
}

impl HttpLog {
    pub fn new(inner: TestServer, file: Option<Arc<LogFile>>) -> Self {
        Self { inner, file }
    }

    fn record(&self, method: &str, tool: &str) {
        if let Some(file) = &self.file {
            file.record(method, tool);
        }
    }
}

impl ServerHandler for HttpLog {
    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.inner)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.record("tools/list", "-");
        self.inner.list_tools(request, context).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.get_tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.record("tools/call", request.name.as_ref());
        self.inner.call_tool(request, context).await
    }
}

impl<S: ServerHandler> Service<RoleServer> for RequestLog<S> {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        self.record(&request);
        Service::handle_request(&self.inner, request, context).await
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(file) = &self.file
            && let ClientNotification::CancelledNotification(cancelled) = &notification
        {
            let id = cancelled.params.request_id.as_ref().map(|id| id.to_string()).unwrap_or_default();
            file.record("notifications/cancelled", &id);
        }
        // The client's roots changed: note it, and ask for them again (off
        // this handler, which the answer must not wait behind), noting how
        // many there are now.
        if let Some(file) = &self.file
            && let ClientNotification::RootsListChangedNotification(_) = &notification
        {
            file.record("notifications/roots/list_changed", "-");
            let (file, peer) = (file.clone(), context.peer.clone());
            tokio::spawn(async move {
                #[allow(deprecated)] // Roots are deprecated from 2026-07-28 on; this server speaks older revisions.
                let said = match peer.list_roots().await {
                    Ok(list) => {
                        let uris: Vec<&str> = list.roots.iter().map(|r| r.uri.as_str()).collect();
                        format!("{} root(s) {}", uris.len(), uris.join(" "))
                    }
                    Err(e) => format!("failed {e}"),
                };
                file.record("asked roots/list", &said);
            });
        }
        Service::handle_notification(&self.inner, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.inner)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.inner)
    }
}

/// An MCP result from its JSON.
fn from_json<T: rmcp::serde::de::DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn missing(name: &str) -> McpError {
    McpError::invalid_params(format!("missing required argument `{name}`"), None)
}

fn wrong_type(name: &str, expected: &str, got: &Value) -> McpError {
    McpError::invalid_params(format!("argument `{name}` must be {expected}, got {got}"), None)
}

/// An integer argument; also accepts a float with no fractional part (`3.0`).
fn int_arg(args: &JsonObject, name: &str) -> Result<Option<i64>, McpError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            if let Some(int) = value.as_i64() {
                return Ok(Some(int));
            }
            match value.as_f64() {
                Some(float) if float.fract() == 0.0 && float.abs() < 9.0e15 => Ok(Some(float as i64)),
                _ => Err(wrong_type(name, "an integer", value)),
            }
        }
    }
}

fn num_arg(args: &JsonObject, name: &str) -> Result<Option<f64>, McpError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_f64().map(Some).ok_or_else(|| wrong_type(name, "a number", value)),
    }
}

fn str_arg<'a>(args: &'a JsonObject, name: &str) -> Result<Option<&'a str>, McpError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_str().map(Some).ok_or_else(|| wrong_type(name, "a string", value)),
    }
}
