//! A wrapped server's messages for a client, on the bridge's side: the
//! other end of the session layer's [`Upward`] channel. Notes are passed to
//! the client's frontend session object; each question (sampling,
//! elicitation, roots) is judged first (the server's policy, the
//! private-data rule for a sampling answer, one audit record) and then
//! asked there ([`code_mode_proto::subjects::client`]). A stateless
//! server's input-required result is judged question by question the same
//! way ([`Bridge::vet_questions`]).

use std::time::Duration;

use code_mode_proto::{AskKind, Note};
use rmcp::model::ErrorData;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Bridge;
use crate::relay::{Owner, Upcall};

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
                Upcall::Ask { owner, call_id, server, kind, params, withdrawn, answer } => {
                    let answered = tokio::select! {
                        _ = cancel.cancelled() => Err(ErrorData::internal_error("the gateway is shutting down", None)),
                        answered = bridge.relay_ask(&owner, call_id, server, kind, params, &withdrawn) => answered,
                    };
                    let _ = answer.send(answered);
                }
            }
        });
    }
}

impl crate::Bridge {
    /// Judge a server's question to the client before it is asked: the
    /// server's policy (`sampling`, `elicitation`, `roots`), and for
    /// sampling the private-data rule (the client's model writes the
    /// answer, so once `session` read private data only a private server
    /// may have it). The decision goes into `trail`; `Err` holds the
    /// refusal.
    pub(crate) async fn judge_question(
        &self,
        current: &crate::current::Current,
        session: &str,
        server: usize,
        kind: AskKind,
        trail: &mut crate::trail::Trail,
    ) -> Result<(), String> {
        let name = self.server_name(server);
        if let Some(applied) = &current.policies[server] {
            let site = crate::policy::CallSite { session, server: &name, tool: kind.method() };
            match applied.policy.ask(kind.into()) {
                crate::policy::Admission::Allow { rule } => {
                    self.decided(trail, site, crate::policy::AuditDecision::Allowed, &rule, None);
                }
                crate::policy::Admission::Deny { reason, rule } => {
                    self.decided(trail, site, crate::policy::AuditDecision::Denied, &rule, Some(reason.clone()));
                    let why = format!("{}: denied by the gateway's policy ({rule}): {reason}", kind.method());
                    tracing::info!(server = %name, "{why}");
                    return Err(why);
                }
            }
        }
        if kind == AskKind::Sampling
            && let Some(rule) = &current.rule
            && !current.offers.is_private(server)
        {
            let mut state = crate::check::StateKey::new(self, session);
            let key = match state.get().await {
                Ok(key) => key.to_string(),
                Err(e) => {
                    let why = format!(
                        "{}: session state failed, refusing under the private-data rule (fail closed): {e}",
                        kind.method()
                    );
                    trail.refused("bridge:private_data", &why);
                    return Err(why);
                }
            };
            let judged = format!("a sampling answer to {name}");
            if let Err(refusal) = rule.judge(&key, &judged, false).await {
                trail.tainted = Some(true);
                trail.refused("bridge:private_data", &refusal.to_string());
                return Err(refusal.to_string());
            }
            trail.tainted = Some(false);
        }
        Ok(())
    }

