//! The bridge's audit records: one `call` record per call, whatever
//! decided it, with sizes and hashes (values only where `record_args`
//! says), the taint, and a `tools` record per server; with the audit file
//! made immutable no call goes out.

use std::path::Path;
use std::time::Duration;

use code_mode_audit::{AuditSink, SinkOptions};
use serde_json::{Value, json};

use crate::support::{Setup, ok, refused, unique_path};

/// A file sink at `path` (checkpoints only at close).
pub async fn file_sink(path: &Path) -> AuditSink {
    let options = SinkOptions {
        writer: "bridge-it".into(),
        checkpoint_every: 10_000,
        checkpoint_interval: Duration::from_secs(3600),
    };
    AuditSink::file(path, None, options).await.expect("the audit file opens")
}

/// The records of `kind` in the file, in order.
pub fn records(path: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the audit file is there")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("each line is JSON"))
        .filter(|r| r["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn every_call_is_one_record_naming_the_check_that_refused_it_and_the_taint() {
    let path = unique_path("audit-checks.jsonl");
    let mut setup = Setup::default().allow(&["add", "echo", "get_env"]).private(&["get_env"]);
    setup.policy_options.audit = Some(file_sink(&path).await);
    let h = setup.start().await.expect("the bridge starts");
    ok(h.call("add", json!({"a": 1, "b": 2})).await);
    refused(h.call("add", json!({"a": "one", "b": 2})).await);
    refused(h.call("sleep", json!({"seconds": 0})).await);
    refused(h.call("nope", json!({})).await);
    ok(h.call("get_env", json!({"name": "HOME"})).await);
    refused(h.call("echo", json!({"text": "after the private call"})).await);
    h.close().await;
    let calls = records(&path, "call");
    let seen: Vec<(&str, &str, Option<&str>, Option<bool>)> = calls
        .iter()
        .map(|c| {
            (c["tool"].as_str().unwrap(), c["decision"].as_str().unwrap(), c["rule"].as_str(), c["tainted"].as_bool())
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("add", "allowed", None, Some(false)),
            ("add", "refused", Some("bridge:arguments"), None),
            ("sleep", "refused", Some("bridge:allowlist"), None),
            ("nope", "refused", Some("bridge:unknown_tool"), None),
            ("get_env", "allowed", None, Some(true)),
            ("echo", "refused", Some("bridge:private_data"), Some(true)),
        ]
    );
    assert!(
        !calls[1]["reason"].as_str().unwrap().contains("one"),
        "the schema's message is not recorded: {}",
        calls[1]
    );
    assert_eq!(calls[3]["server"], Value::Null, "a name no server has");
    let tools = records(&path, "tools");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["server"], "test");
    let add = tools[0]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "add").unwrap();
    assert_eq!(add["read_only"], true, "annotations are recorded: {add}");
}

#[tokio::test]
async fn record_args_keeps_the_values_of_that_tool_only() {
    let path = unique_path("audit-args.jsonl");
    let mut setup =
        Setup::default().policy(r#"{"version": "1", "default": "allow", "tools": {"echo": {"record_args": true}}}"#);
    setup.policy_options.audit = Some(file_sink(&path).await);
    let h = setup.start().await.expect("the bridge starts");
    ok(h.call("echo", json!({"text": "kept for replay"})).await);
    ok(h.call("add", json!({"a": 40, "b": 2})).await);
    h.close().await;
    let calls = records(&path, "call");
    assert_eq!(calls[0]["args"], json!({"text": "kept for replay"}));
    assert!(calls[1].get("args").is_none(), "{}", calls[1]);
    let verified =
        code_mode_audit::verify::verify(&code_mode_audit::show::read_files(&[&path]).unwrap(), &Default::default());
    assert!(verified.ok(), "{:?}", verified.problem);
}

#[tokio::test]
async fn with_the_audit_file_immutable_no_call_goes_out_and_the_code_is_told_why() {
    let path = unique_path("audit-immutable.jsonl");
    let mut setup = Setup::default();
    setup.policy_options.audit = Some(file_sink(&path).await);
    let h = setup.start().await.expect("the bridge starts");
    ok(h.call("add", json!({"a": 1, "b": 2})).await);
    let made = std::process::Command::new("chattr").arg("+i").arg(&path).status().is_ok_and(|s| s.success());
    if !made {
        code_mode_core::testing::unavailable("chattr +i", "the immutable flag cannot be set here");
        h.close().await;
        return;
    }
    // The first call after the file turned immutable went out before its
    // record failed: its result is withheld. From then on nothing goes out.
    let first = refused(h.call("add", json!({"a": 2, "b": 2})).await);
    let second = refused(h.call("add", json!({"a": 3, "b": 2})).await);
    let third = refused(h.call("echo", json!({"text": "x"})).await);
    let seen = h.calls_seen();
    std::process::Command::new("chattr").arg("-i").arg(&path).status().expect("chattr runs");
    for message in [&first, &second, &third] {
        assert!(message.contains("audit log") && message.contains("fail closed"), "{message}");
    }
    assert_eq!(seen, ["add", "add"], "only the call in flight when the file turned immutable reached the server");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    ok(h.call("add", json!({"a": 4, "b": 2})).await);
    h.close().await;
    let report =
        code_mode_audit::verify::verify(&code_mode_audit::show::read_files(&[&path]).unwrap(), &Default::default());
    assert!(report.ok(), "{:?}", report.problem);
}
