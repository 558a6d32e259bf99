//! The load test itself runs: one sample of the warm, policy and kept
//! scenarios, in process, over a real nats-server with JetStream and
//! through MCP stdio (`code-mode serve` as a child), through the real
//! sandbox and test server. (The numbers are not judged here: they are
//! measured with a release build, see `loadtests/README.md`.)

use std::process::Command;

/// True when a Docker engine answers; under CI its absence fails the test.
fn docker_available() -> bool {
    match Command::new("docker").arg("info").output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => code_mode_core::testing::unavailable("a Docker engine", &String::from_utf8_lossy(&out.stderr)),
        Err(e) => code_mode_core::testing::unavailable("a Docker engine", &e.to_string()),
    }
}

#[test]
fn one_sample_of_the_warm_policy_and_kept_scenarios_runs_in_process_over_nats_and_through_mcp_stdio() {
    if !docker_available() {
        return;
    }
    let Some(nats) = code_mode_core::testing::NatsServer::start(&[]) else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_code-mode-loadtest"))
        .args(["--samples", "1", "--warmup", "0", "--scenarios", "warm,policy,kept", "--nats", &nats.url()])
        .arg("--")
        .arg(code_mode_core::testing::workspace_binary("code-mode-test-server"))
        .output()
        .expect("the load test runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for bus in ["in-process", "nats"] {
        for scenario in ["warm print(1)", "warm, 20 calls, no policy", "warm, 20 calls, rate limit", "kept print(1)"] {
            let row = stdout.lines().find(|l| l.starts_with(scenario) && l.contains(bus));
            assert!(row.is_some(), "no row {scenario:?} over {bus} in:\n{stdout}");
        }
    }
    assert_eq!(stdout.matches("mean per call in the cell: p50 ").count(), 4, "{stdout}");
    for scenario in ["kept print(1)", "warm print(1)"] {
        let row = stdout.lines().find(|l| l.starts_with(scenario) && l.contains("mcp stdio"));
        assert!(row.is_some(), "no row {scenario:?} through MCP stdio in:\n{stdout}");
    }
}

#[test]
fn one_cold_sample_runs_under_each_runtime_side_by_side() {
    if !docker_available() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_code-mode-loadtest"))
        .args(["--samples", "1", "--warmup", "0", "--scenarios", "cold", "--runtimes", "runc,runsc"])
        .arg("--")
        .arg(code_mode_core::testing::workspace_binary("code-mode-test-server"))
        .output()
        .expect("the load test runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for runtime in ["runc", "runsc"] {
        let row =
            stdout.lines().find(|l| l.starts_with("cold print(1)") && l.split_whitespace().nth(2) == Some(runtime));
        assert!(row.is_some(), "no cold row under {runtime} in:\n{stdout}");
    }
}

