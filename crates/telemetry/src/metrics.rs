//! The metric definitions and the functions that record them.
//!
//! [`Metrics`] owns one [`Registry`] and every metric family registered in
//! it; [`metrics()`] is the process-wide instance the services record into
//! (see the crate documentation for why). The free functions are what the
//! services call, one line at each end point; they take typed outcomes
//! ([`CellOutcome`], [`Decision`]) or bounded label values, so an untrusted
//! input can never mint new series.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Buckets of a cell's duration, in seconds: a cell takes from tens of
/// milliseconds to its deadline (90 s by default).
const CELL_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 90.0, 120.0];
/// Buckets of a tool call's duration, in seconds: refusals take
/// microseconds, calls to the wrapped server up to its timeout (30 s).
const CALL_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// How one cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellOutcome {
    /// The code ran to its end without an error.
    Finished,
    /// The code ended with an error (an exception, or a stop the runner
    /// inside the sandbox reported, such as an output flood).
    Error,
    /// The run passed its deadline and was killed.
    Deadline,
    /// The sandbox broke the line protocol.
    Violation,
    /// The container died or closed its channel before `done`.
    Died,
    /// code-mode was shutting down.
    Shutdown,
    /// No container could be created or started for it (a Docker failure).
    StartFailed,
}

impl CellOutcome {
    /// Every outcome.
    pub const ALL: [CellOutcome; 7] = [
        CellOutcome::Finished,
        CellOutcome::Error,
        CellOutcome::Deadline,
        CellOutcome::Violation,
        CellOutcome::Died,
        CellOutcome::Shutdown,
        CellOutcome::StartFailed,
    ];

    /// The `outcome` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CellOutcome::Finished => "finished",
            CellOutcome::Error => "error",
            CellOutcome::Deadline => "deadline",
            CellOutcome::Violation => "violation",
            CellOutcome::Died => "died",
            CellOutcome::Shutdown => "shutdown",
            CellOutcome::StartFailed => "start_failed",
        }
    }
}

/// What the bridge decided about one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The call passed every check and the server answered with a result.
    Ok,
    /// The bridge refused it (a check failed, the tool failed, timed out or
    /// answered too much).
    Refused,
    /// The call failed on the host (protocol error, transport closed).
    Fault,
}

impl Decision {
    /// The `decision` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Ok => "ok",
            Decision::Refused => "refused",
            Decision::Fault => "fault",
        }
    }
}

