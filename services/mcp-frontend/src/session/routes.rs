//! Where a session's questions go: the subscriptions' handlers ask the
//! actor where (the MCP request running the cell or call, the local asker,
//! the session's client, or nobody) and wait for the answer themselves, at
//! most the question's timeout, so the actor never waits on a person.
//!
//! Two kinds arrive: the bridge's approval questions
//! ([`code_mode_proto::subjects::approval`]), and what a wrapped server
//! sends the client through the bridge ([`code_mode_proto::subjects::client`]):
//! its questions, answered like approvals, and its notes (a call's
//! progress goes to that call's request; a log message and a resource
//! update to the session's client, a log message only at or above the level
//! the client chose).

use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{ApprovalReply, ApprovalRequest, FromClient, Note, ToClient};
use rmcp::RoleServer;
use rmcp::service::Peer;
use tokio::sync::{mpsc, oneshot};

use crate::approval::{LocalAsker, Pending};
use crate::notices::Notifier;
use crate::questions::{PendingAsk, Question, Withdrawals, ask_client};

/// Where a question goes.
pub(super) enum Route {
    /// The request running the cell or call.
    Cell(mpsc::Sender<Question>),
    /// Whoever answers outside MCP requests.
    Local(Arc<dyn LocalAsker>),
    /// Nobody.
    Nobody,
}

pub(super) struct RouteRequest {
    pub(super) cell_id: String,
    pub(super) reply: oneshot::Sender<Route>,
}

/// Ask the actor where questions of `cell_id` go.
async fn route_of(routes: &mpsc::Sender<RouteRequest>, cell_id: &str) -> Option<Route> {
    let (reply, route) = oneshot::channel();
    routes.send(RouteRequest { cell_id: cell_id.to_string(), reply }).await.ok()?;
    Some(route.await.unwrap_or(Route::Nobody))
}

/// Route one approval question and wait for its answer, at most the
/// question's timeout. Runs in the subscription's handler, never in the
/// actor.
pub(super) async fn approve(routes: &mpsc::Sender<RouteRequest>, request: ApprovalRequest) -> ApprovalReply {
    let timeout = Duration::from_millis(request.timeout_ms);
    let Some(route) = route_of(routes, &request.cell_id).await else {
        if request.console.is_some() {
            return ApprovalReply::Unavailable { reason: crate::approval::IN_CONSOLE.into() };
        }
        return ApprovalReply::Unavailable { reason: "the client session has ended".into() };
    };
    match route {
        Route::Cell(cell) => {
            let (answer, wait) = oneshot::channel();
            let asked = async {
                if cell.send(Question::Approval(Pending { request, answer })).await.is_err() {
                    return ApprovalReply::Unavailable { reason: "the cell has ended".into() };
                }
                wait.await.unwrap_or_else(|_| ApprovalReply::Unavailable {
                    reason: "the run_python request ended before the person answered".into(),
                })
            };
            tokio::time::timeout(timeout, asked).await.unwrap_or(ApprovalReply::TimedOut)
        }
        // A question that waits in the console and is not the client's:
        // only a request of the client can tell it where (the handler).
        Route::Local(_) | Route::Nobody if request.console.as_ref().is_some_and(|ask| !ask.ask_client) => {
            ApprovalReply::Unavailable { reason: crate::approval::IN_CONSOLE.into() }
        }
        Route::Local(local) => {
            tokio::time::timeout(timeout, local.ask(request)).await.unwrap_or(ApprovalReply::TimedOut)
        }
        Route::Nobody => ApprovalReply::Unavailable {
            reason: "the cell does not run on an MCP request of this session, so there is nobody to ask".into(),
        },
    }
}

/// Carry one message of a wrapped server to the client: a question to the
/// request of its call (else to the session's client, when it has one of
/// its own), a note where it belongs. Runs in the subscription's handler.
pub(super) async fn relay(
    routes: &mpsc::Sender<RouteRequest>,
    notifier: &Notifier,
    withdrawals: &Withdrawals,
    message: ToClient,
) -> FromClient {
    match message {
        ToClient::Withdraw(withdrawn) => {
            withdrawals.withdraw(&withdrawn.id);
            FromClient::Noted
        }
        ToClient::Ask(ask) => {
            let timeout = Duration::from_millis(ask.timeout_ms);
            let (withdrawn, _registered) = withdrawals.register(ask.id.as_deref());
            let route = match &ask.call_id {
                Some(call) => route_of(routes, call).await.unwrap_or(Route::Nobody),
                None => Route::Nobody,
            };
            match route {
                Route::Cell(cell) => {
                    let method = ask.ask.method();
                    let (answer, wait) = oneshot::channel();
                    let asked = async {
                        let pending = PendingAsk { ask, answer, withdrawn: withdrawn.clone() };
                        if cell.send(Question::Ask(pending)).await.is_err() {
                            return FromClient::Refused {
                                message: format!("{method}: the call has ended"),
                                code: None,
                            };
                        }
                        wait.await.unwrap_or_else(|_| FromClient::Refused {
                            message: format!("{method}: the request ended before the client answered"),
                            code: None,
                        })
                    };
                    tokio::time::timeout(timeout, asked).await.unwrap_or_else(|_| FromClient::Refused {
                        message: format!("{method}: the client did not answer within {} s", timeout.as_secs()),
                        code: None,
                    })
                }
                // Outside any of its requests only a client of a session
                // can be asked: one that made the initialize handshake. A
                // stateless (2026-07-28) client takes no requests, even
                // over a connection of its own, and is answered for.
                _ => match session_client(notifier) {
                    Some(peer) if peer.peer_info().is_none() => crate::questions::not_askable(&ask, None),
                    // Asked outside any request: only the server withdraws it.
                    Some(peer) => {
                        ask_client(&peer, &ask, timeout, &withdrawn, &tokio_util::sync::CancellationToken::new()).await
                    }
                    None => FromClient::Refused {
                        message: format!("{}: no request of the client is running to ask it on", ask.ask.method()),
                        code: None,
                    },
                },
            }
        }
        ToClient::Note(note) => {
            match &note.note {
                Note::Progress { .. } => {
                    if let Some(call) = &note.call_id
                        && let Some(Route::Cell(cell)) = route_of(routes, call).await
                    {
                        // A full queue drops the progress: it is only news.
                        let _ = cell.try_send(Question::Note(note));
                    }
                }
                Note::Log { level, logger, data } => {
                    notifier.tell_server_log(&note.server, level, logger.as_deref(), data.clone()).await;
                }
                Note::ResourceUpdated { uri } => notifier.tell_resource_updated(uri).await,
                Note::TaskStatus { task } => notifier.tell_task_status(task).await,
            }
            FromClient::Noted
        }
    }
}

/// The session's client, when it is a client of a session.
fn session_client(notifier: &Notifier) -> Option<Peer<RoleServer>> {
    notifier.client()
}
