//! The warm pool against the real Docker engine and the real image: a runner
//! serving over an in-process bus, cells sent on the bus (no bridge: these
//! cells make no tool call).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{KillContainerOptions, ListContainersOptionsBuilder};
use code_mode_core::bus::Bus;
use code_mode_core::bus::BusError;
use code_mode_proto::{CellLimits, CellRan, CellReport, Keep, KeptEnd, KeptReply, KeptRequest, RunCell, subjects};
use code_mode_sandbox_runner::container::{LABEL_OWNER, LABEL_SANDBOX, owner_label};
use code_mode_sandbox_runner::{RunnerConfig, SandboxRunner};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support;

/// The tests count the containers of this process, so they take turns
/// (they share a process under `cargo test`).
static DOCKER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a pool may take to fill on a loaded machine.
const FILL_BOUND: Duration = Duration::from_secs(60);

const HOSTNAME: &str = "import os\nprint(os.uname().nodename)";

/// A cell of `session` (kept when `keep` is given).
fn cell(session: &str, code: &str, keep: Option<Keep>) -> RunCell {
    RunCell {
        cell_id: uuid::Uuid::new_v4().to_string(),
        session: session.into(),
        asker: None,
        identity: None,
        code: code.into(),
        tools: vec![],
        withheld: vec![],
        limits: CellLimits {
            deadline_ms: 60_000,
            max_calls: 10,
            call_timeout_ms: 5_000,
            approval_timeout_ms: 0,
            max_output: 8192,
            stop_output: 1 << 20,
            max_line: 1 << 18,
        },
        keep,
        link: None,
        keep_report: false,
        inputs: vec![],
    }
}

/// A serving runner and what the test needs to talk to it.
struct Serving {
    docker: Docker,
    runner: SandboxRunner,
    bus: Bus,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Serving {
    /// Docker and the image, or `None` (after `unavailable`) without them;
    /// the warm pool holds `warm` containers whatever the demand.
    async fn start(warm: usize) -> Option<Serving> {
        Self::start_with(RunnerConfig { warm, warm_max: Some(warm), ..RunnerConfig::default() }).await
    }

    /// [`Serving::start`] with a whole configuration.
    async fn start_with(config: RunnerConfig) -> Option<Serving> {
        let docker = support::docker_with_image().await?;
        let bus = Bus::in_process();
        let runner = SandboxRunner::new(docker.clone(), config, bus.clone()).await.unwrap();
        let cancel = CancellationToken::new();
        let task = runner.serve(cancel.clone()).await.unwrap();
        Some(Serving { docker, runner, bus, cancel, task })
    }

    async fn run(&self, code: &str) -> CellReport {
        let ran: CellRan = self
            .bus
            .call(subjects::CELL_RUN, &cell("pool-test", code, None), Duration::from_secs(120))
            .await
            .expect("the runner answers");
        ran.report
    }

    /// The hostname a cell prints: the first 12 characters of its container id.
    async fn hostname_of_a_cell(&self) -> String {
        let report = self.run(HOSTNAME).await;
        assert_eq!(report.error, None, "{report:?}");
        report.stdout.trim().to_string()
    }

    /// Wait until the pool holds `n` ready containers; panics past the bound.
    async fn wait_for_pool(&self, n: usize) {
        let filled = tokio::time::timeout(FILL_BOUND, self.runner.pool().wait_for(n)).await;
        assert!(matches!(filled, Ok(true)), "the pool did not reach {n} within {FILL_BOUND:?}");
        assert_eq!(self.runner.pool_size(), n);
    }

    /// Ids of the sandbox containers (running or not) this process owns.
    async fn containers(&self) -> HashSet<String> {
        containers_of_this_process(&self.docker).await
    }

    /// Wait until the containers of this process satisfy `done` (a used
    /// container is removed after its report, off the cell's path); the
    /// last list seen, and whether it did within the bound.
    async fn containers_until(&self, done: impl Fn(&HashSet<String>) -> bool) -> (HashSet<String>, bool) {
        let give_up = tokio::time::Instant::now() + FILL_BOUND;
        loop {
            let now = self.containers().await;
            if done(&now) {
                return (now, true);
            }
            if tokio::time::Instant::now() > give_up {
                return (now, false);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Cancel and wait until the runner's task has ended.
    async fn stop(self) -> Docker {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the runner stops within a minute")
            .unwrap();
        self.docker
    }
}

async fn containers_of_this_process(docker: &Docker) -> HashSet<String> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![LABEL_SANDBOX.to_string(), format!("{LABEL_OWNER}={}", owner_label())],
    )]);
    let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
    let list = docker.list_containers(Some(options)).await.unwrap();
    list.into_iter().filter_map(|c| c.id).collect()
}

