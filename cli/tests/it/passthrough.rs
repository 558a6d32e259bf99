//! All of MCP through the gateway (`--expose-tools`), with real clients and
//! real servers: the official Python SDK's two clients (`mcp.Client` at its
//! defaults, which speaks the stateless 2026-07-28 protocol, and
//! `ClientSession`, 2025-11-25) in front of npm
//! `@modelcontextprotocol/server-everything`, through `code-mode serve`
//! and through the three services over a real nats-server. What arrives is
//! compared with what the same client gets from the server directly.
//!
//! The checks on what carries data to a server are tried with the test
//! server's resources (`--resources`), whose request log proves what
//! reached it.

use std::path::PathBuf;

use code_mode_core::testing::NatsServer;
use code_mode_core::testing::peers::npm_bin;
use serde_json::{Value, json};

use crate::support::{self, log_path, python_sdk, service_command};

/// A socket no Docker engine listens on: the gateway needs none.
const NO_DOCKER: &str = "unix:///nonexistent/code-mode-test/docker.sock";

/// What the Python client answers a server's questions with.
const MODEL_TEXT: &str = "the client's model answers";
const ROOT: &str = "file:///srv/project";

/// The client options that declare and answer sampling, elicitation and
/// roots.
fn answering(api: &str) -> Vec<String> {
    vec![
        "--api".into(),
        api.into(),
        "--sampling".into(),
        MODEL_TEXT.into(),
        "--elicit".into(),
        json!({"name": "Ann", "check": true, "email": "ann@example.com", "integer": 7, "number": 1.5}).to_string(),
        "--roots".into(),
        ROOT.into(),
    ]
}

/// The result of a step, with what differs only by protocol revision left
/// out (the result type and the caching hints a 2026-07-28 client gets).
fn comparable(step: &Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for key in ["resultType", "ttlMs", "cacheScope", "nextCursor", "_meta"] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut result = step.get("result").cloned().unwrap_or_else(|| panic!("the step failed: {step}"));
    strip(&mut result);
    result
}

/// The steps whose results must be what the server itself answers
/// (`prefix`: what the gateway's prompt names start with).
fn listing_steps(prefix: &str) -> Value {
    json!([
        {"op": "list_resources"},
        {"op": "list_templates"},
        {"op": "list_prompts"},
        {"op": "read_resource", "uri": "demo://resource/static/document/architecture.md"},
        {"op": "get_prompt", "name": format!("{prefix}args-prompt"), "arguments": {"city": "Paris", "state": "France"}},
        {"op": "complete", "ref": {"type": "ref/prompt", "name": format!("{prefix}completable-prompt")},
         "argument": {"name": "department", "value": "E"}},
    ])
}

/// The steps that make server-everything ask and tell its client things
/// while it serves a call.
fn question_steps(api: &str) -> Value {
    let mut steps = json!([
        {"op": "call", "tool": "everything__trigger_sampling_request", "arguments": {"prompt": "a test prompt", "maxTokens": 20}},
        {"op": "call", "tool": "everything__trigger_elicitation_request", "arguments": {}},
        {"op": "call", "tool": "everything__get_roots_list", "arguments": {}},
        {"op": "call", "tool": "everything__trigger_long_running_operation", "arguments": {"duration": 1, "steps": 4}, "progress": true},
        {"op": "asked"},
        {"op": "call", "tool": "everything__toggle_simulated_logging", "arguments": {}},
    ]);
    if api == "session" {
        // Subscriptions are of the 2025-11-25 revision (2026-07-28 listens).
        let items = steps.as_array_mut().unwrap();
        items.push(json!({"op": "set_level", "level": "debug"}));
        items.push(json!({"op": "subscribe", "uri": "demo://resource/dynamic/text/1"}));
        items.push(json!({"op": "call", "tool": "everything__toggle_subscriber_updates", "arguments": {}}));
        items.push(json!({"op": "notifications", "at_least": 1, "wait": 15}));
    }
    steps.as_array_mut().unwrap().push(json!({"op": "logs", "at_least": 1, "wait": 15}));
    steps
}

