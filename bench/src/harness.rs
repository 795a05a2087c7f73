//! A small measurement harness: warm-up runs, then N timed runs; reports the median and the
//! range in nanoseconds. (Short operations are timed in batches by their benches, with
//! [`Sample::from_times`].)
//!
//! Operations that are compared with each other (backends, modes, sizes) are timed with
//! [`alternate`]: round by round, each operation once per round (A, B, C, A, B, C …), so a
//! change of machine load hits all of them alike; [`ratios`] then relates two operations
//! run by run, from the same rounds.
//!
//! Every timed run records two clocks ([`Measured`]): wall time, and the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`). On a loaded machine the wall clock also counts the time the
//! thread waited for a core, so it mostly measures the scheduler; CPU time does not, and
//! stays the steadier figure for single-threaded work (all of what is timed here).

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Timing of one measured operation, in nanoseconds per operation.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
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

/// One timed run on both clocks, in ns: wall time and the thread's CPU time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub wall: f64,
    pub cpu: f64,
}

impl Measured {
    /// A time known on the wall clock only (a child process's, whose CPU time is not this
    /// thread's): its CPU figure is NaN.
    pub fn wall_only(wall: f64) -> Measured {
        Measured {
            wall,
            cpu: f64::NAN,
        }
    }
}

/// Per operation of a batch: both clocks divided by the batch size.
impl std::ops::Div<f64> for Measured {
    type Output = Measured;
    fn div(self, n: f64) -> Measured {
        Measured {
            wall: self.wall / n,
            cpu: self.cpu / n,
        }
    }
}

/// Runs `op` once and returns its value and its time on both clocks (the value is dropped
/// by the caller, after the clocks stopped).
pub fn time<T>(op: impl FnOnce() -> T) -> (T, Measured) {
    let cpu = thread_cpu_ns();
    let start = Instant::now();
    let value = op();
    let wall = start.elapsed().as_nanos() as f64;
    let cpu = thread_cpu_ns() - cpu;
    (value, Measured { wall, cpu })
}

/// `count` results of `compile`, stopping at the first error, in a vector sized for all of
/// them at once. The compile rows collect their traces with it: collecting a `Result`
/// iterator grows the vector from empty (its size hint is 0), and on the 10-instance trace
/// those reallocations and the moves of each trace into the larger vector were 5 % of
/// copy-and-patch's clock (callgrind, `--profile-stitch straight-10 --select`), a cost of
/// the harness, not of compiling.
pub fn collect_n<T, E>(
    count: usize,
    mut compile: impl FnMut() -> Result<T, E>,
) -> Result<Vec<T>, E> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(compile()?);
    }
    Ok(out)
}

/// CPU time this thread has used, in ns (`CLOCK_THREAD_CPUTIME_ID`): unlike wall time it
/// does not grow while the thread waits for a core on a loaded machine.
pub fn thread_cpu_ns() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

/// One operation timed by [`alternate`]: it times itself (with [`time`]) and returns both
/// clocks per operation (so it can batch, and drop its results after the clocks stop).
pub struct Timed<'a> {
    /// Untimed runs first (in the first rounds, alternated like the timed ones).
    pub warmup: usize,
    /// Timed runs: the operation takes part in the first `runs` timed rounds only (an
    /// expensive one may run fewer times than the rest).
    pub runs: usize,
    /// Each timed run right after an untimed run of the same op ([`Timed::primed`]).
    pub primed: bool,
    pub op: Box<dyn FnMut() -> Result<Measured, String> + 'a>,
}

