//! What writing the `run_python` description costs with 300 real tools
//! (the catalog the bridge builds of four reference servers' tools,
//! committed as `testing/search-eval/catalog-300.json`). Run with
//! `cargo bench -p code-mode-mcp-frontend --bench description`.

// A panic in a benchmark is the benchmark failing.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use code_mode_mcp_frontend::description::{RunFacts, describe};
use code_mode_proto::ToolEntry;
use criterion::{Criterion, criterion_group, criterion_main};

fn description(c: &mut Criterion) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testing/search-eval/catalog-300.json");
    let entries: Vec<ToolEntry> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let facts = RunFacts::default();
    c.bench_function("write the run_python description of 300 tools", |b| {
        b.iter(|| describe(&facts, &entries, 12_000).1.len())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).sample_size(30);
    targets = description
}
criterion_main!(benches);
