//! Files out of a kept session's cells (issue 42): the output folder stays
//! from cell to cell (`runner.py` hands out, at each cell's end, only what
//! is new or changed since the cell started), and the files a session's
//! cells handed out stay readable while the session's container lives,
//! then `--files-ttl` more.
//!
//! Under `serve` the files stay in the runner's own store, held
//! ([`FileStore::put_held`]) until the container goes, then released to
//! the store's time to live. Over NATS they are handed to the bucket
//! `codemode_files` after each cell as a fresh cell's are, and every entry
//! there goes the bucket's `max_age` after it was written: so while the
//! container lives a [`SessionFiles`] writes its session's files again
//! every half `--files-ttl` ([`SharedFiles::refresh`]), and once more when
//! the container goes, so each stays `--files-ttl` past the session's end.
//! A runner killed meanwhile writes nothing more: its sessions' files go
//! at most `--files-ttl` after their last write.

use std::time::Duration;

use code_mode_core::files::FileStore;
use code_mode_core::files_shared::SharedFiles;

/// The shortest pause between two writes of a session's files to the
/// bucket (a very short `--files-ttl`, in tests).
const LEAST_REFRESH: Duration = Duration::from_secs(1);

/// Where a runner keeps files out: its own store (`serve`), and over NATS
/// the bucket the services share.
#[derive(Debug, Clone, Default)]
pub struct FileStores {
    /// The runner's store (every cell's files go there first).
    pub local: Option<FileStore>,
    /// The bucket, over NATS.
    pub shared: Option<SharedFiles>,
    /// Over NATS, where a bridge leaves a large file in for the runner
    /// (`codemode_files_in`); a frontend's large inline file comes through
    /// its inline reader (`codemode_files_in_inline`).
    pub inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
}

/// The files of one kept session's cells.
#[derive(Debug)]
pub(crate) struct SessionFiles {
    stores: FileStores,
    /// Every link its cells' reports gave.
    uris: Vec<String>,
    /// The refresh running now (over NATS).
    refreshing: Option<tokio::task::JoinHandle<()>>,
}

impl SessionFiles {
    pub(crate) fn new(stores: FileStores) -> Self {
        Self { stores, uris: Vec::new(), refreshing: None }
    }

    /// Fit `run` to a kept cell: its files held by the session, the whole
    /// printed output kept as a fresh cell's is, and its large files in
    /// read from the bucket a bridge left them in, as a fresh cell's are.
    pub(crate) fn prepare(&self, run: &mut crate::cell::Run<'_>) {
        run.files.store = self.stores.local.clone();
        run.files.held = true;
        if self.stores.local.is_some() {
            run.files.output_bound = code_mode_proto::MAX_OUTPUT_KEPT;
        }
        run.inputs = self.stores.inputs.clone();
    }

    /// A cell's report: its links are the session's.
    pub(crate) fn record(&mut self, report: &code_mode_proto::CellReport) {
        self.uris.extend(report.files.iter().map(|link| link.uri.clone()));
    }

    /// How often the session's files are written to the bucket again;
    /// `None` when there is no bucket.
    pub(crate) fn refresh_every(&self) -> Option<Duration> {
        self.stores.shared.as_ref().map(|shared| (shared.ttl() / 2).max(LEAST_REFRESH))
    }

    /// Write the session's files to the bucket again (in the background; a
    /// refresh still running is not doubled).
    pub(crate) fn refresh(&mut self) {
        let Some(shared) = self.stores.shared.clone() else { return };
        if self.uris.is_empty() || self.refreshing.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let uris = self.uris.clone();
        self.refreshing = Some(tokio::spawn(async move { refresh_all(&shared, &uris).await }));
    }

    /// The session's container is gone: its files go `--files-ttl` from
    /// now (released in the runner's store; written to the bucket once
    /// more, in the background).
    pub(crate) fn end(mut self) {
        if let Some(local) = &self.stores.local {
            local.release(&self.uris);
        }
        if let Some(task) = self.refreshing.take() {
            task.abort();
        }
        if let (Some(shared), false) = (self.stores.shared.clone(), self.uris.is_empty()) {
            let uris = std::mem::take(&mut self.uris);
            tokio::spawn(async move { refresh_all(&shared, &uris).await });
        }
    }
}

async fn refresh_all(shared: &SharedFiles, uris: &[String]) {
    for uri in uris {
        match shared.refresh(uri).await {
            Ok(true) => {}
            Ok(false) => tracing::debug!(%uri, "a kept session's file is gone from the bucket"),
            Err(e) => tracing::warn!(%uri, error = %e, "a kept session's file could not be written again"),
        }
    }
}
