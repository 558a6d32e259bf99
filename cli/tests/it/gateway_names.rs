//! Gateway mode (`--expose-tools=only`) offers the wrapped tools under the
//! servers' own names (`get-sum`, not the Python `get_sum`), prefixed
//! `<server>__` with `--config`, and refuses a name it does not offer in
//! the client's words (`tools/list`, not `TOOLS`), suggesting the closest
//! offered name. Both Python SDK clients (`mcp.Client` at its defaults,
//! `ClientSession`), with server-everything.

use code_mode_core::testing::peers::npm_bin;
use serde_json::{Value, json};

use crate::support::{self, log_path, python_sdk};

/// List the tools, call `good` and `wrong` through `serve --expose-tools=only
/// [args]`: the offered names, the good call's text, the wrong call's
/// refusal.
async fn through(api: &str, args: &[String], good: &str, wrong: &str) -> Option<(Vec<String>, String, String)> {
    let code_mode = support::code_mode().display().to_string();
    let mut line: Vec<String> = vec!["--stdio".into(), code_mode, "serve".into(), "--expose-tools=only".into()];
    line.extend(args.iter().cloned());
    line.extend(["--".into(), "--api".into(), api.into()]);
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "tool": good, "arguments": {"a": 2, "b": 3}},
        {"op": "call", "tool": wrong, "arguments": {"a": 2, "b": 3}},
    ]);
    let line: Vec<&str> = line.iter().map(String::as_str).collect();
    let (results, stderr) = python_sdk(&line, &steps).await?;
    let names = results[0]["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{results:?} {stderr}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let text = |step: &Value| -> String {
        step["result"]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("{step} {stderr}"))
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect()
    };
    assert_eq!(results[1]["result"]["isError"], json!(false), "{api}: {}", results[1]);
    assert_eq!(results[2]["result"]["isError"], json!(true), "{api}: {}", results[2]);
    Some((names, text(&results[1]), text(&results[2])))
}

#[tokio::test]
async fn one_wrapped_server_offers_its_own_tool_names_and_a_wrong_one_is_refused_pointing_at_the_closest() {
    let Some(everything) = npm_bin("mcp-server-everything") else { return };
    let server = vec!["--".to_string(), everything.display().to_string(), "stdio".to_string()];
    for api in ["client", "session"] {
        let Some((names, sum, refused)) = through(api, &server, "get-sum", "get_summ").await else { return };
        assert!(names.contains(&"get-sum".to_string()) && !names.contains(&"get_sum".to_string()), "{api}: {names:?}");
        assert!(sum.contains('5'), "{api}: the server's own name is called: {sum}");
        assert_eq!(
            refused, "there is no tool named \"get_summ\"; tools/list lists the tools (did you mean \"get-sum\"?)",
            "{api}"
        );
    }
}

#[tokio::test]
async fn with_several_servers_each_tool_is_offered_as_server_then_its_own_name() {
    let Some(everything) = npm_bin("mcp-server-everything") else { return };
    let config = log_path("gateway-names").with_extension("json");
    let entry = json!({"command": everything, "args": ["stdio"]});
    std::fs::write(&config, json!({"mcpServers": {"one": entry, "two": entry}}).to_string()).unwrap();
    for api in ["client", "session"] {
        let args = vec!["--config".to_string(), config.display().to_string()];
        let Some((names, sum, refused)) = through(api, &args, "two__get-sum", "two_get-sum").await else { return };
        assert!(
            names.contains(&"one__get-sum".to_string()) && names.contains(&"two__get-sum".to_string()),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.contains("get_sum")), "{api}: {names:?}");
        assert!(sum.contains('5'), "{api}: {sum}");
        assert!(refused.contains("tools/list lists the tools") && !refused.contains("TOOLS"), "{api}: {refused}");
        assert!(refused.ends_with("(did you mean \"two__get-sum\"?)"), "{api}: {refused}");
    }
    let _ = std::fs::remove_file(&config);
}
