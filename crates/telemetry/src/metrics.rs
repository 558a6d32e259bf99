//! The metric definitions and the functions that record them.
//!
//! [`Metrics`] owns one [`Registry`] and every metric family registered in
//! it; [`metrics()`] is the process-wide instance the services record into
//! (see the crate documentation for why). The free functions are what the
//! services call, one line at each end point; they take typed outcomes
//! ([`CellOutcome`], [`Decision`]) or bounded label values, so an untrusted
//! input can never mint new series.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
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
    /// The request that ran it was cancelled (or its client went away).
    Cancelled,
    /// No container could be created or started for it (a Docker failure).
    StartFailed,
}

impl CellOutcome {
    /// Every outcome.
    pub const ALL: [CellOutcome; 8] = [
        CellOutcome::Finished,
        CellOutcome::Error,
        CellOutcome::Deadline,
        CellOutcome::Violation,
        CellOutcome::Died,
        CellOutcome::Shutdown,
        CellOutcome::Cancelled,
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
            CellOutcome::Cancelled => "cancelled",
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

/// How the frontend's request for one cell ended, as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontendCellResult {
    /// A sandbox-runner answered with the cell's report (whatever the code
    /// did: its outcome is in `codemode_cells_total` of the runner).
    Reported,
    /// The code was over the size limit and was not sent.
    CodeTooLarge,
    /// Every runner declined it for lack of a free slot until the
    /// capacity wait passed.
    NoCapacity,
    /// Nobody serves cells (no sandbox-runner is connected).
    NoRunner,
    /// The runner that took it stopped answering (killed, crashed, cut off).
    RunnerLost,
    /// Any other failure (a runner's own error, the bus, the audit sink).
    Failed,
}

impl FrontendCellResult {
    /// Every result.
    pub const ALL: [FrontendCellResult; 6] = [
        FrontendCellResult::Reported,
        FrontendCellResult::CodeTooLarge,
        FrontendCellResult::NoCapacity,
        FrontendCellResult::NoRunner,
        FrontendCellResult::RunnerLost,
        FrontendCellResult::Failed,
    ];

    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FrontendCellResult::Reported => "reported",
            FrontendCellResult::CodeTooLarge => "code_too_large",
            FrontendCellResult::NoCapacity => "no_capacity",
            FrontendCellResult::NoRunner => "no_runner",
            FrontendCellResult::RunnerLost => "runner_lost",
            FrontendCellResult::Failed => "failed",
        }
    }
}

/// The answer to one approval question the bridge asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// The person accepted.
    Approved,
    /// The person declined.
    Declined,
    /// The person dismissed the question.
    Dismissed,
    /// Nobody answered within the approval timeout.
    TimedOut,
    /// Nobody could be asked (no client session, no elicitation support).
    Unavailable,
}

impl ApprovalAnswer {
    /// Every answer.
    pub const ALL: [ApprovalAnswer; 5] = [
        ApprovalAnswer::Approved,
        ApprovalAnswer::Declined,
        ApprovalAnswer::Dismissed,
        ApprovalAnswer::TimedOut,
        ApprovalAnswer::Unavailable,
    ];

    /// The `answer` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalAnswer::Approved => "approved",
            ApprovalAnswer::Declined => "declined",
            ApprovalAnswer::Dismissed => "dismissed",
            ApprovalAnswer::TimedOut => "timed_out",
            ApprovalAnswer::Unavailable => "unavailable",
        }
    }
}

/// The result of one call to the session-state store's backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateResult {
    /// It answered.
    Ok,
    /// A compare-and-set or create lost (the backend answered).
    Conflict,
    /// The backend answered that the key or value is invalid.
    Invalid,
    /// The backend could not be reached or did not answer in time.
    Unavailable,
}

impl StateResult {
    /// Every result.
    pub const ALL: [StateResult; 4] =
        [StateResult::Ok, StateResult::Conflict, StateResult::Invalid, StateResult::Unavailable];

    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            StateResult::Ok => "ok",
            StateResult::Conflict => "conflict",
            StateResult::Invalid => "invalid",
            StateResult::Unavailable => "unavailable",
        }
    }
}

