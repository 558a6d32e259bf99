//! `code-mode-loadtest`: how long cells take on this machine.
//!
//! Starts code-mode's three services in this process (the bridge wrapping
//! the test MCP server, a sandbox-runner, a frontend), as `code-mode serve`
//! does, and sends cells through the frontend:
//!
//! - `cold`: `print(1)` with no warm pool: every cell creates, starts and
//!   removes its container;
//! - `warm`: `print(1)` in a warm container, the pool refilled before each
//!   sample;
//! - `tool`: a warm cell making one call, `await add({"a": 1, "b": 2})`,
//!   through the bridge to the test server; the call's round trip as the
//!   code sees it is reported too;
//! - `throughput`: `--cells N` cells of `print(1)`, `--concurrency C` at
//!   once, without and with the warm pool;
//! - `policy`: a warm cell making 20 calls of `add` one after the other,
//!   without a policy and with one rate-limiting `add` (counters in memory
//!   in process, in JetStream over NATS): the mean time per call shows what
//!   a rate-limit check costs;
//! - `audit`: the same 20 calls with every cell and call recorded by an
//!   audit sink (a file in process, the JetStream stream over NATS): what a
//!   record costs per call, next to `policy`'s "no policy" row.
//! - `kept`: `print(1)` in a kept session (`--keep-variables`: the cell runs
//!   in the session's container, started by its first cell), in process
//!   (and over NATS), then through MCP stdio: `code-mode serve
//!   --keep-variables` and, beside it in the same run, `code-mode serve`
//!   with its warm pool, each driven by an MCP client over its
//!   stdin/stdout.
//!
//! - `packages` (only when named, with `--packages-image TAG`): cold and
//!   warm `print(1)` on an image built with packages beside the default
//!   image, samples alternating, a warm cell importing numpy, pandas and
//!   pyplot, each image's idle warm container memory and size (see
//!   [`packages`]).
//!
//! `--compare` instead measures code-mode beside the engine's floor in one
//! run (`compare`): a raw `docker run` of the same cell, a direct MCP call.
//!
//! Everything runs over the in-process bus, then again over a nats-server
//! when `--nats URL` is given, under each runtime of `--runtimes` (runc by
//! default; `runc,runsc` measures gVisor beside it). See `loadtests/README.md`.
//!
//! `code-mode-loadtest clients ...` instead loads a code-mode that runs
//! elsewhere (the compose stack, `code-mode serve`) through real MCP client
//! sessions: see [`clients`].

mod clients;
mod compare;
mod mcp;
mod packages;
mod plots;
mod stack;
mod stats;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::{Parser, ValueEnum};
use code_mode_mcp_frontend::KeepConfig;
use code_mode_proto::CellReport;
use code_mode_sandbox_runner::DEFAULT_WARM;
use code_mode_sandbox_runner::container::Runtime;

use crate::stack::{Audit, Extras, Stack, Transport};
use crate::stats::Summary;

