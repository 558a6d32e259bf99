//! A task a wrapped server makes of a call from a cell (the MCP tasks
//! extension, SEP-2663): the bridge waits for it on the cell's behalf.
//!
//! A cell's call to a server that declares the extension goes out with
//! the extension declared in the request's `_meta` (next to the
//! capabilities its session declared), so a tool that requires a task
//! works from code, and one that only may make one makes it: the server
//! decides, as the 2026-07-28 tasks extension leaves it (tools declare no
//! task support of their own). When the server answers with a task
//! handle, the bridge polls `tasks/get` at the server's `pollIntervalMs`
//! (held between [`MIN_POLL`] and [`MAX_POLL`]) and gives the cell what the
//! task ends in, as the call's outcome:
//!
//! - `completed`: its result, as if the call had returned it (a tool error,
//!   `isError`, stays one);
//! - `failed`: a refusal carrying the server's JSON-RPC error (code and
//!   message); `cancelled` by the server: a refusal saying so;
//! - `input_required`: each of its `inputRequests` (sampling, elicitation,
//!   roots) is asked through the path a server's question during a call
//!   takes ([`Bridge::relay_ask`]: the client's capability, the server's
//!   policy `sampling`/`elicitation`/`roots` rules, the private-data rule,
//!   one audit record each), and the answers go back in one `tasks/update`;
//!   a question refused or unanswered cancels the task and the call is
//!   refused saying why.
//!
//! The whole wait is the call's: within its timeout (the call timeout, and
//! with a client that can be asked the approval timeout on top), ended by
//! the cell's cancel. Either sends `tasks/cancel` to the server. The call
//! is one audit record (the tool's, with the task's final result); the
//! polls and the cancel are not recorded apart.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{AskKind, ClientLink, ToolCall};
use rmcp::model::{CancelTaskParams, GetTaskParams, RequestMetaObject, UpdateTaskParams};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::CallError;
use crate::relay::{Owner, Question};

/// The shortest wait between two polls, whatever the server asks.
pub(crate) const MIN_POLL: Duration = Duration::from_millis(100);
/// The longest wait between two polls, whatever the server asks.
pub(crate) const MAX_POLL: Duration = Duration::from_secs(5);
/// The wait between polls when the server names none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// How long telling the server that its task is cancelled may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the server on `peer` declared the tasks extension.
pub(crate) fn offers_tasks(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|info| info.capabilities.supports_tasks())
}

/// The link a cell's call declares to its server: what its session
/// declared (the client's own session: the client's link; the shared one:
/// every question), the tasks extension added.
pub(crate) fn cell_link(link: Option<&ClientLink>, own_session: bool) -> ClientLink {
    let mut link = match (link, own_session) {
        (Some(link), true) => link.clone(),
        _ => ClientLink { sampling: true, elicitation: true, elicitation_url: true, roots: true, ..Default::default() },
    };
    link.tasks = true;
    link
}

/// The wait between polls a task (or its handle) asks for, held within
/// [`MIN_POLL`] and [`MAX_POLL`].
fn poll_interval(task: &Value) -> Duration {
    match task.get("pollIntervalMs").and_then(Value::as_u64) {
        Some(ms) => Duration::from_millis(ms).clamp(MIN_POLL, MAX_POLL),
        None => DEFAULT_POLL,
    }
}

/// How a wait for a task ended before the task did.
enum Stop {
    Timeout,
    Cancelled,
}

/// One task of a server being waited for on a cell's behalf.
pub(crate) struct CellTask<'a> {
    /// The session the task was made on.
    pub(crate) peer: &'a Peer<RoleClient>,
    /// The `_meta` of the creating request (the extension declared), sent
    /// on each request about the task.
    pub(crate) meta: RequestMetaObject,
    /// The server's index.
    pub(crate) server: usize,
    /// The cell's call.
    pub(crate) call: &'a ToolCall,
    /// The call's window ends here.
    pub(crate) deadline: Instant,
    /// The call's whole window, for the timeout's message.
    pub(crate) timeout: Duration,
    /// Fires when the cell is cancelled.
    pub(crate) cancel: CancellationToken,
}

