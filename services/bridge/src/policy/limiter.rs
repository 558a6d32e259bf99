//! Counting calls against a policy's limits in the session-state store:
//! fixed windows, exact under concurrent bridges (compare-and-set), fail
//! closed (see the [parent module](super), "Rate limits in the store").

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_mode_core::state::{SessionStore, StateError};
use serde_json::{Value, json};

use super::*;

/// How many compare-and-set rounds [`RateLimiter::admit`] tries per limit
/// before it refuses the call as "changing concurrently".
const MAX_ADMIT_ATTEMPTS: u32 = 200;

/// Why [`RateLimiter::admit`] refused a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitRefusal {
    /// The window's calls are used up.
    #[error("rate limit {counter}: at most {max} calls per {window}; try again in {} s", retry_after.as_secs().max(1))]
    Exceeded {
        /// The counter.
        counter: String,
        /// Its max.
        max: u64,
        /// Its window.
        window: Window,
        /// Until the window ends.
        retry_after: Duration,
    },
    /// The counter could not be read or written.
    #[error("rate limit {counter}: session state {what}, so the call is refused (fail closed)")]
    State {
        /// The counter.
        counter: String,
        /// `unavailable`, `invalid` or `changing concurrently`.
        what: &'static str,
    },
}

/// Counts calls against the policy's limits in a [`SessionStore`]. Cheap to
/// clone; every bridge replica over the same store shares the counts.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    policy: Arc<Policy>,
    store: SessionStore,
}

impl RateLimiter {
    /// A limiter for `policy`'s limits over `store`.
    pub fn new(policy: Arc<Policy>, store: SessionStore) -> Self {
        Self { policy, store }
    }

    /// Admit one call of `tool` in `session` at time `now` (the caller's
    /// clock, so tests can move it): `Ok` when every limit of the tool's
    /// verdict has room, and then each has counted it. Only the limits are
    /// judged here: a denied or approval-only tool has none, so ask
    /// [`Policy::verdict`] first.
    pub async fn admit(&self, session: &str, tool: &str, now: SystemTime) -> Result<(), LimitRefusal> {
        self.admit_as(session, None, tool, now).await
    }

    /// [`RateLimiter::admit`] for a call of `identity` (who the client is,
    /// when the frontend authenticates clients), which `identity` limits
    /// count.
    pub async fn admit_as(
        &self,
        session: &str,
        identity: Option<&str>,
        tool: &str,
        now: SystemTime,
    ) -> Result<(), LimitRefusal> {
        let limits = match self.policy.verdict(tool) {
            Verdict::Limited { limits, .. } | Verdict::Approve { limits, .. } => limits,
            _ => return Ok(()),
        };
        for limit in &limits {
            self.count(session, identity, limit, now).await?;
        }
        Ok(())
    }

    async fn count(
        &self,
        session: &str,
        identity: Option<&str>,
        limit: &Limit,
        now: SystemTime,
    ) -> Result<(), LimitRefusal> {
        let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since_epoch.as_secs();
        let window = limit.window.secs();
        let start = secs - secs % window;
        let by_identity = identity_session(identity);
        let (owner, name) = match limit.scope {
            Scope::Grant => (session, grant_key(&limit.counter)),
            Scope::Global => (GLOBAL_SESSION, format!("global.rate.{}", limit.counter)),
            Scope::Identity => (by_identity.as_str(), format!("identity.rate.{}", limit.counter)),
        };
        let fail = |e: StateError| {
            tracing::warn!(session, counter = %limit.counter, error = %e, "rate limit refused: session state failed (fail closed)");
            let what = match e {
                StateError::Unavailable(_) => "unavailable",
                StateError::Invalid(_) => "invalid",
                StateError::Conflict(_) => "changing concurrently",
            };
            LimitRefusal::State { counter: limit.counter.clone(), what }
        };
        for attempt in 1..=MAX_ADMIT_ATTEMPTS {
            let current = self.store.get(owner, &name).await.map_err(fail)?;
            let (window_start, count, revision) = match &current {
                None => (start, 0, None),
                Some(entry) => {
                    let stored_start = entry.value.get("start").and_then(Value::as_u64);
                    let stored_count = entry.value.get("count").and_then(Value::as_u64);
                    let (Some(stored_start), Some(stored_count)) = (stored_start, stored_count) else {
                        return Err(fail(StateError::Invalid(format!("{name} holds {}", entry.value))));
                    };
                    // A window from a clock ahead of ours stays the current one.
                    if stored_start >= start {
                        (stored_start, stored_count, Some(entry.revision))
                    } else {
                        (start, 0, Some(entry.revision))
                    }
                }
            };
            if count >= limit.max {
                let ends = Duration::from_secs(window_start + window);
                return Err(LimitRefusal::Exceeded {
                    counter: limit.counter.clone(),
                    max: limit.max,
                    window: limit.window,
                    retry_after: ends.saturating_sub(since_epoch),
                });
            }
            let value = json!({"start": window_start, "count": count + 1});
            let written = match revision {
                Some(revision) => self.store.compare_and_set(owner, &name, &value, revision).await,
                None => self.store.create(owner, &name, &value).await,
            };
            match written {
                Ok(_) => return Ok(()),
                Err(StateError::Conflict(_)) => tokio::time::sleep(backoff(attempt)).await,
                Err(e) => return Err(fail(e)),
            }
        }
        Err(fail(StateError::Conflict(format!("{name}: still changing after {MAX_ADMIT_ATTEMPTS} attempts"))))
    }
}

/// The store key of a `grant` counter under its session.
pub fn grant_key(counter: &str) -> String {
    format!("rate.{counter}")
}

/// A short random pause after a lost compare-and-set.
fn backoff(attempt: u32) -> Duration {
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    Duration::from_micros(random % (300 * u64::from(attempt.min(10))))
}
