//! The default limits, in one place.
//!
//! Each is configurable where it is enforced; these are the values used when
//! nothing is configured. `skills/code-mode/SKILL.md` quotes them, and a test
//! keeps it in line.

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
/// `run_python` requests that run at once.
pub const MAX_CONCURRENT_CELLS: usize = 4;
/// How long a cell waits for a sandbox-runner with a free slot.
pub const CAPACITY_WAIT: Duration = Duration::from_secs(30);
