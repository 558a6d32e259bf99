//! A policy end to end (`code-mode run --policy FILE`): the real binary, the
//! real sandbox and the real test server; the bridge refuses what the policy
//! denies and counts the limited calls, and the code sees each refusal as a
//! `ToolError`. Windows roll over (a window of a few seconds, not a minute);
//! over a real nats-server a `grant` limit counts each client session (one
//! frontend process) and a `global` one all of them, and the counters live in
//! JetStream: bridge replicas share them and a restarted bridge keeps them.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_mode_core::testing::{NatsServer, NatsUsers, TempDir};
use serde_json::Value;
use tokio::time::Instant;

use crate::support::{self, Client, connect_client, log_path, logged_calls, run, run_python, spawn_service, stdout_of};

/// The seed policy: only `add`, at most 2 calls a minute per session.
const SEED: &str = r#"{"version":"1","default":"deny","tools":{"add":{"limits":[{"counter":"add_rate","window":"minute","max":2,"scope":"grant"}]}}}"#;

const CODE: &str = "\
for _ in range(3):
    try:
        print(await add({'a': 2, 'b': 3}))
    except ToolError as e:
        print('refused:', e)
print(sorted(TOOLS))
";

#[test]
fn a_policy_file_limits_add_to_two_calls_and_does_not_offer_the_tools_it_denies_by_default() {
    if !support::sandbox_available() {
        return;
    }
    inside_one_window(60, 10);
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
    assert_eq!(lines[3], "['add']", "the tools the policy denies are not offered: {stdout}");
    assert_eq!(logged_calls(&log).len(), 2, "only the two admitted calls reached the server");
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn calling_a_tool_the_policy_denies_raises_its_rule_and_reason_though_nothing_lists_it() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("policy-withheld").with_extension("json");
    std::fs::write(
        &policy,
        r#"{"version":"1","default":"deny","tools":{"add":{},"echo":{"action":"deny","reason":"echo leaks text"}}}"#,
    )
    .expect("the policy is written");
    let log = log_path("policy-withheld-calls");
    let code = "\
for tool in (echo, sleep):
    try:
        await tool(text='hi')
    except ToolError as e:
        print('refused:', e)
print(sorted(TOOLS), search_tools('echo'), search_tools('sleep'))
";
    let ran = run(&["--policy", policy.to_str().unwrap()], code, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "refused: echo: denied by policy (/tools/echo): echo leaks text", "{stdout}");
    assert_eq!(
        lines[1],
        "refused: sleep: denied by policy (/default): the policy denies every tool it does not name (default deny)",
        "{stdout}"
    );
    assert_eq!(lines[2], "['add'] {} {}", "TOOLS and search_tools still list only what is offered: {stdout}");
    assert!(logged_calls(&log).is_empty(), "no denied call reached the server");
    let _ = std::fs::remove_file(&policy);
}

/// Wait, if need be, until at least `need` seconds are left of the current
/// window of `window` seconds, so that a test's calls all fall in one window.
/// (A window is fixed: it starts at a multiple of its length since the epoch.)
pub fn inside_one_window(window: u64, need: u64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is past 1970");
    let left = Duration::from_secs(window).saturating_sub(Duration::from_secs(now.as_secs() % window))
        - Duration::from_nanos(u64::from(now.subsec_nanos()));
    if left < Duration::from_secs(need) {
        std::thread::sleep(left + Duration::from_millis(100));
    }
}

/// `add` at most 2 calls per 3-second window.
const ROLL_OVER: &str = r#"{"version":"1","default":"deny","tools":{"add":{"limits":[{"counter":"add_rate","window":3,"max":2,"scope":"grant"}]}}}"#;

/// Three calls in one window, then a call after it has ended, in one cell.
const ROLL_OVER_CODE: &str = "\
import asyncio, time
# Start just inside a fresh window, so that the three calls share it.
await asyncio.sleep(3 - time.time() % 3 + 0.1)
for _ in range(3):
    try:
        print(await add({'a': 2, 'b': 3}))
    except ToolError as e:
        print('refused:', e)
# The refusal came inside the window: 3 s on, the next one has begun.
await asyncio.sleep(3)
print(await add({'a': 1, 'b': 1}))
";

