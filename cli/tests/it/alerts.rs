//! The alert rules of `deploy/prometheus/alerts.yml` in a real Prometheus
//! (Debian's `prometheus` 2.42) scraping real `code-mode serve` processes:
//! on a healthy one no alert is ever even pending; with its audit file made
//! immutable, `CodeModeAuditSinkFailing` fires for that process alone. The
//! compose stack's Prometheus is watched the same way in `compose.rs`, which
//! uses the helpers here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use code_mode_core::testing::{TempDir, free_port, unavailable};
use code_mode_telemetry::scrape::{Exposition, http_get};
use serde_json::Value;

use crate::support::{self, Deployment, outcome, run_python};

fn alerts_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus/alerts.yml")
}

/// One alert Prometheus holds active (pending or firing).
#[derive(Debug, Clone)]
pub(crate) struct Alert {
    pub name: String,
    /// `pending` or `firing`.
    pub state: String,
    pub labels: Value,
}

/// `GET path` of Prometheus's HTTP API: its `data`, or `None` on any
/// failure (not up yet).
pub(crate) async fn api(web: SocketAddr, path: &str) -> Option<Value> {
    let path = path.to_string();
    let response = tokio::task::spawn_blocking(move || http_get(web, &path)).await.unwrap().ok()?;
    let body: Value = serde_json::from_str(&response.body).ok()?;
    (response.status == 200 && body["status"] == "success").then(|| body["data"].clone())
}

/// The alerts active now, pending or firing (`/api/v1/alerts`).
pub(crate) async fn active_alerts(web: SocketAddr) -> Option<Vec<Alert>> {
    let data = api(web, "/api/v1/alerts").await?;
    let alerts = data["alerts"].as_array()?;
    Some(
        alerts
            .iter()
            .map(|a| Alert {
                name: a["labels"]["alertname"].as_str().unwrap_or_default().to_string(),
                state: a["state"].as_str().unwrap_or_default().to_string(),
                labels: a["labels"].clone(),
            })
            .collect(),
    )
}

/// Every `ALERTS` series (pending or firing) Prometheus wrote at any rule
/// evaluation of the last `window`, with how many evaluations each: the
/// rule manager writes one sample per active alert per evaluation, so an
/// empty answer means no evaluation in the window had an alert even
/// pending.
pub(crate) async fn alerts_written_within(web: SocketAddr, window: Duration) -> Value {
    let promql = format!("count_over_time(ALERTS[{}s])", window.as_secs().max(1));
    crate::compose::query(web, &promql).await.expect("Prometheus answers a query over ALERTS")
}

/// Every rule of the loaded group evaluates without an error (a rule that
/// fails to evaluate is never pending either, so silence means nothing
/// without this); returns how many rules there are.
pub(crate) async fn rules_evaluate_cleanly(web: SocketAddr) -> usize {
    let data = api(web, "/api/v1/rules?type=alert").await.expect("the rules API answers");
    let rules: Vec<&Value> =
        data["groups"].as_array().into_iter().flatten().flat_map(|g| g["rules"].as_array().unwrap().iter()).collect();
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "rule {} does not evaluate: {}", rule["name"], rule["lastError"]);
    }
    rules.len()
}

/// A Prometheus of this machine loaded with `deploy/prometheus/alerts.yml`,
/// scraping its targets every second and evaluating the rules every second.
struct Prometheus {
    child: tokio::process::Child,
    web: SocketAddr,
    started: Instant,
    _dir: TempDir,
}

