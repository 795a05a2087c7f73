//! `float(i)` of a local the trace proved an int: one `LOAD_INT_FLOAT` (vm/src/trace/convert.rs)
//! with no helper call and no exit, so a loop converting its counter keeps it pinned (scaled)
//! and the float in an FP register. Checked where the conversion could go wrong: negative
//! ints, the edges of the tagged 48-bit range (a counter crossing into big ints, which the
//! trace leaves for the generic op), big ints beyond 2**53 (rounded as Python rounds), and a
//! branch in the loop that grows side traces inheriting the pinned counter; every mode agrees.

use crate::common;

use common::{agree_with, eager, example, record, Recorder};
use cpjit_vm::ops::op;
use cpjit_vm::Mode;

/// The VM code pushing int `v`: a constant within the tagged 48 bits, else made at run time
/// (the parser takes no constant beyond them) as `a * 2**24 + b`, a big int.
fn int_expr(v: i128) -> String {
    if (-(1i128 << 47)..(1i128 << 47)).contains(&v) {
        return format!("const {v}");
    }
    let (a, b) = (v.div_euclid(1 << 24), v.rem_euclid(1 << 24));
    format!("const {a}; const 16777216; mul; const {b}; add")
}

/// `for i in range(start, end): x = float(i); s = s + x` (and, every third round when
/// `branch`, `t = t + x * 0.5`), then prints s, x and t.
fn converting_loop(start: i128, end: i128, branch: bool) -> String {
    let extra = if branch {
        "  load i; const 3; mod; const 0; eq; jump_if_false skip
  load t; load x; const 0.5; mul; add; store t
skip:"
    } else {
        ""
    };
    let (start, end) = (int_expr(start), int_expr(end));
    format!(
        "func main()
  locals i x s t
  {start}; store i
  const 0.0; store s
  const 0.0; store x
  const 0.0; store t
loop:
  load i; {end}; lt; jump_if_false done
  load i; float; store x
  load s; load x; add; store s
{extra}
  load i; const 1; add; store i
  jump loop
done:
  load s; print; load x; print; load t; print
  const none; return
end
"
    )
}

#[test]
fn integrates_loop_converts_its_pinned_counter_without_the_generic_op() {
    let recorder = Recorder::new();
    let (out, stats) = recorder.run(&example("integrate", "vm"), eager(Mode::Jit));
    assert_eq!(out, example("integrate", "expected"));
    let ops = recorder.ops();
    assert!(ops.contains(&op::LOAD_INT_FLOAT), "{ops:?}");
    assert!(!ops.contains(&op::FLOAT), "{ops:?}");
    assert!(stats.pinned_loops >= 1, "{stats:?}");
}

#[test]
fn conversions_of_negative_and_small_ints_agree_in_every_mode() {
    let (out, stats) = agree_with(&converting_loop(-40, 40, true), eager, |_| {});
    // s = sum(-40..40) = -40, x = 39.0, t = 0.5 * (every third i from -39 to 39) = 0.0.
    assert_eq!(out, "-40.0\n39.0\n0.0\n");
    assert!(stats.pinned_loops >= 1, "{stats:?}");
    assert!(stats.side_traces >= 1, "{stats:?}");
}

#[test]
fn a_counter_leaving_the_tagged_range_converts_as_a_big_int() {
    // 2**47 - 20 .. 2**47 + 20: the increment past 2**47 - 1 leaves the trace, and the
    // interpreter's (and then the generic op's) big ints convert exactly.
    let top = (1i128 << 47) - 1;
    let (out, _) = agree_with(&converting_loop(top - 19, top + 21, false), eager, |_| {});
    let x = top + 20;
    assert!(out.contains(&format!("\n{x}.0\n")), "{out}");
    // Negative: -2**47 is the smallest tagged int.
    let low = -(1i128 << 47);
    let (out, _) = agree_with(&converting_loop(low - 10, low + 30, false), eager, |_| {});
    assert!(out.contains(&format!("\n{}.0\n", low + 29)), "{out}");
}

#[test]
fn big_ints_past_two_to_the_53_round_as_python_does() {
    // float(2**53 + 1) is 2**53 (ties to even), float(2**53 + 3) is 2**53 + 4.
    let two53 = 1i128 << 53;
    let (out, _) = agree_with(&converting_loop(two53 + 1, two53 + 4, false), eager, |_| {});
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "9007199254740996.0", "{out}");
    let text = format!(
        "func main()\n  {}; float; print\n  {}; float; print\n  const none; return\nend\n",
        int_expr(two53 + 1),
        int_expr(two53 + 3)
    );
    let (out, _) = agree_with(&text, eager, |_| {});
    assert_eq!(out, "9007199254740992.0\n9007199254740996.0\n");
}

#[test]
fn a_fused_conversion_keeps_the_counter_pinned_in_the_recorded_body() {
    let (recorder, out) = record(&converting_loop(0, 200, true));
    assert_eq!(out, "19900.0\n199.0\n3316.5\n");
    let lowerings = recorder.lowerings.borrow();
    let pinned = lowerings
        .iter()
        .any(|(t, l)| !l.pinned.is_empty() && t.uops.iter().any(|u| u.op == op::LOAD_INT_FLOAT));
    assert!(pinned, "no pinned loop converts its counter");
}
