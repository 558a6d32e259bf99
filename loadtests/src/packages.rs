//! The `packages` scenario: cells on an image built with packages
//! (`code-mode build-image --requirements`, given as `--packages-image
//! TAG`) beside cells on this version's default image, in one run with the
//! samples alternating, so the machine's noise falls on both alike.
//!
//! It measures cold `print(1)` (no warm pool: a container started per
//! cell) and warm `print(1)` on each image, then a warm cell on the package
//! image that imports numpy, pandas and matplotlib's pyplot (what the
//! import costs: the runner pre-imports nothing, so a warm container does
//! not hide it), the memory of an idle warm container of each image, and
//! the images' sizes.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use code_mode_proto::CellReport;
use code_mode_sandbox_runner::container::Runtime;

use crate::compare::probe::{idle_warm_memory_of, refilled};
use crate::stack::{Extras, Stack, Transport};
use crate::stats::Summary;

/// What the scenario measured: latency rows and lines of facts.
pub struct Measured {
    /// (scenario, samples, note).
    pub rows: Vec<(String, Vec<Duration>, String)>,
    /// Sizes and idle memory, one line each.
    pub facts: Vec<String>,
}

/// The cell ("warm, import the set") that imports the data-science set and prints how long that took
/// in the sandbox, in milliseconds.
const IMPORTS: &str = "import time\nt = time.perf_counter()\nimport numpy, pandas, matplotlib\n\
                       matplotlib.use('Agg')\nimport matplotlib.pyplot\n\
                       print(round((time.perf_counter() - t) * 1000, 1))";

/// One cell's time, checked.
async fn timed(stack: &Stack, code: &str) -> anyhow::Result<(Duration, CellReport)> {
    let started = Instant::now();
    let report = stack.frontend.run_code(code).await.context("running a cell")?;
    let elapsed = started.elapsed();
    ensure!(report.error.is_none(), "the cell failed: {report:?}");
    Ok((elapsed, report))
}

/// `docker image inspect`'s size of `image`, in MB (10^6 bytes, as `docker
/// images` shows them).
async fn image_mb(docker: &bollard::Docker, image: &str) -> anyhow::Result<f64> {
    let inspected = docker.inspect_image(image).await.with_context(|| format!("inspecting {image}"))?;
    Ok(inspected.size.unwrap_or_default() as f64 / 1e6)
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Run the scenario on `image` beside the default image.
pub async fn measure(
    transport: &Transport,
    runtime: Runtime,
    server: &[String],
    image: &str,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Measured> {
    let docker = code_mode_sandbox_runner::connect_docker().await?;
    let default = code_mode_sandbox_runner::image::default_image_tag();
    let with = |image: Option<String>| Extras { image, ..Extras::default() };
    let mut rows = Vec::new();
    let mut facts = vec![format!(
        "image size: default {} {:.0} MB, with packages {image} {:.0} MB",
        default,
        image_mb(&docker, &default).await?,
        image_mb(&docker, image).await?
    )];

    // Cold: a container per cell, the two images taking turns.
    let plain = Stack::start(transport, runtime, server, 0, 1, with(None)).await?;
    let packaged = Stack::start(transport, runtime, server, 0, 1, with(Some(image.into()))).await;
    let packaged = match packaged {
        Ok(stack) => stack,
        Err(e) => {
            plain.stop().await;
            return Err(e);
        }
    };
    let cold = async {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..warmup + samples {
            // Each goes first every other time: the work one cell leaves
            // behind (its container's removal) falls on both alike.
            let (x, y) = if i % 2 == 0 {
                let x = timed(&plain, "print(1)").await?.0;
                (x, timed(&packaged, "print(1)").await?.0)
            } else {
                let y = timed(&packaged, "print(1)").await?.0;
                (timed(&plain, "print(1)").await?.0, y)
            };
            if i >= warmup {
                a.push(x);
                b.push(y);
            }
        }
        anyhow::Ok((a, b))
    }
    .await;
    plain.stop().await;
    packaged.stop().await;
    let (a, b) = cold?;
    rows.push(("cold print(1), default image".into(), a, String::new()));
    rows.push(("cold print(1), packages".into(), b, String::new()));

    // Warm: two containers ready per image, refilled before each pair.
    let plain = Stack::start(transport, runtime, server, 2, 2, with(None)).await?;
    let packaged = match Stack::start(transport, runtime, server, 2, 2, with(Some(image.into()))).await {
        Ok(stack) => stack,
        Err(e) => {
            plain.stop().await;
            return Err(e);
        }
    };
    let warm = async {
        let (mut a, mut b, mut imports, mut import_ms) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        refilled(&plain).await?;
        refilled(&packaged).await?;
        let owner = code_mode_sandbox_runner::container::owner_label();
        let idle_default = idle_warm_memory_of(&owner, Some(&default)).await?;
        let idle_packages = idle_warm_memory_of(&owner, Some(image)).await?;
        for i in 0..warmup + samples {
            // Both pools full before each cell, and each image first every
            // other time, so one pool's refill never runs under the other's
            // sample.
            let mut pair = [Duration::ZERO; 2];
            for which in if i % 2 == 0 { [0, 1] } else { [1, 0] } {
                refilled(&plain).await?;
                refilled(&packaged).await?;
                pair[which] = timed(if which == 0 { &plain } else { &packaged }, "print(1)").await?.0;
            }
            let [x, y] = pair;
            refilled(&plain).await?;
            refilled(&packaged).await?;
            let (z, report) = timed(&packaged, IMPORTS).await?;
            if i >= warmup {
                a.push(x);
                b.push(y);
                imports.push(z);
                import_ms.push(report.stdout.trim().parse::<f64>().with_context(|| format!("{report:?}"))?);
            }
        }
        anyhow::Ok((a, b, imports, import_ms, idle_default, idle_packages))
    }
    .await;
    plain.stop().await;
    packaged.stop().await;
    let (a, b, imports, import_ms, idle_default, idle_packages) = warm?;
    rows.push(("warm print(1), default image".into(), a, String::new()));
    rows.push(("warm print(1), packages".into(), b, String::new()));
    let ms: Vec<Duration> = import_ms.iter().map(|ms| Duration::from_secs_f64(ms / 1000.0)).collect();
    let note = Summary::of(&ms)
        .map(|s| format!("the imports in the cell: p50 {:.0} ms, p90 {:.0} ms", s.p50_ms, s.p90_ms))
        .unwrap_or_default();
    rows.push(("warm, import the set".into(), imports, note));
    facts.push(format!(
        "idle warm container memory: default {:.1} MiB (mean of {}), with packages {:.1} MiB (mean of {})",
        mean(&idle_default),
        idle_default.len(),
        mean(&idle_packages),
        idle_packages.len()
    ));
    Ok(Measured { rows, facts })
}
