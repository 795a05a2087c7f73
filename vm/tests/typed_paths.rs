//! Typed fast paths the trace compiler picks from what a trace proves:
//! - `x // d` and `x % d` on an int it knows, for a constant d, become a shift and a mask
//!   (`FLOORDIV_INT_POW2`, `MOD_INT_POW2`) or multiplications (`FLOORDIV_INT_BY`,
//!   `MOD_INT_BY`; large and negative divisors `*_BY_LARGE`, `*_BY_NEGATIVE`), with Python's floor semantics
//!   for negative dividends and divisors and at the limits of the int range; 0 and -1
//!   keep the division;
//! - a loop's guards run once: the trace's first iteration is a preamble, and the loop
//!   jumps back to a copy projected from the types the preamble proved, without guards on
//!   them; a local whose type changes later fails the preamble's guard on re-entry;
//! - int add, sub and mul (on values scaled by 2**16, the overflow flag as range check) and
//!   `i = i + c` on a local proved an int (`INCREMENT_LOCAL_INT_KNOWN`, no tag check) and
//!   `s = s + e` (`ADD_TO_LOCAL_INT`, e a pure expression whose exits resume at the
//!   statement) leave the trace exactly where a result leaves the tagged 48-bit range, and
//!   the interpreter goes on with a big int: each limit and one beyond, in every mode;
//! - `xs[i]` on locals the trace has proved a list and an int (`GETITEM_LOCALS_KNOWN`, or
//!   `GETITEM_INT_LOCALS_KNOWN` for an item added as an int) checks only the bounds; `xs[i] = e` for a pure e stores e's value without pushing `xs`
//!   and `i` (`SETITEM_LOCALS_KNOWN`), every exit resuming at the statement (`xs[i + 1] = e`
//!   and `xs[i + 1] = xs[i]`: tests/list_items.rs);
//! - `sqrt` of a float is one micro-op (`SQRT_FLOAT`) that leaves on a negative argument;
//! - `load b; mul` (add, sub) on floats reads local b in place (`MUL_FLOAT_LOCAL`), a guard
//!   of the other operand moving before the load;
//! - a side trace starts from the local types its parent proved wherever it leaves through
//!   the side trace's exit.

use crate::common;

use common::{assert_every_mode, eager, run_traced};
use cpjit_vm::jit::{Backend, CompiledTrace, TraceCompiler};
use cpjit_vm::ops::op;
use cpjit_vm::trace::Trace;
use cpjit_vm::Mode;
use std::cell::RefCell;
use std::rc::Rc;

/// Compiles with copy-and-patch and keeps every trace's micro-ops.
struct Recording {
    backend: Backend,
    ops: RefCell<Vec<u32>>,
    traces: RefCell<Vec<Trace>>,
}

impl TraceCompiler for Recording {
    fn name(&self) -> &str {
        "recording"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        self.ops
            .borrow_mut()
            .extend(trace.uops[..trace.body_len].iter().map(|u| u.op));
        self.traces.borrow_mut().push(trace.clone());
        self.backend.compile(trace)
    }
}

fn recording() -> Rc<Recording> {
    Rc::new(Recording {
        backend: Backend::host()
            .expect("host stencils are linked")
            .with_checks(true),
        ops: RefCell::new(Vec::new()),
        traces: RefCell::new(Vec::new()),
    })
}

/// Runs `text` in jit mode with a [`Recording`] compiler; its output (and error).
fn record(text: &str) -> (Rc<Recording>, String) {
    let recording = recording();
    let (out, _) = common::run_compiled(text, recording.clone(), eager(Mode::Jit));
    (recording, out)
}

/// The largest int (48-bit ints) over 20: `x * SCALE` for x in -20..20 reaches the limits.
const SCALE: i64 = 7_036_874_417_766;
const BIG: i64 = 1 << 46;

const PROGRAM: &str = "func main()
  locals i x y z w
  const 0; store i
loop:
  load i; const 40; lt; jump_if_false done
  load i; const 20; sub; store x
  load x; const 7036874417766; mul; store y
  load x; const 1; floordiv; load x; const 2; floordiv; load x; const 8; floordiv; load x; const 3; floordiv; load x; const -3; floordiv; print 5
  load x; const 1; mod; load x; const 2; mod; load x; const 16; mod; load x; const -4; mod; load x; const 7; mod; print 5
  load y; const 1024; floordiv; load y; const 70368744177664; floordiv; load y; const 1024; mod; load y; const 70368744177664; mod; print 4
  load y; const 1000; floordiv; load y; const 1000; mod; load y; const 140737488355327; floordiv; load y; const 7036874417767; mod; print 4
  load y; const -8; add; store z
  const -1; load z; sub; store w
  load z; const -1; floordiv; load z; const -1; mod; load z; const -7; floordiv; load z; const -7; mod; load z; const 32767; mod; print 5
  load w; const -1; floordiv; load w; const -7; floordiv; load w; const -7; mod; load w; const 32767; floordiv; load w; const 32769; mod; print 5
  load z; const 1000000007; floordiv; load z; const 1000000007; mod; load w; const 1000000007; floordiv; load w; const -1000000007; mod; load z; const -2; floordiv; print 5
  load z; const 140737488355327; mod; load w; const 140737488355327; floordiv; load z; const -140737488355328; floordiv; load w; const -140737488355328; mod; load w; const -2; mod; print 5
  load i; const 1; add; store i
  jump loop
