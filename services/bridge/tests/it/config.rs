//! `--config FILE` (the `mcpServers` shape): real files read by
//! [`config::load`], and the servers they describe started as real test
//! server processes under several names, with their policies (files or
//! inline objects).

use std::path::{Path, PathBuf};
use std::time::Duration;

use code_mode_bridge::PolicySource;
use code_mode_bridge::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use code_mode_bridge::config::{self, ConfigError};
use code_mode_bridge::server::Transport;
use serde_json::{Value, json};

use crate::support::{
    calls_in_log, children, close, gone_within, log_lines, ok, refused, start_prefixed as start, test_server,
    tool_call, unique_path,
};

/// Write `text` to a fresh config file.
fn config_file(tag: &str, text: &str) -> PathBuf {
    let path = unique_path(tag).with_extension("json");
    std::fs::write(&path, text).expect("the config file is written");
    path
}

/// The error `load` gives for `text`, as its message, after checking that it
/// names the file.
fn load_error(tag: &str, text: &str) -> String {
    let path = config_file(tag, text);
    let err = config::load(&path).expect_err("the config is refused").to_string();
    assert!(err.contains(&path.display().to_string()), "the error names the file: {err}");
    err
}

/// A test-server entry logging to `log`, with more server arguments.
fn entry(log: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--log".to_string(), log.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    json!({"command": test_server(), "args": all})
}

#[test]
fn entries_become_servers_with_their_arguments_env_allowlist_and_private_tools() {
    let path = config_file(
        "shape",
        r#"{"mcpServers": {
            "notes": {"command": "notes-server", "args": ["--db", "x"], "env": {"TOKEN": "${CM_TOKEN}", "PLAIN": "a $b ${CM_TOKEN}!"}, "allow": ["search"], "private": true},
            "tracker": {"type": "stdio", "command": "tracker-mcp", "allow": ["create_issue", "find_issue"], "private": ["create_issue"]},
            "web": {"type": "streamable-http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${CM_TOKEN}"}, "allow": ["fetch"]},
            "plain": {"url": "http://127.0.0.1:9/mcp"}
        }}"#,
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let servers = config::parse(&path, &text, |v| (v == "CM_TOKEN").then(|| "t0k".to_string())).expect("it parses");
    assert_eq!(servers.len(), 4);
    let notes = &servers[0];
    assert_eq!(notes.spec.name, "notes");
    let Transport::Stdio(stdio) = &notes.spec.transport else { panic!("notes is a stdio server") };
    assert_eq!(stdio.command, "notes-server");
    assert_eq!(stdio.args, ["--db", "x"]);
    assert_eq!(
        stdio.set_env,
        [("TOKEN".to_string(), "t0k".to_string()), ("PLAIN".to_string(), "a $b t0k!".to_string())]
    );
    assert!(stdio.pass_env.is_empty(), "nothing else of code-mode's environment is passed");
    assert_eq!(notes.allow.as_deref(), Some(&["search".to_string()][..]));
    assert_eq!(notes.private, [config::ALL_TOOLS], "private: true is every kept tool");
    let tracker = &servers[1];
    assert_eq!(tracker.spec.name, "tracker");
    let Transport::Stdio(stdio) = &tracker.spec.transport else { panic!("tracker is a stdio server") };
    assert!(stdio.set_env.is_empty());
    assert_eq!(tracker.private, ["create_issue"]);
    let web = &servers[2];
    let Transport::Http(http) = &web.spec.transport else { panic!("web is a remote server") };
    assert_eq!(http.url, "https://example.com/mcp");
    assert_eq!(http.headers, [("Authorization".to_string(), "Bearer t0k".to_string())]);
    assert_eq!(web.allow.as_deref(), Some(&["fetch".to_string()][..]));
    assert!(!format!("{:?}", web.spec).contains("t0k"), "header values stay out of debug output");
    let Transport::Http(plain) = &servers[3].spec.transport else { panic!("a url makes a remote server") };
    assert!(plain.headers.is_empty());
}