impl<'a> Timed<'a> {
    pub fn new(
        warmup: usize,
        runs: usize,
        op: impl FnMut() -> Result<Measured, String> + 'a,
    ) -> Timed<'a> {
        Timed {
            warmup,
            runs: runs.max(1),
            primed: false,
            op: Box::new(op),
        }
    }

    /// Runs the op once, untimed, right before each of its timed runs: its time is then
    /// its own, whatever ran before it. For the compile-time rows, whose runs are short
    /// enough (tens of µs for copy-and-patch) that the caches another backend left behind
    /// count: with the rotation alone each op almost always follows the same other op
    /// (the order rotates, but its cycle stays), and copy-and-patch's default-mode row,
    /// which follows the last Cranelift variant, took 1.6× as long as in a run of its own
    /// on the 1,000-instance trace while the persistent-alias row, which follows the
    /// uncached-ops row, always started warm.
    pub fn primed(mut self) -> Timed<'a> {
        self.primed = true;
        self
    }
}

/// Times of each operation of [`alternate`], by round (`None` where it sat out).
pub struct Rounds(pub Vec<Vec<Option<Measured>>>);

impl Rounds {
    /// Operation `i`'s sample, wall clock.
    pub fn sample(&self, i: usize, batch: usize) -> Sample {
        Sample::from_times(self.0[i].iter().flatten().map(|m| m.wall).collect(), batch)
    }

    /// Operation `i`'s sample, thread CPU clock.
    pub fn cpu_sample(&self, i: usize, batch: usize) -> Sample {
        Sample::from_times(self.0[i].iter().flatten().map(|m| m.cpu).collect(), batch)
    }
}

/// Runs `ops` alternately: warm-up rounds, then timed rounds, each op once per round (a
/// [primed](Timed::primed) op twice in a row, the second run timed). The order rotates by
/// one op every round (round `r` starts with op `r mod n`), so every op runs in every
/// position equally often; an op still follows the same op in all but one round in `n`,
/// which priming makes the op itself. Stops at the first error.
pub fn alternate(ops: &mut [Timed<'_>]) -> Result<Rounds, String> {
    let n = ops.len();
    let warmup = ops.iter().map(|o| o.warmup).max().unwrap_or(0);
    for round in 0..warmup {
        for i in rotation(round, n) {
            if round < ops[i].warmup {
                (ops[i].op)()?;
            }
        }
    }
    let rounds = ops.iter().map(|o| o.runs).max().unwrap_or(0);
    let mut times = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        // Each op gets one entry a round, whatever its place in the round.
        for i in rotation(round, n) {
            let timed = if round < ops[i].runs {
                if ops[i].primed {
                    (ops[i].op)()?;
                }
                Some((ops[i].op)()?)
            } else {
                None
            };
            times[i].push(timed);
        }
    }
    Ok(Rounds(times))
}

/// The order of the `n` ops in round `round`.
fn rotation(round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (round + k) % n.max(1))
}

/// `a / b` run by run, over the rounds where both ran, wall clock.
pub fn ratios(rounds: &Rounds, a: usize, b: usize) -> Option<Sample> {
    ratios_of(rounds, a, b, |m| m.wall)
}

/// `a / b` run by run, over the rounds where both ran, thread CPU clock.
pub fn cpu_ratios(rounds: &Rounds, a: usize, b: usize) -> Option<Sample> {
    ratios_of(rounds, a, b, |m| m.cpu)
}

