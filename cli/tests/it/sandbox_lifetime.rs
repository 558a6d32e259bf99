//! No sandbox outlives its sandbox-runner (issue 29), with real processes:
//! a runner over NATS, the only one of its engine, killed with `kill -9`;
//! each kind of container it starts (warm in its pool, running a cell,
//! kept for a `--keep-variables` session, between cells and running one)
//! must stop running by itself, with no other runner to reap it, within
//! [`GONE_WITHIN`].
//! "By itself" is checked in the engine's event log: the container died
//! without anyone asking the engine to kill it.
//!
//! And the backstops inside the sandbox, which hold when nobody closes the
//! container's input: a runner stopped with SIGSTOP (alive, its streams
//! open, doing nothing) leaves a cell that never lets go of the interpreter
//! and a kept session's container, which end at their bounds plus
//! [`BACKSTOP_MARGIN`]; a warm container nobody claims ends at its
//! `--unclaimed` bound.
//!
//! Other engineers' runners may share the engine: they reap a dead owner's
//! containers every few seconds, which is why each test checks how its
//! containers died and not only that they are gone.

use std::process::{Command, Stdio};
use std::time::Duration;

use code_mode_core::testing::{NatsServer, NatsUsers};
use code_mode_sandbox_runner::container::{BACKSTOP_MARGIN, Container, Lockdown, Runtime};
use tokio::time::Instant;

use crate::support::{
    self, Client, containers_of, eventually, kill9, log_path, logged_calls, run_python, service_command,
};

/// How soon after its runner is killed every container of it must have
/// stopped running.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// A split deployment with one runner under the test's runtime.
struct Deployment {
    _nats: NatsServer,
    users: NatsUsers,
    url: String,
    _bridge: tokio::process::Child,
    runner: tokio::process::Child,
    log: std::path::PathBuf,
    /// When the test started, for the engine's event log (unix seconds).
    since: u64,
}

impl Deployment {
    /// nats-server, a bridge over the test server and one runner started
    /// with `runner_args` under the test's runtime.
    fn start(runner_args: &[&str]) -> Deployment {
        let since = unix_now().saturating_sub(1);
        let (nats, users) = NatsServer::start_secured().expect("nats-server is needed for the split deployment");
        let url = nats.url();
        let log = log_path("lifetime");
        let bridge = support::spawn_service(&url, &users, "bridge", &[], Some(&["--log", log.to_str().unwrap()]));
        let mut args = vec!["--runtime", support::runtime().name()];
        args.extend_from_slice(runner_args);
        let runner = support::spawn_service(&url, &users, "sandbox-runner", &args, None);
        Deployment { _nats: nats, users, url, _bridge: bridge, runner, log, since }
    }

    fn runner_pid(&self) -> u32 {
        self.runner.id().expect("the runner runs")
    }

    /// An MCP client on a frontend started with `args`.
    async fn client(&self, args: &[&str]) -> Client {
        let mut frontend = service_command(&self.url, &self.users, "frontend", args, None);
        frontend.stdin(Stdio::piped());
        support::connect_client(frontend).await.0
    }

