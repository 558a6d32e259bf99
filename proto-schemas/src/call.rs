//! Tool calls: a call from code and a client's direct call, their replies,
//! and a client's cancel ([`subjects::TOOL_CALL`], [`subjects::TOOL_DIRECT`],
//! [`subjects::CANCEL`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod target;
pub mod wire;

use crate::ErrorKind;
pub use target::{Op, Target, TargetError};
// The other items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// One tool call from the code, on its way to the bridge.
///
/// What it names is its [`Target`]; on the wire ([`wire::ToolCall`]) that
/// is a field of its own for each kind (`tool`, `uri`, `prompt`) beside
/// its `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "wire::ToolCall", into = "wire::ToolCall")]
pub struct ToolCall {
    /// The session whose state the call counts in (the cell's
    /// [`RunCell::session`]).
    pub session: String,
    /// Who is asked when the call needs approval (the cell's
    /// [`RunCell::asker`]); absent: `session`.
    pub asker: Option<String>,
    /// Who the client is, when the frontend authenticates clients (the
    /// cell's [`RunCell::identity`]): named in the call's audit record and
    /// counted by `"scope": "identity"` limits.
    pub identity: Option<String>,
    /// The run making the call.
    pub cell_id: String,
    /// 1 for the run's first call, counting every call the run sent.
    pub call_index: u32,
    /// What the call asks of the server and what it names: a tool by its
    /// Python name, a resource by its URI, a prompt, or nothing (a list).
    pub target: Target,
    /// The arguments exactly as the code sent them (checked by the bridge).
    pub arguments: serde_json::Value,
    /// What the cell's MCP client can answer and wants to hear (the cell's
    /// [`RunCell::link`]): a wrapped server's questions during the call
    /// reach it through [`subjects::client`] of the asker.
    pub link: Option<ClientLink>,
    /// A file in of the cell (`run_python`'s `files`, issue 42), read by
    /// the runner before the code starts: the bridge answers it as one
    /// file's bytes (`{"contents": [{"text"|"blob"}]}`), held to the
    /// files-in limit ([`MAX_INPUT_FILE_BYTES`]) instead of the result
    /// limit. Only the runner sets it; code cannot.
    pub file_in: bool,
}

/// What the MCP client behind a call can answer and wants to hear, so that
/// a wrapped server's requests and notifications made while it serves the
/// call reach it (its frontend session object hears them on
/// [`subjects::client`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientLink {
    /// The client answers `sampling/createMessage`.
    #[serde(default)]
    pub sampling: bool,
    /// The client answers `elicitation/create` in form mode.
    #[serde(default)]
    pub elicitation: bool,
    /// The client answers `elicitation/create` in URL mode.
    #[serde(default)]
    pub elicitation_url: bool,
    /// The client answers `roots/list`.
    #[serde(default)]
    pub roots: bool,
    /// The client says when its roots change (`roots.listChanged`): its
    /// own sessions declare so to the servers, and the gateway passes each
    /// change on ([`subjects::ROOTS_CHANGED`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub roots_list_changed: bool,
    /// The level of log notifications the client chose (an MCP level name:
    /// `debug` ... `emergency`); absent: it wants none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// The client asked for progress notifications of this request (it
    /// gave a progress token).
    #[serde(default)]
    pub progress: bool,
    /// A stateless (2026-07-28) client: a wrapped server's questions reach
    /// it as an input-required result of its request.
    #[serde(default)]
    pub stateless: bool,
    /// A client of the tasks extension (SEP-2663) calling a tool directly:
    /// the wrapped server may answer with a task (`resultType: "task"`),
    /// which goes back to the client as it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tasks: bool,
}

impl ClientLink {
    /// True when the client can be asked something or listens to a
    /// server's log: a wrapped server's requests and notifications cannot
    /// be told apart on a connection it shares with other clients, so such
    /// a client gets connections of its own to the servers it uses.
    pub fn wants_own_session(&self) -> bool {
        self.can_be_asked() || self.log_level.is_some()
    }

    /// True when a wrapped server may ask the client something during a
    /// call (sampling, elicitation, roots).
    pub fn can_be_asked(&self) -> bool {
        self.sampling || self.elicitation || self.elicitation_url || self.roots
    }
}

