//! The contract between the code-mode services.
//!
//! `mcp-frontend`, `bridge` and `sandbox-runner` exchange only the messages
//! defined here, as JSON, by request/reply on the [`subjects`] below. Every
//! message derives a JSON Schema; the committed copies in `schemas/` are
//! checked by a golden test, so any change to the wire is a visible diff.
//!
//! Replies travel inside a [`Reply`] envelope so that a service can answer
//! any request with a typed [`WireError`] (bad request, no capacity, ...)
//! instead of dropping it. Every kind of failure that crosses the bus, a
//! service's [`WireError`] or a host fault in a [`ToolReply::Fault`], is one
//! [`ErrorKind`]: consumers match on it, never on text.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The cargo-fuzz targets' entry points: only with the `fuzzing` feature
// (the fuzz crate enables it) and in this crate's tests.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

/// Named, versioned subjects. A new incompatible message gets a new version.
pub mod subjects {
    /// frontend -> bridge: [`crate::CatalogRequest`] -> [`crate::Catalog`].
    pub const CATALOG_GET: &str = "codemode.v1.catalog.get";
    /// sandbox-runner -> bridge: [`crate::ToolCall`] -> [`crate::ToolReply`].
    pub const TOOL_CALL: &str = "codemode.v1.tool.call";
    /// frontend -> bridge: [`crate::DirectCall`] -> [`crate::DirectReply`]:
    /// a client called a wrapped tool directly (`--expose-tools`), not
    /// from code. The bridge checks it as it checks a [`TOOL_CALL`].
    pub const TOOL_DIRECT: &str = "codemode.v1.tool.direct";
    /// frontend -> sandbox-runner: [`crate::RunCell`] -> [`crate::CellReport`].
    pub const CELL_RUN: &str = "codemode.v1.cell.run";
    /// bridge -> the frontend of one client session:
    /// [`crate::ApprovalRequest`] -> [`crate::ApprovalReply`]. The subject
    /// ends with the session id (see [`approval`]); only that session's
    /// frontend listens on it.
    pub const APPROVAL: &str = "codemode.v1.approval";
    /// frontend -> bridge: [`crate::SessionEnd`] -> [`crate::SessionEnded`]:
    /// a client session is over, its state may go.
    pub const SESSION_END: &str = "codemode.v1.session.end";
    /// frontend -> one sandbox-runner: [`crate::KeptRequest`] ->
    /// [`crate::KeptReply`]. The subject ends with the runner's id (see
    /// [`runner`]); the later cells of a kept session go to the runner
    /// holding its container.
    pub const RUNNER: &str = "codemode.v1.runner";
    /// frontend -> the sandbox-runner running one cell:
    /// [`crate::LeaseCheck`] -> [`crate::LeaseHeld`]. A runner answers on it
    /// from taking a cell until it replies, so a frontend that hears no
    /// answer for a few seconds knows the runner died (see [`cell_lease`]).
    pub const CELL_LEASE: &str = "codemode.v1.cell.lease";
    /// bridge -> the frontend session object a wrapped server's request
    /// or notification is for: [`crate::ToClient`] -> [`crate::FromClient`].
    /// The subject ends with that object's id (see [`client`]): the
    /// client session, or a stateless request's own object (its `asker`).
    pub const CLIENT: &str = "codemode.v1.client";
    /// frontend -> every bridge: [`crate::CancelCall`] ->
    /// [`crate::CallCancelled`]: the client cancelled a request, so the
    /// bridge running its call cancels it at the wrapped server. Each
    /// bridge serves it in a queue group of its own, so every replica hears
    /// it.
    pub const CANCEL: &str = "codemode.v1.cancel";
    /// bridge -> the sandbox-runner running one cell: [`crate::CellHold`]
    /// -> [`crate::CellHeld`]. While one of the cell's calls waits for a
    /// person the bridge holds the cell (its container paused, its deadline
    /// stopped) and renews the hold every few seconds; the runner answers
    /// from taking the cell until it ends, so no answer means the cell is
    /// gone (see [`cell_hold`]).
    pub const CELL_HOLD: &str = "codemode.v1.cell.hold";
    /// frontend (its web console) -> bridge: [`crate::ConsoleRequest`] ->
    /// [`crate::ConsoleReply`]: the calls waiting for a team's approval,
    /// the decisions, the audit log's tail.
    pub const APPROVALS: &str = "codemode.v1.approvals";
    /// sandbox-runner -> bridge: [`crate::RunnerStatus`] ->
    /// [`crate::StatusNoted`], every few seconds: the runner's slots, for
    /// the web console's operations view.
    pub const RUNNER_STATUS: &str = "codemode.v1.runners.status";
    /// Every subject, for documentation and permission checks (the approval,
    /// client, runner, lease and hold subjects are prefixes: one subject per
    /// session, runner or cell below each).
    pub const ALL: [&str; 13] = [
        CATALOG_GET,
        TOOL_CALL,
        TOOL_DIRECT,
        CELL_RUN,
        APPROVAL,
        SESSION_END,
        RUNNER,
        CELL_LEASE,
        CLIENT,
        CANCEL,
        CELL_HOLD,
        APPROVALS,
        RUNNER_STATUS,
    ];

