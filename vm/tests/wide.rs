//! Sums held wide: a loop's accumulator that the body only adds into (`s = s + e`) is pinned
//! as a raw 64-bit int (vm/templates/cached/wide.h), so that it leaves the tagged 48-bit
//! range without leaving the trace. Checked at the edges: past ±2**47 inside the body, past
//! ±2**63 (the add's 64-bit overflow leaves, and the interpreter's big ints go on), and with
//! exits that write a wide value beyond 48 bits back as a big int many times over (its
//! collections included), every mode agreeing with Python's result computed here.

use crate::common;

use common::{agree_with, eager, record};
use cpjit_vm::pinning::Held;

/// `s = s0; for i in range(n): s += i * k` (with `t += 1` every seventh round when `branch`,
/// a path the trace leaves by), then prints s (and t). s0 and every `i * k` are tagged ints.
fn sum(s0: i128, k: i64, n: i64, branch: bool) -> String {
    let (extra, show) = if branch {
        (
            "  load i; const 7; mod; const 0; eq; jump_if_false skip
  load t; const 1; add; store t
skip:",
            "  load t; print",
        )
    } else {
        ("", "")
    };
    format!(
        "func main()
  locals i s t k
  const {s0}; store s
  const 0; store t
  const {k}; store k
  const 0; store i
loop:
  load i; const {n}; lt; jump_if_false done
  load s; load i; load k; mul; add; store s
{extra}
  load i; const 1; add; store i
  jump loop
done:
  load s; print
{show}
  const none; return
end
"
    )
}

/// The start and step of a [`sum`] of `n` rounds that ends exactly at `end` (and |s0| below
/// n * n: a tagged int).
fn ending_at(end: i128, n: i64) -> (i128, i64, i64) {
    let rounds = i128::from(n) * i128::from(n - 1) / 2;
    let k = end / rounds;
    (end - k * rounds, k as i64, n)
}

/// What [`sum`] prints, Python's way.
fn expected(s0: i128, k: i64, n: i64, branch: bool) -> String {
    let s = s0 + (0..i128::from(n)).map(|i| i * i128::from(k)).sum::<i128>();
    let t = (0..n).filter(|i| i % 7 == 0).count();
    if branch {
        format!("{s}\n{t}\n")
    } else {
        format!("{s}\n")
    }
}

#[test]
fn a_sum_leaving_the_tagged_range_in_the_body_is_exact_in_every_mode() {
    let cases: [(i128, i64, i64); 6] = [
        // Past 2**47 and -2**47 by small steps, from just inside.
        ((1 << 47) - 5_000, 1, 3_000),
        (-(1 << 47) + 5_000, -1, 3_000),
        // Past 2**63 and -2**63 (the wide add's own overflow), each i * k below 2**47.
        (0, 400_000_000, 300_000),
        (0, -400_000_000, 300_000),
        // Exactly to the edge: 2**63 - 1 is still wide; one more is a big int.
        ending_at(i128::from(i64::MAX), 1 << 18),
        ending_at(i128::from(i64::MAX) + 1, 1 << 18),
    ];
    for (s0, k, n) in cases {
        let text = sum(s0, k, n, false);
        let (out, stats) = agree_with(&text, eager, |_| {});
        assert_eq!(out, expected(s0, k, n, false), "s0 {s0}, k {k}, n {n}");
        assert!(stats.traces >= 1, "s0 {s0}: no trace: {stats:?}");
    }
}

/// The sum is held wide for its 64 bits; the counter, used as an operand (`i * k`) and
/// bounded by `i < n`, wide too (vm/src/pinning/wide.rs).
#[test]
fn a_loop_pins_its_sum_and_its_bounded_counter_wide() {
    let (recorder, out) = record(&sum((1 << 47) - 5_000, 1, 3_000, false));
    assert_eq!(out, expected((1 << 47) - 5_000, 1, 3_000, false));
    let lowerings = recorder.lowerings.borrow();
    let (_, lowering) = lowerings
        .iter()
        .find(|(_, l)| !l.pinned.is_empty())
        .expect("the loop pins its locals");
    const S: u64 = 1;
    for (&local, &held) in lowering.pinned.iter().zip(&lowering.pinned_held) {
        assert_eq!(held, Held::Wide, "local {local}");
    }
    assert!(lowering.pinned.contains(&S), "the sum is pinned");
}

#[test]
fn exits_write_a_wide_sum_back_as_a_big_int_as_often_as_they_are_taken() {
    // Every seventh round leaves the body (a branch the trace did not record) with s beyond
    // 48 bits in its register: the exit boxes it into a big int, and the loop goes on from
    // there; thousands of such rounds make the big ints collected meanwhile.
    for (s0, k, n) in [((1 << 47) - 2_000, 1, 40_000), (-(1 << 47), -3, 40_000)] {
        let text = sum(s0, k, n, true);
        let (out, stats) = agree_with(&text, eager, |_| {});
        assert_eq!(out, expected(s0, k, n, true), "s0 {s0}, k {k}");
        assert!(stats.side_exits >= 1, "s0 {s0}: {stats:?}");
    }
}
