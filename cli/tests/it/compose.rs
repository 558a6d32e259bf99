//! The docker-compose stack of `deploy/`: images built by `deploy/build.sh`
//! from this workspace's binaries, nats-server with the deployment's users,
//! a bridge, two sandbox-runners (`--scale`) that start cells through the
//! host's Docker socket, and a frontend per client session started with
//! `docker-compose run --rm -T frontend`, to which a real MCP client talks
//! over that command's stdin and stdout, and the long-running HTTP frontend
//! (`--profile http`, authentication on: a token file made here with
//! `code-mode token new`, mounted read-only), to which another connects by
//! URL with its bearer token (and a request without one gets 401); Prometheus
//! (`--profile monitoring`, its image built here: `up` pulls nothing) scrapes
//! every replica with the alert rules. After a short load of HTTP sessions
//! (tool calls, a private call, a rate-limited one, runners full), every
//! query of every Grafana dashboard (`deploy/grafana/`) returns series from
//! that Prometheus, so a renamed metric fails here; from `up` until then
//! (the stack starting, a minute or more with every target up, the cells
//! included) no alert was ever even pending; and at the end, nats-server killed, the bridge's watched state
//! store stops answering and `CodeModeStateStoreUnreachable` fires.
//! (Grafana itself comes from a registry, in profile `grafana`, so it is not
//! started here.)
//! The `cluster` profile runs the stack on three nats-servers with three
//! replicas of its JetStream state, and keeps serving with one of them
//! killed in the middle of a load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::support::{self, outcome, report, run_python};

/// The workspace root (the compose file is in `deploy/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the cli crate is in the workspace").to_path_buf()
}

/// True when `docker-compose` runs and `prometheus` (whose binary
/// build.sh puts in an image) is installed; under CI their absence fails
/// the test.
fn compose_available() -> bool {
    for (tool, arg) in [("docker-compose", "version"), ("prometheus", "--version")] {
        match Command::new(tool).arg(arg).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => return code_mode_core::testing::unavailable(tool, &String::from_utf8_lossy(&out.stderr)),
            Err(e) => return code_mode_core::testing::unavailable(tool, &e.to_string()),
        }
    }
    true
}

