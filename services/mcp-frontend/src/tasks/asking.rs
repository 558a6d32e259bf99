//! Questions inside a task: what a task's cell asks its client while no
//! request of the client is open (an approval whose rule has no approvers
//! in the web console, a wrapped server's sampling, elicitation or roots
//! question) becomes an entry of the task's `inputRequests`, and the task
//! says `input_required`. The client answers with `tasks/update`
//! (`inputResponses` under the same keys), through any frontend replica:
//! the answers are written into the task's record in the state store, where
//! the process driving the task finds them ([`POLL`]) and hands them to the
//! waiting call; the task is `working` again once nothing waits.
//!
//! Keys are unique over the task's life (`approval-1`, `ask-2`, ...: one
//! counter per task). A question is bound as outside tasks: the approval
//! timeout (the bridge's `--approval-timeout`), after which the call is
//! refused ("timed out") and its entry leaves `inputRequests`; a question
//! its server withdraws leaves too. An approval a team decides in the web
//! console is never the client's: the task stays `working`, its status
//! message saying who is asked where.

use std::collections::BTreeMap;
use std::time::Duration;

use code_mode_proto::{ApprovalReply, FromClient, ServerAsk};
use rmcp::model::{ElicitRequest, InputRequest, InputRequests, InputResponses};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::Frontend;
use crate::approval::{self, Pending};
use crate::auth::Identity;
use crate::questions::{self, NOT_ASKABLE, PendingAsk};

/// How often the driver of a task with questions reads its record for
/// answers (`tasks/update` may reach another replica).
pub(crate) const POLL: Duration = Duration::from_millis(400);

/// Where the answer to one entry goes.
#[derive(Debug)]
enum Waiter {
    /// An approval the bridge waits for.
    Approval(oneshot::Sender<ApprovalReply>),
    /// A connect question ([`crate::connect`]): a URL accept means opened.
    Connect(oneshot::Sender<ApprovalReply>),
    /// A wrapped server's question.
    Ask { ask: ServerAsk, answer: oneshot::Sender<FromClient>, withdrawn: CancellationToken },
}

impl Waiter {
    /// Nobody waits for the answer any more: the question timed out (the
    /// routes' bound) or its server withdrew it.
    fn lapsed(&self) -> bool {
        match self {
            Self::Approval(answer) | Self::Connect(answer) => answer.is_closed(),
            Self::Ask { answer, withdrawn, .. } => answer.is_closed() || withdrawn.is_cancelled(),
        }
    }
}

/// The questions one task's cell waits on, by their keys.
#[derive(Debug)]
pub(crate) struct Asked {
    /// The last key's number (keys are never reused in a task).
    counted: u64,
    waiting: BTreeMap<String, (InputRequest, Waiter)>,
    /// The client declared form elicitation (else an approval cannot be
    /// put to it).
    elicits: bool,
    /// The client declared URL-mode elicitation (else a connect question
    /// is answered with the link to open).
    elicits_url: bool,
    /// Whose code asks (named in an approval's question).
    identity: Option<Identity>,
}

impl Asked {
    pub(crate) fn new(elicits: bool, identity: Option<Identity>) -> Self {
        Self { counted: 0, waiting: BTreeMap::new(), elicits, elicits_url: false, identity }
    }

    /// The client declared URL-mode elicitation too.
    pub(crate) fn with_url(self, elicits_url: bool) -> Self {
        Self { elicits_url, ..self }
    }

    fn key(&mut self, kind: &str) -> String {
        self.counted += 1;
        format!("{kind}-{}", self.counted)
    }

    /// Nothing waits for the client.
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// How many questions wait for the client.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// The entries of `inputRequests`, as the task shows them.
    pub(crate) fn requests(&self) -> InputRequests {
        self.waiting.iter().map(|(key, (request, _))| (key.clone(), request.clone())).collect()
    }

    /// Put an approval to the client (one whose rule has no approvers in
    /// the console); refused at once, saying why, when the client declared
    /// no form elicitation (as outside tasks). True when it was added.
    pub(crate) fn approval(&mut self, pending: Pending, link: Option<&str>) -> bool {
        if !self.elicits {
            let reason = "the MCP client did not declare support for (form) elicitation".to_string();
            let _ = pending.answer.send(ApprovalReply::Unavailable { reason });
            return false;
        }
        let question = approval::question_linked(&pending.request, self.identity.as_ref(), link);
        let key = self.key("approval");
        self.waiting
            .insert(key, (InputRequest::Elicitation(ElicitRequest::new(question)), Waiter::Approval(pending.answer)));
        true
    }

