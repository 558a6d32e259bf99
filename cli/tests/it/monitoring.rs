//! The monitoring files of `deploy/`: the alert rules are valid, every
//! alert fires on its unit-test series and stays silent on each healthy
//! stack's (`promtool check rules`, `promtool test rules`, Debian's
//! `prometheus` package), the stack's Prometheus configuration loads them,
//! and the compose file's `monitoring` profile needs no image from a
//! registry (Grafana, which does, has its own profile). That every dashboard
//! panel's query returns series from a real stack is checked in
//! `compose.rs`; the rules against a real Prometheus in `alerts.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn prometheus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus")
}

/// `promtool ARGS` in `deploy/prometheus`: its combined output, or `None`
/// (after `unavailable`: a failure under CI) without promtool.
fn promtool(args: &[&str]) -> Option<(bool, String)> {
    match Command::new("promtool").args(args).current_dir(prometheus_dir()).output() {
        Ok(out) => Some((
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )),
        Err(e) => {
            code_mode_core::testing::unavailable("promtool (Debian package prometheus)", &e.to_string());
            None
        }
    }
}

/// The names of the alerts a rules file defines (`- alert: NAME` lines).
fn alert_names(rules: &str) -> Vec<String> {
    rules.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")).map(|n| n.trim().to_string()).collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_each_alert_fires_in_its_unit_tests() {
    let Some((ok, out)) = promtool(&["check", "rules", "alerts.yml"]) else { return };
    assert!(ok, "promtool check rules:\n{out}");
    let Some((ok, out)) = promtool(&["test", "rules", "alerts.test.yml"]) else { return };
    assert!(ok, "promtool test rules:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // Each alert has a case where it fires (an expected alert with labels),
    // so an alert whose expression can never be true fails here.
    let rules = std::fs::read_to_string(prometheus_dir().join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(prometheus_dir().join("alerts.test.yml")).unwrap();
    let names = alert_names(&rules);
    for wanted in [
        "CodeModeNoSandboxRunner",
        "CodeModeCellsFailingForNoCapacity",
        "CodeModeCellErrorRatioHigh",
        "CodeModeWrappedServerRestartLoop",
        "CodeModeStateStoreUnreachable",
        "CodeModeApprovalsTimingOut",
        "CodeModeAuditSinkFailing",
    ] {
        assert!(names.iter().any(|n| n == wanted), "alerts.yml has no {wanted}: {names:?}");
    }
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    for name in &names {
        let fires = lines.windows(3).any(|w| {
            w[0] == format!("alertname: {name}") && w[1] == "exp_alerts:" && w[2].starts_with("- exp_labels:")
        });
        assert!(fires, "alerts.test.yml has no case where {name} fires");
    }
}

/// The test groups of a promtool unit-test file, each with the comment
/// lines (two spaces in) just before it.
fn test_groups(tests: &str) -> Vec<String> {
    let (mut groups, mut current, mut comments) = (Vec::new(), String::new(), String::new());
    for line in tests.lines().skip_while(|l| *l != "tests:").skip(1) {
        if line.starts_with("  #") {
            comments.push_str(line);
            comments.push('\n');
            continue;
        }
        if line.starts_with("  - interval:") && !current.is_empty() {
            groups.push(std::mem::take(&mut current));
        }
        current.push_str(&std::mem::take(&mut comments));
        current.push_str(line);
        current.push('\n');
    }
    groups.push(current);
    groups
}

#[test]
fn every_alert_is_checked_silent_on_each_healthy_stack_of_the_unit_tests() {
    let rules = std::fs::read_to_string(prometheus_dir().join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(prometheus_dir().join("alerts.test.yml")).unwrap();
    let names = alert_names(&rules);
    let groups = test_groups(&tests);
    // The checks of a group: its own, or the anchored list it names.
    let anchored = |alias: &str| -> String {
        let anchor = format!("alert_rule_test: &{alias}");
        groups.iter().find(|g| g.contains(&anchor)).unwrap_or_else(|| panic!("no anchor {alias}")).clone()
    };
    let healthy: Vec<&String> = groups.iter().filter(|g| g.contains("  # Healthy:")).collect();
    assert!(healthy.len() >= 3, "healthy cases: the compose stack idle and busy, a plain serve: {}", healthy.len());
    for group in healthy {
        let title = group.lines().next().unwrap_or_default();
        let checks = match group.split("alert_rule_test: *").nth(1) {
            Some(alias) => anchored(alias.split_whitespace().next().unwrap()),
            None => group.clone(),
        };
        let checks = checks.split("alert_rule_test:").nth(1).expect("checks");
        assert!(!checks.contains("exp_labels"), "{title}: a healthy stack expects no alert");
        for name in &names {
            let silent = format!("alertname: {name}, exp_alerts: []");
            assert!(checks.contains(&silent), "{title}: {name} is not checked silent");
        }
    }
}

#[test]
fn the_monitoring_profile_needs_no_registry_image_and_grafana_has_a_profile_of_its_own() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let out = match Command::new("docker-compose")
        .arg("-f")
        .arg(deploy.join("docker-compose.yml"))
        .arg("config")
        .envs([
            ("CODE_MODE_NATS_FRONTEND_PASSWORD", "f"),
            ("CODE_MODE_NATS_BRIDGE_PASSWORD", "b"),
            ("CODE_MODE_NATS_RUNNER_PASSWORD", "r"),
        ])
        .env_remove("CODE_MODE_PROMETHEUS_IMAGE")
        .env_remove("CODE_MODE_GRAFANA_IMAGE")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            code_mode_core::testing::unavailable("docker-compose", &e.to_string());
            return;
        }
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = String::from_utf8_lossy(&out.stdout);
    // Each service's image and profiles (`docker-compose config` prints
    // every service, with its `profiles:` list, whatever profiles are on).
    let mut services: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut lines = config.lines().skip_while(|l| *l != "services:").skip(1).peekable();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')) else { break };
        if name.starts_with(' ') {
            continue;
        }
        let (mut image, mut profiles) = (String::new(), Vec::new());
        while let Some(next) = lines.peek() {
            if !next.starts_with("   ") {
                break;
            }
            let next = lines.next().unwrap();
            if let Some(i) = next.strip_prefix("    image: ") {
                image = i.to_string();
            } else if next == "    profiles:" {
                while let Some(p) = lines.peek().and_then(|l| l.strip_prefix("    - ")) {
                    profiles.push(p.to_string());
                    lines.next();
                }
            }
        }
        services.push((name.to_string(), image, profiles));
    }
    let started_by = |active: &[&str]| -> Vec<(String, String)> {
        services
            .iter()
            .filter(|(_, _, p)| p.is_empty() || p.iter().any(|p| active.contains(&p.as_str())))
            .map(|(n, i, _)| (n.clone(), i.clone()))
            .collect()
    };
    // What `--profile http --profile monitoring up -d` starts: images this
    // machine builds (deploy/build.sh), none from a registry.
    let monitoring = started_by(&["http", "monitoring"]);
    let mut names: Vec<&str> = monitoring.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["bridge", "frontend-http", "nats", "prometheus", "sandbox-runner"], "{services:?}");
    for (name, image) in &monitoring {
        assert!(image.starts_with("code-mode-"), "{name} needs {image}, not built by deploy/build.sh");
    }
    // Grafana only with `--profile grafana`, which brings its Prometheus.
    let grafana = started_by(&["grafana"]);
    assert!(grafana.iter().any(|(n, i)| n == "grafana" && i.starts_with("grafana/")), "{grafana:?}");
    assert!(grafana.iter().any(|(n, _)| n == "prometheus"), "{grafana:?}");
    let compose = std::fs::read_to_string(deploy.join("docker-compose.yml")).unwrap();
    assert!(compose.contains("--profile grafana up -d grafana"), "the compose file says how to start Grafana");
}

