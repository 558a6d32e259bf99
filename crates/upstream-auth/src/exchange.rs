//! Token exchange (RFC 8693): a caller's own OAuth access token traded at
//! a remote server's authorization server for one whose audience is that
//! server, with no person's step.
//!
//! The request is the RFC's: `grant_type`
//! `urn:ietf:params:oauth:grant-type:token-exchange`, the caller's token as
//! `subject_token` of type `...:token-type:access_token`, an access token
//! asked for, `resource` the server's URL (RFC 8707; the resource
//! indicator its Protected Resource Metadata names) and `audience` when the
//! block gives one, code-mode's client authenticated by its secret (HTTP
//! Basic unless the authorization server takes only `client_secret_post`).
//! The token endpoint is discovered from the server as for a login (its
//! Protected Resource Metadata, then the authorization server's metadata,
//! whose `grant_types_supported`, when listed, must hold the exchange), or
//! given in the block.
//!
//! What comes back must be an access token (`issued_token_type`, when
//! said) naming the server in `aud` when it is a JWT; its `sub` is kept as
//! the grant's subject, and an `act` claim (the authorization server saying
//! code-mode acts for the caller) is left in the token as issued: the
//! server sees it.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use rmcp::transport::auth::{AuthorizationManager, AuthorizationMetadataSource};
use serde_json::Value;

use crate::flow::{Renewal, check_audience};
use crate::grant::{Grant, GrantKind, Tokens, now, scope_list};
use crate::spec::TokenExchangeSpec;

/// RFC 8693's grant type.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693's token type of an access token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The longest one request to the token endpoint may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where to exchange, found once per server and kept.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The token endpoint.
    pub token_endpoint: String,
    /// The authorization server's issuer, for messages.
    pub issuer: Option<String>,
    /// The `resource` to send (the Protected Resource Metadata's).
    pub indicator: String,
    /// Its `token_endpoint_auth_methods_supported`, if listed.
    pub methods: Option<Vec<String>>,
}

/// Find `resource`'s token endpoint: the block's, else discovered from the
/// server's `challenge` (or by probing).
pub(crate) async fn discover(
    resource: &str,
    spec: &TokenExchangeSpec,
    challenge: Option<&str>,
) -> Result<Endpoint, Renewal> {
    if let Some(endpoint) = &spec.token_endpoint {
        return Ok(Endpoint {
            token_endpoint: endpoint.clone(),
            issuer: None,
            indicator: resource.to_string(),
            methods: None,
        });
    }
    crate::ensure_crypto();
    let manager = AuthorizationManager::new(resource).await.map_err(|e| Renewal::Failed(e.to_string()))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|e| Renewal::Failed(format!("discovering the authorization server failed: {e}")))?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(Renewal::Failed(format!("{resource} publishes no OAuth metadata")));
    }
    let metadata = resolution.metadata;
    let fields = &metadata.additional_fields;
    if let Some(grants) = fields.get("grant_types_supported").and_then(Value::as_array)
        && !grants.iter().any(|g| g.as_str() == Some(GRANT_TYPE))
    {
        return Err(Renewal::Rejected(format!(
            "the authorization server {} does not take token exchange (its grant_types_supported lacks {GRANT_TYPE})",
            metadata.issuer.as_deref().unwrap_or(&metadata.token_endpoint)
        )));
    }
    let methods = fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_string).collect());
    Ok(Endpoint {
        token_endpoint: metadata.token_endpoint.clone(),
        issuer: metadata.issuer.clone(),
        indicator: resource.to_string(),
        methods,
    })
}

