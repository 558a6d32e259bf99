//! One code-mode stack in this process: the bridge wrapping a stdio MCP
//! server, a sandbox-runner and a frontend, over the in-process bus or over
//! a nats-server (one connection per service, as if they were apart).
//!
//! The stack owns its cancellation token; [`Stack::stop`] cancels it, waits
//! until the services drained (cells stopped, pooled containers removed) and
//! the wrapped server is closed.

use anyhow::{Context, bail};
use code_mode_bridge::server::{ServerSpec, StdioSpec, Transport as ServerTransport};
use std::path::PathBuf;

use code_mode_audit::{AuditSink, SinkOptions};
use code_mode_bridge::{Bridge, BridgeConfig, CallLimits, Closer, PolicyOptions, PolicySource, WrappedServer};
use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_mcp_frontend::{Frontend, FrontendConfig, KeepConfig};
use code_mode_sandbox_runner::container::{Lockdown, Runtime};
use code_mode_sandbox_runner::image::{self, BaseSource};
use code_mode_sandbox_runner::{RunnerConfig, SandboxRunner, connect_docker};
use tokio_util::sync::CancellationToken;

/// How the services reach each other.
#[derive(Debug, Clone)]
pub enum Transport {
    /// One in-process bus.
    InProcess,
    /// A nats-server at this URL.
    Nats(String),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::InProcess => f.write_str("in-process"),
            Transport::Nats(_) => f.write_str("nats"),
        }
    }
}

/// Where a stack writes its audit records.
#[derive(Debug, Clone)]
pub enum Audit {
    /// A file (appended).
    File(PathBuf),
    /// The JetStream stream on the stack's nats-server.
    Nats,
}

impl Transport {
    async fn connect(&self, service: &str) -> anyhow::Result<NatsTransport> {
        match self {
            Transport::InProcess => bail!("the in-process bus is shared, not made per service"),
            Transport::Nats(url) => {
                let options =
                    NatsOptions { url: url.clone(), name: Some(format!("loadtest-{service}")), ..Default::default() };
                NatsTransport::connect(&options).await.with_context(|| format!("connecting to {url}"))
            }
        }
    }

    async fn bus(&self, service: &str) -> anyhow::Result<Bus> {
        Ok(Bus::new(self.connect(service).await?))
    }
}

/// What a scenario adds to a plain stack; the default adds nothing.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The bridge's policy file.
    pub policy: Option<PathBuf>,
    /// Where the audit records go.
    pub audit: Option<Audit>,
    /// Kept sessions (variables kept between cells).
    pub keep: Option<KeepConfig>,
    /// An existing sandbox image tag instead of this version's.
    pub image: Option<String>,
}

/// A running stack.
pub struct Stack {
    /// The frontend cells are sent through.
    pub frontend: Frontend,
    /// The runner (for its warm pool).
    pub runner: SandboxRunner,
    services: Services,
}

/// What stopping waits for.
struct Services {
    cancel: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    closer: Closer,
}

impl Services {
    async fn stop(self) {
        self.cancel.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        self.closer.closed().await;
    }
}

impl Stack {
    /// Start the three services: the runner keeps `warm` containers ready
    /// under `runtime` and runs up to `concurrency` cells, the frontend
    /// sends as many; `extras` adds a policy, an audit sink, kept sessions
    /// or another sandbox image.
    pub async fn start(
        transport: &Transport,
        runtime: Runtime,
        server: &[String],
        warm: usize,
        concurrency: usize,
        extras: Extras,
    ) -> anyhow::Result<Stack> {
        let Extras { policy, audit, keep, image } = extras;
        // The policy's counters live where `code-mode` keeps them: in memory
        // for one process, in JetStream for the split services.
        let (frontend_bus, bridge_bus, runner_bus, state) = match transport {
            Transport::InProcess => {
                let bus = Bus::in_process();
                (bus.clone(), bus.clone(), bus, SessionStore::in_memory())
            }
            Transport::Nats(_) => {
                let bridge = transport.connect("bridge").await?;
                let state = if policy.is_some() {
                    SessionStore::over_nats(&bridge, JetStreamConfig::default()).await?
                } else {
                    SessionStore::in_memory()
                };
                (transport.bus("frontend").await?, Bus::new(bridge), transport.bus("runner").await?, state)
            }
        };
        // One sink for the runner's cell records and the bridge's call
        // records, as `code-mode serve --audit` has.
        let audit = match (audit, transport) {
            (None, _) => None,
            (Some(Audit::File(path)), _) => {
                Some(AuditSink::file(&path, None, SinkOptions::for_service("loadtest")).await?)
            }
            (Some(Audit::Nats), Transport::Nats(_)) => {
                let client = transport.connect("audit").await?.client().clone();
                Some(AuditSink::nats(client, Default::default(), SinkOptions::for_service("loadtest")).await?)
            }
            (Some(Audit::Nats), Transport::InProcess) => bail!("the NATS audit sink needs --nats"),
        };
        let docker = connect_docker().await?;
        let tag = match image {
            Some(tag) => {
                if !image::image_exists(&docker, &tag).await? {
                    bail!("the image {tag} does not exist");
                }
                tag
            }
            None => {
                let tag = image::default_image_tag();
                image::ensure_image(&docker, &tag, BaseSource::Auto, &|line: &str| eprintln!("loadtest: {line}"))
                    .await?;
                tag
            }
        };
        let config = RunnerConfig {
            lockdown: Lockdown { image: tag, ..Lockdown::for_runtime(runtime) },
            capacity: concurrency,
            warm,
            audit: audit.clone(),
            ..RunnerConfig::default()
        };
        let runner = SandboxRunner::new(docker, config, runner_bus).await?;
        let Some((command, args)) = server.split_first() else { bail!("no server command") };
        let bridge_config = BridgeConfig {
            servers: vec![WrappedServer {
                spec: ServerSpec {
                    name: "test-server".into(),
                    transport: ServerTransport::Stdio(StdioSpec {
                        command: command.clone(),
                        args: args.to_vec(),
                        pass_env: vec![],
                        set_env: vec![],
                    }),
                    start_timeout: code_mode_core::defaults::START_TIMEOUT,
                },
                allow: None,
                private: vec![],
                policy: policy.map(PolicySource::File),
                origin: code_mode_bridge::Origin::Flags,
            }],
            limits: CallLimits::default(),
            catalog: Default::default(),
            state,
            policy_options: PolicyOptions { audit, ..Default::default() },
        };
        let cancel = CancellationToken::new();
        let (bridge, closer) = Bridge::start(bridge_config, cancel.child_token()).await?;
        let mut tasks = Vec::new();
        let started = async {
            tasks.extend(bridge.serve(&bridge_bus, cancel.clone()).await?);
            tasks.push(runner.serve(cancel.clone()).await?);
            let config = FrontendConfig { max_concurrent_cells: concurrency.max(1), keep, ..FrontendConfig::default() };
            anyhow::Ok(Frontend::connect(frontend_bus, config).await?)
        }
        .await;
        let services = Services { cancel, tasks, closer };
        match started {
            Ok(frontend) => Ok(Stack { frontend, runner, services }),
            Err(e) => {
                services.stop().await;
                Err(e)
            }
        }
    }

    /// Stop everything and wait until it is gone.
    pub async fn stop(self) {
        self.services.stop().await;
    }
}
