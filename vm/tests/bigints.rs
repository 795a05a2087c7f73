//! Ints beyond the tagged 48-bit range, in every mode: a compiled loop takes a value out of
//! the range with one op and back with its inverse, printing what each int operation makes
//! of it on the way (`%`, unary `-`, compares, `float`, `/`, `int`, mixed arithmetic). The
//! expected output is Python's, computed here on i128 (exact at these sizes; the floats
//! stay below 2**53, where converting and dividing round once, as Python does). The typed
//! op of the trace leaves where its result leaves the range, the interpreter's generic op
//! makes the big int, and traces recorded on a big int run the generic op (its slow path).

use crate::common;

use common::{agree_with, eager, MODES};
use cpjit_vm::value::format_float;
use cpjit_vm::Mode;

/// The largest tagged int.
const MAX: i128 = (1 << 47) - 1;

/// `prelude`, then `main`: x = `x0`, then `body` (lines) for i from `from` below `to`,
/// then `after` (lines).
fn counted(prelude: &str, x0: &str, (from, to): (i64, i64), body: &str, after: &str) -> String {
    format!(
        "{prelude}func main()
  locals i x
  const {x0}; store x
  const {from}; store i
loop:
  load i; const {to}; lt; jump_if_false done
{body}
  load i; const 1; add; store i
  jump loop
done:
{after}
  const none; return
end
"
    )
}

/// A loop of `2 * steps` rounds from `start`: `forward` on x for `steps` rounds, then
/// `backward`; each round prints x and what the other ops make of it.
fn program(start: i64, forward: &str, backward: &str, steps: u32) -> String {
    let body = format!(
        "  load i; const {steps}; lt; jump_if_false back
  load x; {forward}; store x
  jump show
back:
  load x; {backward}; store x
show:
  load x; load x; const 1000003; mod; load x; neg; load x; const {MAX}; gt
  load x; const 1.0; eq; load x; float; load x; const 3; div
  load x; float; int; load x; const 0.5; add; load x; const -7; floordiv; print 10"
    );
    counted("", &start.to_string(), (0, 2 * i64::from(steps)), &body, "")
}

fn float(f: f64) -> String {
    let mut s = String::new();
    format_float(&mut s, f);
    s
}

/// Python's `x // d`.
fn floor_div(x: i128, d: i128) -> i128 {
    let q = x / d;
    if x % d != 0 && ((x < 0) != (d < 0)) {
        q - 1
    } else {
        q
    }
}

/// What [`program`] prints, Python's way, for the sequence of x `xs`.
fn expected(xs: &[i128]) -> String {
    let truth = |b: bool| if b { "True" } else { "False" };
    xs.iter()
        .map(|&x| {
            let f = x as f64; // exact: |x| < 2**53
            format!(
                "{x} {} {} {} {} {} {} {x} {} {}\n",
                x.rem_euclid(1_000_003),
                -x,
                truth(x > MAX),
                truth(x == 1),
                float(f),
                float(f / 3.0),
                float(f + 0.5),
                floor_div(x, -7),
            )
        })
        .collect()
}

/// The values x takes: `forward` `steps` times from `start`, then `backward` as often.
fn values(
    start: i128,
    forward: fn(i128) -> i128,
    backward: fn(i128) -> i128,
    steps: u32,
) -> Vec<i128> {
    let mut x = start;
    (0..2 * steps)
        .map(|i| {
            x = if i < steps { forward(x) } else { backward(x) };
            x
        })
        .collect()
}

/// One op and its inverse: the op's text, the model of each, the start and the rounds.
type Case = (
    &'static str,
    &'static str,
    fn(i128) -> i128,
    fn(i128) -> i128,
    i64,
    u32,
);

