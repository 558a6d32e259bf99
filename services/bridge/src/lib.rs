//! The bridge: every tool call from a sandbox passes here before a wrapped
//! server sees it.
//!
//! It owns the wrapped servers (one actor each, [`server`]), the tool
//! [`catalog`] built from their `tools/list`, and the checks of
//! [`Bridge::call`]: the tool is kept, the run has calls left, the arguments
//! are an object within the size limit that the tool's schema accepts, and,
//! when some tools are private, the [`private`] data rule (judged last,
//! against the session-state store). A server with a [`policy`] has its
//! rules applied after the schema check and before the private rule, so a
//! call the policy refuses never taints and never reaches the server: a
//! denied tool is refused (and, unless [`PolicyOptions::offer_denied`], not
//! offered at all), the policy's argument schema must accept the arguments,
//! the tool's rate limits are counted in the same session-state store, and a
//! tool needing approval waits for the person's answer, asked through the
//! frontend of the call's client session ([`approval`]). Each policy
//! decision is audited and counted. Only then does the call go out, with a
//! timeout; the result comes back as a string (structured content as JSON,
//! else text) or is refused when too large. Refusals carry the bridge's own
//! short message; host faults only a type name.
//!
//! Over the bus it answers [`subjects::CATALOG_GET`],
//! [`subjects::TOOL_CALL`], [`subjects::TOOL_DIRECT`] and
//! [`subjects::SESSION_END`] in the `bridge` queue group, and asks approvals
//! on [`subjects::approval`] of the call's asker (the frontend session that
//! ran it; for a client session, the session itself).
//!
//! A call's state (taint, `grant` counters, direct-call count) lives under
//! its session, or for a stateless client under its identity's scope,
//! resolved to the scope's current generation when a check first needs it
//! ([`scope`]).
//!
//! The catalog follows the wrapped servers' tool lists: when a server's list
//! changes (`notifications/tools/list_changed`, or other tools after a
//! restart, see [`server`]) a refresher task rebuilds the whole catalog from
//! every server's current tools with the same allowlists, private labels and
//! prefixes, and swaps it in with a higher [`Bridge::catalog_version`]. A
//! call is checked against the catalog current when it arrives. A rebuild
//! that fails (a new name clash, a private label whose tool is gone) keeps
//! the old catalog and logs an error naming the problem: startup refuses such
//! a configuration, but a running bridge keeps serving what it had rather
//! than drop every tool. An allowlist is explicit, so a new tool that is not
//! on it stays out.

pub mod approval;
pub mod catalog;
pub mod config;
pub mod naming;
pub mod policy;
pub mod policy_check;
pub mod private;
pub mod replay;
pub mod schema;
pub mod scope;
pub mod server;
pub mod stubs;
pub mod wire;

// The cargo-fuzz targets' entry points: only with the `fuzzing` feature
// (the fuzz crate enables it) and in this crate's tests.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use code_mode_core::bus::{Bus, BusError};
use code_mode_core::defaults;
use code_mode_core::state::SessionStore;
use code_mode_proto::{
    self as proto, ApprovalReply, CatalogRequest, DirectCall, DirectReply, ToolCall, ToolReply, queue_groups, subjects,
};
use code_mode_telemetry::{ApprovalAnswer, Decision};
use rmcp::model::{CallToolResult, ContentBlock};
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use crate::policy::{
    Annotations, AuditDecision, CallSite, Policy, PolicyError, RateLimiter, RuleSource, ToolFacts, Verdict,
};
use crate::private::PrivateRule;
use crate::scope::Scopes;
use crate::server::{ServerHandle, ServerSpec};
use code_mode_audit::record::{self as audit_record, CallResult};
use code_mode_audit::{AuditSink, Durability};

/// Errors that stop the bridge from starting.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A wrapped server could not be started or initialized.
    #[error("wrapped server {server:?} ({command}) could not start: {reason}")]
    ServerStart {
        /// The server's name.
        server: String,
        /// Its command, or its URL for a remote server.
        command: String,
        /// Why.
        reason: String,
    },
    /// `--env NAME` names a variable this process does not have.
    #[error("--env {name}: {name} is not set in code-mode's environment")]
    EnvMissing {
        /// The server's name.
        server: String,
        /// The variable.
        name: String,
    },
    /// An allowlist names a tool the server does not list.
    #[error("{at}: the server lists no such tool (it lists: {listed})")]
    UnknownAllowed {
        /// Where the name was written ([`Origin::setting`]).
        at: String,
        /// The server's name.
        server: String,
        /// The name in the allowlist.
        name: String,
        /// What the server lists.
        listed: String,
    },
    /// `--private` names a tool the server does not list.
    #[error("{at}: the server lists no such tool (it lists: {listed})")]
    UnknownPrivate {
        /// Where the name was written ([`Origin::setting`]).
        at: String,
        /// The server's name.
        server: String,
        /// The name in `--private`.
        name: String,
        /// What the server lists.
        listed: String,
    },
    /// `--private` names a tool the catalog does not keep.
    #[error("{at}: {why}")]
    PrivateNotKept {
        /// Where the name was written ([`Origin::setting`]).
        at: String,
        /// The server's name.
        server: String,
        /// The name in `--private`.
        name: String,
        /// Why the tool is not kept.
        why: String,
    },
    /// A server's policy file cannot be used (the error names the file, the
    /// JSON path and the reason).
    #[error("{at}{error}")]
    Policy {
        /// Before the error: the config entry it belongs to, or nothing for
        /// `--policy` ([`Origin::server_prefix`]).
        at: String,
        /// The server's name.
        server: String,
        /// Why (boxed: it is large, and rare).
        error: Box<PolicyError>,
    },
    /// A session end named the `global` pseudo-session or an id no session has.
    #[error("{session:?} is not a client session: refused to forget its state")]
    NotASession {
        /// The id given (cut).
        session: String,
    },
    /// The audit sink could not be written at start.
    #[error("{0}")]
    Audit(code_mode_audit::AuditError),
    /// The session-state store failed.
    #[error("session state: {0}")]
    State(code_mode_core::state::StateError),
    /// Two kept tools would get the same Python name.
    #[error("tools {first:?} and {second:?} would both be called {python}: allow only one of them")]
    NameClash {
        /// The Python name.
        python: String,
        /// The first tool (`server: tool`).
        first: String,
        /// The second tool.
        second: String,
    },
}

