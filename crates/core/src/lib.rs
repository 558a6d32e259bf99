//! Shared plumbing of the code-mode services: the request/reply [`bus`] and
//! its [`nats`] transport, cell [`lease`]s, the root [`shutdown`] token, the per-session [`state`] store, logging and trace-export setup and
//! helpers for tests that need real infrastructure ([`testing`]).

pub mod bus;
pub mod calendar;
pub mod defaults;
pub mod error;
pub mod files;
pub mod files_in_shared;
pub mod files_shared;
pub mod lease;
pub mod nats;
pub mod reports;
pub mod shutdown;
pub mod state;
pub mod sync;
pub mod text;
pub mod time;
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

/// [`init_logging`], and the export of traces when the standard `OTEL_*`
/// variables ask for it (`docs/tracing.md`; `service` is this process's
/// `service.name` unless `OTEL_SERVICE_NAME` names another). The log
/// lines are as without traces: `RUST_LOG` filters them alone, and the
/// trace spans (their own target) never show in them. Keep the returned
/// guard until the process stops: [`code_mode_telemetry::trace::Tracing::shutdown`]
/// exports the last spans. Variables that cannot be honoured are logged
/// as a warning and nothing is exported.
pub fn init_logging_and_traces(default_filter: &str, service: &str) -> code_mode_telemetry::trace::Tracing {
    use code_mode_telemetry::trace;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer, filter};
    let logs = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let logs = filter::FilterExt::and(logs, filter::filter_fn(|meta| meta.target() != trace::TARGET));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false).with_filter(logs);
    let (spans, guard, refused) = match trace::layer(service) {
        Ok((layer, guard)) => (layer, guard, None),
        Err(e) => (None, trace::Tracing::default(), Some(e)),
    };
    let _ = tracing_subscriber::registry().with(fmt).with(spans).try_init();
    if let Some(e) = refused {
        tracing::warn!(error = %e, "traces are not exported");
    }
    guard
}
