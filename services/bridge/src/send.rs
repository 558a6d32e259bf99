//! The outbound send: one checked request of a call to a wrapped server,
//! over the session it belongs on (a client's own, a stateless client's
//! shared one of the 2026-07-28 revision, else the server's shared
//! session; see [`crate::upstream`]), noted in flight there so that the
//! server's progress and questions find the call, within the call's
//! timeout and cancelled at the server when the client cancels.

use std::time::Duration;

use code_mode_proto::ClientLink;
use rmcp::service::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use crate::relay::{Flight, Owner};
use crate::server::CallError;
use crate::upstream::wants_own;

impl crate::Bridge {
    /// Send one checked request of `call` to server `index`: over the
    /// client's own session when its client can be asked or listens (see
    /// the module doc), else the shared one; noted in flight on that
    /// session (its progress and questions find the call), within
    /// `timeout`, cancelled at the server when `cancel` fires. The result
    /// as the server sent it, as JSON.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send(
        &self,
        index: usize,
        call: &code_mode_proto::ToolCall,
        mut params: serde_json::Value,
        timeout: Duration,
        cancel: CancellationToken,
        direct: bool,
        retry: Option<&code_mode_proto::Retry>,
    ) -> Result<serde_json::Value, CallError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let server = &self.current().servers[index].clone();
        let asker = call.asker.clone().unwrap_or_else(|| call.session.clone());
        // A stateless client's direct request goes to a server that speaks
        // that revision too in it: the server's own questions then come
        // back as its input-required result (code, whose questions the
        // frontend asks, always goes through a relaying session).
        // A server that acts as each caller (token exchange) is only ever
        // reached over a session of the caller's own, with the caller's
        // token: checked first, so a caller without one is refused saying
        // why before any session opens.
        let per_identity = server.per_identity_auth().is_some();
        if let Some(auth) = server.per_identity_auth() {
            let Some(identity) = call.identity.as_deref() else {
                return Err(CallError::NoAccount(format!(
                    "{} acts upstream as each caller (token exchange), and this call has no authenticated caller",
                    server.name()
                )));
            };
            auth.for_identity(identity).token().await.map_err(|e| CallError::NoAccount(e.to_string()))?;
        }
        let stateless_link = call.link.as_ref().filter(|l| l.stateless && direct && !per_identity);
        let stateless = match stateless_link {
            Some(_) => self.inner.upstreams.stateless(index, server).await,
            None => None,
        };
        let mut options = rmcp::service::PeerRequestOptions::no_options();
        if let (Some(link), Some(_)) = (stateless_link, &stateless) {
            options = options.with_meta(request_meta(link));
            if let (Some(retry), serde_json::Value::Object(map)) = (retry, &mut params) {
                if let Some(state) = &retry.request_state {
                    map.insert("requestState".into(), serde_json::Value::String(state.clone()));
                }
                if !retry.input_responses.is_null() {
                    map.insert("inputResponses".into(), retry.input_responses.clone());
                }
            }
        } else if let Some(link) = call.link.as_ref().filter(|l| l.tasks && direct) {
            // A client of the tasks extension: the server may make a task
            // of its call, and answers its tasks/* requests (the extension
            // declared per request, SEP-2575).
            options = options.with_meta(request_meta(link));
        }
        let own_needed = stateless.is_none()
            && (per_identity
                || wants_own(call.link.as_ref())
                || matches!(
                    call.target,
                    code_mode_proto::Target::Subscribe(_) | code_mode_proto::Target::Unsubscribe(_)
                ));
        let own = match (stateless, own_needed) {
            (Some(stateless), _) => Some(stateless),
            (None, true) => {
                let owner = Owner {
                    asker: asker.clone(),
                    session: call.session.clone(),
                    identity: call.identity.clone(),
                    link: call.link.clone().unwrap_or_default(),
                };
                self.inner.upstreams.get(index, server, &owner).await?
            }
            (None, false) => None,
        };
        let own_session = own.is_some();
        let (peer, flights) = match own {
            Some(own) => {
                let logging = server.offering().logging;
                own.follow_level(call.link.as_ref().and_then(|l| l.log_level.as_deref()), logging).await;
                (own.peer, own.flights)
            }
            // Never another identity's session, nor the shared one.
            None if per_identity => {
                return Err(CallError::NoAccount(format!(
                    "{}: every place for a session of a caller's own is busy; call again shortly",
                    server.name()
                )));
            }
            None => server.shared()?,
        };
        // A cell's tool call to a server of the tasks extension declares it:
        // a task the server makes of it is waited for here
        // ([`crate::cell_tasks`]).
        let cell_task = (!direct
            && matches!(call.target, code_mode_proto::Target::Tool(_))
            && crate::cell_tasks::offers_tasks(&peer))
        .then(|| request_meta(&crate::cell_tasks::cell_link(call.link.as_ref(), own_session)));
        if let Some(meta) = &cell_task {
            options = options.with_meta(meta.clone());
        }
        let is_tool_call = matches!(call.target, code_mode_proto::Target::Tool(_));
        let progress = call.link.as_ref().is_some_and(|l| l.progress);
        let mut listed_again = false;
        let (result, flight_guard) = loop {
            let request: rmcp::model::ClientRequest =
                serde_json::from_value(serde_json::json!({"method": call.target.method(), "params": params.clone()}))
                    .map_err(|_| CallError::Service(rmcp::service::ServiceError::UnexpectedResponse))?;
            // Noted as starting before the request goes out: the server
            // may ask its question before the call learns the request's
            // id and token, and the question then waits for the call.
            let starting = flights.starting();
            let handle =
                peer.send_cancellable_request(request, same_options(&options)).await.map_err(CallError::Service)?;
            let token = match serde_json::to_value(&handle.progress_token) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(_) => String::new(),
            };
            let flight =
                Flight { call_id: call.cell_id.clone(), request_id: handle.id.clone(), asker: asker.clone(), progress };
            let in_flight = starting.enter(token, flight);
            let id = handle.id.clone();
            let peer_for_cancel = handle.peer.clone();
            let response = handle.await_response();
            tokio::pin!(response);
            // A second send has what is left of the call's window.
            let window = match listed_again {
                true => deadline.saturating_duration_since(tokio::time::Instant::now()),
                false => timeout,
            };
            let result = tokio::select! {
                result = &mut response => result.map_err(CallError::Service),
                _ = tokio::time::sleep(window) => {
                    cancel_at_server(&peer_for_cancel, id, "the gateway's call timeout passed").await;
                    return Err(CallError::Timeout(timeout));
                }
                _ = cancel.cancelled() => {
                    cancel_at_server(&peer_for_cancel, id, "the client cancelled the request").await;
                    return Err(CallError::Service(rmcp::service::ServiceError::Cancelled {
                        reason: Some("cancelled by the client".into()),
                    }));
                }
            };
            // A server of the 2026-07-28 revision refuses a tool call whose
            // `Mcp-Param-*` headers are missing (-32020). rmcp's HTTP client
            // adds them from the schemas it kept of the last tool listing, and
            // it keeps none when that listing's answer came at the end of an
            // event stream; the server ran nothing, so list again (which keeps
            // them) and send once more.
            if let Err(CallError::Service(rmcp::service::ServiceError::McpError(e))) = &result
                && e.code == rmcp::model::ErrorCode::HEADER_MISMATCH
                && is_tool_call
                && !listed_again
            {
                listed_again = true;
                tracing::info!(server = %server.name(), error = %e.message, "a tool call refused for its headers: the tools are listed again and the call sent once more");
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if tokio::time::timeout(left, peer.list_all_tools()).await.is_ok_and(|listed| listed.is_ok()) {
                    continue;
                }
            }
            break (result, in_flight);
        };
        let _in_flight = flight_guard;
        let result = result?;
        if progress || own_session {
            // The notes the server sent before its result go first.
            let arrivals = flights.arrivals();
            arrivals.settled(arrivals.last()).await;
        }
        let result = serde_json::to_value(&result)
            .map_err(|_| CallError::Service(rmcp::service::ServiceError::UnexpectedResponse))?;
        match cell_task {
            Some(meta) if result.get("resultType").and_then(serde_json::Value::as_str) == Some("task") => {
                let task =
                    crate::cell_tasks::CellTask { peer: &peer, meta, server: index, call, deadline, timeout, cancel };
                self.await_cell_task(task, &result).await
            }
            _ => Ok(result),
        }
    }
}

