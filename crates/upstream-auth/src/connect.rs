//! Connecting one identity's own account at a per-identity server: the
//! authorization-code flow in two steps that may run in different
//! processes (a bridge replica creates the flow, another begins it, a
//! third finishes it), with everything between the steps in the state
//! store.
//!
//! - [`Connects::create`]: a call needs an account its identity lacks; a
//!   flow record is made (random id of 128 bits, the identity, the server,
//!   an expiry: the approval bound).
//! - [`Connects::begin`]: the person opened the flow's link in the
//!   console: the viewer must be the flow's identity, the flow unused and
//!   unexpired. Discovery, the client registered for the frontend's
//!   redirect URI (kept per server and redirect URI, so the next flow
//!   reuses it; but when the last browser sent to the authorization server
//!   with it never came back with a code, the next flow registers a new
//!   one, since the server may have forgotten it), PKCE and `state` are rmcp's ([`crate::flow`]); the login
//!   between the steps ([`crate::flow::Portable`], holding the PKCE
//!   verifier) is sealed into the flow record, with the hash of the
//!   browser's connect cookie.
//! - [`Connects::finish`]: the redirect came back: the flow is found by
//!   its `state`, the browser must be the one that began it, then the flow
//!   is marked used by compare-and-set (a replayed callback finds it used
//!   and is refused), the code exchanged (the `iss` of RFC 9207 checked),
//!   and the grant saved as the identity's, with the upstream subject.
//!
//! Records are sealed with the token key (XChaCha20-Poly1305, the flow id
//! as associated data); nothing here logs a token, code, verifier or
//! state.

use std::time::Duration;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use code_mode_core::state::{SessionStore, StateError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::flow::{self, Portable};
use crate::grant::{ClientInfo, Registration, now};
use crate::key::Key;
use crate::spec::AuthSpec;
use crate::upstream::Upstream;
use crate::vault::Vault;

/// The state store's session of connect flows and the clients registered
/// for redirect URIs.
const SESSION: &str = "upstream-connect";
/// The record format written.
const VERSION: u64 = 1;

/// Why a step of a connect flow was refused or failed. Each says what to
/// do, never a token or code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectError {
    /// The step is refused (unknown, expired, used, another person's or
    /// another browser's flow, the authorization server's refusal).
    #[error("{0}")]
    Refused(String),
    /// The state store could not be read or written.
    #[error("the connect flow's record {key} could not be {doing}: {why}")]
    Store {
        /// The record.
        key: String,
        /// Read or written.
        doing: &'static str,
        /// What the store said.
        why: String,
    },
    /// No token key, or a record sealed under another one.
    #[error("the connect flow's record {key} cannot be sealed or opened: {why}")]
    Sealed {
        /// The record.
        key: String,
        /// Why.
        why: String,
    },
}

/// One flow, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FlowRecord {
    identity: String,
    server: String,
    resource: String,
    created: u64,
    expires: u64,
    /// The SHA-256 of the `state` sent, once begun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    /// The hash of the browser's connect cookie, once begun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    browser: Option<String>,
    #[serde(default)]
    used: bool,
    /// The sealed [`Portable`] login, once begun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    login: Option<Value>,
}

/// A finished flow: whose account at which server is connected now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// The wrapped server's name.
    pub server: String,
    /// The identity whose account it is.
    pub identity: String,
    /// The upstream account's subject.
    pub subject: String,
}

/// The connect flows of a deployment (a cheap handle).
#[derive(Clone)]
pub struct Connects {
    store: SessionStore,
    key: Option<Key>,
}

impl std::fmt::Debug for Connects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connects").field("store", &self.store).finish_non_exhaustive()
    }
}

impl Connects {
    /// Flows in `store`, sealed with `key` (the vault's).
    pub fn new(store: SessionStore, key: Option<Key>) -> Self {
        Self { store, key }
    }

