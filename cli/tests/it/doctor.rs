//! `code-mode doctor` and `--runtime` as a user meets them: the verdict per
//! line, the JSON, the exit status when a required check fails, and the
//! runtimes the flag accepts. The posture check itself runs under each
//! runtime in `threat_model::{runc,runsc}::the_posture_check_passes_under_this_runtime`.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support;

fn code_mode(args: &[&str]) -> std::process::Output {
    Command::new(support::code_mode()).args(args).stdin(Stdio::null()).output().expect("code-mode runs")
}

#[test]
fn doctor_json_gives_a_verdict_per_check_and_exits_0_when_all_required_checks_pass() {
    if !support::sandbox_available() {
        return;
    }
    let output = code_mode(&["doctor", "--runtime", "runc", "--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "doctor failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(report["runtime"], "runc");
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.len() >= 20, "{report}");
    for check in checks {
        let verdict = check["verdict"].as_str().unwrap();
        assert!(["pass", "warn"].contains(&verdict), "{check}");
        assert!(!check["detail"].as_str().unwrap().is_empty(), "{check}");
    }
}

#[test]
fn doctor_exits_1_naming_a_required_check_that_fails() {
    if !support::sandbox_available() {
        return;
    }
    let output = code_mode(&["doctor", "--image", "code-mode-sandbox:no-such-image"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find(|l| l.starts_with("FAIL image")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("code-mode-sandbox:no-such-image is missing") && line.contains("build-image"), "{line}");
    assert!(stdout.lines().any(|l| l.starts_with("ok   engine")), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("a required check failed under runc"), "{stderr}");
}

#[test]
fn an_unknown_or_unsupported_runtime_is_refused_before_anything_starts() {
    let output = code_mode(&["run", "--runtime", "crun", "--code", "print(1)", "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("crun is not supported") && stderr.contains("hybrid"), "{stderr}");
    let output = code_mode(&["doctor", "--runtime", "kata"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("use runc or runsc"), "{output:?}");
}

#[test]
fn the_runtime_can_come_from_the_settings_file() {
    let dir = std::env::temp_dir().join(format!("code-mode-runtime-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.toml");
    std::fs::write(&settings, "[run]\nruntime = \"crun\"\n").unwrap();
    // A bad value from the file is refused like the flag's, naming it.
    let output = Command::new(support::code_mode())
        .args(["run", "--settings", settings.to_str().unwrap(), "--code", "print(1)", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("code-mode runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("crun is not supported"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_probe_container_left_by_a_killed_doctor_is_reaped_at_the_next_start() {
    if !support::sandbox_available() {
        return;
    }
    // The probe's container carries the same owner labels as a cell's, so a
    // doctor killed mid-probe leaves nothing the next runner keeps.
    let mut doctor = Command::new(support::code_mode())
        .args(["doctor", "--runtime", "runc"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("doctor starts");
    let pid = doctor.id();
    let mut left = Vec::new();
    for _ in 0..200 {
        left = support::containers_of(pid);
        if !left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let killed = Command::new("kill").args(["-s", "KILL", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    doctor.wait().unwrap();
    assert!(!left.is_empty(), "doctor started no probe container");
    support::run(&[], "print('next')", &[]);
    assert!(support::containers_of(pid).is_empty(), "the next start reaped the probe container");
}