/// Check what server-everything's questions and notes came to, through the
/// gateway.
fn check_questions(api: &str, results: &[Value], stderr: &str) {
    let text = |i: usize| -> String {
        results[i]["result"]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("step {i}: {} {stderr}", results[i]))
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect()
    };
    assert!(text(0).contains(MODEL_TEXT), "the client's model answered the server: {}", results[0]);
    assert!(text(1).contains("Ann"), "the person's answer reached the server: {}", results[1]);
    assert!(text(2).contains(ROOT), "the client's roots reached the server: {}", results[2]);
    let progress = results[3]["progress"].as_array().unwrap_or_else(|| panic!("{}", results[3]));
    let done: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    assert_eq!(done, [1.0, 2.0, 3.0, 4.0], "every progress note, in order, before the result: {progress:?}");
    let asked = results[4]["result"].as_array().unwrap_or_else(|| panic!("{}", results[4]));
    let methods: Vec<&str> = asked.iter().map(|a| a["method"].as_str().unwrap()).collect();
    // server-everything also asks for the roots as each session of its own
    // starts (over stateless HTTP, one per request), whenever that start
    // falls: the roots questions are checked apart from the order of the
    // other two.
    let others: Vec<&str> = methods.iter().copied().filter(|m| *m != "roots/list").collect();
    assert_eq!(others, ["sampling/createMessage", "elicitation/create"], "{asked:?}");
    assert!(methods.contains(&"roots/list"), "{asked:?}");
    let elicitation = asked.iter().find(|a| a["method"] == "elicitation/create").unwrap();
    let elicited = elicitation["params"]["message"].as_str().unwrap();
    assert!(elicited.starts_with("The server \"everything\" asks"), "named by the asking server: {elicited}");
    let logs = results.last().unwrap()["result"].as_array().unwrap_or_else(|| panic!("{results:?}"));
    assert!(!logs.is_empty(), "the server's log messages reach the client: {results:?}");
    assert!(logs.iter().all(|l| l["logger"].as_str().unwrap_or_default().starts_with("everything")), "{logs:?}");
    if api == "session" {
        let notes = results[results.len() - 2]["result"].as_array().unwrap_or_else(|| panic!("{results:?}"));
        assert!(
            notes.iter().any(|n| n["method"] == "notifications/resources/updated"
                && n["params"]["uri"] == "demo://resource/dynamic/text/1"),
            "the subscription's updates reach the client: {notes:?}"
        );
    }
}

/// A `--config` naming server-everything `everything`.
fn everything_config(tag: &str) -> Option<PathBuf> {
    let everything = npm_bin("mcp-server-everything")?;
    let config = log_path(tag).with_extension("json");
    let servers = json!({"mcpServers": {"everything": {"command": everything, "args": ["stdio"]}}});
    std::fs::write(&config, servers.to_string()).expect("the config is written");
    Some(config)
}

/// Run the steps against server-everything directly and through the
/// gateway (`gateway`: the Python client's command line for it), with each
/// of the SDK's two clients.
async fn compare_with_the_server(gateway: &[String]) {
    let Some(everything) = npm_bin("mcp-server-everything") else { return };
    let everything = everything.display().to_string();
    for api in ["client", "session"] {
        let direct: Vec<String> = ["--stdio", everything.as_str(), "stdio", "--"]
            .iter()
            .map(|s| s.to_string())
            .chain(answering(api))
            .collect();
        let through: Vec<String> = gateway.iter().cloned().chain(answering(api)).collect();
        let direct: Vec<&str> = direct.iter().map(String::as_str).collect();
        let through: Vec<&str> = through.iter().map(String::as_str).collect();
        let Some((own, _)) = python_sdk(&direct, &listing_steps("")).await else { return };
        let Some((gated, stderr)) = python_sdk(&through, &listing_steps("everything__")).await else { return };
        assert_eq!(own.len(), gated.len(), "{gated:?} {stderr}");
        for (i, (own, gated)) in own.iter().zip(&gated).enumerate() {
            let mut expected = comparable(own);
            // With --config the server's prompt and resource names carry
            // its name, as its tools do; URIs never change.
            rename(&mut expected);
            assert_eq!(comparable(gated), expected, "{api}: step {i} arrives as the server sent it");
        }
        // A 2026-07-28 client opts into log messages with each request.
        let listening: Vec<&str> = through.iter().copied().chain(["--log-level", "debug"]).collect();
        let questions = if api == "client" { &listening } else { &through };
        let Some((results, stderr)) = python_sdk(questions, &question_steps(api)).await else { return };
        check_questions(api, &results, &stderr);
    }
}

