//! code-mode as a library, for your own agent loop: everything in this
//! process, over the in-process bus (no NATS).
//!
//! - [`Bridge`] starts the wrapped MCP servers ([`Server`]: a command or a
//!   URL; or an `mcpServers` file with [`Bridge::from_config`]) and checks
//!   every call as `code-mode serve` does. [`Bridge::stubs`] gives the
//!   Python stubs of its tools for your own prompt, without Docker.
//! - [`run_code`] runs one cell in a fresh, locked-down container.
//! - [`Sandbox`] holds one container whose variables, imports and `/tmp`
//!   files are kept between cells, with a call budget per cell
//!   ([`Bridge::budget`]).
//! - [`build_server`] gives the `run_python` MCP server (an rmcp
//!   `ServerHandler`) without starting it.
//!
//! The Docker side (the sandbox image, a sandbox-runner) starts with the
//! first cell or server, not before. [`Bridge::close`] stops everything:
//! cells in flight end, every container is removed, the wrapped servers are
//! closed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use code_mode_bridge::{CallLimits, WrappedServer};
use code_mode_core::bus::Bus;
use code_mode_core::defaults;
use code_mode_mcp_frontend::{CellOptions, Frontend, FrontendConfig, FrontendFactory, KeepConfig};
use code_mode_proto::{Target, ToolCall, ToolReply};
use code_mode_sandbox_runner::image::Packages;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::stack::{BridgeParts, RunnerParts, RunningBridge, RunningRunner};

pub use code_mode_mcp_frontend::Frontend as McpServer;
pub use code_mode_proto::CellReport;

