//! Idempotency keys: a `run_python` request whose `_meta` carries
//! [`META_KEY`] (a string of 1 to [`MAX_KEY_CHARS`] characters) that
//! matches one the same identity sent within `--task-ttl` gets that run's
//! result (or its task) instead of running again, so a client's retry does
//! not repeat the run's side effects.
//!
//! The key's entry lives in the state store beside the identity's tasks
//! (the key itself is kept only as a digest): first a claim while its run
//! goes on, then the run's result (a request) or its task id (a task). A
//! second request with the key waits for the first's result while it runs;
//! the same key with other code or other files in is refused; another identity's same key is
//! another entry and matches nothing. A run that ended without a result to
//! give again (a refusal, an input-required answer, a lost runner) drops
//! its claim: the next request with the key runs; so does a run its
//! client cancelled (it was stopped).

use std::time::Duration;

use rmcp::model::{CallToolResponse, CallToolResult, CreateTaskResult, TaskPayload};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use sha2::Digest;

use super::{TaskError, now_ms, scope_of};
use crate::session::CellKeep;
use crate::{CellOptions, Frontend, auth, wire};
use code_mode_core::state::StateError;
use code_mode_proto::{CellInput, ClientLink};

/// The `_meta` key of a request's idempotency key.
pub const META_KEY: &str = "io.code-mode/idempotency-key";
/// The longest key accepted.
pub const MAX_KEY_CHARS: usize = 255;
/// How often a request waiting for another's run with its key looks again.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// The request's idempotency key: `None` without one, an error for one
/// that is not a string of 1 to [`MAX_KEY_CHARS`] characters.
pub(crate) fn key_of(context: &RequestContext<RoleServer>) -> Result<Option<String>, McpError> {
    match context.meta.get(META_KEY) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(key)) if !key.is_empty() && key.chars().count() <= MAX_KEY_CHARS => Ok(Some(key.clone())),
        Some(_) => Err(McpError::invalid_params(
            format!("_meta.\"{META_KEY}\" must be a string of 1 to {MAX_KEY_CHARS} characters"),
            None,
        )),
    }
}

/// The entry's name: a digest of the key.
fn entry_name(key: &str) -> String {
    let digest = sha2::Sha256::digest(format!("code-mode idempotency key\0{key}").as_bytes());
    format!("idem.{}", &hex::encode(digest)[..40])
}

/// A digest of what the key names, the code and its files in, so the same
/// key with other code or other files is refused. Files name what they
/// are (a URI, a tool and its arguments, inline bytes), so the same URI
/// whose content changed meanwhile is the same request. Without files the
/// digest is the code's alone (as before files in existed).
fn request_digest(code: &str, inputs: &[CellInput]) -> String {
    let mut digest = sha2::Sha256::new();
    digest.update(code.as_bytes());
    if !inputs.is_empty() {
        // The entries' JSON, in order: serde writes a struct's fields in
        // their declared order and `arguments` as the client sent it.
        digest.update(b"\0files\0");
        digest.update(serde_json::to_vec(inputs).unwrap_or_default());
    }
    hex::encode(digest.finalize())
}

/// What the key's entry says.
enum Seen {
    /// Nobody holds the key: this request claimed it.
    Claimed(u64),
    /// A run with the key goes on (a plain request).
    Running,
    /// Its run's result.
    Result(CallToolResult),
    /// Its task.
    Task(String),
}

