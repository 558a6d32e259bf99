//! Changing the bridge's config while it runs: [`Bridge::reload`] rereads
//! the policy files and the `mcpServers` file (SIGHUP in `serve` and
//! `bridge`) and applies them to the next call, or keeps the running config
//! and says why.
//!
//! What reloads: each server's policy (a file is reread, an inline one
//! comes with its config file), `allow`, `private`, and the set of servers
//! of an `mcpServers` file (an added entry is started, a removed one closed).
//! The new catalog is built the way the refresher builds one when a
//! server's tools change ([`crate::current`]) and swapped in with the next
//! version, so frontends see it on their next catalog request and tell
//! their clients (`notifications/tools/list_changed`).
//!
//! What does not reload, refused naming the file, server and key: how a
//! server is started or reached (`command`, `args`, `env`, `url`,
//! `headers`, `type`: remove the entry in one reload and add it under
//! another name in the next, or restart), and removing (or renaming) a
//! server whose private tool tainted a client session this bridge knows is
//! still open (that session would stay confined by a taint naming a tool
//! that is gone; end the session first). Options given as flags (limits,
//! names with or without the `<server>__` prefix, the state store, the
//! audit sink) are not reread at all.
//!
//! A reload is all or nothing: the new files are read, the added servers
//! started and the new catalog built before anything changes; any failure
//! closes what it started and keeps the running config (and catalog),
//! logs the error and counts it (`codemode_config_reloads_total{result}`,
//! `codemode_config_last_reload_success`). An applied reload writes a
//! `reload` audit record naming each policy's SHA-256.
//!
//! Nothing of a session lives in the config: taints, rate-limit counters
//! and the approval board are in the session-state store, a call already
//! being judged (one waiting for a person's approval too) finishes under
//! the catalog it started with, and kept containers belong to the
//! sandbox-runner. Server indexes never change meaning: a removed server's
//! slot stays, closed ([`crate::current::Current::servers`]).
//!
//! This module owns the reload's serialization (one rebuild at a time, the
//! refresher's too), each server's closing token, the tasks of servers a
//! reload started, and which open sessions this bridge saw tainted by which
//! server.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use code_mode_audit::Durability;
use code_mode_audit::record::{self as audit_record, PolicyInForce};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ConfigError;
use crate::current::Current;
use crate::relay::{Relay, Upward};
use crate::server::{ServerHandle, Transport};
use crate::{Bridge, BridgeError, WrappedServer, server};

/// Most sessions remembered as tainted by a server (beyond it, removing a
/// server is refused while any taint is remembered).
const MAX_REMEMBERED_TAINTS: usize = 65_536;

/// What a reload rereads.
#[derive(Debug, Clone, PartialEq)]
pub enum ReloadSource {
    /// The `mcpServers` file the bridge was started with (`--config`):
    /// servers, `allow`, `private`, policies.
    Config(PathBuf),
    /// The servers given by flags stay; their policy files are reread.
    Policies,
}

impl ReloadSource {
    fn describe(&self) -> String {
        match self {
            ReloadSource::Config(file) => file.display().to_string(),
            ReloadSource::Policies => "policies".to_string(),
        }
    }
}

/// An applied reload.
#[derive(Debug, Clone, PartialEq)]
pub struct Reloaded {
    /// The catalog's version from now on.
    pub version: u64,
    /// Servers started.
    pub added: Vec<String>,
    /// Servers closed.
    pub removed: Vec<String>,
    /// Each policy in force: server, source, SHA-256.
    pub policies: Vec<(String, String, String)>,
}

/// Why a reload kept the running config.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The `mcpServers` file cannot be read or is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The new settings make no valid catalog (an invalid policy, an
    /// `allow` or `private` naming a tool the server does not list, a name
    /// clash).
    #[error("{0}")]
    Catalog(BridgeError),
    /// A change that cannot apply while running.
    #[error("{at}server {server:?}: {what}: {why}")]
    Refused {
        /// The config file and ": ", or nothing (flags).
        at: String,
        /// The server.
        server: String,
        /// `key "command"`, `removed`.
        what: String,
        /// Why, and what to do instead.
        why: String,
    },
    /// A server the reload adds did not start.
    #[error("{at}server {server:?}: the added server did not start: {error}")]
    Start {
        /// The config file and ": ".
        at: String,
        /// The server.
        server: String,
        /// Why.
        error: BridgeError,
    },
    /// The reload could not be recorded in the audit sink.
    #[error("the reload could not be recorded: {0}")]
    Audit(code_mode_audit::AuditError),
}

