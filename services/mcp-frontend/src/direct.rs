//! Wrapped tools offered directly (`--expose-tools`): the client lists and
//! calls them as ordinary MCP tools, beside `run_python` or instead of it.
//!
//! Nothing here checks a call. The session actor sends each one to the
//! bridge as a [`DirectCall`] on [`subjects::TOOL_DIRECT`], and the bridge
//! runs it through the same function, in the same order, as a call from a
//! cell (allowlist, budget, arguments, audit sink, policy with its counters
//! and approvals, the private-data rule against the session's taint, the
//! result's size, the audit record). What this module owns is the shape:
//! the tools' definitions as `tools/list` offers them (from the catalog
//! watcher's current catalog, so `notifications/tools/list_changed`
//! reaches the client for them too), and the bridge's answer as an MCP
//! result: the server's result whole (content blocks, structured
//! content), or an error result holding the refusal a cell would get, or
//! only a fault's type name.
//!
//! With [`Expose::Only`] nothing runs code: the frontend needs a bridge
//! and no sandbox-runner, and `serve` does not contact Docker.

use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{Catalog, DirectCall, DirectReply, subjects};
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};

use crate::Shared;

/// Margin over the call's own timeouts for the bridge's answer (the hops).
const REPLY_MARGIN: Duration = code_mode_core::defaults::HOP_MARGIN;

/// Which tools `tools/list` offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Expose {
    /// Only `run_python` (the default).
    #[default]
    Off,
    /// `run_python` and every wrapped tool the catalog offers.
    Beside,
    /// Only the wrapped tools: a policy gateway, no sandbox.
    Only,
}

impl Expose {
    /// `run_python` is offered.
    pub fn run_python(self) -> bool {
        self != Expose::Only
    }

    /// The wrapped tools are offered.
    pub fn direct(self) -> bool {
        self != Expose::Off
    }
}

/// The wrapped tools of `catalog` as MCP tools: the servers' schemas,
/// titles and annotations under the names the code calls them by, each
/// description led by its labels. Tools a policy denies outright are not
/// in the catalog, so not offered.
pub(crate) fn tools(catalog: &Catalog) -> Vec<Tool> {
    catalog
        .tools
        .iter()
        .filter_map(|entry| {
            let direct = entry.direct.as_ref()?;
            let mut tool =
                Tool::new(entry.name.clone(), direct.description.clone(), Arc::new(object(&direct.input_schema)));
            tool.title = direct.title.clone();
            tool.output_schema = direct.output_schema.as_ref().map(|o| Arc::new(object(o)));
            tool.annotations =
                direct.annotations.as_ref().and_then(|a| serde_json::from_value::<ToolAnnotations>(a.clone()).ok());
            Some(tool)
        })
        .collect()
}

fn object(value: &serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(m) => m.clone(),
        _ => JsonObject::new(),
    }
}

/// Send one direct call to the bridge and turn its answer into the MCP
/// result the client gets ([`crate::wire::direct_reply`]).
pub(crate) async fn call(shared: &Shared, call: &DirectCall) -> CallToolResult {
    let catalog = &shared.catalog.current().catalog;
    let wait = Duration::from_millis(catalog.call_timeout_ms + catalog.approval_timeout_ms) + REPLY_MARGIN;
    let answer = shared.bus.call::<_, DirectReply>(subjects::TOOL_DIRECT, call, wait).await;
    crate::wire::direct_reply(&call.tool, answer)
}
