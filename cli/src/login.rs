//! `code-mode login` and `logout`: a person's login to the remote servers
//! that need one, and its end.
//!
//! `login` opens an MCP session with the server the way `serve` would,
//! through the same authorizing HTTP client, but in login mode: the first
//! request goes without a token, and the server's `401` challenge starts
//! the authorization (discovery, registration, PKCE, the URL printed and
//! opened, the redirect taken on a loopback port, the code exchanged);
//! a `403 insufficient_scope` after it steps the scope up once. The
//! session then lists the tools, which proves the login works. The
//! grant is stored encrypted where `serve` reads it ([`Vault`]); a `serve`
//! already running picks it up within a second or two.
//!
//! `login --status` lists each server's grant (kind, scopes, expiry,
//! authorization server, client), never a token. `logout` forgets it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use code_mode_bridge::WrappedServer;
use code_mode_bridge::server::{HttpSpec, Transport};
use code_mode_upstream_auth::grant::{Grant, GrantKind, now};
use code_mode_upstream_auth::{AuthSpec, AuthorizedHttp, Interactive, Key, Mode, Upstream, Vault};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::cli::{LoginArgs, LoginTarget, LogoutArgs};

/// The auth block of `--auth TEXT`: a type (`oauth`) or the block as JSON.
pub(crate) fn auth_spec(text: &str) -> anyhow::Result<AuthSpec> {
    let value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).context("--auth: not JSON")?
    } else {
        serde_json::Value::String(text.trim().to_string())
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    AuthSpec::from_json(&value, &|name| std::env::var(name).ok(), &cwd).map_err(|e| anyhow::anyhow!("--auth: {e}"))
}

/// The remote server of `--url` with its `--auth` (and what logs in to it).
pub(crate) fn url_server(url: &str, headers: &[(String, String)], auth: Option<&str>) -> anyhow::Result<WrappedServer> {
    let server = headers.iter().fold(WrappedServer::url(url), |s, (name, value)| s.header(name, value));
    let Some(text) = auth else { return Ok(server) };
    let spec = auth_spec(text)?;
    if headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
        bail!("--header Authorization beside --auth: the login's token is the authorization");
    }
    let command = match text.trim() {
        "oauth" => format!("code-mode login --url {url}"),
        other => format!("code-mode login --url {url} --auth '{other}'"),
    };
    let upstream = Upstream::new(url, url, spec, &command, None, Mode::Serve);
    Ok(server.authorized(upstream))
}

/// The servers `target` names that have an `auth` block.
fn servers(target: &LoginTarget) -> anyhow::Result<Vec<WrappedServer>> {
    let all = match (&target.config, &target.server_url) {
        (Some(file), _) => code_mode_bridge::config::load(file)?,
        (None, Some(url)) => {
            vec![url_server(url, &target.headers, Some(target.auth.as_deref().unwrap_or("oauth")))?]
        }
        (None, None) => bail!("give --config FILE [SERVER] or --url URL"),
    };
    let file = target.config.as_ref().map(|f| f.display().to_string()).unwrap_or_default();
    if let Some(name) = &target.server {
        let Some(server) = all.iter().find(|s| &s.spec.name == name) else {
            let names: Vec<&str> = all.iter().map(|s| s.spec.name.as_str()).collect();
            bail!("{file}: no server {name:?} (it has: {})", names.join(", "));
        };
        if upstream_of(server).is_none() {
            bail!("{file}: server {name:?} has no \"auth\" block, so there is nothing to log in to");
        }
        return Ok(vec![server.clone()]);
    }
    let with_auth: Vec<WrappedServer> = all.into_iter().filter(|s| upstream_of(s).is_some()).collect();
    if with_auth.is_empty() {
        bail!("{file}: no server has an \"auth\" block, so there is nothing to log in to");
    }
    Ok(with_auth)
}

/// True when `server` has an `auth` block.
pub(crate) fn has_auth(server: &WrappedServer) -> bool {
    upstream_of(server).is_some()
}