    /// The hold subject of one cell, or `None` when the cell id is not one
    /// subject token (such a cell is never held: its waits count against
    /// its deadline).
    pub fn cell_hold(cell_id: &str) -> Option<String> {
        is_session_id(cell_id).then(|| format!("{CELL_HOLD}.{cell_id}"))
    }

    /// The subject on which the frontend session object `session` hears of
    /// its wrapped servers' requests and notifications, or `None` when the
    /// id is no session's ([`is_session_id`]).
    pub fn client(session: &str) -> Option<String> {
        is_session_id(session).then(|| format!("{CLIENT}.{session}"))
    }

    /// The subject of one sandbox-runner, or `None` when `id` cannot be one
    /// subject token (the same rule as [`is_session_id`]).
    pub fn runner(id: &str) -> Option<String> {
        is_session_id(id).then(|| format!("{RUNNER}.{id}"))
    }

    /// The lease subject of one cell, or `None` when the cell id is not one
    /// subject token (such a cell runs without a lease: its frontend waits
    /// for the deadline).
    pub fn cell_lease(cell_id: &str) -> Option<String> {
        is_session_id(cell_id).then(|| format!("{CELL_LEASE}.{cell_id}"))
    }

    /// The approval subject of one client session, or `None` when the
    /// id is no session's ([`is_session_id`]): such a session can never be
    /// asked.
    pub fn approval(session: &str) -> Option<String> {
        is_session_id(session).then(|| format!("{APPROVAL}.{session}"))
    }

    /// The prefix of every stateless scope id ([`stateless_scope`]).
    pub const STATELESS_SCOPE_PREFIX: &str = "stateless-";

    /// The session id under which the bridge keeps the state of one
    /// identity's stateless (MCP 2026-07-28) calls: its private-data taint,
    /// its `grant` counters and its direct-call count. Every frontend
    /// replica derives the same id for the same identity, so that state is
    /// one for the whole deployment; `None` (no authentication) is the one
    /// identity `anonymous`. A hash of the name, so the id is always one
    /// subject token of fixed length whatever the name holds, and no name
    /// can be chosen to give another identity's id.
    pub fn stateless_scope(identity: Option<&str>) -> String {
        use sha2::{Digest, Sha256};
        match identity {
            None => format!("{STATELESS_SCOPE_PREFIX}anonymous"),
            Some(name) => {
                let mut hash = Sha256::new();
                hash.update(b"code-mode stateless scope v1\0");
                hash.update(name.as_bytes());
                let digest = hash.finalize();
                let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
                format!("{STATELESS_SCOPE_PREFIX}{hex}")
            }
        }
    }

    /// True when `session` is an identity's stateless scope
    /// ([`stateless_scope`]) rather than one client session.
    pub fn is_stateless_scope(session: &str) -> bool {
        session.starts_with(STATELESS_SCOPE_PREFIX)
    }

    /// True when `session` can be a client session's id: one NATS subject
    /// token of at most 128 bytes (not empty, no dot, wildcard or white
    /// space), as the frontend's UUIDs are.
    pub fn is_session_id(session: &str) -> bool {
        !session.is_empty()
            && session.len() <= 128
            && !session.chars().any(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace() || c.is_control())
    }
}

/// Queue groups: each request reaches one member of the group.
pub mod queue_groups {
    /// All bridge replicas.
    pub const BRIDGE: &str = "bridge";
    /// All sandbox-runners.
    pub const SANDBOX_RUNNER: &str = "sandbox-runner";
}

