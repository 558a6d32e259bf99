//! What `search_tools` costs where it runs: inside a cell, in the default
//! sandbox image, in a real locked-down container of the warm pool (the
//! runner serving over an in-process bus). The tools are the committed
//! catalog of 300 real tools (`testing/search-eval/catalog-300.json`) and
//! its first 42 (the four reference servers' own); the questions are the
//! evaluation's (`queries.json` and `tune-43.json`).
//!
//! Each sample is one cell that times its own searches with
//! `time.perf_counter_ns` (`iter_custom`), so the container, the cell's
//! message and the bus are not in the numbers; before criterion runs, one
//! cell per catalog prints the p50 / p90 / p99 of single searches and the
//! first search of a cell (which builds the index). Needs Docker and the
//! default image (`code-mode build-image`). Run with
//! `cargo bench -p code-mode-sandbox-runner --bench search`.
//!
//! With the sentence encoder's files (`CODE_MODE_MODEL_DIR` or where
//! `scripts/get-model.sh` puts them), it also prints the same summary with
//! search by meaning: the bus then answers a cell's unsure search as the
//! bridge does (each tool's cosine with the question, from the encoder on
//! a blocking thread), over 200 questions (a cell asks at most 200).

// A panic in a benchmark is the benchmark failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_proto::{CellLimits, CellRan, RunCell, ToolEntry, ToolStub, subjects};
use code_mode_sandbox_runner::{RunnerConfig, SandboxRunner, image};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

fn eval_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testing/search-eval")
}

/// The committed catalog's first `n` tools, as a cell carries them.
fn tools(n: usize) -> Vec<ToolStub> {
    let text = std::fs::read_to_string(eval_dir().join("catalog-300.json")).expect("catalog-300.json");
    let entries: Vec<ToolEntry> = serde_json::from_str(&text).expect("catalog entries");
    entries.iter().take(n).map(ToolStub::from).collect()
}

/// The evaluation's questions (none held out).
fn questions() -> Vec<String> {
    let mut out = vec![];
    for file in ["queries.json", "tune-43.json"] {
        let text = std::fs::read_to_string(eval_dir().join(file)).expect("questions");
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        for q in value["queries"].as_array().expect("queries") {
            out.push(q["query"].as_str().expect("query").to_string());
        }
    }
    out
}

/// A runner serving cells over an in-process bus, with one warm container.
struct Cells {
    runtime: Runtime,
    bus: Bus,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Cells {
    /// On `image`, or the default image.
    fn start(image: Option<String>) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        let runner = runtime.block_on(async {
            let docker = code_mode_sandbox_runner::connect_docker().await.expect("a Docker engine");
            let tag = image.unwrap_or_else(image::default_image_tag);
            assert!(
                image::image_exists(&docker, &tag).await.unwrap(),
                "{tag} is not built: run `code-mode build-image`"
            );
            let mut config = RunnerConfig { warm: 1, warm_max: Some(1), ..RunnerConfig::default() };
            config.lockdown.image = tag;
            SandboxRunner::new(docker, config, bus.clone()).await.unwrap()
        });
        let task = runtime.block_on(runner.serve(cancel.clone())).unwrap();
        Self { runtime, bus, cancel, task: Some(task) }
    }

    /// Run `code` in a fresh cell holding `tools`; what it printed.
    fn run(&self, tools: &[ToolStub], code: String) -> serde_json::Value {
        let cell = RunCell {
            cell_id: uuid::Uuid::new_v4().to_string(),
            session: "search-bench".into(),
            asker: None,
            identity: None,
            code,
            tools: tools.to_vec(),
            withheld: vec![],
            limits: CellLimits {
                deadline_ms: 120_000,
                max_calls: 10,
                call_timeout_ms: 5_000,
                approval_timeout_ms: 0,
                max_output: 8192,
                stop_output: 1 << 20,
                max_line: 1 << 18,
            },
            keep: None,
            link: None,
            keep_report: false,
            inputs: vec![],
        };
        let ran: CellRan = self
            .runtime
            .block_on(self.bus.call(subjects::CELL_RUN, &cell, Duration::from_secs(180)))
            .expect("the runner answers");
        assert_eq!(ran.report.error, None, "{:?}", ran.report);
        serde_json::from_str(ran.report.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", ran.report.stdout))
    }
}

impl Drop for Cells {
    fn drop(&mut self) {
        // The runner removes its warm container as it stops.
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = self.runtime.block_on(async { tokio::time::timeout(Duration::from_secs(60), task).await });
        }
    }
}

