//! What code-mode is compared with: a raw `docker run` of the same image
//! and lockdown fed the same cell, and a direct MCP client of the test
//! server over stdio.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use code_mode_sandbox_runner::container::Lockdown;
use code_mode_sandbox_runner::protocol::{self, RunnerLimits, ToRunner};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::*;

/// The `docker run` arguments of a raw run of `lockdown`'s image with the
/// same restrictions as the runner's containers (`seccomp`: the profile
/// written to a file, as the CLI takes it).
pub fn docker_run_args(lockdown: &Lockdown, seccomp: Option<&Path>) -> Vec<String> {
    let body = lockdown.create_body(Default::default());
    let host = body.host_config.unwrap_or_default();
    let mut args: Vec<String> = ["run", "--rm", "-i", "--label", LABEL_COMPARE].map(String::from).to_vec();
    fn flag(args: &mut Vec<String>, name: &str, value: String) {
        args.push(name.to_string());
        args.push(value);
    }
    flag(&mut args, "--network", host.network_mode.unwrap_or_else(|| "none".into()));
    if host.readonly_rootfs == Some(true) {
        args.push("--read-only".into());
    }
    let mut tmpfs: Vec<(String, String)> = host.tmpfs.unwrap_or_default().into_iter().collect();
    tmpfs.sort();
    for (path, options) in tmpfs {
        flag(&mut args, "--tmpfs", format!("{path}:{options}"));
    }
    if let Some(ipc) = host.ipc_mode {
        flag(&mut args, "--ipc", ipc);
    }
    for cap in host.cap_drop.unwrap_or_default() {
        flag(&mut args, "--cap-drop", cap);
    }
    for option in host.security_opt.unwrap_or_default() {
        if option.starts_with("seccomp=") {
            if let Some(file) = seccomp {
                flag(&mut args, "--security-opt", format!("seccomp={}", file.display()));
            }
        } else {
            flag(&mut args, "--security-opt", option);
        }
    }
    if let Some(memory) = host.memory {
        flag(&mut args, "--memory", format!("{memory}b"));
    }
    if let Some(swap) = host.memory_swap {
        flag(&mut args, "--memory-swap", format!("{swap}b"));
    }
    if let Some(pids) = host.pids_limit {
        flag(&mut args, "--pids-limit", pids.to_string());
    }
    if let Some(cpus) = host.nano_cpus {
        flag(&mut args, "--cpus", format!("{}", cpus as f64 / 1e9));
    }
    for ulimit in host.ulimits.unwrap_or_default() {
        if let (Some(name), Some(soft), Some(hard)) = (ulimit.name, ulimit.soft, ulimit.hard) {
            flag(&mut args, "--ulimit", format!("{name}={soft}:{hard}"));
        }
    }
    if let Some(log) = host.log_config.and_then(|l| l.typ) {
        flag(&mut args, "--log-driver", log);
    }
    if let Some(runtime) = host.runtime {
        flag(&mut args, "--runtime", runtime);
    }
    if let Some(user) = body.user {
        flag(&mut args, "--user", user);
    }
    if let Some(dir) = body.working_dir {
        flag(&mut args, "--workdir", dir);
    }
    args.push(body.image.unwrap_or_default());
    args
}

/// The cell message `print(1)` as the runner reads it.
pub(super) fn cell_line(code: &str) -> Vec<u8> {
    let limits = RunnerLimits { max_output: 65536, stop_output: 1 << 20, max_line: 1 << 18, keep_output: 0 };
    protocol::encode(&ToRunner::Cell { code, tools: &[], withheld: &[], limits, keep: false, inputs: &[] })
}

/// One raw `docker run` of `print(1)`: from starting the CLI until it has
/// exited (the container removed), after checking its output.
pub(super) async fn raw_run(args: &[String]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new("docker")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting docker run")?;
    let mut stdin = child.stdin.take().context("docker run's stdin")?;
    stdin.write_all(&cell_line("print(1)")).await?;
    stdin.flush().await?;
    // The runner ends when its input closes (no sandbox outlives its host),
    // so the input stays open until the cell is done, as the host's does.
    let mut lines = BufReader::new(child.stdout.take().context("docker run's stdout")?).lines();
    let mut stdout = String::new();
    while let Some(line) = lines.next_line().await? {
        stdout.push_str(&line);
        stdout.push('\n');
        if line.contains(r#""type": "done""#) {
            break;
        }
    }
    drop(stdin);
    while let Some(line) = lines.next_line().await? {
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let out = child.wait_with_output().await?;
    let elapsed = started.elapsed();
    ensure!(
        out.status.success() && stdout.contains(r#""data": "1""#) && stdout.contains(r#""type": "done""#),
        "the raw docker run did not print 1: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(elapsed)
}

/// An MCP client session over stdio with a child process.
pub(super) struct Client {
    pub(super) service: RunningService<RoleClient, ()>,
    pub(super) pid: Option<u32>,
}

impl Client {
    pub(super) async fn start(mut command: tokio::process::Command, what: &str) -> anyhow::Result<Client> {
        command.kill_on_drop(true);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let pid = transport.id();
        let service = ().serve(transport).await.with_context(|| format!("the MCP handshake with {what}"))?;
        Ok(Client { service, pid })
    }

    /// One call of `tool`, timed as the client sees it.
    pub(super) async fn call(
        &self,
        tool: &str,
        arguments: Value,
    ) -> anyhow::Result<(Duration, rmcp::model::CallToolResult)> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments.as_object().cloned();
        let started = Instant::now();
        let result = self.service.peer().call_tool(params).await.with_context(|| format!("calling {tool}"))?;
        Ok((started.elapsed(), result))
    }

    pub(super) async fn stop(self) {
        self.service.cancel().await.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_run_carries_every_restriction_of_the_runners_containers() {
        let lockdown = Lockdown::default();
        let args = docker_run_args(&lockdown, Some(Path::new("/tmp/profile.json"))).join(" ");
        for expected in [
            "--network none",
            "--read-only",
            "--tmpfs /tmp:rw,noexec,nosuid,nodev,size=16777216",
            "--ipc none",
            "--cap-drop ALL",
            "--security-opt no-new-privileges:true",
            "--security-opt seccomp=/tmp/profile.json",
            "--memory 268435456b",
            "--memory-swap 268435456b",
            "--pids-limit 64",
            "--cpus 1",
            "--ulimit nofile=64:64",
            "--log-driver none",
            "--runtime runc",
            "--user 65534:65534",
            "--workdir /tmp",
        ] {
            assert!(args.contains(expected), "{expected:?} missing from {args}");
        }
        assert!(args.ends_with(&lockdown.image), "{args}");
        let runsc = docker_run_args(&Lockdown::for_runtime(Runtime::Runsc), None).join(" ");
        assert!(runsc.contains("--runtime runsc") && runsc.contains("--ulimit nproc=64:64"), "{runsc}");
        assert!(runsc.contains("--tmpfs /dev/fuse:ro,"), "{runsc}");
    }
}
