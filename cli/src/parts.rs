//! From flags to parts: what each command's options mean for the services
//! it starts (the wrapped servers, the bridge's, runner's and frontend's
//! settings, the HTTP options). The commands ([`crate::app`]) and
//! `describe` ([`crate::describe`]) assemble their services from these, so
//! a flag means the same wherever it is taken.

use anyhow::bail;
use code_mode_audit::AuditSink;
use code_mode_bridge::{CallLimits, WrappedServer};
use code_mode_core::state::SessionStore;
use code_mode_mcp_frontend::auth::oauth::OAuthOptions;
use code_mode_mcp_frontend::auth::{AuthOptions, SessionLimits};
use code_mode_mcp_frontend::console::ConsoleClient;
use code_mode_mcp_frontend::http::{ConsoleOptions, HttpOptions, TlsFiles};
use code_mode_mcp_frontend::{Expose, FrontendConfig, KeepConfig};
use code_mode_sandbox_runner::DEFAULT_WARM;
use code_mode_sandbox_runner::image;

use crate::cli::{
    BridgeArgs, DirectArgs, ExposeTools, FrontendArgs, FrontendServiceArgs, HttpArgs, KeepArgs, PackageArgs, RunnerArgs,
};
use crate::stack::{BridgeParts, RunnerParts};

/// The wrapped servers: the entries of the `--config` file, else the one
/// remote server of `--url`, else the one whose command follows `--`.
pub fn wrapped_servers(args: &BridgeArgs) -> anyhow::Result<Vec<WrappedServer>> {
    if let Some(file) = &args.config {
        return Ok(code_mode_bridge::config::load(file)?);
    }
    let server = match &args.server_url {
        Some(url) => crate::login::url_server(url, &args.headers, args.auth.as_deref())?,
        None => match WrappedServer::command(&args.server) {
            Some(server) => server,
            None => bail!("no server command after -- (or --url URL, or --config FILE)"),
        },
    };
    let server = match &args.server_name {
        Some(name) => server.named(name),
        None => server,
    };
    Ok(vec![
        server
            .pass_env(args.env.clone())
            .allow(args.allow.clone())
            .private(args.private.clone())
            .policy_file(args.policy.clone()),
    ])
}

/// The bridge of the flags, over `servers`, keeping session state in
/// `state`. With `--config` every tool is named `<server>__<tool>`, even
/// for one server, so names stay put when a server is added.
pub fn bridge_parts(
    args: &BridgeArgs,
    servers: Vec<WrappedServer>,
    state: SessionStore,
    audit: Option<AuditSink>,
) -> BridgeParts {
    BridgeParts {
        servers,
        prefixed: args.config.is_some(),
        limits: CallLimits {
            max_calls: args.max_calls,
            call_timeout: args.call_timeout,
            approval_timeout: args.approval_timeout,
            stateless_idle: args.stateless_idle,
            ..CallLimits::default()
        },
        state,
        audit,
        offer_denied: args.offer_denied,
        inputs: None,
        search_model: args.search_model.clone(),
    }
}

/// The sandbox-runner of the flags, running `capacity` cells at once.
pub fn runner_parts(args: &RunnerArgs, capacity: usize, audit: Option<AuditSink>) -> RunnerParts {
    RunnerParts {
        image: args.image.clone(),
        packages: args.packages.packages(),
        base: args.base,
        runtime: args.runtime,
        capacity,
        warm: args.warm.unwrap_or(DEFAULT_WARM),
        warm_max: args.warm_max,
        warm_window: args.warm_window,
        audit,
        progress: |line| eprintln!("code-mode: {line}"),
        files: None,
        reports: None,
        shared_files: None,
        shared_inputs: None,
    }
}

