//! One task's cell, from the `run_python` call that starts it to its
//! settled record: the task is created in the store before its handle goes
//! back, then a tokio task of this process drives the cell (its progress
//! and heartbeat become the task's status message) and writes how it
//! ended; and the `tasks/*` requests of the caller's tasks.
//!
//! What a task's cell asks its client (no request of the client is open
//! while it runs) goes through the task: its `inputRequests`, answered by
//! `tasks/update` ([`super::asking`]); an approval whose rule has approvers
//! in the web console waits there, the task `working`.

use std::time::Duration;

use code_mode_proto::{ApprovalReply, ClientLink, Note};
use rmcp::model::{
    CallToolResponse, CancelTaskParams, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, TaskPayload,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;

use super::asking::{self, Asked, Driven};
use super::{TaskError, error_object, scope_of};
use crate::notices::Notice;
use crate::questions::Question;
use crate::session::{CellKeep, CellRun, Running};
use crate::{CellOptions, Frontend, FrontendError, TOOL_NAME, approval, auth, wire};

/// How often a running task's status message is brought up to date.
const STATUS_EVERY: Duration = Duration::from_secs(2);

/// The JSON-RPC code of a task that failed for code-mode's own reason.
const INTERNAL: i32 = -32603;

/// The store scope of the caller of `context`.
fn caller_scope(context: &RequestContext<RoleServer>) -> String {
    scope_of(auth::caller_of(context).and_then(|c| c.identity).as_ref())
}

impl Frontend {
    /// Start `run_python`'s cell as a task: its record is written, then
    /// the handle returned; the cell runs on, up to `--task-deadline`,
    /// driven by this process. A store that cannot keep the task refuses
    /// the call (the cell is stopped).
    pub(crate) async fn start_task(
        &self,
        code: String,
        inputs: Vec<code_mode_proto::CellInput>,
        keep: CellKeep,
        link: Option<ClientLink>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let scope = caller_scope(context);
        // The client is asked through the task (its input requests), what
        // it declared it answers.
        let link = link.map(|link| ClientLink { progress: false, ..link });
        let identity = auth::caller_of(context).and_then(|c| c.identity);
        let asked = Asked::new(link.as_ref().is_some_and(|l| l.elicitation), identity)
            .with_url(link.as_ref().is_some_and(|l| l.elicitation_url));
        let handle = matches!(keep, CellKeep::Handle(_));
        // Over NATS the runner keeps the cell's report for any frontend.
        let options = CellOptions {
            deadline: Some(self.shared.tasks.deadline),
            keep_report: self.shared.tasks.keeps_reports(),
            ..CellOptions::default()
        };
        let mut run = self.start_cell_with(code, inputs, keep, link, options).await;
        let Running::Cell { id: cell, stop } = &mut run.running else {
            return Err(McpError::internal_error("run_python started no cell", None));
        };
        let cell = cell.clone();
        let token = stop.take().map(tokio_util::sync::DropGuard::disarm).unwrap_or_default();
        // Dropping the run (this process ending) still stops the cell.
        *stop = Some(token.clone().drop_guard());
        let task = match self.shared.tasks.create(&scope, &cell, handle, token.clone()).await {
            Ok(task) => task,
            Err(e) => {
                tracing::warn!(error = %e, "a run_python task could not be created: its cell is stopped");
                return Err(e.into());
            }
        };
        tracing::info!(task = %task.task_id, %cell, "run_python runs as a task");
        let frontend = self.clone();
        let id = task.task_id.clone();
        tokio::spawn(async move {
            frontend.drive_task(run, asked, Driven { scope, id, cell, told: Default::default() }, token).await
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// Drive a task's cell to its end, keeping the task's status message
    /// up to date and carrying its questions through the task, then settle
    /// the task.
    async fn drive_task(&self, mut run: CellRun, mut asked: Asked, task: Driven, stop: CancellationToken) {
        let Driven { scope, id, cell, .. } = task.clone();
        let book = &self.shared.tasks;
        // The creating session's client hears the task working (as its
        // handle says), then each change of its status.
        match book.get(&scope, &id).await {
            Ok(record) => self.tell_status(&task, record.task).await,
            Err(e) => tracing::debug!(task = %id, error = %e, "a new task could not be read to tell its status"),
        }
        let started = tokio::time::Instant::now();
        let mut status = tokio::time::interval_at(started + STATUS_EVERY, STATUS_EVERY);
        let mut answers = tokio::time::interval(asking::POLL);
        // Idle while nothing is asked: no burst of reads when asked again.
        answers.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut progress: Option<String> = None;
        // The console's question a call waits on (its page, when known).
        let mut console: Option<String> = None;
        let result = loop {
            tokio::select! {
                biased;
                Some(question) = run.questions.recv() => match question {
                    Question::Note(note) => {
                        if let Note::Progress { progress: done, total, message } = note.note {
                            progress = Some(progress_text(done, total, message.as_deref()));
                        }
                    }
                    Question::Ask(pending) => {
                        tracing::info!(task = %id, server = %pending.ask.server, method = pending.ask.ask.method(),
                            "a server's question is put to the task's client (input required)");
                        if asked.server(pending) {
                            self.write_questions(&task, &asked, &[]).await;
                        }
                    }
                    Question::Approval(pending) if pending.request.connect.is_some() => {
                        let link = pending.request.connect.as_ref()
                            .and_then(|ask| crate::console::accounts::connect_link(&self.shared, &ask.flow));
                        tracing::info!(task = %id, "a connect question is put to the task's client (input required)");
                        if asked.connect(pending, link.as_deref()) {
                            self.write_questions(&task, &asked, &[]).await;
                        }
                    }
                    Question::Approval(pending) => match &pending.request.console {
                        // A team's question: the console decides, never the client.
                        Some(ask) => {
                            let link = self.task_console_link(&pending.request);
                            console = Some(match link {
                                Some(link) => format!("{} decide at {link}", approval::approvers(ask)),
                                None => format!("{} decide there", approval::approvers(ask)),
                            });
                            let _ = pending.answer.send(ApprovalReply::Unavailable { reason: approval::IN_CONSOLE.into() });
                        }
                        None => {
                            let link = self.task_console_link(&pending.request);
                            let how = "asking the person through the task (input_required, answered by tasks/update)";
                            self.session.notifier().tell(Notice::approval_asked(&pending.request, how)).await;
                            if asked.approval(pending, link.as_deref()) {
                                self.write_questions(&task, &asked, &[]).await;
                            }
                        }
                    },
                },
                result = &mut run.result => break result,
                _ = answers.tick(), if !asked.is_empty() => {
                    self.take_answers(&task, &mut asked).await;
                }
                _ = status.tick() => {
                    let held = self.shared.activity.held_time(&cell);
                    let mut message = crate::progress::heartbeat_message(started.elapsed(), held);
                    if let Some(progress) = &progress {
                        message = format!("{message}; its code reported {progress}");
                    }
                    if let Some(waits) = asking::waiting_text(&asked) {
                        message = format!("{message}; {waits}");
                    }
                    if let Some(whom) = &console && held.is_some_and(|h| h.paused) {
                        message = format!("{message}; a call waits for a person in the web console: {whom}");
                    }
                    let written = book.update(&scope, &id, |record| {
                        record.task.task.status_message = Some(message.clone());
                    }).await;
                    if let Err(e) = written {
                        tracing::warn!(task = %id, error = %e, "a task's progress could not be written");
                    }
                }
            }
        };
        let ran = started.elapsed();
        // A cancel through another replica is in the record.
        let cancelled = stop.is_cancelled() || book.get(&scope, &id).await.is_ok_and(|record| record.cancel_requested);
        // Lost from sight (its lease silent while NATS restarts, its
        // report lost on the way): when its runner keeps its report, the
        // cell may still end with one; follow it instead of failing it.
        if !cancelled
            && book.keeps_reports()
            && let Err(lost @ (FrontendError::RunnerSilent { .. } | FrontendError::ReportLost { .. })) = result
        {
            // The cell may run on: dropping its run must not stop it.
            if let Running::Cell { stop: guard, .. } = &mut run.running {
                guard.take().map(tokio_util::sync::DropGuard::disarm);
            }
            drop(run);
            tracing::warn!(task = %id, %cell, error = %lost, "a task's cell was lost from sight: following it");
            return book.clone().follow_cell(scope, id, Some(lost)).await;
        }
        let (payload, message) = if cancelled {
            (TaskPayload::Cancelled, format!("cancelled: the cell was stopped after {} s", ran.as_secs()))
        } else {
            settled(result, ran)
        };
        drop(run);
        if let Ok(record) = book.settle(&scope, &id, payload, message).await {
            self.tell_status(&task, record.task).await;
        }
    }

    /// Tell the client of the session that created the task its status
    /// (`notifications/tasks`, the task as `tasks/get` answers it), when
    /// it differs from the one last told: status changes only, not the
    /// status message's refreshes. A session whose client has gone loses
    /// it (a stateless 2026-07-28 client has none: it polls).
    pub(super) async fn tell_status(&self, task: &Driven, now: DetailedTask) {
        {
            let mut told = code_mode_core::sync::lock(&task.told);
            if *told == Some(now.status()) {
                return;
            }
            *told = Some(now.status());
        }
        tracing::debug!(task = %task.id, status = ?now.status(), "a task's status is told its client");
        self.session.notifier().tell_own_task(now).await;
    }

    /// `tasks/get`: the caller's task, as it is now; in gateway mode an id
    /// that is no cell's goes to the wrapped servers ([`crate::task_relay`]).
    pub(crate) async fn task_get(
        &self,
        request: GetTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        match self.shared.tasks.get(&caller_scope(context), &request.task_id).await {
            // Not a cell's: a wrapped server's task, in gateway mode.
            Err(TaskError::NotFound(_)) if self.shared.config.expose.direct() => {
                crate::task_relay::get(self, request, context).await
            }
            record => Ok(GetTaskResult::new(record?.task)),
        }
    }

    /// `tasks/cancel`: stop the caller's task's cell (it settles as
    /// cancelled once the cell has stopped), from whichever replica: a
    /// cell another process drives is stopped through its runner and the
    /// bridges, as a cancelled request's is.
    pub(crate) async fn task_cancel(
        &self,
        request: CancelTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let cancelled = match self.shared.tasks.cancel(&caller_scope(context), &request.task_id).await {
            // Not a cell's: a wrapped server's task, in gateway mode.
            Err(TaskError::NotFound(_)) if self.shared.config.expose.direct() => {
                return crate::task_relay::cancel(self, request, context).await;
            }
            cancelled => cancelled?,
        };
        if let Some(cell) = cancelled {
            tracing::info!(task = %request.task_id, %cell, "a run_python task another process drives was cancelled");
            tokio::join!(crate::direct::cancel(&self.shared, &cell), stop_remote(self, &cell));
        } else {
            tracing::info!(task = %request.task_id, "a run_python task was cancelled by its client");
        }
        Ok(())
    }

    /// `tasks/update`: the client's answers to the caller's task's input
    /// requests, kept in the task's record for the process driving it
    /// (answers under keys the task does not ask are ignored); in gateway
    /// mode an id that is no cell's goes to the wrapped servers.
    pub(crate) async fn task_update(
        &self,
        request: UpdateTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let scope = caller_scope(context);
        match self.shared.tasks.answer(&scope, &request.task_id, request.input_responses.clone()).await {
            Err(TaskError::NotFound(_)) if self.shared.config.expose.direct() => {
                crate::task_relay::update(self, request, context).await
            }
            Err(e) => Err(e.into()),
            Ok(kept) => {
                let sent = request.input_responses.len();
                tracing::info!(task = %request.task_id, answers = kept, ignored = sent - kept, "a task's client answered");
                Ok(())
            }
        }
    }
}

/// How a task's cell ended, as the task's payload and status message: a
/// result (also a run that failed inside, as `run_python` returns it) is
/// completed; an error of code-mode itself (the runner lost, the session
/// ended) or a server's JSON-RPC error fails the task with it.
pub(super) fn settled(result: Result<wire::Outcome, FrontendError>, ran: Duration) -> (TaskPayload, String) {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(FrontendError::ServerRefused { code, message, data }) => {
            wire::Outcome::Refused { message, code: Some(code), data }
        }
        Err(e) => {
            let message = format!("{TOOL_NAME}: {e}");
            let error = error_object(INTERNAL, &message);
            return (TaskPayload::Failed { error }, format!("failed after {} s: {e}", ran.as_secs()));
        }
    };
    match outcome.tool_response() {
        Ok(CallToolResponse::Complete(result)) => match serde_json::to_value(&result) {
            Ok(serde_json::Value::Object(result)) => {
                (TaskPayload::Completed { result }, format!("completed: the cell ran {} s", ran.as_secs()))
            }
            _ => {
                let error = error_object(INTERNAL, "run_python: the result could not be written");
                (TaskPayload::Failed { error }, "failed: the result could not be written".into())
            }
        },
        Ok(_) => {
            let error = error_object(INTERNAL, "run_python: the cell asked a question a task cannot carry");
            (TaskPayload::Failed { error }, "failed: the cell asked a question".into())
        }
        Err(e) => {
            let error = error_object(e.code.0, &e.message);
            (TaskPayload::Failed { error }, format!("failed: {}", e.message))
        }
    }
}

/// The progress the code reported, in words.
pub(super) fn progress_text(done: f64, total: Option<f64>, message: Option<&str>) -> String {
    let amount = match total {
        Some(total) => format!("progress {done}/{total}"),
        None => format!("progress {done}"),
    };
    match message {
        Some(message) => format!("{amount} ({message})"),
        None => amount,
    }
}

/// Ask the runner of `cell` to stop it (a task another process drives); a
/// few tries, since a cell that already ended has no runner to answer.
async fn stop_remote(frontend: &Frontend, cell: &str) {
    use code_mode_proto::{CancelCell, CellCancelled, subjects};
    let Some(subject) = subjects::cell_cancel(cell) else { return };
    let request = CancelCell { reason: Some("its task was cancelled by its client".into()) };
    for _ in 0..5 {
        match frontend.shared.bus.call_quiet::<_, CellCancelled>(&subject, &request, Duration::from_secs(2)).await {
            Ok(CellCancelled { stopped }) => {
                tracing::info!(%cell, stopped, "the runner heard the task's cancel");
                return;
            }
            Err(e) => tracing::debug!(%cell, error = %e, "no runner heard the task's cancel yet"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
