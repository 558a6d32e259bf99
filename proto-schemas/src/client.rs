//! What a wrapped server sends the MCP client of one frontend session, the
//! client's answer ([`subjects::client`]), the end of a session
//! ([`subjects::SESSION_END`]) and a change of its client's roots
//! ([`subjects::ROOTS_CHANGED`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// A wrapped server's request or notification for the MCP client of one
/// frontend session object, sent by the bridge on [`subjects::client`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToClient {
    /// The server asks the client something while it serves a call; the
    /// answer ([`FromClient::Answered`]) goes back to the server.
    Ask(ServerAsk),
    /// The server tells the client something; [`FromClient::Noted`].
    Note(ServerNote),
    /// The server cancelled a question it asked (`notifications/cancelled`):
    /// the frontend cancels it at the client; [`FromClient::Noted`].
    Withdraw(AskWithdrawn),
}

/// A question a wrapped server no longer wants answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskWithdrawn {
    /// The question's [`ServerAsk::id`].
    pub id: String,
    /// The server's reason, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A question of a wrapped server to the client (already checked by the
/// bridge: the server's policy allows it, and the private-data rule lets
/// the answer reach that server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerAsk {
    /// The question's id, by which the bridge may withdraw it
    /// ([`ToClient::Withdraw`]). Absent from an older bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The call it was asked during (a cell's id or a direct call's): the
    /// frontend asks on that call's MCP request. Absent: the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The wrapped server asking (named to the person).
    pub server: String,
    /// What it asks.
    pub ask: AskKind,
    /// The request's parameters as the server sent them
    /// (`CreateMessageRequestParams`, `ElicitRequestParams`; `{}` for roots).
    pub params: serde_json::Value,
    /// How long the client has to answer, in milliseconds.
    pub timeout_ms: u64,
}

/// What a wrapped server asks of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AskKind {
    /// `sampling/createMessage`: the client's model writes a message.
    Sampling,
    /// `elicitation/create`: the person answers a form (or opens a URL).
    Elicitation,
    /// `roots/list`: the client's roots.
    Roots,
}

impl AskKind {
    /// The MCP method.
    pub fn method(self) -> &'static str {
        match self {
            AskKind::Sampling => "sampling/createMessage",
            AskKind::Elicitation => "elicitation/create",
            AskKind::Roots => "roots/list",
        }
    }
}

/// A wrapped server's notification for the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerNote {
    /// The call it came during (its progress goes to that call's request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The wrapped server.
    pub server: String,
    /// What it says.
    pub note: Note,
}

/// What a wrapped server tells the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Note {
    /// `notifications/progress` of the call (the frontend puts the
    /// client's own progress token on it).
    Progress {
        /// Progress so far.
        progress: f64,
        /// The total, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        /// A message, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// `notifications/message`: a log message.
    Log {
        /// Its level (an MCP level name).
        level: String,
        /// The logger, if named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        /// The data.
        data: serde_json::Value,
    },
    /// `notifications/resources/updated` of a resource the client
    /// subscribed to.
    ResourceUpdated {
        /// The resource's URI.
        uri: String,
    },
    /// `notifications/tasks`: the status of a task the server made of the
    /// client's own call (tasks extension, SEP-2663), sent only to the
    /// client whose call created it.
    TaskStatus {
        /// The task as the server sent it (a `DetailedTask`: its id,
        /// status and, by status, `inputRequests`, `result` or `error`).
        task: serde_json::Value,
    },
}

/// The frontend's answer to a [`ToClient`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromClient {
    /// The client's result, for the server (`CreateMessageResult`,
    /// `ElicitResult`, `ListRootsResult`).
    Answered {
        /// The result as JSON.
        result: serde_json::Value,
    },
    /// The client could not or would not answer; the server gets this as
    /// its request's error.
    Refused {
        /// Why.
        message: String,
        /// The JSON-RPC error code the server gets (the client's own, or
        /// the one MCP prescribes for the case); absent: invalid request
        /// (`-32600`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
    },
    /// A notification was passed on (or dropped: the client did not want
    /// it).
    Noted,
}

/// A client session has ended (its client went away, or its MCP session
/// closed): the bridge forgets the session's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionEnd {
    /// The session.
    pub session: String,
}

/// What the bridge forgot of an ended session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionEnded {
    /// Entries removed from the session-state store (its private-data taint,
    /// its `grant` rate-limit counters).
    pub removed: u32,
}

/// The client of a session said its roots changed
/// (`notifications/roots/list_changed`): each bridge passes it on to the
/// servers of that client's own sessions, which ask `roots/list` again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RootsChanged {
    /// The session.
    pub session: String,
}

/// How many of the client's own sessions with servers this bridge told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RootsTold {
    /// Own sessions told (servers of other bridge replicas are counted
    /// there).
    pub told: u32,
}
