//! Cell leases: how a frontend learns within seconds that the sandbox-runner
//! running its cell died, instead of at the cell's deadline.
//!
//! A runner that takes a cell answers on the cell's lease subject
//! ([`subjects::cell_lease`]) until the cell ends ([`hold`]); the frontend
//! asks there every [`PING`] while it waits for the report ([`lost`]). A
//! runner killed, crashed or cut off from NATS stops answering: its
//! subscription goes with its connection, so the frontend's next question
//! finds no responder, and after [`LOST_AFTER`] without an answer the cell
//! is reported lost. The lease is request/reply on the [`Bus`] like every
//! other message, so it works alike in one process and over NATS.

use std::time::Duration;

use code_mode_proto::{LeaseCheck, LeaseHeld, queue_groups, subjects};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::bus::{Bus, BusError};

/// How often a frontend asks after a running cell (and how long it waits
/// for each answer).
pub const PING: Duration = Duration::from_secs(1);

/// How long without an answer before a cell's runner is taken for dead.
/// Three missed questions: one lost to a slow scheduler or a NATS reconnect
/// is not a death; with [`PING`] a death is seen within about 4 s.
pub const LOST_AFTER: Duration = Duration::from_secs(3);

/// A held lease: answered until dropped.
#[derive(Debug)]
pub struct Held {
    _stop: DropGuard,
}

/// Answer on the lease subject of `cell_id` as `runner` until the returned
/// guard is dropped. `None` when the cell id cannot be a subject (its
/// frontend does not ask either).
pub async fn hold(bus: &Bus, cell_id: &str, runner: &str) -> Result<Option<Held>, BusError> {
    let Some(subject) = subjects::cell_lease(cell_id) else { return Ok(None) };
    let stop = CancellationToken::new();
    let runner = runner.to_string();
    bus.serve(&subject, queue_groups::SANDBOX_RUNNER, stop.clone(), move |_: LeaseCheck| {
        let runner = runner.clone();
        async move { Ok(LeaseHeld { runner }) }
    })
    .await?;
    Ok(Some(Held { _stop: stop.drop_guard() }))
}

/// Resolve once the lease of `cell_id` went unanswered for [`LOST_AFTER`],
/// with how long it was silent; never while it is answered. The time
/// counts from this call, so the runner has [`LOST_AFTER`] to take the cell
/// and hold its lease. A cell id that cannot be a subject is never lost.
pub async fn lost(bus: &Bus, cell_id: &str) -> Duration {
    let Some(subject) = subjects::cell_lease(cell_id) else { return std::future::pending().await };
    let check = LeaseCheck { cell_id: cell_id.to_string() };
    let mut answered = Instant::now();
    loop {
        tokio::time::sleep(PING).await;
        let asked = tokio::time::timeout(PING, bus.call_quiet::<_, LeaseHeld>(&subject, &check, PING)).await;
        match asked {
            Ok(Ok(_)) => answered = Instant::now(),
            Ok(Err(e)) if answered.elapsed() >= LOST_AFTER => {
                tracing::warn!(cell = %cell_id, error = %e, "the cell's lease went unanswered");
                return answered.elapsed();
            }
            Err(_) if answered.elapsed() >= LOST_AFTER => return answered.elapsed(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_lease_is_never_lost_and_a_dropped_one_is_lost_within_five_seconds() {
        let bus = Bus::in_process();
        let cell = "0b7f3c1e-cell";
        let held = hold(&bus, cell, "runner-a").await.unwrap().expect("a cell id that is one token");
        let watched = tokio::time::timeout(Duration::from_secs(5), lost(&bus, cell)).await;
        assert!(watched.is_err(), "a held lease was taken for lost: {watched:?}");

        let watching = tokio::spawn({
            let bus = bus.clone();
            async move { lost(&bus, cell).await }
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let dropped = Instant::now();
        drop(held);
        let silent = tokio::time::timeout(Duration::from_secs(10), watching).await.expect("lost in time").unwrap();
        let seen = dropped.elapsed();
        assert!(seen <= Duration::from_secs(5), "the loss was seen {seen:?} after the lease went");
        assert!(silent >= LOST_AFTER, "{silent:?}");
    }

    #[tokio::test]
    async fn a_lease_nobody_took_is_lost_after_the_grace_and_a_bad_cell_id_has_none() {
        let bus = Bus::in_process();
        let started = Instant::now();
        lost(&bus, "never-taken").await;
        assert!(started.elapsed() >= LOST_AFTER && started.elapsed() < LOST_AFTER + PING * 2);
        assert!(hold(&bus, "a.b", "runner-a").await.unwrap().is_none());
        let never = tokio::time::timeout(Duration::from_secs(3), lost(&bus, "a.b")).await;
        assert!(never.is_err(), "a cell without a lease is never lost");
    }
}
