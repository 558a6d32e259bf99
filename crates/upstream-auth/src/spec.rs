//! The `auth` block of a remote server: how code-mode gets an access token
//! for it. The same JSON object is read from an `mcpServers` entry and
//! from `--auth` on the command line:
//!
//! ```json
//! {"type": "oauth", "scopes": ["repo:read"], "client_id": "...", "client_secret": "${VAR}"}
//! {"type": "client_credentials", "client_id": "...", "client_secret": "${VAR}"}
//! {"type": "client_credentials", "client_id": "...", "private_key_file": "key.pem"}
//! {"type": "enterprise", "client_id": "...", "client_secret": "${VAR}",
//!  "idp_issuer": "https://idp.example", "idp_client_id": "...", "id_token_file": "id_token.jwt"}
//! {"type": "token_exchange", "client_id": "...", "client_secret": "${VAR}", "scopes": ["repo:read"]}
//! ```
//!
//! `${VAR}` in a string is taken from code-mode's own environment, so
//! secrets stay out of the file. Parsing checks every key and says which is
//! wrong; a secret's value is never shown (its `Debug` is redacted).

use std::fmt;
use std::path::Path;

use serde_json::Value;

use crate::error::SpecError;

/// A secret string (a client secret, a private key): never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[secret]")
    }
}

/// How code-mode authenticates to one remote server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthSpec {
    /// A person logs in (authorization code with PKCE); code-mode keeps and
    /// renews the tokens.
    OAuth(OAuthSpec),
    /// A machine account (the client credentials grant), no person needed.
    ClientCredentials(ClientCredentialsSpec),
    /// Enterprise-managed authorization (SEP-990): the person's ID token
    /// from the enterprise identity provider is exchanged there for an
    /// identity assertion (ID-JAG), which the server's authorization server
    /// takes for an access token. No login at the server itself.
    Enterprise(EnterpriseSpec),
    /// Token exchange (RFC 8693): each caller's own OAuth access token
    /// (from the frontend's issuer) is traded at the server's
    /// authorization server for one whose audience is the server, per
    /// identity, with no person's step. Only for callers who
    /// authenticated by OAuth.
    TokenExchange(TokenExchangeSpec),
}

/// Token exchange's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchangeSpec {
    /// code-mode's client at the server's authorization server.
    pub client_id: String,
    /// That client's secret: the exchange is made by a confidential
    /// client, and the same client lists the server's tools with a client
    /// credentials token (never used for a call).
    pub client_secret: Secret,
    /// The authorization server's token endpoint; `None`: discovered from
    /// the server (its Protected Resource Metadata, then the authorization
    /// server's metadata).
    pub token_endpoint: Option<String>,
    /// An `audience` to ask for besides the `resource` (the server's URL),
    /// for authorization servers that name their resources so.
    pub audience: Option<String>,
    /// Scopes to ask for (empty: none named).
    pub scopes: Vec<String>,
}

/// Enterprise-managed authorization's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnterpriseSpec {
    /// code-mode's client at the MCP server's authorization server.
    pub client_id: String,
    /// That client's secret (`client_secret_basic`, or `_post` when the
    /// authorization server takes only that); none: a public client.
    pub client_secret: Option<Secret>,
    /// The enterprise identity provider's issuer: the ID token must be its,
    /// and is sent nowhere else.
    pub idp_issuer: String,
    /// The identity provider's token endpoint; `None`: from its metadata
    /// (OpenID discovery at the issuer).
    pub idp_token_endpoint: Option<String>,
    /// code-mode's client at the identity provider.
    pub idp_client_id: String,
    /// That client's secret, if it is a confidential client.
    pub idp_client_secret: Option<Secret>,
    /// Where the person's ID token comes from.
    pub id_token: IdTokenSource,
    /// Scopes to ask for (empty: none named).
    pub scopes: Vec<String>,
}

/// Where the ID token of enterprise-managed authorization is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdTokenSource {
    /// Given in the block (usually `${VAR}`), read once at start.
    Value(Secret),
    /// A file, read again at each exchange, so a tool that keeps the
    /// person's ID token fresh there renews code-mode's access too.
    File(std::path::PathBuf),
}

