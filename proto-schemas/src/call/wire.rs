//! The calls as they travel: what a [`crate::ToolCall`] or a
//! [`crate::DirectCall`] names is a field of its own for each kind of
//! target (`tool`, `uri`, `prompt`, `task`) beside its `op`; reading a message
//! checks that it has the one its op needs and no other. These types are
//! the messages' JSON Schemas.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::target::{Named, TargetError};
use super::{ClientLink, Op, Retry};
// The other items the doc comments link to.
#[cfg(doc)]
use crate::{RunCell, subjects};

/// One tool call from the code, on its way to the bridge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The session whose state the call counts in (the cell's
    /// [`RunCell::session`]).
    pub session: String,
    /// Who is asked when the call needs approval (the cell's
    /// [`RunCell::asker`]); absent: `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asker: Option<String>,
    /// Who the client is, when the frontend authenticates clients (the
    /// cell's [`RunCell::identity`]): named in the call's audit record and
    /// counted by `"scope": "identity"` limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The run making the call.
    pub cell_id: String,
    /// 1 for the run's first call, counting every call the run sent.
    pub call_index: u32,
    /// A tool call's tool: its Python name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For a read, a subscription or its end: the resource's URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// For `get_prompt`: the prompt's name as offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// For `get_task`, `update_task`, `cancel_task`: the task's id, as its
    /// server gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The arguments exactly as the code sent them (checked by the bridge).
    pub arguments: serde_json::Value,
    /// What the call asks of the server: a tool call when absent.
    #[serde(default, skip_serializing_if = "Op::is_tool")]
    pub op: Op,
    /// What the cell's MCP client can answer and wants to hear (the cell's
    /// [`RunCell::link`]): a wrapped server's questions during the call
    /// reach it through [`subjects::client`] of the asker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<ClientLink>,
    /// A file in of the cell, read before its code starts (issue 42):
    /// answered as one file's bytes, held to the files-in limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub file_in: bool,
}

/// One tool call a client made directly (`--expose-tools`), on its way
/// from the frontend to the bridge. The bridge checks it with the same code,
/// in the same order, as a [`ToolCall`] from a cell; only the budget
/// differs: the session's direct calls, not a run's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectCall {
    /// The session whose state the call counts in: the client session, or
    /// for a stateless client its identity's scope.
    pub session: String,
    /// Who is asked when the call needs approval; absent: `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asker: Option<String>,
    /// Who the client is, when the frontend authenticates clients: named
    /// in the call's audit record and counted by `"scope": "identity"`
    /// limits, as for a call from code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// This call's id: an approval question about it names it (where a
    /// cell's names the cell), and its audit record carries it as the cell.
    pub call_id: String,
    /// 1 for the session's first direct call, counting every one it made.
    pub call_index: u32,
    /// The direct calls the session may make (`--max-direct-calls`);
    /// absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u32>,
    /// A tool call's tool: the Python name `tools/list` offered it under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For a read, a subscription or its end: the resource's URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// For `get_prompt`: the prompt's name as offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// For `get_task`, `update_task`, `cancel_task`: the task's id, as its
    /// server gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The arguments exactly as the client sent them (checked by the bridge).
    pub arguments: serde_json::Value,
    /// What the client asks of the server: a tool call when absent.
    #[serde(default, skip_serializing_if = "Op::is_tool")]
    pub op: Op,
    /// What the client can answer and wants to hear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<ClientLink>,
    /// A stateless client's retried request, answering the input-required
    /// result the wrapped server itself returned: the server's
    /// `requestState` and the client's `inputResponses`, passed back to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

impl From<crate::ToolCall> for ToolCall {
    fn from(call: crate::ToolCall) -> Self {
        let crate::ToolCall { session, asker, identity, cell_id, call_index, target, arguments, link, file_in } = call;
        let Named { op, tool, uri, prompt, task } = target.into();
        ToolCall {
            session,
            asker,
            identity,
            cell_id,
            call_index,
            tool,
            uri,
            prompt,
            task,
            arguments,
            op,
            link,
            file_in,
        }
    }
}

impl TryFrom<ToolCall> for crate::ToolCall {
    type Error = TargetError;

    fn try_from(call: ToolCall) -> Result<Self, TargetError> {
        let ToolCall {
            session,
            asker,
            identity,
            cell_id,
            call_index,
            tool,
            uri,
            prompt,
            task,
            arguments,
            op,
            link,
            file_in,
        } = call;
        let target = Named { op, tool, uri, prompt, task }.try_into()?;
        Ok(crate::ToolCall { session, asker, identity, cell_id, call_index, target, arguments, link, file_in })
    }
}

impl From<crate::DirectCall> for DirectCall {
    fn from(call: crate::DirectCall) -> Self {
        let crate::DirectCall {
            session,
            asker,
            identity,
            call_id,
            call_index,
            max_calls,
            target,
            arguments,
            link,
            retry,
        } = call;
        let Named { op, tool, uri, prompt, task } = target.into();
        DirectCall {
            session,
            asker,
            identity,
            call_id,
            call_index,
            max_calls,
            tool,
            uri,
            prompt,
            task,
            arguments,
            op,
            link,
            retry,
        }
    }
}

impl TryFrom<DirectCall> for crate::DirectCall {
    type Error = TargetError;

    fn try_from(call: DirectCall) -> Result<Self, TargetError> {
        let DirectCall {
            session,
            asker,
            identity,
            call_id,
            call_index,
            max_calls,
            tool,
            uri,
            prompt,
            task,
            arguments,
            op,
            link,
            retry,
        } = call;
        let target = Named { op, tool, uri, prompt, task }.try_into()?;
        Ok(crate::DirectCall {
            session,
            asker,
            identity,
            call_id,
            call_index,
            max_calls,
            target,
            arguments,
            link,
            retry,
        })
    }
}
