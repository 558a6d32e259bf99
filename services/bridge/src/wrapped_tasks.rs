//! Tasks of wrapped servers (the MCP tasks extension, SEP-2663) that a
//! client's direct tool call created: which server holds each and which
//! identity created it.
//!
//! A direct `tools/call` from a client that declared the extension goes to
//! its server with the extension in the request's `_meta`; a server that
//! answers with a task (`resultType: "task"`) has its task id noted here,
//! with the server's name, the creating identity and the tool, after the
//! call passed every check and was audited as any. A `tasks/get`,
//! `tasks/update` or `tasks/cancel` then goes through the same pipeline
//! (audited, the private-data rule, sizes) to that server only, and only
//! for that identity: an id this bridge did not note, or noted for another
//! identity (or, without authentication, `None` against a name), is refused
//! with the same words, so a foreign id cannot be told from an unknown one.
//! An id is forgotten after twice the task's `ttlMs` (or a day when the
//! server set none), and the oldest go first past [`MAX_TASKS`].
//!
//! A server's status notification of a task (`notifications/tasks`, heard
//! on any of its sessions) goes to the frontend session object whose call
//! created the task, and to no other; one of a task this bridge did not
//! hand out (a cell's, or unknown) is dropped.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most task ids one bridge remembers.
pub(crate) const MAX_TASKS: usize = 10_000;

/// How long an id is kept when its server named no TTL.
const NO_TTL_KEEP: Duration = Duration::from_secs(24 * 3600);

/// Who created one task, and where it lives.
#[derive(Debug, Clone)]
struct Owner {
    /// The wrapped server holding it (by name: indexes change on reload).
    server: String,
    /// The identity whose call created it (`None`: no authentication).
    identity: Option<String>,
    /// The frontend session object whose call created it (its status
    /// notes go there).
    asker: String,
    /// Forgotten after this.
    until: Instant,
    /// When it was noted (the oldest go first when full).
    noted: Instant,
}

/// The task ids of wrapped servers this bridge handed to clients.
#[derive(Debug, Default)]
pub(crate) struct WrappedTasks {
    owners: Mutex<HashMap<String, Owner>>,
}

impl WrappedTasks {
    /// Note the task a server's result created, if it is one: its id
    /// bound to `server` and `identity`, its notes for `asker`.
    pub(crate) fn created(&self, server: &str, identity: Option<&str>, asker: &str, result: &Value) {
        if result.get("resultType").and_then(Value::as_str) != Some("task") {
            return;
        }
        let Some(id) = result.get("taskId").and_then(Value::as_str) else { return };
        let keep = match result.get("ttlMs").and_then(Value::as_u64) {
            Some(ttl) => Duration::from_millis(ttl.saturating_mul(2)),
            None => NO_TTL_KEEP,
        };
        let now = Instant::now();
        let owner = Owner {
            server: server.to_string(),
            identity: identity.map(str::to_string),
            asker: asker.to_string(),
            until: now + keep,
            noted: now,
        };
        let mut owners = self.owners.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        owners.retain(|_, o| o.until > now);
        while owners.len() >= MAX_TASKS {
            let Some(oldest) = owners.iter().min_by_key(|(_, o)| o.noted).map(|(id, _)| id.clone()) else { break };
            owners.remove(&oldest);
        }
        tracing::info!(task = %id, %server, "a wrapped server created a task for a client");
        owners.insert(id.to_string(), owner);
    }

    /// The server holding task `id`, when `identity` created it.
    pub(crate) fn server_of(&self, id: &str, identity: Option<&str>) -> Option<String> {
        let owners = self.owners.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let owner = owners.get(id).filter(|o| o.until > Instant::now())?;
        if owner.identity.as_deref() != identity {
            tracing::info!(task = %id, "refused: a task id of another identity");
            return None;
        }
        Some(owner.server.clone())
    }
}

impl WrappedTasks {
    /// The frontend session object whose call created task `id` at
    /// `server`, if this bridge handed it out.
    pub(crate) fn asker_of(&self, id: &str, server: &str) -> Option<String> {
        let owners = self.owners.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let owner = owners.get(id).filter(|o| o.until > Instant::now() && o.server == server)?;
        Some(owner.asker.clone())
    }
}

impl crate::Bridge {
    /// Pass server `server`'s status note of a task to the client whose
    /// call created it (dropped when no client's call did).
    pub(crate) async fn relay_task_status(&self, server: usize, task: Value) {
        let name = self.server_name(server);
        let Some(id) = task.get("taskId").and_then(Value::as_str) else { return };
        let Some(asker) = self.inner.wrapped_tasks.asker_of(id, &name) else {
            tracing::debug!(task = %id, server = %name, "a status note of no client's task: dropped");
            return;
        };
        self.tell_client(&asker, None, server, code_mode_proto::Note::TaskStatus { task }).await;
    }

    /// The index of the server holding task `id` in `current`, when
    /// `identity` created it and that server is still wrapped.
    pub(crate) fn task_server(
        &self,
        current: &crate::current::Current,
        id: &str,
        identity: Option<&str>,
    ) -> Option<usize> {
        let server = self.inner.wrapped_tasks.server_of(id, identity)?;
        current.servers.iter().position(|s| s.name() == server)
    }
}

/// The refusal of a task request naming an id the caller has no task of
/// (unknown, expired, or another identity's: the same words for each).
pub(crate) fn not_found(method: &str, id: &str) -> String {
    let id = crate::stubs::cut_chars(id, 100);
    format!("{method}: there is no task {id:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_answers_only_the_identity_that_created_it_and_a_foreign_one_reads_as_unknown() {
        let tasks = WrappedTasks::default();
        let created = serde_json::json!({"resultType": "task", "taskId": "t-1", "status": "working", "ttlMs": 60000});
        tasks.created("jobs", Some("alice"), "session-a", &created);
        assert_eq!(tasks.server_of("t-1", Some("alice")).as_deref(), Some("jobs"));
        assert_eq!(tasks.server_of("t-1", Some("mallory")), None);
        assert_eq!(tasks.server_of("t-1", None), None, "no identity is not alice");
        assert_eq!(tasks.server_of("t-2", Some("alice")), None);
        assert_eq!(tasks.asker_of("t-1", "jobs").as_deref(), Some("session-a"), "its notes go to its creator");
        assert_eq!(tasks.asker_of("t-1", "other"), None, "another server's task of that id is no one's");
        let complete = serde_json::json!({"resultType": "complete", "content": []});
        tasks.created("jobs", Some("alice"), "session-a", &complete);
        assert_eq!(tasks.owners.lock().unwrap().len(), 1, "only a task result is noted");
    }
}
