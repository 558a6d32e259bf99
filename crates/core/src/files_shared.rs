//! Files out over NATS (issue 42): where a sandbox-runner leaves a cell's
//! files for the frontends when the services run apart, the JetStream
//! key-value bucket [`FILES_BUCKET`].
//!
//! A key-value bucket rather than JetStream's object store: its entries are
//! read with direct gets, the same narrow grant the frontends already have
//! on `codemode_cell_reports` (an object store's reads create a consumer,
//! a wider grant), and a file is cut into [`CHUNK_BYTES`] chunks under the
//! server's 1 MiB message bound. A file is `<id>.c<n>` (its chunks, written
//! first) then `<id>.meta` (owner, name, MIME type, size, chunk count,
//! written last): a reader that finds the meta finds the whole file, and a
//! runner killed halfway leaves no meta, so no file is ever offered cut.
//! The runners write the bucket, the frontends only read it
//! (`deploy/nats-server.conf`); every entry goes after the bucket's
//! `max_age` (`--files-ttl`) and the bucket holds at most `max_bytes`, so
//! any frontend replica serves a link until then, also after the one that
//! gave it restarted. A read by another identity than the meta's owner
//! finds nothing, as a URI that never existed.
//!
//! Two bounds hold across the bucket, whichever runner writes: its
//! `max_bytes` (`--files-max-bytes` when the bucket is created; a put past
//! it is refused as [`SharedFilesError::Full`], checked before the first
//! chunk and again by JetStream itself on each write), and a quota per
//! identity (`--files-quota`): each identity has one entry `q.<digest>`
//! listing what its files hold and until when, updated with a revision
//! check so runners racing for the same identity cannot both pass it
//! ([`SharedFilesError::Quota`]). A file that fails halfway has its chunks
//! purged (best effort) and its share of the quota given back.
//!
//! A kept session's files are written again while the session lives
//! ([`SharedFiles::refresh`], by the runner holding its container), so they
//! go `max_age` after the session's end rather than after their cell.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::{Bytes, BytesMut};

use crate::files::{KeptFile, URI_PREFIX};

mod quota;

/// The JetStream key-value bucket of the files out.
pub const FILES_BUCKET: &str = "codemode_files";
/// Bytes of one chunk (one bucket entry).
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Bytes the bucket holds in all when it is created (the host's bound).
pub const DEFAULT_MAX_BYTES: i64 = 512 * 1024 * 1024;
/// Bytes one identity's files may hold in the bucket at once.
pub const DEFAULT_QUOTA: u64 = crate::files::DEFAULT_PER_IDENTITY;
/// Bytes a bucket entry takes besides its value (its subject and
/// headers), counted when checking room before a file's first chunk.
const ENTRY_OVERHEAD: u64 = 160;
/// The bound on each call to JetStream.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why the shared files could not be reached or written.
#[derive(Debug, thiserror::Error)]
pub enum SharedFilesError {
    /// JetStream did not answer, or refused (the bucket is full, say).
    #[error("the files bucket {FILES_BUCKET}: {0}")]
    Unavailable(String),
    /// The URI is not one of a kept file.
    #[error("not a kept file's URI: {0}")]
    NotAFile(String),
    /// The bucket holds its `max_bytes`.
    #[error("the files bucket {FILES_BUCKET} is full (it holds at most {max_bytes} bytes, until older files expire)")]
    Full {
        /// The bucket's bound in bytes.
        max_bytes: i64,
    },
    /// The identity's files in the bucket hold its whole quota.
    #[error("this identity's files in {FILES_BUCKET} reached their quota ({quota} bytes, until older ones expire)")]
    Quota {
        /// The quota in bytes.
        quota: u64,
    },
}

impl SharedFilesError {
    /// A bound the bucket holds (full, or the identity's quota): later
    /// files would meet it too.
    pub fn is_bound(&self) -> bool {
        matches!(self, Self::Full { .. } | Self::Quota { .. })
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    owner: String,
    name: String,
    mime_type: String,
    size: u64,
    chunks: u64,
}

/// The shared files: a handle on the bucket, cheap to clone.
#[derive(Clone)]
pub struct SharedFiles {
    store: kv::Store,
    /// Bytes one identity's files may hold.
    quota: u64,
    /// How long an entry lives (the bucket's `max_age`, as created).
    ttl: Duration,
}

impl std::fmt::Debug for SharedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedFiles").field("bucket", &FILES_BUCKET).finish()
    }
}