/// A gauge that is absent from the scrape until it is first set.
///
/// A plain [`IntGauge`] is exported from the moment it is registered, at 0,
/// by every process, whether or not the process has the thing it measures:
/// a frontend would say `codemode_audit_sink_up 0` without any audit sink,
/// and an alert on `== 0` would fire on a healthy stack. This one is
/// registered like any metric (its name and help are reserved) but yields
/// no series until the component it measures sets it the first time; from
/// then on it is exported with its value for the life of the process.
#[derive(Debug, Clone)]
pub struct LazyGauge {
    gauge: IntGauge,
    set: Arc<AtomicBool>,
}

impl LazyGauge {
    fn new(name: &str, help: &str) -> Self {
        Self { gauge: IntGauge::new(name, help).expect("valid metric"), set: Arc::new(AtomicBool::new(false)) }
    }

    /// Set the value; the gauge is exported from now on.
    pub fn set(&self, value: i64) {
        self.gauge.set(value);
        self.set.store(true, Ordering::Release);
    }

    /// The value (0 while it was never set).
    pub fn get(&self) -> i64 {
        self.gauge.get()
    }

    /// Whether it was ever set, i.e. whether a scrape shows it.
    pub fn is_exported(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }
}

impl Collector for LazyGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        if self.is_exported() { self.gauge.collect() } else { Vec::new() }
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
    /// `codemode_policy_decisions_total{server, tool, decision, rule}`.
    pub policy_decisions: IntCounterVec,
    /// `codemode_approvals_total{answer}`.
    pub approvals: IntCounterVec,
    /// `codemode_upstream_accounts_total{server, event}`.
    pub upstream_accounts: IntCounterVec,
    /// `codemode_server_exits_total{server}`.
    pub server_exits: IntCounterVec,
    /// `codemode_server_up{server}`.
    pub server_up: IntGaugeVec,
    /// `codemode_state_store_operations_total{result}`.
    pub state_store_operations: IntCounterVec,
    /// `codemode_state_store_up` (absent until the process's state store
    /// answers or fails its first call).
    pub state_store_up: LazyGauge,
    /// `codemode_session_taints_total{event}`.
    pub session_taints: IntCounterVec,
    /// `codemode_search_meaning_total{answer}`.
    pub search_meaning: IntCounterVec,
    /// `codemode_audit_records_total{result}`.
    pub audit_records: IntCounterVec,
    /// `codemode_audit_sink_up` (absent until the process opens an audit
    /// sink).
    pub audit_sink_up: LazyGauge,
    /// `codemode_frontend_cells_total{result}`.
    pub frontend_cells: IntCounterVec,
    /// `codemode_runner_capacity` (absent in a process without a
    /// sandbox-runner).
    pub runner_capacity: LazyGauge,
    /// `codemode_runner_cells_running` (absent in a process without a
    /// sandbox-runner).
    pub runner_cells_running: LazyGauge,
    /// `codemode_warm_pool_size` (absent in a process without a warm pool).
    pub warm_pool_size: LazyGauge,
    /// `codemode_containers_started_total`.
    pub containers_started: IntCounter,
    /// `codemode_containers_removed_total{result}`.
    pub containers_removed: IntCounterVec,
    /// `codemode_containers_reaped_total`.
    pub containers_reaped: IntCounter,
    /// `codemode_bus_requests_total{subject}`.
    pub bus_requests: IntCounterVec,
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
                "Decisions of the tool policies on calls, by server, tool, decision and the rule that decided.",
            ),
            &["server", "tool", "decision", "rule"],
        )
        .expect("valid metric");
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
        };
        // Gauges of one component each: absent where it is not.
        let gauge = LazyGauge::new;
        let approvals = counter(
            "codemode_approvals_total",
            "Approval questions the bridge asked, by the answer that came back.",
            &["answer"],
        );
        let upstream_accounts = counter(
            "codemode_upstream_accounts_total",
            "Per-identity upstream accounts: logins (an account connected), token refreshes and failures (a refresh or a code exchange that failed), by server.",
            &["server", "event"],
        );
        let server_exits = counter(
            "codemode_server_exits_total",
            "Times a wrapped server exited on its own (each is followed by a restart).",
            &["server"],
        );
        let server_up = IntGaugeVec::new(
            Opts::new("codemode_server_up", "1 while a wrapped server is up, 0 while it is being restarted."),
            &["server"],
        )
        .expect("valid metric");
        let state_store_operations = counter(
            "codemode_state_store_operations_total",
            "Calls to the session-state store's backend, by result.",
            &["result"],
        );
        let state_store_up =
            gauge("codemode_state_store_up", "1 when the session-state store answered its last call or probe, else 0.");
        let session_taints = counter(
            "codemode_session_taints_total",
            "Sessions tainted by a private call (set) and tainted sessions forgotten when they ended (forgotten).",
            &["event"],
        );
        let search_meaning = counter(
            "codemode_search_meaning_total",
            "Cells' questions by meaning a bridge answered with each tool's cosine (near) or not: tools not yet read (not_read), encoder busy (busy), encoder failed (failed).",
            &["answer"],
        );
        let audit_records = counter("codemode_audit_records_total", "Audit records appended, by result.", &["result"]);
        let audit_sink_up =
            gauge("codemode_audit_sink_up", "1 when the audit sink took its last record or probe, 0 while it fails.");
        let frontend_cells = counter(
            "codemode_frontend_cells_total",
            "Cells the frontend sent (or refused to send), by how the request ended.",
            &["result"],
        );
        let runner_capacity = gauge("codemode_runner_capacity", "Cells this sandbox-runner runs at once at most.");
        let runner_cells_running = gauge("codemode_runner_cells_running", "Cells this sandbox-runner is running now.");
        let warm_pool_size =
            gauge("codemode_warm_pool_size", "Started containers waiting in the warm pool for a cell.");
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
        let bus_requests = IntCounterVec::new(
            Opts::new("codemode_bus_requests_total", "Bus requests sent, by subject."),
            &["subject"],
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
            approvals,
            upstream_accounts,
            server_exits,
            server_up,
            state_store_operations,
            state_store_up,
            session_taints,
            search_meaning,
            audit_records,
            audit_sink_up,
            frontend_cells,
            runner_capacity,
            runner_cells_running,
            warm_pool_size,
            containers_started,
            containers_removed,
            containers_reaped,
            bus_requests,
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
        for answer in ApprovalAnswer::ALL {
            metrics.approvals.with_label_values(&[answer.as_str()]);
        }
        for result in StateResult::ALL {
            metrics.state_store_operations.with_label_values(&[result.as_str()]);
        }
        for event in ["set", "forgotten"] {
            metrics.session_taints.with_label_values(&[event]);
        }
        for answer in SEARCH_MEANING_ANSWERS {
            metrics.search_meaning.with_label_values(&[answer]);
        }
        for result in ["written", "failed"] {
            metrics.audit_records.with_label_values(&[result]);
        }
        for result in FrontendCellResult::ALL {
            metrics.frontend_cells.with_label_values(&[result.as_str()]);
        }
        metrics
    }

    fn register_all(&self) {
        let collectors: [Box<dyn prometheus::core::Collector>; 25] = [
            Box::new(self.cells.clone()),
            Box::new(self.cell_duration.clone()),
            Box::new(self.tool_calls.clone()),
            Box::new(self.tool_call_duration.clone()),
            Box::new(self.policy_decisions.clone()),
            Box::new(self.approvals.clone()),
            Box::new(self.upstream_accounts.clone()),
            Box::new(self.server_exits.clone()),
            Box::new(self.server_up.clone()),
            Box::new(self.state_store_operations.clone()),
            Box::new(self.state_store_up.clone()),
            Box::new(self.session_taints.clone()),
            Box::new(self.search_meaning.clone()),
            Box::new(self.audit_records.clone()),
            Box::new(self.audit_sink_up.clone()),
            Box::new(self.frontend_cells.clone()),
            Box::new(self.runner_capacity.clone()),
            Box::new(self.runner_cells_running.clone()),
            Box::new(self.warm_pool_size.clone()),
            Box::new(self.containers_started.clone()),
            Box::new(self.containers_removed.clone()),
            Box::new(self.containers_reaped.clone()),
            Box::new(self.bus_requests.clone()),
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
    static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
        let metrics = Metrics::new();
        crate::phases::register(metrics.registry());
        metrics
    });
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

