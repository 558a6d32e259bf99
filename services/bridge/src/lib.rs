//! The bridge: every tool call from a sandbox passes here before a wrapped
//! server sees it.
//!
//! It owns the wrapped servers (one actor each, [`server`]), the tool
//! [`catalog`] built from their `tools/list`, and the checks of
//! [`Bridge::call`]: the tool is kept, the run has calls left, the arguments
//! are an object within the size limit that the tool's schema accepts, and,
//! when some tools are private, the [`private`] data rule (judged last,
//! against the session-state store). A server with a [`policy`] has its
//! rules applied after the schema check and before the private rule, so a
//! call the policy refuses never taints and never reaches the server: a
//! denied tool is refused (and, unless [`PolicyOptions::offer_denied`], not
//! offered at all), the policy's argument schema must accept the arguments,
//! the tool's rate limits are counted in the same session-state store, and a
//! tool needing approval waits for the person's answer, asked through the
//! frontend of the call's client session ([`approval`]). Each policy
//! decision is audited and counted. Only then does the call go out, with a
//! timeout; the result comes back as a string (structured content as JSON,
//! else text) or is refused when too large. Refusals carry the bridge's own
//! short message; host faults only a type name.
//!
//! Over the bus it answers [`subjects::CATALOG_GET`],
//! [`subjects::TOOL_CALL`], [`subjects::TOOL_DIRECT`] and
//! [`subjects::SESSION_END`] in the `bridge` queue group, and asks approvals
//! on [`subjects::approval`] of the call's asker (the frontend session that
//! ran it; for a client session, the session itself).
//!
//! A call's state (taint, `grant` counters, direct-call count) lives under
//! its session, or for a stateless client under its identity's scope,
//! resolved to the scope's current generation when a check first needs it
//! ([`scope`]).
//!
//! The catalog follows the wrapped servers' tool lists: when a server's list
//! changes (`notifications/tools/list_changed`, or other tools after a
//! restart, see [`server`]) a refresher task rebuilds the whole catalog from
//! every server's current tools with the same allowlists, private labels and
//! prefixes, and swaps it in with a higher [`Bridge::catalog_version`]. A
//! call is checked against the catalog current when it arrives. A rebuild
//! that fails (a new name clash, a private label whose tool is gone) keeps
//! the old catalog and logs an error naming the problem: startup refuses such
//! a configuration, but a running bridge keeps serving what it had rather
//! than drop every tool. An allowlist is explicit, so a new tool that is not
//! on it stays out.
//!
//! The config itself can change while the bridge runs: [`Bridge::reload`]
//! (SIGHUP in `serve` and `bridge`) rereads the policy files and the
//! `mcpServers` file, starts added servers and closes removed ones, and
//! swaps in a catalog built the same way, or keeps everything and says why
//! ([`reload`](crate::reload) has what reloads and what is refused).

pub mod approval;
pub mod brief;
pub mod catalog;
pub mod config;
pub mod naming;
pub mod policy;
pub mod policy_check;
pub mod private;
pub mod replay;
pub mod schema;
pub mod scope;
pub mod server;
pub mod shapes;
pub mod stubs;
pub mod wire;

// The cargo-fuzz targets' entry points: only with the `fuzzing` feature
// (the fuzz crate enables it) and in this crate's tests.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

mod accounts;
mod answer;
mod arrivals;
pub mod board;
mod cell_tasks;
mod check;
mod child;
mod console;
mod current;
mod error;
mod file_in;
mod flights;
mod go_out;
pub mod meaning;
mod offers;
mod questions;
mod relay;
mod reload;
mod runners;
mod send;
mod serve;
mod settings;
mod start;
mod state_key;
mod target;
mod task_inputs;
mod team;
mod trail;
mod upstream;
mod wrapped_tasks;

use std::sync::Arc;

use code_mode_audit::AuditSink;
use code_mode_core::bus::Bus;

