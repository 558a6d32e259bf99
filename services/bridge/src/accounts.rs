//! Per-identity upstream accounts (`"per": "identity"` on a server's
//! `oauth` block): each caller acts at the server as its own account.
//!
//! - Step 6 of a call's pipeline ([`crate::check`]), [`Bridge::account_ready`]:
//!   a call of such a server needs its caller's own grant. A call with no
//!   identity (stdio, no authentication) is refused; a caller without an
//!   account is asked to connect one: a connect flow is made
//!   ([`code_mode_upstream_auth::connect`]) and the frontend of the call's
//!   session asked with an [`ApprovalRequest`] whose `connect` names it,
//!   the cell held as for an approval; once the person opened the link
//!   the call waits (within the approval bound) for the grant, then goes
//!   on. A frontend that cannot ask answers `Unavailable` with the link in
//!   its reason, which the call's refusal quotes. Never another
//!   identity's or the shared grant.
//! - [`Bridge::accounts`] serves [`subjects::ACCOUNTS`]: the connect flow's
//!   begin and finish (from the console's pages), an identity's accounts,
//!   disconnecting one, and the counts per server.
//!
//! The sessions such calls go over carry only the caller's token, as for
//! token exchange ([`crate::send`], [`crate::upstream`]).

use std::time::Duration;

use code_mode_proto::{
    self as proto, AccountInfo, AccountsReply, AccountsRequest, ApprovalReply, ConnectAsk, ToolCall,
};
use code_mode_upstream_auth::connect::{ConnectError, Connects};
use code_mode_upstream_auth::{Upstream, Vault, accounts};

use crate::answer::{Answer, Caller};
use crate::current::Current;
use crate::server::ServerHandle;
use crate::target::Target;
use crate::trail::Trail;
use crate::{Bridge, approval};

/// How often a call waiting for its identity's new grant looks for it.
const GRANT_POLL: Duration = Duration::from_millis(250);

/// The authorization of `server` when each identity acts there as its own
/// account through an `oauth` block (token exchange has no account to
/// connect: it exchanges the caller's own token, [`crate::send`]).
pub(crate) fn per_identity(server: &ServerHandle) -> Option<&Upstream> {
    server.per_identity_auth().filter(|auth| matches!(auth.spec(), code_mode_upstream_auth::AuthSpec::OAuth(_)))
}

impl Bridge {
    /// Step 6: a call of a per-identity server goes on only with its
    /// caller's own account (asking the caller to connect one when it has
    /// none). The account's subject goes into the audit record.
    pub(crate) async fn account_ready(
        &self,
        current: &Current,
        target: &Target<'_>,
        call: &ToolCall,
        caller: Caller,
        trail: &mut Trail,
    ) -> Result<(), Answer> {
        let Some(index) = target.server() else { return Ok(()) };
        let server = &current.servers[index];
        let Some(auth) = per_identity(server) else { return Ok(()) };
        let name = target.name(call);
        let refuse = |trail: &mut Trail, why: String| {
            tracing::info!(server = %server.name(), cell = %call.cell_id, "refused: {why}");
            trail.refused("bridge:account", &why);
            Err(self.refuse(format!("{name}: {why}")))
        };
        let Some(identity) = call.identity.as_deref() else {
            return refuse(
                trail,
                format!(
                    "the server {:?} acts as each caller's own account, and this call has no identity (a client \
                     over stdio or without authentication): refused, never sent with another account",
                    server.name()
                ),
            );
        };
        let vault = match auth.vault() {
            Ok(vault) => vault,
            Err(e) => return refuse(trail, e.to_string()),
        };
        match connected(&vault, auth, identity).await {
            Ok(Some(subject)) => {
                trail.upstream_subject = Some(subject);
                return Ok(());
            }
            Ok(None) => {}
            Err(why) => return refuse(trail, why),
        }
        // No account: the server's policy may refuse rather than ask.
        if let Some(why) = current.policies[index].as_ref().and_then(|applied| applied.policy.connect_refused()) {
            return refuse(
                trail,
                format!(
                    "{why} (you have no account connected at {:?}; the policy's connect rule refuses)",
                    server.name()
                ),
            );
        }
        // No account: ask the caller to connect one.
        let timeout = self.inner.limits.approval_timeout;
        let connects = Connects::new(self.inner.rebuild.state.clone(), vault.key().cloned());
        let flow = match connects.create(server.name(), auth.resource(), identity, timeout).await {
            Ok(flow) => flow,
            Err(e) => return refuse(trail, format!("the connect flow could not be made: {e}")),
        };
        tracing::info!(server = %server.name(), cell = %call.cell_id, "the caller has no account at the server: asking it to connect one");
        let started = tokio::time::Instant::now();
        let holder = match (self.inner.outbound.get(), caller) {
            (Some(bus), Caller::Code) => {
                crate::team::Holder::start(self, bus.clone(), &call.cell_id, call.call_index, false).await
            }
            _ => None,
        };
        let answer = self.ask_connect(call, server.name(), &flow, timeout).await;
        let result = match answer {
            ApprovalReply::Approved => {
                let deadline = started + timeout;
                loop {
                    match connected(&vault, auth, identity).await {
                        Ok(Some(subject)) => break Ok(subject),
                        Ok(None) if tokio::time::Instant::now() < deadline => tokio::time::sleep(GRANT_POLL).await,
                        Ok(None) => {
                            break Err(format!(
                                "no account at {:?} was connected within {} s: call again once it is",
                                server.name(),
                                timeout.as_secs()
                            ));
                        }
                        Err(why) => break Err(why),
                    }
                }
            }
            ApprovalReply::Unavailable { reason } => Err(reason),
            other => Err(format!(
                "the server {:?} needs your own account, and it was not connected: {}",
                server.name(),
                approval::refusal(&other, timeout)
            )),
        };
        drop(holder);
        match result {
            Ok(subject) => {
                trail.upstream_subject = Some(subject);
                Ok(())
            }
            Err(why) => refuse(trail, why),
        }
    }

