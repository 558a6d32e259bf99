//! `--oauth-issuer URL`: the HTTP test server as an OAuth 2.1 resource
//! server, for code-mode's upstream login tests.
//!
//! Every MCP request must carry a bearer token that is a JWT signed RS256
//! by the issuer (its keys found through its OpenID metadata and cached,
//! fetched again for an unknown `kid`), with `iss` the issuer, `aud` this
//! server's URL, `exp` in the future (no leeway: a token past its expiry
//! is refused, so a client must renew) and the base scopes
//! (`--oauth-scope`). Otherwise `401` with a challenge naming the
//! Protected Resource Metadata (RFC 9728), served at
//! `/.well-known/oauth-protected-resource[/mcp]`. A `tools/call` of a tool
//! that `--require-scope TOOL=SCOPE` names needs that scope too, else
//! `403 insufficient_scope` naming it. The `whoami` tool answers the
//! verified token's subject, scopes, issue time, audience and
//! actor (`act`, RFC 8693).
//!
//! `--oauth-resource URL` makes the metadata name another resource (to test
//! a client that must refuse it); `--oauth-audience URL` accepts tokens for
//! another audience (a server that does not check).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// An RSA public key: modulus and exponent, big-endian.
type RsaKey = (Vec<u8>, Vec<u8>);

/// What a request may do, once its token is checked.
#[derive(Debug)]
pub struct Gate {
    pub issuer: String,
    /// This server's URL (`http://HOST:PORT/mcp`), the tokens' audience.
    pub resource: String,
    /// The resource its metadata names (normally `resource`).
    pub advertised: String,
    /// The audience tokens must carry (normally `resource`).
    pub audience: String,
    pub base_scopes: Vec<String>,
    pub required: HashMap<String, String>,
    keys: Mutex<HashMap<String, RsaKey>>,
    http: reqwest::Client,
}

/// Why a request is refused: an HTTP status and its challenge.
pub struct Refusal {
    pub status: u16,
    pub challenge: String,
    pub body: String,
}

impl Gate {
    pub fn new(issuer: String, resource: String, base_scopes: Vec<String>, required: HashMap<String, String>) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            issuer,
            advertised: resource.clone(),
            audience: resource.clone(),
            resource,
            base_scopes,
            required,
            keys: Mutex::new(HashMap::new()),
            http: reqwest::Client::new(),
        }
    }

    /// The Protected Resource Metadata.
    pub fn metadata(&self) -> Value {
        let mut scopes = self.base_scopes.clone();
        for scope in self.required.values() {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        json!({
            "resource": self.advertised,
            "authorization_servers": [self.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    fn metadata_url(&self) -> String {
        let origin = self.resource.trim_end_matches("/mcp");
        format!("{origin}/.well-known/oauth-protected-resource/mcp")
    }

    fn refuse(&self, status: u16, error: Option<&str>, scope: &[String]) -> Refusal {
        let mut challenge = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        if !scope.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", scope.join(" ")));
        }
        if let Some(error) = error {
            challenge.push_str(&format!(", error=\"{error}\""));
        }
        let body = json!({"error": error.unwrap_or("invalid_token")}).to_string();
        Refusal { status, challenge, body }
    }

    /// Check a request's token against its JSON-RPC body; the verified
    /// claims when it passes.
    pub async fn check(&self, authorization: Option<&str>, body: &[u8]) -> Result<Value, Refusal> {
        let Some(token) = authorization.and_then(|h| h.strip_prefix("Bearer ")) else {
            return Err(self.refuse(401, None, &self.base_scopes));
        };
        let claims = match self.verify(token).await {
            Ok(claims) => claims,
            Err(why) => {
                tracing::info!(%why, "refused a token");
                return Err(self.refuse(401, Some("invalid_token"), &self.base_scopes));
            }
        };
        let held: Vec<&str> = claims["scope"].as_str().unwrap_or("").split_whitespace().collect();
        if !self.base_scopes.iter().all(|s| held.contains(&s.as_str())) {
            return Err(self.refuse(403, Some("insufficient_scope"), &self.base_scopes));
        }
        let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if message["method"] == "tools/call"
            && let Some(tool) = message["params"]["name"].as_str()
            && let Some(scope) = self.required.get(tool)
            && !held.contains(&scope.as_str())
        {
            return Err(self.refuse(403, Some("insufficient_scope"), std::slice::from_ref(scope)));
        }
        Ok(claims)
    }

    async fn verify(&self, token: &str) -> Result<Value, String> {
        let mut parts = token.split('.');
        let (Some(head), Some(body), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT".into());
        };
        let header: Value = decode(head)?;
        if header["alg"] != "RS256" {
            return Err("not RS256".into());
        }
        let kid = header["kid"].as_str().unwrap_or_default().to_string();
        let key = match self.key(&kid) {
            Some(key) => key,
            None => {
                self.fetch_keys().await?;
                self.key(&kid).ok_or("unknown key")?
            }
        };
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| "signature not base64")?;
        let public = ring::signature::RsaPublicKeyComponents { n: &key.0, e: &key.1 };
        public
            .verify(
                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                &token.as_bytes()[..head.len() + 1 + body.len()],
                &signature,
            )
            .map_err(|_| "bad signature")?;
        let claims: Value = decode(body)?;
        if claims["iss"] != self.issuer.as_str() {
            return Err("wrong issuer".into());
        }
        let audience = match &claims["aud"] {
            Value::String(one) => one == &self.audience,
            Value::Array(many) => many.iter().any(|a| a == self.audience.as_str()),
            _ => false,
        };
        if !audience {
            return Err("wrong audience".into());
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        if claims["exp"].as_u64().is_none_or(|exp| exp <= now) {
            return Err("expired".into());
        }
        Ok(claims)
    }

    fn key(&self, kid: &str) -> Option<RsaKey> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).get(kid).cloned()
    }

    async fn fetch_keys(&self) -> Result<(), String> {
        let get = |url: String| async move {
            let text =
                self.http.get(url).send().await.map_err(|e| e.to_string())?.text().await.map_err(|e| e.to_string())?;
            serde_json::from_str::<Value>(&text).map_err(|e| e.to_string())
        };
        let metadata = get(format!("{}/.well-known/openid-configuration", self.issuer)).await?;
        let jwks = get(metadata["jwks_uri"].as_str().ok_or("no jwks_uri")?.to_string()).await?;
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        for key in jwks["keys"].as_array().into_iter().flatten() {
            if let (Some(kid), Some(n), Some(e)) = (key["kid"].as_str(), key["n"].as_str(), key["e"].as_str()) {
                let n = URL_SAFE_NO_PAD.decode(n).map_err(|_| "n")?;
                let e = URL_SAFE_NO_PAD.decode(e).map_err(|_| "e")?;
                keys.insert(kid.to_string(), (n, e));
            }
        }
        Ok(())
    }
}

fn decode(part: &str) -> Result<Value, String> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| "not base64url")?;
    serde_json::from_slice(&bytes).map_err(|_| "not JSON".into())
}

/// The verified claims of the token on `headers` (the gate checked it), for
/// `whoami`: subject, scopes, issue and expiry times.
pub fn whoami(headers: Option<&http::HeaderMap>) -> Value {
    let claims = headers
        .and_then(|h| h.get(http::header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|token| token.split('.').nth(1))
        .and_then(|body| decode(body).ok())
        .unwrap_or(Value::Null);
    json!({
        "sub": claims["sub"],
        "scope": claims["scope"],
        "iat": claims["iat"],
        "exp": claims["exp"],
        "jti": claims["jti"],
        "aud": claims["aud"],
        "act": claims["act"],
    })
}
