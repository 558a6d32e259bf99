//! The search evaluation's data and its runner, shared by the tests in
//! `search.rs` and by `benches/discovery.rs`.
//!
//! The catalog is built by the bridge's own [`Catalog::build`] from the
//! committed `tools/list` of four real servers (`testing/search-eval/tools`),
//! prefixed as `--config` names them; the cell's tool list is made from it
//! as the frontend makes it ([`ToolStub::from`]); and the ranking is
//! `search_tools` of `runner.py` itself, run by the host's `python3`
//! through `testing/search-eval/rank.py`. Nothing here re-implements the
//! search.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use code_mode_bridge::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use code_mode_core::testing::peers::workspace_root;
use code_mode_proto::ToolStub;
use serde::Deserialize;

/// The real servers of the evaluation, in catalog order.
pub const SERVERS: [&str; 4] = ["everything", "memory", "filesystem", "time"];

/// Words that tell the copies of the real servers apart in big catalogs.
const COPIES: [&str; 10] = ["", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"];

/// The folder of the evaluation set.
pub fn eval_dir() -> PathBuf {
    workspace_root().join("testing/search-eval")
}

/// One question of the evaluation set.
#[derive(Debug, Clone, Deserialize)]
pub struct Query {
    /// What a model asks.
    pub query: String,
    /// The Python name of the tool it wants.
    pub want: String,
    /// `tune` or `holdout` (never looked at while tuning).
    pub set: String,
    /// The catalog the question is asked of: [`REAL_TOOLS`] (the four real
    /// servers) or 300 (`catalog-300.json`, copies of them under other
    /// server names).
    #[serde(default = "real_tools")]
    pub catalog: usize,
    /// Where the question comes from, when that matters ("held out in
    /// round 1": a tuning question since issue 43's second round).
    #[serde(default)]
    pub note: String,
}

fn real_tools() -> usize {
    REAL_TOOLS
}

/// Every question of `queries.json`.
pub fn queries() -> Vec<Query> {
    questions("queries.json")
}

/// Every question of one file of the evaluation (`queries.json`,
/// `tune-43.json`, `heldout-43-round13.json`).
pub fn questions(file: &str) -> Vec<Query> {
    #[derive(Deserialize)]
    struct File {
        queries: Vec<Query>,
    }
    let path = eval_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<File>(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())).queries
}

/// The `tools` the real server `name` lists, from its committed fixture.
pub fn listed_json(name: &str) -> serde_json::Value {
    listed_json_in("tools", name)
}

/// The `tools` the real server `name` lists, from its fixture in the
/// evaluation's folder `folder` (`tools`, or `unseen`).
pub fn listed_json_in(folder: &str, name: &str) -> serde_json::Value {
    let path = eval_dir().join(folder).join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the real server `name` lists, as the bridge reads it.
pub fn listed(name: &str) -> Vec<ListedTool> {
    listed_in("tools", name)
}

/// What the real server `name` lists in the fixture folder `folder`, as the
/// bridge reads it.
pub fn listed_in(folder: &str, name: &str) -> Vec<ListedTool> {
    let tools: Vec<rmcp::model::Tool> =
        serde_json::from_value(listed_json_in(folder, name)).expect("fixtures are MCP tools");
    tools.iter().map(ListedTool::from).collect()
}

/// A server's tools as `--config` wraps them: prefixed, all kept.
pub fn server_tools(name: &str, tools: Vec<ListedTool>) -> ServerTools {
    ServerTools {
        server: name.to_string(),
        prefixed: true,
        tools,
        allow: None,
        private: vec![],
        origin: Default::default(),
        labels: HashMap::new(),
        withheld: HashMap::new(),
        observed: HashMap::new(),
        shared_account: false,
    }
}

/// The catalog of the four real servers (42 tools: server-everything lists
/// its sampling, elicitation and roots tools to the gateway, which can relay
/// them), as `--config` builds it.
/// How many tools the four real servers list to the bridge.
pub const REAL_TOOLS: usize = 42;

pub fn real_catalog() -> Catalog {
    catalog_of(REAL_TOOLS)
}

/// A catalog of `n` real tools: the four servers, then copies of them
/// under other server names (`everything_bravo`, ...), cut at `n` tools.
pub fn catalog_of(n: usize) -> Catalog {
    let originals: Vec<(&str, Vec<ListedTool>)> = SERVERS.iter().map(|s| (*s, listed(s))).collect();
    let mut servers = Vec::new();
    let mut left = n;
    'copies: for copy in COPIES {
        for (name, tools) in &originals {
            if left == 0 {
                break 'copies;
            }
            let take: Vec<ListedTool> = tools.iter().take(left).cloned().collect();
            left -= take.len();
            let name = if copy.is_empty() { name.to_string() } else { format!("{name}_{copy}") };
            servers.push(server_tools(&name, take));
        }
    }
    assert_eq!(left, 0, "at most {} tools", COPIES.len() * REAL_TOOLS);
    Catalog::build(&servers, &CatalogLimits::default()).expect("the real tools make a catalog")
}

