//! Per-identity upstream accounts: the connect flow's two steps, the
//! accounts an identity has connected, and the counts the operations view
//! shows ([`subjects::ACCOUNTS`]).
//!
//! The bridge owns the flows and the grants (in its state store); the
//! frontend owns the browser side (the console's connect pages and the
//! connect cookie, whose hash binds a flow to one browser). No token ever
//! crosses the bus: only links, names, subjects, scopes and expiries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// Set on an [`ApprovalRequest`] when the call waits for its identity to
/// connect its own account at a wrapped server (a server whose `oauth`
/// auth block is `"per": "identity"`).
///
/// The frontend asks the client with a URL-mode elicitation (elicitation
/// id = [`ConnectAsk::flow`]) whose url is the console's
/// `/console/connect/<flow>`; a URL accept only means the person opened
/// it, and the frontend answers [`ApprovalReply::Approved`] (the bridge then
/// waits for the grant); decline and cancel answer as for an approval; a
/// client that cannot be asked by URL gets [`ApprovalReply::Unavailable`]
/// whose reason holds the full link and says what to do, and the bridge
/// ends the call with a `ToolError` quoting it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectAsk {
    /// The connect flow's id (random, at least 128 bits, URL-safe).
    pub flow: String,
    /// The wrapped server whose account is missing.
    pub server: String,
}

/// The frontend asks the bridges about upstream accounts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum AccountsRequest {
    /// A person opened a flow's connect link: [`AccountsReply::Redirect`]
    /// to the upstream's authorization endpoint, or
    /// [`AccountsReply::Refused`] (no such flow, expired, used, or not the
    /// viewer's).
    Begin {
        /// The flow ([`ConnectAsk::flow`]).
        flow: String,
        /// Who opened the link (the console's login): must be the flow's
        /// identity.
        viewer: String,
        /// The hex SHA-256 of the browser's connect cookie: the callback
        /// must come from the same browser.
        browser: String,
        /// Where the authorization server sends the browser back (the
        /// frontend's `<base>/console/connect/callback`).
        redirect_uri: String,
    },
    /// The authorization server sent the browser back:
    /// [`AccountsReply::Connected`] once the code is exchanged and the
    /// grant saved, else [`AccountsReply::Refused`] (unknown state, used
    /// already, another browser, expired, wrong issuer, the exchange
    /// failed).
    Finish {
        /// The `state` parameter of the callback.
        state: String,
        /// The `code` parameter.
        code: String,
        /// The `iss` parameter (RFC 9207), when the server sent one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        iss: Option<String>,
        /// The hex SHA-256 of the browser's connect cookie.
        browser: String,
    },
    /// The accounts one identity has connected: [`AccountsReply::Accounts`].
    List {
        /// The identity.
        identity: String,
    },
    /// Forget one identity's account at one server (revoking its tokens
    /// at the authorization server where it offers RFC 7009):
    /// [`AccountsReply::Disconnected`].
    Disconnect {
        /// The identity.
        identity: String,
        /// The wrapped server's name.
        server: String,
    },
    /// How many identities have connected an account, per server:
    /// [`AccountsReply::Counts`].
    Counts,
}

/// A bridge's answer to an [`AccountsRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "result", rename_all = "snake_case", deny_unknown_fields)]
pub enum AccountsReply {
    /// Send the browser here: the authorization endpoint with the flow's
    /// `state`, PKCE challenge, redirect URI, resource and scopes.
    Redirect {
        /// The authorization URL.
        url: String,
    },
    /// The step was refused; the reason is for the person.
    Refused {
        /// Why.
        reason: String,
    },
    /// The account is connected: the waiting call goes on.
    Connected {
        /// The wrapped server's name.
        server: String,
        /// The upstream account's subject.
        subject: String,
    },
    /// An identity's connected accounts.
    Accounts {
        /// One per server.
        accounts: Vec<AccountInfo>,
    },
    /// The account is forgotten.
    Disconnected {
        /// The authorization server confirmed the revocation (RFC 7009);
        /// false when it offers none or it failed (the grant is deleted
        /// either way).
        revoked: bool,
    },
    /// Connected identities per server.
    Counts {
        /// `(server, identities)` pairs.
        servers: Vec<(String, u64)>,
    },
}

/// One connected account, as the console lists it (never a token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountInfo {
    /// The wrapped server's name.
    pub server: String,
    /// The upstream account's subject.
    pub subject: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When the access token expires, in Unix seconds, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}
