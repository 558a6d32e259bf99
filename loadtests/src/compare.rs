//! `--compare`: code-mode beside the engine's floor, measured side by side
//! in one run, each figure with its ratio.
//!
//! The reference for a cell is a raw `docker run --rm -i` of the same image
//! with the same lock-down flags ([`docker_run_args`], made from the same
//! [`Lockdown`] the runner uses), fed the same cell message on stdin: the
//! runner in it sends `ready`, runs `print(1)`, sends `done` and exits, and
//! the CLI removes the container. The reference for a tool call is the same
//! call (`add` of the test server) made directly by an MCP client over
//! stdio, with no sandbox in between. The call inside the cell is also
//! split where it was timed: its host side at the sandbox-runner (call line
//! read to result line written, `codemode_tool_call_host_seconds`), the
//! bridge's share of that, and the rest, the container's side; beside them
//! the floor of that container side, one line through the engine's attach
//! stream to a Python echo in the same lockdown and back.
//!
//! Latency samples are taken in rounds, one sample of each figure per
//! round, so that whatever else runs on the machine weighs on every figure
//! alike; before each sample the machine is left to settle (the warm pools
//! refilled, a pause for `code-mode serve`'s, whose pool this process cannot
//! see). Throughput batches run one after the other. The report gives the
//! load average before and after, the per-phase breakdown of the in-process
//! warm cells (`codemode_cell_phase_seconds`), the memory of an idle warm
//! container (`docker stats`) and the resident memory of `code-mode serve`
//! idle and after its samples. `--json FILE` writes all of it as JSON.
//!
//! With `--runtimes runc,runsc` the whole comparison runs under each
//! runtime in turn (the raw `docker run` too), one table each; with
//! `--baseline-image TAG` a second warm stack on an older sandbox image
//! runs in the same rounds, so a change of `runner.py` shows before and
//! after in one run (its first-output phase and its in-cell call).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use code_mode_sandbox_runner::container::{
    Container, LABEL_CELL, LABEL_OWNER, LABEL_SANDBOX, Lockdown, Runtime, owner_label,
};
use code_mode_sandbox_runner::protocol::{self, RunnerLimits, ToRunner};
use code_mode_telemetry::Phase;
use code_mode_telemetry::phases::{bridge_call_totals, phase_totals, tool_call_host_totals};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::stack::{Extras, Stack, Transport};
use crate::stats::Summary;

/// Pause before each sample: long enough for a warm pool of 2 to refill on
/// this kind of machine, so no sample pays for the previous one's refill.
const SETTLE: Duration = Duration::from_millis(1000);
/// How long a warm pool may take to refill.
const REFILL_BOUND: Duration = Duration::from_secs(60);
/// The label of the reference containers, so they can be told apart.
const LABEL_COMPARE: &str = "code-mode.loadtest=compare";
/// The warm pool of the code-mode side (`serve`'s default).
const WARM: usize = code_mode_sandbox_runner::DEFAULT_WARM;

/// What `--compare` measures.
#[derive(Debug, Clone)]
pub struct Options {
    /// Rounds of latency samples.
    pub samples: usize,
    /// Unmeasured rounds first.
    pub warmup: usize,
    /// Cells at once in the throughput batches.
    pub concurrency: usize,
    /// Cells per throughput batch.
    pub cells: usize,
    /// The wrapped MCP server (it must have `add`).
    pub server: Vec<String>,
    /// Also measure the in-cell call over this nats-server.
    pub nats: Option<String>,
    /// Write the JSON report here.
    pub json: Option<PathBuf>,
    /// The container runtimes, measured one after the other.
    pub runtimes: Vec<Runtime>,
    /// Also measure warm cells with this (older) sandbox image beside this
    /// version's, in the same rounds.
    pub baseline_image: Option<String>,
}

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
fn cell_line(code: &str) -> Vec<u8> {
    let limits = RunnerLimits { max_output: 65536, stop_output: 1 << 20, max_line: 1 << 18 };
    protocol::encode(&ToRunner::Cell { code, tools: &[], withheld: &[], limits, keep: false })
}

