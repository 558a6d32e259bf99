//! One remote server's authorization in this process: [`Upstream`], a
//! cheap handle shared by every session code-mode opens with the server
//! (the shared one, clients' own, a reconnect), owning its cached grant.
//!
//! It hands out the access token for each request, renews it before it
//! expires (one renewal at a time here, and across processes through the
//! vault's lock), reacts to the server's `401` (renew once; else a new
//! login is needed) and `403 insufficient_scope` (note the scope for the
//! next login; a machine account asks for it at once), and publishes
//! whether the server can be reached now ([`Status`]).
//!
//! In `serve` ([`Mode::Serve`]) nothing here talks to a person: a server
//! that needs a login says so and names the command. In `login`
//! ([`Mode::Login`]) the same reactions run the login instead: the first
//! request goes without a token, and the server's challenge starts the
//! authorization (at most one step-up after it).
//!
//! What it does when parts fail: the authorization server down or slow at
//! a renewal answers [`UpstreamError::AuthorizationServer`] within
//! [`RENEW_TIMEOUT`] (the grant is kept; the next call tries again); the
//! vault unreadable or the key wrong answers [`UpstreamError::Vault`],
//! which stops startup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{UpstreamError, VaultError};
use crate::flow::{self, Renewal};
use crate::grant::{Grant, now, scope_list, union};
use crate::login::Loopback;
use crate::spec::AuthSpec;
use crate::vault::Vault;

/// The longest a renewal at the authorization server may take.
pub const RENEW_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a server waiting for a login looks for one.
const LOGIN_POLL: Duration = Duration::from_secs(1);

static DEFAULT_VAULT: OnceLock<Vault> = OnceLock::new();

/// Set where this process keeps grants (the `bridge` service: the state
/// store); by default the files of the user's state folder. Once.
pub fn set_default_vault(vault: Vault) -> bool {
    DEFAULT_VAULT.set(vault).is_ok()
}

fn default_vault() -> Result<Vault, VaultError> {
    match DEFAULT_VAULT.get() {
        Some(vault) => Ok(vault.clone()),
        None => Vault::from_environment(),
    }
}

/// Whether the server can be reached with the grant now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Not looked at yet.
    Unknown,
    /// A usable grant.
    LoggedIn,
    /// A person must log in (the message names the command).
    NeedsLogin(String),
}

/// Who does the person's step.
#[derive(Clone)]
pub enum Mode {
    /// Nobody: a server that needs a login waits for `code-mode login`.
    Serve,
    /// This process logs in (the `login` command).
    Login(Arc<Interactive>),
}

/// Says where to log in: the server's name and the authorization URL.
pub type Announce = Box<dyn Fn(&str, &str) + Send + Sync>;

/// How `login` shows the authorization URL.
pub struct Interactive {
    /// Open it in a browser when one is at hand.
    pub open_browser: bool,
    /// How long the person has.
    pub timeout: Duration,
    /// Say where to log in (server, URL): `login` prints it.
    pub announce: Announce,
}

/// One remote server's authorization: a cheap handle.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

struct Inner {
    server: String,
    resource: String,
    spec: AuthSpec,
    command: String,
    vault: OnceLock<Result<Vault, VaultError>>,
    cache: Mutex<Option<Grant>>,
    renewing: tokio::sync::Mutex<()>,
    status: watch::Sender<Status>,
    mode: Mode,
    /// The last `WWW-Authenticate` challenge the server sent.
    challenge: Mutex<Option<String>>,
    /// `login`: authorized once in this run; a step-up already made.
    authorized: Mutex<(bool, bool)>,
    /// `login`: why the person's step or the code exchange failed.
    failed: Mutex<Option<UpstreamError>>,
    /// A machine account's scopes asked for after a `403`.
    stepped: Mutex<Vec<String>>,
    /// The identity whose authorization this is (token exchange); `None`:
    /// the deployment's.
    identity: Option<String>,
    /// What the deployment's handle and its identities' share.
    family: Arc<Family>,
}

/// Shared by a server's handle and the handles of its identities.
#[derive(Default)]
struct Family {
    /// Each identity's handle, made once.
    identities: Mutex<HashMap<String, Upstream>>,
    /// Where token exchange is made, once discovered.
    endpoint: Mutex<Option<crate::exchange::Endpoint>>,
}