pub use crate::answer::result_text;
use crate::catalog::Catalog;
pub use crate::check::{DIRECT_CALLS, call_request_timeout};
use crate::current::{Current, Rebuild};
pub use crate::error::{BridgeError, SessionEndError};
pub use crate::reload::{ReloadError, ReloadSource, Reloaded};
use crate::scope::Scopes;
pub use crate::settings::{BridgeConfig, CallLimits, Origin, PolicyOptions, PolicySource, WrappedServer};

/// A running bridge: a cheap handle. When the last handle is dropped the
/// bridge's own tasks stop (their hold on it is not a handle), and with
/// them its servers.
#[derive(Clone, Debug)]
pub struct Bridge {
    pub(crate) inner: Arc<Inner>,
    /// Held by every handle given out, not by the bridge's own tasks:
    /// dropping the last one cancels [`Inner::stop`].
    #[allow(dead_code)] // Held for its drop.
    held: Option<Arc<tokio_util::sync::DropGuard>>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// The current catalog, with the servers it indexes; replaced whole by
    /// [`Bridge::refresh_catalog`] and [`Bridge::reload`].
    pub(crate) current: std::sync::RwLock<Arc<Current>>,
    pub(crate) limits: CallLimits,
    /// What the catalog is rebuilt from, besides the servers' tools.
    pub(crate) rebuild: Rebuild,
    /// Where decisions are written.
    pub(crate) audit: Option<AuditSink>,
    /// The outbound bus: what the bridge sends the frontends' session
    /// objects on its own (approvals and the team's questions, holds of a
    /// waiting cell, a server's notes and questions for a client). Set by
    /// [`Bridge::serve`]; without it nothing can be asked or told.
    pub(crate) outbound: std::sync::OnceLock<Bus>,
    /// Where a file in past the reply's bound goes to the runner (over
    /// NATS: [`code_mode_core::files_in_shared`]); unset, files in travel
    /// in the reply. Set by [`Bridge::hand_files_in_through`].
    pub(crate) inputs: std::sync::OnceLock<code_mode_core::files_in_shared::SharedInputs>,
    /// Search by meaning: the encoder's actor, when the bridge was given a
    /// model ([`Bridge::rank_by_meaning_with`]); unset, cells rank by words.
    pub(crate) meaning: std::sync::OnceLock<meaning::Meaning>,
    /// Where each stateless scope's state lives now.
    pub(crate) scopes: Scopes,
    /// Clients' own sessions with the servers.
    pub(crate) upstreams: Arc<upstream::Upstreams>,
    /// The calls running here that their client may cancel (a direct
    /// call's, a cell's).
    pub(crate) in_flight: flights::Flights,
    /// The wrapped servers' tasks handed to clients, and whose they are.
    pub(crate) wrapped_tasks: wrapped_tasks::WrappedTasks,
    /// What a reload needs: one rebuild at a time, the servers it adds.
    pub(crate) reloads: reload::Reloads,
    /// What the runners heard lately say of their images' packages.
    pub(crate) runners: runners::Heard,
    /// The bridge's own tasks (the refresher, the reaper, the upcalls'
    /// server and each upcall, ...): each ends with [`Inner::stop`], and
    /// the closer waits for them.
    pub(crate) tasks: tokio_util::task::TaskTracker,
    /// Cancelled when the bridge's token fires or its last handle is
    /// dropped: the bridge's own tasks end then.
    pub(crate) stop: tokio_util::sync::CancellationToken,
}

/// The wrapped servers' owner tasks; await [`Closer::closed`] after
/// cancelling the bridge's token to know every child has stopped.
#[derive(Debug)]
pub struct Closer {
    actors: Vec<tokio::task::JoinHandle<()>>,
    /// The actors of servers a reload added.
    added: tokio_util::task::TaskTracker,
    /// The tasks of clients' own sessions with the servers.
    own_sessions: tokio_util::task::TaskTracker,
    /// The bridge's own tasks ([`Inner::tasks`]).
    tasks: tokio_util::task::TaskTracker,
    audit: Option<AuditSink>,
}

