//! One locked-down container, from creation to removal.
//!
//! [`Lockdown`] holds every restriction a sandbox container gets; nothing
//! from the host reaches it: no environment, no mounts, no network, no
//! Docker socket. It runs under one [`Runtime`]: runc (the host kernel,
//! behind our seccomp filter) or gVisor's runsc (a kernel of its own between
//! the code and the host, with the same filter loaded inside it); what
//! differs between the two is decided here, and [`check_runtime`] refuses
//! an engine that does not have the runtime registered as we need it.
//!
//! A [`Container`] is created, attached (before start, so no output is
//! lost) and started before it gets its cell; whoever holds it
//! must call [`Container::remove`], and a drop without removal still removes
//! it in the background. Every container carries labels naming its owner
//! process (and the owner's own container, when it runs in one on the same
//! engine), so [`reap_orphans`] can remove what a dead owner left behind.

use std::collections::HashMap;
use std::pin::Pin;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, ResourcesUlimits};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, EventsOptionsBuilder, KillContainerOptionsBuilder,
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::Stream;
use tokio::io::AsyncWrite;

use crate::error::{SandboxError, StartError};

/// The label every sandbox container carries.
pub const LABEL_SANDBOX: &str = "code-mode.sandbox";
/// `host:pid:start-time` of the process that created it.
pub const LABEL_OWNER: &str = "code-mode.owner";
/// The cell it ran.
pub const LABEL_CELL: &str = "code-mode.cell";
/// `<container id>@<start time>` of the Docker container the owner process
/// runs in, when it runs in one on the same engine (a runner of the
/// compose stack): other runners on the engine cannot see its processes,
/// but they can ask the engine whether that container still runs.
pub const LABEL_OWNER_CONTAINER: &str = "code-mode.owner-container";

/// Our seccomp profile under runc: Docker's default model (deny unless
/// listed) with our own list, which also refuses `io_uring_*`,
/// `memfd_create`, `execveat` and device nodes (see `image/SECCOMP.md`).
pub const SECCOMP_PROFILE: &str = include_str!("../image/seccomp.json");

/// The same profile for gVisor, where runsc's `--oci-seccomp` loads it
/// inside the sandbox: it differs only in `clone3` (see `image/SECCOMP.md`).
pub const SECCOMP_PROFILE_RUNSC: &str = include_str!("../image/seccomp-runsc.json");

/// The host-side process limit of a gVisor sandbox. Under runsc the
/// container's pids cgroup holds gVisor's own kernel (the Sentry, a Go
/// program with dozens of threads) and the host processes it uses to run
/// the code (measured here: 535 host pids for 63 sleeping processes of the
/// code); at 64 the Sentry cannot start a thread and the sandbox dies. The
/// code's own limit is then `RLIMIT_NPROC`, which gVisor's kernel counts
/// inside the sandbox.
pub const RUNSC_HOST_PIDS: i64 = 1024;

/// How long a SIGKILL exit may wait for the engine's out-of-memory event
/// ([`Container::exit_state`]). A late event ends the wait as it lands;
/// only containers killed under a cell by something else (a kill from
/// outside, the code killing itself) wait it out in full.
pub const OOM_EVENT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a container may wait for its cell before its runner ends it
/// by itself (`runner.py --unclaimed`): the backstop of a warm container
/// nobody claims, also when its sandbox-runner is gone without closing its
/// input. A live warm pool replaces its containers before this
/// ([`crate::pool::RETIRE_AFTER`]).
pub const UNCLAIMED: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// How long past its own bound (a run's deadline and approval allowance,
/// a kept session's idle time or longest life) a container's runner ends
/// it by itself: the host ends it first whenever it is there to, so this
/// only acts when the sandbox-runner is gone or stuck.
pub const BACKSTOP_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The OCI runtime a sandbox container runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// runc, Docker's default: the code talks to the host kernel through
    /// our seccomp filter.
    #[default]
    Runc,
    /// gVisor's runsc: the code talks to gVisor's own kernel (the Sentry),
    /// which runs on the host behind gVisor's own filter; our profile is
    /// loaded inside the sandbox too (`--oci-seccomp`).
    Runsc,
}