/// The names a `--config` server's resources, templates and prompts get.
fn rename(value: &mut Value) {
    for key in ["resources", "resourceTemplates", "prompts"] {
        if let Some(Value::Array(items)) = value.get_mut(key) {
            for item in items {
                if let Some(Value::String(name)) = item.get_mut("name") {
                    *name = format!("everything__{name}");
                }
            }
        }
    }
}

#[tokio::test]
async fn through_serve_server_everythings_resources_prompts_completions_and_questions_reach_both_sdk_clients() {
    let Some(config) = everything_config("passthrough-serve") else { return };
    let code_mode = support::code_mode().display().to_string();
    let gateway: Vec<String> =
        ["--stdio", &code_mode, "serve", "--expose-tools=only", "--config", config.to_str().unwrap(), "--"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    // SAFETY of the environment: the SDK gives the command its own minimal
    // environment; no Docker engine is needed either way.
    compare_with_the_server(&gateway).await;
    let _ = std::fs::remove_file(&config);
}

#[tokio::test]
async fn over_http_server_everythings_resources_prompts_completions_and_questions_reach_both_sdk_clients() {
    let Some(config) = everything_config("passthrough-http") else { return };
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--expose-tools=only", "--http", "127.0.0.1:0", "--config", config.to_str().unwrap()]);
    serve.env("DOCKER_HOST", NO_DOCKER).kill_on_drop(true);
    let (_child, url, _log) = crate::http::spawn_http(&mut serve).await;
    // Stateless 2026-07-28 requests (mcp.Client) and an MCP session
    // (ClientSession) over streamable HTTP.
    compare_with_the_server(&["--url".to_string(), url]).await;
    let _ = std::fs::remove_file(&config);
}

#[tokio::test]
async fn over_nats_server_everythings_resources_prompts_completions_and_questions_reach_both_sdk_clients() {
    let Some(config) = everything_config("passthrough-nats") else { return };
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let mut bridge = service_command(&nats.url(), &users, "bridge", &["--config", config.to_str().unwrap()], None);
    let _bridge = bridge.spawn().expect("the bridge starts");
    let gateway = support::frontend_stdio(&nats.url(), &users, &["--expose-tools=only"]);
    compare_with_the_server(&gateway).await;
    let _ = std::fs::remove_file(&config);
}

/// `code-mode serve --expose-tools=only [args] -- <test server> --resources
/// --log LOG` as the Python client's command line, and the log.
fn resources_gateway(tag: &str, args: &[&str]) -> (Vec<String>, PathBuf) {
    let log = log_path(tag);
    let line = support::gateway_stdio(args, &["--resources".into(), "--log".into(), log.display().to_string()]);
    (line, log)
}

async fn sdk(line: &[String], extra: &[&str], steps: Value) -> (Vec<Value>, String) {
    let args: Vec<&str> = line.iter().map(String::as_str).chain(extra.iter().copied()).collect();
    python_sdk(&args, &steps).await.expect("the Python SDK is installed")
}

/// Every request the test server logged (`<method> <tool, URI or prompt>`).
fn logged_requests(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The error message of a failed step.
fn error_of(step: &Value) -> String {
    step["error"].as_str().unwrap_or_else(|| panic!("the step should have failed: {step}")).to_string()
}

#[tokio::test]
async fn a_policy_denies_resources_by_uri_pattern_prompts_and_sampling_naming_its_rule_and_the_server_never_sees_them()
{
    if npm_bin("mcp-server-everything").is_none() {
        return;
    }
    let policy = log_path("passthrough-policy").with_extension("json");
    std::fs::write(
        &policy,
        json!({"version": "1", "default": "allow",
               "resources": {"test://*": {"action": "deny", "reason": "the server's texts stay there"},
                             "test://small": {"action": "allow"}},
               "prompts": {"greet": {"action": "deny", "reason": "no greetings"}},
               "sampling": {"action": "deny", "reason": "servers get no model"}})
        .to_string(),
    )
    .unwrap();
    let audit = log_path("passthrough-policy-audit");
    let (line, log) = resources_gateway(
        "passthrough-policy",
        &["--policy", policy.to_str().unwrap(), "--audit", audit.to_str().unwrap()],
    );
    for api in ["session", "client"] {
        let steps = json!([
            {"op": "list_resources"},
            {"op": "list_prompts"},
            {"op": "read_resource", "uri": "test://small"},
            {"op": "read_resource", "uri": "test://secret"},
            {"op": "read_resource", "uri": "test://big/10"},
            {"op": "get_prompt", "name": "greet", "arguments": {"name": "Ann"}},
            {"op": "call", "tool": "ask_model", "arguments": {"prompt": "the server wants the model"}},
            {"op": "asked"},
        ]);
        let (results, stderr) = sdk(&line, &["--api", api, "--sampling", MODEL_TEXT], steps).await;
        assert_eq!(results.len(), 8, "{results:?} {stderr}");
        let listed: Vec<&str> =
            results[0]["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
        assert_eq!(listed, ["test://small"], "denied resources are not listed");
        assert_eq!(results[1]["result"]["prompts"], json!([]), "a denied prompt is not listed");
        assert_eq!(results[2]["result"]["contents"][0]["text"], "small", "the allowed exact URI beats the pattern");
        for (i, what) in [(3, "test://secret"), (4, "test://big/10")] {
            let refused = error_of(&results[i]);
            assert!(
                refused.contains(&format!(
                    "resources/read {what}: denied by policy (/resources/test:~1~1*): the server's texts stay there"
                )),
                "{api}: {refused}"
            );
        }
        let refused = error_of(&results[5]);
        assert!(refused.contains("prompts/get greet: denied by policy (/prompts/greet): no greetings"), "{refused}");
        let answer = results[6]["result"]["content"][0]["text"].as_str().unwrap();
        // Relayed to ClientSession, passed through to mcp.Client as the
        // server's own input-required result: judged alike.
        assert!(answer.contains("(/sampling): servers get no model"), "{api}: {answer}");
        assert_eq!(results[7]["result"], json!([]), "the client was never asked");
    }
    let seen = logged_requests(&log);
    assert!(seen.iter().any(|l| l == "resources/read test://small"), "{seen:?}");
    assert!(
        !seen.iter().any(|l| l.contains("test://secret") || l.contains("test://big") || l.starts_with("prompts/get")),
        "denied requests never reached the server: {seen:?}"
    );
    // Every decision is an audit record naming the request, and a replay
    // through a policy that allows them says what would change.
    let records = std::fs::read_to_string(&audit).unwrap();
    let denied: Vec<Value> = records
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "call" && r["decision"] == "denied")
        .collect();
    let methods: Vec<&str> = denied.iter().filter_map(|r| r["method"].as_str()).collect();
    assert!(methods.contains(&"resources/read") && methods.contains(&"prompts/get"), "{denied:?}");
    assert!(methods.contains(&"sampling/createMessage"), "{denied:?}");
    let open = log_path("passthrough-policy-open").with_extension("json");
    std::fs::write(&open, json!({"version": "1", "default": "allow"}).to_string()).unwrap();
    let replay = std::process::Command::new(support::code_mode())
        .args(["policy", "replay", "--policy", open.to_str().unwrap(), audit.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(
        replay.status.code(),
        Some(1),
        "something would change: {said} {}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert!(said.contains("resources/read test://secret: 2 of 2 calls now allowed"), "{said}");
    assert!(said.contains("prompts/get greet: 2 of 2 calls now allowed"), "{said}");
    assert!(said.contains("sampling/createMessage: 2 of 2 calls now allowed"), "{said}");
    for file in [policy, audit, open, log] {
        let _ = std::fs::remove_file(file);
    }
}

#[tokio::test]
async fn after_a_private_servers_resource_is_read_a_public_servers_resources_prompts_and_a_sampling_answer_are_refused()
{
    let config = log_path("passthrough-private").with_extension("json");
    let (private_log, public_log) = (log_path("passthrough-private-a"), log_path("passthrough-private-b"));
    let server = support::test_server();
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "vault": {"command": server, "args": ["--resources", "--resource-host", "vault", "--log", private_log], "private": true},
            "wiki": {"command": server, "args": ["--resources", "--resource-host", "wiki", "--log", public_log]},
        }})
        .to_string(),
    )
    .unwrap();
    let code_mode = support::code_mode().display().to_string();
    let line: Vec<String> =
        ["--stdio", &code_mode, "serve", "--expose-tools=only", "--config", config.to_str().unwrap(), "--"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let steps = json!([
        // Before any private data: the public server serves.
        {"op": "read_resource", "uri": "test://wiki/big/3"},
        {"op": "call", "tool": "wiki__ask_model", "arguments": {"prompt": "before"}},
        // The public server asks the client's model a second after its
        // call began; meanwhile the client reads the private server's
        // resource, which taints the session: the model's answer, written
        // after private data was read, does not reach the public server.
        {"op": "together", "stagger": 0.3, "steps": [
            {"op": "call", "tool": "wiki__ask_model", "arguments": {"prompt": "during", "delay": 1.5}},
            {"op": "read_resource", "uri": "test://vault/secret"},
        ]},
        // The public server gets nothing more: no resource, no prompt, no
        // completion, no call.
        {"op": "read_resource", "uri": "test://wiki/small"},
        {"op": "get_prompt", "name": "wiki__greet", "arguments": {"name": "Ann"}},
        {"op": "complete", "ref": {"type": "ref/prompt", "name": "wiki__greet"}, "argument": {"name": "name", "value": "A"}},
        {"op": "call", "tool": "wiki__ask_model", "arguments": {"prompt": "after"}},
        // The private server still does, and its questions are answered.
        {"op": "get_prompt", "name": "vault__greet", "arguments": {"name": "Ann"}},
        {"op": "call", "tool": "vault__ask_model", "arguments": {"prompt": "private"}},
        {"op": "asked"},
    ]);
    for api in ["session", "client"] {
        let (results, stderr) = sdk(&line, &["--api", api, "--sampling", MODEL_TEXT], steps.clone()).await;
        assert_eq!(results.len(), 10, "{results:?} {stderr}");
        assert_eq!(results[0]["result"]["contents"][0]["text"], "xxx", "{api}: {}", results[0]);
        let before = results[1]["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(before, format!("the model wrote: {MODEL_TEXT}"), "{api}");
        let together = &results[2]["result"];
        let during = together[0]["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{together}"));
        assert!(
            during.contains("a sampling answer to wiki") && during.contains("private-data rule"),
            "{api}: {during}"
        );
        assert_eq!(together[1]["result"]["contents"][0]["text"], "the secret of the test server", "{api}");
        for i in [3, 4, 5] {
            let refused = error_of(&results[i]);
            assert!(refused.contains("refused by the private-data rule"), "{api}: step {i}: {refused}");
        }
        let after = results[6]["result"]["content"][0]["text"].as_str().unwrap();
        assert!(after.contains("refused by the private-data rule"), "{api}: {after}");
        assert_eq!(results[7]["result"]["messages"][0]["content"]["text"], "Hello, Ann!", "{api}");
        let private = results[8]["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(private, format!("the model wrote: {MODEL_TEXT}"), "{api}");
        let asked = results[9]["result"].as_array().unwrap();
        assert_eq!(
            asked.len(),
            2,
            "the client's model was asked before the taint and by the private server, never for the public one after: {asked:?}"
        );
    }
    let public = logged_requests(&public_log);
    assert!(
        !public.iter().any(|l| l == "resources/read test://wiki/small" || l.starts_with("prompts/get")),
        "the public server got nothing after the taint: {public:?}"
    );
    for file in [config, private_log, public_log] {
        let _ = std::fs::remove_file(file);
    }
}

#[tokio::test]
async fn a_resource_over_the_result_limit_is_refused_not_cut_and_one_under_it_arrives_whole() {
    let (line, log) = resources_gateway("passthrough-size", &[]);
    let steps = json!([
        {"op": "read_resource", "uri": "test://big/70000"},
        {"op": "read_resource", "uri": "test://big/60000"},
    ]);
    let (results, stderr) = sdk(&line, &["--api", "session"], steps).await;
    let refused = error_of(&results[0]);
    assert!(
        refused.contains("resources/read test://big/70000: the result is")
            && refused.contains("over the 65536 byte limit (refused, not cut)"),
        "{refused} {stderr}"
    );
    let text = results[1]["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{results:?}"));
    assert_eq!(text.len(), 60_000);
    let _ = std::fs::remove_file(log);
}

#[tokio::test]
async fn a_question_the_server_withdraws_is_cancelled_at_the_client_and_the_call_goes_on() {
    let (line, log) = resources_gateway("passthrough-withdraw", &[]);
    let steps = json!([
        {"op": "call", "tool": "ask_model", "arguments": {"prompt": "take your time", "withdraw_after": 1}},
        // The cancellation reaches the client's callback on its own way,
        // possibly just after the call's result: wait for it (bounded).
        {"op": "asked", "at_least": 2, "wait": 10},
    ]);
    let client = ["--api", "session", "--sampling", MODEL_TEXT, "--sampling-delay", "20"];
    let started = std::time::Instant::now();
    let (results, stderr) = sdk(&line, &client, steps).await;
    let text = results[0]["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{results:?} {stderr}"));
    assert_eq!(text, "withdrawn", "{results:?}");
    let asked: Vec<&str> =
        results[1]["result"].as_array().unwrap().iter().map(|q| q["method"].as_str().unwrap()).collect();
    assert_eq!(
        asked,
        ["sampling/createMessage", "cancelled"],
        "the client's question was cancelled: {results:?} {stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "the client was not left waiting 20 s");
    let _ = std::fs::remove_file(log);
}

#[tokio::test]
async fn a_person_may_take_longer_than_the_call_timeout_to_answer_a_servers_question() {
    // One second per call; the client's model takes two to answer.
    let (line, log) = resources_gateway("passthrough-slow-answer", &["--call-timeout", "1"]);
    // Asked by a request of its own (ClientSession, 2025-11-25) or through
    // an input-required result (mcp.Client's default, 2026-07-28).
    for api in ["session", "client"] {
        let steps = json!([{"op": "call", "tool": "ask_model", "arguments": {"prompt": "think it over"}}]);
        let client = ["--api", api, "--sampling", MODEL_TEXT, "--sampling-delay", "2"];
        let (results, stderr) = sdk(&line, &client, steps).await;
        let text = results[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{api}: {results:?} {stderr}"));
        assert_eq!(text, format!("the model wrote: {MODEL_TEXT}"), "{api}: {results:?}");
    }
    // A client that cannot be asked gets the call timeout alone.
    let steps = json!([{"op": "call", "tool": "sleep", "arguments": {"seconds": 3}}]);
    let (results, _) = sdk(&line, &["--api", "session"], steps).await;
    let slow = results[0]["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(slow, "sleep: no answer within 1 s", "{results:?}");
    let _ = std::fs::remove_file(log);
}

mod cancelled {
    use std::time::Duration;

    use rmcp::model::{CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use serde_json::json;

    use crate::support::{self, Deployment, log_path};

    #[tokio::test]
    async fn through_serve_a_client_that_cancels_a_direct_call_cancels_it_at_the_wrapped_server() {
        cancel_reaches_the_server(Deployment::AllInOne).await;
    }

    #[tokio::test]
    async fn over_nats_a_client_that_cancels_a_direct_call_cancels_it_at_the_wrapped_server() {
        cancel_reaches_the_server(Deployment::OverNats).await;
    }

    async fn cancel_reaches_the_server(deployment: Deployment) {
        let log = log_path("passthrough-cancel");
        let (client, _pid, _guards) =
            support::start(deployment, &["--expose-tools=only"], &["--log", log.to_str().unwrap()]).await;
        let mut params = CallToolRequestParams::new("sleep");
        params.arguments = Some(json!({"seconds": 30}).as_object().unwrap().clone());
        let call = client
            .peer()
            .send_cancellable_request(
                ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await
            .expect("the call is sent");
        // Until the call has reached the server.
        let reached = crate::support::server_logged(&log, "tools/call sleep", Duration::from_secs(10)).await;
        assert!(reached, "the call reached the server: {:?}", std::fs::read_to_string(&log));
        call.cancel(Some("the client gave up".into())).await.expect("the cancel is sent");
        let cancelled = crate::support::server_logged(&log, "notifications/cancelled", Duration::from_secs(5)).await;
        assert!(cancelled, "the server heard of the cancel: {:?}", std::fs::read_to_string(&log));
        // The session goes on.
        let mut add = CallToolRequestParams::new("add");
        add.arguments = Some(json!({"a": 1, "b": 2}).as_object().unwrap().clone());
        let sum = client.peer().call_tool(add).await.expect("add answers");
        assert_eq!(sum.structured_content, Some(json!({"sum": 3})));
        client.cancel().await.ok();
        let _ = std::fs::remove_file(log);
    }
}

mod lists_changed {
    use std::time::Duration;

    use rmcp::ClientHandler;
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::{NotificationContext, RoleClient};
    use serde_json::json;
    use tokio::sync::mpsc;

    use crate::support::{self, Deployment};

    /// A client handler that records which lists the gateway says changed.
    struct Recorder {
        seen: mpsc::UnboundedSender<&'static str>,
    }

    impl ClientHandler for Recorder {
        async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
            let _ = self.seen.send("resources");
        }

        async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
            let _ = self.seen.send("prompts");
        }

        async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
            let _ = self.seen.send("tools");
        }
    }

    #[tokio::test]
    async fn through_serve_a_resource_and_a_prompt_a_server_adds_are_announced_and_listed() {
        announced(Deployment::AllInOne).await;
    }

    #[tokio::test]
    async fn over_nats_a_resource_and_a_prompt_a_server_adds_are_announced_and_listed() {
        announced(Deployment::OverNats).await;
    }

    async fn announced(deployment: Deployment) {
        let (seen, mut heard) = mpsc::unbounded_channel();
        let (client, _pid, _guards) =
            support::start_with(deployment, &["--expose-tools=only"], &["--resources"], Recorder { seen }).await;
        let peer = client.peer().clone();
        let prompts = peer.list_all_prompts().await.unwrap();
        assert_eq!(prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["greet"]);
        let mut publish = CallToolRequestParams::new("publish");
        publish.arguments = Some(json!({"name": "late"}).as_object().unwrap().clone());
        peer.call_tool(publish).await.expect("publish answers");
        let mut told = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !(told.contains(&"resources") && told.contains(&"prompts")) {
            match tokio::time::timeout_at(deadline, heard.recv()).await {
                Ok(Some(list)) => told.push(list),
                _ => panic!("the client is told within 20 s that both lists changed (told: {told:?})"),
            }
        }
        assert!(!told.contains(&"tools"), "the tools did not change: {told:?}");
        let prompts = peer.list_all_prompts().await.unwrap();
        assert!(prompts.iter().any(|p| p.name == "late"), "{prompts:?}");
        let resources = peer.list_all_resources().await.unwrap();
        assert!(resources.iter().any(|r| r.uri == "test://published/late"), "{resources:?}");
        client.cancel().await.ok();
    }
}
