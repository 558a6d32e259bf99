//! Each OAuth-authenticated caller's current access token, handed from
//! the frontend that checked it to the bridge that exchanges it (token
//! exchange, RFC 8693), without passing through a runner or a sandbox.
//!
//! The frontend's gate, once it verified a caller's token from its OAuth
//! issuer, writes it here ([`CallerTokens::remember`]): sealed
//! (XChaCha20-Poly1305 under the token key, the identity as associated
//! data, so a record copied to another identity's place does not open),
//! under a name derived from the identity, in the session-state store
//! (the same memory in one process; the JetStream bucket of the split
//! deployment). It writes only when the token changed, so a caller's
//! requests cost one write per new token. The bridge reads it when a call
//! of a token-exchange server needs an exchange ([`CallerTokens::current`]);
//! tool calls, cells and the runner carry only the identity's name.
//!
//! A caller who authenticated with a static token (`--auth-tokens`) has no
//! record: its calls of such a server are refused, saying why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use code_mode_core::state::SessionStore;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::error::VaultError;
use crate::key::Key;
use crate::spec::Secret;
use crate::vault::{open_bytes, seal_bytes};

/// The JetStream key-value bucket of callers' tokens when the services are
/// apart: the frontends write it, the bridges only read it
/// (`deploy/nats-server.conf`).
pub const BUCKET: &str = "codemode_caller_tokens";
/// How long an entry of [`BUCKET`] lives after it was written: longer than
/// any access token, so a stale one is gone the next day.
pub const BUCKET_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The session under which the state store keeps callers' tokens.
const STORE_SESSION: &str = "caller-tokens";
/// Identities whose last written token this process remembers (beyond:
/// forgotten, so a write is made again).
const REMEMBERED: usize = 10_000;

static DEFAULT: OnceLock<CallerTokens> = OnceLock::new();

/// Set where this process's bridge reads callers' tokens; once.
pub fn set_caller_tokens(tokens: CallerTokens) -> bool {
    DEFAULT.set(tokens).is_ok()
}

/// Where this process's bridge reads callers' tokens, if it was set.
pub fn caller_tokens() -> Option<CallerTokens> {
    DEFAULT.get().cloned()
}

/// Callers' current OAuth access tokens, sealed in the state store. Cheap
/// to clone.
#[derive(Clone)]
pub struct CallerTokens {
    store: SessionStore,
    key: Key,
    /// Per identity, the digest of the token last written by this process.
    written: Arc<Mutex<HashMap<String, [u8; 32]>>>,
}

impl std::fmt::Debug for CallerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerTokens").field("store", &self.store.backend_kind()).field("key", &self.key).finish()
    }
}

/// A caller's token as read back.
#[derive(Clone)]
pub struct CallerToken {
    /// The access token.
    pub token: Secret,
    /// Its `exp`, seconds since the epoch, when it has one.
    pub expires_at: Option<u64>,
}

impl std::fmt::Debug for CallerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerToken").field("expires_at", &self.expires_at).finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize)]
struct Record {
    identity: String,
    token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
}

impl CallerTokens {
    /// Tokens in `store`, sealed with `key`.
    pub fn new(store: SessionStore, key: Key) -> Self {
        Self { store, key, written: Arc::default() }
    }