fn is_one_of(hostname: &str, ids: &HashSet<String>) -> bool {
    hostname.len() == 12 && ids.iter().any(|id| id.starts_with(hostname))
}

#[tokio::test]
async fn a_runner_with_two_warm_has_two_ready_containers_shortly_after_it_starts_serving() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(2).await else { return };
    serving.wait_for_pool(2).await;
    assert_eq!(serving.containers().await.len(), 2, "the two ready containers exist in Docker");
    serving.stop().await;
}

#[tokio::test]
async fn a_cell_runs_in_a_container_that_was_ready_before_it_was_sent_and_the_pool_refills() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(2).await else { return };
    serving.wait_for_pool(2).await;
    let before = serving.containers().await;
    let hostname = serving.hostname_of_a_cell().await;
    assert!(is_one_of(&hostname, &before), "{hostname} is one of the pooled containers {before:?}");
    // It is gone, and the pool is back to two without it.
    serving.wait_for_pool(2).await;
    let (after, removed) = serving.containers_until(|now| now.len() == 2 && !is_one_of(&hostname, now)).await;
    assert!(removed, "the used container {hostname} was removed and two are ready: {after:?}");
    serving.stop().await;
}

#[tokio::test]
async fn each_warm_container_runs_one_cell_only() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(1).await else { return };
    let mut seen = HashSet::new();
    for _ in 0..3 {
        serving.wait_for_pool(1).await;
        let pooled = serving.containers().await;
        let hostname = serving.hostname_of_a_cell().await;
        assert!(is_one_of(&hostname, &pooled), "{hostname} came from the pool {pooled:?}");
        assert!(seen.insert(hostname.clone()), "{hostname} ran a second cell");
    }
    serving.stop().await;
}

