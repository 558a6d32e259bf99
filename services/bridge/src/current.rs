//! The current catalog and everything built with it: each server's policy
//! and rate limiter, the private-data rule, the catalog messages the
//! frontends get; how the bridge starts (its servers first, then the
//! catalog), and how the catalog is rebuilt when a server's tools change
//! (the refresher).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use code_mode_audit::Durability;
use code_mode_audit::record::{self as audit_record};
use code_mode_core::state::SessionStore;
use code_mode_proto::{self as proto, CatalogRequest};
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use crate::offers::{Judge, Offers};
use crate::policy::{Admission, Annotations, Policy, RateLimiter, ToolFacts, Verdict};
use crate::private::PrivateRule;
use crate::relay::{BridgeRef, Relay};
use crate::scope::Scopes;
use crate::server::Offering;
use crate::server::ServerHandle;
use crate::upstream::Upstreams;
use crate::{
    Bridge, BridgeConfig, BridgeError, Closer, Inner, PolicySource, WrappedServer, catalog, config, naming, schema,
    server,
};

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

/// One catalog and the private rule that goes with it.
#[derive(Debug)]
pub(crate) struct Current {
    pub(crate) catalog: Arc<Catalog>,
    /// Starts at 1; each successful rebuild adds 1.
    pub(crate) version: u64,
    /// The private-data rule, when some tool is private.
    pub(crate) rule: Option<PrivateRule>,
    /// Each server's policy, by server index.
    pub(crate) policies: Vec<Option<Applied>>,
    /// The catalog message, made on the first request for it.
    pub(crate) message: std::sync::OnceLock<proto::Catalog>,
    /// The same with each tool's definition for direct calls, made on the
    /// first request for it.
    pub(crate) direct_message: std::sync::OnceLock<proto::Catalog>,
    /// What the servers offer besides tools.
    pub(crate) offers: Offers,
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
pub(crate) struct Applied {
    pub(crate) policy: Arc<Policy>,
    pub(crate) limiter: RateLimiter,
}

/// What one build makes: the catalog, its private rule, each server's
/// policy, the offers besides tools.
pub(crate) type Built = (Catalog, Option<PrivateRule>, Vec<Option<Applied>>, Offers);

/// The servers' policies, as the offers ask them.
struct Policies<'a>(&'a [Option<Applied>]);

impl Judge for Policies<'_> {
    fn resource(&self, server: usize, uri: &str) -> Option<Admission> {
        self.0.get(server)?.as_ref().map(|a| a.policy.resource(uri))
    }

    fn prompt(&self, server: usize, name: &str) -> Option<Admission> {
        self.0.get(server)?.as_ref().map(|a| a.policy.prompt(name))
    }
}

/// The configuration a catalog is built with.
#[derive(Debug)]
pub(crate) struct Rebuild {
    pub(crate) servers: Vec<WrappedServer>,
    pub(crate) prefixed: bool,
    pub(crate) limits: CatalogLimits,
    pub(crate) state: SessionStore,
    /// Keep tools the policy denies outright in the catalog.
    pub(crate) offer_denied: bool,
    /// How long a stateless scope lasts (for the private rule's refusals).
    pub(crate) stateless_idle: Duration,
    /// Result shapes learned from calls, shown in the stubs.
    pub(crate) shapes: crate::shapes::Shapes,
    /// Told when a learned shape changed what a stub shows: the refresher
    /// rebuilds the catalog.
    pub(crate) learned: Arc<tokio::sync::Notify>,
}

