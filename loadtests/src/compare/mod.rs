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
//! stream to a Python echo in the same lockdown and back. The same call is
//! also made as a client's direct call through `code-mode serve`, which
//! offers the wrapped tools beside `run_python` (`--expose-tools`): the
//! path a gateway client takes (frontend, bridge, server and back).
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
//! `--baseline-image TAG` a warm and a cold stack on an older sandbox image
//! run in the same rounds, in turns with this version's (the baseline
//! second on even rounds, first on odd ones, so neither always follows the
//! same step), so a change of `runner.py` shows before and after in one
//! run: warm and cold cells, the first-output phase, the in-cell call, and
//! each as a ratio of p50s.
//!
//! The files: this one runs the comparison ([`run`]) and holds the stacks
//! it measures; `baseline` is what code-mode is compared with (a raw
//! `docker run`, a direct MCP client), `probe` what is read off the
//! machine and the stacks between samples, `report` the figures and the
//! printed table.

mod baseline;
pub(crate) mod probe;
mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use code_mode_sandbox_runner::container::{Lockdown, Runtime, owner_label};
use code_mode_telemetry::Phase;
use serde_json::{Value, json};

use crate::stack::{Extras, Stack, Transport};
use crate::stats::Summary;

pub use self::baseline::docker_run_args;
use self::baseline::*;
use self::probe::*;
use self::report::*;

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
    /// The baseline image with no warm pool: its cold cells.
    baseline_cold: Option<Stack>,
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
            let extras = || Extras { image: Some(image.clone()), ..Extras::default() };
            self.baseline = Some(Stack::start(&in_process, runtime, server, WARM, at_once, extras()).await?);
            self.baseline_cold = Some(Stack::start(&in_process, runtime, server, 0, at_once, extras()).await?);
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
        for stack in [self.warm, self.cold, self.nats, self.baseline, self.baseline_cold].into_iter().flatten() {
            stack.stop().await;
        }
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
        // The wrapped tools offered beside run_python, so a direct call
        // of `add` through code-mode is measured too.
        serve.arg("serve").args(["--runtime", runtime.name(), "--expose-tools"]).arg("--").args(&options.server);
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
            name: "direct call through code-mode serve, MCP stdio",
            ours: summary(&samples.serve_direct)?,
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
            name: "cold print(1), in process, baseline image",
            ours: summary(&samples.baseline_cold)?,
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
        // This version over the baseline image, p50 against p50, of the
        // figures taken in turns.
        let over = |ours: &[Duration], theirs: &[Duration]| -> Option<f64> {
            let (ours, theirs) = (Summary::of(ours)?, Summary::of(theirs)?);
            Some(ours.p50_ms / theirs.p50_ms.max(1e-6))
        };
        report["baseline"] = json!({
            "image": image,
            "order": "in turns: the baseline image second on even rounds, first on odd ones",
            "p50_over_baseline": {
                "warm": over(&samples.warm, &samples.baseline_warm),
                "cold": over(&samples.cold, &samples.baseline_cold),
                "tool_call_in_cell": over(&samples.calls.in_cell(), &samples.baseline_calls.in_cell()),
            },
            "phases_of_warm_cells": phase_rows(&phases.baseline),
            "first_output_ms": Summary::of(&samples.baseline_first_output).as_ref().map(summary_json),
            "tool_call_breakdown": samples.baseline_calls.breakdown(),
        });
    }
    Ok(report)
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
        // The baseline image's figures are taken beside this version's,
        // first on odd rounds and second on even ones, so that neither
        // image always follows the same step.
        let swap = round % 2 == 1;
        let ((in_process, deltas), baseline) =
            in_turn(swap, warm_cell(stacks.warm()), stacks.baseline.as_ref().map(warm_cell)).await?;
        tokio::time::sleep(SETTLE).await;
        let (cold_sample, baseline_cold) =
            in_turn(swap, cold_cell(stacks.cold()), stacks.baseline_cold.as_ref().map(cold_cell)).await?;
        let (call, baseline_call) =
            in_turn(swap, call_in_cell(stacks.warm()), stacks.baseline.as_ref().map(call_in_cell)).await?;
        let nats_call = match &stacks.nats {
            Some(nats) => Some(call_in_cell(nats).await?),
            None => None,
        };
        let (direct_call, result) = direct.call("add", add.clone()).await?;
        ensure!(result.is_error != Some(true), "add failed: {result:?}");
        let (serve_direct, result) = serve.call("add", add.clone()).await?;
        ensure!(result.is_error != Some(true), "add through code-mode serve failed: {result:?}");
        let echoed = echo.round_trip().await?;
        if keep {
            samples.raw.push(raw);
            samples.mcp_warm.push(mcp);
            samples.warm.push(in_process);
            samples.cold.push(cold_sample);
            samples.calls.0.push(call);
            samples.nats_calls.0.extend(nats_call);
            samples.baseline_calls.0.extend(baseline_call);
            samples.baseline_cold.extend(baseline_cold);
            samples.direct_call.push(direct_call);
            samples.serve_direct.push(serve_direct);
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

/// `ours` and, when there is one, `theirs`, one after the other: `theirs`
/// first when `swap`.
async fn in_turn<T>(
    swap: bool,
    ours: impl Future<Output = anyhow::Result<T>>,
    theirs: Option<impl Future<Output = anyhow::Result<T>>>,
) -> anyhow::Result<(T, Option<T>)> {
    Ok(match theirs {
        None => (ours.await?, None),
        Some(theirs) if swap => {
            let theirs = theirs.await?;
            (ours.await?, Some(theirs))
        }
        Some(theirs) => {
            let ours = ours.await?;
            (ours, Some(theirs.await?))
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[tokio::test]
    async fn in_turn_takes_the_baseline_second_unless_swapped_and_alone_when_there_is_none() {
        let order = Mutex::new(Vec::new());
        let step = |name: &'static str| {
            let order = &order;
            async move {
                order.lock().unwrap().push(name);
                anyhow::Ok(name)
            }
        };
        assert_eq!(in_turn(false, step("ours"), Some(step("theirs"))).await.unwrap(), ("ours", Some("theirs")));
        assert_eq!(in_turn(true, step("ours"), Some(step("theirs"))).await.unwrap(), ("ours", Some("theirs")));
        assert_eq!(
            in_turn(true, step("ours"), None::<std::future::Ready<anyhow::Result<&str>>>).await.unwrap().1,
            None
        );
        assert_eq!(*order.lock().unwrap(), ["ours", "theirs", "theirs", "ours", "ours"]);
    }
}
