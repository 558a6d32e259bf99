//! Holding a cell while one of its calls waits for a person: its container
//! is paused (the engine's pause, the cgroup freezer: no process of the
//! code is scheduled, so it uses no CPU and its clocks' timers do not fire
//! until it runs again), and the time held does not count against the
//! cell's deadline.
//!
//! The bridge asks on the cell's hold subject ([`subjects::cell_hold`]),
//! which the runner serves from the start of the cell's run to its end;
//! after the end nobody answers there, which tells a waiting bridge the
//! cell is gone. Each waiting call holds the cell on its own (several may
//! wait at once); the container runs again when none holds it. A hold
//! lapses after [`LAPSE`] without a renewal (the bridge that held it died),
//! and a cell is held at most its allowance in all (the cell's
//! `approval_timeout_ms`): past it, holds are refused and its waits count
//! against its deadline again, so a cell's life stays bounded by its
//! deadline plus that allowance, which is what its frontend waits for.
//!
//! [`Hold`] is owned by the cell's run (the `drive` loop reads the deadline
//! from it); the subject's handler shares its state behind a mutex, held
//! across the engine's pause and unpause so they never interleave. Each
//! pause and resume is also told to the cell's lease ([`Progress::held`]),
//! so the frontend hears how long the cell was held and does not count it
//! as run time; a bridge asking a team about a call gets the cell's code
//! with its first hold ([`CellHold::code`]), for the approvers to read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use code_mode_core::bus::Bus;
use code_mode_core::lease::Progress;
use code_mode_proto::{CellHeld, CellHold, RunCell, queue_groups, subjects};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a hold lasts without a renewal (the bridge renews every 3 s).
pub const LAPSE: Duration = Duration::from_secs(12);

/// Tries of one pause before the next renewal tries again.
const PAUSE_TRIES: u32 = 3;

/// The pause between two tries.
const PAUSE_RETRY: Duration = Duration::from_millis(200);

/// What can pause a container.
#[derive(Debug, Clone)]
pub struct Pauser {
    /// The engine.
    pub docker: Docker,
    /// The container.
    pub id: String,
}

#[derive(Debug, Default)]
struct State {
    /// Each holding call and when it last renewed.
    holders: HashMap<u32, Instant>,
    /// Since when the container is paused.
    since: Option<Instant>,
    /// Time held before `since`.
    held: Duration,
    /// The run has ended: holds are refused from then on.
    broken: Option<String>,
}

impl State {
    fn held_now(&self) -> Duration {
        self.held + self.since.map(|s| s.elapsed()).unwrap_or_default()
    }
}

/// One cell's hold.
#[derive(Debug, Clone)]
pub struct Hold {
    state: Arc<Mutex<State>>,
    allowance: Duration,
    pauser: Option<Pauser>,
    /// Where the cell's lease says how long it has been held.
    clock: Progress,
    /// The cell's code, for a bridge that asks ([`CellHold::code`]).
    code: Arc<str>,
}

impl Hold {
    /// A hold that never holds (a cell whose id names no subject, or runs
    /// without an engine to pause it).
    pub fn none() -> Self {
        Self {
            state: Arc::default(),
            allowance: Duration::ZERO,
            pauser: None,
            clock: Progress::default(),
            code: Arc::from(""),
        }
    }

    /// Serve the hold subject of `cell` until `stop`; `allowance` is the
    /// most the cell may be held in all; `clock` is where its lease says
    /// how long it was held.
    pub async fn serve(
        bus: &Bus,
        cell: &RunCell,
        pauser: Pauser,
        allowance: Duration,
        clock: Progress,
        stop: CancellationToken,
    ) -> Self {
        let cell_id = cell.cell_id.as_str();
        let code = Arc::from(cell.code.as_str());
        let hold = Self { state: Arc::default(), allowance, pauser: Some(pauser), clock, code };
        let Some(subject) = subjects::cell_hold(cell_id) else { return Self::none() };
        let me = hold.clone();
        let served = bus
            .serve(&subject, queue_groups::SANDBOX_RUNNER, stop, move |request: CellHold| {
                let me = me.clone();
                async move { Ok(me.handle(request).await) }
            })
            .await;
        if let Err(e) = served {
            tracing::warn!(cell = %cell_id, error = %e, "cannot serve the cell's hold subject: its waits count against its deadline");
            return Self::none();
        }
        hold
    }

