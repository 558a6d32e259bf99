//! Helpers: start a bridge over the real test server, make calls, read the
//! server's request log and this process's children.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use code_mode_bridge::server::{ServerSpec, StdioSpec, Transport};
use code_mode_bridge::{Bridge, BridgeConfig, BridgeError, CallLimits, Closer, WrappedServer};
use code_mode_core::state::SessionStore;
use code_mode_proto::{ToolCall, ToolReply};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The test MCP server binary.
pub fn test_server() -> String {
    code_mode_core::testing::workspace_binary("code-mode-test-server").display().to_string()
}

/// A path nobody else in this test run uses.
pub fn unique_path(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bridge-it-{}-{n}-{tag}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// How to start one bridge in a test.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Arguments to the test server (after `--log FILE`).
    pub args: Vec<String>,
    /// A command to run instead of the test server (then no log is passed).
    pub command: Option<(String, Vec<String>)>,
    /// The allowlist.
    pub allow: Option<Vec<String>>,
    /// The private tools.
    pub private: Vec<String>,
    /// The policy file.
    pub policy: Option<PathBuf>,
    /// The session-state store (default: a fresh one in memory).
    pub state: Option<SessionStore>,
    /// Call limits (a 10 s call timeout unless a test says otherwise, so
    /// nothing hangs for the 30 s default).
    pub limits: CallLimits,
    /// Names passed from this process's environment.
    pub pass_env: Vec<String>,
    /// Variables set to values.
    pub set_env: Vec<(String, String)>,
    /// The start timeout.
    pub start_timeout: Duration,
    /// The test server's request log (a fresh file).
    pub log: PathBuf,
    /// The audit log and whether denied tools are offered.
    pub policy_options: code_mode_bridge::PolicyOptions,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            args: Vec::new(),
            command: None,
            allow: None,
            private: Vec::new(),
            policy: None,
            state: None,
            limits: CallLimits { call_timeout: Duration::from_secs(10), ..CallLimits::default() },
            pass_env: Vec::new(),
            set_env: Vec::new(),
            start_timeout: Duration::from_secs(20),
            log: unique_path("requests"),
            policy_options: Default::default(),
        }
    }
}

impl Setup {
    /// The test server with these arguments.
    pub fn server(args: &[&str]) -> Self {
        Self { args: args.iter().map(|a| a.to_string()).collect(), ..Self::default() }
    }

    /// Keep only these tools.
    pub fn allow(mut self, names: &[&str]) -> Self {
        self.allow = Some(names.iter().map(|a| a.to_string()).collect());
        self
    }

    /// Mark these tools private.
    pub fn private(mut self, names: &[&str]) -> Self {
        self.private = names.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Apply this policy (written to a fresh file).
    pub fn policy(mut self, text: &str) -> Self {
        let path = unique_path("policy.json");
        std::fs::write(&path, text).expect("the policy file is written");
        self.policy = Some(path);
        self
    }

    /// Keep the private-data taint in this store.
    pub fn state(mut self, store: SessionStore) -> Self {
        self.state = Some(store);
        self
    }

    /// Start the bridge.
    pub async fn start(self) -> Result<Harness, BridgeError> {
        let log = self.log;
        let (command, args) = match self.command {
            Some(c) => c,
            None => {
                let mut args = vec!["--log".to_string(), log.display().to_string()];
                args.extend(self.args);
                (test_server(), args)
            }
        };
        let config = BridgeConfig {
            servers: vec![WrappedServer {
                spec: ServerSpec {
                    name: "test".into(),
                    transport: Transport::Stdio(StdioSpec {
                        command,
                        args,
                        pass_env: self.pass_env,
                        set_env: self.set_env,
                    }),
                    start_timeout: self.start_timeout,
                },
                allow: self.allow,
                private: self.private,
                policy: self.policy.map(code_mode_bridge::PolicySource::File),
                origin: code_mode_bridge::Origin::Flags,
            }],
            prefixed: false,
            limits: self.limits,
            catalog: Default::default(),
            state: self.state.unwrap_or_else(SessionStore::in_memory),
            policy_options: self.policy_options,
        };
        let cancel = CancellationToken::new();
        let (bridge, closer) = Bridge::start(config, cancel.clone()).await?;
        Ok(Harness { bridge, closer, cancel, log })
    }
}

/// A started bridge over one test server.
#[derive(Debug)]
pub struct Harness {
    pub bridge: Bridge,
    pub closer: Closer,
    pub cancel: CancellationToken,
    /// The test server's request log.
    pub log: PathBuf,
}

impl Harness {
    /// The test server with these arguments, started or the test fails.
    pub async fn with_args(args: &[&str]) -> Self {
        Setup::server(args).start().await.expect("the bridge starts")
    }

