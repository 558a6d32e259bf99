//! The issuer's keys, fetched off the request path.
//!
//! One actor per process owns the key set ([`Keys`] is its cheap `Clone`
//! handle); it stops when the root cancellation token fires. Its fetches
//! (the issuer's metadata, RFC 8414 or OpenID discovery, then the JWKS the
//! metadata names) run beside it, so the actor keeps answering token checks
//! while one is under way:
//!
//! - **at once** when the actor starts;
//! - **again, with backoff**, while no key is held or the last fetch failed:
//!   [`RETRY_FIRST`] after the first failure, doubling per failure up to
//!   [`RETRY_CAP`]. A token arriving while no key is held pulls the next
//!   try forward to [`RETRY_FIRST`] after the last one ended, so an issuer
//!   that comes up after this server is used as soon as a token does;
//! - **on an unknown `kid`** when keys are held and the last fetch
//!   succeeded: at most once per [`REFETCH_EVERY`] (counted from the last
//!   fetch's start), so a flood of made-up `kid`s costs the issuer one
//!   request per interval.
//!
//! A token check never waits on the network for more than [`KEY_WAIT`]:
//! a key held answers at once; a key not held waits for the fetch under
//! way (or the one the token triggered) at most that long, then the token
//! is refused, saying the issuer's keys could not be loaded when none are
//! held ([`Missing::NoKeys`]), else that no key matches. A failed fetch
//! leaves the keys held in force.
//!
//! What the actor knows of the issuer ([`KeyStatus`]) is shown on
//! `/healthz` under `oauth_issuer` (and makes `/readyz` answer 503 until
//! keys are held), and as the gauge `codemode_oauth_keys_loaded`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Alg, ISSUER_TIMEOUT, Key, get_json, issuer_metadata};

/// Least time between two fetches a token naming an unknown `kid` may
/// cause, while keys are held and the last fetch succeeded.
pub const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// The wait after the first failed fetch (and the least time between two
/// tries a token may cause while no key is held).
pub const RETRY_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between two tries after failures.
pub const RETRY_CAP: Duration = Duration::from_secs(4);
/// The longest a token check waits for a fetch of the issuer's keys.
pub const KEY_WAIT: Duration = Duration::from_millis(1500);
/// The longest one fetch (metadata and key set together) may take.
const FETCH_BOUND: Duration = Duration::from_secs(10);
/// The longest a connection to the issuer may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Key requests that may wait at the actor.
const REQUESTS: usize = 256;

/// Why no key was found for a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// Keys are held, none of them this `kid` (or fitting the algorithm).
    UnknownKey,
    /// No key of the issuer is held: why the last fetch failed.
    NoKeys(String),
}

/// What the actor knows of the issuer, for `/healthz`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyStatus {
    /// Keys held.
    pub keys: usize,
    /// Whether the last fetch succeeded (`None`: none has ended yet).
    pub reachable: Option<bool>,
    /// Why the last fetch failed.
    pub error: Option<String>,
    /// Since when the issuer has been reachable (or not), by the fetches.
    pub since: Option<SystemTime>,
    /// When the last fetch ended.
    pub checked: Option<SystemTime>,
}

impl KeyStatus {
    /// Its `/healthz` form.
    pub fn to_json(&self, issuer: &str) -> Value {
        serde_json::json!({
            "issuer": issuer,
            "reachable": self.reachable,
            "keys_loaded": self.keys > 0,
            "keys": self.keys,
            "error": self.error,
            "since": self.since.map(rfc3339),
            "last_fetch": self.checked.map(rfc3339),
        })
    }
}

