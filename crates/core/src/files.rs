//! Files a cell wrote (its output folder, and its whole printed output when
//! the model's share was cut), kept for the client to read with
//! `resources/read` under a `code-mode://files/...` URI (issue 42).
//!
//! One [`FileStore`] is shared by the sandbox-runner, which puts a run's
//! files in, and the frontend, which serves reads: that works where both
//! live in one process (`serve`). A file belongs to the identity whose
//! cell wrote it: a read by any other identity finds nothing, exactly as a
//! URI that never existed. Files live for the store's time to live (a kept
//! session's from the session's end: [`FileStore::put_held`]), and the
//! store holds at most a total and a per-identity quota of bytes: a put
//! past either is refused, saying which (never a silent cut).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// The scheme and host of every kept file's URI.
pub const URI_PREFIX: &str = "code-mode://files/";

/// How long files are kept when nothing else is configured (`--files-ttl`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// Bytes the store holds in all (the host's bound).
pub const DEFAULT_CAPACITY: u64 = 512 * 1024 * 1024;
/// Bytes one identity's files may hold at once.
pub const DEFAULT_PER_IDENTITY: u64 = 256 * 1024 * 1024;

/// Why a file was not kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileStoreError {
    /// The store holds its whole capacity.
    #[error("the host's file store is full ({capacity} bytes held at most)")]
    Full {
        /// The capacity in bytes.
        capacity: u64,
    },
    /// The identity's files hold its whole quota.
    #[error("this identity's kept files reached their quota ({quota} bytes)")]
    Quota {
        /// The quota in bytes.
        quota: u64,
    },
}

/// One kept file, as a read returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptFile {
    /// Its name in the output folder (a relative path).
    pub name: String,
    /// Its MIME type.
    pub mime_type: String,
    /// Its bytes.
    pub bytes: Bytes,
}

struct Entry {
    owner: String,
    file: KeptFile,
    /// When it goes; `None` while a live kept session holds it
    /// ([`FileStore::put_held`], until [`FileStore::release`]).
    until: Option<Instant>,
}

struct Inner {
    files: HashMap<String, Entry>,
    held: u64,
    by_owner: HashMap<String, u64>,
}

/// The shared, bounded, in-memory store of kept files: a cheap handle.
#[derive(Clone)]
pub struct FileStore {
    inner: Arc<Mutex<Inner>>,
    ttl: Duration,
    capacity: u64,
    per_identity: u64,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore").field("ttl", &self.ttl).field("capacity", &self.capacity).finish()
    }
}

impl FileStore {
    /// A store keeping files `ttl`, at most `capacity` bytes in all and
    /// `per_identity` bytes per identity.
    pub fn new(ttl: Duration, capacity: u64, per_identity: u64) -> Self {
        let inner = Inner { files: HashMap::new(), held: 0, by_owner: HashMap::new() };
        Self { inner: Arc::new(Mutex::new(inner)), ttl, capacity, per_identity }
    }