/// A deny with a reason (offered with `--offer-denied`), an argument schema
/// and a counter shared by two tools.
const RULES: &str = r#"{"version": "1", "default": "allow", "tools": {
    "get_env": {"action": "deny", "reason": "the server's environment is off limits"},
    "echo": {"args": {"properties": {"text": {"enum": ["hi", "bye"]}}},
             "limits": [{"counter": "chatter", "window": "hour", "max": 3}]},
    "add": {"limits": [{"counter": "chatter", "window": "hour", "max": 3}]}}}"#;

const RULES_CODE: &str = "\
async def attempt(call):
    try:
        print(await call)
    except ToolError as e:
        print('refused:', e)
await attempt(get_env({'name': 'HOME'}))
await attempt(echo({'text': 'rm -rf /'}))
await attempt(echo({'text': 'hi'}))
await attempt(add({'a': 1, 'b': 1}))
await attempt(echo({'text': 'bye'}))
await attempt(add({'a': 2, 'b': 2}))
";

#[test]
fn a_denied_tool_refuses_with_its_reason_an_args_schema_refuses_other_arguments_and_two_tools_share_a_counter() {
    if !support::sandbox_available() {
        return;
    }
    inside_one_window(3600, 30);
    let policy = log_path("policy-rules").with_extension("json");
    std::fs::write(&policy, RULES).expect("the policy is written");
    let log = log_path("policy-rules-calls");
    let ran =
        run(&["--policy", policy.to_str().unwrap(), "--offer-denied"], RULES_CODE, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{stdout}");
    assert_eq!(lines[0], "refused: get_env: denied by policy (/tools/get_env): the server's environment is off limits");
    assert!(lines[1].starts_with("refused: echo: the policy's argument rule refuses them at /text: "), "{stdout}");
    assert!(lines[1].ends_with("(/tools/echo/args)"), "{stdout}");
    assert_eq!(lines[2..5], ["hi", "{\"sum\":2}", "bye"], "{stdout}");
    assert!(
        lines[5].starts_with("refused: add: rate limit chatter: at most 3 calls per hour; try again in "),
        "echo and add share the counter: {stdout}"
    );
    assert_eq!(logged_calls(&log).len(), 3, "only the three admitted calls reached the server");
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_policy_with_a_bad_window_stops_run_naming_the_file_the_json_path_and_the_reason() {
    // `run` checks Docker first, then starts the bridge, which reads the policy.
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("policy-bad").with_extension("json");
    std::fs::write(
        &policy,
        r#"{"version": "1", "tools": {"add": {"limits": [{"counter": "c", "window": "fortnight", "max": 1}]}}}"#,
    )
    .expect("the policy is written");
    let output = support::command(&["--policy", policy.to_str().unwrap()], "print(1)", &[]).output().expect("it runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(policy.to_str().unwrap()), "the file is named: {stderr}");
    assert!(stderr.contains("/tools/add/limits/0/window"), "the JSON path is named: {stderr}");
    assert!(stderr.contains("fortnight"), "the bad value is named: {stderr}");
    let _ = std::fs::remove_file(&policy);
}

#[test]
fn a_limit_refuses_the_third_call_of_a_window_and_admits_calls_again_once_the_window_rolls_over() {
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("policy-roll-over");
    let policy = dir.0.join("policy.json");
    std::fs::write(&policy, ROLL_OVER).expect("the policy is written");
    let log = dir.0.join("calls.log");
    let ran = run(&["--policy", policy.to_str().unwrap()], ROLL_OVER_CODE, &["--log", log.to_str().unwrap()]);
    let stdout = ran.ok();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[..2], ["{\"sum\":5}", "{\"sum\":5}"], "{stdout}");
    let refused = "refused: add: rate limit add_rate: at most 2 calls per 3 seconds; try again in ";
    let wait = lines[2].strip_prefix(refused).unwrap_or_else(|| panic!("{stdout}"));
    assert!(["1 s", "2 s", "3 s"].contains(&wait), "the wait is what is left of the 3 s window: {stdout}");
    assert_eq!(lines[3], "{\"sum\":2}", "the next window admits calls again: {stdout}");
    assert_eq!(logged_calls(&log), ["tools/call add"; 3], "the refused call never reached the server");
}

/// `add` 2 calls an hour per client session; `echo` 3 an hour for everyone.
const SCOPES: &str = r#"{"version":"1","default":"allow","tools":{
  "add":{"limits":[{"counter":"add_per_session","window":"hour","max":2,"scope":"grant"}]},
  "echo":{"limits":[{"counter":"echo_for_all","window":"hour","max":3,"scope":"global"}]}}}"#;