    /// `kill -9` the runner and reap it; returns when it was killed.
    async fn kill_runner(&mut self) -> Instant {
        kill9(self.runner_pid());
        let killed = Instant::now();
        self.runner.wait().await.expect("the killed runner is reaped");
        killed
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The ids (short) of sandbox containers running now.
fn running() -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "--filter", "label=code-mode.sandbox", "--filter", "status=running", "--format", "{{.ID}}"])
        .output()
        .expect("docker ps runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// The running containers of the runner `pid`.
fn running_of(pid: u32) -> Vec<String> {
    let now = running();
    containers_of(pid).into_iter().filter(|id| now.contains(id)).collect()
}

/// Wait up to `within` for each of `ids` to stop running; how long after
/// `from` each stopped (None: still running at the end).
async fn stop_times(ids: &[String], from: Instant, within: Duration) -> Vec<Option<Duration>> {
    let mut stopped: Vec<Option<Duration>> = vec![None; ids.len()];
    let give_up = from + within;
    loop {
        let now = running();
        for (id, when) in ids.iter().zip(stopped.iter_mut()) {
            if when.is_none() && !now.contains(id) {
                *when = Some(from.elapsed());
            }
        }
        if stopped.iter().all(Option::is_some) || Instant::now() >= give_up {
            return stopped;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The engine's events for container `id` since `since`, as actions
/// (`create`, `start`, `kill`, `die`, `destroy`, ...), oldest first.
fn events_of(id: &str, since: u64) -> Vec<String> {
    let out = Command::new("docker")
        .args(["events", "--since", &since.to_string(), "--until", &(unix_now() + 1).to_string()])
        .args(["--filter", &format!("container={id}"), "--format", "{{.Action}}"])
        .output()
        .expect("docker events runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// The container died by itself: a `die` with no `kill` asked of the
/// engine before it (a reaper or a runner would have asked).
fn died_by_itself(id: &str, since: u64) -> Result<(), String> {
    let events = events_of(id, since);
    let died = events.iter().position(|e| e == "die");
    match died {
        Some(at) if !events[..at].iter().any(|e| e == "kill") => Ok(()),
        _ => Err(format!("container {id}: {events:?}")),
    }
}

/// Remove what the test left (the dead runner's exited containers).
fn remove(ids: &[String]) {
    for id in ids {
        let _ = Command::new("docker").args(["rm", "-f", id]).output();
    }
}

/// Kill the runner, then check that `ids` stop running within
/// [`GONE_WITHIN`], each by itself; prints how long each took.
async fn killed_runner_leaves_nothing_running(deployment: &mut Deployment, ids: Vec<String>, kind: &str) {
    assert!(!ids.is_empty(), "no {kind} container to watch");
    let killed = deployment.kill_runner().await;
    let times = stop_times(&ids, killed, GONE_WITHIN + Duration::from_secs(5)).await;
    let runtime = support::runtime();
    eprintln!("{runtime}: {kind} containers stopped {times:?} after their runner's kill -9");
    let report: Vec<String> =
        ids.iter().map(|id| died_by_itself(id, deployment.since)).filter_map(Result::err).collect();
    remove(&ids);
    for (id, time) in ids.iter().zip(&times) {
        let time =
            time.unwrap_or_else(|| panic!("{runtime}: the {kind} container {id} still runs after its runner's kill"));
        assert!(time <= GONE_WITHIN, "{runtime}: the {kind} container {id} stopped {time:?} after the kill");
    }
    assert!(
        report.is_empty(),
        "{runtime}: {kind} containers were killed by someone, not ended by themselves: {report:?}"
    );
}

async fn a_warm_container_ends_by_itself_when_its_only_runner_is_killed() {
    let mut deployment = Deployment::start(&["--warm", "2"]);
    let pid = deployment.runner_pid();
    let ready = eventually(Duration::from_secs(60), || running_of(pid).len() >= 2).await;
    assert!(ready, "the runner's warm pool never filled: {:?}", containers_of(pid));
    // Ready, not only started: give the runners in them a moment to say so.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let warm = running_of(pid);
    killed_runner_leaves_nothing_running(&mut deployment, warm, "warm").await;
}

async fn a_container_running_a_cell_ends_by_itself_when_its_only_runner_is_killed() {
    let mut deployment = Deployment::start(&["--warm", "0"]);
    let pid = deployment.runner_pid();
    let client = deployment.client(&["--deadline", "120"]).await;
    // The cell makes a call (so it surely runs), then sleeps far past the test.
    let code = "await add({'a': 1, 'b': 1})\nimport time\ntime.sleep(600)";
    killed_mid_cell(&mut deployment, client, pid, code, "cell").await;
}

async fn a_kept_container_ends_by_itself_when_its_only_runner_is_killed_between_cells() {
    let mut deployment = Deployment::start(&["--warm", "0"]);
    let pid = deployment.runner_pid();
    let client = deployment.client(&["--keep-variables", "--deadline", "60"]).await;
    let first = run_python(&client, "x = 1\nprint(x)").await;
    assert_eq!(support::stdout_of(&first), "1\n", "{first:?}");
    let ids = running_of(pid);
    assert_eq!(ids.len(), 1, "the session's container waits for its next cell: {ids:?}");
    killed_runner_leaves_nothing_running(&mut deployment, ids, "kept").await;
    client.cancel().await.unwrap();
}

async fn a_kept_container_running_a_cell_ends_by_itself_when_its_only_runner_is_killed() {
    let mut deployment = Deployment::start(&["--warm", "0"]);
    let pid = deployment.runner_pid();
    let client = deployment.client(&["--keep-variables", "--deadline", "120"]).await;
    let first = run_python(&client, "x = 1\nprint(x)").await;
    assert_eq!(support::stdout_of(&first), "1\n", "{first:?}");
    // The session's second cell makes a call (so it surely runs), then
    // sleeps far past the test.
    let code = "await add({'a': x, 'b': 1})\nimport time\ntime.sleep(600)";
    killed_mid_cell(&mut deployment, client, pid, code, "kept, running a cell,").await;
}

/// Run `code` (a call, then a long sleep) in `client`'s session; once its
/// call reached the server, kill the only runner (`pid`): its one container
/// (`what`) ends by itself, and the client hears of the lost runner.
async fn killed_mid_cell(deployment: &mut Deployment, client: Client, pid: u32, code: &'static str, what: &str) {
    let cell = tokio::spawn(async move {
        let result = run_python(&client, code).await;
        (client, result)
    });
    let log = deployment.log.clone();
    let running = eventually(Duration::from_secs(60), || !logged_calls(&log).is_empty()).await;
    assert!(running, "the {what}'s call never reached the server");
    let ids = running_of(pid);
    assert_eq!(ids.len(), 1, "one container runs the {what}: {ids:?}");
    killed_runner_leaves_nothing_running(deployment, ids, what).await;
    let (client, result) = tokio::time::timeout(Duration::from_secs(30), cell)
        .await
        .expect("the client hears of the lost runner")
        .expect("the cell task ran");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    client.cancel().await.unwrap();
}

/// `kill -STOP` or `kill -CONT` a process.
fn signal(pid: u32, which: &str) {
    let status = Command::new("kill").args([which, &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill {which} {pid} failed");
}

/// With the runner stopped (its streams open, nobody acting), wait for
/// `ids` to stop running: each must, after at least `not_before` and at
/// most `bound` from `from` (plus a few seconds of engine time), by itself.
async fn ended_at_its_backstop(
    deployment: &mut Deployment,
    ids: Vec<String>,
    from: Instant,
    bounds: (Duration, Duration),
    kind: &str,
) {
    let (not_before, bound) = bounds;
    let slack = Duration::from_secs(5);
    let times = stop_times(&ids, from, bound + slack).await;
    let runtime = support::runtime();
    eprintln!(
        "{runtime}: with the runner stopped, the {kind} containers stopped {times:?} after the cell was sent (bound {bound:?})"
    );
    let report: Vec<String> =
        ids.iter().map(|id| died_by_itself(id, deployment.since)).filter_map(Result::err).collect();
    // The runner is killed while stopped; it leaves nothing running.
    deployment.kill_runner().await;
    remove(&ids);
    for (id, time) in ids.iter().zip(&times) {
        let time = time.unwrap_or_else(|| panic!("{runtime}: the {kind} container {id} outlived its bound {bound:?}"));
        assert!(time >= not_before, "{runtime}: the {kind} container {id} stopped {time:?} in, before its bound");
        assert!(time <= bound + slack, "{runtime}: the {kind} container {id} stopped {time:?} in, past {bound:?}");
    }
    assert!(report.is_empty(), "{runtime}: {kind} containers were killed by someone: {report:?}");
}

async fn with_its_runner_stopped_a_cell_holding_the_interpreter_ends_at_its_deadline_and_the_margin() {
    let mut deployment = Deployment::start(&["--warm", "0"]);
    let pid = deployment.runner_pid();
    let deadline = Duration::from_secs(3);
    let client = deployment.client(&["--deadline", &deadline.as_secs().to_string()]).await;
    // One C call that never lets go of the interpreter lock: no Python
    // thread of the runner runs until it returns (in hours).
    let code = "await add({'a': 1, 'b': 1})\nsum(range(10**14))";
    let sent = Instant::now();
    let cell = tokio::spawn(async move {
        let result = run_python(&client, code).await;
        (client, result)
    });
    let log = deployment.log.clone();
    let running = eventually(Duration::from_secs(30), || !logged_calls(&log).is_empty()).await;
    assert!(running, "the cell's call never reached the server");
    let ids = running_of(pid);
    assert_eq!(ids.len(), 1, "one container runs the cell: {ids:?}");
    signal(pid, "-STOP");
    let bounds = (deadline, deadline + BACKSTOP_MARGIN);
    ended_at_its_backstop(&mut deployment, ids, sent, bounds, "cell").await;
    let (client, _) = tokio::time::timeout(Duration::from_secs(30), cell)
        .await
        .expect("the client hears of the stopped runner")
        .expect("the cell task ran");
    client.cancel().await.unwrap();
}

async fn with_its_runner_stopped_a_kept_container_ends_at_its_session_max_and_the_margin() {
    let mut deployment = Deployment::start(&["--warm", "0"]);
    let pid = deployment.runner_pid();
    let session_max = Duration::from_secs(4);
    let client = deployment
        .client(&["--keep-variables", "--deadline", "3", "--session-max", &session_max.as_secs().to_string()])
        .await;
    let sent = Instant::now();
    let first = run_python(&client, "x = 1\nprint(x)").await;
    assert_eq!(support::stdout_of(&first), "1\n", "{first:?}");
    let ids = running_of(pid);
    assert_eq!(ids.len(), 1, "the session's container waits for its next cell: {ids:?}");
    signal(pid, "-STOP");
    let bounds = (session_max, session_max + BACKSTOP_MARGIN);
    ended_at_its_backstop(&mut deployment, ids, sent, bounds, "kept").await;
    client.cancel().await.unwrap();
}

async fn a_warm_container_nobody_claims_ends_at_its_unclaimed_bound() {
    let since = unix_now().saturating_sub(1);
    let docker = code_mode_sandbox_runner::connect_docker().await.expect("the engine answers");
    let unclaimed = Duration::from_secs(2);
    let lockdown = Lockdown { unclaimed, ..Lockdown::for_runtime(support::runtime()) };
    let started = Instant::now();
    // Its input stays open and nobody reads or writes: only the bound ends it.
    let (container, _output, _input) =
        Container::start(&docker, &lockdown, "lifetime-test").await.expect("the container starts");
    let id: String = container.id().chars().take(12).collect();
    let times = stop_times(std::slice::from_ref(&id), started, unclaimed + Duration::from_secs(10)).await;
    let by_itself = died_by_itself(&id, since);
    container.remove().await;
    let runtime = support::runtime();
    eprintln!("{runtime}: an unclaimed container stopped {:?} after its start (bound {unclaimed:?})", times[0]);
    let time = times[0].unwrap_or_else(|| panic!("{runtime}: the unclaimed container outlived its bound"));
    assert!(time >= unclaimed && time <= unclaimed + Duration::from_secs(5), "{runtime}: stopped {time:?} in");
    by_itself.unwrap();
}

/// Run an async scenario under `runtime`, when the sandbox is available.
fn scenario<F: std::future::Future<Output = ()>>(runtime: Runtime, test: impl FnOnce() -> F) {
    support::under(runtime, || {
        if !support::sandbox_available() {
            return;
        }
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(test());
    });
}

macro_rules! both_runtimes {
    ($($name:ident),* $(,)?) => {
        mod runc {
            $(#[test] fn $name() { super::scenario(super::Runtime::Runc, super::$name) })*
        }
        mod runsc {
            $(#[test] fn $name() { super::scenario(super::Runtime::Runsc, super::$name) })*
        }
    };
}

both_runtimes!(
    a_warm_container_ends_by_itself_when_its_only_runner_is_killed,
    a_container_running_a_cell_ends_by_itself_when_its_only_runner_is_killed,
    a_kept_container_ends_by_itself_when_its_only_runner_is_killed_between_cells,
    a_kept_container_running_a_cell_ends_by_itself_when_its_only_runner_is_killed,
    with_its_runner_stopped_a_cell_holding_the_interpreter_ends_at_its_deadline_and_the_margin,
    with_its_runner_stopped_a_kept_container_ends_at_its_session_max_and_the_margin,
    a_warm_container_nobody_claims_ends_at_its_unclaimed_bound,
);
