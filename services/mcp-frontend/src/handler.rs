//! The MCP server of one client session: the rmcp [`ServerHandler`] of a
//! [`Frontend`], and what a request needs besides the session actor: which
//! kind of client sent it (a session, or a stateless request), where its
//! cell runs (a handle), what its client can answer ([`ClientLink`]),
//! asking its client the questions of its calls (approvals, and a wrapped
//! server's own: elicitation or sampling requests, or an input-required
//! result and the parked cell), passing on its servers' progress, the
//! client's cancellation of a call, and the tools it lists.
//!
//! In gateway mode (`--expose-tools`) it also serves the wrapped servers'
//! resources, resource templates, prompts and completions: lists from the
//! catalog watcher's current catalog, and every request that carries data
//! to a server sent to the bridge as a direct call of its [`Op`], checked
//! there as a tool call is ([`crate::gateway`]).

use std::time::Duration;

use code_mode_proto::{ApprovalReply, ApprovalRequest, ClientLink, Note, Op, Target};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, Implementation, InputRequest, InputRequests,
    InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, ServiceError};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::Asking;
use crate::auth::Identity;
pub use crate::direct::Expose;
pub use crate::handle::HandleError;
use crate::notices::Notice;
use crate::parking::Parked;
use crate::progress::{HEARTBEAT, ProgressSent, heartbeat_message};
use crate::questions::{self, PendingAsk, Question};
use crate::session::{CellKeep, CellOrder, CellRun, DirectOrder, Prologue, QUESTIONS_PER_CELL, Running};
use crate::wire::Outcome;
use crate::{
    CellOptions, Frontend, FrontendError, TOOL_NAME, Transport, approval, auth, direct, handle, lifetimes, wire,
};

/// How long a cell's request waits after one approval for others from the
/// same moment (an `asyncio.gather`), so that they go to the client in one
/// round.
const GATHER_PAUSE: Duration = Duration::from_millis(50);

impl Frontend {
    /// Start a cell on an MCP request, with a route for its approvals
    /// (`keep`: in the session's kept container, if variables are kept)
    /// and its files in (issue 42).
    pub(crate) async fn start_cell_with(
        &self,
        code: String,
        inputs: Vec<code_mode_proto::CellInput>,
        keep: CellKeep,
        link: Option<ClientLink>,
        options: CellOptions,
    ) -> CellRun {
        let (route, questions) = mpsc::channel(QUESTIONS_PER_CELL);
        let cell_id = uuid::Uuid::new_v4().to_string();
        let cancel = tokio_util::sync::CancellationToken::new();
        let order = CellOrder {
            cell_id: cell_id.clone(),
            code,
            inputs,
            route: Some(route),
            options,
            keep,
            link,
            cancel: cancel.clone(),
        };
        let report = self.session.run(order).await;
        let result = async move {
            report
                .await
                .unwrap_or(Err(FrontendError::SessionEnded))
                .map(|ran| Outcome::Tool(wire::ran_result(&ran).into()))
        };
        CellRun {
            result: Box::pin(result),
            questions,
            tool: TOOL_NAME.into(),
            running: Running::Cell { id: cell_id, stop: Some(cancel.drop_guard()) },
            op: Op::Tool,
        }
    }

