//! `--compare`: code-mode beside the engine's floor, measured side by side
//! in one run, each figure with its ratio.
//!
//! The reference for a cell is a raw `docker run --rm -i` of the same image
//! with the same lock-down flags ([`docker_run_args`], made from the same
//! [`Lockdown`] the runner uses), fed the same cell message on stdin: the
//! runner in it sends `ready`, runs `print(1)`, sends `done` and exits, and
//! the CLI removes the container. The reference for a tool call is the same
//! call (`add` of the test server) made directly by an MCP client over
//! stdio, with no sandbox in between.
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

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use code_mode_sandbox_runner::container::{LABEL_CELL, LABEL_OWNER, LABEL_SANDBOX, Lockdown, Runtime, owner_label};
use code_mode_sandbox_runner::protocol::{self, RunnerLimits, ToRunner};
use code_mode_telemetry::Phase;
use code_mode_telemetry::phases::phase_totals;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::stack::{Stack, Transport};
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
        let s = |s: &Summary| json!({"n": s.count, "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "max_ms": s.max_ms});
        json!({
            "figure": self.name,
            "code_mode": s(&self.ours),
            "reference": self.reference_name,
            "reference_ms": s(&self.reference),
            "ratio_p50": self.ours.p50_ms / self.reference.p50_ms,
            "ratio_p90": self.ours.p90_ms / self.reference.p90_ms,
            "goal": self.goal,
        })
    }
}

/// Sends the same `print(1)` through each path, in rounds.
#[derive(Default)]
struct Samples {
    raw: Vec<Duration>,
    mcp_warm: Vec<Duration>,
    warm: Vec<Duration>,
    cold: Vec<Duration>,
    cell_call: Vec<Duration>,
    nats_cell_call: Vec<Duration>,
    direct_call: Vec<Duration>,
}

/// Run the comparison and print it.
pub async fn run(options: &Options, code_mode: &Path) -> anyhow::Result<()> {
    ensure!(options.samples > 0 && options.cells > 0 && options.concurrency > 0, "nothing to measure");
    let docker = code_mode_sandbox_runner::connect_docker().await?;
    let engine = docker.version().await.ok().and_then(|v| v.version).unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load_before = load_average();
    eprintln!("loadtest: compare: starting code-mode (in process and `code-mode serve`)");
    let in_process = Transport::InProcess;
    let warm =
        Stack::start(&in_process, Runtime::Runc, &options.server, WARM, options.concurrency, None, None, None).await?;
    let cold =
        Stack::start(&in_process, Runtime::Runc, &options.server, 0, options.concurrency, None, None, None).await;
    let cold = match cold {
        Ok(cold) => cold,
        Err(e) => {
            warm.stop().await;
            return Err(e);
        }
    };
    let nats = match &options.nats {
        Some(url) => {
            let transport = Transport::Nats(url.clone());
            Stack::start(&transport, Runtime::Runc, &options.server, WARM, options.concurrency, None, None, None)
                .await
                .map(Some)
        }
        None => Ok(None),
    };
    let result = async {
        let nats = nats?;
        let measured = measure(options, code_mode, &warm, &cold, nats.as_ref()).await;
        if let Some(nats) = nats {
            nats.stop().await;
        }
        measured
    }
    .await;
    warm.stop().await;
    cold.stop().await;
    let mut report = result?;
    let load_after = load_average();
    let machine = format!("{cores} cores, Docker {engine}, load average {load_before} before, {load_after} after");
    report["machine"] = json!({"cores": cores, "docker": engine, "load_before": load_before, "load_after": load_after});
    print_report(&report, &machine);
    if let Some(path) = &options.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("loadtest: compare: JSON report in {}", path.display());
    }
    Ok(())
}