/// Measure the latency and throughput of code-mode cells on this machine.
#[derive(Debug, Parser)]
#[command(name = "code-mode-loadtest")]
struct Args {
    /// Measured cells per latency scenario.
    #[arg(long, default_value_t = 20, value_name = "N")]
    samples: usize,
    /// Unmeasured cells before each latency scenario.
    #[arg(long, default_value_t = 2, value_name = "N")]
    warmup: usize,
    /// Warm containers of the runner in the warm, tool and warm-throughput
    /// scenarios.
    #[arg(long, default_value_t = DEFAULT_WARM, value_name = "N")]
    warm: usize,
    /// Cells at once in the throughput scenario (also the runner's capacity).
    #[arg(long, default_value_t = code_mode_core::defaults::MAX_CONCURRENT_CELLS, value_name = "C")]
    concurrency: usize,
    /// Cells in the throughput scenario.
    #[arg(long, default_value_t = 40, value_name = "N")]
    cells: usize,
    /// Also run every scenario with the services talking over this
    /// nats-server (nothing else should use it meanwhile).
    #[arg(long, value_name = "URL")]
    nats: Option<String>,
    /// Which scenarios to run.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cold,warm,tool,throughput,policy,audit,kept")]
    scenarios: Vec<Scenario>,
    /// The container runtimes to measure, one after the other in this run
    /// (`runc,runsc` puts gVisor's cost beside runc's).
    #[arg(long, value_delimiter = ',', default_value = "runc", value_name = "LIST")]
    runtimes: Vec<Runtime>,
    /// Measure code-mode beside a raw `docker run` of the same cell (and a
    /// direct MCP call beside the call inside a cell), side by side in one
    /// run, with ratios; the other scenarios are not run.
    #[arg(long)]
    compare: bool,
    /// The `packages` scenario's image: one `code-mode build-image
    /// --requirements` made (e.g. of testing/packages/data-science.txt).
    #[arg(long, value_name = "TAG")]
    packages_image: Option<String>,
    /// With `--compare`: also write the report as JSON to this file.
    #[arg(long, value_name = "FILE", requires = "compare")]
    json: Option<PathBuf>,
    /// With `--compare`: also run warm cells on this sandbox image (an
    /// older runner.py) in the same rounds, beside this version's image.
    #[arg(long, value_name = "TAG", requires = "compare")]
    baseline_image: Option<String>,
    /// The MCP server to wrap (default: `code-mode-test-server` next to this
    /// binary).
    #[arg(last = true, value_name = "SERVER_COMMAND")]
    server: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    Cold,
    Warm,
    Tool,
    Throughput,
    Policy,
    Audit,
    Kept,
    Packages,
}

const PRINT_ONE: &str = "print(1)";
const ONE_CALL: &str = "import time\nt = time.perf_counter()\nr = await add({\"a\": 1, \"b\": 2})\n\
                        print(r)\nprint((time.perf_counter() - t) * 1000)";
/// Calls in one sample of the `policy` scenario.
const SERIAL_CALLS: usize = 20;
/// `SERIAL_CALLS` calls one after the other; prints the mean per call in ms.
const SERIAL: &str = "import time\nt = time.perf_counter()\nfor i in range(20):\n    r = await add({\"a\": i, \"b\": 1})\n\
                      print(r)\nprint((time.perf_counter() - t) * 1000 / 20)";
/// A rate limit on `add` that never refuses in a load test, so that every
/// call pays for the counter's check and update.
const LIMITED: &str = r#"{"version": "1", "default": "allow",
  "tools": {"add": {"limits": [{"counter": "loadtest", "window": "hour", "max": 1000000000}]}}}"#;

/// How long a warm pool may take to refill between samples.
const REFILL_BOUND: Duration = Duration::from_secs(60);