/// Limits the bridge enforces on each call.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// Calls per run.
    pub max_calls: u32,
    /// Time per call.
    pub call_timeout: Duration,
    /// Largest arguments object, in bytes of JSON.
    pub max_arguments: usize,
    /// Largest result, in bytes.
    pub max_result: usize,
    /// Longest refusal message, in characters.
    pub max_message_chars: usize,
    /// How long a call a policy holds for approval waits for the answer.
    pub approval_timeout: Duration,
    /// How long an identity's stateless scope lasts without a call
    /// (`--stateless-idle`, see [`scope`]).
    pub stateless_idle: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            max_calls: defaults::MAX_CALLS,
            call_timeout: defaults::CALL_TIMEOUT,
            max_arguments: defaults::MAX_ARGUMENTS,
            max_result: defaults::MAX_RESULT,
            max_message_chars: defaults::MAX_MESSAGE_CHARS,
            approval_timeout: defaults::APPROVAL_TIMEOUT,
            stateless_idle: defaults::STATELESS_IDLE,
        }
    }
}

/// One wrapped server and what to keep of it.
#[derive(Debug, Clone)]
pub struct WrappedServer {
    /// How to start it.
    pub spec: ServerSpec,
    /// Tool names to keep; `None` keeps all.
    pub allow: Option<Vec<String>>,
    /// Tools that may see private data (server or Python names, each one a
    /// kept tool): after a call to one of them, a session may call only
    /// private tools.
    pub private: Vec<String>,
    /// The [`policy`] for its tools (named as the server lists them), from a
    /// file or written inline in the `--config` file; `None`: every kept tool
    /// may be called.
    pub policy: Option<PolicySource>,
    /// Where these settings were written, so that an error about them
    /// points there (a flag, or a key of a config entry).
    pub origin: Origin,
}

/// Where a wrapped server's settings were written: errors about a tool
/// label or a policy name the place the user wrote them, in the user's own
/// words (`--private read_file`, or the config file, entry and key).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Origin {
    /// Command-line flags for the one server after `--` (`--allow`,
    /// `--private`, `--policy`).
    #[default]
    Flags,
    /// An entry of an `mcpServers` config file.
    Entry {
        /// The config file.
        file: PathBuf,
        /// The entry's key: the server's name.
        entry: String,
    },
}

impl Origin {
    /// Where the setting `key` (as a config entry names it: `allow`,
    /// `private`) with the value `value` was written: `--allow add`, or
    /// `servers.json: server "fs": key "allow": "add"`.
    pub fn setting(&self, key: &str, value: &str) -> String {
        match self {
            Origin::Flags => format!("--{key} {value}"),
            Origin::Entry { file, entry } => format!("{}: server {entry:?}: key {key:?}: {value:?}", file.display()),
        }
    }

    /// What to put before an error that already names its own file (a
    /// policy's): nothing for flags (there is one server), the entry for a
    /// config file.
    pub fn server_prefix(&self) -> String {
        match self {
            Origin::Flags => String::new(),
            Origin::Entry { file, entry } => format!("{}: server {entry:?}: ", file.display()),
        }
    }
}

/// Where a server's [`policy`] comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySource {
    /// A policy file (`--policy FILE`, or a path in a `--config` entry).
    File(PathBuf),
    /// A policy object written in the `--config` file itself.
    Inline {
        /// The policy, in the policy file's shape.
        value: serde_json::Value,
        /// Where it was written, for errors: `<config file> mcpServers.<entry>.policy`.
        origin: String,
    },
}

/// The private labels of `wrapped`, with [`config::ALL_TOOLS`] (`"private":
/// true`) made into every tool it keeps: the allowlist, else every listed
/// tool whose schema can be checked.
fn every_private(wrapped: &WrappedServer, tools: &[rmcp::model::Tool], limits: &CatalogLimits) -> Vec<String> {
    if wrapped.private.iter().all(|p| p != config::ALL_TOOLS) {
        return wrapped.private.clone();
    }
    match &wrapped.allow {
        Some(allow) => allow.clone(),
        None => tools
            .iter()
            .map(ListedTool::from)
            .filter(|t| schema::ArgumentChecker::compile(&t.input_schema, limits.max_schema_depth).is_ok())
            .map(|t| t.name)
            .collect(),
    }
}

/// Everything the bridge needs to start.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The wrapped servers (names are prefixed when several, and always
    /// with [`Bridge::start_prefixed`]).
    pub servers: Vec<WrappedServer>,
    /// Per-call limits.
    pub limits: CallLimits,
    /// Catalog bounds.
    pub catalog: CatalogLimits,
    /// Where the private-data taint and the policies' rate-limit counters
    /// of each session live: in memory for one process, JetStream for the
    /// split deployment. Never touched when no tool is private and no
    /// policy has limits.
    pub state: SessionStore,
    /// What to do with the policies' decisions besides enforcing them.
    pub policy_options: PolicyOptions,
}

/// Options of the policies, shared by every server's policy.
#[derive(Debug, Clone, Default)]
pub struct PolicyOptions {
    /// The audit sink: every call becomes one `call` record, every wrapped
    /// server's tools one `tools` record (`None`: nowhere; each policy
    /// decision is still counted in `codemode_policy_decisions_total`).
    pub audit: Option<AuditSink>,
    /// Offer tools the policy denies outright (in the stubs, labelled
    /// `[denied: ...]`); by default they are left out of the catalog, and a
    /// call naming one is refused with the rule and reason all the same.
    pub offer_denied: bool,
}

/// A running bridge: a cheap handle.
#[derive(Clone, Debug)]
pub struct Bridge {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The current catalog; replaced whole by [`Bridge::refresh_catalog`].
    current: std::sync::RwLock<Arc<Current>>,
    servers: Vec<ServerHandle>,
    limits: CallLimits,
    /// What the catalog is rebuilt from, besides the servers' tools.
    rebuild: Rebuild,
    /// Where decisions are written.
    audit: Option<AuditSink>,
    /// The bus to ask a client session's frontend for approvals on (set by
    /// [`Bridge::serve`]; without it an approval cannot be asked for).
    approvals: std::sync::OnceLock<Bus>,
    /// Where each stateless scope's state lives now.
    scopes: Scopes,
}

/// One catalog and the private rule that goes with it.
#[derive(Debug)]
struct Current {
    catalog: Arc<Catalog>,
    /// Starts at 1; each successful rebuild adds 1.
    version: u64,
    /// The private-data rule, when some tool is private.
    rule: Option<PrivateRule>,
    /// Each server's policy, by server index.
    policies: Vec<Option<Applied>>,
    /// The catalog message, made on the first request for it.
    message: std::sync::OnceLock<proto::Catalog>,
    /// The same with each tool's definition for direct calls, made on the
    /// first request for it.
    direct_message: std::sync::OnceLock<proto::Catalog>,
}

impl Current {
    /// True when a policy holds some offered tool for approval.
    fn needs_approval(&self) -> bool {
        self.catalog.tools().iter().any(|t| {
            self.policies[t.server]
                .as_ref()
                .is_some_and(|a| matches!(a.policy.verdict(&t.mcp_name), Verdict::Approve { .. }))
        })
    }
}

