//! The name a server wrapped by its command goes by (`serve -- CMD`): a
//! short name from the command (or `--name`), never the host path of its
//! program, wherever a client or a person reads it: the logger of its log
//! messages and the question a person is asked. Both Python SDK clients
//! (`mcp.Client` at its defaults, stateless; `ClientSession`).

use code_mode_core::testing::peers::npm_bin;
use serde_json::{Value, json};

use crate::support::{self, python_sdk};

/// Through `serve --expose-tools=only [name] -- <server-everything> stdio`:
/// ask the person something, turn the server's log on, hear its logs; the
/// question asked and the loggers heard.
async fn questions_and_loggers(api: &str, name: &[&str]) -> Option<(String, Vec<String>)> {
    let everything = npm_bin("mcp-server-everything")?.display().to_string();
    let code_mode = support::code_mode().display().to_string();
    let elicit = json!({"name": "Ann", "check": true, "email": "ann@example.com", "integer": 7, "number": 1.5});
    let mut args: Vec<String> = vec!["--stdio".into(), code_mode, "serve".into(), "--expose-tools=only".into()];
    args.extend(name.iter().map(|s| s.to_string()));
    args.extend(["--".into(), everything, "stdio".into(), "--".into(), "--api".into(), api.into()]);
    args.extend(["--elicit".into(), elicit.to_string()]);
    if api == "client" {
        // A 2026-07-28 client opts into log messages with each request.
        args.extend(["--log-level".into(), "debug".into()]);
    }
    let mut steps = json!([
        {"op": "call", "tool": "trigger_elicitation_request", "arguments": {}},
        {"op": "asked"},
        {"op": "call", "tool": "toggle_simulated_logging", "arguments": {}},
        {"op": "logs", "at_least": 1, "wait": 15},
    ]);
    if api == "session" {
        steps.as_array_mut().unwrap().insert(2, json!({"op": "set_level", "level": "debug"}));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (results, stderr) = python_sdk(&args, &steps).await?;
    let asked = results[1]["result"].as_array().unwrap_or_else(|| panic!("{results:?} {stderr}"));
    let question = asked
        .iter()
        .find(|a| a["method"] == "elicitation/create")
        .unwrap_or_else(|| panic!("{asked:?}"))["params"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    let logs = results.last().unwrap()["result"].as_array().unwrap_or_else(|| panic!("{results:?} {stderr}"));
    let loggers = logs.iter().map(|l: &Value| l["logger"].as_str().unwrap_or_default().to_string()).collect();
    Some((question, loggers))
}

#[tokio::test]
async fn a_server_wrapped_by_its_path_is_named_by_its_file_name_in_its_questions_and_logs_for_both_sdk_clients() {
    for api in ["client", "session"] {
        let Some((question, loggers)) = questions_and_loggers(api, &[]).await else { return };
        assert!(question.starts_with("The server \"mcp-server-everything\" asks"), "{api}: {question}");
        assert!(!loggers.is_empty(), "{api}: its logs are heard");
        assert!(
            loggers.iter().all(|l| l.starts_with("mcp-server-everything") && !l.contains('/')),
            "{api}: {loggers:?}"
        );
    }
}

#[tokio::test]
async fn name_gives_the_wrapped_server_the_name_its_questions_and_logs_carry_for_both_sdk_clients() {
    for api in ["client", "session"] {
        let Some((question, loggers)) = questions_and_loggers(api, &["--name", "demo"]).await else { return };
        assert!(question.starts_with("The server \"demo\" asks"), "{api}: {question}");
        assert!(!loggers.is_empty() && loggers.iter().all(|l| l.starts_with("demo")), "{api}: {loggers:?}");
    }
}

#[test]
fn a_name_that_is_not_one_stops_at_parsing_naming_the_option() {
    let out = std::process::Command::new(support::code_mode())
        .args(["run", "--name", "../etc", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--name") && stderr.contains("is not a server name"), "{stderr}");
}
