//! Composition of the services.
//!
//! `serve` and `run` put the bridge, a sandbox-runner and the frontend in
//! this one process over the in-process bus, under one root cancellation
//! token. `frontend`, `bridge` and `sandbox-runner` start one service each,
//! talking to the others over NATS. `policy check` starts only the wrapped
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
use code_mode_bridge::server::{ServerSpec, StdioSpec, Transport};
use code_mode_bridge::{Bridge, BridgeConfig, CallLimits, Closer, PolicyOptions, PolicySource, WrappedServer};
use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTls, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_mcp_frontend::auth::oauth::OAuthOptions;
use code_mode_mcp_frontend::auth::{AuthOptions, SessionLimits};
use code_mode_mcp_frontend::http::{HttpOptions, McpHttpServer, TlsFiles};
use code_mode_mcp_frontend::{Expose, Frontend, FrontendConfig, FrontendFactory, KeepConfig};
use code_mode_sandbox_runner::container::Lockdown;
use code_mode_sandbox_runner::image::{self, BaseSource};
use code_mode_sandbox_runner::{DEFAULT_WARM, RunnerConfig, SandboxRunner, connect_docker};
use code_mode_telemetry::MetricsServer;
use tokio_util::sync::CancellationToken;

use crate::cli::{
    BridgeArgs, Cli, Command, DirectArgs, ExposeTools, FrontendArgs, HttpArgs, KeepArgs, MetricsArgs, NatsArgs,
    PolicyCheckArgs, PolicyCommand, RunnerArgs, StackArgs, TokenCommand,
};

type Tasks = Vec<tokio::task::JoinHandle<()>>;