/// A request for the tool catalog of the bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogRequest {
    /// The client session asking (for per-session verdicts in later versions).
    pub session: String,
    /// The [`Catalog::fingerprint`] of the catalog the asker holds: when it
    /// is still current the reply is [`Catalog::unchanged`], without tools.
    #[serde(default)]
    pub known: Option<String>,
    /// Send each tool's MCP definition too ([`ToolEntry::direct`]): the
    /// asker offers the wrapped tools directly (`--expose-tools`).
    #[serde(default)]
    pub direct: bool,
}

/// Every tool the bridge offers to the sandbox, and how to present them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Which catalog this is: 1 at the bridge's start, higher after each
    /// refresh (a wrapped server's tool list changed). Versions of different
    /// bridge replicas are not comparable; compare the tools.
    pub version: u64,
    /// The tools, in the order the servers listed them.
    pub tools: Vec<ToolEntry>,
    /// The calls one run may make.
    pub max_calls: u32,
    /// How long one call may take, in milliseconds.
    pub call_timeout_ms: u64,
    /// How long a call that needs approval may wait for the person's answer,
    /// in milliseconds, on top of `call_timeout_ms` (0: no tool needs it).
    #[serde(default)]
    pub approval_timeout_ms: u64,
    /// How long a wrapped server's question (sampling, elicitation, roots)
    /// may wait for the client's answer, in milliseconds: a call whose
    /// client can be asked may take this long on top of `call_timeout_ms`
    /// (0: an older bridge).
    #[serde(default)]
    pub ask_timeout_ms: u64,
    /// SHA-256 (hex) of what this catalog offers: the tools and the limits
    /// above, not the version, so bridge replicas with the same tools agree.
    #[serde(default)]
    pub fingerprint: String,
    /// True when the request's `known` fingerprint is this one: `tools` is
    /// then empty and the asker keeps what it holds.
    #[serde(default)]
    pub unchanged: bool,
    /// Python names of tools a policy denies outright: not offered (no stub,
    /// not in `TOOLS`), but the code may still call one by name, and the
    /// bridge then refuses it with the rule and its reason.
    #[serde(default)]
    pub withheld: Vec<String>,
    /// How long an identity's stateless scope lives without a call, in
    /// milliseconds (`--stateless-idle`): the frontend's description tells
    /// a stateless client how long the private-data rule holds. 0: not
    /// said (an older bridge).
    #[serde(default)]
    pub stateless_idle_ms: u64,
    /// What the wrapped servers offer besides tools, which a client gets in
    /// either mode (and the `run_python` description mentions resources
    /// when some server has them). Absent from an older bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// A fingerprint of what the servers list (each tool's definition,
    /// labels and withheld names), without the result shapes the bridge
    /// learned: a catalog that differs only in learned shapes has the same
    /// one, and a frontend tells its clients nothing of it (their models
    /// keep the description they hold; cells get the new stubs). Empty
    /// from an older bridge.
    #[serde(default)]
    pub listed: String,
    /// The Python packages (`name==version`, sorted) that every live
    /// sandbox-runner's image holds beyond the standard library: the code
    /// may run on any of them, so only what they share is promised. `None`
    /// while no runner has said (or from an older bridge); empty: the
    /// standard library only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<Vec<String>>,
    /// Wrapped servers that cannot be reached now and why, each naming what
    /// fixes it (a remote server waiting for `code-mode login NAME`): their
    /// tools are not in `tools` until then, and the description says so.
    /// Absent when every server is reachable (and from an older bridge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

/// A wrapped server that cannot be called now ([`Catalog::unavailable`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unavailable {
    /// The server's name.
    pub server: String,
    /// Why, and what fixes it (never a secret).
    pub why: String,
}

/// Everything but tools that the wrapped servers offer a client of the
/// gateway (`--expose-tools`): their resources, resource templates and
/// prompts under the names the client sees, and which MCP capabilities the
/// gateway can serve for them. Items a policy denies are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Features {
    /// Resources, in the order the servers listed them.
    #[serde(default)]
    pub resources: Vec<Offered>,
    /// Resource templates.
    #[serde(default)]
    pub templates: Vec<Offered>,
    /// Prompts.
    #[serde(default)]
    pub prompts: Vec<Offered>,
    /// Some server offers resources.
    #[serde(default)]
    pub has_resources: bool,
    /// Some server lets a client subscribe to a resource's updates.
    #[serde(default)]
    pub subscribe: bool,
    /// Some server offers prompts.
    #[serde(default)]
    pub has_prompts: bool,
    /// Some server completes arguments.
    #[serde(default)]
    pub completions: bool,
    /// Some server sends log messages.
    #[serde(default)]
    pub logging: bool,
}