    async fn handle(&self, request: CellHold) -> CellHeld {
        let mut state = self.state.lock().await;
        if request.hold {
            let refused = if let Some(why) = &state.broken {
                Some(why.clone())
            } else if state.held_now() >= self.allowance {
                Some(format!("the cell was held for its whole allowance of {} s", self.allowance.as_secs()))
            } else {
                None
            };
            if let Some(why) = refused {
                state.holders.clear();
                self.resume(&mut state).await;
                let held_ms = state.held_now().as_millis() as u64;
                return CellHeld { paused: false, held_ms, refused: Some(why), code: self.code_for(&request) };
            }
            state.holders.insert(request.call_index, Instant::now());
            if state.since.is_none() {
                self.pause(&mut state).await;
            }
        } else {
            state.holders.remove(&request.call_index);
            if state.holders.is_empty() {
                self.resume(&mut state).await;
            }
        }
        CellHeld {
            paused: state.since.is_some(),
            held_ms: state.held_now().as_millis() as u64,
            refused: state.broken.clone(),
            code: self.code_for(&request),
        }
    }

    /// The cell's code, when the request asks for it.
    fn code_for(&self, request: &CellHold) -> Option<String> {
        request.code.then(|| self.code.to_string())
    }

    /// Pause the container. The engine's freezer may fail under load
    /// ("unable to freeze"): a few quick tries here, and each renewal of a
    /// hold tries again while the container still runs (its deadline counts
    /// meanwhile, as for a cell that is not held).
    async fn pause(&self, state: &mut State) {
        let Some(pauser) = &self.pauser else { return };
        let mut last = None;
        for attempt in 0..PAUSE_TRIES {
            if attempt > 0 {
                tokio::time::sleep(PAUSE_RETRY).await;
            }
            match pauser.docker.pause_container(&pauser.id).await {
                Ok(()) => {
                    state.since = Some(Instant::now());
                    self.clock.held();
                    tracing::info!(container = %pauser.id, "the cell is held: its container is paused while a person decides");
                    return;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            tracing::warn!(container = %pauser.id, error = %e, "could not pause a held cell's container (tried again at the next renewal)");
        }
    }

    async fn resume(&self, state: &mut State) {
        let Some(since) = state.since else { return };
        if let Some(pauser) = &self.pauser
            && let Err(e) = pauser.docker.unpause_container(&pauser.id).await
        {
            tracing::warn!(container = %pauser.id, error = %e, "could not unpause a held cell's container");
        }
        state.held += since.elapsed();
        state.since = None;
        self.clock.resumed();
        tracing::info!(held_ms = state.held.as_millis() as u64, "the cell runs again");
    }

    /// The cell's deadline now: `base` plus the time held, `None` while it
    /// is held (its deadline does not run).
    pub async fn deadline(&self, base: Instant) -> Option<Instant> {
        let state = self.state.lock().await;
        match state.since {
            Some(_) => None,
            None => Some(base + state.held),
        }
    }

    /// Drop the holds not renewed within [`LAPSE`] (their bridge died), and
    /// end a hold that passed the allowance; the container runs again when
    /// none is left.
    pub async fn lapse(&self) {
        let mut state = self.state.lock().await;
        if state.since.is_none() {
            return;
        }
        state.holders.retain(|_, renewed| renewed.elapsed() < LAPSE);
        if state.held_now() >= self.allowance {
            tracing::info!("a held cell passed its allowance: it runs again, and its waits count against its deadline");
            state.holders.clear();
        }
        if state.holders.is_empty() {
            self.resume(&mut state).await;
        }
    }

    /// True while the container is paused.
    pub async fn is_held(&self) -> bool {
        self.state.lock().await.since.is_some()
    }

    /// The run ended: run the container again if it is paused (so it can
    /// be killed, or run the session's next cell).
    pub async fn finish(&self) {
        let mut state = self.state.lock().await;
        state.holders.clear();
        self.resume(&mut state).await;
        state.broken = Some("the cell has ended".into());
    }
}