impl crate::Bridge {
    /// Wait for the task the server answered the cell's call with
    /// (`created`, its handle) and give what it ended in (see the module
    /// doc). A wait cut by the call's timeout or the cell's cancel tells
    /// the server `tasks/cancel`.
    pub(crate) async fn await_cell_task(&self, task: CellTask<'_>, created: &Value) -> Result<Value, CallError> {
        let Some(id) = created.get("taskId").and_then(Value::as_str) else {
            return Err(CallError::Service(ServiceError::UnexpectedResponse));
        };
        let server = self.server_name(task.server);
        tracing::info!(task = %id, %server, cell = %task.call.cell_id, "a cell's call became a task of the server: waiting for it");
        let outcome = self.follow(&task, id, poll_interval(created)).await;
        let stop = match outcome {
            Ok(done) => return done,
            Err(stop) => stop,
        };
        let reason = match stop {
            Stop::Timeout => "the gateway's call timeout passed",
            Stop::Cancelled => "the cell was cancelled",
        };
        tracing::info!(task = %id, %server, cell = %task.call.cell_id, "cancelling the server's task: {reason}");
        cancel_at_server(&task, id).await;
        Err(match stop {
            Stop::Timeout => CallError::Timeout(task.timeout),
            Stop::Cancelled => {
                CallError::Service(ServiceError::Cancelled { reason: Some("cancelled by the client".into()) })
            }
        })
    }

    /// Poll task `id` until it ends (`Ok`), or the wait stops first.
    async fn follow(
        &self,
        task: &CellTask<'_>,
        id: &str,
        mut poll: Duration,
    ) -> Result<Result<Value, CallError>, Stop> {
        let mut asked = HashSet::new();
        loop {
            within(task, tokio::time::sleep(poll)).await?;
            let mut params = GetTaskParams::new(id);
            params.meta = Some(task.meta.clone());
            let got = match within(task, task.peer.get_task(params)).await? {
                Ok(got) => got,
                Err(e) => return Ok(Err(CallError::Service(e))),
            };
            let Ok(got) = serde_json::to_value(&got) else {
                return Ok(Err(CallError::Service(ServiceError::UnexpectedResponse)));
            };
            poll = poll_interval(&got);
            match got.get("status").and_then(Value::as_str).unwrap_or_default() {
                "working" => {}
                "input_required" => {
                    let answers = match self.ask_inputs(task, &got, &mut asked).await? {
                        Ok(answers) => answers,
                        Err(why) => {
                            cancel_at_server(task, id).await;
                            return Ok(Err(CallError::Task(why)));
                        }
                    };
                    if !answers.is_empty() {
                        let mut params = UpdateTaskParams::new(id, answers);
                        params.meta = Some(task.meta.clone());
                        if let Err(e) = within(task, task.peer.update_task(params)).await? {
                            return Ok(Err(CallError::Service(e)));
                        }
                        // The server takes the answers up at once.
                        poll = MIN_POLL;
                    }
                }
                "completed" => {
                    return Ok(match got.get("result") {
                        Some(result @ Value::Object(_)) => Ok(result.clone()),
                        _ => Err(CallError::Service(ServiceError::UnexpectedResponse)),
                    });
                }
                "failed" => {
                    let error = got.get("error").cloned().unwrap_or_default();
                    let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
                    let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
                    return Ok(Err(CallError::Task(format!("the server's task failed (error {code}): {message}"))));
                }
                "cancelled" => return Ok(Err(CallError::Task("the server cancelled its task".into()))),
                other => {
                    let other = crate::stubs::cut_chars(other, 40);
                    return Ok(Err(CallError::Task(format!("the server's task has an unknown status {other:?}"))));
                }
            }
        }
    }

