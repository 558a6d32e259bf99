//! The remover: removes the containers of finished cells off the cells'
//! path.
//!
//! A cell's report goes back as soon as its code can do nothing more that
//! reaches the host (at `done`, after which nothing of the container is
//! read or relayed; otherwise once it is killed); making sure the container
//! is dead and removing it costs the engine 50-130 ms here and changes
//! nothing the report says, so it happens after, in this actor: a container
//! not yet killed is killed first, at once (never queued behind removals),
//! then removed. The actor owns every
//! container handed to it until the engine confirms its removal: a failed
//! removal is tried again ([`ATTEMPTS`] in all, then left to the reaper at
//! the next start, which removes containers of a dead owner). At most
//! [`AT_ONCE`] removals run at once: the engine is CPU-bound, and more at
//! once would only slow the warm pool's refill and the running cells.
//!
//! Nothing is lost on the way in either: [`Remover::remove`] waits for room
//! in the bounded inbox (its size is the runner's capacity, so containers
//! alive stay within about twice the capacity plus the warm pool, and
//! removals that fall behind slow the cells' reports rather than pile up),
//! and once the actor has stopped taking containers the caller removes the
//! container itself, inline.
//!
//! Shutdown: the runner calls [`Remover::finish`] once every cell has
//! ended (each handed its container over first). The actor closes its
//! inbox, removes what was queued and what is in flight, and only then does
//! its task end, so removal finishes before shutdown completes.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::container::Container;

/// Removals running at once.
pub const AT_ONCE: usize = 2;
/// Tries of one removal before it is left to the reaper.
pub const ATTEMPTS: u32 = 3;
/// Pause between two tries of one removal.
const RETRY_AFTER: Duration = Duration::from_millis(250);

/// A handle on the remover. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Remover {
    inbox: mpsc::Sender<Handed>,
    finish: CancellationToken,
}

/// A container handed over, and whether it was killed already.
type Handed = (Container, bool);

impl Remover {
    /// Start the actor, with room for `inbox` containers waiting. Its task
    /// ends after [`Remover::finish`] once every container handed over is
    /// removed (or, if every handle is dropped first, the same way).
    pub fn start(inbox: usize) -> (Remover, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(inbox.max(1));
        let finish = CancellationToken::new();
        let task = tokio::spawn(run(rx, inbox.max(1), finish.clone()));
        (Remover { inbox: tx, finish }, task)
    }

    /// Hand `container` over to be killed (unless `killed` already) and
    /// removed; the caller is done with it. Waits only when the inbox is
    /// full; after [`Remover::finish`] it removes the container itself
    /// before returning.
    pub async fn remove(&self, container: Container, killed: bool) {
        if let Err(mpsc::error::SendError((container, _))) = self.inbox.send((container, killed)).await {
            container.remove().await;
        }
    }

    /// Take no more containers: remove the queued ones, then end the task.
    pub fn finish(&self) {
        self.finish.cancel();
    }
}

async fn run(mut inbox: mpsc::Receiver<Handed>, held: usize, finish: CancellationToken) {
    // Kills run at once; removals (of killed containers) at most AT_ONCE.
    // At most `held` containers wait here beyond those being removed, so a
    // remover that falls behind fills its inbox and holds the reports.
    let mut killing: JoinSet<Container> = JoinSet::new();
    let mut killed: std::collections::VecDeque<Container> = Default::default();
    let mut removing: JoinSet<()> = JoinSet::new();
    let mut closing = false;
    let mut drained = false;
    loop {
        while removing.len() < AT_ONCE {
            let Some(container) = killed.pop_front() else { break };
            let span = tracing::debug_span!("remove", container = %container.id());
            removing.spawn(remove_with_retries(container).instrument(span));
        }
        if drained && killing.is_empty() && killed.is_empty() {
            break;
        }
        tokio::select! {
            _ = finish.cancelled(), if !closing => {
                // Later hand-overs fail and are removed by their callers;
                // what is queued is still received below.
                inbox.close();
                closing = true;
            }
            next = inbox.recv(), if !drained && killing.len() + killed.len() < held => match next {
                Some((container, true)) => killed.push_back(container),
                Some((container, false)) => {
                    killing.spawn(async move {
                        let started = std::time::Instant::now();
                        container.kill().await;
                        code_mode_telemetry::cell_phase(code_mode_telemetry::Phase::Kill, started.elapsed());
                        container
                    });
                }
                None => drained = true,
            },
            Some(done) = killing.join_next(), if !killing.is_empty() => {
                if let Ok(container) = done {
                    killed.push_back(container);
                }
            }
            Some(_) = removing.join_next(), if !removing.is_empty() => {}
        }
    }
    while removing.join_next().await.is_some() {}
    tracing::debug!("remover stopped");
}

async fn remove_with_retries(container: Container) {
    let started = std::time::Instant::now();
    for attempt in 1..=ATTEMPTS {
        if container.try_remove().await {
            code_mode_telemetry::cell_phase(code_mode_telemetry::Phase::Remove, started.elapsed());
            container.forget();
            return;
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(RETRY_AFTER).await;
        }
    }
    tracing::error!(container = %container.id(), attempts = ATTEMPTS, "could not remove a container: the reaper removes it at the next start");
    container.forget();
}
