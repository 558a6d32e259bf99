//! Where a session's approval questions go: the subscription's handler asks
//! the actor where (the `run_python` request running the cell, the local
//! asker, or nobody) and waits for the answer itself, at most the
//! question's timeout, so the actor never waits on a person.

use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{ApprovalReply, ApprovalRequest};
use tokio::sync::{mpsc, oneshot};

use crate::approval::{LocalAsker, Pending};

/// Where an approval question goes.
pub(super) enum Route {
    /// The request running the cell.
    Cell(mpsc::Sender<Pending>),
    /// Whoever answers outside MCP requests.
    Local(Arc<dyn LocalAsker>),
    /// Nobody.
    Nobody,
}

pub(super) struct RouteRequest {
    pub(super) cell_id: String,
    pub(super) reply: oneshot::Sender<Route>,
}

/// Route one approval question and wait for its answer, at most the
/// question's timeout. Runs in the subscription's handler, never in the
/// actor.
pub(super) async fn approve(routes: &mpsc::Sender<RouteRequest>, request: ApprovalRequest) -> ApprovalReply {
    let timeout = Duration::from_millis(request.timeout_ms);
    let (reply, route) = oneshot::channel();
    let asked = RouteRequest { cell_id: request.cell_id.clone(), reply };
    let route = match routes.send(asked).await {
        Ok(()) => route.await.unwrap_or(Route::Nobody),
        Err(_) => return ApprovalReply::Unavailable { reason: "the client session has ended".into() },
    };
    match route {
        Route::Cell(cell) => {
            let (answer, wait) = oneshot::channel();
            let asked = async {
                if cell.send(Pending { request, answer }).await.is_err() {
                    return ApprovalReply::Unavailable { reason: "the cell has ended".into() };
                }
                wait.await.unwrap_or_else(|_| ApprovalReply::Unavailable {
                    reason: "the run_python request ended before the person answered".into(),
                })
            };
            tokio::time::timeout(timeout, asked).await.unwrap_or(ApprovalReply::TimedOut)
        }
        Route::Local(local) => {
            tokio::time::timeout(timeout, local.ask(request)).await.unwrap_or(ApprovalReply::TimedOut)
        }
        Route::Nobody => ApprovalReply::Unavailable {
            reason: "the cell does not run on an MCP request of this session, so there is nobody to ask".into(),
        },
    }
}
