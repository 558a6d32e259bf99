//! One wrapped MCP server, over stdio or streamable HTTP, owned by one actor.
//!
//! The actor task owns the rmcp client session (and so the child process)
//! and publishes the current state of the server on a `watch` channel: up
//! (with the session's peer), down (exited, being restarted) or closed. Its
//! [`ServerHandle`] is cheap to clone and makes tool calls directly on the
//! current peer, which multiplexes concurrent requests; while the server is
//! down a call fails at once.
//!
//! When the server exits on its own (a crash), the calls in flight fail with
//! `TransportClosed` and the actor starts it again after a delay that doubles
//! from 100 ms up to 10 s with each exit or failed start, and starts over at
//! 100 ms once a server stayed up for 30 s ([`Backoff`]).
//!
//! The actor also owns the server's current tool list and publishes it on a
//! second `watch` ([`ServerHandle::tools_changes`]): the session's client
//! handler ([`Relay`]) turns a `notifications/tools/list_changed` from
//! the server into a wake-up of the actor, which lists the tools again; a
//! restarted server whose tools differ is published the same way. The bridge
//! rebuilds its catalog from what is published.
//!
//! A remote server ([`Transport::Http`]) is handled the same way: starting
//! it means connecting (`initialize` and `tools/list` within the start
//! timeout), and when its session ends (the HTTP connection is lost) the
//! actor reconnects with the same delays. Its requests go through
//! [`AuthorizedHttp`]: with an `auth` block each carries the server's
//! access token ([`Upstream`], crate `code-mode-upstream-auth`). A server
//! that needs a login (none stored, or its renewal refused) is not an
//! error: its state is [`Link::NeedsLogin`], it lists no tools, calls fail
//! naming the login command, and the actor connects once a login is
//! stored. One without an `auth` block that answers `401` with a login
//! challenge fails to start saying which block to add.
//!
//! Besides its tools the actor lists what else the server offers (its
//! resources, resource templates and prompts, and whether it completes
//! arguments, takes subscriptions and logs: an [`Offering`]) and publishes
//! it on a third `watch`, listed again on `notifications/resources/list_changed`
//! or `notifications/prompts/list_changed`.
//!
//! This actor's session is the server's *shared* session: every call whose
//! client cannot be asked anything uses it, and it declares no client
//! capabilities. A client that can be asked (sampling, elicitation, roots)
//! or listens to the server's log gets a session of its own
//! ([`open_own`], owned by [`crate::upstream`]), since a server's requests
//! and notifications carry no mark of the call they belong to on stdio.
//!
//! The session ends for good on shutdown, or when every handle is gone. The
//! child gets the minimal environment MCP clients give a stdio server plus
//! the names the user passed, never this process's environment.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use code_mode_upstream_auth::{AuthorizedHttp, Upstream};

use crate::BridgeError;
use crate::child::ChildTransport;
pub use crate::error::CallError;
use crate::relay::{Flights, Relay, Relisting};

mod open;
pub(crate) use open::open_own;
use open::{MAX_COMMAND_LINE, connect};

/// The variables a stdio MCP server gets by default (as MCP clients do),
/// when they are set here.
pub const DEFAULT_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How long a wrapped session gets to close; a stdio server's own close is
/// shorter ([`crate::child`]: its input closed, then SIGTERM, then SIGKILL),
/// and past this its process is killed (`kill_on_drop`).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The restart delays of a wrapped server that exits on its own.
pub const RESTART_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_secs(10), Duration::from_secs(30));

/// How to start (or reach) a wrapped server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// A name for logs and errors.
    pub name: String,
    /// A local child over stdio, or a remote server over HTTP.
    pub transport: Transport,
    /// How long starting may take: spawn (or connect), `initialize` and
    /// `tools/list` together ([`code_mode_core::defaults::START_TIMEOUT`] by
    /// default).
    pub start_timeout: Duration,
}

