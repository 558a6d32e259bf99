//! The options of files out of cells (`serve`, and `frontend` and
//! `sandbox-runner` over NATS; issue 42): how long the files a cell writes
//! to `/tmp/out` stay readable by the client, and how many bytes of them
//! the host (over NATS: the bucket `codemode_files`) keeps in all and per
//! identity.

use std::time::Duration;

use clap::Args;

use crate::ranges;

/// How long cells' files out are kept.
#[derive(Debug, Args)]
pub struct FilesArgs {
    /// How long a file a cell wrote to /tmp/out (or its whole output when
    /// the kept output was cut) stays readable with resources/read, in
    /// seconds; only the identity that ran the cell reads it, then it is
    /// gone (0.001 to 86400).
    #[arg(long, default_value = "3600", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub files_ttl: Duration,
    /// Bytes of files out kept at once in all: in memory under serve; over
    /// NATS the bucket codemode_files's max bytes, set by the service that
    /// creates it (1048576 to 1099511627776).
    #[arg(long, default_value = "536870912", value_name = "BYTES", allow_hyphen_values = true,
          value_parser = ranges::FILES_BYTES.parser::<u64>())]
    pub files_max_bytes: u64,
    /// Bytes of files out one identity may have kept at once (across the
    /// bucket over NATS, whichever runner ran the cells); past it the
    /// cell's files stop with a line saying so (1 to 1099511627776).
    #[arg(long, default_value = "268435456", value_name = "BYTES", allow_hyphen_values = true,
          value_parser = ranges::FILES_QUOTA.parser::<u64>())]
    pub files_quota: u64,
}

impl FilesArgs {
    /// `config` keeping files in memory for `--files-ttl`.
    pub fn apply(&self, config: &mut code_mode_mcp_frontend::FrontendConfig) {
        config.files = Some(self.store());
    }

    /// A store in memory with these options' time and bounds.
    pub fn store(&self) -> code_mode_core::files::FileStore {
        code_mode_core::files::FileStore::new(self.files_ttl, self.files_max_bytes, self.files_quota)
    }

    /// Over NATS: the bucket the runners hand files to and the frontends
    /// read them from (created with `replicas`, entries kept `--files-ttl`,
    /// `--files-max-bytes` in all, `--files-quota` per identity);
    /// `None`, saying so, for a NATS user without the bucket (files out
    /// are then not handed out, and each report says so).
    pub async fn shared(
        &self,
        transport: &code_mode_core::nats::NatsTransport,
        replicas: usize,
        service: &str,
    ) -> Option<code_mode_core::files_shared::SharedFiles> {
        use code_mode_core::files_shared::SharedFiles;
        let client = transport.client().clone();
        let max_bytes = i64::try_from(self.files_max_bytes).unwrap_or(i64::MAX);
        match SharedFiles::open(client, replicas, self.files_ttl, max_bytes, self.files_quota).await {
            Ok(shared) => Some(shared),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "files out of cells are not handed out: grant the {service} NATS user the bucket \
                     codemode_files (deploy/nats-server.conf)"
                );
                None
            }
        }
    }
}

/// Over NATS, the bridge's end of the bucket files in past a reply's bound
/// go through to the runners (created with `replicas`); `None`, saying
/// so, for a NATS user without it (such files are then refused by the
/// NATS server's message bound).
pub async fn inputs_bucket(
    transport: &code_mode_core::nats::NatsTransport,
    replicas: usize,
) -> Option<code_mode_core::files_in_shared::SharedInputs> {
    use code_mode_core::files_in_shared::{INPUTS_BUCKET, SharedInputs};
    let created = SharedInputs::create(transport.client().clone(), replicas).await;
    opened(created, "files in", "bridge", INPUTS_BUCKET)
}

/// Over NATS, the frontend's end of the bucket inline files in too large
/// for the cell message go through to the runners (created with
/// `replicas`); `None`, saying so, for a NATS user without it (such cells
/// are then refused by the NATS server's message bound).
pub async fn inline_inputs_bucket(
    transport: &code_mode_core::nats::NatsTransport,
    replicas: usize,
) -> Option<code_mode_core::files_in_shared::SharedInputs> {
    use code_mode_core::files_in_shared::{INLINE_BUCKET, SharedInputs};
    let created = SharedInputs::create_inline(transport.client().clone(), replicas).await;
    opened(created, "inline files in", "frontend", INLINE_BUCKET)
}

/// The bucket of `files` the NATS `user` writes, or `None` after a warning
/// naming the grant it lacks.
fn opened(
    created: Result<code_mode_core::files_in_shared::SharedInputs, code_mode_core::files_in_shared::SharedInputsError>,
    files: &str,
    user: &str,
    bucket: &str,
) -> Option<code_mode_core::files_in_shared::SharedInputs> {
    created
        .map_err(|e| {
            tracing::warn!(
                error = %e,
                "{files} past the NATS message bound cannot reach the runners: grant the {user} NATS user the \
                 bucket {bucket} (deploy/nats-server.conf)"
            );
        })
        .ok()
}