    /// A stateless server's input-required result on its way to the
    /// client: each question in it is judged as a relayed one (and
    /// audited), and an elicitation's message names the server. `Err`:
    /// a question is refused, and with it the whole result.
    pub(crate) async fn vet_questions(
        &self,
        current: &crate::current::Current,
        server: usize,
        call: &code_mode_proto::ToolCall,
        result: &mut serde_json::Value,
    ) -> Result<(), String> {
        let name = self.server_name(server);
        let Some(serde_json::Value::Object(requests)) = result.get_mut("inputRequests") else { return Ok(()) };
        for (_, request) in requests.iter_mut() {
            let kind = match request.get("method").and_then(serde_json::Value::as_str) {
                Some("sampling/createMessage") => AskKind::Sampling,
                Some("elicitation/create") => AskKind::Elicitation,
                Some("roots/list") => AskKind::Roots,
                other => return Err(format!("the server asked for {other:?}, which code-mode does not relay")),
            };
            let record = code_mode_proto::ToolCall {
                tool: kind.method().to_string(),
                arguments: request.get("params").cloned().unwrap_or_default(),
                op: code_mode_proto::Op::Tool,
                link: None,
                ..call.clone()
            };
            let mut trail = crate::trail::Trail::new(&record);
            trail.method = Some(kind.method().to_string());
            trail.at(&name, kind.method());
            let judged = self.judge_question(current, &call.session, server, kind, &mut trail).await;
            if judged.is_ok() {
                trail.went_out();
            }
            if let Some(audit) = &self.inner.audit
                && let Err(e) = audit.append(trail.record(&record), code_mode_audit::Durability::Written).await
            {
                return Err(format!("the gateway could not record the server's question: {e}"));
            }
            judged?;
            if kind == AskKind::Elicitation
                && let Some(serde_json::Value::String(message)) = request.pointer_mut("/params/message")
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

impl crate::Bridge {
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

    /// Relay one question of server `server` to `owner`'s client, once it
    /// passed the checks: the server's policy (`sampling`, `elicitation`,
    /// `roots`), and for a sampling answer the private-data rule (the
    /// client's model writes it, so after private data was read only a
    /// private server may receive it). Every question is one audit record.
    pub(crate) async fn relay_ask(
        &self,
        owner: &Owner,
        call_id: Option<String>,
        server: usize,
        kind: AskKind,
        params: serde_json::Value,
        withdrawn: &tokio_util::sync::CancellationToken,
    ) -> Result<serde_json::Value, ErrorData> {
        let current = self.current();
        let name = self.server_name(server);
        let record = code_mode_proto::ToolCall {
            session: owner.session.clone(),
            asker: Some(owner.asker.clone()),
            identity: owner.identity.clone(),
            cell_id: call_id.clone().unwrap_or_default(),
            call_index: 0,
            tool: kind.method().to_string(),
            arguments: params.clone(),
            op: code_mode_proto::Op::Tool,
            link: None,
        };
        let mut trail = crate::trail::Trail::new(&record);
        trail.method = Some(kind.method().to_string());
        trail.at(&name, kind.method());
        let answer = self.judge_and_ask(&current, owner, call_id, server, kind, params, withdrawn, &mut trail).await;
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.append(trail.record(&record), code_mode_audit::Durability::Written).await
        {
            tracing::error!(server = %name, error = %e, "a server's question could not be recorded: its answer is withheld");
            return Err(ErrorData::internal_error(format!("the gateway could not record the answer: {e}"), None));
        }
        answer
    }

    #[allow(clippy::too_many_arguments)]
    async fn judge_and_ask(
        &self,
        current: &crate::current::Current,
        owner: &Owner,
        call_id: Option<String>,
        server: usize,
        kind: AskKind,
        params: serde_json::Value,
        withdrawn: &tokio_util::sync::CancellationToken,
        trail: &mut crate::trail::Trail,
    ) -> Result<serde_json::Value, ErrorData> {
        let name = self.server_name(server);
        let refused = |trail: &mut crate::trail::Trail, check: &str, why: String| {
            tracing::info!(server = %name, method = kind.method(), "a server's question was refused: {why}");
            trail.refused(check, &why);
            Err(ErrorData::invalid_request(why, None))
        };
        let link = &owner.link;
        let declared = match kind {
            AskKind::Sampling => link.sampling,
            AskKind::Elicitation => link.elicitation || link.elicitation_url,
            AskKind::Roots => link.roots,
        };
        if !declared {
            return refused(trail, "bridge:capability", format!("{}: the client did not declare it", kind.method()));
        }
        if let Err(why) = self.judge_question(current, &owner.session, server, kind, trail).await {
            return Err(ErrorData::invalid_request(why, None));
        }
        trail.went_out();
        let Some(bus) = self.inner.outbound.get() else {
            return refused(trail, "bridge:no_client", "no client session can be reached".to_string());
        };
        let Some(subject) = code_mode_proto::subjects::client(&owner.asker) else {
            return refused(trail, "bridge:no_client", "the client's session id cannot be addressed".to_string());
        };
        let timeout = self.inner.limits.approval_timeout;
        let id = uuid::Uuid::new_v4().to_string();
        let message = code_mode_proto::ToClient::Ask(code_mode_proto::ServerAsk {
            id: Some(id.clone()),
            call_id,
            server: name.clone(),
            ask: kind,
            params,
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
                trail.result = Some((code_mode_audit::record::CallResult::Error, Some("withdrawn by the server".into())));
                return Err(ErrorData::invalid_request("the server withdrew its request", None));
            }
        };
        match reply {
            Ok(code_mode_proto::FromClient::Answered { result }) => {
                trail.result = Some((code_mode_audit::record::CallResult::Ok, Some(result.to_string())));
                Ok(result)
            }
            Ok(code_mode_proto::FromClient::Refused { message, code }) => {
                trail.result = Some((code_mode_audit::record::CallResult::Error, Some(message.clone())));
                Err(ErrorData::new(
                    code.map_or(rmcp::model::ErrorCode::INVALID_REQUEST, rmcp::model::ErrorCode),
                    message,
                    None,
                ))
            }
            Ok(code_mode_proto::FromClient::Noted) => {
                trail.result = Some((code_mode_audit::record::CallResult::Fault, None));
                Err(ErrorData::internal_error("the client's frontend did not answer the question", None))
            }
            Err(e) => {
                tracing::warn!(server = %name, error = %e, "a server's question did not reach its client");
                trail.result = Some((code_mode_audit::record::CallResult::Fault, None));
                Err(ErrorData::internal_error(
                    "the client could not be asked (its session is gone or did not answer)",
                    None,
                ))
            }
        }
    }
}
