//! Named, versioned subjects. A new incompatible message gets a new version.

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
/// frontend -> the sandbox-runner running one cell: [`crate::CancelCell`]
/// -> [`crate::CellCancelled`]: the request that ran the cell was
/// cancelled (or its client went away), so the runner kills the cell's
/// container now. The subject ends with the cell id (see
/// [`cell_cancel`]); the runner answers on it from taking the cell until
/// it replies, so no responder means the cell has ended already.
pub const CELL_CANCEL: &str = "codemode.v1.cell.cancel";
/// frontend (its web console) -> bridge: [`crate::AccountsRequest`] ->
/// [`crate::AccountsReply`]: the connect flow of a per-identity upstream
/// account (begin, finish), an identity's accounts (list, disconnect) and
/// the counts per server. Served by the bridges in their queue group.
pub const ACCOUNTS: &str = "codemode.v1.accounts";
/// sandbox-runner -> bridge: [`crate::MeaningAsk`] -> [`crate::MeaningReply`]:
/// a cell's `search_tools`, unsure, asks how near in meaning its question
/// is to each offered tool. Served by the bridges in their queue group.
pub const SEARCH_MEANING: &str = "codemode.v1.search.meaning";
/// frontend -> every bridge: [`crate::RootsChanged`] ->
/// [`crate::RootsTold`]: a client said its roots changed; the bridges
/// holding that client's own sessions with servers pass it on. Each bridge
/// serves it in a queue group of its own (as [`CANCEL`]), so every replica
/// hears it.
pub const ROOTS_CHANGED: &str = "codemode.v1.roots.changed";
/// Every subject, for documentation and permission checks (the approval,
/// client, runner, lease, hold and cell cancel subjects are prefixes: one subject per
/// session, runner or cell below each).
pub const ALL: [&str; 17] = [
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
    CELL_CANCEL,
    ACCOUNTS,
    SEARCH_MEANING,
    ROOTS_CHANGED,
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

/// The cancel subject of one cell, or `None` when the cell id is not
/// one subject token (such a cell cannot be cancelled: it runs to its
/// end or its deadline).
pub fn cell_cancel(cell_id: &str) -> Option<String> {
    is_session_id(cell_id).then(|| format!("{CELL_CANCEL}.{cell_id}"))
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
