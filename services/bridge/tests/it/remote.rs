//! Remote wrapped servers: config entries with `url` (and `headers`) reach a
//! real test server speaking streamable HTTP on 127.0.0.1
//! (`code-mode-test-server --http 127.0.0.1:0`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use code_mode_bridge::WrappedServer;
use code_mode_bridge::config;
use serde_json::{Value, json};

use code_mode_core::testing::HttpTestServer;

use crate::support::{calls_in_log, close, ok, refused, start_prefixed as start, test_server, tool_call, unique_path};

/// Write a config file of these servers.
fn config_file(tag: &str, servers: Value) -> PathBuf {
    let path = unique_path(tag).with_extension("json");
    std::fs::write(&path, json!({ "mcpServers": servers }).to_string()).expect("the config file is written");
    path
}

/// Parse a config file, answering `${VAR}` from `vars` only.
fn parse(path: &Path, vars: &[(&str, &str)]) -> Result<Vec<WrappedServer>, config::ConfigError> {
    let text = std::fs::read_to_string(path).expect("the config file is read");
    config::parse(path, &text, |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
}

#[tokio::test]
async fn a_remote_servers_tools_are_wrapped_with_the_same_names_allow_and_private_rules() {
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let local_log = unique_path("local");
    let path = config_file(
        "wrapped",
        json!({
            "web": {"type": "http", "url": remote.url, "allow": ["add", "echo", "get_header"], "private": ["echo"]},
            "local": {"command": test_server(), "args": ["--log", local_log.display().to_string()], "allow": ["add"]},
        }),
    );
    let (bridge, closer, cancel) = start(parse(&path, &[]).expect("it parses")).await.expect("both start");
    let catalog = bridge.catalog();
    let mut names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["local__add", "web__add", "web__echo", "web__get_header"]);
    let private: Vec<&str> = catalog.private_tools().collect();
    assert_eq!(private, ["web__echo"]);

    assert_eq!(ok(bridge.call(&tool_call("web__add", json!({"a": 40, "b": 2}), 1)).await), "{\"sum\":42}");
    assert_eq!(ok(bridge.call(&tool_call("local__add", json!({"a": 1, "b": 2}), 2)).await), "{\"sum\":3}");
    // A tool the remote lists but the allowlist drops is refused here and
    // never reaches it.
    let message = refused(bridge.call(&tool_call("web__get_env", json!({"name": "HOME"}), 3)).await);
    assert!(message.contains("web__get_env"), "{message}");
    assert_eq!(calls_in_log(&remote.log), ["add"], "only the allowed call reached the remote");
    assert_eq!(calls_in_log(&local_log), ["add"]);
    close(closer, cancel).await;
}

#[tokio::test]
async fn headers_with_var_references_reach_the_remote_server() {
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let path = config_file(
        "headers",
        json!({"web": {
            "url": remote.url,
            "headers": {"Authorization": "Bearer ${CM_REMOTE_TOKEN}", "X-Plain": "as written"},
        }}),
    );
    let servers = parse(&path, &[("CM_REMOTE_TOKEN", "s3cret")]).expect("it parses");
    let (bridge, closer, cancel) = start(servers).await.expect("it starts");
    let header = |name: &str, i| tool_call("web__get_header", json!({ "name": name }), i);
    assert_eq!(ok(bridge.call(&header("authorization", 1)).await), "Bearer s3cret");
    assert_eq!(ok(bridge.call(&header("x-plain", 2)).await), "as written");
    assert_eq!(ok(bridge.call(&header("x-not-sent", 3)).await), "<unset>");
    close(closer, cancel).await;
}

#[test]
fn an_unset_variable_in_headers_stops_startup_naming_the_entry_the_key_and_the_variable() {
    let path = config_file(
        "unset",
        json!({"web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${CM_REMOTE_NEVER_SET}"}}}),
    );
    let err = config::load(&path).expect_err("an unset variable is refused").to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("server \"web\": key \"headers\".Authorization: ${CM_REMOTE_NEVER_SET} is not set"), "{err}");
}

#[tokio::test]
async fn a_remote_server_that_is_down_fails_startup_naming_the_entry_within_the_start_timeout() {
    // A port nobody listens on: the connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // A port that accepts connections but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}/mcp", silent.local_addr().unwrap());
    for (tag, url, why) in
        [("refused", format!("http://127.0.0.1:{port}/mcp"), "could not start"), ("silent", silent_url, "no answer")]
    {
        let path = config_file(tag, json!({"web": {"url": url}}));
        let mut servers = parse(&path, &[]).expect("it parses");
        servers[0].spec.start_timeout = Duration::from_secs(3);
        let started = tokio::time::timeout(Duration::from_secs(10), start(servers))
            .await
            .expect("startup gives up within the start timeout");
        let Err(err) = started else { panic!("{tag}: startup should fail") };
        let err = err.to_string();
        assert!(err.contains("\"web\"") && err.contains(&url) && err.contains(why), "{tag}: {err}");
    }
}

#[tokio::test]
async fn a_remote_server_that_comes_back_is_reconnected() {
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let addr = remote.addr().to_string();
    let path = config_file("again", json!({"web": {"url": remote.url}}));
    let (bridge, closer, cancel) = start(parse(&path, &[]).expect("it parses")).await.expect("it starts");
    assert_eq!(ok(bridge.call(&tool_call("web__count", json!({}), 1)).await), "1");

    drop(remote);
    // While it is gone the calls fail; once it is back on the same address
    // the bridge reconnects and calls reach the new process.
    let again = HttpTestServer::start(&addr, &[]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut index = 2;
    loop {
        let reply = bridge.call(&tool_call("web__count", json!({}), index)).await;
        index += 1;
        if let code_mode_proto::ToolReply::Ok { value } = &reply {
            assert_eq!(value, "1", "the call reached the new process");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not reconnected in time: {reply:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(calls_in_log(&again.log), ["count"]);
    close(closer, cancel).await;
}

#[tokio::test]
async fn an_https_url_is_reached_over_tls_and_a_server_without_tls_fails_startup_naming_the_entry() {
    let remote = HttpTestServer::start("127.0.0.1:0", &[]);
    let url = remote.url.replacen("http://", "https://", 1);
    let path = config_file("tls", json!({"web": {"url": url}}));
    let mut servers = parse(&path, &[]).expect("it parses");
    servers[0].spec.start_timeout = Duration::from_secs(5);
    let Err(err) = start(servers).await else { panic!("a TLS handshake with a plain HTTP server fails") };
    let err = err.to_string();
    assert!(err.contains("\"web\"") && err.contains(&url) && err.contains("could not start"), "{err}");
    // The request itself failed (the TLS handshake), not a crashed client.
    assert!(err.contains("error sending request"), "{err}");
    assert!(std::fs::read_to_string(&remote.log).unwrap_or_default().is_empty(), "nothing reached the server");
}