fn ratios_of(
    rounds: &Rounds,
    a: usize,
    b: usize,
    clock: impl Fn(&Measured) -> f64,
) -> Option<Sample> {
    let r: Vec<f64> = rounds.0[a]
        .iter()
        .zip(&rounds.0[b])
        .filter_map(|(x, y)| Some(clock(x.as_ref()?) / clock(y.as_ref()?)))
        .collect();
    (!r.is_empty()).then(|| Sample::from_times(r, 1))
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
    fn alternate_interleaves_rounds_and_relates_runs_pairwise() {
        let log = std::cell::RefCell::new(Vec::new());
        let m = |wall, cpu| Measured { wall, cpu };
        let mut ops = vec![
            Timed::new(1, 3, || {
                log.borrow_mut().push('a');
                Ok(m(10.0, 9.0))
            }),
            Timed::new(0, 2, || {
                log.borrow_mut().push('b');
                Ok(m(5.0, 3.0))
            }),
        ];
        let rounds = alternate(&mut ops).unwrap();
        drop(ops);
        // One warm-up of a, then rounds a b, b a, a (b only runs twice): the order rotates.
        assert_eq!(log.into_inner().iter().collect::<String>(), "aabbaa");
        assert_eq!(rounds.0[1], [Some(m(5.0, 3.0)), Some(m(5.0, 3.0)), None]);
        let r = ratios(&rounds, 0, 1).unwrap();
        assert_eq!((r.runs, r.median_ns), (2, 2.0));
        let r = cpu_ratios(&rounds, 0, 1).unwrap();
        assert_eq!((r.runs, r.median_ns), (2, 3.0));
        assert_eq!(rounds.sample(0, 1).runs, 3);
        assert_eq!(rounds.cpu_sample(1, 1).median_ns, 3.0);
    }

    #[test]
    fn time_reads_both_clocks_and_batches_divide_both() {
        let (v, t) = time(|| (0..200_000u64).map(std::hint::black_box).sum::<u64>());
        assert_eq!(v, 199_999 * 100_000);
        assert!(t.wall > 0.0 && t.cpu > 0.0, "{t:?}");
        let per = Measured {
            wall: 10.0,
            cpu: 4.0,
        } / 2.0;
        assert_eq!(
            per,
            Measured {
                wall: 5.0,
                cpu: 2.0
            }
        );
    }

    #[test]
    fn alternate_runs_every_op_in_every_position_equally_often() {
        let log = std::cell::RefCell::new(Vec::new());
        let mut ops: Vec<Timed<'_>> = (0..3)
            .map(|k| {
                let log = &log;
                Timed::new(0, 6, move || {
                    log.borrow_mut().push(k);
                    Ok(Measured {
                        wall: 1.0,
                        cpu: 1.0,
                    })
                })
            })
            .collect();
        alternate(&mut ops).unwrap();
        drop(ops);
        let log = log.into_inner();
        assert_eq!(&log[..9], &[0, 1, 2, 1, 2, 0, 2, 0, 1]);
        for op in 0..3 {
            let positions: Vec<usize> = log
                .chunks(3)
                .map(|round| round.iter().position(|&k| k == op).unwrap())
                .collect();
            for p in 0..3 {
                assert_eq!(positions.iter().filter(|&&x| x == p).count(), 2, "op {op}");
            }
        }
    }

    /// A primed op runs twice in a row in each timed round and only the second run is
    /// recorded; warm-up rounds and unprimed ops run once.
    #[test]
    fn primed_ops_run_right_after_an_untimed_run_of_their_own() {
        let log = std::cell::RefCell::new(Vec::new());
        let count = std::cell::Cell::new(0.0);
        let mut ops = vec![
            Timed::new(1, 2, || {
                log.borrow_mut().push('a');
                count.set(count.get() + 1.0);
                Ok(Measured {
                    wall: count.get(),
                    cpu: count.get(),
                })
            })
            .primed(),
            Timed::new(0, 2, || {
                log.borrow_mut().push('b');
                Ok(Measured {
                    wall: 1.0,
                    cpu: 1.0,
                })
            }),
        ];
        let rounds = alternate(&mut ops).unwrap();
        drop(ops);
        // Warm-up a; round 0: a a b; round 1: b a a.
        assert_eq!(log.into_inner().iter().collect::<String>(), "aaabbaa");
        let recorded: Vec<f64> = rounds.0[0].iter().flatten().map(|m| m.wall).collect();
        assert_eq!(recorded, [3.0, 5.0]);
    }

    #[test]
    fn alternate_stops_at_the_first_error() {
        let mut ops = vec![Timed::new(0, 3, || Err("broken".to_string()))];
        assert_eq!(alternate(&mut ops).err().unwrap(), "broken");
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(12.34), "12.3 ns");
        assert_eq!(human_ns(1_500.0), "1.50 µs");
        assert_eq!(human_ns(2_500_000.0), "2.50 ms");
        assert_eq!(human_ns(3e9), "3.00 s");
    }
}
