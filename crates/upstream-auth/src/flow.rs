//! The OAuth exchanges, over rmcp's `AuthorizationManager`
//! (`rmcp::transport::auth`): discovery (RFC 9728 Protected Resource
//! Metadata from the server's challenge, then RFC 8414 / OpenID metadata
//! with the well-known fallbacks, the issuer and `resource` checked),
//! PKCE with S256, the `resource` parameter (RFC 8707), the RFC 9207 `iss`
//! check, the token endpoint's auth method, refresh, and client
//! credentials.
//!
//! Where rmcp did not fit, this module does the step itself:
//! - client registration: `AuthorizationSession::new` registers
//!   dynamically but keeps the secret the server returns to itself, so a
//!   later process could not refresh as a confidential client; the order
//!   (pre-registered, then a Client ID Metadata Document, then Dynamic
//!   Client Registration) is applied here and the registered client is
//!   handed to rmcp as a pre-registered one;
//! - a server whose metadata omits `code_challenge_methods_supported` is
//!   refused (rmcp only warns; the MCP spec says to refuse);
//! - the legacy endpoint fallback rmcp synthesizes when nothing is
//!   published is refused (current revisions require discovery);
//! - stored credentials: rmcp's `StoredCredentials` carry no client secret
//!   or metadata, so refreshing rebuilds a manager from the grant;
//! - `private_key_jwt` is signed here ([`crate::assertion`]);
//! - an access token that is a JWT must name this server in `aud`.

use base64::Engine as _;
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, AuthorizationMetadataSource, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, InMemoryCredentialStore, InMemoryStateStore, OAuthClientConfig,
    OAuthTokenResponse, StateStore as _, StoredAuthorizationState, StoredCredentials, WWWAuthenticateParams,
};
use rmcp::transport::{AuthError, CredentialStore as _};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::grant::{ClientInfo, Grant, GrantKind, Registration, Tokens, now, scope_list, union};
use crate::spec::{ClientCredentialsSpec, Credential, OAuthSpec};

/// The name code-mode registers under.
const CLIENT_NAME: &str = "code-mode";

/// A login between its authorization URL and the redirect.
pub(crate) struct Pending {
    session: AuthorizationSession,
    /// The URL the person opens.
    pub url: String,
    /// The `state` the redirect must carry.
    pub state: String,
    client: ClientInfo,
    metadata: AuthorizationMetadata,
    resource_indicator: String,
    scopes: Vec<String>,
    /// Where rmcp keeps the PKCE verifier of this login, so that
    /// [`Pending::portable`] can hand it to another process.
    states: InMemoryStateStore,
    redirect_uri: String,
}

/// A login between its authorization URL and the redirect, as data: kept
/// (sealed) in the state store by one process and finished by another
/// ([`finish_portable`]). Holds the PKCE verifier and the client's
/// secret: never shown, never stored unsealed.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Portable {
    /// The URL the person opens.
    pub url: String,
    /// The `state` the redirect must carry.
    pub state: String,
    /// Where the authorization server sends the person back.
    pub redirect_uri: String,
    /// The client code-mode is at the authorization server for this
    /// redirect URI (kept for the next login through it).
    pub client: ClientInfo,
    verifier: StoredAuthorizationState,
    metadata: AuthorizationMetadata,
    resource_indicator: String,
    scopes: Vec<String>,
}

impl Pending {
    /// This login as data another process can finish.
    pub(crate) async fn portable(self) -> Result<Portable, String> {
        let verifier = self
            .states
            .load(&self.state)
            .await
            .ok()
            .flatten()
            .ok_or("the login's PKCE verifier was not kept (rmcp's state store)")?;
        Ok(Portable {
            url: self.url,
            state: self.state,
            redirect_uri: self.redirect_uri,
            client: self.client,
            verifier,
            metadata: self.metadata,
            resource_indicator: self.resource_indicator,
            scopes: self.scopes,
        })
    }
}

/// Why a renewal failed.
pub(crate) enum Renewal {
    /// The authorization server refused it for good (`invalid_grant`, no
    /// refresh token): a new login is needed.
    Rejected(String),
    /// It could not be done now (the server down, slow, an error).
    Failed(String),
}

