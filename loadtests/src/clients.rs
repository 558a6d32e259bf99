//! `code-mode-loadtest clients`: load a running code-mode the way MCP
//! clients do.
//!
//! Opens `--sessions` MCP client sessions, over streamable HTTP (`--url`)
//! or each over the stdin and stdout of its own process (the command after
//! `--`, e.g. `code-mode serve -- server`), and sends `run_python` cells of
//! a mix of kinds (`--mix`): in a closed loop (each session sends its next
//! cell when the last one's answer came) or an open loop (`--rate` cells a
//! second, sent whatever is in flight). Each cell's latency goes into an
//! HDR histogram per kind; the run ends with a table on stdout, and on
//! request a JSON report and SVG plots (latency over time with percentiles,
//! a latency histogram per kind). Progress is drawn on stderr.
//!
//! A cell is `lost` when its session failed to answer at all (the
//! transport broke) and `hung` when no answer came within the deadline plus
//! `--margin`: either makes the exit status non-zero, since a client would
//! have waited forever or been left without an answer. A cell that failed
//! with a clear error (a runner lost, no capacity) is `failed`, not lost.
//!
//! With `--metrics HOST:PORT` (the code-mode's `--metrics-addr`) the run
//! also reads the sandbox-runner's warm pool before and after the load:
//! how many cells found the pool empty and waited for a cold start
//! (`codemode_warm_pool_takes_total`), and, `--idle` seconds after the
//! load, how many containers stay ready and alive (the pool's floor when it
//! shrank back).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde::Serialize;
use serde_json::{Value, json};

/// Drive a running code-mode with concurrent MCP client sessions.
#[derive(Debug, Parser)]
#[command(name = "code-mode-loadtest clients")]
pub struct ClientsArgs {
    /// The MCP endpoint over streamable HTTP, e.g. http://127.0.0.1:8080/mcp.
    /// Without it, each session starts the command after `--` and talks
    /// MCP over its stdin and stdout.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// MCP client sessions at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    sessions: usize,
    /// Closed loop: cells each session sends, each after the last one's
    /// answer.
    #[arg(long, default_value_t = 10, value_name = "N")]
    cells: usize,
    /// Open loop instead: cells a second across the sessions (round robin),
    /// sent on time whatever is still in flight, for `--duration`.
    #[arg(long, value_name = "PER_SECOND")]
    rate: Option<f64>,
    /// How long the open loop sends cells.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    duration: f64,
    /// The cell mix, KIND=WEIGHT,...: print (`print(1)`), tool (one call of
    /// the wrapped server's `add`), cpu (about half a second of arithmetic),
    /// deadline (an endless loop, stopped at the deadline), refused (a call
    /// of `echo` that a policy refuses; the code catches the refusal),
    /// nothing (`pass`: no output, no file), file (a 10 MB file written to
    /// /tmp/out, its link read back with resources/read within the cell's
    /// time).
    #[arg(long, default_value = "print=4,tool=4,cpu=1,refused=1", value_name = "MIX")]
    mix: String,
    /// Another code for a kind, KIND=PYTHON (repeatable); `{add}` and
    /// `{echo}` stand for the tools' names as the code calls them.
    #[arg(long = "code", value_name = "KIND=PYTHON")]
    code: Vec<String>,
    /// The deadline of one cell the server applies (its `--deadline`).
    #[arg(long, default_value_t = 90.0, value_name = "SECONDS")]
    deadline: f64,
    /// How long past the deadline an answer may come before the cell counts
    /// as hung.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    margin: f64,
    /// Write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write `latency-over-time.svg` and `latency-histogram.svg` into this
    /// folder.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// The `--metrics-addr` of the code-mode under load (one process: `serve`,
    /// or the sandbox-runner): report the cells that waited for a cold start
    /// and the warm pool after the load.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<std::net::SocketAddr>,
    /// With `--metrics`: seconds to wait after the load before reading how
    /// many containers stayed (the warm pool shrinks back to its floor
    /// after its `--warm-window`).
    #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
    idle: f64,
    /// With no `--url`: the command that serves one MCP session on its
    /// stdin and stdout, started once per session.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// What a cell does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Print,
    Tool,
    Cpu,
    Deadline,
    Refused,
    /// A cell that prints nothing and writes no file: `pass`.
    Nothing,
    /// A cell writing a 10 MB file to `/tmp/out`; the client reads its link
    /// back (`resources/read`) as part of the cell.
    File,
}