    /// What the client of `context` can answer and wants to hear: its
    /// capabilities (sampling, elicitation, roots), the log level it chose
    /// (its session's, or a stateless request's `_meta`), whether it asked
    /// for progress, and whether it is stateless.
    #[allow(deprecated)] // Sampling, roots and logging are deprecated from 2026-07-28 on; older clients use them.
    pub(crate) fn link_of(&self, context: &RequestContext<RoleServer>) -> ClientLink {
        let caps = context.client_capabilities();
        let elicitation = caps.as_ref().and_then(|c| c.elicitation.clone());
        let level = context.meta.log_level().or_else(|| self.session.notifier().level());
        ClientLink {
            sampling: caps.as_ref().is_some_and(|c| c.sampling.is_some()),
            elicitation: elicitation.as_ref().is_some_and(|e| e.form.is_some() || e.url.is_none()),
            elicitation_url: elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            roots: caps.as_ref().is_some_and(|c| c.roots.is_some()),
            roots_list_changed: caps.as_ref().and_then(|c| c.roots.as_ref()).and_then(|r| r.list_changed) == Some(true),
            log_level: level.and_then(|l| match serde_json::to_value(l) {
                Ok(serde_json::Value::String(level)) => Some(level),
                _ => None,
            }),
            progress: context.meta.get_progress_token().is_some(),
            stateless: input_required(context),
            tasks: caps.as_ref().is_some_and(|c| c.supports_tasks()),
        }
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

    /// Tell the session what a request brings, in one message, before
    /// the request starts anything: the client, the caller, whether it is
    /// stateless (returned), and the log level a 2026-07-28 client sends
    /// with each request.
    pub(crate) async fn prologue(&self, context: &RequestContext<RoleServer>) -> bool {
        let stateless = self.stateless(context);
        let prologue = Prologue {
            caller: auth::caller_of(context),
            stateless,
            level: context.meta.log_level(),
            ..Prologue::default()
        };
        self.session.prologue(&context.peer, prologue).await;
        stateless
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
        retry: Option<code_mode_proto::Retry>,
    ) -> Result<CallToolResponse, McpError> {
        let tool = request.name.to_string();
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        match self.start_direct(Target::Tool(tool.clone()), arguments, context, retry).await {
            Ok(run) => self.drive(run, context).await.tool_response(),
            Err(e) => Ok(wire::failed(&tool, &e).into()),
        }
    }

    /// Start a direct call of `target` (a tool, a resource's read, a
    /// prompt, ...): the session sends it to the bridge, where it is checked
    /// as a call from code; its questions come to this request.
    pub(crate) async fn start_direct(
        &self,
        target: Target,
        arguments: serde_json::Value,
        context: &RequestContext<RoleServer>,
        retry: Option<code_mode_proto::Retry>,
    ) -> Result<CellRun, FrontendError> {
        if let Err(e) = self.listen_for_approvals().await {
            tracing::warn!(error = %e, "this session cannot answer approvals");
            return Err(e);
        }
        let (route, questions) = mpsc::channel(QUESTIONS_PER_CELL);
        let call_id = format!("direct-{}", uuid::Uuid::new_v4());
        let link = Some(self.link_of(context));
        let op = target.op();
        let tool = target.tool().unwrap_or(op.method()).to_string();
        let order = DirectOrder { call_id: call_id.clone(), target, arguments, link, retry, route };
        let result = self.session.direct(order).await;
        let result = async move { result.await.unwrap_or(Err(FrontendError::SessionEnded)) };
        let running = Running::Direct { call_id };
        Ok(CellRun { result: Box::pin(result), questions, tool, running, op })
    }

    /// Wait for a cell's (or direct call's) end while answering its
    /// questions and passing on its progress; a question that needs the
    /// client's retried call parks the cell and returns the input-required
    /// result. A client that cancels the request cancels a direct call at
    /// its server.
    pub(crate) async fn drive(&self, mut run: CellRun, context: &RequestContext<RoleServer>) -> Outcome {
        let asking = asking(context);
        let identity = auth::caller_of(context).and_then(|c| c.identity);
        let progress = context.meta.get_progress_token();
        // A 2026-07-28 client is asked through input-required results,
        // over one connection as over HTTP: no server may send it requests.
        let stateless = input_required(context);
        // Such a client over HTTP cancels by closing the request's stream.
        let closed = crate::closed::of(context).filter(|_| stateless);
        // A client of a session over HTTP that ends it (DELETE) is gone.
        let ended = crate::closed::session_end(context);
        // Questions put to the client by requests of their own, owned by
        // this request: dropped with it.
        let mut elicitations = FuturesUnordered::new();
        let mut cancelled = false;
        // Fired when the request is gone: its questions are withdrawn at
        // the client.
        let gone = CancellationToken::new();
        // Progress goes out increasing only (as MCP wants): a cell that
        // runs long says so whenever HEARTBEAT passes without a progress
        // notification, before and after its code reports progress of its
        // own, so a client with a read timeout keeps waiting for a live cell.
        let mut sent = ProgressSent::default();
        let is_cell = matches!(run.running, Running::Cell { .. });
        let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
        let started = tokio::time::Instant::now();
        loop {
            tokio::select! {
                // Questions and notes first: a call's last progress note is
                // queued before its result is sent back (the bridge waits
                // for it), and goes out before the result.
                biased;
                Some(question) = run.questions.recv() => match question {
                    Question::Note(note) => {
                        if let (Some(token), Note::Progress { progress: done, total, message }) = (&progress, note.note) {
                            sent.code_reported = true;
                            if sent.send(context, token, done, total, message).await {
                                heartbeat.reset();
                            }
                        }
                    }
                    // A stateless client hears a server's questions only in
                    // a tool call's input-required result: on any other
                    // request (a read, a prompt, a completion) the question
                    // is answered for it, and the request waits for its own
                    // result. Such a question is most often the server's
                    // own business that happened to come while this request
                    // was the one in flight (server-everything asks for
                    // the roots as soon as a session starts).
                    Question::Ask(PendingAsk { ask, answer, .. }) if stateless && run.op != Op::Tool => {
                        tracing::info!(server = %ask.server, method = ask.ask.method(), request = run.op.method(),
                            "a server's question on a stateless client's request that cannot carry it: answered for the client");
                        let _ = answer.send(questions::not_askable(&ask, Some(run.op)));
                    }
                    Question::Ask(ask) if stateless => {
                        let pending = self.gather(&mut run, Question::Ask(ask)).await;
                        return Outcome::Tool(self.park(run, pending, identity).await.into());
                    }
                    Question::Ask(PendingAsk { ask, answer, withdrawn }) => {
                        let peer = context.peer.clone();
                        let timeout = Duration::from_millis(ask.timeout_ms);
                        let gone = gone.clone();
                        elicitations.push(Box::pin(async move {
                            let _ = answer.send(questions::ask_client(&peer, &ask, timeout, &withdrawn, &gone).await);
                        }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>);
                    }
                    Question::Approval(first) if first.request.connect.is_some() => {
                        if let Some(first) = self.ask_connect(first, context, identity.as_ref(), &gone, &mut elicitations) {
                            let pending = self.gather(&mut run, Question::Approval(first)).await;
                            return Outcome::Tool(self.park(run, pending, identity).await.into());
                        }
                    }
                    Question::Approval(first) => {
                      let first = match first.request.console.clone() {
                        Some(ask) => match self.tell_console(first, &ask, asking, context, &gone, &mut elicitations) {
                            Some(first) => first,
                            None => continue,
                        },
                        None => first,
                      };
                      match asking {
                        Asking::Unsupported => {
                            let reason = "the MCP client did not declare support for (form) elicitation".to_string();
                            self.session.notifier().tell(Notice::approval_unavailable(&first.request, &reason)).await;
                            let _ = first.answer.send(ApprovalReply::Unavailable { reason });
                        }
                        Asking::Request => {
                            let peer = context.peer.clone();
                            let identity = identity.clone();
                            let notifier = self.session.notifier().clone();
                            let link = self.console_link(&first.request);
                            let gone = gone.clone();
                            elicitations.push(Box::pin(async move {
                                if first.request.console.is_none() {
                                    let how = "asking the person through elicitation";
                                    notifier.tell(Notice::approval_asked(&first.request, how)).await;
                                }
                                let answer = elicit(&peer, &first.request, identity.as_ref(), link.as_deref(), &gone).await;
                                let _ = first.answer.send(answer);
                            }));
                        }
                        Asking::InputRequired => {
                            let pending = self.gather(&mut run, Question::Approval(first)).await;
                            return Outcome::Tool(self.park(run, pending, identity).await.into());
                        }
                      }
                    }
                },
                result = &mut run.result => {
                    return match result {
                        Ok(outcome) => outcome,
                        Err(e) => {
                            if !matches!(e, FrontendError::ServerRefused { .. }) {
                                tracing::warn!(error = %e, tool = %run.tool, "the call failed");
                            }
                            wire::failed_outcome(&run.tool, e)
                        }
                    };
                }
                () = crate::closed::gone(&context.ct, closed.as_ref(), ended.as_deref()), if !cancelled => {
                    cancelled = true;
                    gone.cancel();
                    match &mut run.running {
                        Running::Direct { call_id } => crate::direct::cancel(&self.shared, call_id).await,
                        // A cell stops (its container killed, its calls
                        // cancelled, its questions withdrawn); its report,
                        // saying so, still ends this loop.
                        Running::Cell { stop, .. } => drop(stop.take()),
                    }
                }
                Some(()) = elicitations.next(), if !elicitations.is_empty() => {}
                _ = heartbeat.tick(), if is_cell && progress.is_some() => {
                    if let Some(token) = &progress {
                        // Time held while a person decided is not run time.
                        let held = match &run.running {
                            Running::Cell { id, .. } => self.shared.activity.held_time(id),
                            Running::Direct { .. } => None,
                        };
                        let elapsed = started.elapsed();
                        let message = Some(heartbeat_message(elapsed, held));
                        sent.beat(context, token, elapsed.as_secs() as f64, message).await;
                    }
                }
            }
        }
    }

    /// The console's page of a question that waits there, when this
    /// process serves the console.
    fn console_link(&self, request: &ApprovalRequest) -> Option<String> {
        request.console.as_ref().and_then(|ask| crate::console::approval_link(&self.shared, &ask.id))
    }

    /// Tell the client that a question waits in the web console: the
    /// `approval_asked` notification with the link, and a URL-mode
    /// elicitation to a client that declared URL mode and can be sent
    /// requests (unless it is asked the form question, whose message
    /// gives the link). Neither's answer decides anything. Returns the
    /// question when the client must also be asked (`ask_client`); else it
    /// is answered now with [`approval::IN_CONSOLE`], which the bridge
    /// ignores.
    fn tell_console(
        &self,
        first: approval::Pending,
        ask: &code_mode_proto::ConsoleAsk,
        asking: Asking,
        context: &RequestContext<RoleServer>,
        gone: &CancellationToken,
        elicitations: &mut FuturesUnordered<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>,
    ) -> Option<approval::Pending> {
        let gone = gone.clone();
        let link = self.console_link(&first.request);
        let asked_by_form = ask.ask_client && asking != Asking::Unsupported;
        let url_mode = accepts_url_elicitation(context) && !input_required(context) && !asked_by_form;
        let notifier = self.session.notifier().clone();
        let peer = context.peer.clone();
        let request = first.request.clone();
        let ask = ask.clone();
        let timeout = Duration::from_millis(request.timeout_ms);
        elicitations.push(Box::pin(async move {
            notifier.tell(Notice::approval_in_console(&request, &ask, link.as_deref())).await;
            if url_mode && let Some(link) = link {
                let question = approval::console_question(&request, &ask, &link);
                // An accept only means the person opened the link.
                match questions::elicit_unless_gone(&peer, question, timeout, &gone).await {
                    Some(Ok(result)) => {
                        tracing::debug!(action = ?result.action, "the client heard of the console's question")
                    }
                    Some(Err(e)) => tracing::debug!(error = %e, "a URL-mode elicitation found no answer"),
                    None => tracing::debug!("a URL-mode elicitation was withdrawn: its request is gone"),
                }
            }
        }));
        if asked_by_form {
            return Some(first);
        }
        let _ = first.answer.send(ApprovalReply::Unavailable { reason: approval::IN_CONSOLE.into() });
        None
    }

    /// `first` and the questions that arrive with it (an `asyncio.gather`
    /// of calls asks them at once), so they go to the client in one round;
    /// progress notes among them are dropped.
    async fn gather(&self, run: &mut CellRun, first: Question) -> Vec<Question> {
        let mut pending = vec![first];
        tokio::time::sleep(GATHER_PAUSE).await;
        while let Ok(more) = run.questions.try_recv() {
            if !matches!(more, Question::Note(_)) {
                pending.push(more);
            }
        }
        pending
    }

    /// Hand `run` to the parking lot until the client calls again with
    /// answers to `pending` (or the longest question's timeout passes); the
    /// result asks them.
    pub(crate) async fn park(
        &self,
        run: CellRun,
        pending: Vec<Question>,
        identity: Option<Identity>,
    ) -> InputRequiredResult {
        let token = uuid::Uuid::new_v4().to_string();
        let mut questions = InputRequests::new();
        let mut longest = Duration::ZERO;
        for (i, question) in pending.iter().enumerate() {
            match question {
                Question::Approval(p) => {
                    let link = self.console_link(&p.request);
                    let asked = crate::connect::elicitation(self, &p.request, identity.as_ref(), link.as_deref());
                    let asked = ElicitRequest::new(asked);
                    questions.insert(format!("approval-{i}"), InputRequest::Elicitation(asked));
                    longest = longest.max(Duration::from_millis(p.request.timeout_ms));
                }
                Question::Ask(ask) => {
                    if let Some(asked) = questions::input_request(&ask.ask) {
                        questions.insert(format!("ask-{i}"), asked);
                    }
                    longest = longest.max(ask.timeout());
                }
                Question::Note(_) => {}
            }
        }
        tracing::info!(questions = pending.len(), "asking the client (input required)");
        let until = tokio::time::Instant::now() + longest;
        self.shared.parking.park(token.clone(), Parked { run, pending, identity }, until).await;
        InputRequiredResult::new(Some(questions), Some(token))
    }

    /// The client's retried call: hand its answers to the parked cell's
    /// waiting calls and go on with the cell.
    /// `None` when no cell of the caller is parked under `token`.
    pub(crate) async fn resume(
        &self,
        token: &str,
        answers: Option<&rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        let identity = auth::caller_of(context).and_then(|c| c.identity);
        let parked = self.shared.parking.take(token, identity).await?;
        for (i, question) in parked.pending.into_iter().enumerate() {
            match question {
                Question::Approval(p) => {
                    let value = answers.and_then(|a| a.get(&format!("approval-{i}")));
                    let answer = crate::connect::reply_of_value(&p.request, value);
                    let _ = p.answer.send(answer);
                }
                Question::Ask(PendingAsk { ask, answer, .. }) => {
                    let value = answers.and_then(|a| a.get(&format!("ask-{i}")));
                    let _ = answer.send(questions::answer_of_value(&ask, value));
                }
                Question::Note(_) => {}
            }
        }
        Some(self.drive(parked.run, context).await.tool_response())
    }
}

impl ServerHandler for Frontend {
    #[allow(deprecated)] // MCP logging, deprecated from 2026-07-28 on (see `notices`).
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(crate::gateway::capabilities(self))
            .with_server_info(Implementation::new("code-mode", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.shared.config.expose {
                Expose::Only => "Call the tools directly; every call passes a policy gateway.",
                _ => "Call run_python with a short Python program; the wrapped tools are async functions in it.",
            })
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        self.task_get(request, &context).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_cancel(request, &context).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_update(request, &context).await
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, McpError> {
        // One handshake per session: a second would change what the
        // client declared (whether it can be asked for approvals) under
        // the session's feet. (Over HTTP the gate refuses it first.)
        if self.handshaken.swap(true, std::sync::atomic::Ordering::SeqCst) {
            tracing::info!(session = %self.session(), "refused a second initialize on a session");
            return Err(wire::rpc::initialized_twice());
        }
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
    /// The client's roots changed: the bridges tell the servers of its own
    /// sessions, in the background (a notification waits for nothing; see
    /// [`crate::direct::RootsChanges`]).
    async fn on_roots_list_changed(&self, _context: rmcp::service::NotificationContext<RoleServer>) {
        self.roots.changed(self.shared.clone(), self.session().to_string());
    }

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
        let stateless = self.prologue(&context).await;
        let expose = self.shared.config.expose;
        if !expose.direct() && request.name != TOOL_NAME {
            return Err(wire::rpc::unknown_tool(&request.name, TOOL_NAME));
        }
        if request.request_state.is_some() || request.input_responses.is_some() {
            if let Some(token) = request.request_state.as_deref()
                && let Some(resumed) = self.resume(token, request.input_responses.as_ref(), &context).await
            {
                return resumed;
            }
            if request.name == TOOL_NAME && expose.run_python() {
                // Only code-mode's own states resume a cell.
                return Err(wire::rpc::not_parked());
            }
            // The wrapped server's own questions: its state and the
            // client's answers back to it (it checks its state; code-mode
            // checks the call as any).
            let retry = crate::gateway::retry_of(request.request_state.clone(), request.input_responses.clone());
            return self.call_direct(request, &context, retry).await;
        }
        if request.name != TOOL_NAME || !expose.run_python() {
            return self.call_direct(request, &context, None).await;
        }
        let code = request.arguments.as_ref().and_then(|a| a.get("code"));
        let Some(serde_json::Value::String(code)) = code else {
            return Ok(wire::failed(TOOL_NAME, &FrontendError::CodeMissing).into());
        };
        if code.len() > self.shared.config.max_code {
            let e = FrontendError::CodeTooLarge { size: code.len(), max: self.shared.config.max_code };
            return Ok(wire::failed(TOOL_NAME, &e).into());
        }
        let inputs = match crate::files_in::parse(request.arguments.as_ref()) {
            Ok(inputs) => inputs,
            Err(e) => return Ok(wire::failed(TOOL_NAME, &FrontendError::FilesIn(e)).into()),
        };
        if let Err(e) = self.listen_for_approvals().await {
            tracing::warn!(error = %e, "this session cannot answer approvals");
            return Ok(wire::failed(TOOL_NAME, &e).into());
        }
        let keep = match self.cell_keep(stateless, request.arguments.as_ref().unwrap_or(&JsonObject::new()), &context) {
            Ok(keep) => keep,
            Err(e) => return Ok(wire::failed(TOOL_NAME, &e.into()).into()),
        };
        // A cell's progress is its code's (a wrapped server's progress of
        // the calls inside it is not the cell's).
        let link = Some(ClientLink { progress: false, ..self.link_of(&context) });
        if let Some(key) = crate::tasks::idempotency::key_of(&context)? {
            return self.run_keyed(&key, code.clone(), inputs, keep, link, &context).await;
        }
        if crate::tasks::wanted(&context) {
            return self.start_task(code.clone(), inputs, keep, link, &context).await;
        }
        let run = self.start_cell_with(code.clone(), inputs, keep, link, CellOptions::default()).await;
        self.drive(run, &context).await.tool_response()
    }

    /// A stateless (2026-07-28) client listens for list changes with
    /// `subscriptions/listen`: the tools', prompts' and resources' are
    /// served (a resource's updates come from a client's own session with
    /// its server, which a stateless client does not keep).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let mut catalog = self.shared.catalog.subscribe();
        catalog.mark_unchanged();
        let mut last = catalog.borrow().clone();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = catalog.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let now = catalog.borrow_and_update().clone();
                    let lists = crate::catalog::changed_lists(&last, &now);
                    last = now;
                    let sink = context.sink();
                    let accepted = context.accepted();
                    if lists.tools && accepted.tools_list_changed == Some(true) {
                        let _ = sink.notify_tool_list_changed().await;
                    }
                    if lists.prompts && accepted.prompts_list_changed == Some(true) {
                        let _ = sink.notify_prompt_list_changed().await;
                    }
                    if lists.resources && accepted.resources_list_changed == Some(true) {
                        let _ = sink.notify_resource_list_changed().await;
                    }
                }
            }
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        self.session.know_client(&context.peer);
        crate::gateway::listed(self, "resources")
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        self.session.know_client(&context.peer);
        crate::gateway::listed(self, "resourceTemplates")
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        self.session.know_client(&context.peer);
        crate::gateway::listed(self, "prompts")
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        if code_mode_core::files::is_kept_file(&request.uri) {
            let owner = auth::caller_of(&context).and_then(|c| c.identity).map(|i| i.to_string()).unwrap_or_default();
            let config = &self.shared.config;
            return crate::files_out::read_any(
                config.files.as_ref(),
                config.shared_files.as_ref(),
                &owner,
                &request.uri,
            )
            .await
            .map(Into::into);
        }
        let retry = crate::gateway::retry_of(request.request_state.clone(), request.input_responses.clone());
        let value = crate::gateway::request(
            self,
            Target::ReadResource(request.uri.clone()),
            serde_json::json!({}),
            retry,
            &context,
        )
        .await?;
        if wire::is_input_required(&value) {
            return crate::gateway::typed::<InputRequiredResult>(value).map(Into::into);
        }
        crate::gateway::typed::<rmcp::model::ReadResourceResult>(value).map(Into::into)
    }