    /// Put a connect question to the client (`link`: the console's connect
    /// page of its flow); answered at once with the link to open when the
    /// client declared no URL elicitation or there is no link. True when
    /// it was added.
    pub(crate) fn connect(&mut self, pending: Pending, link: Option<&str>) -> bool {
        let Some(ask) = pending.request.connect.clone() else { return self.approval(pending, link) };
        let (true, Some(link)) = (self.elicits_url, link) else {
            let why = "the MCP client did not declare URL-mode elicitation, so it cannot be asked to open the link";
            let _ = pending.answer.send(crate::connect::unavailable(&ask, link, why));
            return false;
        };
        let question = crate::connect::question(&pending.request, &ask, link, self.identity.as_ref());
        let key = self.key("connect");
        self.waiting
            .insert(key, (InputRequest::Elicitation(ElicitRequest::new(question)), Waiter::Connect(pending.answer)));
        true
    }

    /// Put a wrapped server's question to the client. True when it was
    /// added (a question that cannot be written as an input request is
    /// refused).
    pub(crate) fn server(&mut self, pending: PendingAsk) -> bool {
        let PendingAsk { ask, answer, withdrawn } = pending;
        let Some(request) = questions::input_request(&ask) else {
            let message = format!("{}: the question cannot be put to the client as written", ask.ask.method());
            let _ = answer.send(FromClient::Refused { message, code: Some(NOT_ASKABLE) });
            return false;
        };
        let key = self.key("ask");
        self.waiting.insert(key, (request, Waiter::Ask { ask, answer, withdrawn }));
        true
    }

    /// Hand the client's answers to the questions they answer; the keys
    /// answered (answers under other keys are ignored).
    pub(crate) fn deliver(&mut self, answers: &InputResponses) -> Vec<String> {
        let mut done = Vec::new();
        for (key, value) in answers {
            let Some((_, waiter)) = self.waiting.remove(key) else { continue };
            match waiter {
                Waiter::Approval(answer) => {
                    let _ = answer.send(approval::answer_of_value(Some(value)));
                }
                Waiter::Connect(answer) => {
                    let _ = answer.send(crate::connect::answer_of_value(Some(value)));
                }
                Waiter::Ask { ask, answer, .. } => {
                    let _ = answer.send(questions::answer_of_value(&ask, Some(value)));
                }
            }
            done.push(key.clone());
        }
        done
    }

    /// Drop the questions nobody waits for any more (timed out, withdrawn
    /// by their server); the keys dropped.
    pub(crate) fn prune(&mut self) -> Vec<String> {
        let lapsed: Vec<String> =
            self.waiting.iter().filter(|(_, (_, waiter))| waiter.lapsed()).map(|(key, _)| key.clone()).collect();
        for key in &lapsed {
            self.waiting.remove(key);
        }
        lapsed
    }
}

/// The task a driver drives: its owner's scope, its id, its cell.
#[derive(Debug, Clone)]
pub(crate) struct Driven {
    pub scope: String,
    pub id: String,
    pub cell: String,
    /// The status last told the creating session's client
    /// (`notifications/tasks`), so only a change is told.
    pub told: std::sync::Arc<std::sync::Mutex<Option<rmcp::model::TaskStatus>>>,
}

impl Frontend {
    /// Write the questions the task's cell waits on into its record (the
    /// task says `input_required` while any waits); `taken`: the keys whose
    /// answers were handed on.
    pub(super) async fn write_questions(&self, task: &Driven, asked: &Asked, taken: &[String]) {
        match self.shared.tasks.ask(&task.scope, &task.id, asked.requests(), taken).await {
            Ok(record) => self.tell_status(task, record.task).await,
            Err(e) => tracing::warn!(task = %task.id, error = %e, "a task's questions could not be written"),
        }
    }

    /// Read the task's record for the client's answers (`tasks/update`
    /// through any replica) and hand them on; drop the questions nobody
    /// waits for any more; write the task again if anything changed.
    pub(super) async fn take_answers(&self, task: &Driven, asked: &mut Asked) {
        let mut taken = match self.shared.tasks.get(&task.scope, &task.id).await {
            Ok(record) if !record.answers.is_empty() => asked.deliver(&record.answers),
            Ok(_) => Vec::new(),
            Err(e) => {
                tracing::debug!(task = %task.id, error = %e, "a task's answers could not be read");
                Vec::new()
            }
        };
        let lapsed = asked.prune();
        if !lapsed.is_empty() {
            tracing::info!(task = %task.id, questions = ?lapsed, "questions of a task lapsed (timed out or withdrawn)");
        }
        if !taken.is_empty() {
            tracing::info!(task = %task.id, answered = ?taken, "a task's client answered its questions");
        }
        if !taken.is_empty() || !lapsed.is_empty() {
            taken.extend(lapsed);
            self.write_questions(task, asked, &taken).await;
        }
    }

