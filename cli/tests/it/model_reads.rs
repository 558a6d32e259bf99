//! What the model reads, through the real processes: result shapes learned
//! from a tool's results (over NATS, across a bridge killed and restarted,
//! never a value, never a private tool's), the did-you-mean errors of a
//! cell that guesses a name wrong, and `code-mode describe` without Docker.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    self, Client, Deployment, connect_client, kill9, run_python, service_command, spawn_service, start, stdout_of,
};

/// The run_python description the client is offered now.
async fn description(client: &Client) -> String {
    let tools = client.peer().list_all_tools().await.expect("tools/list answers");
    let run = tools.iter().find(|t| t.name == "run_python").expect("run_python is offered");
    run.description.as_deref().unwrap_or_default().to_string()
}

/// Wait (up to 30 s) until the description holds `wanted`.
async fn description_with(client: &Client, wanted: &str) -> String {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let text = description(client).await;
        if text.contains(wanted) {
            return text;
        }
        assert!(Instant::now() < give_up, "the description never showed {wanted:?}:\n{text}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the test server's `report` answers, as the stub shows it once seen.
const REPORT_SHAPE: &str = "report(owner: str, secret?: str) -> {repository: {owner: str, name: str, stars: int, \
     private: bool}, issues: list[{number: int, title: str, labels: list[str], score?: float, assignee?: None}], \
     filed_by: dict[str, int], raw: str (JSON)} (observed)";

#[tokio::test]
async fn over_nats_a_result_shape_is_learned_from_one_call_shown_without_values_and_kept_when_the_bridge_restarts() {
    if !support::sandbox_available() {
        return;
    }
    let args = ["--private", "get_env", "--deadline", "20"];
    let (client, _, mut guards) = start(Deployment::OverNats, &args, &["--reports"]).await;
    let before = description(&client).await;
    assert!(before.contains("async def report(owner: str, secret?: str):\n"), "{before}");

    // One call teaches the shape; then the private tool is called too.
    let code = "r = await report(owner='octocat', secret='hunter2-value')\nprint(len(r))\n\
                print(await get_env({'name': 'NO_SUCH_VARIABLE'}))";
    assert!(stdout_of(&run_python(&client, code).await).ends_with("<unset>\n"));
    let after = description_with(&client, REPORT_SHAPE).await;
    for value in ["octocat", "hunter2", "example.com", "quokka", "wontfix"] {
        assert!(!after.contains(value), "a value of the result reached the description: {value}\n{after}");
    }
    // The private tool's result teaches nothing: its stub shows no result.
    assert!(after.contains("async def get_env(name: str):\n    \"\"\"\n    [private]"), "{after}");
    // In a cell, TOOLS shows it too.
    let stub = stdout_of(&run_python(&client, "print(TOOLS['report'])").await);
    assert!(stub.contains("returns (observed in earlier results, not declared): {repository: {"), "{stub}");

    // A bridge killed and started again shows what the first one learned,
    // before any new call of `report`: a new session's description has it.
    let mut bridge = guards.bridge.take().expect("a bridge");
    kill9(bridge.id().expect("the bridge runs"));
    bridge.wait().await.expect("the killed bridge is reaped");
    guards.bridge = Some(spawn_service(
        &guards.nats_url(),
        guards.users(),
        "bridge",
        &["--private", "get_env"],
        Some(&["--reports"]),
    ));
    let (fresh, _) = connect_client(service_command(&guards.nats_url(), guards.users(), "frontend", &[], None)).await;
    let again = description_with(&fresh, REPORT_SHAPE).await;
    assert!(again.contains("async def get_env(name: str):\n"), "{again}");
    fresh.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

#[test]
fn a_cell_that_guesses_a_tool_or_parameter_name_wrong_is_told_the_closest_ones_and_no_call_goes_out() {
    if !support::sandbox_available() {
        return;
    }
    let log = support::log_path("did-you-mean");
    let code = r#"import json
out = []
for attempt in (lambda: add(a=1, bb=2), lambda: add(a=1), lambda: add(A=1, B=2)):
    try:
        await attempt()
    except ToolError as e:
        out.append(f"{type(e).__name__}: {e}")
try:
    TOOLS["ech"]
except KeyError as e:
    out.append(f"KeyError: {e.args[0]}")
print(json.dumps(out))
await ech(text="x")"#;
    let ran = support::run(&["--deadline", "30"], code, &["--log", log.to_str().unwrap()]);
    let printed: Value = serde_json::from_str(ran.stdout()).unwrap_or_else(|e| panic!("{e}: {ran:?}"));
    assert_eq!(
        printed,
        json!([
            "ToolError: add: it takes no parameter 'bb' (did you mean b?); missing required parameter b: int. It takes: a: int, b: int",
            "ToolError: add: missing required parameter b: int. It takes: a: int, b: int",
            "ToolError: add: it takes no parameter 'A' (did you mean a?); it takes no parameter 'B' (did you mean b?); missing required parameter a: int; missing required parameter b: int. It takes: a: int, b: int",
            "KeyError: no tool 'ech'; did you mean echo?",
        ])
    );
    // A name that is no tool: the traceback of the uncaught NameError
    // names the closest tool.
    let error = ran.error().expect("the uncaught NameError ends the cell");
    assert!(error.ends_with("NameError: name 'ech' is not defined; did you mean echo? (TOOLS lists every tool; search_tools(query) finds one)"), "{error}");
    // None of those calls reached the server.
    assert!(support::logged_calls(&log).iter().all(|l| !l.contains("add")), "{:?}", support::logged_calls(&log));
}

#[test]
fn describe_prints_the_description_the_tiers_and_the_stubs_without_docker() {
    let server = support::test_server();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(support::code_mode())
            .arg("describe")
            .args(extra)
            .arg("--")
            .arg(&server)
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .output()
            .expect("describe runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(&[]);
    assert!(text.starts_with("# The run_python description ("), "{text}");
    assert!(text.contains("tier: stubs;"), "{text}");
    assert!(text.contains("\nasync def add(a: int, b: int) -> {sum: int}:\n"), "{text}");
    assert!(text.contains("\n# Each tier's size"), "{text}");
    assert!(text.contains("\nnames "), "{text}");

    let small = run(&["--json", "--description-budget", "3000"]);
    let report: Value = serde_json::from_str(&small).unwrap();
    assert_eq!(report["budget"], 3000);
    assert_ne!(report["tier"], "stubs", "{report}");
    let chars = report["description"].as_str().unwrap().chars().count();
    assert_eq!(report["characters"], chars);
    assert!(chars <= 3000);
    let add = report["tools"].as_array().unwrap().iter().find(|t| t["name"] == "add").unwrap();
    assert_eq!(add["signature"], "add(a: int, b: int) -> {sum: int}");
    let tiers: Vec<&str> = report["tiers"].as_array().unwrap().iter().map(|t| t["tier"].as_str().unwrap()).collect();
    assert_eq!(tiers, ["stubs", "typed", "typed", "signatures", "names"]);
}

#[tokio::test]
async fn both_python_sdk_clients_read_the_typed_tier_and_hear_the_closest_parameter_of_a_misspelt_one() {
    if !support::sandbox_available() {
        return;
    }
    let (code_mode, server) = (support::code_mode(), support::test_server());
    // 3,200 characters: the test server's 22 stubs do not fit, typed lines do.
    let stdio = [
        "--stdio",
        code_mode.to_str().unwrap(),
        "serve",
        "--description-budget",
        "3200",
        "--",
        server.to_str().unwrap(),
        "--",
    ];
    let code = "try:\n    await add(a=1, bb=2)\nexcept ToolError as e:\n    print(e)";
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "run_python", "arguments": {"code": code}},
    ]);
    // `client` (mcp.Client, MCP 2026-07-28) and `session` (ClientSession, 2025-11-25).
    for api in ["client", "session"] {
        let args: Vec<&str> = stdio.iter().copied().chain(["--api", api]).collect();
        let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
        let tools = results[0]["result"]["tools"].as_array().unwrap_or_else(|| panic!("{api}: {results:?} {stderr}"));
        let description = tools[0]["description"].as_str().unwrap();
        assert!(description.contains("\nadd(a: int, b: int) -> {sum: int}  Add two integers."), "{api}: {description}");
        assert!(!description.contains("async def "), "{api}: {description}");
        assert_eq!(
            results[1]["result"]["structuredContent"]["stdout"],
            "add: it takes no parameter 'bb' (did you mean b?); missing required parameter b: int. It takes: a: int, b: int\n",
            "{api}: {results:?}"
        );
    }
}
