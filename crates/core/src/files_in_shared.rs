//! Files in over NATS (issue 42): how a file in of a cell (`run_python`'s
//! `files`, up to [`code_mode_proto::MAX_INPUT_FILE_BYTES`]) goes from the
//! bridge that read it to the sandbox-runner that places it, when the
//! services run apart. The bridge's reply to the runner is one NATS message,
//! which the server's `max_payload` (1 MiB by default) bounds; so a file
//! past [`INLINE_BYTES`] goes through the JetStream key-value bucket
//! [`INPUTS_BUCKET`] instead, and the reply names it ([`StoredInput`]).
//!
//! The bridge writes the file's chunks (`<id>.c<n>`, [`CHUNK_BYTES`]
//! each, `<id>` 32 random hex digits) and then replies with their id,
//! count, the file's size and SHA-256; the runner reads the chunks with
//! direct gets and places the file only when their bytes add up to that
//! size and hash. Nothing in the bucket is ever offered as a whole file by
//! itself: the reply is the only description, so a bridge killed while it
//! writes leaves chunks no runner will read (the runner's call then fails
//! as a lost bridge's does), and a runner killed while it reads takes its
//! cell with it. Every entry goes after [`INPUTS_TTL`] (the bucket's
//! `max_age`) and the bucket holds at most [`INPUTS_MAX_BYTES`]: a file that
//! does not fit is refused (the cell ends before its code starts, saying
//! so), never cut. Only the bridges write the bucket and only the runners
//! read it; the frontends have no grant on it (`deploy/nats-server.conf`).
//!
//! Inline files in (bytes a client sends with `run_python`, up to
//! [`code_mode_proto::MAX_INPUT_BYTES`] in all) travel the same way from
//! the frontend, which holds them, through a bucket of their own,
//! [`INLINE_BUCKET`]: the frontend writes the chunks of each file the cell
//! message cannot carry and names them in the cell's input
//! (`CellInput::stored`); the runner reads and checks them as above. Only
//! the frontends write that bucket and only the runners read it, so a
//! frontend can neither read what another wrote, nor touch (overwrite,
//! purge, fill) the bridges' bucket, and a bridge cannot touch the
//! frontends'.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use sha2::Digest as _;

/// The JetStream key-value bucket of files in on their way to a runner.
pub const INPUTS_BUCKET: &str = "codemode_files_in";
/// The JetStream key-value bucket of inline files in (a client's bytes) on
/// their way from a frontend to a runner.
pub const INLINE_BUCKET: &str = "codemode_files_in_inline";
/// A file of at most this many bytes (as it travels in the reply: its text,
/// or its base64) stays in the bridge's reply; JSON escapes it twice there
/// (at most 7 bytes a byte), still under the 1 MiB message bound.
pub const INLINE_BYTES: usize = 128 * 1024;
/// Bytes of one chunk (one bucket entry), under the 1 MiB message bound.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// How long an entry lives: the runner reads it right after the reply.
pub const INPUTS_TTL: Duration = Duration::from_secs(300);
/// Bytes the bucket holds in all (32 cells' files in at their limit).
pub const INPUTS_MAX_BYTES: i64 = 256 * 1024 * 1024;
/// The bound on each call to JetStream.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a file in could not go through the bucket.
#[derive(Debug, thiserror::Error)]
pub enum SharedInputsError {
    /// JetStream did not answer, or refused.
    #[error("the files-in bucket {bucket}: {why}")]
    Unavailable {
        /// The bucket.
        bucket: &'static str,
        /// What JetStream said.
        why: String,
    },
    /// The bucket holds its bound: the bound and the lifetime are the
    /// bucket's own (as JetStream keeps them), which a bucket created
    /// before, by an operator or another version, may set otherwise than
    /// [`INPUTS_MAX_BYTES`] and [`INPUTS_TTL`]. A bucket without a lifetime
    /// (`max_age` 0) never frees room by itself: the text then says so.
    #[error("{}", full_text(bucket, *max_bytes, *ttl))]
    Full {
        /// The bucket.
        bucket: &'static str,
        /// The bytes it holds at most.
        max_bytes: i64,
        /// How long an entry lives in it (zero: for ever).
        ttl: Duration,
    },
    /// What the description names is not what the bucket holds.
    #[error("the file in {id} in {bucket}: {why}")]
    Broken {
        /// The bucket.
        bucket: &'static str,
        /// The file's id.
        id: String,
        /// What is wrong.
        why: String,
    },
}

