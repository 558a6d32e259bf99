//! What this frontend process is doing, for the web console's operators
//! ([`crate::console`]): its live client sessions (identity, cells run,
//! kept container) and the last cells it ran (a ring of [`RECENT_CELLS`]).
//!
//! The session actors write here (a session starts, learns its caller,
//! ends a cell, keeps a container, ends); the console reads a snapshot.
//! Each actor stays the owner of its own state: this is a copy for people
//! to look at, never read back by the sessions.
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

    /// A cell of a session ended; the oldest record goes past
    /// [`RECENT_CELLS`].
    pub fn cell_ended(&self, record: CellRecord) {
        let mut inner = code_mode_core::sync::lock(&self.inner);
        if let Some(info) = inner.sessions.get_mut(&record.session) {
            info.cells = info.cells.saturating_add(1);
        }
        if inner.cells.len() == RECENT_CELLS {
            inner.cells.pop_front();
        }
        inner.cells.push_back(record);
    }

    /// The live sessions (oldest first) and the last cells (newest first).
    pub fn snapshot(&self) -> (Vec<SessionInfo>, Vec<CellRecord>) {
        let inner = code_mode_core::sync::lock(&self.inner);
        let mut sessions: Vec<SessionInfo> = inner.sessions.values().cloned().collect();
        sessions.sort_by(|a, b| a.started.cmp(&b.started).then_with(|| a.id.cmp(&b.id)));
        (sessions, inner.cells.iter().rev().cloned().collect())
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
        Err(E::Bus(code_mode_core::bus::BusError::NoResponders { .. })) => "no_runner",
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
        let (sessions, cells) = activity.snapshot();
        assert_eq!(sessions.len(), 1);
        assert_eq!((sessions[0].cells, sessions[0].identity.as_deref()), (60, Some("alice")));
        assert_eq!(sessions[0].kept.as_deref(), Some("runner-1"));
        assert_eq!(cells.len(), RECENT_CELLS);
        assert_eq!((cells[0].cell_id.as_str(), cells[49].cell_id.as_str()), ("c59", "c10"));
        activity.session_ended("s1");
        assert!(activity.snapshot().0.is_empty());
    }
}