/// A server's policy and the limiter counting its limits.
#[derive(Debug)]
struct Applied {
    policy: Arc<Policy>,
    limiter: RateLimiter,
}

/// What one build makes: the catalog, its private rule, each server's policy.
type Built = (Catalog, Option<PrivateRule>, Vec<Option<Applied>>);

/// The configuration a catalog is built with.
#[derive(Debug)]
struct Rebuild {
    servers: Vec<WrappedServer>,
    prefixed: bool,
    limits: CatalogLimits,
    state: SessionStore,
    /// Keep tools the policy denies outright in the catalog.
    offer_denied: bool,
    /// How long a stateless scope lasts (for the private rule's refusals).
    stateless_idle: Duration,
}

impl Rebuild {
    /// Build a catalog (and its private rule) from each server's tools,
    /// reading each server's policy against the tools it lists.
    fn build(&self, tools: &[Arc<Vec<rmcp::model::Tool>>]) -> Result<Built, BridgeError> {
        let mut listed = Vec::with_capacity(self.servers.len());
        let mut policies = Vec::with_capacity(self.servers.len());
        for (wrapped, tools) in self.servers.iter().zip(tools) {
            let applied = match &wrapped.policy {
                Some(source) => Some(self.load_policy(wrapped, source, tools)?),
                None => None,
            };
            let labels: HashMap<String, catalog::ToolLabel> = match &applied {
                Some(a) => tools
                    .iter()
                    .filter_map(|t| catalog::ToolLabel::of(&a.policy.verdict(&t.name)).map(|l| (t.name.to_string(), l)))
                    .collect(),
                None => HashMap::new(),
            };
            let withheld: HashMap<String, catalog::Denial> = match &applied {
                Some(a) if !self.offer_denied => tools
                    .iter()
                    .filter_map(|t| match a.policy.verdict(&t.name) {
                        Verdict::Deny { reason, rule } => Some((t.name.to_string(), catalog::Denial { rule, reason })),
                        _ => None,
                    })
                    .collect(),
                _ => HashMap::new(),
            };
            listed.push(ServerTools {
                server: wrapped.spec.name.clone(),
                prefixed: self.prefixed,
                tools: tools.iter().map(ListedTool::from).collect(),
                allow: wrapped.allow.clone(),
                private: every_private(wrapped, tools, &self.limits),
                origin: wrapped.origin.clone(),
                labels,
                withheld,
            });
            policies.push(applied);
        }
        let catalog = Catalog::build(&listed, &self.limits)?;
        let rule = catalog.has_private().then(|| {
            PrivateRule::new(self.state.clone(), catalog.private_tools()).with_stateless_idle(self.stateless_idle)
        });
        Ok((catalog, rule, policies))
    }

    /// Read `wrapped`'s policy (a file or inline) against every tool the
    /// server lists.
    fn load_policy(
        &self,
        wrapped: &WrappedServer,
        source: &PolicySource,
        tools: &[rmcp::model::Tool],
    ) -> Result<Applied, BridgeError> {
        let facts: Vec<ToolFacts> = tools
            .iter()
            .map(|t| ToolFacts {
                name: t.name.to_string(),
                annotations: t.annotations.as_ref().map(Annotations::from).unwrap_or_default(),
                // With prefixed names, a policy may name a tool as the code calls it.
                aliases: if self.prefixed {
                    vec![naming::python_name(&format!("{}__{}", wrapped.spec.name, t.name))]
                } else {
                    Vec::new()
                },
            })
            .collect();
        let policy = match source {
            PolicySource::File(path) => Policy::load(path, &facts),
            PolicySource::Inline { value, origin } => Policy::from_value(value, origin, &facts),
        };
        let policy = policy.map_err(|error| BridgeError::Policy {
            // An inline policy's errors name the config file and entry already.
            at: match source {
                PolicySource::File(_) => wrapped.origin.server_prefix(),
                PolicySource::Inline { .. } => String::new(),
            },
            server: wrapped.spec.name.clone(),
            error: Box::new(error),
        })?;
        let policy = Arc::new(policy);
        Ok(Applied { limiter: RateLimiter::new(policy.clone(), self.state.clone()), policy })
    }
}

/// The wrapped servers' owner tasks; await [`Closer::closed`] after
/// cancelling the bridge's token to know every child has stopped.
#[derive(Debug)]
pub struct Closer {
    actors: Vec<tokio::task::JoinHandle<()>>,
    audit: Option<AuditSink>,
}

impl Closer {
    /// Wait until every wrapped server has been closed, then close the
    /// audit sink (a last checkpoint, synced).
    pub async fn closed(self) {
        for a in self.actors {
            let _ = a.await;
        }
        if let Some(audit) = self.audit {
            audit.close().await;
        }
    }
}

impl Bridge {
    /// Start every wrapped server and build the catalog. If one server fails
    /// to start, the ones already started are closed before the error returns.
    /// Tool names get the `<server>__` prefix when there are several servers.
    pub async fn start(config: BridgeConfig, cancel: CancellationToken) -> Result<(Bridge, Closer), BridgeError> {
        let prefixed = config.servers.len() > 1;
        Self::start_with(config, cancel, prefixed).await
    }

    /// [`Bridge::start`], but every tool name gets the `<server>__` prefix,
    /// even with one server (`--config`: names do not change when a second
    /// server is added).
    pub async fn start_prefixed(
        config: BridgeConfig,
        cancel: CancellationToken,
    ) -> Result<(Bridge, Closer), BridgeError> {
        Self::start_with(config, cancel, true).await
    }