#[test]
fn the_stack_prometheus_configuration_loads_the_alert_rules() {
    let Some((ok, out)) = promtool(&["check", "config", "prometheus.yml"]) else { return };
    assert!(ok, "promtool check config:\n{out}");
    assert!(out.contains("alerts.yml") && out.contains("8 rules found"), "the rules are loaded:\n{out}");
}

/// One query of a dashboard: where it is and its PromQL.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    /// The dashboard's file name.
    pub dashboard: String,
    /// The panel's title.
    pub panel: String,
    /// The expression, with the dashboard's variables substituted.
    pub expr: String,
}

fn grafana_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana")
}

/// The dashboards of `deploy/grafana/dashboards`, parsed, by file name.
pub fn dashboards() -> Vec<(String, serde_json::Value)> {
    let mut found: Vec<(String, serde_json::Value)> = std::fs::read_dir(grafana_dir().join("dashboards"))
        .expect("deploy/grafana/dashboards exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), json)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Grafana's variables as a Prometheus query sees them when "All" is
/// picked: `$instance` matches every instance, `$__rate_interval` is a
/// window that holds several scrapes of the stack (5 s apart).
pub fn substitute(expr: &str) -> String {
    expr.replace("${instance}", ".*")
        .replace("$instance", ".*")
        .replace("${__rate_interval}", "1m")
        .replace("$__rate_interval", "1m")
}

/// Every panel's every expression (panels in rows included), variables
/// substituted; and every query variable's series selector
/// (`label_values(SELECTOR, label)`), as a panel named after the variable.
pub fn dashboard_queries() -> Vec<PanelQuery> {
    fn walk(dashboard: &str, panels: &[serde_json::Value], out: &mut Vec<PanelQuery>) {
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or("(untitled)");
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push(PanelQuery { dashboard: dashboard.into(), panel: title.into(), expr: substitute(expr) });
                }
            }
            walk(dashboard, panel["panels"].as_array().map(Vec::as_slice).unwrap_or(&[]), out);
        }
    }
    let mut out = Vec::new();
    for (name, dashboard) in dashboards() {
        walk(&name, dashboard["panels"].as_array().expect("panels"), &mut out);
        for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
            if variable["type"] != "query" {
                continue;
            }
            let query = variable["query"]["query"].as_str().or(variable["query"].as_str()).unwrap_or_default();
            let selector = query
                .strip_prefix("label_values(")
                .and_then(|rest| rest.rsplit_once(','))
                .map(|(selector, _)| selector.trim().to_string())
                .unwrap_or_else(|| panic!("{name}: variable query {query:?} is not label_values(SELECTOR, LABEL)"));
            let panel = format!("variable {}", variable["name"]);
            out.push(PanelQuery { dashboard: name.clone(), panel, expr: substitute(&selector) });
        }
    }
    out
}