impl ReloadError {
    /// The `result` label it is counted under.
    pub fn result(&self) -> &'static str {
        match self {
            ReloadError::Config(_) | ReloadError::Catalog(_) => "invalid",
            ReloadError::Refused { .. } => "refused",
            ReloadError::Start { .. } | ReloadError::Audit(_) => "failed",
        }
    }
}

/// The reload's state in the bridge (see the module doc).
#[derive(Debug)]
pub(crate) struct Reloads {
    /// Held by each rebuild of the catalog and by each reload.
    one: tokio::sync::Mutex<()>,
    /// Told after a reload swapped servers in or out: the refresher
    /// follows the new set.
    pub(crate) reloaded: Arc<Notify>,
    /// The parent of every server's token.
    servers_cancel: CancellationToken,
    /// Handed to each added server's handler: its way up to the bridge.
    upward: Upward,
    /// Each server's token, by index.
    tokens: std::sync::Mutex<Vec<CancellationToken>>,
    /// The actors of servers a reload started.
    added: TaskTracker,
    /// Open sessions (state keys) this bridge saw tainted, and the server
    /// whose private tool tainted each first.
    tainted: std::sync::Mutex<HashMap<String, String>>,
}

impl Reloads {
    pub(crate) fn new(servers_cancel: CancellationToken, upward: Upward, tokens: Vec<CancellationToken>) -> Self {
        Self {
            one: Default::default(),
            reloaded: Default::default(),
            servers_cancel,
            upward,
            tokens: std::sync::Mutex::new(tokens),
            added: TaskTracker::new(),
            tainted: Default::default(),
        }
    }

    /// The tracker of added servers' actors (the closer waits for them).
    pub(crate) fn added_tasks(&self) -> TaskTracker {
        self.added.clone()
    }

    /// Wait for the one rebuild at a time.
    pub(crate) async fn one_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.one.lock().await
    }

    /// A private call of `server`'s went out in the session whose state
    /// lives under `key`.
    pub(crate) fn tainted_by(&self, key: &str, server: &str) {
        let mut tainted = code_mode_core::sync::lock(&self.tainted);
        if tainted.len() < MAX_REMEMBERED_TAINTS && !tainted.contains_key(key) {
            tainted.insert(key.to_string(), server.to_string());
        }
    }

    /// The session under `key` ended: its taint is gone.
    pub(crate) fn forget(&self, key: &str) {
        code_mode_core::sync::lock(&self.tainted).remove(key);
    }

    /// How many open sessions this bridge saw tainted by `server` (all of
    /// them when the memory is full: it may have missed some).
    fn taints_from(&self, server: &str) -> usize {
        let tainted = code_mode_core::sync::lock(&self.tainted);
        if tainted.len() >= MAX_REMEMBERED_TAINTS {
            return tainted.len();
        }
        tainted.values().filter(|s| *s == server).count()
    }
}

/// The first key of how `old` is started that `new` changes, if any.
fn start_key_changed(old: &WrappedServer, new: &WrappedServer) -> Option<&'static str> {
    match (&old.spec.transport, &new.spec.transport) {
        (Transport::Stdio(a), Transport::Stdio(b)) => {
            if a.command != b.command {
                Some("command")
            } else if a.args != b.args {
                Some("args")
            } else if a.set_env != b.set_env || a.pass_env != b.pass_env {
                Some("env")
            } else {
                None
            }
        }
        (Transport::Http(a), Transport::Http(b)) => {
            if a.url != b.url {
                Some("url")
            } else if a.headers != b.headers {
                Some("headers")
            } else {
                None
            }
        }
        (Transport::Stdio(_), Transport::Http(_)) => Some("url"),
        (Transport::Http(_), Transport::Stdio(_)) => Some("command"),
    }
}

