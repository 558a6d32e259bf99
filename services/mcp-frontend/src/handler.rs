//! The MCP server of one client session: the rmcp [`ServerHandler`] of a
//! [`Frontend`], and what a request needs besides the session actor: which
//! kind of client sent it (a session, or a stateless request), where its
//! cell runs (a handle), asking its client about approvals (elicitation,
//! or an input-required result and the parked cell), and the tools it
//! lists.

use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{ApprovalReply, ApprovalRequest};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, Implementation, InputRequest, InputRequests,
    InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, ServiceError};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::mpsc;

use crate::approval::{Asking, Pending};
use crate::auth::Identity;
pub use crate::direct::Expose;
pub use crate::handle::HandleError;
use crate::notices::Notice;
use crate::parking::Parked;
use crate::session::{CellKeep, CellOrder, CellRun, DirectOrder, QUESTIONS_PER_CELL};
use crate::{
    CellOptions, Frontend, FrontendError, TOOL_NAME, Transport, approval, auth, direct, handle, lifetimes, wire,
};

/// How long a cell's request waits after one approval for others from the
/// same moment (an `asyncio.gather`), so that they go to the client in one
/// round.
const GATHER_PAUSE: Duration = Duration::from_millis(50);

impl Frontend {
    /// Start a cell on an MCP request, with a route for its approvals
    /// (`keep`: in the session's kept container, if variables are kept).
    pub(crate) async fn start_cell(&self, code: String, keep: CellKeep) -> CellRun {
        let (route, approvals) = mpsc::channel(QUESTIONS_PER_CELL);
        let order = CellOrder {
            cell_id: uuid::Uuid::new_v4().to_string(),
            code,
            route: Some(route),
            options: CellOptions::default(),
            keep,
        };
        let report = self.session.run(order).await;
        let result =
            async move { report.await.unwrap_or(Err(FrontendError::SessionEnded)).map(|ran| wire::ran_result(&ran)) };
        CellRun { result: Box::pin(result), approvals, tool: TOOL_NAME.into() }
    }

    /// True when `context` is a stateless request over HTTP (protocol
    /// 2026-07-28): no session holds its state. Over one connection the
    /// connection is the session, whatever the protocol.
    pub(crate) fn stateless(&self, context: &RequestContext<RoleServer>) -> bool {
        let http = self.transport == Transport::Http;
        context
            .protocol_version()
            .is_some_and(|v| lifetimes::ClientKind::of(http, &v) == lifetimes::ClientKind::Stateless)
    }