    /// A new flow for `identity` at `server` (its URL `resource`), valid
    /// for `ttl`; its id.
    pub async fn create(
        &self,
        server: &str,
        resource: &str,
        identity: &str,
        ttl: Duration,
    ) -> Result<String, ConnectError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| ConnectError::Sealed { key: "a new flow".into(), why: format!("no random source: {e}") })?;
        let flow = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let created = now();
        let record = FlowRecord {
            identity: identity.to_string(),
            server: server.to_string(),
            resource: resource.to_string(),
            created,
            expires: created + ttl.as_secs().max(1),
            state: None,
            browser: None,
            used: false,
            login: None,
        };
        let name = flow_name(&flow);
        let value = serde_json::to_value(&record).unwrap_or(Value::Null);
        self.store.create(SESSION, &name, &value).await.map_err(|e| store_error(&name, "written", e))?;
        Ok(flow)
    }

    /// Begin `flow` for `viewer` in the browser whose connect cookie hashes
    /// to `browser`: the authorization URL. `upstream`: the server's
    /// authorization (its `auth` block and URL).
    pub async fn begin(
        &self,
        upstream: &Upstream,
        flow: &str,
        viewer: &str,
        browser: &str,
        redirect_uri: &str,
    ) -> Result<String, ConnectError> {
        let name = flow_name(flow);
        let Some((mut record, revision)) = self.flow(flow).await? else {
            return Err(refused("no such connect flow (it may have expired): call the tool again for a new link"));
        };
        if record.identity != viewer {
            tracing::warn!(server = %record.server, "a connect link was opened by another identity than the one it was made for: refused");
            return Err(refused(
                "this connect link was made for another identity: log in to the console as that identity",
            ));
        }
        if record.used {
            return Err(refused("this connect link was used already: call the tool again for a new one"));
        }
        if record.expires < now() {
            return Err(refused("this connect link expired: call the tool again for a new one"));
        }
        if record.server != upstream.server() || record.resource != upstream.resource() {
            return Err(refused("this connect link names a server this bridge does not wrap (its config changed)"));
        }
        let AuthSpec::OAuth(spec) = upstream.spec() else {
            return Err(refused("the server's auth block is not \"oauth\": there is no account to connect"));
        };
        let mut spec = spec.clone();
        let client_name = client_name(&record.resource, redirect_uri);
        let known = match spec.client_id {
            Some(_) => None,
            None => match self.load_client(&client_name).await? {
                // The last browser sent to the authorization server with
                // this client never came back with a code: the server may
                // have forgotten the client (restarted without its
                // registrations), so this flow registers a new one.
                Some(kept) if kept.unanswered => {
                    tracing::info!(server = %record.server, "the last login with the client registered at this server never came back: registering a new client");
                    None
                }
                kept => kept.map(|kept| kept.client),
            },
        };
        if let Some(client) = &known {
            spec.client_id = Some(client.id.clone());
            spec.client_secret = client.secret.clone().map(crate::spec::Secret::new);
        }
        let pending = flow::begin(&record.resource, &spec, None, None, &[], redirect_uri)
            .await
            .map_err(|why| refused(&format!("{}: {why}", record.server)))?;
        let portable = pending.portable().await.map_err(|why| refused(&why))?;
        // The client registered here (now, or by an earlier flow: rmcp then
        // takes it as preregistered) is kept for the next flow, marked
        // unanswered until a callback with a code comes back through it
        // (`finish`).
        let registered = match known {
            Some(known) => Some(known),
            None if portable.client.registration == Registration::Dynamic => Some(portable.client.clone()),
            None => None,
        };
        if let Some(client) = registered {
            self.save_client(&client_name, &KeptClient { client, unanswered: true }).await?;
        }
        record.state = Some(digest(&portable.state));
        record.browser = Some(browser.to_string());
        record.login = Some(self.seal(flow, &serde_json::to_vec(&portable).unwrap_or_default(), &name)?);
        let value = serde_json::to_value(&record).unwrap_or(Value::Null);
        match self.store.compare_and_set(SESSION, &name, &value, revision).await {
            Ok(_) => {}
            Err(StateError::Conflict(_)) => {
                return Err(refused("this connect link changed meanwhile (opened twice?): open it once more"));
            }
            Err(e) => return Err(store_error(&name, "written", e)),
        }
        let pointer = state_name(&portable.state);
        self.store
            .update(SESSION, &pointer, |_| json!({"flow": flow}))
            .await
            .map_err(|e| store_error(&pointer, "written", e))?;
        Ok(portable.url)
    }

    /// Finish the flow whose `state` came back with `code` (and `iss`) in
    /// the browser whose connect cookie hashes to `browser`; `upstream_of`
    /// gives the flow's server's authorization by name; `vault` keeps the
    /// identity's grant.
    pub async fn finish(
        &self,
        upstream_of: impl Fn(&str) -> Option<Upstream>,
        vault: &Vault,
        state: &str,
        code: &str,
        iss: Option<&str>,
        browser: &str,
    ) -> Result<Connected, ConnectError> {
        let pointer = state_name(state);
        let flow = match self.store.get(SESSION, &pointer).await.map_err(|e| store_error(&pointer, "read", e))? {
            Some(entry) => entry.value["flow"].as_str().unwrap_or_default().to_string(),
            None => return Err(refused("no connect flow has this state: start again by calling the tool")),
        };
        let name = flow_name(&flow);
        let Some((mut record, revision)) = self.flow(&flow).await? else {
            return Err(refused("the connect flow is gone (expired): start again by calling the tool"));
        };
        if record.state.as_deref() != Some(digest(state).as_str()) {
            return Err(refused("this state is not the connect flow's current one: start again by calling the tool"));
        }
        if record.used {
            tracing::warn!(server = %record.server, "a connect callback came again for a used flow: refused (a replay?)");
            return Err(refused("this connect flow was completed already: a callback is taken once"));
        }
        if record.browser.as_deref() != Some(browser) {
            tracing::warn!(server = %record.server, "a connect callback came from another browser than the one that began the flow: refused");
            return Err(refused(
                "this connect flow was begun in another browser: finish it in the browser that opened the link",
            ));
        }
        if record.expires < now() {
            return Err(refused("this connect flow expired: call the tool again for a new link"));
        }
        record.used = true;
        let sealed = record.login.take();
        let value = serde_json::to_value(&record).unwrap_or(Value::Null);
        match self.store.compare_and_set(SESSION, &name, &value, revision).await {
            Ok(_) => {}
            Err(StateError::Conflict(_)) => {
                return Err(refused("this connect flow was completed already: a callback is taken once"));
            }
            Err(e) => return Err(store_error(&name, "written", e)),
        }
        let _ = self.store.delete(SESSION, &pointer).await;
        let Some(upstream) = upstream_of(&record.server) else {
            return Err(refused(&format!("the server {:?} is no longer wrapped here", record.server)));
        };
        let Some(sealed) = sealed else {
            return Err(refused("the connect flow was never begun: open its link first"));
        };
        let plain = self.open(&flow, &sealed, &name)?;
        let portable: Portable = serde_json::from_slice(&plain)
            .map_err(|e| ConnectError::Sealed { key: name.clone(), why: format!("not a login: {e}") })?;
        // A code came back through this client: the authorization server
        // knows it (even if the exchange below fails for another reason).
        self.answered(&record.resource, &portable.redirect_uri, &portable.client).await;
        let (mut grant, subject) =
            flow::finish_portable(&record.resource, portable, code, iss).await.map_err(|why| {
                tracing::warn!(server = %record.server, %why, "connecting an account failed at the authorization server");
                refused(&format!("{}: {why}", record.server))
            })?;
        grant.identity = Some(record.identity.clone());
        grant.subject = Some(subject.clone());
        crate::accounts::save(vault, &grant)
            .await
            .map_err(|e| ConnectError::Sealed { key: vault.place(upstream.resource()), why: e.to_string() })?;
        self.note(&record.resource, &record.identity, true).await?;
        tracing::info!(server = %record.server, identity = %record.identity, %subject, "an identity connected its own account");
        Ok(Connected { server: record.server, identity: record.identity, subject })
    }

    /// The server the flow `flow` is for, when it exists.
    pub async fn server_of(&self, flow: &str) -> Result<Option<String>, ConnectError> {
        Ok(self.flow(flow).await?.map(|(record, _)| record.server))
    }

    /// Note that `identity` has (`true`) or no longer has an account at
    /// `resource`, for [`Connects::count`]; identities are kept hashed.
    pub async fn note(&self, resource: &str, identity: &str, connected: bool) -> Result<(), ConnectError> {
        let name = index_name(resource);
        let id = digest(identity);
        self.store
            .update(SESSION, &name, |old| {
                let mut ids: Vec<String> =
                    old.and_then(|v| serde_json::from_value(v["ids"].clone()).ok()).unwrap_or_default();
                ids.retain(|known| *known != id);
                if connected {
                    ids.push(id.clone());
                }
                json!({"ids": ids})
            })
            .await
            .map(|_| ())
            .map_err(|e| store_error(&name, "written", e))
    }

    /// How many identities have an account at `resource`.
    pub async fn count(&self, resource: &str) -> Result<u64, ConnectError> {
        let name = index_name(resource);
        let entry = self.store.get(SESSION, &name).await.map_err(|e| store_error(&name, "read", e))?;
        Ok(entry.and_then(|e| e.value["ids"].as_array().map(|ids| ids.len() as u64)).unwrap_or(0))
    }

    /// The flow `flow` and its revision, when it exists.
    async fn flow(&self, flow: &str) -> Result<Option<(FlowRecord, u64)>, ConnectError> {
        if flow.is_empty()
            || flow.len() > 43
            || !flow.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Ok(None);
        }
        let name = flow_name(flow);
        let Some(entry) = self.store.get(SESSION, &name).await.map_err(|e| store_error(&name, "read", e))? else {
            return Ok(None);
        };
        let record: FlowRecord = serde_json::from_value(entry.value).map_err(|e| ConnectError::Store {
            key: name,
            doing: "read",
            why: format!("not a flow: {e}"),
        })?;
        Ok(Some((record, entry.revision)))
    }

    async fn load_client(&self, name: &str) -> Result<Option<KeptClient>, ConnectError> {
        let Some(entry) = self.store.get(SESSION, name).await.map_err(|e| store_error(name, "read", e))? else {
            return Ok(None);
        };
        let plain = self.open(name, &entry.value, name)?;
        // A record written before the marker is a bare client.
        Ok(serde_json::from_slice::<KeptClient>(&plain).ok().or_else(|| {
            serde_json::from_slice::<ClientInfo>(&plain).ok().map(|client| KeptClient { client, unanswered: false })
        }))
    }

    /// Clear the unanswered mark of the kept client for `resource` and
    /// `redirect_uri`, when it is still `client` (another flow may have
    /// registered a newer one meanwhile). Best effort: a failure costs the
    /// next flow one more registration.
    async fn answered(&self, resource: &str, redirect_uri: &str, client: &ClientInfo) {
        let name = client_name(resource, redirect_uri);
        match self.load_client(&name).await {
            Ok(Some(kept)) if kept.unanswered && kept.client.id == client.id => {
                if let Err(e) = self.save_client(&name, &KeptClient { client: kept.client, unanswered: false }).await {
                    tracing::warn!(error = %e, "the registered client's answered mark was not kept");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the registered client could not be read"),
        }
    }

    async fn save_client(&self, name: &str, client: &KeptClient) -> Result<(), ConnectError> {
        let sealed = self.seal(name, &serde_json::to_vec(client).unwrap_or_default(), name)?;
        self.store
            .update(SESSION, name, |_| sealed.clone())
            .await
            .map(|_| ())
            .map_err(|e| store_error(name, "written", e))
    }

    fn seal(&self, aad: &str, plain: &[u8], at: &str) -> Result<Value, ConnectError> {
        let key = self.key.as_ref().ok_or_else(|| sealed_error(at, "no token key is set"))?;
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).map_err(|e| sealed_error(at, &format!("no random source: {e}")))?;
        let aad = format!("code-mode connect v{VERSION}\n{aad}");
        let sealed = XChaCha20Poly1305::new((&key.bytes).into())
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad: aad.as_bytes() })
            .map_err(|_| sealed_error(at, "encryption failed"))?;
        let b64 = base64::engine::general_purpose::STANDARD;
        Ok(json!({"v": VERSION, "nonce": b64.encode(nonce), "sealed": b64.encode(sealed)}))
    }

    fn open(&self, aad: &str, record: &Value, at: &str) -> Result<Vec<u8>, ConnectError> {
        let key = self.key.as_ref().ok_or_else(|| sealed_error(at, "no token key is set"))?;
        let b64 = base64::engine::general_purpose::STANDARD;
        let field = |name: &str| record.get(name).and_then(Value::as_str).and_then(|s| b64.decode(s).ok());
        let (Some(nonce), Some(sealed)) = (field("nonce"), field("sealed")) else {
            return Err(sealed_error(at, "not a sealed record"));
        };
        if nonce.len() != 24 || record.get("v").and_then(Value::as_u64) != Some(VERSION) {
            return Err(sealed_error(at, "not a sealed record of this version"));
        }
        let aad = format!("code-mode connect v{VERSION}\n{aad}");
        XChaCha20Poly1305::new((&key.bytes).into())
            .decrypt(XNonce::from_slice(&nonce), Payload { msg: &sealed, aad: aad.as_bytes() })
            .map_err(|_| sealed_error(at, &format!("it does not open with the key of {}", key.source)))
    }
}

