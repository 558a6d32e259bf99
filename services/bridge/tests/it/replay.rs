//! `policy replay` as a library: recorded calls of the real bridge over the
//! real test server, replayed through policies. The three seed policies
//! replay cleanly against traffic they allowed; an `args` rule is checked
//! against values recorded with `record_args` and reported as not
//! evaluated without them; limits count at the recorded times.

use std::path::Path;

use code_mode_bridge::replay::{Change, replay};
use code_mode_proto::ToolCall;
use serde_json::{Value, json};

use crate::audit::file_sink;
use crate::policy::{DEBUGPY_SEED, PYTEST_SEED, PYTHON_SCRIPT_SEED};
use crate::support::{Setup, ok, refused, unique_path};

fn call(session: &str, cell: &str, index: u32, tool: &str, arguments: Value) -> ToolCall {
    ToolCall {
        session: session.into(),
        asker: None,
        identity: None,
        cell_id: cell.into(),
        call_index: index,
        tool: tool.into(),
        arguments,
        op: Default::default(),
        link: None,
    }
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn policy_file(text: &str) -> std::path::PathBuf {
    let path = unique_path("replay-policy.json");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn the_three_seed_policies_replay_cleanly_against_traffic_they_allowed() {
    for (seed, tool) in
        [(PYTEST_SEED, "mcp_run_pytest"), (PYTHON_SCRIPT_SEED, "run_python_script"), (DEBUGPY_SEED, "debugpy_connect")]
    {
        let path = unique_path("seed-audit.jsonl");
        let mut setup = Setup::server(&["--tool", tool]).policy(seed);
        setup.policy_options.audit = Some(file_sink(&path).await);
        let h = setup.start().await.expect("the bridge starts with the seed policy");
        // Ten calls in each of two sessions: what a limit of ten per
        // minute per session allows.
        for session in ["s1", "s2"] {
            for i in 1..=10 {
                ok(h.bridge.call(&call(session, &format!("{session}-cell"), i, tool, json!({"path": "tests/"}))).await);
            }
        }
        h.close().await;
        let report = replay(&policy_file(seed), &records(&path), None).await.expect("the seed replays");
        assert_eq!(report.calls, 20, "{report}");
        assert!(!report.changes_anything(), "{report}");
        assert_eq!(report.tools[tool].calls, 20);
        // The same traffic against a limit of five finds the sixth call of
        // each session over it.
        let five = seed.replace("\"max\": 10", "\"max\": 5");
        let stricter = replay(&policy_file(&five), &records(&path), None).await.unwrap();
        let over = &stricter.tools[tool].changes[&Change::NowOverLimit];
        assert_eq!((over.calls, stricter.changed), (10, 10), "{stricter}");
    }
}

#[tokio::test]
async fn an_args_rule_is_checked_against_recorded_values_and_reported_as_not_evaluated_without_them() {
    let path = unique_path("args-audit.jsonl");
    let mut setup =
        Setup::default().policy(r#"{"version": "1", "default": "allow", "tools": {"echo": {"record_args": true}}}"#);
    setup.policy_options.audit = Some(file_sink(&path).await);
    let h = setup.start().await.expect("the bridge starts");
    ok(h.bridge.call(&call("s", "c", 1, "echo", json!({"text": "short"}))).await);
    ok(h.bridge.call(&call("s", "c", 2, "echo", json!({"text": "a good deal longer"}))).await);
    ok(h.bridge.call(&call("s", "c", 3, "add", json!({"a": 1, "b": 2}))).await);
    refused(h.bridge.call(&call("s", "c", 4, "nope", json!({}))).await);
    h.close().await;
    let policy = policy_file(
        r#"{"version": "1", "default": "allow", "tools": {
            "echo": {"args": {"properties": {"text": {"maxLength": 5}}}},
            "add": {"args": {"properties": {"a": {"maximum": 0}}}}}}"#,
    );
    let report = replay(&policy, &records(&path), None).await.unwrap();
    let echo = &report.tools["echo"];
    assert_eq!(echo.changes[&Change::NowRefusedByArgs].calls, 1, "{report}");
    assert_eq!(echo.args_not_evaluated, 0);
    let add = &report.tools["add"];
    assert!(add.changes.is_empty(), "without recorded values the rule is assumed to pass: {report}");
    assert_eq!(add.args_not_evaluated, 1);
    assert_eq!(report.not_judged, 1, "the unknown tool was refused before any policy");
    let text = report.to_string();
    assert!(text.contains("/tools/add/args not evaluated on 1 calls"), "{text}");
}
