//! Differential tests: random programs (see `common/gen.rs`) give identical output and
//! identical errors, with identical tracebacks (every frame's function, line, locals and
//! stack), in the interpreter, the micro-op interpreter and the JIT. The default
//! run checks a few hundred programs; `CPJIT_DIFF_PROGRAMS=10000 cargo test --release -p
//! cpjit-vm --test integration -- --ignored differential` runs the full suite.

use crate::common;

use common::{eager, gen, render, run_traced};
use cpjit_vm::{Mode, Stats, Vm};

/// Checks the programs of `seeds`; returns the JIT's statistics summed over them.
fn check_range(seeds: std::ops::Range<u64>) -> Stats {
    let mut total = Stats::default();
    for seed in seeds {
        let program = gen::program(seed);
        let reference = run_traced(&program, eager(Mode::Interp));
        let out = run_traced(&program, eager(Mode::Uops));
        assert!(
            out == reference,
            "seed {seed}: uops differs from the interpreter\n--- program ---\n{program}\n--- interp ---\n{reference}\n--- uops ---\n{out}"
        );
        let vm = Vm::new(cpjit_vm::parse(&program).unwrap(), eager(Mode::Jit)).unwrap();
        let result = vm.run();
        let out = render(&vm, result);
        assert!(
            out == reference,
            "seed {seed}: jit differs from the interpreter\n--- program ---\n{program}\n--- interp ---\n{reference}\n--- jit ---\n{out}"
        );
        let s = vm.stats();
        total.traces += s.traces;
        total.side_traces += s.side_traces;
        total.entry_traces += s.entry_traces;
        total.side_exits += s.side_exits;
        total.invalidations += s.invalidations;
        total.direct_calls += s.direct_calls;
        total.finished_calls += s.finished_calls;
        total.inlined_calls += s.inlined_calls;
        total.merged_branches += s.merged_branches;
    }
    total
}

/// The programs must exercise what they are meant to: traces, side traces from failing
/// guards, entry traces, invalidation, calls from compiled code into compiled code, some
/// of which leave the callee's code (a failing guard, an error), calls inlined into
/// traces, and side traces merged into their loops.
fn assert_coverage(s: &Stats, programs: u64) {
    assert!(s.direct_calls > 0 && s.finished_calls > 0, "{s:?}");
    assert!(s.merged_branches > 0, "{s:?}");
    assert!(s.inlined_calls > 0, "{s:?}");
    assert!(s.traces >= programs, "too few traces: {s:?}");
    assert!(
        s.side_traces > 0 && s.side_exits > 0 && s.entry_traces > 0,
        "{s:?}"
    );
    assert!(s.invalidations > 0, "{s:?}");
}

#[test]
fn random_programs_agree_in_all_modes() {
    assert_coverage(&check_range(0..300), 300);
}

#[test]
#[ignore = "the full suite (10,000 programs); run with --ignored"]
fn random_programs_agree_in_all_modes_full() {
    let count = std::env::var("CPJIT_DIFF_PROGRAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    assert_coverage(&check_range(1_000_000..1_000_000 + count), count);
}