/// A copy of `options` for a request sent once more (rmcp's options are
/// not `Clone`).
fn same_options(options: &rmcp::service::PeerRequestOptions) -> rmcp::service::PeerRequestOptions {
    let mut copy = rmcp::service::PeerRequestOptions::no_options();
    copy.timeout = options.timeout;
    copy.meta = options.meta.clone();
    copy.reset_timeout_on_progress = options.reset_timeout_on_progress;
    copy.max_total_timeout = options.max_total_timeout;
    copy
}

/// The `_meta` of a stateless client's request to a server of that
/// revision: the client's capabilities and log level (its protocol
/// version and identity are the gateway's, set by the session).
fn request_meta(link: &ClientLink) -> rmcp::model::RequestMetaObject {
    let mut meta = rmcp::model::RequestMetaObject::default();
    let mut caps = serde_json::Map::new();
    if link.sampling {
        caps.insert("sampling".into(), serde_json::json!({}));
    }
    if link.roots {
        caps.insert("roots".into(), serde_json::json!({}));
    }
    if link.elicitation || link.elicitation_url {
        let mut modes = serde_json::Map::new();
        if link.elicitation {
            modes.insert("form".into(), serde_json::json!({}));
        }
        if link.elicitation_url {
            modes.insert("url".into(), serde_json::json!({}));
        }
        caps.insert("elicitation".into(), serde_json::Value::Object(modes));
    }
    if link.tasks {
        caps.insert("extensions".into(), serde_json::json!({rmcp::model::TASKS_EXTENSION_ID: {}}));
    }
    if let Ok(caps) = serde_json::from_value(serde_json::Value::Object(caps)) {
        meta.set_client_capabilities(caps);
    }
    #[allow(deprecated)] // Logging is deprecated from 2026-07-28 on; clients still send levels.
    if let Some(level) = link.log_level.as_deref()
        && let Ok(level) = serde_json::from_value::<rmcp::model::LoggingLevel>(serde_json::Value::String(level.into()))
    {
        meta.set_log_level(level);
    }
    meta
}

/// Tell the server that the request `id` is cancelled.
async fn cancel_at_server(peer: &Peer<RoleClient>, id: rmcp::model::RequestId, reason: &str) {
    let notification = serde_json::json!({
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason},
    });
    let Ok(notification) = serde_json::from_value::<rmcp::model::ClientNotification>(notification) else { return };
    if let Err(e) = peer.send_notification(notification).await {
        tracing::debug!(error = %e, "could not tell the server that a request was cancelled");
    }
}