/// Every metric of code-mode, registered in one registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    /// `codemode_cells_total{outcome}`.
    pub cells: IntCounterVec,
    /// `codemode_cell_duration_seconds{outcome}`.
    pub cell_duration: HistogramVec,
    /// `codemode_tool_calls_total{server, tool, decision}`.
    pub tool_calls: IntCounterVec,
    /// `codemode_tool_call_duration_seconds{server, tool, decision}`.
    pub tool_call_duration: HistogramVec,
    /// `codemode_policy_decisions_total{server, tool, decision}`.
    pub policy_decisions: IntCounterVec,
    /// `codemode_warm_pool_size`.
    pub warm_pool_size: IntGauge,
    /// `codemode_containers_started_total`.
    pub containers_started: IntCounter,
    /// `codemode_containers_removed_total{result}`.
    pub containers_removed: IntCounterVec,
    /// `codemode_containers_reaped_total`.
    pub containers_reaped: IntCounter,
    /// `codemode_bus_request_errors_total{subject, kind}`.
    pub bus_request_errors: IntCounterVec,
    /// `codemode_service_info{service, version}`.
    pub service_info: IntGaugeVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of metrics in a registry of its own. The services record
    /// into [`metrics()`]; a separate set is for tests of the rendering.
    pub fn new() -> Self {
        let registry = Registry::new();
        let cells = IntCounterVec::new(
            Opts::new("codemode_cells_total", "Cells run by this sandbox-runner, by how they ended."),
            &["outcome"],
        )
        .expect("valid metric");
        let cell_duration = HistogramVec::new(
            HistogramOpts::new(
                "codemode_cell_duration_seconds",
                "Time from sending the cell to its ready container until its end and the container's removal.",
            )
            .buckets(CELL_BUCKETS.to_vec()),
            &["outcome"],
        )
        .expect("valid metric");
        let tool_calls = IntCounterVec::new(
            Opts::new("codemode_tool_calls_total", "Tool calls the bridge decided, by server, tool and decision."),
            &["server", "tool", "decision"],
        )
        .expect("valid metric");
        let tool_call_duration = HistogramVec::new(
            HistogramOpts::new(
                "codemode_tool_call_duration_seconds",
                "Time the bridge spent on one tool call: checks plus the wrapped server's answer.",
            )
            .buckets(CALL_BUCKETS.to_vec()),
            &["server", "tool", "decision"],
        )
        .expect("valid metric");
        let policy_decisions = IntCounterVec::new(
            Opts::new(
                "codemode_policy_decisions_total",
                "Decisions of the tool policies on calls, by server, tool and decision (one per audit line).",
            ),
            &["server", "tool", "decision"],
        )
        .expect("valid metric");
        let warm_pool_size =
            IntGauge::new("codemode_warm_pool_size", "Started containers waiting in the warm pool for a cell.")
                .expect("valid metric");
        let containers_started =
            IntCounter::new("codemode_containers_started_total", "Sandbox containers created and started.")
                .expect("valid metric");
        let containers_removed = IntCounterVec::new(
            Opts::new("codemode_containers_removed_total", "Removals of this process's own sandbox containers."),
            &["result"],
        )
        .expect("valid metric");
        let containers_reaped = IntCounter::new(
            "codemode_containers_reaped_total",
            "Sandbox containers left by a dead owner process and removed at start.",
        )
        .expect("valid metric");
        let bus_request_errors = IntCounterVec::new(
            Opts::new("codemode_bus_request_errors_total", "Bus requests that got no reply, by subject and kind."),
            &["subject", "kind"],
        )
        .expect("valid metric");
        let service_info = IntGaugeVec::new(
            Opts::new("codemode_service_info", "1 for each code-mode service this process runs."),
            &["service", "version"],
        )
        .expect("valid metric");
        let metrics = Self {
            registry,
            cells,
            cell_duration,
            tool_calls,
            tool_call_duration,
            policy_decisions,
            warm_pool_size,
            containers_started,
            containers_removed,
            containers_reaped,
            bus_request_errors,
            service_info,
        };
        metrics.register_all();
        // Series whose label values are known start at 0, so a rate over
        // them is defined from the first scrape and their absence means
        // nothing but "no such process".
        for outcome in CellOutcome::ALL {
            metrics.cells.with_label_values(&[outcome.as_str()]);
        }
        for result in ["removed", "failed"] {
            metrics.containers_removed.with_label_values(&[result]);
        }
        metrics
    }

    fn register_all(&self) {
        let collectors: [Box<dyn prometheus::core::Collector>; 11] = [
            Box::new(self.cells.clone()),
            Box::new(self.cell_duration.clone()),
            Box::new(self.tool_calls.clone()),
            Box::new(self.tool_call_duration.clone()),
            Box::new(self.policy_decisions.clone()),
            Box::new(self.warm_pool_size.clone()),
            Box::new(self.containers_started.clone()),
            Box::new(self.containers_removed.clone()),
            Box::new(self.containers_reaped.clone()),
            Box::new(self.bus_request_errors.clone()),
            Box::new(self.service_info.clone()),
        ];
        for c in collectors {
            self.registry.register(c).expect("each metric is registered once");
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Everything in the text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("the text encoder writes to memory");
        String::from_utf8(out).expect("the text exposition is UTF-8")
    }

    /// Say that this process runs `service`.
    pub fn set_service(&self, service: &str) {
        self.service_info.with_label_values(&[service, env!("CARGO_PKG_VERSION")]).set(1);
    }
}

