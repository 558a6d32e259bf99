//! The session-state store: small JSON values kept per session (the
//! private-data taint, rate-limit counters) that must outlive the process
//! that wrote them and stay exact under concurrent writers.
//!
//! One interface, [`SessionStore`] (a cheap `Clone` handle), over two
//! backends: in memory for the all-in-one `serve`, and a NATS JetStream
//! key-value bucket ([`DEFAULT_BUCKET`]) for the split deployment, where the
//! state survives a restart of the bridge (and of nats-server: the bucket is
//! on file storage) and every bridge replica sees the same values.
//!
//! Writes that must not be lost use compare-and-set on the entry's
//! revision; [`SessionStore::update`] retries a read-modify-write until it
//! wins. Every backend call is bounded by a timeout, so a store that cannot
//! be reached answers [`StateError::Unavailable`] quickly instead of
//! hanging. Callers must **fail closed** on every error: state that cannot be
//! read or written is never taken to be empty.
//!
//! This module owns the key layout (`<session>.<name>`, the session escaped
//! into a valid key token), the value encoding (JSON, at most
//! [`MAX_VALUE_BYTES`]) and the mapping of backend failures onto
//! [`StateError`]. It does not own any session's lifetime: nothing here
//! expires or removes a session's state except an explicit
//! [`SessionStore::delete`] (the bridge deletes an ended session's entries).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::kv;
use async_trait::async_trait;
use bytes::Bytes;
use code_mode_telemetry::StateResult;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::nats::NatsTransport;

/// The JetStream key-value bucket of the split deployment
/// (`deploy/nats-server.conf` grants the bridge user exactly this bucket).
pub const DEFAULT_BUCKET: &str = "codemode_sessions";

/// How long opening waits for a replicated bucket's leader.
const LEADER_WAIT: Duration = Duration::from_secs(10);

/// The default bound on one backend call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest value stored, as JSON text.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// The longest session id accepted (bytes, before escaping).
pub const MAX_SESSION_BYTES: usize = 128;

/// The longest state name accepted.
pub const MAX_NAME_BYTES: usize = 64;

/// The session id of the probe's key: no frontend makes such an id (they
/// are UUIDs), and the probe only reads, so even a session of that name
/// would lose nothing.
const PROBE_SESSION: &str = "-probe-";

/// How often a serving bridge probes the store by default.
pub const PROBE_EVERY: Duration = Duration::from_secs(10);

/// How many compare-and-set rounds [`SessionStore::update`] tries before it
/// gives up with [`StateError::Conflict`].
pub const MAX_UPDATE_ATTEMPTS: u32 = 64;

/// Errors of the session-state layer. Whatever the variant, a caller that
/// needed the state refuses what depended on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The backend could not be reached or did not answer in time (or
    /// refused the request). The state is unknown: fail closed. After a
    /// write that failed this way the write may or may not have happened.
    #[error("session state is unavailable, so the call is refused: {0}")]
    Unavailable(String),
    /// A compare-and-set lost: the entry is not at the expected revision
    /// (or, for `create`, already exists).
    #[error("session state changed concurrently: {0}")]
    Conflict(String),
    /// A session id, name or value the store does not accept, or a stored
    /// value that is not JSON.
    #[error("invalid session state: {0}")]
    Invalid(String),
}

/// One stored value and its revision (strictly increasing per store; a
/// compare-and-set names the revision it read).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// The revision that wrote it.
    pub revision: u64,
}

/// Settings of the JetStream backend.
#[derive(Debug, Clone)]
pub struct JetStreamConfig {
    /// The key-value bucket, created (file storage, history 1) if missing.
    pub bucket: String,
    /// Replicas of the bucket when it is created (1 for a single server,
    /// 3 in a cluster).
    pub replicas: usize,
    /// The bound on each call to JetStream.
    pub timeout: Duration,
    /// How long an entry is kept after it was written when the bucket is
    /// created (zero: until deleted).
    pub max_age: Duration,
}

impl Default for JetStreamConfig {
    fn default() -> Self {
        Self { bucket: DEFAULT_BUCKET.to_string(), replicas: 1, timeout: DEFAULT_TIMEOUT, max_age: Duration::ZERO }
    }
}

