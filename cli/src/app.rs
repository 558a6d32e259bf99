//! Composition of the all-in-one process: bridge, sandbox-runner and
//! frontend over one in-process bus, under one root cancellation token.
//!
//! Start order fails fast: the Docker engine and the image first (nothing to
//! clean up yet), then the wrapped server, then the services. Shutdown runs
//! the other way: the frontend stops, the root token is cancelled, cells in
//! flight are stopped and their containers removed, then the wrapped server
//! is closed.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};
use code_mode_bridge::server::ServerSpec;
use code_mode_bridge::{Bridge, BridgeConfig, CallLimits, Closer, WrappedServer};
use code_mode_core::bus::Bus;
use code_mode_mcp_frontend::{Frontend, FrontendConfig};
use code_mode_sandbox_runner::container::Lockdown;
use code_mode_sandbox_runner::image::{self, BaseSource};
use code_mode_sandbox_runner::{RunnerConfig, SandboxRunner, connect_docker};
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, CommonArgs};

/// Run a parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let root = code_mode_core::shutdown::on_signal();
    match cli.command {
        Command::BuildImage(args) => build_image(args.base, args.if_missing).await,
        Command::Serve(args) => {
            let stack = Stack::start(&args.common, &args.server, args.max_concurrent, &root).await?;
            let served = stack.frontend.clone().serve_stdio(root.clone()).await;
            stack.stop(&root).await;
            served.context("serving MCP on stdio")
        }
        Command::Run(args) => {
            let code = read_code(args.code, args.file)?;
            let stack = Stack::start(&args.common, &args.server, 1, &root).await?;
            let report = stack.frontend.run_code(&code).await;
            stack.stop(&root).await;
            let report = report.context("running the cell")?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
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

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value > 0.0) {
        bail!("{flag} must be a positive number of seconds, got {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

/// The three services of one process.
pub struct Stack {
    /// The frontend.
    pub frontend: Frontend,
    closer: Closer,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Stack {
    /// Start everything for one wrapped server.
    pub async fn start(
        common: &CommonArgs,
        server: &[String],
        max_concurrent: usize,
        root: &CancellationToken,
    ) -> anyhow::Result<Stack> {
        let deadline = seconds(common.deadline, "--deadline")?;
        let call_timeout = seconds(common.call_timeout, "--call-timeout")?;
        let Some((command, args)) = server.split_first() else {
            bail!("no server command after --");
        };
        let docker = connect_docker().await?;
        let image = common.image.clone().unwrap_or_else(image::default_image_tag);
        let progress = |line: &str| eprintln!("code-mode: {line}");
        image::ensure_image(&docker, &image, common.base, &progress).await?;

        let bus = Bus::in_process();
        let limits = CallLimits { max_calls: common.max_calls, call_timeout, ..CallLimits::default() };
        let config = BridgeConfig {
            servers: vec![WrappedServer {
                spec: ServerSpec {
                    name: command.clone(),
                    command: command.clone(),
                    args: args.to_vec(),
                    pass_env: common.env.clone(),
                    set_env: vec![],
                    start_timeout: code_mode_core::defaults::START_TIMEOUT,
                },
                allow: (!common.allow.is_empty()).then(|| common.allow.clone()),
            }],
            limits,
            catalog: Default::default(),
        };
        let (bridge, closer) = Bridge::start(config, root.child_token()).await?;
        let mut tasks = Vec::new();
        // From here on a failure must close what was started.
        let started = async {
            tasks.extend(bridge.serve(&bus, root.clone()).await?);
            let lockdown = Lockdown { image, ..Lockdown::default() };
            let runner_config = RunnerConfig { lockdown, capacity: max_concurrent.max(1), call_timeout };
            let runner = SandboxRunner::new(docker, runner_config, bus.clone()).await?;
            tasks.push(runner.serve(root.clone()).await?);
            let frontend_config = FrontendConfig {
                max_code: common.max_code,
                max_concurrent_cells: max_concurrent.max(1),
                deadline,
                description_budget: common.description_budget,
                ..FrontendConfig::default()
            };
            anyhow::Ok(Frontend::connect(bus, frontend_config).await?)
        }
        .await;
        match started {
            Ok(frontend) => Ok(Stack { frontend, closer, tasks }),
            Err(e) => {
                Stack::stop_parts(root, tasks, closer).await;
                Err(e)
            }
        }
    }

    /// Stop every service: cells in flight end and their containers are
    /// removed, then the wrapped server is closed.
    pub async fn stop(self, root: &CancellationToken) {
        Self::stop_parts(root, self.tasks, self.closer).await;
    }

    async fn stop_parts(root: &CancellationToken, tasks: Vec<tokio::task::JoinHandle<()>>, closer: Closer) {
        root.cancel();
        for task in tasks {
            let _ = task.await;
        }
        closer.closed().await;
    }
}
