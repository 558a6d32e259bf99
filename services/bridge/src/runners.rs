//! What the sandbox-runners report, with one owner: each runner sends its
//! status every 5 s (its slots, and the Python packages its image offers
//! beyond the standard library, [`proto::RunnerStatus::packages`]), and a
//! report counts for [`FRESH`], for at most [`MAX_RUNNERS`] runners, in
//! both places it is kept:
//!
//! - **Packages**, in this bridge's memory ([`Heard`]): the catalog it
//!   hands the frontends names the packages every runner heard within
//!   [`FRESH`] shares: a cell may land on any runner, so only those are
//!   promised to the model. Statuses are spread over the bridge replicas
//!   (one queue group), so a replica knows the runners that reached it;
//!   with every runner on one image (the documented way) they all agree. A
//!   runner that stops reporting is forgotten after [`FRESH`], and what it
//!   alone had leaves the description then.
//! - **Slots**, in the state store's board entry ([`Bridge::runner_status`]),
//!   so that every bridge shows the web console the same runners (those
//!   heard within [`SHOWN`]); the packages stay out of it, so the entry
//!   stays far under the store's 64 KiB.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use code_mode_core::state::StateError;
use code_mode_proto as proto;

use crate::{Bridge, board};

/// How long a runner's report counts. Runners report every 5 s and a
/// replica hears a share of them, so this is several of their periods.
pub const FRESH: Duration = Duration::from_secs(60);

/// The most runners remembered (the oldest report is forgotten first).
pub const MAX_RUNNERS: usize = 200;

/// A runner heard from within this long is shown in the console.
const SHOWN: Duration = Duration::from_secs(15);

/// The entry of the board's pseudo-session that keeps the runners' slots.
const RUNNERS: &str = "runners";

/// What each runner heard lately said of its image's packages.
#[derive(Debug, Default)]
pub(crate) struct Heard {
    runners: Mutex<HashMap<String, (Instant, Vec<String>)>>,
}

impl Heard {
    /// Note `status` (a runner that does not know its packages is left
    /// out: it promises nothing either way).
    pub(crate) fn note(&self, status: &proto::RunnerStatus) {
        let Some(packages) = &status.packages else { return };
        let mut runners = code_mode_core::sync::lock(&self.runners);
        runners.retain(|_, (at, _)| at.elapsed() < FRESH);
        if runners.len() >= MAX_RUNNERS
            && !runners.contains_key(&status.id)
            && let Some(oldest) = runners.iter().min_by_key(|(_, (at, _))| *at).map(|(id, _)| id.clone())
        {
            runners.remove(&oldest);
        }
        runners.insert(status.id.clone(), (Instant::now(), packages.clone()));
    }

    /// The packages every runner heard within [`FRESH`] holds, sorted;
    /// `None` when none was heard.
    pub(crate) fn common(&self) -> Option<Vec<String>> {
        let runners = code_mode_core::sync::lock(&self.runners);
        let mut live = runners.values().filter(|(at, _)| at.elapsed() < FRESH).map(|(_, p)| p);
        let first: BTreeSet<&String> = live.next()?.iter().collect();
        let shared = live.fold(first, |acc, p| {
            let p: BTreeSet<&String> = p.iter().collect();
            acc.intersection(&p).copied().collect()
        });
        Some(shared.into_iter().cloned().collect())
    }
}

/// The catalog's fingerprint with `packages` in it, so a frontend holding
/// the catalog of other packages asks again.
pub(crate) fn fingerprint(catalog: &str, packages: Option<&[String]>) -> String {
    match packages {
        None => catalog.to_string(),
        Some(packages) => {
            let text = serde_json::to_vec(&(catalog, packages)).unwrap_or_default();
            format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&text))
        }
    }
}

impl Bridge {
    /// Note a runner's status: its packages here, its slots in the state
    /// store (see the module doc).
    pub async fn runner_status(&self, mut status: proto::RunnerStatus) -> Result<(), StateError> {
        self.inner.runners.note(&status);
        status.packages = None;
        status.at_ms = board::now_ms();
        let now = status.at_ms;
        let fresh = FRESH.as_millis() as u64;
        self.inner
            .rebuild
            .state
            .update(board::SESSION, RUNNERS, |value| {
                let mut runners: Vec<proto::RunnerStatus> =
                    value.and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
                runners.retain(|r| r.id != status.id && now.saturating_sub(r.at_ms) < fresh);
                runners.push(status.clone());
                runners.sort_by(|a, b| a.id.cmp(&b.id));
                runners.truncate(MAX_RUNNERS);
                serde_json::to_value(runners).expect("statuses are JSON")
            })
            .await
            .map(|_| ())
    }

    /// The runners the console shows: those heard within [`SHOWN`] by any
    /// bridge.
    pub(crate) async fn shown_runners(&self) -> Result<Vec<proto::RunnerStatus>, StateError> {
        let entry = self.inner.rebuild.state.get(board::SESSION, RUNNERS).await?;
        let runners: Vec<proto::RunnerStatus> =
            entry.and_then(|e| serde_json::from_value(e.value).ok()).unwrap_or_default();
        let now = board::now_ms();
        let shown = SHOWN.as_millis() as u64;
        Ok(runners.into_iter().filter(|r| now.saturating_sub(r.at_ms) <= shown).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: &str, packages: Option<&[&str]>) -> proto::RunnerStatus {
        proto::RunnerStatus {
            id: id.into(),
            capacity: 4,
            free: 4,
            warm: 0,
            at_ms: 0,
            packages: packages.map(|p| p.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn nothing_is_promised_before_a_runner_names_its_packages() {
        let heard = Heard::default();
        assert_eq!(heard.common(), None);
        heard.note(&status("r1", None));
        assert_eq!(heard.common(), None);
        heard.note(&status("r2", Some(&[])));
        assert_eq!(heard.common(), Some(vec![]));
    }

    #[test]
    fn only_the_packages_every_runner_holds_are_promised_and_a_runner_s_new_report_replaces_its_old_one() {
        let heard = Heard::default();
        heard.note(&status("r1", Some(&["numpy==2.2.6", "tabulate==0.9.0"])));
        assert_eq!(heard.common(), Some(vec!["numpy==2.2.6".to_string(), "tabulate==0.9.0".to_string()]));
        heard.note(&status("r2", Some(&["numpy==2.2.6", "pandas==2.2.3"])));
        assert_eq!(heard.common(), Some(vec!["numpy==2.2.6".to_string()]));
        heard.note(&status("r2", Some(&["numpy==2.2.6", "tabulate==0.9.0"])));
        assert_eq!(heard.common(), Some(vec!["numpy==2.2.6".to_string(), "tabulate==0.9.0".to_string()]));
    }

    #[test]
    fn a_fingerprint_changes_with_the_packages_and_stays_without_them() {
        assert_eq!(fingerprint("abc", None), "abc");
        let numpy = fingerprint("abc", Some(&["numpy==2.2.6".to_string()]));
        assert_ne!(numpy, "abc");
        assert_ne!(numpy, fingerprint("abc", Some(&[])));
        assert_eq!(numpy, fingerprint("abc", Some(&["numpy==2.2.6".to_string()])));
    }
}
