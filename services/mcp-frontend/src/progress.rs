//! The progress a request's client hears of its cell: progress
//! notifications that only go up ([`ProgressSent`]), and the heartbeat a
//! long cell sends when its code says nothing, whose message
//! ([`heartbeat_message`]) also tells a task's poller how far its cell is.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

/// How long a running cell goes without a progress notification to a
/// client that asked for progress before it tells that client it still
/// runs.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);

/// The progress sent on one request so far.
#[derive(Debug, Default)]
pub(crate) struct ProgressSent {
    last: Option<f64>,
    /// The total of the last notification the code (or the server) sent.
    total: Option<f64>,
    /// The cell's code (or the server) reported progress: a heartbeat
    /// then keeps its numbers (see [`ProgressSent::beat`]).
    pub(crate) code_reported: bool,
}

impl ProgressSent {
    /// Send a progress notification with the request's token, unless it
    /// would not increase on the last one; true when it was sent.
    pub(crate) async fn send(
        &mut self,
        context: &RequestContext<RoleServer>,
        token: &rmcp::model::ProgressToken,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> bool {
        if self.last.is_some_and(|last| progress <= last) {
            return false;
        }
        self.last = Some(progress);
        self.total = total;
        let params =
            serde_json::json!({"progressToken": token, "progress": progress, "total": total, "message": message});
        if let Ok(params) = serde_json::from_value(params) {
            let _ = context.peer.notify_progress(params).await;
        }
        true
    }

    /// A heartbeat: the seconds run so far as the progress while the code
    /// has reported none; after it has, its own progress and total again,
    /// grown by the least a number can grow (MCP wants each notification's
    /// progress above the last), so a client's bar stays where the code
    /// put it while it hears that the cell still runs.
    pub(crate) async fn beat(
        &mut self,
        context: &RequestContext<RoleServer>,
        token: &rmcp::model::ProgressToken,
        running: f64,
        message: Option<String>,
    ) {
        match (self.code_reported, self.last) {
            (true, Some(last)) => {
                let total = self.total;
                self.send(context, token, last.next_up(), total, message).await;
            }
            _ => {
                self.send(context, token, running, None, message).await;
            }
        }
    }
}

/// What a cell's heartbeat says: how long it ran, the time it was held
/// while a person decided on a call left out (its container was paused and
/// its deadline stopped meanwhile).
pub(crate) fn heartbeat_message(elapsed: Duration, held: Option<code_mode_proto::HeldTime>) -> String {
    let held_secs = held.map_or(0, |h| h.held_ms / 1000);
    let ran = elapsed.as_secs().saturating_sub(held_secs);
    match held {
        Some(h) if h.paused => {
            format!(
                "the cell is held while a person decides on one of its calls: held for {held_secs} s, run for {ran} s"
            )
        }
        Some(_) if held_secs > 0 => {
            format!("the cell has run for {ran} s (and was held {held_secs} s while a person decided)")
        }
        _ => format!("the cell has run for {ran} s"),
    }
}
