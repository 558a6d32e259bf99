//! Where grants live, encrypted: one record per remote server.
//!
//! Two places, one format. A single-process `serve` (and `login`) keep one
//! file per server in `<state dir>/upstream-tokens/` (folder 0700, files
//! 0600, written atomically); the split services keep them in the
//! session-state store over NATS (a JetStream key-value bucket, every
//! bridge replica reading the same record). A record is the grant as JSON
//! sealed with XChaCha20-Poly1305 under the token key ([`crate::key`]), a
//! fresh random 192-bit nonce each time, the server's URL as associated
//! data: a record copied to another server's place does not open, and a
//! wrong key is an error, never plaintext.
//!
//! Renewals are serialized per server across processes by [`Vault::lock`]
//! (a file lock, or a lease entry created with compare-and-set in the
//! store), so two holders never spend one refresh token twice.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use code_mode_core::state::{SessionStore, StateError};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::error::VaultError;
use crate::grant::Grant;
use crate::key::{Key, private_dir, write_private};

/// The session under which the state store keeps grants.
const STORE_SESSION: &str = "upstream-tokens";
/// How long a renewal may hold the lock before others may take it over.
const LEASE: Duration = Duration::from_secs(30);
/// How long waiting for another holder's renewal may take.
const LOCK_WAIT: Duration = Duration::from_secs(15);
/// The record format written.
const VERSION: u64 = 1;

/// The encrypted grants.
#[derive(Clone)]
pub struct Vault {
    backend: Backend,
    key: Option<Key>,
    key_file: PathBuf,
}

#[derive(Clone)]
enum Backend {
    Files(PathBuf),
    Store(SessionStore),
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match &self.backend {
            Backend::Files(dir) => dir.display().to_string(),
            Backend::Store(store) => format!("state store ({})", store.backend_kind()),
        };
        f.debug_struct("Vault").field("at", &place).field("key", &self.key).finish()
    }
}

impl Vault {
    /// Grants in files under `dir`, sealed with `key`.
    pub fn files(dir: impl Into<PathBuf>, key: Option<Key>) -> Self {
        Self { backend: Backend::Files(dir.into()), key, key_file: crate::key::key_file() }
    }

    /// Grants in the session-state store, sealed with `key`.
    pub fn in_store(store: SessionStore, key: Option<Key>) -> Self {
        Self { backend: Backend::Store(store), key, key_file: crate::key::key_file() }
    }

    /// The files of this user's state folder with the key of the
    /// environment (see [`crate::key`]).
    pub fn from_environment() -> Result<Self, VaultError> {
        Ok(Self::files(crate::key::state_dir().join("upstream-tokens"), Key::from_environment()?))
    }

    /// The same place with another key.
    pub fn with_key(mut self, key: Key) -> Self {
        self.key = Some(key);
        self
    }

    /// The key, if there is one.
    pub fn key(&self) -> Option<&Key> {
        self.key.as_ref()
    }

    /// The key file this vault's key is read from when no variable gives it.
    pub fn key_file(&self) -> &Path {
        &self.key_file
    }

    /// True when the grants are in files (a person's own machine).
    pub fn is_files(&self) -> bool {
        matches!(self.backend, Backend::Files(_))
    }

    /// Where `resource`'s record lives, for messages.
    pub fn place(&self, resource: &str) -> String {
        match &self.backend {
            Backend::Files(dir) => self.file(dir, resource).display().to_string(),
            Backend::Store(_) => format!("the state store key {STORE_SESSION}.{}", record_name(resource)),
        }
    }

    fn file(&self, dir: &Path, resource: &str) -> PathBuf {
        dir.join(format!("{}.json", digest(resource)))
    }

    /// The grant of `resource`, `None` when there is none.
    pub async fn load(&self, resource: &str) -> Result<Option<Grant>, VaultError> {
        self.load_for(resource, None).await
    }