#[test]
fn config_errors_name_the_file_the_entry_and_the_key() {
    let cases: &[(&str, &[&str])] = &[
        (r#"{"mcpServers": {"notes": {"command": "x", "cmd": "y"}}}"#, &["\"notes\"", "unknown key \"cmd\""]),
        (
            r#"{"mcpServers": {"web": {"url": "https://example.com/mcp", "command": "x"}}}"#,
            &["\"web\"", "\"url\"", "not both"],
        ),
        (
            r#"{"mcpServers": {"web": {"command": "x", "headers": {"A": "b"}}}}"#,
            &["\"web\"", "\"headers\"", "only for a remote server"],
        ),
        (
            r#"{"mcpServers": {"web": {"url": "https://example.com/mcp", "env": {"A": "b"}}}}"#,
            &["\"web\"", "\"env\"", "only for a local server"],
        ),
        (
            r#"{"mcpServers": {"web": {"url": "https://example.com/mcp", "args": ["a"]}}}"#,
            &["\"web\"", "\"args\"", "only for a local server"],
        ),
        (r#"{"mcpServers": {"web": {"type": "http", "command": "x"}}}"#, &["\"web\"", "\"type\"", "needs \"url\""]),
        (
            r#"{"mcpServers": {"web": {"type": "stdio", "url": "https://example.com/mcp"}}}"#,
            &["\"web\"", "\"type\"", "needs \"command\""],
        ),
        (r#"{"mcpServers": {"web": {"type": "sse", "url": "https://x/"}}}"#, &["\"web\"", "\"type\"", "\"http\""]),
        (r#"{"mcpServers": {"web": {"url": "example.com/mcp"}}}"#, &["\"web\"", "\"url\"", "http:// or https://"]),
        (
            r#"{"mcpServers": {"web": {"url": "https://x/", "headers": {"Authorization": "Bearer ${CM_CONFIG_TEST_NEVER_SET}"}}}}"#,
            &["\"web\"", "\"headers\".Authorization", "${CM_CONFIG_TEST_NEVER_SET} is not set"],
        ),
        (
            r#"{"mcpServers": {"web": {"url": "https://x/", "headers": {"Mcp-Session-Id": "1"}}}}"#,
            &["\"web\"", "\"headers\".Mcp-Session-Id", "set by the MCP transport"],
        ),
        (
            r#"{"mcpServers": {"web": {"url": "https://x/", "headers": {"bad name": "1"}}}}"#,
            &["\"web\"", "\"headers\".bad name", "not a valid HTTP header name"],
        ),
        (
            r#"{"mcpServers": {"web": {"url": "https://x/", "headers": {"X-Token": "a\nb"}}}}"#,
            &["\"web\"", "\"headers\".X-Token", "not a valid HTTP header value"],
        ),
        (r#"{"mcpServers": {"notes": {"args": ["a"]}}}"#, &["\"notes\"", "\"command\" is missing"]),
        (r#"{"mcpServers": {"notes": {"command": 3}}}"#, &["\"notes\"", "\"command\"", "a non-empty string"]),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "args": "a b"}}}"#,
            &["\"notes\"", "\"args\"", "a list of strings"],
        ),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "args": [1]}}}"#,
            &["\"notes\"", "\"args\"", "a list of strings"],
        ),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "env": {"A": 1}}}}"#,
            &["\"notes\"", "\"env\"", "an object of strings"],
        ),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "allow": "add"}}}"#,
            &["\"notes\"", "\"allow\"", "a list of strings"],
        ),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "private": "yes"}}}"#,
            &["\"notes\"", "\"private\"", "true, false or a list"],
        ),
        (r#"{"mcpServers": {"notes": "x"}}"#, &["\"notes\"", "an object"]),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "env": {"T": "${CM_CONFIG_TEST_NEVER_SET}"}}}}"#,
            &["\"notes\"", "\"env\".T", "${CM_CONFIG_TEST_NEVER_SET} is not set"],
        ),
        (
            r#"{"mcpServers": {"notes": {"command": "x", "env": {"T": "${OPEN"}}}}"#,
            &["\"notes\"", "\"env\".T", "closing"],
        ),
        (r#"{"servers": {}}"#, &["unknown top-level key \"servers\""]),
        (r#"{"mcpServers": {}}"#, &["no servers"]),
    ];
    for (i, (text, wanted)) in cases.iter().enumerate() {
        let err = load_error(&format!("bad-{i}"), text);
        for w in *wanted {
            assert!(err.contains(w), "case {i}: {err:?} should contain {w:?}");
        }
    }
}

