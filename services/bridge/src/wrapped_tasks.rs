//! Tasks of wrapped servers (the MCP tasks extension, SEP-2663) that a
//! client's direct tool call created: which server holds each and which
//! identity created it.
//!
//! A direct `tools/call` from a client that declared the extension goes to
//! its server with the extension in the request's `_meta`; a server that
//! answers with a task (`resultType: "task"`) has its task id bound here to
//! the server's name, the creating identity and the frontend session object
//! that asked, after the call passed every check and was audited as any. A
//! `tasks/get`, `tasks/update` or `tasks/cancel` then goes through the same
//! pipeline (audited, the private-data rule, sizes) to that server only,
//! and only for that identity: an id no bridge bound, or bound for another
//! identity (or, without authentication, `None` against a name), is refused
//! with the same words, so a foreign id cannot be told from an unknown one.
//!
//! A binding is kept twice: in this process's memory, and in the
//! session-state store ([`SessionStore`]: the same memory in one process,
//! the JetStream bucket `codemode_sessions` when the services run apart),
//! so that any bridge replica answers for any task. In the store the
//! bindings of [`SLOTS`] slots (by a digest of the task id) share one entry
//! each, under the store session [`STORE_SESSION`]; an identity is kept
//! only as a digest. A binding is forgotten after twice the task's `ttlMs`
//! (or a day when the server set none); a slot keeps at most [`PER_SLOT`]
//! (the oldest go first), so the store holds at most `SLOTS * PER_SLOT`
//! bindings whatever happens, and memory at most [`MAX_TASKS`].
//!
//! A store that cannot be written when a task is created does not take the
//! task from its client: the binding stays in this bridge's memory (this
//! bridge answers for it; another replica answers "there is no task"), and
//! a warning says so. A store that cannot be read when asked about an id
//! this bridge does not know refuses the request, naming the store.
//!
//! A server's status notification of a task (`notifications/tasks`, heard
//! on any of its sessions, by any replica) goes to the frontend session
//! object whose call created the task, and to no other; one of a task no
//! client was handed (a cell's, or unknown) is dropped.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_mode_core::state::{SessionStore, StateError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;

/// The most task ids one bridge remembers in its memory.
pub(crate) const MAX_TASKS: usize = 10_000;

/// How long an id is kept when its server named no TTL.
const NO_TTL_KEEP: Duration = Duration::from_secs(24 * 3600);

/// The store session holding the bindings (a client session's id is a
/// UUID or a stateless scope's digest, never this).
pub(crate) const STORE_SESSION: &str = "code-mode-wrapped-tasks";

/// How many store entries the bindings are spread over.
pub(crate) const SLOTS: usize = 256;

/// The most bindings one slot keeps.
pub(crate) const PER_SLOT: usize = 40;

/// A slot's JSON is kept under this size (the oldest go first), well
/// within the store's 64 KiB a value.
const SLOT_BYTES: usize = 48 * 1024;

/// Who created one task, and where it lives.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Binding {
    /// The wrapped server holding it (by name: indexes change on reload).
    server: String,
    /// A digest of the identity whose call created it ([`owner_digest`]).
    owner: String,
    /// The frontend session object whose call created it (its status
    /// notes go there).
    asker: String,
    /// Forgotten after this (ms since the Unix epoch).
    until: u64,
    /// When it was noted (ms since the Unix epoch; the oldest go first).
    noted: u64,
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Lower-case hex of the first `chars / 2` bytes of SHA-256 of `text`.
fn digest(text: &str, chars: usize) -> String {
    let sum = sha2::Sha256::digest(text.as_bytes());
    sum.iter().map(|b| format!("{b:02x}")).collect::<String>()[..chars].to_string()
}

/// The owner of a binding: a digest of the identity (`None`, no
/// authentication, is its own owner, distinct from every name).
fn owner_digest(identity: Option<&str>) -> String {
    match identity {
        Some(name) => digest(&format!("code-mode wrapped task owner\0named\0{name}"), 40),
        None => digest("code-mode wrapped task owner\0unnamed", 40),
    }
}

/// The store entry of task `id`'s slot, and its key within the slot.
fn slot_of(id: &str) -> (String, String) {
    let key = digest(&format!("code-mode wrapped task\0{id}"), 40);
    let slot = usize::from_str_radix(&key[..4], 16).unwrap_or(0) % SLOTS;
    (format!("slot.{slot}"), key)
}

/// The wrapped servers' task ids handed to clients: this bridge's own in
/// memory, every replica's in the store.
#[derive(Debug)]
pub(crate) struct WrappedTasks {
    owners: Mutex<HashMap<String, Binding>>,
    store: SessionStore,
}

impl WrappedTasks {
    pub(crate) fn new(store: SessionStore) -> Self {
        Self { owners: Mutex::default(), store }
    }