    async fn start_with(
        config: BridgeConfig,
        cancel: CancellationToken,
        prefixed: bool,
    ) -> Result<(Bridge, Closer), BridgeError> {
        let servers_cancel = cancel.child_token();
        let mut handles = Vec::new();
        let mut actors = Vec::new();
        let mut listed = Vec::new();
        for wrapped in &config.servers {
            match server::start(&wrapped.spec, servers_cancel.clone()).await {
                Ok((handle, tools, actor)) => {
                    listed.push(Arc::new(tools));
                    handles.push(handle);
                    actors.push(actor);
                }
                Err(e) => {
                    servers_cancel.cancel();
                    drop(handles);
                    Closer { actors, audit: None }.closed().await;
                    return Err(e);
                }
            }
        }
        let rebuild = Rebuild {
            servers: config.servers,
            prefixed,
            limits: config.catalog,
            state: config.state.clone(),
            offer_denied: config.policy_options.offer_denied,
            stateless_idle: config.limits.stateless_idle,
        };
        let (catalog, rule, policies) = match rebuild.build(&listed) {
            Ok(built) => built,
            Err(e) => {
                servers_cancel.cancel();
                drop(handles);
                Closer { actors, audit: None }.closed().await;
                return Err(e);
            }
        };
        if rule.is_some() {
            let private: Vec<&str> = catalog.private_tools().collect();
            tracing::info!(?private, store = config.state.backend_kind(), "private-data rule on");
        }
        tracing::info!(tools = catalog.tools().len(), left_out = catalog.left_out().len(), "bridge ready");
        let changes: Vec<_> = handles.iter().map(ServerHandle::tools_changes).collect();
        for (wrapped, applied) in rebuild.servers.iter().zip(&policies) {
            if let Some(applied) = applied {
                tracing::info!(server = %wrapped.spec.name, policy = applied.policy.source(), "policy on");
            }
        }
        if let Some(audit) = &config.policy_options.audit {
            for (handle, tools) in handles.iter().zip(&listed) {
                if let Err(e) = audit.append(tools_record(handle.name(), tools), Durability::Written).await {
                    servers_cancel.cancel();
                    drop(handles);
                    Closer { actors, audit: None }.closed().await;
                    return Err(BridgeError::Audit(e));
                }
            }
        }
        let current = Current {
            catalog: Arc::new(catalog),
            version: 1,
            rule,
            policies,
            message: Default::default(),
            direct_message: Default::default(),
        };
        let audit_for_closer = config.policy_options.audit.clone();
        let bridge = Bridge {
            inner: Arc::new(Inner {
                current: std::sync::RwLock::new(Arc::new(current)),
                servers: handles,
                limits: config.limits,
                rebuild,
                audit: config.policy_options.audit.clone(),
                approvals: std::sync::OnceLock::new(),
                scopes: Scopes::new(config.state.clone(), config.limits.stateless_idle),
            }),
        };
        actors.push(tokio::spawn(refresher(Arc::downgrade(&bridge.inner), changes, servers_cancel)));
        Ok((bridge, Closer { actors, audit: audit_for_closer }))
    }

    fn current(&self) -> Arc<Current> {
        code_mode_core::sync::read(&self.inner.current).clone()
    }

    /// Rebuild the catalog from every wrapped server's current tools and
    /// swap it in with the next version. On failure the current catalog
    /// stays and the error is returned (and logged).
    pub fn refresh_catalog(&self) -> Result<u64, BridgeError> {
        let tools: Vec<_> = self.inner.servers.iter().map(ServerHandle::tools).collect();
        let built = self.inner.rebuild.build(&tools);
        let mut current = code_mode_core::sync::write(&self.inner.current);
        match built {
            Ok((catalog, rule, policies)) => {
                if let Some(audit) = self.inner.audit.clone() {
                    let records: Vec<_> =
                        self.inner.servers.iter().zip(&tools).map(|(h, t)| tools_record(h.name(), t)).collect();
                    tokio::spawn(async move {
                        for record in records {
                            if let Err(e) = audit.append(record, Durability::Written).await {
                                tracing::error!(error = %e, "the changed tools could not be recorded");
                            }
                        }
                    });
                }
                let version = current.version + 1;
                tracing::info!(version, tools = catalog.tools().len(), "catalog refreshed");
                *current = Arc::new(Current {
                    catalog: Arc::new(catalog),
                    version,
                    rule,
                    policies,
                    message: Default::default(),
                    direct_message: Default::default(),
                });
                Ok(version)
            }
            Err(e) => {
                tracing::error!(error = %e, version = current.version, "the changed tools make no valid catalog: keeping the old one");
                Err(e)
            }
        }
    }

    /// The version of the current catalog: 1 at start, one more after each
    /// refresh.
    pub fn catalog_version(&self) -> u64 {
        self.current().version
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.current().catalog.clone()
    }

    /// The catalog as the frontend receives it.
    pub fn catalog_message(&self) -> proto::Catalog {
        let current = self.current();
        current.message.get_or_init(|| self.make_message(&current, false)).clone()
    }

    /// The answer to a catalog request: the catalog (with each tool's
    /// definition for direct calls when asked), or only "unchanged" when
    /// the asker already holds this one (same fingerprint).
    pub fn catalog_reply(&self, request: &CatalogRequest) -> proto::Catalog {
        let current = self.current();
        let message = match request.direct {
            false => current.message.get_or_init(|| self.make_message(&current, false)),
            true => current.direct_message.get_or_init(|| self.make_message(&current, true)),
        };
        if request.known.as_deref() == Some(message.fingerprint.as_str()) {
            return proto::Catalog {
                version: message.version,
                tools: Vec::new(),
                max_calls: message.max_calls,
                call_timeout_ms: message.call_timeout_ms,
                approval_timeout_ms: message.approval_timeout_ms,
                fingerprint: message.fingerprint.clone(),
                unchanged: true,
                withheld: Vec::new(),
                stateless_idle_ms: message.stateless_idle_ms,
            };
        }
        message.clone()
    }