/// Three calls of `add`, then two of `echo`; each prints its result or refusal.
const SCOPES_CODE: &str = "\
async def attempt(call):
    try:
        print(await call)
    except ToolError as e:
        print('refused:', e)
for _ in range(3):
    await attempt(add({'a': 2, 'b': 3}))
for _ in range(2):
    await attempt(echo({'text': 'hi'}))
";

/// A frontend (one client session) on the split deployment at `nats`.
async fn frontend(nats: &str, users: &NatsUsers) -> Client {
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("frontend").args(["--nats", nats]);
    cmd.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    connect_client(cmd).await.0
}

/// The `tools/call` lines of `tool` in the test server's log.
pub(crate) fn calls_of(log: &PathBuf, tool: &str) -> usize {
    logged_calls(log).iter().filter(|l| *l == &format!("tools/call {tool}")).count()
}

#[tokio::test]
async fn over_nats_a_grant_limit_counts_each_client_session_and_a_global_limit_counts_them_all() {
    if !support::sandbox_available() {
        return;
    }
    inside_one_window(3600, 60);
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let dir = TempDir::new("policy-scopes");
    let policy = dir.0.join("policy.json");
    std::fs::write(&policy, SCOPES).expect("the policy is written");
    let log = dir.0.join("calls.log");
    let _bridge = spawn_service(
        &url,
        &users,
        "bridge",
        &["--policy", policy.to_str().unwrap()],
        Some(&["--log", log.to_str().unwrap()]),
    );
    let _runner = spawn_service(&url, &users, "sandbox-runner", &[], None);
    // Two frontend processes: two client sessions on one bridge.
    let first = frontend(&url, &users).await;
    let second = frontend(&url, &users).await;

    let add_refused = "refused: add: rate limit add_per_session: at most 2 calls per hour; try again in ";
    let echo_refused = "refused: echo: rate limit echo_for_all: at most 3 calls per hour; try again in ";
    let out = stdout_of(&run_python(&first, SCOPES_CODE).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(lines[..2], ["{\"sum\":5}", "{\"sum\":5}"], "{out}");
    assert!(lines[2].starts_with(add_refused), "{out}");
    assert!(!lines[3].starts_with("refused") && !lines[4].starts_with("refused"), "echo: 2 of 3: {out}");

    // The second session has its own `add` count, but shares `echo`'s.
    let out = stdout_of(&run_python(&second, SCOPES_CODE).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(lines[..2], ["{\"sum\":5}", "{\"sum\":5}"], "a session of its own: {out}");
    assert!(lines[2].starts_with(add_refused), "{out}");
    assert!(!lines[3].starts_with("refused"), "echo: the 3rd of 3: {out}");
    assert!(lines[4].starts_with(echo_refused), "echo: the 4th across both sessions: {out}");

    // And the first session is refused both now.
    let out = stdout_of(&run_python(&first, SCOPES_CODE).await);
    assert_eq!(out.lines().filter(|l| l.starts_with(add_refused)).count(), 3, "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with(echo_refused)).count(), 2, "{out}");
    assert_eq!((calls_of(&log, "add"), calls_of(&log, "echo")), (4, 3), "only admitted calls reached the server");
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
}

/// `add` 10 calls an hour across all sessions and every bridge replica;
/// everything else allowed.
const SHARED: &str = r#"{"version":"1","default":"allow","tools":{
  "add":{"limits":[{"counter":"add_rate","window":"hour","max":10,"scope":"global"}]}}}"#;

/// `calls` concurrent calls of `add`: how many went through, then each
/// refusal.
pub(crate) fn gather_add(calls: usize) -> String {
    format!(
        "\
import asyncio
async def attempt(i):
    try:
        await add({{'a': i, 'b': 1}})
        return 'ok'
    except ToolError as e:
        return str(e)
results = await asyncio.gather(*(attempt(i) for i in range({calls})))
print(results.count('ok'))
for r in results:
    if r != 'ok':
        print(r)
"
    )
}

/// A bridge replica with the policy `policy`, logging its server's calls to `log`.
pub(crate) fn replica(
    url: &str,
    users: &NatsUsers,
    policy: &std::path::Path,
    log: &std::path::Path,
) -> tokio::process::Child {
    spawn_service(
        url,
        users,
        "bridge",
        &["--policy", policy.to_str().unwrap()],
        Some(&["--log", log.to_str().unwrap()]),
    )
}

#[tokio::test]
async fn over_nats_bridge_replicas_share_the_rate_limit_counters_and_a_restarted_bridge_keeps_them() {
    if !support::sandbox_available() {
        return;
    }
    inside_one_window(3600, 90);
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let dir = TempDir::new("policy-shared");
    let policy = dir.0.join("policy.json");
    std::fs::write(&policy, SHARED).expect("the policy is written");
    let logs: Vec<PathBuf> = (0..3).map(|i| dir.0.join(format!("replica-{i}.log"))).collect();
    let mut bridges: Vec<_> = logs[..2].iter().map(|log| replica(&url, &users, &policy, log)).collect();
    let _runner = spawn_service(&url, &users, "sandbox-runner", &[], None);
    let client = frontend(&url, &users).await;

    // Unlimited calls until both replicas have served some: both are up.
    let give_up = Instant::now() + Duration::from_secs(60);
    while !logs[..2].iter().all(|log| calls_of(log, "echo") > 0) {
        assert!(Instant::now() < give_up, "both replicas did not serve within 60 s");
        stdout_of(&run_python(&client, "for _ in range(10):\n    await echo({'text': 'hi'})").await);
    }

    let out = stdout_of(&run_python(&client, &gather_add(50)).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"10"), "exactly 10 of 50 went through: {out}");
    assert_eq!(lines.len(), 41, "{out}");
    let refused = "add: rate limit add_rate: at most 10 calls per hour; try again in ";
    assert!(lines[1..].iter().all(|l| l.starts_with(refused)), "{out}");
    let served: Vec<usize> = logs[..2].iter().map(|log| calls_of(log, "add")).collect();
    assert_eq!(served.iter().sum::<usize>(), 10, "the replicas together sent 10 calls to their servers: {served:?}");

    // Both replicas go; a new one reads the count they left in JetStream.
    for bridge in &mut bridges {
        bridge.kill().await.expect("the bridge is killed");
    }
    let _restarted = replica(&url, &users, &policy, &logs[2]);
    let give_up = Instant::now() + Duration::from_secs(30);
    let probe = "try:\n    await echo({'text': 'hi'})\n    print('up')\nexcept ToolError as e:\n    print(e)";
    loop {
        let out = stdout_of(&run_python(&client, probe).await);
        if out == "up\n" {
            break;
        }
        assert!(Instant::now() < give_up, "the new bridge did not serve within 30 s: {out}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let out = stdout_of(
        &run_python(
            &client,
            "try:\n    await add({'a': 1, 'b': 1})\n    print('ok')\nexcept ToolError as e:\n    print(e)",
        )
        .await,
    );
    assert!(out.starts_with(refused) && out.ends_with(" s\n"), "the count outlived the replicas: {out}");
    assert_eq!(calls_of(&logs[2], "add"), 0, "the refused call never reached the server");
    client.cancel().await.unwrap();
}

#[test]
fn audit_stderr_writes_one_record_per_call_to_stderr_and_keeps_stdout_for_the_report() {
    if !support::sandbox_available() {
        return;
    }
    inside_one_window(60, 10);
    let policy = log_path("policy-audit-stderr").with_extension("json");
    std::fs::write(&policy, SEED).expect("the policy is written");
    let ran = run(&["--policy", policy.to_str().unwrap(), "--audit", "stderr"], CODE, &[]);
    ran.ok();
    let decisions: Vec<Value> = ran
        .stderr()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<Value>(l).expect("an audit record is one JSON object"))
        .filter(|r| r["kind"] == "call")
        .collect();
    let words: Vec<&str> = decisions.iter().map(|d| d["decision"].as_str().unwrap()).collect();
    assert_eq!(words, ["allowed", "allowed", "rate_limited"], "{decisions:?}");
    assert!(decisions.iter().all(|d| d["rule"] == "/tools/add" && d["args_bytes"] == 13), "{decisions:?}");
    let _ = std::fs::remove_file(&policy);
}
