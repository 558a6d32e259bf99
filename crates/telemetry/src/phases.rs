//! The phases of one fresh-container cell at the sandbox-runner, each timed
//! into `codemode_cell_phase_seconds{phase}`.
//!
//! A cell's end-to-end time says how slow it was; these say where the time
//! went: taking a warm container (or starting a cold one), writing the cell
//! into the container, the first line back, the run until `done`, making
//! sure the code can do nothing more (the runner's exit seen, or the
//! container killed), and, off the cell's path, removing the container and
//! starting the warm pool's replacement. Kept in a module of its own so the
//! metric families of the rest of the crate stay as they are; the histogram
//! is registered into the process-wide registry with the others.
//!
//! Beside the phases, the same module times the host's share of each tool
//! call a cell makes (`codemode_tool_call_host_seconds`: from the runner
//! reading the `call` line to it writing the `result` line), so that the
//! call's time as the code sees it splits into the host side (runner, bus,
//! bridge, wrapped server) and the container's side (the engine's attach
//! stream both ways and the runner inside the container); and the warm
//! pool's demand-following state (`codemode_warm_pool_target`,
//! `codemode_warm_pool_takes_total`).

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

/// Buckets of a phase, in seconds: a warm take or a delivery takes tens of
/// microseconds, a cold start or a removal hundreds of milliseconds, a
/// cell's run up to its deadline.
const PHASE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 90.0,
];

/// One phase of a fresh-container cell at the sandbox-runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Taking a ready container from the warm pool (the request to the pool
    /// actor and its answer).
    Take,
    /// Starting a container on the cell's path (no warm one was there):
    /// create, attach, start, wait for `ready`.
    ColdStart,
    /// Writing the cell message into the container's stdin.
    Deliver,
    /// From delivery to the first protocol line back (output, a call or
    /// `done`): the runner reading the cell, building the globals, compiling
    /// and starting the code.
    FirstOutput,
    /// From delivery to the end of the run (`done`, the deadline, a
    /// violation, the container's death, shutdown).
    Done,
    /// From the end of the run until the code can do nothing more: the
    /// runner's process seen gone, or the container killed. The report
    /// goes back after this phase.
    Kill,
    /// Removing the container (engine call), off the cell's path.
    Remove,
    /// Starting one warm-pool container until its `ready`, off the cell's
    /// path.
    Refill,
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 8] = [
        Phase::Take,
        Phase::ColdStart,
        Phase::Deliver,
        Phase::FirstOutput,
        Phase::Done,
        Phase::Kill,
        Phase::Remove,
        Phase::Refill,
    ];

    /// The `phase` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Take => "take",
            Phase::ColdStart => "cold_start",
            Phase::Deliver => "deliver",
            Phase::FirstOutput => "first_output",
            Phase::Done => "done",
            Phase::Kill => "kill",
            Phase::Remove => "remove",
            Phase::Refill => "refill",
        }
    }
}

/// The histogram family `codemode_cell_phase_seconds{phase}`, not yet
/// registered anywhere.
pub fn new_phase_histogram() -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(
            "codemode_cell_phase_seconds",
            "Time of one phase of a fresh-container cell at the sandbox-runner (take, cold_start, deliver, \
             first_output, done, kill, remove, refill).",
        )
        .buckets(PHASE_BUCKETS.to_vec()),
        &["phase"],
    )
    .expect("valid metric")
}

static PHASES: LazyLock<HistogramVec> = LazyLock::new(new_phase_histogram);

/// `codemode_tool_call_host_seconds`: the host's share of one tool call.
static CALL_HOST: LazyLock<Histogram> = LazyLock::new(|| {
    Histogram::with_opts(
        HistogramOpts::new(
            "codemode_tool_call_host_seconds",
            "Host side of one tool call of a cell at the sandbox-runner: from reading the call line off the \
             container's stream to writing the result line into it (the bus, the bridge and the wrapped server \
             included).",
        )
        .buckets(PHASE_BUCKETS.to_vec()),
    )
    .expect("valid metric")
});

/// `codemode_warm_pool_target`: containers the warm pool aims to keep.
static POOL_TARGET: LazyLock<IntGauge> = LazyLock::new(|| {
    IntGauge::new(
        "codemode_warm_pool_target",
        "Containers the warm pool aims to keep ready now: its floor, raised by the recent arrival rate of cells \
         times the time a refill takes, at most its ceiling.",
    )
    .expect("valid metric")
});

/// `codemode_warm_pool_takes_total{result}`: cells that asked the pool.
static POOL_TAKES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    IntCounterVec::new(
        Opts::new(
            "codemode_warm_pool_takes_total",
            "Fresh-container cells that asked the warm pool for a container: warm (one was ready) or empty (none \
             was: the cell waited for a cold start).",
        ),
        &["result"],
    )
    .expect("valid metric")
});

