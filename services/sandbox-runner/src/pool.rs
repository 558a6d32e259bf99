//! The warm pool: containers created, started and `ready` ahead of need.
//!
//! One actor task owns the ready containers (each a [`ReadyContainer`],
//! its attach streams included) and keeps `warm` of them: it starts new
//! ones in the background whenever one is taken or lost, watches the
//! waiting ones so that a container that dies (or says anything) before its
//! cell is removed and replaced, and backs off when starting fails. Each
//! container runs one cell only: [`Pool::take`] hands it over for good, and
//! the cell removes it. On cancel (or when the last handle goes) the actor
//! removes every container it holds or is starting before its task ends.
//!
//! The number of ready containers is published to the handles and as the
//! `codemode_warm_pool_size` gauge.
//!
//! Warm containers carry the same labels as cold ones (their cell label is
//! [`WARM_CELL`], since the cell is not known yet), so the reaper covers
//! them. They count against nothing a cell sees: the runner's capacity
//! bounds running cells only.

use std::time::Duration;

use bollard::Docker;
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

/// A handle on the warm pool. Cheap to clone; a pool of size 0 has no
/// actor and never has a container.
#[derive(Clone, Debug)]
pub struct Pool {
    requests: Option<mpsc::Sender<oneshot::Sender<ReadyContainer>>>,
    size: watch::Receiver<usize>,
    target: usize,
}

impl Pool {
    /// A pool that keeps nothing: every cell starts cold.
    pub fn disabled() -> Pool {
        let (_, size) = watch::channel(0);
        Pool { requests: None, size, target: 0 }
    }

    /// Start the actor keeping `warm` containers of `lockdown` ready until
    /// `cancel`. The returned task ends once every container it held or was
    /// starting is removed.
    pub fn start(docker: Docker, lockdown: Lockdown, warm: usize, cancel: CancellationToken) -> (Pool, JoinHandle<()>) {
        if warm == 0 {
            return (Pool::disabled(), tokio::spawn(async {}));
        }
        let (requests, inbox) = mpsc::channel(REQUESTS);
        let (size_tx, size) = watch::channel(0);
        let actor = PoolActor {
            docker,
            lockdown,
            warm,
            starts: cancel.child_token(),
            cancel,
            ready: Vec::with_capacity(warm),
            starting: JoinSet::new(),
            removing: JoinSet::new(),
            failures: 0,
            retry_at: None,
            size: size_tx,
        };
        let task = tokio::spawn(actor.run(inbox));
        (Pool { requests: Some(requests), size, target: warm }, task)
    }

    /// A ready container, if the pool holds one; `None` means start a cold
    /// one. The container is the caller's from here on.
    pub async fn take(&self) -> Option<ReadyContainer> {
        let requests = self.requests.as_ref()?;
        if *self.size.borrow() == 0 {
            return None;
        }
        let (reply, answer) = oneshot::channel();
        requests.send(reply).await.ok()?;
        answer.await.ok()
    }

    /// Containers ready now.
    pub fn size(&self) -> usize {
        *self.size.borrow()
    }

    /// Containers the pool keeps ready when it can.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Wait until at least `n` containers are ready; false if the pool
    /// stopped first (or keeps fewer than `n`).
    pub async fn wait_for(&self, n: usize) -> bool {
        if n > self.target {
            return false;
        }
        let mut size = self.size.clone();
        size.wait_for(|&s| s >= n).await.is_ok()
    }
}

/// The state the actor owns.
struct PoolActor {
    docker: Docker,
    lockdown: Lockdown,
    warm: usize,
    /// Stops the actor.
    cancel: CancellationToken,
    /// Stops the starts in flight: a child of `cancel`, also cancelled when
    /// the actor stops because its last handle went.
    starts: CancellationToken,
    ready: Vec<ReadyContainer>,
    starting: JoinSet<Result<ReadyContainer, NotReady>>,
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
            self.refill();
            self.publish();
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                request = inbox.recv() => {
                    let Some(reply) = request else { break };
                    if let Some(ready) = self.ready.pop() {
                        // A taker that gave up leaves the container ready.
                        if let Err(ready) = reply.send(ready.into_warm()) {
                            self.ready.push(ready);
                        }
                    }
                }
                lost = first_to_speak(&mut self.ready) => {
                    let gone = self.ready.swap_remove(lost);
                    tracing::warn!(container = %gone.id(), "a warm container ended or spoke before its cell; replacing it");
                    self.removing.spawn(gone.remove());
                }
                Some(started) = self.starting.join_next(), if !self.starting.is_empty() => match started {
                    Ok(Ok(ready)) => {
                        self.failures = 0;
                        self.ready.push(ready);
                    }
                    Ok(Err(e)) => self.failed(&e.to_string()),
                    Err(e) => self.failed(&e.to_string()),
                },
                _ = sleep_until(self.retry_at) => self.retry_at = None,
                Some(_) = self.removing.join_next(), if !self.removing.is_empty() => {}
            }
        }
        // Takers from now on get `None` at once and start cold.
        drop(inbox);
        self.ready_now(0);
        for ready in self.ready.drain(..) {
            self.removing.spawn(ready.remove());
        }
        // Starts in flight see the cancel and remove their container; a
        // start that got ready just before (or ran without a cancel) is
        // removed here.
        self.starts.cancel();
        while let Some(started) = self.starting.join_next().await {
            if let Ok(Ok(ready)) = started {
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

    /// Start containers until ready plus starting reach `warm`, unless
    /// backing off.
    fn refill(&mut self) {
        if self.retry_at.is_some() {
            return;
        }
        while self.ready.len() + self.starting.len() < self.warm {
            let docker = self.docker.clone();
            let lockdown = self.lockdown.clone();
            let cancel = self.starts.clone();
            self.starting.spawn(async move {
                let started = std::time::Instant::now();
                let until = Instant::now() + READY_WITHIN;
                let ready = ReadyContainer::start(&docker, &lockdown, WARM_CELL, until, &cancel).await;
                if ready.is_ok() {
                    code_mode_telemetry::cell_phase(code_mode_telemetry::Phase::Refill, started.elapsed());
                }
                ready
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
async fn first_to_speak(ready: &mut [ReadyContainer]) -> usize {
    if ready.is_empty() {
        return std::future::pending().await;
    }
    let (_, index, _) = futures::future::select_all(ready.iter_mut().map(|r| r.output_mut().next())).await;
    index
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