/// Identities' handles kept per server; past this the map starts over
/// (handles in use live on in their sessions).
const MAX_IDENTITIES: usize = 10_000;

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("server", &self.inner.server)
            .field("resource", &self.inner.resource)
            .field("kind", &self.inner.spec.kind())
            .finish()
    }
}

impl Upstream {
    /// The authorization of `server` at `resource` (its URL) by `spec`;
    /// `command` is what a person runs to log in to it. Grants live in
    /// `vault`, or this process's default one, resolved at first use.
    pub fn new(server: &str, resource: &str, spec: AuthSpec, command: &str, vault: Option<Vault>, mode: Mode) -> Self {
        let lock = OnceLock::new();
        if let Some(vault) = vault {
            let _ = lock.set(Ok(vault));
        }
        Self {
            inner: Arc::new(Inner {
                server: server.to_string(),
                resource: resource.to_string(),
                spec,
                command: command.to_string(),
                vault: lock,
                cache: Mutex::new(None),
                renewing: tokio::sync::Mutex::new(()),
                status: watch::Sender::new(Status::Unknown),
                mode,
                challenge: Mutex::new(None),
                authorized: Mutex::new((false, false)),
                failed: Mutex::new(None),
                stepped: Mutex::new(Vec::new()),
                identity: None,
                family: Arc::default(),
            }),
        }
    }

    /// The same server's authorization for one `identity` (token exchange:
    /// its own token, cache and vault record); the same handle each time.
    pub fn for_identity(&self, identity: &str) -> Upstream {
        let mut identities = code_mode_core::sync::lock(&self.inner.family.identities);
        if let Some(found) = identities.get(identity) {
            return found.clone();
        }
        if identities.len() >= MAX_IDENTITIES {
            identities.clear();
        }
        let vault = OnceLock::new();
        if let Some(resolved) = self.inner.vault.get() {
            let _ = vault.set(resolved.clone());
        }
        let handle = Upstream {
            inner: Arc::new(Inner {
                server: self.inner.server.clone(),
                resource: self.inner.resource.clone(),
                spec: self.inner.spec.clone(),
                command: self.inner.command.clone(),
                vault,
                cache: Mutex::new(None),
                renewing: tokio::sync::Mutex::new(()),
                status: watch::Sender::new(Status::Unknown),
                mode: Mode::Serve,
                challenge: Mutex::new(code_mode_core::sync::lock(&self.inner.challenge).clone()),
                authorized: Mutex::new((false, false)),
                failed: Mutex::new(None),
                stepped: Mutex::new(Vec::new()),
                identity: Some(identity.to_string()),
                family: self.inner.family.clone(),
            }),
        };
        identities.insert(identity.to_string(), handle.clone());
        handle
    }

    /// The identity this handle authorizes (`None`: the deployment).
    pub fn identity(&self) -> Option<&str> {
        self.inner.identity.as_deref()
    }