/// The frontend of the flags: `max_concurrent` cells at once (at least
/// one), kept sessions as `keep` says, the wrapped tools offered as
/// `direct` says.
pub fn frontend_config(
    args: &FrontendArgs,
    max_concurrent: usize,
    keep: Option<KeepConfig>,
    direct: Direct,
) -> FrontendConfig {
    FrontendConfig {
        max_code: args.max_code,
        max_concurrent_cells: max_concurrent.max(1),
        deadline: args.deadline,
        description_budget: args.description_budget,
        max_cells_per_session: args.max_cells_per_session,
        keep,
        expose: direct.expose,
        max_direct_calls: direct.max_calls,
        ..FrontendConfig::default()
    }
}

/// The frontend of `code-mode frontend`: its own flags, what it offers
/// clients, and how long a cell waits for a runner's slot.
pub fn frontend_service_config(args: &FrontendServiceArgs) -> FrontendConfig {
    let clients = &args.clients;
    let mut config = FrontendConfig {
        capacity_wait: args.capacity_wait,
        ..frontend_config(
            &args.frontend,
            args.max_concurrent,
            keep_config(&clients.keep),
            direct_config(&clients.direct),
        )
    };
    clients.tasks.apply(&mut config);
    config
}

/// The kept-session settings, when `--keep-variables` is on.
pub fn keep_config(args: &KeepArgs) -> Option<KeepConfig> {
    args.keep_variables.then_some(KeepConfig {
        idle: args.session_idle,
        max: args.session_max,
        most_handles: args.max_handles,
    })
}

/// The wrapped tools offered directly (`--expose-tools`,
/// `--max-direct-calls`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Direct {
    /// Which tools `tools/list` offers.
    pub expose: Expose,
    /// Direct calls per client session.
    pub max_calls: Option<u32>,
}

/// The wrapped tools offered directly, as the flags say.
pub fn direct_config(args: &DirectArgs) -> Direct {
    let expose = match args.expose_tools {
        ExposeTools::Off => Expose::Off,
        ExposeTools::Beside => Expose::Beside,
        ExposeTools::Only => Expose::Only,
    };
    Direct { expose, max_calls: args.max_direct_calls }
}

/// The HTTP settings, if `--http` was given; a bad console client secret
/// file is the error.
pub fn http_options(args: &HttpArgs) -> anyhow::Result<Option<HttpOptions>> {
    let Some(addr) = args.http.clone() else { return Ok(None) };
    let auth = AuthOptions {
        tokens_file: args.auth_tokens.clone(),
        oauth: args.oauth_issuer.as_ref().map(|issuer| OAuthOptions {
            issuer: issuer.clone(),
            resource: args.oauth_resource.clone().unwrap_or_default(),
            scopes: args.oauth_scopes.clone(),
            groups_claim: args.oauth_groups_claim.clone(),
        }),
        allowed_origins: args.allowed_origins.clone(),
        insecure_no_auth: args.insecure_no_auth,
        limits: SessionLimits { max_sessions: args.max_sessions, max_per_identity: args.max_sessions_per_identity },
        caller_tokens: None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    let console = ConsoleOptions {
        operators: args.console_operators.clone().unwrap_or_else(|| ConsoleOptions::default().operators),
        public_url: args.public_url.clone(),
        oauth_client: match (&args.console_client_id, &args.console_client_secret_file) {
            (Some(id), Some(file)) => Some(ConsoleClient::confidential(id, file)?),
            (Some(id), None) => Some(ConsoleClient::public(id)?),
            (None, _) => None,
        },
    };
    Ok(Some(HttpOptions {
        addr,
        allowed_hosts: args.allowed_hosts.clone(),
        auth,
        max_body: args.max_body,
        tls,
        console,
    }))
}

/// `--image` and packages together are refused: which image would run is
/// a guess.
pub fn check_image_choice(image: &Option<String>, packages: &PackageArgs) -> anyhow::Result<()> {
    if image.is_some() && !packages.packages().is_empty() {
        bail!("{}", image::IMAGE_AND_PACKAGES);
    }
    Ok(())
}