    /// The console's page of an approval, when this process serves the
    /// console.
    pub(super) fn task_console_link(&self, request: &code_mode_proto::ApprovalRequest) -> Option<String> {
        request.console.as_ref().and_then(|ask| crate::console::approval_link(&self.shared, &ask.id))
    }
}

/// The status message's part about the questions that wait.
pub(crate) fn waiting_text(asked: &Asked) -> Option<String> {
    match asked.len() {
        0 => None,
        1 => Some("1 question waits for the client's answer (inputRequests; answer with tasks/update)".into()),
        n => Some(format!("{n} questions wait for the client's answer (inputRequests; answer with tasks/update)")),
    }
}

#[cfg(test)]
mod tests {
    use code_mode_proto::{ApprovalRequest, AskKind};
    use serde_json::json;

    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            session: "s".into(),
            cell_id: "c".into(),
            server: "files".into(),
            tool: "delete_file".into(),
            arguments: "{}".into(),
            rule: "/tools/delete_file".into(),
            timeout_ms: 60_000,
            console: None,
            connect: None,
        }
    }

    #[test]
    fn keys_stay_unique_over_a_tasks_life_and_only_asked_keys_are_answered() {
        let mut asked = Asked::new(true, None);
        let (answer, mut first) = oneshot::channel();
        assert!(asked.approval(Pending { request: request(), answer }, None));
        let keys: Vec<String> = asked.requests().into_keys().collect();
        assert_eq!(keys, ["approval-1"]);
        let mut answers = InputResponses::new();
        answers.insert("approval-9".into(), json!({"action": "accept", "content": {}}));
        answers.insert("approval-1".into(), json!({"action": "decline"}));
        assert_eq!(asked.deliver(&answers), ["approval-1"], "an unknown key is ignored");
        assert_eq!(first.try_recv().unwrap(), ApprovalReply::Declined);
        let (answer, _second) = oneshot::channel();
        let ask = ServerAsk {
            id: None,
            call_id: None,
            server: "notes".into(),
            ask: AskKind::Elicitation,
            params: json!({"mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}),
            timeout_ms: 1000,
        };
        assert!(asked.server(PendingAsk { ask, answer, withdrawn: CancellationToken::new() }));
        assert_eq!(asked.requests().into_keys().collect::<Vec<_>>(), ["ask-2"], "a new key, never a used one");
    }

    #[test]
    fn a_question_nobody_waits_for_leaves_and_a_client_without_elicitation_is_not_asked() {
        let mut asked = Asked::new(true, None);
        let (answer, gone) = oneshot::channel();
        asked.approval(Pending { request: request(), answer }, None);
        drop(gone);
        assert_eq!(asked.prune(), ["approval-1"]);
        assert!(asked.is_empty());
        let mut mute = Asked::new(false, None);
        let (answer, mut reply) = oneshot::channel();
        assert!(!mute.approval(Pending { request: request(), answer }, None));
        assert!(matches!(reply.try_recv(), Ok(ApprovalReply::Unavailable { .. })));
    }

    #[test]
    fn a_connect_question_goes_to_a_task_as_a_url_elicitation_and_a_url_accept_means_opened() {
        let connect = || ApprovalRequest {
            connect: Some(code_mode_proto::ConnectAsk { flow: "f-1".into(), server: "notes".into() }),
            ..request()
        };
        let link = "https://mcp.example.com/console/connect/f-1";
        let mut asked = Asked::new(true, None).with_url(true);
        let (answer, mut reply) = oneshot::channel();
        assert!(asked.connect(Pending { request: connect(), answer }, Some(link)));
        let requests = serde_json::to_value(asked.requests()).unwrap();
        assert_eq!(requests["connect-1"]["params"]["mode"], "url", "{requests}");
        assert_eq!(requests["connect-1"]["params"]["url"], link, "{requests}");
        assert_eq!(requests["connect-1"]["params"]["elicitationId"], "f-1", "{requests}");
        let mut answers = InputResponses::new();
        answers.insert("connect-1".into(), json!({"action": "accept"}));
        assert_eq!(asked.deliver(&answers), ["connect-1"]);
        assert_eq!(reply.try_recv().unwrap(), ApprovalReply::Approved);
        // A client without URL mode gets the link and what to do.
        let mut form_only = Asked::new(true, None);
        let (answer, mut reply) = oneshot::channel();
        assert!(!form_only.connect(Pending { request: connect(), answer }, Some(link)));
        match reply.try_recv().unwrap() {
            ApprovalReply::Unavailable { reason } => assert!(reason.contains(&format!("open {link}")), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}
