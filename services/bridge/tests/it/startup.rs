//! Starting the bridge: hostile schemas, clashes, servers that fail or never
//! answer, and the environment the wrapped server gets.

use std::time::{Duration, Instant};

use code_mode_bridge::BridgeError;
use code_mode_bridge::server::DEFAULT_ENV;
use serde_json::json;

use crate::support::{Harness, Setup, children, gone_within, ok, test_server};

#[tokio::test]
async fn tools_with_too_deep_or_invalid_schemas_are_left_out_and_a_hostile_schema_gets_a_bounded_stub() {
    let h = Harness::with_args(&["--deep-schema", "--deep-depth", "40"]).await;
    let catalog = h.bridge.catalog();
    let left_out: Vec<(&str, &str)> = catalog.left_out().iter().map(|l| (l.tool.as_str(), l.reason.as_str())).collect();
    assert_eq!(left_out.len(), 2, "{left_out:?}");
    assert_eq!(left_out[0].0, "deep");
    assert!(left_out[0].1.contains("nests") && left_out[0].1.contains("64"), "{left_out:?}");
    assert_eq!(left_out[1].0, "bad_schema");
    assert!(left_out[1].1.starts_with("its input schema does not compile"), "{left_out:?}");
    assert!(catalog.left_out().iter().all(|l| l.server == "test"));
    assert!(catalog.get("deep").is_none() && catalog.get("bad_schema").is_none());
    let message = crate::support::refused(h.call("deep", json!({})).await);
    assert!(message.starts_with("there is no tool named \"deep\""), "{message}");

    // 1,000 properties with 300-character names and 1,000-character descriptions.
    let hostile = catalog.get("hostile_schema").expect("hostile_schema is kept");
    let chars = hostile.stub.chars().count();
    assert!(chars < 20_000, "the stub is {chars} characters");
    assert!(hostile.stub.contains("... and 960 more parameters"), "{}", hostile.stub);
    assert!(!hostile.stub.contains(&"q".repeat(300)), "names are cut");
    // The one-line signature lists what fits 600 characters, then counts.
    assert!(hostile.summary.chars().count() < 1_200, "{}", hostile.summary);
    assert!(hostile.signature.line.ends_with(" more)"), "{}", hostile.signature.line);
    // The rest of the catalog works.
    assert_eq!(ok(h.call("add", json!({"a": 1, "b": 1})).await), r#"{"sum":2}"#);
    h.close().await;
}

#[tokio::test]
async fn tools_whose_python_names_clash_stop_startup_naming_both() {
    let err = Setup::server(&["--clash"]).start().await.expect_err("startup fails");
    let message = err.to_string();
    match &err {
        BridgeError::NameClash { python, first, second } => {
            assert_eq!(python, "a_b");
            assert_eq!(first, "test: a-b");
            assert_eq!(second, "test: a_b");
        }
        other => panic!("expected NameClash, got {other:?}"),
    }
    assert!(message.contains("a-b") && message.contains("a_b"), "{message}");
}

#[tokio::test]
async fn allowing_only_one_of_two_clashing_tools_starts() {
    let h = Setup::server(&["--clash"]).allow(&["a-b", "add"]).start().await.expect("starts");
    assert_eq!(h.bridge.catalog().get("a_b").expect("kept").mcp_name, "a-b");
    assert_eq!(ok(h.call("a_b", json!({})).await), "ok a-b");
    h.close().await;
}

#[tokio::test]
async fn a_server_that_exits_at_start_fails_startup_naming_its_command() {
    let err = Setup::server(&["--exit-on-start"]).start().await.expect_err("startup fails");
    let message = err.to_string();
    match &err {
        BridgeError::ServerStart { server, command, reason } => {
            assert_eq!(server, "test");
            assert!(command.starts_with(&test_server()) && command.ends_with("--exit-on-start"), "{command}");
            assert!(reason.starts_with("MCP initialization failed"), "{reason}");
        }
        other => panic!("expected ServerStart, got {other:?}"),
    }
    assert!(message.contains(&test_server()), "{message}");
}

#[tokio::test]
async fn a_missing_command_fails_startup_naming_it() {
    let command = "/nonexistent/code-mode-no-such-server".to_string();
    let setup = Setup { command: Some((command.clone(), vec![])), ..Setup::default() };
    let err = setup.start().await.expect_err("startup fails");
    match &err {
        BridgeError::ServerStart { command: c, .. } => assert_eq!(c, &command),
        other => panic!("expected ServerStart, got {other:?}"),
    }
    assert!(err.to_string().contains(&command), "{err}");
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_fails_startup_within_the_start_timeout_and_is_killed() {
    // `sleep` reads nothing from stdin and writes nothing: it never answers.
    let silent = ["sleep".to_string(), "987654".to_string()];
    let setup = Setup {
        command: Some((silent[0].clone(), vec![silent[1].clone()])),
        start_timeout: Duration::from_millis(500),
        ..Setup::default()
    };
    let find_it = async {
        for _ in 0..200 {
            if let Some(p) = children().into_iter().find(|p| p.cmdline == silent) {
                return Some(p.pid);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    };
    let started = Instant::now();
    let (result, pid) = tokio::join!(tokio::time::timeout(Duration::from_secs(10), setup.start()), find_it);
    let err = result.expect("Bridge::start returns instead of hanging").expect_err("startup fails");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    match &err {
        BridgeError::ServerStart { command, reason, .. } => {
            assert_eq!(command, "sleep 987654", "the command line with its arguments");
            assert_eq!(reason, "no answer to initialize/tools list within 0.5 s");
        }
        other => panic!("expected ServerStart, got {other:?}"),
    }
    // The silent server was started, and does not outlive the failed start.
    let pid = pid.expect("the silent server ran as a child of this process");
    assert!(gone_within(pid, Duration::from_secs(5)).await, "sleep (pid {pid}) still runs");
}

/// A variable cargo certainly sets for this test process and that is not
/// one of the defaults a stdio server gets.
fn a_variable_of_this_process() -> (String, String) {
    for name in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO"] {
        if let Ok(value) = std::env::var(name) {
            return (name.to_string(), value);
        }
    }
    std::env::vars()
        .find(|(k, _)| !DEFAULT_ENV.contains(&k.as_str()))
        .expect("the test process has some variable beyond the defaults")
}

#[tokio::test]
async fn the_wrapped_server_gets_only_the_default_environment_plus_what_is_passed() {
    let (name, value) = a_variable_of_this_process();
    let h = Harness::with_args(&[]).await;
    assert_eq!(ok(h.call("get_env", json!({"name": name})).await), "<unset>");
    for default in DEFAULT_ENV {
        let expected = std::env::var(default).unwrap_or_else(|_| "<unset>".into());
        assert_eq!(ok(h.call("get_env", json!({"name": default})).await), expected, "{default}");
    }
    assert_eq!(ok(h.call("get_env", json!({"name": "RUST_TEST_THREADS"})).await), "<unset>");
    h.close().await;

    let h = Setup { pass_env: vec![name.clone()], ..Setup::default() }.start().await.expect("starts");
    assert_eq!(ok(h.call("get_env", json!({"name": name})).await), value);
    h.close().await;
}

#[tokio::test]
async fn set_env_values_reach_the_wrapped_server() {
    let set_env = vec![("CODE_MODE_IT_SET".to_string(), "forty two ✓".to_string())];
    let h = Setup { set_env, ..Setup::default() }.start().await.expect("starts");
    assert_eq!(ok(h.call("get_env", json!({"name": "CODE_MODE_IT_SET"})).await), "forty two ✓");
    h.close().await;
}

#[tokio::test]
async fn passing_an_unset_variable_stops_startup_naming_it() {
    let name = "CODE_MODE_IT_CERTAINLY_UNSET_7d1f0c";
    assert!(std::env::var_os(name).is_none());
    let setup = Setup { pass_env: vec![name.to_string()], ..Setup::default() };
    let log = setup.log.clone();
    let err = setup.start().await.expect_err("startup fails");
    match &err {
        BridgeError::EnvMissing { server, name: n } => {
            assert_eq!(server, "test");
            assert_eq!(n, name);
        }
        other => panic!("expected EnvMissing, got {other:?}"),
    }
    assert!(err.to_string().contains(name), "{err}");
    assert!(!log.exists(), "the server was never started");
}

/// The start error of a server run as `command args...`.
async fn start_error_of(command: &str, args: &[&str]) -> String {
    let setup = Setup {
        command: Some((command.to_string(), args.iter().map(|a| a.to_string()).collect())),
        ..Setup::default()
    };
    setup.start().await.expect_err("the server cannot start").to_string()
}

#[tokio::test]
async fn a_server_that_dies_while_starting_is_named_by_its_command_line_and_its_last_stderr_lines() {
    let script = "import sys; sys.stderr.write('starting\\nError: Cannot find module /srv/missing.js\\n'); sys.exit(3)";
    let err = start_error_of("python3", &["-c", script]).await;
    assert!(err.contains("(python3 -c import sys;"), "the whole command line is shown: {err}");
    assert!(err.contains("its last stderr lines: starting | Error: Cannot find module /srv/missing.js"), "{err}");
}

#[tokio::test]
async fn a_server_program_that_does_not_exist_is_named_by_the_path_tried() {
    let err = start_error_of("./no/such/server", &["--flag"]).await;
    let tried = std::env::current_dir().unwrap().join("no/such/server");
    assert!(err.contains(&format!("the program {} does not exist", tried.display())), "{err}");
    assert!(err.contains("(./no/such/server --flag)"), "{err}");

    let err = start_error_of("code-mode-no-such-server-7f3a", &[]).await;
    assert!(err.contains("no program named \"code-mode-no-such-server-7f3a\" on PATH"), "{err}");
}