async fn measure(
    options: &Options,
    code_mode: &Path,
    warm: &Stack,
    cold: &Stack,
    nats: Option<&Stack>,
) -> anyhow::Result<Value> {
    let seccomp = std::env::temp_dir().join(format!("code-mode-compare-seccomp-{}.json", std::process::id()));
    let lockdown = Lockdown { image: code_mode_sandbox_runner::image::default_image_tag(), ..Lockdown::default() };
    std::fs::write(&seccomp, lockdown.seccomp.as_deref().unwrap_or("{}")).context("writing the seccomp profile")?;
    let raw_args = docker_run_args(&lockdown, Some(&seccomp));
    let measured = async {
        let mut serve = tokio::process::Command::new(code_mode);
        serve.arg("serve").arg("--").args(&options.server);
        let serve = Client::start(serve, "code-mode serve").await?;
        let (command, args) = options.server.split_first().context("no server command")?;
        let mut direct = tokio::process::Command::new(command);
        direct.args(args);
        let direct = Client::start(direct, "the MCP server").await?;
        let measured = rounds(options, &raw_args, &serve, &direct, warm, cold, nats).await;
        let serve_pid = serve.pid;
        let serve_after = serve_pid.and_then(rss_kib);
        let serve_warm_memory = match serve_pid {
            Some(pid) => idle_warm_memory(&owner_of(pid)).await.unwrap_or_default(),
            None => vec![],
        };
        serve.stop().await;
        direct.stop().await;
        let (samples, phases, serve_idle) = measured?;
        let through = throughput(options, &raw_args, warm, cold).await?;
        anyhow::Ok((samples, phases, serve_idle, serve_after, serve_warm_memory, through))
    }
    .await;
    let _ = std::fs::remove_file(&seccomp);
    let (samples, phases, serve_idle, serve_after, serve_warm_memory, through) = measured?;
    let warm_memory = idle_warm_memory(&owner_label()).await.unwrap_or_default();
    let summary = |v: &[Duration]| Summary::of(v).context("no samples");
    let figures = [
        Figure {
            name: "warm print(1), MCP stdio (code-mode serve)",
            ours: summary(&samples.mcp_warm)?,
            reference: summary(&samples.raw)?,
            reference_name: "docker run --rm -i, same flags and cell",
            goal: "at most 1/30 at p50, 1/15 at p90",
        },
        Figure {
            name: "warm print(1), in process (run_code)",
            ours: summary(&samples.warm)?,
            reference: summary(&samples.raw)?,
            reference_name: "docker run --rm -i, same flags and cell",
            goal: "",
        },
        Figure {
            name: "cold print(1), in process (run_code)",
            ours: summary(&samples.cold)?,
            reference: summary(&samples.raw)?,
            reference_name: "docker run --rm -i, same flags and cell",
            goal: "",
        },
        Figure {
            name: "tool call inside a cell, in process",
            ours: summary(&samples.cell_call)?,
            reference: summary(&samples.direct_call)?,
            reference_name: "the same call from an MCP client (stdio)",
            goal: "at most 1.5x",
        },
    ];
    let mut figures: Vec<Value> = figures.iter().map(Figure::json).collect();
    if !samples.nats_cell_call.is_empty() {
        let over_nats = Figure {
            name: "tool call inside a cell, over NATS",
            ours: summary(&samples.nats_cell_call)?,
            reference: summary(&samples.direct_call)?,
            reference_name: "the same call from an MCP client (stdio)",
            goal: "",
        };
        figures.push(over_nats.json());
    }
    let names = Phase::ALL.iter().map(|p| p.as_str());
    let phases: Vec<Value> = names
        .zip(phases)
        .map(|(name, (count, seconds))| {
            let mean_ms = if count > 0 { seconds * 1000.0 / count as f64 } else { 0.0 };
            json!({"phase": name, "count": count, "mean_ms": mean_ms})
        })
        .collect();
    let kib = |v: Option<(u64, u64)>| v.map(|(rss, peak)| json!({"rss_kib": rss, "peak_kib": peak}));
    Ok(json!({
        "samples": options.samples,
        "warmup": options.warmup,
        "figures": figures,
        "throughput": through,
        "phases_of_warm_cells_in_process": phases,
        "memory": {
            "idle_warm_container_mib": warm_memory.iter().chain(&serve_warm_memory).copied().collect::<Vec<f64>>(),
            "serve_idle": kib(serve_idle),
            "serve_after_samples": kib(serve_after),
            "loadtest_process": kib(rss_kib(std::process::id())),
        },
    }))
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

type Rounds = (Samples, Vec<(u64, f64)>, Option<(u64, u64)>);

/// The latency rounds: each round one sample of every figure.
async fn rounds(
    options: &Options,
    raw_args: &[String],
    serve: &Client,
    direct: &Client,
    warm: &Stack,
    cold: &Stack,
    nats: Option<&Stack>,
) -> anyhow::Result<Rounds> {
    let mut samples = Samples::default();
    let mut phases = vec![(0u64, 0f64); Phase::ALL.len()];
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
        refilled(warm).await?;
        let before = phases_now();
        let started = Instant::now();
        let report = warm.frontend.run_code("print(1)").await?;
        let in_process = started.elapsed();
        ensure!(report.stdout == "1\n", "unexpected report {report:?}");
        // The removal and the refill finish after the report: wait for them
        // so this cell's phases are all counted.
        refilled(warm).await?;
        removed_since(&before).await?;
        let after = phases_now();
        tokio::time::sleep(SETTLE).await;
        let started = Instant::now();
        let report = cold.frontend.run_code("print(1)").await?;
        let cold_sample = started.elapsed();
        ensure!(report.stdout == "1\n", "unexpected report {report:?}");
        refilled(warm).await?;
        let cell_call = call_in_cell(warm).await?;
        let nats_call = match nats {
            Some(nats) => {
                refilled(nats).await?;
                Some(call_in_cell(nats).await?)
            }
            None => None,
        };
        let (direct_call, result) = direct.call("add", add.clone()).await?;
        ensure!(result.is_error != Some(true), "add failed: {result:?}");
        if keep {
            samples.raw.push(raw);
            samples.mcp_warm.push(mcp);
            samples.warm.push(in_process);
            samples.cold.push(cold_sample);
            samples.cell_call.push(cell_call);
            samples.nats_cell_call.extend(nats_call);
            samples.direct_call.push(direct_call);
            for (total, (b, a)) in phases.iter_mut().zip(before.iter().zip(&after)) {
                total.0 += a.0 - b.0;
                total.1 += a.1 - b.1;
            }
        }
    }
    Ok((samples, phases, serve_idle))
}