/// A policy decided a call of `tool` on `server` by `rule` (`decision` is
/// one of the audit log's fixed words; names come from the catalog, the rule
/// is a JSON path into the policy, so the label values are bounded by the
/// catalog and the policy).
pub fn policy_decision(server: &str, tool: &str, decision: &str, rule: &str) {
    metrics().policy_decisions.with_label_values(&[server, tool, decision, rule]).inc();
}

/// An approval question came back with `answer`.
pub fn approval_answered(answer: ApprovalAnswer) {
    metrics().approvals.with_label_values(&[answer.as_str()]).inc();
}

/// An upstream account of `server` had `event`: `login` (connected),
/// `refresh` (its token renewed) or `failure` (a renewal or code exchange
/// failed). Only the server's configured name is a label, never an
/// identity or subject.
pub fn upstream_account(server: &str, event: &str) {
    metrics().upstream_accounts.with_label_values(&[server, event]).inc();
}

/// The wrapped server `server` is up (`true`) or being restarted; starting
/// at up also creates its exit counter at 0.
pub fn server_up(server: &str, up: bool) {
    let m = metrics();
    m.server_up.with_label_values(&[server]).set(i64::from(up));
    m.server_exits.with_label_values(&[server]);
}

/// The wrapped server `server` exited on its own.
pub fn server_exited(server: &str) {
    let m = metrics();
    m.server_exits.with_label_values(&[server]).inc();
    m.server_up.with_label_values(&[server]).set(0);
}

