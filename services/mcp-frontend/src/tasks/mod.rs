//! `run_python` as an MCP task (the Tasks extension, SEP-2663): a client
//! that declared the extension gets a task handle at once for its
//! `run_python` call; the cell runs on with no request held open, up to
//! `--task-deadline`, and the client polls `tasks/get`, or stops it with
//! `tasks/cancel`.
//!
//! The task's record (its [`DetailedTask`], the cell it runs, when a
//! finished task is forgotten) lives in the state store ([`SessionStore`]:
//! memory in one process, JetStream over NATS when the services run apart),
//! under its owner's scope: a key made from the identity that created it,
//! so another identity's lookup of the same id finds nothing and answers
//! "not found", as an unknown id does. A finished task's result is kept
//! for `--task-ttl` after it finished, then gone.
//!
//! This module owns the book of tasks (the records, and the stops of the
//! cells this process runs); [`run`] drives one task's cell to its record;
//! [`adopt`] settles a task whose driving frontend went silent, from the
//! report its runner kept, or follows its cell until there is one.

pub(crate) mod adopt;
pub(crate) mod asking;
pub(crate) mod idempotency;
pub(crate) mod run;

pub(crate) use adopt::Follow;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_mode_core::state::{SessionStore, StateError};
use rmcp::model::{DetailedTask, InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use sha2::Digest;
use tokio_util::sync::CancellationToken;

use crate::auth::Identity;

/// The longest a task's cell may run by default (`--task-deadline`).
pub const DEFAULT_TASK_DEADLINE: Duration = Duration::from_secs(3600);
/// The most `--task-deadline` may be: the sandbox-runner's own bound on a
/// cell's deadline.
pub const MAX_TASK_DEADLINE: Duration = Duration::from_secs(86_400);
/// How long a finished task's result is kept by default (`--task-ttl`).
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// How long a running task's record may go unwritten before its driver
/// counts as gone (it writes every 2 s).
pub const STALE: Duration = Duration::from_secs(20);
/// How often a client should poll, as the task says.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The name of a task's record in its owner's scope.
fn record_name(task_id: &str) -> String {
    format!("task.{task_id}")
}

/// The store scope of the tasks of `identity` (`None`: a client without
/// one, as over stdio): a digest, so any identity's name fits a key and
/// no two identities share a scope.
pub(crate) fn scope_of(identity: Option<&Identity>) -> String {
    let name = identity.map(Identity::as_str).unwrap_or("");
    let digest = sha2::Sha256::digest(format!("code-mode task owner\0{name}").as_bytes());
    format!("tasks-{}", &hex::encode(digest)[..40])
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// What the store keeps of one task.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The task as `tasks/get` answers it.
    pub task: DetailedTask,
    /// The cell it runs (a cancel from any replica names it).
    pub cell: String,
    /// When it was created (ms since the epoch).
    pub created_ms: u64,
    /// When a finished task is forgotten (ms since the epoch).
    pub expires_ms: Option<u64>,
    /// Its client asked `tasks/cancel` (perhaps through another replica).
    pub cancel_requested: bool,
    /// When the process driving it last wrote it (ms since the epoch).
    pub updated_ms: u64,
    /// The client's answers (`tasks/update`) to the task's input requests,
    /// not yet taken by the process driving it.
    pub answers: InputResponses,
    /// Its result hands back a kept container's handle (a stateless
    /// client's `--keep-variables` cell).
    pub handle: bool,
}

impl Record {
    fn to_value(&self) -> Value {
        json!({"task": self.task, "cell": self.cell, "created_ms": self.created_ms, "expires_ms": self.expires_ms,
               "cancel_requested": self.cancel_requested, "updated_ms": self.updated_ms, "answers": self.answers,
               "handle": self.handle})
    }

    fn from_value(value: Value) -> Result<Self, StateError> {
        let bad = |e: &dyn std::fmt::Display| StateError::Invalid(format!("a stored task is not readable: {e}"));
        let task = serde_json::from_value(value.get("task").cloned().unwrap_or(Value::Null)).map_err(|e| bad(&e))?;
        let cell = value.get("cell").and_then(Value::as_str).unwrap_or_default().to_string();
        let created_ms = value.get("created_ms").and_then(Value::as_u64).unwrap_or_default();
        let expires_ms = value.get("expires_ms").and_then(Value::as_u64);
        let cancel_requested = value.get("cancel_requested").and_then(Value::as_bool).unwrap_or_default();
        let updated_ms = value.get("updated_ms").and_then(Value::as_u64).unwrap_or(created_ms);
        let answers = value.get("answers").cloned().and_then(|a| serde_json::from_value(a).ok()).unwrap_or_default();
        let handle = value.get("handle").and_then(Value::as_bool).unwrap_or_default();
        Ok(Self { task, cell, created_ms, expires_ms, cancel_requested, updated_ms, answers, handle })
    }
}

/// Errors of the task book, each a JSON-RPC error to the client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// No task of this id is the caller's (unknown, expired, or another
    /// identity's: the same answer for all three).
    #[error("no task {0} is known to this caller")]
    NotFound(String),
    /// The state store could not keep or read the task.
    #[error("the task store cannot be used: {0}")]
    Store(#[from] StateError),
}

impl From<TaskError> for McpError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::NotFound(_) => McpError::invalid_params(e.to_string(), None),
            TaskError::Store(_) => McpError::internal_error(e.to_string(), None),
        }
    }
}

