//! The warm pool: containers created, started and `ready` ahead of need.
//!
//! One actor task owns the ready containers (each a [`ReadyContainer`],
//! its attach streams included) and keeps a target number of them (ready
//! plus starting): it starts new ones in the background whenever one is
//! taken or lost, watches the waiting ones so that a container that dies
//! (or says anything) before its cell is removed and replaced, and backs
//! off when starting fails. Each container runs one cell only:
//! [`Pool::take`] hands it over for good, and the cell removes it. On
//! cancel (or when the last handle goes) the actor removes every container
//! it holds or is starting before its task ends.
//!
//! # The target follows demand
//!
//! A fixed pool is either too small for a busy minute (cells find it empty
//! and wait for a cold start, 0.2-0.6 s here) or too large for an idle
//! hour (every ready container holds about 12 MiB and a process). The
//! target is therefore computed from what the actor sees ([`Sizing`]):
//! every take, warm or not, is an arrival; the rate `λ` is the arrivals of
//! the last `window` divided by it, and `T` is the mean time a start took
//! to `ready` (the recent refills, smoothed). While one container refills,
//! `d = λ·T` cells arrive on average; taking arrivals as a Poisson stream,
//! keeping `d + 3·√d` ready or starting leaves a cell finding the pool
//! empty in well under 1 % of refill periods. The target is that, rounded
//! up, but at least the floor and at most the ceiling (the runner's
//! capacity unless configured lower: more ready containers than cells that
//! can run at once are never used at once). When arrivals stop they age
//! out of the window, the target falls back to the floor, and the ready
//! containers above it are removed (the oldest first).
//!
//! A ready container that waited [`RETIRE_AFTER`] is replaced by a fresh
//! one, before its runner's own bound ends it
//! ([`crate::container::UNCLAIMED`]).
//!
//! The number of ready containers is published to the handles and as the
//! `codemode_warm_pool_size` gauge, the target as `codemode_warm_pool_target`,
//! and each take as `codemode_warm_pool_takes_total{result="warm"|"empty"}`.
//!
//! Warm containers carry the same labels as cold ones (their cell label is
//! [`WARM_CELL`], since the cell is not known yet), so the reaper covers
//! them. They count against nothing a cell sees: the runner's capacity
//! bounds running cells only.

use std::collections::VecDeque;
use std::time::Duration;

use bollard::Docker;
use code_mode_core::time::sleep_until;
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cell::{NotReady, ReadyContainer};
use crate::container::Lockdown;

/// The cell label of a container started for the pool.
pub const WARM_CELL: &str = "warm";
/// How long a pool container may take to send `ready`.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// First pause after a failed start; doubled per failure in a row.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// Longest pause between failed starts.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Take requests that may queue at the actor.
const REQUESTS: usize = 64;
/// The refill time assumed before any start has been timed.
const REFILL_GUESS: Duration = Duration::from_millis(500);
/// Weight of the newest refill in the smoothed refill time.
const REFILL_WEIGHT: f64 = 0.25;
/// Arrivals remembered at most (a flood of takes cannot grow the actor's
/// memory; the rate then reads as at least this many per window, which
/// puts the target at the ceiling anyway).
const ARRIVALS_KEPT: usize = 4096;
/// A ready container waiting this long is replaced by a fresh one, well
/// before its runner would end it by itself
/// ([`crate::container::UNCLAIMED`] after its start): an idle pool renews
/// its containers instead of seeing them die.
pub const RETIRE_AFTER: Duration = Duration::from_secs(9 * 60);
/// The window of arrivals when nothing else is configured.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

/// How the warm pool sizes itself: between `floor` and `ceiling`, by the
/// arrivals of the last `window` (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Ready containers kept even when no cell comes; 0 with a ceiling of
    /// 0 disables the pool.
    pub floor: usize,
    /// Most containers kept ready or starting; below the floor it is the
    /// floor.
    pub ceiling: usize,
    /// How far back arrivals count for the rate; also how long after the
    /// last arrival the target is back at the floor.
    pub window: Duration,
}

impl Sizing {
    /// A pool of exactly `n` containers whatever the demand.
    pub fn fixed(n: usize) -> Sizing {
        Sizing { floor: n, ceiling: n, window: DEFAULT_WINDOW }
    }