/// One resource, resource template or prompt as a client of the gateway
/// sees it: the server's own definition (`Resource`, `ResourceTemplate`,
/// `Prompt` as JSON), its `name` prefixed with the server's when tools are
/// (a prompt is got by that name; a resource keeps its URI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Offered {
    /// The wrapped server's name, if there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Reading it taints a session under the private-data rule.
    #[serde(default)]
    pub private: bool,
    /// The definition as offered.
    pub definition: serde_json::Value,
}

/// One wrapped tool as the sandbox and the model see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// The Python name the code calls.
    pub name: String,
    /// The name the wrapped server lists.
    pub mcp_name: String,
    /// The wrapped server's name (from the config), if there are several.
    pub server: Option<String>,
    /// A readable Python stub: signature and docstring.
    pub stub: String,
    /// One line: the typed signature ([`Signature::line`]), two spaces,
    /// then the first line of the description.
    pub summary: String,
    /// Its labels as short marks for the names-only description
    /// (`private`, `approval`, `limited`, `denied`, comma-separated); empty
    /// when it has none.
    #[serde(default)]
    pub mark: String,
    /// The text `search_tools` ranks it by.
    #[serde(default)]
    pub search: SearchText,
    /// It may see private data: after a call to it, a session may call only
    /// private tools.
    #[serde(default)]
    pub private: bool,
    /// The tool as a client calling it directly sees it (`--expose-tools`):
    /// present only when the catalog was asked for with
    /// [`CatalogRequest::direct`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<DirectTool>,
    /// Its parameters as the sandbox checks a call's argument names
    /// against them before sending it (misspelt and missing names).
    #[serde(default)]
    pub signature: Signature,
}

/// A tool's parameters, for the sandbox's own checks of a call's argument
/// names (the bridge still validates the arguments against the schema).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// The typed one-line signature with the tool's labels, without its
    /// description: `fs__read_text_file(path: str, head?: int) -> {content:
    /// str}` (the notation the `run_python` description explains).
    #[serde(default)]
    pub line: String,
    /// The declared parameters, in the schema's order.
    #[serde(default)]
    pub params: Vec<Param>,
    /// The schema takes names it does not declare (`additionalProperties`
    /// set to true or to a schema, or `patternProperties`), or declares
    /// no object at all: an undeclared name is then not an error.
    #[serde(default)]
    pub open: bool,
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Its name in the schema.
    pub name: String,
    /// Its type as the stub shows it (`str`, `list[int]`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// The schema requires it.
    #[serde(default)]
    pub required: bool,
}

/// One wrapped tool as `tools/list` offers it to a client that calls it
/// directly: the server's own definition, under the tool's Python name,
/// its policy and private labels leading its description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectTool {
    /// Its title, if the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its labels (`[private]`, `[needs approval]`, `[2 per minute]`), then
    /// the server's description, cut like the stub's.
    pub description: String,
    /// The server's input schema.
    pub input_schema: serde_json::Value,
    /// The server's output schema, if it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// The server's annotations (hints), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

/// The text of one tool that `search_tools` ranks it by, field by field (a
/// word in the name weighs more than one in a parameter's description).
/// Built by the bridge from what the server listed, bounded like the stub.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchText {
    /// The tool's name as its server lists it (without the server prefix).
    #[serde(default)]
    pub name: String,
    /// Its server's name, when its Python name carries it as a prefix.
    #[serde(default)]
    pub server: String,
    /// Its title (`title`, else `annotations.title`), if it has one.
    #[serde(default)]
    pub title: String,
    /// Its description, cut as in the stub.
    #[serde(default)]
    pub description: String,
    /// Its parameters' names, one per line.
    #[serde(default)]
    pub params: String,
    /// Its parameters' own descriptions, one per line.
    #[serde(default)]
    pub param_text: String,
    /// The names and descriptions of the fields of its result (from its
    /// `outputSchema`), one per line.
    #[serde(default)]
    pub output: String,
}

/// What the sandbox gets of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolStub {
    /// The Python name.
    pub name: String,
    /// Its stub, shown by `TOOLS[name]`.
    pub stub: String,
    /// Its one-line summary, which `search_tools` returns with its name.
    #[serde(default)]
    pub summary: String,
    /// The text `search_tools` ranks it by.
    #[serde(default)]
    pub search: SearchText,
    /// Its parameters, for the sandbox's did-you-mean checks.
    #[serde(default)]
    pub signature: Signature,
}

