//! Calls the bridge refuses before they reach the server: not kept, unknown,
//! bad arguments, over budget. Each test proves the refusal never reached
//! the server by its request log (with one call that did, so the log is
//! known to work).

use code_mode_bridge::CallLimits;
use serde_json::json;

use crate::support::{Harness, Setup, ok, refused, tool_call};

#[tokio::test]
async fn a_tool_not_on_the_allowlist_is_refused_as_such_and_never_reaches_the_server() {
    let h = Setup::server(&[]).allow(&["add"]).start().await.expect("starts");
    let message = refused(h.call("echo", json!({"text": "hi"})).await);
    assert_eq!(message, "echo: this tool is not on the allowlist");
    let message = refused(h.call("get_weather", json!({})).await);
    assert_eq!(message, "get_weather: this tool is not on the allowlist");
    assert_eq!(ok(h.call("add", json!({"a": 1, "b": 1})).await), r#"{"sum":2}"#);
    assert_eq!(h.calls_seen(), ["add"]);
    h.close().await;
}

#[tokio::test]
async fn an_unknown_tool_name_is_refused_and_never_reaches_the_server() {
    let h = Harness::with_args(&[]).await;
    let message = refused(h.call("no_such_tool", json!({})).await);
    assert_eq!(message, "there is no tool named \"no_such_tool\"; TOOLS lists the tools");
    // The listed name of a renamed tool is not a Python name.
    let message = refused(h.call("get-weather", json!({})).await);
    assert!(message.starts_with("there is no tool named \"get-weather\""), "{message}");
    assert_eq!(ok(h.call("get_weather", json!({})).await), "ok get-weather");
    assert_eq!(h.calls_seen(), ["get-weather"]);
    h.close().await;
}

#[tokio::test]
async fn arguments_of_the_wrong_type_are_refused_naming_the_place() {
    let h = Harness::with_args(&[]).await;
    let message = refused(h.call("add", json!({"a": "one", "b": 2})).await);
    assert!(message.starts_with("add: arguments do not match the schema: at /a: "), "{message}");
    let message = refused(h.call("awkward_params", json!({"first name": "x", "ids": [1, "two"]})).await);
    assert!(message.contains("at /ids/1"), "{message}");
    let message = refused(h.call("add", json!({"a": 1})).await);
    assert!(message.contains("at top level") && message.contains("\"b\""), "{message}");
    assert_eq!(ok(h.call("add", json!({"a": 2, "b": 3})).await), r#"{"sum":5}"#);
    assert_eq!(h.calls_seen(), ["add"]);
    h.close().await;
}

#[tokio::test]
async fn an_argument_the_schema_does_not_name_is_refused() {
    let h = Harness::with_args(&[]).await;
    let message = refused(h.call("add", json!({"a": 1, "b": 2, "c": 3})).await);
    assert_eq!(message, "add: the schema does not name \"c\"; it takes \"a\", \"b\"");
    // A schema that says `additionalProperties: false` refuses through the validator.
    let message = refused(h.call("awkward_params", json!({"first name": "x", "extra": 1})).await);
    assert!(message.starts_with("awkward_params: arguments do not match the schema"), "{message}");
    assert!(message.contains("extra"), "{message}");
    assert!(message.contains("; it takes \"class\", \"first name\", \"ids\""), "what it takes instead: {message}");
    assert_eq!(h.calls_seen(), Vec::<String>::new());
    h.close().await;
}

#[tokio::test]
async fn a_schema_that_allows_extra_properties_accepts_them() {
    let h = Harness::with_args(&[]).await;
    let value = ok(h.call("open_schema", json!({"a": "x", "z": [1, 2], "y": {"k": true}})).await);
    let echoed: serde_json::Value = serde_json::from_str(&value).expect("JSON");
    assert_eq!(echoed, json!({"a": "x", "z": [1, 2], "y": {"k": true}}));
    // The named property is still checked.
    let message = refused(h.call("open_schema", json!({"a": 1})).await);
    assert!(message.contains("at /a"), "{message}");
    assert_eq!(h.calls_seen(), ["open_schema"]);
    h.close().await;
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_refused() {
    let h = Harness::with_args(&[]).await;
    for (arguments, what) in [
        (json!(null), "null"),
        (json!([1, 2]), "an array"),
        (json!("a"), "a string"),
        (json!(3), "a number"),
        (json!(true), "a boolean"),
    ] {
        let message = refused(h.call("count", arguments).await);
        assert_eq!(message, format!("count: arguments must be a JSON object, got {what}"));
    }
    assert_eq!(h.calls_seen(), Vec::<String>::new());
    assert_eq!(ok(h.call("count", json!({})).await), "1", "the refused calls never counted");
    h.close().await;
}

#[tokio::test]
async fn arguments_over_16_kib_are_refused_and_just_under_pass() {
    let h = Harness::with_args(&[]).await;
    // {"text":"..."} is 11 bytes of JSON around the text.
    let message = refused(h.call("echo", json!({"text": "x".repeat(16 * 1024 - 10)})).await);
    assert_eq!(message, "echo: arguments are 16385 bytes of JSON, over the 16384 byte limit");
    let value = ok(h.call("echo", json!({"text": "x".repeat(16 * 1024 - 11)})).await);
    assert_eq!(value.len(), 16 * 1024 - 11);
    assert_eq!(h.calls_seen(), ["echo"]);
    h.close().await;
}

#[tokio::test]
async fn a_call_beyond_the_run_budget_is_refused() {
    let limits = CallLimits { max_calls: 3, ..Setup::default().limits };
    let h = Setup { limits, ..Setup::default() }.start().await.expect("starts");
    assert_eq!(h.bridge.catalog_message().max_calls, 3);
    let last = h.bridge.call(&tool_call("count", json!({}), 3)).await;
    assert_eq!(ok(last), "1");
    let over = h.bridge.call(&tool_call("count", json!({}), 4)).await;
    assert_eq!(refused(over), "count: this run has used all of its 3 tool calls");
    let far_over = h.bridge.call(&tool_call("count", json!({}), u32::MAX)).await;
    assert_eq!(refused(far_over), "count: this run has used all of its 3 tool calls");
    assert_eq!(h.calls_seen(), ["count"]);
    h.close().await;
}

#[tokio::test]
async fn call_index_zero_is_refused() {
    let h = Harness::with_args(&[]).await;
    let message = refused(h.bridge.call(&tool_call("count", json!({}), 0)).await);
    assert!(message.starts_with("count: "), "{message}");
    assert!(message.contains("call_index 0"), "{message}");
    assert_eq!(h.calls_seen(), Vec::<String>::new());
    h.close().await;
}