/// The tools a cell carries for this catalog, as the frontend sends them.
pub fn cell_tools(catalog: &Catalog) -> Vec<ToolStub> {
    let several = catalog.tools().iter().map(|t| t.server).max().unwrap_or(0) > 0;
    catalog.entries(several, false).iter().map(ToolStub::from).collect()
}

/// `runner.py`, the code the sandbox runs.
pub fn runner_py() -> PathBuf {
    workspace_root().join("services/sandbox-runner/image/runner.py")
}

/// The host's Python, or `None` (after [`code_mode_core::testing::unavailable`]:
/// a panic under CI) when there is none.
pub fn python() -> Option<String> {
    let ok = Command::new("python3").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if ok {
        Some("python3".into())
    } else {
        code_mode_core::testing::unavailable("python3", "not on PATH").then(String::new)
    }
}

/// `search_tools(query, limit)` of `runner.py` for each query, over `tools`:
/// the names it returns, best first.
pub fn rank(python: &str, tools: &[ToolStub], queries: &[&str], limit: usize) -> Vec<Vec<String>> {
    rank_py(python, "rank", &serde_json::json!({"tools": tools, "queries": queries, "limit": limit}))
}

/// `rank.py` in `mode` with `request` on its stdin: what it prints.
fn rank_py<T: serde::de::DeserializeOwned>(python: &str, mode: &str, request: &serde_json::Value) -> T {
    let mut child = Command::new(python)
        .arg(eval_dir().join("rank.py"))
        .arg(runner_py())
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).expect("the request is written");
    let output = child.wait_with_output().expect("rank.py finishes");
    assert!(output.status.success(), "rank.py failed");
    serde_json::from_slice(&output.stdout).expect("rank.py prints JSON")
}

/// What `runner.py` makes of each text: the words it indexes the text by,
/// and the query's word groups as `[weight, [word and synonyms]]`.
pub fn words(python: &str, texts: &[&str]) -> Vec<serde_json::Value> {
    let mut child = Command::new(python)
        .arg(eval_dir().join("rank.py"))
        .arg(runner_py())
        .arg("words")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    child.stdin.take().unwrap().write_all(serde_json::to_string(texts).unwrap().as_bytes()).unwrap();
    let output = child.wait_with_output().expect("rank.py finishes");
    assert!(output.status.success(), "rank.py failed");
    serde_json::from_slice(&output.stdout).expect("rank.py prints JSON")
}

/// Each query's cosine with each tool, as the bridge's encoder answers a
/// cell (the bridge's own tool text; two threads embed the tools).
pub fn nearness(
    encoder: &code_mode_encoder::Encoder,
    tools: &[ToolStub],
    queries: &[&str],
) -> Vec<HashMap<String, f32>> {
    let texts: Vec<String> = tools.iter().map(|t| t.search.for_meaning()).collect();
    let embed_all = |texts: &[&str]| -> Vec<Vec<f32>> {
        let half = texts.len().div_ceil(2).max(1);
        std::thread::scope(|scope| {
            let parts: Vec<_> = texts
                .chunks(half)
                .map(|part| scope.spawn(move || part.iter().map(|t| encoder.embed(t)).collect::<Vec<_>>()))
                .collect();
            parts.into_iter().flat_map(|p| p.join().expect("an embedding thread finishes")).collect()
        })
    };
    let text_refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embed_all(&text_refs);
    embed_all(queries)
        .iter()
        .map(|asked| {
            tools.iter().zip(&vectors).map(|(t, v)| (t.name.clone(), code_mode_encoder::cosine(asked, v))).collect()
        })
        .collect()
}

/// The encoder of `--search-model`, or `None` (a panic under CI) when its
/// files are not there.
pub fn encoder() -> Option<code_mode_encoder::Encoder> {
    let dir = code_mode_core::testing::peers::search_model()?;
    Some(code_mode_encoder::Encoder::load(&dir).unwrap_or_else(|e| panic!("the sentence encoder loads: {e}")))
}

/// As [`rank`], with `near` (one map per query) as the host's answer when
/// `search_tools` asks by meaning; also returns how many searches asked.
pub fn rank_with_meaning(
    python: &str,
    tools: &[ToolStub],
    queries: &[&str],
    near: &[HashMap<String, f32>],
    limit: usize,
) -> (Vec<Vec<String>>, usize) {
    #[derive(Deserialize)]
    struct Answer {
        results: Vec<Vec<String>>,
        asked: usize,
    }
    let request = serde_json::json!({"tools": tools, "queries": queries, "near": near, "limit": limit});
    let answer: Answer = rank_py(python, "meaning", &request);
    (answer.results, answer.asked)
}