impl Runtime {
    /// Every runtime code-mode can run containers under.
    pub const ALL: [Runtime; 2] = [Runtime::Runc, Runtime::Runsc];

    /// The name the engine knows it by (`HostConfig.Runtime`).
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Runc => "runc",
            Runtime::Runsc => "runsc",
        }
    }

    /// Our seccomp profile for this runtime.
    pub fn seccomp_profile(self) -> &'static str {
        match self {
            Runtime::Runc => SECCOMP_PROFILE,
            Runtime::Runsc => SECCOMP_PROFILE_RUNSC,
        }
    }

    /// Arguments the engine's registration of the runtime must pass it:
    /// runsc fails to set up networking here without `--network=none`, and
    /// without `--oci-seccomp` it would not load our filter at all.
    pub fn required_args(self) -> &'static [&'static str] {
        match self {
            Runtime::Runc => &[],
            Runtime::Runsc => &["--network=none", "--oci-seccomp"],
        }
    }

    /// How to register the runtime with a Docker engine.
    pub fn how_to_register(self) -> String {
        match self {
            Runtime::Runc => "runc is Docker's default runtime; reinstall the engine (Debian: `apt-get install \
                              docker.io runc`)"
                .into(),
            Runtime::Runsc => {
                let args: Vec<String> = self.required_args().iter().map(|a| format!("\"{a}\"")).collect();
                format!(
                    "install gVisor (Debian: `apt-get install runsc`), add {{\"runtimes\": {{\"runsc\": {{\"path\": \
                     \"/usr/bin/runsc\", \"runtimeArgs\": [{}]}}}}}} to /etc/docker/daemon.json and send dockerd \
                     SIGHUP (`kill -HUP $(pidof dockerd)`); scripts/setup.sh does all three",
                    args.join(", ")
                )
            }
        }
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

impl std::str::FromStr for Runtime {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "runc" => Ok(Runtime::Runc),
            "runsc" => Ok(Runtime::Runsc),
            "crun" => Err("crun is not supported: it refuses hosts whose cgroups are in hybrid mode (v1 and v2 \
                           mounted together, as Debian 12's Docker runs them); use runc or runsc"
                .into()),
            other => Err(format!("unknown runtime {other:?}: use runc or runsc")),
        }
    }
}

/// Check that the engine has `runtime` registered the way the lockdown
/// needs it; the error names the runtime and how to register it.
pub async fn check_runtime(docker: &Docker, runtime: Runtime) -> Result<(), StartError> {
    let info = docker.info().await.map_err(StartError::docker("read the engine's runtimes"))?;
    match registration_problem(&info.runtimes.unwrap_or_default(), runtime) {
        None => Ok(()),
        Some(problem) => Err(StartError::Runtime { runtime, problem, how: runtime.how_to_register() }),
    }
}

/// What is wrong with the engine's `registered` runtimes for `runtime`:
/// missing, or registered without an argument the lockdown needs.
pub fn registration_problem(
    registered: &HashMap<String, bollard::models::Runtime>,
    runtime: Runtime,
) -> Option<String> {
    let Some(found) = registered.get(runtime.name()) else {
        let mut names: Vec<&str> = registered.keys().map(String::as_str).collect();
        names.sort_unstable();
        return Some(format!("is not registered with the Docker engine (it has: {})", names.join(", ")));
    };
    let args = found.runtime_args.clone().unwrap_or_default();
    let missing: Vec<&str> = runtime.required_args().iter().copied().filter(|a| !args.iter().any(|g| g == a)).collect();
    (!missing.is_empty())
        .then(|| format!("is registered without the runtimeArgs {} (it has {args:?})", missing.join(" ")))
}

