//! The options of files out of cells (`serve`, and `frontend` and
//! `sandbox-runner` over NATS; issue 42): how long the files a cell writes
//! to `/tmp/out` stay readable by the client.

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
}

impl FilesArgs {
    /// `config` keeping files in memory for `--files-ttl`.
    pub fn apply(&self, config: &mut code_mode_mcp_frontend::FrontendConfig) {
        config.files = Some(code_mode_core::files::FileStore::with_ttl(self.files_ttl));
    }

    /// Over NATS: the bucket the runners hand files to and the frontends
    /// read them from (created with `replicas`, entries kept `--files-ttl`);
    /// `None`, saying so, for a NATS user without the bucket (files out
    /// are then not handed out, and each report says so).
    pub async fn shared(
        &self,
        transport: &code_mode_core::nats::NatsTransport,
        replicas: usize,
        service: &str,
    ) -> Option<code_mode_core::files_shared::SharedFiles> {
        use code_mode_core::files_shared::{DEFAULT_MAX_BYTES, SharedFiles};
        match SharedFiles::open(transport.client().clone(), replicas, self.files_ttl, DEFAULT_MAX_BYTES).await {
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