/// The text of [`SharedInputsError::Full`]: what fills the bucket, and
/// what frees it (the entries' expiry, or an operator when they never
/// expire).
fn full_text(bucket: &str, max_bytes: i64, ttl: Duration) -> String {
    let full = format!(
        "the files-in bucket {bucket} is full: it holds at most {max_bytes} bytes, taken by the files in of other calls"
    );
    if ttl.is_zero() {
        format!(
            "{full}, which stay until deleted (the bucket has no max age, so nothing in it expires): an operator must \
             purge the bucket or raise its max bytes (or give it a max age); until then, try with fewer or smaller \
             files"
        )
    } else {
        format!(
            "{full} until they expire (within {} s): try again in a few minutes or with fewer or smaller files (an \
             operator may raise the bucket's max bytes)",
            ttl.as_secs()
        )
    }
}

/// A file in kept in a bucket of files in, as its writer describes it.
pub use code_mode_proto::StoredInput;

/// A bucket of files in: a handle on JetStream, cheap to clone. The
/// bridge opens [`INPUTS_BUCKET`] with [`SharedInputs::create`], a frontend
/// [`INLINE_BUCKET`] with [`SharedInputs::create_inline`]; a runner reads
/// the first with [`SharedInputs::reader`] and the second with
/// [`SharedInputs::inline_reader`], which look the bucket up at each read
/// (a runner may start before any writer created it).
#[derive(Clone)]
pub struct SharedInputs {
    context: jetstream::Context,
    store: Option<kv::Store>,
    bucket: &'static str,
}

impl std::fmt::Debug for SharedInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInputs").field("bucket", &self.bucket).finish()
    }
}

impl SharedInputs {
    /// The bridges' bucket ([`INPUTS_BUCKET`]) over `client`, created when
    /// missing with `replicas`.
    pub async fn create(client: async_nats::Client, replicas: usize) -> Result<Self, SharedInputsError> {
        Self::create_in(
            client,
            replicas,
            INPUTS_BUCKET,
            "code-mode files in of cells on their way to a runner (issue 42)",
        )
        .await
    }

    /// The frontends' bucket of inline files in ([`INLINE_BUCKET`]) over
    /// `client`, created when missing with `replicas`.
    pub async fn create_inline(client: async_nats::Client, replicas: usize) -> Result<Self, SharedInputsError> {
        let about = "code-mode inline files in (a client's bytes) on their way from a frontend to a runner (issue 42)";
        Self::create_in(client, replicas, INLINE_BUCKET, about).await
    }

    async fn create_in(
        client: async_nats::Client,
        replicas: usize,
        bucket: &'static str,
        description: &str,
    ) -> Result<Self, SharedInputsError> {
        let mut context = jetstream::new(client);
        context.set_timeout(TIMEOUT);
        let store = match context.get_key_value(bucket).await {
            Ok(store) => store,
            Err(get_error) => {
                let config = kv::Config {
                    bucket: bucket.to_string(),
                    description: description.into(),
                    history: 1,
                    max_value_size: (CHUNK_BYTES + 4096) as i32,
                    max_bytes: INPUTS_MAX_BYTES,
                    max_age: INPUTS_TTL,
                    storage: jetstream::stream::StorageType::File,
                    num_replicas: replicas,
                    ..Default::default()
                };
                match context.create_key_value(config).await {
                    Ok(store) => store,
                    Err(create_error) => {
                        context.get_key_value(bucket).await.map_err(|_| SharedInputsError::Unavailable {
                            bucket,
                            why: format!("cannot open it: {get_error}; creating it: {create_error}"),
                        })?
                    }
                }
            }
        };
        Ok(Self { context, store: Some(store), bucket })
    }

    /// A reader of the bridges' bucket over `client`: nothing is asked of
    /// JetStream until a read.
    pub fn reader(client: async_nats::Client) -> Self {
        let mut context = jetstream::new(client);
        context.set_timeout(TIMEOUT);
        Self { context, store: None, bucket: INPUTS_BUCKET }
    }

    /// A reader of the frontends' bucket of inline files in, over this
    /// one's connection: nothing is asked of JetStream until a read.
    pub fn inline_reader(&self) -> Self {
        Self { context: self.context.clone(), store: None, bucket: INLINE_BUCKET }
    }