impl From<&ToolEntry> for ToolStub {
    /// What a cell carries of a catalog entry: everything `TOOLS` and
    /// `search_tools` need, nothing about the server.
    fn from(entry: &ToolEntry) -> Self {
        Self {
            name: entry.name.clone(),
            stub: entry.stub.clone(),
            summary: entry.summary.clone(),
            search: entry.search.clone(),
            signature: entry.signature.clone(),
        }
    }
}

/// The limits of one run, fixed by the frontend when it asks for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellLimits {
    /// Wall-clock deadline of the whole run, in milliseconds.
    pub deadline_ms: u64,
    /// Tool calls the run may make.
    pub max_calls: u32,
    /// How long the bridge lets one call take, in milliseconds.
    pub call_timeout_ms: u64,
    /// How long a call may wait for a person's approval on top of
    /// `call_timeout_ms`, in milliseconds.
    #[serde(default)]
    pub approval_timeout_ms: u64,
    /// Bytes of printed output kept.
    pub max_output: u32,
    /// Bytes of printed output after which the run is stopped.
    pub stop_output: u32,
    /// Longest protocol line accepted from the container, in bytes.
    pub max_line: u32,
}

/// Run one cell of code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCell {
    /// Unique id of this run.
    pub cell_id: String,
    /// The session whose state its calls count in (the private-data
    /// taint, `grant` limits; the audit records name it): the client
    /// session, or for a stateless client its identity's scope
    /// ([`subjects::stateless_scope`]).
    pub session: String,
    /// The frontend session that asks the person about this cell's calls
    /// ([`subjects::approval`] of it), when it is not `session` (a
    /// stateless client's request); absent: `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asker: Option<String>,
    /// Who the client is, when the frontend authenticates clients (the
    /// static token's name, or the access token's `sub`); `None` without
    /// authentication. The audit records of the cell and of its calls name
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The Python code.
    pub code: String,
    /// The tools the code may call.
    pub tools: Vec<ToolStub>,
    /// Tools a policy denies outright ([`Catalog::withheld`]): a function of
    /// that name raises the bridge's refusal, and nothing lists them.
    #[serde(default)]
    pub withheld: Vec<String>,
    /// Its limits.
    pub limits: CellLimits,
    /// Set for a cell of a kept session (`--keep-variables`): it runs in the
    /// session's container, which lives on after it. Absent: a fresh
    /// container, removed after the cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<Keep>,
    /// What the cell's MCP client can answer and wants to hear; the runner
    /// copies it into each [`ToolCall`] of the cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<ClientLink>,
}

/// Where a kept session's cell runs, and how long its container lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Keep {
    /// The kept container to run in: the [`KeptContainer::key`] of the
    /// session's previous cell, sent to the runner holding it
    /// ([`subjects::runner`]). `None` (on [`subjects::CELL_RUN`]): start the
    /// session's container with this cell.
    #[serde(default)]
    pub key: Option<String>,
    /// The runner removes the container after this long without a cell, in
    /// milliseconds.
    pub idle_ms: u64,
    /// The runner removes the container this long after its first cell, in
    /// milliseconds, whatever happens.
    pub max_ms: u64,
    /// A new container (no `key`) is one of at most this many kept
    /// containers of the cell's session on the runner: adopting it removes
    /// the session's container unused the longest when there are that many
    /// already. Set for a stateless client's handles (its session is its
    /// identity's scope, which has no end to free them); absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub most: Option<u32>,
}

/// A kept session's container, as the frontend remembers it between cells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeptContainer {
    /// The id of the runner holding it: the session's next cell goes to
    /// [`subjects::runner`] of this id.
    pub runner: String,
    /// The container's key at that runner (random, bound to the session).
    pub key: String,
}

/// The reply to a [`RunCell`]: the report, and where a kept container lives
/// on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellRan {
    /// What the run produced.
    pub report: CellReport,
    /// Set when the cell ran in a kept container that lives on after it;
    /// absent for a fresh container, and for a kept one the cell's end
    /// removed (stopped, or past its time).
    #[serde(default)]
    pub kept: Option<KeptContainer>,
}

