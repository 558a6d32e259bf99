//! All of MCP in code mode: a cell reads the wrapped servers' resources
//! and lists them (through the bridge, with a tool call's checks), gets a
//! tool's images and a resource's bytes as blocks with their MIME types,
//! hands images back to the model beside its report (bounded), reports its
//! progress to a client that asked for it, and a wrapped server that asks
//! the client's model something during a cell reaches the client, as an
//! approval does.

use std::time::Duration;

use base64::Engine as _;
use rmcp::ClientHandler;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{self, Deployment, python_sdk, report, run};

/// The test server's 1x1 PNG (`test://image`), as it serves it.
const TINY_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[test]
fn code_reads_resources_as_text_and_bytes_lists_them_and_hands_an_image_back_to_the_model() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"
small = await read_resource("test://small")
print(small, small.blocks)
image = await read_resource("test://image")
print(repr(str(image)), image.blocks[0].mime_type, image.blocks[0].data[:8])
print(sorted(r["uri"] for r in await list_resources()))
print([t["uriTemplate"] for t in await list_resource_templates()])
big = await read_resource("test://big/5")
print(big)
show(image.blocks[0])
show(b"plain file bytes", "text/csv")
"#;
    let ran = run(&[], code, &["--resources"]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines[0], "small [<resource text/plain, 5 characters, test://small>]");
    assert_eq!(lines[1], r#"'[blob image/png: .blocks[0]]' image/png b'\x89PNG\r\n\x1a\n'"#);
    assert_eq!(lines[2], "['test://image', 'test://secret', 'test://small']");
    assert_eq!(lines[3], "['test://big/{bytes}']");
    assert_eq!(lines[4], "xxxxx");
    let content = ran.report["content"].as_array().expect("handed-back content");
    assert_eq!(content.len(), 2, "{content:?}");
    assert_eq!(content[0], json!({"type": "image", "data": TINY_PNG, "mimeType": "image/png"}));
    assert_eq!(content[1]["type"], "resource");
    assert_eq!(content[1]["resource"]["mimeType"], "text/csv");
    let csv = base64::engine::general_purpose::STANDARD.decode(content[1]["resource"]["blob"].as_str().unwrap());
    assert_eq!(csv.unwrap(), b"plain file bytes");
}