/// Discover the authorization server of `resource` from its `challenge`,
/// register (in the spec's order) and make the authorization URL.
/// `previous`: the last grant, whose scopes a new login keeps when it is
/// from the same authorization server; `extra`: scopes the server asked
/// for beyond it (a step-up).
pub(crate) async fn begin(
    resource: &str,
    spec: &OAuthSpec,
    challenge: Option<&str>,
    previous: Option<&Grant>,
    extra: &[String],
    redirect_uri: &str,
) -> Result<Pending, String> {
    crate::ensure_crypto();
    let mut manager = AuthorizationManager::new(resource).await.map_err(|e| format!("{resource}: {e}"))?;
    let resolution = manager.resolve_metadata_from_challenge(challenge).await.map_err(|e| discovery_error(&e))?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(format!(
            "{resource} publishes no OAuth metadata (no Protected Resource Metadata and no authorization server metadata): it cannot be logged in to"
        ));
    }
    let metadata = resolution.metadata;
    match &metadata.code_challenge_methods_supported {
        Some(methods) if methods.iter().any(|m| m == "S256") => {}
        _ => {
            return Err(format!(
                "the authorization server {} does not offer PKCE with S256 (code_challenge_methods_supported), which MCP requires: refused",
                metadata.issuer.as_deref().unwrap_or(&metadata.authorization_endpoint)
            ));
        }
    }
    manager.set_metadata(metadata.clone());
    let same_issuer = previous.filter(|p| p.issuer.is_some() && p.issuer == metadata.issuer);
    let challenged = challenge
        .and_then(|c| reqwest::Url::parse(resource).ok().map(|base| WWWAuthenticateParams::parse(c, &base)))
        .and_then(|p| p.scope)
        .map(|s| scope_list(&s))
        .unwrap_or_default();
    let scopes: Vec<String> = if !spec.scopes.is_empty() {
        union(&spec.scopes, extra.iter().cloned())
    } else if same_issuer.is_some() || !extra.is_empty() {
        let kept = same_issuer.map(|p| p.scopes.clone()).unwrap_or_default();
        union(&union(&challenged, kept), extra.iter().cloned())
    } else {
        // The first login: the challenge's scopes, else the Protected
        // Resource Metadata's, else none (rmcp's initial selection, with
        // offline_access when the server lists it).
        manager.select_initial_scopes(&[]).await
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let supports_cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let client = if let Some(id) = &spec.client_id {
        ClientInfo {
            id: id.clone(),
            secret: spec.client_secret.as_ref().map(|s| s.expose().to_string()),
            registration: Registration::Preregistered,
            redirect_uri: redirect_uri.to_string(),
        }
    } else if let Some(url) = spec.client_metadata_url.as_ref().filter(|_| supports_cimd) {
        ClientInfo {
            id: url.clone(),
            secret: None,
            registration: Registration::MetadataDocument,
            redirect_uri: redirect_uri.to_string(),
        }
    } else if metadata.registration_endpoint.is_some() {
        let name = spec.client_name.as_deref().unwrap_or(CLIENT_NAME);
        let registered = manager
            .register_client(name, redirect_uri, &scope_refs)
            .await
            .map_err(|e| format!("registering with the authorization server failed: {e}"))?;
        ClientInfo {
            id: registered.client_id,
            secret: registered.client_secret,
            registration: Registration::Dynamic,
            redirect_uri: redirect_uri.to_string(),
        }
    } else {
        return Err(
            "the authorization server offers no Dynamic Client Registration (and no Client ID Metadata Document was given): add \"client_id\" of a client registered there to the auth block".into(),
        );
    };
    let mut request = AuthorizationRequest::new(redirect_uri)
        .with_client_name(spec.client_name.as_deref().unwrap_or(CLIENT_NAME))
        .with_preregistered_client(client.id.clone());
    if let Some(secret) = &client.secret {
        request = request.with_client_secret(secret.clone());
    }
    request = if scopes.is_empty() { request } else { request.with_scopes(scopes.clone()) };
    let states = InMemoryStateStore::new();
    manager.set_state_store(states.clone());
    let session = AuthorizationSession::new(manager, request).await.map_err(|(_, e)| format!("{e}"))?;
    let url = session.get_authorization_url().to_string();
    let parsed = reqwest::Url::parse(&url).map_err(|e| format!("the authorization URL: {e}"))?;
    let param = |name: &str| parsed.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    let state = param("state").ok_or("the authorization URL carries no state")?;
    let resource_indicator = param("resource").unwrap_or_else(|| resource.to_string());
    let requested = param("scope").map(|s| scope_list(&s)).unwrap_or_default();
    Ok(Pending {
        session,
        url,
        state,
        client,
        metadata,
        resource_indicator,
        scopes: requested,
        states,
        redirect_uri: redirect_uri.to_string(),
    })
}