/// One line of the results.
struct Row {
    scenario: String,
    runtime: Runtime,
    transport: String,
    summary: Summary,
    note: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    code_mode_core::init_logging("warn");
    if std::env::args().nth(1).as_deref() == Some("clients") {
        let args = clients::ClientsArgs::parse_from(std::env::args().skip(1));
        let code = clients::main(args).await?;
        std::process::exit(code);
    }
    let mut args = Args::parse();
    ensure!(
        args.samples > 0 && args.cells > 0 && args.concurrency > 0,
        "--samples, --cells and --concurrency must be > 0"
    );
    if args.server.is_empty() {
        args.server = vec![default_server()?.display().to_string()];
    }
    ensure!(
        !args.scenarios.contains(&Scenario::Packages) || args.packages_image.is_some(),
        "the packages scenario needs --packages-image TAG (an image `code-mode build-image --requirements FILE` made)"
    );
    let mut facts = Vec::new();
    if args.compare {
        let options = compare::Options {
            samples: args.samples,
            warmup: args.warmup,
            concurrency: args.concurrency,
            cells: args.cells,
            server: args.server.clone(),
            nats: args.nats.clone(),
            json: args.json.clone(),
            runtimes: args.runtimes.clone(),
            baseline_image: args.baseline_image.clone(),
        };
        return compare::run(&options, &sibling("code-mode", "-p code-mode")?).await;
    }
    let mut transports = vec![Transport::InProcess];
    if let Some(url) = &args.nats {
        transports.push(Transport::Nats(url.clone()));
    }
    let docker = code_mode_sandbox_runner::connect_docker().await?;
    let engine = docker.version().await.ok().and_then(|v| v.version).unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let mut rows = Vec::new();
    for (runtime, transport) in args.runtimes.iter().flat_map(|r| transports.iter().map(move |t| (*r, t))) {
        let first_row = rows.len();
        let wants = |s| args.scenarios.contains(&s);
        if wants(Scenario::Cold) || wants(Scenario::Throughput) {
            let stack = Stack::start(transport, runtime, &args.server, 0, args.concurrency, Extras::default()).await?;
            let measured = async {
                if wants(Scenario::Cold) {
                    eprintln!("loadtest: cold print(1) over {transport}");
                    let (samples, _) = latency(&stack, PRINT_ONE, &args, false, check_print_one).await?;
                    rows.push(row("cold print(1)", transport, &samples, String::new()));
                }
                if wants(Scenario::Throughput) {
                    eprintln!("loadtest: {} cells, {} at once, cold, over {transport}", args.cells, args.concurrency);
                    rows.push(throughput(&stack, &args, transport, "cold").await?);
                }
                anyhow::Ok(())
            }
            .await;
            stack.stop().await;
            measured?;
        }
        if args.warm > 0
            && [Scenario::Warm, Scenario::Tool, Scenario::Throughput, Scenario::Policy].into_iter().any(wants)
        {
            let stack =
                Stack::start(transport, runtime, &args.server, args.warm, args.concurrency, Extras::default()).await?;
            let measured = async {
                if wants(Scenario::Warm) {
                    eprintln!("loadtest: warm print(1) over {transport}");
                    let (samples, _) = latency(&stack, PRINT_ONE, &args, true, check_print_one).await?;
                    rows.push(row("warm print(1)", transport, &samples, String::new()));
                }
                if wants(Scenario::Tool) {
                    eprintln!("loadtest: warm cell with one tool call over {transport}");
                    let (samples, calls) = latency(&stack, ONE_CALL, &args, true, check_one_call).await?;
                    let calls: Vec<Duration> = calls.iter().map(|ms| Duration::from_secs_f64(ms / 1000.0)).collect();
                    let note = Summary::of(&calls)
                        .map(|c| format!("the call in the cell: p50 {:.1} ms, p90 {:.1} ms", c.p50_ms, c.p90_ms))
                        .unwrap_or_default();
                    rows.push(row("warm, one tool call", transport, &samples, note));
                }
                if wants(Scenario::Throughput) {
                    eprintln!("loadtest: {} cells, {} at once, warm, over {transport}", args.cells, args.concurrency);
                    stack.runner.pool().wait_for(args.warm).await;
                    rows.push(throughput(&stack, &args, transport, "warm").await?);
                }
                if wants(Scenario::Policy) {
                    eprintln!("loadtest: {SERIAL_CALLS} calls in a row, no policy, over {transport}");
                    rows.push(serial_calls(&stack, &args, transport, "no policy").await?);
                }
                anyhow::Ok(())
            }
            .await;
            stack.stop().await;
            measured?;
        }
        if args.warm > 0 && wants(Scenario::Policy) {
            let policy = std::env::temp_dir().join(format!("code-mode-loadtest-policy-{}.json", std::process::id()));
            std::fs::write(&policy, LIMITED).context("writing the load test's policy")?;
            let extras = Extras { policy: Some(policy.clone()), ..Extras::default() };
            let stack = Stack::start(transport, runtime, &args.server, args.warm, args.concurrency, extras).await;
            let _ = std::fs::remove_file(&policy);
            let stack = stack?;
            eprintln!("loadtest: {SERIAL_CALLS} calls in a row, rate-limited, over {transport}");
            let measured = serial_calls(&stack, &args, transport, "rate limit").await;
            stack.stop().await;
            rows.push(measured?);
        }
        if args.warm > 0 && wants(Scenario::Audit) {
            let (audit, label) = match transport {
                Transport::InProcess => {
                    let file =
                        std::env::temp_dir().join(format!("code-mode-loadtest-audit-{}.jsonl", std::process::id()));
                    (Audit::File(file), "audit file")
                }
                Transport::Nats(_) => (Audit::Nats, "audit stream"),
            };
            let extras = Extras { audit: Some(audit.clone()), ..Extras::default() };
            let stack = Stack::start(transport, runtime, &args.server, args.warm, args.concurrency, extras).await?;
            eprintln!("loadtest: {SERIAL_CALLS} calls in a row, {label}, over {transport}");
            let measured = serial_calls(&stack, &args, transport, label).await;
            stack.stop().await;
            if let Audit::File(file) = audit {
                let _ = std::fs::remove_file(file);
            }
            rows.push(measured?);
        }
        if wants(Scenario::Kept) {
            let extras = Extras { keep: Some(KeepConfig::default()), ..Extras::default() };
            let stack = Stack::start(transport, runtime, &args.server, args.warm, args.concurrency, extras).await?;
            eprintln!("loadtest: print(1) in a kept session over {transport}");
            let measured = latency(&stack, PRINT_ONE, &args, false, check_print_one).await;
            stack.stop().await;
            let (samples, _) = measured?;
            rows.push(row("kept print(1)", transport, &samples, "the session's own container".into()));
        }
        if let (true, Some(image)) = (wants(Scenario::Packages), &args.packages_image) {
            eprintln!("loadtest: cells on {image} beside the default image over {transport}");
            let measured =
                packages::measure(transport, runtime, &args.server, image, args.warmup, args.samples).await?;
            for (scenario, samples, note) in measured.rows {
                rows.push(row(&scenario, transport, &samples, note));
            }
            facts.extend(measured.facts.into_iter().map(|f| format!("{runtime}, {transport}: {f}")));
        }
        for row in &mut rows[first_row..] {
            row.runtime = runtime;
        }
    }
    if args.scenarios.contains(&Scenario::Kept) {
        let code_mode = sibling("code-mode", "-p code-mode")?;
        for (label, extra, note) in [
            ("kept print(1)", &["--keep-variables"][..], "serve --keep-variables"),
            ("warm print(1)", &[][..], "serve, warm pool of 2, refilled between samples"),
        ] {
            eprintln!("loadtest: {label} through MCP stdio");
            let samples = mcp::latency(&code_mode, extra, &args.server, PRINT_ONE, args.warmup, args.samples).await?;
            rows.push(Row {
                scenario: label.into(),
                runtime: Runtime::Runc,
                transport: "mcp stdio".into(),
                summary: Summary::of(&samples).expect("at least one sample"),
                note: note.into(),
            });
        }
    }
    println!(
        "code-mode-loadtest: {cores} cores, Docker {engine}, {} samples (+{} warm-up), warm pool {}, throughput {} cells {} at once",
        args.samples, args.warmup, args.warm, args.cells, args.concurrency
    );
    println!(
        "{:<28} {:<7} {:<11} {:>4} {:>9} {:>9} {:>9}  note",
        "scenario", "runtime", "bus", "n", "p50 ms", "p90 ms", "max ms"
    );
    for r in rows {
        let s = r.summary;
        println!(
            "{:<28} {:<7} {:<11} {:>4} {:>9.1} {:>9.1} {:>9.1}  {}",
            r.scenario, r.runtime, r.transport, s.count, s.p50_ms, s.p90_ms, s.max_ms, r.note
        );
    }
    for fact in facts {
        println!("{fact}");
    }
    Ok(())
}

