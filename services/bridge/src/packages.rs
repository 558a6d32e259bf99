//! The Python packages the sandboxes offer beyond the standard library, as
//! the sandbox-runners report them.
//!
//! Each runner names its image's packages in the status it sends every
//! 5 s ([`proto::RunnerStatus::packages`]). A bridge keeps, in memory, what
//! each runner it heard said, and the catalog it hands the frontends names
//! the packages every runner heard within [`FRESH`] shares: a cell may land
//! on any runner, so only those are promised to the model. Statuses are
//! spread over the bridge replicas (one queue group), so a replica knows
//! the runners that reached it; with every runner on one image (the
//! documented way) they all agree. A runner that stops reporting is
//! forgotten after [`FRESH`], and what it alone had leaves the description
//! then.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use code_mode_proto as proto;

/// How long a runner's report counts. Runners report every 5 s and a
/// replica hears a share of them, so this is several of their periods.
pub const FRESH: Duration = Duration::from_secs(60);

/// The most runners remembered (the oldest report is forgotten first).
const MAX_RUNNERS: usize = 1024;

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
