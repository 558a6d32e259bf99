//! The `run_python` tool as `tools/list` offers it ([`Frontend::tool_for`]).

use std::sync::Arc;

use rmcp::model::Tool;

use crate::{Frontend, TOOL_NAME, handle, wire};

impl Frontend {
    /// The `run_python` tool as listed to a client of a session, or to a
    /// stateless client (`stateless`): its description says what is true
    /// for that client, and with kept variables a stateless client's input
    /// schema takes the session handle.
    pub(crate) fn tool_for(&self, stateless: bool) -> Tool {
        let view = self.shared.catalog.current();
        let description = if stateless { view.stateless_description.clone() } else { view.description.clone() };
        let mut properties = serde_json::json!({
            "code": {"type": "string", "description": "Python source; top-level await is allowed."},
            "files": crate::files_in::schema(),
        });
        if stateless && self.shared.config.keep.is_some() {
            properties[handle::ARGUMENT] = serde_json::json!({
                "type": "string",
                "description": "\"new\" to start a sandbox that keeps its variables between runs, or the \
                                `session` value of an earlier result to run in that sandbox again. Leave it out to \
                                run in a fresh sandbox that keeps nothing."
            });
        }
        let input = serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": ["code"],
            "additionalProperties": false,
        });
        let output = wire::output_schema();
        let mut tool = Tool::new(TOOL_NAME, description, Arc::new(wire::as_object(input)));
        tool.output_schema = Some(Arc::new(wire::as_object(output)));
        tool
    }
}