/// Errors of the library: each names the layer that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A wrapped server could not start, or its tools make no catalog.
    #[error(transparent)]
    Bridge(#[from] code_mode_bridge::BridgeError),
    /// An `mcpServers` file could not be used.
    #[error(transparent)]
    Config(#[from] code_mode_bridge::config::ConfigError),
    /// Docker, its runtime or the image cannot be used.
    #[error(transparent)]
    SandboxStart(#[from] code_mode_sandbox_runner::StartError),
    /// A container failed.
    #[error(transparent)]
    Sandbox(#[from] code_mode_sandbox_runner::SandboxError),
    /// A cell could not be run.
    #[error(transparent)]
    Frontend(#[from] code_mode_mcp_frontend::FrontendError),
    /// The in-process bus failed.
    #[error(transparent)]
    Bus(#[from] code_mode_core::bus::BusError),
    /// The sentence encoder of `--search-model` could not be loaded (the
    /// message names the file and what is wrong).
    #[error("--search-model: {0}")]
    SearchModel(#[from] code_mode_encoder::EncoderError),
    /// [`Bridge::call`]: the bridge refused the call (allowlist, schema,
    /// policy, private-data rule) or the tool reported a failure.
    #[error("{0}")]
    Refused(String),
    /// [`Bridge::call`]: a fault on the host side, by its kind only.
    #[error("the call failed on the host: {0}")]
    Fault(code_mode_proto::ErrorKind),
}

/// One MCP server to wrap: a command speaking MCP on its stdin/stdout, or
/// a remote streamable-HTTP endpoint, and which of its tools to keep.
///
/// ```
/// let server = code_mode::Server::command("my-mcp-server")
///     .args(["--root", "/srv"])
///     .allow(["search", "fetch"])
///     .private(["fetch"]);
/// assert_eq!(server.name(), "my-mcp-server");
/// ```
#[derive(Debug, Clone)]
pub struct Server {
    wrapped: WrappedServer,
}

impl Server {
    /// A server started as `program` (found on `PATH` or a path), with the
    /// minimal environment `code-mode serve` gives it.
    pub fn command(program: impl Into<String>) -> Server {
        let program: String = program.into();
        let wrapped = WrappedServer::command(std::slice::from_ref(&program));
        // A program name is never an empty command line.
        Server { wrapped: wrapped.unwrap_or_else(|| WrappedServer::url(&program)) }
    }

    /// A remote server at `url` (streamable HTTP, e.g. `https://host/mcp`).
    ///
    /// ```
    /// let remote = code_mode::Server::url("https://mcp.example.com/mcp").header("Authorization", "Bearer t0k");
    /// assert_eq!(remote.name(), "https://mcp.example.com/mcp");
    /// ```
    pub fn url(url: impl Into<String>) -> Server {
        Server { wrapped: WrappedServer::url(&url.into()) }
    }

    /// Arguments of the command (a command server only).
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Server {
        self.wrapped = self.wrapped.args(args.into_iter().map(Into::into));
        self
    }

    /// Pass this variable of this process's environment to the command.
    pub fn env(mut self, name: impl Into<String>) -> Server {
        self.wrapped = self.wrapped.pass_env([name.into()]);
        self
    }

    /// A header sent with every request (a URL server only).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Server {
        self.wrapped = self.wrapped.header(name, value);
        self
    }

    /// The server's name: its tools are called `<name>__<tool>` when a
    /// bridge wraps several servers.
    pub fn named(mut self, name: impl Into<String>) -> Server {
        self.wrapped = self.wrapped.named(name);
        self
    }

    /// The name given (by default the command or URL).
    pub fn name(&self) -> &str {
        &self.wrapped.spec.name
    }

    /// Keep only these tools (the names the server lists, or their Python
    /// names); a name it does not list stops [`Bridge::start`].
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Server {
        self.wrapped = self.wrapped.allow(tools.into_iter().map(Into::into));
        self
    }

    /// Mark these tools as ones that may see private data: after a call to
    /// one of them, a session may call only private tools.
    pub fn private<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Server {
        self.wrapped = self.wrapped.private(tools.into_iter().map(Into::into));
        self
    }

    /// Apply this policy file (the `--policy` shape) to the server's tools.
    pub fn policy(mut self, file: impl AsRef<Path>) -> Server {
        self.wrapped = self.wrapped.policy_file(Some(file.as_ref().to_path_buf()));
        self
    }
}

/// Settings of a [`Bridge`] and its sandboxes; [`Options::default`] has
/// the defaults of `code-mode serve`.
///
/// ```
/// let options = code_mode::Options { max_calls: 20, ..Default::default() };
/// assert_eq!(options.deadline, std::time::Duration::from_secs(90));
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Deadline of one cell (the container is killed after it).
    pub deadline: Duration,
    /// Tool calls one cell may make at most (a [`Budget`] may ask fewer).
    pub max_calls: u32,
    /// Time one tool call may take.
    pub call_timeout: Duration,
    /// The sandbox image (default: the one this version builds, built on
    /// first use if missing).
    pub image: Option<String>,
    /// Packages the sandbox image holds beyond the standard library: the
    /// image of these packages is used, built on first use if missing (not
    /// with `image`).
    pub packages: Packages,
    /// Containers kept started ahead of need for fresh cells.
    pub warm: usize,
    /// Cells that run at once.
    pub max_concurrent: usize,
    /// How long a [`Sandbox`]'s container lives without a cell, and at most.
    pub keep: KeepConfig,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            deadline: defaults::DEADLINE,
            max_calls: defaults::MAX_CALLS,
            call_timeout: defaults::CALL_TIMEOUT,
            image: None,
            packages: Packages::default(),
            warm: 0,
            max_concurrent: defaults::MAX_CONCURRENT_CELLS,
            keep: KeepConfig::default(),
        }
    }
}

/// How many tool calls one cell may make: pass one to each
/// [`Sandbox::run`]. At most the bridge's [`Options::max_calls`].
///
/// ```
/// assert_eq!(code_mode::Budget::calls(5).get(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget(u32);

impl Budget {
    /// A budget of `n` calls.
    pub fn calls(n: u32) -> Budget {
        Budget(n)
    }

    /// The number of calls.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// The wrapped servers, the checks of every call, and (from the first cell
/// on) the sandbox side, all in this process. Cheap to clone.
///
/// ```no_run
/// # async fn demo() -> Result<(), code_mode::Error> {
/// let bridge = code_mode::Bridge::start(code_mode::Server::command("my-mcp-server")).await?;
/// println!("{}", bridge.stubs()); // for your own prompt
/// bridge.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Bridge {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    bridge: code_mode_bridge::Bridge,
    bus: Bus,
    options: Options,
    cancel: CancellationToken,
    /// The bridge and the runner as they serve, taken by close.
    closing: std::sync::Mutex<(Option<RunningBridge>, Option<RunningRunner>)>,
    /// The runner and the frontend, made with the first cell.
    sandbox: OnceCell<FrontendFactory>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropped without close: containers and servers go in the
        // background (the runner removes its containers on cancel).
        self.cancel.cancel();
    }
}

impl Bridge {
    /// Start one server; its tools keep the names it lists (made Python
    /// identifiers).
    pub async fn start(server: Server) -> Result<Bridge, Error> {
        Bridge::start_with(vec![server], Options::default(), false).await
    }

    /// Start several servers; each tool is called `<server>__<tool>`.
    pub async fn start_servers(servers: Vec<Server>, options: Options) -> Result<Bridge, Error> {
        Bridge::start_with(servers, options, true).await
    }

    /// Start every server of an `mcpServers` file (the shape `code-mode
    /// serve --config` reads; each tool is called `<server>__<tool>`).
    pub async fn from_config(file: impl AsRef<Path>, options: Options) -> Result<Bridge, Error> {
        let servers = code_mode_bridge::config::load(file.as_ref())?;
        Bridge::start_with(servers.into_iter().map(|wrapped| Server { wrapped }).collect(), options, true).await
    }

    /// Start `servers` with `options`; `prefixed`: name tools
    /// `<server>__<tool>` even for one server.
    pub async fn start_with(servers: Vec<Server>, options: Options, prefixed: bool) -> Result<Bridge, Error> {
        let cancel = CancellationToken::new();
        let parts = BridgeParts {
            prefixed,
            limits: CallLimits {
                max_calls: options.max_calls,
                call_timeout: options.call_timeout,
                ..CallLimits::default()
            },
            ..BridgeParts::new(servers.into_iter().map(|s| s.wrapped).collect())
        };
        let bus = Bus::in_process();
        let running = crate::stack::start_bridge(parts, &bus, &cancel).await?;
        let inner = Inner {
            bridge: running.bridge.clone(),
            bus,
            options,
            cancel,
            closing: std::sync::Mutex::new((Some(running), None)),
            sandbox: OnceCell::new(),
        };
        Ok(Bridge { inner: Arc::new(inner) })
    }

    /// The Python stub of every tool, one after the other: what the code
    /// sees as `TOOLS[name]`, for your own prompt.
    pub fn stubs(&self) -> String {
        let catalog = self.inner.bridge.catalog();
        catalog.tools().iter().map(|t| t.stub.as_str()).collect::<Vec<_>>().join("\n\n")
    }

    /// The Python names of the tools, in the servers' order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.bridge.catalog().tools().iter().map(|t| t.name.clone()).collect()
    }

    /// A budget of `n` calls for one cell ([`Sandbox::run`]).
    pub fn budget(&self, n: u32) -> Budget {
        Budget::calls(n)
    }

    /// Call one tool by its Python name, through every check a cell's call
    /// passes (outside any cell: one call of its own budget).
    ///
    /// ```no_run
    /// # async fn demo(bridge: code_mode::Bridge) -> Result<(), code_mode::Error> {
    /// let sum = bridge.call("add", serde_json::json!({"a": 1, "b": 2})).await?;
    /// assert_eq!(sum, r#"{"sum":3}"#);
    /// # Ok(()) }
    /// ```
    pub async fn call(&self, tool: &str, arguments: serde_json::Value) -> Result<String, Error> {
        let call = ToolCall {
            session: LIBRARY_SESSION.into(),
            asker: None,
            identity: None,
            cell_id: uuid::Uuid::new_v4().to_string(),
            call_index: 1,
            target: Target::Tool(tool.into()),
            arguments,
            link: None,
            file_in: false,
        };
        match self.inner.bridge.call(&call).await {
            ToolReply::Ok { value } | ToolReply::Content { value, .. } => Ok(value),
            ToolReply::Refused { message } => Err(Error::Refused(message)),
            ToolReply::Fault { kind } => Err(Error::Fault(kind)),
        }
    }

    /// The sandbox side, started on first use: Docker, the image (built if
    /// missing), a runner, the frontend.
    async fn sandbox(&self) -> Result<&FrontendFactory, Error> {
        self.inner
            .sandbox
            .get_or_try_init(|| async {
                let options = &self.inner.options;
                let parts = RunnerParts {
                    image: options.image.clone(),
                    packages: options.packages.clone(),
                    capacity: options.max_concurrent.max(1),
                    warm: options.warm,
                    ..RunnerParts::default()
                };
                let running = crate::stack::start_runner(parts, &self.inner.bus, &self.inner.cancel).await?;
                code_mode_core::sync::lock(&self.inner.closing).1 = Some(running);
                let config = FrontendConfig {
                    deadline: options.deadline,
                    max_concurrent_cells: options.max_concurrent.max(1),
                    ..FrontendConfig::default()
                };
                Ok::<_, Error>(FrontendFactory::connect(self.inner.bus.clone(), config).await?)
            })
            .await
    }

    /// Stop everything: cells in flight end and every container is
    /// removed, then the wrapped servers are closed, as a stack stops (at
    /// most [`crate::stack::STOP_DEADLINE`]).
    pub async fn close(self) {
        let (bridge, runner) = std::mem::take(&mut *code_mode_core::sync::lock(&self.inner.closing));
        crate::stack::stop(&self.inner.cancel, bridge, runner).await;
    }
}

