//! Telemetry of the code-mode services: the Prometheus metrics every service
//! records, and the small HTTP server that exposes them.
//!
//! - [`metrics`]: the metric definitions, held in one registry, and the
//!   recording functions the services call at their end points
//!   ([`cell_ended`], [`cell_ended_without_run`], [`tool_call`], [`bus_request_error`],
//!   [`container_started`], [`containers_reaped`], [`container_removed`],
//!   [`set_warm_pool_size`], [`frontend_cell`], [`approval_answered`],
//!   [`server_exited`], [`state_store_call`], [`session_taint`], [`search_meaning`],
//!   [`audit_write`], ...). `docs/metrics.md` lists every metric, and
//!   `deploy/prometheus/alerts.yml` and `deploy/grafana/` use them.
//! - [`phases`]: `codemode_cell_phase_seconds{phase}`, where a cell's
//!   time at the sandbox-runner goes ([`cell_phase`]); the host's share of
//!   each tool call ([`tool_call_host`]); the warm pool's target and takes
//!   ([`set_warm_pool_target`], [`warm_pool_take`]).
//! - [`server`]: the actix-web server answering `GET /metrics` (the text
//!   exposition format), `GET /healthz` (`{"service": ..., "ok": true}`,
//!   with `"ready"` and each registered component's detail, such as an
//!   OAuth issuer's keys) and `GET /readyz` (the same body, 503 until every
//!   component is ready), started on a configured address and stopped by a
//!   cancellation token.
//! - [`scrape`]: a raw-socket HTTP GET and a parser of the exposition
//!   format, for whatever scrapes a live service: the load-test binary
//!   (`code-mode-loadtest clients --metrics`) and the tests.
//! - [`trace`]: OpenTelemetry spans of a cell and its calls, their W3C
//!   context beside each bus message, and the OTLP export when the
//!   standard `OTEL_*` variables ask for it (`docs/tracing.md`).
//!
//! # One explicit registry, process-wide
//!
//! The metrics live in an explicit [`prometheus::Registry`] owned by a
//! process-wide [`Metrics`] (reached through [`metrics()`]), not in the
//! `prometheus` crate's global default registry:
//!
//! - `/metrics` shows exactly the documented set: nothing a dependency
//!   happens to register in the default registry leaks into the scrape or
//!   collides with our names.
//! - The services record through free functions, so no constructor of the
//!   bridge, the sandbox-runner or the bus grows a metrics parameter, and
//!   the recording lines stay one call at each end point.
//!
//! A registry per service would buy nothing: in the all-in-one mode
//! (`code-mode serve`) the three services share one process and one
//! `/metrics`, and every metric belongs to exactly one service by its name
//! (cells and containers: the sandbox-runner; tool calls: the bridge; bus
//! request errors carry the `subject`, which names the requester). So the
//! series carry no `service` label: when the services run apart, Prometheus
//! tells them apart by the scrape target (`job`, `instance`), and
//! `codemode_service_info{service}` says which service(s) a process runs.
//!
//! Tests that run several services (or several tests) in one process see
//! cumulative counters: they assert on the change between two scrapes and on
//! labels of their own, never on absolute values.

pub mod console_spans;
pub mod metrics;
pub mod phases;
pub mod scrape;
pub mod server;
pub mod trace;

pub use metrics::{
    ApprovalAnswer, CellOutcome, Decision, FrontendCellResult, Metrics, StateResult, approval_answered, audit_probed,
    audit_write, bus_request, bus_request_error, cell_ended, cell_ended_without_run, container_removed,
    container_started, containers_reaped, frontend_cell, metrics, policy_decision, search_meaning, server_exited,
    server_up, session_taint, set_runner_capacity, set_runner_cells_running, set_warm_pool_size, state_store_call,
    tool_call, upstream_account,
};
pub use phases::{Phase, cell_phase, set_warm_pool_target, tool_call_host, warm_pool_take};
pub use server::{MetricsServer, TelemetryError};
