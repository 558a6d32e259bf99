//! The approval board: calls that wait for a team's decision (a policy rule
//! with `approvers`), kept in the session-state store so that every bridge
//! and every frontend replica sees the same board, and a restart of any of
//! them loses nothing.
//!
//! The board owns three kinds of entries under the pseudo-session
//! [`SESSION`]: one per question (`q-<id>`: the question as asked, the rule's
//! approvers, and its decision once taken), the index of the questions
//! still open ([`INDEX`], at most [`MAX_WAITING`]), and the last decisions
//! ([`RECENT`], at most [`RECENT_KEPT`]). Every change is a compare-and-set,
//! so two approvers deciding at once, or a decision racing the timeout,
//! end with exactly one decision: the first written.
//!
//! The bridge that asked waits for the decision by reading the question's
//! entry every [`POLL`] ([`crate::check`]); the console's decisions arrive
//! on whichever bridge the bus hands them to ([`Board::decide`]). A question
//! whose bridge died while it waited stays on the board until its timeout
//! passes, then is closed as timed out by the next reader of the board.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_mode_core::state::{SessionStore, StateError};
use code_mode_proto::{Decision, Viewer, WaitingCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::{Approver, Team};

/// The pseudo-session of the board's entries (no client session has an id
/// starting with `_`).
pub const SESSION: &str = "_approvals";
/// The entry listing the open questions' ids.
pub const INDEX: &str = "index";
/// The entry keeping the last decisions, newest first.
pub const RECENT: &str = "recent";
/// The most questions open at once across the deployment; one more is
/// refused (the call is not approved), so code cannot flood the approvers.
pub const MAX_WAITING: usize = 256;
/// How many decisions the board keeps to show.
pub const RECENT_KEPT: usize = 30;
/// How often a waiting bridge reads its question's entry.
pub const POLL: Duration = Duration::from_millis(500);
/// The longest note a decider may write, in characters.
pub const MAX_NOTE: usize = 300;
/// How long past its timeout a question whose bridge stopped waiting stays
/// open before a reader of the board closes it.
const ABANDONED_AFTER: Duration = Duration::from_secs(30);

/// Errors of the board: the store's, or a decision that may not be taken.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    /// The store failed (the decision may or may not have been written:
    /// read the board again).
    #[error(transparent)]
    State(#[from] StateError),
    /// No open question has this id.
    #[error("no question {0:?} waits (it was decided, withdrawn or never asked)")]
    Unknown(String),
    /// Already decided (or withdrawn).
    #[error("the question was already {outcome}{by}")]
    Decided {
        /// How.
        outcome: String,
        /// ` by NAME`, `: why` (a withdrawal), or nothing.
        by: String,
    },
    /// The viewer may not decide it.
    #[error("{0}")]
    NotYours(String),
    /// Too many questions wait.
    #[error("{MAX_WAITING} calls already wait for approvers; this one is refused")]
    Full,
}

/// One question's entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stored {
    /// What the approvers see.
    pub question: WaitingCall,
    /// `self_approve` of the rule.
    pub self_approve: bool,
    /// The decision, once taken.
    #[serde(default)]
    pub decision: Option<Decision>,
    /// The call comes from a cell's code (whose lease says whether it
    /// still runs), not a client's direct call.
    #[serde(default)]
    pub from_code: bool,
}

impl Stored {
    /// The rule's team, read back from the question.
    fn team(&self) -> Team {
        Team {
            approvers: self.question.approvers.iter().filter_map(|a| Approver::parse(a)).collect(),
            self_approve: self.self_approve,
            ask_client: false,
            reason: None,
        }
    }