/// One call to the session-state store's backend ended with `result`; an
/// answer of any kind means the store is reachable.
pub fn state_store_call(result: StateResult) {
    let m = metrics();
    m.state_store_operations.with_label_values(&[result.as_str()]).inc();
    m.state_store_up.set(i64::from(result != StateResult::Unavailable));
}

/// A session was tainted (`true`), or a tainted session's taint was
/// forgotten when it ended.
pub fn session_taint(set: bool) {
    metrics().session_taints.with_label_values(&[if set { "set" } else { "forgotten" }]).inc();
}

/// The `answer` labels of `codemode_search_meaning_total`: answered with
/// the tools' cosines, or not (tools not read yet, encoder busy, encoder
/// failed).
pub const SEARCH_MEANING_ANSWERS: [&str; 4] = ["near", "not_read", "busy", "failed"];

/// A cell's question by meaning got `answer` (one of
/// [`SEARCH_MEANING_ANSWERS`]).
pub fn search_meaning(answer: &str) {
    debug_assert!(SEARCH_MEANING_ANSWERS.contains(&answer), "an answer label of its own: {answer}");
    metrics().search_meaning.with_label_values(&[answer]).inc();
}

/// An audit record was written (`true`) or not; a probe of a failed sink
/// passes `written` as whether it can be written again.
pub fn audit_write(written: bool) {
    let m = metrics();
    m.audit_records.with_label_values(&[if written { "written" } else { "failed" }]).inc();
    m.audit_sink_up.set(i64::from(written));
}

/// A probe of a failed audit sink found it writable (`true`) or not.
pub fn audit_probed(writable: bool) {
    metrics().audit_sink_up.set(i64::from(writable));
}

