//! Stateless scopes: where the state of an identity's stateless (MCP
//! 2026-07-28) calls lives, and how long it lasts.
//!
//! A stateless client has no session, so the frontend sends its cells and
//! direct calls under its identity's scope
//! ([`code_mode_proto::subjects::stateless_scope`]): the same id from every
//! frontend replica. Its private-data taint, `grant` counters and
//! direct-call count are kept under that scope in the session-state store,
//! so they hold across every stateless call of the identity, on every
//! frontend and bridge replica, exactly as a session's hold across its
//! calls.
//!
//! A session ends when its client goes (or, over HTTP, after rmcp's
//! keep-alive without a request); a scope ends after `idle` without a call
//! (`--stateless-idle`, never shorter than that keep-alive). The scope's
//! entry [`SCOPE`] holds a generation and when a call last used it; the
//! state of one generation lives under `<scope>~<generation>`. A call
//! resolves the scope to its generation just before the state is read or
//! written: when the last use is older than `idle`, the call moves the
//! scope to the next generation (one compare-and-set, so concurrent callers
//! agree on one generation) and the older generation's entries are
//! forgotten. Nothing a client sends moves a scope on: only time without
//! calls does.
//!
//! Writes are rare: a call only reads the entry, unless its last use is
//! older than `idle / 16`, so a busy scope costs one store read per call.
//! The last use is the wall clock's (bridge replicas must agree within a
//! small part of `idle`).
//!
//! Fails closed: an entry that cannot be read or written leaves the call
//! without a generation, and every check that needed the state refuses it.

use std::time::{Duration, SystemTime};

use code_mode_core::state::{SessionStore, StateError};
use code_mode_proto::subjects;
use serde_json::{Value, json};

/// The name of a scope's own entry: its generation and last use.
pub const SCOPE: &str = "scope";

/// A session id resolved for the state store: the session itself, or a
/// stateless scope's current generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Where the state of the call lives.
    pub key: String,
    /// The generation this call ended (its state is to be forgotten), when
    /// it moved the scope on.
    pub expired: Option<String>,
}

/// The stateless scopes of one bridge.
#[derive(Clone)]
pub struct Scopes {
    store: SessionStore,
    idle: Duration,
    clock: fn() -> u64,
}

impl std::fmt::Debug for Scopes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scopes").field("idle", &self.idle).finish_non_exhaustive()
    }
}

/// Milliseconds since the Unix epoch, by the wall clock.
fn wall_clock() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The key of one generation's state.
fn generation_key(scope: &str, generation: u64) -> String {
    format!("{scope}~{generation}")
}

/// The generation and last use of a stored scope entry.
fn read(value: &Value) -> Option<(u64, u64)> {
    Some((value.get("generation")?.as_u64()?, value.get("seen")?.as_u64()?))
}

impl Scopes {
    /// Scopes over `store` that end after `idle` without a call.
    pub fn new(store: SessionStore, idle: Duration) -> Self {
        Self { store, idle, clock: wall_clock }
    }

    /// The same with another clock (milliseconds since the epoch), for
    /// tests.
    pub fn with_clock(store: SessionStore, idle: Duration, clock: fn() -> u64) -> Self {
        Self { store, idle, clock }
    }