impl ServerSpec {
    /// The command or URL of the server, for errors.
    pub fn target(&self) -> &str {
        match &self.transport {
            Transport::Stdio(stdio) => &stdio.command,
            Transport::Http(http) => &http.url,
        }
    }

    /// The command line (program and arguments, cut to
    /// [`MAX_COMMAND_LINE`] characters) or URL of the server, for errors:
    /// `node /srv/index.js` says more than `node`.
    pub fn command_line(&self) -> String {
        match &self.transport {
            Transport::Stdio(stdio) => {
                let line = std::iter::once(&stdio.command).chain(&stdio.args).cloned().collect::<Vec<_>>().join(" ");
                crate::stubs::cut_chars(&line, MAX_COMMAND_LINE)
            }
            Transport::Http(http) => http.url.clone(),
        }
    }
}

/// How code-mode talks to a wrapped server.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A child process speaking MCP on its stdin/stdout.
    Stdio(StdioSpec),
    /// A remote server speaking streamable HTTP.
    Http(HttpSpec),
}

/// A wrapped stdio server: the child process to start.
#[derive(Debug, Clone)]
pub struct StdioSpec {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Names of variables passed from this process's environment.
    pub pass_env: Vec<String>,
    /// Variables set to the given values.
    pub set_env: Vec<(String, String)>,
}

/// A remote server over streamable HTTP.
#[derive(Clone)]
pub struct HttpSpec {
    /// The MCP endpoint, e.g. `https://example.com/mcp`.
    pub url: String,
    /// Headers sent with every request (values may hold secrets).
    pub headers: Vec<(String, String)>,
    /// Its authorization (the `auth` block), shared by every session with
    /// it; `None`: only `headers`.
    pub auth: Option<Upstream>,
}

impl std::fmt::Debug for HttpSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are often tokens: only their names are shown.
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("HttpSpec")
            .field("url", &self.url)
            .field("headers", &names)
            .field("auth", &self.auth.as_ref().map(|a| a.spec().kind()))
            .finish()
    }
}

/// Restart delays: `initial` after the first exit, doubled after each
/// further exit or failed start up to `max`, and back to `initial` after an
/// exit of a server that had stayed up for `stable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    stable: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays from `initial` doubling to `max`, reset after `stable` uptime.
    pub const fn new(initial: Duration, max: Duration, stable: Duration) -> Self {
        Self { initial, max, stable, next: initial }
    }

    /// The delay before restarting a server that exited after `uptime`.
    pub fn after_exit(&mut self, uptime: Duration) -> Duration {
        if uptime >= self.stable {
            self.next = self.initial;
        }
        self.take()
    }

    /// The delay before the next try after a failed start.
    pub fn after_failed_start(&mut self) -> Duration {
        self.take()
    }

    fn take(&mut self) -> Duration {
        let delay = self.next;
        self.next = delay.saturating_mul(2).min(self.max);
        delay
    }
}

/// The state of a wrapped server as its handles see it.
#[derive(Clone)]
enum Link {
    /// Running: calls go to this peer.
    Up(Peer<RoleClient>),
    /// Exited; the actor is restarting it.
    Restarting,
    /// Waiting for a person to log in (the message names the command).
    NeedsLogin(String),
    /// Closed for good.
    Closed,
}

/// A cheap handle on a wrapped server; calls go to whichever session of
/// the server is current.
#[derive(Clone)]
pub struct ServerHandle {
    name: String,
    spec: Arc<ServerSpec>,
    link: watch::Receiver<Link>,
    tools: watch::Receiver<Arc<Vec<Tool>>>,
    offering: watch::Receiver<Arc<Offering>>,
    /// The calls in flight on the shared session (their progress is routed
    /// by token).
    flights: Flights,
    /// Wake-ups of the actor to list again (clients' own sessions pass on
    /// the server's list changes they hear).
    relisting: Relisting,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle").field("name", &self.name).finish_non_exhaustive()
    }
}

