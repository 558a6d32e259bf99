//! The library API (`code_mode::{Bridge, Server, run_code, Sandbox,
//! build_server}`) against the test server and the real sandbox; the two
//! examples run as written; docs/library.md shows them as they are.

use code_mode::{Bridge, Options, Sandbox, Server, build_server, run_code};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

use crate::support;

#[allow(dead_code)]
#[path = "../../examples/one_cell.rs"]
mod one_cell;

#[allow(dead_code)]
#[path = "../../examples/agent_loop.rs"]
mod agent_loop;

fn test_server() -> String {
    support::test_server().display().to_string()
}

#[tokio::test]
async fn the_one_cell_example_runs_a_tool_call_in_a_fresh_sandbox() {
    if !support::sandbox_available() {
        return;
    }
    assert_eq!(one_cell::one_cell(&test_server()).await.unwrap(), "{\"sum\":5}\n");
}

#[tokio::test]
async fn the_agent_loop_example_carries_a_variable_through_three_cells_of_one_sandbox() {
    if !support::sandbox_available() {
        return;
    }
    let printed = agent_loop::agent_loop(&test_server()).await.unwrap();
    assert_eq!(printed, ["", "3\n", "total is still 3\n"]);
}

#[tokio::test]
async fn stubs_and_direct_calls_need_no_docker_and_pass_the_bridges_checks() {
    let bridge = Bridge::start(Server::command(test_server()).allow(["add", "echo"])).await.unwrap();
    let stubs = bridge.stubs();
    assert!(stubs.contains("async def add(") && stubs.contains("async def echo("), "{stubs}");
    assert!(!stubs.contains("async def sleep("), "only allowed tools: {stubs}");
    assert_eq!(bridge.tool_names(), ["add", "echo"]);
    assert_eq!(bridge.call("add", serde_json::json!({"a": 1, "b": 2})).await.unwrap(), "{\"sum\":3}");
    let refused = bridge.call("add", serde_json::json!({"a": "one"})).await.unwrap_err();
    assert!(matches!(refused, code_mode::Error::Refused(_)), "{refused}");
    let not_kept = bridge.call("sleep", serde_json::json!({"seconds": 0})).await.unwrap_err();
    assert!(not_kept.to_string().contains("not on the allowlist"), "{not_kept}");
    bridge.close().await;
}

#[tokio::test]
async fn a_sandbox_gives_each_cell_its_own_call_budget_and_close_removes_its_container() {
    if !support::sandbox_available() {
        return;
    }
    let bridge = Bridge::start(Server::command(test_server())).await.unwrap();
    let sandbox = Sandbox::new(&bridge).await.unwrap();
    let two_calls = "for i in range(2):\n    try:\n        print(await add({'a': i, 'b': 1}))\n    except ToolError as e:\n        print('refused:', e)";
    let one = sandbox.run(two_calls, bridge.budget(1)).await.unwrap();
    assert_eq!(one.stdout, "{\"sum\":1}\nrefused: add: this run has used all of its 1 tool calls\n");
    let two = sandbox.run(two_calls, bridge.budget(2)).await.unwrap();
    assert_eq!(two.stdout, "{\"sum\":1}\n{\"sum\":2}\n", "the next cell has its own budget");
    let mine = std::process::id();
    assert_eq!(support::containers_of(mine).len(), 1, "the sandbox's container lives between cells");
    sandbox.close().await;
    assert!(support::containers_of(mine).is_empty(), "close removed it");
    bridge.close().await;
}

#[tokio::test]
async fn a_bridge_with_packages_in_its_options_runs_cells_on_the_image_of_those_packages() {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    let tag = support::package_image(&requirements);
    let packages = code_mode::Packages { requirements: Some(requirements), ..Default::default() };
    let options = Options { packages, ..Default::default() };
    let bridge = Bridge::start_with(vec![Server::command(test_server())], options, false).await.unwrap();
    let report = run_code(&bridge, "import numpy\nprint(numpy.__version__, PACKAGES['pandas'])").await.unwrap();
    assert_eq!(report.stdout, "2.2.6 2.2.3\n", "{report:?}");
    assert!(tag.starts_with("code-mode-sandbox:p-"), "{tag}");
    bridge.close().await;
}

#[tokio::test]
async fn the_documentation_examples_of_the_crate_and_the_sandbox_run_as_written_against_the_test_server() {
    if !support::sandbox_available() {
        return;
    }
    // The crate's opening example, with the test server for "my-mcp-server".
    let bridge = Bridge::start(Server::command(test_server()).allow(["add"])).await.unwrap();
    let prompt = format!("You can call these tools:\n{}", bridge.stubs());
    let cell = run_code(&bridge, "print(await add({'a': 2, 'b': 3}))").await.unwrap();
    let sandbox = Sandbox::new(&bridge).await.unwrap();
    sandbox.run("x = 1", bridge.budget(0)).await.unwrap();
    let next = sandbox.run("print(x + 1)", bridge.budget(3)).await.unwrap();
    assert!(prompt.contains("async def add("));
    assert_eq!((cell.stdout.as_str(), next.stdout.as_str()), ("{\"sum\":5}\n", "2\n"));
    sandbox.close().await;
    // `Sandbox`'s own example.
    let sandbox = Sandbox::new(&bridge).await.unwrap();
    sandbox.run("total = 0", bridge.budget(0)).await.unwrap();
    let cell = sandbox.run("total += 1\nprint(total)", bridge.budget(5)).await.unwrap();
    assert_eq!(cell.stdout, "1\n");
    sandbox.close().await;
    bridge.close().await;
}

#[tokio::test]
async fn build_server_gives_a_run_python_server_an_mcp_client_can_drive() {
    if !support::sandbox_available() {
        return;
    }
    let options = Options { max_calls: 7, ..Options::default() };
    let bridge = Bridge::start_with(vec![Server::command(test_server()).named("math")], options, true).await.unwrap();
    let server = build_server(&bridge).await.unwrap();
    let (client_side, server_side) = tokio::io::duplex(1 << 16);
    let served = tokio::spawn(async move {
        let running = server.serve(tokio::io::split(server_side)).await.expect("the server starts");
        let _ = running.waiting().await;
    });
    let client = ().serve(tokio::io::split(client_side)).await.expect("the MCP handshake");
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.contains("async def math__add(") && description.contains("At most 7 calls"), "{description}");
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments =
        Some(serde_json::json!({"code": "print(await math__add(a=1, b=1))"}).as_object().unwrap().clone());
    let result = client.peer().call_tool(params).await.unwrap();
    assert_eq!(support::report(&result)["stdout"], "{\"sum\":2}\n");
    client.cancel().await.unwrap();
    let _ = served.await;
    bridge.close().await;
}

#[test]
fn the_readmes_library_section_shows_the_examples_as_they_are() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/library.md")).unwrap();
    for (marker, file) in [
        ("<!-- library example: cli/examples/one_cell.rs -->", include_str!("../../examples/one_cell.rs")),
        ("<!-- library example: cli/examples/agent_loop.rs -->", include_str!("../../examples/agent_loop.rs")),
    ] {
        let after = readme.split_once(marker).unwrap_or_else(|| panic!("{marker} is missing from docs/library.md")).1;
        let block = after.split_once("```rust\n").expect("a rust block follows").1.split_once("```").unwrap().0;
        assert_eq!(block, file, "the copy in docs/library.md of {marker} differs from the file");
    }
}