    /// Note the task a server's result created, if it is one: its id
    /// bound to `server` and `identity`, its notes for `asker`; in memory,
    /// then in the store (before the client is answered, so another
    /// replica knows the id as soon as the client does).
    pub(crate) async fn created(&self, server: &str, identity: Option<&str>, asker: &str, result: &Value) {
        if result.get("resultType").and_then(Value::as_str) != Some("task") {
            return;
        }
        let Some(id) = result.get("taskId").and_then(Value::as_str) else { return };
        let keep = match result.get("ttlMs").and_then(Value::as_u64) {
            Some(ttl) => Duration::from_millis(ttl.saturating_mul(2)),
            None => NO_TTL_KEEP,
        };
        let now = now_ms();
        let binding = Binding {
            server: server.to_string(),
            owner: owner_digest(identity),
            asker: asker.to_string(),
            until: now.saturating_add(keep.as_millis() as u64),
            noted: now,
        };
        {
            let mut owners = code_mode_core::sync::lock(&self.owners);
            owners.retain(|_, b| b.until > now);
            while owners.len() >= MAX_TASKS {
                let Some(oldest) = owners.iter().min_by_key(|(_, b)| b.noted).map(|(id, _)| id.clone()) else {
                    break;
                };
                owners.remove(&oldest);
            }
            owners.insert(id.to_string(), binding.clone());
        }
        match self.keep(id, binding).await {
            Ok(()) => tracing::info!(task = %id, %server, "a wrapped server created a task for a client"),
            Err(e) => tracing::warn!(
                task = %id, %server, error = %e,
                "a wrapped server created a task for a client, but the state store could not keep it: only this \
                 bridge answers for it (another replica answers \"there is no task\")"
            ),
        }
    }

    /// Write `binding` of task `id` into its slot, dropping the slot's
    /// expired bindings and, past [`PER_SLOT`] or [`SLOT_BYTES`], its
    /// oldest.
    async fn keep(&self, id: &str, binding: Binding) -> Result<(), StateError> {
        let (slot, key) = slot_of(id);
        self.store
            .update(STORE_SESSION, &slot, |old| {
                let mut bindings: HashMap<String, Binding> =
                    old.and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
                let now = now_ms();
                bindings.retain(|_, b| b.until > now);
                bindings.insert(key.clone(), binding.clone());
                loop {
                    let value = serde_json::to_value(&bindings).unwrap_or_default();
                    let size = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
                    if (bindings.len() <= PER_SLOT && size <= SLOT_BYTES) || bindings.len() <= 1 {
                        return value;
                    }
                    let oldest = bindings.iter().min_by_key(|(_, b)| b.noted).map(|(k, _)| k.clone());
                    if let Some(oldest) = oldest {
                        bindings.remove(&oldest);
                    }
                }
            })
            .await
            .map(|_| ())
    }

    /// Task `id`'s binding, from memory or else the store, unless expired.
    async fn binding(&self, id: &str) -> Result<Option<Binding>, StateError> {
        let now = now_ms();
        let local = code_mode_core::sync::lock(&self.owners).get(id).cloned();
        if let Some(binding) = local.filter(|b| b.until > now) {
            return Ok(Some(binding));
        }
        let (slot, key) = slot_of(id);
        let Some(entry) = self.store.get(STORE_SESSION, &slot).await? else { return Ok(None) };
        let mut bindings: HashMap<String, Binding> = serde_json::from_value(entry.value)
            .map_err(|e| StateError::Invalid(format!("a slot of wrapped servers' tasks is not readable: {e}")))?;
        Ok(bindings.remove(&key).filter(|b| b.until > now))
    }

    /// The server holding task `id`, when `identity` created it (`None`
    /// for an unknown, expired or foreign id alike).
    pub(crate) async fn server_of(&self, id: &str, identity: Option<&str>) -> Result<Option<String>, StateError> {
        let Some(binding) = self.binding(id).await? else { return Ok(None) };
        if binding.owner != owner_digest(identity) {
            tracing::info!(task = %id, "refused: a task id of another identity");
            return Ok(None);
        }
        Ok(Some(binding.server))
    }

    /// The frontend session object whose call created task `id` at
    /// `server`, if a client was handed it.
    pub(crate) async fn asker_of(&self, id: &str, server: &str) -> Option<String> {
        match self.binding(id).await {
            Ok(binding) => binding.filter(|b| b.server == server).map(|b| b.asker),
            Err(e) => {
                tracing::warn!(task = %id, %server, error = %e, "cannot read the state store: a task's status note is dropped");
                None
            }
        }
    }
}

impl crate::Bridge {
    /// Pass server `server`'s status note of a task to the client whose
    /// call created it (dropped when no client's call did).
    pub(crate) async fn relay_task_status(&self, server: usize, mut task: Value) {
        crate::task_inputs::strip_requests(&mut task);
        let name = self.server_name(server);
        let Some(id) = task.get("taskId").and_then(Value::as_str) else { return };
        let Some(asker) = self.inner.wrapped_tasks.asker_of(id, &name).await else {
            tracing::debug!(task = %id, server = %name, "a status note of no client's task: dropped");
            return;
        };
        self.tell_client(&asker, None, server, code_mode_proto::Note::TaskStatus { task }).await;
    }

