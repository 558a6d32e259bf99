//! The per-tool policy as a library: the seed policies load unchanged,
//! verdicts come from the tool rule, the category rules or the default,
//! configuration errors name the file, the JSON path and the reason, and the
//! rate limiter counts exactly in the session-state store (in memory and in
//! JetStream on a real nats-server), per session or globally, across tools
//! sharing a counter, per window of an injected clock, and fails closed when
//! the store is down. `record_args` is a boolean of a tool rule.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use code_mode_bridge::policy::{
    Admission, Annotations, Ask, Category, Limit, LimitRefusal, Policy, PolicyError, RateLimiter, RuleSource, Scope,
    ToolFacts, Verdict, Window,
};
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_core::state::{JetStreamConfig, SessionStore};
use code_mode_core::testing::NatsServer;
use serde_json::json;

use crate::support::unique_path;

/// The policy of the `mcp_run_pytest` seed page, as it stands there.
pub const PYTEST_SEED: &str = r#"{
  "version": "1",
  "default": "deny",
  "tools": {
    "mcp_run_pytest": {
      "limits": [
        {
          "counter": "mcp_run_pytest_rate",
          "window": "minute",
          "max": 10,
          "scope": "grant"
        }
      ]
    }
  }
}"#;

/// The policy of the `run_python_script` registry record, as it stands there.
pub const PYTHON_SCRIPT_SEED: &str = r#"{
  "version": "1",
  "default": "deny",
  "tools": {
    "run_python_script": {
      "limits": [
        {
          "counter": "run_python_script_rate",
          "window": "minute",
          "max": 10,
          "scope": "grant"
        }
      ]
    }
  }
}"#;

/// The policy of the `debugpy_connect` seed page, as it stands there.
pub const DEBUGPY_SEED: &str = r#"{
  "version": "1",
  "default": "deny",
  "tools": {
    "debugpy_connect": {
      "limits": [
        {
          "counter": "debugpy_connect_rate",
          "window": "minute",
          "max": 10,
          "scope": "grant"
        }
      ]
    }
  }
}"#;

const SESSION: &str = "5d0c2a7e-91b4-4f6e-a3c8-0e7b1d2f4a96";
const OTHER_SESSION: &str = "c8e4f1a2-3b5d-4c7e-9f10-2a4b6c8d0e13";

fn tool(name: &str) -> ToolFacts {
    ToolFacts { name: name.to_string(), ..ToolFacts::default() }
}

fn tool_with(name: &str, annotations: Annotations) -> ToolFacts {
    ToolFacts { name: name.to_string(), annotations, ..ToolFacts::default() }
}

fn parse(text: &str, known: &[ToolFacts]) -> Policy {
    Policy::parse(text, "policy.json", known).unwrap_or_else(|e| panic!("the policy parses: {e}"))
}

fn parse_error(text: &str, known: &[ToolFacts]) -> PolicyError {
    Policy::parse(text, "/etc/code-mode/policy.json", known).expect_err("the policy is refused")
}

/// A moment at the very start of a window of `window` seconds.
fn window_start(window: u64) -> SystemTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    UNIX_EPOCH + Duration::from_secs(now - now % window + window)
}

/// A policy limiting `a` (and `b`, sharing the counter) to `max` per
/// `window` seconds in `scope`.
fn limited(max: u64, window: u64, scope: &str) -> Arc<Policy> {
    let limit = json!([{"counter": "shared", "window": window, "max": max, "scope": scope}]);
    let text = json!({"version": "1", "tools": {"a": {"limits": limit}, "b": {"limits": limit}}}).to_string();
    Arc::new(parse(&text, &[tool("a"), tool("b"), tool("free")]))
}

async fn jetstream_store(server: &NatsServer, timeout: Duration) -> SessionStore {
    let transport = NatsTransport::connect(&NatsOptions { url: server.url(), ..Default::default() })
        .await
        .expect("connects to the test nats-server");
    let config = JetStreamConfig { timeout, ..Default::default() };
    SessionStore::over_nats(&transport, config).await.expect("the bucket opens")
}

