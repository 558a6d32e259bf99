//! The policy applied by the bridge against the real test server: denied
//! and unnamed tools are refused before they reach the server, the policy's
//! argument schema and rate limits refuse calls, a refused call does not
//! taint, a policy naming a tool the server lacks stops startup, and the
//! verdicts show as labels in the stubs.

use code_mode_bridge::BridgeError;
use code_mode_proto::ToolCall;
use serde_json::json;

use crate::support::{Setup, ok, refused};

const SUM: &str = r#"{"sum":5}"#;

#[tokio::test]
async fn default_deny_refuses_a_tool_the_policy_does_not_name_and_it_never_reaches_the_server() {
    let h = Setup::default()
        .policy(r#"{"version": "1", "default": "deny", "tools": {"add": {}}}"#)
        .start()
        .await
        .expect("the bridge starts");
    let message = refused(h.call("echo", json!({"text": "hi"})).await);
    assert!(message.starts_with("echo: denied by policy (/default): "), "{message}");
    assert!(message.contains("default deny"), "{message}");
    assert_eq!(ok(h.call("add", json!({"a": 2, "b": 3})).await), SUM);
    assert_eq!(h.calls_seen(), ["add"], "the denied echo never reached the server");
    h.close().await;
}

#[tokio::test]
async fn a_tool_denied_with_a_reason_is_refused_quoting_the_rule_and_the_reason() {
    let h = Setup::default()
        .policy(
            r#"{"version": "1", "default": "allow",
                "tools": {"echo": {"action": "deny", "reason": "echo leaks text"}}}"#,
        )
        .start()
        .await
        .expect("the bridge starts");
    let message = refused(h.call("echo", json!({"text": "hi"})).await);
    assert_eq!(message, "echo: denied by policy (/tools/echo): echo leaks text");
    assert_eq!(ok(h.call("add", json!({"a": 2, "b": 3})).await), SUM, "default allow lets add through");
    assert_eq!(h.calls_seen(), ["add"]);
    h.close().await;
}

#[tokio::test]
async fn a_tool_needing_approval_is_refused_when_the_bridge_has_no_client_session_to_ask() {
    let h = Setup::default()
        .policy(r#"{"version": "1", "default": "allow", "tools": {"add": {"action": "approve"}}}"#)
        .start()
        .await
        .expect("the bridge starts");
    let message = refused(h.call("add", json!({"a": 2, "b": 3})).await);
    assert_eq!(
        message,
        "add: needs approval (/tools/add): nobody could be asked: this bridge is not connected to any client session"
    );
    assert!(h.calls_seen().is_empty(), "{:?}", h.calls_seen());
    h.close().await;
}

#[tokio::test]
async fn arguments_the_policy_schema_refuses_are_refused_naming_the_rule_and_never_sent() {
    let h = Setup::default()
        .policy(
            r#"{"version": "1", "default": "deny",
                "tools": {"add": {"args": {"properties": {"a": {"maximum": 10}}}}}}"#,
        )
        .start()
        .await
        .expect("the bridge starts");
    let message = refused(h.call("add", json!({"a": 11, "b": 3})).await);
    assert!(message.starts_with("add: the policy's argument rule refuses them at /a"), "{message}");
    assert!(message.ends_with("(/tools/add/args)"), "{message}");
    assert_eq!(ok(h.call("add", json!({"a": 2, "b": 3})).await), SUM);
    assert_eq!(h.calls_seen(), ["add"], "only the accepted call reached the server");
    h.close().await;
}

#[tokio::test]
async fn a_limit_of_three_per_minute_lets_exactly_three_of_ten_concurrent_calls_through() {
    let h = Setup::default()
        .policy(
            r#"{"version": "1", "default": "deny",
                "tools": {"add": {"limits": [{"counter": "add_rate", "window": 60, "max": 3}]}}}"#,
        )
        .start()
        .await
        .expect("the bridge starts");
    let calls = (1..=10u32).map(|i| {
        let bridge = h.bridge.clone();
        async move {
            let call = ToolCall {
                session: "it".into(),
                asker: None,
                identity: None,
                cell_id: "cell-1".into(),
                call_index: i,
                target: code_mode_proto::Target::Tool("add".into()),
                arguments: json!({"a": 2, "b": 3}),
                link: None,
                file_in: false,
            };
            bridge.call(&call).await
        }
    });
    let replies = futures::future::join_all(calls).await;
    let (passed, refusals): (Vec<_>, Vec<_>) =
        replies.into_iter().partition(|r| matches!(r, code_mode_proto::ToolReply::Ok { .. }));
    assert_eq!(passed.len(), 3, "exactly three pass: {refusals:?}");
    for r in refusals {
        let message = refused(r);
        assert!(message.starts_with("add: rate limit add_rate: at most 3 calls per "), "{message}");
        assert!(message.contains("try again in "), "{message}");
    }
    assert_eq!(h.calls_seen().len(), 3, "the refused calls never reached the server");
    h.close().await;
}