    /// The grant of `resource` for `identity` (`None`: the deployment's
    /// one), `None` when there is none. An identity's record has a place
    /// and associated data of its own: it opens only as that identity's.
    pub async fn load_for(&self, resource: &str, identity: Option<&str>) -> Result<Option<Grant>, VaultError> {
        let resource = &scope(resource, identity);
        let record = match &self.backend {
            Backend::Files(dir) => {
                let path = self.file(dir, resource);
                match std::fs::read(&path) {
                    Ok(bytes) => Some(
                        serde_json::from_slice::<Value>(&bytes)
                            .map_err(|e| VaultError::Corrupt { at: path.display().to_string(), why: e.to_string() })?,
                    ),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(VaultError::File { path, doing: "read", why: e.to_string() }),
                }
            }
            Backend::Store(store) => store
                .get(STORE_SESSION, &record_name(resource))
                .await
                .map_err(|e| self.store_error(resource, e))?
                .map(|entry| entry.value),
        };
        record.map(|record| self.open(resource, &record)).transpose()
    }

    /// Store `grant` under its resource.
    pub async fn save(&self, grant: &Grant) -> Result<(), VaultError> {
        let resource = &scope(&grant.resource, grant.identity.as_deref());
        let record = self.seal(resource, grant)?;
        match &self.backend {
            Backend::Files(dir) => {
                private_dir(dir)?;
                let bytes = serde_json::to_vec(&record).unwrap_or_default();
                write_private(&self.file(dir, resource), &bytes, false)
            }
            Backend::Store(store) => store
                .update(STORE_SESSION, &record_name(resource), |_| record.clone())
                .await
                .map(|_| ())
                .map_err(|e| self.store_error(resource, e)),
        }
    }

    /// Forget `resource`'s grant; true when there was one.
    pub async fn delete(&self, resource: &str) -> Result<bool, VaultError> {
        self.delete_for(resource, None).await
    }