/// `2026-12-03T19:44:01Z`.
fn rfc3339(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (year, month, day) = code_mode_core::calendar::civil_date(secs / 86_400);
    let rest = secs % 86_400;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// When to fetch: the backoff and the once-per-interval rule, apart from
/// the clock and the network.
#[derive(Debug, Clone)]
struct Schedule {
    /// Whether a fetch is under way.
    in_flight: bool,
    /// When the last fetch started.
    started: Option<Instant>,
    /// When the last fetch ended.
    ended: Option<Instant>,
    /// Failed fetches in a row.
    failures: u32,
    /// When the next fetch is due (`None`: only when a token asks).
    next: Option<Instant>,
}

impl Schedule {
    /// The first fetch is due at once.
    fn new(now: Instant) -> Self {
        Self { in_flight: false, started: None, ended: None, failures: 0, next: Some(now) }
    }

    /// The wait after `failures` failed fetches in a row.
    fn backoff(failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        RETRY_FIRST.saturating_mul(1 << doublings).min(RETRY_CAP)
    }

    /// Whether a fetch should start now.
    fn due(&self, now: Instant) -> bool {
        !self.in_flight && self.next.is_some_and(|at| at <= now)
    }

    /// When the actor must wake to start a fetch.
    fn wake(&self) -> Option<Instant> {
        if self.in_flight { None } else { self.next }
    }

    fn started(&mut self, now: Instant) {
        self.in_flight = true;
        self.started = Some(now);
        self.next = None;
    }

    fn ended(&mut self, ok: bool, now: Instant) {
        self.in_flight = false;
        self.ended = Some(now);
        if ok {
            self.failures = 0;
            self.next = None;
        } else {
            self.failures = self.failures.saturating_add(1);
            self.next = Some(now + Self::backoff(self.failures));
        }
    }

    /// A token names a key not held (`held`: whether any key is): whether
    /// it may wait for a fetch, one under way or one this makes due.
    fn wanted(&mut self, held: bool, now: Instant) -> bool {
        if self.in_flight {
            return true;
        }
        if !held {
            // Nothing to check any token with: try again soon, but no
            // sooner than RETRY_FIRST after the last try.
            let earliest = self.ended.map_or(now, |ended| ended + RETRY_FIRST);
            self.next = Some(self.next.map_or(earliest, |at| at.min(earliest)));
            return true;
        }
        if self.failures > 0 {
            // The issuer is failing: the backoff's tries go on, and the
            // keys held stay in force.
            return false;
        }
        if self.started.is_none_or(|at| now.duration_since(at) >= REFETCH_EVERY) {
            self.next = Some(now);
            return true;
        }
        false
    }
}

struct Find {
    kid: Option<String>,
    alg: Alg,
    reply: oneshot::Sender<Result<Key, Missing>>,
}

/// A handle on the actor owning the issuer's keys.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    requests: mpsc::Sender<Find>,
    status: watch::Receiver<KeyStatus>,
}

impl Keys {
    /// Start the actor for `issuer`; its first fetch starts at once. It
    /// stops when `cancel` fires (or every handle is gone).
    pub(super) fn start(issuer: String, cancel: CancellationToken) -> Keys {
        let (requests, inbox) = mpsc::channel(REQUESTS);
        let (status, watched) = watch::channel(KeyStatus::default());
        code_mode_telemetry::metrics::oauth_keys_loaded(false);
        let shown = watched.clone();
        let shown_issuer = issuer.clone();
        let health = code_mode_telemetry::server::report_health("oauth_issuer", move || {
            let status = shown.borrow().clone();
            code_mode_telemetry::server::ComponentHealth {
                ready: status.keys > 0,
                detail: status.to_json(&shown_issuer),
            }
        });
        let actor = KeysActor {
            issuer,
            jwks_uri: None,
            keys: HashMap::new(),
            anonymous: Vec::new(),
            schedule: Schedule::new(Instant::now()),
            waiting: Vec::new(),
            last_error: None,
            status,
            _health: health,
        };
        tokio::spawn(actor.run(inbox, cancel));
        Keys { requests, status: watched }
    }

    /// A handle on no actor (every lookup fails), for unit tests.
    #[cfg(test)]
    pub(super) fn idle() -> Keys {
        let (requests, _) = mpsc::channel(1);
        let (_, status) = watch::channel(KeyStatus::default());
        Keys { requests, status }
    }

    /// What the actor knows of the issuer now.
    pub(super) fn status(&self) -> KeyStatus {
        self.status.borrow().clone()
    }