/// The tasks of one frontend process: where records are kept, and the
/// stops of the cells this process drives. Cheap to clone (a task this
/// process adopts is followed by a tokio task of its own).
#[derive(Debug, Clone)]
pub(crate) struct TaskBook {
    store: SessionStore,
    /// The cells of tasks this process drives, by task id.
    stops: Arc<Mutex<HashMap<String, CancellationToken>>>,
    /// Where the runners keep task cells' reports, and the bus to ask
    /// after a cell's lease (the services apart); `None` in one process.
    follow: Option<Follow>,
    /// How long a task's cell may run.
    pub deadline: Duration,
    /// How long a finished task is kept.
    pub ttl: Duration,
}

impl TaskBook {
    pub(crate) fn new(store: SessionStore, deadline: Duration, ttl: Duration) -> Self {
        Self { store, stops: Arc::default(), follow: None, deadline: deadline.min(MAX_TASK_DEADLINE), ttl }
    }

    /// This book, settling tasks whose driver is gone from the reports
    /// `follow` reads (`None`: such a task fails, its result lost).
    pub(crate) fn following(self, follow: Option<Follow>) -> Self {
        Self { follow, ..self }
    }

    /// Whether the runners keep task cells' reports for this book.
    pub(crate) fn keeps_reports(&self) -> bool {
        self.follow.is_some()
    }

