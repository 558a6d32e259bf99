//! How the bridge starts: its servers first (each with a shared session
//! whose handler reaches the bridge only through the [`Upward`] channel),
//! then the catalog from their tools, then the bridge's own tasks (the
//! refresher, the reaper of clients' own sessions, the server of the
//! upcalls), each on the bridge's tracker and ended by its token. A start
//! that fails midway closes what it started.

use std::sync::Arc;

use code_mode_audit::Durability;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::current::{Current, Rebuild, tools_record};
use crate::relay::{Relay, Upward};
use crate::scope::Scopes;
use crate::server::ServerHandle;
use crate::upstream::Upstreams;
use crate::{Bridge, BridgeConfig, BridgeError, Closer, Inner, WrappedServer, server};

impl Bridge {
    /// Start every wrapped server and build the catalog. If one server fails
    /// to start, the ones already started are closed before the error returns.
    /// Tool names get the `<server>__` prefix when there are several servers,
    /// or always with [`BridgeConfig::prefixed`]. Cancelling `cancel` stops
    /// the servers and the bridge's tasks; then await [`Closer::closed`].
    pub async fn start(config: BridgeConfig, cancel: CancellationToken) -> Result<(Bridge, Closer), BridgeError> {
        let prefixed = config.prefixed_names();
        let servers_cancel = cancel.child_token();
        let (upward, upcalls) = Upward::channel();
        let tasks = TaskTracker::new();
        let mut handles = Vec::new();
        let mut actors = Vec::new();
        let mut listed = Vec::new();
        let mut tokens = Vec::new();
        for (index, wrapped) in config.servers.iter().enumerate() {
            let relay = Relay::shared(index, &wrapped.spec.name, upward.clone());
            // A token of its own, so that a reload can close it alone.
            let token = servers_cancel.child_token();
            match server::start_relaying(&wrapped.spec, relay, token.clone()).await {
                Ok((handle, tools, actor)) => {
                    listed.push(Arc::new(tools));
                    handles.push(handle);
                    actors.push(actor);
                    tokens.push(token);
                }
                Err(e) => {
                    close_started(&servers_cancel, handles, actors).await;
                    return Err(e);
                }
            }
        }
        let rebuild = Rebuild {
            prefixed,
            limits: config.catalog,
            state: config.state.clone(),
            offer_denied: config.policy_options.offer_denied,
            stateless_idle: config.limits.stateless_idle,
            shapes: crate::shapes::Shapes::tracked(Some(config.state.clone()), tasks.clone()),
            learned: Default::default(),
        };
        // What earlier runs learned of the results, before the first stubs.
        let known = config.servers.iter().zip(&listed).flat_map(|(wrapped, tools)| {
            tools.iter().map(|t| (wrapped.spec.name.clone(), t.name.to_string())).collect::<Vec<_>>()
        });
        rebuild.shapes.load(known.collect::<Vec<_>>()).await;
        let offerings: Vec<_> = handles.iter().map(ServerHandle::offering).collect();
        let wrapped: Vec<Option<WrappedServer>> = config.servers.iter().cloned().map(Some).collect();
        let names: Vec<String> = config.servers.iter().map(|w| w.spec.name.clone()).collect();
        let built = match rebuild.build(&wrapped, &names, &listed, &offerings, false) {
            Ok(built) => built,
            Err(e) => {
                close_started(&servers_cancel, handles, actors).await;
                return Err(e);
            }
        };
        if built.rule.is_some() {
            let private: Vec<&str> = built.catalog.private_tools().collect();
            tracing::info!(?private, store = config.state.backend_kind(), "private-data rule on");
        }
        tracing::info!(tools = built.catalog.tools().len(), left_out = built.catalog.left_out().len(), "bridge ready");
        for (wrapped, applied) in config.servers.iter().zip(&built.policies) {
            if let Some(applied) = applied {
                tracing::info!(server = %wrapped.spec.name, policy = applied.policy.source(), sha256 = %applied.sha256, "policy on");
            }
        }
        if let Some(audit) = &config.policy_options.audit {
            for (handle, tools) in handles.iter().zip(&listed) {
                if let Err(e) = audit.append(tools_record(handle.name(), tools), Durability::Written).await {
                    close_started(&servers_cancel, handles, actors).await;
                    return Err(BridgeError::Audit(e));
                }
            }
        }
        let current = Current::new(1, built, Arc::new(handles), Arc::new(wrapped));
        let audit_for_closer = config.policy_options.audit.clone();
        let upstreams = Arc::new(Upstreams::new(upward.clone(), servers_cancel.clone()));
        let own_sessions = upstreams.tasks();
        let reloads = crate::reload::Reloads::new(servers_cancel.clone(), upward, tokens);
        let stop = servers_cancel.child_token();
        let added = reloads.added_tasks();
        let bridge = Bridge::first_handle(Inner {
            current: std::sync::RwLock::new(Arc::new(current)),
            limits: config.limits,
            rebuild,
            audit: config.policy_options.audit.clone(),
            outbound: std::sync::OnceLock::new(),
            inputs: std::sync::OnceLock::new(),
            meaning: std::sync::OnceLock::new(),
            scopes: Scopes::new(config.state.clone(), config.limits.stateless_idle),
            upstreams: upstreams.clone(),
            in_flight: Default::default(),
            wrapped_tasks: crate::wrapped_tasks::WrappedTasks::new(config.state.clone()),
            reloads,
            runners: Default::default(),
            tasks: tasks.clone(),
            stop: stop.clone(),
        });
        // Each ends when the servers' token fires or the last handle is
        // dropped; the closer waits for them.
        tasks.spawn(crate::questions::serve(bridge.for_task(), upcalls, stop.clone()));
        tasks.spawn(crate::current::refresher(bridge.for_task(), stop.clone()));
        tasks.spawn(crate::upstream::reaper(upstreams, stop));
        Ok((bridge, Closer { actors, added, own_sessions, tasks, audit: audit_for_closer }))
    }
}

/// Close the servers a start that failed midway had started: cancel them,
/// drop their handles and wait for their actors (no audit sink yet).
async fn close_started(
    cancel: &CancellationToken,
    handles: Vec<ServerHandle>,
    actors: Vec<tokio::task::JoinHandle<()>>,
) {
    cancel.cancel();
    drop(handles);
    Closer {
        actors,
        added: Default::default(),
        own_sessions: Default::default(),
        tasks: Default::default(),
        audit: None,
    }
    .closed()
    .await;
}