/// The session id of calls made with [`Bridge::call`].
const LIBRARY_SESSION: &str = "library";

/// Run one cell of Python in a fresh, locked-down container: the wrapped
/// tools are async functions in it, every call passes the bridge.
///
/// ```no_run
/// # async fn demo(bridge: code_mode::Bridge) -> Result<(), code_mode::Error> {
/// let cell = code_mode::run_code(&bridge, "print(await add({'a': 2, 'b': 3}))").await?;
/// assert_eq!(cell.stdout, "{\"sum\":5}\n");
/// # Ok(()) }
/// ```
pub async fn run_code(bridge: &Bridge, code: &str) -> Result<CellReport, Error> {
    let session = bridge.sandbox().await?.session_keeping(None);
    let report = session.run_code(code).await;
    session.end_session().await;
    Ok(report?)
}

/// The `run_python` MCP server over `bridge`, built but not started: an
/// rmcp `ServerHandler` (one client session; every cell in a fresh
/// container). Serve it with [`McpServer::serve_stdio`] or any rmcp
/// transport (`rmcp::ServiceExt::serve`).
///
/// ```no_run
/// # async fn demo(bridge: code_mode::Bridge) -> Result<(), code_mode::Error> {
/// let server = code_mode::build_server(&bridge).await?;
/// assert_eq!(server.tool().name, "run_python");
/// server.serve_stdio(tokio_util::sync::CancellationToken::new()).await?;
/// # Ok(()) }
/// ```
pub async fn build_server(bridge: &Bridge) -> Result<Frontend, Error> {
    let server = bridge.sandbox().await?.session();
    server.listen_for_approvals().await?;
    Ok(server)
}