/// `code-mode-test-server` built next to this binary.
fn default_server() -> anyhow::Result<PathBuf> {
    sibling("code-mode-test-server", "-p code-mode-test-server").context("or pass a server command after --")
}

/// The binary `name` built next to this one (by `cargo build -p ...`).
fn sibling(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name(name);
    if !path.exists() {
        bail!("{} is missing: build it with the same profile (`cargo build --release {package}`)", path.display());
    }
    Ok(path)
}

fn row(scenario: &str, transport: &Transport, samples: &[Duration], note: String) -> Row {
    let summary = Summary::of(samples).expect("every scenario takes at least one sample");
    // The runtime is set by the loop over runtimes in `main`.
    Row { scenario: scenario.into(), runtime: Runtime::default(), transport: transport.to_string(), summary, note }
}

/// Time `samples` cells of `code` one after the other (after `warmup`
/// unmeasured ones), waiting for the warm pool to refill before each when
/// `refill`. `check` refuses a wrong report and may return a number the
/// cell measured itself.
async fn latency(
    stack: &Stack,
    code: &str,
    args: &Args,
    refill: bool,
    check: fn(&CellReport) -> anyhow::Result<Option<f64>>,
) -> anyhow::Result<(Vec<Duration>, Vec<f64>)> {
    let mut samples = Vec::with_capacity(args.samples);
    let mut measured = Vec::new();
    for i in 0..args.warmup + args.samples {
        if refill {
            let pool = stack.runner.pool();
            let filled = tokio::time::timeout(REFILL_BOUND, pool.wait_until_full()).await;
            ensure!(matches!(filled, Ok(true)), "the warm pool did not refill within {REFILL_BOUND:?}");
        }
        let started = Instant::now();
        let report = stack.frontend.run_code(code).await.context("running a cell")?;
        let elapsed = started.elapsed();
        let value = check(&report)?;
        if i >= args.warmup {
            samples.push(elapsed);
            measured.extend(value);
        }
    }
    Ok((samples, measured))
}

