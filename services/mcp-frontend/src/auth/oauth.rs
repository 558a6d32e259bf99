//! The OAuth 2.1 resource server side of the MCP authorization
//! specification: access tokens are JWTs an authorization server (the
//! issuer) signed, checked here against the issuer's published keys.
//!
//! A token passes when, in this order:
//!
//! - its header names an asymmetric algorithm (`RS*`, `PS*`, `ES256`,
//!   `ES384`, `EdDSA`): `none` and the `HS*` family are refused before any
//!   key is looked at, so a token "signed" with the issuer's public key as
//!   an HMAC secret goes nowhere;
//! - its signature verifies with the issuer's key of that `kid` (a key of
//!   the matching type; a key that names its own `alg` must name this one);
//! - `iss` is the issuer, `aud` (a string or a list) holds this server's
//!   resource URI (RFC 8707), `exp` is in the future and `nbf` (if any) in
//!   the past, each with [`LEEWAY`]; `sub` names the identity;
//! - its scopes (`scope`, space-separated, or `scp`) hold every
//!   `--oauth-scope` (else 403 `insufficient_scope`).
//!
//! One actor per process owns the issuer's keys ([`keys`]): it finds the
//! JWKS from the issuer's metadata (RFC 8414 authorization-server metadata,
//! else OpenID discovery) and caches it, off the request path. It fetches at
//! once at startup, again with a bounded backoff while no key is held or the
//! last fetch failed, and when a token names a `kid` it does not hold at
//! most once per [`REFETCH_EVERY`] (so a flood of made-up `kid`s costs the
//! issuer one request per interval). A token check waits on the network at
//! most [`KEY_WAIT`]; with no key held it is then refused as
//! [`Refusal::KeysUnavailable`] (503 at the gate), not as a bad token. An
//! issuer that cannot be reached leaves the keys held in force, and
//! `/healthz` says so (`oauth_issuer`).
//!
//! This server's Protected Resource Metadata (RFC 9728), naming the issuer,
//! is served at `/.well-known/oauth-protected-resource` (and with the
//! resource's path appended), and every 401 points there.

mod keys;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, UnparsedPublicKey};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use self::keys::{KEY_WAIT, KeyStatus, REFETCH_EVERY, RETRY_CAP, RETRY_FIRST};
use self::keys::{Keys, Missing};
use super::{AuthError, Identity};

/// Clock difference tolerated on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(60);
/// Longest time one request to the issuer may take.
pub const ISSUER_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest token accepted, in bytes.
const MAX_TOKEN: usize = 16 * 1024;

/// The OAuth settings (`--oauth-issuer`, `--oauth-resource`,
/// `--oauth-scope`, `--oauth-groups-claim`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthOptions {
    /// The authorization server's issuer identifier (a URL).
    pub issuer: String,
    /// This server's canonical URI: the `aud` a token must carry.
    pub resource: String,
    /// Scopes every token must hold.
    pub scopes: Vec<String>,
    /// The claim holding the identity's groups (`groups`): an array of
    /// strings, or one space-separated string; `None`: nobody has groups.
    pub groups_claim: Option<String>,
}

/// Most groups taken from one token's claim (the rest are dropped).
pub const MAX_GROUPS: usize = 64;

/// The groups a token's `claim` holds: an array of strings or one
/// space-separated string. An absent claim (or one of another type) is no
/// groups; a name that is not a valid group name (empty, too long, holding
/// a control character, a comma) is dropped, as are names past
/// [`MAX_GROUPS`].
pub fn groups_of(claims: &Value, claim: &str) -> Vec<String> {
    let names: Vec<&str> = match claims.get(claim) {
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(text)) => text.split_whitespace().collect(),
        _ => Vec::new(),
    };
    let mut groups: Vec<String> = Vec::new();
    for name in names {
        if groups.len() == MAX_GROUPS {
            break;
        }
        if super::check_group(name).is_ok() && !groups.iter().any(|g| g == name) {
            groups.push(name.to_string());
        }
    }
    groups
}