/// One container whose variables, imports and `/tmp` files are kept
/// between the cells run in it, each cell with its own deadline, output
/// caps and call budget. Its container starts with the first cell; if a
/// cell is stopped (deadline, memory, output flood) or the container idles
/// past [`Options::keep`], the next cell starts fresh and its output begins
/// with a line saying that earlier variables are gone.
///
/// ```no_run
/// # async fn demo(bridge: code_mode::Bridge) -> Result<(), code_mode::Error> {
/// let sandbox = code_mode::Sandbox::new(&bridge).await?;
/// sandbox.run("total = 0", bridge.budget(0)).await?;
/// let cell = sandbox.run("total += 1\nprint(total)", bridge.budget(5)).await?;
/// assert_eq!(cell.stdout, "1\n");
/// sandbox.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Sandbox {
    session: Frontend,
}

impl Sandbox {
    /// A sandbox over `bridge` (its own client session: its own private
    /// data taint and `grant` counters).
    pub async fn new(bridge: &Bridge) -> Result<Sandbox, Error> {
        let keep = bridge.inner.options.keep;
        Ok(Sandbox { session: bridge.sandbox().await?.session_keeping(Some(keep)) })
    }

    /// Run one cell, allowing it `budget` tool calls.
    pub async fn run(&self, code: &str, budget: Budget) -> Result<CellReport, Error> {
        Ok(self
            .session
            .run_code_with(code, CellOptions { max_calls: Some(budget.get()), ..CellOptions::default() })
            .await?)
    }

    /// Remove the container (and forget the session's state at the bridge).
    pub async fn close(self) {
        self.session.end_session().await;
    }
}
