//! Tool calls: a call from code and a client's direct call, their replies,
//! and a client's cancel ([`subjects::TOOL_CALL`], [`subjects::TOOL_DIRECT`],
//! [`subjects::CANCEL`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ErrorKind;
// The other items the doc comments link to.
#[cfg(doc)]
use crate::*;

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
    /// The Python name of the tool; for another [`Op`], its target (a
    /// resource's URI, empty for a list).
    pub tool: String,
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
}

/// What a call asks of a wrapped server: a tool call (the default), or one
/// of MCP's other requests that carry data to a server. Each passes the same
/// checks as a tool call, in the same order (see the bridge's `check.rs`).
///
/// For every op but [`Op::Tool`], a call's `tool` holds its target and its
/// `arguments` the request's own parameters:
///
/// | op | target | arguments |
/// | --- | --- | --- |
/// | `read_resource`, `subscribe`, `unsubscribe` | the resource's URI | `{}` |
/// | `list_resources`, `list_templates` | empty | `{}` |
/// | `get_prompt` | the prompt's name as offered | the prompt's arguments (strings) |
/// | `complete` | empty | the `completion/complete` parameters (`ref`, `argument`, `context`) |
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `tools/call`.
    #[default]
    Tool,
    /// `resources/read`.
    ReadResource,
    /// `resources/list`, every server's (code only: a client lists from the
    /// catalog).
    ListResources,
    /// `resources/templates/list`, every server's (code only).
    ListTemplates,
    /// `resources/subscribe`.
    Subscribe,
    /// `resources/unsubscribe`.
    Unsubscribe,
    /// `prompts/get`.
    GetPrompt,
    /// `completion/complete`.
    Complete,
}

impl Op {
    /// True for a tool call (the op a call has when it names none).
    pub fn is_tool(&self) -> bool {
        *self == Op::Tool
    }

    /// The MCP method it stands for.
    pub fn method(self) -> &'static str {
        match self {
            Op::Tool => "tools/call",
            Op::ReadResource => "resources/read",
            Op::ListResources => "resources/list",
            Op::ListTemplates => "resources/templates/list",
            Op::Subscribe => "resources/subscribe",
            Op::Unsubscribe => "resources/unsubscribe",
            Op::GetPrompt => "prompts/get",
            Op::Complete => "completion/complete",
        }
    }
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
    /// The tool's Python name (the name `tools/list` offered it under);
    /// for another [`Op`], its target (see [`Op`]).
    pub tool: String,
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
