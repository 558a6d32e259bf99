//! The audit record end to end: real cells in the real sandbox making real
//! calls to the test server, recorded by `--audit`; `audit verify` and
//! `audit show` read them back; `policy replay` runs them through a stricter
//! and a looser policy and reports exactly what would change; an audit file
//! made immutable, and a killed nats-server under `--audit nats://...`, stop
//! new cells with a clear error until the sink is back (fail closed); over
//! NATS the bridge and the runner write one chain to one stream.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use code_mode_core::testing::{NatsServer, TempDir};
use serde_json::{Value, json};

use crate::support::{self, Deployment, log_path, logged_calls, report, run, run_python};

fn code_mode(args: &[&str]) -> std::process::Output {
    Command::new(support::code_mode()).args(args).output().expect("code-mode runs")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The recording policy: `add` 3 per hour, `echo` with its arguments
/// recorded, `count` allowed, everything else denied.
const RECORDED_UNDER: &str = r#"{"version": "1", "default": "deny", "tools": {
  "add": {"limits": [{"counter": "adds", "window": "hour", "max": 3}]},
  "echo": {"record_args": true},
  "count": {}}}"#;

/// Stricter: `add` 2 per hour, `echo` only up to 5 characters, `count`
/// only with a person's approval.
const STRICTER: &str = r#"{"version": "1", "default": "deny", "tools": {
  "add": {"limits": [{"counter": "adds", "window": "hour", "max": 2}]},
  "echo": {"args": {"properties": {"text": {"maxLength": 5}}}},
  "count": {"action": "approve"}}}"#;

/// Looser: everything allowed.
const LOOSER: &str = r#"{"version": "1", "default": "allow"}"#;

const SESSION_CODE: &str = "\
for i in range(4):
    try:
        print(await add(a=i, b=1))
    except ToolError as e:
        print('refused:', str(e)[:40])
print(await echo(text='hi'))
print(await echo(text='a longer text'))
print(await count())
";

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.0.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_recorded_session_replayed_against_a_stricter_and_a_looser_policy_gives_exactly_the_expected_differences() {
    if !support::sandbox_available() {
        return;
    }
    crate::policy::inside_one_window(3600, 30);
    let dir = TempDir::new("audit-replay");
    let audit = dir.0.join("audit.jsonl");
    let recorded = write(&dir, "recorded.json", RECORDED_UNDER);
    let log = log_path("audit-replay");
    let ran = run(
        &["--policy", recorded.to_str().unwrap(), "--audit", audit.to_str().unwrap()],
        SESSION_CODE,
        &["--log", log.to_str().unwrap()],
    );
    let out = ran.ok();
    assert!(out.contains("refused: add: rate limit adds"), "{out}");
    assert_eq!(logged_calls(&log).len(), 6, "three adds, two echoes and a count reached the server");

    let verified = code_mode(&["audit", "verify", audit.to_str().unwrap()]);
    assert!(verified.status.success(), "{}", stdout(&verified));
    assert!(stdout(&verified).contains(": the chain holds"), "{}", stdout(&verified));
    let calls = code_mode(&["audit", "show", "--json", "--kind", "call", audit.to_str().unwrap()]);
    let calls: Vec<Value> = stdout(&calls).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(calls.len(), 7, "{calls:?}");
    let seq_of = |n: usize| calls[n]["seq"].as_u64().unwrap();

    let replay = |policy: &Path| {
        let out =
            code_mode(&["policy", "replay", "--json", "--policy", policy.to_str().unwrap(), audit.to_str().unwrap()]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), report)
    };
    let (status, stricter) = replay(&write(&dir, "stricter.json", STRICTER));
    assert_eq!(status, Some(1), "something would change: {stricter}");
    assert_eq!(stricter["calls"], 7);
    assert_eq!(stricter["changed"], 3, "{stricter}");
    assert_eq!(
        stricter["tools"]["add"]["changes"],
        json!({"now_over_limit": {"calls": 1, "first_record": seq_of(2), "why": "rate limit adds: at most 2 calls per hour"}}),
        "the third add goes over the new limit; the fourth was over the old one already"
    );
    assert_eq!(
        stricter["tools"]["echo"]["changes"]["now_refused_by_args"]["first_record"],
        seq_of(5),
        "the longer echo is refused by the new argument rule, checked against its recorded value: {stricter}"
    );
    assert_eq!(stricter["tools"]["echo"]["changes"]["now_refused_by_args"]["calls"], 1);
    assert_eq!(
        stricter["tools"]["count"]["changes"],
        json!({"now_needs_approval": {"calls": 1, "first_record": seq_of(6), "why": "/tools/count"}})
    );

    let (status, looser) = replay(&write(&dir, "looser.json", LOOSER));
    assert_eq!(status, Some(1));
    assert_eq!(looser["changed"], 1, "{looser}");
    assert_eq!(
        looser["tools"]["add"]["changes"],
        json!({"now_allowed": {"calls": 1, "first_record": seq_of(3), "why": "/default"}}),
        "only the add the old limit refused changes"
    );
    assert_eq!(looser["tools"]["echo"]["changes"], json!({}));

    let (status, same) = replay(&recorded);
    assert_eq!(status, Some(0), "the recording policy changes nothing: {same}");
    let _ = std::fs::remove_file(&log);
}

/// `chattr` on `path`.
fn chattr(flag: &str, path: &Path) -> bool {
    Command::new("chattr").arg(flag).arg(path).status().is_ok_and(|s| s.success())
}

/// The text of an MCP error result, or the report's JSON.
fn answer(result: &rmcp::model::CallToolResult) -> String {
    if result.is_error == Some(true) {
        return result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    }
    report(result).to_string()
}

