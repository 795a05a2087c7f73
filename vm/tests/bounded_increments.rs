//! Increments proved in range (vm/src/trace/bounded.rs): a loop counter guarded on the side
//! its step moves it away from is incremented without an overflow check
//! (`INCREMENT_LOCAL_INT_BOUNDED`), at the edges of the tagged range too, where a step the
//! guard does not bound keeps its check and leaves the tagged range as Python's ints do; in
//! every mode, against results computed here.

use crate::common;

use common::{agree_with, eager, record};
use cpjit_vm::ops::op;

/// The tagged range's largest int (48 bits).
const MAX: i64 = (1 << 47) - 1;

/// What [`common::counting_loop`]'s program prints (the number of steps), with Python's
/// unbounded ints.
fn counted(start: i64, cmp: &str, limit: i64, step: i64) -> String {
    let (mut i, mut n) = (start as i128, 0u64);
    let holds = |i: i128| match cmp {
        "lt" => i < limit as i128,
        "le" => i <= limit as i128,
        "gt" => i > limit as i128,
        "ge" => i >= limit as i128,
        _ => i != limit as i128,
    };
    while holds(i) {
        i += step as i128;
        n += 1;
    }
    format!("{n}\n")
}

/// Whether the traces `text` compiles increment without an overflow check.
fn bounded(text: &str) -> bool {
    let (recorder, _) = record(text);
    recorder.ops().contains(&op::INCREMENT_LOCAL_INT_BOUNDED)
}

/// Runs each case `(start, cmp, limit, step)` of [`common::counting_loop`] in every mode
/// against Python's count, and checks that its step is bounded, or keeps its check, as
/// `want_bounded` says.
fn check(cases: &[(i64, &str, i64, i64)], want_bounded: bool) {
    for &(start, cmp, limit, step) in cases {
        let what = format!("{start} {cmp} {limit} {step}");
        let text = common::counting_loop(start, cmp, limit, step);
        assert_eq!(bounded(&text), want_bounded, "{what}: bounded step");
        let (out, _) = agree_with(&text, eager, |_| {});
        assert_eq!(out, counted(start, cmp, limit, step), "{what}");
    }
}

#[test]
fn guarded_counters_step_without_an_overflow_check_up_to_the_range_edges() {
    let cases = [
        (0, "lt", 300, 1),
        (MAX - 200, "lt", MAX, 1),
        (MAX - 200, "le", MAX - 1, 1),
        (400, "ge", 0, -1),
        (-MAX + 150, "gt", -MAX, -1),
        (1000, "gt", 3, -7),
    ];
    check(&cases, true);
}

#[test]
fn a_step_the_guard_does_not_bound_keeps_its_check_and_leaves_the_range() {
    // `i < MAX` does not keep `i + 2` in range: the last step makes a big int (MAX + 1);
    // `i != k` bounds nothing. (Unchecked, the first would wrap around and count on for
    // 2**46 steps: trace::bounded's unit tests catch that at once.)
    check(&[(MAX - 201, "lt", MAX, 2), (0, "ne", 300, 1)], false);
}
