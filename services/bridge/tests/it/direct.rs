//! Direct calls (`--expose-tools`): a client's call of a wrapped tool goes
//! through the very checks of a call from code ([`Bridge::call_direct`]
//! and [`Bridge::call`] share one path); only the budget counted and the
//! result's shape differ.

use code_mode_proto::{CatalogRequest, DirectCall, DirectReply, ToolReply};
use serde_json::{Value, json};

use crate::support::{Harness, Setup, refused, tool_call};

/// A direct call of session `it`, its `index`-th, under `max` direct calls.
fn direct(tool: &str, arguments: Value, index: u32, max: Option<u32>) -> DirectCall {
    DirectCall {
        session: "it".into(),
        asker: None,
        identity: None,
        call_id: format!("direct-{index}"),
        call_index: index,
        max_calls: max,
        target: code_mode_proto::Target::Tool(tool.into()),
        arguments,
        link: None,
        retry: None,
    }
}

fn refusal(reply: DirectReply) -> String {
    match reply {
        DirectReply::Refused { message, .. } => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_direct_call_gets_the_servers_result_whole_where_code_gets_a_string() {
    let h = Harness::with_args(&[]).await;
    let DirectReply::Ok { result } = h.bridge.call_direct(&direct("add", json!({"a": 2, "b": 3}), 1, None)).await
    else {
        panic!("add answers")
    };
    assert_eq!(result["structuredContent"], json!({"sum": 5}), "{result}");
    assert_eq!(result["content"][0]["type"], "text", "its content blocks too: {result}");
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        h.bridge.call(&tool_call("add", json!({"a": 2, "b": 3}), 1)).await,
        ToolReply::Ok { value: r#"{"sum":5}"#.into() }
    );
    h.close().await;
}

#[tokio::test]
async fn every_refusal_of_a_direct_call_is_the_message_a_call_from_code_gets() {
    let h = Setup::server(&[])
        .allow(&["add", "echo", "fail", "huge"])
        .policy(r#"{"version":"1","default":"allow","tools":{"echo":{"action":"deny","reason":"no echo"}}}"#)
        .start()
        .await
        .expect("starts");
    for (tool, arguments) in [
        ("echo", json!({"text": "hi"})),
        ("sleep", json!({"seconds": 0})),
        ("nope", json!({})),
        ("add", json!({"a": "x", "b": 1})),
        ("add", json!([1, 2])),
        ("add", json!({"a": 1, "b": 2, "pad": "x".repeat(20_000)})),
        ("fail", json!({"message": "disk full"})),
        ("huge", json!({"bytes": 70_000})),
    ] {
        let from_code = refused(h.bridge.call(&tool_call(tool, arguments.clone(), 1)).await);
        let direct = refusal(h.bridge.call_direct(&direct(tool, arguments, 1, None)).await);
        assert_eq!(direct, from_code, "{tool}");
    }
    assert_eq!(h.calls_seen(), ["fail", "fail", "huge", "huge"], "only calls past every check went out");
    h.close().await;
}

#[tokio::test]
async fn direct_calls_count_against_the_sessions_direct_budget_not_a_runs() {
    let h = Harness::with_args(&[]).await;
    let past = refusal(h.bridge.call_direct(&direct("add", json!({"a": 1, "b": 1}), 3, Some(2))).await);
    assert_eq!(past, "add: this session has used all of its 2 direct tool calls (--max-direct-calls)");
    // Without a limit, a direct call is not held to the run's budget of 200.
    let unlimited = h.bridge.call_direct(&direct("add", json!({"a": 1, "b": 1}), 5_000, None)).await;
    assert!(matches!(unlimited, DirectReply::Ok { .. }), "{unlimited:?}");
    let code = refused(h.bridge.call(&tool_call("add", json!({"a": 1, "b": 1}), 201)).await);
    assert_eq!(code, "add: this run has used all of its 200 tool calls");
    assert_eq!(h.calls_seen(), ["add"]);
    h.close().await;
}

#[tokio::test]
async fn the_catalog_carries_each_tools_definition_with_its_labels_only_when_asked() {
    let h = Setup::server(&[])
        .allow(&["add", "echo"])
        .private(&["echo"])
        .policy(r#"{"version":"1","default":"allow","tools":{"add":{"action":"approve"}}}"#)
        .start()
        .await
        .expect("starts");
    let ask = |direct| CatalogRequest { session: "it".into(), known: None, direct };
    let plain = h.bridge.catalog_reply(&ask(false));
    assert!(plain.tools.iter().all(|t| t.direct.is_none()), "not asked for: not sent");
    let full = h.bridge.catalog_reply(&ask(true));
    assert_ne!(full.fingerprint, plain.fingerprint);
    let add = full.tools.iter().find(|t| t.name == "add").unwrap().direct.clone().expect("add's definition");
    assert_eq!(add.description, "[needs approval] Add two integers.");
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    assert_eq!(add.output_schema.unwrap()["required"], json!(["sum"]));
    assert_eq!(add.annotations.unwrap()["readOnlyHint"], true);
    let echo = full.tools.iter().find(|t| t.name == "echo").unwrap().direct.clone().unwrap();
    assert!(echo.description.starts_with("[private] Echo text back."), "{}", echo.description);
    h.close().await;
}

#[tokio::test]
async fn a_null_for_an_optional_parameter_that_refuses_null_is_left_out_from_code_and_direct_alike() {
    let h = Harness::with_args(&[]).await;
    // `mode` (an enum of strings) and `ids` (an array) are optional;
    // `first name` is required. `awkward_params` answers with the arguments
    // that reached it.
    let given = json!({"first name": "x", "mode": null, "ids": null});
    assert_eq!(
        h.bridge.call(&tool_call("awkward_params", given.clone(), 1)).await,
        ToolReply::Ok { value: r#"{"first name":"x"}"#.into() }
    );
    let DirectReply::Ok { result } = h.bridge.call_direct(&direct("awkward_params", given, 1, None)).await else {
        panic!("awkward_params answers")
    };
    assert_eq!(result["content"][0]["text"], r#"{"first name":"x"}"#, "{result}");
    // A required parameter's null is not "not given": refused, never sent.
    let message = refusal(h.bridge.call_direct(&direct("awkward_params", json!({"first name": null}), 2, None)).await);
    assert!(message.starts_with("awkward_params: arguments do not match the schema: at /first name"), "{message}");
    assert_eq!(h.calls_seen(), ["awkward_params", "awkward_params"]);
    h.close().await;
}
