//! Timing one run-time run: redone if the scheduler preempted it (`unpreempted`), and for a
//! short run the median of runs back to back (`settled`), because a run entered right after
//! a system call is not the engine's time on this machine.
//!
//! Wave 37 (AMD EPYC, a 2-core KVM guest whose kernel uses retpolines and the
//! `srso_return_thunk`, "Safe RET"): the helper-calls loop (one `call`/`ret` per iteration)
//! runs at 5 cycles an iteration (236-240 µs for 200k, 4.2 GHz, an `add` chain probed before
//! each run), but a run entered right after a system call mostly runs the whole run at 5.6,
//! 6, 7, 8.3 or 10 (268-480 µs), one of them picked run by run, in one process, at one
//! placement, with the same addresses. The bench made one right before every timed run: the
//! `getrusage` that counts preemptions. 40 runs back to back: 30-35 of 40 at 236 µs, median
//! 236; each right after a `getrusage`: 3-4 of 40, median 395; after the `getrusage` a
//! 1 ms spin or one untimed run: 10-20 of 40. The C reproduction (the trace's bytes, a
//! `getppid` before each run) gives the same: 33-35 of 40 at 236 µs without, 8-12 with.
//! rbpf's JIT's loop (a `call` per iteration as well) swings the same way; an interpreter
//! (2-4 ms a run) pays it once. `--after-syscall ROUNDS` shows it: each round ebpf-jit's
//! helper-calls run right after a `getrusage`, then one right after the previous run.

use super::elapsed_ns;
use ebpf_jit::EbpfVm;

/// How many times the scheduler has taken the CPU from this thread so far (its involuntary
/// context switches; Linux only, elsewhere always 0, so nothing is redone).
pub fn preemptions() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `rusage` is plain data that getrusage fills; RUSAGE_THREAD is Linux's.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        assert_eq!(status, 0, "getrusage(RUSAGE_THREAD) failed");
        usage.ru_nivcsw
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// Attempts of one timed run before `unpreempted` keeps a preempted one.
pub const RUN_ATTEMPTS: usize = 5;

/// A run shorter than this is timed `SHORT_RUNS` times back to back (`settled`): the first
/// follows `preemptions`' system call, the others none. A longer one pays the system call's
/// after-effect (at most about 250 µs, module docs) once in its time.
const SHORT_NS: f64 = 1e6;

/// Runs of a short run, the median kept (odd: a middle run).
const SHORT_RUNS: usize = 5;

/// `timed` once, or for a run shorter than `SHORT_NS` the median time of `SHORT_RUNS`
/// runs back to back (the first run's result: every run of a program gives the same).
fn settled<T>(timed: &mut impl FnMut() -> (f64, T)) -> (f64, T) {
    let (ns, r) = timed();
    if ns >= SHORT_NS {
        return (ns, r);
    }
    let mut times: Vec<f64> = std::iter::once(ns)
        .chain((1..SHORT_RUNS).map(|_| timed().0))
        .collect();
    times.sort_by(f64::total_cmp);
    (times[SHORT_RUNS / 2], r)
}

/// `timed` (which prepares its input and returns the time of one run and its result), as
/// `settled` times it, done again while the thread was preempted during it: at most
/// `RUN_ATTEMPTS` times, then the fastest attempt is kept. On a loaded machine a preempted
/// run's wall time includes other processes' time slices (4 ms steps here): wave 34's
/// `loop 1M` at 5.3-13.3 ms instead of 1.25 was such runs, with the thread's CPU time at
/// 1.25 ms in every one of them. Returns the time, the result and whether the kept attempt
/// was preempted.
pub fn unpreempted<T>(mut timed: impl FnMut() -> (f64, T)) -> (f64, T, bool) {
    let mut fastest: Option<(f64, T)> = None;
    for _ in 0..RUN_ATTEMPTS {
        let before = preemptions();
        let (ns, r) = settled(&mut timed);
        if preemptions() == before {
            return (ns, r, false);
        }
        if fastest.as_ref().is_none_or(|f| ns < f.0) {
            fastest = Some((ns, r));
        }
    }
    let (ns, r) = fastest.expect("RUN_ATTEMPTS is at least 1");
    (ns, r, true)
}

/// `--after-syscall ROUNDS` (module docs): `vm`'s run (the helper-calls program) timed
/// ROUNDS times right after a `getrusage` and ROUNDS times right after its previous run,
/// alternated; prints each kind's median and how many of its runs took less than 1.1 times
/// the fastest run of all.
pub fn after_syscall(args: &[String], vm: &EbpfVm) {
    let rounds: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .expect("--after-syscall ROUNDS: ROUNDS is a count");
    let mut m = [0u8; 64];
    let (mut after_call, mut after_run) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        std::hint::black_box(preemptions());
        after_call.push(elapsed_ns(|| vm.execute_jit(&mut m).unwrap()).0);
        after_run.push(elapsed_ns(|| vm.execute_jit(&mut m).unwrap()).0);
    }
    let fastest = after_call
        .iter()
        .chain(&after_run)
        .copied()
        .fold(f64::INFINITY, f64::min);
    for (kind, times) in [
        ("after getrusage", &after_call),
        ("after a run", &after_run),
    ] {
        let fast = times.iter().filter(|&&t| t < 1.1 * fastest).count();
        println!(
            "{kind:<16} median {:.1} µs, {fast} of {rounds} within 1.1× the fastest ({:.1} µs)",
            super::median(times) / 1e3,
            fastest / 1e3
        );
    }
}