impl OAuthOptions {
    /// Where this server's Protected Resource Metadata is served: the
    /// resource's origin, `/.well-known/oauth-protected-resource`, then the
    /// resource's path (RFC 9728, section 3.1).
    pub fn metadata_url(&self) -> String {
        let (origin, path) = split_origin(&self.resource);
        format!("{origin}{METADATA_PATH}{}", path.trim_end_matches('/'))
    }

    /// The Protected Resource Metadata document.
    pub fn metadata(&self) -> Value {
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "code-mode",
        })
    }
}

/// The path of the Protected Resource Metadata (before the resource's own
/// path).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// `https://host:port` and the rest (`/mcp`) of a URL.
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// Why a token was refused: never any part of the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a JWT, or a part that does not decode.
    #[error("the token is not a well-formed JWT")]
    Malformed,
    /// `none`, HS*, or an algorithm not supported.
    #[error("the token's algorithm {0:?} is not accepted (asymmetric signatures only)")]
    Algorithm(String),
    /// No key of the issuer held has this `kid`.
    #[error("no key of the issuer matches the token")]
    UnknownKey,
    /// No key of the issuer is held: it could not be reached (why), so no
    /// token can be checked. Not the token's fault.
    #[error("the OAuth issuer's keys could not be loaded ({0}), so no token can be checked yet")]
    KeysUnavailable(String),
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    Signature,
    /// `iss` is not the issuer.
    #[error("the token is from another issuer")]
    Issuer,
    /// `aud` does not hold this resource.
    #[error("the token is for another audience")]
    Audience,
    /// `exp` is past (or missing).
    #[error("the token has expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("the token is not valid yet")]
    NotYet,
    /// No `sub`.
    #[error("the token names no subject")]
    NoSubject,
    /// A required scope is missing.
    #[error("the token lacks a required scope")]
    Scope,
}

/// A verified token's subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Its `sub`.
    pub identity: Identity,
    /// Its `exp`.
    pub expires_at: Option<u64>,
}

/// Checks access tokens (see the module's doc). Cheap to clone.
#[derive(Debug, Clone)]
pub struct OAuth {
    options: OAuthOptions,
    keys: Keys,
}

