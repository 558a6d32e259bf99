//! Several wrapped servers from `--config FILE` (the `mcpServers` shape),
//! end to end: the real binary, the real sandbox, and the real test server
//! started several times under different names.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Ran, connect_client, log_path, logged_calls, report, run_python};

/// Write a config file of these entries (name -> entry).
fn config_file(tag: &str, servers: Value) -> PathBuf {
    let path = std::env::temp_dir().join(format!("code-mode-config-{tag}-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, json!({ "mcpServers": servers }).to_string()).expect("the config is written");
    path
}

/// A test-server entry logging to `log`, with more server arguments.
fn entry(log: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--log".to_string(), log.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    json!({"command": support::test_server(), "args": all})
}

/// `code-mode run --config FILE [args] --code CODE`, no server after `--`.
fn run_config(config: &Path, args: &[&str], code: &str) -> Command {
    let mut cmd = Command::new(support::code_mode());
    cmd.arg("run").arg("--config").arg(config).args(args).arg("--code").arg(code);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Run it; it must finish and print a report.
fn ran(mut cmd: Command) -> Ran {
    let output = cmd.output().expect("code-mode runs");
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let ran = Ran { report, output };
    assert!(ran.output.status.success() && ran.report.is_object(), "code-mode run failed: {ran:#?}\n{}", ran.stderr());
    ran
}

/// Run it; it must fail before running anything. Returns stderr.
fn refused_at_start(mut cmd: Command) -> String {
    let output = cmd.output().expect("code-mode runs");
    assert!(!output.status.success(), "startup should fail: {output:?}");
    assert!(output.stdout.is_empty(), "no report: {output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Processes anywhere on this machine whose command line holds `needle`.
fn processes_with_arg(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).any(|a| a == needle.as_bytes()) && support::pid_alive(pid) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn two_servers_answer_in_one_run_under_their_prefixed_names() {
    if !support::sandbox_available() {
        return;
    }
    let (log_one, log_two) = (log_path("several-one"), log_path("several-two"));
    let config = config_file("two", json!({"one": entry(&log_one, &[]), "two": entry(&log_two, &[])}));
    let code = "print(await one__add(a=2, b=3))\nprint(await two__echo(text='hi'))\n\
                print(sorted(n for n in TOOLS if n.endswith('__add')), 'add' in TOOLS)";
    let out = ran(run_config(&config, &[], code));
    assert_eq!(out.ok(), "{\"sum\":5}\nhi\n['one__add', 'two__add'] False\n");
    assert_eq!(logged_calls(&log_one), ["tools/call add"]);
    assert_eq!(logged_calls(&log_two), ["tools/call echo"]);
}

#[test]
fn one_call_budget_covers_every_server_of_a_run() {
    if !support::sandbox_available() {
        return;
    }
    let (log_one, log_two) = (log_path("budget-one"), log_path("budget-two"));
    let config = config_file("budget", json!({"one": entry(&log_one, &[]), "two": entry(&log_two, &[])}));
    let code = "print(await one__add(a=1, b=1))\nprint(await two__echo(text='b'))\nprint(await one__add(a=2, b=2))\n\
                try:\n    await two__echo(text='d')\nexcept ToolError as e:\n    print('refused:', e)";
    let out = ran(run_config(&config, &["--max-calls", "3"], code));
    assert_eq!(
        out.ok(),
        "{\"sum\":2}\nb\n{\"sum\":4}\nrefused: two__echo: this run has used all of its 3 tool calls\n"
    );
    assert_eq!(logged_calls(&log_one).len(), 2);
    assert_eq!(logged_calls(&log_two), ["tools/call echo"], "the fourth call never reached server two");
}

#[test]
fn a_private_tool_on_one_server_refuses_the_tools_of_another() {
    if !support::sandbox_available() {
        return;
    }
    let (log_one, log_two) = (log_path("private-one"), log_path("private-two"));
    let mut one = entry(&log_one, &[]);
    one["private"] = json!(["get_env"]);
    let config = config_file("private", json!({"one": one, "two": entry(&log_two, &[])}));
    let code = "print(await two__add(a=1, b=1))\nprint(await one__get_env(name='HOME') != '<unset>')\n\
                try:\n    await two__add(a=2, b=2)\nexcept ToolError as e:\n    print('refused:', e)";
    let out = ran(run_config(&config, &[], code));
    let stdout = out.ok();
    assert!(stdout.starts_with("{\"sum\":2}\nTrue\nrefused: two__add: refused by the private-data rule"), "{stdout}");
    assert!(stdout.contains("one__get_env"), "the refusal names the private tool: {stdout}");
    assert_eq!(logged_calls(&log_two), ["tools/call add"], "only the call before the private one reached two");
}

#[test]
fn an_entry_env_reaches_only_its_own_server() {
    if !support::sandbox_available() {
        return;
    }
    let mut one = entry(&log_path("env-one"), &[]);
    one["env"] = json!({"NOTES_TOKEN": "${CM_SEVERAL_SECRET}", "PLAIN": "as written"});
    let config = config_file("env", json!({"one": one, "two": entry(&log_path("env-two"), &[])}));
    let code = "for s in (one__get_env, two__get_env):\n    \
                for n in ('NOTES_TOKEN', 'PLAIN', 'CM_SEVERAL_SECRET'):\n        print(await s(name=n))";
    let mut cmd = run_config(&config, &[], code);
    cmd.env("CM_SEVERAL_SECRET", "s3cret");
    let out = ran(cmd);
    assert_eq!(out.ok(), "s3cret\nas written\n<unset>\n<unset>\n<unset>\n<unset>\n");
}

#[test]
fn an_unset_variable_in_an_entry_env_stops_startup_naming_it() {
    let mut one = entry(&log_path("unset"), &[]);
    one["env"] = json!({"TOKEN": "${CM_SEVERAL_NEVER_SET}"});
    let config = config_file("unset", json!({"one": one}));
    let mut cmd = run_config(&config, &[], "print(1)");
    cmd.env_remove("CM_SEVERAL_NEVER_SET");
    let stderr = refused_at_start(cmd);
    assert!(stderr.contains(&config.display().to_string()), "{stderr}");
    assert!(stderr.contains("server \"one\": key \"env\".TOKEN: ${CM_SEVERAL_NEVER_SET} is not set"), "{stderr}");
}

#[test]
fn config_errors_stop_startup_naming_the_file_the_entry_and_the_key() {
    let cases = [
        (json!({"notes": {"command": "x", "cwd": "/"}}), "server \"notes\": unknown key \"cwd\""),
        (
            json!({"web": {"url": "https://example.com/mcp", "command": "x"}}),
            "server \"web\": key \"url\": an entry has \"command\" (a local server) or \"url\" (a remote server), not both",
        ),
        (json!({"notes": {"args": []}}), "server \"notes\": key \"command\" is missing"),
        (
            json!({"notes": {"command": "x", "allow": "add"}}),
            "server \"notes\": key \"allow\": expected a list of strings",
        ),
        (json!({"a.b": {"command": "x"}}), "server \"a.b\": a server name must be"),
    ];
    for (i, (servers, wanted)) in cases.into_iter().enumerate() {
        let config = config_file(&format!("bad-{i}"), servers);
        let stderr = refused_at_start(run_config(&config, &[], "print(1)"));
        assert!(stderr.contains(&format!("{}: {wanted}", config.display())), "case {i}: {stderr}");
    }
    let bad = std::env::temp_dir().join(format!("code-mode-config-json-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&bad, "{\"mcpServers\": {\"one\": {\"command\": \"x\"}}").unwrap();
    let stderr = refused_at_start(run_config(&bad, &[], "print(1)"));
    assert!(stderr.contains(&format!("{}: line 1 column", bad.display())), "{stderr}");
}

#[test]
fn config_cannot_be_mixed_with_the_single_server_options() {
    let config = config_file("mixed", json!({"one": entry(&log_path("mixed"), &[])}));
    for extra in [&["--allow", "add"][..], &["--private", "add"], &["--env", "HOME"], &["--", "some-server"]] {
        let mut cmd = run_config(&config, &[], "print(1)");
        cmd.args(extra);
        let output = cmd.output().expect("code-mode runs");
        assert_eq!(output.status.code(), Some(2), "a usage error: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("'--config <FILE>' cannot be used with"), "{extra:?}: {stderr}");
    }
    let config = config.display().to_string();
    for args in
        [vec!["serve", "--config", &config], vec!["bridge", "--nats", "nats://127.0.0.1:1", "--config", &config]]
    {
        let output = Command::new(support::code_mode()).args(&args).args(["--", "x"]).output().expect("code-mode runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("'--config <FILE>' cannot be used with"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_failing_entry_stops_startup_and_closes_the_servers_already_started() {
    if !support::sandbox_available() {
        return;
    }
    let (log_one, log_two) = (log_path("failing-one"), log_path("failing-two"));
    let config =
        config_file("failing", json!({"one": entry(&log_one, &[]), "two": entry(&log_two, &["--exit-on-start"])}));
    let stderr = refused_at_start(run_config(&config, &[], "print(1)"));
    assert!(stderr.contains("wrapped server \"two\""), "{stderr}");
    let started = std::fs::read_to_string(&log_one).unwrap_or_default();
    assert!(started.lines().any(|l| l.starts_with("initialize")), "server one had started: {started:?}");
    let needle = log_one.display().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_with_arg(&needle).is_empty() {
        assert!(std::time::Instant::now() < deadline, "server one is still running: {:?}", processes_with_arg(&needle));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn three_hundred_tools_over_three_servers_fit_the_description_and_are_each_found_by_search() {
    if !support::sandbox_available() {
        return;
    }
    let names = ["alpha", "beta", "gamma"];
    let servers: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.to_string(), entry(&log_path(&format!("many-{n}")), &["--many", "100"]))).collect();
    let config = config_file("many", Value::Object(servers));
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("serve").arg("--config").arg(&config);
    let (client, _) = connect_client(cmd).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.chars().count() <= 12_000, "{} characters", description.chars().count());
    // 30 names across the servers: each found first by its server and number.
    let code = "servers = ['alpha', 'beta', 'gamma']\nmissed = []\nfor k in range(30):\n    \
                server, n = servers[k % 3], (k * 37) % 100\n    \
                want = f'{server}__extra_tool_{n:04d}'\n    \
                found = list(search_tools(f'{server} {n:04d}', limit=3))\n    \
                if found[:1] != [want]:\n        missed.append((want, found))\n\
                print(len(TOOLS), sum(n.endswith('__add') for n in TOOLS), missed)";
    let result = run_python(&client, code).await;
    let report = report(&result);
    assert_eq!(report["error"], Value::Null, "{report}");
    // 21 tools of its own and 100 extra on each server; `add` on each.
    assert_eq!(report["stdout"], "363 3 []\n", "every sampled tool is found first by a word of its name");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_bridge_service_wraps_the_servers_of_a_config_over_nats() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else { return };
    let url = nats.url();
    let (log_one, log_two) = (log_path("nats-one"), log_path("nats-two"));
    let mut one = entry(&log_one, &[]);
    one["private"] = json!(["get_env"]);
    let config = config_file("nats", json!({"one": one, "two": entry(&log_two, &[])}));
    let config = config.display().to_string();
    let mut bridge = tokio::process::Command::new(support::code_mode());
    bridge.args(["bridge", "--nats", &url, "--config", &config]);
    bridge.env("CODE_MODE_NATS_USER", "bridge").env("CODE_MODE_NATS_PASSWORD", users.password("bridge"));
    let _bridge = bridge.stdin(Stdio::null()).kill_on_drop(true).spawn().expect("the bridge starts");
    let _runner = support::spawn_service(&url, &users, "sandbox-runner", &[], None);
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.args(["frontend", "--nats", &url]);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let (client, _) = connect_client(frontend).await;
    let code = "print(await one__add(a=2, b=3), await two__echo(text='hi'))\nawait one__get_env(name='HOME')\n\
                try:\n    await two__add(a=1, b=1)\nexcept ToolError as e:\n    print('refused:', e)";
    let result = run_python(&client, code).await;
    let stdout = report(&result)["stdout"].as_str().expect("the cell ran").to_string();
    assert!(stdout.starts_with("{\"sum\":5} hi\nrefused: two__add: refused by the private-data rule"), "{stdout}");
    assert_eq!(logged_calls(&log_two), ["tools/call echo"]);
    client.cancel().await.unwrap();
}