    fn make_message(&self, current: &Current, direct: bool) -> proto::Catalog {
        let tools = current.catalog.entries(self.inner.servers.len() > 1, direct);
        let mut withheld: Vec<String> = current.catalog.withheld_names().map(str::to_string).collect();
        withheld.sort_unstable();
        let max_calls = self.inner.limits.max_calls;
        let call_timeout_ms = self.inner.limits.call_timeout.as_millis() as u64;
        // Only a catalog with a tool that needs approval makes calls wait
        // longer (and a lost bridge slower to notice).
        let approval_timeout_ms =
            if current.needs_approval() { self.inner.limits.approval_timeout.as_millis() as u64 } else { 0 };
        let stateless_idle_ms = self.inner.limits.stateless_idle.as_millis() as u64;
        let offered = serde_json::to_vec(&(
            &tools,
            &withheld,
            max_calls,
            call_timeout_ms,
            approval_timeout_ms,
            stateless_idle_ms,
        ))
        .unwrap_or_default();
        let fingerprint = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&offered));
        proto::Catalog {
            version: current.version,
            tools,
            max_calls,
            call_timeout_ms,
            approval_timeout_ms,
            fingerprint,
            unchanged: false,
            withheld,
            stateless_idle_ms,
        }
    }

    fn refuse(&self, message: String) -> Answer {
        Answer::Failed(wire::tool_reply(wire::CallFailure::Refused(message), self.inner.limits.max_message_chars))
    }

    /// Check one call and, if it passes, make it. The decision counts in
    /// `codemode_tool_calls_total` and its time in
    /// `codemode_tool_call_duration_seconds`, labelled by the catalog's
    /// server and tool names (`<none>` / `<unknown>` for a name it lacks, so
    /// the code cannot mint series). With an audit sink, every call is one
    /// `call` record, written before the reply goes back; a record that
    /// cannot be written turns the reply into a refusal (fail closed), and
    /// no call goes out while the sink is failing.
    pub async fn call(&self, call: &ToolCall) -> ToolReply {
        match self.checked(call, Caller::Code).await {
            Answer::Text(value) => ToolReply::Ok { value },
            Answer::Result(result) => ToolReply::Ok { value: result_text(&result) },
            Answer::Failed(reply) => reply,
        }
    }

    /// Check one call a client made directly (`--expose-tools`) and, if it
    /// passes, make it: the same checks as [`Bridge::call`], by the same
    /// code and in the same order (the budget counted is the session's
    /// direct calls, not a run's), the same audit record and metrics, the
    /// same refusal messages. A result that passes comes back whole, in its
    /// MCP shape (content blocks, structured content); its size is measured
    /// as that JSON.
    pub async fn call_direct(&self, direct: &DirectCall) -> DirectReply {
        let call = ToolCall {
            session: direct.session.clone(),
            asker: direct.asker.clone(),
            identity: direct.identity.clone(),
            cell_id: direct.call_id.clone(),
            call_index: direct.call_index,
            tool: direct.tool.clone(),
            arguments: direct.arguments.clone(),
        };
        match self.checked(&call, Caller::Direct { max_calls: direct.max_calls }).await {
            Answer::Result(result) => match serde_json::to_value(&*result) {
                Ok(result) => DirectReply::Ok { result },
                Err(_) => DirectReply::Fault { kind: proto::ErrorKind::UnexpectedResponse },
            },
            Answer::Text(text) | Answer::Failed(ToolReply::Ok { value: text }) => {
                DirectReply::Ok { result: serde_json::json!({"content": [{"type": "text", "text": text}]}) }
            }
            Answer::Failed(ToolReply::Refused { message }) => DirectReply::Refused { message },
            Answer::Failed(ToolReply::Fault { kind }) => DirectReply::Fault { kind },
        }
    }

    /// The one path every call takes, from code or direct: the checks, the
    /// call, the audit record (a record that cannot be written withholds
    /// the result), the metrics.
    async fn checked(&self, call: &ToolCall, caller: Caller) -> Answer {
        let started = std::time::Instant::now();
        let current = self.current();
        let mut trail = Trail::new(call);
        let mut answer = self.check_and_call(&current, call, caller, &mut trail).await;
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.append(trail.record(call), Durability::Written).await
        {
            tracing::error!(tool = %call.tool, cell = %call.cell_id, error = %e, "the call's audit record was not written: its result is withheld");
            answer = self.refuse(format!("{}: {e}", call.tool));
        }
        let (server, tool) = match current.catalog.get(&call.tool) {
            Some(tool) => (self.inner.servers[tool.server].name(), tool.mcp_name.as_str()),
            None => ("<none>", "<unknown>"),
        };
        let decision = match &answer {
            Answer::Text(_) | Answer::Result(_) | Answer::Failed(ToolReply::Ok { .. }) => Decision::Ok,
            Answer::Failed(ToolReply::Refused { .. }) => Decision::Refused,
            Answer::Failed(ToolReply::Fault { .. }) => Decision::Fault,
        };
        code_mode_telemetry::tool_call(server, tool, decision, started.elapsed());
        answer
    }

    async fn check_and_call(&self, current: &Current, call: &ToolCall, caller: Caller, trail: &mut Trail) -> Answer {
        let limits = &self.inner.limits;
        let catalog = &current.catalog;
        if let Some(withheld) = catalog.withheld(&call.tool) {
            let catalog::Denial { rule, reason } = &withheld.denial;
            let site = CallSite {
                session: &call.session,
                server: self.inner.servers[withheld.server].name(),
                tool: &withheld.mcp_name,
            };
            tracing::info!(tool = %call.tool, cell = %call.cell_id, %rule, "refused: denied by policy (not offered)");
            trail.at(site.server, site.tool);
            self.decided(trail, site, AuditDecision::Denied, rule, Some(reason.clone()));
            return self.refuse(format!("{}: denied by policy ({rule}): {reason}", call.tool));
        }
        let Some(tool) = catalog.get(&call.tool) else {
            let (why, check) = if catalog.is_not_kept(&call.tool) {
                (format!("{}: this tool is not on the allowlist", call.tool), "bridge:allowlist")
            } else {
                (format!("there is no tool named {:?}; TOOLS lists the tools", call.tool), "bridge:unknown_tool")
            };
            tracing::info!(tool = %call.tool, cell = %call.cell_id, "refused: unknown or not allowed");
            trail.refused(check, &why);
            return self.refuse(why);
        };
        trail.at(self.inner.servers[tool.server].name(), &tool.mcp_name);
        if call.call_index == 0 {
            tracing::warn!(tool = %tool.name, cell = %call.cell_id, "refused: call_index 0 (calls count from 1)");
            let why = format!("{}: call_index 0 is not a call of this run (calls count from 1)", tool.name);
            trail.refused("bridge:budget", &why);
            return self.refuse(why);
        }
        // Where the session's state lives (a stateless scope's current
        // generation), found when a check first needs it.
        let mut state = StateKey::new(self, &call.session);
        let spent = match caller {
            Caller::Code => (call.call_index > limits.max_calls)
                .then(|| format!("{}: this run has used all of its {} tool calls", tool.name, limits.max_calls)),
            Caller::Direct { max_calls: None } => None,
            // The session's own count (its frontend's) or the store's,
            // whichever is higher: a stateless client's calls reach new
            // session objects, possibly on other frontends, so only the
            // store counts all of them.
            Caller::Direct { max_calls: Some(max) } => match self.count_direct(&mut state).await {
                Ok(made) => (made.max(u64::from(call.call_index)) > u64::from(max)).then(|| {
                    format!(
                        "{}: this session has used all of its {max} direct tool calls (--max-direct-calls)",
                        tool.name
                    )
                }),
                Err(e) => {
                    let why = state_refusal(&tool.name, "direct-call budget", &e);
                    trail.refused("bridge:budget", &why);
                    return self.refuse(why);
                }
            },
        };
        if let Some(why) = spent {
            trail.refused("bridge:budget", &why);
            return self.refuse(why);
        }
        if let Err(problem) = tool.checker.check(&call.arguments, limits.max_arguments) {
            tracing::info!(tool = %tool.name, cell = %call.cell_id, "refused: {problem}");
            // The checker's message may quote the arguments: the record
            // says which check, not what it saw.
            trail.refused("bridge:arguments", "the arguments do not fit the tool's schema or size limit");
            return self.refuse(format!("{}: {problem}", tool.name));
        }
        let serde_json::Value::Object(arguments) = call.arguments.clone() else {
            trail.refused("bridge:arguments", "the arguments are not a JSON object");
            return self.refuse(format!("{}: arguments must be a JSON object", tool.name));
        };
        // Nothing goes out that could not be recorded afterwards; checked
        // before the policy counts the call and the private rule taints.
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.ready().await
        {
            tracing::error!(tool = %tool.name, cell = %call.cell_id, error = %e, "refused: the audit sink cannot be written");
            trail.refused("bridge:audit", &e.to_string());
            return self.refuse(format!("{}: {e}", tool.name));
        }
        if let Some(applied) = &current.policies[tool.server]
            && let Err(refusal) = self.apply_policy(applied, call, tool, &mut state, trail).await
        {
            return refusal;
        }
        // Last, so that a call refused by any check above never taints; a
        // private call taints here, before it goes out (see `private`).
        if let Some(rule) = &current.rule {
            let key = match state.get().await {
                Ok(key) => key.to_string(),
                Err(e) => {
                    let why = state_refusal(&tool.name, "private-data rule", &e);
                    trail.refused("bridge:private_data", &why);
                    return self.refuse(why);
                }
            };
            match rule.judge(&key, &tool.name, tool.private).await {
                Ok(()) => trail.tainted = Some(tool.private),
                Err(refusal) => {
                    trail.tainted = matches!(refusal, private::RuleRefusal::Tainted { .. }).then_some(true);
                    trail.refused("bridge:private_data", &refusal.to_string());
                    return self.refuse(refusal.to_string());
                }
            }
        }
        trail.went_out();
        let server = &self.inner.servers[tool.server];
        match server.call(&tool.mcp_name, arguments, limits.call_timeout).await {
            Ok(result) => {
                let (answer, kind, text) = self.result_answer(&tool.name, result, caller);
                trail.result = Some((kind, Some(text)));
                answer
            }
            Err(server::CallError::Timeout(after)) => {
                tracing::warn!(tool = %tool.name, server = %server.name(), "call timed out");
                trail.result = Some((CallResult::Timeout, None));
                self.refuse(format!("{}: no answer within {} s", tool.name, after.as_secs_f64()))
            }
            Err(e) => {
                tracing::warn!(tool = %tool.name, server = %server.name(), error = %e, "call failed on the host");
                trail.result = Some((CallResult::Fault, None));
                Answer::Failed(wire::tool_reply(wire::CallFailure::Host(e), limits.max_message_chars))
            }
        }
    }

    /// The policy's verdict, argument rule and rate limits for one call,
    /// then the person's answer when the policy asks for approval. Each
    /// decision goes into the call's audit trail and is counted. `Err`
    /// holds the refusal.
    async fn apply_policy(
        &self,
        applied: &Applied,
        call: &ToolCall,
        tool: &catalog::CatalogTool,
        state: &mut StateKey<'_>,
        trail: &mut Trail,
    ) -> Result<(), Answer> {
        let name = &tool.name;
        let site =
            CallSite { session: &call.session, server: self.inner.servers[tool.server].name(), tool: &tool.mcp_name };
        trail.record_args = applied.policy.records_args(&tool.mcp_name);
        let verdict = applied.policy.verdict(&tool.mcp_name);
        if let Verdict::Deny { reason, rule } = &verdict {
            tracing::info!(tool = %name, cell = %call.cell_id, %rule, "refused: denied by policy");
            self.decided(trail, site, AuditDecision::Denied, rule, Some(reason.clone()));
            return Err(self.refuse(format!("{name}: denied by policy ({rule}): {reason}")));
        }
        if let Err(why) = applied.policy.check_args(&tool.mcp_name, &call.arguments) {
            let rule = RuleSource::Tool(tool.mcp_name.clone());
            tracing::info!(tool = %name, cell = %call.cell_id, "refused by the policy's argument rule");
            let reason = format!("{} ({rule}/args)", why.without_values());
            self.decided(trail, site, AuditDecision::Refused, &rule, Some(reason));
            return Err(self.refuse(format!("{name}: {why} ({rule}/args)")));
        }
        // Only a `grant` limit needs the session's own state.
        let session = if applied.policy.counts_per_session(&tool.mcp_name) {
            match state.get().await {
                Ok(key) => key.to_string(),
                Err(e) => {
                    let why = state_refusal(name, "rate limit", &e);
                    tracing::info!(tool = %name, cell = %call.cell_id, "refused: {why}");
                    self.decided(trail, site, AuditDecision::Refused, verdict.rule(), Some(why.clone()));
                    return Err(self.refuse(why));
                }
            }
        } else {
            call.session.clone()
        };
        if let Err(refusal) =
            applied.limiter.admit_as(&session, call.identity.as_deref(), &tool.mcp_name, trail.decided).await
        {
            tracing::info!(tool = %name, cell = %call.cell_id, "refused: {refusal}");
            let decision = match refusal {
                policy::LimitRefusal::Exceeded { .. } => AuditDecision::RateLimited,
                policy::LimitRefusal::State { .. } => AuditDecision::Refused,
            };
            self.decided(trail, site, decision, verdict.rule(), Some(refusal.to_string()));
            return Err(self.refuse(format!("{name}: {refusal}")));
        }
        let Verdict::Approve { rule, .. } = &verdict else {
            self.decided(trail, site, AuditDecision::Allowed, verdict.rule(), None);
            return Ok(());
        };
        let answer = self.ask_approval(call, site, rule).await;
        code_mode_telemetry::approval_answered(match &answer {
            ApprovalReply::Approved => ApprovalAnswer::Approved,
            ApprovalReply::Declined => ApprovalAnswer::Declined,
            ApprovalReply::Cancelled => ApprovalAnswer::Dismissed,
            ApprovalReply::TimedOut => ApprovalAnswer::TimedOut,
            ApprovalReply::Unavailable { .. } => ApprovalAnswer::Unavailable,
        });
        if answer == ApprovalReply::Approved {
            tracing::info!(tool = %name, cell = %call.cell_id, %rule, "approved");
            self.decided(trail, site, AuditDecision::Approved, rule, None);
            return Ok(());
        }
        let why = approval::refusal(&answer, self.inner.limits.approval_timeout);
        tracing::info!(tool = %name, cell = %call.cell_id, %rule, "refused: not approved: {why}");
        self.decided(trail, site, AuditDecision::NotApproved, rule, Some(why.clone()));
        Err(self.refuse(format!("{name}: needs approval ({rule}): {why}")))
    }

    /// Ask the person behind the call's client session, through its
    /// frontend, whether the call may go out.
    async fn ask_approval(&self, call: &ToolCall, site: CallSite<'_>, rule: &RuleSource) -> ApprovalReply {
        let timeout = self.inner.limits.approval_timeout;
        let Some(bus) = self.inner.approvals.get() else {
            return ApprovalReply::Unavailable { reason: "this bridge is not connected to any client session".into() };
        };
        // The frontend session that asks: a stateless client's request, or
        // the client session itself.
        let Some(subject) = subjects::approval(call.asker.as_deref().unwrap_or(&call.session)) else {
            return ApprovalReply::Unavailable { reason: "the call's session id cannot be addressed".into() };
        };
        let request = proto::ApprovalRequest {
            session: call.session.clone(),
            cell_id: call.cell_id.clone(),
            server: site.server.to_string(),
            tool: site.tool.to_string(),
            arguments: approval::summarize_arguments(&call.arguments, approval::SUMMARY_CHARS),
            rule: rule.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        };
        // The frontend answers `timed_out` itself when the person does not;
        // the margin covers the hops.
        let wait = timeout + approval::MARGIN;
        match bus.call_counted_as::<_, ApprovalReply>(&subject, subjects::APPROVAL, &request, wait).await {
            Ok(reply) => reply,
            Err(BusError::NoResponders { .. }) => ApprovalReply::Unavailable {
                reason: "the client session that ran the code is gone, so nobody can be asked".into(),
            },
            Err(BusError::Timeout { .. }) => ApprovalReply::TimedOut,
            Err(e) => {
                tracing::warn!(error = %e, "an approval request failed");
                ApprovalReply::Unavailable { reason: "the client session could not be asked".into() }
            }
        }
    }

    /// Note one policy decision in the call's trail and count it.
    fn decided(
        &self,
        trail: &mut Trail,
        site: CallSite<'_>,
        decision: AuditDecision,
        rule: &RuleSource,
        reason: Option<String>,
    ) {
        let rule = rule.to_string();
        code_mode_telemetry::policy_decision(site.server, site.tool, decision.as_str(), &rule);
        trail.decision = decision;
        trail.policy = Some(decision);
        trail.rule = Some(rule);
        trail.reason = reason;
    }

    /// The answer for a result, how it came back, and the text whose size
    /// and hash the audit record keeps (what the caller is handed: for code
    /// the text, for a direct call the whole result as JSON). A tool's own
    /// failure is refused with its text either way. The size checked is the
    /// text's, plus for a direct call the blocks code never gets (images,
    /// audio, resources), so a result without them gets the very message
    /// code gets.
    fn result_answer(&self, tool: &str, result: CallToolResult, caller: Caller) -> (Answer, CallResult, String) {
        let text = result_text(&result);
        if result.is_error == Some(true) {
            return (self.refuse(format!("{tool} failed: {text}")), CallResult::Error, text);
        }
        let size = match caller {
            Caller::Code => text.len(),
            Caller::Direct { .. } => text.len() + non_text_bytes(&result),
        };
        let handed = match caller {
            Caller::Code => text,
            Caller::Direct { .. } => serde_json::to_string(&result).unwrap_or_default(),
        };
        if size > self.inner.limits.max_result {
            let answer = self.refuse(format!(
                "{tool}: the result is {size} bytes, over the {} byte limit (refused, not cut): ask for less",
                self.inner.limits.max_result
            ));
            return (answer, CallResult::TooLarge, handed);
        }
        match caller {
            Caller::Code => (Answer::Text(handed.clone()), CallResult::Ok, handed),
            Caller::Direct { .. } => (Answer::Result(Box::new(result)), CallResult::Ok, handed),
        }
    }

    /// Forget an ended client session's state: its private-data taint and
    /// its `grant` rate-limit counters under every server's policy (`global`
    /// counters stay). Returns how many entries were there. The `global`
    /// pseudo-session and ids that are no session's are refused.
    ///
    /// A stateless scope is refused too: it is no one client session, and
    /// ends only after `--stateless-idle` without a call (see [`scope`]).
    pub async fn end_session(&self, session: &str) -> Result<u32, BridgeError> {
        if session == policy::GLOBAL_SESSION
            || !subjects::is_session_id(session)
            || subjects::is_stateless_scope(session)
        {
            return Err(BridgeError::NotASession { session: session.chars().take(80).collect() });
        }
        let removed = self.forget_state(session).await?;
        tracing::info!(%session, removed, "client session ended: its state is forgotten");
        Ok(removed)
    }

    /// Count one more direct call of the call's session (its stateless
    /// scope's generation): how many it has made, this one included.
    async fn count_direct(&self, state: &mut StateKey<'_>) -> Result<u64, code_mode_core::state::StateError> {
        let key = state.get().await?.to_string();
        let entry = self
            .inner
            .rebuild
            .state
            .update(&key, DIRECT_CALLS, |old| {
                serde_json::json!(old.and_then(|v| v.as_u64()).unwrap_or(0).saturating_add(1))
            })
            .await?;
        Ok(entry.value.as_u64().unwrap_or(u64::MAX))
    }

    /// Delete every entry the bridge keeps under `session` (or a stateless
    /// scope's generation): the taint, `grant` counters, the direct-call
    /// count. Returns how many were there.
    async fn forget_state(&self, session: &str) -> Result<u32, BridgeError> {
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
            let there = store.get(session, name).await.map_err(BridgeError::State)?.is_some();
            if there {
                store.delete(session, name).await.map_err(BridgeError::State)?;
                removed += 1;
                if name == private::TAINT {
                    code_mode_telemetry::session_taint(false);
                }
            }
        }
        Ok(removed)
    }

    /// Answer catalog requests and tool calls on the bus until `cancel`.
    pub async fn serve(
        &self,
        bus: &Bus,
        cancel: CancellationToken,
    ) -> Result<Vec<tokio::task::JoinHandle<()>>, BusError> {
        // Approvals are asked of the client sessions on this bus.
        let _ = self.inner.approvals.set(bus.clone());
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
        let ends = bus
            .serve(subjects::SESSION_END, queue_groups::BRIDGE, cancel, move |end: proto::SessionEnd| {
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
        Ok(vec![catalog, calls, direct, ends])
    }
}

/// The entry of a session's direct-call count (`--max-direct-calls`).
pub const DIRECT_CALLS: &str = "direct.calls";

/// Where one call's session state lives, resolved once, when a check first
/// needs it (see [`scope`]): the session itself, or a stateless scope's
/// current generation. When the call moves a scope on, the old
/// generation's state is forgotten then.
struct StateKey<'a> {
    bridge: &'a Bridge,
    session: &'a str,
    resolved: Option<String>,
}

