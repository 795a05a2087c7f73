//! Loop counters held wide (vm/src/pinning/wide.rs): a counter the body only loads and
//! increments, every increment proved in range by a compare with a constant before it
//! (vm/src/trace/bounded.rs), is pinned as a raw 64-bit int where that saves instructions per
//! iteration, and every mode agrees with Python's result at the edges of the tagged range: a
//! bound whose last increment would leave it keeps the counter scaled (its add leaves the
//! trace at 48 bits), a side trace that inherits the register and steps the counter past
//! 2**47 writes it back a big int, and a side trace keeps the register wide only where its
//! own increment is proved.

use crate::common;

use common::{agree_with, eager, example, record, Recorder};
use cpjit_vm::pinning::Held;
use cpjit_vm::Mode;

const MAX: i128 = (1 << 47) - 1;

/// How `text`'s loop bodies (jit mode, eager tier-up) hold their pinned locals, one list per
/// pinned loop, each sorted; checks the output is `want`.
fn pinned_held(text: &str, want: &str) -> Vec<Vec<Held>> {
    let (recorder, out) = record(text);
    assert_eq!(out, want);
    let lowerings = recorder.lowerings.borrow();
    let pinned = lowerings
        .iter()
        .filter(|(t, l)| !l.pinned.is_empty() && !l.inherited && t.loop_body_start().is_some());
    pinned
        .map(|(_, l)| {
            let mut held = l.pinned_held.clone();
            held.sort();
            held
        })
        .collect()
}

#[test]
fn counters_used_as_operands_or_bounded_past_an_imm32_are_held_wide_and_others_scaled() {
    // sum: `s += i` and a bound of 3 M (scaled, past any imm32); calls: i loaded four
    // times into a run of raw ints; mandelbrot's `it < 1000`: only compared, bound small.
    for name in ["sum", "calls"] {
        let held = pinned_held(&example(name, "vm"), &example(name, "expected"));
        assert_eq!(held, [[Held::Wide, Held::Wide]], "{name}");
    }
    let held = pinned_held(
        &example("mandelbrot", "vm"),
        &example("mandelbrot", "expected"),
    );
    assert!(
        !held.is_empty() && held.iter().all(|h| !h.contains(&Held::Wide)),
        "mandelbrot: {held:?}"
    );
}

/// `i` from `start` while `i {cmp} bound`, step `step`, summing every `i % 7` into `n` (`i` an
/// operand); prints i and n. With `side`, every third `i` steps `side` further first, on a branch the loop's side
/// trace takes.
fn counting(start: i128, cmp: &str, bound: i128, step: i128, side: Option<i128>) -> String {
    let branch = match side {
        Some(big) => format!(
            "  load i; const 3; mod; const 0; eq; jump_if_false step
  load i; const {big}; add; store i
step:
"
        ),
        None => String::new(),
    };
    format!(
        "func main()
  locals i n
  const 0; store n; const {start}; store i
loop:
  load i; const {bound}; {cmp}; jump_if_false done
  load n; load i; const 7; mod; add; store n
{branch}  load i; const {step}; add; store i
  jump loop
done:
  load i; print; load n; print
  const none; return
end
"
    )
}

/// What [`counting`] prints, Python's way.
fn counted(start: i128, cmp: &str, bound: i128, step: i128, side: Option<i128>) -> String {
    let (mut i, mut n) = (start, 0i128);
    while if cmp == "lt" { i < bound } else { i <= bound } {
        n += i.rem_euclid(7);
        if let Some(big) = side.filter(|_| i % 3 == 0) {
            i += big;
        }
        i += step;
    }
    format!("{i}\n{n}\n")
}