    /// The bucket this handle reads or writes.
    pub fn bucket(&self) -> &'static str {
        self.bucket
    }

    async fn store(&self) -> Result<kv::Store, SharedInputsError> {
        match &self.store {
            Some(store) => Ok(store.clone()),
            None => self.context.get_key_value(self.bucket).await.map_err(|e| SharedInputsError::Unavailable {
                bucket: self.bucket,
                why: format!("cannot open it: {e}"),
            }),
        }
    }

    /// Keep `bytes` as a file in: its chunks, then its description for the
    /// reply. A write that fails halfway purges what it wrote (best effort;
    /// the rest expires) and nothing describes it.
    pub async fn put(&self, bytes: &[u8]) -> Result<StoredInput, SharedInputsError> {
        let store = self.store().await?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut chunks = 0u64;
        for chunk in bytes.chunks(CHUNK_BYTES) {
            if let Err(e) = store.put(format!("{id}.c{chunks}"), Bytes::copy_from_slice(chunk)).await {
                for n in 0..chunks {
                    if store.purge(format!("{id}.c{n}")).await.is_err() {
                        break;
                    }
                }
                let text = e.to_string();
                return Err(if text.contains("maximum bytes") {
                    let config = &store.stream.cached_info().config;
                    SharedInputsError::Full { bucket: self.bucket, max_bytes: config.max_bytes, ttl: config.max_age }
                } else {
                    SharedInputsError::Unavailable { bucket: self.bucket, why: text }
                });
            }
            chunks += 1;
        }
        Ok(StoredInput { id, size: bytes.len() as u64, chunks, sha256: hex_sha256(bytes) })
    }

    /// Purge the chunks of `stored`, a file this handle wrote for a call
    /// that ends without sending it (best effort: what stays expires after
    /// the bucket's lifetime), so a refused call leaves nothing to fill the
    /// bucket.
    pub async fn discard(&self, stored: &StoredInput) {
        let Ok(store) = self.store().await else { return };
        for n in 0..stored.chunks {
            if let Err(e) = store.purge(format!("{}.c{n}", stored.id)).await {
                tracing::debug!(bucket = self.bucket, id = %stored.id, error = %e, "a file in's chunks stay until they expire");
                return;
            }
        }
    }

    /// The bytes of `stored`, at most `max` of them: whole, of the size and
    /// hash described, or an error (a chunk missing or expired, a size or
    /// hash that differs), never cut bytes.
    pub async fn take(&self, stored: &StoredInput, max: usize) -> Result<Vec<u8>, SharedInputsError> {
        let broken = |why: String| SharedInputsError::Broken { bucket: self.bucket, id: stored.id.clone(), why };
        if stored.id.len() != 32 || !stored.id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(broken("not an id of a file in".into()));
        }
        if stored.size > max as u64 {
            return Err(broken(format!("it is {} bytes, over the {max} byte limit", stored.size)));
        }
        if stored.chunks != stored.size.div_ceil(CHUNK_BYTES as u64) {
            return Err(broken(format!("{} chunks cannot hold {} bytes", stored.chunks, stored.size)));
        }
        let store = self.store().await?;
        let mut bytes = Vec::with_capacity(stored.size as usize);
        for n in 0..stored.chunks {
            let chunk = store
                .get(format!("{}.c{n}", stored.id))
                .await
                .map_err(|e| SharedInputsError::Unavailable { bucket: self.bucket, why: e.to_string() })?
                .ok_or_else(|| broken(format!("chunk {n} is gone (expired after {} s?)", INPUTS_TTL.as_secs())))?;
            if chunk.len() > CHUNK_BYTES || bytes.len() + chunk.len() > stored.size as usize {
                return Err(broken(format!("chunk {n} does not fit the described size")));
            }
            bytes.extend_from_slice(&chunk);
        }
        if bytes.len() as u64 != stored.size || hex_sha256(&bytes) != stored.sha256 {
            return Err(broken("its bytes are not the ones described (size or SHA-256)".into()));
        }
        Ok(bytes)
    }
}

fn hex_sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_says_when_room_frees_and_promises_no_expiry_when_the_bucket_has_no_max_age() {
        let expiring = SharedInputsError::Full { bucket: INLINE_BUCKET, max_bytes: 1_048_576, ttl: INPUTS_TTL };
        assert_eq!(
            expiring.to_string(),
            "the files-in bucket codemode_files_in_inline is full: it holds at most 1048576 bytes, taken by the \
             files in of other calls until they expire (within 300 s): try again in a few minutes or with fewer or \
             smaller files (an operator may raise the bucket's max bytes)"
        );
        let for_ever = SharedInputsError::Full { bucket: INPUTS_BUCKET, max_bytes: 1_048_576, ttl: Duration::ZERO };
        let text = for_ever.to_string();
        assert_eq!(
            text,
            "the files-in bucket codemode_files_in is full: it holds at most 1048576 bytes, taken by the files in of \
             other calls, which stay until deleted (the bucket has no max age, so nothing in it expires): an operator \
             must purge the bucket or raise its max bytes (or give it a max age); until then, try with fewer or \
             smaller files"
        );
        assert!(!text.contains("within 0 s") && !text.contains("expire ("), "{text}");
    }
}