/// The callers' tokens of token exchange when the services are apart: the
/// bucket [`code_mode_upstream_auth::caller::BUCKET`], sealed with the
/// token key of the environment (`CODE_MODE_TOKEN_KEY`, the same on the
/// frontends and the bridges); `None` without a key.
pub(crate) async fn caller_tokens_over_nats(
    transport: &code_mode_core::nats::NatsTransport,
    replicas: usize,
) -> anyhow::Result<Option<code_mode_upstream_auth::CallerTokens>> {
    let Some(key) = code_mode_upstream_auth::Key::from_environment()? else { return Ok(None) };
    let config = code_mode_core::state::JetStreamConfig {
        bucket: code_mode_upstream_auth::caller::BUCKET.to_string(),
        replicas,
        max_age: code_mode_upstream_auth::caller::BUCKET_MAX_AGE,
        ..Default::default()
    };
    let store = code_mode_core::state::SessionStore::over_nats(transport, config)
        .await
        .context("opening the callers' tokens of token exchange (the JetStream bucket codemode_caller_tokens)")?;
    Ok(Some(code_mode_upstream_auth::CallerTokens::new(store, key)))
}

/// Whether `server` acts upstream as each caller (token exchange).
pub(crate) fn exchanges_tokens(server: &WrappedServer) -> bool {
    upstream_of(server).is_some_and(|auth| auth.spec().is_per_identity())
}

fn upstream_of(server: &WrappedServer) -> Option<&Upstream> {
    match &server.spec.transport {
        Transport::Http(HttpSpec { auth: Some(auth), .. }) => Some(auth),
        _ => None,
    }
}

/// `code-mode login`.
pub async fn login(args: LoginArgs) -> anyhow::Result<()> {
    let servers = servers(&args.target)?;
    if args.status {
        return status(&servers, args.json, &args.target).await;
    }
    let vault = vault(&args.target, true).await?;
    let only = args.target.server.is_some() || args.target.server_url.is_some();
    let mut failed = Vec::new();
    for server in &servers {
        let Some(upstream) = upstream_of(server) else { continue };
        if !only {
            // Without a server named: only those that cannot be used now.
            let stored = Upstream::new(
                &server.spec.name,
                upstream.resource(),
                upstream.spec().clone(),
                upstream.command(),
                Some(vault.clone()),
                Mode::Serve,
            );
            if stored.token().await.is_ok() {
                eprintln!(
                    "code-mode: {} is logged in already (`code-mode logout` first to log in anew)",
                    server.spec.name
                );
                continue;
            }
        }
        if let Err(e) = login_one(server, upstream, &vault, &args).await {
            eprintln!("code-mode: {}: {}", server.spec.name, code_mode_core::error::report(e.as_ref()));
            failed.push(server.spec.name.clone());
        }
    }
    if !failed.is_empty() {
        bail!("login failed for {}", failed.join(", "));
    }
    Ok(())
}

/// The vault of this user's state folder, or with `--nats` the split
/// bridge's state store; `make_key`: make the key file when no key exists
/// yet (a first login, files only: the store's key comes from the
/// deployment).
async fn vault(target: &LoginTarget, make_key: bool) -> anyhow::Result<Vault> {
    if let Some(url) = &target.nats {
        let key = Key::from_environment()?
            .context("a login kept in the state store needs CODE_MODE_TOKEN_KEY (the bridge's key)")?;
        let options = code_mode_core::nats::NatsOptions {
            url: url.clone(),
            credentials: std::env::var("CODE_MODE_NATS_USER").ok().zip(std::env::var("CODE_MODE_NATS_PASSWORD").ok()),
            name: Some("code-mode-login".into()),
            // As the bridge's NATS user, whose replies come under this prefix.
            inbox_prefix: Some("_INBOX.bridge".into()),
            tls: Default::default(),
        };
        let transport = code_mode_core::nats::NatsTransport::connect(&options).await?;
        let store = code_mode_core::state::SessionStore::over_nats(&transport, Default::default())
            .await
            .context("opening the session-state store (JetStream)")?;
        return Ok(Vault::in_store(store, Some(key)));
    }
    let vault = Vault::from_environment()?;
    if vault.key().is_some() || !make_key {
        return Ok(vault);
    }
    let file = vault.key_file().to_path_buf();
    let key = Key::create_file(&file)?;
    eprintln!("code-mode: made the token key {} (mode 0600): it encrypts the stored logins", file.display());
    Ok(vault.with_key(key))
}

