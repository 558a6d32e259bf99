//! Idempotency keys (`_meta` `io.code-mode/idempotency-key`): a
//! `run_python` request whose key the same identity sent within
//! `--task-ttl` gets that run's result (or its task) instead of running
//! again (the wrapped server sees one call); another identity's same key
//! runs anew; the same key with other code is refused. `serve` over HTTP,
//! real Docker cells, rmcp's client with and without tasks.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, RequestMetaObject};
use rmcp::service::{ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::auth::{Client, TokenFile, token_new};
use crate::http::{LEGACY, spawn_http};
use crate::support::{self, log_path, logged_calls};
use crate::task_cells::{connect_as, report_of, settled, start, stateless};

/// Counts at the server, and a random number only a run makes.
const COUNTS: &str = "\
import random
print(await count({}), random.random())
";

/// A plain rmcp client (no tasks) with `client`'s token.
async fn plain(url: &str, client: &Client) -> RunningService<RoleClient, ()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(client.token.clone());
    ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), LEGACY())
        .await
        .expect("the MCP client connects with its token")
}

fn keyed(code: &str, key: &str) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    let meta = json!({"io.code-mode/idempotency-key": key});
    params.meta = Some(RequestMetaObject::from(meta.as_object().unwrap().clone()));
    params
}

async fn keyed_result(client: &RunningService<RoleClient, ()>, code: &str, key: &str) -> CallToolResult {
    match client.peer().call_tool_once(keyed(code, key)).await.expect("run_python answers") {
        CallToolResponse::Complete(result) => result,
        other => panic!("a client without tasks gets a result, not {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_idempotency_key_twice_runs_once_and_both_get_the_same_result_but_not_for_another_identity() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let log = log_path("idempotency");
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--auth-tokens", tokens.arg(), "--allow", "count", "--"]);
    serve.arg(support::test_server()).args(["--log", log.to_str().unwrap()]);
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, _log) = spawn_http(&mut serve).await;

    // A client without tasks: the second request gets the first's result.
    let client = plain(&url, &alice).await;
    let first = keyed_result(&client, COUNTS, "order-4711").await;
    let again = keyed_result(&client, COUNTS, "order-4711").await;
    assert!(support::report(&first)["error"].is_null(), "{first:?}");
    assert_eq!(support::report(&first), support::report(&again), "both get the same result");
    assert_eq!(logged_calls(&log).len(), 1, "one call at the server: {:?}", logged_calls(&log));
    // The same key with other code is refused, and runs nothing.
    let other_code = client.peer().call_tool_once(keyed("print(await count({}))", "order-4711")).await;
    let refused = other_code.expect_err("the same key with other code is refused");
    assert!(refused.to_string().contains("other code"), "{refused}");
    assert_eq!(logged_calls(&log).len(), 1);

    // Another identity's same key is its own: it runs.
    let other = plain(&url, &bob).await;
    let bobs = keyed_result(&other, COUNTS, "order-4711").await;
    assert_ne!(support::report(&bobs), support::report(&first), "bob's run is not alice's");
    assert_eq!(logged_calls(&log).len(), 2, "bob's run made its own call");

    // A client with tasks: the same key gives the same task.
    let tasks = connect_as(&url, &alice, stateless()).await;
    let (id, _) = start(&tasks, COUNTS, Some(json!({"io.code-mode/idempotency-key": "job-1"}))).await;
    let (again_id, _) = start(&tasks, COUNTS, Some(json!({"io.code-mode/idempotency-key": "job-1"}))).await;
    assert_eq!(id, again_id, "the same key gives the same task");
    let (done, _) = settled(&tasks, &id, Duration::from_secs(60)).await;
    let report = report_of(&done);
    assert!(report["error"].is_null(), "{report}");
    // And a plain request with that key gets the task's result.
    let plain_again = keyed_result(&client, COUNTS, "job-1").await;
    assert_eq!(support::report(&plain_again), report);
    assert_eq!(logged_calls(&log).len(), 3, "the task ran once: {:?}", logged_calls(&log));

    // Without a key, each request runs.
    let unkeyed = crate::http::run_python(&client, COUNTS).await;
    assert_ne!(support::report(&unkeyed), support::report(&first));
    assert_eq!(logged_calls(&log).len(), 4);
    let _ = (client.cancel().await, other.cancel().await, tasks.cancel().await);
    let _ = std::fs::remove_file(log);
}
