//! The composition root: the one place that puts the services together.
//!
//! `code-mode serve` and `run`, the single services of the split
//! deployment (`bridge`, `sandbox-runner`, `frontend`), the library's
//! [`crate::Bridge`] and the load tests all start their services here, so
//! a service is started, served and stopped one way everywhere:
//!
//! - [`start_bridge`]: the wrapped servers, the catalog, the checks; served
//!   on a bus.
//! - [`start_runner`]: the Docker engine checked (the runtime registered,
//!   the image built if missing: the default one, or the one of its
//!   packages) before anything of it starts; served on a bus, its warm pool
//!   filling.
//! - [`Stack::start`]: the three over one in-process bus or over one bus
//!   each, and the frontend's factory of client sessions.
//! - [`session_state`]: where a bridge keeps its session state, by one
//!   rule for every setup.
//!
//! The services reach each other only over the bus, whatever the bus is.
//! Start order fails fast: the Docker engine and the image first (nothing
//! to clean up yet), then the wrapped servers, then the services; a
//! failure closes what was started. [`Stack::stop`] runs the other way:
//! the services stop taking requests (each drains for at most
//! [`code_mode_core::defaults::DRAIN`]), cells in flight end and their containers are
//! removed, then the wrapped servers are closed; past [`STOP_DEADLINE`]
//! the wait gives up, saying so.

use std::time::Duration;

use anyhow::Context;
use code_mode_audit::AuditSink;
use code_mode_bridge::{Bridge, BridgeConfig, CallLimits, Closer, PolicyOptions, WrappedServer};
use code_mode_core::bus::Bus;
use code_mode_core::nats::NatsTransport;
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_mcp_frontend::{FrontendConfig, FrontendFactory};
use code_mode_sandbox_runner::container::{Lockdown, Runtime};
use code_mode_sandbox_runner::image::{self, BaseSource, Packages};
use code_mode_sandbox_runner::{RunnerConfig, SandboxRunner, connect_docker};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// How long stopping a stack may take before it gives up waiting: every
/// service's drain, then the wrapped servers' close (which kills a server
/// that does not exit).
pub const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// What a bridge is started with.
#[derive(Debug, Clone)]
pub struct BridgeParts {
    /// The wrapped servers.
    pub servers: Vec<WrappedServer>,
    /// Name every tool `<server>__<tool>`, even with one server
    /// (`--config`); otherwise only with several.
    pub prefixed: bool,
    /// The limits of each call.
    pub limits: CallLimits,
    /// Where the taints and counters live (in memory for one process,
    /// JetStream when split).
    pub state: SessionStore,
    /// Where decisions are recorded.
    pub audit: Option<AuditSink>,
    /// Offer tools the policy denies outright (labelled).
    pub offer_denied: bool,
    /// Over NATS: where files in past a reply's bound go to the runners.
    pub inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
    /// The directory of the sentence encoder `search_tools` ranks by
    /// meaning with (`--search-model`); none: by words alone.
    pub search_model: Option<std::path::PathBuf>,
}

impl BridgeParts {
    /// `servers` with the default limits, state in memory, no audit.
    pub fn new(servers: Vec<WrappedServer>) -> Self {
        Self {
            servers,
            prefixed: false,
            limits: CallLimits::default(),
            state: SessionStore::in_memory(),
            audit: None,
            offer_denied: false,
            inputs: None,
            search_model: None,
        }
    }
}

