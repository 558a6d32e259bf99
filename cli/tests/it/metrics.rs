//! Metrics and health of the live services: `code-mode serve` and the three
//! split services each started with `--metrics-addr 127.0.0.1:0`, real
//! cells run through an MCP client, `/metrics` scraped over HTTP and parsed,
//! and a real Prometheus (Debian's `prometheus`) scraping `serve` and
//! answering a query over its HTTP API.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use code_mode_core::testing::{NatsServer, TempDir, unavailable};
use code_mode_telemetry::scrape::{Exposition, HttpResponse, http_get};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support;

type Client = RunningService<RoleClient, ()>;

/// A cell making one call of each decision: ok, refused (bad arguments),
/// fault (the server answers with a JSON-RPC error).
const THREE_DECISIONS: &str = "print(await add(a=2, b=3))\n\
    try:\n    await add(a='two', b=3)\nexcept ToolError:\n    print('refused')\n\
    try:\n    await protocol_error()\nexcept ToolError:\n    print('fault')\n";

/// A child process whose stderr is echoed to ours, and the metrics address
/// it logged at start.
struct Service {
    child: Child,
    metrics: SocketAddr,
}

/// Spawn `command` with `--metrics-addr 127.0.0.1:0` already among its
/// arguments and wait for the line naming the address it bound.
async fn spawn(mut command: Command, name: &'static str) -> Service {
    command.stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = command.spawn().expect("code-mode starts");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[{name}] {line}");
            if let Some(addr) = logged_metrics_addr(&line)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(addr);
            }
        }
    });
    let metrics = tokio::time::timeout(Duration::from_secs(120), rx)
        .await
        .unwrap_or_else(|_| panic!("{name} logged no metrics address within 120 s"))
        .unwrap_or_else(|_| panic!("{name} exited before it logged its metrics address"));
    Service { child, metrics }
}

/// The metrics address a service's log line names, if it is the line
/// saying where its metrics are served.
pub(crate) fn logged_metrics_addr(line: &str) -> Option<SocketAddr> {
    line.split("metrics on http://").nth(1)?.strip_suffix("/metrics")?.parse().ok()
}

/// Connect an MCP client over the service's stdin and stdout.
async fn client(service: &mut Service) -> Client {
    let transport = (service.child.stdout.take().unwrap(), service.child.stdin.take().unwrap());
    ().serve(transport).await.expect("the MCP handshake succeeds")
}

async fn get(addr: SocketAddr, path: &'static str) -> HttpResponse {
    tokio::task::spawn_blocking(move || http_get(addr, path)).await.unwrap().expect("the metrics server answers")
}

async fn scrape(addr: SocketAddr) -> Exposition {
    let response = get(addr, "/metrics").await;
    assert_eq!(response.status, 200, "{response:?}");
    Exposition::parse(&response.body).unwrap_or_else(|e| panic!("invalid exposition text: {e}\n{}", response.body))
}

async fn health(addr: SocketAddr) -> Value {
    let response = get(addr, "/healthz").await;
    assert_eq!(response.status, 200, "{response:?}");
    serde_json::from_str(&response.body).expect("JSON health")
}

async fn run_python(client: &Client, code: &str) -> Value {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    let result = client.peer().call_tool(params).await.expect("run_python answers");
    result.structured_content.expect("a structured report")
}

fn serve_command(extra: &[&str]) -> Command {
    let mut command = Command::new(support::code_mode());
    command.arg("serve").args(["--metrics-addr", "127.0.0.1:0"]).args(extra).arg("--").arg(support::test_server());
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    command
}

/// The server label of the test server: a server wrapped by its command is
/// named by its program's file name, never a host path.
fn server_label() -> String {
    support::test_server().file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test]
