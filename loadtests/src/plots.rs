//! SVG plots of a `clients` run: each cell's latency over the run with the
//! p50, p95 and p99 of each time slice, and a latency histogram per kind.

use std::path::Path;

use anyhow::{Context, anyhow};
use plotters::prelude::*;

use crate::clients::{Kind, Sample};

/// A colour per kind, the same in both plots.
fn colour(kind: Kind) -> RGBColor {
    match kind {
        Kind::Print => RGBColor(31, 119, 180),
        Kind::Tool => RGBColor(44, 160, 44),
        Kind::Cpu => RGBColor(255, 127, 14),
        Kind::Deadline => RGBColor(148, 103, 189),
        Kind::Refused => RGBColor(214, 39, 40),
        Kind::Nothing => RGBColor(127, 127, 127),
        Kind::File => RGBColor(23, 190, 207),
    }
}

fn drawing<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e:?}")
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Every cell's latency at the time it was sent, coloured by kind, and the
/// p50, p95 and p99 lines of each of about 30 time slices.
pub fn latency_over_time(path: &Path, samples: &[Sample]) -> anyhow::Result<()> {
    let end_s = samples.iter().map(|s| s.sent_s + s.latency_ms / 1000.0).fold(1.0, f64::max);
    let top_ms = samples.iter().map(|s| s.latency_ms).fold(1.0, f64::max) * 1.05;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("cell latency over the run", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..end_s, 0.0..top_ms)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the load started (cell sent)")
        .y_desc("latency, ms")
        .draw()
        .map_err(drawing)?;
    for kind in Kind::ALL {
        let points: Vec<(f64, f64)> =
            samples.iter().filter(|s| s.kind == kind).map(|s| (s.sent_s, s.latency_ms)).collect();
        if points.is_empty() {
            continue;
        }
        let c = colour(kind);
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 2, c.filled())))
            .map_err(drawing)?
            .label(kind.name())
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
    }
    let slice = (end_s / 30.0).max(1.0);
    let slices = (end_s / slice).ceil() as usize;
    for (p, style) in
        [(50.0, BLACK.stroke_width(2)), (95.0, BLACK.mix(0.6).stroke_width(2)), (99.0, BLACK.mix(0.35).stroke_width(2))]
    {
        let line: Vec<(f64, f64)> = (0..slices)
            .filter_map(|i| {
                let (from, to) = (i as f64 * slice, (i + 1) as f64 * slice);
                let mut ms: Vec<f64> =
                    samples.iter().filter(|s| s.sent_s >= from && s.sent_s < to).map(|s| s.latency_ms).collect();
                if ms.is_empty() {
                    return None;
                }
                ms.sort_by(f64::total_cmp);
                Some(((from + to) / 2.0, percentile(&ms, p)))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(line, style))
            .map_err(drawing)?
            .label(format!("p{p}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(drawing)?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A histogram of latencies per kind, one panel each, over the same bins.
pub fn latency_histograms(path: &Path, samples: &[Sample]) -> anyhow::Result<()> {
    let kinds: Vec<Kind> = Kind::ALL.into_iter().filter(|k| samples.iter().any(|s| s.kind == *k)).collect();
    let top_ms = samples.iter().map(|s| s.latency_ms).fold(1.0, f64::max) * 1.02;
    const BINS: usize = 40;
    let width = top_ms / BINS as f64;
    let height = 140 * kinds.len().max(1) as u32 + 40;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let root = root.titled("cell latency per kind", ("sans-serif", 20)).map_err(drawing)?;
    let panels = root.split_evenly((kinds.len().max(1), 1));
    for (panel, kind) in panels.iter().zip(&kinds) {
        let mut counts = [0u32; BINS];
        for s in samples.iter().filter(|s| s.kind == *kind) {
            counts[((s.latency_ms / width) as usize).min(BINS - 1)] += 1;
        }
        let most = counts.iter().copied().max().unwrap_or(1).max(1);
        let mut chart = ChartBuilder::on(panel)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .caption(format!("{} ({} cells)", kind.name(), counts.iter().sum::<u32>()), ("sans-serif", 14))
            .build_cartesian_2d(0.0..top_ms, 0u32..most + 1)
            .map_err(drawing)?;
        chart.configure_mesh().x_desc("latency, ms").y_desc("cells").draw().map_err(drawing)?;
        let c = colour(*kind);
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, n)| Rectangle::new([(i as f64 * width, 0), ((i + 1) as f64 * width, *n)], c.filled())),
            )
            .map_err(drawing)?;
    }
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
