//! Enterprise-managed authorization (SEP-990): the person's ID token from
//! the enterprise identity provider (IdP) is exchanged at that IdP for an
//! identity assertion authorization grant (ID-JAG, RFC 8693 token
//! exchange), and the ID-JAG at the MCP server's authorization server for
//! an access token (the RFC 7523 jwt-bearer grant).
//!
//! The two exchanges and their checks of the ID-JAG (its type, its issuer
//! the IdP, its audience the authorization server's issuer, its client,
//! its resource this server, its expiry and scopes) are rmcp's
//! `transport::auth::enterprise`. What it leaves to its caller is done
//! here: discovering the server's authorization server (rmcp's
//! `AuthorizationManager`, from the server's challenge) and the IdP's
//! token endpoint (its metadata, its issuer checked), choosing each
//! client's authentication method from the metadata, and the checks
//! before the ID token leaves: it must be a JWT issued by the configured
//! IdP and not expired, so it is only ever sent to the IdP that issued it.
//!
//! There is no refresh token: at expiry the whole exchange runs again,
//! with the ID token read again (an `id_token_file` kept fresh by another
//! tool renews code-mode's access without a person).

use std::time::Duration;

use base64::Engine as _;
use oauth2::ClientSecret;
use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaError, EmaExchangeRequest, EmaExchangeStage,
};
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadataSource, OAuthClientConfig, default_oauth_http_client,
};
use serde_json::Value;

use crate::flow::{Renewal, check_audience};
use crate::grant::{Grant, GrantKind, Tokens, now, union};
use crate::spec::{EnterpriseSpec, IdTokenSource, Secret};

/// The jwt-bearer grant type (RFC 7523).
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long the IdP's metadata may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// An access token for `resource` by enterprise-managed authorization,
/// its authorization server discovered from `challenge` (or by probing),
/// asking for the spec's scopes and `extra`.
pub(crate) async fn exchange(
    resource: &str,
    spec: &EnterpriseSpec,
    challenge: Option<&str>,
    extra: &[String],
) -> Result<Grant, Renewal> {
    crate::ensure_crypto();
    let id_token = read_id_token(&spec.id_token)?;
    check_id_token(id_token.expose(), &spec.idp_issuer, now()).map_err(Renewal::Rejected)?;

    // The MCP server's authorization server.
    let mut manager = AuthorizationManager::new(resource).await.map_err(|e| Renewal::Failed(e.to_string()))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|e| Renewal::Failed(format!("discovering the authorization server failed: {e}")))?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(Renewal::Failed(format!("{resource} publishes no OAuth metadata")));
    }
    let metadata = resolution.metadata;
    let Some(issuer) = metadata.issuer.clone() else {
        return Err(Renewal::Rejected(
            "the authorization server's metadata names no issuer, which an ID-JAG must name as its audience".into(),
        ));
    };
    if let Some(grants) = metadata.additional_fields.get("grant_types_supported").and_then(Value::as_array)
        && !grants.iter().any(|g| g.as_str() == Some(JWT_BEARER))
    {
        return Err(Renewal::Rejected(format!(
            "the authorization server {issuer} does not take the jwt-bearer grant (its grant_types_supported), which enterprise-managed authorization needs"
        )));
    }
    manager.set_metadata(metadata.clone());
    let indicator = resource_indicator(&mut manager, &spec.client_id).await.unwrap_or_else(|| resource.to_string());
    let resource_as =
        EmaAuthorizationServer::new(&issuer, &metadata.token_endpoint, &spec.client_id).with_client_authentication(
            authentication(spec.client_secret.as_ref(), auth_methods(&metadata.additional_fields)),
        );

    // The enterprise identity provider.
    let idp_endpoint = match &spec.idp_token_endpoint {
        Some(endpoint) => endpoint.clone(),
        None => idp_token_endpoint(&spec.idp_issuer).await?,
    };
    let idp = EmaAuthorizationServer::new(&spec.idp_issuer, &idp_endpoint, &spec.idp_client_id)
        .with_client_authentication(authentication(spec.idp_client_secret.as_ref(), None));

    let scopes = union(&spec.scopes, extra.iter().cloned());
    let http = default_oauth_http_client().map_err(|e| Renewal::Failed(e.to_string()))?;
    let token = EmaExchangeRequest::new_with_id_token(idp, resource_as, &indicator, id_token.expose())
        .with_scopes(scopes.clone())
        .exchange(&http, &http)
        .await
        .map_err(|e| ema_error(&e, &spec.idp_issuer, &issuer))?;
    let access = token.access_token.secret().to_string();
    check_audience(&access, resource, &indicator).map_err(Renewal::Rejected)?;
    let received_at = now();
    let mut granted: Vec<String> = token.scopes.iter().cloned().collect();
    granted.sort();
    Ok(Grant {
        resource: resource.to_string(),
        resource_indicator: indicator,
        kind: GrantKind::Enterprise,
        issuer: Some(issuer),
        metadata: serde_json::to_value(&metadata).unwrap_or(Value::Null),
        client: None,
        tokens: Some(Tokens {
            access,
            refresh: None,
            received_at,
            expires_at: token.expires_in.map(|d| received_at + d.as_secs()),
        }),
        scopes: if granted.is_empty() { scopes } else { granted },
        wanted: Vec::new(),
        login_needed: None,
        logged_in_at: received_at,
        identity: None,
        subject: None,
    })
}