#[test]
fn the_three_seed_policies_load_unchanged_rate_limit_their_tool_and_deny_every_other() {
    for (text, name, counter) in [
        (PYTEST_SEED, "mcp_run_pytest", "mcp_run_pytest_rate"),
        (PYTHON_SCRIPT_SEED, "run_python_script", "run_python_script_rate"),
        (DEBUGPY_SEED, "debugpy_connect", "debugpy_connect_rate"),
    ] {
        let policy = parse(text, &[tool(name), tool("other_tool")]);
        let verdict = policy.verdict(name);
        let expected = Limit {
            counter: counter.to_string(),
            window: Window::from_secs(60).unwrap(),
            max: 10,
            scope: Scope::Grant,
        };
        assert_eq!(verdict, Verdict::Limited { limits: vec![expected], rule: RuleSource::Tool(name.to_string()) });
        assert_eq!(verdict.label().as_deref(), Some("[10 per minute]"));
        assert_eq!(verdict.rule().to_string(), format!("/tools/{name}"));
        let other = policy.verdict("other_tool");
        assert!(matches!(&other, Verdict::Deny { rule: RuleSource::Default, .. }), "{other:?}");
        assert!(other.label().unwrap().starts_with("[denied: "), "{other:?}");
    }
}

#[test]
fn the_default_decides_every_tool_the_policy_does_not_name() {
    let known = [tool("named"), tool("unnamed")];
    let allow = parse(r#"{"version": "1", "default": "allow", "tools": {"named": {"action": "deny"}}}"#, &known);
    assert_eq!(allow.verdict("unnamed"), Verdict::Allow { rule: RuleSource::Default });
    assert_eq!(allow.verdict("unnamed").label(), None);
    assert!(matches!(allow.verdict("named"), Verdict::Deny { .. }));

    let deny = parse(r#"{"version": "1", "default": "deny", "tools": {"named": {"action": "allow"}}}"#, &known);
    assert!(matches!(deny.verdict("unnamed"), Verdict::Deny { rule: RuleSource::Default, .. }));
    assert_eq!(deny.verdict("named"), Verdict::Allow { rule: RuleSource::Tool("named".into()) });

    let silent = parse(r#"{"version": "1"}"#, &known);
    assert!(matches!(silent.verdict("named"), Verdict::Deny { .. }), "no default means deny");
}

#[test]
fn a_denied_tool_is_refused_with_the_reason_its_rule_gives() {
    let text = r#"{"version": "1", "default": "allow",
        "tools": {"drop_table": {"action": "deny", "reason": "schema changes go through review"}}}"#;
    let policy = parse(text, &[tool("drop_table")]);
    let verdict = policy.verdict("drop_table");
    assert_eq!(
        verdict,
        Verdict::Deny {
            reason: "schema changes go through review".into(),
            rule: RuleSource::Tool("drop_table".into())
        }
    );
    assert_eq!(verdict.label().unwrap(), "[denied: schema changes go through review]");
}

#[test]
fn the_args_schema_refuses_arguments_it_does_not_accept_and_passes_the_rest() {
    let text = r#"{"version": "1", "tools": {"mcp_run_pytest": {
        "args": {"type": "object", "properties": {"path": {"type": "string", "pattern": "^tests/"}},
                 "required": ["path"]},
        "limits": [{"counter": "pytest", "window": "minute", "max": 10}]}}}"#;
    let policy = parse(text, &[tool("mcp_run_pytest"), tool("echo")]);
    policy.check_args("mcp_run_pytest", &json!({"path": "tests/unit"})).expect("a path under tests/ passes");
    let refused = policy.check_args("mcp_run_pytest", &json!({"path": "/etc/passwd"})).unwrap_err();
    assert!(refused.to_string().contains("/path"), "{refused}");
    assert_eq!(refused.keyword, "/properties/path/pattern");
    assert!(!refused.without_values().contains("passwd"), "{}", refused.without_values());
    let missing = policy.check_args("mcp_run_pytest", &json!({})).unwrap_err();
    assert!(missing.to_string().contains("path"), "{missing}");
    policy.check_args("echo", &json!({"anything": 1})).expect("a tool without an args rule is not checked here");
}