done:
  const none; return
end
";

/// Python's `//` and `%` (floor division; the remainder has the divisor's sign).
fn floor_div(x: i64, d: i64) -> i64 {
    let q = x / d;
    if x % d != 0 && ((x < 0) != (d < 0)) {
        q - 1
    } else {
        q
    }
}

fn floor_mod(x: i64, d: i64) -> i64 {
    x - d * floor_div(x, d)
}

fn expected() -> String {
    let line = |v: &[i64]| {
        let words: Vec<String> = v.iter().map(i64::to_string).collect();
        words.join(" ") + "\n"
    };
    let mut out = String::new();
    for i in 0..40 {
        let x = i - 20;
        let y = x * SCALE;
        out += &line(&[1, 2, 8, 3, -3].map(|d| floor_div(x, d)));
        out += &line(&[1, 2, 16, -4, 7].map(|d| floor_mod(x, d)));
        out += &line(&[
            floor_div(y, 1024),
            floor_div(y, BIG),
            floor_mod(y, 1024),
            floor_mod(y, BIG),
        ]);
        out += &line(&[
            floor_div(y, 1000),
            floor_mod(y, 1000),
            floor_div(y, (1 << 47) - 1),
            floor_mod(y, SCALE + 1),
        ]);
        // z reaches the least tagged int and w the greatest (at x = -20).
        let (z, w) = (y - 8, -1 - (y - 8));
        out += &line(&[
            floor_div(z, -1),
            floor_mod(z, -1),
            floor_div(z, -7),
            floor_mod(z, -7),
            floor_mod(z, 32767),
        ]);
        out += &line(&[
            floor_div(w, -1),
            floor_div(w, -7),
            floor_mod(w, -7),
            floor_div(w, 32767),
            floor_mod(w, 32769),
        ]);
        out += &line(&[
            floor_div(z, 1_000_000_007),
            floor_mod(z, 1_000_000_007),
            floor_div(w, 1_000_000_007),
            floor_mod(w, -1_000_000_007),
            floor_div(z, -2),
        ]);
        out += &line(&[
            floor_mod(z, (1 << 47) - 1),
            floor_div(w, (1 << 47) - 1),
            floor_div(z, -(1 << 47)),
            floor_mod(w, -(1 << 47)),
            floor_mod(w, -2),
        ]);
    }
    out
}

#[test]
fn constant_divisions_are_shifts_masks_and_multiplications_with_floor_semantics_in_every_mode() {
    let want = expected();
    assert_every_mode(PROGRAM, Ok(&want), "the divisions");
    let (recording, out) = record(PROGRAM);
    assert_eq!(out, want);
    let ops = recording.ops.borrow();
    let count = |id: u32| ops.iter().filter(|&&o| o == id).count();
    // Per loop trace: 1, 2, 8, 2**10 and 2**46 divide and take the remainder by shifts and
    // masks; 3, 7, 1000 and 32767 by one multiplication (two for `%`); 2**15 + 1, 10**9 +
    // 7, SCALE + 1, 2**47 - 1 and the negative divisors but -1 by a multiplication and a
    // shift (`*_BY_LARGE`, `*_BY_NEGATIVE`); -1 divides.
    assert!(count(op::FLOORDIV_INT_POW2) >= 5, "{ops:?}");
    assert!(count(op::MOD_INT_POW2) >= 5, "{ops:?}");
    assert!(count(op::FLOORDIV_INT_BY) >= 4, "{ops:?}");
    assert!(count(op::MOD_INT_BY) >= 3, "{ops:?}");
    assert!(count(op::FLOORDIV_INT_BY_LARGE) >= 3, "{ops:?}");
    assert!(count(op::MOD_INT_BY_LARGE) >= 4, "{ops:?}");
    assert!(count(op::FLOORDIV_INT_BY_NEGATIVE) >= 4, "{ops:?}");
    assert!(count(op::MOD_INT_BY_NEGATIVE) >= 4, "{ops:?}");
    assert!(
        count(op::FLOORDIV_INT) >= 2 && count(op::MOD_INT) >= 1,
        "{ops:?}"
    );
}