    /// How long a scope lasts without a call.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Where the state of a call of `session` lives now: `session` itself
    /// for a client session, the current generation for a stateless scope
    /// (moving it on when it was idle for too long).
    pub async fn resolve(&self, session: &str) -> Result<Resolved, StateError> {
        if !subjects::is_stateless_scope(session) {
            return Ok(Resolved { key: session.to_string(), expired: None });
        }
        let now = (self.clock)();
        let idle = self.idle.as_millis() as u64;
        if let Some(entry) = self.store.get(session, SCOPE).await? {
            let Some((generation, seen)) = read(&entry.value) else {
                return Err(StateError::Invalid(format!("the stateless scope {session} holds no generation")));
            };
            // Recently used: no write.
            if now.saturating_sub(seen) <= idle / 16 {
                return Ok(Resolved { key: generation_key(session, generation), expired: None });
            }
        }
        let mut before = None;
        let written = self
            .store
            .update(session, SCOPE, |old| {
                before = old.as_ref().and_then(read);
                match (old, before) {
                    (None, _) => json!({"generation": 1, "seen": now}),
                    (Some(_), Some((generation, seen))) if now.saturating_sub(seen) > idle => {
                        json!({"generation": generation + 1, "seen": now})
                    }
                    (Some(_), Some((generation, seen))) => json!({"generation": generation, "seen": seen.max(now)}),
                    // Unreadable: written back as it was, and refused below.
                    (Some(old), None) => old,
                }
            })
            .await?;
        let Some((generation, _)) = read(&written.value) else {
            return Err(StateError::Invalid(format!("the stateless scope {session} holds no generation")));
        };
        let expired = before.filter(|(old, _)| *old != generation).map(|(old, _)| generation_key(session, old));
        if expired.is_some() {
            tracing::info!(scope = session, generation, "a stateless scope was idle too long: its state starts anew");
        }
        Ok(Resolved { key: generation_key(session, generation), expired })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    static NOW: AtomicU64 = AtomicU64::new(1_000_000);

    fn clock() -> u64 {
        NOW.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_scope_keeps_its_generation_while_used_and_moves_on_only_after_idle_without_a_call() {
        let store = SessionStore::in_memory();
        let scopes = Scopes::with_clock(store.clone(), Duration::from_secs(300), clock);
        let scope = subjects::stateless_scope(Some("alice"));
        let first = scopes.resolve(&scope).await.unwrap();
        assert_eq!(first, Resolved { key: format!("{scope}~1"), expired: None });
        // Used every four minutes for an hour: never idle for five.
        for _ in 0..15 {
            NOW.fetch_add(240_000, Ordering::SeqCst);
            assert_eq!(scopes.resolve(&scope).await.unwrap().key, first.key);
        }
        NOW.fetch_add(300_001, Ordering::SeqCst);
        let next = scopes.resolve(&scope).await.unwrap();
        assert_eq!(next, Resolved { key: format!("{scope}~2"), expired: Some(first.key.clone()) });
        assert_eq!(scopes.resolve(&scope).await.unwrap(), Resolved { key: next.key, expired: None });
    }

    #[tokio::test]
    async fn a_client_session_is_its_own_key_and_never_touches_the_store() {
        let scopes = Scopes::new(SessionStore::in_memory(), Duration::from_secs(300));
        let resolved = scopes.resolve("6f1c0d3e-session").await.unwrap();
        assert_eq!(resolved, Resolved { key: "6f1c0d3e-session".into(), expired: None });
    }

    #[tokio::test]
    async fn concurrent_calls_after_a_long_idle_agree_on_one_new_generation() {
        let store = SessionStore::in_memory();
        let scope = subjects::stateless_scope(Some("bob"));
        store.create(&scope, SCOPE, &json!({"generation": 7, "seen": 0})).await.unwrap();
        let scopes = Scopes::new(store, Duration::from_secs(300));
        let all = futures::future::join_all((0..16).map(|_| scopes.resolve(&scope))).await;
        let keys: std::collections::HashSet<String> = all.iter().map(|r| r.as_ref().unwrap().key.clone()).collect();
        assert_eq!(keys, [format!("{scope}~8")].into(), "one generation for every caller");
        let ended = all.iter().filter(|r| r.as_ref().unwrap().expired.is_some()).count();
        assert_eq!(ended, 1, "exactly one caller moved the scope on");
    }

    #[tokio::test]
    async fn an_unreadable_scope_entry_fails_closed() {
        let store = SessionStore::in_memory();
        let scope = subjects::stateless_scope(None);
        store.create(&scope, SCOPE, &json!("garbage")).await.unwrap();
        let scopes = Scopes::new(store, Duration::from_secs(300));
        assert!(matches!(scopes.resolve(&scope).await, Err(StateError::Invalid(_))));
    }
}