#[tokio::test]
async fn a_call_the_policy_refuses_does_not_taint_the_session() {
    let h = Setup::default()
        .private(&["echo"])
        .policy(
            r#"{"version": "1", "default": "allow",
                "tools": {"echo": {"args": {"properties": {"text": {"maxLength": 3}}}}}}"#,
        )
        .start()
        .await
        .expect("the bridge starts");
    let message = refused(h.call("echo", json!({"text": "too long"})).await);
    assert!(message.contains("(/tools/echo/args)"), "{message}");
    assert_eq!(
        ok(h.call("add", json!({"a": 2, "b": 3})).await),
        SUM,
        "the refused private call did not taint the session"
    );
    assert_eq!(ok(h.call("echo", json!({"text": "hi"})).await), "hi");
    let message = refused(h.call("add", json!({"a": 2, "b": 3})).await);
    assert!(message.contains("private-data rule"), "the allowed private call taints: {message}");
    assert_eq!(h.calls_seen(), ["add", "echo"]);
    h.close().await;
}

#[tokio::test]
async fn a_policy_naming_a_tool_the_server_does_not_have_stops_startup_naming_it() {
    let err = Setup::default()
        .policy(r#"{"version": "1", "tools": {"no_such_tool": {}}}"#)
        .start()
        .await
        .expect_err("the policy stops startup");
    assert!(matches!(err, BridgeError::Policy { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("no_such_tool") && message.contains("/tools/no_such_tool"), "{message}");
    assert!(message.contains("policy.json"), "the error names the file: {message}");
    // One server from flags: the message starts with the policy file, not a
    // server named after the command's basename.
    assert!(!message.contains("server \""), "{message}");
    assert!(message.starts_with('/') && message.split(':').next().unwrap().contains("policy.json"), "{message}");
}

#[tokio::test]
async fn the_verdicts_show_as_labels_in_the_stubs_and_summaries() {
    let h = Setup::default()
        .policy(
            r#"{"version": "1", "default": "deny",
                "tools": {"add": {"limits": [{"counter": "add_rate", "window": "minute", "max": 2}]},
                          "sleep": {"action": "approve"}, "count": {}}}"#,
        )
        .start()
        .await
        .expect("the bridge starts");
    let catalog = h.bridge.catalog();
    let tool = |name: &str| catalog.get(name).unwrap_or_else(|| panic!("{name} is in the catalog"));
    assert!(tool("add").stub.contains("[2 per minute]"), "{}", tool("add").stub);
    assert!(tool("add").summary.contains(" -> {sum: int} [2 per minute]  "), "{}", tool("add").summary);
    assert!(tool("sleep").stub.contains("[needs approval]"), "{}", tool("sleep").stub);
    assert!(catalog.get("echo").is_none(), "a tool the policy denies outright is not offered");
    assert!(!tool("count").stub.contains('['), "a plain allow has no label: {}", tool("count").stub);
    // Not offered, yet a call naming it is refused with its rule, not as unknown.
    let message = refused(h.call("echo", json!({"text": "hi"})).await);
    assert!(message.starts_with("echo: denied by policy (/default): "), "{message}");
    assert!(h.calls_seen().is_empty(), "{:?}", h.calls_seen());
    h.close().await;
}

#[tokio::test]
async fn with_offer_denied_a_denied_tool_stays_in_the_catalog_labelled_with_its_reason() {
    let mut setup = Setup::default().policy(
        r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "deny", "reason": "echo leaks text"}}}"#,
    );
    setup.policy_options.offer_denied = true;
    let h = setup.start().await.expect("the bridge starts");
    let catalog = h.bridge.catalog();
    let echo = catalog.get("echo").expect("echo is offered");
    assert!(echo.stub.contains("[denied: echo leaks text]"), "{}", echo.stub);
    let message = refused(h.call("echo", json!({"text": "hi"})).await);
    assert_eq!(message, "echo: denied by policy (/tools/echo): echo leaks text");
    h.close().await;
}

