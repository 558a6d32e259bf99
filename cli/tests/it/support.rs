//! Helpers: run `code-mode` against the test server and read its report.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The `code-mode` binary under test.
pub fn code_mode() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_code-mode"))
}

/// The test MCP server binary.
pub fn test_server() -> PathBuf {
    code_mode_core::testing::workspace_binary("code-mode-test-server")
}

/// True when a Docker engine answers and the default sandbox image exists.
/// Under CI a missing one fails the test; elsewhere the test does not run.
pub fn sandbox_available() -> bool {
    static STATE: OnceLock<Result<(), String>> = OnceLock::new();
    // Checked on a thread of its own, so async tests can call this too.
    let state = STATE.get_or_init(|| std::thread::spawn(check_sandbox).join().expect("the check ran"));
    match state {
        Ok(()) => true,
        Err(why) => code_mode_core::testing::unavailable("a Docker engine with the sandbox image", why),
    }
}

fn check_sandbox() -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let docker = code_mode_sandbox_runner::connect_docker().await.map_err(|e| e.to_string())?;
        let image = code_mode_sandbox_runner::image::default_image_tag();
        match code_mode_sandbox_runner::image::image_exists(&docker, &image).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("the sandbox image {image} is missing: run `code-mode build-image`")),
            Err(e) => Err(e.to_string()),
        }
    })
}

/// What `code-mode run` printed and how it exited.
#[derive(Debug)]
pub struct Ran {
    /// The parsed report (Null when stdout was not JSON).
    pub report: Value,
    /// The process output.
    pub output: Output,
}

impl Ran {
    pub fn stdout(&self) -> &str {
        self.report["stdout"].as_str().unwrap_or_else(|| panic!("no stdout in {self:?}"))
    }
    pub fn error(&self) -> Option<&str> {
        self.report["error"].as_str()
    }
    pub fn stopped(&self) -> bool {
        self.report["stopped"].as_bool().unwrap()
    }
    pub fn truncated(&self) -> bool {
        self.report["truncated"].as_bool().unwrap()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// Assert the cell finished without an error and return its stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.report["error"], Value::Null, "the cell failed: {self:#?}\nstderr: {}", self.stderr());
        self.stdout()
    }
}

/// `code-mode run [args] --code CODE -- <test server> [server_args]`.
pub fn run(args: &[&str], code: &str, server_args: &[&str]) -> Ran {
    let output = command(args, code, server_args).output().expect("code-mode runs");
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let ran = Ran { report, output };
    assert!(
        ran.output.status.success() && ran.report.is_object(),
        "code-mode run failed: {:?}\nstdout: {}\nstderr: {}",
        ran.output.status,
        String::from_utf8_lossy(&ran.output.stdout),
        ran.stderr()
    );
    ran
}

/// The command line of [`run`], for tests that need the process itself.
pub fn command(args: &[&str], code: &str, server_args: &[&str]) -> Command {
    let mut cmd = Command::new(code_mode());
    cmd.arg("run").args(args).arg("--code").arg(code).arg("--").arg(test_server()).args(server_args);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// A fresh temporary file path for the test server's request log.
pub fn log_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("code-mode-test-{tag}-{}.log", uuid::Uuid::new_v4().simple()))
}

/// The `tools/call` lines the test server logged.
pub fn logged_calls(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("tools/call"))
        .map(str::to_string)
        .collect()
}

/// Ids of sandbox containers (running or not) whose owner label has `pid`.
pub fn containers_of(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--filter", "label=code-mode.sandbox", "--format", "{{.ID}} {{.Label \"code-mode.owner\"}}"])
        .output()
        .expect("docker ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (id, owner) = l.split_once(' ')?;
            let owner_pid = owner.rsplit(':').nth(1)?;
            (owner_pid == pid.to_string()).then(|| id.to_string())
        })
        .collect()
}
