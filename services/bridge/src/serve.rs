//! The bridge on the bus: catalog requests, tool calls from cells, direct
//! calls and session ends, each in the `bridge` queue group; and what a
//! session's end forgets.

use code_mode_core::bus::{Bus, BusError};
use code_mode_proto::{self as proto, CatalogRequest, DirectCall, ToolCall, queue_groups, subjects};
use tokio_util::sync::CancellationToken;

use crate::check::DIRECT_CALLS;
use crate::error::SessionEndError;
use crate::{Bridge, policy, private, wire};

impl Bridge {
    /// Forget an ended client session's state: its private-data taint and
    /// its `grant` rate-limit counters under every server's policy (`global`
    /// counters stay). Returns how many entries were there. The `global`
    /// pseudo-session and ids that are no session's are refused.
    ///
    /// A stateless scope is refused too: it is no one client session, and
    /// ends only after `--stateless-idle` without a call (see [`scope`]).
    pub async fn end_session(&self, session: &str) -> Result<u32, SessionEndError> {
        if session == policy::GLOBAL_SESSION
            || !subjects::is_session_id(session)
            || subjects::is_stateless_scope(session)
        {
            return Err(SessionEndError::NotASession { session: session.chars().take(80).collect() });
        }
        let removed = self.forget_state(session).await?;
        let closed = self.inner.upstreams.close_for(session);
        tracing::info!(%session, removed, own_sessions = closed, "client session ended: its state is forgotten");
        Ok(removed)
    }

    /// The client of `session` said its roots changed: tell the server of
    /// each of its own sessions at this bridge, which may then ask
    /// `roots/list` again. Returns how many were told (none where the
    /// client has no own session here: a server on the shared session
    /// never asks a client for roots).
    pub async fn roots_changed(&self, session: &str) -> u32 {
        if !subjects::is_session_id(session) {
            return 0;
        }
        let told = self.inner.upstreams.roots_changed(session).await;
        tracing::debug!(%session, told, "a client's roots changed");
        told
    }

    /// Delete every entry the bridge keeps under `session` (or a stateless
    /// scope's generation): the taint, `grant` counters, the direct-call
    /// count. Returns how many were there.
    pub(crate) async fn forget_state(&self, session: &str) -> Result<u32, SessionEndError> {
        let current = self.current();
        let mut names = vec![private::TAINT.to_string(), DIRECT_CALLS.to_string()];
        for applied in current.policies.iter().flatten() {
            names.extend(applied.policy.session_keys());
        }
        names.sort_unstable();
        names.dedup();
        let store = &self.inner.rebuild.state;
        let mut removed = 0;
        for name in &names {
            let there = store.get(session, name).await.map_err(SessionEndError::State)?.is_some();
            if there {
                store.delete(session, name).await.map_err(SessionEndError::State)?;
                removed += 1;
                if name == private::TAINT {
                    code_mode_telemetry::session_taint(false);
                }
            }
        }
        self.inner.reloads.forget(session);
        Ok(removed)
    }

    /// Answer catalog requests and tool calls on the bus until `cancel`.
    pub async fn serve(
        &self,
        bus: &Bus,
        cancel: CancellationToken,
    ) -> Result<Vec<tokio::task::JoinHandle<()>>, BusError> {
        // Approvals are asked of the client sessions on this bus.
        let _ = self.inner.outbound.set(bus.clone());
        let me = self.clone();
        let catalog = bus
            .serve(subjects::CATALOG_GET, queue_groups::BRIDGE, cancel.clone(), move |request: CatalogRequest| {
                let message = me.catalog_reply(&request);
                async move { Ok(message) }
            })
            .await?;
        let me = self.clone();
        let calls = bus
            .serve(subjects::TOOL_CALL, queue_groups::BRIDGE, cancel.clone(), move |call: ToolCall| {
                let me = me.clone();
                async move { Ok(me.call(&call).await) }
            })
            .await?;
        let me = self.clone();
        let direct = bus
            .serve(subjects::TOOL_DIRECT, queue_groups::BRIDGE, cancel.clone(), move |call: DirectCall| {
                let me = me.clone();
                async move { Ok(me.call_direct(&call).await) }
            })
            .await?;
        let me = self.clone();
        // Every bridge hears each cancel (a queue group of its own): only
        // the one running the call has it.
        let own_group = format!("{}.{}", queue_groups::BRIDGE, uuid::Uuid::new_v4().simple());
        let cancels = bus
            .serve(subjects::CANCEL, &own_group, cancel.clone(), move |request: proto::CancelCall| {
                let found = me.cancel_call(&request.call_id);
                async move { Ok(proto::CallCancelled { found }) }
            })
            .await?;
        let me = self.clone();
        // Likewise a client's changed roots: every bridge holding one of
        // that client's own sessions tells its server.
        let roots = bus
            .serve(subjects::ROOTS_CHANGED, &own_group, cancel.clone(), move |changed: proto::RootsChanged| {
                let me = me.clone();
                async move { Ok(proto::RootsTold { told: me.roots_changed(&changed.session).await }) }
            })
            .await?;
        let me = self.clone();
        let ends = bus
            .serve(subjects::SESSION_END, queue_groups::BRIDGE, cancel.clone(), move |end: proto::SessionEnd| {
                let me = me.clone();
                async move {
                    match me.end_session(&end.session).await {
                        Ok(removed) => Ok(proto::SessionEnded { removed }),
                        Err(e) => {
                            tracing::warn!(error = %e, "could not forget an ended session");
                            Err(wire::service_error(&e))
                        }
                    }
                }
            })
            .await?;
        let me = self.clone();
        let console = bus
            .serve(subjects::APPROVALS, queue_groups::BRIDGE, cancel.clone(), move |request: proto::ConsoleRequest| {
                let me = me.clone();
                async move { me.console(request).await }
            })
            .await?;
        let me = self.clone();
        let runners = bus
            .serve(subjects::RUNNER_STATUS, queue_groups::BRIDGE, cancel.clone(), move |status: proto::RunnerStatus| {
                let me = me.clone();
                async move {
                    if let Err(e) = me.runner_status(status).await {
                        tracing::debug!(error = %e, "a runner's status could not be kept");
                    }
                    Ok(proto::StatusNoted {})
                }
            })
            .await?;
        let me = self.clone();
        let accounts = bus
            .serve(subjects::ACCOUNTS, queue_groups::BRIDGE, cancel.clone(), move |request: proto::AccountsRequest| {
                let me = me.clone();
                async move { Ok(me.accounts(request).await) }
            })
            .await?;
        let me = self.clone();
        let meaning = bus
            .serve(subjects::SEARCH_MEANING, queue_groups::BRIDGE, cancel.clone(), move |ask: proto::MeaningAsk| {
                let me = me.clone();
                async move { Ok(me.meaning(&ask).await) }
            })
            .await?;
        Ok(vec![catalog, calls, direct, cancels, roots, ends, console, runners, accounts, meaning])
    }

    /// Cancel the direct call `call_id`, or every call of the cell
    /// `call_id`, running here (each request at its server is cancelled
    /// with `notifications/cancelled`, a question one waits on is
    /// withdrawn); true when some ran. A call of that id arriving later is
    /// refused without going out (see `flights`).
    pub fn cancel_call(&self, call_id: &str) -> bool {
        let found = self.inner.in_flight.cancel(call_id);
        if found {
            tracing::info!(call = %call_id, "the client cancelled a request: cancelling its calls at their servers");
        }
        found
    }
}