    /// The key for `kid` and `alg`, waiting at most about [`KEY_WAIT`].
    pub(super) async fn find(&self, kid: Option<String>, alg: Alg) -> Result<Key, Missing> {
        let gone = || Missing::NoKeys("the keys' actor has stopped".into());
        let (reply, answer) = oneshot::channel();
        self.requests.send(Find { kid, alg, reply }).await.map_err(|_| gone())?;
        // The actor answers by KEY_WAIT; the margin covers its own turn.
        match tokio::time::timeout(KEY_WAIT + Duration::from_millis(500), answer).await {
            Ok(Ok(found)) => found,
            Ok(Err(_)) => Err(gone()),
            Err(_) => Err(Missing::NoKeys("the keys' actor did not answer in time".into())),
        }
    }
}

/// A token check waiting for a fetch.
struct Waiting {
    find: Find,
    until: Instant,
}

/// What one fetch found: the JWKS address and its keys.
struct Fetched {
    jwks_uri: String,
    keys: HashMap<String, Key>,
    anonymous: Vec<Key>,
}

type Fetch = Pin<Box<dyn Future<Output = Result<Fetched, String>> + Send>>;

struct KeysActor {
    issuer: String,
    /// The JWKS address, once discovered (forgotten when a fetch fails, so
    /// the metadata is read again).
    jwks_uri: Option<String>,
    /// Keys by `kid`.
    keys: HashMap<String, Key>,
    /// Keys without a `kid` (tried for a token without one).
    anonymous: Vec<Key>,
    schedule: Schedule,
    waiting: Vec<Waiting>,
    /// Why the last fetch failed.
    last_error: Option<String>,
    status: watch::Sender<KeyStatus>,
    /// The `/healthz` entry, removed when the actor stops.
    _health: code_mode_telemetry::server::HealthReport,
}

