//! Asking a team: a call whose rule names `approvers` waits on the
//! [approval board](crate::board) until an approver decides in the web
//! console (or the session's own client, with `ask_client`), its timeout
//! passes, or its cell goes away.
//!
//! While it waits the bridge holds the cell ([`Holder`]): the runner pauses
//! its container (the engine's pause: no process of it is scheduled) and
//! stops its deadline, and the bridge renews the hold every [`RENEW`]. A
//! renewal nobody answers means the cell ended or its runner died; the
//! question is then withdrawn with that reason. The client session that ran
//! the code hears where the question waits (its frontend sends the
//! console's link), and answers it too when the rule says `ask_client`.
//!
//! Who decided, when, with what note, and the hash of the question they
//! saw go into the call's audit record ([`code_mode_audit::record::Approval`]).

use std::time::{Duration, Instant};

use code_mode_audit::record as audit_record;
use code_mode_core::bus::{Bus, BusError};
use code_mode_proto::{self as proto, ApprovalReply, CellHeld, CellHold, ConsoleAsk, ToolCall, WaitingCall, subjects};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::Bridge;
use crate::approval;
use crate::board::{self, Board, Stored};
use crate::policy::{CallSite, RuleSource, Team};

/// How often a held cell's hold is renewed (and its cell's life checked).
pub const RENEW: Duration = Duration::from_secs(3);
/// How long one hold request may take.
const HOLD_WAIT: Duration = Duration::from_secs(2);

/// How a team's question ended, for the pipeline.
#[derive(Debug)]
pub(crate) struct TeamAnswer {
    /// The call may go out.
    pub(crate) approved: bool,
    /// Why not, as the code's `ToolError` says it (after the rule).
    pub(crate) refusal: String,
    /// The audit record's account.
    pub(crate) audit: audit_record::Approval,
}

/// What the pipeline knows of the call being asked about.
pub(crate) struct Asked<'a> {
    pub(crate) call: &'a ToolCall,
    pub(crate) site: CallSite<'a>,
    pub(crate) rule: &'a RuleSource,
    pub(crate) team: &'a Team,
    /// The arguments' values, when the rule records them.
    pub(crate) args: Option<serde_json::Value>,
    /// The call comes from a cell's code (which can be held).
    pub(crate) from_code: bool,
}

impl Bridge {
    /// Put the call on the board and wait for its decision.
    pub(crate) async fn ask_team(&self, asked: Asked<'_>) -> TeamAnswer {
        let Asked { call, site, rule, team, args, from_code } = asked;
        let timeout = self.inner.limits.approval_timeout;
        let started = Instant::now();
        let board = Board::new(self.inner.rebuild.state.clone());
        let bus = self.inner.outbound.get().cloned();
        // Held first, so that a question on the board is one whose cell is
        // paused (and watched) already; its first answer brings the cell's
        // code, which the approvers read beside the arguments.
        let holder = match (&bus, from_code) {
            (Some(bus), true) => Holder::start(self, bus.clone(), &call.cell_id, call.call_index, true).await,
            _ => None,
        };
        let code = holder.as_ref().and_then(|h| h.code.as_deref()).map(shown_code);
        let mut question = WaitingCall {
            id: uuid::Uuid::new_v4().simple().to_string(),
            session: call.session.clone(),
            identity: call.identity.clone(),
            cell_id: call.cell_id.clone(),
            server: site.server.to_string(),
            tool: site.tool.to_string(),
            arguments: approval::summarize_arguments(&call.arguments, approval::SUMMARY_CHARS),
            args,
            rule: rule.to_string(),
            reason: team.reason.clone(),
            approvers: team.approvers.iter().map(ToString::to_string).collect(),
            asked_ms: board::now_ms(),
            timeout_ms: timeout.as_millis() as u64,
            question_sha256: String::new(),
            code,
            still_waited: None,
        };
        question.question_sha256 = board::question_hash(&question);
        let Some(bus) = bus else {
            // `code-mode run`: no frontend, so no console and nobody to decide.
            let why = "its rule names approvers, who decide in the web console of an HTTP frontend, and no frontend \
                       serves this bridge";
            return answer(&question, board::ended(&question, "withdrawn", why), started.elapsed(), timeout);
        };
        let stored = Stored { question: question.clone(), self_approve: team.self_approve, decision: None, from_code };
        if let Err(e) = board.open(&stored).await {
            tracing::warn!(tool = %site.tool, cell = %call.cell_id, error = %e, "could not put a call on the approval board");
            let decision = board::ended(&question, "withdrawn", &format!("the approval board refused it: {e}"));
            return answer(&question, decision, started.elapsed(), timeout);
        }
        tracing::info!(question = %question.id, tool = %site.tool, cell = %call.cell_id, %rule,
            approvers = %question.approvers.join(","), "a call waits for its approvers");
        let client = self.tell_asker(&bus, call, &question, team.ask_client, timeout);
        // The request that ran the call may be cancelled (or its client go
        // away) meanwhile: the question is then withdrawn at once.
        let cancelled = self.inner.in_flight.token_of(&call.cell_id);
        let waited = Waited { holder: holder.as_ref(), cancelled };
        let decision = self.wait_for_decision(&board, &question, waited, client, timeout).await;
        drop(holder);
        board.close(&question.id).await;
        tracing::info!(question = %question.id, outcome = %decision.outcome, by = decision.by.as_deref().unwrap_or("-"),
            waited_ms = started.elapsed().as_millis() as u64, "a team's question ended");
        answer(&question, decision, started.elapsed(), timeout)
    }