impl OAuth {
    /// Start the keys' actor, which fetches the issuer's keys at once (and
    /// again with backoff while that fails), until `cancel` fires. Returns
    /// without waiting for the issuer.
    pub fn start(options: OAuthOptions, cancel: CancellationToken) -> Result<Self, AuthError> {
        for (name, url) in [("--oauth-issuer", &options.issuer), ("--oauth-resource", &options.resource)] {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(AuthError::OAuthSetting { name, reason: format!("{url:?} is not an http(s) URL") });
            }
        }
        let keys = Keys::start(options.issuer.clone(), cancel);
        Ok(Self { options, keys })
    }

    /// What is known of the issuer: keys held, whether the last fetch
    /// reached it.
    pub fn issuer_status(&self) -> KeyStatus {
        self.keys.status()
    }

    /// The settings.
    pub fn options(&self) -> &OAuthOptions {
        &self.options
    }

    /// Check `token`.
    pub async fn verify(&self, token: &str) -> Result<Verified, Refusal> {
        if token.len() > MAX_TOKEN {
            return Err(Refusal::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(head), Some(body), Some(sig), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(Refusal::Malformed);
        };
        let header: Value = decode_json(head)?;
        let alg = header["alg"].as_str().ok_or(Refusal::Malformed)?.to_string();
        // The name is the sender's text: cut, and shown quoted in the log.
        let algorithm = Alg::of(&alg).ok_or_else(|| Refusal::Algorithm(alg.chars().take(16).collect()))?;
        let kid = header["kid"].as_str().map(str::to_string);
        let signature = URL_SAFE_NO_PAD.decode(sig).map_err(|_| Refusal::Malformed)?;
        let key = self.keys.find(kid, algorithm).await.map_err(|missing| match missing {
            Missing::UnknownKey => Refusal::UnknownKey,
            Missing::NoKeys(why) => Refusal::KeysUnavailable(why),
        })?;
        let signed = &token.as_bytes()[..head.len() + 1 + body.len()];
        key.verify(algorithm, signed, &signature).map_err(|_| Refusal::Signature)?;
        let claims: Value = decode_json(body)?;
        self.check_claims(&claims, now())
    }

    fn check_claims(&self, claims: &Value, now: u64) -> Result<Verified, Refusal> {
        if claims["iss"].as_str() != Some(self.options.issuer.as_str()) {
            return Err(Refusal::Issuer);
        }
        let audience = match &claims["aud"] {
            Value::String(one) => one == &self.options.resource,
            Value::Array(many) => many.iter().any(|a| a.as_str() == Some(self.options.resource.as_str())),
            _ => false,
        };
        if !audience {
            return Err(Refusal::Audience);
        }
        let leeway = LEEWAY.as_secs();
        match claims["exp"].as_u64() {
            Some(exp) if now < exp.saturating_add(leeway) => {}
            _ => return Err(Refusal::Expired),
        }
        if let Some(nbf) = claims.get("nbf") {
            match nbf.as_u64() {
                Some(nbf) if nbf <= now.saturating_add(leeway) => {}
                _ => return Err(Refusal::NotYet),
            }
        }
        let sub = claims["sub"].as_str().filter(|s| !s.is_empty() && s.len() <= 256).ok_or(Refusal::NoSubject)?;
        let held: Vec<&str> = match (&claims["scope"], &claims["scp"]) {
            (Value::String(s), _) => s.split_whitespace().collect(),
            (_, Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            (_, Value::String(s)) => s.split_whitespace().collect(),
            _ => Vec::new(),
        };
        if !self.options.scopes.iter().all(|s| held.contains(&s.as_str())) {
            return Err(Refusal::Scope);
        }
        let groups = self.options.groups_claim.as_deref().map(|claim| groups_of(claims, claim)).unwrap_or_default();
        Ok(Verified { identity: Identity::with_groups(sub, groups), expires_at: claims["exp"].as_u64() })
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn decode_json(part: &str) -> Result<Value, Refusal> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| Refusal::Malformed)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| Refusal::Malformed)?;
    if value.is_object() { Ok(value) } else { Err(Refusal::Malformed) }
}

/// The signature algorithms accepted: asymmetric only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alg {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
    EdDsa,
}

impl Alg {
    fn of(name: &str) -> Option<Alg> {
        Some(match name {
            "RS256" => Alg::Rs256,
            "RS384" => Alg::Rs384,
            "RS512" => Alg::Rs512,
            "PS256" => Alg::Ps256,
            "PS384" => Alg::Ps384,
            "PS512" => Alg::Ps512,
            "ES256" => Alg::Es256,
            "ES384" => Alg::Es384,
            "EdDSA" => Alg::EdDsa,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Rs384 => "RS384",
            Alg::Rs512 => "RS512",
            Alg::Ps256 => "PS256",
            Alg::Ps384 => "PS384",
            Alg::Ps512 => "PS512",
            Alg::Es256 => "ES256",
            Alg::Es384 => "ES384",
            Alg::EdDsa => "EdDSA",
        }
    }
}

/// One public key of the issuer.
#[derive(Debug, Clone)]
enum Key {
    Rsa { n: Vec<u8>, e: Vec<u8>, alg: Option<String> },
    Ec { crv: String, point: Vec<u8>, alg: Option<String> },
    Ed { x: Vec<u8>, alg: Option<String> },
}

impl Key {
    /// A key from one JWK (`None`: a kind not used for signatures here).
    fn from_jwk(jwk: &Value) -> Option<Key> {
        if jwk["use"].as_str().is_some_and(|u| u != "sig") {
            return None;
        }
        let field = |name: &str| jwk[name].as_str().and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
        let alg = jwk["alg"].as_str().map(str::to_string);
        match jwk["kty"].as_str()? {
            "RSA" => Some(Key::Rsa { n: field("n")?, e: field("e")?, alg }),
            "EC" => {
                let mut point = vec![4u8];
                point.extend(field("x")?);
                point.extend(field("y")?);
                Some(Key::Ec { crv: jwk["crv"].as_str()?.to_string(), point, alg })
            }
            "OKP" if jwk["crv"] == "Ed25519" => Some(Key::Ed { x: field("x")?, alg }),
            _ => None,
        }
    }