    /// The index of the server holding task `id` in `current`, when
    /// `identity` created it and that server is still wrapped; `Err`: the
    /// refusal's words (the id is not the caller's, or the store cannot
    /// be read).
    pub(crate) async fn task_server(
        &self,
        current: &crate::current::Current,
        method: &str,
        id: &str,
        identity: Option<&str>,
    ) -> Result<usize, String> {
        let server = match self.inner.wrapped_tasks.server_of(id, identity).await {
            Ok(server) => server,
            Err(e) => {
                return Err(format!("{method}: the state store holding wrapped servers' tasks cannot be read: {e}"));
            }
        };
        server
            .and_then(|server| current.servers.iter().position(|s| s.name() == server))
            .ok_or_else(|| not_found(method, id))
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

    fn task(id: &str, ttl_ms: u64) -> Value {
        serde_json::json!({"resultType": "task", "taskId": id, "status": "working", "ttlMs": ttl_ms})
    }

    #[tokio::test]
    async fn a_task_id_answers_only_the_identity_that_created_it_and_a_foreign_one_reads_as_unknown() {
        let tasks = WrappedTasks::new(SessionStore::in_memory());
        tasks.created("jobs", Some("alice"), "session-a", &task("t-1", 60_000)).await;
        assert_eq!(tasks.server_of("t-1", Some("alice")).await.unwrap().as_deref(), Some("jobs"));
        assert_eq!(tasks.server_of("t-1", Some("mallory")).await.unwrap(), None);
        assert_eq!(tasks.server_of("t-1", None).await.unwrap(), None, "no identity is not alice");
        assert_eq!(tasks.server_of("t-2", Some("alice")).await.unwrap(), None);
        assert_eq!(tasks.asker_of("t-1", "jobs").await.as_deref(), Some("session-a"), "its notes go to its creator");
        assert_eq!(tasks.asker_of("t-1", "other").await, None, "another server's task of that id is no one's");
        let complete = serde_json::json!({"resultType": "complete", "content": []});
        tasks.created("jobs", Some("alice"), "session-a", &complete).await;
        assert_eq!(tasks.owners.lock().unwrap().len(), 1, "only a task result is noted");
    }

    #[tokio::test]
    async fn another_replica_sharing_the_store_answers_for_a_task_but_only_to_the_identity_that_created_it() {
        let store = SessionStore::in_memory();
        let (first, second) = (WrappedTasks::new(store.clone()), WrappedTasks::new(store));
        first.created("jobs", Some("alice"), "session-a", &task("t-1", 60_000)).await;
        first.created("jobs", None, "session-n", &task("t-2", 60_000)).await;
        assert_eq!(second.server_of("t-1", Some("alice")).await.unwrap().as_deref(), Some("jobs"));
        assert_eq!(second.server_of("t-1", Some("bob")).await.unwrap(), None);
        assert_eq!(second.server_of("t-1", None).await.unwrap(), None);
        assert_eq!(second.server_of("t-2", None).await.unwrap().as_deref(), Some("jobs"));
        assert_eq!(second.server_of("t-2", Some("alice")).await.unwrap(), None, "a name is not the unnamed");
        assert_eq!(second.asker_of("t-1", "jobs").await.as_deref(), Some("session-a"));
        // An expired binding answers nobody, here or there.
        first.created("jobs", Some("alice"), "session-a", &task("t-3", 0)).await;
        assert_eq!(second.server_of("t-3", Some("alice")).await.unwrap(), None);
        assert_eq!(first.server_of("t-3", Some("alice")).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_slot_of_the_store_keeps_at_most_its_share_of_bindings_dropping_the_oldest() {
        let store = SessionStore::in_memory();
        let (first, second) = (WrappedTasks::new(store.clone()), WrappedTasks::new(store.clone()));
        let slot = slot_of("t-0").0;
        let same: Vec<String> =
            (0..).map(|i| format!("t-{i}")).filter(|id| slot_of(id).0 == slot).take(PER_SLOT + 5).collect();
        for id in &same {
            first.created("jobs", Some("alice"), "session-a", &task(id, 60_000)).await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let kept = store.get(STORE_SESSION, &slot).await.unwrap().unwrap().value;
        assert_eq!(kept.as_object().unwrap().len(), PER_SLOT);
        assert_eq!(second.server_of(&same[0], Some("alice")).await.unwrap(), None, "the oldest went first");
        let newest = same.last().unwrap();
        assert_eq!(second.server_of(newest, Some("alice")).await.unwrap().as_deref(), Some("jobs"));
        assert_eq!(first.server_of(&same[0], Some("alice")).await.unwrap().as_deref(), Some("jobs"), "in memory");
    }
}