#[test]
fn a_tools_image_reaches_the_code_as_a_block_with_its_bytes_where_it_was_a_placeholder() {
    let Some(everything) = code_mode_core::testing::peers::npm_bin("mcp-server-everything") else { return };
    if !support::sandbox_available() {
        return;
    }
    let config = support::log_path("code-everything").with_extension("json");
    let servers = json!({"mcpServers": {"everything": {"command": everything, "args": ["stdio"]}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let code = r#"
r = await everything__get_tiny_image()
print(r.replace("\n", " | "))
print(r.images[0].mime_type, len(r.images[0].data), r.images[0].data[:4])
"#;
    let mut command = std::process::Command::new(support::code_mode());
    command.args(["run", "--config", config.to_str().unwrap(), "--code", code]);
    if let Some(runtime) = support::runtime_flag() {
        command.args(["--runtime", runtime]);
    }
    command.stdin(std::process::Stdio::null());
    let ran = support::run_prepared(command);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(
        lines[0], "Here's the image you requested: | [image image/png: .blocks[0]] | The image above is the MCP logo.",
        "still the string it was, the image named in its place"
    );
    assert!(lines[1].starts_with("image/png ") && lines[1].ends_with(r"b'\x89PNG'"), "{}", lines[1]);
    let _ = std::fs::remove_file(config);
}

#[test]
fn what_a_cell_hands_back_is_bounded_in_count_and_size_and_the_code_is_told() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"
for i in range(8):
    show(bytes([i]) * 10, "image/png")
for attempt in [lambda: show(b"x", "image/png")]:
    try:
        attempt()
    except ValueError as e:
        print("ninth:", e)
"#;
    let ran = run(&[], code, &[]);
    assert_eq!(ran.ok(), "ninth: show: a run may hand back at most 8 blocks\n");
    assert_eq!(ran.report["content"].as_array().unwrap().len(), 8);
    let code = r#"
show(b"x" * (100 * 1024), "image/png")
try:
    show(b"y" * (61 * 1024), "image/png")
except ValueError as e:
    print(e)
"#;
    let ran = run(&[], code, &[]);
    assert_eq!(ran.ok(), "show: a run may hand back at most 160 KiB in all\n");
    assert_eq!(ran.report["content"].as_array().unwrap().len(), 1, "the first went back, the second did not");
}

#[test]
fn a_resource_read_in_code_meets_the_policy_the_size_limit_and_the_private_data_rule() {
    if !support::sandbox_available() {
        return;
    }
    let policy = support::log_path("code-resources-policy").with_extension("json");
    std::fs::write(
        &policy,
        json!({"version": "1", "default": "allow",
               "resources": {"test://secret": {"action": "deny", "reason": "not for code"}}})
        .to_string(),
    )
    .unwrap();
    let log = support::log_path("code-resources");
    let code = r#"
for uri in ["test://secret", "test://big/70000", "test://nothing"]:
    try:
        await read_resource(uri)
    except ToolError as e:
        print(e)
print(await read_resource("test://small"))
"#;
    let ran = run(&["--policy", policy.to_str().unwrap()], code, &["--resources", "--log", log.to_str().unwrap()]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines[0], "resources/read test://secret: denied by policy (/resources/test:~1~1secret): not for code");
    assert!(lines[1].contains("over the 65536 byte limit (refused, not cut)"), "{}", lines[1]);
    assert!(lines[2].starts_with("resources/read test://nothing failed: resource not found"), "{}", lines[2]);
    assert_eq!(lines[3], "small");
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!seen.contains("test://secret"), "the denied read never reached the server: {seen}");
    // Reading a private server's resource taints the cell's session: a
    // later call to a public tool is refused.
    let code = r#"
print(await read_resource("test://small"))
try:
    await add(a=1, b=2)
except ToolError as e:
    print(e)
"#;
    let ran = run(&["--private", "ask_model"], code, &["--resources"]);
    let lines: Vec<&str> = ran.ok().lines().collect();
    assert_eq!(lines[0], "small");
    assert!(lines[1].starts_with("add: refused by the private-data rule"), "{}", lines[1]);
    let _ = std::fs::remove_file(policy);
    let _ = std::fs::remove_file(log);
}

/// A client handler recording the progress notifications it gets.
struct Progress {
    seen: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for Progress {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.seen.send(params);
    }
}

#[tokio::test]
async fn through_mcp_a_cell_hands_an_image_back_and_tells_a_client_that_asked_how_far_it_is() {
    if !support::sandbox_available() {
        return;
    }
    let (seen, mut heard) = mpsc::unbounded_channel();
    let (client, _pid, _guards) =
        support::start_with(Deployment::AllInOne, &[], &["--resources"], Progress { seen }).await;
    let code = r#"
import time
report_progress(1, 3, "one of three")
time.sleep(1.5)
report_progress(2, 3, "two of three")
time.sleep(1.5)
image = await read_resource("test://image")
show(image.blocks[0])
print("done")
"#;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": code}).as_object().unwrap().clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    // rmcp gives every request a progress token: the client asks to hear.
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let result = match handle.await_response().await.expect("run_python answers") {
        rmcp::model::ServerResult::CallToolResult(result) => result,
        other => panic!("a tool result: {other:?}"),
    };
    assert_eq!(report(&result)["stdout"], "done\n");
    assert!(report(&result).get("content").is_none(), "the structured report is as before: {result:?}");
    let image = result.content.iter().find_map(|c| c.as_image()).expect("the image is handed back");
    assert_eq!((image.data.as_str(), image.mime_type.as_str()), (TINY_PNG, "image/png"));
    let mut progress = Vec::new();
    while let Ok(p) = heard.try_recv() {
        progress.push((p.progress, p.total, p.message));
    }
    assert_eq!(
        progress,
        [(1.0, Some(3.0), Some("one of three".into())), (2.0, Some(3.0), Some("two of three".into()))],
        "each report once, in order"
    );
    // A long cell that reports nothing still says it runs.
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({"code": "import time\ntime.sleep(7)\nprint('slept')"}).as_object().unwrap().clone());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    handle.await_response().await.expect("run_python answers");
    let beat = tokio::time::timeout(Duration::from_secs(1), heard.recv()).await.ok().flatten().expect("a heartbeat");
    assert!(beat.message.unwrap_or_default().starts_with("the cell has run for"), "a heartbeat");
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_cell_that_reports_progress_once_then_works_quietly_keeps_telling_both_sdk_clients_it_runs_every_5_s() {
    if !support::sandbox_available() {
        return;
    }
    let code_mode = support::code_mode().display().to_string();
    let server = support::test_server().display().to_string();
    let code = "import time\nreport_progress(1, 10, 'one of ten')\ntime.sleep(11.5)\nprint('done')";
    for api in ["client", "session"] {
        let args = ["--stdio", &code_mode, "serve", "--", &server, "--", "--api", api];
        let steps = json!([{"op": "call", "tool": "run_python", "arguments": {"code": code}, "progress": true}]);
        let (results, stderr) = python_sdk(&args, &steps).await.expect("the Python SDK is installed");
        assert_eq!(results[0]["result"]["structuredContent"]["stdout"], "done\n", "{api}: {results:?} {stderr}");
        let progress = results[0]["progress"].as_array().unwrap_or_else(|| panic!("{api}: {results:?}"));
        let (first, beats) = progress.split_first().unwrap_or_else(|| panic!("{api}: no progress at all"));
        assert_eq!(
            (&first["progress"], &first["total"], &first["message"]),
            (&json!(1.0), &json!(10.0), &json!("one of ten"))
        );
        // 5 s and 10 s after the report: the code's numbers, each a hair
        // above the last (MCP wants progress to grow), saying the cell runs.
        assert!(beats.len() >= 2, "{api}: a heartbeat every 5 s after the report: {progress:?}");
        let mut last = 1.0;
        for beat in beats {
            let done = beat["progress"].as_f64().unwrap_or_default();
            assert!(done > last && done < 1.001, "{api}: {progress:?}");
            last = done;
            assert_eq!(beat["total"], 10.0, "{api}: {progress:?}");
            let message = beat["message"].as_str().unwrap_or_default();
            assert!(message.starts_with("the cell has run for"), "{api}: {progress:?}");
        }
    }
}

#[tokio::test]
async fn a_wrapped_server_that_asks_the_clients_model_during_a_cell_reaches_both_sdk_clients() {
    if !support::sandbox_available() {
        return;
    }
    let code_mode = support::code_mode().display().to_string();
    let server = support::test_server().display().to_string();
    for api in ["session", "client"] {
        let mut args: Vec<&str> = vec!["--stdio", &code_mode, "serve", "--", &server, "--resources", "--"];
        args.extend(["--api", api, "--sampling", "forty-two"]);
        let steps = json!([
            {"op": "call", "tool": "run_python", "arguments": {"code": "print(await ask_model(prompt='the answer?'))"}},
            {"op": "asked"},
        ]);
        let (results, stderr) = python_sdk(&args, &steps).await.expect("the Python SDK is installed");
        let stdout = results[0]["result"]["structuredContent"]["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{results:?} {stderr}"));
        assert_eq!(stdout, "the model wrote: forty-two\n", "{api}");
        let asked: Vec<&Value> = results[1]["result"].as_array().unwrap().iter().collect();
        assert_eq!(asked.len(), 1, "{api}: {asked:?}");
        assert_eq!(asked[0]["params"]["messages"][0]["content"]["text"], "the answer?", "{api}");
    }
}