#[test]
fn the_dashboards_are_grafana_json_with_a_query_on_every_panel_and_the_overview_shows_what_the_issue_lists() {
    let dashboards = dashboards();
    let names: Vec<&str> = dashboards.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["bridge.json", "frontend.json", "overview.json", "sandbox-runner.json"]);
    let mut uids = std::collections::HashSet::new();
    for (name, dashboard) in &dashboards {
        assert!(uids.insert(dashboard["uid"].as_str().expect("a uid").to_string()), "{name}: uid used twice");
        assert!(dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "{name}: schemaVersion");
        let mut ids = std::collections::HashSet::new();
        for panel in dashboard["panels"].as_array().unwrap() {
            let title = panel["title"].as_str().unwrap_or_default();
            assert!(ids.insert(panel["id"].as_u64().expect("a numeric id")), "{name}: panel id used twice");
            let grid = &panel["gridPos"];
            assert!(["h", "w", "x", "y"].iter().all(|k| grid[k].is_u64()), "{name} {title}: gridPos");
            if panel["type"] == "row" {
                continue;
            }
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{name} {title}: the datasource variable");
            let targets = panel["targets"].as_array().map(Vec::len).unwrap_or(0);
            assert!(targets > 0, "{name} {title}: a panel without a query");
            assert!(!panel["description"].as_str().unwrap_or_default().is_empty(), "{name} {title}: no description");
        }
    }
    let queries = dashboard_queries();
    for q in &queries {
        assert!(!q.expr.contains('$'), "{} {}: a variable left in {}", q.dashboard, q.panel, q.expr);
    }
    let overview: Vec<&str> =
        queries.iter().filter(|q| q.dashboard == "overview.json").map(|q| q.expr.as_str()).collect();
    for metric in [
        "codemode_cells_total",
        "codemode_cell_duration_seconds_bucket",
        "codemode_warm_pool_size",
        "codemode_runner_cells_running",
        "codemode_runner_capacity",
        "codemode_tool_calls_total",
        "codemode_policy_decisions_total",
        "codemode_approvals_total",
        "codemode_session_taints_total",
        "codemode_bus_request_errors_total",
        "codemode_state_store_up",
        "codemode_audit_sink_up",
    ] {
        assert!(overview.iter().any(|e| e.contains(metric)), "the overview has no panel on {metric}");
    }
    for quantile in ["0.5", "0.95", "0.99"] {
        let wanted = format!("histogram_quantile({quantile}, sum by (le) (rate(codemode_cell_duration_seconds_bucket");
        assert!(overview.iter().any(|e| e.contains(&wanted)), "no cell latency p{quantile}");
    }

    // Provisioning: the data source is the stack's Prometheus, and the
    // dashboards' folder is where the compose file mounts them.
    let datasource = std::fs::read_to_string(grafana_dir().join("provisioning/datasources/prometheus.yml")).unwrap();
    assert!(datasource.contains("url: http://prometheus:9090"), "{datasource}");
    let provider = std::fs::read_to_string(grafana_dir().join("provisioning/dashboards/code-mode.yml")).unwrap();
    let compose = std::fs::read_to_string(grafana_dir().join("../docker-compose.yml")).unwrap();
    let path = provider.lines().find_map(|l| l.trim().strip_prefix("path: ")).expect("the provider's path");
    assert!(compose.contains(&format!("./grafana/dashboards:{path}:ro")), "compose mounts the dashboards at {path}");
    assert!(compose.contains("./grafana/provisioning:/etc/grafana/provisioning:ro"));
}

