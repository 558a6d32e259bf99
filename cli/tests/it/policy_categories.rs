//! Category rules end to end: the test server annotates `add` and `echo` as
//! read-only and `count` as additive, and leaves its other tools
//! unannotated (destructive and open-world by the MCP defaults). A policy
//! of category rules alone decides every tool through the real bridge and
//! sandbox.

use crate::support::{self, log_path, logged_calls, run};

const POLICY: &str = r#"{"version": "1", "default": "deny", "categories": {
    "read_only": {"action": "allow"},
    "additive": {"limits": [{"counter": "writes", "window": "minute", "max": 1}]},
    "destructive": {"action": "deny", "reason": "no destructive tools here"}}}"#;

const CODE: &str = "\
print(sorted(TOOLS))
print(await add({'a': 1, 'b': 2}), await echo({'text': 'hi'}))
for _ in range(2):
    try:
        print(await count({}))
    except ToolError as e:
        print('refused:', e)
";

#[test]
fn category_rules_from_the_servers_annotations_offer_read_only_tools_limit_additive_ones_and_withhold_destructive_ones()
{
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("categories-policy").with_extension("json");
    std::fs::write(&policy, POLICY).expect("the policy is written");
    let log = log_path("categories-calls");
    let ran = run(&["--policy", policy.to_str().unwrap()], CODE, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "['add', 'count', 'echo']", "destructive tools are not offered: {stdout}");
    assert_eq!(lines[1], "{\"sum\":3} hi", "{stdout}");
    assert_eq!(lines[2], "3", "the additive count went through: {stdout}");
    assert!(
        lines[3].starts_with("refused: count: rate limit writes: at most 1 calls per minute; try again in "),
        "{stdout}"
    );
    assert_eq!(logged_calls(&log).len(), 3, "add, echo and one count reached the server");
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
}