impl<'a> StateKey<'a> {
    fn new(bridge: &'a Bridge, session: &'a str) -> Self {
        Self { bridge, session, resolved: None }
    }

    async fn get(&mut self) -> Result<&str, code_mode_core::state::StateError> {
        if self.resolved.is_none() {
            let resolved = self.bridge.inner.scopes.resolve(self.session).await?;
            if let Some(expired) = &resolved.expired
                && let Err(e) = self.bridge.forget_state(expired).await
            {
                // Harmless: no call uses that generation again.
                tracing::warn!(scope = %self.session, error = %e, "could not forget an ended scope generation");
            }
            self.resolved = Some(resolved.key);
        }
        Ok(self.resolved.as_deref().unwrap_or(self.session))
    }
}

/// The refusal of a call whose session state could not be had for `what`.
fn state_refusal(tool: &str, what: &str, error: &code_mode_core::state::StateError) -> String {
    tracing::warn!(tool, error = %error, "refused: session state failed (fail closed)");
    let how = match error {
        code_mode_core::state::StateError::Unavailable(_) => "unavailable",
        code_mode_core::state::StateError::Invalid(_) => "invalid",
        code_mode_core::state::StateError::Conflict(_) => "changing concurrently",
    };
    format!("{tool}: session state {how}: refusing the call under the {what} (fail closed)")
}