async fn refilled(stack: &Stack) -> anyhow::Result<()> {
    let pool = stack.runner.pool();
    let filled = tokio::time::timeout(REFILL_BOUND, pool.wait_for(pool.target())).await;
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

/// One `add` call timed inside a warm cell, as the code measured it.
async fn call_in_cell(stack: &Stack) -> anyhow::Result<Duration> {
    let report = stack.frontend.run_code(crate::ONE_CALL).await?;
    let ms = crate::check_one_call(&report)?.context("the cell printed its call's time")?;
    Ok(Duration::from_secs_f64(ms / 1000.0))
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
    println!("code-mode-loadtest --compare: {machine}");
    println!(
        "{:<44} {:>17} {:>17} {:>13}  reference; goal",
        "figure", "code-mode p50/p90", "reference p50/p90", "ratio p50/p90"
    );
    for f in report["figures"].as_array().into_iter().flatten() {
        let pair = |v: &Value| {
            format!("{:.1} / {:.1}", v["p50_ms"].as_f64().unwrap_or(0.0), v["p90_ms"].as_f64().unwrap_or(0.0))
        };
        println!(
            "{:<44} {:>17} {:>17} {:>13}  {}; {}",
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
    println!();
    println!("phases of the in-process warm print(1) cells (mean ms; remove and refill are off the cell's path):");
    for p in report["phases_of_warm_cells_in_process"].as_array().into_iter().flatten() {
        println!(
            "  {:<13} {:>8.3} ms  (n = {})",
            p["phase"].as_str().unwrap_or_default(),
            p["mean_ms"].as_f64().unwrap_or(0.0),
            p["count"]
        );
    }
    println!();
    println!("memory: {}", report["memory"]);
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
