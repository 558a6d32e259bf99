//! The figures of a comparison, their JSON and the printed table.

use std::time::Duration;

use serde_json::{Value, json};

use crate::stats::Summary;

/// One figure: code-mode's samples beside the reference's.
pub(super) struct Figure {
    pub(super) name: &'static str,
    pub(super) ours: Summary,
    pub(super) reference: Summary,
    pub(super) reference_name: &'static str,
    pub(super) goal: &'static str,
}

impl Figure {
    pub(super) fn json(&self) -> Value {
        json!({
            "figure": self.name,
            "code_mode": summary_json(&self.ours),
            "reference": self.reference_name,
            "reference_ms": summary_json(&self.reference),
            "ratio_p50": self.ours.p50_ms / self.reference.p50_ms,
            "ratio_p90": self.ours.p90_ms / self.reference.p90_ms,
            "goal": self.goal,
        })
    }
}

pub(super) fn summary_json(s: &Summary) -> Value {
    json!({"n": s.count, "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "max_ms": s.max_ms})
}

/// One tool call inside a cell, timed at three places.
#[derive(Debug, Clone, Copy)]
pub(super) struct CallSplit {
    /// As the code timed it, around the `await`.
    pub(super) in_cell: Duration,
    /// At the sandbox-runner: the call line read until the result line
    /// written (`codemode_tool_call_host_seconds`).
    pub(super) host: Duration,
    /// At the bridge: its checks and the wrapped server's answer
    /// (`codemode_tool_call_duration_seconds`).
    pub(super) bridge: Duration,
}

/// One part of a call: its name, what it is, how to take it from a split.
pub(super) type Part = (&'static str, &'static str, fn(&CallSplit) -> Duration);

/// The calls of one path, each split.
#[derive(Default)]
pub(super) struct Calls(pub(super) Vec<CallSplit>);

impl Calls {
    pub(super) fn in_cell(&self) -> Vec<Duration> {
        self.0.iter().map(|c| c.in_cell).collect()
    }

    pub(super) fn host(&self) -> Vec<Duration> {
        self.0.iter().map(|c| c.host).collect()
    }

    /// Where each call's time went, per component, p50 / p90 / mean over
    /// the calls (each call is split first, so the parts of one call add
    /// up to its whole; the percentiles of the parts need not).
    pub(super) fn breakdown(&self) -> Value {
        let parts: [Part; 5] = [
            ("in_cell", "the call as the code timed it", |c| c.in_cell),
            (
                "container_side",
                "in the cell minus the host side: the engine's attach stream both ways and runner.py",
                |c| c.in_cell.saturating_sub(c.host),
            ),
            ("host_side", "the runner from reading the call line to writing the result line", |c| c.host),
            ("runner_and_bus", "the host side minus the bridge: the runner's relay and the bus both ways", |c| {
                c.host.saturating_sub(c.bridge)
            }),
            ("bridge", "the bridge's checks and the wrapped server's answer", |c| c.bridge),
        ];
        let mut out = serde_json::Map::new();
        for (name, what, part) in parts {
            let values: Vec<Duration> = self.0.iter().map(part).collect();
            let Some(s) = Summary::of(&values) else { continue };
            let mean = values.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / values.len() as f64;
            out.insert(name.into(), json!({"what": what, "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "mean_ms": mean}));
        }
        Value::Object(out)
    }
}

/// Every sample of one runtime's rounds.
#[derive(Default)]
pub(super) struct Samples {
    pub(super) raw: Vec<Duration>,
    pub(super) mcp_warm: Vec<Duration>,
    pub(super) warm: Vec<Duration>,
    /// The first-output phase of each in-process warm cell.
    pub(super) first_output: Vec<Duration>,
    pub(super) cold: Vec<Duration>,
    pub(super) calls: Calls,
    pub(super) nats_calls: Calls,
    pub(super) direct_call: Vec<Duration>,
    /// The same call made directly through `code-mode serve`
    /// (`--expose-tools`): client, frontend, bridge, server and back.
    pub(super) serve_direct: Vec<Duration>,
    /// A line through the engine's attach stream to an echo and back.
    pub(super) echo: Vec<Duration>,
    pub(super) baseline_warm: Vec<Duration>,
    pub(super) baseline_first_output: Vec<Duration>,
    pub(super) baseline_calls: Calls,
    pub(super) baseline_cold: Vec<Duration>,
}

pub(super) fn print_report(report: &Value, machine: &str) {
    println!("code-mode-loadtest --compare, runtime {}: {machine}", report["runtime"].as_str().unwrap_or_default());
    println!(
        "{:<46} {:>17} {:>17} {:>13}  reference; goal",
        "figure", "code-mode p50/p90", "reference p50/p90", "ratio p50/p90"
    );
    let pair =
        |v: &Value| format!("{:.2} / {:.2}", v["p50_ms"].as_f64().unwrap_or(0.0), v["p90_ms"].as_f64().unwrap_or(0.0));
    for f in report["figures"].as_array().into_iter().flatten() {
        println!(
            "{:<46} {:>17} {:>17} {:>13}  {}; {}",
            f["figure"].as_str().unwrap_or_default(),
            pair(&f["code_mode"]),
            pair(&f["reference_ms"]),
            format!("{:.3} / {:.3}", f["ratio_p50"].as_f64().unwrap_or(0.0), f["ratio_p90"].as_f64().unwrap_or(0.0)),
            f["reference"].as_str().unwrap_or_default(),
            f["goal"].as_str().unwrap_or_default(),
        );
    }
    println!();
    for t in report["throughput"].as_array().into_iter().flatten() {
        println!(
            "throughput {:<16} {} cells, {} at once: {:.2} cells/s ({:.2}x docker run)",
            t["what"].as_str().unwrap_or_default(),
            t["cells"],
            t["at_once"],
            t["cells_per_s"].as_f64().unwrap_or(0.0),
            t["ratio_to_docker_run"].as_f64().unwrap_or(0.0)
        );
    }
    let breakdown = |title: &str, parts: &Value| {
        println!();
        println!("{title} (each call split, then p50 / p90 / mean ms per part):");
        for (name, part) in parts.as_object().into_iter().flatten() {
            println!(
                "  {:<15} {:>8.3} {:>8.3} {:>8.3}  {}",
                name,
                part["p50_ms"].as_f64().unwrap_or(0.0),
                part["p90_ms"].as_f64().unwrap_or(0.0),
                part["mean_ms"].as_f64().unwrap_or(0.0),
                part["what"].as_str().unwrap_or_default()
            );
        }
    };
    for (bus, parts) in report["tool_call_breakdown"].as_object().into_iter().flatten() {
        breakdown(&format!("where the in-cell tool call's time goes, {bus}"), parts);
    }
    let phases = |title: &str, rows: &Value, first: &Value| {
        println!();
        println!("{title} (mean ms; kill, remove and refill are off the cell's path):");
        for p in rows.as_array().into_iter().flatten() {
            println!(
                "  {:<13} {:>8.3} ms  (n = {})",
                p["phase"].as_str().unwrap_or_default(),
                p["mean_ms"].as_f64().unwrap_or(0.0),
                p["count"]
            );
        }
        if first.is_object() {
            println!("  first_output per cell, p50 / p90: {} ms", pair(first));
        }
    };
    phases(
        &format!("phases of the in-process warm print(1) cells, {}", report["image"].as_str().unwrap_or_default()),
        &report["phases_of_warm_cells_in_process"],
        &report["first_output_ms"],
    );
    if let Some(baseline) = report.get("baseline") {
        phases(
            &format!("the same, baseline image {}", baseline["image"].as_str().unwrap_or_default()),
            &baseline["phases_of_warm_cells"],
            &baseline["first_output_ms"],
        );
        breakdown("the in-cell tool call, baseline image", &baseline["tool_call_breakdown"]);
    }
    println!();
    println!("memory: {}", report["memory"]);
    println!();
}