    /// Forget `identity`'s grant of `resource`; true when there was one.
    pub async fn delete_for(&self, resource: &str, identity: Option<&str>) -> Result<bool, VaultError> {
        let resource = &scope(resource, identity);
        match &self.backend {
            Backend::Files(dir) => {
                let path = self.file(dir, resource);
                match std::fs::remove_file(&path) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    Err(e) => Err(VaultError::File { path, doing: "removed", why: e.to_string() }),
                }
            }
            Backend::Store(store) => {
                let name = record_name(resource);
                let existed =
                    store.get(STORE_SESSION, &name).await.map_err(|e| self.store_error(resource, e))?.is_some();
                store.delete(STORE_SESSION, &name).await.map_err(|e| self.store_error(resource, e))?;
                Ok(existed)
            }
        }
    }

    /// Hold `resource`'s renewal lock until the guard drops: across
    /// processes (a file lock) or replicas (a lease in the store, taken
    /// over once [`LEASE`] passed). Waits at most [`LOCK_WAIT`].
    pub async fn lock(&self, resource: &str) -> Result<Guard, VaultError> {
        self.lock_for(resource, None).await
    }

    /// [`Vault::lock`] for `identity`'s grant of `resource`.
    pub async fn lock_for(&self, resource: &str, identity: Option<&str>) -> Result<Guard, VaultError> {
        let resource = &scope(resource, identity);
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        let busy = || VaultError::Busy { at: self.place(resource), secs: LOCK_WAIT.as_secs() };
        match &self.backend {
            Backend::Files(dir) => {
                private_dir(dir)?;
                let path = dir.join(format!("{}.lock", digest(resource)));
                let file = {
                    use std::os::unix::fs::OpenOptionsExt as _;
                    std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .write(true)
                        .mode(0o600)
                        .open(&path)
                        .map_err(|e| VaultError::File { path: path.clone(), doing: "locked", why: e.to_string() })?
                };
                loop {
                    match file.try_lock() {
                        Ok(()) => return Ok(Guard { _file: Some(file), lease: None }),
                        Err(std::fs::TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(50)).await
                        }
                        Err(std::fs::TryLockError::WouldBlock) => return Err(busy()),
                        Err(std::fs::TryLockError::Error(e)) => {
                            return Err(VaultError::File { path, doing: "locked", why: e.to_string() });
                        }
                    }
                }
            }
            Backend::Store(store) => {
                let name = format!("lock-{}", digest(resource));
                loop {
                    let now = crate::grant::now();
                    let lease = json!({"until": now + LEASE.as_secs()});
                    match store.create(STORE_SESSION, &name, &lease).await {
                        Ok(_) => return Ok(Guard { _file: None, lease: Some((store.clone(), name)) }),
                        Err(StateError::Conflict(_)) => {
                            // Held: take it over only once its holder's lease ran out.
                            if let Some(entry) =
                                store.get(STORE_SESSION, &name).await.map_err(|e| self.store_error(resource, e))?
                            {
                                let until = entry.value.get("until").and_then(Value::as_u64).unwrap_or(0);
                                if until < now
                                    && store.compare_and_set(STORE_SESSION, &name, &lease, entry.revision).await.is_ok()
                                {
                                    return Ok(Guard { _file: None, lease: Some((store.clone(), name)) });
                                }
                            }
                            if tokio::time::Instant::now() >= deadline {
                                return Err(busy());
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => return Err(self.store_error(resource, e)),
                    }
                }
            }
        }
    }

    fn store_error(&self, resource: &str, e: StateError) -> VaultError {
        VaultError::Store { key: format!("{STORE_SESSION}.{}", record_name(resource)), why: e.to_string() }
    }

    fn aad(resource: &str) -> Vec<u8> {
        format!("code-mode upstream grant v{VERSION}\n{resource}").into_bytes()
    }

    fn seal(&self, resource: &str, grant: &Grant) -> Result<Value, VaultError> {
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| VaultError::KeyMissing { at: self.place(resource), key_file: self.key_file.clone() })?;
        seal_bytes(key, &Self::aad(resource), &serde_json::to_vec(grant).unwrap_or_default())
    }

    fn open(&self, resource: &str, record: &Value) -> Result<Grant, VaultError> {
        let at = self.place(resource);
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| VaultError::KeyMissing { at: at.clone(), key_file: self.key_file.clone() })?;
        let plain = open_bytes(key, &Self::aad(resource), record, &at)?;
        let corrupt = |why: &str| VaultError::Corrupt { at: at.clone(), why: why.to_string() };
        let grant: Grant = serde_json::from_slice(&plain).map_err(|e| corrupt(&e.to_string()))?;
        if scope(&grant.resource, grant.identity.as_deref()) != resource {
            return Err(corrupt("the record is another server's"));
        }
        Ok(grant)
    }
}

/// `plain` sealed with XChaCha20-Poly1305 under `key`, a fresh random
/// nonce, `aad` as associated data: the record format of the vault (and
/// of the callers' tokens, [`crate::caller`]).
pub(crate) fn seal_bytes(key: &Key, aad: &[u8], plain: &[u8]) -> Result<Value, VaultError> {
    let cipher = XChaCha20Poly1305::new((&key.bytes).into());
    let mut nonce = [0u8; 24];
    getrandom::fill(&mut nonce)
        .map_err(|e| VaultError::BadKey { source_name: "the system's random source".into(), why: e.to_string() })?;
    let sealed = cipher
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad })
        .map_err(|_| VaultError::BadKey { source_name: key.source.clone(), why: "encryption failed".into() })?;
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(json!({"v": VERSION, "nonce": b64.encode(nonce), "sealed": b64.encode(sealed)}))
}

