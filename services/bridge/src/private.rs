//! The private-data rule: once a session has called a tool that may see
//! private data (`--private TOOL`), it may call only such tools for the rest
//! of the session.
//!
//! The taint is one entry, [`TAINT`], under the call's session in the
//! session-state store ([`SessionStore`]): in memory for `serve` and `run`,
//! in the JetStream key-value bucket for the split deployment, where it
//! survives a restart of the bridge (and of nats-server) and every bridge
//! replica sees it. It is written once and cleared only when its session
//! ends (the frontend tells the bridge, [`crate::Bridge::end_session`]); a
//! stateless client's taint lives in its identity's scope, which ends only
//! after `--stateless-idle` without a call ([`crate::scope`]).
//!
//! The bridge judges a call last, after every other check has passed, just
//! before the call goes out:
//!
//! - a call to a private tool **writes the taint first** (create-if-absent,
//!   so concurrent writers cannot lose it) and goes out only once the write
//!   is acknowledged;
//! - a call to any other tool reads the taint and goes out only when there
//!   is none.
//!
//! What that guarantees:
//!
//! - a call refused by an earlier check (unknown or not allowed, budget,
//!   arguments) never taints;
//! - a private call that went out has tainted its session, whatever happens
//!   to it afterwards (a tool error, a timeout, a transport fault);
//! - a call to another tool judged after a private call's taint was written
//!   is refused. A private call's result exists only after that write, so no
//!   call carrying it (or anything computed from it) can go out to another
//!   tool. A call to another tool judged *before* the write, i.e. running
//!   concurrently with the private call in the same session, may still go
//!   out: its arguments were fixed before the private result existed.
//!
//! It fails closed: when the taint cannot be read or written, the call is
//! refused ("session state unavailable ... (fail closed)"). A failed write
//! may still have landed, which can only taint, never untaint. With no
//! private tools configured the bridge has no rule at all and never touches
//! the store.
//!
//! This module owns the taint's name and value and the rule's refusals; the
//! store owns the backend, the keys and the timeouts.

use std::time::Duration;

use code_mode_core::state::{SessionStore, StateError};
use serde_json::{Value, json};

/// The name of the taint entry in each session.
pub const TAINT: &str = "taint";

/// Longest tool name quoted from a stored taint (it may have been written by
/// another bridge, so it is cut like any text the bridge did not make).
const MAX_QUOTED_NAME: usize = 64;

/// Why the rule refuses a call; the message reaches the code as a
/// `ToolError`, so it names the rule and never carries backend details
/// (those go to the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleRefusal {
    /// The session has called a private tool, and this tool is not private.
    #[error(
        "{tool}: refused by the private-data rule: this session has called the private tool {by}, so from then \
         on it may call only private tools ({allowed}). {lasts}"
    )]
    Tainted {
        /// The refused tool (Python name).
        tool: String,
        /// The private tool that tainted the session.
        by: String,
        /// The private tools, which may still be called.
        allowed: String,
        /// How long the rule lasts, and what to do ([`lasts`]).
        lasts: String,
    },
    /// The taint could not be read or written.
    #[error("{tool}: session state {what}: refusing the call under the private-data rule (fail closed)")]
    State {
        /// The refused tool (Python name).
        tool: String,
        /// `unavailable`, `invalid` or `changing concurrently`.
        what: &'static str,
    },
}

/// Most characters of private tool names a refusal lists, so that what to do
/// next still fits in the 500 characters a `ToolError` carries.
const MAX_ALLOWED_CHARS: usize = 160;

/// The private tools' names, comma-separated, at most
/// [`MAX_ALLOWED_CHARS`] of them and then how many more.
fn bounded_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    let mut list = String::new();
    let mut shown = 0;
    for name in &names {
        if shown > 0 && list.len() + name.len() + 2 > MAX_ALLOWED_CHARS {
            break;
        }
        if shown > 0 {
            list.push_str(", ");
        }
        list.push_str(name);
        shown += 1;
    }
    if names.len() > shown {
        list.push_str(&format!(" and {} more", names.len() - shown));
    }
    list
}

/// How long the rule lasts for the session whose state lives under `key`
/// (a client session, or a stateless scope's generation, see
/// [`crate::scope`]), and what to do, as a refusal ends.
pub fn lasts(key: &str, stateless_idle: Duration) -> String {
    if code_mode_proto::subjects::is_stateless_scope(key) {
        format!(
            "For this stateless client the rule lasts across all of its runs until {} pass without a call: call \
             other tools before the first private call",
            span(stateless_idle.as_secs())
        )
    } else {
        "The rule lasts for the rest of the client session: call other tools before the first private call, or in \
         a new session"
            .to_string()
    }
}