/// Exchange the redirect's code (its `iss` checked against the issuer, by
/// rmcp) for the grant of `resource`.
pub(crate) async fn finish(
    resource: &str,
    pending: Pending,
    callback: &crate::login::Callback,
) -> Result<Grant, String> {
    let issuer = pending.metadata.issuer.clone().unwrap_or_else(|| pending.metadata.authorization_endpoint.clone());
    let token_endpoint = pending.metadata.token_endpoint.clone();
    let response = pending
        .session
        .handle_callback_with_issuer(&callback.code, &callback.state, callback.iss.as_deref())
        .await
        .map_err(|e| match e {
            AuthError::AuthorizationServerMismatch { expected_issuer, received_issuer } => format!(
                "the login's response names the issuer {received_issuer:?}, not the authorization server it was sent to ({expected_issuer}): refused (RFC 9207)"
            ),
            AuthError::AuthorizationServerMissingIssuer { expected_issuer } => format!(
                "the authorization server {expected_issuer} promised an iss parameter in its response and sent none: refused (RFC 9207)"
            ),
            other => format!(
                "the code exchange at the authorization server {} (token endpoint {}) failed: {other}",
                issuer, token_endpoint
            ),
        })?;
    let (tokens, scope) = tokens_of(&response, now())?;
    check_audience(&tokens.access, resource, &pending.resource_indicator)?;
    Ok(Grant {
        resource: resource.to_string(),
        resource_indicator: pending.resource_indicator,
        kind: GrantKind::AuthorizationCode,
        issuer: pending.metadata.issuer.clone(),
        metadata: serde_json::to_value(&pending.metadata).unwrap_or(Value::Null),
        client: Some(pending.client),
        tokens: Some(tokens),
        scopes: scope.unwrap_or(pending.scopes),
        wanted: Vec::new(),
        login_needed: None,
        logged_in_at: now(),
        identity: None,
        subject: None,
    })
}

/// Finish a login begun in another process ([`Pending::portable`]): the
/// code exchanged with the kept PKCE verifier, the redirect's `iss`
/// checked against the issuer (RFC 9207, by rmcp), the grant of
/// `resource` and the upstream account's subject.
pub(crate) async fn finish_portable(
    resource: &str,
    portable: Portable,
    code: &str,
    iss: Option<&str>,
) -> Result<(Grant, String), String> {
    crate::ensure_crypto();
    let issuer = portable.metadata.issuer.clone().unwrap_or_else(|| portable.metadata.authorization_endpoint.clone());
    let mut manager = AuthorizationManager::new(portable.resource_indicator.as_str())
        .await
        .map_err(|e| format!("{resource}: {e}"))?;
    manager.set_metadata(portable.metadata.clone());
    let mut config = OAuthClientConfig::new(portable.client.id.clone(), portable.redirect_uri.clone());
    if let Some(secret) = &portable.client.secret {
        config = config.with_client_secret(secret.clone());
    }
    manager.configure_client(config).map_err(|e| format!("the client at {issuer}: {e}"))?;
    let states = InMemoryStateStore::new();
    states.save(&portable.state, portable.verifier.clone()).await.map_err(|e| e.to_string())?;
    manager.set_state_store(states);
    let response = manager.exchange_code_for_token_with_issuer(code, &portable.state, iss).await.map_err(|e| match e {
        AuthError::AuthorizationServerMismatch { expected_issuer, received_issuer } => format!(
            "the login's response names the issuer {received_issuer:?}, not the authorization server it was sent to ({expected_issuer}): refused (RFC 9207)"
        ),
        AuthError::AuthorizationServerMissingIssuer { expected_issuer } => format!(
            "the authorization server {expected_issuer} promised an iss parameter in its response and sent none: refused (RFC 9207)"
        ),
        other => format!(
            "the code exchange at the authorization server {issuer} (token endpoint {}) failed: {}",
            portable.metadata.token_endpoint,
            short(&other.to_string())
        ),
    })?;
    let (tokens, scope) = tokens_of(&response, now())?;
    check_audience(&tokens.access, resource, &portable.resource_indicator)?;
    let id_token = serde_json::to_value(&response).ok().and_then(|v| v["id_token"].as_str().map(str::to_string));
    let subject = subject_of(&tokens.access).or_else(|| id_token.as_deref().and_then(subject_of));
    let mut grant = finish_grant(resource, &portable, tokens, scope);
    grant.client = Some(portable.client);
    Ok((grant, subject.unwrap_or_else(|| "unknown".into())))
}