/// A raw entry as a backend returns it.
struct Raw {
    value: Bytes,
    revision: u64,
}

/// What a backend does; keys are already validated and encoded, values
/// already JSON.
#[async_trait]
trait Backend: Send + Sync + 'static {
    async fn get(&self, key: &str) -> Result<Option<Raw>, StateError>;
    async fn create(&self, key: &str, value: Bytes) -> Result<u64, StateError>;
    async fn compare_and_set(&self, key: &str, value: Bytes, expected: u64) -> Result<u64, StateError>;
    async fn delete(&self, key: &str) -> Result<(), StateError>;
}

/// The handle on a session-state store. Cheap to clone; clones share the
/// backend.
#[derive(Clone)]
pub struct SessionStore {
    backend: Arc<dyn Backend>,
    kind: &'static str,
    timeout: Duration,
}

impl fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionStore").field("backend", &self.kind).field("timeout", &self.timeout).finish()
    }
}

impl SessionStore {
    /// A store in this process's memory (all-in-one `serve`): gone when the
    /// process ends, shared by every clone of the handle.
    pub fn in_memory() -> Self {
        Self { backend: Arc::new(Memory::default()), kind: "memory", timeout: DEFAULT_TIMEOUT }
    }

    /// A store in a JetStream key-value bucket over `client`, opening the
    /// bucket or creating it when it does not exist yet. Fails with
    /// [`StateError::Unavailable`] when JetStream cannot be reached: each
    /// try is bounded by `config.timeout`; while the client is connected,
    /// tries go on for 10 s (a fresh cluster elects its JetStream leader
    /// meanwhile), and with NATS unreachable the first failure is final.
    pub async fn jetstream(client: async_nats::Client, config: JetStreamConfig) -> Result<Self, StateError> {
        let connection = client.clone();
        let mut context = jetstream::new(client);
        context.set_timeout(config.timeout);
        let open = || async {
            match context.get_key_value(config.bucket.as_str()).await {
                Ok(store) => Ok(store),
                Err(get_error) => {
                    let create = kv::Config {
                        bucket: config.bucket.clone(),
                        description: "code-mode per-session state".into(),
                        history: 1,
                        max_value_size: MAX_VALUE_BYTES as i32,
                        storage: jetstream::stream::StorageType::File,
                        num_replicas: config.replicas,
                        max_age: config.max_age,
                        ..Default::default()
                    };
                    match context.create_key_value(create).await {
                        Ok(store) => Ok(store),
                        // Another replica may have created it meanwhile.
                        Err(create_error) => context.get_key_value(config.bucket.as_str()).await.map_err(|_| {
                            StateError::Unavailable(format!(
                                "cannot open the key-value bucket {}: {get_error}; creating it: {create_error}",
                                config.bucket
                            ))
                        }),
                    }
                }
            }
        };
        // Services starting with a fresh NATS cluster ask before JetStream
        // has a meta leader; under load that takes longer than one request,
        // so keep asking (each try bounded) until LEADER_WAIT has passed.
        let give_up = tokio::time::Instant::now() + LEADER_WAIT;
        let store = loop {
            match bounded(config.timeout, "opening the key-value bucket", open()).await {
                Ok(store) => break store,
                // Only a connected client waits for a leader: with NATS
                // itself unreachable the answer is "unavailable" at once.
                Err(e)
                    if tokio::time::Instant::now() >= give_up
                        || connection.connection_state() != async_nats::connection::State::Connected =>
                {
                    return Err(e);
                }
                Err(e) => {
                    tracing::info!(error = %e, "the session-state bucket is not ready yet; trying again");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        };
        // A bucket just created with replicas answers only once it has a
        // leader: until then every call would fail closed.
        crate::nats::wait_for_stream_leader(&store.stream, LEADER_WAIT).await;
        Ok(Self { backend: Arc::new(JetStreamKv { store }), kind: "jetstream", timeout: config.timeout })
    }

    /// [`SessionStore::jetstream`] over the connection of a NATS bus
    /// transport.
    pub async fn over_nats(transport: &NatsTransport, config: JetStreamConfig) -> Result<Self, StateError> {
        Self::jetstream(transport.client().clone(), config).await
    }

    /// Read a key no session uses, only to learn whether the backend
    /// answers (counted like any call, so `codemode_state_store_up` follows
    /// it).
    pub async fn probe(&self) -> Result<(), StateError> {
        let key = encode_key(PROBE_SESSION, "reachable")?;
        bounded(self.timeout, "probing", self.backend.get(&key)).await.map(drop)
    }

    /// Probe the store every `every` until `cancel`, so that
    /// `codemode_state_store_up` says whether it answers even while no
    /// call needs it (a store lost while idle shows before the first call is
    /// refused).
    pub fn watch(&self, every: Duration, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = store.probe().await {
                    tracing::warn!(store = store.kind, error = %e, "the session-state store does not answer");
                }
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
            }
        })
    }

    /// `"memory"` or `"jetstream"`.
    pub fn backend_kind(&self) -> &'static str {
        self.kind
    }

    /// The value of `name` in `session`, `None` when it was never written
    /// (or was deleted).
    pub async fn get(&self, session: &str, name: &str) -> Result<Option<Entry>, StateError> {
        let key = encode_key(session, name)?;
        let raw = bounded(self.timeout, "reading", self.backend.get(&key)).await?;
        raw.map(|raw| decode(&key, raw)).transpose()
    }

    /// Write `name` in `session` only if it does not exist; returns the new
    /// revision, or [`StateError::Conflict`] when it exists.
    pub async fn create(&self, session: &str, name: &str, value: &Value) -> Result<u64, StateError> {
        let key = encode_key(session, name)?;
        let value = encode_value(value)?;
        bounded(self.timeout, "creating", self.backend.create(&key, value)).await
    }

    /// Write `name` in `session` only if it is still at `expected_revision`;
    /// returns the new revision, or [`StateError::Conflict`] when someone
    /// wrote (or deleted) it since.
    pub async fn compare_and_set(
        &self,
        session: &str,
        name: &str,
        value: &Value,
        expected_revision: u64,
    ) -> Result<u64, StateError> {
        let key = encode_key(session, name)?;
        let value = encode_value(value)?;
        bounded(self.timeout, "writing", self.backend.compare_and_set(&key, value, expected_revision)).await
    }

    /// Read `name`, compute the new value with `f` (given the current value,
    /// `None` if absent) and write it with compare-and-set; on a conflict,
    /// read again and retry, at most [`MAX_UPDATE_ATTEMPTS`] times. `f` may
    /// run several times. Returns what was written.
    pub async fn update<F>(&self, session: &str, name: &str, mut f: F) -> Result<Entry, StateError>
    where
        F: FnMut(Option<Value>) -> Value + Send,
    {
        let key = encode_key(session, name)?;
        for attempt in 1..=MAX_UPDATE_ATTEMPTS {
            let current = bounded(self.timeout, "reading", self.backend.get(&key)).await?;
            let current = current.map(|raw| decode(&key, raw)).transpose()?;
            let (old, expected) = match current {
                Some(entry) => (Some(entry.value), Some(entry.revision)),
                None => (None, None),
            };
            let value = f(old);
            let bytes = encode_value(&value)?;
            let written = match expected {
                Some(revision) => {
                    bounded(self.timeout, "writing", self.backend.compare_and_set(&key, bytes, revision)).await
                }
                None => bounded(self.timeout, "creating", self.backend.create(&key, bytes)).await,
            };
            match written {
                Ok(revision) => return Ok(Entry { value, revision }),
                Err(StateError::Conflict(_)) => tokio::time::sleep(backoff(attempt)).await,
                Err(other) => return Err(other),
            }
        }
        Err(StateError::Conflict(format!(
            "{key}: still changing under this update after {MAX_UPDATE_ATTEMPTS} attempts"
        )))
    }

    /// Remove `name` from `session` (no error when it is absent).
    pub async fn delete(&self, session: &str, name: &str) -> Result<(), StateError> {
        let key = encode_key(session, name)?;
        bounded(self.timeout, "deleting", self.backend.delete(&key)).await
    }
}

