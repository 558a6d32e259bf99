//! What discovery costs with 300 tools on the bridge's side: rendering
//! their stubs, building the catalog; and `search_tools` in `runner.py`
//! (the sandbox's own code, run by the host's `python3`). Writing the
//! `run_python` description is the frontend's, and its benchmark is there
//! (`services/mcp-frontend/benches/description.rs`).
//!
//! The tools are the 38 of four real servers (`testing/search-eval/tools`),
//! copied under other server names up to 300. Run with
//! `cargo bench -p code-mode-bridge --bench discovery`.
//!
//! `search_tools` is Python: one `python3` process (`rank.py bench`) holds
//! the index and times the searches itself, so the process start and the
//! pipe are not measured (`iter_custom`).

// A panic in a benchmark is the benchmark failing.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use code_mode_bridge::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use code_mode_bridge::stubs::{self, StubLimits, ToolText};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "../tests/it/search_eval.rs"]
mod search_eval;

use search_eval::{SERVERS, catalog_of, cell_tools, eval_dir, listed, queries, runner_py};

/// 300 listed tools: the real ones, again and again.
fn tools_300() -> Vec<ListedTool> {
    let real: Vec<ListedTool> = SERVERS.iter().flat_map(|s| listed(s)).collect();
    real.iter().cycle().take(300).cloned().collect()
}

fn stub_rendering(c: &mut Criterion) {
    let tools = tools_300();
    let limits = StubLimits::default();
    c.bench_function("render the stubs, summaries and search text of 300 tools", |b| {
        b.iter(|| {
            let mut chars = 0;
            for tool in &tools {
                let text = ToolText {
                    name: &tool.name,
                    description: tool.description.as_deref(),
                    schema: &tool.input_schema,
                    output_schema: tool.output_schema.as_ref(),
                    labels: &[],
                    observed: None,
                };
                chars += stubs::stub(&text, &limits).len() + stubs::summary(&text, &limits).len();
                chars +=
                    stubs::search_text(&text, &tool.name, Some("s"), tool.title.as_deref(), &limits).description.len();
            }
            chars
        })
    });
    let servers: Vec<ServerTools> = tools
        .chunks(38)
        .enumerate()
        .map(|(i, chunk)| ServerTools {
            server: format!("server{i}"),
            prefixed: true,
            tools: chunk
                .iter()
                .enumerate()
                .map(|(j, t)| ListedTool { name: format!("{}_{j}", t.name), ..t.clone() })
                .collect(),
            allow: None,
            private: vec![],
            origin: Default::default(),
            labels: Default::default(),
            withheld: Default::default(),
            observed: Default::default(),
            shared_account: false,
        })
        .collect();
    c.bench_function("build the catalog of 300 tools (schemas compiled, stubs rendered)", |b| {
        b.iter(|| Catalog::build(&servers, &CatalogLimits::default()).expect("a catalog").tools().len())
    });
}

/// A `python3 rank.py bench` process holding the index of `tools`.
struct PythonSearch {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl PythonSearch {
    fn start(tools: &[code_mode_proto::ToolStub], queries: &[String]) -> Self {
        let mut child = Command::new("python3")
            .arg(eval_dir().join("rank.py"))
            .arg(runner_py())
            .arg("bench")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts");
        let mut stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let first = serde_json::json!({"tools": tools, "queries": queries});
        writeln!(stdin, "{first}").unwrap();
        Self { child, stdin, stdout }
    }

    /// Run `count` of `command` (`search` or `index`) in Python; the time
    /// it measured.
    fn time(&mut self, command: &str, count: u64) -> Duration {
        writeln!(self.stdin, "{command} {count}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        Duration::from_nanos(line.trim().parse().expect("nanoseconds"))
    }
}

impl Drop for PythonSearch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn search(c: &mut Criterion) {
    let tools = cell_tools(&catalog_of(300));
    let queries: Vec<String> = queries().into_iter().map(|q| q.query).collect();
    let mut python = PythonSearch::start(&tools, &queries);
    c.bench_function("search_tools over 300 tools (one question, index built)", |b| {
        b.iter_custom(|iters| python.time("search", iters))
    });
    c.bench_function("search_tools over 300 tools (first question: index built, then searched)", |b| {
        b.iter_custom(|iters| python.time("index", iters))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).sample_size(30);
    targets = stub_rendering, search
}
criterion_main!(benches);