/// This bridge as the operations view names it: its host and process id.
fn this_bridge() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}:{}", host.trim(), std::process::id())
}

impl Bridge {
    /// Reread `source` and apply it (see the module doc): the new catalog's
    /// version and what changed, or why the running config stays. Each
    /// outcome is logged and counted.
    pub async fn reload(&self, source: &ReloadSource) -> Result<Reloaded, ReloadError> {
        let outcome = self.reload_from(source).await;
        match &outcome {
            Ok(done) => {
                tracing::info!(
                    source = %source.describe(),
                    version = done.version,
                    added = ?done.added,
                    removed = ?done.removed,
                    policies = ?done.policies.iter().map(|(s, _, h)| format!("{s} {h}")).collect::<Vec<_>>(),
                    "config reloaded: the next call is judged by it"
                );
                code_mode_telemetry::metrics::config_reload("ok");
            }
            Err(e) => {
                tracing::error!(source = %source.describe(), result = e.result(), error = %e, "config not reloaded: the running config stays");
                code_mode_telemetry::metrics::config_reload(e.result());
            }
        }
        // The web console's operators see it too, not only stderr and a
        // counter.
        let status = code_mode_proto::ReloadStatus {
            bridge: this_bridge(),
            at_ms: crate::board::now_ms(),
            result: match &outcome {
                Ok(_) => "ok".to_string(),
                Err(e) => e.result().to_string(),
            },
            source: source.describe(),
            error: outcome.as_ref().err().map(|e| crate::stubs::cut_chars(&e.to_string(), 2_000)),
        };
        if let Err(e) = self.note_reload(status).await {
            tracing::warn!(error = %e, "the reload's outcome could not be noted for the web console");
        }
        outcome
    }