/// Register the process-wide phase histogram and the other families of this
/// module into `registry` (the process-wide metrics do this once), every
/// phase's and take result's series starting empty.
pub(crate) fn register(registry: &Registry) {
    for phase in Phase::ALL {
        PHASES.with_label_values(&[phase.as_str()]);
    }
    for result in ["warm", "empty"] {
        POOL_TAKES.with_label_values(&[result]);
    }
    registry.register(Box::new(PHASES.clone())).expect("the phase histogram is registered once");
    registry.register(Box::new(CALL_HOST.clone())).expect("the call histogram is registered once");
    registry.register(Box::new(POOL_TARGET.clone())).expect("the pool target is registered once");
    registry.register(Box::new(POOL_TAKES.clone())).expect("the pool takes are registered once");
}

/// The host's share of one tool call took `elapsed`.
pub fn tool_call_host(elapsed: Duration) {
    let _ = crate::metrics();
    CALL_HOST.observe(elapsed.as_secs_f64());
}

/// Tool calls timed on the host so far in this process, and their sum in
/// seconds (for tests and the load test's breakdown).
pub fn tool_call_host_totals() -> (u64, f64) {
    (CALL_HOST.get_sample_count(), CALL_HOST.get_sample_sum())
}

/// Tool calls the bridge of this process decided so far, and the seconds
/// it spent on them (`codemode_tool_call_duration_seconds` over every
/// label), for the load test's breakdown of a call.
pub fn bridge_call_totals() -> (u64, f64) {
    use prometheus::core::Collector;
    let mut totals = (0, 0.0);
    for family in crate::metrics().tool_call_duration.collect() {
        for metric in family.get_metric() {
            let h = metric.get_histogram();
            totals.0 += h.get_sample_count();
            totals.1 += h.get_sample_sum();
        }
    }
    totals
}

/// The warm pool aims to keep `n` containers ready.
pub fn set_warm_pool_target(n: usize) {
    let _ = crate::metrics();
    POOL_TARGET.set(i64::try_from(n).unwrap_or(i64::MAX));
}

/// A cell asked the warm pool: `warm` when it got a ready container.
pub fn warm_pool_take(warm: bool) {
    let _ = crate::metrics();
    POOL_TAKES.with_label_values(&[if warm { "warm" } else { "empty" }]).inc();
}

/// Cells that found the warm pool empty and that got a warm container,
/// so far in this process (for tests and the load test).
pub fn warm_pool_takes() -> (u64, u64) {
    (POOL_TAKES.with_label_values(&["empty"]).get(), POOL_TAKES.with_label_values(&["warm"]).get())
}

/// One `phase` of a cell took `elapsed`.
pub fn cell_phase(phase: Phase, elapsed: Duration) {
    // Touch the process-wide metrics so the histogram is in the registry
    // `/metrics` renders, whoever records first.
    let _ = crate::metrics();
    PHASES.with_label_values(&[phase.as_str()]).observe(elapsed.as_secs_f64());
}

/// Observations of `phase` so far in this process, and their sum in
/// seconds (for tests and the load test's breakdown).
pub fn phase_totals(phase: Phase) -> (u64, f64) {
    let h = PHASES.with_label_values(&[phase.as_str()]);
    (h.get_sample_count(), h.get_sample_sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_is_rendered_by_the_process_metrics_and_a_recorded_one_is_counted() {
        let before = phase_totals(Phase::Deliver).0;
        cell_phase(Phase::Deliver, Duration::from_micros(40));
        assert_eq!(phase_totals(Phase::Deliver).0, before + 1);
        let calls = tool_call_host_totals().0;
        tool_call_host(Duration::from_micros(900));
        assert_eq!(tool_call_host_totals().0, calls + 1);
        let (empty, warm) = warm_pool_takes();
        warm_pool_take(false);
        assert_eq!(warm_pool_takes(), (empty + 1, warm));
        let text = crate::metrics().render();
        assert!(text.contains("# TYPE codemode_cell_phase_seconds histogram"), "{text}");
        for phase in Phase::ALL {
            let series = format!("codemode_cell_phase_seconds_count{{phase=\"{}\"}}", phase.as_str());
            assert!(text.contains(&series), "no {series} in\n{text}");
        }
        for series in [
            "codemode_tool_call_host_seconds_count",
            "codemode_warm_pool_target",
            "codemode_warm_pool_takes_total{result=\"warm\"}",
            "codemode_warm_pool_takes_total{result=\"empty\"}",
        ] {
            assert!(text.contains(series), "no {series} in\n{text}");
        }
    }
}