impl SharedFiles {
    /// The bucket over `client`, created when missing with `replicas`,
    /// each entry kept `ttl` and at most `max_bytes` in all; each identity's
    /// files hold at most `quota` bytes of it.
    pub async fn open(
        client: async_nats::Client,
        replicas: usize,
        ttl: Duration,
        max_bytes: i64,
        quota: u64,
    ) -> Result<Self, SharedFilesError> {
        let mut context = jetstream::new(client);
        context.set_timeout(TIMEOUT);
        let store = match context.get_key_value(FILES_BUCKET).await {
            Ok(store) => store,
            Err(get_error) => {
                let config = kv::Config {
                    bucket: FILES_BUCKET.to_string(),
                    description: "code-mode files out of cells (issue 42)".into(),
                    history: 1,
                    max_value_size: (CHUNK_BYTES + 4096) as i32,
                    max_bytes,
                    max_age: ttl,
                    storage: jetstream::stream::StorageType::File,
                    num_replicas: replicas,
                    ..Default::default()
                };
                match context.create_key_value(config).await {
                    Ok(store) => store,
                    Err(create_error) => context.get_key_value(FILES_BUCKET).await.map_err(|_| {
                        SharedFilesError::Unavailable(format!(
                            "cannot open it: {get_error}; creating it: {create_error}"
                        ))
                    })?,
                }
            }
        };
        // The bucket's own max_age when another service created it.
        let ttl = match store.status().await {
            Ok(status) if !status.info.config.max_age.is_zero() => status.info.config.max_age,
            _ => ttl,
        };
        Ok(Self { store, quota, ttl })
    }

    /// Keep `file` of `owner` under `uri` (made by [`crate::files::FileStore::put`]):
    /// its share of the identity's quota, then its chunks, then its meta.
    /// Past the quota or the bucket's bound nothing is written; a write that
    /// fails halfway leaves no meta (so nothing offered), its chunks purged.
    pub async fn put(&self, owner: &str, uri: &str, file: &KeptFile) -> Result<(), SharedFilesError> {
        let id = id_of(uri)?;
        let size = file.bytes.len() as u64;
        quota::reserve(self, owner, id, size).await?;
        let written = self.write(id, owner, file).await;
        if written.is_err() {
            quota::release(self, owner, id).await;
        }
        written
    }

    async fn write(&self, id: &str, owner: &str, file: &KeptFile) -> Result<(), SharedFilesError> {
        let size = file.bytes.len() as u64;
        let chunks_needed = size.div_ceil(CHUNK_BYTES as u64) + 1;
        let info = self.store.stream.get_info().await.map_err(|e| SharedFilesError::Unavailable(e.to_string()))?;
        let max_bytes = info.config.max_bytes;
        if max_bytes > 0 && info.state.bytes + size + chunks_needed * ENTRY_OVERHEAD > max_bytes as u64 {
            return Err(SharedFilesError::Full { max_bytes });
        }
        let mut chunks = 0u64;
        for chunk in file.bytes.chunks(CHUNK_BYTES) {
            let key = format!("{id}.c{chunks}");
            if let Err(e) = self.store.put(key, file.bytes.slice_ref(chunk)).await {
                self.purge(id, chunks).await;
                return Err(failed(&e, max_bytes));
            }
            chunks += 1;
        }
        let meta =
            Meta { owner: owner.to_string(), name: file.name.clone(), mime_type: file.mime_type.clone(), size, chunks };
        let meta = serde_json::to_vec(&meta).map_err(|e| SharedFilesError::Unavailable(e.to_string()))?;
        if let Err(e) = self.store.put(format!("{id}.meta"), Bytes::from(meta)).await {
            self.purge(id, chunks).await;
            return Err(failed(&e, max_bytes));
        }
        Ok(())
    }

    /// Purge the first `chunks` chunks of file `id` (best effort: what is
    /// left goes at the bucket's `max_age`, never offered without a meta).
    async fn purge(&self, id: &str, chunks: u64) {
        for n in 0..chunks {
            if let Err(e) = self.store.purge(format!("{id}.c{n}")).await {
                tracing::debug!(error = %e, "a chunk of a file not handed out stays until it expires");
                return;
            }
        }
    }