/// Every restriction of a sandbox container.
#[derive(Debug, Clone)]
pub struct Lockdown {
    /// The image.
    pub image: String,
    /// Memory limit in bytes; swap is set to the same, so there is none.
    pub memory_bytes: i64,
    /// Process (and thread) limit of the code: the pids cgroup under runc,
    /// `RLIMIT_NPROC` inside gVisor's kernel under runsc.
    pub pids: i64,
    /// Open-file limit.
    pub nofile: i64,
    /// CPUs, in billionths.
    pub nano_cpus: i64,
    /// Size of the `/tmp` tmpfs in bytes.
    pub tmp_bytes: u64,
    /// `uid:gid` the code runs as.
    pub user: String,
    /// The seccomp profile (JSON), or `None` for the engine's default.
    pub seccomp: Option<String>,
    /// The OCI runtime, always named to the engine (whatever its default).
    pub runtime: Runtime,
    /// How long the runner waits for its cell before it ends the container
    /// by itself ([`UNCLAIMED`]; whole seconds, at least one).
    pub unclaimed: std::time::Duration,
}

impl Default for Lockdown {
    fn default() -> Self {
        Self::for_runtime(Runtime::Runc)
    }
}

impl Lockdown {
    /// The full lockdown under `runtime`, with its seccomp profile.
    pub fn for_runtime(runtime: Runtime) -> Self {
        Self {
            image: crate::image::default_image_tag(),
            memory_bytes: 256 * 1024 * 1024,
            pids: 64,
            nofile: 64,
            nano_cpus: 1_000_000_000,
            tmp_bytes: 16 * 1024 * 1024,
            user: "65534:65534".into(),
            seccomp: Some(runtime.seccomp_profile().to_string()),
            runtime,
            unclaimed: UNCLAIMED,
        }
    }

    /// The create request for one container.
    pub fn create_body(&self, labels: HashMap<String, String>) -> ContainerCreateBody {
        let mut security_opt = vec!["no-new-privileges:true".to_string()];
        if let Some(profile) = &self.seccomp {
            security_opt.push(format!("seccomp={profile}"));
        }
        let mut tmpfs =
            HashMap::from([("/tmp".to_string(), format!("rw,noexec,nosuid,nodev,size={}", self.tmp_bytes))]);
        let mut ulimits =
            vec![ResourcesUlimits { name: Some("nofile".into()), soft: Some(self.nofile), hard: Some(self.nofile) }];
        let mut pids_limit = self.pids;
        if self.runtime == Runtime::Runsc {
            // gVisor's /dev has tun and fuse, which any uid may open (runc's
            // has neither): an empty read-only tmpfs hides each (gVisor
            // ignores the engine's masked paths).
            for hidden in ["/dev/net", "/dev/fuse"] {
                tmpfs.insert(hidden.to_string(), "ro,noexec,nosuid,nodev,size=4096,mode=0555".to_string());
            }
            // The pids cgroup counts gVisor's own threads: the code's limit
            // is RLIMIT_NPROC inside the sandbox instead.
            pids_limit = RUNSC_HOST_PIDS;
            ulimits.push(ResourcesUlimits { name: Some("nproc".into()), soft: Some(self.pids), hard: Some(self.pids) });
        }
        let host_config = HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            tmpfs: Some(tmpfs),
            // A private IPC namespace with no /dev/shm at all.
            ipc_mode: Some("none".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(security_opt),
            memory: Some(self.memory_bytes),
            memory_swap: Some(self.memory_bytes),
            memory_swappiness: None,
            pids_limit: Some(pids_limit),
            nano_cpus: Some(self.nano_cpus),
            ulimits: Some(ulimits),
            binds: Some(vec![]),
            mounts: Some(vec![]),
            privileged: Some(false),
            // Output goes through the attach stream only; nothing is logged to disk.
            log_config: Some(HostConfigLogConfig { typ: Some("none".into()), config: None }),
            runtime: Some(self.runtime.name().to_string()),
            ..Default::default()
        };
        ContainerCreateBody {
            image: Some(self.image.clone()),
            // Arguments of the image's entrypoint, runner.py.
            cmd: Some(vec!["--unclaimed".into(), self.unclaimed.as_secs().max(1).to_string()]),
            user: Some(self.user.clone()),
            env: Some(vec![]),
            labels: Some(labels),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            open_stdin: Some(true),
            stdin_once: Some(true),
            tty: Some(false),
            network_disabled: Some(true),
            working_dir: Some("/tmp".into()),
            host_config: Some(host_config),
            ..Default::default()
        }
    }
}