impl Prometheus {
    /// `None` (after `unavailable`: a failure under CI) without Debian's
    /// `prometheus`.
    async fn start(targets: &[String]) -> Option<Self> {
        let prometheus = std::env::var("PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
        if std::process::Command::new(&prometheus).arg("--version").output().is_err() {
            unavailable("prometheus", &format!("{prometheus} does not run (apt-get install prometheus)"));
            return None;
        }
        let dir = TempDir::new("alerts-prometheus");
        let config = dir.0.join("prometheus.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\nscrape_configs:\n  \
                 - job_name: code-mode\n    static_configs:\n      - targets: [{}]\n",
                alerts_file().display(),
                targets.join(", ")
            ),
        )
        .unwrap();
        let web = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut child = tokio::process::Command::new(&prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.0.join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus starts");
        let started = Instant::now();
        let give_up = started + Duration::from_secs(60);
        while api(web, "/api/v1/status/buildinfo").await.is_none() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("prometheus exited: {status}");
            }
            assert!(Instant::now() < give_up, "Prometheus did not answer within 60 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Some(Self { child, web, started, _dir: dir })
    }
}

/// `chattr -i` on the audit file when dropped, so that a failing test
/// leaves a removable folder.
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: &Path) -> Option<Self> {
        let ok = std::process::Command::new("chattr").arg("+i").arg(path).status().is_ok_and(|s| s.success());
        ok.then(|| Self(path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

async fn scrape(addr: &str) -> Exposition {
    let addr: SocketAddr = addr.parse().unwrap();
    let response = tokio::task::spawn_blocking(move || http_get(addr, "/metrics")).await.unwrap().expect("/metrics");
    Exposition::parse(&response.body).expect("exposition text")
}

/// How long the healthy processes are watched, at one evaluation a second.
const HEALTHY_WATCH: Duration = Duration::from_secs(40);

/// Two healthy `serve` processes, a plain one (no policy, no `--audit`,
/// its default warm pool) and one with `--audit FILE`, each running a cell
/// with a tool call, scraped by one Prometheus with the stack's rules at one
/// scrape and one evaluation a second. For 40 s from Prometheus's start
/// (before the first scrape, through both targets coming up, the cells and
/// idleness after them) `ALERTS` has no series at all: at no evaluation was
/// any alert even pending.
///
/// Why that is enough although the longest `for:` of alerts.yml is 10m
/// (`CodeModeCellErrorRatioHigh`; the others 1m, 30s or none): an alert
/// fires only after it was pending at every evaluation for its `for:`, so
/// "never pending" at every evaluation means none can fire, whatever its
/// `for:`; a rule without `for:` fires at its first true evaluation, which
/// would show as well. And the watch reaches the steady state of every
/// expression: an idle process's series are constant, so once every range
/// (5m, 10m, 15m: each holds the process's whole life here) has two samples
/// (2 s) the rules' values no longer change while nothing happens; 40 s is
/// twenty times that. That the rules are evaluated at all is checked too
/// (each has health `ok`; a rule that fails is never pending either).
///
/// Then the audited process's file is made immutable (`chattr +i`; root
/// ignores permissions) and one cell is refused: its
/// `codemode_audit_sink_up` goes to 0 and `CodeModeAuditSinkFailing` is
/// pending at the next evaluations and fires 30 s later, for that instance
/// alone (the plain one has no such gauge) and with no other alert; made
/// writable again, the next cell runs and the alert ends.
#[tokio::test]
async fn a_healthy_serve_raises_no_alert_not_even_pending_and_an_immutable_audit_file_fires_the_audit_alert() {
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("alerts-serve");
    let audit = dir.0.join("audit.jsonl");
    let plain_addr = format!("127.0.0.1:{}", free_port());
    let audited_addr = format!("127.0.0.1:{}", free_port());
    let (plain, _plain_pid, _plain_guards) =
        support::start(Deployment::AllInOne, &["--metrics-addr", &plain_addr], &[]).await;
    let audit_arg = audit.to_str().unwrap();
    let (audited, _audited_pid, _audited_guards) = support::start(
        Deployment::AllInOne,
        &["--metrics-addr", &audited_addr, "--audit", audit_arg, "--warm", "0"],
        &[],
    )
    .await;

    // What the processes export before any cell: the audit gauge only
    // where there is an audit sink; the state store gauge, where the
    // in-memory store was called already, at 1 (never a 0 for nothing).
    let (plain_scrape, audited_scrape) = (scrape(&plain_addr).await, scrape(&audited_addr).await);
    assert_eq!(plain_scrape.value("codemode_audit_sink_up", &[]), None, "a plain serve has no audit gauge");
    assert_eq!(audited_scrape.value("codemode_audit_sink_up", &[]), Some(1.0), "the audit sink is open");
    for exported in [&plain_scrape, &audited_scrape] {
        let store = exported.value("codemode_state_store_up", &[]);
        assert!(store.is_none_or(|v| v == 1.0), "serve's in-memory store is never down: {store:?}");
    }

    let Some(mut prometheus) = Prometheus::start(&[plain_addr.clone(), audited_addr.clone()]).await else {
        return;
    };
    let web = prometheus.web;

    // The watch: every second, nothing active; the cells run meanwhile.
    let cells = async {
        for client in [&plain, &audited] {
            let (stdout, error) = outcome(&run_python(client, "print(await add(a=1, b=2))").await).expect("a report");
            assert_eq!((stdout.as_str(), error), ("{\"sum\":3}\n", None));
        }
    };
    let watch = async {
        let mut polls = 0;
        while prometheus.started.elapsed() < HEALTHY_WATCH {
            if let Some(active) = active_alerts(web).await {
                assert!(
                    active.is_empty(),
                    "alerts on a healthy serve after {:?}: {active:?}",
                    prometheus.started.elapsed()
                );
                polls += 1;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        polls
    };
    let ((), polls) = tokio::join!(cells, watch);
    let up = crate::compose::query(web, "count(up == 1)").await.expect("up");
    assert_eq!(up[0]["value"][1], "2", "both targets were scraped: {up}");
    assert_eq!(rules_evaluate_cleanly(web).await, 8, "every rule of alerts.yml is loaded and evaluates");
    let watched = prometheus.started.elapsed();
    let written = alerts_written_within(web, watched + Duration::from_secs(1)).await;
    assert_eq!(written, serde_json::json!([]), "ALERTS was written during the healthy watch");
    for addr in [&plain_addr, &audited_addr] {
        let after = scrape(addr).await;
        assert!(after.value("codemode_state_store_up", &[]).is_none_or(|v| v == 1.0), "{addr}: the store is up");
    }
    eprintln!("alerts: healthy serve watched {watched:?} ({polls} polls of the active alerts): no ALERTS series");

    // The audit file made immutable: the next cell is refused, the gauge
    // drops to 0, the alert becomes pending and then fires.
    let Some(immutable) = Immutable::set(&audit) else {
        unavailable("chattr +i", "the immutable flag cannot be set here");
        return;
    };
    let refused = outcome(&run_python(&audited, "print('never runs')").await);
    let failed_at = Instant::now();
    let message = refused.expect_err("the cell is refused while the audit file cannot be written");
    assert!(message.contains("audit log") && message.contains("fail closed"), "{message}");
    let (mut pending, mut firing) = (None, None);
    while firing.is_none() {
        assert!(failed_at.elapsed() < Duration::from_secs(90), "no firing CodeModeAuditSinkFailing within 90 s");
        if let Some(active) = active_alerts(web).await {
            for alert in &active {
                assert_eq!(alert.name, "CodeModeAuditSinkFailing", "only the audit alert: {active:?}");
                assert_eq!(alert.labels["instance"], audited_addr.as_str(), "the audited process's: {active:?}");
                assert_eq!(alert.labels["severity"], "critical");
                match alert.state.as_str() {
                    "pending" => pending = pending.or(Some(failed_at.elapsed())),
                    "firing" => firing = Some(failed_at.elapsed()),
                    other => panic!("state {other}"),
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (pending, firing) = (pending.expect("pending before firing"), firing.unwrap());
    assert!(firing >= Duration::from_secs(30), "fired after {firing:?}, before its for: 30s");
    eprintln!(
        "alerts: audit file immutable: CodeModeAuditSinkFailing pending after {pending:?}, firing after {firing:?}"
    );

    // Writable again: the next cell probes the sink, runs, and the alert ends.
    drop(immutable);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let back_at = Instant::now();
    let (stdout, _) = outcome(&run_python(&audited, "print('back')").await).expect("the cell runs again");
    assert_eq!(stdout, "back\n");
    while !active_alerts(web).await.is_some_and(|a| a.is_empty()) {
        assert!(back_at.elapsed() < Duration::from_secs(20), "the audit alert did not end");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("alerts: audit file writable again: no alert {:?} after the next cell began", back_at.elapsed());

    plain.cancel().await.ok();
    audited.cancel().await.ok();
    let _ = prometheus.child.kill().await;
}
