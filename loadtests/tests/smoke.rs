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
