//! The current catalog and everything built with it: each server's policy
//! and rate limiter, the private-data rule, the catalog messages the
//! frontends get; and how the catalog is rebuilt when a server's tools
//! change (the refresher). The bridge's start is [`crate::start`].

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
use crate::server::{Offering, ServerHandle};
use crate::{Bridge, BridgeError, PolicySource, WrappedServer, catalog, config, naming, schema};

/// The private labels of `wrapped`, with [`config::ALL_TOOLS`] (`"private":
/// true`) made into every tool it keeps: the allowlist, else every listed
/// tool whose schema can be checked.
/// Whether every caller reaches the server as one account: an `oauth`
/// block per deployment (per identity, each caller acts as its own).
fn shared_account(spec: &crate::server::ServerSpec) -> bool {
    match &spec.transport {
        crate::server::Transport::Http(crate::server::HttpSpec { auth: Some(auth), .. }) => {
            matches!(auth.spec(), code_mode_upstream_auth::AuthSpec::OAuth(_)) && !auth.is_per_identity()
        }
        _ => false,
    }
}

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
    /// Every server the bridge started, by index; a reload appends the
    /// servers it adds and leaves a removed server's (closed) handle in its
    /// place, so an index never changes meaning.
    pub(crate) servers: Arc<Vec<ServerHandle>>,
    /// What to keep of each server, by the same index; `None`: removed.
    pub(crate) wrapped: Arc<Vec<Option<WrappedServer>>>,
}

impl Current {
    /// Version `version` of what calls are judged by: a build's catalog,
    /// rule, policies and offers, for the servers the bridge holds (by
    /// index), each server's settings (`None`: removed).
    pub(crate) fn new(
        version: u64,
        built: Built,
        servers: Arc<Vec<ServerHandle>>,
        wrapped: Arc<Vec<Option<WrappedServer>>>,
    ) -> Self {
        let Built { catalog, rule, policies, offers } = built;
        Self {
            catalog: Arc::new(catalog),
            version,
            rule,
            policies,
            message: Default::default(),
            direct_message: Default::default(),
            offers,
            servers,
            wrapped,
        }
    }

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
    /// SHA-256 (hex) of the policy as read: the file's bytes, or an inline
    /// policy's JSON as `serde_json` writes it (what a reload's audit
    /// record names).
    pub(crate) sha256: String,
}

/// What one build makes: the catalog, its private rule, each server's
/// policy, the offers besides tools.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) catalog: Catalog,
    pub(crate) rule: Option<PrivateRule>,
    pub(crate) policies: Vec<Option<Applied>>,
    pub(crate) offers: Offers,
}

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

/// The configuration a catalog is built with, besides each server's own
/// settings ([`Current::wrapped`]).
#[derive(Debug)]
pub(crate) struct Rebuild {
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
    /// offers from what else each server offers. A removed server
    /// (`None` in `servers`) keeps its index and offers nothing. The
    /// private rule stays on when `keep_rule` (it was on: sessions may
    /// hold taints, which must keep confining them) even when no tool is
    /// private any more.
    pub(crate) fn build(
        &self,
        servers: &[Option<WrappedServer>],
        names: &[String],
        tools: &[Arc<Vec<rmcp::model::Tool>>],
        offerings: &[Arc<Offering>],
        keep_rule: bool,
    ) -> Result<Built, BridgeError> {
        let mut listed = Vec::with_capacity(servers.len());
        let mut policies = Vec::with_capacity(servers.len());
        for ((wrapped, tools), name) in servers.iter().zip(tools).zip(names) {
            let Some(wrapped) = wrapped else {
                listed.push(ServerTools {
                    server: name.clone(),
                    prefixed: self.prefixed,
                    tools: Vec::new(),
                    allow: None,
                    private: Vec::new(),
                    origin: crate::Origin::Flags,
                    observed: HashMap::new(),
                    labels: HashMap::new(),
                    withheld: HashMap::new(),
                    shared_account: false,
                });
                policies.push(None);
                continue;
            };
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
                shared_account: shared_account(&wrapped.spec),
            });
            policies.push(applied);
        }
        let catalog = Catalog::build(&listed, &self.limits)?;
        let rule = (catalog.has_private() || keep_rule).then(|| {
            PrivateRule::new(self.state.clone(), catalog.private_tools()).with_stateless_idle(self.stateless_idle)
        });
        // A server's resources and prompts are as private as its most
        // private tool: a server trusted with private data by one tool
        // may hold it in what it serves otherwise.
        let private: Vec<bool> =
            (0..servers.len()).map(|i| catalog.tools().iter().any(|t| t.server == i && t.private)).collect();
        let offerings =
            servers.iter().zip(offerings).map(|(w, o)| if w.is_some() { o.clone() } else { Default::default() });
        let offers = Offers::build(offerings.collect(), names.to_vec(), self.prefixed, private, &Policies(&policies));
        Ok(Built { catalog, rule, policies, offers })
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
        // Read once: the hash is of the very bytes the policy was parsed from.
        let (policy, sha256) = match source {
            PolicySource::File(path) => {
                let file = path.display().to_string();
                match std::fs::read_to_string(path) {
                    Ok(text) => (Policy::parse(&text, &file, &facts), audit_record::hex_sha256(text.as_bytes())),
                    Err(source) => (Err(crate::policy::PolicyError::Read { file, source }), String::new()),
                }
            }
            PolicySource::Inline { value, origin } => (
                Policy::from_value(value, origin, &facts),
                audit_record::hex_sha256(&serde_json::to_vec(value).unwrap_or_default()),
            ),
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
        Ok(Applied { limiter: RateLimiter::new(policy.clone(), self.state.clone()), policy, sha256 })
    }
}

