//! MCP log notifications (`logging/setLevel`, `notifications/message`): the
//! frontend's notable events of one client session, told to that session's
//! client at or above the level it chose.
//!
//! The session actor owns the level and the client ([`Notices`], the
//! sending side of two `watch` channels); a [`Notifier`] is a read-only view
//! of both, cheap to clone, held by the session's handle (so an MCP request
//! can tell of an approval it asks) and by each of its cell tasks (so a
//! cell can tell that it failed or was stopped). Nothing is sent until the
//! client sets a level, and a notifier only ever reaches the client of its
//! own session: another session's events never travel here.
//!
//! An event is a [`Notice`]: its level, and a JSON object with an `event`
//! name and a `message` for a person, plus the fields that event has (the
//! limit, the tool, the rule). Events never hold a token, a tool's
//! arguments or what the code printed.
//!
//! Sending never waits on the client inside the actor: a notifier sends
//! from the task that saw the event (the actor's own events from a task of
//! its side `JoinSet`), bounded by [`SEND_TIMEOUT`]; a client that cannot
//! take it loses that notification only (logged at debug).
//!
//! The logging capability is deprecated from MCP 2026-07-28 on (SEP-2577)
//! and rmcp marks its types so; clients of 2025-11-25 and older use it, so
//! this module allows the deprecation. A 2026-07-28 client sends its level
//! in each request's `_meta` instead: the request sets it on its session
//! (for a stateless request over HTTP, the session object of that request
//! alone).

#![allow(deprecated)]

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use serde_json::{Value, json};
use tokio::sync::watch;

/// The `logger` of every notification.
pub const LOGGER: &str = "code-mode";

/// How long sending one notification may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// The severity of an MCP level, for comparing (RFC 5424's order).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// One notable event of a session.
#[derive(Debug, Clone)]
pub(crate) struct Notice {
    level: LoggingLevel,
    data: Value,
}

impl Notice {
    fn new(level: LoggingLevel, event: &str, message: String, mut fields: Value) -> Self {
        if let Value::Object(fields) = &mut fields {
            fields.insert("event".into(), Value::String(event.into()));
            fields.insert("message".into(), Value::String(message));
        }
        Self { level, data: fields }
    }

    /// A cell refused because the session runs its most cells.
    pub fn session_busy(max: usize) -> Self {
        Self::new(
            LoggingLevel::Warning,
            "cell_refused",
            format!("a run_python call was refused: this session already runs {max} cell(s) at once"),
            json!({"limit": "--max-cells-per-session", "max": max}),
        )
    }

    /// A cell started.
    pub fn cell_started(cell: &str) -> Self {
        Self::new(LoggingLevel::Debug, "cell_started", "a cell started".into(), json!({"cell": cell}))
    }

    /// A cell ended with a report.
    pub fn cell_ended(cell: &str, report: &code_mode_proto::CellReport) -> Self {
        if report.stopped {
            let why = report.error.as_deref().unwrap_or("it was stopped");
            // The last line says why; earlier lines may hold the code's output.
            let why = why.lines().last().unwrap_or(why).chars().take(300).collect::<String>();
            return Self::new(
                LoggingLevel::Warning,
                "cell_stopped",
                format!("a cell was stopped before it ended on its own: {why}"),
                json!({"cell": cell}),
            );
        }
        Self::new(
            LoggingLevel::Debug,
            "cell_ended",
            "a cell ended".into(),
            json!({"cell": cell, "error": report.error.is_some()}),
        )
    }

    /// A cell failed without a report (no capacity, a runner lost, ...).
    pub fn cell_failed(cell: &str, error: &crate::FrontendError) -> Self {
        use crate::FrontendError as E;
        let (level, reason) = match error {
            E::NoCapacity { .. } => (LoggingLevel::Error, "no_capacity"),
            E::RunnerLost { .. } | E::RunnerSilent { .. } => (LoggingLevel::Error, "runner_lost"),
            E::NoRunner { .. } | E::Bus(code_mode_core::bus::BusError::NoResponders { .. }) => {
                (LoggingLevel::Error, "no_runner")
            }
            E::SessionBusy { .. } => (LoggingLevel::Warning, "session_busy"),
            E::CodeTooLarge { .. } => (LoggingLevel::Warning, "code_too_large"),
            E::SessionEnded => (LoggingLevel::Info, "session_ended"),
            _ => (LoggingLevel::Error, "failed"),
        };
        Self::new(level, "cell_failed", format!("a cell failed: {error}"), json!({"cell": cell, "reason": reason}))
    }

