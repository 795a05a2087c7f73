//! `x * c` for a constant int c is one micro-op, `MUL_INT_CONST` (vm/src/trace/multiply.rs),
//! whose stencils take c as an immediate: on boxed and scaled registers it leaves the trace
//! exactly where the product leaves the tagged 48-bit range, on wide ones (a run with a
//! square) where it leaves 64 bits, and the interpreter's big ints go on from the constant's
//! bytecode; every mode agrees with the product computed here.

use crate::common;

use common::{assert_every_mode, record};
use cpjit_vm::ops::op;

/// Tagged ints' limits.
const MAX: i64 = (1 << 47) - 1;
const MIN: i64 = -(1 << 47);

/// `f(a) = a * c`, compiled on small ints from a loop (where it is inlined) and called once
/// more from outside it with `a` (its own trace), then printed.
fn times_constant(a: i64, c: i64) -> String {
    format!(
        "func f(a)
  load a; const {c}; mul; return
end

func main()
  locals i s
  const 0; store i; const 0; store s
loop:
  load i; const 30; lt; jump_if_false done
  load s; load i; call f; add; store s
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const {a}; call f; print
  const none; return
end
"
    )
}

#[test]
fn a_product_by_a_constant_crosses_the_tagged_range_exactly_in_every_mode() {
    let cases: [(i64, i64); 10] = [
        (MAX, 1),
        (MAX, 0),
        (MIN, 1),
        (MAX / 3, 3),
        (MAX / 3 + 1, 3),
        (MIN / 3, 3),
        (MIN / 3 - 1, 3),
        (-(1 << 16), 1 << 20),
        (MAX / 1000, 1000),
        (MAX, i32::MAX as i64),
    ];
    for (a, c) in cases {
        let text = times_constant(a, c);
        let sum: i128 = (0..30).map(|i| i * i128::from(c)).sum();
        let want = format!("{sum}\n{}\n", i128::from(a) * i128::from(c));
        assert_every_mode(&text, Ok(&want), &format!("{a} * {c}"));
        let ops = record(&text).0.ops();
        assert!(ops.contains(&op::MUL_INT_CONST), "{a} * {c}: {ops:?}");
        assert!(!ops.contains(&op::MUL_INT), "{a} * {c}: {ops:?}");
    }
}

/// `s += (y * y) % 1000 + x * c` for x = 1, 2, 4, ... (`n` doublings), y = 3: a run with a
/// square (wide registers) whose `x * c` is recorded small, then passes 2**47 in its
/// register and leaves 64 bits where x * c reaches 2**63 (x itself a tagged int still).
fn doubling(n: i64, c: i64) -> String {
    format!(
        "func main()
  locals x y s i
  const 3; store y; const 0; store s; const 1; store x; const 0; store i
loop:
  load i; const {n}; lt; jump_if_false done
  load s; load y; load y; mul; const 1000; mod; load x; const {c}; mul; add; add; store s
  load x; load x; add; store x
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const none; return
end
"
    )
}

#[test]
fn a_wide_product_by_a_constant_leaves_64_bits_exactly_in_every_mode() {
    // With c = 2**31 - 1, x * c passes 2**47 at x = 2**16 and 2**63 at x = 2**32; x leaves
    // the tagged range itself at 2**47.
    let c = i64::from(i32::MAX);
    for n in [20, 40, 60] {
        let text = doubling(n, c);
        let sum: i128 = (0..n).map(|i| 9 + (1i128 << i) * i128::from(c)).sum();
        let want = format!("{sum}\n");
        assert_every_mode(&text, Ok(&want), &format!("{n} doublings"));
        let (recorder, out) = record(&text);
        assert_eq!(out, want);
        assert!(recorder.ops().contains(&op::MUL_INT_CONST), "{n} doublings");
    }
}