async fn serve_counts_its_cells_by_outcome_its_tool_calls_by_decision_and_its_containers() {
    if !support::sandbox_available() {
        return;
    }
    let mut serve = spawn(serve_command(&[]), "serve").await;
    let client = client(&mut serve).await;
    assert_eq!(health(serve.metrics).await, json!({ "service": "serve", "ok": true }));
    let before = scrape(serve.metrics).await;

    let report = run_python(&client, THREE_DECISIONS).await;
    assert_eq!(report["stdout"], "{\"sum\":5}\nrefused\nfault\n", "{report}");
    let report = run_python(&client, "raise ValueError('on purpose')").await;
    assert!(report["error"].as_str().unwrap_or("").contains("on purpose"), "{report}");

    let after = scrape(serve.metrics).await;
    let delta =
        |name: &str, labels: &[(&str, &str)]| after.value_or_zero(name, labels) - before.value_or_zero(name, labels);
    assert_eq!(delta("codemode_cells_total", &[("outcome", "finished")]), 1.0);
    assert_eq!(delta("codemode_cells_total", &[("outcome", "error")]), 1.0);
    assert_eq!(delta("codemode_cells_total", &[("outcome", "deadline")]), 0.0);
    assert_eq!(delta("codemode_cell_duration_seconds_count", &[("outcome", "finished")]), 1.0);
    assert!(delta("codemode_cell_duration_seconds_sum", &[("outcome", "finished")]) > 0.0);
    let server = server_label();
    let call = |tool, decision| [("server", server.as_str()), ("tool", tool), ("decision", decision)];
    assert_eq!(delta("codemode_tool_calls_total", &call("add", "ok")), 1.0);
    assert_eq!(delta("codemode_tool_calls_total", &call("add", "refused")), 1.0);
    assert_eq!(delta("codemode_tool_calls_total", &call("protocol_error", "fault")), 1.0);
    assert_eq!(delta("codemode_tool_call_duration_seconds_count", &call("add", "ok")), 1.0);
    // Each cell ran in a container of its own, removed off the cell's path
    // by the runner's remover once its report went back. Counted since the
    // process started: the warm pool may have started the second cell's
    // container before the first scrape.
    assert!(after.value_or_zero("codemode_containers_started_total", &[]) >= 2.0, "{after:?}");
    let removed = |m: &Exposition| {
        let label = [("result", "removed")];
        m.value_or_zero("codemode_containers_removed_total", &label)
            - before.value_or_zero("codemode_containers_removed_total", &label)
    };
    let now = scrape_until(serve.metrics, |m| removed(m) >= 2.0).await;
    assert!(removed(&now) >= 2.0, "the cells' containers were not removed: {now:?}");
    assert_eq!(after.value_or_zero("codemode_containers_removed_total", &[("result", "failed")]), 0.0);
    assert_eq!(
        after.value("codemode_service_info", &[("service", "serve"), ("version", env!("CARGO_PKG_VERSION"))]),
        Some(1.0)
    );
    client.cancel().await.expect("the client closes");
}

/// Scrape until `check` holds (bounded: 90 s); the last scrape either way.
async fn scrape_until(addr: SocketAddr, check: impl Fn(&Exposition) -> bool) -> Exposition {
    let mut last = scrape(addr).await;
    for _ in 0..360 {
        if check(&last) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        last = scrape(addr).await;
    }
    last
}

#[tokio::test]
async fn serve_reports_its_warm_pool_size_as_the_pool_fills_and_refills_after_a_cell() {
    if !support::sandbox_available() {
        return;
    }
    let mut serve = spawn(serve_command(&["--warm", "2"]), "serve").await;
    let client = client(&mut serve).await;
    let full = |e: &Exposition| e.value("codemode_warm_pool_size", &[]) == Some(2.0);
    let filled = scrape_until(serve.metrics, full).await;
    assert!(
        full(&filled),
        "the pool never reported 2 ready containers: {:?}",
        filled.value("codemode_warm_pool_size", &[])
    );
    let started = filled.value_or_zero("codemode_containers_started_total", &[]);
    assert!(started >= 2.0, "{started}");

    let report = run_python(&client, "print('warm')").await;
    assert_eq!(report["stdout"], "warm\n", "{report}");
    // The cell took a ready container; the pool starts another to get back to 2.
    let refilled =
        scrape_until(serve.metrics, |e| full(e) && e.value_or_zero("codemode_containers_started_total", &[]) > started)
            .await;
    assert!(full(&refilled), "the pool did not refill to 2");
    assert!(
        refilled.value_or_zero("codemode_containers_started_total", &[]) > started,
        "no container was started to refill"
    );
    assert_eq!(refilled.value_or_zero("codemode_cells_total", &[("outcome", "finished")]), 1.0);
    client.cancel().await.expect("the client closes");
}

