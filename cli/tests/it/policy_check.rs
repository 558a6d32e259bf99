//! `code-mode policy check`: the real binary starts the real test server,
//! reads the policy against the tools it lists and prints each tool's
//! verdict and deciding rule, or fails naming the file, the JSON path and
//! the reason. No sandbox is needed: no code runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::{code_mode, log_path, logged_calls, test_server};

/// The seed policy's shape: default deny, `add` limited, plus a deny with a
/// reason, an approval and a plain allow.
const SEED_LIKE: &str = r#"{"version": "1", "default": "deny",
  "tools": {
    "add": {"limits": [{"counter": "add_rate", "window": "minute", "max": 2, "scope": "grant"}]},
    "echo": {"action": "deny", "reason": "echo leaks text"},
    "sleep": {"action": "approve"},
    "count": {}
  }}"#;

/// Write `text` to `dir/name` (folders made if missing).
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap_or(dir)).expect("the folder is made");
    std::fs::write(&path, text).expect("the file is written");
    path
}

/// A fresh folder for one test's files.
fn fresh_dir(tag: &str) -> PathBuf {
    log_path(tag).with_extension("d")
}

/// `code-mode policy check <args>`, stdin closed.
fn policy_check(args: &[&str]) -> Output {
    Command::new(code_mode())
        .arg("policy")
        .arg("check")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("code-mode runs")
}

