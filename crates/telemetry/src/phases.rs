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

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, Registry};

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

/// Register the process-wide phase histogram into `registry` (the
/// process-wide metrics do this once), every phase's series starting empty.
pub(crate) fn register(registry: &Registry) {
    for phase in Phase::ALL {
        PHASES.with_label_values(&[phase.as_str()]);
    }
    registry.register(Box::new(PHASES.clone())).expect("the phase histogram is registered once");
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
        let text = crate::metrics().render();
        assert!(text.contains("# TYPE codemode_cell_phase_seconds histogram"), "{text}");
        for phase in Phase::ALL {
            let series = format!("codemode_cell_phase_seconds_count{{phase=\"{}\"}}", phase.as_str());
            assert!(text.contains(&series), "no {series} in\n{text}");
        }
    }
}
