//! The questions of a wrapped server's task handed to a client, judged on
//! their way to it (the MCP tasks extension, SEP-2663).
//!
//! A client's `tasks/get` of a task its direct call created
//! ([`crate::wrapped_tasks`]) may find the task `input_required`, its
//! `inputRequests` the server's questions (sampling, elicitation, roots).
//! Each is judged as a server's question during a direct call is (see
//! [`crate::questions`]): the client declared the capability, the server's
//! policy `sampling`/`elicitation`/`roots` rule, the private-data rule for
//! a sampling answer, one audit record each (per `tasks/get` that shows it).
//! An allowed one reaches the client unchanged. A refused one is taken out
//! of what the client sees, and the bridge answers it to the server itself
//! so the task is not left waiting: an elicitation is declined
//! (`{"action": "decline"}`, in a `tasks/update`), a roots request gets an
//! empty list (`{"roots": []}`, in a `tasks/update`); a sampling request,
//! which has no refusing answer, cancels the task (`tasks/cancel`), as a
//! refused question of a cell's task does ([`crate::cell_tasks`]). A
//! request of any other method is refused alike, by cancelling the task.
//! A task left with no request the client may see is shown `working`.
//!
//! A server's status note of a task (`notifications/tasks`) reaches the
//! client without its `inputRequests` ([`strip_requests`]): the client
//! gets them, judged, from `tasks/get`.

use std::collections::BTreeMap;

use code_mode_proto::{AskKind, Target as Asked, ToolCall};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::current::Current;
use crate::target::Target;
use crate::trail::Judged;

/// How the bridge answers a refused question of a task at its server.
enum Refusal {
    /// In one `tasks/update`, under the question's key.
    Answer(Value),
    /// By cancelling the task (no answer refuses it).
    Cancel,
}

/// The answer that refuses a question of `kind` in a `tasks/update`.
fn refusal(kind: Option<AskKind>) -> Refusal {
    match kind {
        Some(AskKind::Elicitation) => Refusal::Answer(json!({"action": "decline"})),
        Some(AskKind::Roots) => Refusal::Answer(json!({"roots": []})),
        Some(AskKind::Sampling) | None => Refusal::Cancel,
    }
}

/// The question's kind, by its method.
fn kind_of(request: &Value) -> Option<AskKind> {
    match request.get("method").and_then(Value::as_str) {
        Some("sampling/createMessage") => Some(AskKind::Sampling),
        Some("elicitation/create") => Some(AskKind::Elicitation),
        Some("roots/list") => Some(AskKind::Roots),
        _ => None,
    }
}

/// Whether the client behind `call` declared it answers `kind`.
fn declared(call: &ToolCall, kind: AskKind) -> Result<(), String> {
    let link = call.link.clone().unwrap_or_default();
    let declared = match kind {
        AskKind::Sampling => link.sampling,
        AskKind::Elicitation => link.elicitation || link.elicitation_url,
        AskKind::Roots => link.roots,
    };
    if declared { Ok(()) } else { Err(format!("{}: the client did not declare it", kind.method())) }
}

/// A server's status note of a task, without its `inputRequests`.
pub(crate) fn strip_requests(task: &mut Value) {
    if let Value::Object(map) = task {
        map.remove("inputRequests");
        if let Some(Value::Object(inner)) = map.get_mut("task") {
            inner.remove("inputRequests");
        }
    }
}