/// Where a call comes from: a cell's code, or a client calling the tool
/// directly. Only the budget checked and the shape of the result differ.
#[derive(Debug, Clone, Copy)]
enum Caller {
    /// A cell's code: the run's budget (`call_index` of `max_calls`); the
    /// result as a string.
    Code,
    /// A client's direct call: the session's direct calls (`call_index` of
    /// `max_calls`, none: no limit); the result in its MCP shape.
    Direct { max_calls: Option<u32> },
}

/// What a checked call came to, before it takes its caller's shape.
#[derive(Debug)]
enum Answer {
    /// The result as code receives it.
    Text(String),
    /// The result as the server sent it (direct calls).
    Result(Box<CallToolResult>),
    /// Refused (the bridge's message, cut) or a host fault (its kind
    /// only), as [`wire::tool_reply`] puts it on the wire.
    Failed(ToolReply),
}

/// What becomes the audit record of one call, filled in as its checks run.
#[derive(Debug)]
struct Trail {
    server: Option<String>,
    tool: String,
    decision: AuditDecision,
    rule: Option<String>,
    policy: Option<AuditDecision>,
    reason: Option<String>,
    /// When the call was judged: what the rate limits count by.
    decided: SystemTime,
    tainted: Option<bool>,
    /// How it came back and the text returned, for a call that went out.
    result: Option<(CallResult, Option<String>)>,
    record_args: bool,
}