    /// True when each identity acts at this server with its own grant
    /// (token exchange, or `"per": "identity"` on an oauth block, see [`crate::per`]): its calls never go over
    /// the shared session.
    pub fn is_per_identity(&self) -> bool {
        self.inner.spec.is_per_identity() || crate::per::is_per_identity(&self.inner.spec)
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// The server's URL.
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// The `auth` block.
    pub fn spec(&self) -> &AuthSpec {
        &self.inner.spec
    }

    /// What a person runs to log in.
    pub fn command(&self) -> &str {
        &self.inner.command
    }

    /// The vault the grant lives in.
    pub fn vault(&self) -> Result<Vault, UpstreamError> {
        self.inner.vault.get_or_init(default_vault).clone().map_err(|source| self.vault_error(source))
    }

    /// Whether the server can be reached with the grant now.
    pub fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    /// A receiver that sees each change of [`Upstream::status`].
    pub fn status_changes(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    /// The grant as stored now (for `login --status`).
    pub async fn stored(&self) -> Result<Option<Grant>, UpstreamError> {
        self.vault()?.load_for(&self.inner.resource, self.identity()).await.map_err(|e| self.vault_error(e))
    }

    /// The access token for the next request: the cached one while it is
    /// fresh, else a renewed one. `Ok(None)`: send without one (`login`'s
    /// first request, whose challenge starts the authorization).
    pub async fn token(&self) -> Result<Option<String>, UpstreamError> {
        if let Mode::Login(_) = &self.inner.mode
            && self.inner.spec.is_interactive()
            && !code_mode_core::sync::lock(&self.inner.authorized).0
        {
            return Ok(None);
        }
        if let Some(grant) = code_mode_core::sync::lock(&self.inner.cache).as_ref()
            && let Some(token) = grant.usable_token(now())
        {
            return Ok(Some(token.to_string()));
        }
        self.renew(None, false).await.map(Some)
    }

    /// Note the server's challenge (a `401` or `403`), for discovery.
    pub fn note_challenge(&self, challenge: &str) {
        *code_mode_core::sync::lock(&self.inner.challenge) = Some(challenge.to_string());
    }

    /// The server refused `sent` (or a request without a token) with
    /// `401`: the token to retry with, once.
    pub async fn rejected(&self, sent: Option<&str>, challenge: &str) -> Result<String, UpstreamError> {
        self.note_challenge(challenge);
        if let Mode::Login(interactive) = &self.inner.mode
            && self.inner.spec.is_interactive()
        {
            let first = !code_mode_core::sync::lock(&self.inner.authorized).0;
            if first || sent.is_some() {
                return self.authorize(interactive, Some(challenge), &[]).await;
            }
        }
        if sent.is_none() && self.inner.spec.is_interactive() {
            return Err(self.needs_login("not logged in".into()));
        }
        self.renew(sent, false).await
    }

    /// The server refused `sent` with `403 insufficient_scope` naming
    /// `challenge`'s scope: the token to retry with (a machine account's
    /// step-up, or `login`'s), or why not.
    pub async fn insufficient(&self, sent: Option<&str>, challenge: &str) -> Result<String, UpstreamError> {
        self.note_challenge(challenge);
        let wanted = reqwest::Url::parse(&self.inner.resource)
            .ok()
            .and_then(|base| rmcp::transport::WWWAuthenticateParams::parse(challenge, &base).scope)
            .map(|s| scope_list(&s))
            .unwrap_or_default();
        let scope = if wanted.is_empty() { "unnamed".to_string() } else { wanted.join(" ") };
        let still = || UpstreamError::StillInsufficient { server: self.inner.server.clone(), scope: scope.clone() };
        match (&self.inner.mode, &self.inner.spec) {
            (_, AuthSpec::ClientCredentials(_) | AuthSpec::Enterprise(_) | AuthSpec::TokenExchange(_)) => {
                {
                    let mut stepped = code_mode_core::sync::lock(&self.inner.stepped);
                    if wanted.is_empty() || wanted.iter().all(|w| stepped.contains(w)) {
                        return Err(still());
                    }
                    *stepped = union(&stepped, wanted.iter().cloned());
                }
                self.renew(None, true).await
            }
            (Mode::Login(interactive), AuthSpec::OAuth(_)) => {
                let stepped_up = std::mem::replace(&mut code_mode_core::sync::lock(&self.inner.authorized).1, true);
                if stepped_up {
                    return Err(still());
                }
                self.authorize(interactive, Some(challenge), &wanted).await
            }
            (Mode::Serve, AuthSpec::OAuth(_)) => {
                let vault = self.vault()?;
                let _guard =
                    vault.lock_for(&self.inner.resource, self.identity()).await.map_err(|e| self.vault_error(e))?;
                let mut grant = match vault
                    .load_for(&self.inner.resource, self.identity())
                    .await
                    .map_err(|e| self.vault_error(e))?
                {
                    Some(grant) => grant,
                    None => return Err(self.needs_login("not logged in".into())),
                };
                if let Some(token) = grant.usable_token(now())
                    && sent != Some(token)
                {
                    // A login since (the step-up itself): retry with it.
                    let token = token.to_string();
                    *code_mode_core::sync::lock(&self.inner.cache) = Some(grant);
                    return Ok(token);
                }
                if !wanted.is_empty() && wanted.iter().all(|w| grant.scopes.contains(w)) {
                    return Err(still());
                }
                grant.wanted = union(&grant.wanted, wanted.iter().cloned());
                vault.save(&grant).await.map_err(|e| self.vault_error(e))?;
                *code_mode_core::sync::lock(&self.inner.cache) = Some(grant);
                Err(UpstreamError::NeedsScope {
                    server: self.inner.server.clone(),
                    scope,
                    command: self.inner.command.clone(),
                })
            }
        }
    }

    /// The server refused even a fresh token: a person must log in again.
    pub async fn refused_fresh(&self) -> UpstreamError {
        let why = "the server refused a freshly renewed token".to_string();
        if self.inner.spec.is_interactive() {
            let _ = self.withdraw(&why).await;
            self.needs_login(why)
        } else {
            UpstreamError::AuthorizationServer {
                server: self.inner.server.clone(),
                at: "its token".into(),
                why: "was refused by the server even fresh".into(),
            }
        }
    }

    /// Wait until a login for this server is stored (another process ran
    /// `code-mode login`), looking every second.
    pub async fn wait_for_login(&self) {
        loop {
            tokio::time::sleep(LOGIN_POLL).await;
            let Ok(vault) = self.vault() else { continue };
            if let Ok(Some(grant)) = vault.load_for(&self.inner.resource, self.identity()).await
                && grant.login_needed.is_none()
                && grant.tokens.is_some()
            {
                *code_mode_core::sync::lock(&self.inner.cache) = Some(grant);
                self.inner.status.send_replace(Status::LoggedIn);
                return;
            }
        }
    }

    /// Renew (or, for a machine account, obtain) the access token. `sent`:
    /// the token a server refused, which a renewal by another process may
    /// already have replaced; `force`: renew even so (a step-up).
    async fn renew(&self, sent: Option<&str>, force: bool) -> Result<String, UpstreamError> {
        let _one = self.inner.renewing.lock().await;
        let vault = self.vault()?;
        let _guard = vault.lock_for(&self.inner.resource, self.identity()).await.map_err(|e| self.vault_error(e))?;
        let stored = vault.load_for(&self.inner.resource, self.identity()).await.map_err(|e| self.vault_error(e))?;
        if let Some(grant) = &stored
            && !force
            && let Some(token) = grant.usable_token(now())
            && sent != Some(token)
        {
            let token = token.to_string();
            *code_mode_core::sync::lock(&self.inner.cache) = stored;
            self.inner.status.send_replace(Status::LoggedIn);
            return Ok(token);
        }
        // Names the authorization server in an error even before anything
        // was cached (the first renewal after a start).
        let issuer = stored.as_ref().and_then(|g| g.issuer.clone());
        let renewed = match (&self.inner.spec, stored) {
            (AuthSpec::ClientCredentials(spec), _) => {
                let challenge = code_mode_core::sync::lock(&self.inner.challenge).clone();
                let extra = code_mode_core::sync::lock(&self.inner.stepped).clone();
                let exchange = flow::client_credentials(&self.inner.resource, spec, challenge.as_deref(), &extra);
                self.bounded(exchange).await
            }
            (AuthSpec::Enterprise(spec), _) => {
                let challenge = code_mode_core::sync::lock(&self.inner.challenge).clone();
                let extra = code_mode_core::sync::lock(&self.inner.stepped).clone();
                let exchange = crate::enterprise::exchange(&self.inner.resource, spec, challenge.as_deref(), &extra);
                match self.bounded(exchange).await {
                    Ok(grant) => {
                        tracing::info!(server = %self.inner.server, "exchanged the ID token for an access token (enterprise-managed authorization)");
                        Ok(grant)
                    }
                    Err(Renewal::Rejected(why) | Renewal::Failed(why)) => {
                        return Err(UpstreamError::Enterprise { server: self.inner.server.clone(), why });
                    }
                }
            }
            (AuthSpec::TokenExchange(spec), _) => {
                let challenge = code_mode_core::sync::lock(&self.inner.challenge).clone();
                match self.inner.identity.clone() {
                    // The deployment's own token (client credentials of the
                    // exchange's client): it lists what the server offers,
                    // and is never used for a call.
                    None => {
                        let lister = crate::spec::ClientCredentialsSpec {
                            client_id: spec.client_id.clone(),
                            credential: crate::spec::Credential::Secret(spec.client_secret.clone()),
                            scopes: spec.scopes.clone(),
                        };
                        let grant = flow::client_credentials(&self.inner.resource, &lister, challenge.as_deref(), &[]);
                        self.bounded(grant).await
                    }
                    Some(identity) => {
                        let subject = self.caller_token(&identity).await?;
                        match self.bounded(self.exchange(spec, challenge.as_deref(), &identity, subject.expose())).await
                        {
                            Ok(grant) => Ok(grant),
                            Err(Renewal::Rejected(why) | Renewal::Failed(why)) => {
                                let at = self.exchange_place(spec);
                                return Err(UpstreamError::TokenExchange {
                                    server: self.inner.server.clone(),
                                    at,
                                    why,
                                });
                            }
                        }
                    }
                }
            }
            (AuthSpec::OAuth(_), None) => return Err(self.needs_login("not logged in".into())),
            (AuthSpec::OAuth(_), Some(grant)) if grant.login_needed.is_some() => {
                return Err(self.needs_login(grant.login_needed.clone().unwrap_or_default()));
            }
            (AuthSpec::OAuth(_), Some(mut grant)) => match self.bounded(flow::refresh(&grant)).await {
                Ok((tokens, scopes)) => {
                    grant.tokens = Some(tokens);
                    if let Some(scopes) = scopes {
                        grant.scopes = scopes;
                    }
                    tracing::info!(server = %self.inner.server, "renewed the access token");
                    code_mode_telemetry::upstream_account(&self.inner.server, "refresh");
                    Ok(grant)
                }
                Err(e) => Err(e),
            },
        };
        if renewed.is_err() && self.inner.spec.is_interactive() {
            code_mode_telemetry::upstream_account(&self.inner.server, "failure");
        }
        match renewed {
            Ok(grant) => {
                vault.save(&grant).await.map_err(|e| self.vault_error(e))?;
                let token = grant.tokens.as_ref().map(|t| t.access.clone()).unwrap_or_default();
                *code_mode_core::sync::lock(&self.inner.cache) = Some(grant);
                self.inner.status.send_replace(Status::LoggedIn);
                Ok(token)
            }
            Err(Renewal::Rejected(why)) if self.inner.spec.is_interactive() => {
                tracing::warn!(server = %self.inner.server, %why, "the login can no longer be renewed: a new login is needed");
                drop(_guard);
                self.withdraw(&why).await?;
                Err(self.needs_login(why))
            }
            Err(Renewal::Rejected(why) | Renewal::Failed(why)) => Err(self.as_error(why, issuer)),
        }
    }

    /// `identity`'s current OAuth access token from the frontend, or why
    /// there is none to exchange.
    async fn caller_token(&self, identity: &str) -> Result<crate::spec::Secret, UpstreamError> {
        let refused = |why: &str| UpstreamError::NoCallerToken {
            server: self.inner.server.clone(),
            identity: identity.to_string(),
            why: why.to_string(),
        };
        let Some(tokens) = crate::caller::caller_tokens() else {
            return Err(refused("has no OAuth token here: this bridge was given no store of callers' tokens"));
        };
        match tokens.current(identity).await {
            Ok(Some(token)) if token.expires_at.is_none_or(|at| at > now()) => Ok(token.token),
            Ok(Some(_)) => Err(refused("has an OAuth access token that expired: call again with a fresh one")),
            Ok(None) => Err(refused(
                "did not authenticate by OAuth (a static token from --auth-tokens has nothing to exchange): \
                 only a caller with an OAuth access token from the frontend's issuer can call this server \
                 (with the services apart, its frontend keeps callers' tokens only given CODE_MODE_TOKEN_KEY, \
                 the bridges' key)",
            )),
            Err(source) => Err(self.vault_error(source)),
        }
    }

    /// Exchange `subject_token` for `identity`'s token of this server,
    /// discovering where once per server.
    async fn exchange(
        &self,
        spec: &crate::spec::TokenExchangeSpec,
        challenge: Option<&str>,
        identity: &str,
        subject_token: &str,
    ) -> Result<Grant, Renewal> {
        let known = code_mode_core::sync::lock(&self.inner.family.endpoint).clone();
        let endpoint = match known {
            Some(endpoint) => endpoint,
            None => {
                let found = crate::exchange::discover(&self.inner.resource, spec, challenge).await?;
                *code_mode_core::sync::lock(&self.inner.family.endpoint) = Some(found.clone());
                found
            }
        };
        crate::exchange::exchange(&self.inner.resource, spec, &endpoint, identity, subject_token).await
    }

    /// The authorization server of token exchange, for messages.
    fn exchange_place(&self, spec: &crate::spec::TokenExchangeSpec) -> String {
        let known = code_mode_core::sync::lock(&self.inner.family.endpoint).clone();
        known
            .and_then(|e| e.issuer.or(Some(e.token_endpoint)))
            .or_else(|| spec.token_endpoint.clone())
            .unwrap_or_else(|| "of this server".to_string())
    }

    /// Run `future` at the authorization server within [`RENEW_TIMEOUT`].
    async fn bounded<T>(&self, future: impl Future<Output = Result<T, Renewal>>) -> Result<T, Renewal> {
        match tokio::time::timeout(RENEW_TIMEOUT, future).await {
            Ok(result) => result,
            Err(_) => Err(Renewal::Failed(format!("did not answer within {} s", RENEW_TIMEOUT.as_secs()))),
        }
    }

    /// Mark the stored grant as needing a new login (its tokens dropped).
    async fn withdraw(&self, why: &str) -> Result<(), UpstreamError> {
        let vault = self.vault()?;
        if let Some(mut grant) =
            vault.load_for(&self.inner.resource, self.identity()).await.map_err(|e| self.vault_error(e))?
        {
            grant.tokens = None;
            grant.login_needed = Some(why.to_string());
            vault.save(&grant).await.map_err(|e| self.vault_error(e))?;
            *code_mode_core::sync::lock(&self.inner.cache) = Some(grant);
        }
        Ok(())
    }

    /// `login`: why this run's login failed (the person's step, the
    /// authorization server), so that `login` says that instead of trying
    /// the server another way.
    pub fn login_failure(&self) -> Option<UpstreamError> {
        code_mode_core::sync::lock(&self.inner.failed).clone()
    }

    /// `login`: the person's step, from the server's `challenge`, asking
    /// for `extra` scopes too; a failure is kept for [`Upstream::login_failure`].
    async fn authorize(
        &self,
        interactive: &Interactive,
        challenge: Option<&str>,
        extra: &[String],
    ) -> Result<String, UpstreamError> {
        let result = self.authorize_once(interactive, challenge, extra).await;
        if let Err(e) = &result {
            *code_mode_core::sync::lock(&self.inner.failed) = Some(e.clone());
        }
        result
    }

    async fn authorize_once(
        &self,
        interactive: &Interactive,
        challenge: Option<&str>,
        extra: &[String],
    ) -> Result<String, UpstreamError> {
        let AuthSpec::OAuth(spec) = &self.inner.spec else {
            return Err(self.login_error("a machine account does not log in".into()));
        };
        let vault = self.vault()?;
        let previous = vault.load_for(&self.inner.resource, self.identity()).await.map_err(|e| self.vault_error(e))?;
        let extra = union(extra, previous.iter().flat_map(|p| p.wanted.clone()));
        let loopback = Loopback::bind(spec.redirect_uri.as_deref()).await.map_err(|e| self.login_error(e))?;
        let pending =
            flow::begin(&self.inner.resource, spec, challenge, previous.as_ref(), &extra, loopback.redirect_uri())
                .await
                .map_err(|e| self.login_error(e))?;
        (interactive.announce)(&self.inner.server, &pending.url);
        if interactive.open_browser {
            crate::login::open_browser(&pending.url);
        }
        let deadline = tokio::time::Instant::now() + interactive.timeout;
        let callback = loopback.wait(&pending.state, deadline).await.map_err(|e| self.login_error(e))?;
        drop(loopback);
        let grant = flow::finish(&self.inner.resource, pending, &callback).await.map_err(|e| self.login_error(e))?;
        vault.save(&grant).await.map_err(|e| self.vault_error(e))?;
        let token = grant.tokens.as_ref().map(|t| t.access.clone()).unwrap_or_default();
        *code_mode_core::sync::lock(&self.inner.cache) = Some(grant);
        code_mode_core::sync::lock(&self.inner.authorized).0 = true;
        self.inner.status.send_replace(Status::LoggedIn);
        Ok(token)
    }

    fn needs_login(&self, why: String) -> UpstreamError {
        let error =
            UpstreamError::NeedsLogin { server: self.inner.server.clone(), why, command: self.inner.command.clone() };
        self.inner.status.send_replace(Status::NeedsLogin(error.to_string()));
        error
    }

    fn vault_error(&self, source: VaultError) -> UpstreamError {
        UpstreamError::Vault { server: self.inner.server.clone(), source }
    }

    fn login_error(&self, why: String) -> UpstreamError {
        UpstreamError::Login { server: self.inner.server.clone(), why }
    }

    fn as_error(&self, why: String, issuer: Option<String>) -> UpstreamError {
        let cached = || code_mode_core::sync::lock(&self.inner.cache).as_ref().and_then(|g| g.issuer.clone());
        let at = issuer.or_else(cached).unwrap_or_else(|| "of this server".to_string());
        UpstreamError::AuthorizationServer { server: self.inner.server.clone(), at, why }
    }
}
