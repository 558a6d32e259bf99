//! One fake bridge for the frontend's unit tests: it answers the catalog
//! subject as the bridge does (only "unchanged" when the asker names the
//! fingerprint of what it answers) with whatever catalog a test puts in
//! it, and records the fingerprint each request named. Tests that need a
//! bridge's other subjects serve those beside it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_mode_core::bus::Bus;
use code_mode_proto::{Catalog, CatalogRequest, ToolEntry, queue_groups, subjects};
use tokio_util::sync::CancellationToken;

/// A wrapped tool `name` as the bridge lists it.
pub(crate) fn entry(name: &str) -> ToolEntry {
    ToolEntry {
        name: name.into(),
        mcp_name: name.into(),
        server: None,
        stub: format!("async def {name}(params: dict) -> str:\n    \"\"\"The {name} tool.\"\"\""),
        summary: format!("{name}(params): The {name} tool."),
        mark: String::new(),
        search: Default::default(),
        private: false,
        direct: None,
        signature: Default::default(),
    }
}

/// A catalog of the tools `names` with the fingerprint `fingerprint` (an
/// empty one: the frontend names none when it asks again), version 1, the
/// default limits; a runner has named its packages (the standard library
/// only).
pub(crate) fn catalog(fingerprint: &str, names: &[&str]) -> Catalog {
    Catalog {
        version: 1,
        tools: names.iter().map(|n| entry(n)).collect(),
        max_calls: 50,
        call_timeout_ms: 30_000,
        approval_timeout_ms: 0,
        ask_timeout_ms: 0,
        fingerprint: fingerprint.into(),
        unchanged: false,
        withheld: Vec::new(),
        stateless_idle_ms: 3_600_000,
        unavailable: Vec::new(),
        features: None,
        listed: String::new(),
        packages: Some(Vec::new()),
    }
}

/// The fake bridge serving a bus.
pub(crate) struct FakeBridge {
    /// What it answers: a test changes it to change the bridge's tools.
    pub catalog: Arc<Mutex<Catalog>>,
    /// The fingerprint each request named, in order.
    pub asked: Arc<Mutex<Vec<Option<String>>>>,
}

impl FakeBridge {
    /// Serve `catalog` on `bus` until `cancel`.
    pub async fn serve(bus: &Bus, cancel: &CancellationToken, catalog: Catalog) -> FakeBridge {
        Self::serve_slowly(bus, cancel, catalog, Duration::ZERO).await
    }

    /// The same, each answer after `delay`.
    pub async fn serve_slowly(bus: &Bus, cancel: &CancellationToken, catalog: Catalog, delay: Duration) -> FakeBridge {
        let bridge = FakeBridge { catalog: Arc::new(Mutex::new(catalog)), asked: Arc::default() };
        let (current, asked) = (bridge.catalog.clone(), bridge.asked.clone());
        bus.serve(subjects::CATALOG_GET, queue_groups::BRIDGE, cancel.clone(), move |request: CatalogRequest| {
            asked.lock().unwrap().push(request.known.clone());
            let mut answer = current.lock().unwrap().clone();
            if request.known.as_deref() == Some(answer.fingerprint.as_str()) {
                answer.tools.clear();
                answer.unchanged = true;
            }
            async move {
                tokio::time::sleep(delay).await;
                Ok(answer)
            }
        })
        .await
        .expect("the fake bridge serves");
        bridge
    }

    /// How many catalog requests it answered (or was sent).
    pub fn asked_count(&self) -> usize {
        self.asked.lock().unwrap().len()
    }

    /// Answer `catalog` from now on.
    pub fn set(&self, catalog: Catalog) {
        *self.catalog.lock().unwrap() = catalog;
    }
}
