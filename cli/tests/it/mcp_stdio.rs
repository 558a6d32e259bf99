//! End to end through the real MCP stdio transport: an rmcp client starts
//! `code-mode serve -- <test server>` and talks to it as Claude Code would.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::json;

use crate::support::{self, Client, Deployment, children_of, pid_alive, report, run_python, start};

/// The all-in-one `serve`, for tests about that process itself.
async fn connect(args: &[&str], server_args: &[&str]) -> (Client, u32) {
    let (client, pid, _) = start(Deployment::AllInOne, args, server_args).await;
    (client, pid)
}

macro_rules! over_both_deployments {
    ($($name:ident),* $(,)?) => {
        mod all_in_one {
            $(#[tokio::test] async fn $name() { super::$name(super::Deployment::AllInOne).await })*
        }
        mod over_nats {
            $(#[tokio::test] async fn $name() { super::$name(super::Deployment::OverNats).await })*
        }
    };
}

over_both_deployments!(
    a_client_sees_one_tool_whose_description_carries_the_stubs,
    run_python_returns_the_report_as_structured_content_and_as_text,
    a_cell_that_fails_is_an_error_result_with_the_same_report,
    code_over_the_size_limit_is_refused_with_a_clear_error,
    concurrent_cells_run_at_the_same_time_each_in_its_own_container,
    a_run_stopped_at_its_deadline_leaves_nothing_for_the_next_run,
    the_description_falls_back_to_names_by_server_when_stubs_and_summaries_do_not_fit,
    cells_beyond_the_concurrency_limit_wait_for_a_slot,
);

async fn a_client_sees_one_tool_whose_description_carries_the_stubs(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--allow", "add", "--allow", "echo"], &[]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    let tool = &tools[0];
    assert_eq!(tool.name, "run_python");
    let description = tool.description.as_deref().unwrap();
    assert!(description.contains("async def add(a: int, b: int) -> {sum: int}:"), "{description}");
    assert!(description.contains("Add two integers."), "{description}");
    assert!(description.contains("a: int"), "{description}");
    assert!(description.contains("async def echo("), "{description}");
    assert!(!description.contains("async def sleep("), "only allowed tools are offered");
    let output = tool.output_schema.as_ref().expect("an output schema");
    let required: Vec<&str> = output["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(required, ["stdout", "error", "truncated", "stopped"]);
    client.cancel().await.unwrap();
}

async fn run_python_returns_the_report_as_structured_content_and_as_text(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &[], &[]).await;
    let code = r#"import asyncio, json
sums = await asyncio.gather(*(add({"a": n, "b": 10}) for n in range(3)))
print([json.loads(s)["sum"] for s in sums])"#;
    let result = run_python(&client, code).await;
    assert_ne!(result.is_error, Some(true));
    assert_eq!(
        report(&result),
        json!({"stdout": "[10, 11, 12]\n", "error": null, "truncated": false, "stopped": false})
    );
    client.cancel().await.unwrap();
}

async fn a_cell_that_fails_is_an_error_result_with_the_same_report(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--deadline", "8"], &[]).await;
    let failed = run_python(&client, "print('before')\nraise ValueError('bad input')").await;
    let failed_report = report(&failed);
    assert_eq!(failed.is_error, Some(true), "a report with an error is an error result: {failed_report}");
    assert_eq!(failed_report["stdout"], "before\n");
    assert!(failed_report["error"].as_str().unwrap().contains("ValueError: bad input"), "{failed_report}");
    let text = &failed.content[0].as_text().expect("a text block").text;
    assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), failed_report, "the text is the same JSON");
    // A run stopped at its deadline is an error result too; a clean one is not.
    let stopped = run_python(&client, "import time\ntime.sleep(30)").await;
    assert_eq!(stopped.is_error, Some(true));
    assert_eq!(report(&stopped)["stopped"], true);
    let fine = run_python(&client, "print(1)").await;
    assert_eq!(fine.is_error, Some(false), "{fine:?}");
    client.cancel().await.unwrap();
}

async fn code_over_the_size_limit_is_refused_with_a_clear_error(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--max-code", "1000"], &[]).await;
    let code = format!("print({:?})", "x".repeat(2000));
    let result = run_python(&client, &code).await;
    assert_eq!(result.is_error, Some(true));
    let text = &result.content[0].as_text().unwrap().text;
    assert!(text.contains("over the 1000 byte limit"), "{text}");
    // Within the limit it runs.
    let ok = run_python(&client, "print('fits')").await;
    assert_eq!(report(&ok)["stdout"], "fits\n");
    client.cancel().await.unwrap();
}

