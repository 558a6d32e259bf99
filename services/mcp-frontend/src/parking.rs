//! The parking lot: cells waiting for a stateless client's retried call.
//!
//! A client of the stateless protocol (2026-07-28) cannot be sent an
//! elicitation request, so a `run_python` call whose cell needs approvals
//! returns an input-required result holding the questions and a
//! `requestState` token; the cell keeps running, its calls waiting. One
//! actor per frontend process owns such cells, by token, until the client
//! calls again with the answers (over stateless HTTP that call reaches a
//! new session object, so the lot is the process's, not a session's) or
//! until the longest question's timeout plus [`PARK_MARGIN`] passes; then
//! the parked cell is dropped, which refuses its waiting calls. The task
//! ends when the last handle goes.

use std::collections::HashMap;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::approval::{PARK_MARGIN, Pending};
use crate::auth::Identity;
use crate::session::CellRun;

/// Park requests that may wait at the actor.
const REQUESTS: usize = 64;

/// A cell whose request asked the client for answers, and the questions.
#[derive(Debug)]
pub(crate) struct Parked {
    /// The running cell.
    pub run: CellRun,
    /// The questions asked, in the order of their keys (`approval-<i>`).
    pub pending: Vec<Pending>,
    /// Who ran it: only a retried call of the same identity takes it.
    pub identity: Option<Identity>,
}

enum Command {
    Park { token: String, parked: Parked, until: Instant },
    Take { token: String, identity: Option<Identity>, reply: oneshot::Sender<Option<Parked>> },
}

/// A handle on the parking lot. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct ParkingLot {
    requests: mpsc::Sender<Command>,
}

impl ParkingLot {
    /// Start the actor.
    pub fn start() -> ParkingLot {
        let (requests, inbox) = mpsc::channel(REQUESTS);
        tokio::spawn(run(inbox));
        ParkingLot { requests }
    }

    /// Keep `parked` under `token` until `until` (plus [`PARK_MARGIN`]).
    pub async fn park(&self, token: String, parked: Parked, until: Instant) {
        let until = until + PARK_MARGIN;
        // A lot that is gone drops the cell, as an expired one would be.
        let _ = self.requests.send(Command::Park { token, parked, until }).await;
    }

    /// Take the cell parked under `token`, if it is still there and was
    /// parked by `identity` (a call of another identity finds nothing, and
    /// the cell stays for its own client).
    pub async fn take(&self, token: &str, identity: Option<Identity>) -> Option<Parked> {
        let (reply, answer) = oneshot::channel();
        self.requests.send(Command::Take { token: token.to_string(), identity, reply }).await.ok()?;
        answer.await.ok().flatten()
    }
}

async fn run(mut inbox: mpsc::Receiver<Command>) {
    let mut parked: HashMap<String, (Parked, Instant)> = HashMap::new();
    loop {
        let next_expiry = parked.values().map(|(_, until)| *until).min();
        tokio::select! {
            command = inbox.recv() => match command {
                None => break,
                Some(Command::Park { token, parked: cell, until }) => { parked.insert(token, (cell, until)); }
                Some(Command::Take { token, identity, reply }) => {
                    let mine = parked.get(&token).is_some_and(|(p, _)| p.identity == identity);
                    if !mine && parked.contains_key(&token) {
                        tracing::warn!(
                            identity = crate::auth::shown(identity.as_ref()),
                            "refused a retried call whose cell another identity ran"
                        );
                    }
                    let _ = reply.send(if mine { parked.remove(&token).map(|(p, _)| p) } else { None });
                }
            },
            _ = sleep_until(next_expiry) => {
                let now = Instant::now();
                parked.retain(|_, (_, until)| {
                    let keep = *until > now;
                    if !keep {
                        tracing::warn!("the client never called again with the approval answers: the cell's result is dropped");
                    }
                    keep
                });
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
