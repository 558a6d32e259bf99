//! The catalog watcher: the one owner of the bridge's catalog in a frontend
//! process.
//!
//! The bus only carries requests, so somebody has to ask the bridge whether
//! its tools changed. One actor task does, for every client session of the
//! process: every [`CATALOG_POLL`], and whenever a session asks
//! ([`CatalogHandle::refresh`], before and after each cell), naming the
//! fingerprint of the catalog it holds so that an unchanged catalog comes
//! back without its tools. Requests that arrive while a fetch is on their
//! way are answered by one fetch after it.
//!
//! It publishes the current [`View`] (the catalog and the `run_python`
//! description made from it) through a `watch` channel: sessions read it
//! when a cell starts or the client lists tools, and each session actor
//! watches it to send its client `notifications/tools/list_changed`. The
//! task ends when the last handle goes.

use std::sync::Arc;
use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_proto::{Catalog, CatalogRequest, subjects};
use tokio::sync::{mpsc, oneshot, watch};

use crate::FrontendConfig;
use crate::description::{self, KeepFacts, RunFacts, StatelessFacts};

/// How often the watcher asks the bridge whether the catalog changed (cells
/// also ask before and after they run).
pub const CATALOG_POLL: Duration = Duration::from_secs(3);

/// How long a refresh may take; the current catalog stays on a timeout
/// (kept short: a refresh runs before and after each cell).
const REFRESH_TIMEOUT: Duration = Duration::from_secs(1);

/// Refresh requests that may wait at the watcher.
const REQUESTS: usize = 64;

/// A catalog and the `run_python` descriptions made from it.
#[derive(Debug)]
pub struct View {
    /// The catalog.
    pub catalog: Catalog,
    /// The description of `run_python` for it, for a client with a
    /// session (over stdio, or an MCP session over HTTP).
    pub description: String,
    /// The same for a stateless (2026-07-28) client over HTTP.
    pub stateless_description: String,
}

impl View {
    /// The view of `catalog` under `config` (the description states the
    /// run's limits and whether variables persist).
    pub fn new(catalog: Catalog, config: &FrontendConfig) -> Self {
        let facts = RunFacts {
            deadline_secs: config.deadline.as_secs(),
            max_calls: catalog.max_calls,
            call_timeout_secs: catalog.call_timeout_ms / 1000,
            max_output: config.max_output,
            keep: config.keep.map(|k| KeepFacts { idle_secs: k.idle.as_secs(), max_secs: k.max.as_secs() }),
            stateless: None,
        };
        let description = description::description(&facts, &catalog.tools, config.description_budget);
        let stateless =
            RunFacts { stateless: Some(StatelessFacts { idle_secs: catalog.stateless_idle_ms / 1000 }), ..facts };
        let stateless_description = description::description(&stateless, &catalog.tools, config.description_budget);
        Self { catalog, description, stateless_description }
    }
}

/// A handle on the watcher: the current view, and refreshes on demand.
/// Cheap to clone; the watcher stops when the last one goes.
#[derive(Clone, Debug)]
pub struct CatalogHandle {
    requests: mpsc::Sender<oneshot::Sender<bool>>,
    view: watch::Receiver<Arc<View>>,
}

impl CatalogHandle {
    /// Start the watcher over `first` (fetched at start).
    pub fn start(bus: Bus, config: FrontendConfig, first: Catalog) -> CatalogHandle {
        let (publish, view) = watch::channel(Arc::new(View::new(first, &config)));
        let (requests, inbox) = mpsc::channel(REQUESTS);
        let asker = uuid::Uuid::new_v4().to_string();
        tokio::spawn(Watcher { bus, config, publish, asker }.run(inbox));
        CatalogHandle { requests, view }
    }

    /// The view offered now.
    pub fn current(&self) -> Arc<View> {
        self.view.borrow().clone()
    }

    /// A receiver that sees each new view.
    pub fn subscribe(&self) -> watch::Receiver<Arc<View>> {
        self.view.clone()
    }

    /// Ask the bridge now; true when the tools changed (the new view is
    /// published before this returns). A failed request keeps the current
    /// catalog and returns false.
    pub async fn refresh(&self) -> bool {
        let (reply, changed) = oneshot::channel();
        if self.requests.send(reply).await.is_err() {
            return false;
        }
        changed.await.unwrap_or(false)
    }
}

/// The state the watcher owns.
struct Watcher {
    bus: Bus,
    config: FrontendConfig,
    publish: watch::Sender<Arc<View>>,
    /// The id the watcher's requests carry (the catalog is the same for
    /// every session).
    asker: String,
}

impl Watcher {
    async fn run(self, mut inbox: mpsc::Receiver<oneshot::Sender<bool>>) {
        let start = tokio::time::Instant::now() + CATALOG_POLL;
        let mut poll = tokio::time::interval_at(start, CATALOG_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = poll.tick() => { self.fetch().await; }
                request = inbox.recv() => {
                    let Some(first) = request else { break };
                    // Everyone waiting now is answered by one fetch.
                    let mut waiting = vec![first];
                    while let Ok(more) = inbox.try_recv() {
                        waiting.push(more);
                    }
                    let changed = self.fetch().await;
                    for reply in waiting {
                        let _ = reply.send(changed);
                    }
                }
            }
        }
        tracing::debug!("catalog watcher stopped: no session is left");
    }

    /// Ask the bridge, naming the fingerprint held; publish a catalog whose
    /// tools differ. Returns whether they did.
    async fn fetch(&self) -> bool {
        let held = self.publish.borrow().catalog.fingerprint.clone();
        let known = (!held.is_empty()).then_some(held);
        let request = CatalogRequest { session: self.asker.clone(), known, direct: self.config.expose.direct() };
        let catalog: Catalog = match self.bus.call(subjects::CATALOG_GET, &request, REFRESH_TIMEOUT).await {
            Ok(catalog) => catalog,
            Err(e) => {
                tracing::debug!(error = %e, "could not refresh the catalog: keeping the current one");
                return false;
            }
        };
        if catalog.unchanged {
            return false;
        }
        let old = self.publish.borrow().clone();
        // Bridge replicas count versions apart: compare what is offered.
        let same = old.catalog.tools == catalog.tools
            && old.catalog.max_calls == catalog.max_calls
            && old.catalog.call_timeout_ms == catalog.call_timeout_ms
            && old.catalog.approval_timeout_ms == catalog.approval_timeout_ms;
        if same {
            return false;
        }
        tracing::info!(version = catalog.version, tools = catalog.tools.len(), "the catalog changed");
        self.publish.send_replace(Arc::new(View::new(catalog, &self.config)));
        true
    }
}