#[test]
fn category_rules_follow_the_tools_annotations_and_a_tool_rule_overrides_them() {
    let read_only = Annotations { read_only: Some(true), open_world: Some(false), ..Default::default() };
    let destructive =
        Annotations { read_only: Some(false), destructive: Some(true), open_world: Some(false), ..Default::default() };
    let additive_open =
        Annotations { read_only: Some(false), destructive: Some(false), open_world: Some(true), ..Default::default() };
    let known = [
        tool_with("list_files", read_only),
        tool_with("delete_file", destructive),
        tool_with("wipe_disk", destructive),
        tool_with("post_message", additive_open),
        tool("unannotated"),
    ];
    let text = r#"{"version": "1", "default": "deny",
        "tools": {"wipe_disk": {"action": "deny", "reason": "never"}},
        "categories": {
            "read_only": {"action": "allow"},
            "destructive": {"action": "approve"},
            "open_world": {"limits": [{"counter": "outside", "window": "hour", "max": 5, "scope": "global"}]}}}"#;
    let policy = parse(text, &known);
    assert_eq!(policy.verdict("list_files"), Verdict::Allow { rule: RuleSource::Category(Category::ReadOnly) });
    assert_eq!(
        policy.verdict("delete_file"),
        Verdict::Approve { rule: RuleSource::Category(Category::Destructive), limits: vec![], team: None }
    );
    assert_eq!(policy.verdict("delete_file").label().unwrap(), "[needs approval]");
    assert!(matches!(policy.verdict("wipe_disk"), Verdict::Deny { rule: RuleSource::Tool(_), .. }));
    let post = policy.verdict("post_message");
    assert!(matches!(&post, Verdict::Limited { rule: RuleSource::Category(Category::OpenWorld), .. }), "{post:?}");
    assert_eq!(post.label().unwrap(), "[5 per hour (all sessions)]");
    // No annotations: destructive and open-world by the spec's defaults;
    // approval beats limits.
    assert_eq!(
        policy.verdict("unannotated"),
        Verdict::Approve { rule: RuleSource::Category(Category::Destructive), limits: vec![], team: None }
    );
}

#[test]
fn an_approve_rule_may_carry_limits_which_its_label_shows() {
    let known = [tool("delete_file")];
    let text = r#"{"version": "1", "tools": {"delete_file": {"action": "approve",
        "limits": [{"counter": "deletes", "window": "hour", "max": 3}]}}}"#;
    let verdict = parse(text, &known).verdict("delete_file");
    assert!(matches!(&verdict, Verdict::Approve { limits, .. } if limits.len() == 1), "{verdict:?}");
    assert_eq!(verdict.label().unwrap(), "[needs approval; 3 per hour]");
}

/// The rule that decided, and whether it allowed.
fn decided(admission: Admission) -> (bool, String) {
    match admission {
        Admission::Allow { rule } => (true, rule.to_string()),
        Admission::Deny { rule, .. } => (false, rule.to_string()),
    }
}

#[test]
fn the_most_specific_resource_pattern_decides_an_exact_uri_beats_every_pattern_and_of_two_as_long_deny_wins() {
    let policy = parse(
        r#"{"version": "1", "default": "deny", "resources": {
            "file:///srv/*": {"action": "allow"},
            "file:///srv/secret/*": {"action": "deny", "reason": "secrets stay home"},
            "file:///srv/secret/public.txt": {},
            "test://a*": {"action": "allow"},
            "test://*b": {"action": "deny"}
        }}"#,
        &[],
    );
    assert_eq!(decided(policy.resource("file:///srv/notes.txt")), (true, "/resources/file:~1~1~1srv~1*".into()));
    match policy.resource("file:///srv/secret/key.pem") {
        Admission::Deny { reason, rule } => {
            assert_eq!(reason, "secrets stay home");
            assert_eq!(rule.to_string(), "/resources/file:~1~1~1srv~1secret~1*");
        }
        other => panic!("the longer pattern denies: {other:?}"),
    }
    assert!(decided(policy.resource("file:///srv/secret/public.txt")).0, "the exact URI beats the patterns");
    assert!(!decided(policy.resource("test://ab")).0, "two patterns as long: the denying one wins");
    assert_eq!(decided(policy.resource("file:///etc/passwd")), (false, "/default".into()));
    assert!(!decided(policy.resource("file:///srv")).0, "a pattern matches the whole URI, not a prefix of it");
}