/// The authorization-code grant's settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthSpec {
    /// Scopes to ask for; empty: those the server's challenge names, else
    /// those its Protected Resource Metadata lists, else none.
    pub scopes: Vec<String>,
    /// A client registered with the authorization server beforehand (it
    /// comes first, before a Client ID Metadata Document and Dynamic
    /// Client Registration).
    pub client_id: Option<String>,
    /// That client's secret, when it is a confidential client.
    pub client_secret: Option<Secret>,
    /// An HTTPS URL where this client's metadata document is published, used
    /// as the client id with authorization servers that take them.
    pub client_metadata_url: Option<String>,
    /// The loopback redirect URI to use (a pre-registered client's
    /// registered one); default: `http://127.0.0.1:<free port>/callback`.
    pub redirect_uri: Option<String>,
    /// The name to register under (Dynamic Client Registration).
    pub client_name: Option<String>,
    /// Whose account the server's calls act as (`"per"`); `None`: not
    /// said, which is [`Per::Identity`] when the frontend authenticates
    /// its clients and [`Per::Deployment`] otherwise
    /// ([`crate::Upstream::is_per_identity`]).
    pub per: Option<Per>,
}

/// Whose account an `oauth` server's calls act as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// Each identity connects its own account and each call carries the
    /// caller's own token.
    Identity,
    /// One account for the whole deployment (`code-mode login`), shared by
    /// every caller.
    Deployment,
}

/// The client credentials grant's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCredentialsSpec {
    /// The client.
    pub client_id: String,
    /// How it proves who it is.
    pub credential: Credential,
    /// Scopes to ask for (empty: none named).
    pub scopes: Vec<String>,
}

/// How a machine client authenticates at the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A shared secret (`client_secret_basic` or `_post`, as the
    /// authorization server offers).
    Secret(Secret),
    /// A private key signing a JWT assertion (`private_key_jwt`, RFC 7523).
    PrivateKey {
        /// The PKCS#8 PEM.
        pem: Secret,
        /// `ES256` or `RS256`.
        algorithm: SigningAlgorithm,
    },
}

/// The JWS algorithms a client assertion can be signed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningAlgorithm {
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
}

impl SigningAlgorithm {
    /// The JWS name.
    pub fn as_str(self) -> &'static str {
        match self {
            SigningAlgorithm::Es256 => "ES256",
            SigningAlgorithm::Rs256 => "RS256",
        }
    }
}

const OAUTH_KEYS: &[&str] =
    &["type", "scopes", "client_id", "client_secret", "client_metadata_url", "redirect_uri", "client_name", "per"];
const CC_KEYS: &[&str] =
    &["type", "scopes", "client_id", "client_secret", "private_key", "private_key_file", "signing_algorithm"];
const ENTERPRISE_KEYS: &[&str] = &[
    "type",
    "scopes",
    "client_id",
    "client_secret",
    "idp_issuer",
    "idp_token_endpoint",
    "idp_client_id",
    "idp_client_secret",
    "id_token",
    "id_token_file",
];
const EXCHANGE_KEYS: &[&str] = &["type", "scopes", "client_id", "client_secret", "token_endpoint", "audience"];
const TYPES: &str = "\"oauth\" (a person logs in), \"client_credentials\" (a machine account), \"enterprise\" (an ID token from the enterprise identity provider) or \"token_exchange\" (each caller's own OAuth token, exchanged)";

