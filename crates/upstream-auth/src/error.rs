//! The errors of upstream authorization: one enum for the layer, each
//! variant saying what failed and where (the server, the file, the key's
//! source, the authorization server), and never a token, a secret or a
//! code.

use std::path::PathBuf;

/// Why a remote server cannot be reached with a login right now.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// Nobody logged in to this server (or the login was withdrawn: a
    /// refused refresh, a revoked grant). A person must log in again.
    #[error("{server} needs a login: {why}; run `{command}`")]
    NeedsLogin {
        /// The server.
        server: String,
        /// What happened.
        why: String,
        /// The command that logs in to it.
        command: String,
    },
    /// The server wants a scope the login did not grant; a new login asks
    /// for it.
    #[error("{server} needs more access (scope {scope}); run `{command}` to grant it")]
    NeedsScope {
        /// The server.
        server: String,
        /// The scope(s) its challenge named.
        scope: String,
        /// The command that logs in to it.
        command: String,
    },
    /// A login already granted the scope the server asked for, and it
    /// still refuses: logging in again would not help (the retry limit).
    #[error("{server} still refuses with insufficient_scope ({scope}) after a login that asked for it")]
    StillInsufficient {
        /// The server.
        server: String,
        /// The scope(s) its challenge named.
        scope: String,
    },
    /// The authorization server could not be reached, answered with an
    /// error, or did not answer in time; the login itself may be fine.
    #[error("{server}: the authorization server {at} {why}")]
    AuthorizationServer {
        /// The server.
        server: String,
        /// The authorization server (its issuer or token endpoint).
        at: String,
        /// What went wrong.
        why: String,
    },
    /// Enterprise-managed authorization failed: the ID token (missing,
    /// expired, from another identity provider), the identity provider or
    /// the authorization server.
    #[error("{server}: enterprise-managed authorization failed: {why}")]
    Enterprise {
        /// The server.
        server: String,
        /// What failed, naming the party and the `auth` key to fix.
        why: String,
    },
    /// Token exchange (RFC 8693) failed at the server's authorization
    /// server: it refused the caller's token, or could not be reached.
    #[error("{server}: token exchange at the authorization server {at} failed: {why}")]
    TokenExchange {
        /// The server.
        server: String,
        /// The authorization server (its issuer or token endpoint).
        at: String,
        /// What went wrong.
        why: String,
    },
    /// The caller has no OAuth token of its own to exchange (it
    /// authenticated with a static token, or its token expired).
    #[error("{server} acts upstream as each caller, by token exchange, and the caller {identity} {why}")]
    NoCallerToken {
        /// The server.
        server: String,
        /// The caller.
        identity: String,
        /// Why there is no token to exchange.
        why: String,
    },
    /// The stored tokens cannot be used (the store, the key).
    #[error("{server}: {source}")]
    Vault {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: VaultError,
    },
    /// The login flow failed (discovery, a check of RFC 9207 / 8414 /
    /// 9728, registration, the browser step, the code exchange).
    #[error("{server}: {why}")]
    Login {
        /// The server.
        server: String,
        /// Why.
        why: String,
    },
}

impl UpstreamError {
    /// True when a person must log in (again) before calls can work.
    pub fn needs_login(&self) -> bool {
        matches!(self, UpstreamError::NeedsLogin { .. })
    }

    /// True when the stored tokens cannot be read at all: startup must stop
    /// (no silent fallback to "not logged in").
    pub fn is_fatal(&self) -> bool {
        matches!(self, UpstreamError::Vault { .. })
    }
}

/// Why the encrypted token store cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VaultError {
    /// A token file exists but cannot be read or written.
    #[error("the token file {path} cannot be {doing}: {why}")]
    File {
        /// The file (or its folder).
        path: PathBuf,
        /// `read`, `written`, `locked`, ...
        doing: &'static str,
        /// The I/O error.
        why: String,
    },
    /// The session-state store (JetStream over NATS) failed.
    #[error("the state store holding the tokens ({key}) failed: {why}")]
    Store {
        /// The key in the store.
        key: String,
        /// What the store said.
        why: String,
    },
    /// Tokens are stored but no key to decrypt them was given.
    #[error(
        "tokens are stored in {at} but there is no key to decrypt them: set CODE_MODE_TOKEN_KEY or restore the key file {key_file}"
    )]
    KeyMissing {
        /// Where the tokens are.
        at: String,
        /// The key file looked for.
        key_file: PathBuf,
    },
    /// The key is not the one the tokens were stored with (or the record
    /// was altered, or moved from another server's place).
    #[error(
        "the tokens in {at} cannot be decrypted with the key from {key}: it is not the key they were stored with, or the record was altered"
    )]
    WrongKey {
        /// Where the tokens are.
        at: String,
        /// Where the key came from.
        key: String,
    },
    /// The key itself is unusable.
    #[error("the token key from {source_name} is unusable: {why}")]
    BadKey {
        /// Where it came from.
        source_name: String,
        /// Why.
        why: String,
    },
    /// A stored record that is not one this version writes.
    #[error("the token record in {at} is not readable: {why}")]
    Corrupt {
        /// Where.
        at: String,
        /// Why.
        why: String,
    },
    /// Another process holds the refresh lock for longer than allowed.
    #[error("the tokens in {at} are being renewed by another process that did not finish within {secs} s")]
    Busy {
        /// Where.
        at: String,
        /// The wait.
        secs: u64,
    },
}

/// A bad `auth` block: the key inside it and what is wrong (never the
/// value, which may be a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key \"auth.{key}\": {why}")]
pub struct SpecError {
    /// The key inside the block (`type`, `scopes`, `client_secret`, ...).
    pub key: String,
    /// What is wrong.
    pub why: String,
}

impl SpecError {
    pub(crate) fn new(key: &str, why: impl Into<String>) -> Self {
        Self { key: key.to_string(), why: why.into() }
    }
}