/// Bytes of the file a `file` cell writes.
pub const FILE_BYTES: u64 = 10_000_000;

impl Kind {
    pub const ALL: [Kind; 7] =
        [Kind::Print, Kind::Tool, Kind::Cpu, Kind::Deadline, Kind::Refused, Kind::Nothing, Kind::File];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Print => "print",
            Kind::Tool => "tool",
            Kind::Cpu => "cpu",
            Kind::Deadline => "deadline",
            Kind::Refused => "refused",
            Kind::Nothing => "nothing",
            Kind::File => "file",
        }
    }

    fn parse(name: &str) -> anyhow::Result<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name).with_context(|| {
            format!("{name:?} is not a cell kind (print, tool, cpu, deadline, refused, nothing, file)")
        })
    }

    fn default_code(self) -> &'static str {
        match self {
            Kind::Print => "print(1)",
            Kind::Tool => "print(await {add}({'a': 1, 'b': 2}))",
            Kind::Cpu => "print(sum(i * i for i in range(2_000_000)))",
            Kind::Deadline => "while True:\n    pass",
            Kind::Refused => {
                "try:\n    await {echo}({'text': 'x'})\n    print('not refused')\nexcept ToolError as e:\n    print('refused')"
            }
            Kind::Nothing => "pass",
            Kind::File => {
                "with open('/tmp/out/data.bin', 'wb') as f:\n    f.write(bytes(range(256)) * 39062 + bytes(range(128)))"
            }
        }
    }

    /// Whether `outcome` is what this kind should end with.
    fn expects(self, outcome: Outcome) -> bool {
        match self {
            Kind::Deadline => outcome == Outcome::Stopped,
            _ => outcome == Outcome::Ok,
        }
    }
}

/// How a cell ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A report without an error.
    Ok,
    /// A report whose code raised.
    Error,
    /// A report of a run that was stopped (deadline, output, died).
    Stopped,
    /// A clear error instead of a report (a runner lost, no capacity, ...).
    Failed,
    /// The session did not answer at all.
    Lost,
    /// No answer within the deadline and the margin.
    Hung,
}

impl Outcome {
    const ALL: [Outcome; 6] =
        [Outcome::Ok, Outcome::Error, Outcome::Stopped, Outcome::Failed, Outcome::Lost, Outcome::Hung];

    fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Stopped => "stopped",
            Outcome::Failed => "failed",
            Outcome::Lost => "lost",
            Outcome::Hung => "hung",
        }
    }
}

/// One cell as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub kind: Kind,
    pub session: usize,
    /// When it was sent, in seconds since the load started.
    pub sent_s: f64,
    pub latency_ms: f64,
    pub outcome: Outcome,
    /// What was said when it did not end as its kind expects.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

type Session = RunningService<RoleClient, ()>;

/// The weighted mix as a repeating sequence of kinds.
fn parse_mix(mix: &str) -> anyhow::Result<Vec<Kind>> {
    let mut sequence = Vec::new();
    for entry in mix.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, weight) = entry.split_once('=').unwrap_or((entry, "1"));
        let kind = Kind::parse(name.trim()).with_context(|| format!("--mix entry {entry:?}"))?;
        let weight: usize = weight
            .trim()
            .parse()
            .with_context(|| format!("--mix entry {entry:?}: the weight must be a whole number"))?;
        sequence.extend(std::iter::repeat_n(kind, weight));
    }
    ensure!(!sequence.is_empty(), "--mix {mix:?} names no cell with a weight above 0");
    // Spread the kinds out rather than in blocks: interleave by position.
    let mut spread: Vec<(f64, Kind)> = Vec::new();
    for kind in Kind::ALL {
        let n = sequence.iter().filter(|k| **k == kind).count();
        spread.extend((0..n).map(|i| ((i as f64 + 0.5) / n as f64, kind)));
    }
    spread.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(spread.into_iter().map(|(_, k)| k).collect())
}