impl Trail {
    fn new(call: &ToolCall) -> Self {
        Self {
            server: None,
            tool: call.tool.clone(),
            decision: AuditDecision::Refused,
            rule: None,
            policy: None,
            reason: None,
            decided: SystemTime::now(),
            tainted: None,
            result: None,
            record_args: false,
        }
    }

    /// The call names this server's tool.
    fn at(&mut self, server: &str, tool: &str) {
        self.server = Some(server.to_string());
        self.tool = tool.to_string();
    }

    /// One of the bridge's own checks (or a later one) refused it.
    fn refused(&mut self, check: &str, why: &str) {
        self.decision = AuditDecision::Refused;
        self.rule = Some(check.to_string());
        self.reason = Some(why.to_string());
    }

    /// It passed every check and goes out: allowed, or as the policy said.
    fn went_out(&mut self) {
        self.decision = self.policy.unwrap_or(AuditDecision::Allowed);
        self.reason = None;
    }

    fn record(&self, call: &ToolCall) -> audit_record::Body {
        let args = serde_json::to_vec(&call.arguments).unwrap_or_default();
        let (args_bytes, args_sha256) = audit_record::size_and_hash(&args);
        let (result, result_bytes, result_sha256) = match &self.result {
            None => (None, None, None),
            Some((kind, None)) => (Some(*kind), None, None),
            Some((kind, Some(text))) => {
                let (n, sha) = audit_record::size_and_hash(text.as_bytes());
                (Some(*kind), Some(n), Some(sha))
            }
        };
        audit_record::Body::Call(audit_record::Call {
            session: call.session.clone(),
            identity: call.identity.clone(),
            cell: call.cell_id.clone(),
            call: call.call_index,
            server: self.server.clone(),
            tool: self.tool.clone(),
            decision: self.decision,
            rule: self.rule.clone(),
            policy: self.policy,
            reason: self.reason.clone(),
            decided: audit_record::rfc3339(self.decided),
            args_bytes,
            args_sha256,
            args: self.record_args.then(|| call.arguments.clone()),
            result,
            result_bytes,
            result_sha256,
            tainted: self.tainted,
        })
    }
}

/// The `tools` record of one server: its tools and their annotations.
fn tools_record(server: &str, tools: &[rmcp::model::Tool]) -> audit_record::Body {
    let tools = tools
        .iter()
        .map(|t| {
            let a = t.annotations.as_ref().map(Annotations::from).unwrap_or_default();
            audit_record::ToolInfo {
                name: t.name.to_string(),
                read_only: a.read_only,
                destructive: a.destructive,
                idempotent: a.idempotent,
                open_world: a.open_world,
            }
        })
        .collect();
    audit_record::Body::Tools(audit_record::Tools { server: server.to_string(), tools })
}

/// Rebuild the catalog whenever a wrapped server publishes a new tool list,
/// until the servers stop or the bridge is gone.
async fn refresher(
    bridge: std::sync::Weak<Inner>,
    mut changes: Vec<tokio::sync::watch::Receiver<Arc<Vec<rmcp::model::Tool>>>>,
    cancel: CancellationToken,
) {
    if changes.is_empty() {
        return;
    }
    loop {
        let changed = futures::future::select_all(changes.iter_mut().map(|rx| Box::pin(rx.changed())));
        let (result, _, _) = tokio::select! {
            _ = cancel.cancelled() => return,
            changed = changed => changed,
        };
        if result.is_err() {
            return;
        }
        let Some(inner) = bridge.upgrade() else { return };
        let _ = Bridge { inner }.refresh_catalog();
    }
}

/// A result as the code receives it: the structured content as JSON if the
/// server sent some, else the text blocks joined by newlines (other blocks
/// are named, not inlined).
pub fn result_text(result: &CallToolResult) -> String {
    if let Some(structured) = &result.structured_content {
        return serde_json::to_string(structured).unwrap_or_default();
    }
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(_) => "[image content omitted]".into(),
            ContentBlock::Audio(_) => "[audio content omitted]".into(),
            ContentBlock::Resource(_) => "[embedded resource omitted]".into(),
            ContentBlock::ResourceLink(_) => "[resource link omitted]".into(),
            _ => "[content omitted]".into(),
        })
        .collect();
    parts.join("\n")
}

/// Bytes of a result's blocks that [`result_text`] names without inlining
/// (images, audio, resources), as JSON: what a direct caller gets beyond
/// the text code gets.
fn non_text_bytes(result: &CallToolResult) -> usize {
    result
        .content
        .iter()
        .filter(|block| !matches!(block, ContentBlock::Text(_)))
        .map(|block| serde_json::to_vec(block).map(|v| v.len()).unwrap_or(0))
        .sum()
}

/// The default timeout of a bus request carrying one tool call: the call's
/// own timeout plus a margin for the hops.
pub fn call_request_timeout(limits: &CallLimits) -> Duration {
    limits.call_timeout + defaults::HOP_MARGIN
}