#[tokio::test]
async fn each_policy_decision_is_one_call_record_with_the_arguments_size_and_hash_but_never_the_arguments() {
    let audit_path = crate::support::unique_path("audit.jsonl");
    let sink = crate::audit::file_sink(&audit_path).await;
    let mut setup = Setup::default().policy(
        r#"{"version": "1", "default": "deny",
            "tools": {"add": {"limits": [{"counter": "adds", "window": "minute", "max": 1}]},
                      "echo": {"args": {"properties": {"text": {"maxLength": 5}}}},
                      "sleep": {"action": "approve"}}}"#,
    );
    setup.policy_options.audit = Some(sink);
    let h = setup.start().await.expect("the bridge starts");
    let metrics = code_mode_telemetry::metrics();
    let before =
        |decision: &str| metrics.policy_decisions.with_label_values(&["test", "add", decision, "/tools/add"]).get();
    let by_default = || metrics.policy_decisions.with_label_values(&["test", "count", "denied", "/default"]).get();
    let unasked = || metrics.approvals.with_label_values(&["unavailable"]).get();
    let (allowed_before, limited_before, default_before, unasked_before) =
        (before("allowed"), before("rate_limited"), by_default(), unasked());
    ok(h.call("add", json!({"a": 2, "b": 3})).await);
    refused(h.call("add", json!({"a": 2, "b": 3})).await);
    ok(h.call("echo", json!({"text": "top"})).await);
    refused(h.call("echo", json!({"text": "secret-payload"})).await);
    refused(h.call("sleep", json!({"seconds": 0})).await);
    refused(h.call("count", json!({})).await);
    h.close().await;
    let text = std::fs::read_to_string(&audit_path).expect("the audit log is written");
    assert!(!text.contains("secret-payload"), "the arguments never reach the audit log:\n{text}");
    let lines: Vec<serde_json::Value> = crate::audit::records(&audit_path, "call");
    let seen: Vec<(&str, &str, &str, &str)> = lines
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap();
            (s("tool"), s("decision"), s("policy"), s("rule"))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("add", "allowed", "allowed", "/tools/add"),
            ("add", "rate_limited", "rate_limited", "/tools/add"),
            ("echo", "allowed", "allowed", "/tools/echo"),
            ("echo", "refused", "refused", "/tools/echo"),
            ("sleep", "not_approved", "not_approved", "/tools/sleep"),
            ("count", "denied", "denied", "/default"),
        ]
    );
    let add = &lines[0];
    assert_eq!(add["server"], "test");
    assert_eq!(add["args_bytes"], r#"{"a":2,"b":3}"#.len());
    assert_eq!(add["args_sha256"].as_str().unwrap().len(), 64);
    assert!(add.get("args").is_none(), "no values without record_args: {add}");
    assert_eq!((add["result"].as_str(), add["result_bytes"].as_u64()), (Some("ok"), Some(r#"{"sum":5}"#.len() as u64)));
    assert!(add["session"] == "it" && add["decided"].as_str().unwrap().ends_with('Z'), "{add}");
    assert_eq!(lines[1]["result"], serde_json::Value::Null, "a refused call has no result");
    assert!(lines[1]["reason"].as_str().unwrap().contains("at most 1 calls per minute"), "{}", lines[1]);
    assert!(
        lines[3]["reason"].as_str().unwrap().contains("at /text (args schema /properties/text/maxLength)"),
        "{}",
        lines[3]
    );
    assert!(lines[4]["reason"].as_str().unwrap().contains("nobody could be asked"), "{}", lines[4]);
    assert_eq!(before("allowed"), allowed_before + 1, "the metric counts each decision");
    assert_eq!(before("rate_limited"), limited_before + 1);
    assert_eq!(by_default(), default_before + 1, "a refusal is counted under the rule that decided it");
    assert!(unasked() > unasked_before, "the approval nobody could answer is counted as unavailable");
}

#[tokio::test]
async fn a_config_entry_policy_is_a_path_relative_to_the_config_file_and_is_applied() {
    let dir = crate::support::unique_path("config-dir");
    std::fs::create_dir_all(dir.join("policies")).expect("the folder is made");
    std::fs::write(dir.join("policies/test.json"), r#"{"version": "1", "default": "deny", "tools": {"add": {}}}"#)
        .expect("the policy is written");
    let log = crate::support::unique_path("requests");
    let config = json!({"mcpServers": {"test": {
        "command": crate::support::test_server(),
        "args": ["--log", log.display().to_string()],
        "policy": "policies/test.json"
    }}});
    let file = dir.join("servers.json");
    std::fs::write(&file, config.to_string()).expect("the config is written");
    let servers = code_mode_bridge::config::load(&file).expect("the config loads");
    assert_eq!(servers[0].policy, Some(code_mode_bridge::PolicySource::File(dir.join("policies/test.json"))));
    let config = code_mode_bridge::BridgeConfig {
        servers,
        prefixed: true,
        limits: Default::default(),
        catalog: Default::default(),
        state: code_mode_core::state::SessionStore::in_memory(),
        policy_options: Default::default(),
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let (bridge, closer) = code_mode_bridge::Bridge::start(config, cancel.clone()).await.expect("it starts");
    let call = |tool: &str, arguments| crate::support::tool_call(tool, arguments, 1);
    assert_eq!(ok(bridge.call(&call("test__add", json!({"a": 2, "b": 3}))).await), SUM);
    let message = refused(bridge.call(&call("test__echo", json!({"text": "hi"}))).await);
    assert!(message.starts_with("test__echo: denied by policy (/default): "), "{message}");
    assert_eq!(crate::support::calls_in_log(&log), ["add"]);
    cancel.cancel();
    closer.closed().await;
}

#[test]
fn a_config_entry_policy_that_is_neither_a_path_nor_an_object_is_refused_naming_the_key() {
    let err = code_mode_bridge::config::parse(
        std::path::Path::new("/etc/servers.json"),
        r#"{"mcpServers": {"test": {"command": "x", "policy": 7}}}"#,
        |_| None,
    )
    .expect_err("a number is not a policy");
    let message = err.to_string();
    assert!(message.contains("\"policy\"") && message.contains("or a policy object"), "{message}");
}