    /// Call a tool as the first call of a run.
    pub async fn call(&self, tool: &str, arguments: Value) -> ToolReply {
        self.bridge.call(&tool_call(tool, arguments, 1)).await
    }

    /// The tools named by the `tools/call` requests that reached the server, in order.
    pub fn calls_seen(&self) -> Vec<String> {
        calls_in_log(&self.log)
    }

    /// Cancel the bridge and wait until its server is closed.
    pub async fn close(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(15), self.closer.closed())
            .await
            .expect("the wrapped server closes within 15 s");
    }
}

/// A call from cell `cell-1` of session `it`.
pub fn tool_call(tool: &str, arguments: Value, call_index: u32) -> ToolCall {
    ToolCall {
        session: "it".into(),
        asker: None,
        identity: None,
        cell_id: "cell-1".into(),
        call_index,
        target: code_mode_proto::Target::Tool(tool.into()),
        arguments,
        link: None,
        file_in: false,
    }
}

/// The tool names of every `tools/call` line in a request log.
pub fn calls_in_log(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| l.strip_prefix("tools/call ")).map(str::to_string).collect()
}

/// Every line of a request log.
pub fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The value of an `Ok` reply, or the test fails.
pub fn ok(reply: ToolReply) -> String {
    match reply {
        ToolReply::Ok { value } => value,
        other => panic!("expected Ok, got {other:?}"),
    }
}

/// The message of a `Refused` reply, or the test fails.
pub fn refused(reply: ToolReply) -> String {
    match reply {
        ToolReply::Refused { message } => message,
        other => panic!("expected Refused, got {other:?}"),
    }
}

/// A live process as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub comm: String,
    pub state: char,
    pub cmdline: Vec<String>,
}

/// The processes whose parent is this test process.
pub fn children() -> Vec<Proc> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(proc) = read_proc(pid) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `pid (comm) state ppid ...`; comm may hold spaces or parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            found.push(proc);
        }
    }
    found
}

/// One process, if it still exists (zombies included).
pub fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let state = stat[close + 1..].split_whitespace().next()?.chars().next()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = cmdline.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned());
    Some(Proc { pid, comm, state, cmdline: cmdline.collect() })
}

/// The child of this process whose command line contains `needle`.
pub fn child_with_arg(needle: &str) -> Option<Proc> {
    children().into_iter().find(|p| p.cmdline.iter().any(|a| a.contains(needle)))
}

/// Wait up to `within` for process `pid` to be gone (reaped, not a zombie).
pub async fn gone_within(pid: u32, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if read_proc(pid).is_none() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A bridge over these servers, always prefixing names (as `--config` does).
pub async fn start_prefixed(servers: Vec<WrappedServer>) -> Result<(Bridge, Closer, CancellationToken), BridgeError> {
    let config = BridgeConfig {
        servers,
        prefixed: true,
        limits: CallLimits { call_timeout: Duration::from_secs(10), ..CallLimits::default() },
        catalog: Default::default(),
        state: SessionStore::in_memory(),
        policy_options: Default::default(),
    };
    let cancel = CancellationToken::new();
    let (bridge, closer) = Bridge::start(config, cancel.clone()).await?;
    Ok((bridge, closer, cancel))
}

/// Stop a bridge of [`start_prefixed`] and wait for its servers to close.
pub async fn close(closer: Closer, cancel: CancellationToken) {
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(15), closer.closed()).await.expect("the servers close within 15 s");
}