/// Where a bridge over `servers` keeps its session state (the private-data
/// taint, the policies' rate-limit counters, remote servers' logins,
/// learned result shapes): in memory for one process (`transport` none:
/// it lives and dies with the process), in JetStream when the services are
/// split, so it outlives the process and every replica shares it
/// (`replicas` copies). There a store is required when the servers need
/// one (private tools, a policy, an auth block) and watched while idle
/// (`codemode_state_store_up`) until `cancel`; otherwise only learned
/// result shapes would live in it, so a server without JetStream costs
/// what the shapes would remember of a restart, never a call: the state
/// then stays in memory, saying so.
pub async fn session_state(
    transport: Option<&NatsTransport>,
    servers: &[WrappedServer],
    replicas: usize,
    cancel: &CancellationToken,
) -> anyhow::Result<SessionStore> {
    let Some(transport) = transport else { return Ok(SessionStore::in_memory()) };
    let needed = servers.iter().any(|s| crate::login::has_auth(s) || !s.private.is_empty() || s.policy.is_some());
    let config = JetStreamConfig { replicas, ..Default::default() };
    match SessionStore::over_nats(transport, config).await {
        Ok(store) => {
            if needed {
                store.watch(code_mode_core::state::PROBE_EVERY, cancel.child_token());
            }
            Ok(store)
        }
        Err(e) if !needed => {
            tracing::warn!(error = %e, "no JetStream for learned result shapes: they last as long as this process");
            Ok(SessionStore::in_memory())
        }
        Err(e) => {
            Err(e).context("opening the session-state store (JetStream) for --private, a policy or an auth block")
        }
    }
}