    /// Why `viewer` may not decide it, or `None`.
    pub fn refuses(&self, viewer: &Viewer) -> Option<String> {
        self.team().refuses(&viewer.name, &viewer.groups, self.question.identity.as_deref())
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The hash that names a question in its decision's audit record: SHA-256
/// of what the approvers were shown.
pub fn question_hash(q: &WaitingCall) -> String {
    let shown = serde_json::json!({
        "id": q.id, "session": q.session, "identity": q.identity, "cell": q.cell_id, "server": q.server,
        "tool": q.tool, "arguments": q.arguments, "args": q.args, "rule": q.rule, "approvers": q.approvers,
        "asked_ms": q.asked_ms, "code": q.code,
    });
    code_mode_audit::record::hex_sha256(shown.to_string().as_bytes())
}

/// A note as kept: control characters dropped, cut to [`MAX_NOTE`].
pub fn clean_note(note: &str) -> String {
    note.chars().filter(|c| !c.is_control()).take(MAX_NOTE).collect::<String>().trim().to_string()
}

/// The board: a cheap handle on the store.
#[derive(Debug, Clone)]
pub struct Board {
    store: SessionStore,
}

fn key(id: &str) -> String {
    format!("q-{id}")
}

impl Board {
    /// The board kept in `store`.
    pub fn new(store: SessionStore) -> Self {
        Self { store }
    }

    /// Put a question on the board: its entry first, then its id in the
    /// index, so that a reader of the board never finds a listed id without
    /// its entry (a reader takes such an id for a question closed and
    /// unlists it: with the index written first, a reader between the two
    /// writes lost the question from the board while its call still waited).
    pub async fn open(&self, stored: &Stored) -> Result<(), BoardError> {
        let id = stored.question.id.clone();
        let value = serde_json::to_value(stored).expect("a question is JSON");
        self.store.create(SESSION, &key(&id), &value).await?;
        let mut full = false;
        let listed = self
            .store
            .update(SESSION, INDEX, |value| {
                let mut ids = ids_of(value.as_ref());
                full = ids.len() >= MAX_WAITING && !ids.contains(&id);
                if !full && !ids.contains(&id) {
                    ids.push(id.clone());
                }
                Value::from(ids)
            })
            .await;
        if (full || listed.is_err())
            && let Err(e) = self.store.delete(SESSION, &key(&id)).await
        {
            tracing::warn!(question = %id, error = %e, "could not delete a question the board refused");
        }
        listed?;
        if full {
            return Err(BoardError::Full);
        }
        Ok(())
    }

    /// The question `id`, as stored now.
    pub async fn get(&self, id: &str) -> Result<Option<Stored>, BoardError> {
        let Some(entry) = self.store.get(SESSION, &key(id)).await? else { return Ok(None) };
        Ok(serde_json::from_value(entry.value).ok())
    }

    /// Write `decision` on question `id` unless one is there: the decision
    /// that holds (this one, or the one written first).
    pub async fn settle(&self, id: &str, decision: Decision) -> Result<Decision, BoardError> {
        self.decide_if(id, |_| Ok(()), decision).await
    }

    /// A viewer's decision, checked against the rule's approvers.
    pub async fn decide(&self, viewer: &Viewer, id: &str, approve: bool, note: &str) -> Result<Decision, BoardError> {
        let stored = self.get(id).await?.ok_or_else(|| BoardError::Unknown(id.to_string()))?;
        let decision = Decision {
            id: id.to_string(),
            server: stored.question.server.clone(),
            tool: stored.question.tool.clone(),
            identity: stored.question.identity.clone(),
            outcome: if approve { "approved" } else { "declined" }.to_string(),
            by: Some(viewer.name.clone()),
            note: clean_note(note),
            at_ms: now_ms(),
            question_sha256: stored.question.question_sha256.clone(),
            approvers: stored.question.approvers.clone(),
        };
        let held = self
            .decide_if(id, |s| s.refuses(viewer).map_or(Ok(()), |why| Err(BoardError::NotYours(why))), decision.clone())
            .await?;
        if held != decision {
            // A withdrawn question says why (its request is gone, ...).
            let why = match &held.by {
                Some(by) => format!(" by {by}"),
                None if held.note.is_empty() => String::new(),
                None => format!(": {}", held.note),
            };
            return Err(BoardError::Decided { outcome: held.outcome.clone(), by: why });
        }
        tracing::info!(question = %id, by = %viewer.name, outcome = %decision.outcome, "an approver decided");
        Ok(decision)
    }

    async fn decide_if(
        &self,
        id: &str,
        check: impl Fn(&Stored) -> Result<(), BoardError>,
        decision: Decision,
    ) -> Result<Decision, BoardError> {
        for _ in 0..code_mode_core::state::MAX_UPDATE_ATTEMPTS {
            let entry = self.store.get(SESSION, &key(id)).await?.ok_or_else(|| BoardError::Unknown(id.to_string()))?;
            let mut stored: Stored =
                serde_json::from_value(entry.value).map_err(|_| BoardError::Unknown(id.to_string()))?;
            if let Some(held) = &stored.decision {
                return Ok(held.clone());
            }
            check(&stored)?;
            stored.decision = Some(decision.clone());
            let value = serde_json::to_value(&stored).expect("a question is JSON");
            match self.store.compare_and_set(SESSION, &key(id), &value, entry.revision).await {
                Ok(_) => return Ok(decision),
                // Someone wrote first: read again (it may be a decision).
                Err(StateError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StateError::Conflict(format!("question {id}: still changing after many attempts")).into())
    }

    /// Take question `id` off the board once its call no longer waits: out
    /// of the index, its decision into the recent ones, its entry deleted.
    pub async fn close(&self, id: &str) {
        if let Ok(Some(stored)) = self.get(id).await
            && let Some(decision) = stored.decision
        {
            let kept = self
                .store
                .update(SESSION, RECENT, |value| {
                    let mut recent: Vec<Value> = value.and_then(|v| v.as_array().cloned()).unwrap_or_default();
                    recent.retain(|d| d.get("id").and_then(Value::as_str) != Some(id));
                    recent.insert(0, serde_json::to_value(&decision).expect("a decision is JSON"));
                    recent.truncate(RECENT_KEPT);
                    Value::from(recent)
                })
                .await;
            if let Err(e) = kept {
                tracing::warn!(question = %id, error = %e, "could not keep a decision among the recent ones");
            }
        }
        self.unlist(id).await;
        if let Err(e) = self.store.delete(SESSION, &key(id)).await {
            tracing::warn!(question = %id, error = %e, "could not delete a closed question");
        }
    }

    async fn unlist(&self, id: &str) {
        let done = self
            .store
            .update(SESSION, INDEX, |value| {
                let mut ids = ids_of(value.as_ref());
                ids.retain(|i| i != id);
                Value::from(ids)
            })
            .await;
        if let Err(e) = done {
            tracing::warn!(question = %id, error = %e, "could not take a question off the board's index");
        }
    }

    /// Every open question, oldest first; a question whose bridge stopped
    /// waiting long ago is closed as timed out on the way.
    pub async fn open_questions(&self) -> Result<Vec<Stored>, BoardError> {
        let ids = match self.store.get(SESSION, INDEX).await? {
            Some(entry) => ids_of(Some(&entry.value)),
            None => Vec::new(),
        };
        let mut out = Vec::new();
        let now = now_ms();
        for id in ids {
            match self.get(&id).await? {
                None => self.unlist(&id).await,
                Some(stored) if stored.decision.is_some() => out.push(stored),
                Some(stored) => {
                    let ends = stored.question.asked_ms + stored.question.timeout_ms;
                    if now > ends + ABANDONED_AFTER.as_millis() as u64 {
                        let decision = ended(&stored.question, "timed_out", "nobody waits for this answer any more");
                        let _ = self.settle(&id, decision).await;
                        self.close(&id).await;
                    } else {
                        out.push(stored);
                    }
                }
            }
        }
        out.sort_by_key(|s| s.question.asked_ms);
        Ok(out)
    }

    /// The last decisions, newest first.
    pub async fn recent(&self) -> Result<Vec<Decision>, BoardError> {
        let Some(entry) = self.store.get(SESSION, RECENT).await? else { return Ok(Vec::new()) };
        Ok(serde_json::from_value(entry.value).unwrap_or_default())
    }
}

/// A decision nobody took: `outcome` (`timed_out`, `withdrawn`) and why.
pub fn ended(q: &WaitingCall, outcome: &str, why: &str) -> Decision {
    Decision {
        id: q.id.clone(),
        server: q.server.clone(),
        tool: q.tool.clone(),
        identity: q.identity.clone(),
        outcome: outcome.to_string(),
        by: None,
        note: why.to_string(),
        at_ms: now_ms(),
        question_sha256: q.question_sha256.clone(),
        approvers: q.approvers.clone(),
    }
}

fn ids_of(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: &str, identity: Option<&str>, approvers: &[&str]) -> Stored {
        let mut q = WaitingCall {
            id: id.into(),
            session: "s1".into(),
            identity: identity.map(str::to_string),
            cell_id: "c1".into(),
            server: "bank".into(),
            tool: "pay".into(),
            arguments: r#""amount" = 5"#.into(),
            args: None,
            rule: "/tools/pay".into(),
            reason: None,
            approvers: approvers.iter().map(|a| a.to_string()).collect(),
            asked_ms: now_ms(),
            timeout_ms: 60_000,
            question_sha256: String::new(),
            code: Some("await pay(amount=5)".into()),
            still_waited: None,
        };
        q.question_sha256 = question_hash(&q);
        Stored { question: q, self_approve: false, decision: None, from_code: true }
    }

    #[test]
    fn the_questions_hash_covers_the_code_its_approvers_saw() {
        let asked = question("q", Some("carol"), &["alice"]).question;
        let other_code = WaitingCall { code: Some("await pay(amount=5000)".into()), ..asked.clone() };
        let no_code = WaitingCall { code: None, ..asked.clone() };
        assert_ne!(question_hash(&asked), question_hash(&other_code));
        assert_ne!(question_hash(&asked), question_hash(&no_code));
        assert_eq!(question_hash(&asked), asked.question_sha256);
    }

    fn viewer(name: &str, groups: &[&str]) -> Viewer {
        Viewer { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    #[tokio::test]
    async fn an_approver_in_the_group_decides_once_and_a_second_decision_is_refused() {
        let board = Board::new(SessionStore::in_memory());
        board.open(&question("a", Some("carol"), &["group:security"])).await.unwrap();
        let taken = board.decide(&viewer("bob", &["security"]), "a", true, "ok\u{7}, go").await.unwrap();
        assert_eq!(
            (taken.outcome.as_str(), taken.by.as_deref(), taken.note.as_str()),
            ("approved", Some("bob"), "ok, go")
        );
        let again = board.decide(&viewer("dave", &["security"]), "a", false, "no").await.unwrap_err();
        assert_eq!(again.to_string(), "the question was already approved by bob");
        assert_eq!(board.get("a").await.unwrap().unwrap().decision, Some(taken));
    }

    #[tokio::test]
    async fn nobody_outside_the_approvers_and_not_the_caller_decides() {
        let board = Board::new(SessionStore::in_memory());
        board.open(&question("a", Some("alice"), &["alice", "group:security"])).await.unwrap();
        let outsider = board.decide(&viewer("mallory", &["dev"]), "a", true, "").await.unwrap_err();
        assert!(outsider.to_string().contains("not among this rule's approvers (alice, group:security)"), "{outsider}");
        let own = board.decide(&viewer("alice", &[]), "a", true, "").await.unwrap_err();
        assert!(own.to_string().contains("alice made this call"), "{own}");
        assert!(board.get("a").await.unwrap().unwrap().decision.is_none());
    }

    #[tokio::test]
    async fn a_closed_question_leaves_the_board_and_its_decision_is_kept_among_the_recent() {
        let board = Board::new(SessionStore::in_memory());
        board.open(&question("a", None, &["bob"])).await.unwrap();
        board.open(&question("b", None, &["bob"])).await.unwrap();
        assert_eq!(board.open_questions().await.unwrap().len(), 2);
        board.decide(&viewer("bob", &[]), "a", false, "not today").await.unwrap();
        board.close("a").await;
        let open = board.open_questions().await.unwrap();
        assert_eq!(open.iter().map(|s| s.question.id.as_str()).collect::<Vec<_>>(), ["b"]);
        let recent = board.recent().await.unwrap();
        assert_eq!((recent[0].id.as_str(), recent[0].note.as_str()), ("a", "not today"));
        assert!(matches!(board.decide(&viewer("bob", &[]), "a", true, "").await, Err(BoardError::Unknown(_))));
    }

    #[tokio::test]
    async fn a_reader_of_the_board_at_any_step_of_a_question_being_put_on_it_never_loses_the_question() {
        // The memory store yields at each operation as a remote one does,
        // so a reader given `head_start` turns meets every step of the
        // opening (a CI run lost a question so: listed, read as missing and
        // unlisted by the console's reader, then written).
        for head_start in 0..16 {
            let board = Board::new(SessionStore::in_memory());
            let reader = board.clone();
            let asked = question("q", None, &["bob"]);
            let opening = board.open(&asked);
            let reading = async move {
                for _ in 0..head_start {
                    tokio::task::yield_now().await;
                }
                reader.open_questions().await.unwrap().len()
            };
            let (opened, _) = tokio::join!(opening, reading);
            opened.unwrap();
            let open = board.open_questions().await.unwrap();
            let ids: Vec<&str> = open.iter().map(|s| s.question.id.as_str()).collect();
            assert_eq!(ids, ["q"], "a reader {head_start} turns behind the opening");
        }
    }

    #[tokio::test]
    async fn a_full_board_refuses_one_more_question() {
        let board = Board::new(SessionStore::in_memory());
        for i in 0..MAX_WAITING {
            board.open(&question(&format!("q{i}"), None, &["bob"])).await.unwrap();
        }
        assert!(matches!(board.open(&question("one-more", None, &["bob"])).await, Err(BoardError::Full)));
        // The refused question leaves no entry behind.
        assert!(board.get("one-more").await.unwrap().is_none());
    }
}