#[test]
fn bad_json_stops_startup_naming_the_file_and_the_position() {
    let path = config_file("json", "{\"mcpServers\": {\n  \"notes\": {\"command\": \"x\",}\n}}");
    let err = config::load(&path).expect_err("bad JSON is refused");
    assert!(matches!(err, ConfigError::Json { line: 2, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with(&format!("{}: line 2 column", path.display())), "{message}");
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-config.json");
    let err = config::load(&missing).expect_err("a missing file is refused").to_string();
    assert!(err.contains("no-such-config.json") && err.contains("cannot read"), "{err}");
}

#[test]
fn server_names_must_be_unique_words() {
    for (i, name) in ["", "a b", "a.b", "notes/x", "é"].iter().enumerate() {
        let text = json!({"mcpServers": {*name: {"command": "x"}}}).to_string();
        let err = load_error(&format!("name-{i}"), &text);
        assert!(err.contains(&format!("server {name:?}")) && err.contains("non-empty word"), "{err}");
    }
    let err = load_error(
        "dup",
        r#"{"mcpServers": {"notes": {"command": "x"}, "other": {"command": "y"}, "notes": {"command": "z"}}}"#,
    );
    assert!(err.contains("server \"notes\" appears more than once"), "{err}");
    // Words with digits, '_' and '-' are fine.
    let path = config_file("good-names", r#"{"mcpServers": {"a-1": {"command": "x"}, "B_2": {"command": "y"}}}"#);
    assert_eq!(config::load(&path).expect("good names").len(), 2);
}

#[tokio::test]
async fn a_name_clash_across_servers_stops_startup_naming_both() {
    // `a-b__add` and `a_b__add` both become the Python name `a_b__add`.
    let (log_a, log_b) = (unique_path("clash-a"), unique_path("clash-b"));
    let text = json!({"mcpServers": {"a-b": entry(&log_a, &[]), "a_b": entry(&log_b, &[])}}).to_string();
    let servers = config::load(&config_file("clash", &text)).expect("it parses");
    let err = start(servers).await.expect_err("the clash stops startup").to_string();
    assert!(err.contains("a_b__add"), "{err}");
    assert!(err.contains("a-b: add") && err.contains("a_b: add"), "both tools are named: {err}");
}

#[test]
fn a_name_clash_through_the_separator_stops_startup_naming_both() {
    // Server `a` tool `b__c` and server `a__b` tool `c` are both `a__b__c`.
    let tool = |name: &str| ListedTool {
        name: name.into(),
        description: None,
        input_schema: json!({"type": "object", "properties": {}}),
        output_schema: None,
        title: None,
        annotations: None,
    };
    let server = |name: &str, tool_name: &str| ServerTools {
        server: name.into(),
        prefixed: true,
        tools: vec![tool(tool_name)],
        allow: None,
        private: vec![],
        origin: Default::default(),
        labels: Default::default(),
        withheld: Default::default(),
        observed: Default::default(),
        shared_account: false,
    };
    let err = Catalog::build(&[server("a", "b__c"), server("a__b", "c")], &CatalogLimits::default())
        .expect_err("the clash stops startup")
        .to_string();
    assert!(err.contains("a__b__c") && err.contains("a: b__c") && err.contains("a__b: c"), "{err}");
}

#[tokio::test]
async fn a_failing_entry_closes_the_servers_already_started() {
    let (log_one, log_two) = (unique_path("fail-one"), unique_path("fail-two"));
    let text = json!({"mcpServers": {
        "one": entry(&log_one, &[]),
        "two": entry(&log_two, &["--exit-on-start"]),
    }})
    .to_string();
    let servers = config::load(&config_file("fail", &text)).expect("it parses");
    let err = start(servers).await.expect_err("the failing entry stops startup").to_string();
    assert!(err.contains("\"two\""), "the failing server is named: {err}");
    assert!(log_lines(&log_one).iter().any(|l| l.starts_with("initialize")), "server one had started");
    let needle = log_one.display().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<u32> =
            children().into_iter().filter(|p| p.cmdline.iter().any(|a| a == &needle)).map(|p| p.pid).collect();
        if left.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "server one's process {left:?} is still there");
        for pid in left {
            gone_within(pid, Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn an_entry_env_reaches_only_its_server() {
    let (log_one, log_two) = (unique_path("env-one"), unique_path("env-two"));
    let mut one = entry(&log_one, &[]);
    one["env"] = json!({"CM_ONLY_ONE": "for one"});
    let text = json!({"mcpServers": {"one": one, "two": entry(&log_two, &[])}}).to_string();
    let servers = config::load(&config_file("env", &text)).expect("it parses");
    let (bridge, closer, cancel) = start(servers).await.expect("both start");
    let get = |tool: &str, i| tool_call(tool, json!({"name": "CM_ONLY_ONE"}), i);
    assert_eq!(ok(bridge.call(&get("one__get_env", 1)).await), "for one");
    assert_eq!(ok(bridge.call(&get("two__get_env", 2)).await), "<unset>");
    close(closer, cancel).await;
}

#[tokio::test]
async fn names_are_prefixed_even_for_one_server_and_private_true_marks_every_kept_tool() {
    let log = unique_path("one");
    let mut one = entry(&log, &[]);
    one["allow"] = json!(["add", "get_env"]);
    one["private"] = json!(true);
    let text = json!({"mcpServers": {"one": one}}).to_string();
    let servers = config::load(&config_file("one", &text)).expect("it parses");
    let (bridge, closer, cancel) = start(servers).await.expect("it starts");
    let catalog = bridge.catalog();
    let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["one__add", "one__get_env"]);
    let private: Vec<&str> = catalog.private_tools().collect();
    assert_eq!(private, ["one__add", "one__get_env"]);
    assert_eq!(ok(bridge.call(&tool_call("one__add", json!({"a": 1, "b": 2}), 1)).await), "{\"sum\":3}");
    let message = refused(bridge.call(&tool_call("add", json!({"a": 1, "b": 2}), 2)).await);
    assert!(message.contains("add"), "{message}");
    assert_eq!(calls_in_log(&log), ["add"]);
    close(closer, cancel).await;

    // Without an allowlist, `true` is every tool the server lists.
    let log = unique_path("all");
    let mut all = entry(&log, &[]);
    all["private"] = json!(true);
    let text = json!({"mcpServers": {"all": all, "other": entry(&unique_path("other"), &[])}}).to_string();
    let (bridge, closer, cancel) = start(config::load(&config_file("all", &text)).unwrap()).await.expect("starts");
    let catalog = bridge.catalog();
    let of_all = catalog.tools().iter().filter(|t| t.server_name == "all").count();
    assert!(of_all >= 9, "{of_all}");
    assert!(catalog.tools().iter().all(|t| t.private == (t.server_name == "all")), "only server all is private");
    close(closer, cancel).await;
}

#[tokio::test]
async fn an_inline_policy_object_in_an_entry_denies_a_tool_before_it_reaches_the_server() {
    let log = unique_path("inline-policy");
    let mut math = entry(&log, &[]);
    math["policy"] = json!({"version": "1", "default": "allow",
        "tools": {"echo": {"action": "deny", "reason": "echo is switched off"}}});
    let path = config_file("inline-policy", &json!({"mcpServers": {"math": math}}).to_string());
    let servers = config::load(&path).expect("it parses");
    let Some(PolicySource::Inline { origin, value }) = &servers[0].policy else {
        panic!("an object is an inline policy: {:?}", servers[0].policy)
    };
    assert_eq!(origin, &format!("{} mcpServers.math.policy", path.display()));
    assert_eq!(value["default"], "allow");
    let (bridge, closer, cancel) = start(servers).await.expect("it starts");
    let message = refused(bridge.call(&tool_call("math__echo", json!({"text": "hi"}), 1)).await);
    assert!(message.contains("echo is switched off"), "the refusal quotes the inline rule's reason: {message}");
    assert_eq!(ok(bridge.call(&tool_call("math__add", json!({"a": 1, "b": 2}), 2)).await), "{\"sum\":3}");
    assert_eq!(calls_in_log(&log), ["add"], "the denied echo never reached the server");
    close(closer, cancel).await;
}

#[tokio::test]
async fn a_bad_inline_policy_stops_startup_naming_the_config_file_the_entry_and_the_json_path() {
    let cases = [
        (
            json!({"version": "1", "tools": {"add": {"limits": [{"counter": "c", "window": "fortnight", "max": 1}]}}}),
            "/tools/add/limits/0/window",
        ),
        (json!({"version": "1", "tools": {"no_such_tool": {}}}), "/tools/no_such_tool"),
        (json!({"version": "1", "defualt": "deny"}), "/defualt"),
    ];
    for (policy, pointer) in cases {
        let mut math = entry(&unique_path("bad-inline"), &[]);
        math["policy"] = policy;
        let path = config_file("bad-inline", &json!({"mcpServers": {"math": math}}).to_string());
        let servers = config::load(&path).expect("the config itself parses: the policy is read against the tools");
        let err = start(servers).await.expect_err("the bad policy stops startup");
        assert!(matches!(err, code_mode_bridge::BridgeError::Policy { .. }), "{err:?}");
        let message = err.to_string();
        let named = format!("{} mcpServers.math.policy: {pointer}: ", path.display());
        assert!(message.contains(&named), "the error names file, entry and JSON path ({named}): {message}");
    }
}

#[tokio::test]
async fn allow_private_and_policy_tools_accept_the_names_the_code_calls() {
    let log = unique_path("served-names");
    let mut math = entry(&log, &[]);
    math["allow"] = json!(["math__add", "echo", "math__get_env"]);
    math["private"] = json!(["math__get_env"]);
    math["policy"] = json!({"version": "1", "default": "allow",
        "tools": {"math__echo": {"action": "deny", "reason": "no echoes"}}});
    let path = config_file("served-names", &json!({"mcpServers": {"math": math}}).to_string());
    let (bridge, closer, cancel) = start(config::load(&path).expect("it parses")).await.expect("it starts");
    let catalog = bridge.catalog();
    let kept: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(kept, ["math__add", "math__get_env"], "allow took served names; echo is denied by its served name");
    assert!(catalog.get("math__get_env").unwrap().private, "private took the served name");
    let message = refused(bridge.call(&tool_call("math__echo", json!({"text": "hi"}), 1)).await);
    assert!(message.contains("no echoes"), "{message}");
    close(closer, cancel).await;
}

#[tokio::test]
async fn errors_about_an_entry_name_its_key_and_the_server_by_its_entry_not_a_flag() {
    for (key, value, says) in [
        ("private", json!(["nope"]), "key \"private\": \"nope\": the server lists no such tool"),
        ("allow", json!(["nope"]), "key \"allow\": \"nope\": the server lists no such tool"),
    ] {
        let mut math = entry(&unique_path("entry-errors"), &[]);
        math[key] = value;
        let path = config_file("entry-errors", &json!({"mcpServers": {"math": math}}).to_string());
        let err = start(config::load(&path).expect("it parses")).await.expect_err("refused").to_string();
        let at = format!("{}: server \"math\": {says}", path.display());
        assert!(err.starts_with(&at), "{at:?} starts {err:?}");
        assert!(!err.contains("--"), "no flag is named: {err}");
    }
    // A private label on a tool the entry's allowlist drops names "allow", not --allow.
    let mut math = entry(&unique_path("entry-errors"), &[]);
    math["allow"] = json!(["add"]);
    math["private"] = json!(["echo"]);
    let path = config_file("entry-errors", &json!({"mcpServers": {"math": math}}).to_string());
    let err = start(config::load(&path).expect("it parses")).await.expect_err("refused").to_string();
    assert!(err.contains("key \"private\": \"echo\": it is not on the allowlist (\"allow\")"), "{err}");

    // A policy file of an entry: the entry, then the policy file's own error.
    let policy = unique_path("entry-policy").with_extension("json");
    std::fs::write(&policy, r#"{"version": "1", "tools": {"nope": {}}}"#).unwrap();
    let mut math = entry(&unique_path("entry-errors"), &[]);
    math["policy"] = json!(policy.display().to_string());
    let path = config_file("entry-errors", &json!({"mcpServers": {"math": math}}).to_string());
    let err = start(config::load(&path).expect("it parses")).await.expect_err("refused").to_string();
    assert!(err.starts_with(&format!("{}: server \"math\": {}", path.display(), policy.display())), "{err}");
}

#[test]
fn an_auth_block_gives_a_remote_entry_its_authorization_and_is_checked_key_by_key() {
    let path = config_file(
        "auth",
        r#"{"mcpServers": {
            "tracker": {"url": "https://tracker.example/mcp", "auth": {"type": "oauth", "scopes": ["issues:read"], "client_id": "cm", "client_secret": "${CM_SECRET}"}},
            "robot": {"url": "https://robot.example/mcp", "auth": {"type": "client_credentials", "client_id": "bot", "client_secret": "${CM_SECRET}"}}
        }}"#,
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let servers = config::parse(&path, &text, |v| (v == "CM_SECRET").then(|| "s3cret".to_string())).expect("it parses");
    let Transport::Http(tracker) = &servers[0].spec.transport else { panic!("a remote server") };
    let auth = tracker.auth.as_ref().expect("its auth block");
    assert_eq!(auth.spec().kind(), "oauth");
    assert_eq!(auth.command(), format!("code-mode login --config {} tracker", path.display()));
    assert!(!format!("{:?}", servers[0].spec).contains("s3cret"), "no secret in the entry's Debug");
    let Transport::Http(robot) = &servers[1].spec.transport else { panic!("a remote server") };
    assert_eq!(robot.auth.as_ref().unwrap().spec().kind(), "client_credentials");

    let err = load_error(
        "auth-key",
        r#"{"mcpServers": {"t": {"url": "https://t.example/mcp", "auth": {"type": "oauth", "scope": ["a"]}}}}"#,
    );
    assert!(err.contains(r#"server "t": key "auth.scope": unknown key"#), "{err}");
    let err = load_error(
        "auth-type",
        r#"{"mcpServers": {"t": {"url": "https://t.example/mcp", "auth": {"type": "basic"}}}}"#,
    );
    assert!(err.contains(r#"key "auth.type""#), "{err}");
    let err = load_error("auth-stdio", r#"{"mcpServers": {"t": {"command": "x", "auth": "oauth"}}}"#);
    assert!(err.contains(r#"key "auth": only for a remote server"#), "{err}");
    let err = load_error(
        "auth-header",
        r#"{"mcpServers": {"t": {"url": "https://t.example/mcp", "headers": {"Authorization": "Bearer x"}, "auth": "oauth"}}}"#,
    );
    assert!(err.contains(r#"key "headers": an "Authorization" header beside "auth""#), "{err}");
    let err = load_error(
        "auth-secret",
        r#"{"mcpServers": {"t": {"url": "https://t.example/mcp", "auth": {"type": "oauth", "client_id": "c", "client_secret": "${CM_NEVER_SET_SECRET}"}}}}"#,
    );
    assert!(err.contains("${CM_NEVER_SET_SECRET} is not set"), "{err}");
}

#[test]
fn an_enterprise_auth_block_is_read_from_an_entry_and_its_errors_name_the_entry_and_the_key() {
    let path = config_file(
        "auth-enterprise",
        r#"{"mcpServers": {"wiki": {"url": "https://wiki.example/mcp", "auth": {"type": "enterprise",
            "client_id": "cm", "client_secret": "${CM_SECRET}", "idp_issuer": "https://login.example",
            "idp_client_id": "cm-idp", "id_token": "${CM_SECRET}"}}}}"#,
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let servers = config::parse(&path, &text, |v| (v == "CM_SECRET").then(|| "s3cret".to_string())).expect("it parses");
    let Transport::Http(wiki) = &servers[0].spec.transport else { panic!("a remote server") };
    assert_eq!(wiki.auth.as_ref().expect("its auth block").spec().kind(), "enterprise");
    assert!(!format!("{:?}", servers[0].spec).contains("s3cret"), "no secret or ID token in the entry's Debug");
    let err = load_error(
        "auth-enterprise-idp",
        r#"{"mcpServers": {"w": {"url": "https://w.example/mcp", "auth": {"type": "enterprise", "client_id": "c",
            "idp_issuer": "https://login.example", "id_token_file": "t.jwt"}}}}"#,
    );
    assert!(err.contains(r#"server "w": key "auth.idp_client_id": missing"#), "{err}");
    let err = load_error(
        "auth-enterprise-http",
        r#"{"mcpServers": {"w": {"url": "https://w.example/mcp", "auth": {"type": "enterprise", "client_id": "c",
            "idp_issuer": "http://login.example", "idp_client_id": "i", "id_token_file": "t.jwt"}}}}"#,
    );
    assert!(err.contains(r#"server "w": key "auth.idp_issuer": must be an https:// URL"#), "{err}");
}
