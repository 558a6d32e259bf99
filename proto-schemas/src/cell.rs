//! Cells: a run of code and its limits, a kept session's container, the
//! report, a cell's lease and its cancel ([`subjects::CELL_RUN`],
//! [`subjects::runner`], [`subjects::cell_lease`], [`subjects::cell_cancel`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ClientLink, ToolStub};
// The other items the doc comments link to.
#[cfg(doc)]
use crate::*;

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
    /// Keep the cell's final [`CellRan`] where any frontend can read it
    /// (the cell reports' key-value bucket, under the cell id) before
    /// replying: a task's cell, whose result must reach the task even when
    /// the frontend that sent it is gone by then. Absent: the reply only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_report: bool,
    /// Files placed read-only under `/tmp/in` before the code starts
    /// (`run_python`'s `files` argument, issue 42), names checked by the
    /// frontend; a fresh container's cell only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<CellInput>,
}

/// One file in: a wrapped server's resource, or a file one of its tools
/// returns (for a server that offers its files as tools only, such as
/// server-filesystem's `read_media_file`), read through the bridge as the
/// cell's own call would be (policy, private-data rule, audit record; the
/// files-in limit [`MAX_INPUT_FILE_BYTES`] instead of the result limit),
/// or bytes the client sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellInput {
    /// Its name under `/tmp/in` (a plain name: no `/`, not `.` or `..`).
    pub name: String,
    /// The resource's URI (a wrapped server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// The tool whose result is the file (its Python name, as code calls
    /// it): its first embedded resource, image or audio block's bytes, else
    /// its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's arguments (an object; `{}` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// The bytes, base64 (an inline blob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Over NATS, an inline blob too large to ride in the cell message:
    /// the frontend wrote its bytes to the bucket of inline files in and
    /// names them here instead of `data` (never taken from a client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredInput>,
}

/// A file in kept in a JetStream key-value bucket of files in, as whoever
/// wrote it describes it (the bridge in its reply, the frontend in the
/// cell message): its chunks `<id>.c0` ... `<id>.c<chunks - 1>`, its size
/// and SHA-256, which the runner checks before it places the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StoredInput {
    /// 32 hex digits: its chunks are `<id>.c0` ... `<id>.c<chunks - 1>`.
    pub id: String,
    /// The file's bytes.
    pub size: u64,
    /// How many chunks.
    pub chunks: u64,
    /// The file's SHA-256, hex.
    pub sha256: String,
}

/// The most files one cell takes in.
pub const MAX_INPUTS: usize = 16;

/// The most bytes (decoded) of the inline blobs of one cell, in all (their
/// base64 then fits the 4 MiB request body `serve --http` takes by
/// default).
pub const MAX_INPUT_BYTES: usize = 2 * 1024 * 1024;

/// The most bytes of one file read in from a wrapped server (a resource or
/// a tool's file), and of all the files of one cell in all: 8 MiB, half
/// the sandbox's 16 MiB `/tmp` the files are placed in, so the code keeps
/// at least as much again to write its own (a 5 MB CSV in and its cleaned
/// copy out fit). Past it a file is refused, naming the limit, never cut.
pub const MAX_INPUT_FILE_BYTES: usize = 8 * 1024 * 1024;

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
    /// The files the code wrote to its output folder (`/tmp/out`), kept for
    /// the client to read with `resources/read`; with the whole printed
    /// output as one more when the kept output was cut (issue 42).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileLink>,
    /// What became of files not kept: refused (a symlink, a bad name), past
    /// a bound of the run, or not collected here; one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_notes: Vec<String>,
}

/// A file kept for the client: a `code-mode://files/...` resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileLink {
    /// Its URI, for `resources/read`.
    pub uri: String,
    /// Its name in the output folder (`output.txt` for the whole output).
    pub name: String,
    /// Its MIME type.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Its size in bytes.
    pub size: u64,
}

/// The most files one run hands out.
pub const MAX_FILES_OUT: usize = 64;

/// The most bytes the files of one run hold in all (the sandbox's `/tmp`
/// is smaller by default and bounds them first).
pub const MAX_FILES_OUT_BYTES: u64 = 64 * 1024 * 1024;

/// The most bytes of a run's printed output kept whole for the client (as
/// the file `output.txt`, when the model's share was cut); they count in
/// [`MAX_FILES_OUT_BYTES`], and the file in [`MAX_FILES_OUT`]. Where
/// output is kept, a run printing this much is stopped. Half of the 16 MiB
/// message a client takes at its defaults (rmcp's streamable HTTP client),
/// so the file's read stays readable even with JSON escapes.
pub const MAX_OUTPUT_KEPT: u64 = 8 * 1024 * 1024;

/// The name of the file holding a run's whole printed output.
pub const OUTPUT_FILE: &str = "output.txt";

/// The most content blocks one cell may hand back to the model.
pub const MAX_HANDED_BACK: usize = 8;

/// The most bytes of data (decoded) the content blocks of one cell may hold
/// in all; each block's line must also fit the protocol's line limit.
pub const MAX_HANDED_BACK_BYTES: usize = 160 * 1024;

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

/// The request that ran a cell was cancelled (or its client went away):
/// the runner running it stops it and kills its container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelCell {
    /// Why, as the cell's report and the logs say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether the cell was still running when its cancel came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CellCancelled {
    /// It was, and it is being stopped; false when it had ended already (or
    /// a cancel came before: nothing is stopped twice).
    pub stopped: bool,
}
