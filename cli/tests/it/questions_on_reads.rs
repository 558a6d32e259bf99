//! A wrapped server's question that arrives while a client's request other
//! than a tool call is in flight (a resource read, a prompt, a completion),
//! in gateway mode (`--expose-tools`), with both Python SDK clients: the
//! test server asks `roots/list` and `elicitation/create` in the middle of
//! each (`--ask-on-reads`), as server-everything asks `roots/list` as soon
//! as a session of its own starts, whatever request is in flight then.
//!
//! `ClientSession` (2025-11-25) is asked by a request of its own and its
//! answers reach the server. `mcp.Client` (the stateless 2026-07-28
//! revision) can be asked only through the input-required result of a
//! tool call, so the gateway answers such a question for it with the error
//! the roots chapter of MCP prescribes for a client without roots
//! (`-32601`), and the request goes on to return its own result.

use std::path::PathBuf;

use code_mode_core::testing::NatsServer;
use serde_json::{Value, json};

use crate::support::{self, log_path, python_sdk, service_command};

const ROOT: &str = "file:///srv/project";

/// The test server's arguments: resources, a prompt, completions, and
/// questions during each read, recorded in `log`.
fn server_args(log: &std::path::Path) -> Vec<String> {
    ["--resources", "--ask-on-reads", "--handshake-only", "--log"]
        .iter()
        .map(|s| s.to_string())
        .chain([log.display().to_string()])
        .collect()
}

/// The client's options for `api`: roots and form elicitation declared
/// (so the server asks both).
fn client_options(api: &str) -> Vec<String> {
    ["--api", api, "--roots", ROOT, "--elicit"]
        .iter()
        .map(|s| s.to_string())
        .chain([json!({"name": "Ann"}).to_string()])
        .collect()
}

/// Requests of every kind but a tool call, then the questions the client
/// was asked.
fn steps() -> Value {
    json!([
        {"op": "read_resource", "uri": "test://small"},
        {"op": "get_prompt", "name": "greet", "arguments": {"name": "Ann"}},
        {"op": "complete", "ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "A"}},
        {"op": "list_resources"},
        {"op": "list_prompts"},
        {"op": "list_tools"},
        {"op": "asked"},
    ])
}

/// The outcomes of the server's questions as it recorded them.
fn asked_lines(log: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("asked "))
        .map(str::to_string)
        .collect()
}

/// Each request returned its own result; the server heard the client's
/// answers (ClientSession) or the gateway's `-32601` (mcp.Client), three
/// times each (the read, the prompt, the completion).
fn check(api: &str, results: &[Value], stderr: &str, log: &PathBuf) {
    assert_eq!(results.len(), 7, "{api}: {results:?} {stderr}");
    let ok = |i: usize| -> &Value {
        results[i].get("result").unwrap_or_else(|| panic!("{api}: step {i} failed: {} {stderr}", results[i]))
    };
    assert_eq!(ok(0)["contents"][0]["text"], "small", "{api}: the read's own result");
    assert_eq!(ok(1)["messages"][0]["content"]["text"], "Hello, Ann!", "{api}: the prompt's own result");
    assert_eq!(ok(2)["completion"]["values"], json!(["Ann", "Anton"]), "{api}: the completion's own result");
    let uris: Vec<&str> = ok(3)["resources"].as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    assert!(uris.contains(&"test://small"), "{api}: {uris:?}");
    assert!(!ok(4)["prompts"].as_array().unwrap().is_empty(), "{api}");
    assert!(!ok(5)["tools"].as_array().unwrap().is_empty(), "{api}");
    let asked: Vec<&str> = ok(6).as_array().unwrap().iter().filter_map(|a| a["method"].as_str()).collect();
    let heard = asked_lines(log);
    let expected: Vec<String> = match api {
        // Asked by requests of its own during each request; its answers
        // reach the server.
        "session" => {
            assert_eq!(asked.iter().filter(|m| **m == "roots/list").count(), 3, "{asked:?}");
            assert_eq!(asked.iter().filter(|m| **m == "elicitation/create").count(), 3, "{asked:?}");
            ["roots/list 1 root(s)", "elicitation/create accept"].repeat(3).iter().map(|s| s.to_string()).collect()
        }
        // Never sent a request (a 2026-07-28 client takes none); the server
        // hears "method not found" for each question.
        _ => {
            assert_eq!(asked, Vec::<&str>::new(), "a stateless client is sent no requests");
            ["roots/list error -32601", "elicitation/create error -32601"]
                .repeat(3)
                .iter()
                .map(|s| s.to_string())
                .collect()
        }
    };
    assert_eq!(heard, expected, "{api}: what the server heard of its questions");
}

#[tokio::test]
async fn through_serve_a_servers_question_during_a_read_a_prompt_or_a_completion_does_not_fail_a_stateless_clients_request()
 {
    for api in ["client", "session"] {
        let log = log_path(&format!("questions-on-reads-serve-{api}"));
        let mut line = support::gateway_stdio(&[], &server_args(&log));
        line.extend(client_options(api));
        let args: Vec<&str> = line.iter().map(String::as_str).collect();
        let Some((results, stderr)) = python_sdk(&args, &steps()).await else { return };
        check(api, &results, &stderr, &log);
        let _ = std::fs::remove_file(&log);
    }
}

#[tokio::test]
async fn over_nats_a_servers_question_during_a_read_a_prompt_or_a_completion_does_not_fail_a_stateless_clients_request()
{
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    for api in ["client", "session"] {
        let log = log_path(&format!("questions-on-reads-nats-{api}"));
        let server = server_args(&log);
        let server: Vec<&str> = server.iter().map(String::as_str).collect();
        let mut bridge = service_command(&nats.url(), &users, "bridge", &[], Some(&server));
        let mut bridge = bridge.kill_on_drop(true).spawn().expect("the bridge starts");
        let mut line = support::frontend_stdio(&nats.url(), &users, &["--expose-tools=only"]);
        line.extend(client_options(api));
        let args: Vec<&str> = line.iter().map(String::as_str).collect();
        let Some((results, stderr)) = python_sdk(&args, &steps()).await else { return };
        check(api, &results, &stderr, &log);
        let _ = bridge.kill().await;
        let _ = std::fs::remove_file(&log);
    }
}