    /// Tell the client session that ran the code where its call waits (and,
    /// with `ask_client`, ask it): the answer, when it is one.
    fn tell_asker(
        &self,
        bus: &Bus,
        call: &ToolCall,
        question: &WaitingCall,
        ask_client: bool,
        timeout: Duration,
    ) -> Option<oneshot::Receiver<ApprovalReply>> {
        let subject = subjects::approval(call.asker.as_deref().unwrap_or(&call.session))?;
        let request = proto::ApprovalRequest {
            session: call.session.clone(),
            cell_id: call.cell_id.clone(),
            server: question.server.clone(),
            tool: question.tool.clone(),
            arguments: question.arguments.clone(),
            rule: question.rule.clone(),
            timeout_ms: timeout.as_millis() as u64,
            console: Some(ConsoleAsk { id: question.id.clone(), approvers: question.approvers.clone(), ask_client }),
            connect: None,
        };
        let (tx, rx) = oneshot::channel();
        let bus = bus.clone();
        let stop = self.inner.stop.clone();
        self.inner.tasks.spawn(async move {
            let wait = timeout + code_mode_core::defaults::HOP_MARGIN;
            let asked = bus.call_counted_as::<_, ApprovalReply>(&subject, subjects::APPROVAL, &request, wait);
            let reply = tokio::select! {
                _ = stop.cancelled() => return,
                reply = asked => reply,
            };
            match reply {
                Ok(reply) if ask_client => {
                    let _ = tx.send(reply);
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "the client session could not be told where its call waits"),
            }
        });
        ask_client.then_some(rx)
    }

    /// The decision that holds: an approver's, the client's, or the end of
    /// the wait (timeout, the cell gone).
    async fn wait_for_decision(
        &self,
        board: &Board,
        question: &WaitingCall,
        waited: Waited<'_>,
        mut client: Option<oneshot::Receiver<ApprovalReply>>,
        timeout: Duration,
    ) -> proto::Decision {
        let Waited { holder, cancelled } = waited;
        let until = tokio::time::Instant::now() + timeout;
        loop {
            let settled = tokio::select! {
                _ = tokio::time::sleep_until(until) => Some(board::ended(
                    question, "timed_out", &format!("no approver answered within {} s", timeout.as_secs()))),
                reply = async { client.as_mut().expect("guarded").await }, if client.is_some() => {
                    client = None;
                    client_decision(question, reply.ok())
                }
                _ = tokio::time::sleep(board::POLL) => {
                    match board.get(&question.id).await {
                        Ok(Some(stored)) if stored.decision.is_some() => return stored.decision.expect("checked"),
                        Ok(Some(_)) => None,
                        Ok(None) => Some(board::ended(question, "withdrawn", "the question left the board")),
                        Err(e) => {
                            tracing::warn!(question = %question.id, error = %e, "could not read the approval board");
                            None
                        }
                    }
                }
                why = async { holder.expect("guarded").gone().await }, if holder.is_some() => {
                    Some(board::ended(question, "withdrawn", why))
                }
                _ = async { cancelled.as_ref().expect("guarded").cancelled().await }, if cancelled.is_some() => {
                    Some(board::ended(question, "withdrawn", WITHDRAWN_CANCELLED))
                }
            };
            if let Some(decision) = settled {
                // Whoever wrote first decides: an approver may have just
                // answered.
                match board.settle(&question.id, decision.clone()).await {
                    Ok(held) => return held,
                    Err(e) => {
                        tracing::warn!(question = %question.id, error = %e, "could not settle a question");
                        return decision;
                    }
                }
            }
        }
    }
}

/// Why a question whose request is gone was withdrawn.
pub(crate) const WITHDRAWN_CANCELLED: &str =
    "the request that asked is gone (cancelled by its client, or its client went away): nobody waits for this answer";

/// What shows that someone still waits for a question's answer: the held
/// cell (gone when its runner stops answering) and the token of the
/// request's calls (fired by its cancel).
struct Waited<'a> {
    holder: Option<&'a Holder>,
    cancelled: Option<CancellationToken>,
}