/// The plain bytes of a record [`seal_bytes`] made with `aad`; `at` names
/// it in errors. A wrong key or other associated data is
/// [`VaultError::WrongKey`], never plaintext.
pub(crate) fn open_bytes(key: &Key, aad: &[u8], record: &Value, at: &str) -> Result<Vec<u8>, VaultError> {
    let corrupt = |why: &str| VaultError::Corrupt { at: at.to_string(), why: why.to_string() };
    if record.get("v").and_then(Value::as_u64) != Some(VERSION) {
        return Err(corrupt("not a record of this version"));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let field = |name: &str| {
        record.get(name).and_then(Value::as_str).and_then(|s| b64.decode(s).ok()).ok_or_else(|| corrupt(name))
    };
    let (nonce, sealed) = (field("nonce")?, field("sealed")?);
    if nonce.len() != 24 {
        return Err(corrupt("nonce"));
    }
    let cipher = XChaCha20Poly1305::new((&key.bytes).into());
    cipher
        .decrypt(XNonce::from_slice(&nonce), Payload { msg: &sealed, aad })
        .map_err(|_| VaultError::WrongKey { at: at.to_string(), key: key.source.clone() })
}

/// Held while a renewal runs; dropping it lets the next holder in.
pub struct Guard {
    _file: Option<std::fs::File>,
    lease: Option<(SessionStore, String)>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some((store, name)) = self.lease.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = store.delete(STORE_SESSION, &name).await;
            });
        }
    }
}

/// What a record is keyed and sealed by: the server's URL, and for an
/// identity's own grant the identity too (the deployment's grant keeps
/// the URL alone, so records written before identities existed open).
fn scope(resource: &str, identity: Option<&str>) -> String {
    match identity {
        None => resource.to_string(),
        Some(identity) => format!("{resource}\nidentity={identity}"),
    }
}

/// The record's name for `resource`: a digest, so the URL is not spelled
/// out in file names or store keys.
fn digest(resource: &str) -> String {
    hex::encode(&sha2::Sha256::digest(resource.as_bytes())[..16])
}