    /// The target for `arrivals` in the last window and a refill time of
    /// `refill`: `d + 3·√d` rounded up, `d = λ·T`, within floor and
    /// ceiling.
    pub fn target(&self, arrivals: usize, refill: Duration) -> usize {
        let ceiling = self.ceiling.max(self.floor);
        let window = self.window.as_secs_f64().max(1e-3);
        let demand = arrivals as f64 / window * refill.as_secs_f64();
        let wanted = (demand + 3.0 * demand.sqrt()).ceil();
        // `wanted` is finite and non-negative; saturate past usize.
        let wanted = if wanted >= ceiling as f64 { ceiling } else { wanted as usize };
        wanted.clamp(self.floor, ceiling)
    }
}

/// A handle on the warm pool. Cheap to clone; a disabled pool has no
/// actor and never has a container.
#[derive(Clone, Debug)]
pub struct Pool {
    requests: Option<mpsc::Sender<oneshot::Sender<ReadyContainer>>>,
    size: watch::Receiver<usize>,
    target: watch::Receiver<usize>,
    ceiling: usize,
}

impl Pool {
    /// A pool that keeps nothing: every cell starts cold.
    pub fn disabled() -> Pool {
        let (_, size) = watch::channel(0);
        let (_, target) = watch::channel(0);
        Pool { requests: None, size, target, ceiling: 0 }
    }

    /// Start the actor keeping containers of `lockdown` ready as `sizing`
    /// says until `cancel`. The returned task ends once every container it
    /// held or was starting is removed.
    pub fn start(
        docker: Docker,
        lockdown: Lockdown,
        sizing: Sizing,
        cancel: CancellationToken,
    ) -> (Pool, JoinHandle<()>) {
        let ceiling = sizing.ceiling.max(sizing.floor);
        if ceiling == 0 {
            return (Pool::disabled(), tokio::spawn(async {}));
        }
        let sizing = Sizing { ceiling, ..sizing };
        let (requests, inbox) = mpsc::channel(REQUESTS);
        let (size_tx, size) = watch::channel(0);
        let (target_tx, target) = watch::channel(sizing.floor);
        code_mode_telemetry::set_warm_pool_target(sizing.floor);
        // The pool exists: its size is exported (0) from now on.
        code_mode_telemetry::set_warm_pool_size(0);
        let actor = PoolActor {
            docker,
            lockdown,
            sizing,
            arrivals: VecDeque::new(),
            refill: None,
            target: target_tx,
            starts: cancel.child_token(),
            cancel,
            ready: VecDeque::with_capacity(ceiling),
            starting: JoinSet::new(),
            removing: JoinSet::new(),
            failures: 0,
            retry_at: None,
            size: size_tx,
        };
        let task = tokio::spawn(actor.run(inbox));
        (Pool { requests: Some(requests), size, target, ceiling }, task)
    }

    /// A ready container, if the pool holds one; `None` means start a cold
    /// one. The container is the caller's from here on. Every take counts
    /// as an arrival for the pool's target, also one that finds it empty.
    pub async fn take(&self) -> Option<ReadyContainer> {
        let requests = self.requests.as_ref()?;
        let (reply, answer) = oneshot::channel();
        let taken = match requests.send(reply).await {
            Ok(()) => answer.await.ok(),
            Err(_) => None,
        };
        code_mode_telemetry::warm_pool_take(taken.is_some());
        taken
    }

    /// Containers ready now.
    pub fn size(&self) -> usize {
        *self.size.borrow()
    }

    /// Containers the pool aims to keep ready now (it follows demand).
    pub fn target(&self) -> usize {
        *self.target.borrow()
    }

    /// Most containers the pool ever keeps.
    pub fn ceiling(&self) -> usize {
        self.ceiling
    }

    /// Wait until at least `n` containers are ready; false if the pool
    /// stopped first (or never keeps `n`).
    pub async fn wait_for(&self, n: usize) -> bool {
        if n > self.ceiling {
            return false;
        }
        let mut size = self.size.clone();
        size.wait_for(|&s| s >= n).await.is_ok()
    }

    /// Wait until the pool holds as many ready containers as its target at
    /// that moment (the target may move meanwhile: waiting for a number
    /// read before could wait for ever once the target fell below it);
    /// false if the pool stopped first.
    pub async fn wait_until_full(&self) -> bool {
        let (mut size, mut target) = (self.size.clone(), self.target.clone());
        loop {
            if *size.borrow_and_update() >= *target.borrow_and_update() {
                return true;
            }
            let changed = tokio::select! {
                changed = size.changed() => changed,
                changed = target.changed() => changed,
            };
            if changed.is_err() {
                return false;
            }
        }
    }

    /// Wait until the target satisfies `wanted`; false if the pool stopped
    /// first.
    pub async fn wait_for_target(&self, wanted: impl Fn(usize) -> bool) -> bool {
        let mut target = self.target.clone();
        target.wait_for(|&t| wanted(t)).await.is_ok()
    }
}

