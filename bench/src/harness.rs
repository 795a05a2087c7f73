//! A small measurement harness: warm-up runs, then N timed runs; reports the median and the
//! range in nanoseconds. (Short operations are timed in batches by their benches, with
//! [`Sample::from_times`].)

use serde::Serialize;
use std::time::Instant;

/// Timing of one measured operation, in nanoseconds per operation.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Timed runs (each run may cover `batch` operations).
    pub runs: usize,
    /// Operations per timed run.
    pub batch: usize,
    pub median_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
}

impl Sample {
    /// Builds a sample from per-operation times (ns); `times` must not be empty.
    pub fn from_times(mut times: Vec<f64>, batch: usize) -> Sample {
        assert!(!times.is_empty(), "a sample needs at least one run");
        times.sort_by(f64::total_cmp);
        let n = times.len();
        let median = if n % 2 == 1 {
            times[n / 2]
        } else {
            (times[n / 2 - 1] + times[n / 2]) / 2.0
        };
        Sample {
            runs: n,
            batch,
            median_ns: median,
            min_ns: times[0],
            max_ns: times[n - 1],
        }
    }

    pub fn median_ms(&self) -> f64 {
        self.median_ns / 1e6
    }
}

/// Runs `op` `warmup` times untimed, then `runs` times timed; `op` returns a value that is
/// kept alive until after the clock stops (so dropping it is not timed) and passed to
/// `std::hint::black_box`.
pub fn measure<T>(warmup: usize, runs: usize, mut op: impl FnMut() -> T) -> Sample {
    for _ in 0..warmup {
        std::hint::black_box(op());
    }
    let times = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            let value = op();
            let elapsed = start.elapsed().as_nanos() as f64;
            drop(std::hint::black_box(value));
            elapsed
        })
        .collect();
    Sample::from_times(times, 1)
}

/// Formats nanoseconds with a unit that keeps 3–4 significant digits.
pub fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Sample::from_times(vec![5.0, 1.0, 3.0], 1);
        assert_eq!(
            (s.median_ns, s.min_ns, s.max_ns, s.runs),
            (3.0, 1.0, 5.0, 3)
        );
        let s = Sample::from_times(vec![4.0, 1.0, 2.0, 10.0], 2);
        assert_eq!(
            (s.median_ns, s.min_ns, s.max_ns, s.batch),
            (3.0, 1.0, 10.0, 2)
        );
    }

    #[test]
    fn measure_runs_the_operation_warmup_plus_runs_times() {
        let mut calls = 0;
        let s = measure(2, 5, || calls += 1);
        assert_eq!((calls, s.runs), (7, 5));
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(12.34), "12.3 ns");
        assert_eq!(human_ns(1_500.0), "1.50 µs");
        assert_eq!(human_ns(2_500_000.0), "2.50 ms");
        assert_eq!(human_ns(3e9), "3.00 s");
    }
}
