//! What the bridge's checks cost per call, in memory: a policy decision
//! (the verdict, the rule's `args` schema, the rate-limit counter in an
//! in-memory session store) and the argument check against a tool's input
//! schema. Budgets in `docs/performance.md`. Run with
//! `cargo bench -p code-mode-bridge --bench checks`.

// A panic in a benchmark is the benchmark failing.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use code_mode_bridge::policy::{Policy, RateLimiter, ToolFacts};
use code_mode_bridge::schema::ArgumentChecker;
use code_mode_core::state::SessionStore;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

/// 300 tools, as in the discovery benchmark.
fn known_tools() -> Vec<ToolFacts> {
    (0..300).map(|i| ToolFacts { name: format!("tool_{i}"), ..ToolFacts::default() }).collect()
}

/// A policy with a rule for every tenth tool (an args schema and a rate
/// limit on each) and a default for the rest: the decision for `tool_150`
/// looks its rule up among them.
fn policy_text() -> String {
    let rules: Vec<String> = (0..300)
        .step_by(10)
        .map(|i| {
            format!(
                r#""tool_{i}": {{"args": {{"type": "object", "properties": {{"path": {{"type": "string", "pattern": "^tests/"}}}},
                    "required": ["path"]}},
                  "limits": [{{"counter": "c{i}", "window": "minute", "max": 1000000000}},
                             {{"counter": "h{i}", "window": "hour", "max": 1000000000}}]}}"#
            )
        })
        .collect();
    format!(r#"{{"version": "1", "default": "allow", "tools": {{{}}}}}"#, rules.join(",\n"))
}

fn policy_decision(c: &mut Criterion) {
    let policy = Arc::new(Policy::parse(&policy_text(), "bench.json", &known_tools()).expect("the policy parses"));
    let limiter = RateLimiter::new(policy.clone(), SessionStore::in_memory());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let arguments = json!({"path": "tests/unit/test_parser.py"});
    c.bench_function("policy decision, one call (verdict, args schema, two rate limits in memory)", |b| {
        b.iter(|| {
            let verdict = policy.verdict("tool_150");
            policy.check_args("tool_150", &arguments).expect("the arguments pass");
            runtime.block_on(limiter.admit("session", "tool_150", SystemTime::now())).expect("under the limit");
            verdict
        })
    });
    c.bench_function("policy verdict of a tool with no rule (the default)", |b| b.iter(|| policy.verdict("tool_151")));
}

fn argument_check(c: &mut Criterion) {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "pattern": {"type": "string"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 1000},
            "include_hidden": {"type": "boolean"},
            "extensions": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            "options": {"type": "object", "properties": {"case": {"enum": ["smart", "exact", "ignore"]}}}
        },
        "required": ["path", "pattern"]
    });
    let checker = ArgumentChecker::compile(&schema, 32).expect("the schema compiles");
    let good = json!({"path": "src", "pattern": "fn main", "max_results": 50, "include_hidden": false,
                      "extensions": ["rs", "toml"], "options": {"case": "smart"}});
    let bad = json!({"path": "src", "pattern": "x", "max_results": 5000});
    c.bench_function("argument check, six properties, valid (size, names, schema)", |b| {
        b.iter(|| checker.check(&good, 16 * 1024).is_ok())
    });
    c.bench_function("argument check, six properties, refused (with the message)", |b| {
        b.iter(|| checker.check(&bad, 16 * 1024).is_err())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).sample_size(30);
    targets = policy_decision, argument_check
}
criterion_main!(benches);
