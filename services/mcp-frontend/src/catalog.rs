//! The catalog watcher: the one owner of the bridge's catalog in a frontend
//! process.
//!
//! The bus only carries requests, so somebody has to ask the bridge whether
//! its tools changed. One actor task does, for every client session of the
//! process: every [`CATALOG_POLL`], and whenever a session asks
//! ([`CatalogHandle::refresh`], before and after each cell; not after a
//! client's direct call or read, whose changes the poll finds), naming the
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
    /// Whether clients are offered `run_python` at all (not with
    /// `--expose-tools=only`): only then is its description one of their tools.
    pub run_python: bool,
}

impl View {
    /// The view of `catalog` under `config` (the description states the
    /// run's limits and whether variables persist).
    pub fn new(catalog: Catalog, config: &FrontendConfig) -> Self {
        let facts = Self::facts(&catalog, config);
        let description = description::description(&facts, &catalog.tools, config.description_budget);
        let stateless =
            RunFacts { stateless: Some(StatelessFacts { idle_secs: catalog.stateless_idle_ms / 1000 }), ..facts };
        let stateless_description = description::description(&stateless, &catalog.tools, config.description_budget);
        Self { catalog, description, stateless_description, run_python: config.expose.run_python() }
    }
}

impl View {
    /// What the description of `catalog` under `config` states about a run
    /// (for a client of a session; [`View`] also makes the stateless one).
    pub fn facts(catalog: &Catalog, config: &FrontendConfig) -> RunFacts {
        RunFacts {
            deadline_secs: config.deadline.as_secs(),
            max_calls: catalog.max_calls,
            call_timeout_secs: catalog.call_timeout_ms / 1000,
            max_output: config.max_output,
            keep: config.keep.map(|k| KeepFacts { idle_secs: k.idle.as_secs(), max_secs: k.max.as_secs() }),
            stateless: None,
            resources: catalog.features.as_ref().is_some_and(|f| f.has_resources),
            packages: catalog.packages.clone(),
            unavailable: catalog.unavailable.iter().map(|u| (u.server.clone(), u.why.clone())).collect(),
            files_out: (config.files.is_some() || config.shared_files.is_some()) && config.keep.is_none(),
        }
    }
}

/// Which of a client's lists differ between two views.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChangedLists {
    /// The tools (`run_python`'s description, or the direct tools).
    pub tools: bool,
    /// The resources or resource templates.
    pub resources: bool,
    /// The prompts.
    pub prompts: bool,
}