type Session = RunningService<RoleClient, Relay>;

/// What a server offers besides tools, as it last listed it: the MCP
/// definitions as JSON (so every field the server sent, caching hints and
/// `_meta` included, passes through), and which optional requests it
/// serves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offering {
    /// Its resources (`Resource` objects).
    pub resources: Vec<serde_json::Value>,
    /// Its resource templates (`ResourceTemplate` objects).
    pub templates: Vec<serde_json::Value>,
    /// Its prompts (`Prompt` objects).
    pub prompts: Vec<serde_json::Value>,
    /// It declared the `resources` capability.
    pub has_resources: bool,
    /// It takes `resources/subscribe`.
    pub subscribe: bool,
    /// It declared the `prompts` capability.
    pub has_prompts: bool,
    /// It declared the `completions` capability.
    pub completions: bool,
    /// It declared the `logging` capability.
    pub logging: bool,
}

/// Everything each list request may bring back, at most: a server listing
/// more is cut here (and says so in the log), like an oversized result.
const MAX_LISTED: usize = 10_000;

/// List what `peer`'s server offers besides tools, by its capabilities. A
/// list that fails is left empty (and logged): the tools still serve.
async fn list_offering(name: &str, peer: &Peer<RoleClient>) -> Offering {
    let Some(info) = peer.peer_info() else { return Offering::default() };
    let caps = &info.capabilities;
    let mut offering = Offering {
        has_resources: caps.resources.is_some(),
        subscribe: caps.resources.as_ref().is_some_and(|r| r.subscribe == Some(true)),
        has_prompts: caps.prompts.is_some(),
        completions: caps.completions.is_some(),
        logging: caps.logging.is_some(),
        ..Offering::default()
    };
    fn json<T: serde::Serialize>(name: &str, what: &str, items: Vec<T>) -> Vec<serde_json::Value> {
        if items.len() > MAX_LISTED {
            tracing::warn!(server = %name, count = items.len(), "the server lists more {what} than {MAX_LISTED}: the rest are left out");
        }
        items.iter().take(MAX_LISTED).filter_map(|item| serde_json::to_value(item).ok()).collect()
    }
    if offering.has_resources {
        match peer.list_all_resources().await {
            Ok(items) => offering.resources = json(name, "resources", items),
            Err(e) => tracing::warn!(server = %name, error = %e, "listing the resources failed"),
        }
        match peer.list_all_resource_templates().await {
            Ok(items) => offering.templates = json(name, "resource templates", items),
            Err(e) => tracing::warn!(server = %name, error = %e, "listing the resource templates failed"),
        }
    }
    if offering.has_prompts {
        match peer.list_all_prompts().await {
            Ok(items) => offering.prompts = json(name, "prompts", items),
            Err(e) => tracing::warn!(server = %name, error = %e, "listing the prompts failed"),
        }
    }
    offering
}

/// The actor: owns the session and restarts the server when it exits.
/// Dropping the last handle or cancelling the token closes the session and
/// stops the child.
struct ServerActor {
    spec: ServerSpec,
    /// The current state; its receivers are the handles, so
    /// `link.closed()` resolves once every handle is gone.
    link: watch::Sender<Link>,
    cancel: CancellationToken,
    /// The server's current tools, as last listed.
    tools: watch::Sender<Arc<Vec<Tool>>>,
    /// What else it offers, as last listed.
    offering: watch::Sender<Arc<Offering>>,
    /// What its sessions' handler needs (a new session per restart).
    relay: Relay,
    backoff: Backoff,
}

/// How one session ended.
enum Ended {
    /// Closed on shutdown or because every handle is gone.
    Stopped,
    /// The server exited on its own.
    Exited,
    /// Its login can no longer be renewed: closed until a new one.
    LoginNeeded(String),
}