/// A cell that asks `count` questions (the first one builds the index,
/// timed apart) and prints the first search's and the others' times.
fn timing_cell(questions: &[String], count: u64) -> String {
    format!(
        r#"import json, time
qs = json.loads({qs:?})
t = time.perf_counter_ns(); search_tools(qs[0]); first = time.perf_counter_ns() - t
times = []
for i in range({count}):
    q = qs[(i + 1) % len(qs)]
    t = time.perf_counter_ns(); search_tools(q); times.append(time.perf_counter_ns() - t)
times.sort()
at = lambda p: times[min(len(times) - 1, int(p * len(times)))] if times else 0
print(json.dumps({{"first": first, "sum": sum(times), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99)}}))"#,
        qs = serde_json::to_string(questions).unwrap(),
    )
}

/// Answer `codemode.v1.search.meaning` on `bus` for `tools` as the bridge
/// does, with the encoder in `dir`.
fn serve_meaning(
    cells: &Cells,
    dir: &std::path::Path,
    tools: &[ToolStub],
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    use code_mode_proto::{MeaningAsk, MeaningReply, ToolNearness};
    let encoder = std::sync::Arc::new(code_mode_encoder::Encoder::load(dir).expect("the encoder loads"));
    let vectors: std::sync::Arc<Vec<(String, Vec<f32>)>> =
        std::sync::Arc::new(tools.iter().map(|t| (t.name.clone(), encoder.embed(&t.search.for_meaning()))).collect());
    cells
        .runtime
        .block_on(cells.bus.serve(subjects::SEARCH_MEANING, "bridge", stop, move |ask: MeaningAsk| {
            let (encoder, vectors) = (encoder.clone(), vectors.clone());
            async move {
                let asked = tokio::task::spawn_blocking(move || encoder.embed(&ask.query)).await.expect("embedded");
                let tools = vectors
                    .iter()
                    .map(|(tool, v)| ToolNearness { tool: tool.clone(), cosine: code_mode_encoder::cosine(&asked, v) })
                    .collect();
                Ok(MeaningReply::Near { tools })
            }
        }))
        .expect("the bus serves")
}

/// Print the p50 / p90 / p99 of 2000 searches in one cell of `cells` and
/// the time of its first search.
fn summary(label: &str, cells: &Cells, tools: &[ToolStub], questions: &[String]) {
    summary_of(label, cells, tools, questions, 2000)
}

fn summary_of(label: &str, cells: &Cells, tools: &[ToolStub], questions: &[String], count: u64) {
    let seen = cells.run(tools, timing_cell(questions, count));
    let ms = |key: &str| seen[key].as_f64().unwrap() / 1e6;
    println!(
        "{label}: search_tools in a cell over {} tools, {count} questions: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms; \
         the cell's first search (index built) {:.1} ms",
        tools.len(),
        ms("p50"),
        ms("p90"),
        ms("p99"),
        ms("first")
    );
}

fn search_in_a_cell(c: &mut Criterion) {
    let cells = Cells::start(None);
    let questions = questions();
    // SEARCH_BENCH_BASELINE=IMAGE: the same summary cells on another image
    // (main's runner.py), run in turns with this one's, for a ratio.
    let baseline = std::env::var("SEARCH_BENCH_BASELINE").ok().map(|image| (image.clone(), Cells::start(Some(image))));
    for n in [42, 300] {
        let tools = tools(n);
        for _ in 0..if baseline.is_some() { 3 } else { 1 } {
            summary("this image", &cells, &tools, &questions);
            if let Some((image, base)) = &baseline {
                summary(image, base, &tools, &questions);
            }
        }
        c.bench_function(&format!("search_tools in a cell over {n} tools (one question, index built)"), |b| {
            b.iter_custom(|iters| {
                let seen = cells.run(&tools, timing_cell(&questions, iters));
                Duration::from_nanos(seen["sum"].as_u64().unwrap())
            })
        });
    }
    // With meaning: words alone and with the encoder, side by side, in
    // turns, on the same 200 questions.
    if let Some(model) = code_mode_core::testing::peers::search_model() {
        for n in [42, 300] {
            let tools = tools(n);
            for _ in 0..2 {
                summary_of("words alone", &cells, &tools, &questions, 200);
                let stop = cells.cancel.child_token();
                let served = serve_meaning(&cells, &model, &tools, stop.clone());
                summary_of("with meaning", &cells, &tools, &questions, 200);
                stop.cancel();
                let _ = cells.runtime.block_on(served);
            }
        }
    }
    let tools = tools(300);
    c.bench_function("search_tools in a cell over 300 tools (the cell's first question: index built)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let seen = cells.run(&tools, timing_cell(&questions, 0));
                total += Duration::from_nanos(seen["first"].as_u64().unwrap());
            }
            total
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5)).sample_size(10);
    targets = search_in_a_cell
}
criterion_main!(benches);