impl AuthSpec {
    /// Read an `auth` block. `lookup` answers `${VAR}`; `base` is the folder
    /// a relative `private_key_file` is taken from. A bare string is the
    /// block's `type` alone (`"oauth"`).
    pub fn from_json(value: &Value, lookup: &dyn Fn(&str) -> Option<String>, base: &Path) -> Result<Self, SpecError> {
        let object = match value {
            Value::String(kind) => {
                let mut map = serde_json::Map::new();
                map.insert("type".into(), Value::String(kind.clone()));
                map
            }
            Value::Object(map) => map.clone(),
            _ => return Err(SpecError::new("type", "expected an object with \"type\", or the type as a string")),
        };
        let reader = Reader { map: &object, lookup };
        let kind = reader.string("type")?.ok_or_else(|| SpecError::new("type", format!("missing: {TYPES}")))?;
        match kind.as_str() {
            "oauth" => {
                reader.only(OAUTH_KEYS)?;
                let spec = OAuthSpec {
                    scopes: reader.scopes()?,
                    client_id: reader.string("client_id")?,
                    client_secret: reader.string("client_secret")?.map(Secret),
                    client_metadata_url: reader.string("client_metadata_url")?,
                    redirect_uri: reader.string("redirect_uri")?,
                    client_name: reader.string("client_name")?,
                    per: match reader.string("per")?.as_deref() {
                        None => None,
                        Some("identity") => Some(Per::Identity),
                        Some("deployment") => Some(Per::Deployment),
                        Some(other) => {
                            return Err(SpecError::new(
                                "per",
                                format!(
                                    "{other:?}: expected \"identity\" (each caller connects its own account) or \"deployment\" (one shared account)"
                                ),
                            ));
                        }
                    },
                };
                if spec.client_secret.is_some() && spec.client_id.is_none() {
                    return Err(SpecError::new(
                        "client_secret",
                        "given without \"client_id\" (the secret of which client?)",
                    ));
                }
                if let Some(url) = &spec.client_metadata_url {
                    check_metadata_url(url)?;
                }
                if let Some(uri) = &spec.redirect_uri {
                    crate::login::check_loopback(uri).map_err(|why| SpecError::new("redirect_uri", why))?;
                }
                Ok(AuthSpec::OAuth(spec))
            }
            "client_credentials" => {
                reader.only(CC_KEYS)?;
                let client_id = reader
                    .string("client_id")?
                    .ok_or_else(|| SpecError::new("client_id", "missing: the machine client's id"))?;
                let secret = reader.string("client_secret")?;
                let key = reader.string("private_key")?;
                let key_file = reader.string("private_key_file")?;
                let credential = match (secret, key, key_file) {
                    (Some(secret), None, None) => Credential::Secret(Secret(secret)),
                    (None, Some(pem), None) => {
                        Credential::PrivateKey { pem: Secret(pem), algorithm: reader.algorithm()? }
                    }
                    (None, None, Some(file)) => {
                        let path = base.join(&file);
                        let pem = std::fs::read_to_string(&path).map_err(|e| {
                            SpecError::new("private_key_file", format!("cannot read {}: {e}", path.display()))
                        })?;
                        Credential::PrivateKey { pem: Secret(pem), algorithm: reader.algorithm()? }
                    }
                    (None, None, None) => {
                        return Err(SpecError::new(
                            "client_secret",
                            "missing: give \"client_secret\", \"private_key\" or \"private_key_file\"",
                        ));
                    }
                    _ => {
                        return Err(SpecError::new(
                            "client_secret",
                            "give one of \"client_secret\", \"private_key\" and \"private_key_file\", not several",
                        ));
                    }
                };
                if let Credential::PrivateKey { pem, algorithm } = &credential {
                    crate::assertion::check_key(pem.expose(), *algorithm).map_err(|why| {
                        SpecError::new(
                            if object.contains_key("private_key") { "private_key" } else { "private_key_file" },
                            why,
                        )
                    })?;
                }
                Ok(AuthSpec::ClientCredentials(ClientCredentialsSpec {
                    client_id,
                    credential,
                    scopes: reader.scopes()?,
                }))
            }
            "enterprise" => {
                reader.only(ENTERPRISE_KEYS)?;
                enterprise(&reader, base).map(AuthSpec::Enterprise)
            }
            "token_exchange" => {
                reader.only(EXCHANGE_KEYS)?;
                token_exchange(&reader).map(AuthSpec::TokenExchange)
            }
            other => Err(SpecError::new("type", format!("{other:?} is not a type: {TYPES}"))),
        }
    }

    /// `oauth`, `client_credentials`, `enterprise` or `token_exchange`,
    /// for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            AuthSpec::OAuth(_) => "oauth",
            AuthSpec::ClientCredentials(_) => "client_credentials",
            AuthSpec::Enterprise(_) => "enterprise",
            AuthSpec::TokenExchange(_) => "token_exchange",
        }
    }

    /// True when each identity has its own token for the server (token
    /// exchange): its calls go over a session of that identity's own,
    /// never the shared one.
    pub fn is_per_identity(&self) -> bool {
        matches!(self, AuthSpec::TokenExchange(_))
    }

    /// True when a person must log in (the authorization-code grant).
    pub fn is_interactive(&self) -> bool {
        matches!(self, AuthSpec::OAuth(_))
    }
}

