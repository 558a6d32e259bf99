//! Summaries of measured durations: nearest-rank percentiles and the
//! maximum, in milliseconds.

use std::time::Duration;

/// p50, p90 and the maximum of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Samples summarised.
    pub count: usize,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 90th percentile, in milliseconds.
    pub p90_ms: f64,
    /// Slowest sample, in milliseconds.
    pub max_ms: f64,
}

impl Summary {
    /// The summary of `samples`; `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        Some(Summary {
            count: ms.len(),
            p50_ms: percentile(&ms, 50),
            p90_ms: percentile(&ms, 90),
            max_ms: ms[ms.len() - 1],
        })
    }
}

/// Nearest rank: the smallest sample with at least `p` percent of the
/// samples at or below it. `sorted` is sorted and not empty.
fn percentile(sorted: &[f64], p: usize) -> f64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|&v| Duration::from_millis(v)).collect()
    }

    #[test]
    fn percentiles_are_nearest_rank_over_the_sorted_samples() {
        let s = Summary::of(&ms(&[10, 1, 9, 2, 8, 3, 7, 4, 6, 5])).unwrap();
        assert_eq!((s.count, s.p50_ms, s.p90_ms, s.max_ms), (10, 5.0, 9.0, 10.0));
        let one = Summary::of(&ms(&[42])).unwrap();
        assert_eq!((one.p50_ms, one.p90_ms, one.max_ms), (42.0, 42.0, 42.0));
        let three = Summary::of(&ms(&[30, 10, 20])).unwrap();
        assert_eq!((three.p50_ms, three.p90_ms), (20.0, 30.0));
    }

    #[test]
    fn no_samples_have_no_summary() {
        assert_eq!(Summary::of(&[]), None);
    }
}
