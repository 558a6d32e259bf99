//! The wrapped tools offered directly (`--expose-tools`): real MCP clients
//! (the official Python SDK, rmcp's) list and call them as ordinary tools
//! through `code-mode serve` and through the three services over a real
//! nats-server, and every direct call meets the bridge's checks, sharing
//! the session's policy counters and taint with calls from code. With
//! `--expose-tools=only` no Docker engine is needed, so several tests run
//! with none reachable at all (`DOCKER_HOST` names a socket that does not
//! exist).

use std::time::Duration;

use code_mode_core::testing::NatsServer;
use code_mode_core::testing::peers::npm_bin;
use rmcp::ClientHandler;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{NotificationContext, Peer, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::approval::{Answer, Person};
use crate::policy::inside_one_window;
use crate::support::{
    self, Deployment, connect_client, connect_client_with, log_path, logged_calls, python_sdk, run_python,
    spawn_service, start, stdout_of,
};

/// A socket no Docker engine listens on.
const NO_DOCKER: &str = "unix:///nonexistent/code-mode-test/docker.sock";

/// `code-mode serve --expose-tools=only [args] -- <test server> [server_args]`
/// with no Docker engine reachable.
fn gateway(args: &[&str], server_args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(support::code_mode());
    command.arg("serve").arg("--expose-tools=only").args(args).arg("--").arg(support::test_server()).args(server_args);
    command.env("DOCKER_HOST", NO_DOCKER);
    command
}

/// Call `tool` directly with `arguments`; the call itself must answer.
async fn call(peer: &Peer<RoleClient>, tool: &str, arguments: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = Some(arguments.as_object().expect("arguments are an object").clone());
    peer.call_tool(params).await.unwrap_or_else(|e| panic!("{tool} answers: {e}"))
}

/// The text of a result's first text block.
fn text(result: &CallToolResult) -> String {
    result.content.iter().find_map(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default()
}

/// A refusal: an error result holding one text block.
fn refusal(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "an error result: {result:?}");
    assert_eq!(result.content.len(), 1, "{result:?}");
    text(result)
}

#[tokio::test]
async fn with_expose_tools_only_serve_lists_and_calls_the_wrapped_tools_with_no_docker_engine_reachable() {
    let log = log_path("direct-only");
    let (client, _pid) = connect_client(gateway(&[], &["--log", log.to_str().unwrap()])).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list answers");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(!names.contains(&"run_python"), "nothing runs code: {names:?}");
    assert!(names.contains(&"add") && names.contains(&"echo"), "{names:?}");
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(add.description.as_deref(), Some("Add two integers."));
    assert_eq!(add.input_schema["required"], json!(["a", "b"]), "the server's own input schema");
    assert_eq!(add.output_schema.as_ref().unwrap()["properties"]["sum"]["type"], "integer", "its output schema");
    let hints = add.annotations.as_ref().expect("its annotations");
    assert_eq!((hints.read_only_hint, hints.open_world_hint), (Some(true), Some(false)));

    let sum = call(client.peer(), "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum.is_error, Some(false), "{sum:?}");
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})), "the structured content as the server sent it");
    let asked_for_code = call(client.peer(), "run_python", json!({"code": "print(1)"})).await;
    assert_eq!(refusal(&asked_for_code), "there is no tool named \"run_python\"; tools/list lists the tools");
    assert_eq!(logged_calls(&log).len(), 1, "only the add call reached the server");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn the_python_sdk_lists_and_calls_a_wrapped_tool_directly_through_serve_over_stdio_and_http() {
    let Some(config) = test_server_config("direct-sdk", None) else { return };
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "test__add", "arguments": {"a": 20, "b": 22}},
        {"op": "call", "tool": "test__add", "arguments": {"a": "twenty", "b": 22}},
    ]);
    let code_mode = support::code_mode();
    let code_mode = code_mode.to_str().unwrap();
    let config_arg = config.to_str().unwrap();
    // Over stdio, the SDK starting serve itself (no Docker engine needed).
    let stdio = ["--stdio", code_mode, "serve", "--expose-tools=only", "--config", config_arg, "--"];
    let Some((over_stdio, stderr)) = python_sdk(&stdio, &steps).await else { return };
    check_sdk_steps(&over_stdio, &stderr, false);
    // Over streamable HTTP.
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--config", config_arg]);
    serve.env("DOCKER_HOST", NO_DOCKER).kill_on_drop(true);
    let (_child, url, _log) = crate::http::spawn_http(&mut serve).await;
    let Some((over_http, stderr)) = python_sdk(&["--url", &url], &steps).await else { return };
    check_sdk_steps(&over_http, &stderr, false);
    let _ = std::fs::remove_file(&config);
}