fn refused(why: &str) -> ConnectError {
    ConnectError::Refused(why.to_string())
}

fn store_error(key: &str, doing: &'static str, e: StateError) -> ConnectError {
    ConnectError::Store { key: format!("{SESSION}.{key}"), doing, why: e.to_string() }
}

fn sealed_error(at: &str, why: &str) -> ConnectError {
    ConnectError::Sealed { key: format!("{SESSION}.{at}"), why: why.to_string() }
}

/// Hex SHA-256 of `text`, cut to 32 characters (128 bits).
fn digest(text: &str) -> String {
    hex::encode(&sha2::Sha256::digest(text.as_bytes())[..16])
}

fn flow_name(flow: &str) -> String {
    format!("flow-{flow}")
}

fn state_name(state: &str) -> String {
    format!("state-{}", digest(state))
}

fn index_name(resource: &str) -> String {
    format!("index-{}", digest(resource))
}

/// The client registered at a server for one redirect URI, kept for the
/// next flows through it.
#[derive(Serialize, Deserialize)]
struct KeptClient {
    client: ClientInfo,
    /// A browser was sent to the authorization server with this client
    /// and no code has come back through it since.
    #[serde(default)]
    unanswered: bool,
}

fn client_name(resource: &str, redirect_uri: &str) -> String {
    format!("client-{}", digest(&format!("{resource}\n{redirect_uri}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connects() -> Connects {
        Connects::new(SessionStore::in_memory(), Some(Key { bytes: [7; 32], source: "test key".into() }))
    }

    #[tokio::test]
    async fn a_flow_id_is_random_url_safe_and_128_bits_and_its_record_names_identity_and_server() {
        let connects = connects();
        let a = connects.create("tracker", "https://t.example/mcp", "alice", Duration::from_secs(60)).await.unwrap();
        let b = connects.create("tracker", "https://t.example/mcp", "alice", Duration::from_secs(60)).await.unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 22, "16 bytes, base64url without padding: {a}");
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{a}");
        let (record, _) = connects.flow(&a).await.unwrap().unwrap();
        assert_eq!((record.identity.as_str(), record.server.as_str(), record.used), ("alice", "tracker", false));
        assert!(connects.flow("not-a-flow").await.unwrap().is_none());
        assert!(connects.flow("../x").await.unwrap().is_none(), "never a key built from a bad id");
    }

    #[tokio::test]
    async fn a_sealed_record_opens_only_under_its_own_name_and_key() {
        let connects = connects();
        let sealed = connects.seal("flow-a", b"verifier", "flow-a").unwrap();
        assert!(!sealed.to_string().contains("verifier"));
        assert_eq!(connects.open("flow-a", &sealed, "flow-a").unwrap(), b"verifier");
        assert!(connects.open("flow-b", &sealed, "flow-b").is_err(), "another flow's record does not open");
        let other = Connects::new(SessionStore::in_memory(), Some(Key { bytes: [8; 32], source: "other".into() }));
        assert!(other.open("flow-a", &sealed, "flow-a").is_err());
    }

    #[tokio::test]
    async fn a_flow_past_its_bound_is_refused_at_begin_and_another_identity_never_begins_one() {
        let connects = connects();
        let upstream = Upstream::new(
            "tracker",
            "https://t.example/mcp",
            AuthSpec::OAuth(Default::default()),
            "code-mode login",
            None,
            crate::Mode::Serve,
        );
        let fresh =
            connects.create("tracker", "https://t.example/mcp", "alice", Duration::from_secs(60)).await.unwrap();
        let e = connects.begin(&upstream, &fresh, "bob", "b", "http://127.0.0.1/cb").await.unwrap_err();
        assert!(e.to_string().contains("another identity"), "{e}");
        // A flow lives at least 1 s: this one is past its bound 2 s later.
        let old = connects.create("tracker", "https://t.example/mcp", "alice", Duration::ZERO).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let e = connects.begin(&upstream, &old, "alice", "a", "http://127.0.0.1/cb").await.unwrap_err();
        assert!(matches!(&e, ConnectError::Refused(_)) && e.to_string().contains("expired"), "{e}");
    }

    #[tokio::test]
    async fn a_state_nobody_issued_is_refused_before_anything_is_exchanged() {
        let connects = connects();
        let vault = Vault::in_store(SessionStore::in_memory(), None);
        let e = connects.finish(|_| None, &vault, "forged", "code", None, "browser").await.unwrap_err();
        assert!(matches!(e, ConnectError::Refused(_)), "{e}");
    }
}