/// One raw `docker run` of `print(1)`: from starting the CLI until it has
/// exited (the container removed), after checking its output.
async fn raw_run(args: &[String]) -> anyhow::Result<Duration> {
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
    drop(stdin);
    let out = child.wait_with_output().await?;
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains(r#""data": "1""#) && stdout.contains(r#""type": "done""#),
        "the raw docker run did not print 1: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(elapsed)
}

/// An MCP client session over stdio with a child process.
struct Client {
    service: RunningService<RoleClient, ()>,
    pid: Option<u32>,
}

impl Client {
    async fn start(mut command: tokio::process::Command, what: &str) -> anyhow::Result<Client> {
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
    async fn call(&self, tool: &str, arguments: Value) -> anyhow::Result<(Duration, rmcp::model::CallToolResult)> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments.as_object().cloned();
        let started = Instant::now();
        let result = self.service.peer().call_tool(params).await.with_context(|| format!("calling {tool}"))?;
        Ok((started.elapsed(), result))
    }

    async fn stop(self) {
        self.service.cancel().await.ok();
    }
}

/// Resident memory of a process now and at its peak, in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field =
        |name: &str| status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse::<u64>().ok();
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Memory of each idle warm container owned by `owner`, in MiB (`docker stats`).
async fn idle_warm_memory(owner: &str) -> anyhow::Result<Vec<f64>> {
    let list = tokio::process::Command::new("docker")
        .args(["ps", "-q", "--no-trunc", "--filter"])
        .arg(format!("label={LABEL_SANDBOX}"))
        .arg("--filter")
        .arg(format!("label={LABEL_OWNER}={owner}"))
        .arg("--filter")
        .arg(format!("label={LABEL_CELL}={}", code_mode_sandbox_runner::pool::WARM_CELL))
        .output()
        .await?;
    let ids: Vec<String> = String::from_utf8_lossy(&list.stdout).split_whitespace().map(String::from).collect();
    if ids.is_empty() {
        return Ok(vec![]);
    }
    let stats = tokio::process::Command::new("docker")
        .args(["stats", "--no-stream", "--format", "{{.MemUsage}}"])
        .args(&ids)
        .output()
        .await?;
    // A container that stopped between the listing and the reading shows
    // 0B: it is no idle container, so it is not a figure.
    Ok(String::from_utf8_lossy(&stats.stdout)
        .lines()
        .filter_map(|l| mib(l.split('/').next()?.trim()))
        .filter(|m| *m > 0.0)
        .collect())
}

/// `12.5MiB`, `900KiB`, `1.1GiB` in MiB.
fn mib(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.trim().parse().ok()?;
    Some(match unit {
        "B" => number / 1048576.0,
        "KiB" | "kB" => number / 1024.0,
        "MiB" | "MB" => number,
        "GiB" | "GB" => number * 1024.0,
        _ => return None,
    })
}

/// Time of the phases recorded in this process so far: (count, seconds).
fn phases_now() -> Vec<(u64, f64)> {
    Phase::ALL.iter().map(|&p| phase_totals(p)).collect()
}

/// One figure: code-mode's samples beside the reference's.
struct Figure {
    name: &'static str,
    ours: Summary,
    reference: Summary,
    reference_name: &'static str,
    goal: &'static str,
}

impl Figure {
    fn json(&self) -> Value {
        json!({
            "figure": self.name,
            "code_mode": summary_json(&self.ours),
            "reference": self.reference_name,
            "reference_ms": summary_json(&self.reference),
            "ratio_p50": self.ours.p50_ms / self.reference.p50_ms,
            "ratio_p90": self.ours.p90_ms / self.reference.p90_ms,
            "goal": self.goal,
        })
    }
}

fn summary_json(s: &Summary) -> Value {
    json!({"n": s.count, "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "max_ms": s.max_ms})
}

/// One tool call inside a cell, timed at three places.
#[derive(Debug, Clone, Copy)]
struct CallSplit {
    /// As the code timed it, around the `await`.
    in_cell: Duration,
    /// At the sandbox-runner: the call line read until the result line
    /// written (`codemode_tool_call_host_seconds`).
    host: Duration,
    /// At the bridge: its checks and the wrapped server's answer
    /// (`codemode_tool_call_duration_seconds`).
    bridge: Duration,
}

/// One part of a call: its name, what it is, how to take it from a split.
type Part = (&'static str, &'static str, fn(&CallSplit) -> Duration);

/// The calls of one path, each split.
#[derive(Default)]
struct Calls(Vec<CallSplit>);

impl Calls {
    fn in_cell(&self) -> Vec<Duration> {
        self.0.iter().map(|c| c.in_cell).collect()
    }

    fn host(&self) -> Vec<Duration> {
        self.0.iter().map(|c| c.host).collect()
    }

    /// Where each call's time went, per component, p50 / p90 / mean over
    /// the calls (each call is split first, so the parts of one call add
    /// up to its whole; the percentiles of the parts need not).
    fn breakdown(&self) -> Value {
        let parts: [Part; 5] = [
            ("in_cell", "the call as the code timed it", |c| c.in_cell),
            (
                "container_side",
                "in the cell minus the host side: the engine's attach stream both ways and runner.py",
                |c| c.in_cell.saturating_sub(c.host),
            ),
            ("host_side", "the runner from reading the call line to writing the result line", |c| c.host),
            ("runner_and_bus", "the host side minus the bridge: the runner's relay and the bus both ways", |c| {
                c.host.saturating_sub(c.bridge)
            }),
            ("bridge", "the bridge's checks and the wrapped server's answer", |c| c.bridge),
        ];
        let mut out = serde_json::Map::new();
        for (name, what, part) in parts {
            let values: Vec<Duration> = self.0.iter().map(part).collect();
            let Some(s) = Summary::of(&values) else { continue };
            let mean = values.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / values.len() as f64;
            out.insert(name.into(), json!({"what": what, "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "mean_ms": mean}));
        }
        Value::Object(out)
    }
}

/// Every sample of one runtime's rounds.
#[derive(Default)]
struct Samples {
    raw: Vec<Duration>,
    mcp_warm: Vec<Duration>,
    warm: Vec<Duration>,
    /// The first-output phase of each in-process warm cell.
    first_output: Vec<Duration>,
    cold: Vec<Duration>,
    calls: Calls,
    nats_calls: Calls,
    direct_call: Vec<Duration>,
    /// A line through the engine's attach stream to an echo and back.
    echo: Vec<Duration>,
    baseline_warm: Vec<Duration>,
    baseline_first_output: Vec<Duration>,
    baseline_calls: Calls,
}

/// Run the comparison under each runtime, one after the other, and print
/// it.
pub async fn run(options: &Options, code_mode: &Path) -> anyhow::Result<()> {
    ensure!(options.samples > 0 && options.cells > 0 && options.concurrency > 0, "nothing to measure");
    ensure!(!options.runtimes.is_empty(), "no runtime to measure");
    let docker = code_mode_sandbox_runner::connect_docker().await?;
    let engine = docker.version().await.ok().and_then(|v| v.version).unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load_before = load_average();
    let mut runs = Vec::new();
    for &runtime in &options.runtimes {
        let mut report = run_runtime(options, code_mode, &docker, runtime).await?;
        report["runtime"] = json!(runtime.name());
        runs.push(report);
    }
    let load_after = load_average();
    let machine = format!("{cores} cores, Docker {engine}, load average {load_before} before, {load_after} after");
    let machine_json = json!({"cores": cores, "docker": engine, "load_before": load_before, "load_after": load_after});
    for report in &runs {
        print_report(report, &machine);
    }
    // The first runtime's report at the top (as with one runtime), every
    // runtime's in `runs`.
    let mut report = runs[0].clone();
    report["machine"] = machine_json;
    if runs.len() > 1 {
        report["runs"] = Value::Array(runs);
    }
    if let Some(path) = &options.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("loadtest: compare: JSON report in {}", path.display());
    }
    Ok(())
}

/// The stacks of one runtime's comparison (each `None` until started).
#[derive(Default)]
struct Stacks {
    warm: Option<Stack>,
    cold: Option<Stack>,
    nats: Option<Stack>,
    baseline: Option<Stack>,
}

impl Stacks {
    /// Start every stack the options ask for; on a failure, stop those
    /// started.
    async fn start(options: &Options, runtime: Runtime) -> anyhow::Result<Stacks> {
        let mut stacks = Stacks::default();
        match stacks.fill(options, runtime).await {
            Ok(()) => Ok(stacks),
            Err(e) => {
                stacks.stop().await;
                Err(e)
            }
        }
    }

    async fn fill(&mut self, options: &Options, runtime: Runtime) -> anyhow::Result<()> {
        let in_process = Transport::InProcess;
        let (server, at_once) = (&options.server, options.concurrency);
        self.warm = Some(Stack::start(&in_process, runtime, server, WARM, at_once, Extras::default()).await?);
        self.cold = Some(Stack::start(&in_process, runtime, server, 0, at_once, Extras::default()).await?);
        if let Some(url) = &options.nats {
            let transport = Transport::Nats(url.clone());
            self.nats = Some(Stack::start(&transport, runtime, server, WARM, at_once, Extras::default()).await?);
        }
        if let Some(image) = &options.baseline_image {
            let extras = Extras { image: Some(image.clone()), ..Extras::default() };
            self.baseline = Some(Stack::start(&in_process, runtime, server, WARM, at_once, extras).await?);
        }
        Ok(())
    }

    fn warm(&self) -> &Stack {
        self.warm.as_ref().expect("the warm stack is started first")
    }

    fn cold(&self) -> &Stack {
        self.cold.as_ref().expect("the cold stack is started second")
    }

    async fn stop(self) {
        for stack in [self.warm, self.cold, self.nats, self.baseline].into_iter().flatten() {
            stack.stop().await;
        }
    }
}

/// A container of the same image under the same lockdown whose process
/// writes back every line it reads: one line's round trip through the
/// engine's attach stream, with nothing of code-mode at either end.
struct Echo {
    container: Container,
    output: code_mode_sandbox_runner::container::Output,
    input: code_mode_sandbox_runner::container::Input,
}

/// The echo's program: read, write back, until end of input.
const ECHO: &str =
    "import os\nwhile True:\n    d = os.read(0, 65536)\n    if not d:\n        break\n    os.write(1, d)\n";

impl Echo {
    async fn start(docker: &bollard::Docker, lockdown: &Lockdown) -> anyhow::Result<Echo> {
        let entrypoint = ["python3", "-I", "-c", ECHO].map(String::from).to_vec();
        let (container, output, input) = Container::start_with(docker, lockdown, "compare-echo", Some(entrypoint))
            .await
            .context("starting the echo container")?;
        let mut echo = Echo { container, output, input };
        // The first line also waits for Python to start.
        match tokio::time::timeout(REFILL_BOUND, echo.round_trip()).await {
            Ok(Ok(_)) => Ok(echo),
            Ok(Err(e)) => {
                echo.container.remove().await;
                Err(e)
            }
            Err(_) => {
                echo.container.remove().await;
                anyhow::bail!("the echo container did not answer within {REFILL_BOUND:?}")
            }
        }
    }

    /// One line written and read back.
    async fn round_trip(&mut self) -> anyhow::Result<Duration> {
        use futures::StreamExt;
        let line = br#"{"type": "result", "id": 1, "ok": true, "value": {"sum": 3}}"#;
        let started = Instant::now();
        self.input.write_all(line).await?;
        self.input.write_all(b"\n").await?;
        self.input.flush().await?;
        let mut got = Vec::new();
        while !got.ends_with(b"\n") {
            match self.output.next().await {
                Some(Ok(bollard::container::LogOutput::StdOut { message })) => got.extend_from_slice(&message),
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("the echo's stream failed: {e}"),
                None => anyhow::bail!("the echo container ended"),
            }
        }
        let elapsed = started.elapsed();
        ensure!(got.len() == line.len() + 1, "the echo sent back {} bytes for {}", got.len(), line.len() + 1);
        Ok(elapsed)
    }

    async fn stop(self) {
        self.container.remove().await;
    }
}

/// Start the stacks of `runtime`, measure, stop them.
async fn run_runtime(
    options: &Options,
    code_mode: &Path,
    docker: &bollard::Docker,
    runtime: Runtime,
) -> anyhow::Result<Value> {
    eprintln!("loadtest: compare: starting code-mode under {runtime} (in process and `code-mode serve`)");
    let stacks = Stacks::start(options, runtime).await?;
    let measured = measure(options, code_mode, docker, runtime, &stacks).await;
    stacks.stop().await;
    measured
}

async fn measure(
    options: &Options,
    code_mode: &Path,
    docker: &bollard::Docker,
    runtime: Runtime,
    stacks: &Stacks,
) -> anyhow::Result<Value> {
    let seccomp = std::env::temp_dir().join(format!("code-mode-compare-seccomp-{}.json", std::process::id()));
    let lockdown =
        Lockdown { image: code_mode_sandbox_runner::image::default_image_tag(), ..Lockdown::for_runtime(runtime) };
    std::fs::write(&seccomp, lockdown.seccomp.as_deref().unwrap_or("{}")).context("writing the seccomp profile")?;
    let raw_args = docker_run_args(&lockdown, Some(&seccomp));
    let measured = async {
        let mut serve = tokio::process::Command::new(code_mode);
        serve.arg("serve").args(["--runtime", runtime.name()]).arg("--").args(&options.server);
        let serve = Client::start(serve, "code-mode serve").await?;
        let (command, args) = options.server.split_first().context("no server command")?;
        let mut direct = tokio::process::Command::new(command);
        direct.args(args);
        let direct = Client::start(direct, "the MCP server").await?;
        let mut echo = Echo::start(docker, &lockdown).await?;
        let measured = rounds(options, &raw_args, &serve, &direct, &mut echo, stacks).await;
        echo.stop().await;
        let serve_pid = serve.pid;
        let serve_after = serve_pid.and_then(rss_kib);
        let serve_warm_memory = match serve_pid {
            Some(pid) => idle_warm_memory(&owner_of(pid)).await.unwrap_or_default(),
            None => vec![],
        };
        serve.stop().await;
        direct.stop().await;
        let (samples, phases, serve_idle) = measured?;
        let through = throughput(options, &raw_args, stacks.warm(), stacks.cold()).await?;
        anyhow::Ok((samples, phases, serve_idle, serve_after, serve_warm_memory, through))
    }
    .await;
    let _ = std::fs::remove_file(&seccomp);
    let (samples, phases, serve_idle, serve_after, serve_warm_memory, through) = measured?;
    let warm_memory = idle_warm_memory(&owner_label()).await.unwrap_or_default();
    let summary = |v: &[Duration]| Summary::of(v).context("no samples");
    const RAW: &str = "docker run --rm -i, same flags and cell";
    const DIRECT: &str = "the same call from an MCP client (stdio)";
    let mut figures = vec![
        Figure {
            name: "warm print(1), MCP stdio (code-mode serve)",
            ours: summary(&samples.mcp_warm)?,
            reference: summary(&samples.raw)?,
            reference_name: RAW,
            goal: "at most 1/30 at p50, 1/15 at p90",
        },
        Figure {
            name: "warm print(1), in process (run_code)",
            ours: summary(&samples.warm)?,
            reference: summary(&samples.raw)?,
            reference_name: RAW,
            goal: "",
        },
        Figure {
            name: "cold print(1), in process (run_code)",
            ours: summary(&samples.cold)?,
            reference: summary(&samples.raw)?,
            reference_name: RAW,
            goal: "",
        },
        Figure {
            name: "tool call inside a cell, in process",
            ours: summary(&samples.calls.in_cell())?,
            reference: summary(&samples.direct_call)?,
            reference_name: DIRECT,
            goal: "at most 1.5x",
        },
        Figure {
            name: "  its host side (runner, bus, bridge, server)",
            ours: summary(&samples.calls.host())?,
            reference: summary(&samples.direct_call)?,
            reference_name: DIRECT,
            goal: "",
        },
        Figure {
            name: "  one line through the attach stream, echoed",
            ours: summary(&samples.echo)?,
            reference: summary(&samples.direct_call)?,
            reference_name: DIRECT,
            goal: "",
        },
    ];
    if !samples.nats_calls.0.is_empty() {
        figures.push(Figure {
            name: "tool call inside a cell, over NATS",
            ours: summary(&samples.nats_calls.in_cell())?,
            reference: summary(&samples.direct_call)?,
            reference_name: DIRECT,
            goal: "",
        });
        figures.push(Figure {
            name: "  its host side over NATS",
            ours: summary(&samples.nats_calls.host())?,
            reference: summary(&samples.direct_call)?,
            reference_name: DIRECT,
            goal: "",
        });
    }
    if !samples.baseline_warm.is_empty() {
        figures.push(Figure {
            name: "warm print(1), in process, baseline image",
            ours: summary(&samples.baseline_warm)?,
            reference: summary(&samples.raw)?,
            reference_name: RAW,
            goal: "",
        });
        figures.push(Figure {
            name: "tool call inside a cell, baseline image",
            ours: summary(&samples.baseline_calls.in_cell())?,
            reference: summary(&samples.direct_call)?,
            reference_name: DIRECT,
            goal: "",
        });
    }
    let figures: Vec<Value> = figures.iter().map(Figure::json).collect();
    let phase_rows = |totals: &[(u64, f64)]| -> Vec<Value> {
        Phase::ALL
            .iter()
            .zip(totals)
            .map(|(phase, (count, seconds))| {
                let mean_ms = if *count > 0 { seconds * 1000.0 / *count as f64 } else { 0.0 };
                json!({"phase": phase.as_str(), "count": count, "mean_ms": mean_ms})
            })
            .collect()
    };
    let kib = |v: Option<(u64, u64)>| v.map(|(rss, peak)| json!({"rss_kib": rss, "peak_kib": peak}));
    let mut calls = json!({"in_process": samples.calls.breakdown()});
    if !samples.nats_calls.0.is_empty() {
        calls["nats"] = samples.nats_calls.breakdown();
    }
    let mut report = json!({
        "samples": options.samples,
        "warmup": options.warmup,
        "image": lockdown.image,
        "figures": figures,
        "throughput": through,
        "phases_of_warm_cells_in_process": phase_rows(&phases.current),
        "first_output_ms": Summary::of(&samples.first_output).as_ref().map(summary_json),
        "tool_call_breakdown": calls,
        "memory": {
            "idle_warm_container_mib": warm_memory.iter().chain(&serve_warm_memory).copied().collect::<Vec<f64>>(),
            "serve_idle": kib(serve_idle),
            "serve_after_samples": kib(serve_after),
            "loadtest_process": kib(rss_kib(std::process::id())),
        },
    });
    if let Some(image) = &options.baseline_image {
        report["baseline"] = json!({
            "image": image,
            "phases_of_warm_cells": phase_rows(&phases.baseline),
            "first_output_ms": Summary::of(&samples.baseline_first_output).as_ref().map(summary_json),
            "tool_call_breakdown": samples.baseline_calls.breakdown(),
        });
    }
    Ok(report)
}

/// The owner label of another process on this host.
fn owner_of(pid: u32) -> String {
    let start = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat[stat.rfind(')')? + 2..].split_whitespace().nth(19).map(String::from))
        .unwrap_or_default();
    let mine = owner_label();
    let host = mine.rsplitn(3, ':').nth(2).unwrap_or_default().to_string();
    format!("{host}:{pid}:{start}")
}

/// Phase totals of the measured in-process warm cells: code-mode's image
/// and the baseline image's.
struct PhaseTotals {
    current: Vec<(u64, f64)>,
    baseline: Vec<(u64, f64)>,
}

type Rounds = (Samples, PhaseTotals, Option<(u64, u64)>);

/// The latency rounds: each round one sample of every figure.
async fn rounds(
    options: &Options,
    raw_args: &[String],
    serve: &Client,
    direct: &Client,
    echo: &mut Echo,
    stacks: &Stacks,
) -> anyhow::Result<Rounds> {
    let mut samples = Samples::default();
    let zero = vec![(0u64, 0f64); Phase::ALL.len()];
    let mut phases = PhaseTotals { current: zero.clone(), baseline: zero };
    let first_output = Phase::ALL.iter().position(|&p| p == Phase::FirstOutput).expect("a phase");
    tokio::time::sleep(SETTLE * 2).await;
    let serve_idle = serve.pid.and_then(rss_kib);
    let add = json!({"a": 1, "b": 2});
    for round in 0..options.warmup + options.samples {
        let keep = round >= options.warmup;
        eprintln!("loadtest: compare: round {} of {}", round + 1, options.warmup + options.samples);
        tokio::time::sleep(SETTLE).await;
        let raw = raw_run(raw_args).await?;
        tokio::time::sleep(SETTLE).await;
        let (mcp, result) = serve.call("run_python", json!({"code": "print(1)"})).await?;
        let stdout = result.structured_content.as_ref().and_then(|s| s["stdout"].as_str()).unwrap_or_default();
        ensure!(result.is_error != Some(true) && stdout == "1\n", "unexpected run_python result: {result:?}");
        let (in_process, deltas) = warm_cell(stacks.warm()).await?;
        let baseline = match &stacks.baseline {
            Some(stack) => Some(warm_cell(stack).await?),
            None => None,
        };
        tokio::time::sleep(SETTLE).await;
        let started = Instant::now();
        let report = stacks.cold().frontend.run_code("print(1)").await?;
        let cold_sample = started.elapsed();
        ensure!(report.stdout == "1\n", "unexpected report {report:?}");
        let call = call_in_cell(stacks.warm()).await?;
        let nats_call = match &stacks.nats {
            Some(nats) => Some(call_in_cell(nats).await?),
            None => None,
        };
        let baseline_call = match &stacks.baseline {
            Some(stack) => Some(call_in_cell(stack).await?),
            None => None,
        };
        let (direct_call, result) = direct.call("add", add.clone()).await?;
        ensure!(result.is_error != Some(true), "add failed: {result:?}");
        let echoed = echo.round_trip().await?;
        if keep {
            samples.raw.push(raw);
            samples.mcp_warm.push(mcp);
            samples.warm.push(in_process);
            samples.cold.push(cold_sample);
            samples.calls.0.push(call);
            samples.nats_calls.0.extend(nats_call);
            samples.baseline_calls.0.extend(baseline_call);
            samples.direct_call.push(direct_call);
            samples.echo.push(echoed);
            add_phases(&mut phases.current, &deltas);
            samples.first_output.extend(one_phase(&deltas, first_output));
            if let Some((elapsed, deltas)) = baseline {
                samples.baseline_warm.push(elapsed);
                add_phases(&mut phases.baseline, &deltas);
                samples.baseline_first_output.extend(one_phase(&deltas, first_output));
            }
        }
    }
    Ok((samples, phases, serve_idle))
}

fn add_phases(totals: &mut [(u64, f64)], deltas: &[(u64, f64)]) {
    for (total, delta) in totals.iter_mut().zip(deltas) {
        total.0 += delta.0;
        total.1 += delta.1;
    }
}

/// The time of phase `index` of one cell, when it recorded exactly one.
fn one_phase(deltas: &[(u64, f64)], index: usize) -> Option<Duration> {
    let (count, seconds) = deltas[index];
    (count == 1).then(|| Duration::from_secs_f64(seconds.max(0.0)))
}

/// One warm `print(1)` through `stack`'s frontend, timed, with the phases
/// it recorded (its container's removal and the pool's refill awaited, so
/// all of them are counted).
async fn warm_cell(stack: &Stack) -> anyhow::Result<(Duration, Vec<(u64, f64)>)> {
    refilled(stack).await?;
    let before = phases_now();
    let started = Instant::now();
    let report = stack.frontend.run_code("print(1)").await?;
    let elapsed = started.elapsed();
    ensure!(report.stdout == "1\n", "unexpected report {report:?}");
    refilled(stack).await?;
    removed_since(&before).await?;
    let after = phases_now();
    Ok((elapsed, before.iter().zip(&after).map(|(b, a)| (a.0 - b.0, a.1 - b.1)).collect()))
}

async fn refilled(stack: &Stack) -> anyhow::Result<()> {
    let pool = stack.runner.pool();
    let filled = tokio::time::timeout(REFILL_BOUND, pool.wait_until_full()).await;
    ensure!(matches!(filled, Ok(true)), "the warm pool did not refill within {REFILL_BOUND:?}");
    Ok(())
}

/// Wait until a removal was recorded since `before` (the remover's, after
/// the report).
async fn removed_since(before: &[(u64, f64)]) -> anyhow::Result<()> {
    let index = Phase::ALL.iter().position(|&p| p == Phase::Remove).expect("remove is a phase");
    let give_up = Instant::now() + REFILL_BOUND;
    while phase_totals(Phase::Remove).0 <= before[index].0 {
        ensure!(Instant::now() < give_up, "the used container was not removed within {REFILL_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// One `add` call inside a warm cell of `stack`: as the code timed it, and
/// its host side and bridge side as the runner and the bridge of this
/// process timed it.
async fn call_in_cell(stack: &Stack) -> anyhow::Result<CallSplit> {
    refilled(stack).await?;
    let (host, bridge) = (tool_call_host_totals(), bridge_call_totals());
    let report = stack.frontend.run_code(crate::ONE_CALL).await?;
    let ms = crate::check_one_call(&report)?.context("the cell printed its call's time")?;
    let (host_after, bridge_after) = (tool_call_host_totals(), bridge_call_totals());
    ensure!(
        host_after.0 == host.0 + 1 && bridge_after.0 == bridge.0 + 1,
        "the call was not timed once at the runner and once at the bridge"
    );
    let seconds = |s: f64| Duration::from_secs_f64(s.max(0.0));
    Ok(CallSplit {
        in_cell: Duration::from_secs_f64(ms.max(0.0) / 1000.0),
        host: seconds(host_after.1 - host.1),
        bridge: seconds(bridge_after.1 - bridge.1),
    })
}

/// Cells per second at `options.concurrency` at once: raw `docker run`,
/// code-mode cold, code-mode with its warm pool.
async fn throughput(options: &Options, raw_args: &[String], warm: &Stack, cold: &Stack) -> anyhow::Result<Value> {
    let mut out = Vec::new();
    for (name, which) in [("docker run", 0), ("code-mode cold", 1), ("code-mode warm", 2)] {
        if which == 2 {
            refilled(warm).await?;
        }
        tokio::time::sleep(SETTLE).await;
        eprintln!("loadtest: compare: {} cells, {} at once, {name}", options.cells, options.concurrency);
        let next = Arc::new(AtomicUsize::new(0));
        let mut workers = tokio::task::JoinSet::new();
        let started = Instant::now();
        for _ in 0..options.concurrency {
            let next = next.clone();
            let cells = options.cells;
            let raw_args = raw_args.to_vec();
            let frontend = match which {
                1 => Some(cold.frontend.clone()),
                2 => Some(warm.frontend.clone()),
                _ => None,
            };
            workers.spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < cells {
                    match &frontend {
                        None => {
                            raw_run(&raw_args).await?;
                        }
                        Some(frontend) => {
                            let report = frontend.run_code("print(1)").await?;
                            ensure!(report.stdout == "1\n", "unexpected report {report:?}");
                        }
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = workers.join_next().await {
            done??;
        }
        let seconds = started.elapsed().as_secs_f64();
        out.push(json!({"what": name, "cells": options.cells, "at_once": options.concurrency,
            "seconds": seconds, "cells_per_s": options.cells as f64 / seconds}));
    }
    let raw = out[0]["cells_per_s"].as_f64().unwrap_or(f64::NAN);
    for row in &mut out {
        let rate = row["cells_per_s"].as_f64().unwrap_or(f64::NAN);
        row["ratio_to_docker_run"] = json!(rate / raw);
    }
    Ok(Value::Array(out))
}

fn print_report(report: &Value, machine: &str) {
    println!("code-mode-loadtest --compare, runtime {}: {machine}", report["runtime"].as_str().unwrap_or_default());
    println!(
        "{:<46} {:>17} {:>17} {:>13}  reference; goal",
        "figure", "code-mode p50/p90", "reference p50/p90", "ratio p50/p90"
    );
    let pair =
        |v: &Value| format!("{:.2} / {:.2}", v["p50_ms"].as_f64().unwrap_or(0.0), v["p90_ms"].as_f64().unwrap_or(0.0));
    for f in report["figures"].as_array().into_iter().flatten() {
        println!(
            "{:<46} {:>17} {:>17} {:>13}  {}; {}",
            f["figure"].as_str().unwrap_or_default(),
            pair(&f["code_mode"]),
            pair(&f["reference_ms"]),
            format!("{:.3} / {:.3}", f["ratio_p50"].as_f64().unwrap_or(0.0), f["ratio_p90"].as_f64().unwrap_or(0.0)),
            f["reference"].as_str().unwrap_or_default(),
            f["goal"].as_str().unwrap_or_default(),
        );
    }
    println!();
    for t in report["throughput"].as_array().into_iter().flatten() {
        println!(
            "throughput {:<16} {} cells, {} at once: {:.2} cells/s ({:.2}x docker run)",
            t["what"].as_str().unwrap_or_default(),
            t["cells"],
            t["at_once"],
            t["cells_per_s"].as_f64().unwrap_or(0.0),
            t["ratio_to_docker_run"].as_f64().unwrap_or(0.0)
        );
    }
    let breakdown = |title: &str, parts: &Value| {
        println!();
        println!("{title} (each call split, then p50 / p90 / mean ms per part):");
        for (name, part) in parts.as_object().into_iter().flatten() {
            println!(
                "  {:<15} {:>8.3} {:>8.3} {:>8.3}  {}",
                name,
                part["p50_ms"].as_f64().unwrap_or(0.0),
                part["p90_ms"].as_f64().unwrap_or(0.0),
                part["mean_ms"].as_f64().unwrap_or(0.0),
                part["what"].as_str().unwrap_or_default()
            );
        }
    };
    for (bus, parts) in report["tool_call_breakdown"].as_object().into_iter().flatten() {
        breakdown(&format!("where the in-cell tool call's time goes, {bus}"), parts);
    }
    let phases = |title: &str, rows: &Value, first: &Value| {
        println!();
        println!("{title} (mean ms; kill, remove and refill are off the cell's path):");
        for p in rows.as_array().into_iter().flatten() {
            println!(
                "  {:<13} {:>8.3} ms  (n = {})",
                p["phase"].as_str().unwrap_or_default(),
                p["mean_ms"].as_f64().unwrap_or(0.0),
                p["count"]
            );
        }
        if first.is_object() {
            println!("  first_output per cell, p50 / p90: {} ms", pair(first));
        }
    };
    phases(
        &format!("phases of the in-process warm print(1) cells, {}", report["image"].as_str().unwrap_or_default()),
        &report["phases_of_warm_cells_in_process"],
        &report["first_output_ms"],
    );
    if let Some(baseline) = report.get("baseline") {
        phases(
            &format!("the same, baseline image {}", baseline["image"].as_str().unwrap_or_default()),
            &baseline["phases_of_warm_cells"],
            &baseline["first_output_ms"],
        );
        breakdown("the in-cell tool call, baseline image", &baseline["tool_call_breakdown"]);
    }
    println!();
    println!("memory: {}", report["memory"]);
    println!();
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

    #[test]
    fn docker_stats_sizes_read_in_mib() {
        assert_eq!(mib("12.5MiB"), Some(12.5));
        assert_eq!(mib("512KiB"), Some(0.5));
        assert_eq!(mib("1GiB"), Some(1024.0));
        assert_eq!(mib("lots"), None);
    }
}
