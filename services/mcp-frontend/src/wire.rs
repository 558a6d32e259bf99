//! What the frontend hands its MCP client, decided here and nowhere else:
//! a cell's report as a result (structured content, the same JSON as text,
//! `isError` when the code failed, and a stateless client's handle), every
//! error result, and every JSON-RPC error. A request the frontend refuses
//! or a cell that got no report says `<tool>: <why>` ([`failed`]); a direct
//! call's refusal is the bridge's message, a fault only its kind, as code
//! sees it ([`direct_reply`]). A request to a wrapped server ends in an
//! [`Outcome`], which each MCP method maps once: `tools/call` to a tool
//! result ([`Outcome::tool_response`]), the others (a resource read, a
//! prompt, a completion) to their own result or a JSON-RPC error carrying
//! the server's code ([`Outcome::result`]).

use code_mode_core::bus::BusError;
use code_mode_proto::{CellReport, DirectReply, ErrorKind};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ErrorCode, InputRequiredResult, JsonObject, ResultType,
};
use serde_json::Value;

use crate::FrontendError;
use crate::handle;
use crate::session::Ran;

/// An error result saying `text`.
pub(crate) fn error_text(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The error result of `tool` (`run_python`, or a wrapped tool called
/// directly) refused or failed by the frontend: `<tool>: <why>`.
pub(crate) fn failed(tool: &str, error: &FrontendError) -> CallToolResult {
    error_text(format!("{tool}: {error}"))
}

/// The bridge's answer to a direct call as the client's result: the
/// server's result whole (its result type set, as the client's protocol
/// may need it), a refusal's message as an error result, a fault or a bus
/// failure only as its kind's name.
pub(crate) fn direct_reply(
    tool: &str,
    answer: Result<DirectReply, BusError>,
) -> Result<CallToolResponse, FrontendError> {
    match answer {
        Ok(DirectReply::Ok { result }) if crate::task_relay::is_task(&result) => {
            Ok(crate::task_relay::created(tool, result))
        }
        Ok(DirectReply::Ok { result }) if is_input_required(&result) => {
            // The server's own questions for a stateless client: to the
            // client as they are (its requestState comes back with the
            // retried call).
            match serde_json::from_value::<InputRequiredResult>(result) {
                Ok(asked) => Ok(CallToolResponse::InputRequired(asked)),
                Err(e) => {
                    tracing::warn!(%tool, error = %e, "the server's input-required result is malformed");
                    Ok(error_text(ErrorKind::UnexpectedResponse.as_str().to_string()).into())
                }
            }
        }
        Ok(DirectReply::Ok { result }) => Ok(match serde_json::from_value::<CallToolResult>(result) {
            Ok(mut result) => {
                // A server of an older protocol sends no result type; this
                // result goes to our client, whose protocol may need one
                // (rmcp drops it again for older clients).
                result.result_type = Some(ResultType::COMPLETE);
                result
            }
            Err(e) => {
                tracing::warn!(%tool, error = %e, "the bridge's result is no MCP result");
                error_text(ErrorKind::UnexpectedResponse.as_str().to_string())
            }
        }
        .into()),
        Ok(DirectReply::Refused { message, code: Some(code), data }) => {
            Err(FrontendError::ServerRefused { code, message, data })
        }
        Ok(DirectReply::Refused { message, code: None, .. }) => Ok(error_text(message).into()),
        Ok(DirectReply::Fault { kind }) => Ok(error_text(kind.as_str().to_string()).into()),
        Err(e) => {
            tracing::warn!(%tool, error = %e, "a direct call did not reach the bridge");
            Ok(error_text(e.tool_call_fault().as_str().to_string()).into())
        }
    }
}

/// True when a server's result is its input-required result (2026-07-28).
pub(crate) fn is_input_required(result: &serde_json::Value) -> bool {
    result.get("resultType").and_then(serde_json::Value::as_str) == Some("input_required")
}

/// How a request to a wrapped server (a direct call, a resource read, a
/// prompt, a completion) or a cell ended, before it is an MCP answer.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A tool call's or a cell's result, or the questions put to a
    /// stateless client (input-required).
    Tool(CallToolResponse),
    /// Another request's result as its server sent it (for a stateless
    /// client possibly the server's own input-required result).
    Result(Value),
    /// Refused by the frontend, the bridge's checks or the server: the
    /// message, and when the server refused it with a JSON-RPC error its
    /// code and data, which the client then gets.
    Refused {
        /// Why.
        message: String,
        /// The server's JSON-RPC error code.
        code: Option<i32>,
        /// The error's data, as the server gave it.
        data: Option<Value>,
    },
}

impl Outcome {
    /// The answer to `tools/call`: the result, a refusal as an error
    /// result, a server's JSON-RPC error as that error.
    pub(crate) fn tool_response(self) -> Result<CallToolResponse, McpError> {
        match self {
            Outcome::Tool(response) => Ok(response),
            Outcome::Refused { message, code: Some(code), data } => Err(McpError::new(ErrorCode(code), message, data)),
            Outcome::Refused { message, code: None, .. } => Ok(error_text(message).into()),
            Outcome::Result(value) => {
                let mut result = CallToolResult::structured(value);
                result.is_error = Some(false);
                Ok(result.into())
            }
        }
    }

    /// The answer to `method` (`resources/read`, `prompts/get`, ...): the
    /// server's result, or a JSON-RPC error: the server's own code, else
    /// `-32602` for a refusal of the gateway's checks.
    pub(crate) fn result(self, method: &str) -> Result<Value, McpError> {
        match self {
            Outcome::Result(value) => Ok(value),
            Outcome::Refused { message, code, data } => {
                Err(McpError::new(code.map(ErrorCode).unwrap_or(ErrorCode::INVALID_PARAMS), message, data))
            }
            // A server's own questions are answered for a stateless client on
            // its request (see `Frontend::drive`): what is left to ask is a
            // person's approval, which such a client gives only on a tool call.
            Outcome::Tool(CallToolResponse::InputRequired(_)) => Err(McpError::invalid_request(
                format!(
                    "{method}: a person's approval is needed, which a stateless client (MCP 2026-07-28) can give only on a tool call"
                ),
                None,
            )),
            Outcome::Tool(_) => Err(McpError::internal_error(format!("{method}: no result"), None)),
        }
    }
}

/// How a request that got no answer (or was refused by the frontend) ends:
/// `<tool>: <why>`, the server's JSON-RPC error kept.
pub(crate) fn failed_outcome(tool: &str, error: FrontendError) -> Outcome {
    match error {
        FrontendError::ServerRefused { code, message, data } => Outcome::Refused { message, code: Some(code), data },
        e => Outcome::Refused { message: format!("{tool}: {e}"), code: None, data: None },
    }
}

/// The bridge's answer to a gateway request (a resource read, a prompt, a
/// completion): the server's result, or a refusal with the server's
/// JSON-RPC error code when the server refused it; a fault or a bus
/// failure only as its kind's name.
pub(crate) fn gateway_outcome(what: &str, answer: Result<DirectReply, BusError>) -> Outcome {
    match answer {
        Ok(DirectReply::Ok { result }) => Outcome::Result(result),
        Ok(DirectReply::Refused { message, code, data }) => Outcome::Refused { message, code, data },
        Ok(DirectReply::Fault { kind }) => {
            Outcome::Refused { message: format!("{what}: {}", kind.as_str()), code: None, data: None }
        }
        Err(e) => {
            tracing::warn!(%what, error = %e, "a gateway request did not reach the bridge");
            Outcome::Refused { message: format!("{what}: {}", e.tool_call_fault().as_str()), code: None, data: None }
        }
    }
}

/// The JSON-RPC errors of requests the frontend answers itself.
pub(crate) mod rpc {
    use rmcp::ErrorData as McpError;
    use rmcp::model::ErrorCode;

    use crate::FrontendError;

    /// A second `initialize` on a session.
    pub(crate) fn initialized_twice() -> McpError {
        McpError::invalid_request("this MCP session is already initialized: a session has one handshake", None)
    }

    /// A call of a tool not offered (code mode: only `tool`).
    pub(crate) fn unknown_tool(name: &str, tool: &str) -> McpError {
        McpError::invalid_params(format!("unknown tool {name:?}: the only tool is {tool}"), None)
    }

    /// A retried `run_python` whose state resumes nothing.
    pub(crate) fn not_parked() -> McpError {
        McpError::invalid_params(FrontendError::NotParked.to_string(), None)
    }

    /// Parameters that are not what the method takes.
    pub(crate) fn bad_params(error: impl std::fmt::Display) -> McpError {
        McpError::invalid_params(error.to_string(), None)
    }

    /// A list (`resources`, `resourceTemplates`, `prompts`) a bridge older
    /// than this frontend does not send.
    pub(crate) fn not_offered(key: &str) -> McpError {
        McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("{key}: not offered (the bridge is older than this frontend)"),
            None,
        )
    }

    /// The frontend could not do `what`.
    pub(crate) fn internal(what: &str, error: impl std::fmt::Display) -> McpError {
        McpError::internal_error(format!("{what}: {error}"), None)
    }
}

