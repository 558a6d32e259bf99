//! The web console in a real browser: Debian's chromium, driven through
//! chromium-driver by selenium (`testing/console/browser.py`), logs in as
//! an approver while the official Python MCP SDK's code waits for her; she
//! approves one call (the cell prints the tool's result) and declines one
//! with a note (the code's `ToolError` carries it). The second call's
//! arguments are hostile markup and a long string: the page shows them as
//! text and runs nothing. Both SDK clients are tried: `mcp.Client` at its
//! defaults (the stateless 2026-07-28 protocol) and `ClientSession` (the
//! initialize handshake).
//!
//! `UPDATE_SCREENSHOT=1` writes the console's picture with one call waiting
//! to `docs/images/console.png` (the README shows it; refused under
//! `CI=true`).

use std::path::PathBuf;

use serde_json::Value;

use crate::auth::{TokenFile, token_new};
use crate::support::{self, log_path};

/// The test server as `payments`, whose `echo` waits for alice or the
/// security group.
fn config(test_server: &std::path::Path) -> String {
    serde_json::json!({"mcpServers": {"payments": {"command": test_server, "policy": {
        "version": "1", "default": "allow", "tools": {"echo": {
            "action": "approve", "approvers": ["alice", "group:security"], "reason": "a payment needs a second person"}}}}}})
    .to_string()
}

/// The browser, its driver and selenium, or `None` where the test may
/// skip (it fails under `CI=true`).
pub(crate) fn browser_available() -> Option<PathBuf> {
    let python = code_mode_core::testing::peers::venv_bin("python");
    let ready = python.as_ref().is_some_and(|p| {
        std::process::Command::new(p).args(["-c", "import selenium"]).output().is_ok_and(|o| o.status.success())
    }) && std::path::Path::new("/usr/bin/chromium").exists()
        && std::path::Path::new("/usr/bin/chromedriver").exists();
    if ready {
        return python;
    }
    if code_mode_core::testing::unavailable("a browser", "chromium, chromium-driver and selenium (scripts/setup.sh)") {
        return None;
    }
    panic!("chromium, chromium-driver and selenium are needed (scripts/setup.sh installs them)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_real_browser_an_approver_approves_one_call_and_declines_another_with_a_note_and_hostile_arguments_render_as_text()
 {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = browser_available() else { return };
    let (carol, alice) = (token_new("carol"), token_new("alice"));
    let tokens = TokenFile::of(&[&carol, &alice]);
    let config_file = log_path("browser-config").with_extension("json");
    std::fs::write(&config_file, config(&support::test_server())).unwrap();
    let (_serve, url, _log) = serve_config(&[
        "--auth-tokens",
        tokens.arg(),
        "--config",
        config_file.to_str().unwrap(),
        "--approval-timeout",
        "300",
    ])
    .await;
    let root = code_mode_core::testing::peers::workspace_root();
    let script = root.join("testing/console/browser.py");
    let screenshot = if code_mode_core::testing::rewrite_golden("UPDATE_SCREENSHOT") {
        root.join("docs/images/console.png")
    } else {
        log_path("console").with_extension("png")
    };
    for api in ["client", "session"] {
        let mut command = tokio::process::Command::new(&python);
        command.arg(&script).args(["--url", &url, "--caller-token", &carol.token, "--approver-token", &alice.token]);
        command.args(["--api", api, "--tool", "payments__echo"]);
        if api == "client" {
            command.args(["--screenshot", screenshot.to_str().unwrap()]);
        }
        let out = command.kill_on_drop(true).output().await.expect("the browser script runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the browser script failed ({api}): {stderr}");
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("JSON from the script ({e})"));
        eprintln!("{api}: {seen}");
        assert_eq!(seen["waiting_then"], 1, "one call waits ({api}): {seen}");
        let waiting = seen["waiting_text"].as_str().unwrap();
        for part in [
            "echo",
            "payments",
            "a payment needs a second person",
            "carol",
            "approved-in-the-browser",
            "alice, group:security",
        ] {
            assert!(waiting.contains(part), "the waiting call shows {part:?} ({api}): {waiting}");
        }
        assert_eq!(seen["approved"], "approved-in-the-browser\n", "the cell printed the tool's result ({api})");
        let declined = seen["declined"].as_str().unwrap();
        assert!(
            declined.starts_with("refused:") && declined.contains("declined by alice: not on a Friday"),
            "the code's ToolError carries the note ({api}): {declined}"
        );
        assert_eq!(seen["hostile_shown_as_text"], true, "the markup shows as text ({api}): {seen}");
        assert_eq!(seen["pwned"], Value::Null, "no script of the arguments ran ({api})");
        assert_eq!(seen["images_in_call"], 0, "no element came from the arguments ({api})");
        assert_eq!(seen["scripts_on_page"], 0, "the console has no script at all ({api})");
        let recent = seen["recent_text"].as_str().unwrap();
        assert!(recent.contains("not on a Friday") && recent.contains("fine by me"), "recent decisions: {recent}");
    }
    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let _ = std::fs::remove_file(&config_file);
}

/// `serve --http --config FILE` on a free loopback port (no command after
/// `--`): the child, its URL and its log.
async fn serve_config(args: &[&str]) -> (tokio::process::Child, String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0"]).args(args);
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    crate::http::spawn_http(&mut serve).await
}
