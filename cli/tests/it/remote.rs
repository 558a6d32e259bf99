//! A remote wrapped server (streamable HTTP) next to stdio ones, end to end:
//! `code-mode serve --config FILE` driven by a real MCP client, the real
//! sandbox, and the real test server, twice over stdio and once over HTTP
//! on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use code_mode_core::testing::HttpTestServer;
use serde_json::{Value, json};

use crate::support::{self, connect_client, log_path, logged_calls, report, run_python};

/// Write a config file of these entries (name -> entry).
fn config_file(tag: &str, servers: Value) -> PathBuf {
    let path = std::env::temp_dir().join(format!("code-mode-remote-{tag}-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, json!({ "mcpServers": servers }).to_string()).expect("the config is written");
    path
}

/// A stdio test-server entry logging to `log`.
fn stdio_entry(log: &Path) -> Value {
    json!({"command": support::test_server(), "args": ["--log", log.display().to_string()]})
}

#[tokio::test]
async fn two_stdio_servers_and_a_remote_one_answer_in_one_cell() {
    if !support::sandbox_available() {
        return;
    }
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let (log_one, log_two) = (log_path("remote-one"), log_path("remote-two"));
    let config = config_file(
        "three",
        json!({
            "one": stdio_entry(&log_one),
            "two": stdio_entry(&log_two),
            "web": {
                "type": "http",
                "url": remote.url,
                "headers": {"Authorization": "Bearer ${CM_REMOTE_E2E_TOKEN}"},
                "allow": ["add", "echo", "get_header"],
            },
        }),
    );
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("serve").arg("--config").arg(&config).env("CM_REMOTE_E2E_TOKEN", "t0ken");
    let (client, _) = connect_client(cmd).await;
    let code = "print(await one__add(a=1, b=2), await two__echo(text='two'), await web__add(a=40, b=2))\n\
                print(await web__get_header(name='authorization'))\n\
                print(sorted(n for n in TOOLS if n.startswith('web__')))\n\
                try:\n    await web__get_env(name='HOME')\nexcept Exception as e:\n    print(type(e).__name__)";
    let result = run_python(&client, code).await;
    let report = report(&result);
    assert_eq!(report["error"], Value::Null, "{report}");
    let stdout = report["stdout"].as_str().expect("the cell ran");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..3],
        ["{\"sum\":3} two {\"sum\":42}", "Bearer t0ken", "['web__add', 'web__echo', 'web__get_header']"]
    );
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(logged_calls(&log_one), ["tools/call add"]);
    assert_eq!(logged_calls(&log_two), ["tools/call echo"]);
    assert_eq!(
        logged_calls(&remote.log),
        ["tools/call add", "tools/call get_header"],
        "the tool left out by allow never reached the remote"
    );
    client.cancel().await.unwrap();
}

#[test]
fn an_unset_variable_in_headers_stops_startup_naming_it() {
    let config = config_file(
        "unset",
        json!({"web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Token": "${CM_REMOTE_NEVER_SET}"}}}),
    );
    let output = Command::new(support::code_mode())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env_remove("CM_REMOTE_NEVER_SET")
        .stdin(Stdio::null())
        .output()
        .expect("code-mode runs");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let wanted =
        format!("{}: server \"web\": key \"headers\".X-Token: ${{CM_REMOTE_NEVER_SET}} is not set", config.display());
    assert!(stderr.contains(&wanted), "{stderr}");
}

#[tokio::test]
async fn serve_url_wraps_one_remote_server_whose_tools_keep_their_names_and_get_its_headers() {
    if !support::sandbox_available() {
        return;
    }
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.args(["serve", "--url", &remote.url, "--header", "Authorization: Bearer t0ken", "--header", "X-Team:blue"]);
    cmd.args(["--allow", "add", "--allow", "get_header"]);
    let (client, _) = connect_client(cmd).await;
    let code = "print(await add(a=40, b=2), await get_header(name='authorization'), await get_header(name='x-team'))\n\
                print(sorted(TOOLS))";
    let report = report(&run_python(&client, code).await);
    assert_eq!(report["error"], Value::Null, "{report}");
    assert_eq!(report["stdout"], "{\"sum\":42} Bearer t0ken blue\n['add', 'get_header']\n");
    assert_eq!(logged_calls(&remote.log), ["tools/call add", "tools/call get_header", "tools/call get_header"]);
    client.cancel().await.unwrap();
}

#[test]
fn serve_url_refuses_a_header_that_is_not_name_colon_value_and_a_command_beside_it() {
    let run = |args: &[&str]| {
        let output = Command::new(support::code_mode()).args(args).stdin(Stdio::null()).output().expect("runs");
        assert!(!output.status.success(), "{args:?}: {output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let bad = run(&["serve", "--url", "http://127.0.0.1:9/mcp", "--header", "no colon"]);
    assert!(bad.contains("--header") && bad.contains("\"no colon\" is not NAME:VALUE"), "{bad}");
    let both = run(&["serve", "--url", "http://127.0.0.1:9/mcp", "--", "some-server"]);
    assert!(both.contains("--url") && both.contains("cannot be used with"), "{both}");
}

/// The answers of `get_header` for `names`, called directly by `client`.
async fn headers_seen<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    names: &[&str],
) -> Vec<String> {
    let mut seen = Vec::new();
    for name in names {
        let mut params = rmcp::model::CallToolRequestParams::new("get_header");
        params.arguments = Some(json!({ "name": name }).as_object().unwrap().clone());
        let result = client.call_tool(params).await.expect("get_header answers");
        let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone());
        seen.push(text.unwrap_or_else(|| format!("no text: {result:?}")));
    }
    seen
}

#[tokio::test]
async fn serve_url_speaks_2026_07_28_to_a_server_that_offers_it_with_mcp_method_on_requests_and_mcp_param_for_a_tool_that_declares_it()
 {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::ClientLifecycleMode;
    // The test server offers both revisions; `get_header` declares
    // `x-mcp-header: Name` on its argument, and the server refuses a
    // 2026-07-28 call of it without `Mcp-Param-Name` (or any request
    // without `Mcp-Method`).
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let mut serve = tokio::process::Command::new(support::code_mode());
    // Stopped with the test (it would outlive it: nextest flagged it leaky).
    serve.kill_on_drop(true);
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--url", &remote.url]);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let names = ["mcp-protocol-version", "mcp-method", "mcp-param-name"];
    // A client of the handshake: its calls go over code-mode's shared session.
    let legacy = crate::http::connect(&url, (), ClientLifecycleMode::Initialize).await;
    assert_eq!(headers_seen(&legacy, &names).await, ["2026-07-28", "tools/call", "mcp-param-name"]);
    // A stateless 2026-07-28 client: over code-mode's stateless session.
    let discover = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let stateless = crate::http::connect(&url, (), discover).await;
    assert_eq!(headers_seen(&stateless, &names).await, ["2026-07-28", "tools/call", "mcp-param-name"]);
    assert_eq!(logged_calls(&remote.log).len(), 6, "every call reached the server");
    legacy.cancel().await.unwrap();
    stateless.cancel().await.unwrap();
}