    /// The bridge asks whether a call may go out.
    pub fn approval_asked(request: &code_mode_proto::ApprovalRequest, how: &str) -> Self {
        Self::new(
            LoggingLevel::Notice,
            "approval_asked",
            format!(
                "the code wants to call {} of {}, which needs approval ({}): {how}",
                request.tool, request.server, request.rule
            ),
            json!({"tool": request.tool, "server": request.server, "rule": request.rule}),
        )
    }

    /// The bridge asks whether a call may go out, and the question waits
    /// in the web console (`link`: its page, when this process serves the
    /// console) for the rule's approvers.
    pub fn approval_in_console(
        request: &code_mode_proto::ApprovalRequest,
        ask: &code_mode_proto::ConsoleAsk,
        link: Option<&str>,
    ) -> Self {
        let place = match link {
            Some(link) => format!("it waits in the web console: {link}"),
            None => "it waits in the web console of the frontends serving HTTP".to_string(),
        };
        Self::new(
            LoggingLevel::Notice,
            "approval_asked",
            format!(
                "the code wants to call {} of {}, which needs the approval of {} ({}): {place}",
                request.tool,
                request.server,
                crate::approval::approvers(ask),
                request.rule
            ),
            json!({"tool": request.tool, "server": request.server, "rule": request.rule, "approvers": ask.approvers,
                   "question": ask.id, "link": link}),
        )
    }

    /// A call needing approval is refused because nobody can be asked.
    pub fn approval_unavailable(request: &code_mode_proto::ApprovalRequest, reason: &str) -> Self {
        Self::new(
            LoggingLevel::Warning,
            "approval_refused",
            format!("a call to {} needing approval was refused: {reason}", request.tool),
            json!({"tool": request.tool, "server": request.server, "rule": request.rule}),
        )
    }

    /// The wrapped tools changed.
    pub fn tools_changed() -> Self {
        Self::new(LoggingLevel::Info, "tools_changed", "the wrapped tools changed".into(), json!({}))
    }

    /// The level.
    #[cfg(test)]
    pub fn level(&self) -> LoggingLevel {
        self.level
    }

    /// The data sent.
    #[cfg(test)]
    pub fn data(&self) -> &Value {
        &self.data
    }
}

/// The sending side of a session's log: owned by its session actor.
#[derive(Debug)]
pub(crate) struct Notices {
    level: watch::Sender<Option<LoggingLevel>>,
    client: watch::Sender<Option<Peer<RoleServer>>>,
}

impl Notices {
    /// Nothing set yet: no level, no client.
    pub fn new() -> Self {
        Self { level: watch::Sender::new(None), client: watch::Sender::new(None) }
    }

    /// A view for the session's handle and its tasks.
    pub fn notifier(&self) -> Notifier {
        Notifier { level: self.level.subscribe(), client: self.client.subscribe() }
    }

    /// The client chose `level`.
    pub fn set_level(&self, level: LoggingLevel) {
        self.level.send_replace(Some(level));
    }

    /// The session's client (the first one known stays).
    pub fn know_client(&self, peer: &Peer<RoleServer>) {
        self.client.send_if_modified(|held| {
            if held.is_some() {
                return false;
            }
            *held = Some(peer.clone());
            true
        });
    }
}

/// A read-only view of a session's log level and client, to tell it of an
/// event.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    level: watch::Receiver<Option<LoggingLevel>>,
    client: watch::Receiver<Option<Peer<RoleServer>>>,
}

impl Notifier {
    /// The session's client, once known.
    pub fn client(&self) -> Option<Peer<RoleServer>> {
        self.client.borrow().clone()
    }

    /// The level the client chose, if it chose one.
    pub fn level(&self) -> Option<LoggingLevel> {
        *self.level.borrow()
    }

