//! What a login leaves behind for one remote server: the grant. It is
//! stored encrypted ([`crate::vault`]) and bound to the server's URL (the
//! record's place and its AEAD associated data), so it is only ever sent
//! there.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How the grant was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantKind {
    /// A person logged in (authorization code with PKCE).
    AuthorizationCode,
    /// A machine account (client credentials).
    ClientCredentials,
    /// Enterprise-managed authorization: an ID token exchanged for an
    /// ID-JAG, the ID-JAG for the access token (SEP-990).
    Enterprise,
    /// A caller's own OAuth token exchanged for one of this server
    /// (RFC 8693).
    TokenExchange,
}

/// How the client got its id at the authorization server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Given in the `auth` block.
    Preregistered,
    /// A Client ID Metadata Document URL.
    MetadataDocument,
    /// Dynamic Client Registration (RFC 7591) at the login.
    Dynamic,
}

/// The client code-mode is at the authorization server.
#[derive(Clone, Serialize, Deserialize)]
pub struct ClientInfo {
    /// Its id.
    pub id: String,
    /// Its secret, when the authorization server gave or the block names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// How it was registered.
    pub registration: Registration,
    /// The redirect URI it used.
    #[serde(default)]
    pub redirect_uri: String,
}

impl std::fmt::Debug for ClientInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInfo")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "[secret]"))
            .field("registration", &self.registration)
            .finish()
    }
}

/// The tokens.
#[derive(Clone, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token.
    pub access: String,
    /// The refresh token, if one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<String>,
    /// Seconds since the epoch when it was received.
    pub received_at: u64,
    /// Seconds since the epoch when the access token expires, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("refresh", &self.refresh.is_some())
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// True when the access token should be renewed before use: it expired,
    /// or less than half its life (at most 30 s) is left.
    pub fn needs_renewal(&self, now: u64) -> bool {
        let Some(expires_at) = self.expires_at else { return false };
        let lifetime = expires_at.saturating_sub(self.received_at);
        let margin = (lifetime / 2).clamp(1, 30);
        expires_at.saturating_sub(now) < margin
    }
}

/// One server's grant.
#[derive(Clone, Serialize, Deserialize)]
pub struct Grant {
    /// The server's URL: the grant is only ever used for it.
    pub resource: String,
    /// The `resource` parameter sent to the authorization server (RFC 8707):
    /// the Protected Resource Metadata's `resource`, which names this URL
    /// or a prefix of it.
    pub resource_indicator: String,
    /// How it was obtained.
    pub kind: GrantKind,
    /// The authorization server's issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The authorization server's metadata (RFC 8414) as discovered, so a
    /// renewal needs no discovery.
    #[serde(default)]
    pub metadata: serde_json::Value,
    /// The client code-mode is there (none for a client credentials grant,
    /// whose client is in the `auth` block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
    /// The tokens; `None` once a renewal was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// The scopes granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Scopes a server asked for that the grant lacks (its `403
    /// insufficient_scope`): the next login asks for them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted: Vec<String>,
    /// Why a new login is needed, once a renewal was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_needed: Option<String>,
    /// Seconds since the epoch of the last login.
    pub logged_in_at: u64,
    /// The identity (a caller of code-mode) whose grant this is; `None`:
    /// the deployment's one account for the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The account at the server the token acts as (the access token's
    /// `sub` when it is a JWT), for the audit record and the console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("resource", &self.resource)
            .field("kind", &self.kind)
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .field("tokens", &self.tokens)
            .field("scopes", &self.scopes)
            .field("wanted", &self.wanted)
            .field("login_needed", &self.login_needed)
            .field("identity", &self.identity)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl Grant {
    /// The access token when it can be used as it is now.
    pub fn usable_token(&self, now: u64) -> Option<&str> {
        if self.login_needed.is_some() {
            return None;
        }
        self.tokens.as_ref().filter(|t| !t.needs_renewal(now)).map(|t| t.access.as_str())
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The scopes of `text` (space-separated), in order, each once.
pub fn scope_list(text: &str) -> Vec<String> {
    union(&[], text.split_whitespace().map(str::to_string))
}

/// `base` followed by the items of `more` it lacks.
pub fn union(base: &[String], more: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = base.to_vec();
    for scope in more {
        if !out.contains(&scope) {
            out.push(scope);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_when_less_than_half_its_life_or_30_s_is_left() {
        let t = |received_at, expires_at| Tokens { access: "a".into(), refresh: None, received_at, expires_at };
        // A 5 s token: renewed from 2.5 s before expiry (rounded to 2).
        assert!(!t(100, Some(105)).needs_renewal(102));
        assert!(t(100, Some(105)).needs_renewal(104));
        // An hour: renewed in its last 30 s.
        assert!(!t(0, Some(3600)).needs_renewal(3500));
        assert!(t(0, Some(3600)).needs_renewal(3580));
        assert!(t(0, Some(3600)).needs_renewal(4000), "expired");
        assert!(!t(0, None).needs_renewal(u64::MAX), "no expiry said: used until refused");
    }

    #[test]
    fn debug_never_shows_a_token_or_secret() {
        let grant = Grant {
            resource: "https://x/mcp".into(),
            resource_indicator: "https://x/mcp".into(),
            kind: GrantKind::AuthorizationCode,
            issuer: None,
            metadata: serde_json::Value::Null,
            client: Some(ClientInfo {
                id: "c".into(),
                secret: Some("CLIENT-SECRET".into()),
                registration: Registration::Dynamic,
                redirect_uri: String::new(),
            }),
            tokens: Some(Tokens {
                access: "ACCESS-TOKEN".into(),
                refresh: Some("REFRESH-TOKEN".into()),
                received_at: 0,
                expires_at: None,
            }),
            scopes: vec![],
            wanted: vec![],
            login_needed: None,
            logged_in_at: 0,
            identity: None,
            subject: None,
        };
        let shown = format!("{grant:?}");
        for secret in ["CLIENT-SECRET", "ACCESS-TOKEN", "REFRESH-TOKEN"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
