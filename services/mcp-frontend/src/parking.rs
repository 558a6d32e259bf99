//! The parking lot: cells waiting for a stateless client's retried call.
//!
//! A client of the stateless protocol (2026-07-28) cannot be sent an
//! elicitation request, so a `run_python` call whose cell needs approvals
//! returns an input-required result holding the questions and a
//! `requestState` token; the cell keeps running, its calls waiting. One
//! actor per frontend process owns such cells, by token, until the client
//! calls again with the answers (over stateless HTTP that call reaches a
//! new session object, so the lot is the process's, not a session's) or
//! until the longest question's timeout plus [`HOP_MARGIN`] passes; then
//! the parked cell is dropped, which refuses its waiting calls. The task
//! ends when the last handle goes.

use std::collections::HashMap;

use code_mode_core::time::sleep_until;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::auth::Identity;
use crate::questions::Question;
use crate::session::CellRun;
use code_mode_core::defaults::HOP_MARGIN;

/// Park requests that may wait at the actor.
const REQUESTS: usize = 64;

/// A cell whose request asked the client for answers, and the questions.
#[derive(Debug)]
pub(crate) struct Parked {
    /// The running cell.
    pub run: CellRun,
    /// The questions asked, in the order of their keys (`approval-<i>` for
    /// the bridge's approvals, `ask-<i>` for a wrapped server's own).
    pub pending: Vec<Question>,
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

    /// Keep `parked` under `token` until `until` (plus [`HOP_MARGIN`]).
    pub async fn park(&self, token: String, parked: Parked, until: Instant) {
        let until = until + HOP_MARGIN;
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use code_mode_proto::{ApprovalReply, ApprovalRequest};
    use tokio::sync::{mpsc, oneshot};

    use super::*;

    /// A parked cell of `identity` with one question waiting; the receiver
    /// of that question's answer.
    fn parked(identity: Option<&str>) -> (Parked, oneshot::Receiver<ApprovalReply>) {
        let (answer, waiting) = oneshot::channel();
        let request = ApprovalRequest {
            session: "s".into(),
            cell_id: "c".into(),
            server: "srv".into(),
            tool: "echo".into(),
            arguments: "(no arguments)".into(),
            rule: "/tools/echo".into(),
            timeout_ms: 1000,
            console: None,
            connect: None,
        };
        let (_route, questions) = mpsc::channel(1);
        let run = CellRun {
            result: Box::pin(std::future::pending()),
            questions,
            tool: "run_python".into(),
            running: crate::session::Running::Cell { id: "c".into(), stop: None },
            op: code_mode_proto::Op::Tool,
        };
        let pending = vec![Question::Approval(crate::approval::Pending { request, answer })];
        (Parked { run, pending, identity: identity.map(Identity::new) }, waiting)
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_cell_is_taken_once_by_its_own_identity_and_another_identity_finds_nothing() {
        let lot = ParkingLot::start();
        let (cell, _waiting) = parked(Some("alice"));
        lot.park("token-1".into(), cell, Instant::now() + Duration::from_secs(60)).await;
        assert!(lot.take("token-1", Some(Identity::new("bob"))).await.is_none(), "bob takes nothing");
        assert!(lot.take("token-1", None).await.is_none(), "nor does an unauthenticated caller");
        let taken = lot.take("token-1", Some(Identity::new("alice"))).await.expect("alice's cell is still there");
        assert_eq!(taken.pending.len(), 1);
        assert!(lot.take("token-1", Some(Identity::new("alice"))).await.is_none(), "taken once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cell_nobody_takes_is_dropped_after_its_longest_question_and_the_margin_refusing_its_calls() {
        use tokio::sync::oneshot::error::TryRecvError;
        let lot = ParkingLot::start();
        let (cell, mut waiting) = parked(None);
        let until = Instant::now() + Duration::from_secs(60);
        lot.park("token-2".into(), cell, until).await;
        let (later, _later_waiting) = parked(None);
        lot.park("later".into(), later, until + HOP_MARGIN * 10).await;
        // Still parked just before its time and the margin are up ...
        tokio::time::sleep_until(until + HOP_MARGIN - Duration::from_millis(10)).await;
        assert_eq!(waiting.try_recv(), Err(TryRecvError::Empty), "the question still waits");
        // ... dropped right after: the waiting call's answer goes with it,
        // which the bridge takes as a refusal.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(waiting.try_recv(), Err(TryRecvError::Closed), "the parked cell was dropped");
        assert!(lot.take("token-2", None).await.is_none());
        assert!(lot.take("later", None).await.is_some(), "a later cell stays until its own time");
    }
}
