//! A call's result shaped for its caller ([`Caller`]): code gets a string
//! (structured content as JSON, else the text blocks, each other block
//! named in its place and handed in `blocks`); a direct call gets the
//! result whole in its MCP shape; either is refused when too large, or
//! when the tool itself failed. What a checked call came to ([`Answer`])
//! takes its caller's wire shape in [`crate::wire`].

use code_mode_audit::record::CallResult;
use code_mode_proto::{Op, ToolReply};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::Bridge;

/// What a checked call came to, before it takes its caller's shape.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The result as code receives it.
    Text(String),
    /// The same with the result's blocks other than text, for code.
    Content {
        /// The string code gets.
        value: String,
        /// The blocks other than text, as the server sent them.
        blocks: Vec<Value>,
    },
    /// The result as the server sent it (direct calls).
    Result(Box<CallToolResult>),
    /// The result of a request other than a tool call, as JSON.
    Value(Value),
    /// A request other than a tool call that its server refused with a
    /// JSON-RPC error: its message (cut) and code.
    ServerRefused {
        /// The server's message, led by the request.
        message: String,
        /// The server's error code.
        code: i32,
        /// The error's data.
        data: Option<Value>,
    },
    /// Refused (the bridge's message, cut) or a host fault (its kind
    /// only), as [`crate::wire::tool_reply`] puts it on the wire.
    Failed(ToolReply),
}

/// Where a call comes from: a cell's code, or a client calling the tool
/// directly. Only the budget checked and the shape of the result differ.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Caller {
    /// A cell's code: the run's budget (`call_index` of `max_calls`); the
    /// result as a string.
    Code,
    /// A client's direct call: the session's direct calls (`call_index` of
    /// `max_calls`, none: no limit); the result in its MCP shape.
    Direct { max_calls: Option<u32> },
}

impl Bridge {
    /// A refusal by the bridge, its message cut to the message limit.
    pub(crate) fn refuse(&self, message: String) -> Answer {
        Answer::Failed(crate::wire::tool_reply(
            crate::wire::CallFailure::Refused(message),
            self.inner.limits.max_message_chars,
        ))
    }

    /// A server's answer that is not the result its request returns.
    pub(crate) fn unexpected(&self) -> Answer {
        Answer::Failed(crate::wire::tool_reply(
            crate::wire::CallFailure::Unexpected,
            self.inner.limits.max_message_chars,
        ))
    }

    /// The answer for a result, how it came back, and the text whose size
    /// and hash the audit record keeps (what the caller is handed: for code
    /// the text, for a direct call the whole result as JSON). A tool's own
    /// failure is refused with its text either way. The size checked is the
    /// text's, plus for a direct call the blocks code never gets (images,
    /// audio, resources), so a result without them gets the very message
    /// code gets. Another request's result is handed whole, as JSON, and its
    /// size is that JSON's.
    pub(crate) fn result_answer(
        &self,
        tool: &str,
        op: Op,
        result: Value,
        caller: Caller,
    ) -> (Answer, CallResult, String) {
        let max = self.inner.limits.max_result;
        let too_large = |size: usize| {
            format!("{tool}: the result is {size} bytes, over the {max} byte limit (refused, not cut): ask for less")
        };
        // A server of the stateless revision may answer a stateless
        // client's direct request with its own input-required result: it
        // goes to the client as it is, whatever the request.
        // So does a task a server made of a client's call (tasks extension).
        let input_required =
            matches!(result.get("resultType").and_then(Value::as_str), Some("input_required" | "task"));
        if op != Op::Tool || (input_required && matches!(caller, Caller::Direct { .. })) {
            let handed = result.to_string();
            if handed.len() > max {
                return (self.refuse(too_large(handed.len())), CallResult::TooLarge, handed);
            }
            return (Answer::Value(result), CallResult::Ok, handed);
        }
        let result: CallToolResult = match serde_json::from_value(result) {
            Ok(result) => result,
            Err(e) => {
                tracing::warn!(%tool, error = %e, "the server's result is not a tool result");
                return (self.unexpected(), CallResult::Fault, String::new());
            }
        };
        let text = result_text(&result);
        if result.is_error == Some(true) {
            return (self.refuse(format!("{tool} failed: {text}")), CallResult::Error, text);
        }
        // Code gets the blocks other than text too (with their bytes), so
        // both callers are handed the text and every other block.
        let size = text.len() + non_text_bytes(&result);
        let handed = match caller {
            Caller::Code => text,
            Caller::Direct { .. } => serde_json::to_string(&result).unwrap_or_default(),
        };
        if size > max {
            return (self.refuse(too_large(size)), CallResult::TooLarge, handed);
        }
        match caller {
            Caller::Code => {
                let blocks = non_text_blocks(&result);
                let answer = match blocks.is_empty() {
                    true => Answer::Text(handed.clone()),
                    false => Answer::Content { value: handed.clone(), blocks },
                };
                (answer, CallResult::Ok, handed)
            }
            Caller::Direct { .. } => (Answer::Result(Box::new(result)), CallResult::Ok, handed),
        }
    }
}

/// A result as the code receives it: the structured content as JSON if the
/// server sent some, else the text blocks joined by newlines, each other
/// block named in its place (`[image image/png: .blocks[0]]`): code finds
/// it, with its bytes, in the result's `blocks`.
pub fn result_text(result: &CallToolResult) -> String {
    if let Some(structured) = &result.structured_content {
        return serde_json::to_string(structured).unwrap_or_default();
    }
    let mut other = 0;
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| {
            let (what, detail) = match block {
                ContentBlock::Text(t) => return t.text.clone(),
                ContentBlock::Image(i) => ("image", Some(i.mime_type.as_str())),
                ContentBlock::Audio(a) => ("audio", Some(a.mime_type.as_str())),
                ContentBlock::Resource(_) => ("embedded resource", None),
                ContentBlock::ResourceLink(l) => ("resource link", Some(l.uri.as_str())),
                _ => ("content", None),
            };
            let at = other;
            other += 1;
            match detail {
                Some(detail) => format!("[{what} {detail}: .blocks[{at}]]"),
                None => format!("[{what}: .blocks[{at}]]"),
            }
        })
        .collect();
    parts.join("\n")
}

/// A result's blocks other than text, as JSON, in order (what code finds in
/// a result's `blocks`).
fn non_text_blocks(result: &CallToolResult) -> Vec<Value> {
    result
        .content
        .iter()
        .filter(|block| !matches!(block, ContentBlock::Text(_)))
        .filter_map(|block| serde_json::to_value(block).ok())
        .collect()
}

/// Bytes of a result's blocks that [`result_text`] names without inlining
/// (images, audio, resources), as JSON: what a direct caller gets beyond
/// the text code gets.
fn non_text_bytes(result: &CallToolResult) -> usize {
    result
        .content
        .iter()
        .filter(|block| !matches!(block, ContentBlock::Text(_)))
        .map(|block| serde_json::to_vec(block).map(|v| v.len()).unwrap_or(0))
        .sum()
}