impl Frontend {
    /// Run `code` under the idempotency key `key`: the run this key names
    /// if the caller sent it within `--task-ttl` (its result, or its task),
    /// else a new run remembered under it.
    pub(crate) async fn run_keyed(
        &self,
        key: &str,
        code: String,
        inputs: Vec<CellInput>,
        keep: CellKeep,
        link: Option<ClientLink>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let scope = scope_of(auth::caller_of(context).and_then(|c| c.identity).as_ref());
        let name = entry_name(key);
        let digest = request_digest(&code, &inputs);
        let book = &self.shared.tasks;
        let wants_task = super::wanted(context);
        // A plain request waits at most a run's time for another's result.
        let give_up = tokio::time::Instant::now() + book.deadline + book.ttl;
        loop {
            let seen = self.seen(&scope, &name, &digest).await?;
            match seen {
                Seen::Claimed(revision) => {
                    return self.run_claimed(&scope, &name, revision, &digest, code, inputs, keep, link, context).await;
                }
                Seen::Result(result) => {
                    tracing::info!("run_python with a known idempotency key: its earlier result, not a new run");
                    return Ok(result.into());
                }
                Seen::Task(id) => match book.get(&scope, &id).await {
                    Ok(record) if wants_task => {
                        tracing::info!(task = %id, "run_python with a known idempotency key: its task, not a new run");
                        return Ok(CallToolResponse::Task(CreateTaskResult::new(record.task.task)));
                    }
                    Ok(record) if record.task.status().is_terminal() => return Ok(settled_answer(record.task.payload)),
                    Ok(_) => {}
                    // The task is gone (its --task-ttl passed): the key
                    // is free again.
                    Err(TaskError::NotFound(_)) => {
                        let _ = book.store().delete(&scope, &name).await;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                },
                Seen::Running => {}
            }
            if context.ct.is_cancelled() || tokio::time::Instant::now() >= give_up {
                return Err(McpError::invalid_request(
                    "a run with this idempotency key is still going on; ask again later",
                    None,
                ));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }

    /// Claim the key, or read what its entry says.
    async fn seen(&self, scope: &str, name: &str, digest: &str) -> Result<Seen, McpError> {
        let store = self.shared.tasks.store();
        let book = &self.shared.tasks;
        let claim = json!({"code": digest, "state": "running",
                           "expires_ms": now_ms() + (book.deadline + book.ttl).as_millis() as u64});
        let entry = match store.create(scope, name, &claim).await {
            Ok(revision) => return Ok(Seen::Claimed(revision)),
            Err(StateError::Conflict(_)) => match store.get(scope, name).await.map_err(TaskError::from)? {
                Some(entry) => entry,
                // Deleted meanwhile: claim again.
                None => return Ok(Seen::Running),
            },
            Err(e) => return Err(TaskError::from(e).into()),
        };
        let value = &entry.value;
        let expired = value.get("expires_ms").and_then(Value::as_u64).is_some_and(|at| at <= now_ms());
        if expired {
            return match store.compare_and_set(scope, name, &claim, entry.revision).await {
                Ok(revision) => Ok(Seen::Claimed(revision)),
                Err(StateError::Conflict(_)) => Ok(Seen::Running),
                Err(e) => Err(TaskError::from(e).into()),
            };
        }
        if value.get("code").and_then(Value::as_str) != Some(digest) {
            return Err(McpError::invalid_params(
                format!(
                    "this idempotency key was sent with other code or other files within --task-ttl; use a new key for a new run ({META_KEY})"
                ),
                None,
            ));
        }
        if let Some(id) = value.get("task").and_then(Value::as_str) {
            return Ok(Seen::Task(id.to_string()));
        }
        if let Some(result) = value.get("result") {
            let result = serde_json::from_value(result.clone())
                .map_err(|e| McpError::internal_error(format!("a remembered result is not readable: {e}"), None))?;
            return Ok(Seen::Result(result));
        }
        Ok(Seen::Running)
    }

    /// Run under a key this request claimed (at `revision`): as a task for
    /// a client that declared tasks (the entry names it), else on this
    /// request (the entry keeps its result).
    #[allow(clippy::too_many_arguments)] // One call site; the parts of one request.
    async fn run_claimed(
        &self,
        scope: &str,
        name: &str,
        revision: u64,
        digest: &str,
        code: String,
        inputs: Vec<CellInput>,
        keep: CellKeep,
        link: Option<ClientLink>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let book = &self.shared.tasks;
        let store = book.store();
        if super::wanted(context) {
            let answer = self.start_task(code, inputs, keep, link, context).await;
            let remembered = match &answer {
                Ok(CallToolResponse::Task(created)) => {
                    let entry = json!({"code": digest, "task": created.task.task_id,
                                       "expires_ms": now_ms() + (book.deadline + book.ttl).as_millis() as u64});
                    store.compare_and_set(scope, name, &entry, revision).await.map(drop)
                }
                _ => store.delete(scope, name).await,
            };
            if let Err(e) = remembered {
                tracing::warn!(error = %e, "an idempotency key's task could not be remembered");
            }
            return answer;
        }
        let run = self.start_cell_with(code, inputs, keep, link, CellOptions::default()).await;
        let answer = self.drive(run, context).await.tool_response();
        let remembered = match &answer {
            // A run its client cancelled was stopped: it has no result to
            // give again, and the retry runs.
            Ok(CallToolResponse::Complete(result)) if !context.ct.is_cancelled() => {
                let entry = json!({"code": digest, "result": result,
                                   "expires_ms": now_ms() + book.ttl.as_millis() as u64});
                store.compare_and_set(scope, name, &entry, revision).await.map(drop)
            }
            // Nothing to give again: the next request with the key runs.
            _ => store.delete(scope, name).await,
        };
        if let Err(e) = remembered {
            tracing::warn!(error = %e, "an idempotency key's result could not be remembered");
        }
        answer
    }
}

/// A settled task's payload as the answer of a plain request.
fn settled_answer(payload: TaskPayload) -> CallToolResponse {
    match payload {
        TaskPayload::Completed { result } => match serde_json::from_value::<CallToolResult>(Value::Object(result)) {
            Ok(result) => result.into(),
            Err(e) => wire::error_text(format!("run_python: the task's result is not readable: {e}")).into(),
        },
        TaskPayload::Failed { error } => {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("the task failed");
            wire::error_text(message.to_string()).into()
        }
        other => wire::error_text(format!("run_python: the run with this key was {:?}", other.status())).into(),
    }
}
