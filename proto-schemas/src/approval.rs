//! A person's approval of one call, and the cell held while it waits
//! ([`subjects::approval`], [`subjects::cell_hold`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ConnectAsk;

// The items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// The bridge asks the person behind a client session whether one tool
/// call may go out (the policy says `approve`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    /// The client session whose code made the call.
    pub session: String,
    /// The run making the call: the frontend asks on the MCP request that
    /// runs this cell.
    pub cell_id: String,
    /// The wrapped server's name.
    pub server: String,
    /// The tool as the server lists it.
    pub tool: String,
    /// A readable summary of the arguments (cut, never more than a few
    /// hundred characters).
    pub arguments: String,
    /// The policy rule that asks for approval (a JSON path such as
    /// `/tools/delete_file`).
    pub rule: String,
    /// How long the person has to answer, in milliseconds.
    pub timeout_ms: u64,
    /// Set when the rule names approvers: the question waits in the web
    /// console, and the frontend tells its client where (a URL-mode
    /// elicitation, else an `approval_asked` log message). Unless
    /// [`ConsoleAsk::ask_client`] the frontend answers at once with
    /// [`ApprovalReply::Unavailable`], which the bridge ignores: the
    /// decision comes from the console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<ConsoleAsk>,
    /// Set when the call waits for the identity to connect its own account
    /// at [`ConnectAsk::server`], not for an approval ([`ConnectAsk`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<ConnectAsk>,
}

/// Where a question of a rule with approvers waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleAsk {
    /// The question's id in the console (`/console/approvals/<id>`).
    pub id: String,
    /// Who may decide, as the rule names them (`alice`, `group:security`).
    pub approvers: Vec<String>,
    /// The client is asked too (the rule's `ask_client`): its answer
    /// decides as the console's would.
    pub ask_client: bool,
}

/// The bridge holds (`hold: true`) or releases one cell while a call of it
/// waits for a person, on [`subjects::cell_hold`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellHold {
    /// Which call holds it (one cell may have several waiting at once; the
    /// container runs again when none does).
    pub call_index: u32,
    /// Hold (and renew) or release.
    pub hold: bool,
    /// Send back the cell's code ([`CellHeld::code`]): the first hold of a
    /// call asked about in the web console, whose approvers see it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub code: bool,
}

/// The runner's answer to a [`CellHold`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellHeld {
    /// The container is paused now.
    pub paused: bool,
    /// How long the cell has been held in all, in milliseconds (time that
    /// does not count against its deadline).
    pub held_ms: u64,
    /// Set when the cell may not be held longer (it has been held for its
    /// whole allowance): from now on its waits count against its deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The cell's code, when [`CellHold::code`] asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// The person's answer to an [`ApprovalRequest`]: only `approved` lets the
/// call go out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum ApprovalReply {
    /// The person accepted the call.
    Approved,
    /// The person declined it.
    Declined,
    /// The person dismissed the question without choosing.
    Cancelled,
    /// No answer came in time.
    TimedOut,
    /// The person could not be asked.
    Unavailable {
        /// Why (e.g. the client does not support elicitation).
        reason: String,
    },
}