/// The decision of the session's own client, when its reply is one.
fn client_decision(question: &WaitingCall, reply: Option<ApprovalReply>) -> Option<proto::Decision> {
    let outcome = match reply? {
        ApprovalReply::Approved => "approved",
        ApprovalReply::Declined | ApprovalReply::Cancelled => "declined",
        // No answer from the client: the approvers still may.
        ApprovalReply::TimedOut | ApprovalReply::Unavailable { .. } => return None,
    };
    Some(proto::Decision {
        outcome: outcome.to_string(),
        by: Some("client".to_string()),
        note: "answered by the session's own client".to_string(),
        ..board::ended(question, outcome, "")
    })
}

/// The pipeline's account of a decision.
fn answer(question: &WaitingCall, decision: proto::Decision, waited: Duration, timeout: Duration) -> TeamAnswer {
    let approved = decision.outcome == "approved";
    let refusal = match (decision.outcome.as_str(), &decision.by) {
        ("approved", _) => String::new(),
        ("declined", Some(by)) if decision.note.is_empty() || by == "client" => format!("declined by {by}"),
        ("declined", Some(by)) => format!("declined by {by}: {}", decision.note),
        ("timed_out", _) => format!("no approver answered within {} s, so the call is refused", timeout.as_secs()),
        (_, _) => format!("the question was withdrawn: {}", decision.note),
    };
    let audit = audit_record::Approval {
        id: question.id.clone(),
        outcome: decision.outcome.clone(),
        by: decision.by.clone(),
        at: audit_record::rfc3339(std::time::UNIX_EPOCH + Duration::from_millis(decision.at_ms)),
        note: decision.note.clone(),
        question_sha256: question.question_sha256.clone(),
        waited_ms: waited.as_millis() as u64,
    };
    TeamAnswer { approved, refusal, audit }
}

/// A cell's code as a waiting call shows it: cut to
/// [`proto::CODE_SHOWN`] characters, saying how much was cut.
fn shown_code(code: &str) -> String {
    let total = code.chars().count();
    if total <= proto::CODE_SHOWN {
        return code.to_string();
    }
    let kept: String = code.chars().take(proto::CODE_SHOWN).collect();
    format!("{kept}\n# ... ({} more characters of the cell's code are not shown)", total - proto::CODE_SHOWN)
}

/// A hold on one cell while a call of it waits: renewed every [`RENEW`],
/// released when dropped.
#[derive(Debug)]
pub(crate) struct Holder {
    stop: CancellationToken,
    /// Cancelled once the held cell is gone.
    gone: CancellationToken,
    /// The cell's code, when asked for and its runner answered the first
    /// hold.
    pub(crate) code: Option<String>,
}

impl Holder {
    /// Hold the cell `cell_id` for its call `call_index`, and watch that it
    /// lives: `None` only when its id names no subject. A runner that does
    /// not answer the first hold is asked again at each renewal (the wait
    /// counts against the deadline until one answers); no runner serving
    /// the cell's hold subject means the cell is gone, at once or later.
    /// `code`: ask the runner for the cell's code with the first hold. The
    /// renewals are a task on `bridge`'s tracker that ends (releasing the
    /// cell) when the holder is dropped or the bridge stops.
    pub(crate) async fn start(bridge: &Bridge, bus: Bus, cell_id: &str, call_index: u32, code: bool) -> Option<Self> {
        let subject = subjects::cell_hold(cell_id)?;
        let hold = CellHold { call_index, hold: true, code: false };
        let first = bus.call_quiet::<_, CellHeld>(&subject, &CellHold { code, ..hold }, HOLD_WAIT).await;
        let gone_now = matches!(first, Err(BusError::NoResponders { .. }));
        let code = match first {
            Ok(held) => {
                if let Some(why) = &held.refused {
                    tracing::info!(cell = %cell_id, "the cell is not held: {why}");
                }
                held.code
            }
            Err(e) => {
                tracing::info!(cell = %cell_id, error = %e, "the cell could not be held (yet)");
                None
            }
        };
        let stop = bridge.inner.stop.child_token();
        let gone = CancellationToken::new();
        if gone_now {
            gone.cancel();
            return Some(Self { stop, gone, code });
        }
        let (task_stop, task_gone) = (stop.clone(), gone.clone());
        bridge.inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = task_stop.cancelled() => break,
                    _ = tokio::time::sleep(RENEW) => {}
                }
                match bus.call_quiet::<_, CellHeld>(&subject, &hold, HOLD_WAIT).await {
                    Ok(_) => {}
                    Err(BusError::NoResponders { .. }) => {
                        task_gone.cancel();
                        return;
                    }
                    Err(e) => tracing::debug!(error = %e, "a hold renewal failed; trying again"),
                }
            }
            let release = CellHold { hold: false, ..hold };
            if let Err(e) = bus.call_quiet::<_, CellHeld>(&subject, &release, HOLD_WAIT).await {
                tracing::debug!(error = %e, "could not release a held cell (it may have ended)");
            }
        });
        Some(Self { stop, gone, code })
    }

    /// Resolves (with the reason) once the held cell is gone.
    pub(crate) async fn gone(&self) -> &'static str {
        self.gone.cancelled().await;
        "the cell that asked ended, or the sandbox-runner running it stopped answering"
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