/// The MCP result of a report: structured content plus the same JSON as
/// text, marked `isError` when the report has an error (the code raised, or
/// the run was stopped), so that clients which only look at the flag see the
/// failure.
pub fn report_result(report: &CellReport) -> CallToolResult {
    let mut result = CallToolResult::structured(report_json(report));
    result.is_error = Some(report.error.is_some());
    handed_back(&mut result, report);
    result
}

/// A report as the structured content and the text: the printed output and
/// how the run ended (what the code handed back goes as blocks beside it).
fn report_json(report: &CellReport) -> serde_json::Value {
    let mut value = serde_json::to_value(report).expect("a report is JSON");
    if let serde_json::Value::Object(map) = &mut value {
        map.remove("content");
    }
    value
}

/// Append what the code handed back to the model (`show`) as content
/// blocks after the report's text, then a resource link per kept file
/// (issue 42).
fn handed_back(result: &mut CallToolResult, report: &CellReport) {
    for block in &report.content {
        match serde_json::from_value::<ContentBlock>(block.clone()) {
            Ok(block) => result.content.push(block),
            Err(e) => tracing::warn!(error = %e, "a content block the code handed back is not an MCP block: left out"),
        }
    }
    result.content.extend(crate::files_out::links(report));
}

/// The MCP result of a cell: its report, and for a stateless client's kept
/// cell the handle of the container its variables live in, in the
/// structured content (`session`) and in `_meta` ([`handle::META_KEY`]).
pub(crate) fn ran_result(ran: &Ran) -> CallToolResult {
    let Some(kept) = &ran.kept else { return report_result(&ran.report) };
    let handle = handle::encode(kept);
    let mut content = report_json(&ran.report);
    content[handle::ARGUMENT] = serde_json::Value::String(handle.clone());
    let mut result = CallToolResult::structured(content);
    result.is_error = Some(ran.report.error.is_some());
    handed_back(&mut result, &ran.report);
    let mut meta = JsonObject::new();
    meta.insert(handle::META_KEY.into(), serde_json::Value::String(handle));
    result.meta = Some(rmcp::model::MetaObject(meta));
    result
}