impl Rebuild {
    /// Build a catalog (and its private rule) from each server's tools,
    /// reading each server's policy against the tools it lists, and the
    /// offers from what else each server offers.
    fn build(&self, tools: &[Arc<Vec<rmcp::model::Tool>>], offerings: &[Arc<Offering>]) -> Result<Built, BridgeError> {
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
                observed: tools
                    .iter()
                    .filter_map(|t| self.shapes.get(&wrapped.spec.name, &t.name).map(|s| (t.name.to_string(), s)))
                    .collect(),
                labels,
                withheld,
            });
            policies.push(applied);
        }
        let catalog = Catalog::build(&listed, &self.limits)?;
        let rule = catalog.has_private().then(|| {
            PrivateRule::new(self.state.clone(), catalog.private_tools()).with_stateless_idle(self.stateless_idle)
        });
        // A server's resources and prompts are as private as its most
        // private tool: a server trusted with private data by one tool
        // may hold it in what it serves otherwise.
        let private: Vec<bool> =
            (0..self.servers.len()).map(|i| catalog.tools().iter().any(|t| t.server == i && t.private)).collect();
        let names = self.servers.iter().map(|w| w.spec.name.clone()).collect();
        let offers = Offers::build(offerings.to_vec(), names, self.prefixed, private, &Policies(&policies));
        Ok((catalog, rule, policies, offers))
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

    pub(crate) async fn start_with(
        config: BridgeConfig,
        cancel: CancellationToken,
        prefixed: bool,
    ) -> Result<(Bridge, Closer), BridgeError> {
        let servers_cancel = cancel.child_token();
        let bridge_ref = BridgeRef::default();
        let mut handles = Vec::new();
        let mut actors = Vec::new();
        let mut listed = Vec::new();
        for (index, wrapped) in config.servers.iter().enumerate() {
            let relay = Relay::shared(index, &wrapped.spec.name, bridge_ref.clone());
            match server::start_relaying(&wrapped.spec, relay, servers_cancel.clone()).await {
                Ok((handle, tools, actor)) => {
                    listed.push(Arc::new(tools));
                    handles.push(handle);
                    actors.push(actor);
                }
                Err(e) => {
                    servers_cancel.cancel();
                    drop(handles);
                    Closer { actors, own_sessions: Default::default(), audit: None }.closed().await;
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
            shapes: crate::shapes::Shapes::new(Some(config.state.clone())),
            learned: Default::default(),
        };
        // What earlier runs learned of the results, before the first stubs.
        let known = rebuild.servers.iter().zip(&listed).flat_map(|(wrapped, tools)| {
            tools.iter().map(|t| (wrapped.spec.name.clone(), t.name.to_string())).collect::<Vec<_>>()
        });
        rebuild.shapes.load(known.collect::<Vec<_>>()).await;
        let offerings: Vec<_> = handles.iter().map(ServerHandle::offering).collect();
        let (catalog, rule, policies, offers) = match rebuild.build(&listed, &offerings) {
            Ok(built) => built,
            Err(e) => {
                servers_cancel.cancel();
                drop(handles);
                Closer { actors, own_sessions: Default::default(), audit: None }.closed().await;
                return Err(e);
            }
        };
        if rule.is_some() {
            let private: Vec<&str> = catalog.private_tools().collect();
            tracing::info!(?private, store = config.state.backend_kind(), "private-data rule on");
        }
        tracing::info!(tools = catalog.tools().len(), left_out = catalog.left_out().len(), "bridge ready");
        let changes: Vec<_> = handles.iter().map(ServerHandle::tools_changes).collect();
        let offering_changes: Vec<_> = handles.iter().map(ServerHandle::offering_changes).collect();
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
                    Closer { actors, own_sessions: Default::default(), audit: None }.closed().await;
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
            offers,
        };
        let audit_for_closer = config.policy_options.audit.clone();
        let upstreams = Upstreams::new(bridge_ref.clone(), servers_cancel.clone());
        let own_sessions = upstreams.tasks();
        let bridge = Bridge {
            inner: Arc::new(Inner {
                current: std::sync::RwLock::new(Arc::new(current)),
                servers: handles,
                limits: config.limits,
                rebuild,
                audit: config.policy_options.audit.clone(),
                approvals: std::sync::OnceLock::new(),
                scopes: Scopes::new(config.state.clone(), config.limits.stateless_idle),
                upstreams,
                in_flight: Default::default(),
            }),
        };
        let _ = bridge_ref.set(Arc::downgrade(&bridge.inner));
        actors.push(tokio::spawn(refresher(
            Arc::downgrade(&bridge.inner),
            changes,
            offering_changes,
            bridge.inner.rebuild.learned.clone(),
            servers_cancel.clone(),
        )));
        // Holds only a weak reference and ends with the bridge (or its
        // token): nothing to wait for at close.
        tokio::spawn(crate::upstream::reaper(Arc::downgrade(&bridge.inner), servers_cancel));
        Ok((bridge, Closer { actors, own_sessions, audit: audit_for_closer }))
    }

    /// Rebuild the catalog from every wrapped server's current tools and
    /// swap it in with the next version. On failure the current catalog
    /// stays and the error is returned (and logged).
    pub async fn refresh_catalog(&self) -> Result<u64, BridgeError> {
        self.rebuild_catalog(true).await
    }

    /// Rebuild the catalog; `record`: the servers' tools changed, so the
    /// audit log gets their new lists (a learned result shape changes
    /// only stubs, and records nothing).
    async fn rebuild_catalog(&self, record: bool) -> Result<u64, BridgeError> {
        let tools: Vec<_> = self.inner.servers.iter().map(ServerHandle::tools).collect();
        let offerings: Vec<_> = self.inner.servers.iter().map(ServerHandle::offering).collect();
        let built = self.inner.rebuild.build(&tools, &offerings);
        if built.is_ok()
            && record
            && let Some(audit) = &self.inner.audit
        {
            // Recorded before the new catalog serves a call, and awaited:
            // the refresher is one of the tasks the closer waits for, so no
            // record of it is left in flight when the sink closes.
            for (handle, tools) in self.inner.servers.iter().zip(&tools) {
                if let Err(e) = audit.append(tools_record(handle.name(), tools), Durability::Written).await {
                    tracing::error!(error = %e, "the changed tools could not be recorded");
                }
            }
        }
        let mut current = code_mode_core::sync::write(&self.inner.current);
        match built {
            Ok((catalog, rule, policies, offers)) => {
                let version = current.version + 1;
                tracing::info!(version, tools = catalog.tools().len(), "catalog refreshed");
                *current = Arc::new(Current {
                    catalog: Arc::new(catalog),
                    version,
                    rule,
                    policies,
                    message: Default::default(),
                    direct_message: Default::default(),
                    offers,
                });
                Ok(version)
            }
            Err(e) => {
                tracing::error!(error = %e, version = current.version, "the changed tools make no valid catalog: keeping the old one");
                Err(e)
            }
        }
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
                ask_timeout_ms: message.ask_timeout_ms,
                fingerprint: message.fingerprint.clone(),
                unchanged: true,
                withheld: Vec::new(),
                stateless_idle_ms: message.stateless_idle_ms,
                features: None,
                listed: message.listed.clone(),
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
        let ask_timeout_ms = self.inner.limits.approval_timeout.as_millis() as u64;
        // Every client gets what else the servers offer (resources,
        // prompts: not tools, so code mode offers them too).
        let features = Some(current.offers.message());
        let offered = serde_json::to_vec(&(
            &tools,
            &withheld,
            max_calls,
            call_timeout_ms,
            approval_timeout_ms,
            ask_timeout_ms,
            stateless_idle_ms,
            &features,
        ))
        .unwrap_or_default();
        let fingerprint = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&offered));
        // The same without what was learned from results: the servers'
        // definitions (with labels), not the stubs rendered from them.
        let definitions: Vec<_> =
            current.catalog.tools().iter().map(|t| (&t.name, &t.mark, t.private, &t.direct)).collect();
        let listed = serde_json::to_vec(&(&definitions, &withheld)).unwrap_or_default();
        let listed = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&listed));
        proto::Catalog {
            version: current.version,
            tools,
            max_calls,
            call_timeout_ms,
            approval_timeout_ms,
            ask_timeout_ms,
            fingerprint,
            unchanged: false,
            withheld,
            stateless_idle_ms,
            features,
            listed,
        }
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

