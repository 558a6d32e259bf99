//! What one client session is, for every control that lasts beyond one
//! call: the definition docs/sessions.md states, written once as data so
//! that the frontend, the docs and the tests that walk every control under
//! every protocol version agree.
//!
//! - Over one **connection** (stdio, the library) the connection is the
//!   session, whatever protocol version the client negotiated.
//! - Over HTTP, an **MCP session** (protocol 2025-11-25 and older, an
//!   `Mcp-Session-Id`) is the session; it ends when the client closes it or
//!   after [`code_mode_core::defaults::HTTP_SESSION_IDLE`] without a
//!   request.
//! - A **stateless** request over HTTP (protocol 2026-07-28) has no
//!   session. What must outlive it is held by its authenticated identity
//!   (one scope per identity for the whole deployment; every
//!   unauthenticated caller is the one identity `anonymous`), lasting until
//!   `--stateless-idle` passes without a call, never shorter than an idle
//!   MCP session lives; its kept variables by the handle a kept cell's
//!   result carries ([`crate::handle`]); what the protocol itself carries
//!   with each request (its log level) lasts that request.

use rmcp::model::ProtocolVersion;

/// The kinds of client, by what holds its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// One connection (stdio, the library): the connection is the session.
    Connection,
    /// An MCP session over HTTP (2025-11-25 and older).
    HttpSession,
    /// A stateless request over HTTP (2026-07-28).
    Stateless,
}

impl ClientKind {
    /// The kind of a client of `version`, over HTTP or over one connection.
    pub fn of(http: bool, version: &ProtocolVersion) -> ClientKind {
        match (http, version.has_initialize()) {
            (false, _) => ClientKind::Connection,
            (true, true) => ClientKind::HttpSession,
            (true, false) => ClientKind::Stateless,
        }
    }
}

/// Every control that lasts beyond one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// The private-data rule's taint.
    PrivateData,
    /// `"scope": "grant"` rate limits.
    GrantLimits,
    /// Kept variables (`--keep-variables`).
    KeptVariables,
    /// `--max-cells-per-session`.
    CellsPerSession,
    /// `--max-direct-calls`.
    DirectCalls,
    /// The level of log notifications the client chose.
    LogLevel,
    /// Where an approval question goes, and what an answer covers.
    Approvals,
}

impl Control {
    /// Every control, for walks over all of them.
    pub const ALL: [Control; 7] = [
        Control::PrivateData,
        Control::GrantLimits,
        Control::KeptVariables,
        Control::CellsPerSession,
        Control::DirectCalls,
        Control::LogLevel,
        Control::Approvals,
    ];

    /// How long the control lasts for a client of `kind`.
    pub fn lasts(self, kind: ClientKind) -> Lasts {
        match (self, kind) {
            // An approval is asked on the request running the call, and
            // covers that one call, for every client.
            (Control::Approvals, _) => Lasts::Call,
            (_, ClientKind::Connection | ClientKind::HttpSession) => Lasts::Session,
            (Control::KeptVariables, ClientKind::Stateless) => Lasts::Handle,
            (Control::LogLevel, ClientKind::Stateless) => Lasts::Request,
            (
                Control::PrivateData | Control::GrantLimits | Control::DirectCalls | Control::CellsPerSession,
                ClientKind::Stateless,
            ) => Lasts::Identity,
        }
    }
}