/// A duration for people: "1 h", "15 min" or "45 s".
fn span(secs: u64) -> String {
    match secs {
        s if s >= 3600 && s % 3600 == 0 => format!("{} h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// The rule of one bridge: its private tools and the store of the taint.
#[derive(Debug, Clone)]
pub struct PrivateRule {
    store: SessionStore,
    /// The private tools' Python names, for refusal messages.
    allowed: String,
    /// How long a stateless scope lasts, for refusal messages.
    stateless_idle: Duration,
}

impl PrivateRule {
    /// A rule over `store` for these private tools (Python names).
    pub fn new<'a>(store: SessionStore, private: impl IntoIterator<Item = &'a str>) -> Self {
        Self { store, allowed: bounded_list(private), stateless_idle: code_mode_core::defaults::STATELESS_IDLE }
    }

    /// The same, saying that a stateless scope lasts `idle` without a call.
    pub fn with_stateless_idle(self, idle: Duration) -> Self {
        Self { stateless_idle: idle, ..self }
    }

    /// Judge a call of `tool` (Python name) in `session` that passed every
    /// other check: `Ok` means it may go out now. For a private tool the
    /// session is tainted before this returns `Ok`.
    pub async fn judge(&self, session: &str, tool: &str, private: bool) -> Result<(), RuleRefusal> {
        if private { self.taint(session, tool).await } else { self.untainted(session, tool).await }
    }

    async fn taint(&self, session: &str, tool: &str) -> Result<(), RuleRefusal> {
        match self.store.create(session, TAINT, &json!({ "by": tool })).await {
            Ok(_) => {
                code_mode_telemetry::session_taint(true);
                tracing::info!(session, tool, "session tainted: from now on only private tools may be called");
                Ok(())
            }
            // It exists: the session is tainted already.
            Err(StateError::Conflict(_)) => Ok(()),
            Err(e) => Err(self.state_refusal(session, tool, e)),
        }
    }

    async fn untainted(&self, session: &str, tool: &str) -> Result<(), RuleRefusal> {
        match self.store.get(session, TAINT).await {
            Ok(None) => Ok(()),
            Ok(Some(entry)) => {
                let by = match entry.value.get("by") {
                    Some(Value::String(name)) => crate::stubs::cut_chars(name, MAX_QUOTED_NAME),
                    _ => "(unknown)".to_string(),
                };
                tracing::info!(session, tool, by = %by, "refused: the session is tainted by a private call");
                Err(RuleRefusal::Tainted {
                    tool: tool.to_string(),
                    by,
                    allowed: self.allowed.clone(),
                    lasts: lasts(session, self.stateless_idle),
                })
            }
            Err(e) => Err(self.state_refusal(session, tool, e)),
        }
    }

    fn state_refusal(&self, session: &str, tool: &str, error: StateError) -> RuleRefusal {
        tracing::warn!(session, tool, store = self.store.backend_kind(), error = %error, "refused: session state failed (fail closed)");
        let what = match error {
            StateError::Unavailable(_) => "unavailable",
            StateError::Invalid(_) => "invalid",
            StateError::Conflict(_) => "changing concurrently",
        };
        RuleRefusal::State { tool: tool.to_string(), what }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_private_tools_pass_once_a_private_tool_was_judged() {
        let rule = PrivateRule::new(SessionStore::in_memory(), ["read_mail"]);
        rule.judge("s", "send", false).await.unwrap();
        rule.judge("s", "read_mail", true).await.unwrap();
        rule.judge("s", "read_mail", true).await.unwrap();
        let refusal = rule.judge("s", "send", false).await.unwrap_err();
        assert_eq!(
            refusal,
            RuleRefusal::Tainted {
                tool: "send".into(),
                by: "read_mail".into(),
                allowed: "read_mail".into(),
                lasts: lasts("s", Duration::from_secs(1)),
            }
        );
        assert!(refusal.to_string().contains("private-data rule"), "{refusal}");
        rule.judge("other", "send", false).await.unwrap();
    }

    #[tokio::test]
    async fn a_session_id_the_store_refuses_fails_closed() {
        let rule = PrivateRule::new(SessionStore::in_memory(), ["read_mail"]);
        for private in [false, true] {
            let refusal = rule.judge("", "send", private).await.unwrap_err();
            assert_eq!(refusal, RuleRefusal::State { tool: "send".into(), what: "invalid" });
            assert!(refusal.to_string().contains("(fail closed)"), "{refusal}");
        }
    }

    #[tokio::test]
    async fn a_taint_written_by_someone_else_is_quoted_cut_or_not_at_all() {
        let store = SessionStore::in_memory();
        store.create("a", TAINT, &json!({"by": "x".repeat(500)})).await.unwrap();
        store.create("b", TAINT, &json!(true)).await.unwrap();
        let rule = PrivateRule::new(store, ["p"]);
        let RuleRefusal::Tainted { by, .. } = rule.judge("a", "send", false).await.unwrap_err() else { panic!() };
        assert_eq!(by.chars().count(), MAX_QUOTED_NAME);
        let RuleRefusal::Tainted { by, .. } = rule.judge("b", "send", false).await.unwrap_err() else { panic!() };
        assert_eq!(by, "(unknown)");
    }

    #[tokio::test]
    async fn a_stateless_clients_refusal_says_the_rule_lasts_across_its_runs_and_for_how_long() {
        let rule =
            PrivateRule::new(SessionStore::in_memory(), ["read_mail"]).with_stateless_idle(Duration::from_secs(900));
        let key = format!("{}~1", code_mode_proto::subjects::stateless_scope(Some("alice")));
        rule.judge(&key, "read_mail", true).await.unwrap();
        let text = rule.judge(&key, "send", false).await.unwrap_err().to_string();
        assert!(text.ends_with("lasts across all of its runs until 15 min pass without a call: call other tools before the first private call"), "{text}");
        assert!(text.chars().count() <= code_mode_core::defaults::MAX_MESSAGE_CHARS);
    }

    #[tokio::test]
    async fn a_refusal_says_what_to_do_even_with_hundreds_of_private_tools() {
        let names: Vec<String> = (0..300).map(|i| format!("private_tool_{i:03}")).collect();
        let rule = PrivateRule::new(SessionStore::in_memory(), names.iter().map(String::as_str));
        rule.judge("s", "private_tool_000", true).await.unwrap();
        let text = rule.judge("s", "send", false).await.unwrap_err().to_string();
        assert!(text.contains(" more)"), "the list is cut: {text}");
        assert!(text.ends_with("call other tools before the first private call, or in a new session"), "{text}");
        assert!(text.chars().count() <= code_mode_core::defaults::MAX_MESSAGE_CHARS, "{}", text.chars().count());
    }
}