#[test]
fn compare_puts_each_figure_beside_a_raw_docker_run_and_a_direct_call_under_each_runtime_and_writes_the_json_report() {
    if !docker_available() {
        return;
    }
    let json = std::env::temp_dir().join(format!("code-mode-compare-{}.json", std::process::id()));
    // This version's image doubles as the baseline: the second warm stack
    // runs in the same rounds all the same.
    let baseline = code_mode_sandbox_runner::image::default_image_tag();
    let out = Command::new(env!("CARGO_BIN_EXE_code-mode-loadtest"))
        .args(["--compare", "--samples", "1", "--warmup", "0", "--cells", "2", "--concurrency", "1"])
        .args(["--runtimes", "runc,runsc", "--baseline-image", &baseline, "--json"])
        .arg(&json)
        .arg("--")
        .arg(code_mode_core::testing::workspace_binary("code-mode-test-server"))
        .output()
        .expect("the load test runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let top: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report is written")).unwrap();
    let _ = std::fs::remove_file(&json);
    assert!(top["machine"]["load_before"].as_str().is_some_and(|l| !l.is_empty()), "{top:#}");
    let runs = top["runs"].as_array().expect("one report per runtime");
    assert_eq!(runs.iter().map(|r| r["runtime"].as_str().unwrap()).collect::<Vec<_>>(), ["runc", "runsc"]);
    assert_eq!(top["figures"], runs[0]["figures"], "the first runtime's report is also at the top");
    for report in runs {
        let runtime = report["runtime"].as_str().unwrap();
        assert!(stdout.contains(&format!("--compare, runtime {runtime}:")), "no table for {runtime}:\n{stdout}");
        let figures = report["figures"].as_array().expect("figures");
        let names: Vec<&str> = figures.iter().map(|f| f["figure"].as_str().unwrap()).collect();
        assert_eq!(figures.len(), 10, "seven figures and three of the baseline image: {names:?}");
        assert!(names.contains(&"cold print(1), in process, baseline image"), "{names:?}");
        // Taken in turns, each image's p50 over the other's.
        let over = &report["baseline"]["p50_over_baseline"];
        for figure in ["warm", "cold", "tool_call_in_cell"] {
            assert!(over[figure].as_f64().is_some_and(|r| r.is_finite() && r > 0.0), "{figure}: {over}");
        }
        assert!(report["baseline"]["order"].as_str().is_some_and(|o| o.contains("in turns")), "{report:#}");
        for figure in figures {
            let ratio = figure["ratio_p50"].as_f64().unwrap_or(f64::NAN);
            assert!(ratio.is_finite() && ratio > 0.0, "{figure}");
        }
        assert!(figures[0]["reference"].as_str().unwrap().starts_with("docker run"), "{report:#}");
        assert!(figures[3]["reference"].as_str().unwrap().contains("MCP client"), "{report:#}");
        let through_serve = figures.iter().find(|f| f["figure"].as_str().unwrap().starts_with("direct call through"));
        assert!(through_serve.is_some_and(|f| f["reference"].as_str().unwrap().contains("MCP client")), "{report:#}");
        let calls = &report["tool_call_breakdown"]["in_process"];
        for part in ["in_cell", "container_side", "host_side", "runner_and_bus", "bridge"] {
            assert!(calls[part]["p50_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "no {part} in {report:#}");
        }
        // The bridge's timing lies within the runner's (same process, the
        // bridge answers between the runner's read and its write); the
        // code's own timing is in another process, whose clock a loaded
        // machine may leave behind the runner's resuming, so it is not
        // compared here.
        let host = calls["host_side"]["mean_ms"].as_f64().unwrap();
        let bridge = calls["bridge"]["mean_ms"].as_f64().unwrap();
        assert!(bridge <= host, "the bridge's part is within the host side: {calls:#}");
        let throughput = report["throughput"].as_array().expect("throughput");
        assert_eq!(throughput.len(), 3, "{report:#}");
        assert!(throughput.iter().all(|t| t["cells_per_s"].as_f64().unwrap_or(0.0) > 0.0), "{report:#}");
        for phases in [&report["phases_of_warm_cells_in_process"], &report["baseline"]["phases_of_warm_cells"]] {
            for phase in ["take", "deliver", "first_output", "done", "kill", "remove", "refill"] {
                let rows = phases.as_array().expect("phases");
                let row = rows.iter().find(|p| p["phase"] == phase).unwrap_or_else(|| panic!("no {phase}: {report:#}"));
                assert_eq!(row["count"], 1, "one warm cell was measured: {row}");
            }
        }
        assert!(report["first_output_ms"]["p50_ms"].as_f64().is_some(), "{report:#}");
        let idle = report["memory"]["idle_warm_container_mib"].as_array().expect("memory");
        assert!(!idle.is_empty() && idle.iter().all(|m| m.as_f64().unwrap_or(0.0) > 0.0), "{report:#}");
        assert!(report["memory"]["serve_idle"]["rss_kib"].as_u64().unwrap_or(0) > 0, "{report:#}");
    }
}