    /// Ask the frontend of `call`'s session to have its person connect an
    /// account at `server` (the same path approvals take).
    async fn ask_connect(&self, call: &ToolCall, server: &str, flow: &str, timeout: Duration) -> ApprovalReply {
        let request = proto::ApprovalRequest {
            session: call.session.clone(),
            cell_id: call.cell_id.clone(),
            server: server.to_string(),
            tool: call.target.name().to_string(),
            arguments: String::new(),
            rule: "connect".into(),
            timeout_ms: timeout.as_millis() as u64,
            console: None,
            connect: Some(ConnectAsk { flow: flow.to_string(), server: server.to_string() }),
        };
        let gone = "the client session that made the call is gone, so nobody can be asked to connect";
        self.ask_person(call, &request, gone).await
    }

    /// Answer one request of the web console about upstream accounts.
    pub async fn accounts(&self, request: AccountsRequest) -> AccountsReply {
        let current = self.current();
        let servers: Vec<(&ServerHandle, &Upstream)> =
            current.servers.iter().filter_map(|s| per_identity(s).map(|auth| (s, auth))).collect();
        let refused = |reason: String| AccountsReply::Refused { reason };
        let Some((_, first)) = servers.first() else {
            return refused("no server here acts as each identity's own account".into());
        };
        let vault = match first.vault() {
            Ok(vault) => vault,
            Err(e) => return refused(e.to_string()),
        };
        let connects = Connects::new(self.inner.rebuild.state.clone(), vault.key().cloned());
        let by_name = |name: &str| servers.iter().find(|(s, _)| s.name() == name).map(|(_, auth)| (*auth).clone());
        match request {
            AccountsRequest::Begin { flow, viewer, browser, redirect_uri } => {
                let server = match connects.server_of(&flow).await {
                    Ok(Some(server)) => server,
                    Ok(None) => {
                        return refused("no such connect flow (it may have expired): call the tool again".into());
                    }
                    Err(e) => return refused(e.to_string()),
                };
                let Some(auth) = by_name(&server) else {
                    return refused(format!("the server {server:?} of this connect flow is no longer wrapped here"));
                };
                match connects.begin(&auth, &flow, &viewer, &browser, &redirect_uri).await {
                    Ok(url) => AccountsReply::Redirect { url },
                    Err(e) => refused(e.to_string()),
                }
            }
            AccountsRequest::Finish { state, code, iss, browser } => {
                match connects.finish(by_name, &vault, &state, &code, iss.as_deref(), &browser).await {
                    Ok(done) => {
                        code_mode_telemetry::upstream_account(&done.server, "login");
                        AccountsReply::Connected { server: done.server, subject: done.subject }
                    }
                    Err(e) => {
                        if !matches!(e, ConnectError::Refused(_)) {
                            tracing::warn!(error = %e, "finishing a connect flow failed");
                        }
                        if let ConnectError::Refused(why) = &e
                            && why.contains("authorization server")
                        {
                            code_mode_telemetry::upstream_account(first.server(), "failure");
                        }
                        refused(e.to_string())
                    }
                }
            }
            AccountsRequest::List { identity } => {
                let mut list = Vec::new();
                for (server, auth) in &servers {
                    if let Ok(Some(grant)) = accounts::load(&vault, auth.resource(), &identity).await
                        && grant.tokens.is_some()
                    {
                        list.push(AccountInfo {
                            server: server.name().to_string(),
                            subject: grant.subject.unwrap_or_else(|| "unknown".into()),
                            scopes: grant.scopes,
                            expires_at: grant.tokens.and_then(|t| t.expires_at),
                        });
                    }
                }
                AccountsReply::Accounts { accounts: list }
            }
            AccountsRequest::Disconnect { identity, server } => {
                let Some(auth) = by_name(&server) else {
                    return refused(format!("no server {server:?} here acts as each identity's own account"));
                };
                let grant = accounts::load(&vault, auth.resource(), &identity).await.ok().flatten();
                let revoked = match &grant {
                    Some(grant) => accounts::revoke(grant).await,
                    None => false,
                };
                match accounts::delete(&vault, auth.resource(), &identity).await {
                    Ok(_) => {
                        if let Err(e) = connects.note(auth.resource(), &identity, false).await {
                            tracing::warn!(error = %e, "the count of connected accounts was not updated");
                        }
                        tracing::info!(%server, %identity, revoked, "an identity disconnected its account");
                        AccountsReply::Disconnected { revoked }
                    }
                    Err(e) => refused(e.to_string()),
                }
            }
            AccountsRequest::Counts => {
                let mut counts = Vec::new();
                for (server, auth) in &servers {
                    match connects.count(auth.resource()).await {
                        Ok(n) => counts.push((server.name().to_string(), n)),
                        Err(e) => return refused(e.to_string()),
                    }
                }
                AccountsReply::Counts { servers: counts }
            }
        }
    }
}

/// The subject of `identity`'s usable grant at `auth`'s server, `None`
/// when it has connected none (or its grant was withdrawn).
async fn connected(vault: &Vault, auth: &Upstream, identity: &str) -> Result<Option<String>, String> {
    match accounts::load(vault, auth.resource(), identity).await {
        Ok(Some(grant)) if grant.tokens.is_some() && grant.login_needed.is_none() => {
            Ok(Some(grant.subject.unwrap_or_else(|| "unknown".into())))
        }
        Ok(_) => Ok(None),
        Err(e) => Err(format!("the caller's account at {} cannot be read: {e}", auth.server())),
    }
}
