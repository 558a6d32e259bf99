//! `code-mode-loadtest clients` against a real code-mode: `code-mode serve`
//! over streamable HTTP (closed and open loop, a mix of every kind but
//! `deadline`, with a policy refusing `echo`), and over stdio with a cell
//! that outlives what the load test was told the deadline is, so it counts
//! as hung and the run exits non-zero.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use code_mode_core::testing::{TempDir, free_port, workspace_binary};
use serde_json::Value;

/// True when a Docker engine answers; under CI its absence fails the test.
fn docker_available() -> bool {
    match Command::new("docker").arg("info").output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => code_mode_core::testing::unavailable("a Docker engine", &String::from_utf8_lossy(&out.stderr)),
        Err(e) => code_mode_core::testing::unavailable("a Docker engine", &e.to_string()),
    }
}

/// The test server with `echo` denied by a policy.
fn servers(dir: &Path) -> String {
    let config = serde_json::json!({"mcpServers": {"test": {
        "command": workspace_binary("code-mode-test-server"),
        "allow": ["add", "echo"],
        "policy": {"version": "1", "default": "allow", "tools": {"echo": {"action": "deny", "reason": "load test"}}}
    }}});
    let path = dir.join("servers.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

/// Run the load test's `clients` mode; its exit code, stdout and JSON report.
fn load(args: &[&str], dir: &Path, name: &str) -> (i32, String, Value) {
    let json = dir.join(format!("{name}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_code-mode-loadtest"))
        .arg("clients")
        .args(["--json", json.to_str().unwrap()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the load test runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no JSON report; stdout:\n{stdout}\nstderr:\n{stderr}"));
    (out.status.code().unwrap_or(-1), stdout, report)
}

#[test]
fn concurrent_http_sessions_in_closed_and_open_loop_report_every_cell_with_percentiles_and_plots() {
    if !docker_available() {
        return;
    }
    let dir = TempDir::new("loadtest-clients");
    let port = free_port();
    let metrics = free_port();
    let metrics_addr = format!("127.0.0.1:{metrics}");
    let more = ["--max-concurrent", "4", "--metrics-addr", &metrics_addr, "--warm-window", "1"];
    let (_serve, url) = serve_http(port, &dir.0, &more);
    let plots = dir.0.join("plots");
    let mix = "print=2,tool=2,cpu=1,refused=1";
    let (code, stdout, report) = load(
        &["--url", &url, "--sessions", "3", "--cells", "4", "--mix", mix, "--plots", plots.to_str().unwrap()],
        &dir.0,
        "closed",
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(report["cells"], 12, "{stdout}");
    assert_eq!((report["lost"].as_u64(), report["hung"].as_u64()), (Some(0), Some(0)), "{stdout}");
    assert_eq!(report["outcomes"]["ok"], 12, "every cell ended as its kind should: {stdout}");
    assert_eq!(report["samples"].as_array().map(Vec::len), Some(12));
    for kind in ["print", "tool", "cpu", "refused"] {
        let latency = &report["kinds"][kind]["latency"];
        assert!(latency["count"].as_u64() > Some(0), "{kind}: {stdout}");
        assert!(latency["p50_ms"].as_f64() <= latency["p99_ms"].as_f64(), "{kind}: {latency}");
        assert!(latency["p99_ms"].as_f64() <= latency["max_ms"].as_f64(), "{kind}: {latency}");
    }
    for (file, words) in [
        ("latency-over-time.svg", &["p50", "p95", "p99", "print", "refused"][..]),
        ("latency-histogram.svg", &["print", "tool", "cpu", "refused"][..]),
    ] {
        let svg = std::fs::read_to_string(plots.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{file} is an SVG");
        for word in words {
            assert!(svg.contains(word), "{file} names {word}");
        }
    }
    eprintln!("{stdout}");

    // Open loop: 4 cells a second for 3 s, sent whatever is in flight,
    // with the warm pool read from serve's metrics before and after.
    let metrics = format!("127.0.0.1:{metrics}");
    let open = ["--url", &url, "--sessions", "2", "--rate", "4", "--duration", "3", "--mix", "print"];
    let (code, stdout, report) = load(&[&open[..], &["--metrics", &metrics, "--idle", "4"]].concat(), &dir.0, "open");
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(report["cells"], 12, "{stdout}");
    assert_eq!(report["outcomes"]["ok"], 12, "{stdout}");
    let pool = &report["warm_pool"];
    let takes = pool["cold_takes"].as_u64().unwrap() + pool["warm_takes"].as_u64().unwrap();
    assert_eq!(takes, 12, "each cell took a warm container or waited for a cold start: {pool}");
    assert!(stdout.contains("cells waited for a cold start"), "{stdout}");
    // 4 s idle with a 1 s window: the pool's target is back at its floor
    // of 2, and no more than that stays ready.
    assert_eq!(pool["target_idle"].as_u64(), Some(2), "{pool}");
    assert!(pool["ready_idle"].as_u64().is_some_and(|n| n <= 2), "{pool}");
    let sent: Vec<f64> = report["samples"].as_array().unwrap().iter().map(|s| s["sent_s"].as_f64().unwrap()).collect();
    assert!(sent.last().unwrap() - sent.first().unwrap() >= 2.5, "sent over the duration, not at once: {sent:?}");
    eprintln!("{stdout}");
}

/// A child process killed (and reaped) when dropped, even by a failing test.
/// `code-mode serve --http` on `port` with the test servers of `dir`, a
/// 30 s deadline and `more` arguments, once it listens: the process
/// (killed when dropped) and its MCP URL.
fn serve_http(port: u16, dir: &Path, more: &[&str]) -> (Killed, String) {
    let serve = Killed(
        Command::new(workspace_binary("code-mode"))
            .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--deadline", "30"])
            .args(more)
            .args(["--config", &servers(dir)])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("serve starts"),
    );
    let give_up = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < give_up, "serve --http never listened");
        std::thread::sleep(Duration::from_millis(200));
    }
    (serve, format!("http://127.0.0.1:{port}/mcp"))
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_cell_without_an_answer_within_the_deadline_and_margin_counts_as_hung_and_fails_the_run() {
    if !docker_available() {
        return;
    }
    let dir = TempDir::new("loadtest-hung");
    let code_mode = workspace_binary("code-mode").display().to_string();
    let server = servers(&dir.0);
    // Each session starts its own `code-mode serve` over stdio; the load
    // test is told the deadline is 1 s, and the cell takes 6.
    let (code, stdout, report) = load(
        &[
            "--sessions",
            "2",
            "--cells",
            "1",
            "--mix",
            "cpu",
            "--code",
            "cpu=import time\ntime.sleep(6)\nprint(1)",
            "--deadline",
            "1",
            "--margin",
            "1",
            "--",
            &code_mode,
            "serve",
            "--deadline",
            "30",
            "--config",
            &server,
        ],
        &dir.0,
        "hung",
    );
    assert_eq!(code, 1, "a hung cell fails the run: {stdout}");
    assert_eq!(report["hung"], 2, "{stdout}");
    assert!(stdout.contains("hung 2"), "{stdout}");
}

#[test]
fn a_file_cell_reads_its_10_mb_link_back_whole_beside_a_cell_returning_nothing() {
    if !docker_available() {
        return;
    }
    let dir = TempDir::new("loadtest-file");
    let port = free_port();
    let (_serve, url) = serve_http(port, &dir.0, &[]);
    let args = ["--url", &url, "--sessions", "2", "--cells", "2", "--mix", "nothing=1,file=1"];
    let (code, stdout, report) = load(&args, &dir.0, "file");
    assert_eq!(code, 0, "{stdout}");
    // A file cell is ok only when all its 10,000,000 bytes were read back.
    assert_eq!(report["outcomes"]["ok"], 4, "{stdout}");
    for kind in ["nothing", "file"] {
        assert_eq!(report["kinds"][kind]["latency"]["count"], 2, "{kind}: {stdout}");
    }
    assert!(stdout.contains("cells/s"), "{stdout}");
    eprintln!("{stdout}");
}