/// A `--config` file wrapping the test server as `test` (with `policy`).
fn test_server_config(tag: &str, policy: Option<Value>) -> Option<std::path::PathBuf> {
    let config = log_path(tag).with_extension("json");
    let mut entry = json!({"command": support::test_server()});
    if let Some(policy) = policy {
        entry["policy"] = policy;
    }
    std::fs::write(&config, json!({"mcpServers": {"test": entry}}).to_string()).expect("the config is written");
    Some(config)
}

/// The three steps: `test__add` listed with its schemas (and `run_python`
/// beside it when `with_code`), a sum in structured content, and the
/// schema refusal as an error result.
fn check_sdk_steps(results: &[Value], stderr: &str, with_code: bool) {
    assert_eq!(results.len(), 3, "{results:?} {stderr}");
    let tools = results[0]["result"]["tools"].as_array().unwrap_or_else(|| panic!("{results:?} {stderr}"));
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.contains(&"run_python"), with_code, "{names:?}");
    // One server wrapped: its own names, not prefixed.
    let add = tools.iter().find(|t| t["name"] == "add").unwrap_or_else(|| panic!("{names:?}"));
    assert_eq!(add["inputSchema"]["properties"]["a"]["type"], "integer", "{add}");
    assert_eq!(add["outputSchema"]["required"], json!(["sum"]), "{add}");
    assert_eq!(add["annotations"]["readOnlyHint"], true, "{add}");
    let sum = &results[1]["result"];
    assert_eq!(sum["structuredContent"], json!({"sum": 42}), "{results:?}");
    assert_eq!(sum["isError"], false, "{sum}");
    let refused = &results[2]["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    let message = refused["content"][0]["text"].as_str().unwrap();
    assert!(message.starts_with("test__add: "), "the bridge's schema refusal: {message}");
}

#[tokio::test]
async fn the_python_sdk_calls_a_wrapped_tool_directly_and_from_code_through_the_three_services_over_nats() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let _bridge = spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    let _runner = spawn_service(&nats.url(), &users, "sandbox-runner", &["--warm", "0"], None);
    let line = support::frontend_stdio(&nats.url(), &users, &["--expose-tools"]);
    let stdio: Vec<&str> = line.iter().map(String::as_str).collect();
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "add", "arguments": {"a": 20, "b": 22}},
        {"op": "call", "tool": "run_python", "arguments": {"code": "print(await add({'a': 1, 'b': 2}))"}},
    ]);
    let Some((results, stderr)) = python_sdk(&stdio, &steps).await else { return };
    assert_eq!(results.len(), 3, "{results:?} {stderr}");
    let tools = results[0]["result"]["tools"].as_array().unwrap_or_else(|| panic!("{results:?} {stderr}"));
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"run_python") && names.contains(&"add"), "{names:?}");
    assert_eq!(results[1]["result"]["structuredContent"], json!({"sum": 42}), "{results:?}");
    assert_eq!(results[2]["result"]["structuredContent"]["stdout"], "{\"sum\":3}\n", "{results:?}");
}

/// `add` allowed 10 times an hour per session; everything else allowed.
const TEN_ADDS: &str = r#"{"version":"1","default":"allow","tools":{"add":{"limits":[{"counter":"adds","window":3600,"max":10,"scope":"grant"}]}}}"#;

/// Seven calls to `add` from one cell, each printed or refused.
const SEVEN_ADDS: &str = "\
for _ in range(7):
    print(await add({'a': 1, 'b': 1}))
try:
    await add({'a': 1, 'b': 1})
except ToolError as e:
    print('refused:', e)
";

mod all_in_one {
    #[tokio::test]
    async fn one_policy_counter_limits_direct_calls_and_calls_from_code_together() {
        super::one_policy_counter_limits_direct_calls_and_calls_from_code_together(super::Deployment::AllInOne).await
    }
}