#[test]
fn a_counter_is_held_wide_only_where_its_bound_keeps_its_last_increment_tagged() {
    // (start, compare, bound, step, held wide): the largest value that passes the compare,
    // plus the step, must be a tagged int.
    for (start, cmp, bound, step, wide) in [
        (MAX - 200, "lt", MAX, 1, true),
        (MAX - 200, "lt", MAX, 2, false),
        (MAX - 200, "le", MAX, 1, false),
        (MAX - 200, "le", MAX - 1, 1, true),
        (MAX - 2_000, "lt", MAX - 7, 7, true),
        (MAX - 2_000, "lt", MAX - 5, 7, false),
        (-MAX, "lt", -MAX + 300, 3, true),
    ] {
        let text = counting(start, cmp, bound, step, None);
        let want = counted(start, cmp, bound, step, None);
        let (out, stats) = agree_with(&text, eager, |_| {});
        assert_eq!(out, want, "{start} {cmp} {bound} step {step}");
        assert!(stats.pinned_loops >= 1, "{stats:?}");
        let held = pinned_held(&text, &want);
        let counter_wide = held.iter().any(|h| h == &[Held::Wide, Held::Wide]);
        assert_eq!(
            counter_wide, wide,
            "{start} {cmp} {bound} step {step}: {held:?}"
        );
    }
}

/// A side trace that inherits the counter's register and steps it by `big` is bounded by
/// nothing: past 2**47 the counter is a big int where the loop ends.
#[test]
fn a_side_trace_stepping_a_wide_counter_past_the_tagged_range_agrees_with_python() {
    for (start, big) in [(MAX - 3_000 * (1 << 20), 1 << 20), (MAX - 1_000_000, 997)] {
        let text = counting(start, "lt", MAX, 1, Some(big));
        let want = counted(start, "lt", MAX, 1, Some(big));
        // (Unmerged: merged into the loop, the branch's increment is a second one of the
        // body, which holds the counter scaled.)
        let (out, stats) = agree_with(&text, eager, |c| c.merge_branches = false);
        assert_eq!(out, want, "{start} + {big}");
        let end: i128 = want.lines().next().unwrap().parse().unwrap();
        assert!(end > MAX, "the loop ends past the tagged range: {end}");
        assert!(stats.side_traces >= 1, "{stats:?}");
    }
}

/// `i` from `start` while `i < bound`, by 1, or by `far` instead on every `i` divisible by 97
/// that a compare of the branch's own, `i < limit`, lets through (a branch rare enough that
/// the loop's trace is the step by 1 and the far one a side trace); prints i and how often
/// it went far.
fn counting_far(start: i128, bound: i128, limit: i128, far: i128) -> (String, String) {
    let text = format!(
        "func main()
  locals i n
  const 0; store n; const {start}; store i
loop:
  load i; const {bound}; lt; jump_if_false done
  load i; const 97; mod; const 0; eq; jump_if_false step
  load i; const {limit}; lt; jump_if_false step
  load n; const 1; add; store n
  load i; const {far}; add; store i
  jump loop
step:
  load i; const 1; add; store i
  jump loop
done:
  load i; print; load n; print
  const none; return
end
"
    );
    let (mut i, mut n) = (start, 0i128);
    while i < bound {
        if i % 97 == 0 && i < limit {
            n += 1;
            i += far;
        } else {
            i += 1;
        }
    }
    (text, format!("{i}\n{n}\n"))
}

/// A side trace inherits its parent's wide counter only where its own increment of it is one
/// the trace proved in range (`i < limit` before `i += far`): then it keeps the register,
/// held wide; where `limit - 1 + far` leaves the tagged range it keeps the counter in the
/// frame, and every mode agrees with Python either way.
#[test]
fn a_side_trace_keeps_a_wide_counter_only_where_its_increment_is_proved() {
    // Not divisible by 97 where the loop is recorded.
    let start = MAX - 3_000_000 - (MAX - 3_000_000) % 97 + 50;
    for (limit, far, inherits) in [(MAX - 1_000, 5, true), (MAX - 1, 5, false)] {
        let (text, want) = counting_far(start, MAX - 10, limit, far);
        let (out, stats) = agree_with(&text, eager, |c| c.merge_branches = false);
        assert_eq!(out, want, "limit {limit} far {far}");
        assert!(stats.side_traces >= 1, "{stats:?}");
        let recorder = Recorder::new();
        let mut config = eager(Mode::Jit);
        config.merge_branches = false;
        assert_eq!(recorder.run(&text, config).0, want);
        let lowerings = recorder.lowerings.borrow();
        let side_wide = lowerings
            .iter()
            .any(|(_, l)| l.inherited && l.pinned_held.contains(&Held::Wide));
        assert_eq!(side_wide, inherits, "limit {limit} far {far}");
    }
}
