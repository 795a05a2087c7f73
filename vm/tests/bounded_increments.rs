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

/// `i` from `start` while `i CMP limit`, stepping by `step`; prints the last `i` and the
/// number of steps.
fn counting(start: i64, cmp: &str, limit: i64, step: i64) -> String {
    format!(
        "func main()
  locals i n
  const {start}; store i
  const 0; store n
loop:
  load i; const {limit}; {cmp}; jump_if_false done
  load i; const {step}; add; store i
  load n; const 1; add; store n
  jump loop
done:
  load i; load n; print 2
  const none; return
end
"
    )
}

/// What [`counting`]'s program prints, with Python's unbounded ints.
fn counted(start: i64, cmp: &str, limit: i64, step: i64) -> String {
    let (mut i, mut n) = (start as i128, 0);
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
    format!("{i} {n}\n")
}

/// Whether the traces `text` compiles increment without an overflow check.
fn bounded(text: &str) -> bool {
    let (recorder, _) = record(text);
    recorder.ops().contains(&op::INCREMENT_LOCAL_INT_BOUNDED)
}

#[test]
fn guarded_counters_step_without_an_overflow_check_up_to_the_range_edges() {
    for (start, cmp, limit, step) in [
        (0, "lt", 300, 1),
        (MAX - 200, "lt", MAX, 1),
        (MAX - 200, "le", MAX - 1, 1),
        (400, "ge", 0, -1),
        (-MAX + 150, "gt", -MAX, -1),
        (1000, "gt", 3, -7),
    ] {
        let text = counting(start, cmp, limit, step);
        let (out, _) = agree_with(&text, eager, |_| {});
        assert_eq!(
            out,
            counted(start, cmp, limit, step),
            "{start} {cmp} {limit} {step}"
        );
        assert!(
            bounded(&text),
            "{start} {cmp} {limit} {step}: the step kept its check"
        );
    }
}

#[test]
fn a_step_the_guard_does_not_bound_keeps_its_check_and_leaves_the_range() {
    // `i < MAX` does not keep `i + 2` in range: the last step makes a big int; `i != k`
    // bounds nothing.
    for (start, cmp, limit, step) in [(MAX - 201, "lt", MAX, 2), (0, "ne", 300, 1)] {
        let text = counting(start, cmp, limit, step);
        let (out, _) = agree_with(&text, eager, |_| {});
        assert_eq!(
            out,
            counted(start, cmp, limit, step),
            "{start} {cmp} {limit} {step}"
        );
        assert!(
            !bounded(&text),
            "{start} {cmp} {limit} {step}: an unbounded step lost its check"
        );
    }
}