/// Record on a cell's trace span how it ended: a fixed word, and a failure's
/// metric label as its error kind (never the report's text or the error's
/// message, which may quote the code's data).
pub(crate) fn cell_traced(span: &tracing::Span, result: &Result<Ran, FrontendError>) {
    use code_mode_telemetry::trace::ended;
    match result {
        Ok(ran) if ran.report.stopped => ended(span, "stopped", None),
        Ok(ran) if ran.report.error.is_some() => ended(span, "error", None),
        Ok(_) => ended(span, "ok", None),
        Err(_) => ended(span, "failed", Some(FrontendError::metric_result(result).as_str())),
    }
}

/// `v` as a JSON object (an empty one for anything else).
pub(crate) fn as_object(v: serde_json::Value) -> JsonObject {
    match v {
        serde_json::Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The JSON Schema of a `run_python` result, inlined (no `$ref`s) as MCP
/// output schemas must be self-contained.
pub(crate) fn output_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string", "description": "What the code printed (first bytes kept)."},
            "error": {"type": ["string", "null"], "description": "Null when the code finished; else the end of its traceback or why the run was stopped."},
            "truncated": {"type": "boolean", "description": "The code printed more than was kept."},
            "stopped": {"type": "boolean", "description": "The run did not end on its own (deadline, output flood, protocol violation, the sandbox died)."},
            "session": {"type": "string", "description": "For a stateless client with kept variables: the handle of the sandbox holding this run's variables; pass it as the `session` argument of the next run."},
            "files": {"type": "array", "description": "Files the code wrote to /tmp/out (and its whole output when `stdout` was cut), each readable with resources/read for a limited time.", "items": {"type": "object", "properties": {"uri": {"type": "string"}, "name": {"type": "string"}, "mimeType": {"type": "string"}, "size": {"type": "integer"}}, "required": ["uri", "name", "mimeType", "size"]}},
            "files_notes": {"type": "array", "items": {"type": "string"}, "description": "Files not handed out and why (refused, past a bound of the run)."}
        },
        "required": ["stdout", "error", "truncated", "stopped"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(result: &CallToolResult) -> &str {
        result.content[0].as_text().map(|t| t.text.as_str()).unwrap_or_default()
    }

    #[test]
    fn a_refused_request_says_the_tool_and_why_and_a_direct_fault_only_its_kind() {
        let busy = failed("run_python", &FrontendError::SessionBusy { max: 1 });
        assert_eq!(busy.is_error, Some(true));
        assert!(text(&busy).starts_with("run_python: this session already runs 1 cell(s) at once"), "{busy:?}");
        let complete = |r: Result<CallToolResponse, FrontendError>| match r {
            Ok(CallToolResponse::Complete(result)) => result,
            other => panic!("a complete result: {other:?}"),
        };
        let fault = complete(direct_reply("add", Ok(DirectReply::Fault { kind: ErrorKind::TransportClosed })));
        assert_eq!((fault.is_error, text(&fault)), (Some(true), "TransportClosed"));
        let unreached =
            complete(direct_reply("add", Err(BusError::NoResponders { subject: "codemode.v1.tool.direct".into() })));
        assert_eq!(text(&unreached), "BridgeUnavailable", "no subject or detail: {unreached:?}");
        let refused = complete(direct_reply(
            "add",
            Ok(DirectReply::Refused { message: "add: denied".into(), code: None, data: None }),
        ));
        assert_eq!(text(&refused), "add: denied");
    }

    #[test]
    fn a_report_with_an_error_is_an_error_result_and_a_handle_rides_in_the_content_and_meta() {
        let report = CellReport { stdout: "x".into(), error: Some("boom".into()), ..CellReport::default() };
        assert_eq!(report_result(&report).is_error, Some(true));
        let at = code_mode_proto::KeptContainer {
            runner: "0123456789abcdef0123456789abcdef".into(),
            key: "fedcba9876543210fedcba9876543210".into(),
        };
        let ran = Ran { report: CellReport { error: None, ..report }, kept: Some(at.clone()) };
        let result = ran_result(&ran);
        let handle = handle::encode(&at);
        assert_eq!(result.structured_content.as_ref().unwrap()["session"], handle.as_str());
        assert_eq!(result.meta.as_ref().unwrap().0[handle::META_KEY], handle.as_str());
        assert_eq!(result.is_error, Some(false));
    }
}