#[test]
fn prompts_and_each_question_follow_their_rule_and_what_no_rule_names_follows_the_default() {
    let deny = parse(
        r#"{"version": "1", "default": "deny", "prompts": {"simple_prompt": {}},
            "sampling": {"action": "allow"}, "elicitation": {"action": "deny", "reason": "no forms"}}"#,
        &[],
    );
    assert_eq!(decided(deny.prompt("simple_prompt")), (true, "/prompts/simple_prompt".into()));
    assert_eq!(decided(deny.prompt("other")), (false, "/default".into()));
    assert_eq!(decided(deny.ask(Ask::Sampling)), (true, "/sampling".into()));
    match deny.ask(Ask::Elicitation) {
        Admission::Deny { reason, .. } => assert_eq!(reason, "no forms"),
        other => panic!("{other:?}"),
    }
    match deny.ask(Ask::Roots) {
        Admission::Deny { reason, .. } => assert!(reason.contains("every roots it does not name"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let allow = parse(r#"{"version": "1", "default": "allow", "prompts": {"p": {"action": "deny"}}}"#, &[]);
    assert!(decided(allow.ask(Ask::Roots)).0 && decided(allow.resource("x://y")).0 && decided(allow.prompt("q")).0);
    assert!(!decided(allow.prompt("p")).0);
}

#[test]
fn each_configuration_error_names_the_file_the_json_path_and_the_reason() {
    let known = [tool("mcp_run_pytest")];
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"limits": [{"counter": "c", "window": "fortnight", "max": 1}]}}}"#,
            "/tools/mcp_run_pytest/limits/0/window",
            "\"fortnight\" is not a window",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"limits": [{"counter": "c", "window": 0, "max": 1}]}}}"#,
            "/tools/mcp_run_pytest/limits/0/window",
            "at least 1",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"limits": [{"counter": "c", "window": "minute", "max": 1, "per": "x"}]}}}"#,
            "/tools/mcp_run_pytest/limits/0/per",
            "unknown key \"per\"",
        ),
        (r#"{"version": "1", "defualt": "deny"}"#, "/defualt", "unknown key \"defualt\""),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"approvers": ["alice"]}}}"#,
            "/tools/mcp_run_pytest/approvers",
            "approvers go with \"action\": \"approve\"",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"action": "approve", "approvers": ["alice", "group:"]}}}"#,
            "/tools/mcp_run_pytest/approvers/1",
            "\"group:\" is neither a name nor \"group:NAME\"",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"action": "approve", "approvers": []}}}"#,
            "/tools/mcp_run_pytest/approvers",
            "name 1 to 32 approvers",
        ),
        (
            r#"{"version": "1", "categories": {"destructive": {"action": "approve", "self_approve": true}}}"#,
            "/categories/destructive/self_approve",
            "goes with \"approvers\"",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"action": "approve", "approvers": ["a"], "ask_client": "yes"}}}"#,
            "/tools/mcp_run_pytest/ask_client",
            "expected true or false",
        ),
        (r#"{"version": "1", "categories": {"scary": {"action": "deny"}}}"#, "/categories/scary", "unknown key"),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytset": {"action": "allow"}}}"#,
            "/tools/mcp_run_pytset",
            "the servers have no tool \"mcp_run_pytset\" (they have: mcp_run_pytest)",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"args": {"type": "no-such-type"}}}}"#,
            "/tools/mcp_run_pytest/args",
            "the argument schema does not compile",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"action": "maybe"}}}"#,
            "/tools/mcp_run_pytest/action",
            "\"maybe\"",
        ),
        (r#"{"version": "2"}"#, "/version", "not supported"),
        (r#"{"version": "1", "default": "approve"}"#, "/default", "is not \"allow\" or \"deny\""),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"action": "deny", "limits": [{"counter": "c", "window": 1, "max": 1}]}}}"#,
            "/tools/mcp_run_pytest/limits",
            "never called",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"limits": [{"counter": "a.b", "window": 1, "max": 1}]}}}"#,
            "/tools/mcp_run_pytest/limits/0/counter",
            "not a counter name",
        ),
        (
            r#"{"version": "1", "tools": {"mcp_run_pytest": {"limits": [{"counter": "c", "window": 1, "max": 0}]}}}"#,
            "/tools/mcp_run_pytest/limits/0/max",
            "at least 1",
        ),
        (
            r#"{"version": "1", "resources": {"file:///*": {"action": "approve"}}}"#,
            "/resources/file:~1~1~1*/action",
            "only tools take approvals and limits",
        ),
        (r#"{"version": "1", "resources": {"": {}}}"#, "/resources/", "a URI pattern must have 1 to"),
        (r#"{"version": "1", "resources": ["file:///*"]}"#, "/resources", "expected an object"),
        (r#"{"version": "1", "prompts": {"p": {"limits": []}}}"#, "/prompts/p/limits", "unknown key \"limits\""),
        (r#"{"version": "1", "sampling": {"action": "allow", "reason": ""}}"#, "/sampling/reason", "a reason must"),
        (r#"{"version": "1", "elicitation": "deny"}"#, "/elicitation", "expected an object"),
    ];
    for (text, path, reason) in cases {
        let error = parse_error(text, &known);
        let message = error.to_string();
        assert!(message.starts_with(&format!("/etc/code-mode/policy.json: {path}: ")), "{path}: {message}");
        assert!(message.contains(reason), "{path}: {message}");
    }
    let broken = parse_error("{\"version\": \"1\",\n \"tools\": {", &known);
    assert!(matches!(broken, PolicyError::Syntax { line: 2, .. }), "{broken:?}");
    assert!(broken.to_string().starts_with("/etc/code-mode/policy.json: line 2, column "), "{broken}");

    let missing = Policy::load(&unique_path("no-such-policy"), &known).unwrap_err();
    assert!(matches!(missing, PolicyError::Read { .. }), "{missing:?}");
}

/// Run `tasks` concurrent admissions of tool `a` in one session; how many passed.
async fn concurrent_admits(limiter: &RateLimiter, tasks: usize, now: SystemTime) -> usize {
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.admit(SESSION, "a", now).await })
        })
        .collect();
    passed_of(handles).await
}

