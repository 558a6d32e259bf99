//! One code-mode stack in this process: the bridge wrapping a stdio MCP
//! server, a sandbox-runner and a frontend, over the in-process bus or over
//! a nats-server (one connection per service, as if they were apart).
//!
//! The services are put together by code-mode's own composition root
//! ([`code_mode::stack`]), as `code-mode serve` puts them; [`Stack::stop`]
//! waits until they drained (cells stopped, pooled containers removed) and
//! the wrapped server is closed.

use std::path::PathBuf;

use anyhow::{Context, bail};
use code_mode::stack::{BridgeParts, Buses, RunnerParts, StackParts, session_state};
use code_mode_audit::{AuditSink, SinkOptions};
use code_mode_bridge::WrappedServer;
use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_mcp_frontend::{Frontend, FrontendConfig, KeepConfig};
use code_mode_sandbox_runner::SandboxRunner;
use code_mode_sandbox_runner::container::Runtime;
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
    stack: code_mode::stack::Stack,
    cancel: CancellationToken,
}

impl Stack {
    /// Start the three services (code-mode's composition root,
    /// [`code_mode::stack`]): the runner keeps `warm` containers ready
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
        // Everything the stack starts stops with it (the state store's
        // watch too).
        let cancel = CancellationToken::new();
        let Some(server) = WrappedServer::command(server) else { bail!("no server command") };
        let server = server.named("test-server").policy_file(policy);
        // The policy's counters live where `code-mode` keeps them, by its
        // one rule: in memory for one process, in JetStream for the split
        // services.
        let (buses, state) = match transport {
            Transport::InProcess => {
                (Buses::One(Bus::in_process()), session_state(None, std::slice::from_ref(&server), 1, &cancel).await?)
            }
            Transport::Nats(_) => {
                let bridge = transport.connect("bridge").await?;
                let state = session_state(Some(&bridge), std::slice::from_ref(&server), 1, &cancel).await?;
                let frontend = transport.bus("frontend").await?;
                let runner = transport.bus("runner").await?;
                (Buses::Apart { frontend, bridge: Bus::new(bridge), runner }, state)
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
        let parts = StackParts {
            bridge: BridgeParts { state, audit: audit.clone(), ..BridgeParts::new(vec![server]) },
            runner: Some(RunnerParts {
                image,
                runtime,
                capacity: concurrency,
                warm,
                audit,
                progress: |line| eprintln!("loadtest: {line}"),
                ..RunnerParts::default()
            }),
            frontend: FrontendConfig { max_concurrent_cells: concurrency.max(1), keep, ..FrontendConfig::default() },
        };
        let stack = match code_mode::stack::Stack::start(parts, buses, &cancel).await {
            Ok(stack) => stack,
            Err(e) => {
                cancel.cancel();
                return Err(e.into());
            }
        };
        let frontend = stack.factory.session();
        let runner = stack.runner.clone().context("the stack runs code, so it has a runner")?;
        if let Err(e) = frontend.listen_for_approvals().await {
            stack.stop().await;
            cancel.cancel();
            return Err(e.into());
        }
        Ok(Stack { frontend, runner, stack, cancel })
    }

    /// Stop everything and wait until it is gone.
    pub async fn stop(self) {
        self.stack.stop().await;
        self.cancel.cancel();
    }
}