    /// Pass a wrapped server's log message to the client, when it is at or
    /// above the level the client chose (a client that chose none gets
    /// none). Its logger names the server, so the client can tell whose it
    /// is.
    pub async fn tell_server_log(&self, server: &str, level: &str, logger: Option<&str>, data: Value) {
        let Ok(level) = serde_json::from_value::<LoggingLevel>(Value::String(level.to_string())) else { return };
        let Some(chosen) = *self.level.borrow() else { return };
        if rank(level) < rank(chosen) {
            return;
        }
        let Some(peer) = self.client() else { return };
        let logger = match logger {
            Some(logger) => format!("{server}/{logger}"),
            None => server.to_string(),
        };
        let param = LoggingMessageNotificationParam::new(level, data).with_logger(logger);
        match tokio::time::timeout(SEND_TIMEOUT, peer.notify_logging_message(param)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "a server's log message could not be passed on"),
            Err(_) => tracing::debug!("a server's log message was not taken in time"),
        }
    }

    /// Tell the client that a resource it subscribed to was updated.
    pub async fn tell_resource_updated(&self, uri: &str) {
        let Some(peer) = self.client() else { return };
        let Ok(param) = serde_json::from_value(serde_json::json!({"uri": uri})) else { return };
        match tokio::time::timeout(SEND_TIMEOUT, peer.notify_resource_updated(param)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "a resource update could not be passed on"),
            Err(_) => tracing::debug!("a resource update was not taken in time"),
        }
    }

    /// Tell the client a wrapped server's status note of a task its call
    /// created (`notifications/tasks`).
    pub async fn tell_task_status(&self, task: &serde_json::Value) {
        let Some(peer) = self.client() else { return };
        let note = serde_json::json!({"method": "notifications/tasks", "params": task});
        let Ok(note) = serde_json::from_value::<rmcp::model::ServerNotification>(note) else {
            tracing::debug!("a task's status note is not one: dropped");
            return;
        };
        Self::send_task_note(peer, note).await;
    }

    /// Tell the client that its `run_python` task's status changed
    /// (`notifications/tasks`, the task as `tasks/get` would answer it
    /// now). A session whose client is gone (or a stateless request's,
    /// which has none left to hear) loses the note: such a client polls.
    pub async fn tell_own_task(&self, task: rmcp::model::DetailedTask) {
        let Some(peer) = self.client() else { return };
        let params = rmcp::model::TaskStatusNotificationParams::new(task);
        let note = rmcp::model::ServerNotification::TaskStatusNotification(rmcp::model::Notification::new(params));
        Self::send_task_note(peer, note).await;
    }

    /// Send a task's status note, bounded by [`SEND_TIMEOUT`].
    async fn send_task_note(peer: Peer<RoleServer>, note: rmcp::model::ServerNotification) {
        match tokio::time::timeout(SEND_TIMEOUT, peer.send_notification(note)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "a task's status note could not be passed on"),
            Err(_) => tracing::debug!("a task's status note was not taken in time"),
        }
    }

    /// The client to tell, when it asked for `notice`'s level or a lower one.
    fn wants(&self, notice: &Notice) -> Option<Peer<RoleServer>> {
        let chosen = (*self.level.borrow())?;
        (rank(notice.level) >= rank(chosen)).then(|| self.client.borrow().clone()).flatten()
    }

    /// Tell the client of `notice` if its level is at or above the one it
    /// chose; waits at most [`SEND_TIMEOUT`].
    pub async fn tell(&self, notice: Notice) {
        let Some(peer) = self.wants(&notice) else { return };
        let param = LoggingMessageNotificationParam::new(notice.level, notice.data).with_logger(LOGGER);
        match tokio::time::timeout(SEND_TIMEOUT, peer.notify_logging_message(param)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "a log notification could not be sent"),
            Err(_) => tracing::debug!("a log notification was not taken in time"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_in_the_order_of_rfc_5424() {
        let all = [
            LoggingLevel::Debug,
            LoggingLevel::Info,
            LoggingLevel::Notice,
            LoggingLevel::Warning,
            LoggingLevel::Error,
            LoggingLevel::Critical,
            LoggingLevel::Alert,
            LoggingLevel::Emergency,
        ];
        let ranks: Vec<u8> = all.iter().map(|l| rank(*l)).collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
    }

    #[test]
    fn a_notice_names_its_event_and_says_why_without_the_codes_output() {
        let report = code_mode_proto::CellReport {
            stdout: "secret output".into(),
            error: Some("Traceback ...\nsecret line\nthe run passed its deadline of 2 s".into()),
            stopped: true,
            ..code_mode_proto::CellReport::default()
        };
        let notice = Notice::cell_ended("c1", &report);
        assert_eq!(rank(notice.level()), rank(LoggingLevel::Warning));
        assert_eq!(notice.data()["event"], "cell_stopped");
        let text = notice.data().to_string();
        assert!(text.contains("deadline") && !text.contains("secret"), "{text}");
        let busy = Notice::session_busy(1);
        assert_eq!(busy.data()["limit"], "--max-cells-per-session");
    }
}