/// The state the actor owns.
struct PoolActor {
    docker: Docker,
    lockdown: Lockdown,
    sizing: Sizing,
    /// When the takes of the last window came, oldest first.
    arrivals: VecDeque<Instant>,
    /// The smoothed time of a start until `ready`, once one was timed.
    refill: Option<Duration>,
    /// The target now, for the handles.
    target: watch::Sender<usize>,
    /// Stops the actor.
    cancel: CancellationToken,
    /// Stops the starts in flight: a child of `cancel`, also cancelled when
    /// the actor stops because its last handle went.
    starts: CancellationToken,
    /// Ready containers, oldest first.
    ready: VecDeque<ReadyContainer>,
    starting: JoinSet<Result<(ReadyContainer, Duration), NotReady>>,
    removing: JoinSet<()>,
    /// Failed starts in a row.
    failures: u32,
    /// No new start before this, after a failure.
    retry_at: Option<Instant>,
    size: watch::Sender<usize>,
}

impl PoolActor {
    async fn run(mut self, mut inbox: mpsc::Receiver<oneshot::Sender<ReadyContainer>>) {
        loop {
            let target = self.retarget();
            self.trim(target);
            self.refill(target);
            self.publish();
            let next_expiry = self.arrivals.front().map(|&at| at + self.sizing.window);
            let next_retired = self.ready.front().map(|r| r.ready_at() + RETIRE_AFTER);
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                request = inbox.recv() => {
                    let Some(reply) = request else { break };
                    self.arrived();
                    // The newest is handed out: the oldest go first when
                    // the pool shrinks.
                    if let Some(ready) = self.ready.pop_back() {
                        // A taker that gave up leaves the container ready.
                        if let Err(ready) = reply.send(ready.into_warm()) {
                            self.ready.push_back(ready);
                        }
                    }
                    // An empty pool drops `reply`: the taker starts cold.
                }
                lost = first_to_speak(&mut self.ready) => {
                    if let Some(gone) = self.ready.remove(lost) {
                        tracing::warn!(container = %gone.id(), "a warm container ended or spoke before its cell; replacing it");
                        self.removing.spawn(gone.remove());
                    }
                }
                Some(started) = self.starting.join_next(), if !self.starting.is_empty() => match started {
                    Ok(Ok((ready, took))) => {
                        self.failures = 0;
                        self.timed(took);
                        self.ready.push_back(ready);
                    }
                    Ok(Err(e)) => self.failed(&e.to_string()),
                    Err(e) => self.failed(&e.to_string()),
                },
                _ = sleep_until(self.retry_at) => self.retry_at = None,
                // The oldest arrival leaves the window: the target may fall.
                _ = sleep_until(next_expiry) => {}
                // The oldest ready container has waited long enough: a fresh
                // one replaces it (the refill at the top of the loop).
                _ = sleep_until(next_retired) => {
                    if let Some(old) = self.ready.pop_front() {
                        tracing::debug!(container = %old.id(), "a warm container waited its longest; replacing it");
                        self.removing.spawn(old.remove());
                    }
                }
                Some(_) = self.removing.join_next(), if !self.removing.is_empty() => {}
            }
        }
        // Takers from now on get `None` at once and start cold.
        drop(inbox);
        self.ready_now(0);
        for ready in self.ready.drain(..) {
            self.removing.spawn(ready.remove());
        }
        code_mode_telemetry::set_warm_pool_target(0);
        // Starts in flight see the cancel and remove their container; a
        // start that got ready just before (or ran without a cancel) is
        // removed here.
        self.starts.cancel();
        while let Some(started) = self.starting.join_next().await {
            if let Ok(Ok((ready, _))) = started {
                self.removing.spawn(ready.remove());
            }
        }
        while self.removing.join_next().await.is_some() {}
        tracing::debug!("warm pool stopped");
    }

    /// Tell the handles (and the `codemode_warm_pool_size` gauge) how many
    /// containers are ready.
    fn publish(&self) {
        self.ready_now(self.ready.len());
    }

    fn ready_now(&self, n: usize) {
        if self.size.send_replace(n) != n {
            code_mode_telemetry::set_warm_pool_size(n);
        }
    }

    /// A take came now.
    fn arrived(&mut self) {
        if self.arrivals.len() >= ARRIVALS_KEPT {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back(Instant::now());
    }

    /// A start took `took` until `ready`: smooth it into the refill time.
    fn timed(&mut self, took: Duration) {
        self.refill = Some(match self.refill {
            None => took,
            Some(before) => before.mul_f64(1.0 - REFILL_WEIGHT) + took.mul_f64(REFILL_WEIGHT),
        });
    }

    /// Forget arrivals older than the window, compute the target from the
    /// rest and publish it.
    fn retarget(&mut self) -> usize {
        let now = Instant::now();
        while self.arrivals.front().is_some_and(|&at| at + self.sizing.window <= now) {
            self.arrivals.pop_front();
        }
        let target = self.sizing.target(self.arrivals.len(), self.refill.unwrap_or(REFILL_GUESS));
        if self.target.send_replace(target) != target {
            tracing::debug!(target, arrivals = self.arrivals.len(), "warm pool target");
            code_mode_telemetry::set_warm_pool_target(target);
        }
        target
    }

    /// Remove the oldest ready containers above `target` (starts in flight
    /// finish and are trimmed then, if still above it).
    fn trim(&mut self, target: usize) {
        while self.ready.len() > target {
            let Some(oldest) = self.ready.pop_front() else { break };
            self.removing.spawn(oldest.remove());
        }
    }

    /// Start containers until ready plus starting reach `target`, unless
    /// backing off.
    fn refill(&mut self, target: usize) {
        if self.retry_at.is_some() {
            return;
        }
        while self.ready.len() + self.starting.len() < target {
            let docker = self.docker.clone();
            let lockdown = self.lockdown.clone();
            let cancel = self.starts.clone();
            self.starting.spawn(async move {
                let started = std::time::Instant::now();
                let until = Instant::now() + READY_WITHIN;
                let ready = ReadyContainer::start(&docker, &lockdown, WARM_CELL, until, &cancel).await?;
                let took = started.elapsed();
                code_mode_telemetry::cell_phase(code_mode_telemetry::Phase::Refill, took);
                Ok((ready, took))
            });
        }
    }

    fn failed(&mut self, why: &str) {
        self.failures = self.failures.saturating_add(1);
        let pause = BACKOFF_FIRST.saturating_mul(1 << self.failures.min(16).saturating_sub(1)).min(BACKOFF_MAX);
        tracing::warn!(error = %why, failures = self.failures, retry_in_ms = pause.as_millis() as u64, "a warm container did not start");
        self.retry_at = Some(Instant::now() + pause);
    }
}