#[tokio::test]
async fn each_split_service_serves_its_own_metrics_and_the_runner_counts_requests_that_find_no_bridge() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let service = |name: &str, extra: &[&str], server: bool| {
        let mut command = Command::new(support::code_mode());
        command.arg(name).args(["--nats", &nats.url(), "--metrics-addr", "127.0.0.1:0"]).args(extra);
        command.env("CODE_MODE_NATS_USER", name).env("CODE_MODE_NATS_PASSWORD", users.password(name));
        if server {
            command.arg("--").arg(support::test_server());
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        command
    };
    let bridge = spawn(service("bridge", &[], true), "bridge").await;
    let runner = spawn(service("sandbox-runner", &[], false), "sandbox-runner").await;
    let mut frontend = spawn(service("frontend", &[], false), "frontend").await;
    let client = client(&mut frontend).await;
    for (s, name) in [(&bridge, "bridge"), (&runner, "sandbox-runner"), (&frontend, "frontend")] {
        assert_eq!(health(s.metrics).await, json!({ "service": name, "ok": true }));
    }
    let runner_before = scrape(runner.metrics).await;
    let bridge_before = scrape(bridge.metrics).await;

    let report = run_python(&client, "print(await add(a=1, b=2))").await;
    assert_eq!(report["stdout"], "{\"sum\":3}\n", "{report}");
    let bridge_after = scrape(bridge.metrics).await;
    let runner_after = scrape(runner.metrics).await;
    let server = server_label();
    let ok = [("server", server.as_str()), ("tool", "add"), ("decision", "ok")];
    assert_eq!(
        bridge_after.value_or_zero("codemode_tool_calls_total", &ok)
            - bridge_before.value_or_zero("codemode_tool_calls_total", &ok),
        1.0
    );
    let finished = [("outcome", "finished")];
    assert_eq!(
        runner_after.value_or_zero("codemode_cells_total", &finished)
            - runner_before.value_or_zero("codemode_cells_total", &finished),
        1.0
    );
    // Each process shows its own work only: no cells at the bridge, no decisions at the runner.
    assert_eq!(bridge_after.sum("codemode_cells_total", &[]), 0.0);
    assert_eq!(runner_after.sum("codemode_tool_calls_total", &[]), 0.0);

    // The bridge stops (SIGTERM: it leaves its queue group); the next call finds no responder.
    let bridge_pid = bridge.child.id().expect("the bridge runs");
    support::terminate(bridge_pid);
    let mut bridge = bridge;
    tokio::time::timeout(Duration::from_secs(30), bridge.child.wait()).await.expect("the bridge exits").unwrap();
    let tool_call = [("subject", "codemode.v1.tool.call"), ("kind", "no_responders")];
    let errors_before = scrape(runner.metrics).await.value_or_zero("codemode_bus_request_errors_total", &tool_call);
    let report = run_python(&client, "try:\n    await add(a=1, b=2)\nexcept ToolError as e:\n    print(e)").await;
    assert_eq!(report["stdout"], "BridgeUnavailable\n", "{report}");
    let errors_after = scrape(runner.metrics).await.value_or_zero("codemode_bus_request_errors_total", &tool_call);
    assert_eq!(errors_after - errors_before, 1.0);
    client.cancel().await.expect("the client closes");
}

