//! Shared plumbing of the code-mode services: the request/reply [`bus`] and
//! its [`nats`] transport, cell [`lease`]s, the root [`shutdown`] token, the per-session [`state`] store, logging setup and
//! helpers for tests that need real infrastructure ([`testing`]).

pub mod bus;
pub mod calendar;
pub mod defaults;
pub mod error;
pub mod lease;
pub mod nats;
pub mod shutdown;
pub mod state;
pub mod sync;
// Harnesses of real infrastructure for tests (the `testing` feature, which
// the workspace's dev-dependencies enable): never in a release build.
#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// Send `tracing` output to stderr: stdout is the MCP channel of a stdio
/// server and must carry nothing else. `RUST_LOG` sets the filter.
pub fn init_logging(default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}
