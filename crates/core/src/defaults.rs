//! The default limits, in one place.
//!
//! Each is configurable where it is enforced; these are the values used when
//! nothing is configured. `skills/code-mode/SKILL.md` quotes them, and a test
//! keeps it in line. The `*_RANGE`-style bounds at the end are what a
//! configured value may be: the command line refuses anything outside them
//! (naming the option, the value and the range), and a sandbox-runner
//! refuses a cell whose limits fall outside them, so no value from a flag, a
//! settings file, the environment or the bus can overflow a timer or ask for
//! an absurd number of containers.

use std::time::Duration;

/// Wall-clock deadline of one run; the container is killed after it.
pub const DEADLINE: Duration = Duration::from_secs(90);
/// Tool calls one run may make, across every server.
pub const MAX_CALLS: u32 = 200;
/// How long one tool call may take on the wrapped server.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a call that a policy holds for approval waits for the person's
/// answer (on top of [`CALL_TIMEOUT`]; the run's deadline still bounds it).
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a wrapped server may take to start: spawn, `initialize` and
/// `tools/list`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of printed output kept and returned.
pub const MAX_OUTPUT: u32 = 8 * 1024;
/// Bytes of printed output after which a run is stopped.
pub const STOP_OUTPUT: u32 = 1024 * 1024;
/// Longest protocol line the host accepts from a container.
pub const MAX_LINE: u32 = 256 * 1024;
/// Largest arguments object of one call, as JSON.
pub const MAX_ARGUMENTS: usize = 16 * 1024;
/// Largest tool result handed to the code; larger ones are refused, not cut.
pub const MAX_RESULT: usize = 64 * 1024;
/// Longest refusal or failure message raised as `ToolError`.
pub const MAX_MESSAGE_CHARS: usize = 500;
/// Largest code a `run_python` request may carry.
pub const MAX_CODE: usize = 64 * 1024;
/// Characters the `run_python` description may take.
pub const DESCRIPTION_BUDGET: usize = 12_000;
/// Longest tool description kept from a server, in bytes.
pub const MAX_TOOL_DESCRIPTION: usize = 2 * 1024;
/// Nesting levels a stub shows of a parameter's type.
pub const STUB_TYPE_DEPTH: usize = 5;
/// Longest parameter name shown in a stub.
pub const MAX_PARAM_NAME: usize = 64;
/// Deepest input schema the bridge compiles; deeper tools are left out.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// How much longer than a peer's own bound a requester waits for its answer
/// over the bus: the hops, and what the peer does after its own timer fires
/// (answering "timed out", removing a container). One value for every
/// request that waits on another service's timeout (a tool call, a cell, an
/// approval, a parked cell, a direct call), so a lost peer always costs the
/// same few seconds more than its own limit, never a hang.
pub const HOP_MARGIN: Duration = Duration::from_secs(5);
/// Requests one bus subscription handles at once (`Bus::serve`); more wait
/// in the subscription until one ends.
pub const MAX_IN_FLIGHT: usize = 1024;
/// How long a service's requests in flight get to finish once it stops
/// taking new ones; then they are dropped.
pub const DRAIN: Duration = Duration::from_secs(10);
/// `run_python` requests that run at once.
pub const MAX_CONCURRENT_CELLS: usize = 4;
/// How long a cell waits for a sandbox-runner with a free slot.
pub const CAPACITY_WAIT: Duration = Duration::from_secs(30);

/// Shortest duration a time setting (deadline, call timeout, approval
/// timeout, capacity wait) may be: one millisecond, the resolution at which
/// limits cross the bus.
pub const MIN_SECONDS: Duration = Duration::from_millis(1);
/// Longest duration a time setting may be: a day. A run or a call that may
/// last longer is a mistake, and every timer stays far from overflowing.
pub const MAX_SECONDS: Duration = Duration::from_secs(86_400);
/// Most tool calls a run may be allowed (0 is allowed: no calls at all).
pub const MAX_CALLS_LIMIT: u32 = 1_000_000;
/// Largest code size a frontend may be set to accept: 1 MiB, the default
/// largest message of nats-server, which carries the code in a `RunCell`.
pub const MAX_CODE_LIMIT: usize = 1024 * 1024;
/// Largest `run_python` description budget, in characters.
pub const MAX_DESCRIPTION_BUDGET: usize = 1_000_000;
/// Most cells one frontend or one sandbox-runner may run at once
/// (`--max-concurrent`, `--capacity`; at least 1).
pub const MAX_CELLS_LIMIT: usize = 1024;
/// Most warm containers a sandbox-runner may keep ready.
pub const MAX_WARM: usize = 64;
/// Longest protocol line a cell may allow (`CellLimits::max_line`).
pub const MAX_LINE_LIMIT: u32 = 16 * 1024 * 1024;
/// How long a kept session's container (`--keep-variables`) lives without a
/// cell before it is removed (`--session-idle`).
pub const SESSION_IDLE: Duration = Duration::from_secs(10 * 60);

/// How long a kept session's container lives at most, from its first cell
/// (`--session-max`).
pub const SESSION_MAX: Duration = Duration::from_secs(60 * 60);

/// Kept containers one stateless client (identity) holds at once through
/// session handles, on one sandbox-runner (`--max-handles`).
pub const MAX_HANDLES: u32 = 4;

/// How long an MCP session over HTTP (protocol 2025-11-25 and older) lives
/// without a request before the server closes it (rmcp's keep-alive, which
/// the frontend sets to this explicitly).
pub const HTTP_SESSION_IDLE: Duration = Duration::from_secs(5 * 60);

/// How long the state of an identity's stateless (2026-07-28) calls lasts
/// without a call (`--stateless-idle`): its private-data taint, `grant`
/// counters and direct-call count then start anew.
pub const STATELESS_IDLE: Duration = Duration::from_secs(60 * 60);

/// The shortest `--stateless-idle`: a stateless client's state never ends
/// sooner than an idle HTTP session of the older protocol would have.
pub const MIN_STATELESS_IDLE: Duration = HTTP_SESSION_IDLE;