    /// Where a `run_python` request's cell runs, from the client's kind and
    /// the handle it sent (the `session` argument, else `_meta`).
    pub(crate) fn cell_keep(
        &self,
        stateless: bool,
        arguments: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CellKeep, HandleError> {
        // `null` is no handle (a client passing back what a result without
        // one held).
        let sent =
            arguments.get(handle::ARGUMENT).or_else(|| context.meta.get(handle::META_KEY)).filter(|v| !v.is_null());
        match (stateless, self.shared.config.keep.is_some(), sent) {
            (_, false, Some(_)) => Err(HandleError::NotKept),
            (false, true, Some(_)) => Err(HandleError::NotNeeded),
            (false, _, None) => Ok(CellKeep::Session),
            // A stateless client keeps nothing unless it asks: a container
            // per call left waiting for a handle nobody passes back would
            // hold a runner's slot for --session-idle each.
            (true, _, None) => Ok(CellKeep::Fresh),
            (true, true, Some(serde_json::Value::String(text))) if text == handle::NEW => Ok(CellKeep::Handle(None)),
            (true, true, Some(serde_json::Value::String(text))) => Ok(CellKeep::Handle(Some(handle::decode(text)?))),
            (true, true, Some(_)) => Err(HandleError::Malformed),
        }
    }

    /// Call a wrapped tool directly on an MCP request (`--expose-tools`):
    /// the session sends it to the bridge, which checks it as a call from
    /// code; its approval questions are asked on this request, as a cell's.
    pub(crate) async fn call_direct(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let tool = request.name.to_string();
        if let Err(e) = self.listen_for_approvals().await {
            tracing::warn!(error = %e, "this session cannot answer approvals");
            return wire::failed(&tool, &e).into();
        }
        let (route, approvals) = mpsc::channel(QUESTIONS_PER_CELL);
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let order =
            DirectOrder { call_id: format!("direct-{}", uuid::Uuid::new_v4()), tool: tool.clone(), arguments, route };
        let result = self.session.direct(order).await;
        let result = async move { result.await.unwrap_or(Err(FrontendError::SessionEnded)) };
        self.drive(CellRun { result: Box::pin(result), approvals, tool }, context).await
    }

    /// Wait for a cell's end while answering its approvals; an approval that
    /// needs the client's retried call parks the cell and returns the
    /// input-required result.
    pub(crate) async fn drive(&self, mut run: CellRun, context: &RequestContext<RoleServer>) -> CallToolResponse {
        let asking = asking(context);
        let identity = auth::caller_of(context).and_then(|c| c.identity);
        // Questions put to the client by `elicitation/create`, owned by this
        // request: dropped with it.
        let mut elicitations = FuturesUnordered::new();
        loop {
            tokio::select! {
                result = &mut run.result => {
                    return match result {
                        Ok(result) => result.into(),
                        Err(e) => {
                            tracing::warn!(error = %e, tool = %run.tool, "the call failed");
                            wire::failed(&run.tool, &e).into()
                        }
                    };
                }
                Some(first) = run.approvals.recv() => match asking {
                    Asking::Unsupported => {
                        let reason = "the MCP client did not declare support for (form) elicitation".to_string();
                        self.session.notifier().tell(Notice::approval_unavailable(&first.request, &reason)).await;
                        let _ = first.answer.send(ApprovalReply::Unavailable { reason });
                    }
                    Asking::Request => {
                        let peer = context.peer.clone();
                        let identity = identity.clone();
                        let notifier = self.session.notifier().clone();
                        elicitations.push(async move {
                            let how = "asking the person through elicitation";
                            notifier.tell(Notice::approval_asked(&first.request, how)).await;
                            let answer = elicit(&peer, &first.request, identity.as_ref()).await;
                            let _ = first.answer.send(answer);
                        });
                    }
                    Asking::InputRequired => {
                        let mut pending = vec![first];
                        tokio::time::sleep(GATHER_PAUSE).await;
                        while let Ok(more) = run.approvals.try_recv() {
                            pending.push(more);
                        }
                        return self.park(run, pending, identity).await.into();
                    }
                },
                Some(()) = elicitations.next(), if !elicitations.is_empty() => {}
            }
        }
    }

    /// Hand `run` to the parking lot until the client calls again with
    /// answers to `pending` (or the longest approval timeout passes); the
    /// result asks them.
    pub(crate) async fn park(
        &self,
        run: CellRun,
        pending: Vec<Pending>,
        identity: Option<Identity>,
    ) -> InputRequiredResult {
        let token = uuid::Uuid::new_v4().to_string();
        let mut questions = InputRequests::new();
        for (i, p) in pending.iter().enumerate() {
            let question = ElicitRequest::new(approval::question_for(&p.request, identity.as_ref()));
            questions.insert(format!("approval-{i}"), InputRequest::Elicitation(question));
        }
        let longest = pending.iter().map(|p| p.request.timeout_ms).max().unwrap_or(0);
        tracing::info!(questions = pending.len(), "asking the client for approval (input required)");
        let until = tokio::time::Instant::now() + Duration::from_millis(longest);
        self.shared.parking.park(token.clone(), Parked { run, pending, identity }, until).await;
        InputRequiredResult::new(Some(questions), Some(token))
    }

    /// The client's retried call: hand its answers to the parked cell's
    /// waiting calls and go on with the cell.
    pub(crate) async fn resume(
        &self,
        token: &str,
        answers: Option<&rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let identity = auth::caller_of(context).and_then(|c| c.identity);
        let Some(parked) = self.shared.parking.take(token, identity).await else {
            return wire::failed(TOOL_NAME, &FrontendError::NotParked).into();
        };
        for (i, p) in parked.pending.into_iter().enumerate() {
            let answer = approval::answer_of_value(answers.and_then(|a| a.get(&format!("approval-{i}"))));
            let _ = p.answer.send(answer);
        }
        self.drive(parked.run, context).await
    }

    /// The `run_python` tool as listed to a client of a session, or to a
    /// stateless client (`stateless`): its description says what is true
    /// for that client, and with kept variables a stateless client's input
    /// schema takes the session handle.
    pub(crate) fn tool_for(&self, stateless: bool) -> Tool {
        let view = self.shared.catalog.current();
        let description = if stateless { view.stateless_description.clone() } else { view.description.clone() };
        let mut properties = serde_json::json!({
            "code": {"type": "string", "description": "Python source; top-level await is allowed."}
        });
        if stateless && self.shared.config.keep.is_some() {
            properties[handle::ARGUMENT] = serde_json::json!({
                "type": "string",
                "description": "\"new\" to start a sandbox that keeps its variables between runs, or the \
                                `session` value of an earlier result to run in that sandbox again. Leave it out to \
                                run in a fresh sandbox that keeps nothing."
            });
        }
        let input = serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": ["code"],
            "additionalProperties": false,
        });
        let output = wire::output_schema();
        let mut tool = Tool::new(TOOL_NAME, description, Arc::new(wire::as_object(input)));
        tool.output_schema = Some(Arc::new(wire::as_object(output)));
        tool
    }
}

