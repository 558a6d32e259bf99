//! Cell leases: how a frontend learns within seconds that the sandbox-runner
//! running its cell died, instead of at the cell's deadline.
//!
//! A runner that takes a cell (a fresh one from the queue group, or a kept
//! session's later cell on the runner's own subject) answers on the cell's
//! lease subject ([`subjects::cell_lease`]) until the cell ends ([`hold`]);
//! the frontend asks there every [`PING`] while it waits for the report
//! ([`lost`], [`watched`]). A
//! runner killed, crashed or cut off from NATS stops answering: its
//! subscription goes with its connection, so the frontend's next question
//! finds no responder, and after [`LOST_AFTER`] without an answer the cell
//! is reported lost. A runner that finished the cell says so on the lease
//! for a while ([`Held::end`]), so a report lost on its way (a failed
//! publish, a missed reply) is also seen within seconds. The lease is
//! request/reply on the [`Bus`] like every other message, so it works alike
//! in one process and over NATS.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_mode_proto::{
    CellEnded, CellProgress, HeldTime, KeptContainer, LeaseCheck, LeaseHeld, queue_groups, subjects,
};
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

/// How long a frontend that heard a cell ended still waits for its report
/// before taking it for lost. The report leaves the runner right after the
/// lease says the cell ended, so it normally arrives first; this covers a
/// report delayed behind the answer.
pub const REPORT_GRACE: Duration = Duration::from_secs(2);

/// How long a runner says a cell ended ([`Held::end`]) before letting its
/// lease go: long enough for a frontend asking every [`PING`] to hear it
/// and wait [`REPORT_GRACE`].
pub const ENDED_FOR: Duration = Duration::from_secs(10);

/// A held lease: answered until dropped (or, after [`Held::end`], for
/// [`ENDED_FOR`] more, saying how the cell ended).
#[derive(Debug)]
pub struct Held {
    stop: Option<DropGuard>,
    /// The lease's own token (a child of the holder's shutdown token): the
    /// task that says "ended" for [`ENDED_FOR`] stops with it.
    token: CancellationToken,
    ended: Arc<Mutex<Ended>>,
    progress: Progress,
}

/// Where the code's last reported progress, and the time the cell has
/// been held, are kept for its lease to say; cheap to clone (the run that
/// reads the code's lines holds one, and so does the cell's hold).
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<Mutex<Said>>);

/// What the lease of a running cell says besides its runner.
#[derive(Debug, Default)]
struct Said {
    progress: Option<CellProgress>,
    /// Held before the current hold.
    held_before: Duration,
    /// Since when the cell is held, while it is.
    held_since: Option<Instant>,
}

impl Progress {
    /// The code reported progress: from now on the lease says it (with a
    /// higher count).
    pub fn report(&self, progress: String, total: Option<String>, message: Option<String>) {
        let mut said = crate::sync::lock(&self.0);
        let count = said.progress.as_ref().map_or(1, |p| p.count.saturating_add(1));
        said.progress = Some(CellProgress { count, progress, total, message });
    }

    /// The cell is held from now on (its container paused while a person
    /// decides on a call).
    pub fn held(&self) {
        let mut said = crate::sync::lock(&self.0);
        said.held_since.get_or_insert_with(Instant::now);
    }

    /// The cell runs again.
    pub fn resumed(&self) {
        let mut said = crate::sync::lock(&self.0);
        if let Some(since) = said.held_since.take() {
            said.held_before += since.elapsed();
        }
    }

    fn get(&self) -> (Option<CellProgress>, Option<HeldTime>) {
        let said = crate::sync::lock(&self.0);
        let held = said.held_before + said.held_since.map(|s| s.elapsed()).unwrap_or_default();
        let paused = said.held_since.is_some();
        let time = (paused || !held.is_zero()).then_some(HeldTime { paused, held_ms: held.as_millis() as u64 });
        (said.progress.clone(), time)
    }
}

/// What a lease says once its cell ended: how, and the kept container it
/// ran in when that lives on.
type Ended = Option<(CellEnded, Option<KeptContainer>)>;