impl KeysActor {
    async fn run(mut self, mut inbox: mpsc::Receiver<Find>, cancel: CancellationToken) {
        // reqwest's rustls needs the process's crypto provider (ring, as
        // async-nats uses); installing it twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = match reqwest::Client::builder().timeout(ISSUER_TIMEOUT).connect_timeout(CONNECT_TIMEOUT).build() {
            Ok(client) => client,
            Err(e) => {
                let why = format!("no HTTP client for the OAuth issuer: {e}");
                tracing::error!(error = %e, "no HTTP client for the OAuth issuer: every token is refused");
                self.last_error = Some(why.clone());
                while let Some(find) = tokio::select! { _ = cancel.cancelled() => None, f = inbox.recv() => f } {
                    let _ = find.reply.send(Err(Missing::NoKeys(why.clone())));
                }
                return;
            }
        };
        let mut fetching: Option<Fetch> = None;
        loop {
            let now = Instant::now();
            if self.schedule.due(now) {
                self.schedule.started(now);
                fetching = Some(Box::pin(fetch(client.clone(), self.issuer.clone(), self.jwks_uri.clone())));
            }
            let deadline = self.waiting.iter().map(|w| w.until).min();
            let wake = match (self.schedule.wake(), deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                find = inbox.recv() => match find {
                    Some(find) => self.find(find),
                    None => break,
                },
                fetched = async { fetching.as_mut().expect("guarded by is_some").await }, if fetching.is_some() => {
                    fetching = None;
                    self.fetched(fetched);
                }
                () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => self.expire(Instant::now()),
            }
        }
        for waiting in self.waiting.drain(..) {
            let _ = waiting.find.reply.send(Err(Missing::NoKeys("the server is stopping".into())));
        }
    }

    fn held(&self) -> bool {
        !self.keys.is_empty() || !self.anonymous.is_empty()
    }

    fn lookup(&self, kid: Option<&str>, alg: Alg) -> Option<Key> {
        match kid {
            Some(kid) => self.keys.get(kid).filter(|k| k.fits(alg)).cloned(),
            None => {
                let mut fitting = self.anonymous.iter().chain(self.keys.values()).filter(|k| k.fits(alg));
                // Without a kid, only an unambiguous key is used.
                match (fitting.next(), fitting.next()) {
                    (Some(one), None) => Some(one.clone()),
                    _ => None,
                }
            }
        }
    }

    /// Why a token that found no key is refused, now.
    fn missing(&self) -> Missing {
        if self.held() {
            Missing::UnknownKey
        } else {
            let why = match (&self.last_error, self.schedule.in_flight) {
                (Some(error), _) => error.clone(),
                (None, true) => format!("the first fetch is still under way after {} ms", KEY_WAIT.as_millis()),
                (None, false) => "none fetched yet".into(),
            };
            Missing::NoKeys(why)
        }
    }

    fn find(&mut self, find: Find) {
        if let Some(key) = self.lookup(find.kid.as_deref(), find.alg) {
            let _ = find.reply.send(Ok(key));
            return;
        }
        let now = Instant::now();
        let held = self.held();
        if self.schedule.wanted(held, now) {
            if held {
                tracing::info!(
                    kid = find.kid.as_deref().unwrap_or("-"),
                    "a token names a key not held: fetching the issuer's keys again"
                );
            }
            self.waiting.push(Waiting { find, until: now + KEY_WAIT });
        } else {
            let _ = find.reply.send(Err(self.missing()));
        }
    }

    /// Answer the token checks that waited past their bound.
    fn expire(&mut self, now: Instant) {
        let (late, waiting): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|w| w.until <= now);
        self.waiting = waiting;
        for waiting in late {
            let _ = waiting.find.reply.send(Err(self.missing()));
        }
    }

    fn fetched(&mut self, result: Result<Fetched, String>) {
        let now = Instant::now();
        let was = self.status.borrow().reachable;
        let ok = result.is_ok();
        self.schedule.ended(ok, now);
        match result {
            Ok(fetched) => {
                tracing::info!(
                    issuer = %self.issuer,
                    keys = fetched.keys.len() + fetched.anonymous.len(),
                    "the OAuth issuer's keys were fetched"
                );
                self.jwks_uri = Some(fetched.jwks_uri);
                self.keys = fetched.keys;
                self.anonymous = fetched.anonymous;
                self.last_error = None;
            }
            Err(error) => {
                let retry = Schedule::backoff(self.schedule.failures);
                tracing::warn!(
                    issuer = %self.issuer,
                    %error,
                    keys_held = self.keys.len() + self.anonymous.len(),
                    retry_in_ms = retry.as_millis() as u64,
                    "the OAuth issuer's keys could not be fetched; the keys held stay"
                );
                self.jwks_uri = None;
                self.last_error = Some(error);
            }
        }
        let held = self.held();
        code_mode_telemetry::metrics::oauth_keys_loaded(held);
        let wall = SystemTime::now();
        self.status.send_modify(|status| {
            status.keys = self.keys.len() + self.anonymous.len();
            status.reachable = Some(ok);
            status.error = self.last_error.clone();
            status.checked = Some(wall);
            if was != Some(ok) {
                status.since = Some(wall);
            }
        });
        for waiting in std::mem::take(&mut self.waiting) {
            let found = self.lookup(waiting.find.kid.as_deref(), waiting.find.alg);
            let _ = waiting.find.reply.send(found.ok_or_else(|| self.missing()));
        }
    }
}