/// The bridge's answer to a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolReply {
    /// The server answered: structured content as JSON, else the text.
    Ok {
        /// The result string handed to the code.
        value: String,
    },
    /// The server answered with blocks besides text (images, audio,
    /// embedded resources, resource links): the string as for `ok` (each
    /// such block named in it), and the blocks as the server sent them,
    /// which the code gets as objects with their bytes and MIME type.
    Content {
        /// The result string handed to the code.
        value: String,
        /// The MCP content blocks other than text.
        blocks: Vec<serde_json::Value>,
    },
    /// The bridge refused the call, or the tool reported a failure.
    Refused {
        /// Why, at most 500 characters; raised as `ToolError` in the code.
        message: String,
    },
    /// A fault on the host side; only its kind reaches the code.
    Fault {
        /// The fault's kind; its name ([`ErrorKind::as_str`], an exception
        /// type name such as `McpError`) is all the code sees, never details.
        kind: ErrorKind,
    },
}

/// One tool call a client made directly (`--expose-tools`), on its way
/// from the frontend to the bridge. The bridge checks it with the same code,
/// in the same order, as a [`ToolCall`] from a cell; only the budget
/// differs: the session's direct calls, not a run's.
///
/// What it names is its [`Target`]; on the wire ([`wire::DirectCall`])
/// that is a field of its own for each kind (`tool`, `uri`, `prompt`)
/// beside its `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "wire::DirectCall", into = "wire::DirectCall")]
pub struct DirectCall {
    /// The session whose state the call counts in: the client session, or
    /// for a stateless client its identity's scope.
    pub session: String,
    /// Who is asked when the call needs approval; absent: `session`.
    pub asker: Option<String>,
    /// Who the client is, when the frontend authenticates clients: named
    /// in the call's audit record and counted by `"scope": "identity"`
    /// limits, as for a call from code.
    pub identity: Option<String>,
    /// This call's id: an approval question about it names it (where a
    /// cell's names the cell), and its audit record carries it as the cell.
    pub call_id: String,
    /// 1 for the session's first direct call, counting every one it made.
    pub call_index: u32,
    /// The direct calls the session may make (`--max-direct-calls`);
    /// absent: no limit.
    pub max_calls: Option<u32>,
    /// What the client asks of the server and what it names: a tool by the
    /// Python name `tools/list` offered it under, a resource by its URI, a
    /// prompt by its name as offered, or nothing.
    pub target: Target,
    /// The arguments exactly as the client sent them (checked by the bridge).
    pub arguments: serde_json::Value,
    /// What the client can answer and wants to hear.
    pub link: Option<ClientLink>,
    /// A stateless client's retried request, answering the input-required
    /// result the wrapped server itself returned: the server's
    /// `requestState` and the client's `inputResponses`, passed back to it.
    pub retry: Option<Retry>,
}

/// What a stateless client sends back with a retried request (MCP
/// 2026-07-28): the opaque state the server gave it, and its answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// The server's `requestState`, as the client echoes it (absent when
    /// the server gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// The client's `inputResponses` (an object keyed as the server asked).
    #[serde(default)]
    pub input_responses: serde_json::Value,
}

/// The bridge's answer to a [`DirectCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum DirectReply {
    /// The server's result as it sent it: an MCP `CallToolResult` (content
    /// blocks, structured content), or for another [`Op`] its result
    /// (`ReadResourceResult`, `GetPromptResult`, `CompleteResult`, an empty
    /// object for a subscription); for a stateless client of a server that
    /// speaks the stateless revision too, possibly the server's own
    /// input-required result (`resultType: "input_required"`).
    Ok {
        /// The result, as JSON.
        result: serde_json::Value,
    },
    /// The bridge refused the call, or the tool reported a failure: the
    /// message a call from code would get.
    Refused {
        /// Why, at most 500 characters.
        message: String,
        /// For a request other than a tool call that its server refused
        /// (a resource not found, a prompt's bad arguments): the server's
        /// JSON-RPC error code, which the client then gets as its error's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// With `code`: the error's `data`, as the server gave it (for a
        /// missing capability, which one: `requiredCapabilities`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<serde_json::Value>,
    },
    /// A fault on the host side; only its kind reaches the client.
    Fault {
        /// A type name, never details.
        kind: ErrorKind,
    },
}

/// The client cancelled the request making a call: the bridge running it
/// cancels it at its server (`notifications/cancelled`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelCall {
    /// The call (a direct call's id).
    pub call_id: String,
    /// The client's reason, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether this bridge was running the cancelled call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallCancelled {
    /// It was, and its server was told.
    pub found: bool,
}
