//! Wide stack values: a run of int arithmetic whose products leave the tagged 48 bits
//! (`s += (x * x + c * x) % d`) keeps its registers as raw 64-bit ints
//! (vm/templates/cached/wide_stack.h), overflow-checked at 64 bits. Checked at the edges:
//! products crossing ±2**47 inside the run, crossing ±2**63 (the wide multiply's own overflow
//! leaves, and the interpreter's big ints go on), negative products and floor divisions,
//! exits that box wide registers into big ints thousands of times (collections meanwhile),
//! and a sum that starts as a big int; every mode agreeing with Python's result computed
//! here.

use crate::common;

use common::{agree_with, eager, record};
use cpjit_vm::cached::Kind;

/// `s = s0; for x in range(start, start + n): s += (c * x + sign * x * x) % m + (sign * x *
/// x) // d` (`m, d` = `by`, [`BY`] but where a test varies them), then prints s (s0 a multiple of 2**32, made by a product: a big int may be one). The products are the run's wide values: `c * x` is live in a
/// register when `x * x` overflows.
fn program(s0: i128, start: i64, n: i64, c: i64, negative: bool) -> String {
    program_by(s0, start, n, c, negative, BY)
}

/// The divisors of [`program`]: `% 1000` and `// 7`.
const BY: (i64, i64) = (1000, 7);

fn program_by(s0: i128, start: i64, n: i64, c: i64, negative: bool, by: (i64, i64)) -> String {
    let square = if negative {
        "const 0; load x; load x; mul; sub"
    } else {
        "load x; load x; mul"
    };
    format!(
        "func main()
  locals x s
  const {s0_high}; const {s0_low}; mul; store s
  const {start}; store x
loop:
  load x; const {end}; lt; jump_if_false done
  load s; load x; const {c}; mul; {square}; add; const {m}; mod; add; store s
  load s; {square}; const {d}; floordiv; add; store s
  load x; const 1; add; store x
  jump loop
done:
  load s; print
  const none; return
end
",
        end = start + n,
        m = by.0,
        d = by.1,
        // s0 as a product of two tagged ints: a constant is one.
        s0_high = s0 >> 32,
        s0_low = 1i64 << 32,
    )
}

/// What [`program`] prints, Python's way (floor division and a modulo of the divisor's sign).
fn expected(s0: i128, start: i64, n: i64, c: i64, negative: bool) -> String {
    expected_by(s0, start, n, c, negative, BY)
}

fn expected_by(s0: i128, start: i64, n: i64, c: i64, negative: bool, by: (i64, i64)) -> String {
    let (m, d) = (i128::from(by.0), i128::from(by.1));
    let mut s = s0;
    for x in i128::from(start)..i128::from(start + n) {
        let square = if negative { -x * x } else { x * x };
        s += (i128::from(c) * x + square).rem_euclid(m);
        s += square.div_euclid(d);
    }
    format!("{s}\n")
}

/// sqrt(2**47) and sqrt(2**63), rounded down: where `x * x` leaves 48 and 64 bits.
const PAST_48: i64 = 11_863_283;
const PAST_64: i64 = 3_037_000_499;

#[test]
fn products_leaving_48_and_64_bits_are_exact_in_every_mode() {
    let cases: [(i128, i64, i64, i64, bool); 7] = [
        // x * x crosses 2**47 (and -2**47) inside the run.
        (0, PAST_48 - 1_500, 3_000, 3, false),
        (0, PAST_48 - 1_500, 3_000, 3, true),
        (0, -PAST_48 - 1_500, 3_000, 3, false),
        // x * x crosses 2**63 and -2**63: the 64-bit multiply overflows and leaves, with
        // c * x (beyond 48 bits) live below it; the sum leaves 64 bits as well.
        (0, PAST_64 - 1_500, 3_000, 1 << 20, false),
        (0, PAST_64 - 1_500, 3_000, 1 << 20, true),
        (0, -PAST_64 - 1_500, 3_000, -(1 << 20), false),
        // A sum that starts as a big int: no accumulation into a wide register.
        (1 << 70, PAST_48 - 500, 1_000, 3, false),
    ];
    for (s0, start, n, c, negative) in cases {
        let text = program(s0, start, n, c, negative);
        let (out, stats) = agree_with(&text, eager, |_| {});
        let want = expected(s0, start, n, c, negative);
        assert_eq!(
            out, want,
            "s0 {s0}, start {start}, c {c}, negative {negative}"
        );
        assert!(stats.traces >= 1, "start {start}: no trace: {stats:?}");
    }
}