/// Run one backend call within `timeout`; running out is `Unavailable`.
/// Every backend call passes here, so this is where it is counted in
/// `codemode_state_store_operations_total` and where
/// `codemode_state_store_up` learns whether the store answers.
async fn bounded<T>(
    timeout: Duration,
    what: &str,
    call: impl Future<Output = Result<T, StateError>>,
) -> Result<T, StateError> {
    let result = match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(StateError::Unavailable(format!("{what} timed out after {timeout:?}"))),
    };
    code_mode_telemetry::state_store_call(match &result {
        Ok(_) => StateResult::Ok,
        Err(StateError::Conflict(_)) => StateResult::Conflict,
        Err(StateError::Invalid(_)) => StateResult::Invalid,
        Err(StateError::Unavailable(_)) => StateResult::Unavailable,
    });
    result
}

/// A short random pause after a lost compare-and-set, growing with the
/// attempt, so that writers contending for one key spread out.
fn backoff(attempt: u32) -> Duration {
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let ceiling_micros = 200 * u64::from(attempt.min(10));
    Duration::from_micros(random % ceiling_micros)
}

/// `<session>.<name>`: the session escaped into one key token (`[A-Za-z0-9-]`
/// kept, every other byte `_XX` in hex, so distinct sessions never share a
/// key), the name checked to be dot-separated `[A-Za-z0-9_-]` tokens.
fn encode_key(session: &str, name: &str) -> Result<String, StateError> {
    if session.is_empty() || session.len() > MAX_SESSION_BYTES {
        return Err(StateError::Invalid(format!(
            "a session id must have 1 to {MAX_SESSION_BYTES} bytes, not {}",
            session.len()
        )));
    }
    let name_ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .split('.')
            .all(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    if !name_ok {
        return Err(StateError::Invalid(format!(
            "state name {name:?} is not 1 to {MAX_NAME_BYTES} characters of dot-separated [A-Za-z0-9_-] tokens"
        )));
    }
    let mut key = String::with_capacity(session.len() * 3 + 1 + name.len());
    for byte in session.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            key.push(byte as char);
        } else {
            key.push_str(&format!("_{byte:02X}"));
        }
    }
    key.push('.');
    key.push_str(name);
    Ok(key)
}

