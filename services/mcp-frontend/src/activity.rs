//! What this frontend process is doing, for the web console's operators
//! ([`crate::console`]): its live client sessions (identity, cells run,
//! kept container), the cells running now (and which of them are held
//! while a person decides on a call), and the last cells it ran (a ring of
//! [`RECENT_CELLS`]).
//!
//! The session actors write here (a session starts, learns its caller,
//! starts and ends a cell, keeps a container, ends), and so does the watch
//! of each cell's lease (how long the cell has been held, as its runner
//! says); the console reads a snapshot, and a cell's heartbeat to its
//! client reads how long it was held. Each actor stays the owner of its own
//! state: this is a copy for people to look at, never read back by the
//! sessions.
//!
//! A `std::sync::Mutex` rather than an actor: every access is one short
//! insert, update or copy that never awaits while holding the lock (as
//! [`crate::StatelessSlots`]). What a frontend cannot see is not here: a
//! session's private-data taint lives at the bridge, the runners' free
//! slots at the runners.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

/// How many finished cells are kept for the console.
pub const RECENT_CELLS: usize = 50;

/// One live client session of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Its id.
    pub id: String,
    /// Who opened it (`None` without authentication, or before its first
    /// request said).
    pub identity: Option<String>,
    /// Cells it ran to their end (with a report or an error).
    pub cells: u64,
    /// The runner holding its kept container, if it keeps one.
    pub kept: Option<String>,
    /// When it started.
    pub started: SystemTime,
}

/// One cell running now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningCell {
    /// The cell's id.
    pub cell_id: String,
    /// The session running it.
    pub session: String,
    /// Whose code it is.
    pub identity: Option<String>,
    /// When the session took it.
    pub started: SystemTime,
    /// Once it was held (a call of it waited for a person): whether it is
    /// held now and for how long in all, as its runner says.
    pub held: Option<code_mode_proto::HeldTime>,
}

/// What the operations view shows of this process, at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The live sessions, oldest first.
    pub sessions: Vec<SessionInfo>,
    /// The cells running now, oldest first.
    pub running: Vec<RunningCell>,
    /// The last cells that ended, newest first.
    pub cells: Vec<CellRecord>,
}

/// One cell this process ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellRecord {
    /// The cell's id.
    pub cell_id: String,
    /// The session that ran it.
    pub session: String,
    /// Whose code it was.
    pub identity: Option<String>,
    /// How it ended: `ok`, `error` (the code raised), `stopped`, or the
    /// frontend's failure kind (`no_capacity`, `runner_lost`, ...).
    pub outcome: String,
    /// How long it took, from the session taking it to its result.
    pub duration: Duration,
    /// When it ended.
    pub ended: SystemTime,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<String, SessionInfo>,
    running: HashMap<String, RunningCell>,
    cells: VecDeque<CellRecord>,
}

/// The live sessions and the last cells of one process.
#[derive(Debug, Default)]
pub struct Activity {
    inner: std::sync::Mutex<Inner>,
}

impl Activity {
    /// A session started.
    pub fn session_started(&self, id: &str) {
        let info = SessionInfo { id: id.to_string(), identity: None, cells: 0, kept: None, started: SystemTime::now() };
        code_mode_core::sync::lock(&self.inner).sessions.insert(id.to_string(), info);
    }

    /// A session learnt who its caller is.
    pub fn session_identity(&self, id: &str, identity: Option<&str>) {
        if let Some(info) = code_mode_core::sync::lock(&self.inner).sessions.get_mut(id) {
            info.identity = identity.map(str::to_string);
        }
    }

    /// A session's kept container is now on `runner` (`None`: it keeps
    /// none).
    pub fn session_kept(&self, id: &str, runner: Option<&str>) {
        if let Some(info) = code_mode_core::sync::lock(&self.inner).sessions.get_mut(id) {
            info.kept = runner.map(str::to_string);
        }
    }

    /// A session ended.
    pub fn session_ended(&self, id: &str) {
        code_mode_core::sync::lock(&self.inner).sessions.remove(id);
    }

    /// A session took a cell.
    pub fn cell_started(&self, cell: RunningCell) {
        code_mode_core::sync::lock(&self.inner).running.insert(cell.cell_id.clone(), cell);
    }

    /// A running cell's hold, as its lease says it.
    pub fn cell_held(&self, cell_id: &str, held: code_mode_proto::HeldTime) {
        if let Some(cell) = code_mode_core::sync::lock(&self.inner).running.get_mut(cell_id) {
            cell.held = Some(held);
        }
    }