#[tokio::test]
async fn a_warm_container_that_dies_while_waiting_is_replaced() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(1).await else { return };
    serving.wait_for_pool(1).await;
    let first = serving.containers().await;
    let victim = first.iter().next().unwrap().clone();
    serving.docker.kill_container(&victim, None::<KillContainerOptions>).await.unwrap();
    // The pool notices, removes it and starts another.
    let mut replaced = None;
    for _ in 0..600 {
        let now = serving.containers().await;
        if serving.runner.pool_size() == 1 && now.len() == 1 && !now.contains(&victim) {
            replaced = now.into_iter().next();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let replacement = replaced.expect("the dead container was replaced within a minute");
    let hostname = serving.hostname_of_a_cell().await;
    assert!(replacement.starts_with(&hostname), "the next cell ran in the replacement {replacement}, not {hostname}");
    serving.stop().await;
}

#[tokio::test]
async fn after_cancel_no_container_of_this_process_remains() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(2).await else { return };
    serving.wait_for_pool(2).await;
    // A cell in flight as well as the pooled containers.
    let bus = serving.bus.clone();
    let runner = serving.runner.clone();
    let long = tokio::spawn({
        let cell = RunCell {
            cell_id: uuid::Uuid::new_v4().to_string(),
            session: "pool-test".into(),
            asker: None,
            identity: None,
            code: "import time\ntime.sleep(60)".into(),
            tools: vec![],
            withheld: vec![],
            limits: CellLimits {
                deadline_ms: 90_000,
                max_calls: 1,
                call_timeout_ms: 1_000,
                approval_timeout_ms: 0,
                max_output: 8192,
                stop_output: 1 << 20,
                max_line: 1 << 18,
            },
            keep: None,
            link: None,
            keep_report: false,
            inputs: vec![],
        };
        async move {
            bus.call::<_, CellRan>(subjects::CELL_RUN, &cell, Duration::from_secs(120)).await.map(|ran| ran.report)
        }
    });
    // The cell took a pooled container; wait for the refill so three exist.
    let mut three = false;
    for _ in 0..600 {
        if runner.pool_size() == 2 && serving.containers().await.len() == 3 {
            three = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(three, "a running cell and two ready containers");
    let docker = serving.stop().await;
    let report = long.await.unwrap().unwrap();
    assert!(report.stopped && report.error.as_deref().unwrap_or("").contains("shutting down"), "{report:?}");
    let left = containers_of_this_process(&docker).await;
    assert!(left.is_empty(), "containers left after the runner stopped: {left:?}");
}

/// A cell that prints its hostname, sends a `done` of its own on the
/// protocol descriptor (the code runs in the runner's process and can), and
/// keeps running and printing: nothing but a kill stops it.
const FORGED_DONE: &str = r#"import os, time
print(os.uname().nodename, flush=True)
line = b'{"type": "done", "error": null, "truncated": false, "stopped": false}\n'
for fd in range(3, 10):
    try:
        os.write(fd, line)
    except OSError:
        pass
while True:
    print("still here", flush=True)
    time.sleep(0.01)
"#;

#[tokio::test]
async fn code_that_forges_done_and_keeps_running_gets_nothing_more_into_its_report_and_is_killed_and_removed() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(0).await else { return };
    let kills = code_mode_telemetry::phases::phase_totals(code_mode_telemetry::Phase::Kill).0;
    let report = serving.run(FORGED_DONE).await;
    assert_eq!(report.error, None, "the forged done ends the run: {report:?}");
    assert!(!report.stdout.contains("still here"), "output after done reached the report: {report:?}");
    assert_eq!(report.stdout.trim().len(), 12, "{report:?}");
    // The remover kills it (the runner did not exit) and removes it.
    let (left, removed) = serving.containers_until(HashSet::is_empty).await;
    assert!(removed, "the container still running after its report was removed: {left:?}");
    let now = code_mode_telemetry::phases::phase_totals(code_mode_telemetry::Phase::Kill).0;
    assert_eq!(now, kills + 1, "the remover killed it before removing it");
    serving.stop().await;
}

#[tokio::test]
async fn stopping_the_runner_just_after_cells_reported_leaves_no_container() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(1).await else { return };
    serving.wait_for_pool(1).await;
    // Three at once (one warm, two cold); the runner is stopped the moment
    // the last report is in, while their removals are queued or running
    // and the pool refills.
    let reports = futures::future::join_all((0..3).map(|_| serving.run("print(1)"))).await;
    for report in &reports {
        assert_eq!(report.stdout, "1\n", "{report:?}");
    }
    let docker = serving.stop().await;
    let left = containers_of_this_process(&docker).await;
    assert!(left.is_empty(), "containers left once the runner's task ended: {left:?}");
}

#[tokio::test]
async fn a_container_killed_from_outside_mid_cell_is_reported_and_removed() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(1).await else { return };
    serving.wait_for_pool(1).await;
    // The cell takes the ready container, so its runner is past `ready`.
    let victim = serving.containers().await.into_iter().next().unwrap();
    let running = serving.run("import time\nprint('started', flush=True)\ntime.sleep(60)");
    let killer = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        serving.docker.kill_container(&victim, None::<KillContainerOptions>).await.unwrap();
    };
    let (report, ()) = tokio::join!(running, killer);
    assert!(report.stopped, "{report:?}");
    let error = report.error.clone().unwrap_or_default();
    assert!(error.contains("before the code finished"), "{report:?}");
    // A kill is not mistaken for running out of memory, though its exit
    // code (137) is the same and the engine's event log is consulted.
    assert!(!error.contains("out of memory"), "{report:?}");
    let (left, removed) = serving.containers_until(|now| !now.contains(&victim)).await;
    assert!(removed, "the dead container was removed: {left:?}");
    serving.stop().await;
}

#[tokio::test]
async fn a_cell_still_runs_cold_without_a_warm_pool() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(0).await else { return };
    assert_eq!(serving.runner.pool_size(), 0);
    let before = serving.containers().await;
    assert!(before.is_empty(), "no container is started ahead of need: {before:?}");
    let hostname = serving.hostname_of_a_cell().await;
    assert_eq!(hostname.len(), 12, "{hostname}");
    let (left, removed) = serving.containers_until(HashSet::is_empty).await;
    assert!(removed, "its container was removed: {left:?}");
    serving.stop().await;
}