/// The `enterprise` block's settings.
fn enterprise(reader: &Reader<'_>, base: &Path) -> Result<EnterpriseSpec, SpecError> {
    let required =
        |key: &str, what: &str| reader.string(key)?.ok_or_else(|| SpecError::new(key, format!("missing: {what}")));
    let client_id = required("client_id", "code-mode's client at the MCP server's authorization server")?;
    let idp_issuer = required("idp_issuer", "the enterprise identity provider's issuer URL")?;
    check_endpoint("idp_issuer", &idp_issuer)?;
    let idp_token_endpoint = reader.string("idp_token_endpoint")?;
    if let Some(endpoint) = &idp_token_endpoint {
        check_endpoint("idp_token_endpoint", endpoint)?;
    }
    let idp_client_id = required("idp_client_id", "code-mode's client at the identity provider")?;
    let id_token = match (reader.string("id_token")?, reader.string("id_token_file")?) {
        (Some(token), None) => IdTokenSource::Value(Secret(token)),
        (None, Some(file)) => IdTokenSource::File(base.join(file)),
        (None, None) => {
            return Err(SpecError::new(
                "id_token",
                "missing: give \"id_token\" (e.g. \"${VAR}\") or \"id_token_file\" (the person's ID token from the identity provider)",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(SpecError::new("id_token", "give one of \"id_token\" and \"id_token_file\", not both"));
        }
    };
    Ok(EnterpriseSpec {
        client_id,
        client_secret: reader.string("client_secret")?.map(Secret),
        idp_issuer,
        idp_token_endpoint,
        idp_client_id,
        idp_client_secret: reader.string("idp_client_secret")?.map(Secret),
        id_token,
        scopes: reader.scopes()?,
    })
}

/// The `token_exchange` block's settings.
fn token_exchange(reader: &Reader<'_>) -> Result<TokenExchangeSpec, SpecError> {
    let client_id = reader.string("client_id")?.ok_or_else(|| {
        SpecError::new("client_id", "missing: code-mode's client at the server's authorization server")
    })?;
    let client_secret = reader.string("client_secret")?.map(Secret).ok_or_else(|| {
        SpecError::new(
            "client_secret",
            "missing: token exchange is made by a confidential client (give \"${VAR}\" to keep it out of the file)",
        )
    })?;
    let token_endpoint = reader.string("token_endpoint")?;
    if let Some(endpoint) = &token_endpoint {
        check_endpoint("token_endpoint", endpoint)?;
    }
    Ok(TokenExchangeSpec {
        client_id,
        client_secret,
        token_endpoint,
        audience: reader.string("audience")?,
        scopes: reader.scopes()?,
    })
}

/// An identity provider's URL: HTTPS, or HTTP on a loopback address (a
/// local test), with no user or fragment; the ID token goes there.
fn check_endpoint(key: &str, url: &str) -> Result<(), SpecError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| SpecError::new(key, format!("not a URL ({e})")))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(host)) => host.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if !(parsed.scheme() == "https" || parsed.scheme() == "http" && loopback) {
        return Err(SpecError::new(key, "must be an https:// URL (http:// only on a loopback address)"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.fragment().is_some() {
        return Err(SpecError::new(key, "must carry no user, password or fragment"));
    }
    Ok(())
}

/// A Client ID Metadata Document URL: HTTPS with a path (the spec's rule).
fn check_metadata_url(url: &str) -> Result<(), SpecError> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| SpecError::new("client_metadata_url", format!("not a URL ({e})")))?;
    if parsed.scheme() != "https" || parsed.path() == "/" || parsed.host_str().is_none() {
        return Err(SpecError::new("client_metadata_url", "must be an https:// URL with a path"));
    }
    Ok(())
}

