//! One locked-down container, from creation to removal.
//!
//! [`Lockdown`] holds every restriction a sandbox container gets; nothing
//! from the host reaches it: no environment, no mounts, no network, no
//! Docker socket. A [`Container`] is created, attached (before start, so no
//! output is lost) and started before it gets its cell; whoever holds it
//! must call [`Container::remove`], and a drop without removal still removes
//! it in the background. Every container carries labels naming its owner
//! process, so [`reap_orphans`] can remove what a dead owner left behind.

use std::collections::HashMap;
use std::pin::Pin;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, ResourcesUlimits};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures::Stream;
use tokio::io::AsyncWrite;

use crate::SandboxError;

/// The label every sandbox container carries.
pub const LABEL_SANDBOX: &str = "code-mode.sandbox";
/// `host:pid:start-time` of the process that created it.
pub const LABEL_OWNER: &str = "code-mode.owner";
/// The cell it ran.
pub const LABEL_CELL: &str = "code-mode.cell";

/// Our seccomp profile: Docker's default model (deny unless listed) with
/// our own list, which also refuses `io_uring_*`.
pub const SECCOMP_PROFILE: &str = include_str!("../image/seccomp.json");

/// Every restriction of a sandbox container.
#[derive(Debug, Clone)]
pub struct Lockdown {
    /// The image.
    pub image: String,
    /// Memory limit in bytes; swap is set to the same, so there is none.
    pub memory_bytes: i64,
    /// Process (and thread) limit.
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
    /// An OCI runtime other than the engine's default (e.g. `runsc`).
    pub runtime: Option<String>,
}

impl Default for Lockdown {
    fn default() -> Self {
        Self {
            image: crate::image::default_image_tag(),
            memory_bytes: 256 * 1024 * 1024,
            pids: 64,
            nofile: 64,
            nano_cpus: 1_000_000_000,
            tmp_bytes: 16 * 1024 * 1024,
            user: "65534:65534".into(),
            seccomp: Some(SECCOMP_PROFILE.to_string()),
            runtime: None,
        }
    }
}

impl Lockdown {
    /// The create request for one container.
    pub fn create_body(&self, labels: HashMap<String, String>) -> ContainerCreateBody {
        let mut security_opt = vec!["no-new-privileges:true".to_string()];
        if let Some(profile) = &self.seccomp {
            security_opt.push(format!("seccomp={profile}"));
        }
        let host_config = HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            tmpfs: Some(HashMap::from([(
                "/tmp".to_string(),
                format!("rw,noexec,nosuid,nodev,size={}", self.tmp_bytes),
            )])),
            // A private IPC namespace with no /dev/shm at all.
            ipc_mode: Some("none".into()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(security_opt),
            memory: Some(self.memory_bytes),
            memory_swap: Some(self.memory_bytes),
            memory_swappiness: None,
            pids_limit: Some(self.pids),
            nano_cpus: Some(self.nano_cpus),
            ulimits: Some(vec![ResourcesUlimits {
                name: Some("nofile".into()),
                soft: Some(self.nofile),
                hard: Some(self.nofile),
            }]),
            binds: Some(vec![]),
            mounts: Some(vec![]),
            privileged: Some(false),
            // Output goes through the attach stream only; nothing is logged to disk.
            log_config: Some(HostConfigLogConfig { typ: Some("none".into()), config: None }),
            runtime: self.runtime.clone(),
            ..Default::default()
        };
        ContainerCreateBody {
            image: Some(self.image.clone()),
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

/// Remove every sandbox container whose owner process on this host is gone.
/// Returns how many were removed.
pub async fn reap_orphans(docker: &Docker) -> Result<usize, SandboxError> {
    let filters = HashMap::from([("label".to_string(), vec![LABEL_SANDBOX.to_string()])]);
    let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
    let list = docker.list_containers(Some(options)).await.map_err(SandboxError::docker("list containers"))?;
    let mut removed = 0;
    for c in list {
        let owner = c.labels.as_ref().and_then(|l| l.get(LABEL_OWNER)).cloned().unwrap_or_default();
        if !owner_is_gone(&owner) {
            continue;
        }
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

/// The container's output stream.
pub type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;
/// The container's input (its stdin).
pub type Input = Pin<Box<dyn AsyncWrite + Send>>;

/// A started container. Call [`Container::remove`] when done with it.
pub struct Container {
    docker: Docker,
    id: String,
    removed: bool,
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
        let labels = HashMap::from([
            (LABEL_SANDBOX.to_string(), "1".to_string()),
            (LABEL_OWNER.to_string(), owner_label()),
            (LABEL_CELL.to_string(), cell.to_string()),
        ]);
        let name = format!("code-mode-{}", uuid::Uuid::new_v4().simple());
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let created = docker
            .create_container(Some(options), lockdown.create_body(labels))
            .await
            .map_err(|e| SandboxError::from_create(e, &lockdown.image))?;
        // From here on the container exists: the guard removes it on any path.
        let container = Container { docker: docker.clone(), id: created.id, removed: false };
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

    /// Why the container stopped, if it did: `(exit code, OOM-killed)`.
    pub async fn exit_state(&self) -> Option<(i64, bool)> {
        let info = self.docker.inspect_container(&self.id, None).await.ok()?;
        let state = info.state?;
        if state.running == Some(true) {
            return None;
        }
        Some((state.exit_code.unwrap_or(-1), state.oom_killed.unwrap_or(false)))
    }

    /// Kill and remove the container.
    pub async fn remove(mut self) {
        self.removed = true;
        remove(&self.docker, &self.id).await;
    }
}

async fn remove(docker: &Docker, id: &str) {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    let result = docker.remove_container(id, Some(options)).await;
    match &result {
        Ok(()) => tracing::debug!(container = %id, "removed"),
        Err(e) => tracing::warn!(container = %id, error = %e, "could not remove the container"),
    }
    code_mode_telemetry::container_removed(result.is_ok());
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
            handle.spawn(async move { remove(&docker, &id).await });
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
    fn our_own_process_is_not_an_orphan_but_a_dead_one_is() {
        assert!(!owner_is_gone(&owner_label()));
        let host = hostname();
        assert!(owner_is_gone(&format!("{host}:{}:1", std::process::id())), "a reused pid has another start time");
        assert!(owner_is_gone(&format!("{host}:4194304:1")), "no such pid");
        assert!(!owner_is_gone("other-host:1:1"), "another host's containers are not ours to judge");
        assert!(!owner_is_gone("garbage"));
    }
}