#[test]
fn every_int_op_crosses_the_tagged_range_both_ways_in_every_mode() {
    let cases: [Case; 5] = [
        // + and -: up past the largest tagged int, then back (and the negative side).
        (
            "const 17592186044416; add",
            "const 17592186044416; sub",
            |x| x + (1 << 44),
            |x| x - (1 << 44),
            (MAX - 100) as i64 - 5 * (1 << 44),
            12,
        ),
        (
            "const 17592186044416; sub",
            "const 17592186044416; add",
            |x| x - (1 << 44),
            |x| x + (1 << 44),
            100 - (MAX as i64) + 5 * (1 << 44),
            12,
        ),
        // * and //: 7**18 is past 2**47 and below 2**53; back by exact floor division.
        (
            "const 7; mul",
            "const 7; floordiv",
            |x| x * 7,
            |x| floor_div(x, 7),
            1,
            18,
        ),
        (
            "const -7; mul",
            "const -7; floordiv",
            |x| x * -7,
            |x| floor_div(x, -7),
            -1,
            18,
        ),
        // unary - of the smallest tagged int is 2**47, a big int; a mixed op keeps the
        // floor division exact on the way back.
        (
            "neg; const 3; mul; const 1; add",
            "const 3; floordiv; neg",
            |x| -x * 3 + 1,
            |x| -floor_div(x, 3),
            -(1 << 20),
            19,
        ),
    ];
    for (forward, backward, f, b, start, steps) in cases {
        let xs = values(start.into(), f, b, steps);
        assert!(
            xs.iter().any(|&x| !(-MAX - 1..=MAX).contains(&x)),
            "{forward}: stays tagged"
        );
        assert!(
            xs.iter().all(|&x| x.abs() < 1 << 53),
            "{forward}: floats inexact"
        );
        let text = program(start, forward, backward, steps);
        let (out, stats) = agree_with(&text, eager, |_| {});
        assert_eq!(out, expected(&xs), "{forward} / {backward}");
        assert!(
            stats.traces >= 1 && stats.side_exits >= 1,
            "{forward}: {stats:?}"
        );
    }
}

#[test]
fn a_loop_whose_value_stays_big_runs_compiled_in_the_generic_op() {
    // s leaves the range at once and stays out: after the typed add has left, the loop
    // takes a side trace whose generic add makes the big ints (no return to the VM each
    // round), and collections keep the heap small. (Without pinned locals: a pinned sum is
    // held wide, and stays in its register, tests/wide.rs.)
    let text = counted(
        "",
        "140737488355000",
        (0, 300_000),
        "  load x; load i; add; store x",
        "  load x; print",
    );
    let want: i128 = 140_737_488_355_000 + (0..300_000i128).sum::<i128>();
    for mode in MODES {
        let config = cpjit_vm::Config {
            pin_locals: false,
            ..eager(mode)
        };
        let vm = cpjit_vm::Vm::new(cpjit_vm::parse(&text).unwrap(), config).unwrap();
        vm.run().unwrap();
        assert_eq!(vm.output(), format!("{want}\n"), "{mode:?}");
        let (live, collections) = vm.bigint_stats();
        assert!(
            collections >= 1 && live < 1 << 17,
            "{mode:?}: {live} live, {collections} collections"
        );
        if mode == Mode::Jit {
            let s = vm.stats();
            assert!(s.side_traces >= 1 && s.executor_runs < 1000, "{s:?}");
        }
    }
}

#[test]
fn an_inlined_call_whose_product_stays_big_is_called_instead() {
    // f(x) = x * x % 1000 inlined in the loop: from x = 11,863,284 on x * x is a big int
    // (MUL_INT leaves; no recording shows the callee's types), so the side trace started
    // where its parent started calls f, whose own side trace records the big product and
    // keeps the generic multiply: a few exits, not one a round.
    let text = counted(
        "func f(x)\n  load x; load x; mul; const 1000; mod; return\nend\n\n",
        "0",
        (11_863_000, 11_873_000),
        "  load x; load i; call f; add; store x",
        "  load x; print",
    );
    let want: i128 = (11_863_000..11_873_000i128).map(|x| x * x % 1000).sum();
    let (out, stats) = agree_with(&text, eager, |_| {});
    assert_eq!(out, format!("{want}\n"));
    assert!(
        stats.inlined_calls >= 1 && stats.side_exits < 200,
        "{stats:?}"
    );
}

#[test]
fn an_int_past_the_vms_limit_raises_at_the_same_place_in_every_mode() {
    // x = x * x from 3: 3**(2**k) has more than 2**16 bits from k = 16 on.
    let text = counted("", "3", (0, 40), "  load x; load x; mul; store x", "");
    let (out, _) = agree_with(&text, eager, |_| {});
    assert!(
        out.starts_with(
            "error: line 7:19 in main: OverflowError: int result of more than 65536 bits"
        ),
        "{out}"
    );
    assert!(out.contains("(locals [15, "), "{out}");
}