mod over_nats {
    #[tokio::test]
    async fn one_policy_counter_limits_direct_calls_and_calls_from_code_together() {
        super::one_policy_counter_limits_direct_calls_and_calls_from_code_together(super::Deployment::OverNats).await
    }
}

async fn one_policy_counter_limits_direct_calls_and_calls_from_code_together(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    inside_one_window(3600, 120);
    let policy = log_path("direct-counter").with_extension("json");
    std::fs::write(&policy, TEN_ADDS).unwrap();
    let log = log_path("direct-counter-calls");
    let args = ["--policy", policy.to_str().unwrap(), "--expose-tools=beside"];
    let (client, _pid, _guards) = start(deployment, &args, &["--log", log.to_str().unwrap()]).await;
    for _ in 0..3 {
        let sum = call(client.peer(), "add", json!({"a": 1, "b": 1})).await;
        assert_eq!(sum.structured_content, Some(json!({"sum": 2})), "{sum:?}");
    }
    let out = stdout_of(&run_python(&client, SEVEN_ADDS).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..7], ["{\"sum\":2}"; 7], "the cell's seven fit beside the three direct calls: {out}");
    let limit = "add: rate limit adds: at most 10 calls per hour; try again in ";
    assert!(lines[7].starts_with(&format!("refused: {limit}")), "the eleventh, from code: {out}");
    let eleventh = refusal(&call(client.peer(), "add", json!({"a": 1, "b": 1})).await);
    assert!(eleventh.starts_with(limit), "the twelfth, direct, with the message code gets: {eleventh}");
    assert_eq!(logged_calls(&log).len(), 10, "exactly the ten admitted calls reached the server");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
}

const TRY_ADD: &str = "try:\n    print(await add({'a': 2, 'b': 3}))\nexcept ToolError as e:\n    print('refused:', e)";
const TRY_ECHO: &str = "print(await echo({'text': 'secret'}))";