async fn concurrent_cells_run_at_the_same_time_each_in_its_own_container(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--max-concurrent", "2"], &[]).await;
    // Each cell notes when it ran and in which container (its hostname).
    let code = "import time, socket\nt0 = time.time()\ntime.sleep(2)\nprint(t0, time.time(), socket.gethostname())";
    let (a, b) = tokio::join!(run_python(&client, code), run_python(&client, code));
    let parse = |r: &CallToolResult| {
        let out = report(r)["stdout"].as_str().unwrap().trim().to_string();
        let parts: Vec<String> = out.split(' ').map(str::to_string).collect();
        (parts[0].parse::<f64>().unwrap(), parts[1].parse::<f64>().unwrap(), parts[2].clone())
    };
    let (a0, a1, ha) = parse(&a);
    let (b0, b1, hb) = parse(&b);
    assert_ne!(ha, hb, "each cell has its own container");
    assert!(a0 < b1 && b0 < a1, "the two cells overlapped in time: {a0}-{a1} and {b0}-{b1}");
    client.cancel().await.unwrap();
}

async fn a_run_stopped_at_its_deadline_leaves_nothing_for_the_next_run(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--deadline", "4"], &[]).await;
    let first = run_python(&client, "open('/tmp/left-behind', 'w').write('x')\nx = 1\nwhile True:\n    x += 1").await;
    let first = report(&first);
    assert_eq!(first["stopped"], true, "{first}");
    assert!(first["error"].as_str().unwrap().contains("deadline"), "{first}");
    let second = run_python(&client, "import os\nprint(os.path.exists('/tmp/left-behind'), 'x' in globals())").await;
    assert_eq!(report(&second)["stdout"], "False False\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn when_the_client_goes_away_serve_stops_its_server_and_removes_its_containers() {
    if !support::sandbox_available() {
        return;
    }
    let (client, serve_pid) = connect(&[], &[]).await;
    let wrapped: Vec<u32> = children_of(serve_pid);
    assert!(!wrapped.is_empty(), "the wrapped server runs as a child of serve");
    // A cell that would run for a long time is in flight when the client leaves.
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move {
        let mut params = CallToolRequestParams::new("run_python");
        params.arguments = Some(json!({"code": "import time\ntime.sleep(60)"}).as_object().unwrap().clone());
        let _ = peer.call_tool(params).await;
    });
    // Wait until its container exists.
    let mut seen = false;
    for _ in 0..100 {
        if !support::containers_of(serve_pid).is_empty() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "the cell's container was started");
    client.cancel().await.unwrap();
    pending.abort();
    let mut gone = false;
    for _ in 0..150 {
        if !pid_alive(serve_pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "serve exits when its client goes away");
    for pid in wrapped {
        assert!(!pid_alive(pid), "the wrapped server {pid} was stopped");
    }
    assert!(support::containers_of(serve_pid).is_empty(), "no container of serve is left");
}

async fn the_description_falls_back_to_names_by_server_when_stubs_and_summaries_do_not_fit(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    // 321 short signatures still fit 12,000 characters; 8,000 do not.
    let (client, _, _guards) = start(deployment, &["--description-budget", "8000"], &["--many", "300"]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.chars().count() <= 8_000, "{} characters", description.chars().count());
    assert!(!description.contains("async def "), "no full stubs once they do not fit");
    assert!(!description.contains("Add two integers."), "no summary lines once they do not fit");
    assert!(!description.contains("add(a: int"), "no signatures once they do not fit");
    assert!(description.contains("\n321 tools, by name:\nadd, echo, sleep, "), "{description}");
    for k in 0..300 {
        assert!(description.contains(&format!(" extra_tool_{k:04}")), "extra_tool_{k:04} is named");
    }
    // Every tool is still there for the code, by name and by search, with
    // its summary.
    let result = run_python(&client, "print(len(TOOLS), search_tools('extra_tool_0299', limit=1))").await;
    assert_eq!(
        report(&result)["stdout"],
        "321 {'extra_tool_0299': '(x?: int)  Extra tool number 299 for catalog tests about juliet'}\n"
    );
    client.cancel().await.unwrap();
}

async fn cells_beyond_the_concurrency_limit_wait_for_a_slot(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--max-concurrent", "1"], &[]).await;
    let code = "import time\nt0 = time.time()\ntime.sleep(1.5)\nprint(t0, time.time())";
    let (a, b) = tokio::join!(run_python(&client, code), run_python(&client, code));
    let span = |r: &CallToolResult| {
        let out = report(r)["stdout"].as_str().unwrap().trim().to_string();
        let (s, e) = out.split_once(' ').unwrap();
        (s.parse::<f64>().unwrap(), e.parse::<f64>().unwrap())
    };
    let ((a0, a1), (b0, b1)) = (span(&a), span(&b));
    assert!(a1 <= b0 || b1 <= a0, "with one slot the cells ran one after the other: {a0}-{a1} and {b0}-{b1}");
    client.cancel().await.unwrap();
}
