//! Each identity's own grant of a per-identity server: kept in the vault
//! under (server URL, identity), so a record's place and its associated
//! data name both and an identity's record never opens as another's or as
//! the deployment's; disconnecting revokes it at the authorization server
//! where that server offers RFC 7009 revocation.

use std::time::Duration;

use serde_json::Value;

use crate::error::VaultError;
use crate::grant::Grant;
use crate::vault::Vault;

/// How long a revocation at the authorization server may take.
const REVOKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `identity`'s grant of `resource`, `None` when it connected none.
pub async fn load(vault: &Vault, resource: &str, identity: &str) -> Result<Option<Grant>, VaultError> {
    vault.load_for(resource, Some(identity)).await
}

/// Keep `grant` as its identity's (a grant without one is the
/// deployment's).
pub async fn save(vault: &Vault, grant: &Grant) -> Result<(), VaultError> {
    vault.save(grant).await
}

/// Forget `identity`'s grant of `resource`; true when there was one.
pub async fn delete(vault: &Vault, resource: &str, identity: &str) -> Result<bool, VaultError> {
    vault.delete_for(resource, Some(identity)).await
}

/// Revoke `grant`'s tokens at its authorization server (RFC 7009: the
/// refresh token, which revokes its access tokens too, else the access
/// token); true when the server offers revocation and accepted it.
pub async fn revoke(grant: &Grant) -> bool {
    let Some(endpoint) = grant.metadata.get("revocation_endpoint").and_then(Value::as_str) else {
        return false;
    };
    let (Some(tokens), Some(client)) = (&grant.tokens, &grant.client) else { return false };
    let (token, hint) = match &tokens.refresh {
        Some(refresh) => (refresh.as_str(), "refresh_token"),
        None => (tokens.access.as_str(), "access_token"),
    };
    crate::ensure_crypto();
    let Ok(http) =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).timeout(REVOKE_TIMEOUT).build()
    else {
        return false;
    };
    let mut form = vec![("token", token.to_string()), ("token_type_hint", hint.to_string())];
    let mut request = http.post(endpoint);
    match &client.secret {
        Some(secret) => request = request.basic_auth(&client.id, Some(secret)),
        None => form.push(("client_id", client.id.clone())),
    }
    let body = form
        .iter()
        .map(|(k, v)| format!("{k}={}", url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()))
        .collect::<Vec<_>>()
        .join("&");
    let request = request.header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
    match request.send().await {
        Ok(response) if response.status().is_success() => true,
        Ok(response) => {
            tracing::warn!(issuer = ?grant.issuer, status = %response.status(), "the authorization server refused to revoke a disconnected account's token");
            false
        }
        Err(e) => {
            tracing::warn!(issuer = ?grant.issuer, error = %e, "the authorization server could not be reached to revoke a disconnected account's token");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::{GrantKind, Tokens};
    use crate::key::Key;
    use code_mode_core::state::SessionStore;

    fn grant(identity: Option<&str>, access: &str) -> Grant {
        Grant {
            resource: "https://t.example/mcp".into(),
            resource_indicator: "https://t.example/mcp".into(),
            kind: GrantKind::AuthorizationCode,
            issuer: None,
            metadata: Value::Null,
            client: None,
            tokens: Some(Tokens { access: access.into(), refresh: None, received_at: 1, expires_at: None }),
            scopes: vec![],
            wanted: vec![],
            login_needed: None,
            logged_in_at: 1,
            identity: identity.map(str::to_string),
            subject: Some(format!("{access}-subject")),
        }
    }

    #[tokio::test]
    async fn each_identitys_grant_is_its_own_and_never_the_deployments() {
        let vault = Vault::in_store(SessionStore::in_memory(), Some(Key { bytes: [5; 32], source: "k".into() }));
        save(&vault, &grant(None, "SHARED")).await.unwrap();
        save(&vault, &grant(Some("alice"), "ALICE")).await.unwrap();
        let url = "https://t.example/mcp";
        let alice = load(&vault, url, "alice").await.unwrap().unwrap();
        assert_eq!(alice.tokens.unwrap().access, "ALICE");
        assert_eq!((alice.resource.as_str(), alice.identity.as_deref()), (url, Some("alice")));
        assert!(load(&vault, url, "bob").await.unwrap().is_none(), "bob has none: never alice's or the shared one");
        assert_eq!(vault.load(url).await.unwrap().unwrap().tokens.unwrap().access, "SHARED");
        assert!(delete(&vault, url, "alice").await.unwrap());
        assert!(load(&vault, url, "alice").await.unwrap().is_none());
        assert!(vault.load(url).await.unwrap().is_some(), "disconnecting alice leaves the deployment's grant");
    }

    #[tokio::test]
    async fn a_grant_whose_server_offers_no_revocation_is_not_revoked() {
        assert!(!revoke(&grant(Some("alice"), "A")).await);
    }
}