/// Rebuild the catalog whenever a wrapped server publishes a new tool list
/// (or new lists of resources, templates or prompts), until the servers
/// stop or the bridge is gone.
async fn refresher(
    bridge: std::sync::Weak<Inner>,
    mut changes: Vec<tokio::sync::watch::Receiver<Arc<Vec<rmcp::model::Tool>>>>,
    mut offering_changes: Vec<tokio::sync::watch::Receiver<Arc<Offering>>>,
    learned: Arc<tokio::sync::Notify>,
    cancel: CancellationToken,
) {
    if changes.is_empty() {
        return;
    }
    loop {
        let tools = futures::future::select_all(changes.iter_mut().map(|rx| Box::pin(rx.changed())));
        let offerings = futures::future::select_all(offering_changes.iter_mut().map(|rx| Box::pin(rx.changed())));
        let (result, record) = tokio::select! {
            _ = cancel.cancelled() => return,
            (result, _, _) = tools => (result, true),
            (result, _, _) = offerings => (result, true),
            () = learned.notified() => {
                // Shapes learned by a burst of calls make one rebuild.
                tokio::time::sleep(LEARNED_SETTLE).await;
                (Ok(()), false)
            }
        };
        if result.is_err() {
            return;
        }
        let Some(inner) = bridge.upgrade() else { return };
        let _ = Bridge { inner }.rebuild_catalog(record).await;
    }
}

/// How long the refresher waits after a shape is learned before it
/// rebuilds the catalog, so that the other results of the same burst of
/// calls are in it too.
const LEARNED_SETTLE: Duration = Duration::from_millis(100);