/// A request on one runner's own subject ([`subjects::runner`]).
// A message is made once per request and serialized at once: the size of
// the value on the stack does not matter, boxing the cell would only add a
// hop.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeptRequest {
    /// Run a kept session's next cell in its container (`keep.key` names it;
    /// the container must be the cell's session's).
    Run(RunCell),
    /// The session ended: remove its container (stopping a cell running in
    /// it).
    End(KeptEnd),
}

/// A kept session is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeptEnd {
    /// The session.
    pub session: String,
    /// Its container's key.
    pub key: String,
}

/// The answer on a runner's own subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeptReply {
    /// The cell ran.
    Ran(CellRan),
    /// The session's container is gone (it was there: `removed`).
    Ended {
        /// The runner held the container and removed it.
        removed: bool,
    },
}

/// What a run produced: the `run_python` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellReport {
    /// What the code printed (stdout and stderr), at most the kept bytes.
    pub stdout: String,
    /// Null when the code finished; else the end of its traceback, or why the
    /// run was stopped.
    pub error: Option<String>,
    /// True when the code printed more than was kept.
    pub truncated: bool,
    /// True when the run did not end on its own: deadline, output flood,
    /// protocol violation, or the container died.
    pub stopped: bool,
    /// What the code handed back to the model besides its output (`show`):
    /// MCP content blocks (images, audio, embedded resources), at most
    /// [`MAX_HANDED_BACK`] of them and [`MAX_HANDED_BACK_BYTES`] of data in
    /// all, in the order handed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<serde_json::Value>,
}

/// The most content blocks one cell may hand back to the model.
pub const MAX_HANDED_BACK: usize = 8;

/// The most bytes of data (decoded) the content blocks of one cell may hold
/// in all; each block's line must also fit the protocol's line limit.
pub const MAX_HANDED_BACK_BYTES: usize = 160 * 1024;

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

impl ToolEntry {
    /// The name a client calling it directly (`--expose-tools`) gives it:
    /// the server's own name for it, prefixed `<server>__` only where
    /// several servers are wrapped.
    pub fn gateway_name(&self) -> String {
        match &self.server {
            Some(server) => format!("{server}__{}", self.mcp_name),
            None => self.mcp_name.clone(),
        }
    }
}