    /// Ask the cell's client, through the checks of any server question,
    /// each of the task's `inputRequests` not asked yet; the answers by
    /// their keys, or (inner `Err`) why one got none.
    async fn ask_inputs(
        &self,
        task: &CellTask<'_>,
        got: &Value,
        asked: &mut HashSet<String>,
    ) -> Result<Result<BTreeMap<String, Value>, String>, Stop> {
        let call = task.call;
        let owner = Arc::new(Owner {
            asker: call.asker.clone().unwrap_or_else(|| call.session.clone()),
            session: call.session.clone(),
            identity: call.identity.clone(),
            link: call.link.clone().unwrap_or_default(),
        });
        let mut answers = BTreeMap::new();
        let Some(Value::Object(requests)) = got.get("inputRequests") else { return Ok(Ok(answers)) };
        for (key, request) in requests {
            if asked.contains(key) {
                continue;
            }
            let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
            let kind = match method {
                "sampling/createMessage" => AskKind::Sampling,
                "elicitation/create" => AskKind::Elicitation,
                "roots/list" => AskKind::Roots,
                other => {
                    let other = crate::stubs::cut_chars(other, 60);
                    return Ok(Err(format!("the server's task asked for {other:?}, which code-mode does not relay")));
                }
            };
            let question = Question {
                owner: owner.clone(),
                call_id: Some(call.cell_id.clone()),
                server: task.server,
                kind,
                params: request.get("params").cloned().unwrap_or_default(),
                withdrawn: task.cancel.child_token(),
            };
            match within(task, self.relay_ask(&question)).await? {
                Ok(answer) => {
                    asked.insert(key.clone());
                    answers.insert(key.clone(), answer);
                }
                Err(unanswered) => {
                    let why = crate::wire::question_error(unanswered).message;
                    return Ok(Err(format!("the server's task asked {method}, which got no answer: {why}")));
                }
            }
        }
        Ok(Ok(answers))
    }
}

/// Run `work` within the call's window and until the cell's cancel.
async fn within<T>(task: &CellTask<'_>, work: impl std::future::Future<Output = T>) -> Result<T, Stop> {
    tokio::select! {
        done = work => Ok(done),
        () = tokio::time::sleep_until(task.deadline) => Err(Stop::Timeout),
        () = task.cancel.cancelled() => Err(Stop::Cancelled),
    }
}

/// Tell the server that task `id` is cancelled (bounded; a failure is
/// only logged: the call has ended either way).
async fn cancel_at_server(task: &CellTask<'_>, id: &str) {
    let mut params = CancelTaskParams::new(id);
    params.meta = Some(task.meta.clone());
    match tokio::time::timeout(CANCEL_TIMEOUT, task.peer.cancel_task(params)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::info!(task = %id, error = %e, "the server refused to cancel its task"),
        Err(_) => tracing::info!(task = %id, "the server did not acknowledge the cancel of its task in time"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_is_the_servers_held_within_bounds_and_a_second_when_it_names_none() {
        assert_eq!(poll_interval(&serde_json::json!({"pollIntervalMs": 200})), Duration::from_millis(200));
        assert_eq!(poll_interval(&serde_json::json!({"pollIntervalMs": 1})), MIN_POLL);
        assert_eq!(poll_interval(&serde_json::json!({"pollIntervalMs": 3_600_000})), MAX_POLL);
        assert_eq!(poll_interval(&serde_json::json!({})), DEFAULT_POLL);
    }

    #[test]
    fn a_cells_call_declares_what_its_session_declared_and_the_tasks_extension() {
        let client = ClientLink { elicitation: true, ..Default::default() };
        let own = cell_link(Some(&client), true);
        assert!(own.tasks && own.elicitation && !own.sampling && !own.roots);
        let shared = cell_link(Some(&client), false);
        assert!(shared.tasks && shared.sampling && shared.roots && shared.elicitation);
        assert!(cell_link(None, false).tasks);
    }
}