#[test]
fn the_cluster_env_file_runs_three_nats_nodes_and_gives_the_services_all_three_with_three_replicas() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let out = match Command::new("docker-compose")
        .arg("--env-file")
        .arg(deploy.join("cluster.env"))
        .arg("-f")
        .arg(deploy.join("docker-compose.yml"))
        .args(["config"])
        .envs([
            ("CODE_MODE_NATS_FRONTEND_PASSWORD", "f"),
            ("CODE_MODE_NATS_BRIDGE_PASSWORD", "b"),
            ("CODE_MODE_NATS_RUNNER_PASSWORD", "r"),
            ("CODE_MODE_NATS_ROUTE_PASSWORD", "route-secret"),
        ])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            code_mode_core::testing::unavailable("docker-compose", &e.to_string());
            return;
        }
    };
    let config = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let urls = "nats://nats:4222,nats://nats-2:4222,nats://nats-3:4222";
    // `docker-compose config` prints each service as a block of its own:
    // `  name:` under `services:`, its lines indented deeper.
    let service = |name: &str| -> String {
        let mut lines = config.lines().skip_while(|l| *l != "services:").skip(1);
        let header = format!("  {name}:");
        lines.find(|l| *l == header).unwrap_or_else(|| panic!("no service {name}:\n{config}"));
        lines.take_while(|l| l.starts_with("   ")).collect::<Vec<_>>().join("\n")
    };
    for node in ["nats", "nats-2", "nats-3"] {
        let block = service(node);
        assert!(block.contains(&format!("CODE_MODE_NATS_NODE: {node}")), "{block}");
        assert!(block.contains("CODE_MODE_NATS_ROUTES: nats:6222,nats-2:6222,nats-3:6222"), "{block}");
    }
    for name in ["bridge", "sandbox-runner", "frontend-http"] {
        let block = service(name);
        assert!(block.contains(urls), "{name} is given the three nodes:\n{block}");
    }
    for name in ["bridge", "sandbox-runner"] {
        let block = service(name);
        assert!(block.contains("- --jetstream-replicas\n    - '3'"), "{name} makes 3 replicas:\n{block}");
    }
}