    /// How long an entry lives (the bucket's `max_age`).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Write the file at `uri` again, so that it lives the bucket's
    /// `max_age` from now (a kept session's file while the session lives,
    /// and once more when it ends), its line of the owner's quota with it:
    /// its chunks first, its meta last, each with the same bytes, so a read
    /// meanwhile finds the whole file. False when it is gone (expired, or
    /// never whole).
    pub async fn refresh(&self, uri: &str) -> Result<bool, SharedFilesError> {
        let id = id_of(uri)?;
        let entry = |key: String| async move {
            self.store.get(key).await.map_err(|e| SharedFilesError::Unavailable(e.to_string()))
        };
        let Some(meta_bytes) = entry(format!("{id}.meta")).await? else { return Ok(false) };
        let Ok(meta) = serde_json::from_slice::<Meta>(&meta_bytes) else { return Ok(false) };
        quota::extend(self, &meta.owner, id).await?;
        let max_bytes = self.store.stream.cached_info().config.max_bytes;
        for n in 0..meta.chunks {
            let key = format!("{id}.c{n}");
            let Some(chunk) = entry(key.clone()).await? else { return Ok(false) };
            self.store.put(key, chunk).await.map_err(|e| failed(&e, max_bytes))?;
        }
        self.store.put(format!("{id}.meta"), meta_bytes).await.map_err(|e| failed(&e, max_bytes))?;
        Ok(true)
    }

    /// The file at `uri` when `owner` may read it; `None` for a URI that
    /// is unknown, expired, another identity's or not whole (the same
    /// answer for all).
    pub async fn get(&self, owner: &str, uri: &str) -> Result<Option<KeptFile>, SharedFilesError> {
        let Ok(id) = id_of(uri) else { return Ok(None) };
        let entry = |key: String| async move {
            self.store.get(key).await.map_err(|e| SharedFilesError::Unavailable(e.to_string()))
        };
        let Some(meta) = entry(format!("{id}.meta")).await? else { return Ok(None) };
        let Ok(meta) = serde_json::from_slice::<Meta>(&meta) else { return Ok(None) };
        if meta.owner != owner || uri_name(uri) != Some(crate::files::uri_path(&meta.name)) {
            return Ok(None);
        }
        let mut bytes = BytesMut::with_capacity(meta.size as usize);
        for n in 0..meta.chunks {
            let Some(chunk) = entry(format!("{id}.c{n}")).await? else { return Ok(None) };
            bytes.extend_from_slice(&chunk);
        }
        if bytes.len() as u64 != meta.size {
            return Ok(None);
        }
        Ok(Some(KeptFile { name: meta.name, mime_type: meta.mime_type, bytes: bytes.freeze() }))
    }
}

/// A failed write as the caller reads it: the bucket full (JetStream's
/// "maximum bytes exceeded", also when another runner filled it first), or
/// unavailable.
fn failed(error: &dyn std::fmt::Display, max_bytes: i64) -> SharedFilesError {
    let text = error.to_string();
    if text.contains("maximum bytes") {
        SharedFilesError::Full { max_bytes }
    } else {
        SharedFilesError::Unavailable(text)
    }
}

/// The id part of `code-mode://files/<id>/<name>`: 32 hex digits.
fn id_of(uri: &str) -> Result<&str, SharedFilesError> {
    let rest = uri.strip_prefix(URI_PREFIX).ok_or_else(|| SharedFilesError::NotAFile(uri.to_string()))?;
    let id = rest.split('/').next().unwrap_or_default();
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(SharedFilesError::NotAFile(uri.to_string()))
    }
}

/// The name part of a kept file's URI, as it stands there.
fn uri_name(uri: &str) -> Option<String> {
    uri.strip_prefix(URI_PREFIX)?.split_once('/').map(|(_, name)| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_kept_files_uri_has_an_id() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(id_of(&format!("{URI_PREFIX}{id}/a.csv")).unwrap(), id);
        assert_eq!(uri_name(&format!("{URI_PREFIX}{id}/plots/a.png")).as_deref(), Some("plots/a.png"));
        for bad in ["code-mode://files/../x", "code-mode://files/zz/a", "file:///etc/passwd", "code-mode://files/"] {
            assert!(id_of(bad).is_err(), "{bad}");
        }
    }
}