impl Closer {
    /// Wait until every wrapped server has been closed, then close the
    /// audit sink (a last checkpoint, synced).
    pub async fn closed(self) {
        for a in self.actors {
            let _ = a.await;
        }
        self.added.close();
        self.added.wait().await;
        self.own_sessions.close();
        self.own_sessions.wait().await;
        self.tasks.close();
        self.tasks.wait().await;
        if let Some(audit) = self.audit {
            audit.close().await;
        }
    }
}

impl Bridge {
    /// A new bridge's first handle.
    pub(crate) fn first_handle(inner: Inner) -> Self {
        let held = Some(Arc::new(inner.stop.clone().drop_guard()));
        Self { inner: Arc::new(inner), held }
    }

    /// The bridge as one of its own tasks holds it: not a handle, so it
    /// keeps the bridge only until [`Inner::stop`], which the task waits
    /// for.
    pub(crate) fn for_task(&self) -> Self {
        Self { inner: self.inner.clone(), held: None }
    }

    pub(crate) fn current(&self) -> Arc<Current> {
        code_mode_core::sync::read(&self.inner.current).clone()
    }

    /// The version of the current catalog: 1 at start, one more after each
    /// refresh.
    pub fn catalog_version(&self) -> u64 {
        self.current().version
    }

    /// Hand the files in past the reply's bound to the runners through
    /// `inputs` (over NATS, where a reply is one message under the
    /// server's `max_payload`); the first set holds.
    pub fn hand_files_in_through(&self, inputs: code_mode_core::files_in_shared::SharedInputs) {
        let _ = self.inner.inputs.set(inputs);
    }

    /// Answer cells' questions by meaning with `encoder` (the first one
    /// given holds); the current catalog's tools are read at once, each
    /// refreshed catalog's when it comes.
    pub fn rank_by_meaning_with(&self, encoder: Arc<code_mode_encoder::Encoder>) {
        let meaning = meaning::Meaning::start(encoder, &self.inner.tasks, self.inner.stop.clone());
        if self.inner.meaning.set(meaning).is_ok() {
            self.prepare_meaning();
        }
    }

    /// Start reading the current catalog's tools for search by meaning.
    pub(crate) fn prepare_meaning(&self) {
        if let Some(meaning) = self.inner.meaning.get() {
            let current = self.current();
            meaning.prepare(current.version, current.catalog.clone());
        }
    }

    /// Wait at most `within` until the current catalog's tools are read
    /// for search by meaning: true when they are, false without an encoder
    /// or past `within` (a one-shot `run` waits so its cell has meaning).
    pub async fn meaning_read(&self, within: std::time::Duration) -> bool {
        let Some(meaning) = self.inner.meaning.get() else { return false };
        let current = self.current();
        meaning.read(current.version, current.catalog.clone(), within).await
    }

    /// How near `ask`'s question is to each tool of the current catalog;
    /// "unavailable" without an encoder.
    pub async fn meaning(&self, ask: &code_mode_proto::MeaningAsk) -> code_mode_proto::MeaningReply {
        let Some(meaning) = self.inner.meaning.get() else {
            return code_mode_proto::MeaningReply::Unavailable {
                reason: "this bridge ranks by words alone (no --search-model)".into(),
            };
        };
        let current = self.current();
        match meaning.ask(current.version, current.catalog.clone(), &ask.query).await {
            Ok(tools) => {
                code_mode_telemetry::search_meaning("near");
                code_mode_proto::MeaningReply::Near { tools }
            }
            Err(why) => {
                code_mode_telemetry::search_meaning(why.label());
                code_mode_proto::MeaningReply::Unavailable { reason: why.reason().into() }
            }
        }
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.current().catalog.clone()
    }

    /// The name of the server at `index` (a removed server's too: an
    /// index never changes meaning).
    pub(crate) fn server_name(&self, index: usize) -> String {
        self.current().servers.get(index).map(|s| s.name().to_string()).unwrap_or_default()
    }
}