/// This process's owner label: `host:pid:start-time` (the start time tells a
/// reused pid from ours).
pub fn owner_label() -> String {
    format!("{}:{}:{}", hostname(), std::process::id(), process_start(std::process::id()).unwrap_or(0))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// The start time (clock ticks since boot) of a live process, from `/proc`.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields resume after its closing ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The id of the Docker container this process runs in, from `mountinfo`
/// (`/proc/self/mountinfo`): Docker bind-mounts the container's own
/// `/var/lib/docker/containers/<id>/hostname` on `/etc/hostname`. `None` on
/// a host, where `/etc/hostname` is no such mount.
fn container_id_in(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let (root, mount_point) = (fields.get(3)?, fields.get(4)?);
        if *mount_point != "/etc/hostname" {
            return None;
        }
        let id = root.strip_suffix("/hostname")?.rsplit('/').next()?;
        (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
    })
}

/// This process's [`LABEL_OWNER_CONTAINER`] value, found once: the container
/// it runs in and that container's start time, as `docker` (the engine it
/// starts sandboxes on) reports them; `None` outside a container or when the
/// container is on another engine.
pub async fn owner_container(docker: &Docker) -> Option<String> {
    static OWN: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();
    OWN.get_or_init(|| async {
        let id = container_id_in(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)?;
        let started = docker.inspect_container(&id, None).await.ok()?.state?.started_at?;
        Some(format!("{id}@{started}"))
    })
    .await
    .clone()
}

/// True when the container named by a [`LABEL_OWNER_CONTAINER`] value is no
/// longer the owner's: removed, stopped, or started again since (a new
/// process). Unknown (the engine does not answer) is not gone.
async fn owner_container_is_gone(docker: &Docker, label: &str) -> bool {
    let Some((id, started)) = label.split_once('@') else { return false };
    match docker.inspect_container(id, None).await {
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => true,
        Err(_) => false,
        Ok(info) => {
            let state = info.state.unwrap_or_default();
            state.running != Some(true) || state.started_at.as_deref() != Some(started)
        }
    }
}

/// True when the owner of a sandbox container (its labels) is gone: its
/// container no longer runs it, or it was a process on this host that is no
/// longer running. Owners this process cannot judge are not gone.
async fn owner_gone(docker: &Docker, labels: &HashMap<String, String>) -> bool {
    let owner = labels.get(LABEL_OWNER).map(String::as_str).unwrap_or_default();
    if owner == owner_label() {
        return false;
    }
    match labels.get(LABEL_OWNER_CONTAINER) {
        Some(container) => owner_container_is_gone(docker, container).await,
        None => owner_is_gone(owner),
    }
}

/// True when the owner named by a label is a process on this host that is
/// no longer running.
fn owner_is_gone(label: &str) -> bool {
    let mut parts = label.rsplitn(3, ':');
    let (Some(start), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host != hostname() {
        return false;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    process_start(pid) != Some(start)
}

/// Remove every sandbox container whose owner is gone (see [`owner_gone`]):
/// a process on this host that no longer runs, or a runner container on
/// this engine that stopped or started again. Returns how many were removed.
pub async fn reap_orphans(docker: &Docker) -> Result<usize, StartError> {
    let filters = HashMap::from([("label".to_string(), vec![LABEL_SANDBOX.to_string()])]);
    let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
    let list = docker.list_containers(Some(options)).await.map_err(StartError::docker("list containers"))?;
    let mut removed = 0;
    for c in list {
        let labels = c.labels.unwrap_or_default();
        if !owner_gone(docker, &labels).await {
            continue;
        }
        let owner = labels.get(LABEL_OWNER).cloned().unwrap_or_default();
        if let Some(id) = c.id {
            let options = RemoveContainerOptionsBuilder::new().force(true).build();
            if docker.remove_container(&id, Some(options)).await.is_ok() {
                tracing::info!(container = %id, owner = %owner, "removed a container left by a dead owner");
                removed += 1;
                code_mode_telemetry::containers_reaped(1);
            }
        }
    }
    Ok(removed)
}

/// [`reap_orphans`] every `every` until `cancel`: a serving runner removes
/// what runners that died on its engine left, without waiting for a restart.
pub async fn reap_every(docker: Docker, every: std::time::Duration, cancel: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match reap_orphans(&docker).await {
            Ok(0) => {}
            Ok(reaped) => tracing::info!(reaped, "removed containers of dead sandbox-runners"),
            Err(e) => tracing::warn!(error = %e, "could not look for containers of dead sandbox-runners"),
        }
    }
}

/// The container's output stream.
pub type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;
/// The container's input (its stdin).
pub type Input = Pin<Box<dyn AsyncWrite + Send>>;

/// A started container. Call [`Container::remove`] when done with it.
pub struct Container {
    docker: Docker,
    id: String,
    removed: bool,
    /// When the container was created, in whole seconds before it: where
    /// a look for its out-of-memory event starts.
    created: u64,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container").field("id", &self.id).finish()
    }
}