impl ServerHandler for Frontend {
    #[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_logging().build(),
        )
        .with_server_info(Implementation::new("code-mode", env!("CARGO_PKG_VERSION")))
        .with_instructions(match self.shared.config.expose {
            Expose::Only => "Call the tools directly; every call passes a policy gateway.",
            _ => "Call run_python with a short Python program; the wrapped tools are async functions in it.",
        })
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, McpError> {
        // The session takes its caller (and its place among the open
        // sessions) at the handshake, before the client can send more.
        if let Some(caller) = auth::caller_of(&context) {
            self.session.know_caller(caller).await;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// The client chose the level of the log notifications it gets: from
    /// now on its session's events at that level or above reach it.
    #[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.know_client(&context.peer);
        self.session.set_level(request.level).await;
        tracing::debug!(session = %self.session(), level = ?request.level, "the client set its log level");
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.session.know_client(&context.peer);
        let expose = self.shared.config.expose;
        let mut tools = Vec::new();
        if expose.run_python() {
            tools.push(self.tool_for(self.stateless(&context)));
        }
        if expose.direct() {
            tools.extend(direct::tools(&self.shared.catalog.current().catalog));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.session.know_client(&context.peer);
        if let Some(caller) = auth::caller_of(&context) {
            self.session.know_caller(caller).await;
        }
        let stateless = self.stateless(&context);
        if stateless {
            self.session.stateless().await;
        }
        // A 2026-07-28 client sends its log level with each request.
        if let Some(level) = context.meta.log_level() {
            self.session.set_level(level).await;
        }
        let expose = self.shared.config.expose;
        if !expose.direct() && request.name != TOOL_NAME {
            return Err(McpError::invalid_params(
                format!("unknown tool {:?}: the only tool is {TOOL_NAME}", request.name),
                None,
            ));
        }
        if let Some(token) = request.request_state.as_deref() {
            return Ok(self.resume(token, request.input_responses.as_ref(), &context).await);
        }
        if request.name != TOOL_NAME || !expose.run_python() {
            return Ok(self.call_direct(request, &context).await);
        }
        let code = request.arguments.as_ref().and_then(|a| a.get("code"));
        let Some(serde_json::Value::String(code)) = code else {
            return Ok(wire::failed(TOOL_NAME, &FrontendError::CodeMissing).into());
        };
        if code.len() > self.shared.config.max_code {
            let e = FrontendError::CodeTooLarge { size: code.len(), max: self.shared.config.max_code };
            return Ok(wire::failed(TOOL_NAME, &e).into());
        }
        if let Err(e) = self.listen_for_approvals().await {
            tracing::warn!(error = %e, "this session cannot answer approvals");
            return Ok(wire::failed(TOOL_NAME, &e).into());
        }
        let keep = match self.cell_keep(stateless, request.arguments.as_ref().unwrap_or(&JsonObject::new()), &context) {
            Ok(keep) => keep,
            Err(e) => return Ok(wire::failed(TOOL_NAME, &e.into()).into()),
        };
        let run = self.start_cell(code.clone(), keep).await;
        Ok(self.drive(run, &context).await)
    }
}
/// How this request's client can be asked for an approval.
fn asking(context: &RequestContext<RoleServer>) -> Asking {
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // No mode named means form (the older capability shape).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Asking::Unsupported;
    }
    match context.protocol_version() {
        Some(version) if !version.has_initialize() => Asking::InputRequired,
        _ => Asking::Request,
    }
}

/// Ask the client with `elicitation/create` and wait for the answer, at
/// most the request's timeout.
async fn elicit(peer: &Peer<RoleServer>, request: &ApprovalRequest, identity: Option<&Identity>) -> ApprovalReply {
    let timeout = Duration::from_millis(request.timeout_ms);
    match peer.create_elicitation_with_timeout(approval::question_for(request, identity), Some(timeout)).await {
        Ok(result) => approval::answer_of(&result),
        Err(ServiceError::Timeout { .. }) => ApprovalReply::TimedOut,
        Err(e) => {
            tracing::warn!(error = %e, "elicitation failed");
            let reason: String = format!("the client could not be asked ({e})").chars().take(200).collect();
            ApprovalReply::Unavailable { reason }
        }
    }
}