    /// How long a running cell has been held so far, if it was.
    pub fn held_time(&self, cell_id: &str) -> Option<code_mode_proto::HeldTime> {
        code_mode_core::sync::lock(&self.inner).running.get(cell_id).and_then(|c| c.held)
    }

    /// A cell of a session ended; the oldest record goes past
    /// [`RECENT_CELLS`].
    pub fn cell_ended(&self, record: CellRecord) {
        let mut inner = code_mode_core::sync::lock(&self.inner);
        inner.running.remove(&record.cell_id);
        if let Some(info) = inner.sessions.get_mut(&record.session) {
            info.cells = info.cells.saturating_add(1);
        }
        if inner.cells.len() == RECENT_CELLS {
            inner.cells.pop_front();
        }
        inner.cells.push_back(record);
    }

    /// The live sessions and the running cells (oldest first), and the
    /// last cells (newest first).
    pub fn snapshot(&self) -> Snapshot {
        let inner = code_mode_core::sync::lock(&self.inner);
        let mut sessions: Vec<SessionInfo> = inner.sessions.values().cloned().collect();
        sessions.sort_by(|a, b| a.started.cmp(&b.started).then_with(|| a.id.cmp(&b.id)));
        let mut running: Vec<RunningCell> = inner.running.values().cloned().collect();
        running.sort_by(|a, b| a.started.cmp(&b.started).then_with(|| a.cell_id.cmp(&b.cell_id)));
        Snapshot { sessions, running, cells: inner.cells.iter().rev().cloned().collect() }
    }
}

/// The outcome word of a cell's report, or of the error it failed with.
pub(crate) fn outcome_of(result: Result<&code_mode_proto::CellReport, &crate::FrontendError>) -> &'static str {
    use crate::FrontendError as E;
    match result {
        Ok(report) if report.stopped => "stopped",
        Ok(report) if report.error.is_some() => "error",
        Ok(_) => "ok",
        Err(E::NoCapacity { .. }) => "no_capacity",
        Err(E::RunnerLost { .. } | E::RunnerSilent { .. } | E::ReportLost { .. }) => "runner_lost",
        Err(E::NoRunner { .. } | E::Bus(code_mode_core::bus::BusError::NoResponders { .. })) => "no_runner",
        Err(E::SessionBusy { .. }) => "session_busy",
        Err(E::CodeTooLarge { .. }) => "code_too_large",
        Err(E::SessionEnded) => "session_ended",
        Err(_) => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: usize, session: &str) -> CellRecord {
        CellRecord {
            cell_id: format!("c{i}"),
            session: session.into(),
            identity: Some("alice".into()),
            outcome: "ok".into(),
            duration: Duration::from_millis(5),
            ended: SystemTime::now(),
        }
    }

    #[test]
    fn the_last_fifty_cells_are_kept_newest_first_and_each_counts_for_its_live_session() {
        let activity = Activity::default();
        activity.session_started("s1");
        activity.session_identity("s1", Some("alice"));
        activity.session_kept("s1", Some("runner-1"));
        for i in 0..60 {
            activity.cell_ended(record(i, "s1"));
        }
        let Snapshot { sessions, cells, .. } = activity.snapshot();
        assert_eq!(sessions.len(), 1);
        assert_eq!((sessions[0].cells, sessions[0].identity.as_deref()), (60, Some("alice")));
        assert_eq!(sessions[0].kept.as_deref(), Some("runner-1"));
        assert_eq!(cells.len(), RECENT_CELLS);
        assert_eq!((cells[0].cell_id.as_str(), cells[49].cell_id.as_str()), ("c59", "c10"));
        activity.session_ended("s1");
        assert!(activity.snapshot().sessions.is_empty());
    }

    #[test]
    fn a_running_cell_is_listed_with_its_hold_until_it_ends() {
        let activity = Activity::default();
        let cell = RunningCell {
            cell_id: "c1".into(),
            session: "s1".into(),
            identity: None,
            started: SystemTime::now(),
            held: None,
        };
        activity.cell_started(cell);
        assert_eq!(activity.held_time("c1"), None);
        let held = code_mode_proto::HeldTime { paused: true, held_ms: 4_000 };
        activity.cell_held("c1", held);
        activity.cell_held("gone", held);
        assert_eq!(activity.held_time("c1"), Some(held));
        assert_eq!(activity.snapshot().running.len(), 1);
        activity.cell_ended(record(1, "s1"));
        assert!(activity.snapshot().running.is_empty(), "c1 ended");
    }
}