/// Run a parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let root = code_mode_core::shutdown::on_signal();
    match cli.command {
        Command::BuildImage(args) => build_image(args.base, args.if_missing).await,
        Command::Serve(args) => {
            let _metrics = start_metrics(&args.stack.metrics, "serve", &root).await?;
            let keep = keep_config(&args.keep);
            if let Some(options) = http_options(&args.http) {
                code_mode_mcp_frontend::http::preflight(&options).await?;
            }
            let direct = direct_config(&args.direct);
            let stack = Stack::start(&args.stack, args.max_concurrent, keep, direct, &root).await?;
            if let Some(options) = http_options(&args.http) {
                let served = serve_http(stack.factory.clone(), &options, &root).await;
                stack.stop(&root).await;
                return served;
            }
            let served = stack.frontend.clone().serve_stdio(root.clone()).await;
            stack.stop(&root).await;
            served.context("serving MCP on stdio")
        }
        Command::Run(mut args) => {
            // One cell: a warm pool would only start containers to remove them.
            args.stack.runner.warm.get_or_insert(0);
            let _metrics = start_metrics(&args.stack.metrics, "run", &root).await?;
            let code = read_code(args.code, args.file)?;
            let asker =
                if args.ask { Some(crate::terminal::TerminalAsker::open().map_err(anyhow::Error::msg)?) } else { None };
            let stack = Stack::start(&args.stack, 1, None, Direct::default(), &root).await?;
            if let Some(asker) = asker {
                stack.frontend.ask_locally_with(asker);
            }
            let report = stack.frontend.run_code(&code).await;
            stack.frontend.end_session().await;
            stack.stop(&root).await;
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
            if let Some(options) = http_options(&args.http) {
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
            // replica shares them; without private tools and policies the
            // store is never used, so JetStream is not needed.
            let servers = wrapped_servers(&args.bridge, &args.server)?;
            let state = if servers.iter().all(|s| s.private.is_empty() && s.policy.is_none()) {
                SessionStore::in_memory()
            } else {
                let config = JetStreamConfig { replicas: replicas(&args.nats), ..Default::default() };
                let store = SessionStore::over_nats(&transport, config)
                    .await
                    .context("opening the session-state store (JetStream) for --private or a policy")?;
                // codemode_state_store_up follows the store while idle too.
                store.watch(code_mode_core::state::PROBE_EVERY, root.child_token());
                store
            };
            let audit =
                crate::audit::open_sink(&args.audit, "bridge", Some(transport.client()), replicas(&args.nats)).await?;
            let bus = Bus::new(transport);
            let (bridge, closer) = start_bridge(&args.bridge, servers, state, audit, &root).await?;
            let tasks = bridge.serve(&bus, root.clone()).await?;
            tracing::info!("bridge serving over NATS");
            root.cancelled().await;
            stop(root.clone(), tasks, Some(closer)).await;
            Ok(())
        }
        Command::SandboxRunner(args) => {
            let _metrics = start_metrics(&args.metrics, "sandbox-runner", &root).await?;
            let transport = nats_transport(&args.nats, "code-mode-sandbox-runner").await?;
            let audit =
                crate::audit::open_sink(&args.audit, "sandbox-runner", Some(transport.client()), replicas(&args.nats))
                    .await?;
            let runner = start_runner(&args.runner, args.capacity, Bus::new(transport), audit.clone()).await?;
            let task = runner.serve(root.clone()).await?;
            tracing::info!(capacity = args.capacity, "sandbox-runner serving over NATS");
            root.cancelled().await;
            stop(root.clone(), vec![task], None).await;
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

/// `doctor`: the posture report on stdout; an error when a required check
/// failed.
async fn doctor(args: crate::cli::DoctorArgs) -> anyhow::Result<()> {
    let image = args.image.unwrap_or_else(image::default_image_tag);
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
            let Some(server) = code_mode_bridge::policy_check::command_server(&args.server, args.env, args.allow, file)
            else {
                bail!("no server command after -- (or --config FILE)");
            };
            vec![server]
        }
        (None, None) => bail!("give a policy FILE and the server command after --, or --config FILE"),
    };
    let report = code_mode_bridge::policy_check::check(servers, args.config.is_some(), root.child_token()).await?;
    print!("{report}");
    Ok(())
}

fn http_options(args: &HttpArgs) -> Option<HttpOptions> {
    let addr = args.http.clone()?;
    let auth = AuthOptions {
        tokens_file: args.auth_tokens.clone(),
        oauth: args.oauth_issuer.as_ref().map(|issuer| OAuthOptions {
            issuer: issuer.clone(),
            resource: args.oauth_resource.clone().unwrap_or_default(),
            scopes: args.oauth_scopes.clone(),
        }),
        allowed_origins: args.allowed_origins.clone(),
        insecure_no_auth: args.insecure_no_auth,
        limits: SessionLimits { max_sessions: args.max_sessions, max_per_identity: args.max_sessions_per_identity },
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    Some(HttpOptions { addr, allowed_hosts: args.allowed_hosts.clone(), auth, max_body: args.max_body, tls })
}

/// Serve MCP over HTTP until a signal; the URL goes to stderr.
async fn serve_http(factory: FrontendFactory, options: &HttpOptions, root: &CancellationToken) -> anyhow::Result<()> {
    let server = McpHttpServer::start(factory, options, root.child_token()).await?;
    eprintln!("code-mode: MCP on {}", server.url());
    root.cancelled().await;
    server.stopped().await;
    Ok(())
}

/// Serve `/metrics` and `/healthz` when `--metrics-addr` is given, until the
/// root token is cancelled. Started first, so a bad address fails before
/// anything else starts; `/healthz` answers while the process lives.
async fn start_metrics(
    args: &MetricsArgs,
    service: &str,
    root: &CancellationToken,
) -> anyhow::Result<Option<MetricsServer>> {
    let Some(addr) = &args.metrics_addr else { return Ok(None) };
    let server = MetricsServer::start(addr, service, root.child_token()).await?;
    eprintln!("code-mode: {service} metrics on http://{}/metrics", server.local_addr());
    Ok(Some(server))
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
/// server whose command follows `--`.
fn wrapped_servers(args: &BridgeArgs, server: &[String]) -> anyhow::Result<Vec<WrappedServer>> {
    if let Some(file) = &args.config {
        return Ok(code_mode_bridge::config::load(file)?);
    }
    let Some((command, server_args)) = server.split_first() else {
        bail!("no server command after -- (or --config FILE)");
    };
    Ok(vec![WrappedServer {
        spec: ServerSpec {
            name: command.clone(),
            transport: Transport::Stdio(StdioSpec {
                command: command.clone(),
                args: server_args.to_vec(),
                pass_env: args.env.clone(),
                set_env: vec![],
            }),
            start_timeout: code_mode_core::defaults::START_TIMEOUT,
        },
        allow: (!args.allow.is_empty()).then(|| args.allow.clone()),
        private: args.private.clone(),
        policy: args.policy.clone().map(PolicySource::File),
        origin: code_mode_bridge::Origin::Flags,
    }])
}

/// Start the bridge and its wrapped servers, keeping session state in
/// `state`. With `--config` every tool is named `<server>__<tool>`, even
/// for one server, so names stay put when a server is added.
async fn start_bridge(
    args: &BridgeArgs,
    servers: Vec<WrappedServer>,
    state: SessionStore,
    audit: Option<AuditSink>,
    root: &CancellationToken,
) -> anyhow::Result<(Bridge, Closer)> {
    let (call_timeout, approval_timeout) = (args.call_timeout, args.approval_timeout);
    let config = BridgeConfig {
        servers,
        limits: CallLimits {
            max_calls: args.max_calls,
            call_timeout,
            approval_timeout,
            stateless_idle: args.stateless_idle,
            ..CallLimits::default()
        },
        catalog: Default::default(),
        state,
        policy_options: PolicyOptions { audit, offer_denied: args.offer_denied },
    };
    let started = if args.config.is_some() {
        Bridge::start_prefixed(config, root.child_token()).await?
    } else {
        Bridge::start(config, root.child_token()).await?
    };
    Ok(started)
}

/// Connect to Docker, make sure the image exists, and make a runner (its
/// warm pool starts when it serves).
async fn start_runner(
    args: &RunnerArgs,
    capacity: usize,
    bus: Bus,
    audit: Option<AuditSink>,
) -> anyhow::Result<SandboxRunner> {
    let docker = connect_docker().await?;
    // Before the image, which may take minutes to build.
    code_mode_sandbox_runner::container::check_runtime(&docker, args.runtime).await?;
    let image = args.image.clone().unwrap_or_else(image::default_image_tag);
    let progress = |line: &str| eprintln!("code-mode: {line}");
    image::ensure_image(&docker, &image, args.base, &progress).await?;
    let lockdown = Lockdown { image, ..Lockdown::for_runtime(args.runtime) };
    let warm = args.warm.unwrap_or(DEFAULT_WARM);
    let config =
        RunnerConfig { lockdown, capacity, warm, warm_max: args.warm_max, warm_window: args.warm_window, audit };
    Ok(SandboxRunner::new(docker, config, bus).await?)
}

fn frontend_config(args: &FrontendArgs, max_concurrent: usize) -> anyhow::Result<FrontendConfig> {
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
fn keep_config(args: &KeepArgs) -> Option<KeepConfig> {
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

/// Cancel the root token, wait for the services to drain, then close the
/// wrapped servers.
async fn stop(root: CancellationToken, tasks: Tasks, closer: Option<Closer>) {
    root.cancel();
    for task in tasks {
        let _ = task.await;
    }
    if let Some(closer) = closer {
        closer.closed().await;
    }
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

async fn build_image(base: BaseSource, if_missing: bool) -> anyhow::Result<()> {
    let docker = connect_docker().await?;
    let tag = image::default_image_tag();
    if if_missing && image::image_exists(&docker, &tag).await? {
        eprintln!("build-image: {tag} already exists");
    } else {
        let progress = |line: &str| eprintln!("build-image: {line}");
        image::build_image(&docker, base, &progress).await?;
    }
    println!("{tag}");
    Ok(())
}

/// The three services of one process.
pub struct Stack {
    /// Makes client sessions (one per MCP session over HTTP).
    pub factory: FrontendFactory,
    /// The first client session (stdio, and `run`).
    pub frontend: Frontend,
    closer: Closer,
    tasks: Tasks,
}

impl Stack {
    /// Start everything for one wrapped server over the in-process bus
    /// (`keep`: sessions keep their variables between cells; `direct`: the
    /// wrapped tools offered directly). With `--expose-tools=only` nothing
    /// runs code: no sandbox-runner starts, and Docker is never contacted.
    pub async fn start(
        args: &StackArgs,
        max_concurrent: usize,
        keep: Option<KeepConfig>,
        direct: Direct,
        root: &CancellationToken,
    ) -> anyhow::Result<Stack> {
        let StackArgs { bridge: bridge_args, runner: runner_args, frontend: frontend_args, server, audit, .. } = args;
        let frontend_config = FrontendConfig {
            keep,
            expose: direct.expose,
            max_direct_calls: direct.max_calls,
            ..frontend_config(frontend_args, max_concurrent)?
        };
        // The config file is checked before anything starts.
        let servers = wrapped_servers(bridge_args, server)?;
        let bus = Bus::in_process();
        // One sink, one chain: the runner's cell records and the bridge's
        // call records (the bridge's closer closes it last).
        let audit = crate::audit::open_sink(audit, "serve", None, 1).await?;
        // Docker first: nothing to clean up if it is missing.
        let runner = match direct.expose {
            Expose::Only => None,
            _ => Some(start_runner(runner_args, max_concurrent.max(1), bus.clone(), audit.clone()).await?),
        };
        // One process: the session state lives (and dies) with it.
        let (bridge, closer) = start_bridge(bridge_args, servers, SessionStore::in_memory(), audit, root).await?;
        let mut tasks = Vec::new();
        // From here on a failure must close what was started.
        let started = async {
            tasks.extend(bridge.serve(&bus, root.clone()).await?);
            if let Some(runner) = &runner {
                tasks.push(runner.serve(root.clone()).await?);
            }
            let factory = FrontendFactory::connect(bus, frontend_config).await?;
            let frontend = factory.session();
            frontend.listen_for_approvals().await?;
            anyhow::Ok((factory, frontend))
        }
        .await;
        match started {
            Ok((factory, frontend)) => Ok(Stack { factory, frontend, closer, tasks }),
            Err(e) => {
                stop(root.clone(), tasks, Some(closer)).await;
                Err(e)
            }
        }
    }

    /// Stop every service: cells in flight end and their containers are
    /// removed, then the wrapped server is closed.
    pub async fn stop(self, root: &CancellationToken) {
        stop(root.clone(), self.tasks, Some(self.closer)).await;
    }
}
