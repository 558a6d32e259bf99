//! One wrapped MCP server over stdio, owned by one actor.
//!
//! The actor task owns the rmcp client session (and so the child process).
//! Its [`ServerHandle`] is cheap to clone and makes tool calls directly on the
//! session's peer, which multiplexes concurrent requests; the actor itself
//! only decides when the session ends: on shutdown, or when every handle is
//! gone. The child gets the minimal environment MCP clients give a stdio
//! server plus the names the user passed, never this process's environment.

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::BridgeError;

/// The variables a stdio MCP server gets by default (as MCP clients do),
/// when they are set here.
pub const DEFAULT_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How long a wrapped server gets to exit after its session closes; then its
/// process is killed (`kill_on_drop`).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How to start a wrapped stdio server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// A name for logs and errors.
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Names of variables passed from this process's environment.
    pub pass_env: Vec<String>,
    /// Variables set to the given values.
    pub set_env: Vec<(String, String)>,
    /// How long starting may take: spawn, `initialize` and `tools/list`
    /// together ([`code_mode_core::defaults::START_TIMEOUT`] by default).
    pub start_timeout: Duration,
}

/// Why a call to the server failed on the host side.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server took too long.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The MCP session failed (transport closed, protocol error, ...).
    #[error("{0}")]
    Service(#[from] ServiceError),
}

impl CallError {
    /// The type name the sandbox may see of this fault, never its details.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Timeout(_) => "TimeoutError",
            CallError::Service(e) => match e {
                ServiceError::McpError(_) => "McpError",
                ServiceError::TransportSend(_) => "TransportSendError",
                ServiceError::TransportClosed => "TransportClosed",
                ServiceError::UnexpectedResponse => "UnexpectedResponse",
                ServiceError::Cancelled { .. } => "Cancelled",
                ServiceError::Timeout { .. } => "TimeoutError",
                _ => "ServiceError",
            },
        }
    }
}

/// A cheap handle on a running wrapped server.
#[derive(Clone)]
pub struct ServerHandle {
    name: String,
    peer: Peer<RoleClient>,
    _alive: mpsc::Sender<()>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The actor's end: dropping the last handle or cancelling the token closes
/// the session and stops the child.
pub struct ServerActor {
    session: RunningService<RoleClient, ()>,
    alive: mpsc::Receiver<()>,
    cancel: CancellationToken,
    name: String,
}

/// Start a wrapped server, list its tools, and spawn its owner actor.
pub async fn start(
    spec: &ServerSpec,
    cancel: CancellationToken,
) -> Result<(ServerHandle, Vec<Tool>, tokio::task::JoinHandle<()>), BridgeError> {
    let mut cmd = tokio::process::Command::new(&spec.command);
    cmd.args(&spec.args).env_clear().kill_on_drop(true);
    for key in DEFAULT_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for key in &spec.pass_env {
        match std::env::var_os(key) {
            Some(v) => {
                cmd.env(key, v);
            }
            None => {
                return Err(BridgeError::EnvMissing { server: spec.name.clone(), name: key.clone() });
            }
        }
    }
    for (k, v) in &spec.set_env {
        cmd.env(k, v);
    }
    let spawn_error = |e: std::io::Error| BridgeError::ServerStart {
        server: spec.name.clone(),
        command: spec.command.clone(),
        reason: e.to_string(),
    };
    let (transport, stderr) = TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().map_err(spawn_error)?;
    if let Some(stderr) = stderr {
        let name = spec.name.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %name, "{line}");
            }
        });
    }
    let start_error =
        |reason: String| BridgeError::ServerStart { server: spec.name.clone(), command: spec.command.clone(), reason };
    let no_answer =
        || start_error(format!("no answer to initialize/tools list within {} s", spec.start_timeout.as_secs_f64()));
    // One deadline covers initialize and tools/list. A server that never
    // answers is killed: dropping the transport (or closing the session)
    // stops the child.
    let deadline = tokio::time::Instant::now() + spec.start_timeout;
    let mut session = match tokio::time::timeout_at(deadline, ().serve(transport)).await {
        Ok(Ok(session)) => session,
        Ok(Err(e)) => return Err(start_error(format!("MCP initialization failed: {e}"))),
        Err(_) => return Err(no_answer()),
    };
    let tools = match tokio::time::timeout_at(deadline, session.peer().list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        failed => {
            let _ = session.close_with_timeout(CLOSE_TIMEOUT).await;
            return Err(match failed {
                Ok(Err(e)) => start_error(format!("tools/list failed: {e}")),
                _ => no_answer(),
            });
        }
    };
    let (alive_tx, alive_rx) = mpsc::channel(1);
    let handle = ServerHandle { name: spec.name.clone(), peer: session.peer().clone(), _alive: alive_tx };
    let actor = ServerActor { session, alive: alive_rx, cancel, name: spec.name.clone() };
    let task = tokio::spawn(actor.run());
    Ok((handle, tools, task))
}

impl ServerActor {
    async fn run(mut self) {
        tokio::select! {
            _ = self.cancel.cancelled() => {}
            // `recv` returns None once every handle (sender) is dropped.
            _ = self.alive.recv() => {}
        }
        tracing::debug!(server = %self.name, "closing the wrapped server");
        match tokio::time::timeout(CLOSE_TIMEOUT, self.session.close()).await {
            Ok(_) => {}
            Err(_) => tracing::warn!(server = %self.name, "the wrapped server did not close in time: killed"),
        }
    }
}

impl ServerHandle {
    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Call a tool by the name the server lists, with a timeout.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        timeout: Duration,
    ) -> Result<CallToolResult, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        match tokio::time::timeout(timeout, self.peer.call_tool(params)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }
}
