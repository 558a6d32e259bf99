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

#[tokio::test]
async fn resource_reads_and_prompts_replay_under_their_rules_keyed_by_method_and_target() {
    let path = unique_path("resources-audit.jsonl");
    let mut setup = Setup::server(&["--resources"]).policy(r#"{"version": "1", "default": "allow"}"#);
    setup.policy_options.audit = Some(file_sink(&path).await);
    let h = setup.start().await.expect("the bridge starts");
    let op = |index: u32, op: code_mode_proto::Op, target: &str, arguments: Value| ToolCall {
        op,
        ..call("s", "c", index, target, arguments)
    };
    use code_mode_proto::Op;
    ok(h.bridge.call(&op(1, Op::ReadResource, "test://small", json!({}))).await);
    ok(h.bridge.call(&op(2, Op::ReadResource, "test://secret", json!({}))).await);
    ok(h.bridge.call(&op(3, Op::GetPrompt, "greet", json!({"name": "Ada"}))).await);
    ok(h.bridge.call(&call("s", "c", 4, "echo", json!({"text": "hi"}))).await);
    h.close().await;
    let recorded = records(&path);
    let methods: Vec<&str> = recorded.iter().filter_map(|r| r["method"].as_str()).collect();
    assert_eq!(methods, ["resources/read", "resources/read", "prompts/get"], "{recorded:#?}");

    let policy = policy_file(
        r#"{"version": "1", "default": "allow",
            "resources": {"test://secret": {"action": "deny", "reason": "kept back"}},
            "prompts": {"greet": {"action": "deny"}}}"#,
    );
    let report = replay(&policy, &recorded, None).await.unwrap();
    assert_eq!(report.calls, 4, "{report}");
    assert_eq!(report.changed, 2, "{report}");
    let secret = &report.tools["resources/read test://secret"].changes[&Change::NowDenied];
    assert!(secret.why.contains("/resources/test:~1~1secret: kept back"), "{report}");
    assert!(report.tools["resources/read test://small"].changes.is_empty(), "{report}");
    assert_eq!(report.tools["prompts/get greet"].changes[&Change::NowDenied].calls, 1, "{report}");
    assert!(report.tools["echo"].changes.is_empty(), "{report}");
    let text = report.to_string();
    assert!(text.contains("resources/read test://secret"), "{text}");
}
