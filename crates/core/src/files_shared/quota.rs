//! The per-identity quota of the files bucket (issue 42): one entry per
//! identity, `q.<SHA-256 of the identity, hex>`, listing each of its files
//! (id, size, when it expires); the sum of those not yet expired is what
//! the identity holds. A runner adds a file before writing its chunks and
//! writes the entry back with the revision it read, so two runners racing
//! for one identity never both pass the quota (the loser reads again).
//! The entry lives in the same bucket, so it expires with the files it
//! lists; a runner that dies after reserving leaves its share counted
//! until then (the quota errs on the side of less).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{SharedFiles, SharedFilesError, failed};

/// Tries of the read-and-update before giving up (runners racing for one
/// identity's entry).
const TRIES: usize = 16;
/// Files listed in one entry; past this the oldest are merged into one
/// line (their sizes summed, kept until the latest of them expires), so
/// the entry stays far under the bucket's value size.
const MAX_LISTED: usize = 1000;

/// One file an identity holds in the bucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Held {
    /// The file's id (empty for merged lines).
    id: String,
    /// Its bytes.
    bytes: u64,
    /// When it expires, in milliseconds since the Unix epoch.
    until: u64,
}

fn key_of(owner: &str) -> String {
    format!("q.{}", hex::encode(Sha256::digest(owner.as_bytes())))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as u64
}

/// Count `bytes` of file `id` against `owner`'s quota, or refuse with
/// [`SharedFilesError::Quota`] when it would go past.
pub(super) async fn reserve(files: &SharedFiles, owner: &str, id: &str, bytes: u64) -> Result<(), SharedFilesError> {
    let until = now_ms().saturating_add(files.ttl.as_millis() as u64);
    change(files, owner, |held| {
        let total: u64 = held.iter().map(|h| h.bytes).sum();
        if total.saturating_add(bytes) > files.quota {
            return Err(SharedFilesError::Quota { quota: files.quota });
        }
        held.push(Held { id: id.to_string(), bytes, until });
        merge_oldest(held);
        Ok(())
    })
    .await
}

/// File `id`, written again, is counted until the bucket's `max_age` from
/// now (a kept session's file: [`SharedFiles::refresh`]).
pub(super) async fn extend(files: &SharedFiles, owner: &str, id: &str) -> Result<(), SharedFilesError> {
    let until = now_ms().saturating_add(files.ttl.as_millis() as u64);
    change(files, owner, |held| {
        for line in held.iter_mut().filter(|h| h.id == id) {
            line.until = until;
        }
        Ok(())
    })
    .await
}

/// Give back the share of file `id` (it was not kept); best effort.
pub(super) async fn release(files: &SharedFiles, owner: &str, id: &str) {
    let released = change(files, owner, |held| {
        held.retain(|h| h.id != id);
        Ok(())
    })
    .await;
    if let Err(e) = released {
        tracing::debug!(error = %e, "a file's share of its identity's quota stays counted until it expires");
    }
}

/// Read `owner`'s entry (expired lines dropped), apply `edit`, and write it
/// back on the revision read; again when another runner wrote in between.
async fn change(
    files: &SharedFiles,
    owner: &str,
    edit: impl Fn(&mut Vec<Held>) -> Result<(), SharedFilesError>,
) -> Result<(), SharedFilesError> {
    let key = key_of(owner);
    let unavailable = |e: &dyn std::fmt::Display| SharedFilesError::Unavailable(e.to_string());
    for _ in 0..TRIES {
        let entry = files.store.entry(key.clone()).await.map_err(|e| unavailable(&e))?;
        let (mut held, revision) = match entry {
            Some(entry) if entry.operation == async_nats::jetstream::kv::Operation::Put => {
                (serde_json::from_slice::<Vec<Held>>(&entry.value).unwrap_or_default(), entry.revision)
            }
            Some(entry) => (Vec::new(), entry.revision),
            None => (Vec::new(), 0),
        };
        let now = now_ms();
        held.retain(|h| h.until > now);
        edit(&mut held)?;
        let value = Bytes::from(serde_json::to_vec(&held).map_err(|e| unavailable(&e))?);
        match files.store.update(key.clone(), value, revision).await {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision => continue,
            Err(e) => return Err(failed(&e, files.store.stream.cached_info().config.max_bytes)),
        }
    }
    Err(SharedFilesError::Unavailable(format!("the quota entry of this identity kept changing ({TRIES} tries)")))
}

/// Keep at most [`MAX_LISTED`] lines: the oldest merged into one.
fn merge_oldest(held: &mut Vec<Held>) {
    if held.len() <= MAX_LISTED {
        return;
    }
    held.sort_by_key(|h| h.until);
    let extra = held.len() - MAX_LISTED + 1;
    let merged: Vec<Held> = held.drain(..extra).collect();
    let bytes = merged.iter().map(|h| h.bytes).sum();
    let until = merged.iter().map(|h| h.until).max().unwrap_or(0);
    held.insert(0, Held { id: String::new(), bytes, until });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identitys_key_is_a_digest_and_merging_keeps_the_bytes_and_the_latest_expiry() {
        let key = key_of("alice");
        assert!(key.starts_with("q.") && key.len() == 66, "{key}");
        assert_ne!(key, key_of("bob"));
        let mut held: Vec<Held> =
            (0..MAX_LISTED as u64 + 5).map(|n| Held { id: format!("f{n}"), bytes: 2, until: 1000 + n }).collect();
        merge_oldest(&mut held);
        assert_eq!(held.len(), MAX_LISTED);
        assert_eq!(held.iter().map(|h| h.bytes).sum::<u64>(), 2 * (MAX_LISTED as u64 + 5));
        assert_eq!((held[0].id.as_str(), held[0].bytes, held[0].until), ("", 12, 1005));
    }
}
