//! The commands.
//!
//! `serve` and `run` put the bridge, a sandbox-runner and the frontend in
//! this one process over the in-process bus ([`crate::stack`]), under one
//! root cancellation token. `frontend`, `bridge` and `sandbox-runner`
//! start one service each, talking to the others over NATS. `policy check` starts only the wrapped
//! servers, to print what their policies say of each tool
//! ([`code_mode_bridge::policy_check`]); `policy replay` and `audit`
//! read audit records ([`crate::audit`]).
//!
//! Start order fails fast: the Docker engine and the image first (nothing to
//! clean up yet), then the wrapped server, then the services. Shutdown runs
//! the other way: the frontend stops, the root token is cancelled, cells in
//! flight are stopped and their containers removed, then the wrapped server
//! is closed.

use std::io::Read;

use anyhow::{Context, bail};
use code_mode_audit::AuditSink;
use code_mode_bridge::{CallLimits, WrappedServer};
use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTls, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_mcp_frontend::auth::oauth::OAuthOptions;
use code_mode_mcp_frontend::auth::{AuthOptions, SessionLimits};
use code_mode_mcp_frontend::console::ConsoleClient;
use code_mode_mcp_frontend::http::{ConsoleOptions, HttpOptions, McpHttpServer, TlsFiles};
use code_mode_mcp_frontend::{Expose, Frontend, FrontendConfig, FrontendFactory, KeepConfig};
use code_mode_sandbox_runner::image;
use code_mode_sandbox_runner::{DEFAULT_WARM, connect_docker};
use code_mode_telemetry::MetricsServer;
use tokio_util::sync::CancellationToken;

use crate::cli::{
    BridgeArgs, Cli, Command, DirectArgs, ExposeTools, FrontendArgs, HttpArgs, KeepArgs, MetricsArgs, NatsArgs,
    PolicyCheckArgs, PolicyCommand, RunnerArgs, StackArgs, TokenCommand,
};
use crate::stack::{BridgeParts, Buses, RunnerParts, Stack, StackParts, start_bridge, start_runner};