#[tokio::test]
async fn an_audit_file_made_immutable_stops_new_cells_with_a_clear_error_until_it_is_writable_again() {
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("audit-immutable");
    let audit = dir.0.join("audit.jsonl");
    let (client, _pid, _guards) =
        support::start(Deployment::AllInOne, &["--audit", audit.to_str().unwrap(), "--warm", "0"], &[]).await;
    let first = run_python(&client, "print(await add(a=1, b=2))").await;
    assert_eq!(report(&first)["stdout"], "{\"sum\":3}\n");
    if !chattr("+i", &audit) {
        code_mode_core::testing::unavailable("chattr +i", "the immutable flag cannot be set here");
        return;
    }
    let refused = run_python(&client, "print('this never runs')").await;
    let again = run_python(&client, "print('nor this')").await;
    chattr("-i", &audit);
    for result in [&refused, &again] {
        let text = answer(result);
        assert_eq!(result.is_error, Some(true), "{text}");
        assert!(
            text.contains("audit log") && text.contains("cannot be written") && text.contains("fail closed"),
            "{text}"
        );
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let back = run_python(&client, "print('back')").await;
    assert_eq!(report(&back)["stdout"], "back\n", "{}", answer(&back));
    client.cancel().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let verified = code_mode(&["audit", "verify", audit.to_str().unwrap()]);
    assert!(verified.status.success(), "{}", stdout(&verified));
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(!text.contains("this never runs") && text.matches("\"kind\":\"cell\"").count() == 2, "{text}");
}

#[tokio::test]
async fn with_nats_server_killed_serve_refuses_new_cells_until_the_audit_stream_is_back() {
    if !support::sandbox_available() {
        return;
    }
    let Some(mut nats) = NatsServer::start(&[]) else { return };
    let url = nats.url();
    let (client, _pid, _guards) = support::start(Deployment::AllInOne, &["--audit", &url, "--warm", "0"], &[]).await;
    let first = run_python(&client, "print(await add(a=1, b=2))").await;
    assert_eq!(report(&first)["stdout"], "{\"sum\":3}\n", "{}", answer(&first));
    nats.stop();
    let refused = run_python(&client, "print('this never runs')").await;
    let text = answer(&refused);
    assert_eq!(refused.is_error, Some(true), "{text}");
    assert!(text.contains("nats:CODEMODE_AUDIT") && text.contains("fail closed"), "{text}");
    nats.restart();
    let mut back = None;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let result = run_python(&client, "print('back')").await;
        if result.is_error != Some(true) {
            back = Some(result);
            break;
        }
    }
    let back = back.expect("cells run again once nats-server is back");
    assert_eq!(report(&back)["stdout"], "back\n");
    client.cancel().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let verified = code_mode(&["audit", "verify", "--nats", &url]);
    assert!(verified.status.success(), "{}", stdout(&verified));
    let shown = stdout(&code_mode(&["audit", "show", "--nats", &url, "--json", "--kind", "cell"]));
    assert_eq!(shown.lines().count(), 2, "two cells ran, recorded: {shown}");
}

#[tokio::test]
async fn over_nats_the_bridge_and_the_runner_write_one_chain_to_one_stream() {
    if !support::sandbox_available() {
        return;
    }
    let (client, _pid, guards) = support::start(Deployment::OverNats, &["--audit", "nats"], &[]).await;
    for code in ["print(await add(a=1, b=2))", "print(await echo(text='hi'))\nprint(await add(a=2, b=2))"] {
        let result = run_python(&client, code).await;
        assert_ne!(result.is_error, Some(true), "{}", answer(&result));
    }
    client.cancel().await.unwrap();
    let url = guards.nats_url();
    let users = guards.users();
    let read = |args: &[&str]| {
        Command::new(support::code_mode())
            .args(args)
            .env("CODE_MODE_NATS_USER", "bridge")
            .env("CODE_MODE_NATS_PASSWORD", users.password("bridge"))
            .output()
            .unwrap()
    };
    let verified = read(&["audit", "verify", "--nats", &url]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), String::from_utf8_lossy(&verified.stderr));
    let records: Vec<Value> = stdout(&read(&["audit", "show", "--nats", &url, "--json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by = |kind: &str| -> Vec<&str> {
        records.iter().filter(|r| r["kind"] == kind).map(|r| r["writer"].as_str().unwrap()).collect()
    };
    assert_eq!(by("cell").len(), 2, "{records:?}");
    assert!(by("cell").iter().all(|w| w.starts_with("sandbox-runner@")), "the runner writes cell records");
    assert_eq!(by("call").len(), 3);
    assert!(by("call").iter().all(|w| w.starts_with("bridge@")), "the bridge writes call records");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["seq"].as_u64(), Some(i as u64 + 1), "the stream's sequence is the record's");
    }
}

#[test]
fn audit_show_refuses_an_unknown_kind_or_decision_naming_every_one_there_is() {
    let dir = TempDir::new("audit-kinds");
    let file = write(&dir, "audit.jsonl", "");
    for (flag, words) in
        [("--kind", &code_mode_audit::Body::KINDS[..]), ("--decision", &code_mode_audit::Decision::WORDS[..])]
    {
        let out = code_mode(&["audit", "show", flag, "nonsense", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "refused as a usage error: {stderr}");
        assert!(stdout(&out).is_empty(), "nothing printed as if it were a result");
        assert!(stderr.contains("'nonsense'") && stderr.contains(flag), "{stderr}");
        for word in words {
            assert!(stderr.contains(word), "{flag}'s refusal names {word}: {stderr}");
        }
        // A word of the list is taken.
        let out = code_mode(&["audit", "show", flag, words[0], file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}