/// Cells of [`SERIAL`]: each cell's latency, and in the note the mean time
/// per call as the code measured it.
async fn serial_calls(stack: &Stack, args: &Args, transport: &Transport, label: &str) -> anyhow::Result<Row> {
    let (samples, per_call) = latency(stack, SERIAL, args, true, check_serial).await?;
    let per_call: Vec<Duration> = per_call.iter().map(|ms| Duration::from_secs_f64(ms / 1000.0)).collect();
    let note = Summary::of(&per_call)
        .map(|c| format!("mean per call in the cell: p50 {:.2} ms, p90 {:.2} ms", c.p50_ms, c.p90_ms))
        .unwrap_or_default();
    Ok(row(&format!("warm, {SERIAL_CALLS} calls, {label}"), transport, &samples, note))
}

fn check_serial(report: &CellReport) -> anyhow::Result<Option<f64>> {
    ensure!(report.error.is_none(), "unexpected report: {report:?}");
    let mut lines = report.stdout.lines();
    let result: serde_json::Value =
        serde_json::from_str(lines.next().unwrap_or_default()).with_context(|| format!("{report:?}"))?;
    ensure!(result["sum"] == SERIAL_CALLS, "the last add returned {result}");
    let ms = lines.next().unwrap_or_default().trim().parse::<f64>().with_context(|| format!("{report:?}"))?;
    Ok(Some(ms))
}

fn check_print_one(report: &CellReport) -> anyhow::Result<Option<f64>> {
    ensure!(report.error.is_none() && report.stdout == "1\n", "unexpected report: {report:?}");
    Ok(None)
}

fn check_one_call(report: &CellReport) -> anyhow::Result<Option<f64>> {
    ensure!(report.error.is_none(), "unexpected report: {report:?}");
    let mut lines = report.stdout.lines();
    let result: serde_json::Value =
        serde_json::from_str(lines.next().unwrap_or_default()).with_context(|| format!("{report:?}"))?;
    ensure!(result["sum"] == 3, "add returned {result}");
    let ms = lines.next().unwrap_or_default().trim().parse::<f64>().with_context(|| format!("{report:?}"))?;
    Ok(Some(ms))
}

/// `args.cells` cells of `print(1)`, `args.concurrency` at once: cells per
/// second over the whole batch, and each cell's latency.
async fn throughput(stack: &Stack, args: &Args, transport: &Transport, label: &str) -> anyhow::Result<Row> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..args.concurrency {
        let (frontend, next, cells) = (stack.frontend.clone(), next.clone(), args.cells);
        workers.spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < cells {
                let t = Instant::now();
                let report = frontend.run_code(PRINT_ONE).await.context("running a cell")?;
                check_print_one(&report)?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        });
    }
    let mut latencies = Vec::with_capacity(args.cells);
    while let Some(done) = workers.join_next().await {
        latencies.extend(done??);
    }
    let elapsed = started.elapsed();
    let rate = args.cells as f64 / elapsed.as_secs_f64();
    let note = format!("{rate:.2} cells/s ({} cells in {:.1} s)", args.cells, elapsed.as_secs_f64());
    let scenario = format!("throughput {label}, {} at once", args.concurrency);
    Ok(row(&scenario, transport, &latencies, note))
}
