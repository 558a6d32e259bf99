//! Session handles: how a stateless (MCP 2026-07-28) client keeps its
//! variables between `run_python` calls (`--keep-variables`).
//!
//! A stateless client has no session for the frontend to keep a container
//! for, so the container's address travels with the client instead. A
//! call with `session: "new"` runs in a new kept container, and its result
//! carries the container's handle (`session` in its structured content,
//! `code-mode/session` in its `_meta`); the client passes it back as the
//! `session` argument of its next call (or in the request's `_meta` under
//! the same key) to run there. A call without `session` runs in a fresh
//! container that keeps nothing, so a client that never uses handles never
//! leaves a container waiting. One identity holds at most
//! [`KeepConfig::most_handles`](crate::KeepConfig) kept containers on a
//! runner; starting one more removes the one unused the longest (its
//! handle then says so).
//!
//! A handle is `cms2.<runner id>.<container key>.<check>`: where the
//! container lives, the runner's random key for it (122 random bits from
//! the operating system's generator: not guessable), and 8 hex digits of a
//! SHA-256 over both, so that a handle whose runner id or key was changed
//! is told apart from one whose runner restarted. It holds no secret of the
//! frontend (the check keeps out mistakes, not forgers), so any frontend
//! replica can use it; what binds it to its owner is the runner: a kept
//! container is bound to the session its first cell named, and a stateless
//! client's cells name its identity's scope
//! ([`code_mode_proto::subjects::stateless_scope`]), so a handle presented
//! by another identity names a container of another session and is refused
//! ([`HandleError::Foreign`]). A changed handle is refused as not valid
//! ([`HandleError::Altered`]); one whose container is gone, or whose
//! runner stopped or restarted, as ended, saying why ([`HandleError::Ended`]);
//! one the runner never issued as unknown ([`HandleError::Unknown`]). None of
//! them silently becomes a fresh container.
//!
//! Over stdio, and in an MCP session of protocol 2025-11-25 and older, the
//! connection or the session keeps the container: no handle is issued and
//! none is taken.

use code_mode_proto::KeptContainer;

/// The key of the handle in a result's `_meta` and a request's `_meta`.
pub const META_KEY: &str = "code-mode/session";

/// The argument of `run_python` (and the field of its result) that carries
/// the handle.
pub const ARGUMENT: &str = "session";

/// The `session` argument that starts a new kept container (its result
/// then carries the handle).
pub const NEW: &str = "new";

/// What every handle starts with (its format's version).
const PREFIX: &str = "cms2";

/// What a refused handle's message ends with: a handle is only for a
/// stateless client, whose call without `session` keeps nothing.
const START_NEW: &str = "send `session: \"new\"` to start a new sandbox that keeps its variables (the earlier ones are gone), or leave \
     `session` out to run in a fresh one that keeps nothing";

/// Why a handle cannot be used; each message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// Not a handle at all.
    #[error(
        "the `session` argument is not a session handle of code-mode (it must be the `session` value an earlier \
         run_python result returned, unchanged, or \"new\")"
    )]
    Malformed,
    /// Shaped like a handle, but its parts do not match its check: it was
    /// changed.
    #[error(
        "this session handle is not valid: it was changed (its parts do not match). Send the `session` value an \
         earlier run_python result returned, unchanged; or {START_NEW}"
    )]
    Altered,
    /// The runner holds no container under it, and never did as far as it
    /// knows.
    #[error(
        "no sandbox of this server is known under this session handle (it was not issued by this server's \
         sandbox-runners): {START_NEW}"
    )]
    Unknown,
    /// Its container was removed, or its runner stopped or restarted.
    #[error("the session of this handle has ended ({why}), and its variables with it: {START_NEW}")]
    Ended {
        /// Why it ended.
        why: String,
    },
    /// Another identity's.
    #[error("this session handle belongs to another client identity: use the handle your own runs returned")]
    Foreign,
    /// A cell of the session is running (and another waits).
    #[error("a run of this session is running already: wait for its result, then send the next")]
    Busy,
    /// Variables are not kept by this server.
    #[error("this server does not keep variables between runs (--keep-variables is off): send code without `session`")]
    NotKept,
    /// The client's connection or MCP session keeps its variables already.
    #[error(
        "this client's connection keeps its variables between runs by itself: send code without `session` (a \
         handle is only for stateless MCP 2026-07-28 clients over HTTP)"
    )]
    NotNeeded,
}

/// The handle of a kept container.
pub fn encode(at: &KeptContainer) -> String {
    format!("{PREFIX}.{}.{}.{}", at.runner, at.key, check(&at.runner, &at.key))
}

/// The check of a handle naming `runner` and `key`: 8 hex digits of a
/// SHA-256 over both.
fn check(runner: &str, key: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("code-mode session handle\0{runner}\0{key}"));
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// The kept container a handle names, if it is one.
pub fn decode(text: &str) -> Result<KeptContainer, HandleError> {
    let mut parts = text.split('.');
    let (Some(PREFIX), Some(runner), Some(key), Some(sum), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HandleError::Malformed);
    };
    let hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    // Both ids are UUIDs in simple form: 32 lower-case hex digits.
    if !hex(runner, 32) || !hex(key, 32) || !hex(sum, 8) {
        return Err(HandleError::Malformed);
    }
    if check(runner, key) != sum {
        return Err(HandleError::Altered);
    }
    Ok(KeptContainer { runner: runner.to_string(), key: key.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> KeptContainer {
        KeptContainer {
            runner: "0123456789abcdef0123456789abcdef".into(),
            key: "fedcba9876543210fedcba9876543210".into(),
        }
    }

    #[test]
    fn a_handle_names_its_container_and_decodes_back_to_it() {
        let handle = encode(&at());
        assert!(
            handle.starts_with("cms2.0123456789abcdef0123456789abcdef.fedcba9876543210fedcba9876543210."),
            "{handle}"
        );
        assert_eq!(decode(&handle), Ok(at()));
    }

    #[test]
    fn anything_else_is_refused_as_malformed_not_taken_as_a_fresh_session() {
        let good = encode(&at());
        let bad = [
            String::new(),
            "cms2".into(),
            good.replacen("cms2", "cms1", 1),
            format!("{good}.x"),
            good.to_uppercase(),
            good.replacen('0', "g", 1),
            good[..good.len() - 1].to_string(),
            "cms2.a.b.c".into(),
            "cms2...".into(),
        ];
        for text in bad {
            assert_eq!(decode(&text), Err(HandleError::Malformed), "{text:?}");
        }
    }

    #[test]
    fn a_handle_whose_runner_id_or_key_was_changed_is_not_valid_rather_than_ended() {
        let good = encode(&at());
        let flip = |c: char| if c == '0' { '1' } else { '0' };
        let mut runner: Vec<char> = good.chars().collect();
        runner[5] = flip(runner[5]);
        let mut key: Vec<char> = good.chars().collect();
        key[40] = flip(key[40]);
        for changed in [runner, key] {
            let changed: String = changed.into_iter().collect();
            assert_eq!(decode(&changed), Err(HandleError::Altered), "{changed}");
        }
        let said = HandleError::Altered.to_string();
        assert!(said.starts_with("this session handle is not valid"), "{said}");
        // The way out named to a stateless client keeps variables.
        for error in [HandleError::Altered, HandleError::Unknown, HandleError::Ended { why: "x".into() }] {
            assert!(error.to_string().contains("send `session: \"new\"` to start a new sandbox"), "{error}");
        }
    }
}
