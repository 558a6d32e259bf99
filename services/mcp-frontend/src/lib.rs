//! The MCP frontend: the server an MCP client sees, with one tool,
//! `run_python`.
//!
//! At start it asks the bridge for the tool catalog and builds the tool's
//! description ([`description`]). Each `run_python` call is checked (code
//! size), waits for one of a bounded number of slots, and is sent to a
//! sandbox-runner as a [`RunCell`]; the [`CellReport`] comes back to the
//! client as structured content (with an output schema) and as the same JSON
//! in a text block. Errors of code-mode itself come back as tool errors
//! saying what went wrong.

pub mod description;

use std::sync::Arc;
use std::time::Duration;

use code_mode_core::bus::{Bus, BusError};
use code_mode_core::defaults;
use code_mode_proto::{Catalog, CatalogRequest, CellLimits, CellReport, RunCell, ToolStub, subjects};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::description::RunFacts;

/// The kind of error a sandbox-runner answers when every slot is taken
/// (same value as the runner's `NO_CAPACITY`).
pub const NO_CAPACITY: &str = "no_capacity";

/// The one tool's name.
pub const TOOL_NAME: &str = "run_python";

/// Errors of the frontend layer.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The code is over the size limit.
    #[error("the code is {size} bytes, over the {max} byte limit: send a shorter program")]
    CodeTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A service could not be reached or failed.
    #[error("{0}")]
    Bus(#[from] BusError),
    /// The sandbox-runner that took the cell never answered: it was killed,
    /// crashed or lost its connection while running it.
    #[error(
        "the sandbox-runner running this cell was lost: no answer within {waited:?} (the run's deadline plus \
         {margin:?}); it crashed or lost its connection, so the cell's outcome is unknown: run it again"
    )]
    RunnerLost {
        /// How long the frontend waited.
        waited: Duration,
        /// The margin over the deadline.
        margin: Duration,
    },
    /// No sandbox-runner had a free slot in time.
    #[error("no sandbox-runner had room for the cell within {waited:?}: try again later")]
    NoCapacity {
        /// How long the cell waited.
        waited: Duration,
    },
    /// The MCP transport failed.
    #[error("MCP transport: {0}")]
    Transport(String),
}

/// Settings of the frontend.
#[derive(Debug, Clone, Copy)]
pub struct FrontendConfig {
    /// Largest code accepted, in bytes.
    pub max_code: usize,
    /// `run_python` calls that run at once; more wait.
    pub max_concurrent_cells: usize,
    /// Deadline of one run.
    pub deadline: Duration,
    /// Bytes of output kept.
    pub max_output: u32,
    /// Bytes of output after which a run is stopped.
    pub stop_output: u32,
    /// Longest protocol line accepted from a container.
    pub max_line: u32,
    /// Characters of the tool description.
    pub description_budget: usize,
    /// How long a cell waits for a sandbox-runner with a free slot.
    pub capacity_wait: Duration,
    /// How long to wait for the bridge's catalog at start (services may start
    /// in any order).
    pub catalog_wait: Duration,
}

impl Default for FrontendConfig {
    fn default() -> Self {
        Self {
            max_code: defaults::MAX_CODE,
            max_concurrent_cells: defaults::MAX_CONCURRENT_CELLS,
            deadline: defaults::DEADLINE,
            max_output: defaults::MAX_OUTPUT,
            stop_output: defaults::STOP_OUTPUT,
            max_line: defaults::MAX_LINE,
            description_budget: defaults::DESCRIPTION_BUDGET,
            capacity_wait: defaults::CAPACITY_WAIT,
            catalog_wait: CATALOG_WAIT,
        }
    }
}

/// How long to wait for the bridge's catalog at start, by default.
pub const CATALOG_WAIT: Duration = Duration::from_secs(30);
/// How long one catalog request may take.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two tries of a request that found no service free.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Margin over the deadline for a cell's reply. The runner counts the
/// deadline from the cell's arrival (container start included), so this
/// covers removing the container and the hops. A runner that has not
/// answered by then is taken as lost: a killed runner costs the client the
/// deadline plus this, not a hang.
pub const CELL_MARGIN: Duration = Duration::from_secs(5);

/// The frontend of one client session: a cheap handle.
#[derive(Clone, Debug)]
pub struct Frontend {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    bus: Bus,
    session: String,
    config: FrontendConfig,
    catalog: Catalog,
    description: String,
    slots: Semaphore,
}