/// The metrics of this process.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// A cell ended with `outcome` after `elapsed`.
pub fn cell_ended(outcome: CellOutcome, elapsed: Duration) {
    let m = metrics();
    m.cells.with_label_values(&[outcome.as_str()]).inc();
    m.cell_duration.with_label_values(&[outcome.as_str()]).observe(elapsed.as_secs_f64());
}

/// A cell ended with `outcome` before it ran in a ready container (its
/// container never became ready, could not start, or shutdown came first):
/// counted, but not timed.
pub fn cell_ended_without_run(outcome: CellOutcome) {
    metrics().cells.with_label_values(&[outcome.as_str()]).inc();
}

/// The bridge decided a call of `tool` on `server` after `elapsed`. Pass
/// names from the catalog only (a name the code made up must not become a
/// label value): the bridge uses `<none>` / `<unknown>` for those.
pub fn tool_call(server: &str, tool: &str, decision: Decision, elapsed: Duration) {
    let m = metrics();
    let labels = [server, tool, decision.as_str()];
    m.tool_calls.with_label_values(&labels).inc();
    m.tool_call_duration.with_label_values(&labels).observe(elapsed.as_secs_f64());
}

/// A policy decided a call of `tool` on `server` (`decision` is one of the
/// audit log's fixed words; names come from the catalog).
pub fn policy_decision(server: &str, tool: &str, decision: &str) {
    metrics().policy_decisions.with_label_values(&[server, tool, decision]).inc();
}

/// A bus request on `subject` failed with `kind` (a fixed word per error).
pub fn bus_request_error(subject: &str, kind: &'static str) {
    metrics().bus_request_errors.with_label_values(&[subject, kind]).inc();
}

/// A sandbox container was created and started.
pub fn container_started() {
    metrics().containers_started.inc();
}

/// One of this process's own containers was removed (`ok`) or its removal
/// failed.
pub fn container_removed(ok: bool) {
    metrics().containers_removed.with_label_values(&[if ok { "removed" } else { "failed" }]).inc();
}

/// `n` containers left by dead owners were removed.
pub fn containers_reaped(n: usize) {
    metrics().containers_reaped.inc_by(n as u64);
}

/// The warm pool now holds `n` started containers.
pub fn set_warm_pool_size(n: usize) {
    metrics().warm_pool_size.set(i64::try_from(n).unwrap_or(i64::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_rendered_with_help_and_type_once_it_has_a_value() {
        let m = Metrics::new();
        m.cells.with_label_values(&["finished"]).inc();
        m.cell_duration.with_label_values(&["finished"]).observe(0.3);
        m.tool_calls.with_label_values(&["s", "t", "ok"]).inc();
        m.tool_call_duration.with_label_values(&["s", "t", "ok"]).observe(0.002);
        m.policy_decisions.with_label_values(&["s", "t", "denied"]).inc();
        m.warm_pool_size.set(3);
        m.containers_started.inc();
        m.containers_removed.with_label_values(&["removed"]).inc();
        m.containers_reaped.inc_by(2);
        m.bus_request_errors.with_label_values(&["codemode.v1.tool.call", "timeout"]).inc();
        m.set_service("bridge");
        let text = m.render();
        for name in [
            "codemode_cells_total",
            "codemode_cell_duration_seconds",
            "codemode_tool_calls_total",
            "codemode_tool_call_duration_seconds",
            "codemode_policy_decisions_total",
            "codemode_warm_pool_size",
            "codemode_containers_started_total",
            "codemode_containers_removed_total",
            "codemode_containers_reaped_total",
            "codemode_bus_request_errors_total",
            "codemode_service_info",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "no HELP for {name} in\n{text}");
            assert!(text.contains(&format!("# TYPE {name} ")), "no TYPE for {name} in\n{text}");
        }
        assert!(text.contains("codemode_cell_duration_seconds_bucket{outcome=\"finished\",le=\"0.5\"} 1"), "{text}");
        assert!(text.contains("codemode_containers_reaped_total 2"), "{text}");
    }
}
