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
use code_mode_bridge::WrappedServer;
use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTls, NatsTransport};
use code_mode_mcp_frontend::http::{HttpOptions, McpHttpServer};
use code_mode_mcp_frontend::{Expose, Frontend, FrontendFactory, KeepConfig};
use code_mode_sandbox_runner::connect_docker;
use code_mode_sandbox_runner::image;
use code_mode_telemetry::MetricsServer;
use tokio_util::sync::CancellationToken;

use crate::cli::{
    BridgeArgs, Cli, Command, MetricsArgs, NatsArgs, PolicyCheckArgs, PolicyCommand, ServiceArgs, StackArgs,
    TokenCommand,
};
use crate::parts::{
    Direct, bridge_parts, check_image_choice, direct_config, frontend_config, frontend_service_config, http_options,
    keep_config, runner_parts, wrapped_servers,
};
use crate::stack::{Buses, RunnerParts, Stack, StackParts, session_state, start_bridge, start_runner};

/// How long a one-shot `run --search-model` waits for its catalog's tools
/// to be read before the cell starts (a long catalog in a debug build).
const MEANING_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Run a parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let root = code_mode_core::shutdown::on_signal();
    match cli.command {
        Command::BuildImage(args) => build_image(args).await,
        Command::Serve(args) => {
            let _metrics = start_metrics(&args.stack.metrics, "serve", &root).await?;
            let mut http = http_options(&args.clients.http)?;
            if let Some(options) = &http {
                code_mode_mcp_frontend::http::preflight(options).await?;
            }
            // An oauth block that does not say "per" is each identity's own
            // account when clients authenticate (issue 41).
            let identified = http.as_ref().is_some_and(|o| o.auth.tokens_file.is_some() || o.auth.oauth.is_some());
            code_mode_upstream_auth::set_clients_identified(identified);
            let (keep, direct) = (keep_config(&args.clients.keep), direct_config(&args.clients.direct));
            let mut parts = stack_parts(&args.stack, args.max_concurrent, keep, direct, &root).await?;
            if parts.bridge.servers.iter().any(crate::login::exchanges_tokens) {
                // Token exchange: the frontend keeps each OAuth caller's
                // token (sealed) in the store this process's bridge reads.
                let tokens = code_mode_upstream_auth::CallerTokens::ephemeral(parts.bridge.state.clone())?;
                code_mode_upstream_auth::set_caller_tokens(tokens.clone());
                if let Some(options) = &mut http {
                    options.auth.caller_tokens = Some(tokens);
                }
            }
            args.clients.tasks.apply(&mut parts.frontend);
            args.files.apply(&mut parts.frontend);
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
            let mut parts = stack_parts(&args.stack, 1, None, Direct::default(), &root).await?;
            // No client reads the description: no wait for the packages.
            parts.frontend.packages_wait = std::time::Duration::ZERO;
            // --out: the cell's files kept for the run, then written out.
            let store = args
                .out
                .as_ref()
                .map(|_| code_mode_core::files::FileStore::with_ttl(std::time::Duration::from_secs(3600)));
            parts.frontend.files = store.clone();
            let stack = Stack::start(parts, Buses::One(Bus::in_process()), &root).await?;
            if args.stack.bridge.search_model.is_some() && !stack.bridge.meaning_read(MEANING_READ_WAIT).await {
                tracing::warn!("search by meaning: the tools are not read yet; the cell may rank by words alone");
            }
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
            let mut report = report.context("running the cell")?;
            if let (Some(dir), Some(store)) = (&args.out, &store) {
                crate::out_dir::write_out(dir, store, &mut report);
            }
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Frontend(args) => {
            let _metrics = start_metrics(&args.service.metrics, "frontend", &root).await?;
            let transport = nats_transport(&args.service.nats, "code-mode-frontend").await?;
            let copies = replicas(&args.service.nats);
            let (tasks, reports) = tokio::join!(
                crate::task_args::task_store(&transport, copies),
                crate::task_args::cell_reports(&transport, copies, "frontend"),
            );
            let shared = args.files.shared(&transport, copies, "frontend").await;
            let shared_inputs = crate::files_args::inline_inputs_bucket(&transport, copies).await;
            // Token exchange: OAuth callers' tokens, kept for the bridges
            // (only when a token key is given).
            let caller_tokens = match args.clients.http.oauth_issuer.is_some() {
                true => crate::login::caller_tokens_over_nats(&transport, copies).await?,
                false => None,
            };
            let bus = Bus::new(transport);
            let mut config = frontend_service_config(&args);
            config.shared_files = shared;
            config.shared_inputs = shared_inputs;
            if let Some(mut options) = http_options(&args.clients.http)? {
                code_mode_mcp_frontend::http::preflight(&options).await?;
                options.auth.caller_tokens = caller_tokens;
                let factory = FrontendFactory::connect_with_tasks(bus, config, tasks, reports).await?;
                return serve_http(factory, &options, &root).await;
            }
            let frontend = FrontendFactory::connect_with_tasks(bus, config, tasks, reports).await?.session();
            frontend.listen_for_approvals().await?;
            let served = frontend.serve_stdio(root.clone()).await;
            root.cancel();
            served.context("serving MCP on stdio")
        }
        Command::Bridge(args) => {
            let ServiceArgs { nats, metrics } = &args.service;
            let _metrics = start_metrics(metrics, "bridge", &root).await?;
            let transport = nats_transport(nats, "code-mode-bridge").await?;
            let servers = wrapped_servers(&args.bridge)?;
            let logins = servers.iter().any(crate::login::has_auth);
            // Both may wait for a fresh cluster's replicated streams to
            // elect leaders: wait for them side by side, not one after the other.
            let (state, audit) = tokio::try_join!(
                session_state(Some(&transport), &servers, replicas(nats), &root),
                crate::audit::open_sink(&args.audit, "bridge", Some(transport.client()), replicas(nats)),
            )?;
            if logins {
                // Remote servers' logins live in the store too, every
                // replica reading the same grant (sealed with this key).
                let key = code_mode_upstream_auth::Key::from_environment()?;
                code_mode_upstream_auth::set_default_vault(code_mode_upstream_auth::Vault::in_store(
                    state.clone(),
                    key,
                ));
            }
            if servers.iter().any(crate::login::exchanges_tokens) {
                let tokens = crate::login::caller_tokens_over_nats(&transport, replicas(nats)).await?.context(
                    "token exchange needs the token key (CODE_MODE_TOKEN_KEY), the same as the frontends' that keep callers' tokens",
                )?;
                code_mode_upstream_auth::set_caller_tokens(tokens);
            }
            let mut parts = bridge_parts(&args.bridge, servers, state, audit);
            parts.inputs = crate::files_args::inputs_bucket(&transport, replicas(nats)).await;
            let running = start_bridge(parts, &Bus::new(transport), &root).await?;
            reload_on_hangup(&running.bridge, &args.bridge, &root)?;
            tracing::info!("bridge serving over NATS");
            root.cancelled().await;
            running.stopped().await;
            Ok(())
        }
        Command::SandboxRunner(args) => {
            let ServiceArgs { nats, metrics } = &args.service;
            let _metrics = start_metrics(metrics, "sandbox-runner", &root).await?;
            check_image_choice(&args.runner.image, &args.runner.packages)?;
            let transport = nats_transport(nats, "code-mode-sandbox-runner").await?;
            let audit =
                crate::audit::open_sink(&args.audit, "sandbox-runner", Some(transport.client()), replicas(nats))
                    .await?;
            let reports = crate::task_args::cell_reports(&transport, replicas(nats), "sandbox-runner").await;
            let shared_files = args.files.shared(&transport, replicas(nats), "sandbox-runner").await;
            // The runner's own store bounds what it stages (512 MiB, 256 MiB
            // per identity) before the files go to the bucket, whose bounds
            // are --files-max-bytes and --files-quota.
            let files = shared_files.as_ref().map(|_| code_mode_core::files::FileStore::with_ttl(args.files.files_ttl));
            let shared_inputs = Some(code_mode_core::files_in_shared::SharedInputs::reader(transport.client().clone()));
            let parts = RunnerParts {
                reports,
                files,
                shared_files,
                shared_inputs,
                ..runner_parts(&args.runner, args.capacity, audit.clone())
            };
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

/// The three services of `serve` and `run` in one process: session state
/// in memory (it lives and dies with the process), one audit sink for the
/// runner's cell records and the bridge's call records, no sandbox-runner
/// at all with `--expose-tools=only`.
async fn stack_parts(
    args: &StackArgs,
    max_concurrent: usize,
    keep: Option<KeepConfig>,
    direct: Direct,
    root: &CancellationToken,
) -> anyhow::Result<StackParts> {
    let StackArgs { bridge, runner, frontend, audit, .. } = args;
    check_image_choice(&runner.image, &runner.packages)?;
    // The config file is checked before anything starts.
    let servers = wrapped_servers(bridge)?;
    let audit = crate::audit::open_sink(audit, "serve", None, 1).await?;
    let frontend = frontend_config(frontend, max_concurrent, keep, direct);
    let runner = match direct.expose {
        Expose::Only => None,
        _ => Some(runner_parts(runner, max_concurrent.max(1), audit.clone())),
    };
    let state = session_state(None, &servers, 1, root).await?;
    Ok(StackParts { bridge: bridge_parts(bridge, servers, state, audit), runner, frontend })
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

/// Serve MCP on stdin/stdout as `frontend`'s session until the client goes
/// or a signal comes.
async fn serve_stdio(frontend: Frontend, root: &CancellationToken) -> anyhow::Result<()> {
    frontend.listen_for_approvals().await?;
    frontend.serve_stdio(root.clone()).await.context("serving MCP on stdio")
}