impl Catalog {
    /// How long a call of a client with `link` may wait for answers on top
    /// of its own timeout: a person's approval, and a wrapped server's
    /// questions when the client can be asked.
    pub fn answer_wait_ms(&self, link: Option<&ClientLink>) -> u64 {
        if link.is_some_and(ClientLink::can_be_asked) {
            self.approval_timeout_ms.max(self.ask_timeout_ms)
        } else {
            self.approval_timeout_ms
        }
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

/// Every kind of failure that crosses the bus: why a service could not
/// answer a request ([`WireError::kind`]) and which host fault ended a tool
/// call ([`ToolReply::Fault`]). One enum, so a kind is spelled once and
/// consumers match on variants, not strings.
///
/// Each variant keeps the spelling the wire has always carried: `snake_case`
/// words for a service's errors, an exception type name for a host fault
/// (that name is what the code sees as its `ToolError`). Older peers
/// therefore read the same bytes.
///
/// **Kinds from a newer peer.** A kind this version does not know decodes as
/// [`ErrorKind::Other`] holding its text (an untagged last variant, so any
/// string is accepted and nothing fails to decode), and it encodes back to
/// the same text. Consumers treat `Other` as the generic case of where it
/// arrived: a service error that fails the request (never retried as
/// `NoCapacity` is), or a fault whose name is shown to the code as it came.
/// Never construct `Other` with a known kind's spelling: it would not be
/// equal to that variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ErrorKind {
    /// A service's error: the request did not decode or its values are out
    /// of the accepted range.
    #[serde(rename = "bad_request")]
    BadRequest,
    /// A service's error: a sandbox-runner with every slot taken declines a
    /// cell, so the frontend offers it again (the queue group picks anew).
    #[serde(rename = "no_capacity")]
    NoCapacity,
    /// A service's error: the sandbox-runner could not run the cell (Docker
    /// failed, the image is missing, ...).
    #[serde(rename = "sandbox")]
    Sandbox,
    /// A service's error: the bridge could not forget an ended session.
    #[serde(rename = "session_end_failed")]
    SessionEndFailed,
    /// A service's error: the audit sink cannot be written, so the cell is
    /// refused (fail closed).
    #[serde(rename = "audit_unwritable")]
    AuditUnwritable,
    /// A service's error: the sandbox-runner holds no kept container under
    /// the key a kept session's cell names, so the session's variables are
    /// gone (its next cell starts a fresh container, saying so).
    #[serde(rename = "kept_lost")]
    KeptLost,
    /// A service's error: the kept container is running another cell of
    /// its session.
    #[serde(rename = "kept_busy")]
    KeptBusy,
    /// A service's error: the kept container a cell names was removed a
    /// while ago (the message says why: idle, past its longest life, a
    /// stopped cell, its session ended).
    #[serde(rename = "kept_expired")]
    KeptExpired,
    /// A service's error: the kept container a cell names belongs to
    /// another session (for a stateless client's handle: another identity).
    #[serde(rename = "kept_foreign")]
    KeptForeign,
    /// A host fault: the wrapped server answered with a JSON-RPC error.
    McpError,
    /// A host fault: the wrapped server's transport closed (it crashed).
    TransportClosed,
    /// A host fault: a request could not be sent to the wrapped server.
    TransportSendError,
    /// A host fault: the wrapped server answered with the wrong message.
    UnexpectedResponse,
    /// A host fault: the request to the wrapped server was cancelled.
    Cancelled,
    /// A host fault: the MCP session failed some other way.
    ServiceError,
    /// A host fault: the MCP layer timed out.
    TimeoutError,
    /// A host fault: the wrapped server exited and is being restarted.
    ServerRestarting,
    /// A host fault: the wrapped server was closed (shutdown).
    ServerClosed,
    /// A host fault: no bridge answers tool calls.
    BridgeUnavailable,
    /// A host fault: the bridge did not answer the call in time.
    BridgeTimeout,
    /// A host fault: the call failed between the runner and the bridge some
    /// other way.
    BridgeError,
    /// A kind this version does not know (from a newer peer), as it came.
    #[serde(untagged)]
    Other(String),
}

impl ErrorKind {
    /// The kind as it travels: the service error's word or the fault's type
    /// name.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::NoCapacity => "no_capacity",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::SessionEndFailed => "session_end_failed",
            ErrorKind::AuditUnwritable => "audit_unwritable",
            ErrorKind::KeptLost => "kept_lost",
            ErrorKind::KeptBusy => "kept_busy",
            ErrorKind::KeptExpired => "kept_expired",
            ErrorKind::KeptForeign => "kept_foreign",
            ErrorKind::McpError => "McpError",
            ErrorKind::TransportClosed => "TransportClosed",
            ErrorKind::TransportSendError => "TransportSendError",
            ErrorKind::UnexpectedResponse => "UnexpectedResponse",
            ErrorKind::Cancelled => "Cancelled",
            ErrorKind::ServiceError => "ServiceError",
            ErrorKind::TimeoutError => "TimeoutError",
            ErrorKind::ServerRestarting => "ServerRestarting",
            ErrorKind::ServerClosed => "ServerClosed",
            ErrorKind::BridgeUnavailable => "BridgeUnavailable",
            ErrorKind::BridgeTimeout => "BridgeTimeout",
            ErrorKind::BridgeError => "BridgeError",
            ErrorKind::Other(kind) => kind,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A frontend asking whether the runner of one of its cells still runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseCheck {
    /// The cell.
    pub cell_id: String,
}

/// The runner's answer: it runs the cell still, or (with `ended`) it has
/// finished it and sent its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseHeld {
    /// Which runner (its owner label: host, process id and start time),
    /// for logs.
    pub runner: String,
    /// The progress the code last reported (`report_progress`), if any:
    /// the frontend passes it on to a client that asked for progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<CellProgress>,
    /// Set once the cell has ended and its report was sent: how it ended.
    /// A frontend that hears this and still has no report knows the report
    /// was lost on the way, instead of waiting for the deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<CellEnded>,
    /// With `ended`: the kept container the cell ran in, when it lives on
    /// after it. A frontend whose report of a kept session's first cell was
    /// lost learns from this where the session's container is, so the next
    /// cell runs there instead of leaving it behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptContainer>,
    /// Set once the cell has been held (a call of it waited for a person,
    /// its container paused): whether it is held now and for how long in
    /// all, so the frontend does not count that time as run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldTime>,
}

/// How long a cell has been held, as its lease tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeldTime {
    /// Its container is paused now: a call waits for a person.
    pub paused: bool,
    /// Time held so far (this hold included), in milliseconds.
    pub held_ms: u64,
}

