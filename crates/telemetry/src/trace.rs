//! Traces: OpenTelemetry spans of a cell and its tool calls across the
//! services, W3C trace context beside each bus message, and the OTLP export.
//!
//! What this module owns:
//! - the **span vocabulary** ([`cell_span`], [`cell_run_span`],
//!   [`tool_call_span`], [`wrapped_call_span`], [`ended`]): every exported
//!   span is made here, under the one target [`TARGET`], with the
//!   attributes listed in `docs/tracing.md` and nothing else. The export
//!   layer sees only spans of that target, so no other span of the code
//!   base (some carry session ids or identities for the logs) and no log
//!   event ever leaves the process as telemetry;
//! - the **propagation** ([`TraceHeaders`], [`within`]): the current
//!   context as `traceparent`/`tracestate` headers of a bus request, and
//!   the remote parent a responder runs its handler under, so spans of
//!   several processes form one trace;
//! - the **export** ([`layer`]): an OTLP exporter over HTTP (protobuf),
//!   and a console one writing each span as a line on stderr
//!   (`OTEL_TRACES_EXPORTER=console`, [`crate::console_spans`]), configured
//!   by the standard `OTEL_*` variables, and its [`Tracing`] guard, which
//!   flushes and shuts the provider down on a graceful stop.
//!
//! Without `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`), or with
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`, there is no
//! layer: the span helpers make disabled spans (one callsite check each)
//! and the headers stay empty.

use std::future::Future;
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The `tracing` target of every span this module makes, and the only one
/// the export layer sees.
pub const TARGET: &str = "code_mode::trace";

/// The W3C header naming the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header carrying vendors' trace state.
pub const TRACESTATE: &str = "tracestate";

/// How long a graceful stop waits for the last spans to be exported.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Why traces are not exported although the variables ask for it.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A protocol this build does not speak (gRPC, JSON).
    #[error("{var}={value:?}: this build exports traces over http/protobuf only")]
    Protocol {
        /// The variable that asked for it.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// An exporter this build does not have (`OTEL_TRACES_EXPORTER`).
    #[error(
        "OTEL_TRACES_EXPORTER={0:?}: this build exports traces with otlp (to a collector) or console (to stderr) only"
    )]
    Exporter(String),
    /// The exporter could not be built (a malformed endpoint, say).
    #[error("the OTLP trace exporter: {0}")]
    Otlp(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The trace context that travels beside a bus message: `traceparent` and,
/// when set, `tracestate`. Empty when nothing is traced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceHeaders {
    pairs: Vec<(String, String)>,
}

impl TraceHeaders {
    /// The current context (the entered span's, or a remote parent this
    /// task runs [`within`]) as headers; empty when there is none.
    pub fn current() -> Self {
        let mut headers = Self::default();
        TraceContextPropagator::new().inject_context(&opentelemetry::Context::current(), &mut headers);
        headers
    }

    /// Headers received with a message: only the two trace-context headers
    /// are kept (lower-cased names), the rest is not ours.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let pairs = pairs
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
            .filter(|(k, _)| k == TRACEPARENT || k == TRACESTATE)
            .collect();
        Self { pairs }
    }

    /// The headers, name and value.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// True when there is no trace context.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The remote parent these headers name (an empty context when they
    /// name none or are malformed: the handler's spans start a new trace).
    pub fn parent(&self) -> opentelemetry::Context {
        TraceContextPropagator::new().extract_with_context(&opentelemetry::Context::new(), self)
    }
}

impl Injector for TraceHeaders {
    fn set(&mut self, key: &str, value: String) {
        let key = key.to_ascii_lowercase();
        self.pairs.retain(|(k, _)| *k != key);
        // An empty `tracestate` says nothing: not sent.
        if !value.is_empty() {
            self.pairs.push((key, value));
        }
    }
}

impl Extractor for TraceHeaders {
    fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.pairs.iter().map(|(k, _)| k.as_str()).collect()
    }
}

/// Run `work` under the remote parent `headers` name: a span it makes
/// without a parent of its own is that parent's child, and the requests it
/// sends carry the context on. Headers naming nothing give an empty
/// context, so a request's handler never inherits another's.
pub fn within<F: Future>(headers: &TraceHeaders, work: F) -> opentelemetry::context::WithContext<F> {
    opentelemetry::context::FutureExt::with_context(work, headers.parent())
}

/// The frontend's span of one `run_python` cell: the root of its trace.
pub fn cell_span(cell_id: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "cell",
        otel.kind = "server",
        cell.id = cell_id,
        outcome = Empty,
        error.kind = Empty,
    )
}

/// The sandbox-runner's span of one cell (`kept`: in a session's kept
/// container), from its lease to its report, under the frontend's `cell`.
pub fn cell_run_span(cell_id: &str, kept: bool) -> Span {
    tracing::info_span!(
        target: TARGET,
        "cell.run",
        otel.kind = "server",
        cell.id = cell_id,
        kept,
        outcome = Empty,
        error.kind = Empty,
    )
}

/// The bridge's span of one call through its checks (`op`: the MCP method,
/// `tools/call` for a tool), under the runner's `cell.run`. The server
/// and tool are recorded once the catalog has named them ([`tool_named`]),
/// never as the code spelled an unknown name.
pub fn tool_call_span(cell_id: &str, call_index: u64, op: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "tool_call",
        otel.kind = "server",
        cell.id = cell_id,
        call.index = call_index,
        op,
        server = Empty,
        tool = Empty,
        outcome = Empty,
        error.kind = Empty,
    )
}

/// Record on a [`tool_call_span`] which server and tool the catalog found
/// (`<none>`/`<unknown>` for a name it lacks, as the metrics do).
pub fn tool_named(span: &Span, server: &str, tool: &str) {
    span.record("server", server);
    span.record("tool", tool);
}

/// The bridge's span of the call to the wrapped server itself, under its
/// `tool_call`.
pub fn wrapped_call_span(server: &str, tool: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "wrapped_call",
        otel.kind = "client",
        server,
        tool,
        outcome = Empty,
        error.kind = Empty,
    )
}

/// Record how the work of `span` ended: `outcome` a fixed word (`ok`,
/// `refused`, `error`, ...), `error_kind` a fault's type name, which also
/// marks the span's status as an error. Never a message: messages may
/// quote arguments.
pub fn ended(span: &Span, outcome: &str, error_kind: Option<&str>) {
    span.record("outcome", outcome);
    if let Some(kind) = error_kind {
        span.record("error.kind", kind);
        span.set_status(Status::error(kind.to_string()));
    }
}

/// What the `OTEL_*` variables ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// `service.name` of this process's resource.
    pub service_name: String,
    /// Send the spans over OTLP to the endpoint of the variables.
    pub otlp: bool,
    /// Write each span as one line on stderr ([`crate::console_spans`]).
    pub console: bool,
}

/// Read the standard variables (`env` looks one up): `None` when nothing
/// is to be exported (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`,
/// or no OTLP endpoint and no `console` exporter), an error for a protocol
/// other than `http/protobuf` or an exporter other than `otlp` and
/// `console`. `OTEL_TRACES_EXPORTER` is a comma-separated list (`otlp` when
/// unset); `otlp` needs an endpoint. `OTEL_SERVICE_NAME` overrides
/// `default_service`.
pub fn export_settings(
    env: impl Fn(&str) -> Option<String>,
    default_service: &str,
) -> Result<Option<Export>, TraceError> {
    let set = |var: &str| env(var).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let exporters: Vec<String> = set("OTEL_TRACES_EXPORTER")
        .unwrap_or_else(|| "otlp".into())
        .split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .collect();
    if exporters.iter().any(|e| e == "none") {
        return Ok(None);
    }
    if let Some(other) = exporters.iter().find(|e| *e != "otlp" && *e != "console") {
        return Err(TraceError::Exporter(other.clone()));
    }
    let console = exporters.iter().any(|e| e == "console");
    let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some() || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    let otlp = endpoint && exporters.iter().any(|e| e == "otlp");
    if !otlp && !console {
        return Ok(None);
    }
    if otlp {
        for var in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(value) = set(var) {
                if value != "http/protobuf" {
                    return Err(TraceError::Protocol { var, value });
                }
                break;
            }
        }
    }
    let service_name = set("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_string());
    Ok(Some(Export { service_name, otlp, console }))
}