/// The grant a finished portable login gives (its client set by the caller).
fn finish_grant(resource: &str, portable: &Portable, tokens: Tokens, scope: Option<Vec<String>>) -> Grant {
    Grant {
        resource: resource.to_string(),
        resource_indicator: portable.resource_indicator.clone(),
        kind: GrantKind::AuthorizationCode,
        issuer: portable.metadata.issuer.clone(),
        metadata: serde_json::to_value(&portable.metadata).unwrap_or(Value::Null),
        client: None,
        tokens: Some(tokens),
        scopes: scope.unwrap_or_else(|| portable.scopes.clone()),
        wanted: Vec::new(),
        login_needed: None,
        logged_in_at: now(),
        identity: None,
        subject: None,
    }
}

/// The `sub` of a token that is a JWT (not verified: it names the account
/// for the audit record and the console, and decides nothing).
pub(crate) fn subject_of(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let claims: Value = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())?;
    claims["sub"].as_str().map(|s| crate::printable(s, 200))
}

/// Renew `grant`'s access token with its refresh token; the new tokens.
pub(crate) async fn refresh(grant: &Grant) -> Result<(Tokens, Option<Vec<String>>), Renewal> {
    crate::ensure_crypto();
    let failed = |e: &dyn std::fmt::Display| Renewal::Failed(e.to_string());
    let (Some(client), Some(tokens)) = (&grant.client, &grant.tokens) else {
        return Err(Renewal::Rejected("no login is stored".into()));
    };
    let Some(refresh_token) = &tokens.refresh else {
        return Err(Renewal::Rejected("the access token expired and the login gave no refresh token".into()));
    };
    let metadata: AuthorizationMetadata =
        serde_json::from_value(grant.metadata.clone()).map_err(|e| failed(&format!("the stored metadata: {e}")))?;
    // The manager's base URL is the resource indicator the grant was
    // obtained for: rmcp sends it as `resource` on the refresh.
    let mut manager = AuthorizationManager::new(grant.resource_indicator.as_str()).await.map_err(|e| failed(&e))?;
    manager.set_metadata(metadata);
    let redirect = if client.redirect_uri.is_empty() { "http://127.0.0.1/callback" } else { &client.redirect_uri };
    let mut config = OAuthClientConfig::new(client.id.clone(), redirect);
    if let Some(secret) = &client.secret {
        config = config.with_client_secret(secret.clone());
    }
    manager.configure_client(config).map_err(|e| failed(&e))?;
    let stored: OAuthTokenResponse = serde_json::from_value(json!({
        "access_token": tokens.access,
        "token_type": "Bearer",
        "refresh_token": refresh_token,
    }))
    .map_err(|e| failed(&e))?;
    let store = InMemoryCredentialStore::new();
    store
        .save(StoredCredentials::new(client.id.clone(), Some(stored), grant.scopes.clone(), Some(tokens.received_at)))
        .await
        .map_err(|e| failed(&e))?;
    manager.set_credential_store(store);
    match manager.refresh_token().await {
        Ok(response) => {
            let (mut renewed, scope) = tokens_of(&response, now()).map_err(|e| Renewal::Failed(e.to_string()))?;
            if renewed.refresh.is_none() {
                renewed.refresh = Some(refresh_token.clone());
            }
            check_audience(&renewed.access, &grant.resource, &grant.resource_indicator).map_err(Renewal::Rejected)?;
            Ok((renewed, scope))
        }
        Err(AuthError::TokenRefreshRejected(why)) => {
            Err(Renewal::Rejected(format!("the authorization server refused the refresh token ({})", short(&why))))
        }
        Err(AuthError::AuthorizationRequired) => Err(Renewal::Rejected("the login can no longer be renewed".into())),
        Err(e) => {
            Err(Renewal::Failed(format!("could not renew the token ({})", short(&code_mode_core::error::report(&e)))))
        }
    }
}

