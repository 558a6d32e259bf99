//! A wrapped server's messages for a client, on the bridge's side: the
//! other end of the session layer's [`Upward`](crate::relay::Upward)
//! channel. Notes are passed to the client's frontend session object; each
//! question (sampling, elicitation, roots) is judged first and then asked
//! there ([`code_mode_proto::subjects::client`]). A stateless server's
//! input-required result is judged question by question the same way
//! ([`Bridge::vet_questions`]).
//!
//! A question is judged by the steps a call takes ([`crate::check`]), by
//! the same code, with the question as its target ([`Target::Question`]):
//! the client declared the capability (its step 1, as a call's is that its
//! target is offered), the server's policy (`sampling`, `elicitation`,
//! `roots`: step 5, as for a resource or a prompt), the private-data rule
//! for a sampling answer (step 6: the client's model writes it, so once the
//! session read private data only a private server may have it). Each
//! question is one audit record naming the client it was for ([`Judged`]).

use std::time::Duration;

use code_mode_audit::record::CallResult;
use code_mode_proto::{AskKind, Note, ToolCall};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Bridge;
use crate::answer::Answer;
use crate::check::StateKey;
use crate::current::Current;
use crate::relay::{Owner, Question, Upcall};
use crate::target::Target;
use crate::trail::{Judged, Trail};
use crate::wire::Unanswered;

/// Serve the session layer's upcalls (see [`crate::relay::Upward`]) until
/// `cancel`: each one in a task of its own on the bridge's tracker, so that
/// a question waiting for its client holds up no note. A question still
/// waiting at shutdown is answered that the gateway is shutting down.
pub(crate) async fn serve(bridge: Bridge, mut upcalls: mpsc::Receiver<Upcall>, cancel: CancellationToken) {
    let tasks = bridge.inner.tasks.clone();
    loop {
        let upcall = tokio::select! {
            _ = cancel.cancelled() => return,
            upcall = upcalls.recv() => match upcall {
                Some(upcall) => upcall,
                None => return,
            },
        };
        let (bridge, cancel) = (bridge.clone(), cancel.clone());
        tasks.spawn(async move {
            match upcall {
                Upcall::Tell { asker, call_id, server, note, delivered } => {
                    tokio::select! {
                        _ = cancel.cancelled() => {}
                        () = bridge.tell_client(&asker, call_id, server, note) => {}
                    }
                    let _ = delivered.send(());
                }
                Upcall::TaskStatus { server, task } => {
                    tokio::select! {
                        _ = cancel.cancelled() => {}
                        () = bridge.relay_task_status(server, task) => {}
                    }
                }
                Upcall::Ask { question, answer } => {
                    let answered = tokio::select! {
                        _ = cancel.cancelled() => Err(Unanswered::ShuttingDown),
                        answered = bridge.relay_ask(&question) => answered,
                    };
                    let _ = answer.send(answered);
                }
            }
        });
    }
}

impl Bridge {
    /// Judge a server's question before it is asked, by the steps of a
    /// call after its target is found: the server's policy, then the
    /// private-data rule. The decisions go into `trail`; `Err` holds the
    /// refusal.
    pub(crate) async fn judge_question(
        &self,
        current: &Current,
        judged: Judged<'_>,
        target: &Target<'_>,
        trail: &mut Trail,
    ) -> Result<(), String> {
        let mut state = StateKey::new(self, judged.session);
        let steps = async {
            if let Some(server) = target.server()
                && let Some(applied) = &current.policies[server]
            {
                self.admit(applied, judged, target, trail)?;
            }
            self.private_rule(current, target, &mut state, trail).await
        };
        steps.await.map_err(Answer::refusal)
    }

    /// A question's trail, at its server, and its audit record once judged
    /// (and, when it was asked, answered).
    pub(crate) fn question_trail(&self, judged: Judged<'_>, target: &Target<'_>) -> Trail {
        let mut trail = Trail::new(judged);
        if let Some(server) = target.server() {
            trail.at(&self.server_name(server), &target.audit_name());
        }
        trail
    }

