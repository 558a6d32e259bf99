//! The web console's questions to the bridges, and the runners' status they
//! show ([`subjects::APPROVALS`], [`subjects::RUNNER_STATUS`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// Who looks at the web console: an authenticated identity and its groups,
/// as the frontend read them from the token or the OAuth claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Viewer {
    /// The identity's name.
    pub name: String,
    /// Its groups.
    pub groups: Vec<String>,
}

/// The web console asks the bridges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConsoleRequest {
    /// The calls waiting that the viewer may decide, and the last
    /// decisions on them: [`ConsoleReply::Board`].
    Board {
        /// Who asks.
        viewer: Viewer,
    },
    /// Approve or decline one waiting call: [`ConsoleReply::Decided`], or
    /// a bad request naming why the viewer may not.
    Decide {
        /// Who decides.
        viewer: Viewer,
        /// The question ([`ConsoleAsk::id`]).
        id: String,
        /// Approve (else decline).
        approve: bool,
        /// The decider's note (the code's refusal quotes it).
        note: String,
    },
    /// The audit log's last records and the chain's state:
    /// [`ConsoleReply::Audit`].
    Audit {
        /// How many records.
        lines: u32,
    },
    /// The sandbox-runners heard from lately and their slots:
    /// [`ConsoleReply::Runners`].
    Runners,
    /// Which of these client sessions are tainted by private data:
    /// [`ConsoleReply::Sessions`].
    Sessions {
        /// The sessions (at most 500 are looked at).
        ids: Vec<String>,
    },
    /// Each bridge's last config reload (SIGHUP), when it had one:
    /// [`ConsoleReply::Reloads`].
    Reloads,
}

/// A bridge's last config reload, as the operations view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReloadStatus {
    /// The bridge (its host and process id).
    pub bridge: String,
    /// When it reloaded, in Unix milliseconds.
    pub at_ms: u64,
    /// `ok`, `invalid`, `refused` or `failed` (as
    /// `codemode_config_reloads_total{result}` counts them).
    pub result: String,
    /// What was reread (the file).
    pub source: String,
    /// Why the running config stayed, for a reload that did not apply
    /// (file, server and key, as the log says it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A sandbox-runner's slots, as it reports them on
/// [`subjects::RUNNER_STATUS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerStatus {
    /// The runner's id.
    pub id: String,
    /// Cells it runs at once.
    pub capacity: u32,
    /// Slots free now.
    pub free: u32,
    /// Started containers waiting in its warm pool.
    pub warm: u32,
    /// When the bridge heard it, in Unix milliseconds (set by the bridge).
    #[serde(default)]
    pub at_ms: u64,
    /// The Python packages its sandbox image holds beyond the standard
    /// library (`name==version`, sorted; empty for the default image).
    /// `None`: not known (its image could not be inspected, or an older
    /// runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<Vec<String>>,
}

/// The bridge's acknowledgement of a [`RunnerStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusNoted {}

/// One call waiting for a team's approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitingCall {
    /// The question's id.
    pub id: String,
    /// The client session whose code made the call.
    pub session: String,
    /// The identity of that session, when clients authenticate.
    #[serde(default)]
    pub identity: Option<String>,
    /// The cell.
    pub cell_id: String,
    /// The wrapped server.
    pub server: String,
    /// The tool, as the server lists it.
    pub tool: String,
    /// The summary of the arguments the question shows.
    pub arguments: String,
    /// The arguments themselves, only when the rule says `record_args`.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// The rule asking (a JSON path of the policy).
    pub rule: String,
    /// The rule's reason, if it gives one.
    #[serde(default)]
    pub reason: Option<String>,
    /// Who may decide, as the rule names them.
    pub approvers: Vec<String>,
    /// When the call was asked about, in Unix milliseconds.
    pub asked_ms: u64,
    /// How long it may wait, in milliseconds.
    pub timeout_ms: u64,
    /// SHA-256 of the question as asked (what a decision's audit record
    /// names).
    pub question_sha256: String,
    /// The code of the cell that made the call, as its sandbox-runner holds
    /// it (cut to [`CODE_SHOWN`] characters), so the approvers see what
    /// the call is part of; `None` for a client's direct call, or when the
    /// runner did not answer in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Whether anyone still waits for the answer, as the bridge found when
    /// it read the board: `true` while the cell that asked runs (its
    /// request is open: a request that goes stops its cell), `false` once
    /// it ended or its runner is gone (the question is being withdrawn and
    /// cannot be approved); `None` when not known (a direct call, or the
    /// runner did not answer in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub still_waited: Option<bool>,
}

/// How many characters of a cell's code a waiting call keeps
/// ([`WaitingCall::code`]).
pub const CODE_SHOWN: usize = 8_000;

/// How a question ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    /// The question.
    pub id: String,
    /// The call's server and tool.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The identity whose code asked.
    #[serde(default)]
    pub identity: Option<String>,
    /// `approved`, `declined`, `timed_out` or `withdrawn`.
    pub outcome: String,
    /// Who decided (an identity; `client` for the session's own client);
    /// `None` when nobody did.
    #[serde(default)]
    pub by: Option<String>,
    /// The decider's note, or why the question ended.
    pub note: String,
    /// When, in Unix milliseconds.
    pub at_ms: u64,
    /// SHA-256 of the question decided.
    pub question_sha256: String,
    /// Who could decide it, as the rule named them.
    #[serde(default)]
    pub approvers: Vec<String>,
}

/// The bridges' answer to a [`ConsoleRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConsoleReply {
    /// What waits for the viewer, and the last decisions (newest first).
    Board {
        /// The waiting calls the viewer may decide, oldest first.
        waiting: Vec<WaitingCall>,
        /// How many more wait for other approvers.
        others: u32,
        /// The last decisions on questions the viewer could decide.
        recent: Vec<Decision>,
    },
    /// The decision was taken.
    Decided(Decision),
    /// The runners heard from in the last 15 s.
    Runners {
        /// By id.
        runners: Vec<RunnerStatus>,
    },
    /// The sessions asked about that are tainted.
    Sessions {
        /// Their ids.
        tainted: Vec<String>,
    },
    /// The audit log's tail.
    Audit {
        /// The last records, as their JSON lines, oldest first.
        records: Vec<String>,
        /// The chain's state: `verified (N records)`, `broken at ...`, or
        /// why it cannot be read.
        chain: String,
    },
    /// The bridges' last config reloads (bridges that never reloaded are
    /// not there), by bridge.
    Reloads {
        /// One per bridge.
        reloads: Vec<ReloadStatus>,
    },
}