fn encode_value(value: &Value) -> Result<Bytes, StateError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StateError::Invalid(format!("value not encodable: {e}")))?;
    if bytes.len() > MAX_VALUE_BYTES {
        return Err(StateError::Invalid(format!(
            "a value of {} bytes is over the limit of {MAX_VALUE_BYTES}",
            bytes.len()
        )));
    }
    Ok(Bytes::from(bytes))
}

fn decode(key: &str, raw: Raw) -> Result<Entry, StateError> {
    let value = serde_json::from_slice(&raw.value)
        .map_err(|e| StateError::Invalid(format!("the stored value of {key} is not JSON: {e}")))?;
    Ok(Entry { value, revision: raw.revision })
}

/// The in-memory backend: a map behind a `std::sync::Mutex` rather than an
/// actor task. Every operation is one short map access that never awaits
/// while holding the lock, so the lock cannot be held across a suspension
/// point or for long; a task and a channel would add a hop per call and
/// nothing else. Revisions come from one counter for the whole store, like
/// the sequence of a JetStream stream, so a deleted and re-created key never
/// reuses a revision.
#[derive(Default)]
struct Memory {
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    last_revision: u64,
    entries: HashMap<String, (Bytes, u64)>,
}

impl Memory {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        // A panic while holding the lock cannot leave the map half-written
        // (each operation is a single insert or remove), so keep going.
        crate::sync::lock(&self.inner)
    }
}

impl MemoryInner {
    fn write(&mut self, key: &str, value: Bytes) -> u64 {
        self.last_revision += 1;
        self.entries.insert(key.to_string(), (value, self.last_revision));
        self.last_revision
    }
}

// Each operation first yields to the runtime, as a remote store's does
// (a round trip): code that reads between another task's two writes meets
// the same interleavings in `serve` and in tests as over JetStream.
#[async_trait]
impl Backend for Memory {
    async fn get(&self, key: &str) -> Result<Option<Raw>, StateError> {
        tokio::task::yield_now().await;
        Ok(self.lock().entries.get(key).map(|(value, revision)| Raw { value: value.clone(), revision: *revision }))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<u64, StateError> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        if inner.entries.contains_key(key) {
            return Err(StateError::Conflict(format!("{key} already exists")));
        }
        Ok(inner.write(key, value))
    }