/// Why `spec`'s server cannot be reached now, when it is that it needs a
/// login.
fn login_needed(spec: &ServerSpec) -> Option<String> {
    match &spec.transport {
        Transport::Http(HttpSpec { auth: Some(auth), .. }) => match auth.status() {
            code_mode_upstream_auth::Status::NeedsLogin(why) => Some(why),
            _ => None,
        },
        _ => None,
    }
}

/// Start a wrapped server on its own (no bridge around it: its messages
/// for clients go nowhere), list its tools, and spawn its owner actor.
pub async fn start(
    spec: &ServerSpec,
    cancel: CancellationToken,
) -> Result<(ServerHandle, Vec<Tool>, tokio::task::JoinHandle<()>), BridgeError> {
    start_relaying(spec, Relay::shared(0, &spec.name, crate::relay::Upward::default()), cancel).await
}

/// [`start`] with `relay` as the handler of its shared session (see
/// [`Relay::shared`]).
pub(crate) async fn start_relaying(
    spec: &ServerSpec,
    relay: Relay,
    cancel: CancellationToken,
) -> Result<(ServerHandle, Vec<Tool>, tokio::task::JoinHandle<()>), BridgeError> {
    let (session, tools, offering, link) = match connect(spec, relay.clone()).await {
        Ok((session, tools)) => {
            let offering = list_offering(&spec.name, session.peer()).await;
            code_mode_telemetry::server_up(&spec.name, true);
            let link = Link::Up(session.peer().clone());
            (Some(session), tools, offering, link)
        }
        Err(e) => match login_needed(spec) {
            Some(why) => {
                tracing::warn!(server = %spec.name, "{why}: serving the other servers; this one joins once logged in");
                code_mode_telemetry::server_up(&spec.name, false);
                (None, Vec::new(), Offering::default(), Link::NeedsLogin(why))
            }
            None => return Err(e),
        },
    };
    let (link, link_rx) = watch::channel(link);
    let (tools_tx, tools_rx) = watch::channel(Arc::new(tools.clone()));
    let (offering_tx, offering_rx) = watch::channel(Arc::new(offering));
    let handle = ServerHandle {
        name: spec.name.clone(),
        spec: Arc::new(spec.clone()),
        link: link_rx,
        tools: tools_rx,
        offering: offering_rx,
        flights: relay.flights().clone(),
        relisting: relay.relisting(),
    };
    let actor = ServerActor {
        spec: spec.clone(),
        link,
        cancel,
        tools: tools_tx,
        offering: offering_tx,
        relay,
        backoff: RESTART_BACKOFF,
    };
    let task = tokio::spawn(actor.run(session));
    Ok((handle, tools, task))
}

