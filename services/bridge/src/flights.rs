//! The calls running in this bridge that their client may cancel, by the
//! id the frontend's cancel names ([`subjects::CANCEL`]): a direct call's
//! id, or a cell's id for all the calls of that cell at once.
//!
//! Each id has one token while calls of it run here; cancelling it cancels
//! every such call at its server (`notifications/cancelled`) and withdraws
//! the questions they wait on (a team's question leaves the board). An id
//! cancelled here is remembered for [`REMEMBERED`], so a call of a
//! cancelled cell that arrives after the cancel (it was on its way as the
//! container was killed) is refused without going out.
//!
//! [`subjects::CANCEL`]: code_mode_proto::subjects::CANCEL

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// How long a cancelled id is remembered.
pub const REMEMBERED: Duration = Duration::from_secs(120);
/// The most cancelled ids remembered (past it, the expired go, then any).
const MOST_REMEMBERED: usize = 10_000;

/// The cancellable calls of one bridge.
#[derive(Debug, Default)]
pub(crate) struct Flights {
    running: Mutex<HashMap<String, Flight>>,
    /// Ids cancelled lately, and when.
    cancelled: Mutex<HashMap<String, Instant>>,
}

#[derive(Debug)]
struct Flight {
    token: CancellationToken,
    calls: usize,
}

/// One call's place among the flights: its token, and its leaving when
/// dropped.
#[derive(Debug)]
pub(crate) struct Entered<'a> {
    flights: &'a Flights,
    id: String,
    token: CancellationToken,
}

impl Entered<'_> {
    /// The token a cancel of this call's id fires.
    pub(crate) fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut running = code_mode_core::sync::lock(&self.flights.running);
        if let Some(flight) = running.get_mut(&self.id) {
            flight.calls = flight.calls.saturating_sub(1);
            if flight.calls == 0 {
                running.remove(&self.id);
            }
        }
    }
}

impl Flights {
    /// A call of `id` starts here: its token is shared with the other
    /// calls of `id` running now, and comes back cancelled when `id` was
    /// cancelled lately.
    pub(crate) fn enter(&self, id: &str) -> Entered<'_> {
        let cancelled = self.was_cancelled(id);
        let mut running = code_mode_core::sync::lock(&self.running);
        let flight =
            running.entry(id.to_string()).or_insert_with(|| Flight { token: CancellationToken::new(), calls: 0 });
        flight.calls += 1;
        if cancelled {
            flight.token.cancel();
        }
        Entered { flights: self, id: id.to_string(), token: flight.token.clone() }
    }

    /// The token of the calls of `id` running now, if any (a question one
    /// of them waits on is withdrawn when it fires).
    pub(crate) fn token_of(&self, id: &str) -> Option<CancellationToken> {
        code_mode_core::sync::lock(&self.running).get(id).map(|f| f.token.clone())
    }

    /// Cancel the calls of `id` running here, and any that arrive within
    /// [`REMEMBERED`]; true when some were running.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        {
            let now = Instant::now();
            let mut cancelled = code_mode_core::sync::lock(&self.cancelled);
            if cancelled.len() >= MOST_REMEMBERED {
                cancelled.retain(|_, at| now.duration_since(*at) <= REMEMBERED);
            }
            if cancelled.len() >= MOST_REMEMBERED
                && let Some(any) = cancelled.keys().next().cloned()
            {
                cancelled.remove(&any);
            }
            cancelled.insert(id.to_string(), now);
        }
        match code_mode_core::sync::lock(&self.running).get(id) {
            Some(flight) => {
                flight.token.cancel();
                true
            }
            None => false,
        }
    }

    fn was_cancelled(&self, id: &str) -> bool {
        let now = Instant::now();
        code_mode_core::sync::lock(&self.cancelled).get(id).is_some_and(|at| now.duration_since(*at) <= REMEMBERED)
    }
}

impl crate::Bridge {
    /// The call's request was cancelled (the cell's, or the direct call's):
    /// refused here so it never goes out.
    pub(crate) fn not_cancelled(
        &self,
        cancel: &CancellationToken,
        target: &crate::target::Target<'_>,
        call: &code_mode_proto::ToolCall,
    ) -> Result<(), crate::answer::Answer> {
        match cancel.is_cancelled() {
            true => Err(self.refuse(format!("{}: cancelled by the client", target.name(call)))),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_reaches_every_call_of_its_id_and_a_call_arriving_after_it_starts_cancelled() {
        let flights = Flights::default();
        let (first, second) = (flights.enter("cell-1"), flights.enter("cell-1"));
        let other = flights.enter("cell-2");
        assert!(flights.cancel("cell-1"), "calls of cell-1 were running");
        assert!(first.token().is_cancelled() && second.token().is_cancelled());
        assert!(!other.token().is_cancelled(), "another cell's calls go on");
        drop((first, second));
        assert!(flights.token_of("cell-1").is_none(), "the last call to leave takes the id with it");
        let late = flights.enter("cell-1");
        assert!(late.token().is_cancelled(), "a call of a cancelled cell never goes out");
        assert!(!flights.cancel("cell-3"), "a cancel of nothing running finds nothing, without an error");
    }
}