impl Bridge {
    /// Rebuild the catalog from every wrapped server's current tools and
    /// swap it in with the next version. On failure the current catalog
    /// stays and the error is returned (and logged).
    pub async fn refresh_catalog(&self) -> Result<u64, BridgeError> {
        self.rebuild_catalog(true).await
    }

    /// Rebuild the catalog; `record`: the servers' tools changed, so the
    /// audit log gets their new lists (a learned result shape changes
    /// only stubs, and records nothing). One rebuild at a time (a reload
    /// is one too), so a rebuild never swaps in a catalog of settings a
    /// reload has replaced meanwhile.
    async fn rebuild_catalog(&self, record: bool) -> Result<u64, BridgeError> {
        let _one = self.inner.reloads.one_at_a_time().await;
        let held = self.current();
        let tools: Vec<_> = held.servers.iter().map(ServerHandle::tools).collect();
        let offerings: Vec<_> = held.servers.iter().map(ServerHandle::offering).collect();
        let names: Vec<String> = held.servers.iter().map(|s| s.name().to_string()).collect();
        let built = self.inner.rebuild.build(&held.wrapped, &names, &tools, &offerings, held.rule.is_some());
        if built.is_ok()
            && record
            && let Some(audit) = &self.inner.audit
        {
            // Recorded before the new catalog serves a call, and awaited:
            // the refresher is one of the tasks the closer waits for, so no
            // record of it is left in flight when the sink closes.
            for ((handle, tools), wrapped) in held.servers.iter().zip(&tools).zip(held.wrapped.iter()) {
                if wrapped.is_none() {
                    continue;
                }
                if let Err(e) = audit.append(tools_record(handle.name(), tools), Durability::Written).await {
                    tracing::error!(error = %e, "the changed tools could not be recorded");
                }
            }
        }
        let mut current = code_mode_core::sync::write(&self.inner.current);
        match built {
            Ok(built) => {
                let version = current.version + 1;
                tracing::info!(version, tools = built.catalog.tools().len(), "catalog refreshed");
                *current = Arc::new(Current::new(version, built, held.servers.clone(), held.wrapped.clone()));
                drop(current);
                self.prepare_meaning();
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
        let message = current.message.get_or_init(|| self.make_message(&current, false));
        self.with_packages(message)
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
        let packages = self.inner.runners.common();
        let fingerprint = crate::runners::fingerprint(&message.fingerprint, packages.as_deref());
        if request.known.as_deref() == Some(fingerprint.as_str()) {
            return proto::Catalog {
                version: message.version,
                tools: Vec::new(),
                max_calls: message.max_calls,
                call_timeout_ms: message.call_timeout_ms,
                approval_timeout_ms: message.approval_timeout_ms,
                ask_timeout_ms: message.ask_timeout_ms,
                fingerprint,
                unchanged: true,
                withheld: Vec::new(),
                stateless_idle_ms: message.stateless_idle_ms,
                features: None,
                listed: message.listed.clone(),
                packages,
                unavailable: message.unavailable.clone(),
            };
        }
        proto::Catalog { fingerprint, packages, ..message.clone() }
    }

    /// `message` with the packages the runners offer now (and the
    /// fingerprint that covers them).
    fn with_packages(&self, message: &proto::Catalog) -> proto::Catalog {
        let packages = self.inner.runners.common();
        let fingerprint = crate::runners::fingerprint(&message.fingerprint, packages.as_deref());
        proto::Catalog { fingerprint, packages, ..message.clone() }
    }

    fn make_message(&self, current: &Current, direct: bool) -> proto::Catalog {
        let several = current.wrapped.iter().filter(|w| w.is_some()).count() > 1;
        let tools = current.catalog.entries(several, direct);
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
        let unavailable: Vec<proto::Unavailable> = current
            .servers
            .iter()
            .filter_map(|s| s.login_needed().map(|why| proto::Unavailable { server: s.name().to_string(), why }))
            .collect();
        let listed = serde_json::to_vec(&(&definitions, &withheld, &unavailable)).unwrap_or_default();
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
            packages: None,
            unavailable,
        }
    }
}

/// The `tools` record of one server: its tools and their annotations.
pub(crate) fn tools_record(server: &str, tools: &[rmcp::model::Tool]) -> audit_record::Body {
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
/// (or new lists of resources, templates or prompts), or a result shape is
/// learned, until the servers stop or the bridge is gone. It follows the
/// servers of the current catalog: a reload's added servers are watched
/// from then on, a removed one no longer.
pub(crate) async fn refresher(bridge: Bridge, cancel: CancellationToken) {
    type Changes<T> = Vec<Option<tokio::sync::watch::Receiver<Arc<T>>>>;
    /// What woke the refresher.
    enum Event {
        /// A server's tools (or offering) changed; `false`: its actor ended.
        Changed {
            index: usize,
            tools: bool,
            alive: bool,
        },
        Learned,
        Reloaded,
    }
    let (learned, reloaded) = (bridge.inner.rebuild.learned.clone(), bridge.inner.reloads.reloaded.clone());
    let mut tools: Changes<Vec<rmcp::model::Tool>> = Vec::new();
    let mut offerings: Changes<Offering> = Vec::new();
    loop {
        {
            let current = bridge.current();
            for handle in current.servers.iter().skip(tools.len()) {
                tools.push(Some(handle.tools_changes()));
                offerings.push(Some(handle.offering_changes()));
            }
            for (index, wrapped) in current.wrapped.iter().enumerate() {
                if wrapped.is_none() {
                    tools[index] = None;
                    offerings[index] = None;
                }
            }
        }
        let event = {
            let tools_changed = first_change(&mut tools, true);
            let offering_changed = first_change(&mut offerings, false);
            tokio::select! {
                _ = cancel.cancelled() => return,
                event = tools_changed => event,
                event = offering_changed => event,
                () = reloaded.notified() => Event::Reloaded,
                () = learned.notified() => Event::Learned,
            }
        };
        let record = match event {
            Event::Reloaded => continue,
            Event::Changed { index, tools: which, alive: false } => {
                // Its actor ended: closed by a reload, or the bridge stops.
                if which {
                    tools[index] = None;
                } else {
                    offerings[index] = None;
                }
                continue;
            }
            Event::Changed { .. } => true,
            Event::Learned => {
                // Shapes learned by a burst of calls make one rebuild.
                tokio::time::sleep(LEARNED_SETTLE).await;
                false
            }
        };
        let _ = bridge.rebuild_catalog(record).await;
    }

    /// The first change among `changes` (pending when none is watched).
    async fn first_change<T>(changes: &mut Changes<T>, tools: bool) -> Event {
        let waits: Vec<_> = changes
            .iter_mut()
            .enumerate()
            .filter_map(|(index, rx)| {
                rx.as_mut().map(|rx| Box::pin(async move { (index, rx.changed().await.is_ok()) }))
            })
            .collect();
        if waits.is_empty() {
            return std::future::pending().await;
        }
        let ((index, alive), _, _) = futures::future::select_all(waits).await;
        Event::Changed { index, tools, alive }
    }
}

/// How long the refresher waits after a shape is learned before it
/// rebuilds the catalog, so that the other results of the same burst of
/// calls are in it too.
const LEARNED_SETTLE: Duration = Duration::from_millis(100);
