//! The monitoring files of `deploy/`: the alert rules are valid and every
//! alert fires on its unit-test series (`promtool check rules`, `promtool
//! test rules`, Debian's `prometheus` package), and the stack's Prometheus
//! configuration loads them. That every dashboard panel's query returns
//! series from a real stack is checked in `compose.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn prometheus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus")
}

/// `promtool ARGS` in `deploy/prometheus`: its combined output, or `None`
/// (after `unavailable`: a failure under CI) without promtool.
fn promtool(args: &[&str]) -> Option<(bool, String)> {
    match Command::new("promtool").args(args).current_dir(prometheus_dir()).output() {
        Ok(out) => Some((
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )),
        Err(e) => {
            code_mode_core::testing::unavailable("promtool (Debian package prometheus)", &e.to_string());
            None
        }
    }
}

/// The names of the alerts a rules file defines (`- alert: NAME` lines).
fn alert_names(rules: &str) -> Vec<String> {
    rules.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")).map(|n| n.trim().to_string()).collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_each_alert_fires_in_its_unit_tests() {
    let Some((ok, out)) = promtool(&["check", "rules", "alerts.yml"]) else { return };
    assert!(ok, "promtool check rules:\n{out}");
    let Some((ok, out)) = promtool(&["test", "rules", "alerts.test.yml"]) else { return };
    assert!(ok, "promtool test rules:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // Each alert has a case where it fires (an expected alert with labels),
    // so an alert whose expression can never be true fails here.
    let rules = std::fs::read_to_string(prometheus_dir().join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(prometheus_dir().join("alerts.test.yml")).unwrap();
    let names = alert_names(&rules);
    for wanted in [
        "CodeModeNoSandboxRunner",
        "CodeModeCellsFailingForNoCapacity",
        "CodeModeCellErrorRatioHigh",
        "CodeModeWrappedServerRestartLoop",
        "CodeModeStateStoreUnreachable",
        "CodeModeApprovalsTimingOut",
        "CodeModeAuditSinkFailing",
    ] {
        assert!(names.iter().any(|n| n == wanted), "alerts.yml has no {wanted}: {names:?}");
    }
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    for name in &names {
        let fires = lines.windows(3).any(|w| {
            w[0] == format!("alertname: {name}") && w[1] == "exp_alerts:" && w[2].starts_with("- exp_labels:")
        });
        assert!(fires, "alerts.test.yml has no case where {name} fires");
    }
}

#[test]
fn the_stack_prometheus_configuration_loads_the_alert_rules() {
    let Some((ok, out)) = promtool(&["check", "config", "prometheus.yml"]) else { return };
    assert!(ok, "promtool check config:\n{out}");
    assert!(out.contains("alerts.yml") && out.contains("8 rules found"), "the rules are loaded:\n{out}");
}