    /// Whether this key may check a signature of `alg`.
    fn fits(&self, alg: Alg) -> bool {
        let (kind_fits, named) = match self {
            Key::Rsa { alg: named, .. } => {
                (matches!(alg, Alg::Rs256 | Alg::Rs384 | Alg::Rs512 | Alg::Ps256 | Alg::Ps384 | Alg::Ps512), named)
            }
            Key::Ec { crv, alg: named, .. } => {
                ((crv == "P-256" && alg == Alg::Es256) || (crv == "P-384" && alg == Alg::Es384), named)
            }
            Key::Ed { alg: named, .. } => (alg == Alg::EdDsa, named),
        };
        kind_fits && named.as_deref().is_none_or(|n| n == alg.name())
    }

    fn verify(&self, alg: Alg, message: &[u8], sig: &[u8]) -> Result<(), ()> {
        if !self.fits(alg) {
            return Err(());
        }
        match self {
            Key::Rsa { n, e, .. } => {
                let params: &signature::RsaParameters = match alg {
                    Alg::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    Alg::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    Alg::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    Alg::Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
                    Alg::Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
                    Alg::Ps512 => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return Err(()),
                };
                signature::RsaPublicKeyComponents { n, e }.verify(params, message, sig).map_err(|_| ())
            }
            Key::Ec { point, .. } => {
                let algorithm: &dyn signature::VerificationAlgorithm = match alg {
                    Alg::Es256 => &signature::ECDSA_P256_SHA256_FIXED,
                    Alg::Es384 => &signature::ECDSA_P384_SHA384_FIXED,
                    _ => return Err(()),
                };
                UnparsedPublicKey::new(algorithm, point).verify(message, sig).map_err(|_| ())
            }
            Key::Ed { x, .. } => UnparsedPublicKey::new(&signature::ED25519, x).verify(message, sig).map_err(|_| ()),
        }
    }
}

/// The issuer's metadata and where it was read: its authorization-server
/// metadata (RFC 8414), else its OpenID configuration (both places OpenID
/// discovery allows); the document must name the same issuer. The keys'
/// actor reads `jwks_uri` from it, the console's OAuth login its
/// `authorization_endpoint` and `token_endpoint`.
pub async fn issuer_metadata(client: &reqwest::Client, issuer: &str) -> Result<(String, Value), String> {
    let (origin, path) = split_origin(issuer);
    let path = path.trim_end_matches('/');
    let places = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    let mut last = String::new();
    for url in places {
        match get_json(client, &url).await {
            Ok(metadata) => {
                if metadata["issuer"].as_str() != Some(issuer) {
                    last = format!("{url} names another issuer ({})", metadata["issuer"]);
                    continue;
                }
                return Ok((url, metadata));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    let answer = client.get(url).send().await.map_err(|e| format!("{url}: {}", code_mode_core::error::report(&e)))?;
    if !answer.status().is_success() {
        return Err(format!("{url}: HTTP {}", answer.status()));
    }
    answer.json::<Value>().await.map_err(|e| format!("{url}: {}", code_mode_core::error::report(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth() -> OAuth {
        OAuth {
            options: OAuthOptions {
                issuer: "https://issuer.example".into(),
                resource: "https://mcp.example/mcp".into(),
                scopes: vec!["mcp:run".into()],
                groups_claim: Some("groups".into()),
            },
            keys: Keys::idle(),
        }
    }

    #[test]
    fn claims_are_checked_for_issuer_audience_time_subject_and_scope() {
        let o = oauth();
        let now = 1_000_000;
        let good = serde_json::json!({"iss": "https://issuer.example", "aud": ["x", "https://mcp.example/mcp"],
            "exp": now + 10, "nbf": now - 10, "sub": "svc", "scope": "a mcp:run"});
        assert_eq!(o.check_claims(&good, now).unwrap().identity.as_str(), "svc");
        let with = |key: &str, value: Value| {
            let mut c = good.clone();
            c[key] = value;
            o.check_claims(&c, now)
        };
        assert_eq!(with("iss", "https://other.example".into()), Err(Refusal::Issuer));
        assert_eq!(with("aud", "https://other.example/mcp".into()), Err(Refusal::Audience));
        assert_eq!(with("exp", (now - 61).into()), Err(Refusal::Expired));
        assert!(with("exp", (now - 59).into()).is_ok(), "within the leeway");
        assert_eq!(with("nbf", (now + 61).into()), Err(Refusal::NotYet));
        assert_eq!(with("sub", Value::Null), Err(Refusal::NoSubject));
        assert_eq!(with("scope", "a b".into()), Err(Refusal::Scope));
    }

    #[test]
    fn the_groups_claim_may_be_an_array_or_a_space_separated_string_and_an_absent_one_is_no_groups() {
        let o = oauth();
        let now = 1_000_000;
        let claims = |groups: Value| {
            let mut c = serde_json::json!({"iss": "https://issuer.example", "aud": "https://mcp.example/mcp",
                "exp": now + 10, "sub": "svc", "scope": "mcp:run"});
            if !groups.is_null() {
                c["groups"] = groups;
            }
            o.check_claims(&c, now).unwrap().identity
        };
        assert_eq!(claims(serde_json::json!(["security", "ops", 7, "security"])).groups(), ["security", "ops"]);
        assert_eq!(claims("security  ops".into()).groups(), ["security", "ops"]);
        assert!(claims(Value::Null).groups().is_empty(), "absent: no groups");
        assert!(claims(serde_json::json!({"a": 1})).groups().is_empty(), "another type: no groups");
        let long = "g".repeat(65);
        assert_eq!(claims(serde_json::json!(["", long, "a,b", "ok"])).groups(), ["ok"], "bad names are dropped");
        let many: Vec<String> = (0..100).map(|i| format!("g{i}")).collect();
        assert_eq!(claims(serde_json::json!(many)).groups().len(), MAX_GROUPS);
        let mut without = o.clone();
        without.options.groups_claim = None;
        let c = serde_json::json!({"iss": "https://issuer.example", "aud": "https://mcp.example/mcp",
            "exp": now + 10, "sub": "svc", "scope": "mcp:run", "groups": ["security"]});
        assert!(without.check_claims(&c, now).unwrap().identity.groups().is_empty(), "no claim named: no groups");
    }

    #[test]
    fn the_metadata_address_puts_the_well_known_path_before_the_resources_path() {
        let o = oauth();
        assert_eq!(o.options.metadata_url(), "https://mcp.example/.well-known/oauth-protected-resource/mcp");
        assert_eq!(o.options.metadata()["authorization_servers"][0], "https://issuer.example");
    }

    #[tokio::test]
    async fn none_and_hmac_algorithms_are_refused_before_any_key_is_looked_at() {
        let o = oauth();
        let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        for alg in ["none", "HS256", "HS512", "RS1", "ES512X"] {
            let token = format!("{}.{}.{}", part(serde_json::json!({"alg": alg})), part(serde_json::json!({})), "AA");
            assert_eq!(o.verify(&token).await, Err(Refusal::Algorithm(alg.into())));
        }
        assert_eq!(o.verify("not-a-jwt").await, Err(Refusal::Malformed));
    }
}
