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

// The cargo-fuzz targets' entry points: only with the `fuzzing` feature
// (the fuzz crate enables it) and in this crate's tests.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

mod accounts;
mod approval;
mod call;
mod catalog;
mod cell;
mod client;
mod console;
mod error;
mod meaning;
pub mod subjects;

pub use accounts::*;
pub use approval::*;
pub use call::*;
pub use catalog::*;
pub use cell::*;
pub use client::*;
pub use console::*;
pub use error::*;
pub use meaning::*;

/// Queue groups: each request reaches one member of the group.
pub mod queue_groups {
    /// All bridge replicas.
    pub const BRIDGE: &str = "bridge";
    /// All sandbox-runners.
    pub const SANDBOX_RUNNER: &str = "sandbox-runner";
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
        ("cancel_cell", schema::<CancelCell>()),
        ("cancel_cell_reply", schema::<Reply<CellCancelled>>()),
        ("accounts_request", schema::<AccountsRequest>()),
        ("accounts_reply", schema::<Reply<AccountsReply>>()),
        ("meaning_ask", schema::<MeaningAsk>()),
        ("meaning_reply", schema::<Reply<MeaningReply>>()),
        ("roots_changed", schema::<RootsChanged>()),
        ("roots_changed_reply", schema::<Reply<RootsTold>>()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_text_for_meaning_is_its_name_words_title_description_and_parameter_text() {
        let search = SearchText {
            name: "get_current_time".into(),
            server: "time".into(),
            title: "Current time".into(),
            description: "Get the time in a zone.".into(),
            params: "timezone".into(),
            param_text: "IANA zone name.".into(),
            output: "datetime".into(),
        };
        assert_eq!(search.for_meaning(), "get current time Current time Get the time in a zone. IANA zone name.");
        assert_eq!(SearchText { name: "ping".into(), ..Default::default() }.for_meaning(), "ping");
    }

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