impl Container {
    /// Create, attach and start a container for `cell`.
    pub async fn start(
        docker: &Docker,
        lockdown: &Lockdown,
        cell: &str,
    ) -> Result<(Container, Output, Input), SandboxError> {
        Self::start_with(docker, lockdown, cell, None).await
    }

    /// [`Container::start`], running `entrypoint` instead of the image's
    /// (the posture probe runs in place of the runner, under the same
    /// lockdown).
    pub async fn start_with(
        docker: &Docker,
        lockdown: &Lockdown,
        cell: &str,
        entrypoint: Option<Vec<String>>,
    ) -> Result<(Container, Output, Input), SandboxError> {
        let mut labels = HashMap::from([
            (LABEL_SANDBOX.to_string(), "1".to_string()),
            (LABEL_OWNER.to_string(), owner_label()),
            (LABEL_CELL.to_string(), cell.to_string()),
        ]);
        if let Some(container) = owner_container(docker).await {
            labels.insert(LABEL_OWNER_CONTAINER.to_string(), container);
        }
        let name = format!("code-mode-{}", uuid::Uuid::new_v4().simple());
        let since = unix_seconds().saturating_sub(1);
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let mut body = lockdown.create_body(labels);
        if entrypoint.is_some() {
            // Another program than the runner: none of the runner's arguments.
            body.entrypoint = entrypoint;
            body.cmd = None;
        }
        let created = docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| SandboxError::from_create(e, &lockdown.image))?;
        // From here on the container exists: the guard removes it on any path.
        let container = Container { docker: docker.clone(), id: created.id, removed: false, created: since };
        code_mode_telemetry::container_started();
        let attach = AttachContainerOptionsBuilder::new().stream(true).stdin(true).stdout(true).stderr(true).build();
        let streams = docker
            .attach_container(&container.id, Some(attach))
            .await
            .map_err(SandboxError::docker("attach to the container"))?;
        docker.start_container(&container.id, None).await.map_err(SandboxError::docker("start the container"))?;
        Ok((container, streams.output, streams.input))
    }

    /// The container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What can pause and unpause it while a call of its cell waits for a
    /// person ([`crate::hold`]).
    pub fn pauser(&self) -> crate::hold::Pauser {
        crate::hold::Pauser { docker: self.docker.clone(), id: self.id.clone() }
    }

    /// Why the container stopped, if it did: `(exit code, OOM-killed)`.
    ///
    /// The engine learns of an out-of-memory kill from an event of its own,
    /// which can land after the exit; Docker 20.10 then never marks the
    /// container OOM-killed, though it still logs an `oom` event for it
    /// (seen under gVisor on a loaded machine: a `die` with exit 137, then
    /// the `oom` in the same second, and the state saying not OOM-killed
    /// for good). So a SIGKILL exit not marked so waits up to
    /// [`OOM_EVENT_GRACE`] for that event in the engine's event log before
    /// it is taken as a plain kill; other exits are read once.
    pub async fn exit_state(&self) -> Option<(i64, bool)> {
        let info = self.docker.inspect_container(&self.id, None).await.ok()?;
        let state = info.state?;
        if state.running == Some(true) {
            return None;
        }
        let (code, oom) = (state.exit_code.unwrap_or(-1), state.oom_killed.unwrap_or(false));
        if oom || code != 137 {
            return Some((code, oom));
        }
        let logged = self.oom_event_logged().await;
        if logged {
            tracing::debug!(container = %self.id, "out-of-memory event logged, the state not marked");
        }
        Some((code, logged))
    }

    /// Whether the engine logs an `oom` event for this container: one
    /// look at its event log from the container's creation, which also
    /// waits for a late event, for up to [`OOM_EVENT_GRACE`].
    pub async fn oom_event_logged(&self) -> bool {
        use futures::StreamExt;
        let filters = HashMap::from([
            ("container".to_string(), vec![self.id.clone()]),
            ("event".to_string(), vec!["oom".to_string()]),
        ]);
        // `until` in the future makes the engine stream live events up to
        // then; the timeout ends the look sooner.
        let until = unix_seconds() + OOM_EVENT_GRACE.as_secs() + 2;
        let options = EventsOptionsBuilder::new()
            .since(&self.created.to_string())
            .until(&until.to_string())
            .filters(&filters)
            .build();
        let mut events = self.docker.events(Some(options));
        let look = async {
            while let Some(event) = events.next().await {
                match event {
                    Ok(e) if e.action.as_deref() == Some("oom") => return true,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(container = %self.id, error = %e, "could not read the engine's events");
                        return false;
                    }
                }
            }
            false
        };
        tokio::time::timeout(OOM_EVENT_GRACE, look).await.unwrap_or(false)
    }

    /// Kill and remove the container.
    pub async fn remove(mut self) {
        self.removed = true;
        remove(&self.docker, &self.id).await;
    }

    /// Kill the container's processes (SIGKILL to its init, which takes
    /// the rest of its PID namespace along). Once this returns the code can
    /// do nothing more; the container still exists until removed. A
    /// container that has already stopped is not an error.
    pub async fn kill(&self) {
        let options = KillContainerOptionsBuilder::new().signal("KILL").build();
        if let Err(e) = self.docker.kill_container(&self.id, Some(options)).await {
            match e {
                // 409: not running; 404: gone already.
                bollard::errors::Error::DockerResponseServerError { status_code: 409 | 404, .. } => {}
                e => tracing::warn!(container = %self.id, error = %e, "could not kill the container"),
            }
        }
    }

    /// Kill and remove the container, keeping the guard: true when it is
    /// gone (removed now, or not there any more), false when the engine
    /// refused, so the caller may try again.
    pub async fn try_remove(&self) -> bool {
        remove(&self.docker, &self.id).await
    }

    /// Drop the guard without a removal in the background: the container
    /// is gone, or given up on and left to the reaper.
    pub fn forget(mut self) {
        self.removed = true;
    }
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