struct Reader<'a> {
    map: &'a serde_json::Map<String, Value>,
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Reader<'_> {
    fn only(&self, known: &[&str]) -> Result<(), SpecError> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(key) => Err(SpecError::new(key, format!("unknown key (known here: {})", known.join(", ")))),
            None => Ok(()),
        }
    }

    fn string(&self, key: &str) -> Result<Option<String>, SpecError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => expand(key, s, self.lookup).map(Some),
            Some(_) => Err(SpecError::new(key, "expected a non-empty string")),
        }
    }

    fn scopes(&self) -> Result<Vec<String>, SpecError> {
        let Some(value) = self.map.get("scopes") else { return Ok(Vec::new()) };
        let Value::Array(items) = value else { return Err(SpecError::new("scopes", "expected a list of strings")) };
        let mut scopes = Vec::with_capacity(items.len());
        for item in items {
            match item.as_str() {
                Some(s) if !s.is_empty() && !s.contains(char::is_whitespace) => scopes.push(s.to_string()),
                _ => return Err(SpecError::new("scopes", "expected a list of scope names (no spaces)")),
            }
        }
        Ok(scopes)
    }

    fn algorithm(&self) -> Result<SigningAlgorithm, SpecError> {
        match self.string("signing_algorithm")?.as_deref() {
            None | Some("ES256") => Ok(SigningAlgorithm::Es256),
            Some("RS256") => Ok(SigningAlgorithm::Rs256),
            Some(other) => {
                Err(SpecError::new("signing_algorithm", format!("{other:?}: expected \"ES256\" or \"RS256\"")))
            }
        }
    }
}