#[tokio::test]
async fn a_private_call_made_directly_refuses_a_later_call_from_code_and_the_reverse() {
    if !support::sandbox_available() {
        return;
    }
    let args = ["--private", "echo", "--expose-tools"];
    // Direct first: the session's taint reaches its cells.
    let (client, _pid, _guards) = start(Deployment::AllInOne, &args, &[]).await;
    let echoed = call(client.peer(), "echo", json!({"text": "secret"})).await;
    assert_eq!(text(&echoed), "secret", "{echoed:?}");
    let from_code = stdout_of(&run_python(&client, TRY_ADD).await);
    let code_refusal = from_code.strip_prefix("refused: ").unwrap_or_else(|| panic!("tainted: {from_code}"));
    assert!(code_refusal.starts_with("add: refused by the private-data rule: "), "{from_code}");
    // The same session's direct call gets the very message the code got.
    let direct = refusal(&call(client.peer(), "add", json!({"a": 2, "b": 3})).await);
    assert_eq!(direct, code_refusal.trim_end(), "direct and code refusals are one message");
    client.cancel().await.ok();

    // Code first, in a new session: its direct calls are tainted too.
    let (client, _pid, _guards) = start(Deployment::AllInOne, &args, &[]).await;
    let clean = call(client.peer(), "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(clean.structured_content, Some(json!({"sum": 5})), "a new session starts clean");
    assert_eq!(stdout_of(&run_python(&client, TRY_ECHO).await), "secret\n");
    let direct = refusal(&call(client.peer(), "add", json!({"a": 2, "b": 3})).await);
    assert_eq!(direct, code_refusal.trim_end(), "the code's private call taints the direct call");
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_refusal_to_a_direct_call_is_an_error_result_holding_the_message_code_gets() {
    if !support::sandbox_available() {
        return;
    }
    let policy = log_path("direct-same-text").with_extension("json");
    std::fs::write(
        &policy,
        r#"{"version":"1","default":"allow","tools":{"echo":{"action":"deny","reason":"echo leaks text"}}}"#,
    )
    .unwrap();
    let log = log_path("direct-same-text-calls");
    let args = ["--policy", policy.to_str().unwrap(), "--expose-tools"];
    let (client, _pid, _guards) = start(Deployment::AllInOne, &args, &["--log", log.to_str().unwrap()]).await;
    let tools: Vec<String> = client.peer().list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(!tools.contains(&"echo".to_string()), "a tool the policy denies is not offered: {tools:?}");
    let cases = [
        ("echo", json!({"text": "hi"})),
        ("add", json!({"a": "two", "b": 3})),
        ("fail", json!({"message": "the disk is full"})),
        ("huge", json!({"bytes": 70000})),
        ("protocol_error", json!({})),
    ];
    for (tool, arguments) in cases {
        let direct = refusal(&call(client.peer(), tool, arguments.clone()).await);
        let cell = format!(
            "import json\ntry:\n    await {tool}(json.loads({:?}))\nexcept ToolError as e:\n    print(e, end='')",
            arguments.to_string()
        );
        let from_code = stdout_of(&run_python(&client, &cell).await);
        assert_eq!(direct, from_code, "{tool} {arguments}: the direct refusal is the code's");
    }
    // A name the tool does not take: the bridge refuses the direct call
    // saying what it takes; the sandbox refuses the code's before it is
    // sent, naming the closest parameter and the types too.
    let direct = refusal(&call(client.peer(), "add", json!({"a": 2, "bb": 3})).await);
    assert_eq!(direct, "add: the schema does not name \"bb\"; it takes \"a\", \"b\"");
    let cell = "try:\n    await add(a=2, bb=3)\nexcept ToolError as e:\n    print(e, end='')";
    assert_eq!(
        stdout_of(&run_python(&client, cell).await),
        "add: it takes no parameter 'bb' (did you mean b?); missing required parameter b: int. It takes: a: int, b: int"
    );
    let reached: Vec<String> = logged_calls(&log);
    assert!(reached.iter().all(|c| !c.ends_with(" echo") && !c.ends_with(" add")), "{reached:?}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_direct_call_needing_approval_asks_the_client_and_goes_out_only_when_accepted() {
    let policy = log_path("direct-approval").with_extension("json");
    std::fs::write(&policy, r#"{"version":"1","default":"allow","tools":{"echo":{"action":"approve"}}}"#).unwrap();
    for (answer, went_out) in [(Answer::Accept, true), (Answer::Decline, false)] {
        let log = log_path("direct-approval-calls");
        let audit = log_path("direct-approval-audit");
        let person = Person::new(answer);
        let args = ["--policy", policy.to_str().unwrap(), "--audit", audit.to_str().unwrap()];
        let command = gateway(&args, &["--log", log.to_str().unwrap()]);
        let (client, _pid) = connect_client_with(command, person.clone()).await;
        let tools = client.peer().list_all_tools().await.unwrap();
        let echo = tools.iter().find(|t| t.name == "echo").expect("echo is offered");
        assert!(echo.description.as_deref().unwrap().starts_with("[needs approval] "), "{echo:?}");
        let result = call(client.peer(), "echo", json!({"text": "launch-code-4711"})).await;
        let asked = person.asked();
        assert_eq!(asked.len(), 1, "one question: {asked:?}");
        assert!(asked[0].contains("echo") && asked[0].contains("launch-code-4711"), "{asked:?}");
        if went_out {
            assert_eq!(text(&result), "launch-code-4711", "{result:?}");
        } else {
            let why = refusal(&result);
            assert!(why.starts_with("echo: needs approval (/tools/echo): "), "{why}");
        }
        assert_eq!(logged_calls(&log).len(), usize::from(went_out), "{answer:?}");
        client.cancel().await.ok();
        // The decision is one `call` record, as a call from code is.
        let records: Vec<Value> = std::fs::read_to_string(&audit)
            .expect("the audit file is written")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &Value| r["kind"] == "call")
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decision"], if went_out { "approved" } else { "not_approved" }, "{records:?}");
        assert_eq!(records[0]["rule"], "/tools/echo");
        assert!(records[0]["cell"].as_str().unwrap().starts_with("direct-"), "{records:?}");
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&audit);
    }
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn max_direct_calls_refuses_a_sessions_direct_calls_past_it_and_each_session_counts_its_own() {
    let log = log_path("direct-budget");
    for _session in 0..2 {
        let command = gateway(&["--max-direct-calls", "2"], &["--log", log.to_str().unwrap()]);
        let (client, _pid) = connect_client(command).await;
        for _ in 0..2 {
            let sum = call(client.peer(), "add", json!({"a": 1, "b": 2})).await;
            assert_eq!(sum.structured_content, Some(json!({"sum": 3})), "{sum:?}");
        }
        let third = refusal(&call(client.peer(), "add", json!({"a": 1, "b": 2})).await);
        assert_eq!(third, "add: this session has used all of its 2 direct tool calls (--max-direct-calls)");
        client.cancel().await.ok();
    }
    assert_eq!(logged_calls(&log).len(), 4, "two per session reached the server");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn direct_calls_are_counted_apart_from_the_budget_of_each_cell() {
    if !support::sandbox_available() {
        return;
    }
    let args = ["--expose-tools", "--max-direct-calls", "1", "--max-calls", "2"];
    let (client, _pid, _guards) = start(Deployment::AllInOne, &args, &[]).await;
    let first = call(client.peer(), "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(first.structured_content, Some(json!({"sum": 3})));
    let code = "print(await add({'a': 1, 'b': 1}))\nprint(await add({'a': 2, 'b': 2}))";
    assert_eq!(stdout_of(&run_python(&client, code).await), "{\"sum\":2}\n{\"sum\":4}\n", "the cell has its two");
    let second = refusal(&call(client.peer(), "add", json!({"a": 1, "b": 2})).await);
    assert!(second.contains("all of its 1 direct tool calls"), "{second}");
    assert_eq!(stdout_of(&run_python(&client, code).await), "{\"sum\":2}\n{\"sum\":4}\n", "and the next cell too");
    client.cancel().await.ok();
}

/// A client handler that records each `notifications/tools/list_changed`.
struct Recorder {
    seen: mpsc::Sender<()>,
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.seen.try_send(());
    }
}

#[tokio::test]
async fn a_tool_a_wrapped_server_adds_is_announced_listed_and_called_directly() {
    let (seen, mut notified) = mpsc::channel(16);
    let (client, _pid) = connect_client_with(gateway(&[], &["--add-tool"]), Recorder { seen }).await;
    let peer = client.peer().clone();
    let before: Vec<String> = peer.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(!before.contains(&"late_tool".to_string()), "{before:?}");
    let added = call(&peer, "add_tool", json!({"name": "late-tool"})).await;
    assert_eq!(text(&added), "added late-tool", "{added:?}");
    tokio::time::timeout(Duration::from_secs(20), notified.recv())
        .await
        .expect("the client is told within 20 s that the tool list changed")
        .expect("the handler is alive");
    let after = peer.list_all_tools().await.unwrap();
    let late = after.iter().find(|t| t.name == "late-tool").expect("the new tool is listed, as its server names it");
    assert!(late.description.as_deref().unwrap().starts_with("Added at runtime by add_tool."), "{late:?}");
    assert_eq!(text(&call(&peer, "late-tool", json!({})).await), "ok late-tool");
    client.cancel().await.ok();
}

#[tokio::test]
async fn server_everythings_image_and_structured_results_arrive_unchanged_through_a_policy() {
    let Some(everything) = npm_bin("mcp-server-everything") else { return };
    let config = log_path("direct-everything").with_extension("json");
    let policy = json!({"version": "1", "default": "allow",
        "tools": {"get-env": {"action": "deny", "reason": "the environment stays on the host"}}});
    let servers = json!({"mcpServers": {"everything": {"command": everything, "args": ["stdio"], "policy": policy}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let mut command = tokio::process::Command::new(support::code_mode());
    command.args(["serve", "--expose-tools=only", "--config", config.to_str().unwrap()]).env("DOCKER_HOST", NO_DOCKER);
    let (client, _pid) = connect_client(command).await;
    // The same server, called by a client of its own.
    let mut direct = tokio::process::Command::new(&everything);
    direct.arg("stdio");
    let plain = ().serve(rmcp::transport::TokioChildProcess::new(direct).unwrap()).await.expect("server-everything");

    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(!names.contains(&"get-env"), "the denied tool is not offered: {names:?}");
    let denied = refusal(&call(client.peer(), "get-env", json!({})).await);
    assert_eq!(
        denied, "get-env: denied by policy (/tools/get-env): the environment stays on the host",
        "refused by the name the client gave"
    );
    let image = tools.iter().find(|t| t.name == "get-tiny-image").expect("get-tiny-image is offered");
    assert_eq!(image.title.as_deref(), Some("Get Tiny Image Tool"));
    for (tool, served, arguments) in [
        ("get-tiny-image", "everything__get_tiny_image", json!({})),
        ("get-structured-content", "everything__get_structured_content", json!({"location": "Chicago"})),
    ] {
        let through = call(client.peer(), served, arguments.clone()).await;
        let own = call(plain.peer(), tool, arguments).await;
        assert_eq!(
            serde_json::to_value(&through).unwrap(),
            serde_json::to_value(&own).unwrap(),
            "{tool} arrives as the server sent it"
        );
    }
    let image = call(client.peer(), "everything__get_tiny_image", json!({})).await;
    let png = image.content.iter().find_map(|c| c.as_image()).expect("an image block");
    assert_eq!(png.mime_type, "image/png");
    let weather = call(client.peer(), "everything__get_structured_content", json!({"location": "Chicago"})).await;
    assert_eq!(weather.structured_content.as_ref().unwrap()["conditions"], "Light rain / drizzle");
    plain.cancel().await.ok();
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&config);
}

/// Call `add` directly until it answers 5, at most `within`.
async fn until_add_answers(peer: &Peer<RoleClient>, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let result = call(peer, "add", json!({"a": 2, "b": 3})).await;
        if result.structured_content == Some(json!({"sum": 5})) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "add did not answer within {within:?}: {result:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Wait (at most 10 s) until nats-server finds no responder for direct
/// calls, asking as the frontend's user.
async fn until_nobody_serves_direct_calls(url: &str, users: &code_mode_core::testing::NatsUsers) {
    let client =
        async_nats::ConnectOptions::with_user_and_password("frontend".into(), users.password("frontend").into())
            .custom_inbox_prefix("_INBOX.frontend")
            .connect(url)
            .await
            .expect("the frontend's user connects");
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let asked = async_nats::client::Request::new().payload("{}".into()).timeout(Some(Duration::from_millis(300)));
        match client.send_request(code_mode_proto::subjects::TOOL_DIRECT.to_string(), asked).await {
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => return,
            _ => assert!(
                std::time::Instant::now() < give_up,
                "nats-server still routes direct calls 10 s after the bridge died"
            ),
        }
    }
}

#[tokio::test]
async fn over_nats_a_crashed_server_and_a_killed_bridge_fail_direct_calls_by_type_name_until_they_are_back() {
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let mut bridge = spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    // A pure gateway: a frontend and a bridge, no sandbox-runner at all.
    let frontend = support::service_command(&nats.url(), &users, "frontend", &["--expose-tools=only"], None);
    let (client, _pid) = connect_client(frontend).await;
    let peer = client.peer().clone();
    until_add_answers(&peer, Duration::from_secs(10)).await;

    // The wrapped server dies under a call: only the fault's type name
    // reaches the client; the bridge starts the server again.
    assert_eq!(refusal(&call(&peer, "crash", json!({})).await), "TransportClosed");
    until_add_answers(&peer, Duration::from_secs(15)).await;

    // The bridge is killed: direct calls fail at once, saying so.
    let pid = bridge.id().expect("the bridge runs").to_string();
    let killed = std::process::Command::new("kill").args(["-s", "KILL", &pid]).status().expect("kill runs");
    assert!(killed.success());
    bridge.wait().await.expect("the killed bridge is reaped");
    // nats-server drops the dead bridge's subscription when it reads the
    // closed socket; on a loaded machine that may come after the next
    // request, which then waits for a reply that never comes. The outage
    // this test is about starts once the server knows: wait for that.
    until_nobody_serves_direct_calls(&nats.url(), &users).await;
    let during = tokio::time::timeout(Duration::from_secs(10), call(&peer, "add", json!({"a": 2, "b": 3})))
        .await
        .expect("a direct call during the outage fails at once");
    assert_eq!(refusal(&during), "BridgeUnavailable");

    // A bridge started again serves them.
    let _bridge = spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    until_add_answers(&peer, Duration::from_secs(30)).await;
    client.cancel().await.ok();
}