#[tokio::test]
async fn the_capacity_in_use_counts_the_cells_running_and_returns_to_zero() {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(0).await else { return };
    let metrics = code_mode_telemetry::metrics();
    assert_eq!(metrics.runner_capacity.get(), code_mode_core::defaults::MAX_CONCURRENT_CELLS as i64);
    assert_eq!(metrics.runner_cells_running.get(), 0);
    let long = serving.run("import time\ntime.sleep(3)\nprint('done')");
    let watch = async {
        let give_up = tokio::time::Instant::now() + FILL_BOUND;
        while metrics.runner_cells_running.get() != 1 {
            assert!(tokio::time::Instant::now() < give_up, "the running cell never showed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (report, ()) = tokio::join!(long, watch);
    assert_eq!(report.stdout, "done\n", "{report:?}");
    assert_eq!(metrics.runner_cells_running.get(), 0, "the slot is given back with the report");
    serving.stop().await;
}

#[tokio::test]
async fn a_kept_container_serves_only_its_own_session_says_why_a_removed_one_is_gone_and_is_removed_when_the_runner_stops()
 {
    let _turn = DOCKER.lock().await;
    let Some(serving) = Serving::start(0).await else { return };
    let keep = |key: Option<String>| Some(Keep { key, idle_ms: 60_000, max_ms: 600_000, most: None });
    let wait = Duration::from_secs(120);
    let first: CellRan = serving.bus.call(subjects::CELL_RUN, &cell("s1", "x = 41", keep(None)), wait).await.unwrap();
    assert_eq!(first.report.error, None, "{first:?}");
    let kept = first.kept.expect("the container lives on");
    assert_eq!(kept.runner, serving.runner.id());
    assert_eq!(serving.runner.kept_containers().await, 1);
    let own = subjects::runner(&kept.runner).unwrap();
    let next = KeptRequest::Run(cell("s1", "print(x + 1)", keep(Some(kept.key.clone()))));
    let KeptReply::Ran(second) = serving.bus.call(&own, &next, wait).await.unwrap() else { panic!("a cell ran") };
    assert_eq!(second.report.stdout, "42\n");
    // Another session presenting the key is refused as another session's:
    // a key is bound to the session it was made for.
    let kind_of = |err: &BusError| match err {
        BusError::Remote { error, .. } => error.kind.clone(),
        other => panic!("a service's error, not {other:?}"),
    };
    let stolen = KeptRequest::Run(cell("s2", "print(x)", keep(Some(kept.key.clone()))));
    let err = serving.bus.call::<_, KeptReply>(&own, &stolen, wait).await.unwrap_err();
    assert_eq!(kind_of(&err), code_mode_proto::ErrorKind::KeptForeign, "{err:?}");
    let wrong_end = KeptRequest::End(KeptEnd { session: "s2".into(), key: kept.key.clone() });
    let ended: KeptReply = serving.bus.call(&own, &wrong_end, wait).await.unwrap();
    assert_eq!(ended, KeptReply::Ended { removed: false }, "another session cannot end it either");
    assert_eq!(serving.containers().await.len(), 1);
    // A key nobody made is unknown.
    let made_up = KeptRequest::Run(cell("s1", "print(x)", keep(Some(uuid::Uuid::new_v4().simple().to_string()))));
    let err = serving.bus.call::<_, KeptReply>(&own, &made_up, wait).await.unwrap_err();
    assert_eq!(kind_of(&err), code_mode_proto::ErrorKind::KeptLost, "{err:?}");
    // A second kept container, ended by its session: its key is then
    // remembered as expired (saying why) for its session, and still another
    // session's for anyone else.
    let other: CellRan = serving.bus.call(subjects::CELL_RUN, &cell("s3", "y = 1", keep(None)), wait).await.unwrap();
    let other = other.kept.expect("the container lives on");
    let end = KeptRequest::End(KeptEnd { session: "s3".into(), key: other.key.clone() });
    assert_eq!(serving.bus.call::<_, KeptReply>(&own, &end, wait).await.unwrap(), KeptReply::Ended { removed: true });
    let late = KeptRequest::Run(cell("s3", "print(y)", keep(Some(other.key.clone()))));
    let err = serving.bus.call::<_, KeptReply>(&own, &late, wait).await.unwrap_err();
    assert_eq!(kind_of(&err), code_mode_proto::ErrorKind::KeptExpired, "{err:?}");
    assert!(err.to_string().contains("its session ended"), "{err}");
    let foreign = KeptRequest::Run(cell("s1", "print(y)", keep(Some(other.key.clone()))));
    let err = serving.bus.call::<_, KeptReply>(&own, &foreign, wait).await.unwrap_err();
    assert_eq!(kind_of(&err), code_mode_proto::ErrorKind::KeptForeign, "{err:?}");
    assert_eq!(serving.containers().await.len(), 1);
    // Stopping the runner removes the kept container.
    let docker = serving.stop().await;
    let left = containers_of_this_process(&docker).await;
    assert!(left.is_empty(), "containers left after the runner stopped: {left:?}");
}

#[tokio::test]
async fn under_a_burst_the_warm_pool_grows_above_its_floor_and_idle_it_returns_to_the_floor() {
    let _turn = DOCKER.lock().await;
    // Floor 1, up to the capacity of 6; arrivals count for 6 s.
    let config = RunnerConfig { warm: 1, capacity: 6, warm_window: Duration::from_secs(6), ..RunnerConfig::default() };
    let Some(serving) = Serving::start_with(config).await else { return };
    let pool = serving.runner.pool();
    assert_eq!((pool.target(), pool.ceiling()), (1, 6), "idle at first: the floor");
    serving.wait_for_pool(1).await;
    let takes = code_mode_telemetry::phases::warm_pool_takes();
    // Watched from before the burst: the target rising and the pool
    // holding more than its floor.
    let rose = tokio::spawn({
        let pool = pool.clone();
        async move { tokio::time::timeout(FILL_BOUND, pool.wait_for_target(|t| t > 1)).await }
    });
    let grew = tokio::spawn({
        let pool = pool.clone();
        async move { tokio::time::timeout(FILL_BOUND, pool.wait_for(2)).await }
    });
    // A burst: six cells at once. The first takes the one ready container,
    // the others find the pool empty and start cold; all six are arrivals.
    let reports = futures::future::join_all((0..6).map(|_| serving.run("print(1)"))).await;
    for report in &reports {
        assert_eq!(report.stdout, "1\n", "{report:?}");
    }
    let (empty, warm) = code_mode_telemetry::phases::warm_pool_takes();
    assert_eq!((empty - takes.0) + (warm - takes.1), 6, "every cell asked the pool");
    assert!(warm > takes.1, "the ready container served one of them");
    // Six arrivals in 6 s with refills of 0.1 s or more: d >= 0.1, so the
    // target is at least 2, and the pool fills to it.
    assert!(matches!(rose.await.unwrap(), Ok(true)), "the target rose above the floor");
    assert!(pool.target() <= 6, "never above the ceiling: {}", pool.target());
    assert!(matches!(grew.await.unwrap(), Ok(true)), "the pool held more than its floor after the burst");
    // Idle: the arrivals leave the window, the target falls back to the
    // floor and the extra ready containers are removed.
    let back = tokio::time::timeout(FILL_BOUND, pool.wait_for_target(|t| t == 1)).await;
    assert!(matches!(back, Ok(true)), "the target returned to the floor");
    let (left, idle) = serving.containers_until(|now| now.len() == 1).await;
    assert!(idle, "idle, only the floor's one container stays: {left:?}");
    assert_eq!(pool.size(), 1);
    serving.stop().await;
}

#[tokio::test]
async fn a_pool_with_a_floor_of_zero_and_a_ceiling_starts_nothing_until_cells_come() {
    let _turn = DOCKER.lock().await;
    let config = RunnerConfig {
        warm: 0,
        warm_max: Some(3),
        capacity: 3,
        warm_window: Duration::from_secs(4),
        ..RunnerConfig::default()
    };
    let Some(serving) = Serving::start_with(config).await else { return };
    let pool = serving.runner.pool();
    assert_eq!((pool.target(), pool.ceiling()), (0, 3));
    assert!(serving.containers().await.is_empty(), "nothing ahead of need");
    let rose = tokio::spawn({
        let pool = pool.clone();
        async move { tokio::time::timeout(FILL_BOUND, pool.wait_for_target(|t| t >= 1)).await }
    });
    // Cells make the pool start containers; idle, it removes them all.
    let reports = futures::future::join_all((0..3).map(|_| serving.run("print(1)"))).await;
    for report in &reports {
        assert_eq!(report.stdout, "1\n", "{report:?}");
    }
    assert!(matches!(rose.await.unwrap(), Ok(true)), "the cells raised the target");
    let back = tokio::time::timeout(FILL_BOUND, pool.wait_for_target(|t| t == 0)).await;
    assert!(matches!(back, Ok(true)), "the target returned to 0");
    let (left, idle) = serving.containers_until(HashSet::is_empty).await;
    assert!(idle, "idle, no container stays: {left:?}");
    serving.stop().await;
}