/// A client credentials grant for `resource`, discovered from `challenge`
/// (or by probing), asking for the spec's scopes and `extra`.
pub(crate) async fn client_credentials(
    resource: &str,
    spec: &ClientCredentialsSpec,
    challenge: Option<&str>,
    extra: &[String],
) -> Result<Grant, Renewal> {
    crate::ensure_crypto();
    let failed = |e: String| Renewal::Failed(e);
    let mut manager = AuthorizationManager::new(resource).await.map_err(|e| failed(e.to_string()))?;
    let resolution =
        manager.resolve_metadata_from_challenge(challenge).await.map_err(|e| failed(discovery_error(&e)))?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(failed(format!("{resource} publishes no OAuth metadata")));
    }
    let metadata = resolution.metadata;
    manager.set_metadata(metadata.clone());
    let scopes = union(&spec.scopes, extra.iter().cloned());
    let response = match &spec.credential {
        Credential::Secret(secret) => {
            let config = ClientCredentialsConfig::ClientSecret {
                client_id: spec.client_id.clone(),
                client_secret: secret.expose().to_string(),
                scopes: scopes.clone(),
                resource: Some(resource.to_string()),
            };
            manager.validate_client_credentials_metadata(&config).map_err(|e| Renewal::Rejected(e.to_string()))?;
            manager.configure_client_credentials(&config).map_err(|e| failed(e.to_string()))?;
            manager.exchange_client_credentials(&config).await.map_err(|e| match e {
                AuthError::ClientCredentialsError(why) if why.contains("invalid_client") => Renewal::Rejected(why),
                other => failed(other.to_string()),
            })?
        }
        Credential::PrivateKey { pem, algorithm } => {
            jwt_exchange(resource, &metadata, &spec.client_id, pem.expose(), *algorithm, &scopes).await?
        }
    };
    let (tokens, scope) = tokens_of(&response, now()).map_err(failed)?;
    check_audience(&tokens.access, resource, resource).map_err(Renewal::Rejected)?;
    Ok(Grant {
        resource: resource.to_string(),
        resource_indicator: resource.to_string(),
        kind: GrantKind::ClientCredentials,
        issuer: metadata.issuer.clone(),
        metadata: serde_json::to_value(&metadata).unwrap_or(Value::Null),
        client: None,
        tokens: Some(tokens),
        scopes: scope.unwrap_or(scopes),
        wanted: Vec::new(),
        login_needed: None,
        logged_in_at: now(),
        identity: None,
        subject: None,
    })
}

/// `private_key_jwt` (RFC 7523) at the token endpoint.
async fn jwt_exchange(
    resource: &str,
    metadata: &AuthorizationMetadata,
    client_id: &str,
    pem: &str,
    algorithm: crate::spec::SigningAlgorithm,
    scopes: &[String],
) -> Result<OAuthTokenResponse, Renewal> {
    if let Some(methods) =
        metadata.additional_fields.get("token_endpoint_auth_methods_supported").and_then(Value::as_array)
        && !methods.iter().any(|m| m.as_str() == Some("private_key_jwt"))
    {
        return Err(Renewal::Rejected("the authorization server does not take private_key_jwt".into()));
    }
    let endpoint = reqwest::Url::parse(&metadata.token_endpoint)
        .map_err(|e| Renewal::Failed(format!("the token endpoint is not a URL: {e}")))?;
    let loopback = |u: &reqwest::Url| matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let resource_url = reqwest::Url::parse(resource).map_err(|e| Renewal::Failed(e.to_string()))?;
    if endpoint.scheme() != "https" && !(loopback(&endpoint) && loopback(&resource_url)) {
        return Err(Renewal::Rejected("the token endpoint is not https: a client assertion is not sent there".into()));
    }
    let audience = metadata.issuer.clone().unwrap_or_else(|| metadata.token_endpoint.clone());
    let assertion =
        crate::assertion::client_assertion(client_id, &audience, pem, algorithm, now()).map_err(Renewal::Rejected)?;
    let mut form = vec![
        ("grant_type", "client_credentials".to_string()),
        ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_string()),
        ("client_assertion", assertion),
        ("resource", resource.to_string()),
    ];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let body = form.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| Renewal::Failed(e.to_string()))?;
    let response = client
        .post(endpoint)
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| Renewal::Failed(format!("the token endpoint did not answer: {e}")))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| Renewal::Failed(e.to_string()))?;
    if !status.is_success() {
        let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let why = format!(
            "the token endpoint answered {status}: {} {}",
            crate::printable(error["error"].as_str().unwrap_or(""), 64),
            crate::printable(error["error_description"].as_str().unwrap_or(""), 200)
        );
        return Err(if status.is_client_error() { Renewal::Rejected(why) } else { Renewal::Failed(why) });
    }
    serde_json::from_str(&text).map_err(|e| Renewal::Failed(format!("the token response: {e}")))
}