impl Frontend {
    /// Fetch the catalog from the bridge and prepare the tool.
    pub async fn connect(bus: Bus, config: FrontendConfig) -> Result<Self, FrontendError> {
        let session = uuid::Uuid::new_v4().to_string();
        let request = CatalogRequest { session: session.clone() };
        let give_up = tokio::time::Instant::now() + config.catalog_wait;
        let catalog: Catalog = loop {
            match bus.call(subjects::CATALOG_GET, &request, CATALOG_TIMEOUT).await {
                Ok(catalog) => break catalog,
                Err(e @ (BusError::NoResponders { .. } | BusError::Timeout { .. }))
                    if tokio::time::Instant::now() < give_up =>
                {
                    tracing::info!(error = %e, "waiting for a bridge");
                    tokio::time::sleep(RETRY_PAUSE * 5).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let facts = RunFacts {
            deadline_secs: config.deadline.as_secs(),
            max_calls: catalog.max_calls,
            call_timeout_secs: catalog.call_timeout_ms / 1000,
            max_output: config.max_output,
        };
        let stubs: Vec<String> = catalog.tools.iter().map(|t| t.stub.clone()).collect();
        let summaries: Vec<String> = catalog.tools.iter().map(|t| t.summary.clone()).collect();
        let description = description::description(&facts, &stubs, &summaries, config.description_budget);
        let slots = Semaphore::new(config.max_concurrent_cells.max(1));
        Ok(Self { inner: Arc::new(Inner { bus, session, config, catalog, description, slots }) })
    }

    /// The `run_python` description.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The catalog this frontend offers.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The session id of this frontend.
    pub fn session(&self) -> &str {
        &self.inner.session
    }

    /// Run one cell of code and return its report.
    pub async fn run_code(&self, code: &str) -> Result<CellReport, FrontendError> {
        let config = &self.inner.config;
        if code.len() > config.max_code {
            return Err(FrontendError::CodeTooLarge { size: code.len(), max: config.max_code });
        }
        let _slot = self.inner.slots.acquire().await.expect("the semaphore is never closed");
        let cell = RunCell {
            cell_id: uuid::Uuid::new_v4().to_string(),
            session: self.inner.session.clone(),
            code: code.to_string(),
            tools: self
                .inner
                .catalog
                .tools
                .iter()
                .map(|t| ToolStub { name: t.name.clone(), stub: t.stub.clone() })
                .collect(),
            limits: CellLimits {
                deadline_ms: config.deadline.as_millis() as u64,
                max_calls: self.inner.catalog.max_calls,
                call_timeout_ms: self.inner.catalog.call_timeout_ms,
                max_output: config.max_output,
                stop_output: config.stop_output,
                max_line: config.max_line,
            },
        };
        // A runner with every slot taken declines at once; the queue group
        // then offers the cell to the next. Give up after `capacity_wait`.
        let started = tokio::time::Instant::now();
        loop {
            let wait = config.deadline + CELL_MARGIN;
            let last = match self.inner.bus.call(subjects::CELL_RUN, &cell, wait).await {
                Err(BusError::Remote { error, .. }) if error.kind == NO_CAPACITY => None,
                Err(e @ BusError::NoResponders { .. }) => Some(e),
                // A runner took the cell and never answered (or dropped it).
                Err(BusError::Timeout { .. } | BusError::Dropped { .. }) => {
                    tracing::warn!(cell = %cell.cell_id, "the sandbox-runner running the cell was lost");
                    return Err(FrontendError::RunnerLost { waited: wait, margin: CELL_MARGIN });
                }
                other => return Ok(other?),
            };
            if started.elapsed() >= config.capacity_wait {
                return Err(match last {
                    // Nobody declined: there is no runner at all.
                    Some(no_runner) => no_runner.into(),
                    None => FrontendError::NoCapacity { waited: started.elapsed() },
                });
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// The `run_python` tool as listed to the client.
    pub fn tool(&self) -> Tool {
        let input = serde_json::json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source; top-level await is allowed."}},
            "required": ["code"],
            "additionalProperties": false,
        });
        let output = serde_json::to_value(schemars_output_schema()).expect("schema is JSON");
        let mut tool = Tool::new(TOOL_NAME, self.inner.description.clone(), Arc::new(as_object(input)));
        tool.output_schema = Some(Arc::new(as_object(output)));
        tool
    }

    /// Serve MCP over this process's stdin/stdout until the client goes
    /// away or `cancel` fires.
    pub async fn serve_stdio(self, cancel: CancellationToken) -> Result<(), FrontendError> {
        let service = self
            .serve_with_ct(rmcp::transport::stdio(), cancel.child_token())
            .await
            .map_err(|e| FrontendError::Transport(e.to_string()))?;
        service.waiting().await.map_err(|e| FrontendError::Transport(e.to_string()))?;
        Ok(())
    }
}

fn as_object(v: serde_json::Value) -> JsonObject {
    match v {
        serde_json::Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The JSON Schema of a `run_python` result, inlined (no `$ref`s) as MCP
/// output schemas must be self-contained.
fn schemars_output_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string", "description": "What the code printed (first bytes kept)."},
            "error": {"type": ["string", "null"], "description": "Null when the code finished; else the end of its traceback or why the run was stopped."},
            "truncated": {"type": "boolean", "description": "The code printed more than was kept."},
            "stopped": {"type": "boolean", "description": "The run did not end on its own (deadline, output flood, protocol violation, the sandbox died)."}
        },
        "required": ["stdout", "error", "truncated", "stopped"],
        "additionalProperties": false
    })
}

/// The MCP result of a report: structured content plus the same JSON as text.
pub fn report_result(report: &CellReport) -> CallToolResult {
    CallToolResult::structured(serde_json::to_value(report).expect("a report is JSON"))
}

impl ServerHandler for Frontend {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("code-mode", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Call run_python with a short Python program; the wrapped tools are async functions in it.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![self.tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != TOOL_NAME {
            return Err(McpError::invalid_params(
                format!("unknown tool {:?}: the only tool is {TOOL_NAME}", request.name),
                None,
            ));
        }
        let code = request.arguments.as_ref().and_then(|a| a.get("code"));
        let Some(serde_json::Value::String(code)) = code else {
            return Ok(error_result(&format!("{TOOL_NAME} needs a string argument \"code\"")).into());
        };
        match self.run_code(code).await {
            Ok(report) => Ok(report_result(&report).into()),
            Err(e) => {
                tracing::warn!(error = %e, "run_python failed");
                Ok(error_result(&format!("{TOOL_NAME}: {e}")).into())
            }
        }
    }
}

fn error_result(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_string())])
}