/// Replace each `${VAR}` in `value` from `lookup`.
fn expand(key: &str, value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, SpecError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(SpecError::new(key, "\"${\" without a closing \"}\""));
        };
        let var = &after[..end];
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(SpecError::new(key, format!("${{{var}}} is not a variable name")));
        }
        let Some(found) = lookup(var) else {
            return Err(SpecError::new(key, format!("${{{var}}} is not set in code-mode's environment")));
        };
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_token_exchange_block_reads_its_client_and_names_a_wrong_or_missing_key_never_the_secret() {
        let block = json!({"type": "token_exchange", "client_id": "gw", "client_secret": "${SECRET}",
            "scopes": ["whoami"], "audience": "tracker"});
        let AuthSpec::TokenExchange(spec) = parse(block.clone()).unwrap() else { panic!("a token_exchange block") };
        assert_eq!(spec.client_id, "gw");
        assert_eq!(spec.client_secret.expose(), "s3cret");
        assert_eq!((spec.scopes.as_slice(), spec.audience.as_deref()), (&["whoami".to_string()][..], Some("tracker")));
        assert_eq!(spec.token_endpoint, None, "discovered from the server");
        assert!(!format!("{spec:?}").contains("s3cret"), "the secret is never shown");
        assert!(parse(block.clone()).unwrap().is_per_identity());
        let with = |key: &str, value: Value| {
            let mut b = block.clone();
            b[key] = value;
            parse(b).unwrap_err()
        };
        assert_eq!(with("token_endpoint", json!("http://as.example/token")).key, "token_endpoint");
        assert_eq!(with("subject_token", json!("x")).key, "subject_token", "unknown key");
        assert_eq!(with("scopes", json!("a b")).key, "scopes");
        for key in ["client_id", "client_secret"] {
            let mut b = block.clone();
            b.as_object_mut().unwrap().remove(key);
            let e = parse(b).unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.to_string().contains("missing"), "{e}");
        }
    }

    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<AuthSpec, SpecError> {
        AuthSpec::from_json(&value, &|name| (name == "SECRET").then(|| "s3cret".to_string()), Path::new("."))
    }

    #[test]
    fn an_oauth_block_reads_its_scopes_and_preregistered_client_with_the_secret_from_the_environment() {
        let spec =
            parse(json!({"type": "oauth", "scopes": ["a", "b"], "client_id": "c", "client_secret": "${SECRET}"}))
                .unwrap();
        let AuthSpec::OAuth(oauth) = spec else { panic!() };
        assert_eq!(oauth.scopes, ["a", "b"]);
        assert_eq!(oauth.client_secret.as_ref().unwrap().expose(), "s3cret");
        assert!(!format!("{oauth:?}").contains("s3cret"), "a secret is never shown");
        assert_eq!(parse(json!("oauth")).unwrap(), AuthSpec::OAuth(OAuthSpec::default()));
    }

    #[test]
    fn a_bad_block_names_the_key_and_never_the_secret() {
        let e = parse(json!({"type": "oauth", "client_secret": "x"})).unwrap_err();
        assert_eq!(e.key, "client_secret");
        let e = parse(json!({"type": "oauth", "scope": ["a"]})).unwrap_err();
        assert_eq!(e.key, "scope");
        let e = parse(json!({"type": "password"})).unwrap_err();
        assert_eq!(e.key, "type");
        let e = parse(json!({"type": "client_credentials", "client_id": "c", "client_secret": "${NOPE}"})).unwrap_err();
        assert!(e.to_string().contains("${NOPE} is not set"), "{e}");
        let e = parse(json!({"type": "oauth", "redirect_uri": "https://evil.example/cb"})).unwrap_err();
        assert_eq!(e.key, "redirect_uri");
        let e = parse(json!({"type": "oauth", "client_metadata_url": "http://x.example/m.json"})).unwrap_err();
        assert_eq!(e.key, "client_metadata_url");
        let e = parse(json!({"type": "client_credentials", "client_id": "c"})).unwrap_err();
        assert!(e.to_string().contains("client_secret"), "{e}");
    }

    #[test]
    fn an_oauth_block_says_whose_account_with_per_and_a_bad_value_names_the_key() {
        let per = |block: Value| match parse(block) {
            Ok(AuthSpec::OAuth(spec)) => Ok(spec.per),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(per(json!({"type": "oauth", "per": "identity"})).unwrap(), Some(Per::Identity));
        assert_eq!(per(json!({"type": "oauth", "per": "deployment"})).unwrap(), Some(Per::Deployment));
        assert_eq!(per(json!({"type": "oauth"})).unwrap(), None, "not said: decided by the frontend's authentication");
        for bad in [json!("user"), json!(true), json!("")] {
            let e = per(json!({"type": "oauth", "per": bad})).unwrap_err();
            assert_eq!(e.key, "per", "{e}");
        }
        let e = per(json!({"type": "oauth", "per": "team"})).unwrap_err();
        assert!(e.to_string().contains("\"identity\"") && e.to_string().contains("\"deployment\""), "{e}");
        let e = parse(json!({"type": "client_credentials", "client_id": "c", "client_secret": "x", "per": "identity"}))
            .unwrap_err();
        assert_eq!(e.key, "per", "only an oauth block takes per: {e}");
    }

    #[test]
    fn an_enterprise_block_reads_both_clients_and_the_id_token_and_names_a_wrong_key() {
        let block = json!({"type": "enterprise", "client_id": "mcp-client", "client_secret": "${SECRET}",
            "idp_issuer": "https://idp.example", "idp_client_id": "idp-client", "id_token": "${SECRET}",
            "scopes": ["files.read"]});
        let AuthSpec::Enterprise(spec) = parse(block.clone()).unwrap() else { panic!("an enterprise block") };
        assert_eq!((spec.client_id.as_str(), spec.idp_client_id.as_str()), ("mcp-client", "idp-client"));
        assert_eq!(spec.id_token, IdTokenSource::Value(Secret::new("s3cret")));
        assert_eq!(spec.idp_token_endpoint, None, "discovered at the issuer");
        assert!(!format!("{spec:?}").contains("s3cret"), "neither secret nor ID token is shown");
        let with = |key: &str, value: Value| {
            let mut b = block.clone();
            b[key] = value;
            parse(b).unwrap_err()
        };
        assert_eq!(with("idp_issuer", json!("http://idp.example")).key, "idp_issuer", "plain HTTP off loopback");
        assert_eq!(with("idp_token_endpoint", json!("https://u:p@idp.example/t")).key, "idp_token_endpoint");
        assert_eq!(with("id_token_file", json!("t.jwt")).key, "id_token", "one source only");
        assert_eq!(with("idp_client", json!("x")).key, "idp_client", "unknown key");
        let mut no_client = block.clone();
        no_client.as_object_mut().unwrap().remove("idp_client_id");
        let e = parse(no_client).unwrap_err();
        assert_eq!(e.key, "idp_client_id");
        assert!(e.to_string().contains("identity provider"), "{e}");
        let mut file = block;
        file.as_object_mut().unwrap().remove("id_token");
        file["id_token_file"] = json!("id.jwt");
        let AuthSpec::Enterprise(spec) = parse(file).unwrap() else { panic!() };
        assert_eq!(spec.id_token, IdTokenSource::File(Path::new("./id.jwt").to_path_buf()));
    }
}