/// The frontend's request for one cell ended with `result`.
pub fn frontend_cell(result: FrontendCellResult) {
    metrics().frontend_cells.with_label_values(&[result.as_str()]).inc();
}

/// This sandbox-runner runs at most `n` cells at once.
pub fn set_runner_capacity(n: usize) {
    metrics().runner_capacity.set(i64::try_from(n).unwrap_or(i64::MAX));
}

/// This sandbox-runner runs `n` cells now.
pub fn set_runner_cells_running(n: usize) {
    metrics().runner_cells_running.set(i64::try_from(n).unwrap_or(i64::MAX));
}

/// A bus request on `subject` is sent. The first one creates the subject's
/// error series for every `kind` at 0, so that an error rate per subject is
/// defined (and shows 0) as soon as the subject is used.
pub fn bus_request(subject: &str, kinds: &[&str]) {
    let m = metrics();
    let requests = m.bus_requests.with_label_values(&[subject]);
    requests.inc();
    if requests.get() == 1 {
        for kind in kinds {
            m.bus_request_errors.with_label_values(&[subject, kind]);
        }
    }
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

// Live reload of the bridge's policies and `mcpServers` config (SIGHUP).
// Kept apart from [`Metrics`]: registered into [`metrics()`]'s registry by
// the first process that can reload, so a process that cannot (a frontend,
// a sandbox-runner, `code-mode run`) exports none of these.

/// The results a reload counts under: `ok` (applied), `invalid` (a file or
/// the catalog it would make is invalid), `refused` (a change that cannot
/// apply while running), `failed` (an added server did not start, or the
/// reload could not be recorded).
pub const RELOAD_RESULTS: [&str; 4] = ["ok", "invalid", "refused", "failed"];

/// `codemode_config_reloads_total{result}` and
/// `codemode_config_last_reload_success`.
struct ReloadMetrics {
    reloads: IntCounterVec,
    last_success: IntGauge,
}

static RELOAD: LazyLock<ReloadMetrics> = LazyLock::new(|| {
    let reloads = IntCounterVec::new(
        Opts::new("codemode_config_reloads_total", "Reloads of the bridge's policies and mcpServers config, by result"),
        &["result"],
    )
    .expect("valid metric");
    let last_success = IntGauge::new(
        "codemode_config_last_reload_success",
        "1 when the bridge's last reload was applied (or none was asked for), 0 when it kept the running config",
    )
    .expect("valid metric");
    for result in RELOAD_RESULTS {
        reloads.with_label_values(&[result]);
    }
    last_success.set(1);
    let registry = metrics().registry();
    let _ = registry.register(Box::new(reloads.clone()));
    let _ = registry.register(Box::new(last_success.clone()));
    ReloadMetrics { reloads, last_success }
});

/// This process reloads its bridge's config on SIGHUP: the reload series
/// are exported from now on (counts at 0, last success 1).
pub fn config_reload_enabled() {
    LazyLock::force(&RELOAD);
}

/// A reload ended with `result` (one of [`RELOAD_RESULTS`]).
pub fn config_reload(result: &str) {
    let result = RELOAD_RESULTS.iter().find(|r| **r == result).copied().unwrap_or("failed");
    RELOAD.reloads.with_label_values(&[result]).inc();
    RELOAD.last_success.set(i64::from(result == "ok"));
}

// `codemode_oauth_keys_loaded`: kept apart from [`Metrics`], registered on
// first use, so a process without an OAuth issuer has no such series.

/// `codemode_oauth_keys_loaded`, registered in [`metrics()`]'s registry the
/// first time [`oauth_keys_loaded`] is called.
static OAUTH_KEYS_LOADED: LazyLock<IntGauge> = LazyLock::new(|| {
    let gauge = IntGauge::new(
        "codemode_oauth_keys_loaded",
        "1 while the MCP HTTP server holds its OAuth issuer's signing keys, 0 while it holds none (tokens are refused)",
    )
    .expect("valid metric");
    let _ = metrics().registry().register(Box::new(gauge.clone()));
    gauge
});

/// The OAuth issuer's keys are held (`true`) or none are. Called only where
/// an issuer is configured: the gauge is absent elsewhere.
pub fn oauth_keys_loaded(loaded: bool) {
    OAUTH_KEYS_LOADED.set(i64::from(loaded));
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
        m.policy_decisions.with_label_values(&["s", "t", "denied", "/tools/t"]).inc();
        m.approvals.with_label_values(&["timed_out"]).inc();
        m.server_exits.with_label_values(&["s"]).inc();
        m.server_up.with_label_values(&["s"]).set(1);
        m.state_store_up.set(1);
        m.audit_sink_up.set(1);
        m.runner_capacity.set(4);
        m.runner_cells_running.set(2);
        m.warm_pool_size.set(3);
        m.containers_started.inc();
        m.containers_removed.with_label_values(&["removed"]).inc();
        m.containers_reaped.inc_by(2);
        m.bus_requests.with_label_values(&["codemode.v1.tool.call"]).inc();
        m.bus_request_errors.with_label_values(&["codemode.v1.tool.call", "timeout"]).inc();
        m.upstream_accounts.with_label_values(&["tracker", "login"]).inc();
        m.set_service("bridge");
        let text = m.render();
        for name in [
            "codemode_cells_total",
            "codemode_cell_duration_seconds",
            "codemode_tool_calls_total",
            "codemode_tool_call_duration_seconds",
            "codemode_policy_decisions_total",
            "codemode_approvals_total",
            "codemode_upstream_accounts_total",
            "codemode_server_exits_total",
            "codemode_server_up",
            "codemode_state_store_operations_total",
            "codemode_state_store_up",
            "codemode_session_taints_total",
            "codemode_search_meaning_total",
            "codemode_audit_records_total",
            "codemode_audit_sink_up",
            "codemode_frontend_cells_total",
            "codemode_runner_capacity",
            "codemode_runner_cells_running",
            "codemode_warm_pool_size",
            "codemode_containers_started_total",
            "codemode_containers_removed_total",
            "codemode_containers_reaped_total",
            "codemode_bus_requests_total",
            "codemode_bus_request_errors_total",
            "codemode_service_info",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "no HELP for {name} in\n{text}");
            assert!(text.contains(&format!("# TYPE {name} ")), "no TYPE for {name} in\n{text}");
        }
        assert!(text.contains("codemode_cell_duration_seconds_bucket{outcome=\"finished\",le=\"0.5\"} 1"), "{text}");
        assert!(text.contains("codemode_containers_reaped_total 2"), "{text}");
    }

    #[test]
    fn a_component_gauge_is_absent_from_the_scrape_until_its_component_sets_it_even_to_zero() {
        let m = Metrics::new();
        let gauges =
            [&m.state_store_up, &m.audit_sink_up, &m.runner_capacity, &m.runner_cells_running, &m.warm_pool_size];
        let names = [
            "codemode_state_store_up",
            "codemode_audit_sink_up",
            "codemode_runner_capacity",
            "codemode_runner_cells_running",
            "codemode_warm_pool_size",
        ];
        let text = m.render();
        for name in names {
            assert!(!text.contains(name), "{name} is exported before anything set it:\n{text}");
        }
        // A failing component exports its 0: that is what the alerts see.
        m.audit_sink_up.set(0);
        let text = m.render();
        assert!(text.contains("\ncodemode_audit_sink_up 0\n"), "{text}");
        assert!(text.contains("# TYPE codemode_audit_sink_up gauge"), "{text}");
        assert!(!text.contains("codemode_state_store_up"), "the other gauges stay absent:\n{text}");
        m.audit_sink_up.set(1);
        assert!(m.render().contains("\ncodemode_audit_sink_up 1\n"));
        for gauge in gauges {
            gauge.set(0);
        }
        let text = m.render();
        for name in names {
            assert!(text.contains(&format!("\n{name} 0\n")), "{name} is exported once set:\n{text}");
        }
    }
}