    #[allow(deprecated)] // resources/subscribe is legacy-only; clients of 2025-11-25 and older use it.
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        crate::gateway::request(self, Target::Subscribe(request.uri.clone()), serde_json::json!({}), None, &context)
            .await?;
        Ok(())
    }

    #[allow(deprecated)] // resources/unsubscribe is legacy-only; clients of 2025-11-25 and older use it.
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        crate::gateway::request(self, Target::Unsubscribe(request.uri.clone()), serde_json::json!({}), None, &context)
            .await?;
        Ok(())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        let retry = crate::gateway::retry_of(request.request_state.clone(), request.input_responses.clone());
        let prompt = Target::GetPrompt(request.name.clone());
        let value = crate::gateway::request(self, prompt, arguments, retry, &context).await?;
        if wire::is_input_required(&value) {
            return crate::gateway::typed::<InputRequiredResult>(value).map(Into::into);
        }
        crate::gateway::typed::<rmcp::model::GetPromptResult>(value).map(Into::into)
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let params = serde_json::to_value(&request).map_err(wire::rpc::bad_params)?;
        let value = crate::gateway::request(self, Target::Complete, params, None, &context).await?;
        crate::gateway::typed::<rmcp::model::CompleteResult>(value)
    }
}

/// True when the request's client speaks a protocol without the
/// initialize handshake (2026-07-28 and later): it cannot be sent requests,
/// so its questions come back as input-required results, over one
/// connection as over HTTP.
pub(crate) fn input_required(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| !v.has_initialize())
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

/// Whether the request's client declared URL-mode elicitation (MCP
/// 2025-11-25 `elicitation: {url: {}}`).
pub(crate) fn accepts_url_elicitation(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.url.is_some())
}

/// Ask the client with `elicitation/create` and wait for the answer, at
/// most the request's timeout (`link`: the console's page of a question
/// that waits there too, given in the message); withdrawn at the client
/// when `gone` fires first.
async fn elicit(
    peer: &Peer<RoleServer>,
    request: &ApprovalRequest,
    identity: Option<&Identity>,
    link: Option<&str>,
    gone: &CancellationToken,
) -> ApprovalReply {
    let timeout = Duration::from_millis(request.timeout_ms);
    let question = approval::question_linked(request, identity, link);
    match questions::elicit_unless_gone(peer, question, timeout, gone).await {
        None => ApprovalReply::Unavailable { reason: questions::REQUEST_GONE.into() },
        Some(Ok(result)) => approval::answer_of(&result),
        Some(Err(ServiceError::Timeout { .. })) => ApprovalReply::TimedOut,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "elicitation failed");
            let reason: String = format!("the client could not be asked ({e})").chars().take(200).collect();
            ApprovalReply::Unavailable { reason }
        }
    }
}
