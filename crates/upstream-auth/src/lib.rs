//! code-mode as an OAuth 2.1 client of the remote MCP servers it wraps.
//!
//! A remote server's `auth` block ([`spec`]) says how code-mode gets an
//! access token for it: a person logs in once (`code-mode login`, the
//! authorization-code grant with PKCE, [`login`] and [`flow`]), or a
//! machine account uses the client credentials grant, or the person's
//! enterprise ID token is exchanged for access ([`enterprise`], SEP-990), or
//! each caller's own OAuth token is exchanged for one of the server
//! ([`exchange`], RFC 8693, the caller's token handed over by
//! [`caller`]). The grant is kept
//! encrypted ([`vault`], under the key of [`key`]), bound to the server's
//! URL, and renewed before it expires; [`Upstream`] is one server's
//! authorization in a process, and [`AuthorizedHttp`] the HTTP client of
//! its MCP sessions, which puts the token on each request and reacts to
//! the server's `401` and `403`.
//!
//! The protocol steps (discovery, PKCE, registration, the code exchange,
//! refresh, client credentials) are rmcp's `transport::auth`; [`flow`]
//! says where it did not fit and what is done here instead.
//!
//! Nothing here logs or shows a token, a refresh token, a code or a
//! secret: the types that hold them redact their `Debug`, and errors name
//! servers, files, keys' sources and authorization servers only.

pub mod accounts;
mod assertion;
pub mod caller;
pub mod connect;
mod enterprise;
pub mod error;
pub mod exchange;
mod flow;
pub mod grant;
mod http;
pub mod key;
pub mod login;
mod per;
pub mod spec;
mod upstream;
pub mod vault;

pub use caller::{CallerTokens, caller_tokens, set_caller_tokens};
pub use error::{SpecError, UpstreamError, VaultError};
pub use grant::Grant;
pub use http::{AuthorizedHttp, refusal};
pub use key::Key;
pub use per::{is_per_identity, set_clients_identified};
pub use spec::AuthSpec;
pub use upstream::{Interactive, Mode, RENEW_TIMEOUT, Status, Upstream, set_default_vault};
pub use vault::Vault;

/// `text` with control characters dropped, cut to `max` characters: what
/// a remote party wrote, fit to quote in a message or a log line.
pub(crate) fn printable(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// Make rustls use ring, the provider the workspace builds (reqwest here is
/// built without one of its own): before any HTTP client is made.
pub(crate) fn ensure_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
