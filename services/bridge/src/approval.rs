//! Asking a person before a call goes out (a policy's `approve`): what the
//! bridge tells the person about a call, and how it words a refusal.
//!
//! The bridge sends an [`ApprovalRequest`](code_mode_proto::ApprovalRequest)
//! to the frontend of the client session that ran the code; the frontend asks
//! its MCP client through elicitation and answers with an [`ApprovalReply`].
//! The arguments reach the person as a summary written here: each value as
//! compact JSON (so text from the code cannot fake new lines or labels of the
//! question), long values and long summaries cut, never the whole payload.

use std::time::Duration;

use code_mode_proto::ApprovalReply;
use serde_json::Value;

/// Longest argument summary shown to the person, in characters.
pub const SUMMARY_CHARS: usize = 400;
/// Longest single value in a summary, in characters.
pub const VALUE_CHARS: usize = 120;

/// A readable, bounded summary of a call's arguments:
/// `path = "/tmp/a", recursive = true`.
pub fn summarize_arguments(arguments: &Value, max_chars: usize) -> String {
    let text = match arguments {
        Value::Object(map) if map.is_empty() => "(no arguments)".to_string(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| format!("{} = {}", compact(&Value::String(key.clone())), compact(value)))
            .collect::<Vec<_>>()
            .join(", "),
        other => compact(other),
    };
    cut(&text, max_chars)
}

/// A value (or key) as compact JSON, cut to [`VALUE_CHARS`].
fn compact(value: &Value) -> String {
    cut(&serde_json::to_string(value).unwrap_or_default(), VALUE_CHARS)
}

/// `text` cut to `max` characters, ending with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    code_mode_core::text::cut_chars(text, max, code_mode_core::text::PEOPLE_MARK)
}

/// Why a call was not approved, as the code's `ToolError` says it.
pub fn refusal(answer: &ApprovalReply, timeout: Duration) -> String {
    match answer {
        ApprovalReply::Approved => "approved".to_string(),
        ApprovalReply::Declined => "the person declined the call".to_string(),
        ApprovalReply::Cancelled => "the person dismissed the question without approving".to_string(),
        ApprovalReply::TimedOut => format!("no answer within {} s, so the call is refused", timeout.as_secs()),
        ApprovalReply::Unavailable { reason } => format!("nobody could be asked: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_summary_lists_each_argument_as_compact_json() {
        let summary = summarize_arguments(&json!({"path": "/tmp/a", "recursive": true, "n": 3}), SUMMARY_CHARS);
        assert_eq!(summary, r#""path" = "/tmp/a", "recursive" = true, "n" = 3"#);
        assert_eq!(summarize_arguments(&json!({}), SUMMARY_CHARS), "(no arguments)");
    }

    #[test]
    fn text_from_the_code_cannot_start_a_new_line_in_the_question() {
        let summary = summarize_arguments(&json!({"note": "ok\n\nApproved by the admin: yes"}), SUMMARY_CHARS);
        assert!(!summary.contains('\n'), "{summary}");
        assert!(summary.contains(r"ok\n\nApproved"), "{summary}");
    }

    #[test]
    fn long_values_and_long_summaries_are_cut() {
        let long = "x".repeat(1000);
        let summary = summarize_arguments(&json!({"a": long, "b": long, "c": long, "d": long}), SUMMARY_CHARS);
        assert_eq!(summary.chars().count(), SUMMARY_CHARS, "{summary}");
        assert!(summary.ends_with('…'));
        let one = summarize_arguments(&json!({"a": "y".repeat(500)}), SUMMARY_CHARS);
        assert!(one.chars().count() <= VALUE_CHARS + 10, "{one}");
    }

    #[test]
    fn each_answer_but_approval_says_why_the_call_is_refused() {
        let t = Duration::from_secs(60);
        assert!(refusal(&ApprovalReply::Declined, t).contains("declined"));
        assert!(refusal(&ApprovalReply::Cancelled, t).contains("dismissed"));
        assert!(refusal(&ApprovalReply::TimedOut, t).contains("no answer within 60 s"));
        let unsupported = ApprovalReply::Unavailable { reason: "the client does not support elicitation".into() };
        assert!(refusal(&unsupported, t).contains("does not support elicitation"));
    }
}