    /// Tokens in `store` sealed with a random key of this process's own:
    /// for one process (`serve`), whose store lives and dies with it.
    pub fn ephemeral(store: SessionStore) -> Result<Self, VaultError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| VaultError::BadKey { source_name: "the system's random source".into(), why: e.to_string() })?;
        Ok(Self::new(store, Key { bytes, source: "this process's own key for callers' tokens".into() }))
    }

    /// Keep `token` as `identity`'s current one (the frontend, after its
    /// check passed). Written only when it differs from the last one this
    /// process wrote for the identity.
    pub async fn remember(&self, identity: &str, token: &str, expires_at: Option<u64>) -> Result<(), VaultError> {
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if code_mode_core::sync::lock(&self.written).get(identity) == Some(&digest) {
            return Ok(());
        }
        let record = Record { identity: identity.to_string(), token: token.to_string(), expires_at };
        let plain = serde_json::to_vec(&record).unwrap_or_default();
        let sealed = seal_bytes(&self.key, &aad(identity), &plain)?;
        self.store
            .update(STORE_SESSION, &record_name(identity), |_| sealed.clone())
            .await
            .map_err(|e| self.store_error(identity, e))?;
        let mut written = code_mode_core::sync::lock(&self.written);
        if written.len() >= REMEMBERED {
            written.clear();
        }
        written.insert(identity.to_string(), digest);
        Ok(())
    }

    /// `identity`'s current token, `None` when the frontend holds none
    /// (the caller did not authenticate by OAuth).
    pub async fn current(&self, identity: &str) -> Result<Option<CallerToken>, VaultError> {
        let name = record_name(identity);
        let Some(entry) = self.store.get(STORE_SESSION, &name).await.map_err(|e| self.store_error(identity, e))? else {
            return Ok(None);
        };
        let at = format!("the state store key {STORE_SESSION}.{name}");
        let plain = open_bytes(&self.key, &aad(identity), &entry.value, &at)?;
        let record: Record =
            serde_json::from_slice(&plain).map_err(|e| VaultError::Corrupt { at: at.clone(), why: e.to_string() })?;
        if record.identity != identity {
            return Err(VaultError::Corrupt { at, why: "the record is another identity's".into() });
        }
        Ok(Some(CallerToken { token: Secret::new(record.token), expires_at: record.expires_at }))
    }

    fn store_error(&self, identity: &str, e: code_mode_core::state::StateError) -> VaultError {
        VaultError::Store { key: format!("{STORE_SESSION}.{}", record_name(identity)), why: e.to_string() }
    }
}

fn aad(identity: &str) -> Vec<u8> {
    format!("code-mode caller token v1\n{identity}").into_bytes()
}

/// The record's name: a digest, so identities are not spelled out in keys.
fn record_name(identity: &str) -> String {
    format!("token-{}", hex::encode(&sha2::Sha256::digest(identity.as_bytes())[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_callers_token_reads_back_only_as_its_own_and_is_never_stored_in_the_clear() {
        let store = SessionStore::in_memory();
        let tokens = CallerTokens::ephemeral(store.clone()).unwrap();
        tokens.remember("alice", "ALICE-TOKEN", Some(99)).await.unwrap();
        let back = tokens.current("alice").await.unwrap().unwrap();
        assert_eq!((back.token.expose(), back.expires_at), ("ALICE-TOKEN", Some(99)));
        assert!(!format!("{back:?}").contains("ALICE"), "never shown");
        assert!(tokens.current("bob").await.unwrap().is_none(), "bob has none");
        let raw = store.get(STORE_SESSION, &record_name("alice")).await.unwrap().unwrap().value;
        assert!(!raw.to_string().contains("ALICE-TOKEN"), "sealed: {raw}");
        // alice's record at bob's place does not open as bob's.
        store.update(STORE_SESSION, &record_name("bob"), |_| raw.clone()).await.unwrap();
        assert!(matches!(tokens.current("bob").await, Err(VaultError::WrongKey { .. })));
        // The same token again is not written again; a new one is.
        let revision = store.get(STORE_SESSION, &record_name("alice")).await.unwrap().unwrap().revision;
        tokens.remember("alice", "ALICE-TOKEN", Some(99)).await.unwrap();
        assert_eq!(store.get(STORE_SESSION, &record_name("alice")).await.unwrap().unwrap().revision, revision);
        tokens.remember("alice", "ALICE-TOKEN-2", None).await.unwrap();
        assert_eq!(tokens.current("alice").await.unwrap().unwrap().token.expose(), "ALICE-TOKEN-2");
    }
}