impl ServerActor {
    async fn run(mut self, first: Option<Session>) {
        let name = self.spec.name.clone();
        let mut next = first;
        'served: loop {
            let session = match next.take() {
                Some(session) => session,
                None => match self.after_login().await {
                    Some(session) => session,
                    None => break,
                },
            };
            let up_since = Instant::now();
            match self.serve(session).await {
                Ended::Stopped => break,
                Ended::LoginNeeded(why) => {
                    self.needs_login(why);
                    continue;
                }
                Ended::Exited => {}
            }
            code_mode_telemetry::server_exited(&name);
            self.link.send_replace(Link::Restarting);
            let uptime = up_since.elapsed();
            let mut delay = self.backoff.after_exit(uptime);
            tracing::warn!(server = %name, uptime_ms = uptime.as_millis() as u64, "the wrapped server exited: restarting it in {delay:?}");
            let session = loop {
                if !self.pause(delay).await {
                    self.link.send_replace(Link::Closed);
                    return;
                }
                let started = tokio::select! {
                    started = connect(&self.spec, self.relay.clone()) => started,
                    // Dropping a start in progress kills its child.
                    _ = self.stopping() => {
                        self.link.send_replace(Link::Closed);
                        return;
                    }
                };
                match started {
                    Ok((session, tools)) => {
                        self.publish_tools(tools, "the restarted server lists other tools");
                        let offering = list_offering(&self.spec.name, session.peer()).await;
                        self.publish_offering(offering, "the restarted server offers other resources or prompts");
                        break session;
                    }
                    Err(e) => {
                        if let Some(why) = login_needed(&self.spec) {
                            self.needs_login(why);
                            continue 'served;
                        }
                        delay = self.backoff.after_failed_start();
                        tracing::warn!(server = %name, error = %e, "restarting the wrapped server failed: next try in {delay:?}");
                    }
                }
            };
            code_mode_telemetry::server_up(&name, true);
            tracing::info!(server = %name, "the wrapped server runs again");
            self.link.send_replace(Link::Up(session.peer().clone()));
            next = Some(session);
        }
        self.link.send_replace(Link::Closed);
    }

    /// The server needs a login: calls fail naming it, its tools leave the
    /// catalog until then.
    fn needs_login(&self, why: String) {
        tracing::warn!(server = %self.spec.name, "{why}");
        code_mode_telemetry::server_up(&self.spec.name, false);
        self.link.send_replace(Link::NeedsLogin(why));
        self.publish_tools(Vec::new(), "the server needs a login");
        self.publish_offering(Offering::default(), "the server needs a login");
    }

    /// Wait for a login to be stored, then connect; `None` when the actor
    /// must stop first.
    async fn after_login(&mut self) -> Option<Session> {
        let Transport::Http(HttpSpec { auth: Some(auth), .. }) = &self.spec.transport else { return None };
        let auth = auth.clone();
        loop {
            tokio::select! {
                _ = auth.wait_for_login() => {}
                _ = self.stopping() => return None,
            }
            let started = tokio::select! {
                started = connect(&self.spec, self.relay.clone()) => started,
                _ = self.stopping() => return None,
            };
            match started {
                Ok((session, tools)) => {
                    tracing::info!(server = %self.spec.name, "logged in: the server joins the catalog");
                    self.publish_tools(tools, "the server was logged in to");
                    let offering = list_offering(&self.spec.name, session.peer()).await;
                    self.publish_offering(offering, "the server was logged in to");
                    code_mode_telemetry::server_up(&self.spec.name, true);
                    self.link.send_replace(Link::Up(session.peer().clone()));
                    return Some(session);
                }
                Err(e) => {
                    let delay = self.backoff.after_failed_start();
                    tracing::warn!(server = %self.spec.name, error = %e, "connecting after the login failed: next try in {delay:?}");
                    if !self.pause(delay).await {
                        return None;
                    }
                }
            }
        }
    }

    /// Serve one session until it ends: closed by us on shutdown (or when
    /// every handle is gone), or exited on its own.
    /// Meanwhile, list the tools (or the rest of what it offers) again
    /// whenever the server says they changed.
    async fn serve(&self, session: Session) -> Ended {
        let stop = session.cancellation_token();
        let relisting: Relisting = session.service().relisting();
        let peer = session.peer().clone();
        let ended = session.waiting();
        tokio::pin!(ended);
        let mut auth = match &self.spec.transport {
            Transport::Http(HttpSpec { auth: Some(auth), .. }) => Some(auth.status_changes()),
            _ => None,
        };
        let mut withdrawn = None;
        loop {
            tokio::select! {
                _ = self.stopping() => break,
                changed = async { auth.as_mut()?.changed().await.ok() }, if auth.is_some() => {
                    if changed.is_none() {
                        auth = None;
                    } else if let Some(why) = login_needed(&self.spec) {
                        withdrawn = Some(why);
                        break;
                    }
                }
                reason = &mut ended => {
                    tracing::debug!(server = %self.spec.name, ?reason, "the session ended");
                    return Ended::Exited;
                }
                // Always on the shared session, whichever session announced
                // the change (see `Relisting`).
                _ = relisting.tools.notified() => {
                    let listed = tokio::select! {
                        listed = tokio::time::timeout(self.spec.start_timeout, peer.list_all_tools()) => listed,
                        _ = self.stopping() => break,
                    };
                    match listed {
                        Ok(Ok(tools)) => self.publish_tools(tools, "the server's tool list changed"),
                        Ok(Err(e)) => tracing::warn!(server = %self.spec.name, error = %e, "listing the changed tools failed: the catalog keeps the old list"),
                        Err(_) => tracing::warn!(server = %self.spec.name, "listing the changed tools timed out: the catalog keeps the old list"),
                    }
                }
                _ = relisting.offering.notified() => {
                    let listed = tokio::select! {
                        listed = tokio::time::timeout(self.spec.start_timeout, list_offering(&self.spec.name, &peer)) => listed,
                        _ = self.stopping() => break,
                    };
                    match listed {
                        Ok(offering) => self.publish_offering(offering, "the server's resources or prompts changed"),
                        Err(_) => tracing::warn!(server = %self.spec.name, "listing the changed resources or prompts timed out: the catalog keeps the old lists"),
                    }
                }
            }
        }
        tracing::debug!(server = %self.spec.name, "closing the wrapped server");
        stop.cancel();
        if tokio::time::timeout(CLOSE_TIMEOUT, ended).await.is_err() {
            tracing::warn!(server = %self.spec.name, "the wrapped server did not close in time: killed");
        }
        match withdrawn {
            Some(why) => Ended::LoginNeeded(why),
            None => Ended::Stopped,
        }
    }

    /// Resolves when the actor must stop: on shutdown, or once every handle
    /// is gone.
    async fn stopping(&self) {
        tokio::select! {
            _ = self.cancel.cancelled() => {}
            _ = self.link.closed() => {}
        }
    }

    /// Wait `delay`; false when the actor must stop instead.
    async fn pause(&self, delay: Duration) -> bool {
        tokio::select! {
            biased;
            _ = self.stopping() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }

    /// Publish `tools` as the server's current tools when they differ from
    /// the last ones, logging what changed.
    fn publish_tools(&self, tools: Vec<Tool>, why: &str) {
        let before = self.tools.borrow().clone();
        if tools == *before {
            tracing::debug!(server = %self.spec.name, "{why}: listed again, unchanged");
            return;
        }
        let names = |list: &[Tool]| list.iter().map(|t| t.name.to_string()).collect::<std::collections::BTreeSet<_>>();
        let (old, new) = (names(&before), names(&tools));
        let added: Vec<_> = new.difference(&old).collect();
        let removed: Vec<_> = old.difference(&new).collect();
        let changed: Vec<_> = tools
            .iter()
            .filter(|t| before.iter().any(|old| old.name == t.name && old != *t))
            .map(|t| t.name.to_string())
            .collect();
        tracing::info!(server = %self.spec.name, ?added, ?removed, ?changed, "{why}: refreshing the catalog");
        self.tools.send_replace(Arc::new(tools));
    }
}