    /// Write a question's audit record.
    pub(crate) async fn record_question(
        &self,
        trail: &Trail,
        judged: Judged<'_>,
    ) -> Result<(), code_mode_audit::AuditError> {
        match &self.inner.audit {
            Some(audit) => audit.append(trail.record(judged), code_mode_audit::Durability::Written).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// A stateless server's input-required result on its way to the
    /// client: each question in it is judged as a relayed one (and
    /// audited), and an elicitation's message names the server. `Err`:
    /// a question is refused, and with it the whole result.
    pub(crate) async fn vet_questions(
        &self,
        current: &Current,
        server: usize,
        call: &ToolCall,
        result: &mut Value,
    ) -> Result<(), String> {
        let name = self.server_name(server);
        let Some(Value::Object(requests)) = result.get_mut("inputRequests") else { return Ok(()) };
        for (_, request) in requests.iter_mut() {
            let kind = match request.get("method").and_then(Value::as_str) {
                Some("sampling/createMessage") => AskKind::Sampling,
                Some("elicitation/create") => AskKind::Elicitation,
                Some("roots/list") => AskKind::Roots,
                other => return Err(format!("the server asked for {other:?}, which code-mode does not relay")),
            };
            let params = request.get("params").cloned().unwrap_or_default();
            let session = &call.session;
            let judged =
                Judged::question(session, call.identity.as_deref(), &call.cell_id, call.call_index, kind, &params);
            let target = Target::Question { server, kind };
            let mut trail = self.question_trail(judged, &target);
            let verdict = self.judge_question(current, judged, &target, &mut trail).await;
            if verdict.is_ok() {
                trail.went_out();
            }
            if let Err(e) = self.record_question(&trail, judged).await {
                return Err(format!("the gateway could not record the server's question: {e}"));
            }
            verdict?;
            if kind == AskKind::Elicitation
                && let Some(Value::String(message)) = request.pointer_mut("/params/message")
            {
                *message = format!("The server {name:?} asks (through code-mode): {message}");
            }
        }
        Ok(())
    }
}

/// How long telling a client a note (or that a question was withdrawn)
/// may take (notes are not retried: a lost one is only logged).
const NOTE_TIMEOUT: Duration = Duration::from_secs(2);

/// Send one message for a client to its frontend session object's
/// `subject` (counted under the client subject's metrics label).
async fn to_client(
    bus: &code_mode_core::bus::Bus,
    subject: &str,
    message: &code_mode_proto::ToClient,
    timeout: Duration,
) -> Result<code_mode_proto::FromClient, code_mode_core::bus::BusError> {
    bus.call_counted_as(subject, code_mode_proto::subjects::CLIENT, message, timeout).await
}

impl Bridge {
    /// Pass a server's note to the frontend session object `asker`.
    pub(crate) async fn tell_client(&self, asker: &str, call_id: Option<String>, server: usize, note: Note) {
        let Some(bus) = self.inner.outbound.get() else { return };
        let Some(subject) = code_mode_proto::subjects::client(asker) else { return };
        let message = code_mode_proto::ToClient::Note(code_mode_proto::ServerNote {
            call_id,
            server: self.server_name(server),
            note,
        });
        if let Err(e) = to_client(bus, &subject, &message, NOTE_TIMEOUT).await {
            tracing::debug!(client = %asker, error = %e, "a server's note did not reach its client");
        }
    }

    /// Relay one question of a server to its owner's client once it passed
    /// the checks (see the module's doc); every question is one audit
    /// record, written before the answer goes back (one that cannot be
    /// written withholds the answer).
    pub(crate) async fn relay_ask(&self, question: &Question) -> Result<Value, Unanswered> {
        let current = self.current();
        let Question { owner, call_id, server, kind, params, .. } = question;
        let (server, kind) = (*server, *kind);
        let cell = call_id.as_deref().unwrap_or_default();
        let judged = Judged::question(&owner.session, owner.identity.as_deref(), cell, 0, kind, params);
        let target = Target::Question { server, kind };
        let mut trail = self.question_trail(judged, &target);
        let answer = async {
            if let Err(why) = declared(owner, kind) {
                return Err(self.question_refused(&mut trail, server, kind, "bridge:capability", why));
            }
            self.judge_question(&current, judged, &target, &mut trail).await.map_err(Unanswered::Refused)?;
            trail.went_out();
            self.ask_client(question, &mut trail).await
        }
        .await;
        if let Err(e) = self.record_question(&trail, judged).await {
            let name = self.server_name(server);
            tracing::error!(server = %name, error = %e, "a server's question could not be recorded: its answer is withheld");
            return Err(Unanswered::NotRecorded(e.to_string()));
        }
        answer
    }

    /// A question refused by a check of its own (the client's capability,
    /// no client to ask), noted in its trail.
    fn question_refused(
        &self,
        trail: &mut Trail,
        server: usize,
        kind: AskKind,
        check: &str,
        why: String,
    ) -> Unanswered {
        let name = self.server_name(server);
        tracing::info!(server = %name, method = kind.method(), "a server's question was refused: {why}");
        trail.refused(check, &why);
        Unanswered::Refused(why)
    }

    /// Ask the owner's client a question that passed the checks, through
    /// its frontend session object; the client's answer, or why there is
    /// none. A question the server withdraws meanwhile is withdrawn at the
    /// client too.
    async fn ask_client(&self, question: &Question, trail: &mut Trail) -> Result<Value, Unanswered> {
        let Question { owner, server, kind, withdrawn, .. } = question;
        let (server, kind) = (*server, *kind);
        let name = self.server_name(server);
        let Some(bus) = self.inner.outbound.get() else {
            let why = "no client session can be reached".to_string();
            return Err(self.question_refused(trail, server, kind, "bridge:no_client", why));
        };
        let Some(subject) = code_mode_proto::subjects::client(&owner.asker) else {
            let why = "the client's session id cannot be addressed".to_string();
            return Err(self.question_refused(trail, server, kind, "bridge:no_client", why));
        };
        let timeout = self.inner.limits.approval_timeout;
        let id = uuid::Uuid::new_v4().to_string();
        let message = code_mode_proto::ToClient::Ask(code_mode_proto::ServerAsk {
            id: Some(id.clone()),
            call_id: question.call_id.clone(),
            server: name.clone(),
            ask: kind,
            params: question.params.clone(),
            timeout_ms: timeout.as_millis() as u64,
        });
        let wait = timeout + code_mode_core::defaults::HOP_MARGIN;
        let asked = to_client(bus, &subject, &message, wait);
        let reply = tokio::select! {
            reply = asked => reply,
            // The server cancelled its request: so is the question at the
            // client (the server wants no answer: none is sent).
            _ = withdrawn.cancelled() => {
                let withdraw = code_mode_proto::ToClient::Withdraw(code_mode_proto::AskWithdrawn { id, reason: None });
                if let Err(e) = to_client(bus, &subject, &withdraw, NOTE_TIMEOUT).await {
                    tracing::debug!(server = %name, error = %e, "a withdrawn question could not be cancelled at the client");
                }
                trail.result = Some((CallResult::Error, Some("withdrawn by the server".into())));
                return Err(Unanswered::Withdrawn);
            }
        };
        match reply {
            Ok(code_mode_proto::FromClient::Answered { result }) => {
                trail.result = Some((CallResult::Ok, Some(result.to_string())));
                Ok(result)
            }
            Ok(code_mode_proto::FromClient::Refused { message, code }) => {
                trail.result = Some((CallResult::Error, Some(message.clone())));
                Err(Unanswered::ByClient { message, code })
            }
            Ok(code_mode_proto::FromClient::Noted) => {
                trail.result = Some((CallResult::Fault, None));
                Err(Unanswered::NotAnswered)
            }
            Err(e) => {
                tracing::warn!(server = %name, error = %e, "a server's question did not reach its client");
                trail.result = Some((CallResult::Fault, None));
                Err(Unanswered::Unreachable)
            }
        }
    }
}

/// A question's step 1: the client declared that it can answer it.
fn declared(owner: &Owner, kind: AskKind) -> Result<(), String> {
    let link = &owner.link;
    let declared = match kind {
        AskKind::Sampling => link.sampling,
        AskKind::Elicitation => link.elicitation || link.elicitation_url,
        AskKind::Roots => link.roots,
    };
    if declared { Ok(()) } else { Err(format!("{}: the client did not declare it", kind.method())) }
}
