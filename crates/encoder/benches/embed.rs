//! What one embedding costs: a 12-word query and a long tool description
//! (about 110 tokens), on one thread. Needs the model (env
//! `CODE_MODE_MODEL_DIR`, default `/opt/code-mode/models/all-minilm-l6-v2`).
//! Run with `cargo bench -p code-mode-encoder --bench embed` (release), or
//! `cargo bench --profile dev -p code-mode-encoder --bench embed` for the
//! debug build the tests use (the encoder is optimised there too).

// A panic in a benchmark is the benchmark failing.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use code_mode_encoder::Encoder;
use criterion::{Criterion, criterion_group, criterion_main};

const QUERY: &str = "send a message to the team channel when the nightly build fails";

const DESCRIPTION: &str = "Search the issue tracker of a repository for issues and pull requests \
    matching a query. Filters: state (open, closed or all), labels (a comma separated list), \
    assignee (a login name, or 'none'), and sort order (created, updated, comments). Returns at \
    most per_page results (default 30, maximum 100) with their number, title, author, labels and \
    the first 500 characters of the body; use the page argument to read further. Requires read \
    access to the repository.";

fn embed(c: &mut Criterion) {
    // Under CI=true a missing model fails; elsewhere the bench says so.
    let Some(dir) = code_mode_core::testing::peers::search_model() else { return };
    let started = Instant::now();
    let encoder = Encoder::load(&dir).unwrap_or_else(|e| panic!("the encoder loads: {e}"));
    eprintln!("loaded {} in {:.0} ms", dir.display(), started.elapsed().as_secs_f64() * 1e3);
    for (name, text) in [("a 12-word query", QUERY), ("a long tool description", DESCRIPTION)] {
        let tokens = encoder.token_ids(text).len();
        c.bench_function(&format!("embed {name} ({tokens} tokens)"), |b| b.iter(|| encoder.embed(text)));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).sample_size(30);
    targets = embed
}
criterion_main!(benches);
