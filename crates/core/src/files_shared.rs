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

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::{Bytes, BytesMut};

use crate::files::{KeptFile, URI_PREFIX};

/// The JetStream key-value bucket of the files out.
pub const FILES_BUCKET: &str = "codemode_files";
/// Bytes of one chunk (one bucket entry).
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Bytes the bucket holds in all when it is created (the host's bound).
pub const DEFAULT_MAX_BYTES: i64 = 512 * 1024 * 1024;
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
}

impl std::fmt::Debug for SharedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedFiles").field("bucket", &FILES_BUCKET).finish()
    }
}

impl SharedFiles {
    /// The bucket over `client`, created when missing with `replicas`,
    /// each entry kept `ttl` and at most `max_bytes` in all.
    pub async fn open(
        client: async_nats::Client,
        replicas: usize,
        ttl: Duration,
        max_bytes: i64,
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
        Ok(Self { store })
    }

    /// Keep `file` of `owner` under `uri` (made by [`crate::files::FileStore::put`]):
    /// its chunks, then its meta.
    pub async fn put(&self, owner: &str, uri: &str, file: &KeptFile) -> Result<(), SharedFilesError> {
        let id = id_of(uri)?;
        let unavailable = |e: kv::PutError| SharedFilesError::Unavailable(e.to_string());
        let mut chunks = 0u64;
        for chunk in file.bytes.chunks(CHUNK_BYTES) {
            self.store.put(format!("{id}.c{chunks}"), file.bytes.slice_ref(chunk)).await.map_err(unavailable)?;
            chunks += 1;
        }
        let meta = Meta {
            owner: owner.to_string(),
            name: file.name.clone(),
            mime_type: file.mime_type.clone(),
            size: file.bytes.len() as u64,
            chunks,
        };
        let meta = serde_json::to_vec(&meta).map_err(|e| SharedFilesError::Unavailable(e.to_string()))?;
        self.store.put(format!("{id}.meta"), Bytes::from(meta)).await.map_err(unavailable)?;
        Ok(())
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
