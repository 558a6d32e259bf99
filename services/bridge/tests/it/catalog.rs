//! The catalog built from the real server's `tools/list`.

use serde_json::json;

use crate::support::{Harness, Setup, child_with_arg, log_lines, ok};

/// The tools the test server lists without flags, in its order.
const LISTED: &[&str] = &[
    "add",
    "echo",
    "sleep",
    "huge",
    "fail",
    "protocol_error",
    "crash",
    "get_env",
    "count",
    "get-weather",
    "class",
    "print",
    "__init__",
    "9lives",
    "ToolError",
    "search_tools",
    "TOOLS",
    "with.dots",
    "naïve",
    "awkward_params",
    "open_schema",
];

#[tokio::test]
async fn the_catalog_lists_every_tool_with_its_python_name_stub_and_summary() {
    let h = Harness::with_args(&[]).await;
    let message = h.bridge.catalog_message();
    let mcp_names: Vec<&str> = message.tools.iter().map(|t| t.mcp_name.as_str()).collect();
    assert_eq!(mcp_names, LISTED);
    assert!(h.bridge.catalog().left_out().is_empty(), "{:?}", h.bridge.catalog().left_out());
    assert_eq!(message.max_calls, 200);
    assert_eq!(message.call_timeout_ms, 10_000);

    let add = message.tools.iter().find(|t| t.name == "add").expect("add is listed");
    assert_eq!(add.mcp_name, "add");
    assert_eq!(add.server, None, "one server: no server name on entries");
    assert!(
        add.stub.starts_with("async def add(a: int, b: int) -> {sum: int}:\n    \"\"\"\n    Add two integers.\n"),
        "{}",
        add.stub
    );
    assert!(add.stub.contains("a: int - First addend.\n"), "{}", add.stub);
    assert!(add.stub.contains("b: int - Second addend.\n"), "{}", add.stub);
    assert_eq!(add.summary, "add(a: int, b: int) -> {sum: int}  Add two integers.");
    assert_eq!(add.signature.line, "add(a: int, b: int) -> {sum: int}");

    let echo = message.tools.iter().find(|t| t.name == "echo").expect("echo is listed");
    assert!(echo.stub.contains("repeat: int, optional - How many times to repeat the text."), "{}", echo.stub);
    assert_eq!(echo.summary, "echo(text: str, repeat: int = 1)  Echo text back.");

    let count = message.tools.iter().find(|t| t.name == "count").expect("count is listed");
    assert!(count.stub.contains("params: none"), "{}", count.stub);
    assert_eq!(
        count.summary,
        "count()  Return how many tools/call requests this server process has received, this one included."
    );
    h.close().await;
}

#[tokio::test]
async fn awkward_tool_names_map_to_python_names_as_documented_and_calls_reach_the_listed_name() {
    let h = Harness::with_args(&[]).await;
    let expected = [
        ("get-weather", "get_weather"),
        ("class", "class_"),
        ("print", "print_"),
        ("__init__", "__init___"),
        ("9lives", "_9lives"),
        ("ToolError", "ToolError_"),
        ("search_tools", "search_tools_"),
        ("TOOLS", "TOOLS_"),
        ("with.dots", "with_dots"),
        ("naïve", "na_ve"),
    ];
    for (mcp, python) in expected {
        let catalog = h.bridge.catalog();
        let tool = catalog.get(python).unwrap_or_else(|| panic!("{python} is in the catalog"));
        assert_eq!(tool.mcp_name, mcp);
        assert!(tool.stub.starts_with(&format!("async def {python}(")), "{}", tool.stub);
        assert!(h.bridge.catalog().get(mcp).is_none(), "the listed name {mcp} is not a Python name");
        assert_eq!(ok(h.call(python, json!({})).await), format!("ok {mcp}"));
    }
    let mcp_names: Vec<&str> = expected.iter().map(|(m, _)| *m).collect();
    assert_eq!(h.calls_seen(), mcp_names, "the server saw each call under its own name");
    h.close().await;
}