fn record_name(resource: &str) -> String {
    format!("grant-{}", digest(resource))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::{GrantKind, Tokens};

    fn grant(resource: &str) -> Grant {
        Grant {
            resource: resource.into(),
            resource_indicator: resource.into(),
            kind: GrantKind::AuthorizationCode,
            issuer: Some("https://as.example".into()),
            metadata: Value::Null,
            client: None,
            tokens: Some(Tokens {
                access: "ACCESS-SECRET".into(),
                refresh: Some("REFRESH-SECRET".into()),
                received_at: 1,
                expires_at: Some(2),
            }),
            scopes: vec!["a".into()],
            wanted: vec![],
            login_needed: None,
            logged_in_at: 1,
            identity: None,
            subject: None,
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("cm-vault-{tag}-{}-{}", std::process::id(), digest(tag)))
    }

    fn key(byte: u8) -> Key {
        Key { bytes: [byte; 32], source: format!("test key {byte}") }
    }

    #[tokio::test]
    async fn a_saved_grant_reads_back_from_a_private_file_that_holds_no_token_in_the_clear() {
        let dir = temp_dir("roundtrip");
        let vault = Vault::files(&dir, Some(key(1)));
        vault.save(&grant("https://a.example/mcp")).await.unwrap();
        let back = vault.load("https://a.example/mcp").await.unwrap().unwrap();
        assert_eq!(back.tokens.unwrap().access, "ACCESS-SECRET");
        let path = PathBuf::from(vault.place("https://a.example/mcp"));
        let bytes = std::fs::read_to_string(&path).unwrap();
        assert!(!bytes.contains("SECRET") && !bytes.contains("a.example"), "{bytes}");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(vault.load("https://b.example/mcp").await.unwrap().is_none());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_wrong_or_missing_key_is_an_error_naming_the_file_and_never_plaintext() {
        let dir = temp_dir("wrongkey");
        Vault::files(&dir, Some(key(1))).save(&grant("https://a.example/mcp")).await.unwrap();
        let wrong = Vault::files(&dir, Some(key(2))).load("https://a.example/mcp").await.unwrap_err();
        assert!(matches!(wrong, VaultError::WrongKey { .. }), "{wrong}");
        assert!(wrong.to_string().contains(&dir.display().to_string()) && wrong.to_string().contains("test key 2"));
        let missing = Vault::files(&dir, None).load("https://a.example/mcp").await.unwrap_err();
        assert!(matches!(missing, VaultError::KeyMissing { .. }), "{missing}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_record_moved_to_another_servers_place_does_not_open() {
        let dir = temp_dir("moved");
        let vault = Vault::files(&dir, Some(key(1)));
        vault.save(&grant("https://a.example/mcp")).await.unwrap();
        std::fs::copy(vault.place("https://a.example/mcp"), vault.place("https://b.example/mcp")).unwrap();
        let e = vault.load("https://b.example/mcp").await.unwrap_err();
        assert!(matches!(e, VaultError::WrongKey { .. }), "A's token is never handed to B: {e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn an_unreadable_token_file_is_an_error_naming_it() {
        let dir = temp_dir("unreadable");
        let vault = Vault::files(&dir, Some(key(1)));
        vault.save(&grant("https://a.example/mcp")).await.unwrap();
        let path = vault.place("https://a.example/mcp");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        // root reads any file: the check needs an ordinary user.
        if std::fs::read(&path).is_err() {
            let e = vault.load("https://a.example/mcp").await.unwrap_err();
            assert!(e.to_string().contains(&path) && e.to_string().contains("read"), "{e}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn one_renewal_lock_at_a_time_per_server() {
        let dir = temp_dir("lock");
        let vault = Vault::files(&dir, Some(key(1)));
        let held = vault.lock("https://a.example/mcp").await.unwrap();
        let other = vault.clone();
        let waiter = tokio::spawn(async move { other.lock("https://a.example/mcp").await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "the second holder waits");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap().unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn an_identitys_grant_has_a_record_of_its_own_that_opens_for_nobody_else() {
        let store = SessionStore::in_memory();
        let vault = Vault::in_store(store.clone(), Some(key(3)));
        let mut alice = grant("https://a.example/mcp");
        alice.identity = Some("alice".into());
        vault.save(&alice).await.unwrap();
        assert!(vault.load("https://a.example/mcp").await.unwrap().is_none(), "not the deployment's grant");
        assert!(vault.load_for("https://a.example/mcp", Some("bob")).await.unwrap().is_none());
        let back = vault.load_for("https://a.example/mcp", Some("alice")).await.unwrap().unwrap();
        assert_eq!(back.identity.as_deref(), Some("alice"));
        // alice's record copied to bob's place does not open as bob's.
        let raw = store.get(STORE_SESSION, &record_name(&scope("https://a.example/mcp", Some("alice")))).await;
        let raw = raw.unwrap().unwrap().value;
        let bobs = record_name(&scope("https://a.example/mcp", Some("bob")));
        store.update(STORE_SESSION, &bobs, |_| raw.clone()).await.unwrap();
        let e = vault.load_for("https://a.example/mcp", Some("bob")).await.unwrap_err();
        assert!(matches!(e, VaultError::WrongKey { .. }), "{e}");
        assert!(vault.delete_for("https://a.example/mcp", Some("alice")).await.unwrap());
    }

    #[tokio::test]
    async fn grants_in_the_state_store_are_sealed_and_locked_alike() {
        let store = SessionStore::in_memory();
        let vault = Vault::in_store(store.clone(), Some(key(3)));
        vault.save(&grant("https://a.example/mcp")).await.unwrap();
        let raw = store.get(STORE_SESSION, &record_name("https://a.example/mcp")).await.unwrap().unwrap();
        assert!(!raw.value.to_string().contains("SECRET"));
        assert!(vault.load("https://a.example/mcp").await.unwrap().is_some());
        let held = vault.lock("https://a.example/mcp").await.unwrap();
        let start = tokio::time::Instant::now();
        let other = vault.clone();
        let waiter = tokio::spawn(async move { other.lock("https://a.example/mcp").await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(vault.delete("https://a.example/mcp").await.unwrap());
        assert!(vault.load("https://a.example/mcp").await.unwrap().is_none());
    }
}
