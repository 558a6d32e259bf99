//! The web console's questions to the bridge ([`Bridge::console`]): the
//! approval board as a viewer may see it, a decision, the audit log's tail
//! (read and verified off the async workers), the runners, the bridges'
//! last config reloads, which sessions are tainted. Each bridge's last
//! reload is kept in the state store ([`Bridge::note_reload`]) so that
//! every bridge shows every bridge's.

use std::time::Duration;

use code_mode_core::bus::BusError;
use code_mode_proto::{self as proto, WaitingCall, subjects};

use crate::Bridge;
use crate::board::{self, Board, Stored};

/// How many audit records the console may ask for.
pub const MAX_AUDIT_LINES: u32 = 200;
/// The entry of the board's pseudo-session that keeps each bridge's last
/// config reload.
const RELOADS: &str = "reloads";
/// The most bridges whose last reload is kept.
const MAX_RELOADS: usize = 50;
/// How long the board waits for a cell's lease to say whether it runs.
const LEASE_ASK: Duration = Duration::from_secs(1);

impl Bridge {
    /// The waiting calls, each saying whether anyone still waits for its
    /// answer: a call from code asks its cell's lease now, which says the
    /// cell runs (its request is open: a request that goes stops its
    /// cell), ended, or nobody answers (its runner is gone). A direct
    /// call's is not known here (the bridge that holds it withdraws its
    /// question when its request goes).
    async fn still_waited(&self, open: Vec<Stored>) -> Vec<WaitingCall> {
        let bus = self.inner.outbound.get();
        let asks = open.iter().map(|stored| async move {
            let bus = bus.filter(|_| stored.from_code)?;
            let cell = &stored.question.cell_id;
            let subject = subjects::cell_lease(cell)?;
            let check = proto::LeaseCheck { cell_id: cell.clone() };
            match bus.call_quiet::<_, proto::LeaseHeld>(&subject, &check, LEASE_ASK).await {
                Ok(held) => Some(held.ended.is_none()),
                Err(BusError::NoResponders { .. }) => Some(false),
                Err(_) => None,
            }
        });
        let found = futures::future::join_all(asks).await;
        open.into_iter()
            .zip(found)
            .map(|(stored, still)| WaitingCall { still_waited: still, ..stored.question })
            .collect()
    }

    /// Answer the web console: the board as `viewer` may see it, a
    /// decision, the audit log's tail.
    pub async fn console(&self, request: proto::ConsoleRequest) -> Result<proto::ConsoleReply, proto::WireError> {
        let board = Board::new(self.inner.rebuild.state.clone());
        let failed = crate::wire::board_error;
        match request {
            proto::ConsoleRequest::Board { viewer } => {
                let open = board.open_questions().await.map_err(failed)?;
                let (mine, others): (Vec<Stored>, Vec<Stored>) =
                    open.into_iter().filter(|s| s.decision.is_none()).partition(|s| s.refuses(&viewer).is_none());
                let may_see = |approvers: &[String]| {
                    approvers
                        .iter()
                        .filter_map(|a| crate::policy::Approver::parse(a))
                        .any(|a| a.admits(&viewer.name, &viewer.groups))
                };
                let recent =
                    board.recent().await.map_err(failed)?.into_iter().filter(|d| may_see(&d.approvers)).collect();
                let waiting = self.still_waited(mine).await;
                Ok(proto::ConsoleReply::Board { waiting, others: others.len() as u32, recent })
            }
            proto::ConsoleRequest::Decide { viewer, id, approve, note } => {
                let decision = board.decide(&viewer, &id, approve, &note).await.map_err(failed)?;
                Ok(proto::ConsoleReply::Decided(decision))
            }
            proto::ConsoleRequest::Audit { lines } => Ok(self.audit_tail(lines.min(MAX_AUDIT_LINES) as usize).await),
            proto::ConsoleRequest::Runners => {
                let runners = self.shown_runners().await.map_err(|e| failed(e.into()))?;
                Ok(proto::ConsoleReply::Runners { runners })
            }
            proto::ConsoleRequest::Reloads => {
                let entry =
                    self.inner.rebuild.state.get(board::SESSION, RELOADS).await.map_err(|e| failed(e.into()))?;
                let reloads = entry.and_then(|e| serde_json::from_value(e.value).ok()).unwrap_or_default();
                Ok(proto::ConsoleReply::Reloads { reloads })
            }
            proto::ConsoleRequest::Sessions { ids } => {
                let store = &self.inner.rebuild.state;
                let mut tainted = Vec::new();
                for id in ids.into_iter().take(500) {
                    let entry = store.get(&id, crate::private::TAINT).await.map_err(|e| failed(e.into()))?;
                    // The taint is there or not: its value names the tool.
                    if entry.is_some() {
                        tainted.push(id);
                    }
                }
                Ok(proto::ConsoleReply::Sessions { tainted })
            }
        }
    }

    /// Note this bridge's last config reload (kept in the state store, so
    /// every bridge shows every bridge's to the console's operators).
    pub(crate) async fn note_reload(
        &self,
        status: proto::ReloadStatus,
    ) -> Result<(), code_mode_core::state::StateError> {
        self.inner
            .rebuild
            .state
            .update(board::SESSION, RELOADS, |value| {
                let mut reloads: Vec<proto::ReloadStatus> =
                    value.and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
                reloads.retain(|r| r.bridge != status.bridge);
                reloads.push(status.clone());
                // The most recent bridges, so the entry stays small.
                reloads.sort_by_key(|r| std::cmp::Reverse(r.at_ms));
                reloads.truncate(MAX_RELOADS);
                serde_json::to_value(reloads).expect("reloads are JSON")
            })
            .await
            .map(|_| ())
    }

    /// The last `lines` records of a file audit log and the state of its
    /// chain (the whole chain is checked). The files are read and verified
    /// on the blocking pool, not on an async worker.
    async fn audit_tail(&self, lines: usize) -> proto::ConsoleReply {
        let Some(sink) = &self.inner.audit else {
            return proto::ConsoleReply::Audit { records: Vec::new(), chain: "no audit log is kept (--audit)".into() };
        };
        let Some(path) = sink.name().strip_prefix("file:") else {
            return proto::ConsoleReply::Audit {
                records: Vec::new(),
                chain: format!("the audit log is {}: check it with `code-mode audit verify`", sink.name()),
            };
        };
        let path = std::path::PathBuf::from(path);
        let read = tokio::task::spawn_blocking(move || {
            let mut files = code_mode_audit::file::rotated_files(&path).unwrap_or_default();
            files.push(path);
            let all = code_mode_audit::show::read_files(&files).map_err(|e| e.to_string())?;
            let report = code_mode_audit::verify::verify(&all, &code_mode_audit::verify::VerifyOptions::default());
            Ok((all, report))
        })
        .await;
        let read = read.unwrap_or_else(|e| Err(e.to_string()));
        match read {
            Err(e) => proto::ConsoleReply::Audit { records: Vec::new(), chain: format!("cannot be read: {e}") },
            Ok((all, report)) => {
                let chain = match &report.problem {
                    None => format!("verified ({} records)", report.records),
                    Some(problem) => format!("broken: {problem}"),
                };
                let records = all[all.len().saturating_sub(lines)..].iter().map(|l| l.text.clone()).collect();
                proto::ConsoleReply::Audit { records, chain }
            }
        }
    }
}