#[tokio::test]
async fn the_awkward_params_stub_quotes_odd_names_cuts_long_ones_and_shows_enums_as_literal() {
    let h = Harness::with_args(&[]).await;
    let catalog = h.bridge.catalog();
    let tool = catalog.get("awkward_params").expect("awkward_params is in the catalog");
    let stub = &tool.stub;
    assert!(stub.contains("'first name': str - A property name with a space.\n"), "{stub}");
    assert!(stub.contains("'x-y': int, optional - A property name with a dash.\n"), "{stub}");
    let cut = format!("'{}': bool, optional - A 100-character property name.\n", "p".repeat(64));
    assert!(stub.contains(&cut), "{stub}");
    assert!(!stub.contains(&"p".repeat(65)), "the 100-character name is cut to 64: {stub}");
    assert!(stub.contains("class: str, optional - A property named after a keyword.\n"), "{stub}");
    assert!(stub.contains("mode: Literal['fast', 'slow'], optional\n"), "{stub}");
    assert!(stub.contains("ids: list[int], optional\n"), "{stub}");
    assert!(stub.contains("nested: {inner?: {deeper?: {deepest?: {bottom?: {floor?: str}}}}}, optional\n"), "{stub}");
    assert_eq!(
        tool.summary,
        format!(
            "awkward_params('first name': str, 'x-y'?: int, '{}'?: bool, class?: str, \
             nested?: {{inner?: {{deeper?: {{deepest?: {{bottom?: {{floor?: str}}}}}}}}}}, mode?: Literal['fast', 'slow'], \
             ids?: list[int])  Takes parameters whose names are not identifiers; returns the arguments as JSON text.",
            "p".repeat(64)
        )
    );
    // The quoted names are the real keys: a call with them goes through.
    let value = ok(h.call("awkward_params", json!({"first name": "Ada", "x-y": 3, "mode": "fast"})).await);
    let echoed: serde_json::Value = serde_json::from_str(&value).expect("the server echoes JSON");
    assert_eq!(echoed, json!({"first name": "Ada", "x-y": 3, "mode": "fast"}));
    h.close().await;
}

#[tokio::test]
async fn the_allowlist_keeps_tools_named_by_server_name_or_by_python_name() {
    let h = Setup::server(&[]).allow(&["get-weather", "print_", "add"]).start().await.expect("starts");
    let catalog = h.bridge.catalog();
    let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "get_weather", "print_"], "kept in listing order");
    assert_eq!(h.bridge.catalog_message().tools.len(), 3);
    assert_eq!(ok(h.call("get_weather", json!({"city": "Oslo"})).await), "ok get-weather");
    assert_eq!(ok(h.call("print_", json!({})).await), "ok print");
    h.close().await;
}

#[tokio::test]
async fn an_allowlist_name_the_server_does_not_list_stops_startup_naming_it_and_closes_the_server() {
    let setup = Setup::server(&[]).allow(&["add", "no_such_tool"]);
    let log = setup.log.display().to_string();
    let err = setup.start().await.expect_err("startup fails");
    let message = err.to_string();
    match &err {
        code_mode_bridge::BridgeError::UnknownAllowed { name, listed, .. } => {
            assert_eq!(name, "no_such_tool");
            assert!(listed.starts_with("add, echo, sleep"), "{listed}");
        }
        other => panic!("expected UnknownAllowed, got {other:?}"),
    }
    assert!(message.contains("no_such_tool"), "{message}");
    // The server had started (it listed its tools) and is closed again.
    assert!(log_lines(std::path::Path::new(&log)).contains(&"tools/list -".to_string()));
    assert!(child_with_arg(&log).is_none(), "the server was closed before the error returned");
}

#[tokio::test]
async fn a_catalog_request_holding_the_current_fingerprint_is_answered_unchanged_without_tools() {
    let h = Harness::with_args(&[]).await;
    let full = h.bridge.catalog_message();
    assert_eq!(full.fingerprint.len(), 64, "a SHA-256 in hex: {}", full.fingerprint);
    assert!(!full.unchanged);
    let ask = |known: Option<&str>| code_mode_proto::CatalogRequest {
        session: "it".into(),
        known: known.map(str::to_string),
        direct: false,
    };
    let same = h.bridge.catalog_reply(&ask(Some(&full.fingerprint)));
    assert!(same.unchanged && same.tools.is_empty(), "{same:?}");
    assert_eq!(same.fingerprint, full.fingerprint);
    for stale in [None, Some("0".repeat(64).as_str())] {
        let reply = h.bridge.catalog_reply(&ask(stale));
        assert!(!reply.unchanged, "{stale:?}");
        assert_eq!(reply.tools, full.tools, "a stale or missing fingerprint gets the whole catalog");
    }
    // Another bridge over the same server offers the same: same fingerprint.
    let other = Harness::with_args(&[]).await;
    assert_eq!(other.bridge.catalog_message().fingerprint, full.fingerprint);
    other.close().await;
    h.close().await;
}