/// The progress a cell's code reported, as its lease tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellProgress {
    /// How many reports the code made so far (a new one has a higher
    /// count, even with the same values).
    pub count: u64,
    /// The progress, as the code gave it (a decimal number, kept as text so
    /// the message stays comparable).
    pub progress: String,
    /// The total, if the code gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<String>,
    /// A message, at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How a cell ended, as its runner's lease tells it after the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellEnded {
    /// It ran to its end without an error.
    Ok,
    /// The code raised.
    Error,
    /// It was stopped (deadline, memory, output flood, a violation,
    /// shutdown).
    Stopped,
    /// The runner answered with an error instead of a report.
    Failed,
}

impl std::fmt::Display for CellEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CellEnded::Ok => "it ran to its end",
            CellEnded::Error => "its code raised an error",
            CellEnded::Stopped => "it was stopped",
            CellEnded::Failed => "the runner answered with an error",
        })
    }
}

/// Why a service could not answer a request at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireError {
    /// What went wrong, for programs.
    pub kind: ErrorKind,
    /// A message for people.
    pub message: String,
}

/// The envelope of every reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply<T> {
    /// The typed answer.
    Ok(T),
    /// The service could not answer.
    Err(WireError),
}

/// The JSON Schema of every message, by file name, for the golden test and
/// for `docs/architecture.md`.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    fn schema<T: JsonSchema>() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(T)).expect("a schema is JSON")
    }
    vec![
        ("catalog_request", schema::<CatalogRequest>()),
        ("catalog_reply", schema::<Reply<Catalog>>()),
        ("run_cell", schema::<RunCell>()),
        ("run_cell_reply", schema::<Reply<CellRan>>()),
        ("tool_call", schema::<ToolCall>()),
        ("tool_call_reply", schema::<Reply<ToolReply>>()),
        ("direct_call", schema::<DirectCall>()),
        ("direct_call_reply", schema::<Reply<DirectReply>>()),
        ("approval_request", schema::<ApprovalRequest>()),
        ("approval_reply", schema::<Reply<ApprovalReply>>()),
        ("session_end", schema::<SessionEnd>()),
        ("session_end_reply", schema::<Reply<SessionEnded>>()),
        ("kept_request", schema::<KeptRequest>()),
        ("kept_reply", schema::<Reply<KeptReply>>()),
        ("lease_check", schema::<LeaseCheck>()),
        ("lease_check_reply", schema::<Reply<LeaseHeld>>()),
        ("to_client", schema::<ToClient>()),
        ("to_client_reply", schema::<Reply<FromClient>>()),
        ("cancel_call", schema::<CancelCall>()),
        ("cancel_call_reply", schema::<Reply<CallCancelled>>()),
        ("cell_hold", schema::<CellHold>()),
        ("cell_hold_reply", schema::<Reply<CellHeld>>()),
        ("console_request", schema::<ConsoleRequest>()),
        ("console_reply", schema::<Reply<ConsoleReply>>()),
        ("runner_status", schema::<RunnerStatus>()),
        ("runner_status_reply", schema::<Reply<StatusNoted>>()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_carries_the_stub_summary_and_search_text_of_an_entry_and_nothing_about_its_server() {
        let entry = ToolEntry {
            name: "notes__search".into(),
            mcp_name: "search".into(),
            server: Some("notes".into()),
            stub: "async def notes__search(params: dict) -> str: ...".into(),
            summary: "notes__search(query): Search the notes.".into(),
            mark: "private".into(),
            search: SearchText { name: "search".into(), server: "notes".into(), ..Default::default() },
            private: true,
            direct: None,
            signature: Signature {
                line: "notes__search(query: str)".into(),
                params: vec![Param { name: "query".into(), type_: "str".into(), required: true }],
                open: false,
            },
        };
        let stub = ToolStub::from(&entry);
        assert_eq!(stub.name, entry.name);
        assert_eq!(stub.signature, entry.signature, "the sandbox checks argument names against it");
        assert_eq!(stub.stub, entry.stub);
        assert_eq!(stub.summary, entry.summary);
        assert_eq!(stub.search, entry.search);
        let json = serde_json::to_value(&stub).unwrap();
        assert!(json.get("mcp_name").is_none() && json.get("mark").is_none(), "{json}");
        // A sender that does not know the new fields still makes a valid cell.
        let old: ToolStub = serde_json::from_str(r#"{"name": "add", "stub": "s"}"#).unwrap();
        assert_eq!((old.summary.as_str(), old.search), ("", SearchText::default()));
    }
}