/// The ID token, from the block or read again from its file.
fn read_id_token(source: &IdTokenSource) -> Result<Secret, Renewal> {
    match source {
        IdTokenSource::Value(token) => Ok(token.clone()),
        IdTokenSource::File(path) => match std::fs::read_to_string(path) {
            Ok(text) if !text.trim().is_empty() => Ok(Secret::new(text.trim())),
            Ok(_) => {
                Err(Renewal::Rejected(format!("the ID token file {} (auth.id_token_file) is empty", path.display())))
            }
            Err(e) => Err(Renewal::Rejected(format!(
                "the ID token file {} (auth.id_token_file) cannot be read: {e}",
                path.display()
            ))),
        },
    }
}

/// Before the ID token leaves: it must be a JWT whose `iss` is the
/// configured identity provider (so it is sent only to the IdP that issued
/// it, never to another) and that has not expired.
pub(crate) fn check_id_token(token: &str, idp_issuer: &str, now: u64) -> Result<(), String> {
    let mut parts = token.split('.');
    let claims = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(payload), Some(_), None) => base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()),
        _ => None,
    };
    let Some(claims) = claims else {
        return Err(
            "the ID token (auth.id_token) is not a JWT: give the OpenID Connect ID token the identity provider issued"
                .into(),
        );
    };
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    match claims["iss"].as_str() {
        Some(iss) if same(iss, idp_issuer) => {}
        Some(iss) => {
            return Err(format!(
                "the ID token was issued by {}, not by the identity provider {idp_issuer} (auth.idp_issuer): it is not sent there",
                crate::printable(iss, 100)
            ));
        }
        None => return Err("the ID token names no issuer (iss): it is not sent".into()),
    }
    if let Some(exp) = claims["exp"].as_u64()
        && exp <= now
    {
        return Err(format!(
            "the ID token expired {} s ago: give a fresh one from the identity provider (auth.id_token or auth.id_token_file)",
            now - exp
        ));
    }
    Ok(())
}

/// The `resource` rmcp would send for this server: the Protected Resource
/// Metadata's `resource` as it discovered it. rmcp keeps that value to
/// itself and puts it only on the authorization URL it builds, so one is
/// built (with no network and nothing sent) to read it; `None` when the
/// authorization server offers no authorization-code flow to build one.
async fn resource_indicator(manager: &mut AuthorizationManager, client_id: &str) -> Option<String> {
    manager.configure_client(OAuthClientConfig::new(client_id.to_string(), "http://127.0.0.1/unused")).ok()?;
    let url = manager.get_authorization_url(&[]).await.ok()?;
    let parsed = reqwest::Url::parse(&url).ok()?;
    parsed.query_pairs().find(|(k, _)| k == "resource").map(|(_, v)| v.into_owned())
}

