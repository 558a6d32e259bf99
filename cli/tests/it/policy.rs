//! A policy end to end (`code-mode run --policy FILE`): the real binary, the
//! real sandbox and the real test server; the bridge refuses what the policy
//! denies and counts the limited calls, and the code sees each refusal as a
//! `ToolError`.

use crate::support::{self, log_path, logged_calls, run};

/// The seed policy: only `add`, at most 2 calls a minute per session.
const SEED: &str = r#"{"version":"1","default":"deny","tools":{"add":{"limits":[{"counter":"add_rate","window":"minute","max":2,"scope":"grant"}]}}}"#;

const CODE: &str = "\
for _ in range(3):
    try:
        print(await add({'a': 2, 'b': 3}))
    except ToolError as e:
        print('refused:', e)
try:
    print(await echo({'text': 'hi'}))
except ToolError as e:
    print('refused:', e)
";

#[test]
fn a_policy_file_limits_add_to_two_calls_and_denies_echo_by_default() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("policy").with_extension("json");
    std::fs::write(&policy, SEED).expect("the policy is written");
    let log = log_path("policy-calls");
    let ran = run(&["--policy", policy.to_str().unwrap()], CODE, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[..2], ["{\"sum\":5}", "{\"sum\":5}"], "{stdout}");
    assert!(
        lines[2].starts_with("refused: add: rate limit add_rate: at most 2 calls per minute; try again in "),
        "{stdout}"
    );
    assert!(lines[3].starts_with("refused: echo: denied by policy (/default): "), "{stdout}");
    assert_eq!(logged_calls(&log).len(), 2, "only the two admitted calls reached the server");
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
}
