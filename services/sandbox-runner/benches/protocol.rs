//! What the runner's side of the line protocol costs: splitting the
//! container's output into lines and parsing one untrusted line. Budgets in
//! `docs/performance.md`. Run with
//! `cargo bench -p code-mode-sandbox-runner --bench protocol`.

// A panic in a benchmark is the benchmark failing.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use code_mode_sandbox_runner::protocol::{LineReader, parse};
use criterion::{Criterion, criterion_group, criterion_main};

fn lines(c: &mut Criterion) {
    let args: String = (0..40).map(|i| format!("\"k{i}\": \"value number {i}\"")).collect::<Vec<_>>().join(", ");
    let call = format!(r#"{{"type": "call", "id": 7, "tool": "search_files", "arguments": {{{args}}}}}"#);
    let output = r#"{"type": "output", "data": "a line of printed text, with \"quotes\" and \u00e9\n"}"#;
    let done = r#"{"type": "done", "error": null, "truncated": false, "stopped": false}"#;
    c.bench_function("parse one call line (40 arguments, about 1 KiB)", |b| b.iter(|| parse(call.as_bytes()).is_ok()));
    c.bench_function("parse one output line", |b| b.iter(|| parse(output.as_bytes()).is_ok()));
    c.bench_function("parse one done line", |b| b.iter(|| parse(done.as_bytes()).is_ok()));
    let mut chunk = Vec::new();
    while chunk.len() < 64 * 1024 {
        chunk.extend_from_slice(output.as_bytes());
        chunk.push(b'\n');
    }
    c.bench_function("split a 64 KiB chunk of output lines", |b| {
        b.iter(|| LineReader::new(1 << 18).feed(&chunk).map(|l| l.len()))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).sample_size(30);
    targets = lines
}
criterion_main!(benches);