/// Run a parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let root = code_mode_core::shutdown::on_signal();
    match cli.command {
        Command::BuildImage(args) => build_image(args).await,
        Command::Serve(args) => {
            let _metrics = start_metrics(&args.stack.metrics, "serve", &root).await?;
            let http = http_options(&args.http)?;
            if let Some(options) = &http {
                code_mode_mcp_frontend::http::preflight(options).await?;
            }
            let keep = keep_config(&args.keep);
            let parts = stack_parts(&args.stack, args.max_concurrent, keep, direct_config(&args.direct)).await?;
            let stack = Stack::start(parts, Buses::One(Bus::in_process()), &root).await?;
            reload_on_hangup(&stack.bridge, &args.stack.bridge, &root)?;
            let served = match &http {
                Some(options) => serve_http(stack.factory.clone(), options, &root).await,
                None => serve_stdio(stack.factory.session(), &root).await,
            };
            stack.stop().await;
            served
        }
        Command::Run(mut args) => {
            // One cell: a warm pool would only start containers to remove them.
            args.stack.runner.warm.get_or_insert(0);
            let _metrics = start_metrics(&args.stack.metrics, "run", &root).await?;
            let code = read_code(args.code, args.file)?;
            let asker =
                if args.ask { Some(crate::terminal::TerminalAsker::open().map_err(anyhow::Error::msg)?) } else { None };
            let mut parts = stack_parts(&args.stack, 1, None, Direct::default()).await?;
            // No client reads the description: no wait for the packages.
            parts.frontend.packages_wait = std::time::Duration::ZERO;
            let stack = Stack::start(parts, Buses::One(Bus::in_process()), &root).await?;
            let frontend = stack.factory.session();
            let report = async {
                frontend.listen_for_approvals().await?;
                if let Some(asker) = asker {
                    frontend.ask_locally_with(asker);
                }
                frontend.run_code(&code).await
            }
            .await;
            frontend.end_session().await;
            stack.stop().await;
            let report = report.context("running the cell")?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Frontend(args) => {
            let _metrics = start_metrics(&args.metrics, "frontend", &root).await?;
            let bus = nats_bus(&args.nats, "code-mode-frontend").await?;
            let mut config = frontend_config(&args.frontend, args.max_concurrent)?;
            config.capacity_wait = args.capacity_wait;
            config.keep = keep_config(&args.keep);
            let direct = direct_config(&args.direct);
            (config.expose, config.max_direct_calls) = (direct.expose, direct.max_calls);
            if let Some(options) = http_options(&args.http)? {
                code_mode_mcp_frontend::http::preflight(&options).await?;
                let factory = FrontendFactory::connect(bus, config).await?;
                return serve_http(factory, &options, &root).await;
            }
            let frontend = Frontend::connect(bus, config).await?;
            let served = frontend.serve_stdio(root.clone()).await;
            root.cancel();
            served.context("serving MCP on stdio")
        }
        Command::Bridge(args) => {
            let _metrics = start_metrics(&args.metrics, "bridge", &root).await?;
            let transport = nats_transport(&args.nats, "code-mode-bridge").await?;
            // The private-data taint and the policies' rate-limit counters
            // live in JetStream, so they outlive this process and every
            // replica shares them. Without private tools and policies only
            // learned result shapes would: a server without JetStream then
            // costs what the shapes would remember of a restart, never a call.
            let servers = wrapped_servers(&args.bridge, &args.server)?;
            let logins = servers.iter().any(crate::login::has_auth);
            let needed = logins || servers.iter().any(|s| !s.private.is_empty() || s.policy.is_some());
            let config = JetStreamConfig { replicas: replicas(&args.nats), ..Default::default() };
            let state = match SessionStore::over_nats(&transport, config).await {
                Ok(store) => {
                    if needed {
                        // codemode_state_store_up follows the store while idle too.
                        store.watch(code_mode_core::state::PROBE_EVERY, root.child_token());
                    }
                    store
                }
                Err(e) if !needed => {
                    tracing::warn!(error = %e, "no JetStream for learned result shapes: they last as long as this process");
                    SessionStore::in_memory()
                }
                Err(e) => {
                    return Err(e).context(
                        "opening the session-state store (JetStream) for --private, a policy or an auth block",
                    );
                }
            };
            if logins {
                // Remote servers' logins live in the store too, every
                // replica reading the same grant (sealed with this key).
                let key = code_mode_upstream_auth::Key::from_environment()?;
                code_mode_upstream_auth::set_default_vault(code_mode_upstream_auth::Vault::in_store(
                    state.clone(),
                    key,
                ));
            }
            let audit =
                crate::audit::open_sink(&args.audit, "bridge", Some(transport.client()), replicas(&args.nats)).await?;
            let parts = bridge_parts(&args.bridge, servers, state, audit);
            let running = start_bridge(parts, &Bus::new(transport), &root).await?;
            reload_on_hangup(&running.bridge, &args.bridge, &root)?;
            tracing::info!("bridge serving over NATS");
            root.cancelled().await;
            running.stopped().await;
            Ok(())
        }
        Command::SandboxRunner(args) => {
            let _metrics = start_metrics(&args.metrics, "sandbox-runner", &root).await?;
            check_image_choice(&args.runner.image, &args.runner.packages)?;
            let transport = nats_transport(&args.nats, "code-mode-sandbox-runner").await?;
            let audit =
                crate::audit::open_sink(&args.audit, "sandbox-runner", Some(transport.client()), replicas(&args.nats))
                    .await?;
            let parts = runner_parts(&args.runner, args.capacity, audit.clone());
            let running = start_runner(parts, &Bus::new(transport), &root).await?;
            tracing::info!(capacity = args.capacity, "sandbox-runner serving over NATS");
            root.cancelled().await;
            running.stopped().await;
            if let Some(audit) = audit {
                audit.close().await;
            }
            Ok(())
        }
        Command::Policy(args) => match args.command {
            PolicyCommand::Check(args) => policy_check(args, &root).await,
            PolicyCommand::Replay(args) => crate::audit::replay(args).await,
        },
        Command::Audit(args) => crate::audit::command(args).await,
        Command::Doctor(args) => doctor(args).await,
        Command::Describe(args) => crate::describe::describe(*args, &root).await,
        Command::Login(args) => crate::login::login(args).await,
        Command::Logout(args) => crate::login::logout(args).await,
        Command::Token(args) => match args.command {
            TokenCommand::New { name } => {
                let (token, line) = code_mode_mcp_frontend::auth::static_tokens::new_token(&name)
                    .map_err(|e| anyhow::anyhow!("code-mode token new: {e}"))?;
                println!("token: {token}");
                println!("line: {line}");
                eprintln!(
                    "code-mode: give the token to {name} (it is not shown again) and add the line to the \
                     --auth-tokens file, then send the server SIGHUP"
                );
                Ok(())
            }
        },
    }
}

/// Reread the `--config` file (else the `--policy` file) on each SIGHUP
/// and apply it to the bridge (`code_mode_bridge::ReloadSource`).
fn reload_on_hangup(
    bridge: &code_mode_bridge::Bridge,
    args: &BridgeArgs,
    root: &CancellationToken,
) -> anyhow::Result<()> {
    let source = match &args.config {
        Some(file) => code_mode_bridge::ReloadSource::Config(file.clone()),
        None => code_mode_bridge::ReloadSource::Policies,
    };
    bridge.reload_on_hangup(source, root.child_token()).context("listening for SIGHUP (config reload)")
}