impl crate::Bridge {
    /// Judge the `inputRequests` of the task in `result`, the answer of
    /// server `server` to the client's `tasks/get` (see the module doc):
    /// the refused ones are taken out and answered at the server. `Err`:
    /// a question's audit record could not be written (the result is
    /// withheld).
    pub(crate) async fn judge_task_inputs(
        &self,
        current: &Current,
        server: usize,
        call: &ToolCall,
        result: &mut Value,
    ) -> Result<(), String> {
        let Asked::GetTask(id) = &call.target else { return Ok(()) };
        if result.get("status").and_then(Value::as_str) != Some("input_required") {
            return Ok(());
        }
        let Some(Value::Object(requests)) = result.get_mut("inputRequests") else { return Ok(()) };
        let mut answers = BTreeMap::new();
        let mut cancel = false;
        let keys: Vec<String> = requests.keys().cloned().collect();
        for key in keys {
            let request = &requests[&key];
            let kind = kind_of(request);
            let verdict = match kind {
                Some(kind) => self.judge_task_input(current, server, call, kind, request).await?,
                None => Err("a question code-mode does not relay".to_string()),
            };
            let Err(why) = verdict else { continue };
            let name = self.server_name(server);
            tracing::info!(task = %id, server = %name, %key, "a question of a client's task was refused: {why}");
            requests.remove(&key);
            match refusal(kind) {
                Refusal::Answer(answer) => {
                    answers.insert(key, answer);
                }
                Refusal::Cancel => cancel = true,
            }
        }
        let emptied = requests.is_empty();
        if cancel {
            self.answer_task(server, call, Asked::CancelTask(id.clone()), json!({})).await;
        } else if !answers.is_empty() {
            self.answer_task(server, call, Asked::UpdateTask(id.clone()), json!({"inputResponses": answers})).await;
        }
        if emptied && let Value::Object(map) = result {
            map.remove("inputRequests");
            map.insert("status".into(), Value::String("working".into()));
        }
        Ok(())
    }

    /// Judge one question of a task: the client's capability, the server's
    /// policy, the private-data rule; its audit record written. The outer
    /// `Err`: the record could not be written.
    async fn judge_task_input(
        &self,
        current: &Current,
        server: usize,
        call: &ToolCall,
        kind: AskKind,
        request: &Value,
    ) -> Result<Result<(), String>, String> {
        let params = request.get("params").cloned().unwrap_or_default();
        let judged = Judged::question(&call.session, call.identity.as_deref(), &call.cell_id, 0, kind, &params);
        let target = Target::Question { server, kind };
        let mut trail = self.question_trail(judged, &target);
        let verdict = match declared(call, kind) {
            Err(why) => {
                trail.refused("bridge:capability", &why);
                Err(why)
            }
            Ok(()) => self.judge_question(current, judged, &target, &mut trail).await,
        };
        if verdict.is_ok() {
            trail.went_out();
        }
        if let Err(e) = self.record_question(&trail, judged).await {
            return Err(format!("the gateway could not record the server's question: {e}"));
        }
        Ok(verdict)
    }

    /// Send the server `tasks/update` or `tasks/cancel` of the task, on
    /// the session the client's requests about it take; a failure is only
    /// logged (the client's next `tasks/get` shows where the task is).
    async fn answer_task(&self, server: usize, call: &ToolCall, target: Asked, arguments: Value) {
        let method = target.method();
        let mut params = arguments;
        if let (Value::Object(map), Some(id)) = (&mut params, target.task()) {
            map.insert("taskId".into(), Value::String(id.to_string()));
        }
        let call = ToolCall { target, ..call.clone() };
        let timeout = self.inner.limits.call_timeout;
        let sent = self.send(server, &call, params, timeout, CancellationToken::new(), true, None).await;
        if let Err(e) = sent {
            let name = self.server_name(server);
            tracing::warn!(server = %name, %method, error = %e, "the refusal of a task's question did not reach the server");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_elicitation_is_declined_roots_get_none_and_sampling_cancels_the_task() {
        assert!(matches!(refusal(Some(AskKind::Elicitation)), Refusal::Answer(a) if a == json!({"action": "decline"})));
        assert!(matches!(refusal(Some(AskKind::Roots)), Refusal::Answer(a) if a == json!({"roots": []})));
        assert!(matches!(refusal(Some(AskKind::Sampling)), Refusal::Cancel));
        assert!(matches!(refusal(None), Refusal::Cancel));
    }

    #[test]
    fn a_status_note_loses_its_input_requests() {
        let mut note = json!({"taskId": "t", "status": "input_required", "inputRequests": {"a": {}}});
        strip_requests(&mut note);
        assert_eq!(note, json!({"taskId": "t", "status": "input_required"}));
    }
}
