//! Helpers for tests that need real infrastructure (a Docker engine, later a
//! nats-server).
//!
//! Such a test must fail, not skip, when `CI=true`: CI installs and starts
//! everything. On a developer's machine it may skip, and says so on stderr.

use std::path::PathBuf;

/// True when running under CI (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}

/// Decide what a test does when `what` is not available: panic under CI,
/// otherwise print why the test does not run and return `false`.
pub fn unavailable(what: &str, why: &str) -> bool {
    if in_ci() {
        panic!("{what} is required under CI=true but is not available: {why}");
    }
    eprintln!("NOT RUN (developer machine, CI unset): {what} is not available: {why}");
    false
}

/// The path of a binary built from this workspace (tests run from
/// `target/<profile>/deps/`, binaries sit one level up).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let mut dir = exe.parent().expect("the test binary is in a directory").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: build the workspace first (cargo build --workspace)", path.display());
    path
}
