//! The MCP conformance suite's **client** scenarios with code-mode as the
//! client: `testing/conformance/client.py` wraps each scenario's server
//! with `code-mode serve --url URL --auth ... --expose-tools=only`, logs in
//! with `code-mode login` where the scenario's authorization server asks a
//! person (following the authorization URL as a browser would), and drives
//! code-mode with the official Python SDK. `run_client.py` runs the
//! scenarios one at a time (the suite's all-at-once mode starts every
//! client together and times out on two cores).
//!
//! The measure is the official Python SDK's own conformance client on the
//! same suite version, which passes every scored client scenario of both
//! requirement sets (but one of its own at 2026-07-28) and the extension
//! runs of client credentials and enterprise-managed authorization
//! (`testing/conformance/README.md` has both tables); code-mode passes
//! them all.

use std::collections::BTreeSet;

use code_mode_core::testing::peers::{npm_bin, venv_bin, workspace_root};
use serde_json::Value;

use crate::support;

/// The suite's verdicts for `args` (`--requirements V`, `--extensions`,
/// `--scenario S`), our driver as the client; `None` off CI without the
/// suite or the SDK.
async fn run(args: &[&str]) -> Option<Value> {
    npm_bin("conformance")?;
    let python = venv_bin("python")?;
    let root = workspace_root();
    let driver = format!("{} {}", python.display(), root.join("testing/conformance/client.py").display());
    let out = tokio::process::Command::new(&python)
        .arg(root.join("testing/conformance/run_client.py"))
        .args(["--command", &driver, "--retries", "1"])
        .args(args)
        .env("CODE_MODE_BIN", support::code_mode())
        .kill_on_drop(true)
        .output()
        .await
        .expect("the runner runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let outcome: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("the runner's outcome ({e}): {stdout} {stderr}"));
    // Each scenario's verdict in the test's output (the numbers the
    // conformance README reports).
    eprintln!("{stderr}");
    Some(outcome)
}

/// The extension scenarios measured at each wire: client credentials
/// (SEP-1046) with a secret and with a signed JWT, and enterprise-managed
/// authorization (SEP-990: an ID token exchanged at the identity provider
/// for an ID-JAG, the ID-JAG for the access token; the `enterprise` auth
/// block).
const EXTENSIONS: [&str; 3] =
    ["auth/client-credentials-basic", "auth/client-credentials-jwt", "auth/enterprise-managed-authorization"];

fn names(outcome: &Value, key: &str, bucket: &str) -> BTreeSet<String> {
    match &outcome[key][bucket] {
        Value::Array(list) => list.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Value::Object(map) => map.keys().cloned().collect(),
        _ => BTreeSet::new(),
    }
}

#[tokio::test]
async fn code_mode_as_the_client_passes_every_2025_11_25_client_scenario_and_the_extension_runs() {
    let Some(outcome) = run(&["--requirements", "2025-11-25", "--extensions"]).await else { return };
    assert_eq!(names(&outcome, "2025-11-25", "failed"), BTreeSet::new(), "{outcome:#}");
    assert_eq!(names(&outcome, "2025-11-25", "passed").len(), 18, "{outcome:#}");
    let extension = names(&outcome, "extension@2025-11-25", "passed");
    assert_eq!(names(&outcome, "extension@2025-11-25", "failed"), BTreeSet::new(), "{outcome:#}");
    for wanted in EXTENSIONS {
        assert!(extension.contains(wanted), "{wanted}: {outcome:#}");
    }
}

/// `request-metadata`, `http-standard-headers` and `http-custom-headers`
/// have mock servers that also take the 2025-11-25 handshake and check
/// what only a 2026-07-28 session sends (`Mcp-Method` on every request, the
/// version header on the first one, `Mcp-Param-*`): code-mode prefers
/// 2026-07-28 with a server that offers both (issue 40), so they pass.
/// `http-custom-headers` also calls `test_custom_headers_null` with
/// `verbose: null`, which the tool's schema types `boolean`: the bridge
/// leaves out a `null` its schema refuses for an optional parameter, as if
/// omitted, so the call goes out without that argument and its header.
#[tokio::test]
async fn code_mode_as_the_client_passes_every_2026_07_28_client_scenario() {
    let Some(outcome) = run(&["--requirements", "2026-07-28", "--extensions"]).await else { return };
    assert_eq!(names(&outcome, "2026-07-28", "failed"), BTreeSet::new(), "{outcome:#}");
    assert_eq!(names(&outcome, "2026-07-28", "passed").len(), 32, "{outcome:#}");
    let extension = names(&outcome, "extension@2026-07-28", "passed");
    assert_eq!(names(&outcome, "extension@2026-07-28", "failed"), BTreeSet::new(), "{outcome:#}");
    for wanted in EXTENSIONS {
        assert!(extension.contains(wanted), "{wanted}: {outcome:#}");
    }
}