/// How long a control lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lasts {
    /// One call (each call is decided anew).
    Call,
    /// The request that carried it (the protocol sends it with each one).
    Request,
    /// The session: the connection, or the MCP session over HTTP.
    Session,
    /// Every stateless call of the identity, until `--stateless-idle`
    /// passes without one (the bridge's state: on every replica; the
    /// `--max-cells-per-session` slots: in each frontend process).
    Identity,
    /// The cells that pass the handle back, until its container goes
    /// (`--session-idle`, `--session-max`, a stopped cell).
    Handle,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_lasts_only_one_call_for_a_stateless_client_but_approvals_which_last_one_call_for_everyone() {
        for control in Control::ALL {
            let stateless = control.lasts(ClientKind::Stateless);
            if control == Control::Approvals {
                assert_eq!(stateless, Lasts::Call);
                assert_eq!(control.lasts(ClientKind::Connection), Lasts::Call);
            } else {
                assert_ne!(stateless, Lasts::Call, "{control:?}");
                assert_eq!(control.lasts(ClientKind::Connection), Lasts::Session, "{control:?}");
                assert_eq!(control.lasts(ClientKind::HttpSession), Lasts::Session, "{control:?}");
            }
        }
    }

    /// What docs/sessions.md calls each control in its table.
    fn named_in_the_docs(control: Control) -> &'static str {
        match control {
            Control::PrivateData => "private-data taint",
            Control::GrantLimits => "`grant` rate limits",
            Control::KeptVariables => "kept variables",
            Control::CellsPerSession => "`--max-cells-per-session`",
            Control::DirectCalls => "`--max-direct-calls`",
            Control::LogLevel => "log level",
            Control::Approvals => "approvals",
        }
    }

    /// How long a cell of that table says a control lasts; `before` is
    /// the cell to its left (for "the same").
    fn read_in_the_docs(cell: &str, before: Option<Lasts>) -> Lasts {
        let starts = |words: &str| cell.starts_with(words);
        if starts("the same") {
            return before.unwrap_or_else(|| panic!("{cell:?} has no cell before it"));
        }
        if cell.contains("an answer covers that one call") {
            Lasts::Call
        } else if starts("the session") || starts("from `logging/setLevel` on") {
            Lasts::Session
        } else if starts("the identity") {
            Lasts::Identity
        } else if starts("a handle") {
            Lasts::Handle
        } else if starts("the request carrying") {
            Lasts::Request
        } else {
            panic!("docs/sessions.md: no reading of {cell:?} as a lifetime")
        }
    }

    /// The definition here and the tables of docs/sessions.md agree: a row
    /// per control, each saying what [`Control::lasts`] says, and the
    /// session's bounds (the versions, the idle time of an MCP session).
    #[test]
    fn docs_sessions_md_states_this_definition() {
        let doc = include_str!("../../../docs/sessions.md");
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .skip_while(|l| {
                !l.starts_with("| control | over stdio, or an MCP session | a stateless client over HTTP |")
            })
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        assert_eq!(rows.len(), Control::ALL.len(), "one row per control: {rows:?}");
        for control in Control::ALL {
            let name = named_in_the_docs(control);
            let row = rows
                .iter()
                .find(|r| r[0].starts_with(name))
                .unwrap_or_else(|| panic!("docs/sessions.md has no row for {control:?} ({name})"));
            let with_a_session = read_in_the_docs(row[1], None);
            let stateless = read_in_the_docs(row[2], Some(with_a_session));
            assert_eq!(with_a_session, control.lasts(ClientKind::Connection), "{control:?}: {row:?}");
            assert_eq!(with_a_session, control.lasts(ClientKind::HttpSession), "{control:?}: {row:?}");
            assert_eq!(stateless, control.lasts(ClientKind::Stateless), "{control:?}: {row:?}");
        }
        let versions = ProtocolVersion::KNOWN_VERSIONS;
        let (first, last) = (versions[0].as_str(), versions[versions.len() - 1].as_str());
        let span = format!("whatever protocol version it negotiated ({first} to {last})");
        assert!(doc.contains(&span), "docs/sessions.md says {span:?}");
        let idle = code_mode_core::defaults::HTTP_SESSION_IDLE.as_secs();
        let ends = format!("until the client closes it or {} minutes pass without a request", idle / 60);
        assert!(idle.is_multiple_of(60) && doc.contains(&ends), "docs/sessions.md says {ends:?}");
    }

    #[test]
    fn over_one_connection_every_protocol_version_is_a_session() {
        for version in ProtocolVersion::KNOWN_VERSIONS {
            assert_eq!(ClientKind::of(false, version), ClientKind::Connection, "{version}");
            let http = if version.has_initialize() { ClientKind::HttpSession } else { ClientKind::Stateless };
            assert_eq!(ClientKind::of(true, version), http, "{version}");
        }
    }
}