/// Exchange `subject_token` (identity's own) for a grant of `resource`.
pub(crate) async fn exchange(
    resource: &str,
    spec: &TokenExchangeSpec,
    endpoint: &Endpoint,
    identity: &str,
    subject_token: &str,
) -> Result<Grant, Renewal> {
    crate::ensure_crypto();
    let mut form = vec![
        ("grant_type", GRANT_TYPE.to_string()),
        ("subject_token", subject_token.to_string()),
        ("subject_token_type", ACCESS_TOKEN_TYPE.to_string()),
        ("requested_token_type", ACCESS_TOKEN_TYPE.to_string()),
        ("resource", endpoint.indicator.clone()),
    ];
    if let Some(audience) = &spec.audience {
        form.push(("audience", audience.clone()));
    }
    if !spec.scopes.is_empty() {
        form.push(("scope", spec.scopes.join(" ")));
    }
    let has = |m: &str| endpoint.methods.as_ref().is_some_and(|list| list.iter().any(|x| x == m));
    let post = has("client_secret_post") && !has("client_secret_basic");
    if post {
        form.push(("client_id", spec.client_id.clone()));
        form.push(("client_secret", spec.client_secret.expose().to_string()));
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| Renewal::Failed(e.to_string()))?;
    let body = form.iter().map(|(k, v)| format!("{k}={}", form_encode(v))).collect::<Vec<_>>().join("&");
    let mut request = client
        .post(&endpoint.token_endpoint)
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(http::header::ACCEPT, "application/json")
        .body(body);
    if !post {
        request = request.basic_auth(form_encode(&spec.client_id), Some(form_encode(spec.client_secret.expose())));
    }
    let response = request
        .send()
        .await
        .map_err(|e| Renewal::Failed(format!("its token endpoint did not answer ({})", without_url(e))))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| Renewal::Failed(without_url(e)))?;
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let why = format!(
            "refused the exchange ({status}: {} {})",
            crate::printable(body["error"].as_str().unwrap_or(""), 64),
            crate::printable(body["error_description"].as_str().unwrap_or(""), 200)
        );
        return Err(if status.is_client_error() { Renewal::Rejected(why) } else { Renewal::Failed(why) });
    }
    let access = body["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Renewal::Failed("its exchange answer has no access_token".into()))?
        .to_string();
    if let Some(kind) = body["issued_token_type"].as_str()
        && kind != ACCESS_TOKEN_TYPE
    {
        return Err(Renewal::Rejected(format!(
            "issued a {} where an access token was asked for: refused",
            crate::printable(kind, 100)
        )));
    }
    check_audience(&access, resource, &endpoint.indicator).map_err(Renewal::Rejected)?;
    let claims = jwt_claims(&access);
    let subject = claims.get("sub").and_then(Value::as_str).map(|s| crate::printable(s, 200));
    let actor = claims.get("act").and_then(|a| a.get("sub")).and_then(Value::as_str).map(|s| crate::printable(s, 200));
    tracing::info!(%identity, subject = subject.as_deref().unwrap_or("unknown"), actor = actor.as_deref().unwrap_or("none"), "exchanged the caller's token for one of the server (RFC 8693)");
    let received_at = now();
    Ok(Grant {
        resource: resource.to_string(),
        resource_indicator: endpoint.indicator.clone(),
        kind: GrantKind::TokenExchange,
        issuer: endpoint.issuer.clone(),
        metadata: Value::Null,
        client: None,
        tokens: Some(Tokens {
            access,
            refresh: None,
            received_at,
            expires_at: body["expires_in"].as_u64().map(|s| received_at + s),
        }),
        scopes: body["scope"].as_str().map(scope_list).unwrap_or_else(|| spec.scopes.clone()),
        wanted: Vec::new(),
        login_needed: None,
        logged_in_at: received_at,
        identity: Some(identity.to_string()),
        subject,
    })
}

/// The claims of a JWT's payload (none for an opaque token).
pub(crate) fn jwt_claims(token: &str) -> HashMap<String, Value> {
    token
        .split('.')
        .nth(1)
        .and_then(|payload| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// RFC 6749 section 2.3.1: the client's id and secret are form-encoded
/// before HTTP Basic.
fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// A request error without its URL, for a short message.
fn without_url(e: reqwest::Error) -> String {
    code_mode_core::error::report(&e.without_url())
}