/// The index of the first waiting container whose output stream yields
/// anything (it ended, or its runner spoke before its cell); pending while
/// none does, or there are none. Dropping it loses nothing: `next()` is
/// cancel-safe.
async fn first_to_speak(ready: &mut VecDeque<ReadyContainer>) -> usize {
    if ready.is_empty() {
        return std::future::pending().await;
    }
    let (_, index, _) = futures::future::select_all(ready.iter_mut().map(|r| r.output_mut().next())).await;
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing(floor: usize, ceiling: usize) -> Sizing {
        Sizing { floor, ceiling, window: Duration::from_secs(10) }
    }

    #[test]
    fn a_waiting_container_is_renewed_before_its_runner_would_end_it() {
        let margin = crate::container::UNCLAIMED.saturating_sub(RETIRE_AFTER);
        assert!(margin >= Duration::from_secs(60), "the pool renews {margin:?} before the backstop");
    }

    #[test]
    fn with_no_arrivals_the_target_is_the_floor() {
        assert_eq!(sizing(2, 8).target(0, Duration::from_millis(600)), 2);
        assert_eq!(sizing(0, 8).target(0, Duration::from_secs(5)), 0);
    }

    #[test]
    fn the_target_grows_with_the_arrival_rate_and_the_refill_time_up_to_the_ceiling() {
        let s = sizing(1, 8);
        let refill = Duration::from_millis(600);
        // 1 a second for 0.6 s refills: d = 0.6, 0.6 + 3 * 0.77 = 2.9.
        assert_eq!(s.target(10, refill), 3);
        // 3 a second: d = 1.8, 1.8 + 4.02 = 5.8.
        assert_eq!(s.target(30, refill), 6);
        assert!(s.target(30, refill * 2) > s.target(30, refill), "a slower refill needs more ahead");
        assert_eq!(s.target(1000, refill), 8, "never above the ceiling");
        assert_eq!(s.target(usize::MAX, Duration::from_secs(3600)), 8);
    }

    #[test]
    fn a_ceiling_below_the_floor_is_the_floor_and_a_fixed_pool_ignores_demand() {
        assert_eq!(sizing(4, 2).target(1000, Duration::from_secs(1)), 4);
        assert_eq!(Sizing::fixed(2).target(0, Duration::from_secs(1)), 2);
        assert_eq!(Sizing::fixed(2).target(1000, Duration::from_secs(1)), 2);
    }
}