/// Build the stack's images with `deploy/build.sh` from this workspace's
/// binaries, once per test process (the tests of this file share them).
fn build_services_image() {
    static BUILT: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if *built {
        return;
    }
    let bin_dir = support::code_mode().parent().expect("the binary is in a folder").to_path_buf();
    let out = Command::new("bash")
        .arg(root().join("deploy/build.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .output()
        .expect("build.sh runs");
    assert!(out.status.success(), "deploy/build.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    *built = true;
}

/// The wrapped server of the test stack: `add` for the cells, `echo`
/// private (a call taints its session), `count` limited to one call a
/// minute per session (a second call is refused by the policy), `sleep`
/// needing approval (the test's HTTP client cannot be asked, so it is
/// refused after a question to its frontend).
const SERVERS: &str = r#"{"mcpServers": {
  "test": {"command": "code-mode-test-server", "allow": ["add", "echo", "count", "sleep"], "private": ["echo"],
           "policy": {"version": "1", "default": "allow",
                      "tools": {"count": {"limits": [{"counter": "counts", "window": "minute", "max": 1}]},
                                "sleep": {"action": "approve"}}}}
}}"#;

/// How long, at least, the healthy stack's Prometheus is watched for
/// alerts (twelve evaluations of its rules, 5 s apart).
const HEALTHY_WATCH: Duration = Duration::from_secs(60);

/// Projects made by this process so far.
static PROJECTS: AtomicUsize = AtomicUsize::new(0);

/// One compose project, taken down (volumes too) when dropped.
struct Project {
    name: String,
    passwords: [(String, String); 3],
    http_port: u16,
    prometheus_port: u16,
    /// More variables for docker-compose (`CODE_MODE_BRIDGE_IMAGE`, ...).
    env: Vec<(String, String)>,
    /// The profiles to start besides the default services.
    profiles: Vec<&'static str>,
    /// The bearer token of the HTTP frontend's one client, whose line is
    /// in the token file the stack mounts.
    token: String,
    /// Holds the test's `servers.json` (`SERVERS`) and `http.tokens`.
    _servers: code_mode_core::testing::TempDir,
}

impl Project {
    fn new() -> Self {
        let password = || uuid::Uuid::new_v4().simple().to_string();
        let servers = code_mode_core::testing::TempDir::new("compose-servers");
        std::fs::write(servers.0.join("servers.json"), SERVERS).unwrap();
        let servers_file = servers.0.join("servers.json").to_string_lossy().into_owned();
        // The HTTP frontend's token file, made as docs/deployment.md says; the file
        // holds the token's hash, the test keeps the token.
        let client = crate::auth::token_new("compose-client");
        let tokens_file = servers.0.join("http.tokens");
        crate::auth::write_tokens(&tokens_file, &[&client]);
        let tokens_file = tokens_file.to_string_lossy().into_owned();
        Self {
            // Unique per project: tests of one process (`cargo test` runs
            // them as threads) must not take each other's stack down.
            name: format!("codemodetest{}n{}", std::process::id(), PROJECTS.fetch_add(1, Ordering::Relaxed)),
            passwords: [
                ("CODE_MODE_NATS_FRONTEND_PASSWORD".into(), password()),
                ("CODE_MODE_NATS_BRIDGE_PASSWORD".into(), password()),
                ("CODE_MODE_NATS_RUNNER_PASSWORD".into(), password()),
            ],
            http_port: code_mode_core::testing::free_port(),
            prometheus_port: code_mode_core::testing::free_port(),
            // One cell per runner: the four cells at once of the HTTP
            // frontend find runners full, as the no-capacity panels need.
            env: vec![
                ("CODE_MODE_SERVERS".into(), servers_file),
                ("CODE_MODE_RUNNER_CAPACITY".into(), "1".into()),
                ("CODE_MODE_HTTP_TOKENS".into(), tokens_file),
            ],
            profiles: vec!["http", "monitoring"],
            token: client.token,
            _servers: servers,
        }
    }

    /// `docker-compose` for this project, for `run` and `down`.
    fn base_command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("docker-compose");
        command.args(["-p", &self.name, "-f"]).arg(root().join("deploy/docker-compose.yml"));
        command.envs(self.passwords.iter().map(|(k, v)| (k, v)));
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    fn compose(&self) -> Command {
        let mut command = Command::new("docker-compose");
        command.args(["-p", &self.name, "-f"]).arg(root().join("deploy/docker-compose.yml"));
        for profile in &self.profiles {
            command.args(["--profile", profile]);
        }
        command.envs(self.passwords.iter().map(|(k, v)| (k, v)));
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command.env("CODE_MODE_HTTP_PORT", self.http_port.to_string());
        command.env("CODE_MODE_PROMETHEUS_PORT", self.prometheus_port.to_string());
        command
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.compose().args(args).output().expect("docker-compose runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "docker-compose {args:?} failed:\n{text}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = self.compose().args(["down", "-v", "--remove-orphans", "-t", "20"]).output();
    }
}

#[tokio::test]
async fn the_compose_stack_serves_clients_through_compose_run_and_http_and_every_dashboard_query_has_series() {
    if !support::sandbox_available() || !compose_available() {
        return;
    }
    build_services_image();

    let project = Project::new();
    // The profiles as docs/deployment.md gives them, every service of them:
    // nothing is pulled (Grafana is in a profile of its own).
    let out =
        project.compose().args(["up", "-d", "--scale", "sandbox-runner=2"]).output().expect("docker-compose runs");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "docker-compose up failed:\n{said}");
    assert!(!said.contains("Pulling"), "up pulled an image:\n{said}");
    let services = project.run(&["ps", "--services", "--filter", "status=running"]);
    let mut services: Vec<&str> = services.lines().collect();
    services.sort_unstable();
    assert_eq!(services, ["bridge", "frontend-http", "nats", "prometheus", "sandbox-runner"]);
    let web = std::net::SocketAddr::from(([127, 0, 0, 1], project.prometheus_port));
    let up_at = std::time::Instant::now();
    let healthy_from = every_target_up(web, 4).await;
    eprintln!("compose: Prometheus saw the 4 targets up {:?} after up", up_at.elapsed());
    let runners: Vec<String> = project.run(&["ps", "-q", "sandbox-runner"]).lines().map(str::to_string).collect();
    assert_eq!(runners.len(), 2, "two sandbox-runners: {runners:?}");

    let mut frontend = project.base_command();
    frontend.args(["run", "--rm", "-T", "frontend"]);
    let (client, _pid) = support::connect_client(frontend).await;

    let tools = client.list_all_tools().await.expect("the frontend lists its tool");
    let description = tools[0].description.as_deref().unwrap_or_default();
    assert!(description.contains("async def test__add("), "the bridge's catalog reached the frontend");

    let cells = (0..4).map(|i| {
        let client = &client;
        async move {
            let code = format!("import asyncio\nawait asyncio.sleep(1)\nprint(await test__add({{'a': {i}, 'b': 10}}))");
            report(&run_python(client, &code).await)
        }
    });
    let reports = futures::future::join_all(cells).await;
    for (i, report) in reports.iter().enumerate() {
        assert_eq!(report["stdout"], format!("{{\"sum\":{}}}\n", i + 10), "{report}");
    }

    // Each runner reached the host's engine: sandbox containers (its warm
    // pool) carry its container's hostname in their owner label.
    let owners = sandbox_owners();
    for runner in &runners {
        let host = &runner[..12];
        assert!(owners.iter().any(|o| o.starts_with(&format!("{host}:"))), "runner {host} owns none of {owners:?}");
    }
    client.cancel().await.ok();

    // The HTTP frontend serves a client connecting by URL with its token.
    let url = format!("http://127.0.0.1:{}/mcp", project.http_port);
    let token = project.token.clone();
    let http_client = http_client_when_up(&url, &token).await;
    let mut params = rmcp::model::CallToolRequestParams::new("run_python");
    params.arguments =
        Some(serde_json::json!({"code": "print(await test__add({'a': 20, 'b': 22}))"}).as_object().unwrap().clone());
    let result = http_client.call_tool(params).await.expect("run_python answers over HTTP");
    assert_eq!(report(&result)["stdout"], "{\"sum\":42}\n");
    http_client.cancel().await.ok();
    // Without the token, or with another, the stack's frontend says 401.
    let authority = format!("127.0.0.1:{}", project.http_port);
    let forged = format!("Bearer cm_{}", "0".repeat(64));
    let (none, forged) = tokio::task::spawn_blocking(move || {
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
        let json = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        let none = support::raw_http(&authority, "POST", "/mcp", &json, initialize);
        let with = [json[0], json[1], ("Authorization", forged.as_str())];
        (none, support::raw_http(&authority, "POST", "/mcp", &with, initialize))
    })
    .await
    .unwrap();
    assert_eq!(none.0, 401, "no token: {none:?}");
    assert!(none.1.iter().any(|(n, v)| n == "www-authenticate" && v.starts_with("Bearer")), "{none:?}");
    assert_eq!(forged.0, 401, "a token not in the file: {forged:?}");

    // A short load: sessions at once, each a few cells (a tool call, a
    // private call that taints, a call over the policy's limit), then the
    // session ends.
    let loaded = futures::future::join_all((0..LOAD_SESSIONS).map(|i| http_session(&url, &token, i))).await;
    assert!(loaded.iter().all(|n| *n == LOAD_CELLS), "every load cell reported: {loaded:?}");
    let finished = 5 + LOAD_SESSIONS * LOAD_CELLS;

    // Prometheus found both runners and counted every cell.
    let give_up = std::time::Instant::now() + Duration::from_secs(90);
    let (mut up, mut counted) = (Value::Null, Value::Null);
    loop {
        up = query(web, r#"count(up{job="sandbox-runner"} == 1)"#).await.unwrap_or(up);
        counted = query(web, r#"sum(codemode_cells_total{outcome="finished"})"#).await.unwrap_or(counted);
        if up[0]["value"][1] == "2" && counted[0]["value"][1].as_str() == Some(finished.to_string().as_str()) {
            break;
        }
        assert!(std::time::Instant::now() < give_up, "Prometheus: runners up {up}, finished cells {counted}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Every dashboard query returns series. A counter created during the
    // load needs two scrapes before a rate over it exists: retry a while.
    let queries = crate::monitoring::dashboard_queries();
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    let mut empty: Vec<String> = Vec::new();
    for q in &queries {
        loop {
            let series = query(web, &q.expr).await.and_then(|r| r.as_array().map(Vec::len)).unwrap_or(0);
            if series > 0 {
                break;
            }
            if std::time::Instant::now() > give_up {
                empty.push(format!("{} / {}: {}", q.dashboard, q.panel, q.expr));
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    assert!(empty.is_empty(), "dashboard queries without a series from the stack's Prometheus:\n{}", empty.join("\n"));
    eprintln!("compose: {} dashboard queries each returned series", queries.len());

    // From every target up until now, cells and all, no alert was even
    // pending at any evaluation (see alerts.rs for why that means none can
    // fire, whatever its `for:`).
    if let Some(rest) = HEALTHY_WATCH.checked_sub(healthy_from.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    assert_eq!(crate::alerts::rules_evaluate_cleanly(web).await, 8, "the stack's Prometheus evaluates every rule");
    let watched = healthy_from.elapsed();
    let written = crate::alerts::alerts_written_within(web, watched).await;
    assert_eq!(written, serde_json::json!([]), "alerts on the healthy stack within {watched:?}");
    // Nor while it started: before every target's first scrape.
    let since_up = up_at.elapsed();
    let written = crate::alerts::alerts_written_within(web, since_up + Duration::from_secs(1)).await;
    assert_eq!(written, serde_json::json!([]), "alerts while the stack started ({since_up:?} ago)");
    eprintln!("compose: no ALERTS series from `up` on ({since_up:?}), {watched:?} of it with every target up");

    // A runner container killed in the middle of two cells (one slot per
    // runner: one cell each): the cell it held fails within 5 s, the other
    // completes, and the dead runner's containers are removed by the engine's
    // other runner, which sees the owner's container gone.
    let code = "import time\ntime.sleep(15)\nprint('done')";
    let cells = futures::future::join_all((0..2).map(|_| http_cell(&url, &token, code)));
    let victim = runners[0].clone();
    let kill = async {
        tokio::time::sleep(Duration::from_secs(4)).await;
        // Its owner labels (a runner the engine starts again is another owner).
        let mut owners: Vec<String> =
            sandbox_owners().into_iter().filter(|o| o.starts_with(&format!("{}:", &victim[..12]))).collect();
        owners.dedup();
        assert!(!owners.is_empty(), "the runner to kill has containers");
        let out = Command::new("docker").args(["kill", &victim]).output().expect("docker runs");
        assert!(out.status.success(), "docker kill: {}", String::from_utf8_lossy(&out.stderr));
        (std::time::Instant::now(), owners)
    };
    let (ended, (killed_at, victim_owners)) = tokio::join!(cells, kill);
    let (mut lost, mut done) = (Vec::new(), 0);
    for (result, at) in &ended {
        if result.is_error == Some(true)
            && result.content.iter().any(|c| c.as_text().is_some_and(|t| t.text.contains("was lost")))
        {
            lost.push(at.saturating_duration_since(killed_at));
        } else {
            assert_eq!(report(result)["stdout"], "done\n", "the other runner's cell completes: {result:?}");
            done += 1;
        }
    }
    assert_eq!((lost.len(), done), (1, 1), "one cell lost with the runner, one completed: {ended:?}");
    assert!(lost[0] <= Duration::from_secs(5), "the lost cell's error came {:?} after the kill", lost[0]);
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    while sandbox_owners().iter().any(|o| victim_owners.contains(o)) {
        assert!(std::time::Instant::now() < give_up, "the killed runner's containers are left: {:?}", sandbox_owners());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "compose: killed runner's cell failed {:?} after the kill; its containers gone at most {:?} after it",
        lost[0],
        killed_at.elapsed()
    );

    // nats-server killed: the bridge's probe of its state store (every
    // 10 s, the test's servers have a policy) fails, its
    // codemode_state_store_up goes to 0, and the alert fires a minute later.
    project.run(&["kill", "nats"]);
    let nats_killed = std::time::Instant::now();
    let (mut pending, mut firing, mut others) = (None, None, std::collections::BTreeSet::new());
    while firing.is_none() {
        assert!(nats_killed.elapsed() < Duration::from_secs(150), "no firing CodeModeStateStoreUnreachable");
        for alert in crate::alerts::active_alerts(web).await.unwrap_or_default() {
            if alert.name != "CodeModeStateStoreUnreachable" {
                others.insert(format!("{} {}", alert.name, alert.state));
                continue;
            }
            assert_eq!(alert.labels["job"], "bridge", "{alert:?}");
            match alert.state.as_str() {
                "pending" => pending = pending.or(Some(nats_killed.elapsed())),
                _ => firing = Some(nats_killed.elapsed()),
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (pending, firing) = (pending.expect("pending before firing"), firing.unwrap());
    assert!(firing >= Duration::from_secs(60), "fired {firing:?} after the kill, before its for: 1m");
    eprintln!(
        "compose: nats-server killed: CodeModeStateStoreUnreachable pending after {pending:?}, firing after {firing:?} \
         (other alerts meanwhile: {others:?})"
    );
    project.run(&["start", "nats"]);
    drop(project);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left: Vec<String> = sandbox_owners()
        .into_iter()
        .filter(|o| runners.iter().any(|r| o.starts_with(&format!("{}:", &r[..12]))))
        .collect();
    assert!(left.is_empty(), "the runners removed their containers when the stack went down: {left:?}");
}

/// An MCP client transport to the stack's HTTP frontend sending `token`.
fn http_transport(url: &str, token: &str) -> rmcp::transport::StreamableHttpClientTransport<reqwest::Client> {
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string());
    rmcp::transport::StreamableHttpClientTransport::from_config(config)
}

/// HTTP sessions of the short load, and cells each.
const LOAD_SESSIONS: usize = 6;
const LOAD_CELLS: usize = 3;

/// Wait (at most 90 s) until Prometheus scrapes `targets` targets, every
/// one up; then the moment it saw them.
async fn every_target_up(web: std::net::SocketAddr, targets: usize) -> std::time::Instant {
    let give_up = std::time::Instant::now() + Duration::from_secs(90);
    let mut up = Value::Null;
    loop {
        up = query(web, "up").await.unwrap_or(up);
        let series = up.as_array().map(Vec::as_slice).unwrap_or_default();
        if series.len() == targets && series.iter().all(|s| s["value"][1] == "1") {
            return std::time::Instant::now();
        }
        assert!(std::time::Instant::now() < give_up, "Prometheus's targets: {up}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A Prometheus instant query; its `result`, or `None` on any failure.
pub(crate) async fn query(web: std::net::SocketAddr, promql: &str) -> Option<Value> {
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    support::prometheus_query(web, &encoded).await
}

/// An MCP session over HTTP with the stack's HTTP frontend, once it answers
/// (within 90 s of `up`).
async fn http_client_when_up(url: &str, token: &str) -> support::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let give_up = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        match rmcp::ServiceExt::serve((), http_transport(url, token)).await {
            Ok(client) => return client,
            Err(e) => {
                assert!(std::time::Instant::now() < give_up, "the HTTP frontend did not answer at {url}: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// One MCP session over HTTP running the load's cells; returns how many
/// reported. Every cell ends without an error (refusals are caught), so
/// each counts as `finished`.
async fn http_session(url: &str, token: &str, i: usize) -> usize {
    let client = rmcp::ServiceExt::serve((), http_transport(url, token)).await.expect("an HTTP session opens");
    let cells = [
        format!("print(await test__add({{'a': {i}, 'b': 1}}))"),
        // The second count is over the policy's limit of one a minute;
        // sleep needs an approval nobody can give here.
        "for _ in range(2):\n    try:\n        print(await test__count({}))\n    except ToolError as e:\n        print('refused', e)\ntry:\n    await test__sleep({'seconds': 0})\nexcept ToolError as e:\n    print('refused', e)".to_string(),
        // A private call taints the session; add is then refused.
        "print(await test__echo({'text': 'x'}))\ntry:\n    await test__add({'a': 1, 'b': 1})\nexcept ToolError as e:\n    print('refused', e)".to_string(),
    ];
    let mut reported = 0;
    for code in cells {
        let mut params = rmcp::model::CallToolRequestParams::new("run_python");
        params.arguments = Some(serde_json::json!({ "code": code }).as_object().unwrap().clone());
        let result = client.call_tool(params).await.expect("run_python answers");
        let report = report(&result);
        assert_eq!(report["error"], Value::Null, "{report}");
        reported += 1;
    }
    client.cancel().await.ok();
    reported
}

/// One cell in its own MCP session over HTTP: its result and when it came.
async fn http_cell(url: &str, token: &str, code: &str) -> (rmcp::model::CallToolResult, std::time::Instant) {
    let client = rmcp::ServiceExt::serve((), http_transport(url, token)).await.expect("an HTTP session opens");
    let mut params = rmcp::model::CallToolRequestParams::new("run_python");
    params.arguments = Some(serde_json::json!({ "code": code }).as_object().unwrap().clone());
    let result = client.call_tool(params).await.expect("run_python answers");
    let at = std::time::Instant::now();
    client.cancel().await.ok();
    (result, at)
}

/// The owner labels of every sandbox container on the engine.
fn sandbox_owners() -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--filter", "label=code-mode.sandbox", "--format", "{{.Label \"code-mode.owner\"}}"])
        .output()
        .expect("docker runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// Build `deploy/examples/own-servers` (an npm and a PyPI server added to
/// the services image) as `tag`, passing this machine's extra CA
/// certificates (a TLS-inspecting proxy) as the example says.
fn build_own_servers_image(tag: &str) {
    let context = code_mode_core::testing::TempDir::new("own-servers");
    let example = root().join("deploy/examples/own-servers");
    for file in ["Dockerfile", "servers.json"] {
        std::fs::copy(example.join(file), context.0.join(file)).expect("the example is copied");
    }
    let extra = context.0.join("extra-ca");
    std::fs::create_dir_all(&extra).unwrap();
    if let Ok(certs) = std::fs::read_dir("/usr/local/share/ca-certificates") {
        for cert in certs.flatten().filter(|c| c.path().extension().is_some_and(|e| e == "crt")) {
            std::fs::copy(cert.path(), extra.join(cert.file_name())).unwrap();
        }
    }
    let out = Command::new("docker").args(["build", "-q", "-t", tag]).arg(&context.0).output().expect("docker runs");
    assert!(out.status.success(), "the example image did not build:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn your_own_npm_and_pypi_servers_run_in_the_stack_from_the_example_dockerfile() {
    if !support::sandbox_available() || !compose_available() {
        return;
    }
    build_services_image();
    let tag = "code-mode-own-servers-test:latest";
    build_own_servers_image(tag);
    let mut project = Project::new();
    project.profiles.clear();
    project.env = vec![
        ("CODE_MODE_BRIDGE_IMAGE".into(), tag.into()),
        ("CODE_MODE_SERVERS".into(), "./examples/own-servers/servers.json".into()),
    ];
    project.run(&["up", "-d"]);

    let mut frontend = project.base_command();
    frontend.args(["run", "--rm", "-T", "frontend"]);
    let (client, _pid) = support::connect_client(frontend).await;
    let code = r#"import json
await fs__write_file(path="/tmp/note.txt", content="hello from the sandbox")
print(json.loads(await fs__read_text_file(path="/tmp/note.txt"))["content"])
now = json.loads(await time__get_current_time(timezone="Asia/Tokyo"))
print(now["timezone"])"#;
    let result = run_python(&client, code).await;
    assert_eq!(report(&result)["stdout"], "hello from the sandbox\nAsia/Tokyo\n", "{result:?}");
    client.cancel().await.ok();

    // docs/deployment.md's way down: `down` with the same variables.
    let down = project.base_command().args(["down", "-v", "-t", "20"]).output().await.expect("docker-compose runs");
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let left = project.compose().args(["ps", "-q"]).output().expect("docker-compose runs");
    assert!(String::from_utf8_lossy(&left.stdout).trim().is_empty(), "nothing of the stack is left");
}

/// `deploy/frontend-http-start.sh` (the compose stack's HTTP frontend) run
/// on this host against a real nats-server and bridge, with `env`: the
/// child, its URL and its log.
async fn start_script(
    nats: &code_mode_core::testing::NatsServer,
    users: &code_mode_core::testing::NatsUsers,
    env: &[(&str, &str)],
) -> (tokio::process::Child, String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let bin_dir = support::code_mode().parent().expect("the binary is in a folder").to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut script = tokio::process::Command::new("sh");
    script.arg(root().join("deploy/frontend-http-start.sh")).args(["--nats", &nats.url(), "--http", "127.0.0.1:0"]);
    script.env("PATH", path).env("CODE_MODE_NATS_USER", "frontend");
    script.env("CODE_MODE_NATS_PASSWORD", users.password("frontend")).envs(env.iter().copied());
    script.stdin(std::process::Stdio::null()).kill_on_drop(true);
    crate::http::spawn_http(&mut script).await
}

#[tokio::test]
async fn the_http_frontends_start_script_takes_an_issuer_from_the_environment_and_else_the_token_file() {
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else {
        panic!("nats-server is needed for the split deployment");
    };
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let json = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let authority = |url: &str| url.trim_start_matches("http://").trim_end_matches("/mcp").to_string();

    // An issuer (none answers here: every token is refused until one does).
    let issuer = "http://127.0.0.1:1/realms/tools";
    let env = [
        ("CODE_MODE_OAUTH_ISSUER", issuer),
        ("CODE_MODE_OAUTH_RESOURCE", "https://mcp.example.com/mcp"),
        ("CODE_MODE_OAUTH_SCOPES", "mcp:run mcp:read"),
    ];
    let (child, url, _log) = start_script(&nats, &users, &env).await;
    let at = authority(&url);
    let (metadata, refused) = tokio::task::spawn_blocking(move || {
        let metadata = support::raw_http(&at, "GET", "/.well-known/oauth-protected-resource/mcp", &[], "");
        (metadata, support::raw_http(&at, "POST", "/mcp", &json, initialize))
    })
    .await
    .unwrap();
    assert_eq!(metadata.0, 200, "{metadata:?}");
    let document: Value = serde_json::from_str(&metadata.2).unwrap();
    assert_eq!(document["authorization_servers"], serde_json::json!([issuer]), "{document}");
    assert_eq!(document["scopes_supported"], serde_json::json!(["mcp:run", "mcp:read"]), "{document}");
    assert_eq!(refused.0, 401, "{refused:?}");
    assert!(refused.1.iter().any(|(n, v)| n == "www-authenticate" && v.contains("resource_metadata=")), "{refused:?}");
    drop(child);

    // Without an issuer: the token file.
    let alice = crate::auth::token_new("alice");
    let tokens = crate::auth::TokenFile::of(&[&alice]);
    let (child, url, _log) = start_script(&nats, &users, &[("CODE_MODE_HTTP_TOKENS_FILE", tokens.arg())]).await;
    let (at, auth) = (authority(&url), crate::auth::bearer(&alice));
    let (without, with) = tokio::task::spawn_blocking(move || {
        let without = support::raw_http(&at, "POST", "/mcp", &json, initialize);
        let headers = [json[0], json[1], ("Authorization", auth.as_str())];
        (without, support::raw_http(&at, "POST", "/mcp", &headers, initialize))
    })
    .await
    .unwrap();
    assert_eq!((without.0, with.0), (401, 200), "{without:?} {with:?}");
    drop(child);

    // An issuer without the resource stops at once, saying what is missing.
    let out = tokio::process::Command::new("sh")
        .arg(root().join("deploy/frontend-http-start.sh"))
        .env("CODE_MODE_OAUTH_ISSUER", issuer)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CODE_MODE_OAUTH_RESOURCE"), "{out:?}");
}

/// The wrapped server of the cluster test: `echo` private (a call taints
/// the session), `count` at most 2 calls a day per session (a day, so that
/// no window boundary falls inside the test).
const CLUSTER_SERVERS: &str = r#"{"mcpServers": {
  "test": {"command": "code-mode-test-server", "allow": ["add", "echo", "count"], "private": ["echo"],
           "policy": {"version": "1", "default": "allow",
                      "tools": {"count": {"limits": [{"counter": "counts", "window": "day", "max": 2}]}}}}
}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_profile_serves_through_a_nats_server_killed_mid_load_and_taints_and_limits_hold() {
    if !support::sandbox_available() || !compose_available() {
        return;
    }
    build_services_image();
    let mut project = Project::new();
    std::fs::write(project._servers.0.join("servers.json"), CLUSTER_SERVERS).unwrap();
    project.profiles = vec!["http", "cluster"];
    project.env.retain(|(k, _)| k != "CODE_MODE_RUNNER_CAPACITY");
    // What deploy/cluster.env sets, and the route password docs/deployment.md says to
    // export.
    project.env.extend(
        [
            ("CODE_MODE_NATS_ROUTES", "nats:6222,nats-2:6222,nats-3:6222".to_string()),
            ("CODE_MODE_NATS_URLS", "nats://nats:4222,nats://nats-2:4222,nats://nats-3:4222".to_string()),
            ("CODE_MODE_JETSTREAM_REPLICAS", "3".to_string()),
            ("CODE_MODE_NATS_ROUTE_PASSWORD", uuid::Uuid::new_v4().simple().to_string()),
            ("CODE_MODE_RUNNER_CAPACITY", "4".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    project.run(&["up", "-d", "nats", "nats-2", "nats-3", "bridge", "sandbox-runner", "frontend-http"]);
    let url = format!("http://127.0.0.1:{}/mcp", project.http_port);
    let token = project.token.clone();

    // Before the kill: session A taints itself with echo and is refused
    // add; session B counts once (1 of 2 today). The bridge's buckets may
    // take a moment to get their three replicas: retry the first cell.
    let tainted = http_client_when_up(&url, &token).await;
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match outcome(&run_python(&tainted, "print(await test__echo({'text': 'x'}))").await) {
            Ok((stdout, None)) if stdout == "x\n" => break,
            other => assert!(std::time::Instant::now() < give_up, "the stack never ran a cell: {other:?}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (stdout, _) = outcome(&run_python(&tainted, support::ADD_ONCE).await).expect("a report");
    assert!(stdout.contains("has called the private tool test__echo"), "tainted before the kill: {stdout}");
    let counted = http_client_when_up(&url, &token).await;
    let (stdout, error) = outcome(&run_python(&counted, "print(await test__count({}))").await).expect("a report");
    assert_eq!(error, None, "the first count of the day: {stdout}");

    // The load: four sessions each running a cell with a tool call and two
    // seconds of work; the first nats-server's container is killed a second
    // in (the services were given all three and may be on any of them).
    let started = std::time::Instant::now();
    let cells = futures::future::join_all((0..4).map(|i| {
        let (url, token) = (&url, &token);
        async move {
            let code =
                format!("import time\nprint(await test__add({{'a': {i}, 'b': 1}}))\ntime.sleep(2)\nprint('done')");
            // Within the default deadline (90 s) and its margin, or fail.
            let bound = Duration::from_secs(90 + 5 + 10);
            let Ok((result, at)) = tokio::time::timeout(bound, http_cell(url, token, &code)).await else {
                panic!("cell {i} had no answer within {bound:?}");
            };
            (i, result, at.duration_since(started))
        }
    }));
    let victim = project.run(&["ps", "-q", "nats"]).trim().to_string();
    assert!(!victim.is_empty(), "the first nats-server runs");
    let kill = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let out = Command::new("docker").args(["kill", &victim]).output().expect("docker runs");
        assert!(out.status.success(), "docker kill: {}", String::from_utf8_lossy(&out.stderr));
    };
    let (results, ()) = tokio::join!(cells, kill);
    // Each cell completed or failed clearly.
    let mut completed = 0;
    for (i, result, _) in &results {
        match outcome(result) {
            Ok((stdout, None)) => {
                assert_eq!(stdout, format!("{{\"sum\":{}}}\ndone\n", i + 1), "cell {i}");
                completed += 1;
            }
            Ok((_, Some(failure))) | Err(failure) => {
                assert!(support::a_clear_bus_failure(&failure), "cell {i}: an unclear failure: {failure}");
            }
        }
    }
    eprintln!("compose cluster: {completed} of 4 cells completed across the kill");

    // New sessions run cells again.
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let cell = http_cell(&url, &token, "print(await test__add({'a': 40, 'b': 2}))");
        let ran = tokio::time::timeout(Duration::from_secs(30), cell).await.map(|(result, _)| outcome(&result));
        if ran.as_ref().is_ok_and(|o| o.as_ref().is_ok_and(|(stdout, e)| e.is_none() && stdout == "{\"sum\":42}\n")) {
            break;
        }
        assert!(std::time::Instant::now() < give_up, "no cell ran after the kill: {ran:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("compose cluster: cells run again {:?} after the load started", started.elapsed());

    // The taint from before the kill still refuses; the count from before
    // still counts. (Until the state's stream has a leader again such calls
    // are refused fail closed.)
    support::the_taint_and_the_count_held(&tainted, "test__echo", &counted, "compose cluster").await;
    tainted.cancel().await.ok();
    counted.cancel().await.ok();
}