/// The tracer provider of this process, while traces are exported: flushed
/// and shut down by [`Tracing::shutdown`] (or on drop) so that the spans of
/// the last moments reach the collector.
#[derive(Debug, Default)]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Tracing {
    /// True when spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Export what is pending and stop (waits at most a few seconds; call
    /// it outside the async runtime or from a blocking task).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown_with_timeout(SHUTDOWN_WAIT)
        {
            tracing::warn!(error = %e, "the last spans may not have been exported");
        }
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The layer that exports this module's spans, when the variables ask for
/// it (see [`export_settings`]), and the guard of its provider. The OTLP
/// exporter sends batches (`OTEL_BSP_SCHEDULE_DELAY`, default 5 s) from a
/// thread of its own with reqwest's blocking client (TLS: rustls with
/// ring); the console one writes each span on stderr as it ends.
#[allow(clippy::type_complexity)]
pub fn layer<S>(default_service: &str) -> Result<(Option<impl Layer<S>>, Tracing), TraceError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(export) = export_settings(|var| std::env::var(var).ok(), default_service)? else {
        return Ok((None, Tracing::default()));
    };
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(export.service_name).build();
    let mut provider = SdkTracerProvider::builder().with_resource(resource);
    if export.otlp {
        // reqwest's rustls takes the process-wide provider: ring, as NATS's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter =
            opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary).build()?;
        provider = provider.with_batch_exporter(exporter);
    }
    if export.console {
        // Each span as it ends: a person reads them as they come.
        provider = provider.with_simple_exporter(crate::console_spans::ConsoleExporter::default());
    }
    let provider = provider.build();
    let tracer = provider.tracer("code-mode");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| meta.is_span() && meta.target() == TARGET));
    Ok((Some(layer), Tracing { provider: Some(provider) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn traces_are_exported_only_when_an_endpoint_is_set_and_the_sdk_is_not_disabled() {
        assert_eq!(export_settings(env(&[]), "svc").unwrap(), None);
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let on = export_settings(env(&[endpoint]), "svc").unwrap().expect("exported");
        assert_eq!(on.service_name, "svc");
        let traces_only = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")];
        assert!(export_settings(env(&traces_only), "svc").unwrap().is_some());
        assert_eq!(export_settings(env(&[endpoint, ("OTEL_SDK_DISABLED", "true")]), "svc").unwrap(), None);
        assert_eq!(export_settings(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]), "svc").unwrap(), None);
        let named = export_settings(env(&[endpoint, ("OTEL_SERVICE_NAME", "edge")]), "svc").unwrap().unwrap();
        assert_eq!(named.service_name, "edge");
        assert!(named.otlp && !named.console);
    }

    #[test]
    fn the_console_exporter_needs_no_endpoint_and_an_unknown_exporter_is_refused_by_name() {
        let console = export_settings(env(&[("OTEL_TRACES_EXPORTER", "console")]), "svc").unwrap().unwrap();
        assert!(console.console && !console.otlp, "{console:?}");
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let both =
            export_settings(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "otlp, console")]), "svc").unwrap().unwrap();
        assert!(both.console && both.otlp, "{both:?}");
        // A console exporter does not care for the OTLP protocol.
        let grpc = ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
        assert!(export_settings(env(&[grpc, ("OTEL_TRACES_EXPORTER", "console")]), "svc").unwrap().is_some());
        let err = export_settings(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]), "svc").unwrap_err();
        assert!(matches!(&err, TraceError::Exporter(e) if e == "zipkin"), "{err}");
        assert_eq!(export_settings(env(&[("OTEL_TRACES_EXPORTER", "console,none")]), "svc").unwrap(), None);
    }

    #[test]
    fn a_protocol_other_than_http_protobuf_is_refused_by_name() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let proto = ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
        assert!(export_settings(env(&[endpoint, proto]), "svc").unwrap().is_some());
        let grpc = ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
        let err = export_settings(env(&[endpoint, grpc]), "svc").unwrap_err();
        assert!(matches!(err, TraceError::Protocol { var: "OTEL_EXPORTER_OTLP_PROTOCOL", .. }), "{err}");
        // The signal's own variable wins over the general one.
        let own = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf");
        assert!(export_settings(env(&[endpoint, grpc, own]), "svc").unwrap().is_some());
    }

    #[test]
    fn headers_carry_only_the_trace_context_and_a_remote_parent_round_trips() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let received = TraceHeaders::from_pairs([("Traceparent", parent), ("authorization", "Bearer x")]);
        assert_eq!(received.iter().collect::<Vec<_>>(), vec![(TRACEPARENT, parent)]);
        let cx = received.parent();
        let _attached = cx.attach();
        let sent = TraceHeaders::current();
        let sent: Vec<_> = sent.iter().collect();
        assert_eq!(sent, vec![(TRACEPARENT, parent)], "the remote parent is passed on as it came");
        use opentelemetry::trace::TraceContextExt;
        let garbage = TraceHeaders::from_pairs([("traceparent", "garbage")]).parent();
        assert!(!garbage.span().span_context().is_valid(), "a malformed parent starts a new trace");
    }

    #[test]
    fn without_a_trace_the_headers_are_empty() {
        assert!(TraceHeaders::current().is_empty());
    }
}