/// Which lists changed from `before` to `now`.
pub(crate) fn changed_lists(before: &View, now: &View) -> ChangedLists {
    let (old, new) = (&before.catalog, &now.catalog);
    let features = |c: &Catalog| c.features.clone().unwrap_or_default();
    let (old_features, new_features) = (features(old), features(new));
    // Only result shapes were learned: the clients' models keep what they
    // hold (no notice, no list_changed); new sessions and cells get them.
    // What the code can import is news to every model, the runners' first
    // word on it too: a frontend waits for that word before it serves
    // (`FrontendConfig::packages_wait`), so a client hears of it only when
    // it listed a description that named no packages.
    let packages_news = old.packages != new.packages;
    let learned_only =
        !old.listed.is_empty() && old.listed == new.listed && old.withheld == new.withheld && !packages_news;
    ChangedLists {
        tools: !learned_only
            && (old.tools != new.tools
                || old.withheld != new.withheld
                || (now.run_python && before.description != now.description)),
        resources: old_features.resources != new_features.resources || old_features.templates != new_features.templates,
        prompts: old_features.prompts != new_features.prompts,
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
    /// tools (or resources, templates, prompts) differ. Returns whether they
    /// did.
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
        // A bridge that has heard no runner yet (just started, or restarted)
        // does not know the packages: what was known stays, so a bridge's
        // restart does not take them out of the description for a moment.
        let mut catalog = catalog;
        if catalog.packages.is_none() {
            catalog.packages.clone_from(&old.catalog.packages);
        }
        // Bridge replicas count versions apart: compare what is offered.
        let same = old.catalog.tools == catalog.tools
            && old.catalog.max_calls == catalog.max_calls
            && old.catalog.call_timeout_ms == catalog.call_timeout_ms
            && old.catalog.approval_timeout_ms == catalog.approval_timeout_ms
            && old.catalog.ask_timeout_ms == catalog.ask_timeout_ms
            && old.catalog.stateless_idle_ms == catalog.stateless_idle_ms
            && old.catalog.withheld == catalog.withheld
            && old.catalog.features == catalog.features
            && old.catalog.packages == catalog.packages;
        if same {
            return false;
        }
        tracing::info!(version = catalog.version, tools = catalog.tools.len(), "the catalog changed");
        self.publish.send_replace(Arc::new(View::new(catalog, &self.config)));
        true
    }
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::direct::Expose;
    use crate::fake_bridge::FakeBridge;

    /// The fake bridge's catalog before any runner named its packages.
    fn catalog(fingerprint: &str, names: &[&str]) -> Catalog {
        Catalog { packages: None, ..crate::fake_bridge::catalog(fingerprint, names) }
    }

    #[test]
    fn a_catalog_that_only_learned_result_shapes_changes_no_list_a_client_is_told_of() {
        let config = FrontendConfig::default();
        let mut first = catalog("one", &["add"]);
        first.listed = "listed-1".into();
        let mut learned = first.clone();
        learned.fingerprint = "two".into();
        learned.tools[0].stub = "async def add(a: int) -> {sum: int} (observed):".into();
        learned.tools[0].summary = "add(a: int) -> {sum: int} (observed)  the add tool.".into();
        let before = View::new(first.clone(), &config);
        let now = View::new(learned.clone(), &config);
        assert_ne!(before.description, now.description, "new sessions read the learned shape");
        assert_eq!(changed_lists(&before, &now), ChangedLists::default(), "nobody is told");
        // What the servers list changed: the clients are told.
        let mut renamed = learned.clone();
        renamed.listed = "listed-2".into();
        renamed.tools[0].name = "sum".into();
        assert!(changed_lists(&before, &View::new(renamed, &config)).tools);
        // The runners' first word on their packages, after a description
        // that named none, is told to every client; so is a change after it.
        let mut known = first.clone();
        known.packages = Some(Vec::new());
        let known = View::new(known, &config);
        assert!(known.description.contains("standard library only"), "{}", known.description);
        assert!(changed_lists(&before, &known).tools, "the first word on the packages is told");
        let mut packages = first.clone();
        packages.packages = Some(vec!["numpy==2.2.6".into()]);
        let with_packages = View::new(packages, &config);
        assert!(with_packages.description.contains("numpy 2.2.6"), "{}", with_packages.description);
        assert!(changed_lists(&known, &with_packages).tools);
        // From a bridge that sends no fingerprint of what it lists, any
        // change is told.
        let (mut old, mut new) = (before.catalog.clone(), learned);
        (old.listed, new.listed) = (String::new(), String::new());
        assert!(changed_lists(&View::new(old, &config), &View::new(new, &config)).tools);
    }

    /// Seen in CI: a bridge lists a server's resources just after it
    /// starts serving, so a frontend's first catalog may say "no resources"
    /// and the next one names them. In code mode that changes
    /// `run_python`'s description (it tells the model of `read_resource`),
    /// a tool the client lists; a gateway that offers only the wrapped
    /// tools offers no such description, so its clients hear of the
    /// resources alone.
    #[test]
    fn a_change_only_to_run_pythons_description_is_told_as_a_tools_change_only_where_run_python_is_offered() {
        let first = catalog("one", &["add"]);
        let mut with_resources = first.clone();
        with_resources.fingerprint = "two".into();
        let offered = code_mode_proto::Offered {
            server: None,
            private: false,
            definition: serde_json::json!({"uri": "test://a", "name": "a"}),
        };
        with_resources.features =
            Some(code_mode_proto::Features { resources: vec![offered], has_resources: true, ..Default::default() });
        for (expose, tools_told) in [(Expose::Off, true), (Expose::Beside, true), (Expose::Only, false)] {
            let config = FrontendConfig { expose, ..FrontendConfig::default() };
            let (before, now) = (View::new(first.clone(), &config), View::new(with_resources.clone(), &config));
            assert_ne!(before.description, now.description, "the description tells of resources");
            let changed = changed_lists(&before, &now);
            assert_eq!(changed.tools, tools_told, "{expose:?}");
            assert!(changed.resources, "{expose:?}: the resources are told");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_watcher_asks_every_poll_and_publishes_a_changed_catalog_to_every_subscriber() {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        let bridge = FakeBridge::serve(&bus, &cancel, catalog("f1", &["add"])).await;
        let handle = CatalogHandle::start(bus, FrontendConfig::default(), catalog("f1", &["add"]));
        let seen = handle.subscribe();
        tokio::time::sleep(CATALOG_POLL + Duration::from_millis(10)).await;
        assert_eq!(bridge.asked_count(), 1, "one poll");
        assert!(!seen.has_changed().unwrap(), "an unchanged catalog is not published");
        bridge.set(catalog("f2", &["add", "late"]));
        tokio::time::sleep(CATALOG_POLL).await;
        assert_eq!(bridge.asked_count(), 2);
        assert!(seen.has_changed().unwrap(), "the change reaches the subscriber");
        assert!(handle.current().description.contains("async def late("), "{}", handle.current().description);
    }

    #[tokio::test(start_paused = true)]
    async fn refreshes_asked_while_a_fetch_is_on_its_way_are_answered_by_one_fetch_after_it() {
        let bus = Bus::in_process();
        let cancel = CancellationToken::new();
        let bridge = FakeBridge::serve_slowly(&bus, &cancel, catalog("f1", &["add"]), Duration::from_millis(200)).await;
        let handle = CatalogHandle::start(bus, FrontendConfig::default(), catalog("f1", &["add"]));
        bridge.set(catalog("f2", &["add", "late"]));
        let refreshes: Vec<_> = (0..10)
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move { handle.refresh().await })
            })
            .collect();
        let mut changed = 0;
        for refresh in refreshes {
            changed += usize::from(refresh.await.unwrap());
        }
        assert!(changed >= 1, "the change is reported");
        assert!(bridge.asked_count() <= 2, "ten refreshes took {} fetches", bridge.asked_count());
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_bridge_answering_a_refresh_keeps_the_catalog_held() {
        let handle = CatalogHandle::start(Bus::in_process(), FrontendConfig::default(), catalog("f1", &["add"]));
        assert!(!handle.refresh().await, "nothing changed");
        assert_eq!(handle.current().catalog.tools.len(), 1, "the catalog held stays");
        tokio::time::sleep(CATALOG_POLL * 3).await;
        assert_eq!(handle.current().catalog.fingerprint, "f1");
    }
}