impl Held {
    /// Where the code's progress goes for the lease to say.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// The cell ended as `how` and its report is on its way: say so on the
    /// lease for [`ENDED_FOR`], then let it go. A frontend that hears this
    /// and has no report knows the report was lost (a failed publish, a
    /// missed reply subscription) and fails the cell within seconds, not at
    /// its deadline. A lease dropped without `end` goes at once: its
    /// runner is stopping or died.
    /// `kept` is the kept container the cell ran in, when it lives on: a
    /// frontend without the report learns from it where the container is.
    ///
    /// The lease goes sooner when the holder's shutdown token fires: a
    /// stopping runner answers for nothing more.
    pub fn end(mut self, how: CellEnded, kept: Option<KeptContainer>) {
        *crate::sync::lock(&self.ended) = Some((how, kept));
        if let Some(stop) = self.stop.take() {
            let token = self.token.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(ENDED_FOR) => {}
                    _ = token.cancelled() => {}
                }
                drop(stop);
            });
        }
    }
}

/// Answer on the lease subject of `cell_id` as `runner` until the returned
/// guard is dropped, or `shutdown` fires. `None` when the cell id cannot
/// be a subject (its frontend does not ask either).
pub async fn hold(
    bus: &Bus,
    cell_id: &str,
    runner: &str,
    shutdown: &CancellationToken,
) -> Result<Option<Held>, BusError> {
    hold_reporting(bus, cell_id, runner, shutdown, Progress::default()).await
}

/// [`hold`], the lease saying the progress the code reports to `progress`.
pub async fn hold_reporting(
    bus: &Bus,
    cell_id: &str,
    runner: &str,
    shutdown: &CancellationToken,
    progress: Progress,
) -> Result<Option<Held>, BusError> {
    let Some(subject) = subjects::cell_lease(cell_id) else { return Ok(None) };
    let stop = shutdown.child_token();
    let runner = runner.to_string();
    let ended = Arc::new(Mutex::new(None));
    let state = ended.clone();
    let reported = progress.clone();
    bus.serve(&subject, queue_groups::SANDBOX_RUNNER, stop.clone(), move |_: LeaseCheck| {
        let (ended, kept) = crate::sync::lock(&state).clone().unzip();
        let (progress, held) = reported.get();
        let answer = LeaseHeld { runner: runner.clone(), progress, ended, kept: kept.flatten(), held };
        async move { Ok(answer) }
    })
    .await?;
    Ok(Some(Held { token: stop.clone(), stop: Some(stop.drop_guard()), ended, progress }))
}

/// Why a cell's report will not come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gone {
    /// The lease went unanswered this long: the runner died, crashed or
    /// was cut off from NATS.
    Silent(Duration),
    /// The runner said the cell ended and no report came within
    /// [`REPORT_GRACE`]: the report was lost on its way.
    ReportLost {
        /// How the cell ended.
        how: CellEnded,
        /// The kept container it ran in, when that lives on.
        kept: Option<KeptContainer>,
    },
}

/// Resolve once the lease of `cell_id` went unanswered for [`LOST_AFTER`]
/// ([`Gone::Silent`]), or said the cell ended [`REPORT_GRACE`] ago or more
/// ([`Gone::ReportLost`]); never while it is answered for a running cell.
/// The time counts from this call, so the runner has [`LOST_AFTER`] to
/// take the cell and hold its lease. A cell id that cannot be a subject is
/// never lost.
pub async fn lost(bus: &Bus, cell_id: &str) -> Gone {
    lost_watching(bus, cell_id, |_| {}).await
}

/// What a running cell's lease said that its watcher had not heard yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard<'a> {
    /// The code reported progress (a higher count than before).
    Progress(&'a CellProgress),
    /// The cell is held, or was: a hold began or ended, or it goes on
    /// (said once per [`PING`] while it does).
    Held(HeldTime),
}