/// A bridge serving a bus.
#[derive(Debug)]
pub struct RunningBridge {
    /// The bridge.
    pub bridge: Bridge,
    closer: Closer,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningBridge {
    /// Wait until it stopped serving (its token was cancelled) and its
    /// wrapped servers are closed.
    pub async fn stopped(self) {
        for task in self.tasks {
            let _ = task.await;
        }
        self.closer.closed().await;
    }
}

/// Start the wrapped servers of `parts` and serve the bridge on `bus`
/// until `cancel` fires; a failure after the servers started closes them.
pub async fn start_bridge(parts: BridgeParts, bus: &Bus, cancel: &CancellationToken) -> Result<RunningBridge, Error> {
    let config = BridgeConfig {
        servers: parts.servers,
        prefixed: parts.prefixed,
        limits: parts.limits,
        catalog: Default::default(),
        state: parts.state,
        policy_options: PolicyOptions { audit: parts.audit, offer_denied: parts.offer_denied },
    };
    // Loaded before the servers start: a bad model stops startup at once.
    let encoder = match parts.search_model {
        Some(dir) => Some(load_encoder(dir).await?),
        None => None,
    };
    let (bridge, closer) = Bridge::start(config, cancel.child_token()).await?;
    if let Some(inputs) = parts.inputs {
        bridge.hand_files_in_through(inputs);
    }
    if let Some(encoder) = encoder {
        bridge.rank_by_meaning_with(encoder);
    }
    match bridge.serve(bus, cancel.clone()).await {
        Ok(tasks) => Ok(RunningBridge { bridge, closer, tasks }),
        Err(e) => {
            cancel.cancel();
            closer.closed().await;
            Err(e.into())
        }
    }
}

/// Load the sentence encoder in `dir` (from local files only), on a
/// blocking thread: ~90 MB are read.
async fn load_encoder(dir: std::path::PathBuf) -> Result<std::sync::Arc<code_mode_encoder::Encoder>, Error> {
    let started = std::time::Instant::now();
    let at = dir.clone();
    let loaded = tokio::task::spawn_blocking(move || code_mode_encoder::Encoder::load(&dir)).await.map_err(|e| {
        code_mode_encoder::EncoderError::Read {
            path: at,
            source: std::io::Error::other(format!("loading stopped: {e}")),
        }
    })?;
    let encoder = loaded?;
    tracing::info!(
        model = encoder.fingerprint(),
        took_ms = started.elapsed().as_millis() as u64,
        "search by meaning: the sentence encoder is loaded"
    );
    Ok(std::sync::Arc::new(encoder))
}

/// What a sandbox-runner is started with.
#[derive(Debug, Clone)]
pub struct RunnerParts {
    /// The sandbox image (`None`: the one this version builds, built if
    /// missing).
    pub image: Option<String>,
    /// Packages the image holds (`None` image only): the image of
    /// [`image::packages_tag`], built if missing.
    pub packages: Packages,
    /// Where a missing default image's base comes from.
    pub base: BaseSource,
    /// The container runtime.
    pub runtime: Runtime,
    /// Cells at once.
    pub capacity: usize,
    /// The warm pool's floor.
    pub warm: usize,
    /// The warm pool's ceiling (`None`: the capacity).
    pub warm_max: Option<usize>,
    /// How far back the warm pool counts arrivals.
    pub warm_window: Duration,
    /// Where cells are recorded.
    pub audit: Option<AuditSink>,
    /// Told of each step of an image build (minutes on a fresh machine).
    pub progress: fn(&str),
    /// Where cells' files out are kept (shared with the frontend).
    pub files: Option<code_mode_core::files::FileStore>,
    /// Where task cells' reports are kept for any frontend (over NATS).
    pub reports: Option<code_mode_core::reports::CellReports>,
    /// Where files out go for the frontends over NATS.
    pub shared_files: Option<code_mode_core::files_shared::SharedFiles>,
    /// Over NATS: where files in past a reply's bound come from.
    pub shared_inputs: Option<code_mode_core::files_in_shared::SharedInputs>,
}

impl Default for RunnerParts {
    fn default() -> Self {
        let config = RunnerConfig::default();
        Self {
            image: None,
            packages: Packages::default(),
            base: BaseSource::Auto,
            runtime: Runtime::default(),
            capacity: config.capacity,
            warm: config.warm,
            warm_max: config.warm_max,
            warm_window: config.warm_window,
            audit: None,
            progress: |line| tracing::info!("{line}"),
            files: None,
            reports: None,
            shared_files: None,
            shared_inputs: None,
        }
    }
}

/// A sandbox-runner serving a bus.
#[derive(Debug)]
pub struct RunningRunner {
    /// The runner (its warm pool, its id).
    pub runner: SandboxRunner,
    task: JoinHandle<()>,
}

impl RunningRunner {
    /// Wait until it stopped serving (its token was cancelled) and every
    /// container it started is removed.
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}

/// Connect to Docker, check the runtime (before the image, which may take
/// minutes to build), make sure the image exists, and serve a runner on
/// `bus` until `cancel` fires.
pub async fn start_runner(parts: RunnerParts, bus: &Bus, cancel: &CancellationToken) -> Result<RunningRunner, Error> {
    let docker = connect_docker().await?;
    code_mode_sandbox_runner::container::check_runtime(&docker, parts.runtime).await?;
    let tag =
        image::runner_image(&docker, parts.image.as_deref(), &parts.packages, parts.base, &parts.progress).await?;
    let config = RunnerConfig {
        lockdown: Lockdown { image: tag, ..Lockdown::for_runtime(parts.runtime) },
        capacity: parts.capacity.max(1),
        warm: parts.warm,
        warm_max: parts.warm_max,
        warm_window: parts.warm_window,
        audit: parts.audit,
        files: parts.files,
        reports: parts.reports,
        shared_files: parts.shared_files,
        shared_inputs: parts.shared_inputs,
    };
    let runner = SandboxRunner::new(docker, config, bus.clone()).await?;
    let task = runner.serve(cancel.clone()).await?;
    Ok(RunningRunner { runner, task })
}

/// How the services of a stack reach each other.
#[derive(Debug, Clone)]
pub enum Buses {
    /// One bus for all three (in-process for `serve`).
    One(Bus),
    /// One bus each (each its own NATS connection, as if they were apart).
    Apart {
        /// The frontend's.
        frontend: Bus,
        /// The bridge's.
        bridge: Bus,
        /// The runner's.
        runner: Bus,
    },
}

impl Buses {
    fn frontend(&self) -> &Bus {
        match self {
            Buses::One(bus) | Buses::Apart { frontend: bus, .. } => bus,
        }
    }