    async fn compare_and_set(&self, key: &str, value: Bytes, expected: u64) -> Result<u64, StateError> {
        tokio::task::yield_now().await;
        let mut inner = self.lock();
        match inner.entries.get(key) {
            Some((_, revision)) if *revision == expected => Ok(inner.write(key, value)),
            Some((_, revision)) => {
                Err(StateError::Conflict(format!("{key} is at revision {revision}, not {expected}")))
            }
            None => Err(StateError::Conflict(format!("{key} does not exist (expected revision {expected})"))),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StateError> {
        tokio::task::yield_now().await;
        self.lock().entries.remove(key);
        Ok(())
    }
}

/// The JetStream backend: one key-value bucket. The async-nats client
/// reconnects by itself; the `Store` handle stays valid across reconnects
/// and server restarts.
struct JetStreamKv {
    store: kv::Store,
}

fn unavailable(what: &str, key: &str, error: impl fmt::Display) -> StateError {
    StateError::Unavailable(format!("{what} {key}: {error}"))
}

#[async_trait]
impl Backend for JetStreamKv {
    async fn get(&self, key: &str) -> Result<Option<Raw>, StateError> {
        match self.store.entry(key).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                Ok(Some(Raw { value: entry.value, revision: entry.revision }))
            }
            // Never written, or its last operation was a delete or purge.
            Ok(_) => Ok(None),
            Err(e) if e.kind() == kv::EntryErrorKind::InvalidKey => Err(StateError::Invalid(format!("key {key}"))),
            Err(e) => Err(unavailable("reading", key, e)),
        }
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<u64, StateError> {
        // async-nats creates over a delete marker too (compare-and-set on
        // the marker's revision).
        self.store.create(key, value).await.map_err(|e| match e.kind() {
            kv::CreateErrorKind::AlreadyExists => StateError::Conflict(format!("{key} already exists")),
            kv::CreateErrorKind::InvalidKey => StateError::Invalid(format!("key {key}")),
            _ => unavailable("creating", key, e),
        })
    }

    async fn compare_and_set(&self, key: &str, value: Bytes, expected: u64) -> Result<u64, StateError> {
        self.store.update(key, value, expected).await.map_err(|e| match e.kind() {
            kv::UpdateErrorKind::WrongLastRevision => {
                StateError::Conflict(format!("{key} is not at revision {expected}"))
            }
            kv::UpdateErrorKind::InvalidKey => StateError::Invalid(format!("key {key}")),
            _ => unavailable("writing", key, e),
        })
    }

    async fn delete(&self, key: &str) -> Result<(), StateError> {
        self.store.delete(key).await.map_err(|e| match e.kind() {
            kv::UpdateErrorKind::InvalidKey => StateError::Invalid(format!("key {key}")),
            _ => unavailable("deleting", key, e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_escaped_into_one_token_and_never_collide() {
        assert_eq!(encode_key("6f1c-AB09", "taint").unwrap(), "6f1c-AB09.taint");
        let lookalikes = ["a.b", "a_2Eb", "a b", "a>b", "a*b", "a_b", "ä"];
        let keys: Vec<String> = lookalikes.iter().map(|s| encode_key(s, "n").unwrap()).collect();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(key.matches('.').count(), 1, "{key}");
            assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)), "{key}");
            assert!(!keys[..i].contains(key), "{key} collides");
        }
    }

    #[test]
    fn bad_names_and_sessions_are_invalid() {
        for name in ["", ".a", "a.", "a..b", "a b", "a>", "*", &"x".repeat(MAX_NAME_BYTES + 1)] {
            assert!(matches!(encode_key("s", name), Err(StateError::Invalid(_))), "{name:?}");
        }
        assert!(matches!(encode_key("", "n"), Err(StateError::Invalid(_))));
        assert!(matches!(encode_key(&"s".repeat(MAX_SESSION_BYTES + 1), "n"), Err(StateError::Invalid(_))));
        assert_eq!(encode_key("s", "rate.calls_per-min").unwrap(), "s.rate.calls_per-min");
    }
}