/// Log in to one server: an MCP session in login mode, listing its tools.
async fn login_one(server: &WrappedServer, upstream: &Upstream, vault: &Vault, args: &LoginArgs) -> anyhow::Result<()> {
    let Transport::Http(http) = &server.spec.transport else { bail!("not a remote server") };
    let name = server.spec.name.clone();
    let interactive = Interactive {
        open_browser: !args.no_browser,
        timeout: args.timeout,
        announce: Box::new(|server, url| {
            eprintln!("code-mode: to log in to {server}, open this URL in a browser:\n{url}");
        }),
    };
    let login = Upstream::new(
        &name,
        upstream.resource(),
        upstream.spec().clone(),
        upstream.command(),
        Some(vault.clone()),
        Mode::Login(Arc::new(interactive)),
    );
    let mut headers = std::collections::HashMap::new();
    for (header, value) in &http.headers {
        headers.insert(http::HeaderName::from_bytes(header.as_bytes())?, http::HeaderValue::from_str(value)?);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(http.url.clone()).custom_headers(headers);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport =
        StreamableHttpClientTransport::with_client(AuthorizedHttp::new(Some(login.clone())), config.clone());
    // The person's time, plus the exchanges around it.
    let bound = args.timeout + Duration::from_secs(60);
    let listed = tokio::time::timeout(bound, async {
        let session = match ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await {
            Ok(session) => session,
            Err(e) if code_mode_upstream_auth::refusal(&e).is_some() => return Err(e.into()),
            // The login itself failed (the person's step, the authorization
            // server): say so rather than log in again another way.
            Err(_) if login.login_failure().is_some() => {
                return Err(login.login_failure().map(anyhow::Error::from).unwrap_or_else(|| anyhow::anyhow!("login")));
            }
            Err(e) => {
                // A server of the stateless 2026-07-28 revision alone refuses
                // the handshake (as serve does, speak that revision instead).
                tracing::info!(error = %e, "the server refused the initialize handshake: trying the stateless revision");
                let discover = ClientLifecycleMode::Discover {
                    preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                };
                let transport = StreamableHttpClientTransport::with_client(AuthorizedHttp::new(Some(login.clone())), config);
                ().serve_with_lifecycle(transport, discover).await?
            }
        };
        let tools = session.peer().list_all_tools().await;
        let _ = session.cancel().await;
        anyhow::Ok(tools?)
    })
    .await
    .map_err(|_| anyhow::anyhow!("no answer within {} s", bound.as_secs()))?;
    let tools = listed.map_err(|e| match code_mode_upstream_auth::refusal(e.as_ref()) {
        Some(refusal) => anyhow::anyhow!("{refusal}"),
        None => e,
    })?;
    match login.stored().await? {
        Some(grant) if grant.login_needed.is_none() && grant.tokens.is_some() => {
            eprintln!("code-mode: logged in to {name}: {}; it lists {} tools", summary(&grant), tools.len());
        }
        _ => eprintln!("code-mode: {name} answered without asking for a login ({} tools): nothing stored", tools.len()),
    }
    Ok(())
}

/// One line about a grant, without any token.
fn summary(grant: &Grant) -> String {
    let scopes = if grant.scopes.is_empty() { "none named".to_string() } else { grant.scopes.join(" ") };
    let expiry = match grant.tokens.as_ref().and_then(|t| t.expires_at) {
        Some(at) if at > now() => format!("the access token expires in {}", span(at - now())),
        Some(_) => "the access token has expired".into(),
        None => "the access token's expiry is not said".into(),
    };
    let renewal = match (grant.kind, grant.tokens.as_ref().and_then(|t| t.refresh.as_ref())) {
        (GrantKind::ClientCredentials, _) => " (a machine account: renewed without a person)",
        (GrantKind::Enterprise, _) => " (enterprise-managed: renewed from the ID token without a person)",
        (_, Some(_)) => " (renewed with its refresh token)",
        (_, None) => " (no refresh token: a new login when it expires)",
    };
    format!("scopes: {scopes}; {expiry}{renewal}")
}

fn span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// `login --status`.
async fn status(servers: &[WrappedServer], as_json: bool, target: &LoginTarget) -> anyhow::Result<()> {
    let vault = vault(target, false).await?;
    for server in servers {
        let Some(upstream) = upstream_of(server) else { continue };
        let name = &server.spec.name;
        let stored = vault.load(upstream.resource()).await;
        let (state, grant, why) = match &stored {
            Err(e) => ("error", None, Some(e.to_string())),
            Ok(None) => ("not_logged_in", None, None),
            Ok(Some(grant)) if grant.login_needed.is_some() => {
                ("login_needed", Some(grant), grant.login_needed.clone())
            }
            Ok(Some(grant)) => ("logged_in", Some(grant), None),
        };
        if as_json {
            let line = json!({
                "server": name,
                "url": upstream.resource(),
                "auth": upstream.spec().kind(),
                "state": state,
                "why": why,
                "scopes": grant.map(|g| g.scopes.clone()),
                "wanted": grant.map(|g| g.wanted.clone()).unwrap_or_default(),
                "expires_in": grant.and_then(|g| g.tokens.as_ref()?.expires_at).map(|at| at.saturating_sub(now())),
                "renewable": grant.map(|g| matches!(g.kind, GrantKind::ClientCredentials | GrantKind::Enterprise | GrantKind::TokenExchange)
                    || g.tokens.as_ref().is_some_and(|t| t.refresh.is_some())),
                "issuer": grant.and_then(|g| g.issuer.clone()),
                "client_id": grant.and_then(|g| g.client.as_ref().map(|c| c.id.clone())),
                "login": upstream.command(),
            });
            println!("{line}");
            continue;
        }
        let line = match (state, grant) {
            ("logged_in", Some(grant)) => {
                let by = grant.issuer.as_deref().map(|i| format!("; authorization server {i}")).unwrap_or_default();
                let wanted = if grant.wanted.is_empty() {
                    String::new()
                } else {
                    format!("; wants scope {} too: run `{}`", grant.wanted.join(" "), upstream.command())
                };
                format!("logged in ({}): {}{by}{wanted}", upstream.spec().kind(), summary(grant))
            }
            ("login_needed", _) => {
                format!("a new login is needed ({}): run `{}`", why.unwrap_or_default(), upstream.command())
            }
            ("not_logged_in", _) => match upstream.spec() {
                AuthSpec::ClientCredentials(_) => "a machine account: logs in by itself at the first call".to_string(),
                AuthSpec::Enterprise(_) => {
                    "enterprise-managed: exchanges the ID token for access by itself at the first call".to_string()
                }
                AuthSpec::OAuth(_) => format!("not logged in: run `{}`", upstream.command()),
                AuthSpec::TokenExchange(_) => {
                    "token exchange: acts as each OAuth caller, exchanging the caller's own token at its call"
                        .to_string()
                }
            },
            _ => format!("cannot be read: {}", why.unwrap_or_default()),
        };
        println!("{name} ({}): {line}", upstream.resource());
    }
    Ok(())
}

/// `code-mode logout`.
pub async fn logout(args: LogoutArgs) -> anyhow::Result<()> {
    let servers = servers(&args.target)?;
    let vault = vault(&args.target, false).await?;
    for server in &servers {
        let Some(upstream) = upstream_of(server) else { continue };
        if vault.delete(upstream.resource()).await? {
            eprintln!("code-mode: logged out of {} (its stored tokens are deleted)", server.spec.name);
        } else {
            eprintln!("code-mode: {} was not logged in", server.spec.name);
        }
    }
    Ok(())
}