impl ServerActor {
    /// Publish `offering` when it differs from the last one.
    fn publish_offering(&self, offering: Offering, why: &str) {
        if offering == **self.offering.borrow() {
            tracing::debug!(server = %self.spec.name, "{why}: listed again, unchanged");
            return;
        }
        tracing::info!(
            server = %self.spec.name,
            resources = offering.resources.len(),
            templates = offering.templates.len(),
            prompts = offering.prompts.len(),
            "{why}: refreshing the catalog"
        );
        self.offering.send_replace(Arc::new(offering));
    }
}

impl ServerHandle {
    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the server is started or reached.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The server's authorization when each identity has its own (token
    /// exchange, or an oauth block `"per": "identity"`): its calls then go
    /// over a session of the caller's own, never the shared one.
    pub fn per_identity_auth(&self) -> Option<&Upstream> {
        match &self.spec.transport {
            Transport::Http(HttpSpec { auth: Some(auth), .. }) if auth.is_per_identity() => Some(auth),
            _ => None,
        }
    }

    /// What the server offers besides tools, as last listed.
    pub fn offering(&self) -> Arc<Offering> {
        self.offering.borrow().clone()
    }

    /// A receiver that sees each new [`Offering`] of the server.
    pub fn offering_changes(&self) -> watch::Receiver<Arc<Offering>> {
        self.offering.clone()
    }