#[test]
fn divisions_by_constants_of_every_shift_are_exact_in_every_mode() {
    // The wide divisions' shift is floor(log2 d), 1 to 15: the smallest and largest divisors
    // of each end, with squares near 2**47 and 2**63 of both signs, whose quotients by
    // any of them leave 48 bits.
    for by in [(3, 65_535), (65_533, 3), (10, 12_345), (32_769, 6)] {
        for (start, c, negative) in [
            (PAST_48 - 200, 3, false),
            (-PAST_48 - 200, 3, true),
            (PAST_64 - 300, 1, false),
            (-PAST_64 - 300, 1, true),
        ] {
            let text = program_by(0, start, 400, c, negative, by);
            let (out, _) = agree_with(&text, eager, |_| {});
            assert_eq!(
                out,
                expected_by(0, start, 400, c, negative, by),
                "by {by:?}, start {start}, negative {negative}"
            );
        }
    }
}

#[test]
fn exits_box_wide_registers_into_big_ints_as_often_as_they_are_taken() {
    // Every round past 2**63 leaves from the multiply with c * x wide in a register below it
    // (a big int once boxed): 20,000 of them, enough big ints to be collected many times.
    let (s0, start, n, c) = (0, PAST_64 + 10, 20_000, 1 << 30);
    let text = program(s0, start, n, c, false);
    let (out, stats) = agree_with(&text, eager, |_| {});
    assert_eq!(out, expected(s0, start, n, c, false));
    assert!(stats.side_exits >= 1, "{stats:?}");
}

#[test]
fn a_square_keeps_its_run_wide_and_other_products_scaled() {
    let (recorder, out) = record(&program(0, PAST_48 - 1_500, 3_000, 3, false));
    assert_eq!(out, expected(0, PAST_48 - 1_500, 3_000, 3, false));
    let lowerings = recorder.lowerings.borrow();
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| !l.pinned.is_empty())
        .expect("the loop pins its locals");
    let wide = lowering
        .instances
        .iter()
        .filter(|i| i.exit.kind() == Kind::Wide);
    assert!(wide.count() >= 8, "{lowering:?}");
    // No wide register reaches memory inside the trace: every wide run ends in a member
    // that leaves nothing cached, and no spill or BOX is entered wide.
    for inst in &lowering.instances {
        if inst.entry.kind() == Kind::Wide {
            assert!(inst.uop.is_some(), "glue entered wide: {inst:?}\n{trace:?}");
        }
    }
    drop(lowerings);
    // `3 * n + 1` (collatz) stays scaled; `i * j % 7` (nested) goes wide only because its
    // loop holds its counter j wide (vm/src/pinning/wide.rs), whose loads have members on raw
    // registers only.
    for (example, wide) in [("collatz", false), ("nested", true)] {
        let (recorder, _) = record(&common::example(example, "vm"));
        let lowerings = recorder.lowerings.borrow();
        let all = lowerings.iter().flat_map(|(_, l)| &l.instances);
        assert_eq!(
            all.clone().any(|i| i.exit.kind() == Kind::Wide),
            wide,
            "{example}"
        );
        assert!(
            wide || all.clone().any(|i| i.exit.kind() == Kind::Scaled),
            "{example}"
        );
    }
}