fn is_guard(id: u32) -> bool {
    cpjit_vm::ops::info(id).name.starts_with("GUARD_")
}

/// Sums ints in a loop; at iteration `change` (if below 60) `x` becomes a float, so the
/// loop, compiled while `x` was an int, is re-entered with a float in it.
fn summing(change: u32) -> String {
    format!(
        "func main()
  locals i s x
  const 0; store i; const 0; store s; const 3; store x
loop:
  load i; const 60; lt; jump_if_false done
  load i; const {change}; eq; jump_if_false same
  const 0.5; store x
same:
  load s; load x; add; store s
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
fn a_loop_guards_its_locals_once_in_a_preamble_and_jumps_back_past_it() {
    let (recording, out) = record(&summing(1000));
    assert_eq!(out, "180\n");
    let traces = recording.traces.borrow();
    let looping: Vec<&Trace> = traces
        .iter()
        .filter(|t| t.uops[..t.body_len].iter().any(|u| u.op == op::JUMP_TOP))
        .collect();
    assert!(!looping.is_empty(), "no loop trace");
    for t in looping {
        let jump = t.uops[..t.body_len]
            .iter()
            .find(|u| u.op == op::JUMP_TOP)
            .unwrap();
        let start = jump.target as usize;
        assert!(start > 0, "not peeled: {t:?}");
        let (preamble, body) = (&t.uops[..start], &t.uops[start..t.body_len]);
        assert!(preamble.iter().any(|u| is_guard(u.op)), "{t:?}");
        assert!(
            !body.iter().any(|u| is_guard(u.op)),
            "guards left in the loop: {t:?}"
        );
    }
}

#[test]
fn a_local_that_changes_type_after_peeling_fails_the_preamble_guard_in_every_mode() {
    for change in [7, 20, 59] {
        let text = summing(change);
        let want = run_traced(&text, eager(Mode::Interp));
        assert_eq!(
            want,
            format!(
                "{:?}\n",
                3.0 * f64::from(change) + 0.5 * f64::from(60 - change)
            ),
            "change at {change}"
        );
        assert_every_mode(&text, Ok(&want), &format!("change at {change}"));
        let (recording, out) = record(&text);
        assert_eq!(out, want);
        // With iterations left after the change, the failing guard grows a side trace.
        if change < 50 {
            assert!(
                recording.traces.borrow().len() >= 2,
                "no trace after the change at {change}"
            );
        }
    }
}

/// `g(x) = x // 7, x % 1000`: compiled while `x` is an int, then called with a float, a bool
/// and ints near the limits. The dividend's type is unknown where the function starts, so its
/// guard comes before the fused division and leaves at the constant's bytecode, with the
/// interpreter's stack as it is there.
const CALLS: &str = "func g(x)
  load x; const 7; floordiv; load x; const 1000; mod; add; return
end

func main()
  locals i s
  const 0; store i; const 0; store s
loop:
  load i; const 40; lt; jump_if_false done
  load s; load i; const 20; sub; call g; add; store s
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const 10.5; call g; print
  const true; call g; print
  const -140737488355328; call g; print
  const 140737488355327; call g; print
  const none; return
end
";

#[test]
fn a_dividend_of_unknown_type_is_guarded_before_the_fused_division_and_exits_at_the_constant() {
    let g = |x: i64| floor_div(x, 7) + floor_mod(x, 1000);
    let ints: i64 = (-20..20).map(g).sum();
    // 10.5 // 7 + 10.5 % 1000 = 1.0 + 10.5; true is 1.
    let want = format!(
        "{ints}\n11.5\n{}\n{}\n{}\n",
        g(1),
        g(-(1 << 47)),
        g((1 << 47) - 1)
    );
    assert_every_mode(CALLS, Ok(&want), "the calls");
    let (recording, out) = record(CALLS);
    assert_eq!(out, want);
    let traces = recording.traces.borrow();
    let fused = traces
        .iter()
        .find(|t| t.uops.iter().any(|u| u.op == op::FLOORDIV_INT_BY))
        .expect("g's division is fused");
    let ops: Vec<u32> = fused.uops[..fused.body_len].iter().map(|u| u.op).collect();
    let at = ops.iter().position(|&o| o == op::FLOORDIV_INT_BY).unwrap();
    assert_eq!(ops[at - 1], op::GUARD_INT_TOS, "{ops:?}");
    assert!(ops.contains(&op::MOD_INT_BY), "{ops:?}");
}

/// [`assert_every_mode`] for a program printing one int: it prints `want`, Python's result (an int beyond the tagged
/// range is a big int: the typed op leaves the trace and the interpreter's generic op makes
/// it, and a result back in range is tagged again), or, for `None`, raises an error whose
/// message contains `error`.
fn assert_every_mode_prints_int(text: &str, want: Option<i128>, error: &str, what: &str) {
    let printed = want.map(|v| format!("{v}\n"));
    assert_every_mode(text, printed.as_deref().ok_or(error), what);
}

/// Whether jit mode compiles `text` into traces that use micro-op `id`.
fn compiles_with(text: &str, id: u32) -> bool {
    record(text).0.ops.borrow().contains(&id)
}

/// `f(a, b) = a <op> b` with `op` one of add, sub, mul: compiled on small ints (so the
/// trace's typed `ADD_INT`, `SUB_INT`, `MUL_INT` compute it, their overflow check the CPU's
/// overflow flag on the values scaled by 2**16), then called with `a` and `b`.
fn limits_program(op: &str, a: i64, b: i64) -> String {
    format!(
        "func f(a, b)
  load a; load b; {op}; return
end

func main()
  locals i s
  const 0; store i; const 0; store s
loop:
  load i; const 30; lt; jump_if_false done
  load s; load i; const 3; call f; add; store s
  load i; const 1; add; store i
  jump loop
done:
  const {a}; const {b}; call f; print
  const none; return
end
"
    )
}

#[test]
fn int_add_sub_and_mul_cross_the_tagged_range_exactly_in_every_mode() {
    const MAX: i64 = (1 << 47) - 1;
    const MIN: i64 = -(1 << 47);
    /// The op, it on i128 (exact here), its operands.
    type Case = (&'static str, fn(i128, i128) -> i128, i64, i64);
    let [add, sub, mul]: [fn(i128, i128) -> i128; 3] = [|a, b| a + b, |a, b| a - b, |a, b| a * b];
    let cases: [Case; 16] = [
        ("add", add, MAX, 0),
        ("add", add, MAX, 1),
        ("add", add, MIN, -1),
        ("add", add, MIN, MAX),
        ("add", add, MAX, MAX),
        ("sub", sub, MIN, 0),
        ("sub", sub, MIN, 1),
        ("sub", sub, MAX, -1),
        ("sub", sub, 0, MIN),
        ("sub", sub, -1, MAX),
        ("mul", mul, -(1 << 23), 1 << 24),
        ("mul", mul, 1 << 23, 1 << 24),
        ("mul", mul, MIN, 1),
        ("mul", mul, MIN, -1),
        ("mul", mul, -1, MIN),
        ("mul", mul, 11_863_283, 11_863_283),
    ];
    for (op, exact, a, b) in cases {
        let text = limits_program(op, a, b);
        let what = format!("{op} {a} {b}");
        assert_every_mode_prints_int(&text, Some(exact(a.into(), b.into())), "", &what);
        // The compiled `f` is the one that computes it.
        let typed = match op {
            "add" => op::ADD_INT,
            "sub" => op::SUB_INT,
            _ => op::MUL_INT,
        };
        assert!(compiles_with(&text, typed), "{what}: no typed op");
    }
}

/// `i = i + c` twenty times in a compiled loop, from `start`: the trace's
/// `INCREMENT_LOCAL_INT_KNOWN` (the local proved an int by the preamble, the constant passed
/// scaled by 2**16) keeps the 48-bit range exactly, up and down.
fn increments(start: i64, c: i64) -> String {
    format!(
        "func main()
  locals i n
  const {start}; store i
  const 0; store n
loop:
  load n; const 20; lt; jump_if_false done
  load i; const {c}; add; store i
  load n; const 1; add; store n
  jump loop
done:
  load i; print
  const none; return
end
"
    )
}

#[test]
fn a_local_incremented_by_a_constant_crosses_the_range_limits_exactly_in_every_mode() {
    const MAX: i64 = (1 << 47) - 1;
    const MIN: i64 = -(1 << 47);
    // The last three leave the range (or not) before the loop is compiled: the interpreters'
    // add, the loop's trace then made on what the interpreter left (a big int or not).
    for (start, c, compiled) in [
        (MAX - 60, 3, true),
        (MAX - 59, 3, true),
        (MIN + 60, -3, true),
        (MIN + 59, -3, true),
        (0, MAX, false),
        (-1, MIN, false),
        (MIN, MAX, false),
    ] {
        let text = increments(start, c);
        let i = i128::from(start) + 20 * i128::from(c);
        let what = format!("{start} + 20 x {c}");
        assert_every_mode_prints_int(&text, Some(i), "", &what);
        if compiled {
            assert!(
                compiles_with(&text, op::INCREMENT_LOCAL_INT_KNOWN),
                "{what}"
            );
        }
    }
}

/// `s = s + t` (or `s = t + s` when `swapped`) twenty times in a compiled loop, from
/// `start`, with `t` a local the loop never changes: the trace pushes `t` and adds it into
/// `s` in place (`ADD_TO_LOCAL_INT`, both proved ints by the preamble), which leaves at the
/// statement's first `load` on overflow so that the interpreter redoes it.
fn accumulates(start: i64, t: i64, swapped: bool) -> String {
    let sum = if swapped {
        "load t; load s"
    } else {
        "load s; load t"
    };
    format!(
        "func main()
  locals s t n
  const {start}; store s
  const {t}; store t
  const 0; store n
loop:
  load n; const 20; lt; jump_if_false done
  {sum}; add; store s
  load n; const 1; add; store n
  jump loop
done:
  load s; print
  const none; return
end
"
    )
}

#[test]
fn a_local_accumulating_another_crosses_the_range_limits_exactly_in_every_mode() {
    const MAX: i64 = (1 << 47) - 1;
    const MIN: i64 = -(1 << 47);
    // The last three overflow (or not) before the loop is compiled: the interpreters' add.
    for (start, t, compiled) in [
        (0, 7, true),
        (MAX - 60, 3, true),
        (MAX - 59, 3, true),
        (MIN + 60, -3, true),
        (MIN + 59, -3, true),
        (0, MAX, false),
        (-1, MIN, false),
        (MIN, MAX, false),
    ] {
        for swapped in [false, true] {
            let text = accumulates(start, t, swapped);
            let s = i128::from(start) + 20 * i128::from(t);
            let what = format!("{start} + 20 x {t} (swapped: {swapped})");
            assert_every_mode_prints_int(&text, Some(s), "", &what);
            assert_eq!(
                compiles_with(&text, op::ADD_TO_LOCAL_INT),
                compiled,
                "{what}"
            );
        }
    }
}

/// `s = s + (i * c) % 3` twenty times in a compiled loop: the expression is pure, so it is
/// projected with every exit resuming at the statement's start (its multiply's overflow
/// included, the stack cut back) and its value is added into `s` in place.
fn accumulates_an_expression(c: i64) -> String {
    format!(
        "func main()
  locals s i c
  const 5; store s
  const {c}; store c
  const 0; store i
loop:
  load i; const 20; lt; jump_if_false done
  load s; load i; load c; mul; const 3; mod; add; store s
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
fn an_accumulated_expression_leaves_at_its_statement_when_it_overflows_inside() {
    const MAX: i64 = (1 << 47) - 1;
    const MIN: i64 = -(1 << 47);
    // 1 and -7 never overflow; the others overflow in the multiply at i = 13, 16 and 8,
    // after the loop is compiled.
    for c in [1, -7, MAX / 13 + 1, MIN / 16 - 1, MAX / 8 + 1] {
        let s: i128 = 5
            + (0..20i128)
                .map(|i| (i * i128::from(c)).rem_euclid(3))
                .sum::<i128>();
        let text = accumulates_an_expression(c);
        assert_every_mode_prints_int(&text, Some(s), "", &format!("c = {c}"));
        assert!(
            compiles_with(&text, op::ADD_TO_LOCAL_INT),
            "c = {c}: no in-place add"
        );
    }
}

/// `s = s + f(i)` with `f(x) = x * c + x` inlined, twenty times in a compiled loop: inside
/// the statement every exit resumes at its start, so `f`'s argument is not pushed at all
/// (its loads read `i`), and the multiply's overflow leaves there too.
fn accumulates_a_call(c: i64) -> String {
    format!(
        "func f(x)
  load x; const {c}; mul; load x; add; return
end

func main()
  locals s i
  const 5; store s
  const 0; store i
loop:
  load i; const 20; lt; jump_if_false done
  load s; load i; call f; add; store s
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
fn an_inlined_call_accumulated_into_a_local_reads_its_argument_from_the_callers_local() {
    const MAX: i64 = (1 << 47) - 1;
    for c in [3, MAX / 13 + 1] {
        let s: i128 = 5 + (0..20i128).map(|i| i * i128::from(c) + i).sum::<i128>();
        let text = accumulates_a_call(c);
        assert_every_mode_prints_int(&text, Some(s), "", &format!("c = {c}"));
        let (recording, _) = record(&text);
        let traces = recording.traces.borrow();
        let body = traces
            .iter()
            .find_map(|t| Some(&t.uops[t.loop_body_start()?..t.body_len]))
            .expect("a peeled loop");
        let ops: Vec<u32> = body.iter().map(|u| u.op).collect();
        assert!(ops.contains(&op::ADD_TO_LOCAL_INT), "c = {c}: {body:?}");
        for shuffle in [op::NIP, op::DUP, op::COPY, op::COPY_INT] {
            assert!(
                !ops.contains(&shuffle),
                "c = {c}: an argument on the stack: {body:?}"
            );
        }
    }
}

/// `s = s + xs[i]` for i from -n to `end`: after the loop's first iteration has proved `xs` a
/// list and `i` an int, the read checks only the bounds (negative indices count from the
/// end) and that the item it adds is an int (`GETITEM_INT_LOCALS_KNOWN`); an index past the
/// end leaves the trace and the interpreter raises.
fn indexing(end: i64) -> String {
    format!(
        "func main()
  locals xs i s
  build_list 0; store xs
  load xs; const 10; append
  load xs; const 20; append
  load xs; const 40; append
  const -3; store i
  const 0; store s
loop:
  load i; const {end}; lt; jump_if_false done
  load s; load xs; load i; getitem; add; store s
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
fn a_list_item_of_locals_proved_a_list_and_an_int_checks_only_the_bounds_in_every_mode() {
    for (end, want) in [(3, Some(140)), (2, Some(100)), (4, None)] {
        let text = indexing(end);
        let what = format!("to {end}");
        assert_every_mode_prints_int(&text, want, "IndexError", &what);
        assert!(compiles_with(&text, op::GETITEM_INT_LOCALS_KNOWN), "{what}");
    }
}

/// A loop whose branch flips halfway and whose two paths meet again before the back-edge:
/// the side trace started at the flipped branch's exit knows from its first micro-op what
/// the loop trace had proved of the locals wherever it leaves there (`i` an int; `s` is
/// proved only in the peeled copy, not in the preamble, which leaves there too), so its
/// `i = i + 1` has no tag check.
const FLIPPING: &str = "func main()
  locals i s
  const 0; store i
  const 0; store s
loop:
  load i; const 40; lt; jump_if_false done
  load i; const 20; lt; jump_if_false big
  load s; const 1; add; store s
  jump next
big:
  load s; const 2; add; store s
next:
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const none; return
end
";

#[test]
fn a_side_trace_starts_from_the_local_types_its_parent_proved_at_the_exit() {
    assert_every_mode(FLIPPING, Ok("60\n"), "flipping");
    // (Side traces linked: merged into the loop, those of the body's exits are blocks of it.)
    let recording = recording();
    let unmerged = cpjit_vm::Config {
        merge_branches: false,
        ..eager(Mode::Jit)
    };
    let (out, _) = common::run_compiled(FLIPPING, recording.clone(), unmerged);
    assert_eq!(out, "60\n");
    // The side trace is the one that does not loop (it ends by leaving for the loop trace).
    let traces = recording.traces.borrow();
    let sides: Vec<Vec<u32>> = traces
        .iter()
        .map(|t| {
            t.uops[..t.body_len]
                .iter()
                .map(|u| u.op)
                .collect::<Vec<u32>>()
        })
        .filter(|ops| !ops.contains(&op::JUMP_TOP))
        .collect();
    assert!(
        !sides.is_empty(),
        "no side trace among {} traces",
        traces.len()
    );
    // i is proved at every exit: its increment skips the tag check in every side trace. The
    // loop body's exits (apart from the preamble's, which prove less) have proved s too: a
    // side trace grown from one skips both.
    let known = |ops: &Vec<u32>| {
        ops.iter()
            .filter(|&&o| cpjit_vm::ops::info(o).name == "INCREMENT_LOCAL_INT_KNOWN")
            .count()
    };
    for ops in &sides {
        let names: Vec<&str> = ops.iter().map(|&o| cpjit_vm::ops::info(o).name).collect();
        assert!(known(ops) >= 1, "i's increment: {names:?}");
    }
    assert!(sides.iter().any(|ops| known(ops) == 2), "{sides:?}");
}

/// `x % 2**k == 0` (`!=`) before a branch, on a known int: one guard on x's low bits
/// (`GUARD_POW2_MULTIPLE`, `GUARD_POW2_NOT_MULTIPLE`) in place of the remainder, the zero
/// and the compare; negative x included (Python's remainder is 0 exactly when the low bits
/// are), both ways of each branch taken, every mode against Rust.
#[test]
fn a_power_of_two_remainder_tested_against_zero_is_a_guard_on_the_low_bits() {
    for (cmp, k, jump) in [
        ("eq", 1, "jump_if_false"),
        ("eq", 4, "jump_if_true"),
        ("ne", 8, "jump_if_false"),
        ("ne", 2, "jump_if_true"),
    ] {
        let text = format!(
            "func main()
  locals i x s
  const 0; store i; const 0; store s
loop:
  load i; const 300; lt; jump_if_false done
  load i; const 150; sub; const 7; mul; store x
  load x; const {k}; mod; const 0; {cmp}; {jump} other
  load s; const 1; add; store s
  jump next
other:
  load s; load x; add; store s
next:
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const none; return
end
"
        );
        let mut s = 0i64;
        for i in 0..300i64 {
            let x = (i - 150) * 7;
            let test = match cmp {
                "eq" => x.rem_euclid(k) == 0,
                _ => x.rem_euclid(k) != 0,
            };
            // `jump_if_false other` falls through when the test holds.
            let fall_through = test == (jump == "jump_if_false");
            s += if fall_through { 1 } else { x };
        }
        let what = format!("x % {k} {cmp} 0, {jump}");
        assert_every_mode_prints_int(&text, Some(s.into()), "", &what);
        assert!(
            compiles_with(&text, op::GUARD_POW2_MULTIPLE)
                || compiles_with(&text, op::GUARD_POW2_NOT_MULTIPLE),
            "{what}: no low-bit guard"
        );
    }
}

#[test]
fn an_int_compared_with_a_constant_is_one_guard_and_keeps_the_order_near_the_limits() {
    const MAX: i64 = (1 << 47) - 1;
    const MIN: i64 = -(1 << 47);
    for (start, cmp, bound, steps, fused) in [
        (MAX - 100, "lt", MAX, 100, op::LT_INT_CONST_GUARD_TRUE),
        (MIN, "le", MIN + 50, 51, op::LE_INT_CONST_GUARD_TRUE),
        (-40, "lt", 7, 47, op::LT_INT_CONST_GUARD_TRUE),
        (MIN, "le", MIN + 19, 20, op::LE_INT_CONST_GUARD_TRUE),
        (MAX - 60, "ne", MAX, 60, op::NE_INT_CONST_GUARD_TRUE),
        (-30, "ne", 0, 30, op::NE_INT_CONST_GUARD_TRUE),
        (MIN, "ne", MIN + 25, 25, op::NE_INT_CONST_GUARD_TRUE),
    ] {
        let text = common::counting_loop(start, cmp, bound, 1);
        let what = format!("{start} {cmp} {bound}");
        assert_every_mode_prints_int(&text, Some(steps.into()), "", &what);
        assert!(
            compiles_with(&text, fused),
            "{what}: no constant compare guard"
        );
    }
}

/// The largest int (48-bit ints).
const MAX_INT: i64 = (1 << 47) - 1;

/// How many items [`item_stores`]'s list has.
const ITEMS: i64 = 24;

/// `xs[i] = e` in a compiled loop over a list of [`ITEMS`] ones, i from -ITEMS to `end`: e
/// is `xs[i] + (i + c)` (`reads`) or `i + c`. The statement is one `SETITEM_LOCALS_KNOWN`
/// reading `xs` and `i` from the frame (or `i` from a pinned register), and every exit in e
/// (an index out of range, an overflow) or of the store itself resumes at the statement's
/// start, where the interpreter raises.
fn item_stores(end: i64, c: i64, reads: bool) -> String {
    let (old, add) = if reads {
        ("load xs; load i; getitem; ", "; add")
    } else {
        ("", "")
    };
    format!(
        "func main()
  locals xs i
  const {ITEMS}; const 1; newlist; store xs
  const -{ITEMS}; store i
loop:
  load i; const {end}; lt; jump_if_false done
  load xs; load i; {old}load i; const {c}; add{add}; setitem
  load i; const 1; add; store i
  jump loop
done:
  load xs; const 0; getitem; load xs; const 12; getitem; load xs; const -1; getitem; print 3
  const none; return
end
"
    )
}

/// What [`item_stores`] prints, or the error it raises, in the interpreter's order: the
/// item read, the adds, then the store's bounds.
fn stored_items(end: i64, c: i64, reads: bool) -> Result<String, &'static str> {
    let mut xs = vec![1i128; ITEMS as usize];
    for i in -ITEMS..end {
        let k = if i < 0 { i + ITEMS } else { i };
        let slot = usize::try_from(k).ok().filter(|&k| k < xs.len());
        let old = match (reads, slot) {
            (false, _) => 0,
            (true, Some(k)) => xs[k],
            (true, None) => return Err("IndexError"),
        };
        // Big ints where the sums leave the tagged range.
        xs[slot.ok_or("IndexError")?] = old + i128::from(i) + i128::from(c);
    }
    Ok(format!("{} {} {}\n", xs[0], xs[12], xs[xs.len() - 1]))
}

#[test]
fn a_list_item_stored_from_a_pure_expression_leaves_at_its_statement_in_every_mode() {
    // In range, negative indices first; one past the end (the read in e fails, or the store
    // itself); an overflow in `i + c` (at i = 21) and in the item's add (at i = 12, the
    // second time round).
    let cases = [
        (ITEMS, 5, true),
        (ITEMS, -7, false),
        (ITEMS + 1, 5, true),
        (ITEMS + 1, 5, false),
        (ITEMS, MAX_INT - 20, false),
        (ITEMS, MAX_INT / 2 + 1, true),
    ];
    for (end, c, reads) in cases {
        let text = item_stores(end, c, reads);
        let what = format!("to {end}, c = {c}, reads: {reads}");
        let want = stored_items(end, c, reads);
        assert_every_mode(&text, want.as_deref().map_err(|e| *e), &what);
        let (recording, _) = record(&text);
        let ops = recording.ops.borrow();
        assert!(
            ops.contains(&op::SETITEM_LOCALS_KNOWN),
            "{what}: no item store on locals"
        );
        assert!(
            !ops.contains(&op::SETITEM_LIST_INT),
            "{what}: the list and index were pushed"
        );
    }
    // The cases raise where they say.
    let raised: Vec<_> = cases
        .iter()
        .map(|&(end, c, reads)| stored_items(end, c, reads).err())
        .collect();
    let index = Some("IndexError");
    assert_eq!(raised, [None, None, index, index, None, None]);
}

/// `s = s + sqrt(x)` for x from 10.5 down by 1 while x > `stop`: on a float the root is
/// `SQRT_FLOAT` (no helper call); a negative x leaves the trace and the interpreter raises
/// ValueError.
fn roots(stop: &str) -> String {
    format!(
        "func main()
  locals x s
  const 10.5; store x
  const 0.0; store s
loop:
  load x; const {stop}; gt; jump_if_false done
  load s; load x; sqrt; add; store s
  load x; const 1.0; sub; store x
  jump loop
done:
  load s; print
  const none; return
end
"
    )
}

#[test]
fn a_square_root_of_a_float_is_one_micro_op_and_a_negative_one_raises_in_every_mode() {
    let (out, _) = common::agree_with(&roots("0.0"), eager, |_| {});
    let want: f64 = (0..11).map(|k| (10.5 - k as f64).sqrt()).sum();
    let got: f64 = out.trim().parse().expect("a float");
    assert!((got - want).abs() < 1e-9, "{out} against {want}");
    assert!(compiles_with(&roots("0.0"), op::SQRT_FLOAT));
    let (out, _) = common::agree_with(&roots("-3.0"), eager, |_| {});
    assert!(out.contains("ValueError"), "{out}");
}

/// `s = s + xs[i] * b` and `s = s - b` on floats, b a local: each `load b; op` is one
/// micro-op reading b (`MUL_FLOAT_LOCAL`, `SUB_FLOAT_LOCAL`). The item is not proved a float,
/// so its guard moves before the load of b and leaves there: item 20 is the int 3, and the
/// interpreter resumes at `load b` with the item on the stack.
const FLOAT_LOCALS: &str = "func main()
  locals xs i s b
  const 30; const 1.5; newlist; store xs
  load xs; const 20; const 3; setitem
  const 0.5; store b
  const 0.0; store s
  const 0; store i
loop:
  load i; const 30; lt; jump_if_false done
  load s; load xs; load i; getitem; load b; mul; add; store s
  load s; load b; sub; store s
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const none; return
end
";

#[test]
fn a_float_op_on_a_local_reads_it_in_place_after_an_item_read_that_checks_the_item() {
    let (out, stats) = common::agree_with(FLOAT_LOCALS, eager, |_| {});
    // 29 items of 1.5 and one int 3, each times 0.5, less 0.5 thirty times.
    assert_eq!(out, "8.25\n");
    assert!(
        stats.side_exits >= 1,
        "the int item leaves the trace: {stats:?}"
    );
    let (recording, _) = record(FLOAT_LOCALS);
    let traces = recording.traces.borrow();
    let body: Vec<u32> = traces
        .iter()
        .find_map(|t| Some(&t.uops[t.loop_body_start()?..t.body_len]))
        .expect("a peeled loop")
        .iter()
        .map(|u| u.op)
        .collect();
    let at = |id: u32| body.iter().position(|&o| o == id);
    for fused in [op::MUL_FLOAT_LOCAL, op::SUB_FLOAT_LOCAL] {
        assert!(
            at(fused).is_some(),
            "{}: {body:?}",
            cpjit_vm::ops::info(fused).name
        );
    }
    // The item checked a float by its read (the int one leaves there), right before the
    // multiply: no guard of its own (its guard before b's load: `fusion.rs`'s unit tests).
    let read = at(op::GETITEM_FLOAT_LOCALS_KNOWN).expect("the item's read checks it");
    assert_eq!(at(op::MUL_FLOAT_LOCAL), Some(read + 1), "{body:?}");
    for guard in [op::GUARD_FLOAT_TOS, op::GUARD_FLOAT_NOS] {
        assert_eq!(at(guard), None, "{body:?}");
    }
}