    fn bridge(&self) -> &Bus {
        match self {
            Buses::One(bus) | Buses::Apart { bridge: bus, .. } => bus,
        }
    }

    fn runner(&self) -> &Bus {
        match self {
            Buses::One(bus) | Buses::Apart { runner: bus, .. } => bus,
        }
    }
}

/// What a stack is started with.
#[derive(Debug, Clone)]
pub struct StackParts {
    /// The bridge.
    pub bridge: BridgeParts,
    /// The sandbox-runner; `None` runs no code (`--expose-tools=only`):
    /// Docker is never contacted.
    pub runner: Option<RunnerParts>,
    /// The frontend.
    pub frontend: FrontendConfig,
}

/// The three services of one stack, and the factory of its client
/// sessions.
#[derive(Debug)]
pub struct Stack {
    /// Makes client sessions (one per MCP session over HTTP).
    pub factory: FrontendFactory,
    /// The bridge.
    pub bridge: Bridge,
    /// The sandbox-runner, when the stack runs code.
    pub runner: Option<SandboxRunner>,
    cancel: CancellationToken,
    running: (RunningBridge, Option<RunningRunner>),
}

impl Stack {
    /// Start the runner (Docker first: nothing to clean up when it is
    /// missing), then the bridge, then the frontend's factory (which waits
    /// for the bridge's catalog); a failure stops what was started. The
    /// stack stops when `cancel` fires or at [`Stack::stop`].
    pub async fn start(parts: StackParts, buses: Buses, cancel: &CancellationToken) -> Result<Stack, Error> {
        let cancel = cancel.child_token();
        let mut parts = parts;
        // Kept files are shared in memory: only where the services share a
        // process and a bus (issue 42; over NATS the `frontend` and
        // `sandbox-runner` commands share the bucket codemode_files).
        if !matches!(buses, Buses::One(_)) {
            parts.frontend.files = None;
        }
        let runner = match parts.runner {
            Some(runner) => {
                let runner = RunnerParts { files: parts.frontend.files.clone(), ..runner };
                Some(start_runner(runner, buses.runner(), &cancel).await?)
            }
            None => None,
        };
        let bridge = match start_bridge(parts.bridge, buses.bridge(), &cancel).await {
            Ok(bridge) => bridge,
            Err(e) => {
                stop(&cancel, None, runner).await;
                return Err(e);
            }
        };
        match FrontendFactory::connect(buses.frontend().clone(), parts.frontend).await {
            Ok(factory) => Ok(Stack {
                factory,
                bridge: bridge.bridge.clone(),
                runner: runner.as_ref().map(|r| r.runner.clone()),
                cancel,
                running: (bridge, runner),
            }),
            Err(e) => {
                stop(&cancel, Some(bridge), runner).await;
                Err(e.into())
            }
        }
    }

    /// Stop every service: cells in flight end and their containers are
    /// removed, then the wrapped servers are closed (at most
    /// [`STOP_DEADLINE`]).
    pub async fn stop(self) {
        let (bridge, runner) = self.running;
        stop(&self.cancel, Some(bridge), runner).await;
    }
}

/// Cancel `cancel`, then wait for the runner (its containers removed) and
/// the bridge (its servers closed), at most [`STOP_DEADLINE`].
pub(crate) async fn stop(cancel: &CancellationToken, bridge: Option<RunningBridge>, runner: Option<RunningRunner>) {
    cancel.cancel();
    let stopped = async {
        if let Some(runner) = runner {
            runner.stopped().await;
        }
        if let Some(bridge) = bridge {
            bridge.stopped().await;
        }
    };
    if tokio::time::timeout(STOP_DEADLINE, stopped).await.is_err() {
        tracing::warn!(deadline = ?STOP_DEADLINE, "the services did not stop in time: giving up waiting for them");
    }
}