/// One fetch: the JWKS address (from the issuer's metadata unless known),
/// then the key set; bounded by [`FETCH_BOUND`] in all.
async fn fetch(client: reqwest::Client, issuer: String, jwks_uri: Option<String>) -> Result<Fetched, String> {
    let work = async {
        let jwks_uri = match jwks_uri {
            Some(uri) => uri,
            None => {
                let (url, metadata) = issuer_metadata(&client, &issuer).await?;
                metadata["jwks_uri"].as_str().map(str::to_string).ok_or_else(|| format!("{url} names no jwks_uri"))?
            }
        };
        let jwks = get_json(&client, &jwks_uri).await?;
        let (mut keys, mut anonymous) = (HashMap::new(), Vec::new());
        for jwk in jwks["keys"].as_array().into_iter().flatten() {
            let Some(key) = Key::from_jwk(jwk) else { continue };
            match jwk["kid"].as_str() {
                Some(kid) => {
                    keys.insert(kid.to_string(), key);
                }
                None => anonymous.push(key),
            }
        }
        if keys.is_empty() && anonymous.is_empty() {
            return Err(format!("{jwks_uri} holds no signing key this server can use"));
        }
        Ok(Fetched { jwks_uri, keys, anonymous })
    };
    match tokio::time::timeout(FETCH_BOUND, work).await {
        Ok(result) => result,
        Err(_) => Err(format!("the issuer did not answer within {} s", FETCH_BOUND.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn failed_fetches_are_tried_again_after_a_backoff_doubling_from_250_ms_to_a_cap_of_4_s() {
        let waits: Vec<u64> = (1..=8).map(|n| Schedule::backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 4000, 4000, 4000]);
        assert_eq!(Schedule::backoff(u32::MAX), RETRY_CAP);
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        assert!(s.due(t0), "the first fetch is due at once");
        s.started(t0);
        assert!(!s.due(t0) && s.wake().is_none(), "no second fetch while one is under way");
        s.ended(false, t0 + ms(10));
        assert_eq!(s.wake(), Some(t0 + ms(260)));
        assert!(!s.due(t0 + ms(259)) && s.due(t0 + ms(260)));
        s.started(t0 + ms(260));
        s.ended(false, t0 + ms(270));
        assert_eq!(s.wake(), Some(t0 + ms(770)), "the second failure waits 500 ms");
        s.started(t0 + ms(770));
        s.ended(true, t0 + ms(780));
        assert_eq!(s.wake(), None, "after a success nothing is due until a token asks");
        assert_eq!(s.failures, 0);
    }

    #[test]
    fn while_no_key_is_held_a_token_pulls_the_next_try_forward_but_not_sooner_than_250_ms_after_the_last() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        for n in 0..6 {
            let at = s.wake().unwrap();
            s.started(at);
            s.ended(false, at + ms(5));
            assert!(n < 5 || s.wake() == Some(at + ms(5) + RETRY_CAP), "at the cap after six failures");
        }
        let last = s.ended.unwrap();
        assert!(s.wanted(false, last + ms(100)), "a token waits for the next try");
        assert_eq!(s.wake(), Some(last + RETRY_FIRST), "pulled forward from the 4 s backoff");
        assert!(s.wanted(false, last + ms(300)));
        assert_eq!(s.wake(), Some(last + RETRY_FIRST), "no sooner, and never later");
        s.started(last + RETRY_FIRST);
        assert!(s.wanted(false, last + ms(260)), "a token waits for the fetch under way");
    }

    #[test]
    fn with_keys_held_an_unknown_kid_causes_at_most_one_fetch_per_interval_and_none_while_the_issuer_fails() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        s.started(t0);
        s.ended(true, t0 + ms(20));
        assert!(!s.wanted(true, t0 + ms(100)), "the keys were fetched less than 30 s ago");
        assert!(!s.wanted(true, t0 + REFETCH_EVERY - ms(1)));
        assert_eq!(s.wake(), None);
        let later = t0 + REFETCH_EVERY;
        assert!(s.wanted(true, later), "a fetch is due once the interval has passed");
        assert!(s.due(later));
        s.started(later);
        assert!(s.wanted(true, later + ms(1)), "the next unknown kid waits for that same fetch");
        s.ended(true, later + ms(20));
        assert!(!s.wanted(true, later + ms(30)), "and then none for another interval");
        // The issuer fails while keys are held: the backoff alone tries it.
        let much_later = later + REFETCH_EVERY * 2;
        assert!(s.wanted(true, much_later));
        s.started(much_later);
        s.ended(false, much_later + ms(5));
        assert!(!s.wanted(true, much_later + ms(10)), "an unknown kid does not hurry a failing issuer");
        assert_eq!(s.wake(), Some(much_later + ms(5) + RETRY_FIRST));
    }

    #[test]
    fn the_healthz_form_names_the_issuer_whether_it_was_reached_why_not_and_since_when() {
        let at = UNIX_EPOCH + Duration::from_secs(1_796_326_641);
        let status = KeyStatus {
            keys: 0,
            reachable: Some(false),
            error: Some("connection refused".into()),
            since: Some(at),
            checked: Some(at),
        };
        let shown = status.to_json("http://127.0.0.1:9");
        assert_eq!(shown["issuer"], "http://127.0.0.1:9");
        assert_eq!(shown["reachable"], false);
        assert_eq!(shown["keys_loaded"], false);
        assert_eq!(shown["error"], "connection refused");
        assert_eq!(shown["since"], "2026-12-03T19:37:21Z");
        assert_eq!(KeyStatus::default().to_json("x")["reachable"], Value::Null, "not known before a fetch ends");
    }
}