#[tokio::test]
async fn a_real_prometheus_scrapes_serve_and_answers_a_query_for_its_finished_cell() {
    let prometheus = std::env::var("PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
    if std::process::Command::new(&prometheus).arg("--version").output().is_err() {
        unavailable("prometheus", &format!("{prometheus} does not run (apt-get install prometheus)"));
        return;
    }
    if !support::sandbox_available() {
        return;
    }
    let mut serve = spawn(serve_command(&[]), "serve").await;
    let client = client(&mut serve).await;
    let report = run_python(&client, "print(await add(a=20, b=22))").await;
    assert_eq!(report["stdout"], "{\"sum\":42}\n", "{report}");

    let dir = TempDir::new("prometheus");
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: code-mode\n    \
             static_configs:\n      - targets: ['{}']\n",
            serve.metrics
        ),
    )
    .unwrap();
    let web = SocketAddr::from(([127, 0, 0, 1], code_mode_core::testing::free_port()));
    let mut prom = Command::new(&prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.0.join("data").display()))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus starts");

    // Bounded wait: Prometheus starts, scrapes every second, then the series is queryable.
    let finished = "codemode_cells_total%7Bjob%3D%22code-mode%22%2Coutcome%3D%22finished%22%7D";
    let mut last = Value::Null;
    let mut seen = None;
    for _ in 0..120 {
        if let Ok(Some(status)) = prom.try_wait() {
            panic!("prometheus exited: {status}");
        }
        if let Some(result) = support::prometheus_query(web, finished).await {
            last = result.clone();
            if let Some(value) = result.get(0).and_then(|r| r["value"][1].as_str()) {
                seen = Some(value.to_string());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(seen.as_deref(), Some("1"), "no codemode_cells_total series within 60 s; last result: {last}");
    let up = support::prometheus_query(web, "up%7Bjob%3D%22code-mode%22%7D").await.expect("up is queryable");
    assert_eq!(up[0]["value"][1], "1", "the target is up: {up}");
    let calls =
        support::prometheus_query(web, "sum(codemode_tool_calls_total%7Bdecision%3D%22ok%22%7D)").await.expect("a sum");
    assert_eq!(calls[0]["value"][1], "1", "{calls}");

    client.cancel().await.expect("the client closes");
    let _ = prom.kill().await;
}

/// The link of docs/metrics.md that opens the offline dashboard (the
/// stack's Prometheus, its own graph page with four panels).
fn offline_dashboard_link() -> String {
    let docs = std::fs::read_to_string(code_mode_core::testing::peers::workspace_root().join("docs/metrics.md"))
        .expect("docs/metrics.md");
    let at = docs.find("http://127.0.0.1:9090/classic/graph?").expect("docs/metrics.md gives the dashboard's link");
    docs[at..].split(|c: char| c.is_whitespace() || c == '`' || c == '>' || c == ')').next().unwrap().to_string()
}

/// A container this test started, removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stacks_prometheus_draws_the_offline_dashboard_in_chromium_from_its_own_files_alone() {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = crate::console_browser::browser_available() else { return };
    if std::process::Command::new("prometheus").arg("--version").output().is_err() {
        unavailable("prometheus", "prometheus does not run (apt-get install prometheus)");
        return;
    }
    // The compose stack's Prometheus image, as deploy/build.sh builds it.
    let root = code_mode_core::testing::peers::workspace_root();
    let bin_dir = support::code_mode().parent().expect("the binary is in a folder").to_path_buf();
    let built = std::process::Command::new("bash")
        .arg(root.join("deploy/build.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .args(["--only", "prometheus"])
        .output()
        .expect("build.sh runs");
    assert!(built.status.success(), "deploy/build.sh failed:\n{}", String::from_utf8_lossy(&built.stderr));

    let mut serve = spawn(serve_command(&[]), "serve").await;
    let client = client(&mut serve).await;

    // That image, on the host's network (it scrapes serve on loopback).
    let dir = TempDir::new("offline-dashboard");
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: serve\n    static_configs:\n      - \
             targets: ['{}']\n",
            serve.metrics
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let port = code_mode_core::testing::free_port();
    let name = format!("code-mode-test-prometheus-{}", uuid::Uuid::new_v4().simple());
    let mount = format!("{}:/etc/prometheus.yml:ro", config.display());
    let listen = format!("--web.listen-address=127.0.0.1:{port}");
    let started = std::process::Command::new("docker")
        .args(["run", "-d", "--rm", "--name", &name, "--network", "host", "-v", &mount])
        .args(["--entrypoint", "prometheus", "code-mode-prometheus:latest"])
        .args(["--config.file=/etc/prometheus.yml", "--storage.tsdb.path=/prometheus", &listen])
        .output()
        .expect("docker runs");
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let _container = Container(name);
    let web = SocketAddr::from(([127, 0, 0, 1], port));
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while support::prometheus_query(web, "up").await.is_none_or(|up| up[0]["value"][1] != "1") {
        assert!(std::time::Instant::now() < give_up, "the image's Prometheus never scraped serve");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Cells for the panels to draw (each decision of a tool call, an
    // error), counted after a first scrape, so that their rates are not 0.
    for _ in 0..2 {
        assert_eq!(run_python(&client, THREE_DECISIONS).await["stdout"], "{\"sum\":5}\nrefused\nfault\n");
    }
    run_python(&client, "raise ValueError('on purpose')").await;
    let rate = "sum%28rate%28codemode_cells_total%5B5m%5D%29%29";
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let value = support::prometheus_query(web, rate).await;
        if value.as_ref().and_then(|v| v[0]["value"][1].as_str()).is_some_and(|v| v.parse::<f64>().unwrap_or(0.0) > 0.0)
        {
            break;
        }
        assert!(std::time::Instant::now() < give_up, "no rate of cells from the image's Prometheus: {value:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The browser reaches loopback only.
    let link = offline_dashboard_link().replace("127.0.0.1:9090", &format!("127.0.0.1:{port}"));
    let screenshot = if code_mode_core::testing::rewrite_golden("UPDATE_SCREENSHOT") {
        root.join("docs/images/prometheus.png")
    } else {
        support::log_path("offline-dashboard").with_extension("png")
    };
    let out = tokio::process::Command::new(&python)
        .arg(root.join("testing/console/prometheus_graph.py"))
        .args(["--url", &link, "--panels", "4", "--screenshot", screenshot.to_str().unwrap()])
        .kill_on_drop(true)
        .output()
        .await
        .expect("the browser script runs");
    assert!(out.status.success(), "the browser script failed: {}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_slice(&out.stdout).expect("JSON from the script");
    eprintln!("{seen:#}");
    let panels = seen["panels"].as_array().expect("panels");
    assert_eq!(panels.len(), 4, "four panels: {seen:#}");
    for panel in panels {
        assert!(panel["lines"].as_u64().unwrap_or(0) > 0, "a panel drew no line: {panel}");
        assert_eq!(panel["errors"], json!([]), "{panel}");
    }
    let legend = |i: usize| panels[i]["legend"].to_string();
    assert!(legend(0).contains(r#"outcome=\"finished\""#) && legend(0).contains(r#"outcome=\"error\""#), "{seen:#}");
    assert!(legend(2).contains(r#"decision=\"ok\""#), "{seen:#}");
    assert!(legend(3).contains("codemode_warm_pool_size"), "{seen:#}");
    // Every file came from that Prometheus, none failed to load.
    let resources = seen["resources"].as_array().expect("resources");
    let own = format!("http://127.0.0.1:{port}/");
    assert!(resources.len() > 10, "the UI's files: {resources:?}");
    assert!(resources.iter().all(|r| r.as_str().is_some_and(|r| r.starts_with(&own))), "{resources:?}");
    let failed: Vec<&Value> = seen["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.contains("Failed to load") || m.contains("net::ERR")))
        .collect();
    assert!(failed.is_empty(), "files that did not load: {failed:?}");
    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    client.cancel().await.expect("the client closes");
}