    /// A new working task of `cell`, written to the store before its
    /// handle is returned (so `tasks/get` of it answers at once).
    pub(crate) async fn create(
        &self,
        scope: &str,
        cell: &str,
        handle: bool,
        stop: CancellationToken,
    ) -> Result<Task, TaskError> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = rmcp::task_manager::current_timestamp();
        let ttl = (self.deadline + self.ttl).as_millis() as u64;
        let task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now)
            .with_ttl_ms(ttl)
            .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64)
            .with_status_message("the cell is starting");
        let record = Record {
            task: DetailedTask::new(task.clone(), TaskPayload::Working),
            cell: cell.into(),
            created_ms: now_ms(),
            expires_ms: None,
            cancel_requested: false,
            updated_ms: now_ms(),
            answers: InputResponses::new(),
            handle,
        };
        self.store.create(scope, &record_name(&id), &record.to_value()).await?;
        code_mode_core::sync::lock(&self.stops).insert(id, stop);
        Ok(task)
    }

    /// The caller's task `id`, unless unknown or expired.
    pub(crate) async fn get(&self, scope: &str, id: &str) -> Result<Record, TaskError> {
        let not_found = || TaskError::NotFound(id.to_string());
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(not_found());
        }
        let entry = self.store.get(scope, &record_name(id)).await?.ok_or_else(not_found)?;
        let revision = entry.revision;
        let record = Record::from_value(entry.value)?;
        if record.expires_ms.is_some_and(|at| at <= now_ms()) {
            let _ = self.store.delete(scope, &record_name(id)).await;
            return Err(not_found());
        }
        // The process driving a running task writes it every few seconds;
        // one silent for STALE is gone (killed with its frontend): this
        // process settles it from its cell's kept report, or follows the
        // cell, or fails it saying why ([`adopt`]).
        let silent = now_ms().saturating_sub(record.updated_ms);
        if !record.task.status().is_terminal() && silent > STALE.as_millis() as u64 {
            return self.driver_silent(scope, id, record, revision, silent).await;
        }
        Ok(record)
    }

    /// Change the caller's task `id` with `change` unless it has finished
    /// (a finished task's record stays as it ended).
    pub(crate) async fn update(
        &self,
        scope: &str,
        id: &str,
        change: impl FnMut(&mut Record) + Send,
    ) -> Result<Record, TaskError> {
        self.change(scope, id, true, change).await
    }

    /// [`Self::update`]; `driver`: the process driving the task writes
    /// (which says it is alive), not a client's answer.
    async fn change(
        &self,
        scope: &str,
        id: &str,
        driver: bool,
        mut change: impl FnMut(&mut Record) + Send,
    ) -> Result<Record, TaskError> {
        let entry = self
            .store
            .update(scope, &record_name(id), |old| {
                let Some(old) = old else { return Value::Null };
                let Ok(mut record) = Record::from_value(old.clone()) else { return old };
                if record.task.status().is_terminal() {
                    return old;
                }
                change(&mut record);
                record.task.task.last_updated_at = rmcp::task_manager::current_timestamp();
                if driver {
                    record.updated_ms = now_ms();
                }
                record.to_value()
            })
            .await?;
        if entry.value.is_null() {
            return Err(TaskError::NotFound(id.to_string()));
        }
        Ok(Record::from_value(entry.value)?)
    }

    /// Settle the caller's task `id` with `payload` (kept for `--task-ttl`
    /// from now); the task's cell is no longer this process's to stop.
    pub(crate) async fn finish(
        &self,
        scope: &str,
        id: &str,
        payload: TaskPayload,
        message: String,
    ) -> Result<Record, TaskError> {
        code_mode_core::sync::lock(&self.stops).remove(id);
        let now = now_ms();
        let expires = now + self.ttl.as_millis() as u64;
        let ttl = self.ttl.as_millis() as u64;
        let record = self
            .update(scope, id, move |record| {
                let mut task = record.task.task.clone();
                task.status_message = Some(message.clone());
                // The time-to-live counts from creation: what it ran, and
                // the time it is kept after.
                task.ttl_ms = Some(now.saturating_sub(record.created_ms) + ttl);
                record.task = DetailedTask::new(task, payload.clone());
                record.expires_ms = Some(expires);
            })
            .await?;
        Ok(record)
    }

    /// Ask for the task `id` of the caller to stop: the record says so
    /// (the process driving it settles it as cancelled once its cell has
    /// stopped), and its cell's stop fires when this process drives it.
    /// Returns the cell to stop from here when another process drives it
    /// (`None`: stopped here, or already settled).
    pub(crate) async fn cancel(&self, scope: &str, id: &str) -> Result<Option<String>, TaskError> {
        let record = self.get(scope, id).await?;
        if record.task.status().is_terminal() {
            return Ok(None);
        }
        self.update(scope, id, |record| {
            record.cancel_requested = true;
            record.task.task.status_message = Some("cancelling: the cell is being stopped".into());
        })
        .await?;
        let stop = code_mode_core::sync::lock(&self.stops).get(id).cloned();
        match stop {
            Some(stop) => {
                stop.cancel();
                Ok(None)
            }
            None => Ok(Some(record.cell)),
        }
    }

    /// The questions the task's cell waits on (`requests`; none: it is
    /// working), written by its driver; the answers to `taken` (handed to
    /// their calls) and to questions no longer asked are dropped.
    pub(crate) async fn ask(
        &self,
        scope: &str,
        id: &str,
        requests: InputRequests,
        taken: &[String],
    ) -> Result<Record, TaskError> {
        self.update(scope, id, move |record| {
            record.answers.retain(|key, _| requests.contains_key(key) && !taken.contains(key));
            let payload = if requests.is_empty() {
                TaskPayload::Working
            } else {
                TaskPayload::InputRequired { input_requests: requests.clone() }
            };
            record.task = DetailedTask::new(record.task.task.clone(), payload);
        })
        .await
    }

    /// `tasks/update` of the caller's task `id`: the answers to its
    /// outstanding input requests are kept in its record for the process
    /// driving it (any replica may take the request); answers under keys it
    /// does not ask are ignored, as the extension says, and so is an
    /// update of a task that has settled.
    pub(crate) async fn answer(&self, scope: &str, id: &str, responses: InputResponses) -> Result<usize, TaskError> {
        let record = self.get(scope, id).await?;
        if record.task.status().is_terminal() {
            return Ok(0);
        }
        let mut kept = 0;
        self.change(scope, id, false, |record| {
            kept = 0;
            let TaskPayload::InputRequired { input_requests } = &record.task.payload else { return };
            for (key, value) in &responses {
                if input_requests.contains_key(key) {
                    record.answers.insert(key.clone(), value.clone());
                    kept += 1;
                }
            }
        })
        .await?;
        Ok(kept)
    }

    /// The store, for the task's driver.
    pub(crate) fn store(&self) -> &SessionStore {
        &self.store
    }
}

/// The JSON-RPC error object a failed task carries.
pub(crate) fn error_object(code: i32, message: &str) -> JsonObject {
    let mut error = JsonObject::new();
    error.insert("code".into(), json!(code));
    error.insert("message".into(), json!(message));
    error
}

/// Whether the request's client declared the Tasks extension (in its
/// session's capabilities or the request's own `_meta`).
pub(crate) fn wanted(context: &rmcp::service::RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|c| c.supports_tasks())
}