/// The code of each kind, with the tools' names filled in.
fn codes(args: &ClientsArgs, mix: &[Kind], description: &str) -> anyhow::Result<BTreeMap<Kind, String>> {
    let mut codes: BTreeMap<Kind, String> = Kind::ALL.iter().map(|k| (*k, k.default_code().to_string())).collect();
    for entry in &args.code {
        let (name, code) = entry.split_once('=').with_context(|| format!("--code {entry:?} is not KIND=PYTHON"))?;
        codes.insert(Kind::parse(name.trim()).with_context(|| format!("--code {entry:?}"))?, code.to_string());
    }
    for (placeholder, tool) in [("{add}", "add"), ("{echo}", "echo")] {
        let used = mix.iter().any(|k| codes[k].contains(placeholder));
        if !used {
            continue;
        }
        let name = tool_named(description, tool).with_context(|| {
            format!(
                "the mix calls the wrapped server's `{tool}` but run_python's description lists no function \
                 stubs to name it after: give the kind's code with --code KIND=PYTHON"
            )
        })?;
        for code in codes.values_mut() {
            *code = code.replace(placeholder, &name);
        }
    }
    Ok(codes)
}

/// The function the code calls for `tool` (`tool` or `<server>__tool`),
/// from the stubs in run_python's description. A tool a policy denies is
/// not listed but still callable (and refused): it gets the prefix of the
/// listed tools, if they have one.
fn tool_named(description: &str, tool: &str) -> Option<String> {
    let names: Vec<&str> =
        description.split("async def ").skip(1).filter_map(|rest| Some(rest.split('(').next()?.trim())).collect();
    if let Some(name) = names.iter().find(|n| **n == tool || n.ends_with(&format!("__{tool}"))) {
        return Some(name.to_string());
    }
    let prefix = names.first()?.split_once("__").map(|(server, _)| server);
    Some(prefix.map_or_else(|| tool.to_string(), |server| format!("{server}__{tool}")))
}

/// Open one MCP session.
async fn open(args: &ClientsArgs) -> anyhow::Result<Session> {
    if let Some(url) = &args.url {
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.clone());
        return ().serve(transport).await.with_context(|| format!("an MCP session at {url}"));
    }
    let (program, rest) = args.command.split_first().context("give --url, or a command after --")?;
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let transport = (child.stdout.take().context("stdout")?, child.stdin.take().context("stdin")?);
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    ().serve(transport).await.with_context(|| format!("an MCP session with {}", args.command.join(" ")))
}

/// Send one cell and classify its answer.
async fn cell(session: &Session, kind: Kind, code: &str, give_up: Duration) -> (Outcome, Option<String>) {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = json!({ "code": code }).as_object().cloned();
    let answer = match tokio::time::timeout(give_up, session.peer().call_tool(params)).await {
        Err(_) => return (Outcome::Hung, Some(format!("no answer within {give_up:?}"))),
        Ok(Err(e)) => return (Outcome::Lost, Some(e.to_string())),
        Ok(Ok(answer)) => answer,
    };
    let (mut outcome, said) = classify(&answer);
    let mut note = (!kind.expects(outcome)).then(|| said.chars().take(300).collect());
    if kind == Kind::File
        && outcome == Outcome::Ok
        && let Err(e) = read_links(session, &answer).await
    {
        (outcome, note) = (Outcome::Failed, Some(e));
    }
    (outcome, note)
}

