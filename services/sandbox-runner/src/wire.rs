//! What the sandbox-runner puts on the wire, decided here and nowhere else:
//! the [`WireError`] of a cell it will not or cannot run
//! ([`service_error`]), the fault kind of a tool call that never reached
//! the bridge ([`bus_fault`]), and what the code in the container sees of
//! a call's answer ([`to_code`]: a result, a refusal message of at most
//! [`defaults::MAX_MESSAGE_CHARS`] characters, or a fault's type name only).
//! The bridge cuts its refusals already; cutting again here means no peer
//! on the bus, however configured, can hand the code a longer text.
//!
//! It also holds a [`RunCell`]'s limits to the ranges the command line
//! accepts ([`check_limits`]), so a peer sending `deadline_ms: u64::MAX`
//! gets `bad_request` instead of overflowing a timer.

use code_mode_core::bus::BusError;
use code_mode_core::defaults;
use code_mode_proto::{CellLimits, ErrorKind, ToolReply, WireError};

use crate::error::SandboxError;
use crate::protocol::ToRunner;

/// The one mapping of the runner's errors to the reply of `cell.run`.
pub fn service_error(e: &SandboxError) -> WireError {
    let kind = match e {
        SandboxError::NoCapacity { .. } => ErrorKind::NoCapacity,
        SandboxError::BadCell { .. } | SandboxError::BadRequest(_) => ErrorKind::BadRequest,
        SandboxError::Kept(crate::kept::KeptError::Lost) => ErrorKind::KeptLost,
        SandboxError::Kept(crate::kept::KeptError::Busy) => ErrorKind::KeptBusy,
        SandboxError::Kept(crate::kept::KeptError::Expired { .. }) => ErrorKind::KeptExpired,
        SandboxError::Kept(crate::kept::KeptError::Foreign) => ErrorKind::KeptForeign,
        SandboxError::Audit(_) => ErrorKind::AuditUnwritable,
        _ => ErrorKind::Sandbox,
    };
    WireError { kind, message: e.to_string() }
}

/// The kind the code sees of a call that failed between this runner and
/// the bridge (the mapping every service shares,
/// [`BusError::tool_call_fault`]).
pub fn bus_fault(e: &BusError) -> ErrorKind {
    e.tool_call_fault()
}

/// The one mapping of a call's answer to the line the code reads.
pub fn to_code(id: u64, reply: ToolReply) -> ToRunner<'static> {
    match reply {
        ToolReply::Ok { value } => ToRunner::Result { id, ok: true, value: Some(value), error: None, blocks: None },
        ToolReply::Content { value, blocks } => {
            ToRunner::Result { id, ok: true, value: Some(value), error: None, blocks: Some(blocks) }
        }
        ToolReply::Refused { message } => {
            let message = code_mode_core::text::cut_chars(
                &message,
                defaults::MAX_MESSAGE_CHARS,
                code_mode_core::text::MODEL_MARK,
            );
            ToRunner::Result { id, ok: false, value: None, error: Some(message), blocks: None }
        }
        ToolReply::Fault { kind } => {
            ToRunner::Result { id, ok: false, value: None, error: Some(kind.to_string()), blocks: None }
        }
    }
}

/// Refuse limits outside what the command line accepts (see
/// `code_mode_core::defaults`), naming the field, its value and the range.
pub fn check_limits(limits: &CellLimits) -> Result<(), SandboxError> {
    let max_ms = defaults::MAX_SECONDS.as_millis() as u64;
    let min_ms = defaults::MIN_SECONDS.as_millis() as u64;
    let checks: [(&str, u64, u64, u64); 4] = [
        ("deadline_ms", limits.deadline_ms, min_ms, max_ms),
        ("call_timeout_ms", limits.call_timeout_ms, 0, max_ms),
        ("approval_timeout_ms", limits.approval_timeout_ms, 0, max_ms),
        ("max_line", u64::from(limits.max_line), 1, u64::from(defaults::MAX_LINE_LIMIT)),
    ];
    for (field, value, min, max) in checks {
        if value < min || value > max {
            return Err(SandboxError::BadCell { reason: format!("limits.{field} is {value}, outside {min} to {max}") });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> CellLimits {
        CellLimits {
            deadline_ms: 90_000,
            max_calls: 200,
            call_timeout_ms: 30_000,
            approval_timeout_ms: 0,
            max_output: 8192,
            stop_output: 1 << 20,
            max_line: 1 << 18,
        }
    }

    #[test]
    fn the_code_gets_a_refusal_cut_to_500_characters_and_a_fault_as_its_name_only() {
        let long = "é".repeat(700);
        let ToRunner::Result { error: Some(message), ok: false, .. } = to_code(1, ToolReply::Refused { message: long })
        else {
            panic!("not a refusal")
        };
        assert_eq!(message.chars().count(), 500);
        let ToRunner::Result { error, .. } = to_code(2, ToolReply::Fault { kind: ErrorKind::TransportClosed }) else {
            panic!("not a result")
        };
        assert_eq!(error.as_deref(), Some("TransportClosed"));
        let unknown = ToolReply::Fault { kind: ErrorKind::Other("FromANewerBridge".into()) };
        let ToRunner::Result { error, .. } = to_code(3, unknown) else { panic!("not a result") };
        assert_eq!(error.as_deref(), Some("FromANewerBridge"));
    }

    #[test]
    fn a_declined_cell_says_no_capacity_and_bad_limits_say_bad_request() {
        assert_eq!(service_error(&SandboxError::NoCapacity { capacity: 4 }).kind, ErrorKind::NoCapacity);
        assert!(check_limits(&limits()).is_ok());
        for bad in [
            CellLimits { deadline_ms: u64::MAX, ..limits() },
            CellLimits { deadline_ms: 0, ..limits() },
            CellLimits { call_timeout_ms: u64::MAX, ..limits() },
            CellLimits { approval_timeout_ms: 86_400_001, ..limits() },
            CellLimits { max_line: u32::MAX, ..limits() },
        ] {
            let e = check_limits(&bad).unwrap_err();
            let wire = service_error(&e);
            assert_eq!(wire.kind, ErrorKind::BadRequest, "{bad:?}");
            assert!(wire.message.contains("outside"), "{}", wire.message);
        }
        let e = check_limits(&CellLimits { deadline_ms: u64::MAX, ..limits() }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the cell was refused: limits.deadline_ms is 18446744073709551615, outside 1 to 86400000"
        );
    }
}