    /// A store with the default bounds and `ttl`.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self::new(ttl, DEFAULT_CAPACITY, DEFAULT_PER_IDENTITY)
    }

    /// How long files are kept.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Keep `file` for `owner` (the identity that ran the cell, empty for
    /// none): its URI, made of an unguessable id and its name.
    pub fn put(&self, owner: &str, file: KeptFile) -> Result<String, FileStoreError> {
        self.put_until(owner, file, Some(Instant::now() + self.ttl))
    }

    /// [`FileStore::put`] for a kept session's cell: the file stays while
    /// the session lives, and goes the store's time to live after
    /// [`FileStore::release`] (its session ended). It counts in the same
    /// bounds meanwhile.
    pub fn put_held(&self, owner: &str, file: KeptFile) -> Result<String, FileStoreError> {
        self.put_until(owner, file, None)
    }

    /// The files at `uris`, held by a kept session that ended, go the
    /// store's time to live from now.
    pub fn release(&self, uris: &[String]) {
        let until = Instant::now() + self.ttl;
        let mut inner = self.lock();
        for uri in uris {
            if let Some(entry) = inner.files.get_mut(uri) {
                entry.until = Some(until);
            }
        }
    }

    fn put_until(&self, owner: &str, file: KeptFile, until: Option<Instant>) -> Result<String, FileStoreError> {
        let size = file.bytes.len() as u64;
        let mut inner = self.lock();
        inner.expire(Instant::now());
        if inner.held.saturating_add(size) > self.capacity {
            return Err(FileStoreError::Full { capacity: self.capacity });
        }
        let owned = inner.by_owner.get(owner).copied().unwrap_or(0);
        if owned.saturating_add(size) > self.per_identity {
            return Err(FileStoreError::Quota { quota: self.per_identity });
        }
        let uri = format!("{URI_PREFIX}{}/{}", uuid::Uuid::new_v4().simple(), uri_path(&file.name));
        inner.held += size;
        *inner.by_owner.entry(owner.to_string()).or_default() += size;
        let entry = Entry { owner: owner.to_string(), file, until };
        inner.files.insert(uri.clone(), entry);
        Ok(uri)
    }

    /// The file at `uri` when `owner` may read it; `None` for a URI that is
    /// unknown, expired or another identity's (the same answer for all three).
    pub fn get(&self, owner: &str, uri: &str) -> Option<KeptFile> {
        let mut inner = self.lock();
        inner.expire(Instant::now());
        inner.files.get(uri).filter(|e| e.owner == owner).map(|e| e.file.clone())
    }

    /// Remove the file at `uri` and return it with its owner (handed on to
    /// a store the services share, over NATS: [`crate::files_shared`]).
    pub fn take(&self, uri: &str) -> Option<(String, KeptFile)> {
        let mut inner = self.lock();
        let entry = inner.files.remove(uri)?;
        let size = entry.file.bytes.len() as u64;
        inner.held -= size;
        if let Some(owned) = inner.by_owner.get_mut(&entry.owner) {
            *owned -= size;
            if *owned == 0 {
                inner.by_owner.remove(&entry.owner);
            }
        }
        Some((entry.owner, entry.file))
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.lock().held
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // No code runs while the lock is held that could panic halfway.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Inner {
    fn expire(&mut self, now: Instant) {
        let gone: Vec<String> =
            self.files.iter().filter(|(_, e)| e.until.is_some_and(|u| u <= now)).map(|(k, _)| k.clone()).collect();
        for uri in gone {
            if let Some(entry) = self.files.remove(&uri) {
                let size = entry.file.bytes.len() as u64;
                self.held -= size;
                if let Some(owned) = self.by_owner.get_mut(&entry.owner) {
                    *owned -= size;
                    if *owned == 0 {
                        self.by_owner.remove(&entry.owner);
                    }
                }
            }
        }
    }
}

/// True when `uri` names a kept file (it may still be unknown).
pub fn is_kept_file(uri: &str) -> bool {
    uri.starts_with(URI_PREFIX)
}

/// `name` as it may stand in a URI's path: bytes other than unreserved
/// ones and `/` percent-encoded.
pub fn uri_path(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: usize) -> KeptFile {
        KeptFile { name: "a.csv".into(), mime_type: "text/csv".into(), bytes: Bytes::from(vec![b'x'; n]) }
    }

    #[test]
    fn a_file_is_read_only_by_its_owner() {
        let store = FileStore::with_ttl(Duration::from_secs(60));
        let uri = store.put("alice", file(3)).unwrap();
        assert!(uri.starts_with(URI_PREFIX) && uri.ends_with("/a.csv"), "{uri}");
        assert_eq!(store.get("alice", &uri).unwrap().bytes.len(), 3);
        assert_eq!(store.get("bob", &uri), None);
        assert_eq!(store.get("", &uri), None);
    }

    #[test]
    fn puts_past_the_quota_or_the_capacity_are_refused_saying_which() {
        let store = FileStore::new(Duration::from_secs(60), 10, 6);
        store.put("alice", file(5)).unwrap();
        assert_eq!(store.put("alice", file(2)), Err(FileStoreError::Quota { quota: 6 }));
        store.put("bob", file(5)).unwrap();
        assert_eq!(store.put("carol", file(1)), Err(FileStoreError::Full { capacity: 10 }));
    }

    #[test]
    fn uri_paths_keep_slashes_and_encode_the_rest() {
        assert_eq!(uri_path("plots/fig 1.png"), "plots/fig%201.png");
    }

    #[test]
    fn a_kept_sessions_file_stays_until_released_then_goes_after_the_ttl() {
        let store = FileStore::new(Duration::ZERO, 10, 10);
        let uri = store.put_held("alice", file(5)).unwrap();
        assert_eq!(store.get("alice", &uri).unwrap().bytes.len(), 5, "held past the ttl while the session lives");
        assert_eq!(store.get("bob", &uri), None);
        store.release(std::slice::from_ref(&uri));
        assert_eq!(store.get("alice", &uri), None);
        assert_eq!(store.held(), 0);
    }

    #[test]
    fn expired_files_are_gone_and_free_their_bytes() {
        let store = FileStore::new(Duration::ZERO, 10, 10);
        let uri = store.put("alice", file(5)).unwrap();
        assert_eq!(store.get("alice", &uri), None);
        assert_eq!(store.held(), 0);
    }
}