/// [`lost`], handing what the lease says that is news to `on_heard` (at
/// most once per [`PING`] each): the code's progress, the cell's hold.
pub async fn lost_watching(bus: &Bus, cell_id: &str, mut on_heard: impl FnMut(Heard<'_>)) -> Gone {
    let Some(subject) = subjects::cell_lease(cell_id) else { return std::future::pending().await };
    let mut last_progress = 0;
    let mut last_held: Option<HeldTime> = None;
    let check = LeaseCheck { cell_id: cell_id.to_string() };
    let mut answered = Instant::now();
    let mut ended_since = None;
    loop {
        tokio::time::sleep(PING).await;
        let asked = tokio::time::timeout(PING, bus.call_quiet::<_, LeaseHeld>(&subject, &check, PING)).await;
        match asked {
            Ok(Ok(held)) => {
                answered = Instant::now();
                if let Some(progress) = &held.progress
                    && progress.count > last_progress
                {
                    last_progress = progress.count;
                    on_heard(Heard::Progress(progress));
                }
                if let Some(time) = held.held
                    && (time.paused || last_held != Some(time))
                {
                    last_held = Some(time);
                    on_heard(Heard::Held(time));
                }
                if let Some(how) = held.ended {
                    let since = *ended_since.get_or_insert(answered);
                    if since.elapsed() >= REPORT_GRACE {
                        tracing::warn!(cell = %cell_id, runner = %held.runner, ?how, "the cell ended but its report never came");
                        return Gone::ReportLost { how, kept: held.kept };
                    }
                }
            }
            Ok(Err(e)) if answered.elapsed() >= LOST_AFTER => {
                tracing::warn!(cell = %cell_id, error = %e, "the cell's lease went unanswered");
                return Gone::Silent(answered.elapsed());
            }
            Err(_) if answered.elapsed() >= LOST_AFTER => return Gone::Silent(answered.elapsed()),
            _ => {}
        }
    }
}

/// Await `call` (the request whose answer ends the cell: its report) while
/// watching the lease of `cell_id`: `Err` with why the report will not
/// come when [`lost`] resolves first. Fresh cells and the later cells of
/// kept sessions are both sent through this.
pub async fn watched<T>(bus: &Bus, cell_id: &str, call: impl Future<Output = T>) -> Result<T, Gone> {
    watched_with(bus, cell_id, call, |_| {}).await
}

/// [`watched`], handing what the lease says that is news (the code's
/// progress, the cell's hold) to `on_heard`.
pub async fn watched_with<T>(
    bus: &Bus,
    cell_id: &str,
    call: impl Future<Output = T>,
    on_heard: impl FnMut(Heard<'_>),
) -> Result<T, Gone> {
    tokio::select! {
        answer = call => Ok(answer),
        gone = lost_watching(bus, cell_id, on_heard) => Err(gone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_lease_is_never_lost_and_a_dropped_one_is_lost_within_five_seconds() {
        let bus = Bus::in_process();
        let cell = "0b7f3c1e-cell";
        let held = hold(&bus, cell, "runner-a", &CancellationToken::new())
            .await
            .unwrap()
            .expect("a cell id that is one token");
        let watched = tokio::time::timeout(Duration::from_secs(5), lost(&bus, cell)).await;
        assert!(watched.is_err(), "a held lease was taken for lost: {watched:?}");

        let watching = tokio::spawn({
            let bus = bus.clone();
            async move { lost(&bus, cell).await }
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let dropped = Instant::now();
        drop(held);
        let gone = tokio::time::timeout(Duration::from_secs(10), watching).await.expect("lost in time").unwrap();
        let seen = dropped.elapsed();
        let Gone::Silent(silent) = gone else { panic!("a dropped lease is silence, not {gone:?}") };
        assert!(seen <= Duration::from_secs(5), "the loss was seen {seen:?} after the lease went");
        assert!(silent >= LOST_AFTER, "{silent:?}");
    }

    #[tokio::test]
    async fn an_ended_lease_goes_at_once_when_its_holder_shuts_down_not_after_ended_for() {
        let bus = Bus::in_process();
        let shutdown = CancellationToken::new();
        let cell = "7a1c55e0-shutdown";
        let held = hold(&bus, cell, "runner-a", &shutdown).await.unwrap().expect("a cell id that is one token");
        held.end(CellEnded::Ok, None);
        let check = LeaseCheck { cell_id: cell.into() };
        let subject = subjects::cell_lease(cell).unwrap();
        let said: LeaseHeld = bus.call(&subject, &check, PING).await.expect("the ended lease answers");
        assert_eq!(said.ended, Some(CellEnded::Ok));
        shutdown.cancel();
        let mut answered = true;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if bus.call::<_, LeaseHeld>(&subject, &check, PING).await.is_err() {
                answered = false;
                break;
            }
        }
        assert!(!answered, "the lease still answered a second after its holder shut down");
    }

    #[tokio::test]
    async fn a_lease_nobody_took_is_lost_after_the_grace_and_a_bad_cell_id_has_none() {
        let bus = Bus::in_process();
        let started = Instant::now();
        assert!(matches!(lost(&bus, "never-taken").await, Gone::Silent(_)));
        assert!(started.elapsed() >= LOST_AFTER && started.elapsed() < LOST_AFTER + PING * 2);
        assert!(hold(&bus, "a.b", "runner-a", &CancellationToken::new()).await.unwrap().is_none());
        let never = tokio::time::timeout(Duration::from_secs(3), lost(&bus, "a.b")).await;
        assert!(never.is_err(), "a cell without a lease is never lost");
    }

    #[tokio::test]
    async fn an_ended_lease_without_its_report_is_a_lost_report_within_seconds_naming_its_kept_container_and_a_report_in_time_wins()
     {
        let bus = Bus::in_process();
        let cell = "5d2e90aa-ended";
        let held = hold(&bus, cell, "runner-a", &CancellationToken::new())
            .await
            .unwrap()
            .expect("a cell id that is one token");
        let watching = tokio::spawn({
            let bus = bus.clone();
            async move { lost(&bus, cell).await }
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ended = Instant::now();
        // A kept container that lives on after the cell is named with it.
        let kept = KeptContainer { runner: "runner-a".into(), key: "k3pt".into() };
        held.end(CellEnded::Error, Some(kept.clone()));
        let gone = tokio::time::timeout(Duration::from_secs(10), watching).await.expect("seen in time").unwrap();
        let seen = ended.elapsed();
        assert_eq!(gone, Gone::ReportLost { how: CellEnded::Error, kept: Some(kept) });
        assert!(seen >= REPORT_GRACE && seen <= REPORT_GRACE + PING * 2, "the lost report was seen after {seen:?}");

        // A report arriving soon after the lease said the cell ended wins.
        let cell = "5d2e90aa-reported";
        let held = hold(&bus, cell, "runner-a", &CancellationToken::new())
            .await
            .unwrap()
            .expect("a cell id that is one token");
        let report = async {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            "the report"
        };
        let end = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            held.end(CellEnded::Ok, None);
        };
        let (answer, ()) = tokio::join!(watched(&bus, cell, report), end);
        assert_eq!(answer, Ok("the report"));
    }
}

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[tokio::test]
    async fn the_codes_progress_reaches_the_watcher_once_per_report_through_the_lease() {
        let bus = Bus::in_process();
        let cell = "9c3b11f0-progress";
        let held = hold(&bus, cell, "runner-a", &CancellationToken::new()).await.unwrap().expect("a lease");
        let progress = held.progress();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let watching = tokio::spawn({
            let (bus, seen) = (bus.clone(), seen.clone());
            async move {
                lost_watching(&bus, cell, |heard| {
                    if let Heard::Progress(p) = heard {
                        crate::sync::lock(&seen).push((p.count, p.progress.clone()))
                    }
                })
                .await
            }
        });
        progress.report("1".into(), Some("4".into()), None);
        tokio::time::sleep(PING * 2 + Duration::from_millis(300)).await;
        progress.report("3".into(), Some("4".into()), Some("three of four".into()));
        tokio::time::sleep(PING * 2 + Duration::from_millis(300)).await;
        watching.abort();
        let seen = crate::sync::lock(&seen).clone();
        assert_eq!(seen, [(1, "1".to_string()), (2, "3".to_string())], "each report once, in order");
    }

    #[tokio::test]
    async fn a_hold_reaches_the_watcher_each_second_while_it_lasts_and_its_end_once() {
        let bus = Bus::in_process();
        let cell = "9c3b11f0-held";
        let lease = hold(&bus, cell, "runner-a", &CancellationToken::new()).await.unwrap().expect("a lease");
        let clock = lease.progress();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let watching = tokio::spawn({
            let (bus, seen) = (bus.clone(), seen.clone());
            async move {
                lost_watching(&bus, cell, |heard| {
                    if let Heard::Held(time) = heard {
                        crate::sync::lock(&seen).push(time)
                    }
                })
                .await
            }
        });
        tokio::time::sleep(PING + PING / 2).await;
        assert!(crate::sync::lock(&seen).is_empty(), "never held: nothing said");
        clock.held();
        tokio::time::sleep(PING * 3).await;
        clock.resumed();
        tokio::time::sleep(PING * 3).await;
        watching.abort();
        let seen = crate::sync::lock(&seen).clone();
        let paused: Vec<u64> = seen.iter().filter(|t| t.paused).map(|t| t.held_ms).collect();
        assert!(paused.len() >= 2 && paused.windows(2).all(|w| w[0] <= w[1]), "while held, each second: {seen:?}");
        let after: Vec<&HeldTime> = seen.iter().filter(|t| !t.paused).collect();
        assert_eq!(after.len(), 1, "its end once: {seen:?}");
        assert!(after[0].held_ms >= 2_000 && after[0].held_ms < 4_500, "held about 3 s in all: {seen:?}");
    }
}
