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
        target: code_mode_proto::Target::Tool(tool.into()),
        arguments,
        link: None,
        file_in: false,
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
    let op = |index: u32, target: code_mode_proto::Target, arguments: Value| ToolCall {
        target,
        ..call("s", "c", index, "", arguments)
    };
    use code_mode_proto::Target;
    ok(h.bridge.call(&op(1, Target::ReadResource("test://small".into()), json!({}))).await);
    ok(h.bridge.call(&op(2, Target::ReadResource("test://secret".into()), json!({}))).await);
    ok(h.bridge.call(&op(3, Target::GetPrompt("greet".into()), json!({"name": "Ada"}))).await);
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

/// Decide the first call waiting for `name` on the bridge's board.
async fn decide_first(bridge: &code_mode_bridge::Bridge, name: &str, approve: bool, note: &str) -> String {
    let viewer = code_mode_proto::Viewer { name: name.into(), groups: vec![] };
    for _ in 0..200 {
        let board = bridge.console(code_mode_proto::ConsoleRequest::Board { viewer: viewer.clone() }).await.unwrap();
        if let code_mode_proto::ConsoleReply::Board { waiting, .. } = board
            && let Some(first) = waiting.into_iter().next()
        {
            let id = first.id.clone();
            let decide = code_mode_proto::ConsoleRequest::Decide { viewer, id: id.clone(), approve, note: note.into() };
            bridge.console(decide).await.expect("the decision is taken");
            return id;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no call waited for {name}");
}

#[tokio::test]
async fn a_rule_naming_approvers_is_refused_at_once_where_no_frontend_serves_the_bridge() {
    let team =
        r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve", "approvers": ["alice"]}}}"#;
    let h = Setup::default().policy(team).start().await.expect("the bridge starts");
    let refusal = refused(h.bridge.call(&call("s", "c", 1, "echo", json!({"text": "x"}))).await);
    assert!(refusal.contains("decide in the web console of an HTTP frontend"), "{refusal}");
    h.close().await;
}

#[tokio::test]
async fn a_rule_naming_approvers_replays_with_who_decided_and_flags_a_decider_who_could_not_decide_now() {
    let path = unique_path("team-audit.jsonl");
    let team = r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve", "approvers": ["alice", "bob"]}}}"#;
    let mut setup = Setup::default().policy(team);
    setup.policy_options.audit = Some(file_sink(&path).await);
    let h = setup.start().await.expect("the bridge starts");
    // On a bus, as a frontend would reach it (without one nobody could decide).
    let stop = tokio_util::sync::CancellationToken::new();
    let bus = code_mode_core::bus::Bus::in_process();
    let _served = h.bridge.serve(&bus, stop.clone()).await.unwrap();
    // The test makes the calls a runner would relay, so it also answers
    // their cell's hold subject as a runner does while the cell runs.
    let hold = code_mode_proto::subjects::cell_hold("c").unwrap();
    let _cell = bus
        .serve(&hold, "sandbox-runner", stop.clone(), |_: code_mode_proto::CellHold| async {
            Ok(code_mode_proto::CellHeld { paused: true, held_ms: 0, refused: None, code: None })
        })
        .await
        .unwrap();
    for (i, approver) in [(1, "alice"), (2, "bob")] {
        let mut asked = call("s", "c", i, "echo", json!({"text": format!("call {i}")}));
        asked.identity = Some("carol".into());
        let bridge = h.bridge.clone();
        let waiting = tokio::spawn(async move { bridge.call(&asked).await });
        decide_first(&h.bridge, approver, true, "looks fine").await;
        ok(waiting.await.unwrap());
    }
    // A decline carries the note to the code.
    let bridge = h.bridge.clone();
    let waiting = tokio::spawn(async move { bridge.call(&call("s", "c", 3, "echo", json!({"text": "no"}))).await });
    decide_first(&h.bridge, "alice", false, "not this one").await;
    let refusal = refused(waiting.await.unwrap());
    assert!(refusal.contains("declined by alice: not this one"), "{refusal}");
    stop.cancel();
    h.close().await;
    let recorded = records(&path);
    let approvals: Vec<&Value> = recorded.iter().filter(|r| r["kind"] == "call").map(|r| &r["approval"]).collect();
    assert_eq!(approvals.iter().map(|a| a["by"].as_str().unwrap()).collect::<Vec<_>>(), ["alice", "bob", "alice"]);
    assert!(approvals.iter().all(|a| a["question_sha256"].as_str().is_some_and(|h| h.len() == 64)));
    // The same rule replays cleanly, naming its approvers.
    let same = replay(&policy_file(team), &recorded, None).await.unwrap();
    assert!(!same.changes_anything(), "{same}");
    // Alice alone: bob's approval could not be given now.
    let alice_only = team.replace(r#"["alice", "bob"]"#, r#"["alice"]"#);
    let stricter = replay(&policy_file(&alice_only), &recorded, None).await.unwrap();
    let flagged = &stricter.tools["echo"].changes[&Change::DeciderNoLongerApprover];
    assert_eq!((flagged.calls, stricter.changed), (1, 1), "{stricter}");
    assert!(flagged.why.contains("(approvers: alice)"), "{stricter}");
    // Alice and a group: bob's approval may or may not be given now (the
    // records do not say who is in the group), which the report says
    // instead of calling it unchanged.
    let with_group = team.replace(r#"["alice", "bob"]"#, r#"["alice", "group:security"]"#);
    let unknown = replay(&policy_file(&with_group), &recorded, None).await.unwrap();
    assert!(!unknown.changes_anything(), "{unknown}");
    let echo = &unknown.tools["echo"];
    assert_eq!((echo.deciders_not_judged, echo.deciders_groups.as_slice()), (1, &["group:security".to_string()][..]));
    let text = unknown.to_string();
    assert!(!text.contains("unchanged"), "{text}");
    assert!(
        text.contains(
            "echo: 1 calls decided by approvers not named in the new rule cannot be judged: whether they are in \
             group:security is not recorded"
        ),
        "{text}"
    );
    // The client asked instead of approvers: every decision would move.
    let client_only = r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve"}}}"#;
    let moved = replay(&policy_file(client_only), &recorded, None).await.unwrap();
    assert_eq!(moved.tools["echo"].changes[&Change::NowAskedOfTheClient].calls, 3, "{moved}");
}

#[tokio::test]
async fn a_call_whose_cell_no_runner_holds_is_withdrawn_at_once_instead_of_waiting_for_approvers() {
    let team =
        r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "approve", "approvers": ["alice"]}}}"#;
    let h = Setup::default().policy(team).start().await.expect("the bridge starts");
    let stop = tokio_util::sync::CancellationToken::new();
    let _served = h.bridge.serve(&code_mode_core::bus::Bus::in_process(), stop.clone()).await.unwrap();
    let started = std::time::Instant::now();
    let refusal = refused(h.bridge.call(&call("s", "gone-cell", 1, "echo", json!({"text": "x"}))).await);
    assert!(refusal.contains("withdrawn: the cell that asked ended"), "{refusal}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "at once, not at the approval timeout");
    stop.cancel();
    h.close().await;
}

#[tokio::test]
async fn the_console_hears_of_each_runners_slots_and_which_sessions_are_tainted() {
    use code_mode_proto::{ConsoleReply, ConsoleRequest, RunnerStatus};
    let h = Setup::server(&[]).private(&["get_env"]).start().await.expect("the bridge starts");
    for (id, free) in [("r1", 3), ("r2", 0), ("r1", 2)] {
        let status = RunnerStatus { id: id.into(), capacity: 4, free, warm: 1, at_ms: 0, packages: None };
        h.bridge.runner_status(status).await.expect("kept");
    }
    let Ok(ConsoleReply::Runners { runners }) = h.bridge.console(ConsoleRequest::Runners).await else {
        panic!("the runners")
    };
    let seen: Vec<(&str, u32)> = runners.iter().map(|r| (r.id.as_str(), r.free)).collect();
    assert_eq!(seen, [("r1", 2), ("r2", 0)], "the latest of each runner");
    assert!(runners.iter().all(|r| r.at_ms > 0), "stamped by the bridge");
    ok(h.bridge.call(&call("tainted", "c", 1, "get_env", json!({"name": "HOME"}))).await);
    ok(h.bridge.call(&call("clean", "c", 1, "add", json!({"a": 1, "b": 2}))).await);
    let ids = vec!["tainted".to_string(), "clean".to_string()];
    let Ok(ConsoleReply::Sessions { tainted }) = h.bridge.console(ConsoleRequest::Sessions { ids }).await else {
        panic!("the sessions")
    };
    assert_eq!(tainted, ["tainted"]);
    h.close().await;
}