/// The tokens of a token response (and its `scope`, when it says one).
fn tokens_of(response: &OAuthTokenResponse, now: u64) -> Result<(Tokens, Option<Vec<String>>), String> {
    let value = serde_json::to_value(response).map_err(|e| e.to_string())?;
    let access = value["access_token"].as_str().ok_or("the token response has no access_token")?.to_string();
    let expires_in = value["expires_in"].as_u64();
    Ok((
        Tokens {
            access,
            refresh: value["refresh_token"].as_str().map(str::to_string),
            received_at: now,
            expires_at: expires_in.map(|s| now + s),
        },
        value["scope"].as_str().map(scope_list),
    ))
}

/// An access token that is a JWT must name this server (its URL or the
/// resource indicator it was asked for) in `aud`; an opaque one is the
/// authorization server's business.
pub(crate) fn check_audience(token: &str, resource: &str, indicator: &str) -> Result<(), String> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Ok(());
    };
    let Some(claims) = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    else {
        return Ok(());
    };
    let audiences: Vec<&str> = match &claims["aud"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => return Ok(()),
    };
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    if audiences.iter().any(|aud| same(aud, resource) || same(aud, indicator)) {
        Ok(())
    } else {
        Err(format!(
            "the authorization server issued a token for another audience ({}), not {resource}: refused",
            audiences.iter().map(|a| crate::printable(a, 100)).collect::<Vec<_>>().join(", ")
        ))
    }
}

fn discovery_error(e: &AuthError) -> String {
    match e {
        AuthError::ProtectedResourceMetadataInvalid { url, reason } => {
            format!("the server's Protected Resource Metadata ({url}) is refused: {reason}")
        }
        AuthError::AuthorizationServerMismatch { expected_issuer, received_issuer } => format!(
            "the authorization server's metadata names the issuer {received_issuer:?}, not {expected_issuer:?} where it was fetched: refused (RFC 8414)"
        ),
        other => format!("discovering the authorization server failed: {}", code_mode_core::error::report(other)),
    }
}

fn short(text: &str) -> String {
    crate::printable(text, 300)
}

fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: Value) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("{}.{}.sig", b64.encode(b"{\"alg\":\"RS256\"}"), b64.encode(claims.to_string()))
    }

    #[test]
    fn a_jwt_access_token_must_name_this_server_in_its_audience() {
        let a = "https://a.example/mcp";
        assert!(check_audience(&jwt(json!({"aud": a})), a, a).is_ok());
        assert!(check_audience(&jwt(json!({"aud": ["x", "https://a.example/mcp/"]})), a, a).is_ok());
        assert!(check_audience(&jwt(json!({"aud": "https://a.example/"})), a, "https://a.example").is_ok());
        let e = check_audience(&jwt(json!({"aud": "https://b.example/mcp"})), a, a).unwrap_err();
        assert!(e.contains("b.example") && e.contains("another audience"), "{e}");
        assert!(check_audience("opaque-token", a, a).is_ok());
        assert!(check_audience(&jwt(json!({"sub": "x"})), a, a).is_ok(), "no aud: not checked");
    }
}