/// `code-mode policy check FILE -- <test server> --log LOG`.
fn check_file(policy: &Path, log: &Path, extra: &[&str]) -> Output {
    let server = test_server();
    let mut args = vec![policy.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", server.to_str().unwrap(), "--log", log.to_str().unwrap()]);
    policy_check(&args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lines of a successful check's stdout.
fn lines_of(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "the check passes: {:?}\nstderr: {}", out.status, text(&out.stderr));
    text(&out.stdout).lines().map(str::to_string).collect()
}

/// The stderr of a failed check.
fn failure_of(out: &Output) -> String {
    assert!(!out.status.success(), "the check fails; stdout: {}", text(&out.stdout));
    assert!(out.stdout.is_empty(), "nothing is printed on stdout: {}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn a_valid_policy_prints_each_listed_tools_verdict_and_rule_and_exits_zero() {
    let dir = fresh_dir("policy-check-valid");
    let policy = write(&dir, "policy.json", SEED_LIKE);
    let log = log_path("policy-check-valid");
    let lines = lines_of(&check_file(&policy, &log, &[]));
    for expected in [
        "add: limited [2 per minute, counter add_rate] — /tools/add",
        "echo: deny — /tools/echo: echo leaks text",
        "sleep: needs approval — /tools/sleep",
        "count: allow — /tools/count",
        "huge: deny — /default: the policy denies every tool it does not name (default deny)",
    ] {
        assert!(lines.iter().any(|l| l == expected), "{expected:?} is printed: {lines:#?}");
    }
    let listed = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(listed.lines().any(|l| l.starts_with("tools/list")), "the real server was asked: {listed}");
    let verdicts = ["allow — ", "deny — ", "needs approval — ", "limited ["];
    assert!(
        lines.iter().all(|l| verdicts.iter().any(|v| l.contains(v))),
        "one verdict line per tool, nothing else: {lines:#?}"
    );
    assert!(logged_calls(&log).is_empty(), "checking calls no tool");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_category_rule_decides_the_tools_without_their_own_rule_and_left_out_tools_are_flagged() {
    let dir = fresh_dir("policy-check-category");
    let policy = write(
        &dir,
        "policy.json",
        r#"{"version": "1", "default": "allow", "tools": {"add": {}},
            "categories": {"destructive": {"action": "approve"}}}"#,
    );
    let log = log_path("policy-check-category");
    let lines = lines_of(&check_file(&policy, &log, &["--allow", "add", "--allow", "sleep"]));
    assert!(lines.iter().any(|l| l == "add: allow — /tools/add"), "{lines:#?}");
    // `sleep` has no annotations: destructive by the MCP defaults.
    assert!(lines.iter().any(|l| l == "sleep: needs approval — /categories/destructive"), "{lines:#?}");
    // `echo` is annotated read-only, so no category rule applies: the default.
    assert!(lines.iter().any(|l| l == "echo: allow — /default (not offered: not on the allowlist)"), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l == "huge: needs approval — /categories/destructive (not offered: not on the allowlist)"),
        "{lines:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_invalid_policy_exits_non_zero_naming_the_file_the_json_path_and_the_reason() {
    let dir = fresh_dir("policy-check-invalid");
    let cases = [
        (r#"{"version": "1", "tools": {"no_such_tool": {}}}"#, "/tools/no_such_tool", "no tool \"no_such_tool\""),
        (
            r#"{"version": "1", "tools": {"add": {"limits": [{"counter": "c", "window": "fortnight", "max": 1}]}}}"#,
            "/tools/add/limits/0/window",
            "fortnight",
        ),
        (r#"{"version": "1", "tools": {"add": {"acton": "deny"}}}"#, "/tools/add/acton", "unknown key"),
    ];
    for (i, (body, pointer, reason)) in cases.into_iter().enumerate() {
        let policy = write(&dir, &format!("policy-{i}.json"), body);
        let stderr = failure_of(&check_file(&policy, &log_path("policy-check-invalid"), &[]));
        let named = format!("{}: {pointer}: ", policy.display());
        assert!(stderr.contains(&named), "the error names the file and the JSON path ({named}): {stderr}");
        assert!(stderr.contains(reason), "the error says why ({reason}): {stderr}");
    }
    let unparsable = write(&dir, "broken.json", r#"{"version": "1", "tools": "#);
    let stderr = failure_of(&check_file(&unparsable, &log_path("policy-check-invalid"), &[]));
    assert!(stderr.contains(&unparsable.display().to_string()) && stderr.contains("not valid JSON"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_config_each_entrys_policy_file_or_inline_gives_verdicts_named_by_server() {
    let dir = fresh_dir("policy-check-config");
    write(&dir, "policies/math.json", SEED_LIKE);
    let entry = |tag: &str, policy: Value| json!({"command": test_server(), "args": ["--log", log_path(tag)], "policy": policy});
    let config = json!({"mcpServers": {
        "math": entry("policy-check-math", json!("policies/math.json")),
        "words": entry("policy-check-words", json!({"version": "1", "default": "allow",
            "tools": {"echo": {"limits": [{"counter": "echo_rate", "window": 10, "max": 5, "scope": "global"}]}}})),
    }});
    let config = write(&dir, "servers.json", &config.to_string());
    let lines = lines_of(&policy_check(&["--config", config.to_str().unwrap()]));
    for expected in [
        "math add: limited [2 per minute, counter add_rate] — /tools/add",
        "math echo: deny — /tools/echo: echo leaks text",
        "words echo: limited [5 per 10 seconds (all sessions), counter echo_rate] — /tools/echo",
        "words add: allow — /default",
    ] {
        assert!(lines.iter().any(|l| l == expected), "{expected:?} is printed: {lines:#?}");
    }
    let first_words = lines.iter().position(|l| l.starts_with("words ")).expect("words has lines");
    assert!(lines[..first_words].iter().all(|l| l.starts_with("math ")), "servers in config order: {lines:#?}");

    // A bad inline policy names the config file, the entry and the path inside.
    let bad = json!({"mcpServers": {
        "words": entry("policy-check-bad", json!({"version": "1", "tools": {"echo": {"action": "maybe"}}})),
    }});
    let bad = write(&dir, "bad.json", &bad.to_string());
    let stderr = failure_of(&policy_check(&["--config", bad.to_str().unwrap()]));
    let named = format!("{} mcpServers.words.policy: /tools/echo/action: ", bad.display());
    assert!(stderr.contains(&named), "the error names file, entry and JSON path ({named}): {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first fenced block of `lang` in `text` after `marker`.
fn block_after(text: &str, marker: &str, lang: &str) -> String {
    let start = text.find(marker).unwrap_or_else(|| panic!("docs/policies.md has {marker:?}"));
    let fence = format!("```{lang}\n");
    let rest = &text[start..];
    let open = rest.find(&fence).unwrap_or_else(|| panic!("a ```{lang} block follows {marker:?}")) + fence.len();
    rest[open..].split("\n```").next().unwrap_or("").to_string()
}

#[test]
fn the_policy_check_example_of_the_readme_prints_what_the_readme_says() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/policies.md")).expect("docs/policies.md");
    let policy = block_after(&text, "<!-- policy example:", "json");
    let command = block_after(&text, "<!-- policy check example:", "sh");
    let expected = block_after(&text, "<!-- policy check example:", "text");
    let dir = fresh_dir("policy-check-readme");
    let policy = write(&dir, "policy.json", &policy);
    // The chapter's command from the workspace root, with the policy in place
    // of `policy.json` and the binaries under test.
    let command = command
        .replace("policy.json", policy.to_str().unwrap())
        .replace("./target/debug/code-mode ", &format!("{} ", code_mode().display()))
        .replace("./target/debug/code-mode-test-server", test_server().to_str().unwrap());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("bash").arg("-c").arg(&command).current_dir(root).stdin(Stdio::null()).output().unwrap();
    let lines = lines_of(&out);
    for line in expected.lines() {
        assert!(lines.iter().any(|l| l == line), "{line:?} is printed: {lines:#?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rule_with_approvers_names_them_and_who_else_may_decide() {
    let dir = fresh_dir("policy-check-approvers");
    let policy = write(
        &dir,
        "policy.json",
        r#"{"version": "1", "default": "allow", "tools": {
            "sleep": {"action": "approve", "approvers": ["alice", "group:security"]},
            "count": {"action": "approve", "approvers": ["group:ops"], "ask_client": true, "self_approve": true,
                      "limits": [{"counter": "counts", "window": "hour", "max": 3}]},
            "echo": {"action": "approve"}}}"#,
    );
    let log = log_path("policy-check-approvers");
    let lines = lines_of(&check_file(&policy, &log, &[]));
    for expected in [
        "sleep: needs approval by alice, group:security — /tools/sleep",
        "count: needs approval by group:ops (or the client; their own calls too) [3 per hour, counter counts] — /tools/count",
        "echo: needs approval — /tools/echo",
    ] {
        assert!(lines.iter().any(|l| l == expected), "{expected:?} is printed: {lines:#?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