    /// The wake-ups of the server's actor to list again.
    pub(crate) fn relisting(&self) -> Relisting {
        self.relisting.clone()
    }

    /// The shared session's peer and the calls in flight on it; fails at
    /// once while the server is being restarted or after it was closed.
    pub(crate) fn shared(&self) -> Result<(Peer<RoleClient>, Flights), CallError> {
        match &*self.link.borrow() {
            Link::Up(peer) => Ok((peer.clone(), self.flights.clone())),
            Link::Restarting => Err(CallError::Restarting),
            Link::NeedsLogin(why) => Err(CallError::NeedsLogin(why.clone())),
            Link::Closed => Err(CallError::Closed),
        }
    }

    /// Why the server waits for a login (naming the command), if it does.
    pub fn login_needed(&self) -> Option<String> {
        match &*self.link.borrow() {
            Link::NeedsLogin(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// Why the server cannot be called for want of a login, as its
    /// authorization knows it now (before its actor has closed the
    /// session): a call that failed meanwhile is refused with this.
    pub fn login_needed_now(&self) -> Option<String> {
        login_needed(&self.spec).or_else(|| self.login_needed())
    }

    /// The server's current tools, as last listed.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.tools.borrow().clone()
    }

    /// A receiver that sees each new tool list of the server; its
    /// `changed()` fails once the server's actor has stopped.
    pub fn tools_changes(&self) -> watch::Receiver<Arc<Vec<Tool>>> {
        self.tools.clone()
    }

    /// Call a tool by the name the server lists, with a timeout. Fails at
    /// once while the server is being restarted or after it was closed.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        timeout: Duration,
    ) -> Result<CallToolResult, CallError> {
        let peer = match &*self.link.borrow() {
            Link::Up(peer) => peer.clone(),
            Link::Restarting => return Err(CallError::Restarting),
            Link::NeedsLogin(why) => return Err(CallError::NeedsLogin(why.clone())),
            Link::Closed => return Err(CallError::Closed),
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn restart_delays_double_up_to_the_cap_and_start_over_after_a_stable_run() {
        let mut b = Backoff::new(100 * MS, 1000 * MS, 30_000 * MS);
        assert_eq!(b.after_exit(10 * MS), 100 * MS);
        assert_eq!(b.after_failed_start(), 200 * MS);
        assert_eq!(b.after_failed_start(), 400 * MS);
        // A quick exit after a successful restart keeps doubling.
        assert_eq!(b.after_exit(5_000 * MS), 800 * MS);
        assert_eq!(b.after_failed_start(), 1000 * MS);
        assert_eq!(b.after_failed_start(), 1000 * MS, "capped");
        // Up for the stable period: the next exit starts over.
        assert_eq!(b.after_exit(30_000 * MS), 100 * MS);
        assert_eq!(b.after_exit(1 * MS), 200 * MS);
    }

    #[test]
    fn the_default_restart_delays_run_from_100_ms_to_10_s() {
        let mut b = RESTART_BACKOFF;
        let delays: Vec<Duration> = (0..9).map(|_| b.after_failed_start()).collect();
        assert_eq!(delays[0], 100 * MS);
        assert_eq!(delays[6], 6_400 * MS);
        assert_eq!(delays[7], 10_000 * MS);
        assert_eq!(delays[8], 10_000 * MS);
    }
}