/// The token endpoint auth methods a metadata document lists.
fn auth_methods(fields: &std::collections::HashMap<String, Value>) -> Option<Vec<String>> {
    fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(Value::as_array)
        .map(|methods| methods.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// How a client authenticates: a secret by HTTP Basic unless the server
/// lists only `client_secret_post`; no secret, a public client.
fn authentication(secret: Option<&Secret>, methods: Option<Vec<String>>) -> EmaClientAuthentication {
    let Some(secret) = secret else { return EmaClientAuthentication::None };
    let secret = ClientSecret::new(secret.expose().to_string());
    let has = |m: &str| methods.as_ref().is_some_and(|list| list.iter().any(|x| x == m));
    if has("client_secret_post") && !has("client_secret_basic") {
        EmaClientAuthentication::ClientSecretPost(secret)
    } else {
        EmaClientAuthentication::ClientSecretBasic(secret)
    }
}

/// The identity provider's token endpoint, from its metadata (OpenID
/// discovery, then RFC 8414), whose `issuer` must be the configured one.
async fn idp_token_endpoint(idp_issuer: &str) -> Result<String, Renewal> {
    let base = idp_issuer.trim_end_matches('/');
    let parsed = reqwest::Url::parse(base).map_err(|e| Renewal::Rejected(format!("auth.idp_issuer: {e}")))?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().trim_end_matches('/');
    let candidates = [
        format!("{base}/.well-known/openid-configuration"),
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
    ];
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(METADATA_TIMEOUT)
        .build()
        .map_err(|e| Renewal::Failed(e.to_string()))?;
    let mut last = String::new();
    for url in candidates {
        let response = match client.get(&url).header(http::header::ACCEPT, "application/json").send().await {
            Ok(response) => response,
            Err(e) => {
                last = format!("{url} could not be reached ({e})");
                continue;
            }
        };
        if !response.status().is_success() {
            last = format!("{url} answered {}", response.status());
            continue;
        }
        let Ok(document) = response.json::<Value>().await else {
            last = format!("{url} is not JSON metadata");
            continue;
        };
        let named = document["issuer"].as_str().unwrap_or_default();
        if named.trim_end_matches('/') != base {
            return Err(Renewal::Rejected(format!(
                "the identity provider's metadata at {url} names the issuer {:?}, not {idp_issuer}: refused",
                crate::printable(named, 100)
            )));
        }
        return match document["token_endpoint"].as_str() {
            Some(endpoint) => Ok(endpoint.to_string()),
            None => {
                Err(Renewal::Rejected(format!("the identity provider's metadata at {url} names no token_endpoint")))
            }
        };
    }
    Err(Renewal::Failed(format!(
        "the identity provider {idp_issuer} publishes no metadata ({last}): set auth.idp_token_endpoint"
    )))
}

/// rmcp's sanitized exchange errors, naming the server that answered.
fn ema_error(e: &EmaError, idp: &str, issuer: &str) -> Renewal {
    let at = |stage: &EmaExchangeStage| match stage {
        EmaExchangeStage::IdentityProvider => format!("the identity provider {idp}"),
        _ => format!("the authorization server {issuer}"),
    };
    match e {
        EmaError::InvalidGrant(EmaExchangeStage::IdentityProvider) => Renewal::Rejected(format!(
            "{} refused the ID token (invalid_grant): it may have expired; give a fresh one (auth.id_token or auth.id_token_file)",
            at(&EmaExchangeStage::IdentityProvider)
        )),
        EmaError::InvalidGrant(stage) => Renewal::Rejected(format!("{} refused the ID-JAG (invalid_grant)", at(stage))),
        EmaError::InsufficientUserAuthentication(stage) => {
            Renewal::Rejected(format!("{} wants a stronger login at the identity provider", at(stage)))
        }
        EmaError::OAuthRejected { stage, status, code } => {
            let why = format!("{} answered {status}: {code}", at(stage));
            if *status >= 500 || *code == "temporarily_unavailable" {
                Renewal::Failed(why)
            } else {
                Renewal::Rejected(why)
            }
        }
        EmaError::RequestFailed(stage) => Renewal::Failed(format!("{} did not answer", at(stage))),
        EmaError::InvalidResponse { stage, message } => {
            Renewal::Rejected(format!("{} answered with what is refused: {message}", at(stage)))
        }
        other => Renewal::Rejected(format!("enterprise-managed authorization: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jwt(claims: Value) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("{}.{}.sig", b64.encode(b"{\"alg\":\"ES256\"}"), b64.encode(claims.to_string()))
    }

    #[test]
    fn an_id_token_leaves_only_for_the_identity_provider_that_issued_it_and_only_unexpired() {
        let idp = "https://idp.example";
        check_id_token(&jwt(json!({"iss": idp, "exp": 2000})), idp, 1000).unwrap();
        check_id_token(&jwt(json!({"iss": "https://idp.example/", "exp": 2000})), idp, 1000).unwrap();
        let e = check_id_token(&jwt(json!({"iss": "https://other-idp.example", "exp": 2000})), idp, 1000).unwrap_err();
        assert!(e.contains("other-idp.example") && e.contains("not sent"), "{e}");
        let e = check_id_token(&jwt(json!({"iss": idp, "exp": 900})), idp, 1000).unwrap_err();
        assert!(e.contains("expired 100 s ago") && e.contains("auth.id_token"), "{e}");
        let e = check_id_token("opaque-token", idp, 1000).unwrap_err();
        assert!(e.contains("not a JWT"), "{e}");
        assert!(check_id_token(&jwt(json!({"sub": "x"})), idp, 1000).is_err(), "no issuer: not sent");
    }

    /// A real HTTP server on loopback playing the MCP server's Protected
    /// Resource Metadata, its authorization server (`/as`) and the
    /// enterprise IdP (`/idp`), whose token endpoint answers with an
    /// ID-JAG of the given claims; it records each path asked.
    struct Parties {
        base: String,
        seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Parties {
        async fn start(jag_claims: impl Fn(&str) -> Value + Send + Sync + 'static) -> Self {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let (b, record) = (base.clone(), seen.clone());
            let jag_claims = std::sync::Arc::new(jag_claims);
            tokio::spawn(async move {
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else { return };
                    let mut buffer = vec![0u8; 16384];
                    let n = stream.read(&mut buffer).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buffer[..n]).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    record.lock().unwrap().push(path.clone());
                    let body = match path.as_str() {
                        "/.well-known/oauth-protected-resource/mcp" => {
                            json!({"resource": format!("{b}/mcp"), "authorization_servers": [format!("{b}/as")]})
                        }
                        "/.well-known/oauth-authorization-server/as" => json!({
                            "issuer": format!("{b}/as"), "authorization_endpoint": format!("{b}/as/authorize"),
                            "token_endpoint": format!("{b}/as/token"), "response_types_supported": ["code"],
                            "code_challenge_methods_supported": ["S256"],
                            "grant_types_supported": [JWT_BEARER]}),
                        "/idp/token" => {
                            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                            let header = b64.encode(br#"{"alg":"ES256","typ":"oauth-id-jag+jwt"}"#);
                            let claims = b64.encode(jag_claims(&b).to_string());
                            json!({"access_token": format!("{header}.{claims}.c2ln"),
                                "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"})
                        }
                        "/as/token" => json!({"access_token": "at", "token_type": "Bearer", "expires_in": 60}),
                        _ => json!({}),
                    };
                    let text = body.to_string();
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                }
            });
            Self { base, seen }
        }

        fn spec(&self, id_token: String) -> EnterpriseSpec {
            EnterpriseSpec {
                client_id: "mcp-client".into(),
                client_secret: Some(Secret::new("s")),
                idp_issuer: format!("{}/idp", self.base),
                idp_token_endpoint: Some(format!("{}/idp/token", self.base)),
                idp_client_id: "idp-client".into(),
                idp_client_secret: None,
                id_token: IdTokenSource::Value(Secret::new(id_token)),
                scopes: Vec::new(),
            }
        }

        fn challenge(&self) -> String {
            format!(r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#, self.base)
        }

        fn asked(&self, path: &str) -> bool {
            self.seen.lock().unwrap().iter().any(|p| p == path)
        }
    }

    fn rejected(result: Result<Grant, Renewal>) -> String {
        match result {
            Err(Renewal::Rejected(why)) => why,
            Err(Renewal::Failed(why)) => panic!("expected a refusal, got a failure: {why}"),
            Ok(_) => panic!("expected a refusal, got a grant"),
        }
    }

    #[tokio::test]
    async fn an_id_jag_for_another_audience_or_resource_is_never_presented_and_a_right_one_is() {
        let claims = |aud: &'static str, resource: Option<&'static str>| {
            move |b: &str| {
                let aud = if aud == "as" { format!("{b}/as") } else { aud.to_string() };
                let mut c = json!({"iss": format!("{b}/idp"), "sub": "person", "aud": aud, "client_id": "mcp-client",
                    "jti": "j", "iat": now(), "exp": now() + 300});
                c["resource"] = json!(resource.map(str::to_string).unwrap_or_else(|| format!("{b}/mcp")));
                c
            }
        };
        let id_token = |base: &str| jwt(json!({"iss": format!("{base}/idp"), "exp": now() + 300}));
        // An ID-JAG whose audience is another authorization server.
        let p = Parties::start(claims("https://evil.example/as", None)).await;
        let why =
            rejected(exchange(&format!("{}/mcp", p.base), &p.spec(id_token(&p.base)), Some(&p.challenge()), &[]).await);
        assert!(p.asked("/idp/token") && !p.asked("/as/token"), "never presented: {:?}", p.seen);
        assert!(why.contains("identity provider") && why.contains("audience"), "{why}");
        // One for another resource.
        let p = Parties::start(claims("as", Some("https://other.example/mcp"))).await;
        let why =
            rejected(exchange(&format!("{}/mcp", p.base), &p.spec(id_token(&p.base)), Some(&p.challenge()), &[]).await);
        assert!(!p.asked("/as/token"), "never presented: {:?}", p.seen);
        assert!(why.contains("resource"), "{why}");
        // An ID token from another IdP never leaves.
        let p = Parties::start(claims("as", None)).await;
        let foreign = jwt(json!({"iss": "https://other-idp.example", "exp": now() + 300}));
        let why = rejected(exchange(&format!("{}/mcp", p.base), &p.spec(foreign), Some(&p.challenge()), &[]).await);
        assert!(p.seen.lock().unwrap().is_empty(), "nothing sent anywhere: {:?}", p.seen);
        assert!(why.contains("other-idp.example"), "{why}");
        // The right ID-JAG is presented, and its access token kept.
        let grant = exchange(&format!("{}/mcp", p.base), &p.spec(id_token(&p.base)), Some(&p.challenge()), &[])
            .await
            .unwrap_or_else(|_| panic!("the exchange succeeds: {:?}", p.seen));
        assert!(p.asked("/as/token"));
        assert_eq!(grant.kind, GrantKind::Enterprise);
        assert_eq!(grant.tokens.as_ref().map(|t| t.access.as_str()), Some("at"));
        assert_eq!(grant.resource_indicator, format!("{}/mcp", p.base));
    }

    #[test]
    fn a_secret_goes_by_basic_unless_the_server_takes_only_post() {
        let secret = Secret::new("s");
        let kind = |methods: Option<Vec<&str>>| {
            format!("{:?}", authentication(Some(&secret), methods.map(|m| m.into_iter().map(str::to_string).collect())))
        };
        assert!(kind(None).starts_with("ClientSecretBasic"));
        assert!(kind(Some(vec!["client_secret_basic", "client_secret_post"])).starts_with("ClientSecretBasic"));
        assert!(kind(Some(vec!["client_secret_post"])).starts_with("ClientSecretPost"));
        assert_eq!(format!("{:?}", authentication(None, None)), "None");
    }
}