/// `doctor`: the posture report on stdout; an error when a required check
/// failed.
async fn doctor(args: crate::cli::DoctorArgs) -> anyhow::Result<()> {
    check_image_choice(&args.image, &args.packages)?;
    let image = match args.image {
        Some(image) => image,
        None => image::packages_tag(&args.packages.packages())?,
    };
    let report = code_mode_sandbox_runner::posture::check(args.runtime, &image).await;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{report}");
    }
    if !report.passed() {
        bail!("doctor: a required check failed under {}", args.runtime);
    }
    Ok(())
}

/// `policy check`: start the server(s), print each listed tool's verdict; an
/// invalid policy is the error.
async fn policy_check(args: PolicyCheckArgs, root: &CancellationToken) -> anyhow::Result<()> {
    let servers = match (&args.config, args.file) {
        (Some(config), _) => code_mode_bridge::config::load(config)?,
        (None, Some(file)) => {
            let Some(server) = WrappedServer::command(&args.server) else {
                bail!("no server command after -- (or --config FILE)");
            };
            vec![server.pass_env(args.env).allow(args.allow).policy_file(Some(file))]
        }
        (None, None) => bail!("give a policy FILE and the server command after --, or --config FILE"),
    };
    let report = code_mode_bridge::policy_check::check(servers, args.config.is_some(), root.child_token()).await?;
    print!("{report}");
    Ok(())
}