/// Read back every resource link of `answer`: they must hold
/// [`FILE_BYTES`] in all.
async fn read_links(session: &Session, answer: &CallToolResult) -> Result<(), String> {
    let mut bytes = 0u64;
    for block in &answer.content {
        let block = serde_json::to_value(block).map_err(|e| e.to_string())?;
        if block["type"] != "resource_link" {
            continue;
        }
        let uri = block["uri"].as_str().unwrap_or_default().to_string();
        let read = session
            .peer()
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()))
            .await
            .map_err(|e| format!("reading {uri}: {e}"))?;
        for contents in &read.contents {
            let contents = serde_json::to_value(contents).map_err(|e| e.to_string())?;
            bytes += match (contents["text"].as_str(), contents["blob"].as_str()) {
                (Some(text), _) => text.len() as u64,
                (None, Some(blob)) => {
                    let padding = blob.bytes().rev().take_while(|b| *b == b'=').count() as u64;
                    blob.len() as u64 / 4 * 3 - padding
                }
                _ => 0,
            };
        }
    }
    if bytes == FILE_BYTES { Ok(()) } else { Err(format!("read back {bytes} bytes of files, not {FILE_BYTES}")) }
}

/// The outcome of an answer, and what it said.
fn classify(answer: &CallToolResult) -> (Outcome, String) {
    let text = answer.content.iter().find_map(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    let Some(report) = &answer.structured_content else { return (Outcome::Failed, text) };
    let error = report["error"].as_str();
    let outcome = match (error, report["stopped"].as_bool()) {
        (None, _) => Outcome::Ok,
        (Some(_), Some(true)) => Outcome::Stopped,
        (Some(_), _) => Outcome::Error,
    };
    (outcome, error.map(str::to_string).unwrap_or_else(|| report["stdout"].to_string()))
}

/// Run the load; returns the exit code.
pub async fn main(args: ClientsArgs) -> anyhow::Result<i32> {
    ensure!(args.sessions > 0, "--sessions must be > 0");
    ensure!(args.url.is_some() || !args.command.is_empty(), "give --url URL, or the command of a session after --");
    ensure!(args.url.is_none() || args.command.is_empty(), "give either --url or a command after --, not both");
    if let Some(rate) = args.rate {
        ensure!(rate > 0.0 && args.duration > 0.0, "--rate and --duration must be > 0");
    } else {
        ensure!(args.cells > 0, "--cells must be > 0");
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mix = parse_mix(&args.mix)?;
    let started_at = Instant::now();
    let sessions: Vec<Session> = futures::future::try_join_all((0..args.sessions).map(|_| open(&args))).await?;
    let tools = sessions[0].peer().list_all_tools().await.context("listing the tools")?;
    let description = tools
        .iter()
        .find(|t| t.name == "run_python")
        .context("the server offers no run_python tool")?
        .description
        .as_deref()
        .unwrap_or_default()
        .to_string();
    let codes = Arc::new(codes(&args, &mix, &description)?);
    let opened = started_at.elapsed();
    let pool_before = match args.metrics {
        Some(addr) => Some(PoolReading::scrape(addr).await?),
        None => None,
    };
    let give_up = Duration::from_secs_f64(args.deadline + args.margin);
    let total = match args.rate {
        Some(rate) => (rate * args.duration).ceil() as u64,
        None => (args.sessions * args.cells) as u64,
    };
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} cells {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let start = Instant::now();
    let record = {
        let samples = samples.clone();
        let bar = bar.clone();
        move |sample: Sample| {
            let mut all = samples.lock().expect("samples lock");
            all.push(sample);
            let bad = all.iter().filter(|s| matches!(s.outcome, Outcome::Lost | Outcome::Hung)).count();
            let failed = all.iter().filter(|s| !s.kind.expects(s.outcome)).count();
            bar.set_message(format!("unexpected {failed}, lost or hung {bad}"));
            bar.inc(1);
        }
    };
    let sessions = Arc::new(sessions);
    let one = |session: usize, kind: Kind| {
        let (sessions, codes, record) = (sessions.clone(), codes.clone(), record.clone());
        async move {
            let sent = Instant::now();
            let (outcome, note) = cell(&sessions[session], kind, &codes[&kind], give_up).await;
            record(Sample {
                kind,
                session,
                sent_s: (sent - start).as_secs_f64(),
                latency_ms: sent.elapsed().as_secs_f64() * 1000.0,
                outcome,
                note,
            });
        }
    };
    match args.rate {
        None => {
            let loops = (0..args.sessions).map(|s| {
                let mix = &mix;
                let one = &one;
                async move {
                    for i in 0..args.cells {
                        one(s, mix[(s + i * args.sessions) % mix.len()]).await;
                    }
                }
            });
            futures::future::join_all(loops).await;
        }
        Some(rate) => {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut in_flight = tokio::task::JoinSet::new();
            for k in 0..total as usize {
                tick.tick().await;
                in_flight.spawn(one(k % args.sessions, mix[k % mix.len()]));
            }
            while in_flight.join_next().await.is_some() {}
        }
    }
    let elapsed = start.elapsed();
    bar.finish();
    let pool = match (args.metrics, pool_before) {
        (Some(addr), Some(before)) => {
            let after = PoolReading::scrape(addr).await?;
            eprintln!("loadtest: waiting {} s idle before reading the warm pool", args.idle);
            tokio::time::sleep(Duration::from_secs_f64(args.idle.max(0.0))).await;
            let idle = PoolReading::scrape(addr).await?;
            Some(PoolReport::of(&before, &after, &idle, args.idle))
        }
        _ => None,
    };
    for session in Arc::try_unwrap(sessions).unwrap_or_default() {
        let _ = session.cancel().await;
    }
    let mut samples = std::mem::take(&mut *samples.lock().expect("samples lock"));
    samples.sort_by(|a, b| a.sent_s.total_cmp(&b.sent_s));
    let report = Report::of(&args, &samples, elapsed, opened);
    print!("{}", report.table());
    if let Some(pool) = &pool {
        print!("{}", pool.table());
    }
    if let Some(path) = &args.json {
        let mut json = report.json(&samples);
        if let Some(pool) = &pool {
            json["warm_pool"] = serde_json::to_value(pool).expect("a pool report is JSON");
        }
        let text = serde_json::to_string_pretty(&json).expect("a report is JSON");
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::plots::latency_over_time(&dir.join("latency-over-time.svg"), &samples)?;
        crate::plots::latency_histograms(&dir.join("latency-histogram.svg"), &samples)?;
    }
    let silent = report.count(Outcome::Lost) + report.count(Outcome::Hung);
    if silent > 0 {
        eprintln!("loadtest: {silent} cell(s) lost or hung: a client got no answer in time");
        return Ok(1);
    }
    Ok(0)
}

/// The warm pool as one scrape of `/metrics` shows it.
#[derive(Debug, Clone, Copy)]
struct PoolReading {
    /// Takes that found the pool empty (cold starts on a cell's path).
    empty: f64,
    /// Takes that got a ready container.
    warm: f64,
    ready: f64,
    target: f64,
    /// Containers alive: started minus removed.
    alive: f64,
}

impl PoolReading {
    async fn scrape(addr: std::net::SocketAddr) -> anyhow::Result<PoolReading> {
        let response = tokio::task::spawn_blocking(move || code_mode_telemetry::scrape::http_get(addr, "/metrics"))
            .await?
            .with_context(|| format!("scraping http://{addr}/metrics"))?;
        let e = code_mode_telemetry::scrape::Exposition::parse(&response.body)
            .map_err(|e| anyhow::anyhow!("the metrics of {addr} do not parse: {e:?}"))?;
        let takes = "codemode_warm_pool_takes_total";
        Ok(PoolReading {
            empty: e.value_or_zero(takes, &[("result", "empty")]),
            warm: e.value_or_zero(takes, &[("result", "warm")]),
            ready: e.value_or_zero("codemode_warm_pool_size", &[]),
            target: e.value_or_zero("codemode_warm_pool_target", &[]),
            alive: e.value_or_zero("codemode_containers_started_total", &[])
                - e.value_or_zero("codemode_containers_removed_total", &[("result", "removed")]),
        })
    }
}

/// What the warm pool did during the load and after it.
#[derive(Debug, Clone, Serialize)]
struct PoolReport {
    /// Cells that found the pool empty and waited for a cold start.
    cold_takes: u64,
    /// Cells that got a ready container.
    warm_takes: u64,
    /// The pool's target and ready containers right after the load.
    target_after_load: u64,
    ready_after_load: u64,
    /// After `idle_s` without cells: the target, ready containers and
    /// containers alive (started minus removed) of the process.
    idle_s: f64,
    target_idle: u64,
    ready_idle: u64,
    alive_idle: u64,
}

impl PoolReport {
    fn of(before: &PoolReading, after: &PoolReading, idle: &PoolReading, idle_s: f64) -> PoolReport {
        let n = |v: f64| v.max(0.0).round() as u64;
        PoolReport {
            cold_takes: n(after.empty - before.empty),
            warm_takes: n(after.warm - before.warm),
            target_after_load: n(after.target),
            ready_after_load: n(after.ready),
            idle_s,
            target_idle: n(idle.target),
            ready_idle: n(idle.ready),
            alive_idle: n(idle.alive),
        }
    }

    fn table(&self) -> String {
        format!(
            "warm pool: {} cells waited for a cold start, {} took a ready container; after the load: target {}, \
             ready {}; {} s idle later: target {}, ready {}, containers alive {}\n",
            self.cold_takes,
            self.warm_takes,
            self.target_after_load,
            self.ready_after_load,
            self.idle_s,
            self.target_idle,
            self.ready_idle,
            self.alive_idle
        )
    }
}

/// Percentiles of one set of latencies, from its HDR histogram.
#[derive(Debug, Clone, Serialize)]
struct Latency {
    count: u64,
    p50_ms: f64,
    p90_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl Latency {
    fn of<'a>(samples: impl Iterator<Item = &'a Sample>) -> Option<Latency> {
        // Microseconds, from 1 µs to an hour, three significant digits.
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        for s in samples {
            histogram.saturating_record((s.latency_ms * 1000.0).round().max(1.0) as u64);
        }
        if histogram.is_empty() {
            return None;
        }
        let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
        Some(Latency {
            count: histogram.len(),
            p50_ms: ms(0.50),
            p90_ms: ms(0.90),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            max_ms: histogram.max() as f64 / 1000.0,
        })
    }
}

/// The run's summary.
struct Report {
    target: String,
    mode: String,
    sessions: usize,
    elapsed: Duration,
    opened: Duration,
    outcomes: BTreeMap<Outcome, usize>,
    kinds: BTreeMap<Kind, (Latency, BTreeMap<Outcome, usize>)>,
    all: Option<Latency>,
    unexpected: Vec<String>,
}

impl Report {
    fn of(args: &ClientsArgs, samples: &[Sample], elapsed: Duration, opened: Duration) -> Report {
        let count = |of: &mut BTreeMap<Outcome, usize>, o| *of.entry(o).or_default() += 1;
        let mut outcomes = BTreeMap::new();
        for s in samples {
            count(&mut outcomes, s.outcome);
        }
        let mut kinds = BTreeMap::new();
        for kind in Kind::ALL {
            let mut of = BTreeMap::new();
            for s in samples.iter().filter(|s| s.kind == kind) {
                count(&mut of, s.outcome);
            }
            if let Some(latency) = Latency::of(samples.iter().filter(|s| s.kind == kind)) {
                kinds.insert(kind, (latency, of));
            }
        }
        let unexpected = samples
            .iter()
            .filter(|s| !s.kind.expects(s.outcome))
            .map(|s| {
                format!(
                    "{} cell of session {} at {:.1} s: {}: {}",
                    s.kind.name(),
                    s.session,
                    s.sent_s,
                    s.outcome.name(),
                    s.note.as_deref().unwrap_or("")
                )
            })
            .collect();
        Report {
            target: args.url.clone().unwrap_or_else(|| format!("stdio: {}", args.command.join(" "))),
            mode: match args.rate {
                Some(rate) => format!("open loop, {rate} cells/s for {} s", args.duration),
                None => format!("closed loop, {} cells per session", args.cells),
            },
            sessions: args.sessions,
            elapsed,
            opened,
            outcomes,
            kinds,
            all: Latency::of(samples.iter()),
            unexpected,
        }
    }

    fn count(&self, outcome: Outcome) -> usize {
        self.outcomes.get(&outcome).copied().unwrap_or(0)
    }

    fn cells(&self) -> usize {
        self.outcomes.values().sum()
    }

    fn table(&self) -> String {
        let mut out = format!(
            "code-mode-loadtest clients: {} sessions, {}, against {}\n{} cells in {:.1} s: {:.2} cells/s (sessions opened in {:.1} s)\n",
            self.sessions,
            self.mode,
            self.target,
            self.cells(),
            self.elapsed.as_secs_f64(),
            self.cells() as f64 / self.elapsed.as_secs_f64().max(1e-9),
            self.opened.as_secs_f64(),
        );
        out += &format!(
            "{:<9} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}  outcomes\n",
            "kind", "cells", "cells/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms"
        );
        let seconds = self.elapsed.as_secs_f64().max(1e-9);
        let line = |name: &str, l: &Latency, of: &BTreeMap<Outcome, usize>| {
            let outcomes: Vec<String> = of.iter().map(|(o, n)| format!("{} {n}", o.name())).collect();
            format!(
                "{name:<9} {:>6} {:>8.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {}\n",
                l.count,
                l.count as f64 / seconds,
                l.p50_ms,
                l.p90_ms,
                l.p95_ms,
                l.p99_ms,
                l.max_ms,
                outcomes.join(", ")
            )
        };
        for (kind, (latency, of)) in &self.kinds {
            out += &line(kind.name(), latency, of);
        }
        if let Some(all) = &self.all {
            out += &line("all", all, &self.outcomes);
        }
        out += &format!("lost {}, hung {}\n", self.count(Outcome::Lost), self.count(Outcome::Hung));
        for u in self.unexpected.iter().take(10) {
            out += &format!("unexpected: {u}\n");
        }
        out
    }

    fn json(&self, samples: &[Sample]) -> Value {
        let outcomes = |of: &BTreeMap<Outcome, usize>| -> Value {
            Outcome::ALL.iter().map(|o| (o.name().to_string(), json!(of.get(o).copied().unwrap_or(0)))).collect()
        };
        let kinds: serde_json::Map<String, Value> = self
            .kinds
            .iter()
            .map(|(k, (latency, of))| (k.name().to_string(), json!({"latency": latency, "outcomes": outcomes(of)})))
            .collect();
        json!({
            "target": self.target,
            "mode": self.mode,
            "sessions": self.sessions,
            "cells": self.cells(),
            "elapsed_s": self.elapsed.as_secs_f64(),
            "cells_per_s": self.cells() as f64 / self.elapsed.as_secs_f64().max(1e-9),
            "sessions_opened_s": self.opened.as_secs_f64(),
            "outcomes": outcomes(&self.outcomes),
            "lost": self.count(Outcome::Lost),
            "hung": self.count(Outcome::Hung),
            "latency": self.all,
            "kinds": kinds,
            "unexpected": self.unexpected,
            "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
            "samples": samples,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_is_spread_by_weight_and_a_bad_entry_is_named() {
        let mix = parse_mix("print=2,tool=1,cpu=1").unwrap();
        assert_eq!(mix.len(), 4);
        assert_eq!(mix.iter().filter(|k| **k == Kind::Print).count(), 2);
        assert_ne!(mix[0], mix[1], "kinds are interleaved: {mix:?}");
        let err = parse_mix("print=2,sleep=1").unwrap_err();
        assert!(format!("{err:#}").contains("\"sleep\" is not a cell kind"), "{err:#}");
        assert!(format!("{:#}", parse_mix("print=x").unwrap_err()).contains("whole number"));
        assert!(parse_mix("print=0").is_err());
    }

    #[test]
    fn the_tools_are_found_by_their_stub_with_or_without_a_server_prefix() {
        let description = "async def test__add(a: int, b: int) -> dict:\nasync def test__echo(text: str)";
        assert_eq!(tool_named(description, "add").as_deref(), Some("test__add"));
        assert_eq!(tool_named("async def echo(text: str)", "echo").as_deref(), Some("echo"));
        assert_eq!(tool_named(description, "count").as_deref(), Some("test__count"), "an unlisted (denied) tool");
        assert_eq!(tool_named("no stubs here", "add"), None);
    }
}