    async fn reload_from(&self, source: &ReloadSource) -> Result<Reloaded, ReloadError> {
        let reloads = &self.inner.reloads;
        let _one = reloads.one_at_a_time().await;
        let held = self.current();
        let (wanted, at) = match source {
            ReloadSource::Config(file) => (crate::config::load(file)?, format!("{}: ", file.display())),
            ReloadSource::Policies => (held.wrapped.iter().flatten().cloned().collect(), String::new()),
        };
        // Which entries stay (by name), which go, which come.
        let mut wrapped: Vec<Option<WrappedServer>> = vec![None; held.servers.len()];
        let mut adding = Vec::new();
        for new in wanted {
            let found = held.wrapped.iter().position(|w| w.as_ref().is_some_and(|w| w.spec.name == new.spec.name));
            match found {
                Some(index) => {
                    if let Some(old) = &held.wrapped[index]
                        && let Some(key) = start_key_changed(old, &new)
                    {
                        return Err(ReloadError::Refused {
                            at,
                            server: new.spec.name.clone(),
                            what: format!("key {key:?}"),
                            why: "how a server is started or reached applies only at start: remove the entry in \
                                  one reload and add it under a new name in the next, or restart code-mode"
                                .to_string(),
                        });
                    }
                    wrapped[index] = Some(new);
                }
                None => adding.push(new),
            }
        }
        let removed: Vec<usize> =
            (0..held.servers.len()).filter(|i| held.wrapped[*i].is_some() && wrapped[*i].is_none()).collect();
        for &index in &removed {
            let name = held.servers[index].name();
            let sessions = reloads.taints_from(name);
            if sessions > 0 {
                return Err(ReloadError::Refused {
                    at,
                    server: name.to_string(),
                    what: "removed".to_string(),
                    why: format!(
                        "{sessions} open client session(s) hold a private-data taint from its tools; removed (or \
                         renamed) it would leave them confined by a taint naming a tool that is gone: keep it \
                         until those sessions end"
                    ),
                });
            }
        }
        // Start the added servers; any failure closes them again.
        let mut servers: Vec<ServerHandle> = held.servers.as_ref().clone();
        let mut started: Vec<(CancellationToken, tokio::task::JoinHandle<()>)> = Vec::new();
        let close_started = |started: Vec<(CancellationToken, tokio::task::JoinHandle<()>)>| {
            for (token, actor) in started {
                token.cancel();
                reloads.added.spawn(async move {
                    let _ = actor.await;
                });
            }
        };
        let mut added = Vec::new();
        for new in adding {
            let index = servers.len();
            let relay = Relay::shared(index, &new.spec.name, reloads.upward.clone());
            let token = reloads.servers_cancel.child_token();
            match server::start_relaying(&new.spec, relay, token.clone()).await {
                Ok((handle, _, actor)) => {
                    servers.push(handle);
                    started.push((token, actor));
                    added.push(new.spec.name.clone());
                    wrapped.push(Some(new));
                }
                Err(error) => {
                    close_started(started);
                    return Err(ReloadError::Start { at, server: new.spec.name.clone(), error });
                }
            }
        }
        let tools: Vec<_> = servers.iter().map(ServerHandle::tools).collect();
        let offerings: Vec<_> = servers.iter().map(ServerHandle::offering).collect();
        let names: Vec<String> = servers.iter().map(|s| s.name().to_string()).collect();
        let built = match self.inner.rebuild.build(&wrapped, &names, &tools, &offerings, held.rule.is_some()) {
            Ok(built) => built,
            Err(e) => {
                close_started(started);
                return Err(ReloadError::Catalog(e));
            }
        };
        let in_force: Vec<PolicyInForce> = built
            .policies
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                a.as_ref().map(|a| PolicyInForce {
                    server: names[i].clone(),
                    policy: a.policy.source().to_string(),
                    sha256: a.sha256.clone(),
                })
            })
            .collect();
        let version = held.version + 1;
        let removed_names: Vec<String> = removed.iter().map(|&i| names[i].clone()).collect();
        if let Some(audit) = &self.inner.audit {
            // Recorded before the new config judges a call; the added
            // servers' tools first, so a replay sees their categories.
            let mut records: Vec<audit_record::Body> = (held.servers.len()..servers.len())
                .map(|i| crate::current::tools_record(&names[i], &tools[i]))
                .collect();
            records.push(audit_record::Body::Reload(audit_record::Reload {
                source: source.describe(),
                version,
                added: added.clone(),
                removed: removed_names.clone(),
                policies: in_force.clone(),
            }));
            for record in records {
                if let Err(e) = audit.append(record, Durability::Written).await {
                    close_started(started);
                    return Err(ReloadError::Audit(e));
                }
            }
        }
        let current = Current::new(version, built, Arc::new(servers), Arc::new(wrapped));
        *code_mode_core::sync::write(&self.inner.current) = Arc::new(current);
        self.prepare_meaning();
        {
            let mut tokens = code_mode_core::sync::lock(&reloads.tokens);
            for (token, actor) in started {
                tokens.push(token);
                reloads.added.spawn(async move {
                    let _ = actor.await;
                });
            }
            for &index in &removed {
                if let Some(token) = tokens.get(index) {
                    token.cancel();
                }
                self.inner.upstreams.close_server(index);
            }
        }
        reloads.reloaded.notify_one();
        Ok(Reloaded {
            version,
            added,
            removed: removed_names,
            policies: in_force.into_iter().map(|p| (p.server, p.policy, p.sha256)).collect(),
        })
    }

    /// Reload from `source` on each SIGHUP this process gets, until
    /// `cancel` (or the bridge stops). Registered before it returns: from
    /// then on SIGHUP no longer ends the process.
    pub fn reload_on_hangup(&self, source: ReloadSource, cancel: CancellationToken) -> std::io::Result<()> {
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        code_mode_telemetry::metrics::config_reload_enabled();
        let bridge = self.for_task();
        let stop = self.inner.stop.clone();
        self.inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = stop.cancelled() => return,
                    signal = hangup.recv() => if signal.is_none() { return },
                }
                tracing::info!(source = %source.describe(), "SIGHUP: reloading the config");
                let _ = bridge.reload(&source).await;
            }
        });
        Ok(())
    }
}