/// The HTTP settings, if `--http` was given; a bad console client secret
/// file is the error.
fn http_options(args: &HttpArgs) -> anyhow::Result<Option<HttpOptions>> {
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

/// Serve MCP over HTTP until a signal; the URL goes to stderr.
async fn serve_http(factory: FrontendFactory, options: &HttpOptions, root: &CancellationToken) -> anyhow::Result<()> {
    let server = McpHttpServer::start(factory, options, root.child_token()).await?;
    eprintln!("code-mode: MCP on {}", server.url());
    root.cancelled().await;
    server.stopped().await;
    Ok(())
}

/// What watches a service from outside while it runs: its metrics server
/// and its pid file (each when asked for), dropped at exit.
struct Watched {
    _metrics: Option<MetricsServer>,
    _pid: Option<crate::pid_file::PidFile>,
}

/// Write the pid file and serve `/metrics` and `/healthz` when asked
/// (`--pid-file`, `--metrics-addr`), until the root token is cancelled.
/// Started first, so a bad address or an unwritable file fails before
/// anything else starts; `/healthz` answers while the process lives.
async fn start_metrics(args: &MetricsArgs, service: &str, root: &CancellationToken) -> anyhow::Result<Watched> {
    let pid = args.pid_file.as_deref().map(crate::pid_file::PidFile::write).transpose()?;
    let Some(addr) = &args.metrics_addr else { return Ok(Watched { _metrics: None, _pid: pid }) };
    let server = MetricsServer::start(addr, service, root.child_token()).await?;
    eprintln!("code-mode: {service} metrics on http://{}/metrics", server.local_addr());
    Ok(Watched { _metrics: Some(server), _pid: pid })
}

/// Replicas of what the service creates in JetStream.
fn replicas(args: &NatsArgs) -> usize {
    usize::from(args.jetstream_replicas)
}

async fn nats_bus(args: &NatsArgs, name: &str) -> anyhow::Result<Bus> {
    Ok(Bus::new(nats_transport(args, name).await?))
}

async fn nats_transport(args: &NatsArgs, name: &str) -> anyhow::Result<NatsTransport> {
    let credentials = match (&args.nats_user, &args.nats_password) {
        (Some(u), Some(p)) => Some((u.clone(), p.clone())),
        (None, None) => None,
        _ => bail!("--nats-user and --nats-password go together"),
    };
    let service = name.trim_start_matches("code-mode-");
    let options = NatsOptions {
        url: args.url.clone(),
        credentials,
        name: Some(name.to_string()),
        inbox_prefix: Some(format!("_INBOX.{service}")),
        tls: NatsTls { ca: args.nats_ca.clone(), cert_and_key: args.nats_cert.clone().zip(args.nats_key.clone()) },
    };
    Ok(NatsTransport::connect(&options).await?)
}

/// The wrapped servers: the entries of the `--config` file, else the one
/// remote server of `--url`, else the one whose command follows `--`.
pub(crate) fn wrapped_servers(args: &BridgeArgs, server: &[String]) -> anyhow::Result<Vec<WrappedServer>> {
    if let Some(file) = &args.config {
        return Ok(code_mode_bridge::config::load(file)?);
    }
    let server = match &args.server_url {
        Some(url) => crate::login::url_server(url, &args.headers, args.auth.as_deref())?,
        None => match WrappedServer::command(server) {
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
pub(crate) fn bridge_parts(
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
    }
}

/// The sandbox-runner of the flags, running `capacity` cells at once.
fn runner_parts(args: &RunnerArgs, capacity: usize, audit: Option<AuditSink>) -> RunnerParts {
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
    }
}

/// The three services of `serve` and `run` in one process: session state
/// in memory (it lives and dies with the process), one audit sink for the
/// runner's cell records and the bridge's call records, no sandbox-runner
/// at all with `--expose-tools=only`.
async fn stack_parts(
    args: &StackArgs,
    max_concurrent: usize,
    keep: Option<KeepConfig>,
    direct: Direct,
) -> anyhow::Result<StackParts> {
    let StackArgs { bridge, runner, frontend, server, audit, .. } = args;
    check_image_choice(&runner.image, &runner.packages)?;
    // The config file is checked before anything starts.
    let servers = wrapped_servers(bridge, server)?;
    let audit = crate::audit::open_sink(audit, "serve", None, 1).await?;
    let frontend = FrontendConfig {
        keep,
        expose: direct.expose,
        max_direct_calls: direct.max_calls,
        ..frontend_config(frontend, max_concurrent)?
    };
    let runner = match direct.expose {
        Expose::Only => None,
        _ => Some(runner_parts(runner, max_concurrent.max(1), audit.clone())),
    };
    Ok(StackParts { bridge: bridge_parts(bridge, servers, SessionStore::in_memory(), audit), runner, frontend })
}

pub(crate) fn frontend_config(args: &FrontendArgs, max_concurrent: usize) -> anyhow::Result<FrontendConfig> {
    Ok(FrontendConfig {
        max_code: args.max_code,
        max_concurrent_cells: max_concurrent.max(1),
        deadline: args.deadline,
        description_budget: args.description_budget,
        max_cells_per_session: args.max_cells_per_session,
        ..FrontendConfig::default()
    })
}

/// The kept-session settings, when `--keep-variables` is on.
pub(crate) fn keep_config(args: &KeepArgs) -> Option<KeepConfig> {
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

fn direct_config(args: &DirectArgs) -> Direct {
    let expose = match args.expose_tools {
        ExposeTools::Off => Expose::Off,
        ExposeTools::Beside => Expose::Beside,
        ExposeTools::Only => Expose::Only,
    };
    Direct { expose, max_calls: args.max_direct_calls }
}

fn read_code(code: Option<String>, file: Option<std::path::PathBuf>) -> anyhow::Result<String> {
    if let Some(code) = code {
        return Ok(code);
    }
    if let Some(path) = file {
        return std::fs::read_to_string(&path).with_context(|| format!("reading the code from {}", path.display()));
    }
    let mut code = String::new();
    std::io::stdin().read_to_string(&mut code).context("reading the code from stdin")?;
    Ok(code)
}

/// `build-image`: the default image, or the one of `--requirements`,
/// `--apt` and `--wheels` (built only when its tag is missing); its tag on
/// stdout.
async fn build_image(args: crate::cli::BuildImageArgs) -> anyhow::Result<()> {
    let packages = args.packages.packages();
    // The packages are checked before Docker is asked anything.
    let tag = image::packages_tag(&packages)?;
    let docker = connect_docker().await?;
    let progress = |line: &str| eprintln!("build-image: {line}");
    if !packages.is_empty() {
        let built = image::build_packages_image(&docker, args.base, &packages, &progress).await?;
        println!("{built}");
        return Ok(());
    }
    if args.if_missing && image::image_exists(&docker, &tag).await? {
        eprintln!("build-image: {tag} already exists");
    } else {
        image::build_image(&docker, args.base, &progress).await?;
    }
    println!("{tag}");
    Ok(())
}

/// `--image` and packages together are refused: which image would run is
/// a guess.
fn check_image_choice(image: &Option<String>, packages: &crate::cli::PackageArgs) -> anyhow::Result<()> {
    if image.is_some() && !packages.packages().is_empty() {
        bail!("{}", image::IMAGE_AND_PACKAGES);
    }
    Ok(())
}

/// Serve MCP on stdin/stdout as `frontend`'s session until the client goes
/// or a signal comes.
async fn serve_stdio(frontend: Frontend, root: &CancellationToken) -> anyhow::Result<()> {
    frontend.listen_for_approvals().await?;
    frontend.serve_stdio(root.clone()).await.context("serving MCP on stdio")
}