async fn remove(docker: &Docker, id: &str) -> bool {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    let result = docker.remove_container(id, Some(options)).await;
    let gone = match &result {
        Ok(()) => {
            tracing::debug!(container = %id, "removed");
            true
        }
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
            tracing::debug!(container = %id, "gone already");
            true
        }
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "could not remove the container");
            false
        }
    };
    code_mode_telemetry::container_removed(gone);
    gone
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // A cancelled cell: remove in the background if a runtime is still up;
        // otherwise the reaper removes it at the next start.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let docker = self.docker.clone();
            let id = self.id.clone();
            handle.spawn(async move {
                remove(&docker, &id).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lockdown_shares_nothing_with_the_host() {
        let body = Lockdown::default().create_body(HashMap::new());
        let hc = body.host_config.as_ref().unwrap();
        assert_eq!(body.env.as_deref(), Some(&[][..]));
        assert_eq!(body.user.as_deref(), Some("65534:65534"));
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.ipc_mode.as_deref(), Some("none"));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(hc.cap_drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert_eq!(hc.memory, hc.memory_swap, "no swap");
        assert!(hc.binds.as_ref().unwrap().is_empty() && hc.mounts.as_ref().unwrap().is_empty());
        let opts = hc.security_opt.as_ref().unwrap();
        assert!(opts.iter().any(|o| o == "no-new-privileges:true"));
        assert!(opts.iter().any(|o| o.starts_with("seccomp={")));
        assert!(hc.tmpfs.as_ref().unwrap()["/tmp"].contains("noexec,nosuid"));
    }

    #[test]
    fn the_runner_is_told_how_long_it_may_wait_for_its_cell() {
        let body = Lockdown::default().create_body(HashMap::new());
        assert_eq!(body.cmd, Some(vec!["--unclaimed".to_string(), UNCLAIMED.as_secs().to_string()]));
        let short = Lockdown { unclaimed: std::time::Duration::from_millis(10), ..Lockdown::default() };
        assert_eq!(short.create_body(HashMap::new()).cmd.unwrap()[1], "1", "at least a second");
        assert!(BACKSTOP_MARGIN < UNCLAIMED);
    }

    /// The allow rules of a profile: `(name, has argument checks)`.
    fn allowed(profile: &str) -> Vec<(String, bool)> {
        let profile: serde_json::Value = serde_json::from_str(profile).expect("the profile is JSON");
        let mut out = Vec::new();
        for rule in profile["syscalls"].as_array().unwrap() {
            if rule["action"] == "SCMP_ACT_ALLOW" {
                let checked = rule["args"].as_array().is_some_and(|a| !a.is_empty());
                out.extend(
                    rule["names"].as_array().unwrap().iter().map(|n| (n.as_str().unwrap().to_string(), checked)),
                );
            }
        }
        out
    }

    #[test]
    fn both_profiles_refuse_memfd_execveat_and_devices_and_differ_only_in_clone3() {
        for profile in [SECCOMP_PROFILE, SECCOMP_PROFILE_RUNSC] {
            let allowed = allowed(profile);
            for refused in ["memfd_create", "execveat", "io_uring_setup", "unshare", "mount", "bpf"] {
                assert!(allowed.iter().all(|(n, _)| n != refused), "{refused} is allowed");
            }
            for checked in ["mknod", "mknodat", "clone", "socket", "personality"] {
                assert!(
                    allowed.iter().filter(|(n, _)| n == checked).all(|(_, c)| *c),
                    "{checked} is allowed unchecked"
                );
            }
        }
        let mut runc: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE).unwrap();
        let runsc: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE_RUNSC).unwrap();
        let clone3 = |p: &serde_json::Value| {
            p["syscalls"].as_array().unwrap().iter().position(|r| r["names"] == serde_json::json!(["clone3"])).unwrap()
        };
        let (i, j) = (clone3(&runc), clone3(&runsc));
        assert_eq!(runc["syscalls"][i]["errnoRet"], 38, "runc: clone3 answers ENOSYS");
        assert_eq!(runsc["syscalls"][j]["action"], "SCMP_ACT_ALLOW", "runsc: gVisor answers ENOSYS itself");
        runc["syscalls"][i] = runsc["syscalls"][j].clone();
        assert_eq!(runc, runsc, "the profiles differ in more than clone3");
    }

    #[test]
    fn under_runsc_the_lockdown_hides_tun_and_fuse_and_limits_processes_inside_gvisor() {
        let lockdown = Lockdown::for_runtime(Runtime::Runsc);
        let body = lockdown.create_body(HashMap::new());
        let hc = body.host_config.as_ref().unwrap();
        assert_eq!(hc.runtime.as_deref(), Some("runsc"));
        let tmpfs = hc.tmpfs.as_ref().unwrap();
        assert!(tmpfs["/dev/net"].starts_with("ro,") && tmpfs["/dev/fuse"].starts_with("ro,"), "{tmpfs:?}");
        assert_eq!(hc.pids_limit, Some(RUNSC_HOST_PIDS));
        let nproc = hc.ulimits.as_ref().unwrap().iter().find(|u| u.name.as_deref() == Some("nproc")).expect("nproc");
        assert_eq!((nproc.soft, nproc.hard), (Some(lockdown.pids), Some(lockdown.pids)));
        let opts = hc.security_opt.as_ref().unwrap();
        assert!(opts.contains(&format!("seccomp={SECCOMP_PROFILE_RUNSC}")));

        let runc = Lockdown::default().create_body(HashMap::new());
        let hc = runc.host_config.as_ref().unwrap();
        assert_eq!(hc.runtime.as_deref(), Some("runc"), "runc is named, whatever the engine's default");
        assert_eq!(hc.pids_limit, Some(64));
        assert!(
            hc.ulimits.as_ref().unwrap().iter().all(|u| u.name.as_deref() != Some("nproc")),
            "nproc is per host user under runc"
        );
        assert_eq!(hc.tmpfs.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn a_runtime_the_engine_lacks_or_registered_without_our_arguments_is_named() {
        let entry = |args: &[&str]| bollard::models::Runtime {
            path: Some("/usr/bin/runsc".into()),
            runtime_args: Some(args.iter().map(|a| a.to_string()).collect()),
            ..Default::default()
        };
        let mut engine = HashMap::from([("runc".to_string(), bollard::models::Runtime::default())]);
        assert_eq!(registration_problem(&engine, Runtime::Runc), None);
        let missing = registration_problem(&engine, Runtime::Runsc).expect("runsc is missing");
        assert!(missing.contains("not registered") && missing.contains("it has: runc"), "{missing}");

        engine.insert("runsc".into(), entry(&["--network=none"]));
        let partial = registration_problem(&engine, Runtime::Runsc).expect("--oci-seccomp is missing");
        assert!(partial.contains("--oci-seccomp") && !partial.contains("--network=none "), "{partial}");

        engine.insert("runsc".into(), entry(&["--network=none", "--oci-seccomp", "--platform=ptrace"]));
        assert_eq!(registration_problem(&engine, Runtime::Runsc), None);

        let error =
            StartError::Runtime { runtime: Runtime::Runsc, problem: missing, how: Runtime::Runsc.how_to_register() }
                .to_string();
        assert!(error.starts_with("the container runtime runsc is not registered"), "{error}");
        assert!(error.contains("/etc/docker/daemon.json") && error.contains("SIGHUP"), "{error}");
    }

    #[test]
    fn runtimes_parse_by_name_and_crun_is_refused_saying_why() {
        assert_eq!("runc".parse::<Runtime>(), Ok(Runtime::Runc));
        assert_eq!("runsc".parse::<Runtime>(), Ok(Runtime::Runsc));
        let crun = "crun".parse::<Runtime>().unwrap_err();
        assert!(crun.contains("not supported") && crun.contains("hybrid"), "{crun}");
        assert!("kata".parse::<Runtime>().unwrap_err().contains("runc or runsc"));
        assert!(Runtime::Runsc.how_to_register().contains(r#""--network=none", "--oci-seccomp""#));
    }

    #[test]
    fn the_container_a_process_runs_in_is_read_from_its_hostname_mount_and_a_host_has_none() {
        let id = "11a6ce9425db78efc89a9f5e1639f128276777529a84f5ca7c9f69efbf8d6ed5";
        let inside = format!(
            "620 601 0:50 / / ro,relatime - overlay overlay rw\n\
             631 620 254:0 /var/lib/docker/containers/{id}/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw\n\
             632 620 254:0 /var/lib/docker/containers/{id}/hostname /etc/hostname rw - ext4 /dev/vda rw\n"
        );
        assert_eq!(container_id_in(&inside).as_deref(), Some(id));
        // A host sees other containers' mounts, but not on its /etc/hostname.
        let host = format!("90 29 0:55 / /var/lib/docker/containers/{id}/mounts/shm rw - tmpfs shm rw\n");
        assert_eq!(container_id_in(&host), None);
        assert_eq!(container_id_in("632 620 254:0 /x/hostname /etc/hostname rw - ext4 /dev/vda rw"), None);
    }

    #[test]
    fn our_own_process_is_not_an_orphan_but_a_dead_one_is() {
        assert!(!owner_is_gone(&owner_label()));
        let host = hostname();
        assert!(owner_is_gone(&format!("{host}:{}:1", std::process::id())), "a reused pid has another start time");
        assert!(owner_is_gone(&format!("{host}:4194304:1")), "no such pid");
        assert!(!owner_is_gone("other-host:1:1"), "another host's containers are not ours to judge");
        assert!(!owner_is_gone("garbage"));
    }
}
