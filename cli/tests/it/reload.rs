//! Live reload end to end: `code-mode serve` (and a split `code-mode
//! bridge` over a real nats-server) gets SIGHUP after its policy file or
//! its `mcpServers` file changed. The next call is judged by the new rules,
//! added servers' tools appear and removed ones go, while the client
//! session stays open with its taint and its kept variables; an invalid
//! file and a change that cannot apply live keep the running config, say
//! why on stderr (file, server, key) and are counted in the metrics; an
//! applied reload leaves an audit record with the new policy's SHA-256 and
//! the chain still verifies.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use code_mode_core::testing::TempDir;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::support::{self, Deployment, stdout_of};

/// Send SIGHUP to `pid` (the workspace forbids `unsafe`).
fn hangup(pid: u32) {
    let status = std::process::Command::new("kill").args(["-HUP", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -HUP {pid}: {status}");
}

/// `code-mode serve ARGS [-- test server]` with its stderr in `stderr`, and
/// an MCP client on its stdio. Returns the client and the process id.
async fn serve(args: &[&str], server: bool, stderr: &Path) -> (RunningService<RoleClient, ()>, u32) {
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("serve").args(args);
    if server {
        cmd.arg("--").arg(support::test_server());
    }
    let file = std::fs::File::create(stderr).expect("the stderr file");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .expect("serve starts");
    let pid = child.id().expect("a pid");
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let client = ().serve(transport).await.expect("the MCP handshake succeeds");
    (client, pid)
}

async fn run_python(client: &RunningService<RoleClient, ()>, code: &str) -> CallToolResult {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    client.peer().call_tool(params).await.expect("run_python answers")
}

async fn description(client: &RunningService<RoleClient, ()>) -> String {
    let tools = client.peer().list_all_tools().await.expect("tools/list answers");
    tools[0].description.as_deref().unwrap_or_default().to_string()
}

/// Wait up to 20 s for the `run_python` description to satisfy `ok`.
async fn description_until(client: &RunningService<RoleClient, ()>, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = description(client).await;
        if ok(&text) {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what} within 20 s; the description:\n{text}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Wait up to 20 s until `stderr` holds a line with every one of `needles`;
/// that line.
async fn logged(stderr: &Path, needles: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(stderr).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
            return line.to_string();
        }
        assert!(tokio::time::Instant::now() < deadline, "no line with {needles:?} within 20 s in:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The metrics address `serve` printed on stderr.
async fn metrics_addr(stderr: &Path) -> String {
    let line = logged(stderr, &["metrics on http://"]).await;
    let url = line.split("http://").nth(1).unwrap();
    url.trim_end_matches("/metrics").trim().to_string()
}

/// The value of the series `series` in a scrape of `addr`.
fn scraped(addr: &str, series: &str) -> Option<f64> {
    let (status, _, body) = support::raw_http(addr, "GET", "/metrics", &[], "");
    assert_eq!(status, 200, "{body}");
    body.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
}

fn write(path: &Path, text: &str) {
    // Written whole and renamed, as an editor or a deploy would.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn sha256_hex(text: &str) -> String {
    code_mode_audit::record::hex_sha256(text.as_bytes())
}

const ALLOW_ALL: &str = r#"{"version":"1","default":"allow"}"#;
const DENY_GET_ENV: &str =
    r#"{"version":"1","default":"allow","tools":{"get_env":{"action":"deny","reason":"no env from now on"}}}"#;
const INVALID: &str = r#"{"version":"1","default":"allow","tools":{"get_env":{"action":"perhaps"}}}"#;

const TRY_ADD: &str = "try:\n    print(await add({'a': 2, 'b': 3}))\nexcept ToolError as e:\n    print('refused:', e)";
const TRY_GET_ENV: &str =
    "try:\n    print(await get_env({'name': 'NO_SUCH_VARIABLE'}))\nexcept ToolError as e:\n    print('refused:', e)";

#[tokio::test]
async fn a_policy_changed_under_serve_judges_the_next_call_while_the_kept_session_keeps_its_variables_and_taint() {
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("reload-policy");
    let policy = dir.0.join("policy.json");
    let audit = dir.0.join("audit.jsonl");
    let stderr = dir.0.join("stderr.log");
    write(&policy, ALLOW_ALL);
    let args = [
        "--policy",
        policy.to_str().unwrap(),
        "--private",
        "get_env",
        "--keep-variables",
        "--audit",
        audit.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    let (client, pid) = serve(&args, true, &stderr).await;
    let metrics = metrics_addr(&stderr).await;
    assert_eq!(scraped(&metrics, "codemode_config_last_reload_success "), Some(1.0));

    let first = format!("x = 41\n{TRY_ADD}\n{TRY_GET_ENV}");
    assert_eq!(stdout_of(&run_python(&client, &first).await), "{\"sum\":5}\n<unset>\n");

    // Deny get_env: the next call is judged by it, and it is no longer offered.
    write(&policy, DENY_GET_ENV);
    hangup(pid);
    logged(&stderr, &["config reloaded"]).await;
    description_until(&client, "get_env leaves the description", |d| !d.contains("def get_env(")).await;
    let later = format!("print(x + 1)\n{TRY_GET_ENV}\n{TRY_ADD}");
    let out = stdout_of(&run_python(&client, &later).await);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "42", "the kept session keeps its variables: {out}");
    assert_eq!(lines[1], "refused: get_env: denied by policy (/tools/get_env): no env from now on", "{out}");
    assert!(
        lines[2].starts_with(
            "refused: add: refused by the private-data rule: this session has called the private tool get_env"
        ),
        "the session keeps its taint though no tool is private any more: {out}"
    );

    // An invalid policy: the running rules stay, the log names file and key.
    write(&policy, INVALID);
    hangup(pid);
    let line = logged(&stderr, &["config not reloaded"]).await;
    assert!(line.contains(&format!("{}: /tools/get_env/action", policy.display())), "{line}");
    let out = stdout_of(&run_python(&client, TRY_GET_ENV).await);
    assert_eq!(out, "refused: get_env: denied by policy (/tools/get_env): no env from now on\n");
    assert_eq!(scraped(&metrics, "codemode_config_reloads_total{result=\"ok\"} "), Some(1.0));
    assert_eq!(scraped(&metrics, "codemode_config_reloads_total{result=\"invalid\"} "), Some(1.0));
    assert_eq!(scraped(&metrics, "codemode_config_last_reload_success "), Some(0.0));

    // The audit record of the applied reload names the new policy's hash.
    let reloads: Vec<Value> = audit_lines(&audit).into_iter().filter(|r| r["kind"] == "reload").collect();
    assert_eq!(reloads.len(), 1, "one applied reload: {reloads:?}");
    assert_eq!(reloads[0]["source"], "policies");
    assert_eq!(reloads[0]["policies"][0]["sha256"], sha256_hex(DENY_GET_ENV), "{}", reloads[0]);
    client.cancel().await.unwrap();
    let verified = std::process::Command::new(support::code_mode())
        .args(["audit", "verify", audit.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success() && said.contains(": the chain holds"), "{said}");
}

/// A config file of test servers by name (each logging nowhere), the first
/// one's `get_env` private.
fn config(path: &Path, names: &[&str], extra_args: &[&str]) {
    let mut servers = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        let mut entry = json!({"command": support::test_server(), "args": extra_args});
        if i == 0 && *name == "one" {
            entry["private"] = json!(["get_env"]);
        }
        servers.insert(name.to_string(), entry);
    }
    write(path, &json!({ "mcpServers": servers }).to_string());
}

#[tokio::test]
async fn a_server_added_to_the_config_file_appears_after_sighup_and_a_removed_one_goes_but_not_while_it_holds_a_taint()
{
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("reload-servers");
    let file: PathBuf = dir.0.join("servers.json");
    let stderr = dir.0.join("stderr.log");
    config(&file, &["one"], &[]);
    let args = ["--config", file.to_str().unwrap(), "--metrics-addr", "127.0.0.1:0"];
    let (client, pid) = serve(&args, false, &stderr).await;
    let metrics = metrics_addr(&stderr).await;
    let before = description(&client).await;
    assert!(before.contains("def one__add(") && !before.contains("two__add"), "{before}");
    let out = stdout_of(&run_python(&client, "print(await one__get_env({'name': 'NO_SUCH_VARIABLE'}))").await);
    assert_eq!(out, "<unset>\n", "the session is tainted by one");

    // Added: its tools reach the client, and cells call them.
    config(&file, &["one", "two"], &[]);
    hangup(pid);
    description_until(&client, "two's tools appear", |d| d.contains("def two__add(")).await;
    let out = stdout_of(&run_python(&client, "print('two__add' in TOOLS, 'one__add' in TOOLS)").await);
    assert_eq!(out, "True True\n");

    // Removing one while this session holds its taint is refused.
    config(&file, &["two"], &[]);
    hangup(pid);
    let line = logged(&stderr, &["config not reloaded", "server \"one\": removed"]).await;
    assert!(line.contains(&file.display().to_string()) && line.contains("taint"), "{line}");
    // A start key of a running server cannot change live.
    config(&file, &["one", "two"], &["--add-tool"]);
    hangup(pid);
    let line = logged(&stderr, &["config not reloaded", "key \"args\""]).await;
    assert!(line.contains("server \"one\""), "{line}");
    assert_eq!(scraped(&metrics, "codemode_config_reloads_total{result=\"refused\"} "), Some(2.0));
    let still = description(&client).await;
    assert!(still.contains("def one__add(") && still.contains("def two__add("), "nothing changed: {still}");

    // A server no session holds a taint from goes.
    config(&file, &["one"], &[]);
    hangup(pid);
    description_until(&client, "two's tools go", |d| !d.contains("two__add")).await;
    let out = stdout_of(&run_python(&client, "print('two__add' in TOOLS, 'one__add' in TOOLS)").await);
    assert_eq!(out, "False True\n");
    assert_eq!(scraped(&metrics, "codemode_config_reloads_total{result=\"ok\"} "), Some(2.0));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn sighup_to_one_bridge_over_nats_reloads_that_bridges_policy() {
    let dir = TempDir::new("reload-nats");
    let policy = dir.0.join("policy.json");
    write(&policy, ALLOW_ALL);
    if !support::sandbox_available() {
        return;
    }
    let (client, _, guards) = support::start(Deployment::OverNats, &["--policy", policy.to_str().unwrap()], &[]).await;
    assert_eq!(stdout_of(&support::run_python(&client, TRY_GET_ENV).await), "<unset>\n");
    write(&policy, DENY_GET_ENV);
    hangup(guards.bridge.as_ref().and_then(|b| b.id()).expect("the bridge process"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let out = stdout_of(&support::run_python(&client, TRY_GET_ENV).await);
        if out == "refused: get_env: denied by policy (/tools/get_env): no env from now on\n" {
            break;
        }
        assert_eq!(out, "<unset>\n");
        assert!(tokio::time::Instant::now() < deadline, "the bridge over NATS reloads within 20 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    client.cancel().await.unwrap();
}

/// A client that answers its first elicitation only when told: it says
/// when it was asked, then waits for the go-ahead and accepts.
#[derive(Clone)]
struct Gate {
    asked: Arc<tokio::sync::Notify>,
    go: Arc<tokio::sync::Notify>,
}

impl rmcp::ClientHandler for Gate {
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked.notify_one();
        self.go.notified().await;
        Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({})))
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new().with_form(rmcp::model::FormElicitationCapability::default()),
        );
        info
    }
}

const ECHO_NEEDS_APPROVAL: &str = r#"{"version":"1","default":"allow","tools":{"echo":{"action":"approve"}}}"#;
const ECHO_NEEDS_APPROVAL_ADD_DENIED: &str = r#"{"version":"1","default":"allow","tools":{"echo":{"action":"approve"},"add":{"action":"deny","reason":"no sums from now on"}}}"#;

#[tokio::test]
async fn a_call_waiting_for_approval_across_a_sighup_runs_once_approved_and_the_cells_next_call_meets_the_new_rules() {
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("reload-approval");
    let policy = dir.0.join("policy.json");
    let audit = dir.0.join("audit.jsonl");
    write(&policy, ECHO_NEEDS_APPROVAL);
    let gate = Gate { asked: Arc::default(), go: Arc::default() };
    let args = ["--policy", policy.to_str().unwrap(), "--audit", audit.to_str().unwrap()];
    let (client, pid, _guards) = support::start_with_lifecycle(
        Deployment::AllInOne,
        &args,
        &[],
        gate.clone(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await;
    let code = format!("print(await echo({{'text': 'held across the reload'}}))\n{TRY_ADD}");
    let cell = tokio::spawn({
        let peer = client.peer().clone();
        async move {
            let mut params = CallToolRequestParams::new("run_python");
            params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
            peer.call_tool(params).await
        }
    });
    tokio::time::timeout(Duration::from_secs(30), gate.asked.notified()).await.expect("echo's question within 30 s");

    // While the question waits, the policy changes and is reloaded.
    write(&policy, ECHO_NEEDS_APPROVAL_ADD_DENIED);
    hangup(pid);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !audit_lines(&audit).iter().any(|r| r["kind"] == "reload") {
        assert!(tokio::time::Instant::now() < deadline, "the reload is recorded within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    gate.go.notify_one();
    let result = tokio::time::timeout(Duration::from_secs(60), cell).await.expect("the cell ends").unwrap();
    let out = stdout_of(&result.expect("run_python answers"));
    assert_eq!(
        out, "held across the reload\nrefused: add: denied by policy (/tools/add): no sums from now on\n",
        "the approved call ran; the cell's next call met the reloaded rules"
    );
    let calls: Vec<(String, String)> = audit_lines(&audit)
        .iter()
        .filter(|r| r["kind"] == "call")
        .map(|r| {
            (r["tool"].as_str().unwrap_or_default().to_string(), r["decision"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    assert_eq!(calls, [("echo".to_string(), "approved".to_string()), ("add".to_string(), "denied".to_string())]);
    client.cancel().await.ok();
}

/// The shell lines of the reload example in docs/servers.md (the block
/// after "## Changing config while running").
fn documented_reload_lines() -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/servers.md")).unwrap();
    let section = doc.split("## Changing config while running").nth(1).expect("the section");
    let block = section.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("its shell block");
    block.lines().map(|l| l.split("   #").next().unwrap().trim().to_string()).filter(|l| !l.is_empty()).collect()
}

#[tokio::test]
async fn the_documented_reload_command_signals_only_the_serve_whose_pid_file_it_reads() {
    if !support::sandbox_available() {
        return;
    }
    let lines = documented_reload_lines();
    let kill = lines.iter().find(|l| l.starts_with("kill -HUP")).expect("the docs give a kill -HUP line");
    assert!(!kill.contains("pidof") && !kill.contains("pkill"), "signals by name: {kill}");
    let dir = TempDir::new("reload-pid-file");
    let (mine, other) = (dir.0.join("code-mode.pid"), dir.0.join("other.pid"));
    let mut served = Vec::new();
    for (name, pid_file) in [("mine", &mine), ("other", &other)] {
        let file = dir.0.join(format!("{name}.json"));
        config(&file, &["one"], &[]);
        let stderr = dir.0.join(format!("{name}.log"));
        let args = ["--config", file.to_str().unwrap(), "--pid-file", pid_file.to_str().unwrap(), "--warm", "0"];
        let (client, pid) = serve(&args, false, &stderr).await;
        assert_eq!(std::fs::read_to_string(pid_file).unwrap(), format!("{pid}\n"), "the pid file holds its id");
        config(&file, &["one", "two"], &[]);
        served.push((client, stderr));
    }
    // The docs' line, verbatim, with `pidfile` set to the first serve's file.
    let script = format!("pidfile='{}'\n{kill}", mine.display());
    let out = std::process::Command::new("sh").arg("-c").arg(&script).output().expect("sh runs");
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    description_until(&served[0].0, "the signalled serve reloads", |d| d.contains("def two__add(")).await;
    logged(&served[0].1, &["SIGHUP: reloading the config"]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let untouched = std::fs::read_to_string(&served[1].1).unwrap_or_default();
    assert!(!untouched.contains("SIGHUP"), "the other serve was signalled too:\n{untouched}");
    assert!(!description(&served[1].0).await.contains("two__add"), "the other serve kept its config");
    // At exit each removes its file.
    for (client, _) in served {
        client.cancel().await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while mine.exists() || other.exists() {
        assert!(tokio::time::Instant::now() < deadline, "the pid files are left after exit");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