/// How many of the admissions `handles` passed; any refusal other than a
/// full limit of 10 fails the test.
async fn passed_of(handles: Vec<tokio::task::JoinHandle<Result<(), LimitRefusal>>>) -> usize {
    let mut passed = 0;
    for handle in handles {
        match handle.await.expect("the task ran") {
            Ok(()) => passed += 1,
            Err(LimitRefusal::Exceeded { max: 10, .. }) => {}
            Err(other) => panic!("refused for another reason: {other}"),
        }
    }
    passed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_ten_of_fifty_concurrent_calls_pass_a_limit_of_ten_in_memory() {
    let limiter = RateLimiter::new(limited(10, 3600, "grant"), SessionStore::in_memory());
    assert_eq!(concurrent_admits(&limiter, 50, window_start(3600)).await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_ten_of_fifty_concurrent_calls_pass_a_limit_of_ten_over_jetstream() {
    let Some(server) = NatsServer::start(&[]) else { return };
    let limiter = RateLimiter::new(limited(10, 3600, "grant"), jetstream_store(&server, Duration::from_secs(5)).await);
    assert_eq!(concurrent_admits(&limiter, 50, window_start(3600)).await, 10);
    // A second bridge over the same bucket sees the same full window.
    let replica = RateLimiter::new(limited(10, 3600, "grant"), jetstream_store(&server, Duration::from_secs(5)).await);
    let refusal = replica.admit(SESSION, "a", window_start(3600)).await.unwrap_err();
    assert!(matches!(refusal, LimitRefusal::Exceeded { .. }), "{refusal:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_limit_lets_exactly_ten_of_fifty_concurrent_calls_from_two_sessions_of_one_identity_through_over_jetstream()
 {
    let Some(server) = NatsServer::start(&[]) else { return };
    // Two bridges (replicas) over one bucket, each with one of the
    // identity's two sessions.
    let first = RateLimiter::new(limited(10, 3600, "identity"), jetstream_store(&server, Duration::from_secs(5)).await);
    let second =
        RateLimiter::new(limited(10, 3600, "identity"), jetstream_store(&server, Duration::from_secs(5)).await);
    let now = window_start(3600);
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let (limiter, session) =
                if i % 2 == 0 { (first.clone(), SESSION) } else { (second.clone(), OTHER_SESSION) };
            tokio::spawn(async move { limiter.admit_as(session, Some("alice"), "a", now).await })
        })
        .collect();
    assert_eq!(passed_of(handles).await, 10, "alice's two sessions share one count");
    // Another identity, and alice in a new session, are counted apart and
    // together respectively.
    first.admit_as("a-third-session", Some("bob"), "a", now).await.expect("bob has his own count");
    let refusal = second.admit_as("a-third-session", Some("alice"), "a", now).await.unwrap_err();
    assert!(matches!(refusal, LimitRefusal::Exceeded { max: 10, .. }), "{refusal:?}");
}

#[tokio::test]
async fn without_authentication_an_identity_limit_counts_every_caller_as_one() {
    let now = window_start(60);
    let limiter = RateLimiter::new(limited(2, 60, "identity"), SessionStore::in_memory());
    limiter.admit(SESSION, "a", now).await.unwrap();
    limiter.admit(OTHER_SESSION, "a", now).await.unwrap();
    limiter.admit("a-third-session", "a", now).await.expect_err("anonymous callers share one count");
    limiter.admit_as(SESSION, Some("carol"), "a", now).await.expect("an authenticated identity has its own");
}

#[tokio::test]
async fn a_grant_limit_counts_each_session_apart_and_a_global_limit_counts_them_together() {
    let now = window_start(60);
    let per_session = RateLimiter::new(limited(2, 60, "grant"), SessionStore::in_memory());
    for session in [SESSION, OTHER_SESSION] {
        per_session.admit(session, "a", now).await.unwrap();
        per_session.admit(session, "a", now).await.unwrap();
        per_session.admit(session, "a", now).await.expect_err("the third call of a session is over");
    }

    let global = RateLimiter::new(limited(2, 60, "global"), SessionStore::in_memory());
    global.admit(SESSION, "a", now).await.unwrap();
    global.admit(OTHER_SESSION, "a", now).await.unwrap();
    for session in [SESSION, OTHER_SESSION, "_global"] {
        global.admit(session, "a", now).await.expect_err("the window is full for everyone");
    }
}

#[tokio::test]
async fn two_tools_naming_one_counter_share_its_count() {
    let now = window_start(60);
    let limiter = RateLimiter::new(limited(3, 60, "grant"), SessionStore::in_memory());
    limiter.admit(SESSION, "a", now).await.unwrap();
    limiter.admit(SESSION, "b", now).await.unwrap();
    limiter.admit(SESSION, "a", now).await.unwrap();
    let refusal = limiter.admit(SESSION, "b", now).await.unwrap_err();
    assert!(matches!(&refusal, LimitRefusal::Exceeded { counter, max: 3, .. } if counter == "shared"), "{refusal:?}");
    limiter.admit(SESSION, "free", now).await.expect("a tool without limits is not counted");
}

#[tokio::test]
async fn a_full_window_refuses_until_the_injected_clock_reaches_the_next_one() {
    let limiter = RateLimiter::new(limited(2, 1, "grant"), SessionStore::in_memory());
    let start = window_start(1);
    limiter.admit(SESSION, "a", start).await.unwrap();
    limiter.admit(SESSION, "a", start + Duration::from_millis(400)).await.unwrap();
    let refusal = limiter.admit(SESSION, "a", start + Duration::from_millis(900)).await.unwrap_err();
    assert_eq!(
        refusal,
        LimitRefusal::Exceeded {
            counter: "shared".into(),
            max: 2,
            window: Window::from_secs(1).unwrap(),
            retry_after: Duration::from_millis(100),
        }
    );
    let next = start + Duration::from_secs(1);
    limiter.admit(SESSION, "a", next).await.expect("a new window has room");
    limiter.admit(SESSION, "a", next).await.unwrap();
    limiter.admit(SESSION, "a", next).await.expect_err("and fills up again");

    // A one-minute window rolls the same way.
    let minute = RateLimiter::new(limited(1, 60, "global"), SessionStore::in_memory());
    let t = window_start(60);
    minute.admit(SESSION, "a", t + Duration::from_secs(59)).await.unwrap();
    let LimitRefusal::Exceeded { retry_after, .. } =
        minute.admit(SESSION, "a", t + Duration::from_secs(59)).await.unwrap_err()
    else {
        panic!("refused for the limit")
    };
    assert_eq!(retry_after, Duration::from_secs(1));
    minute.admit(SESSION, "a", t + Duration::from_secs(60)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_nats_server_is_down_every_limited_call_is_refused_fail_closed() {
    let Some(mut server) = NatsServer::start(&[]) else { return };
    let limiter = RateLimiter::new(limited(100, 60, "grant"), jetstream_store(&server, Duration::from_secs(1)).await);
    let now = window_start(60);
    limiter.admit(SESSION, "a", now).await.expect("admitted while the store is up");
    server.stop();
    for tool in ["a", "b"] {
        let refusal = limiter.admit(SESSION, tool, now).await.unwrap_err();
        assert_eq!(refusal, LimitRefusal::State { counter: "shared".into(), what: "unavailable" });
        assert!(refusal.to_string().contains("(fail closed)"), "{refusal}");
    }
    limiter.admit(SESSION, "free", now).await.expect("a tool without limits never touches the store");
}

#[tokio::test]
async fn a_corrupt_counter_in_the_store_refuses_the_call() {
    let store = SessionStore::in_memory();
    store.create(SESSION, "rate.shared", &json!({"start": "yesterday"})).await.unwrap();
    let limiter = RateLimiter::new(limited(5, 60, "grant"), store);
    let refusal = limiter.admit(SESSION, "a", window_start(60)).await.unwrap_err();
    assert_eq!(refusal, LimitRefusal::State { counter: "shared".into(), what: "invalid" });
}

#[test]
fn record_args_is_a_boolean_of_a_tool_rule_only() {
    let known = [tool("mcp_run_pytest"), tool("other_tool")];
    let text = r#"{"version": "1", "tools": {"mcp_run_pytest": {"record_args": true,
        "args": {"properties": {"path": {"pattern": "^tests/"}}}}}}"#;
    let policy = parse(text, &known);
    assert!(policy.records_args("mcp_run_pytest") && policy.has_args_rule("mcp_run_pytest"));
    assert!(!policy.records_args("other_tool") && !policy.has_args_rule("other_tool"));
    let e = Policy::parse(r#"{"version": "1", "tools": {"mcp_run_pytest": {"record_args": "yes"}}}"#, "p.json", &known)
        .unwrap_err();
    assert!(matches!(&e, PolicyError::Invalid { path, .. } if path == "/tools/mcp_run_pytest/record_args"), "{e}");
    let e =
        Policy::parse(r#"{"version": "1", "categories": {"destructive": {"record_args": true}}}"#, "p.json", &known)
            .unwrap_err();
    assert!(matches!(&e, PolicyError::UnknownKey { key, .. } if key == "record_args"), "{e}");
}