#[test]
fn the_runner_host_compose_file_joins_the_cluster_over_tls_with_its_certificate() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let urls = "tls://nats-1.example:4222,tls://nats-2.example:4222,tls://nats-3.example:4222";
    let out = match Command::new("docker-compose")
        .arg("-f")
        .arg(deploy.join("runner-host.yml"))
        .arg("config")
        .envs([
            ("CODE_MODE_NATS_URLS", urls),
            ("CODE_MODE_NATS_RUNNER_PASSWORD", "r"),
            ("CODE_MODE_TLS_DIR", "/etc/code-mode/tls-here"),
        ])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            code_mode_core::testing::unavailable("docker-compose", &e.to_string());
            return;
        }
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = String::from_utf8_lossy(&out.stdout);
    for wanted in [
        urls,
        "- --nats-ca\n    - /etc/code-mode/tls/ca.pem",
        "- --nats-cert\n    - /etc/code-mode/tls/runner.pem",
        "- --nats-key\n    - /etc/code-mode/tls/runner.key",
        "- /etc/code-mode/tls-here:/etc/code-mode/tls:ro",
        "CODE_MODE_NATS_USER: sandbox-runner",
    ] {
        assert!(config.contains(wanted), "no {wanted:?} in\n{config}");
    }
}

/// The job names a text's `job_name:` lines give, in order.
fn job_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().trim_start_matches("- ").strip_prefix("job_name:"))
        .map(|n| n.trim().trim_matches(['\'', '"']).to_string())
        .collect()
}

/// Every `job="NAME"` a text selects on.
fn selected_jobs(text: &str) -> std::collections::BTreeSet<String> {
    let after = |pattern: &'static str| text.split(pattern).skip(1);
    after("job=\\\"")
        .chain(after("job=\""))
        .filter_map(|rest| {
            let name: String = rest.chars().take_while(|c| *c != '"' && *c != '\\').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn every_scrape_config_of_the_docs_names_the_jobs_the_dashboards_select() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut selected = std::collections::BTreeSet::new();
    for (_, dashboard) in dashboards() {
        selected.extend(selected_jobs(&dashboard.to_string()).into_iter().filter(|j| !j.contains('$')));
    }
    let want: Vec<&str> = vec!["bridge", "frontend-http", "sandbox-runner"];
    assert_eq!(selected.iter().map(String::as_str).collect::<Vec<_>>(), want, "the jobs the dashboards select");
    let stack = std::fs::read_to_string(prometheus_dir().join("prometheus.yml")).unwrap();
    let mut jobs = job_names(&stack);
    jobs.sort();
    assert_eq!(jobs, want, "deploy/prometheus/prometheus.yml");
    // Every scrape config a doc gives.
    let mut blocks = 0;
    for doc in ["metrics.md", "deploy-multi-host.md", "deployment.md"] {
        let text = std::fs::read_to_string(docs.join(doc)).unwrap();
        for block in text.split("```yaml\n").skip(1).filter_map(|b| b.split("```").next()) {
            if !block.contains("scrape_configs") {
                continue;
            }
            blocks += 1;
            let mut jobs = job_names(block);
            jobs.sort();
            assert_eq!(jobs, want, "the scrape config of docs/{doc}:\n{block}");
        }
    }
    assert!(blocks >= 1, "docs/metrics.md gives a scrape config");
    let multi_host = std::fs::read_to_string(docs.join("deploy-multi-host.md")).unwrap();
    assert!(
        multi_host.contains("Name the jobs `bridge`,\n  `sandbox-runner` and `frontend-http`")
            && multi_host.contains("the alerts\n  take any job names"),
        "docs/deploy-multi-host.md names the jobs and says the alerts take any"
    );
    // The alerts select on no job: a process says what it runs.
    let rules = std::fs::read_to_string(prometheus_dir().join("alerts.yml")).unwrap();
    assert!(selected_jobs(&rules).is_empty(), "an alert selects on a job: {:?}", selected_jobs(&rules));
}
