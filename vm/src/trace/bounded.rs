//! Increments proved in range: an `INCREMENT_LOCAL_INT_KNOWN` of local `l` by a constant `c`
//! becomes `INCREMENT_LOCAL_INT_BOUNDED` (no overflow check, no exit) where a guard earlier
//! in the same straight stretch of the trace compared `l` with a constant on the side `c`
//! moves it away from, and nothing between changed `l`: after `j >= 0`, `j - 1` is at least
//! -1; after `i < n` (n a constant), `i + 1` is at most n. An insertion sort's shift loop
//! (`while j >= 0 and xs[j] > v: ...; j -= 1`) loses one of the 7 compare-and-branch pairs
//! an iteration that bounded its speed, a counted loop (`while i < n: ...; i += 1`) its
//! increment's overflow check.
//!
//! This pass is the one owner of that proof: the op it writes is its verdict, which the
//! pinning asks through [`increment_proved_in_range`] (a loop counter is held wide only where
//! every increment of it is proved, vm/src/pinning/wide.rs) instead of proving it again, so
//! that the two cannot disagree.

use super::Trace;
use crate::abi::{Inst, INT_MAX, INT_MIN};
use crate::ops::{self, op};
use crate::pinning::pinned_operand;

/// What the guards seen so far in a stretch prove of one local: `lower <= l <= upper`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bounds {
    lower: Option<i64>,
    upper: Option<i64>,
}

/// The bounds guard `guard` (a compare of the value just pushed with a constant) proves of
/// that value where the trace goes on past it.
fn proved_by(guard: &Inst) -> Option<Bounds> {
    use op::*;
    // ARG1: the constant times 2**16.
    let k = (guard.arg1 as i64) >> 16;
    let (lower, upper) = match guard.op {
        LT_INT_CONST_GUARD_TRUE | GE_INT_CONST_GUARD_FALSE => (None, k.checked_sub(1)),
        LE_INT_CONST_GUARD_TRUE | GT_INT_CONST_GUARD_FALSE => (None, Some(k)),
        GT_INT_CONST_GUARD_TRUE | LE_INT_CONST_GUARD_FALSE => (k.checked_add(1), None),
        GE_INT_CONST_GUARD_TRUE | LT_INT_CONST_GUARD_FALSE => (Some(k), None),
        EQ_INT_CONST_GUARD_TRUE | NE_INT_CONST_GUARD_FALSE => (Some(k), Some(k)),
        _ => return None,
    };
    Some(Bounds { lower, upper })
}

/// Whether micro-op `u` may change local `local`: it names it, other than as what a load
/// pushes or an item op's index (both only read it).
fn may_change(u: &Inst, local: u64) -> bool {
    let info = ops::info(u.op);
    let reads_only = |k: usize| match k {
        0 => matches!(u.op, op::LOAD | op::LOAD_INT | op::LOAD_INT_FLOAT),
        _ => pinned_operand(u.op) == Some(1),
    };
    info.operands.iter().take(2).enumerate().any(|(k, kind)| {
        *kind == ops::OperandKind::Local && [u.arg0, u.arg1][k] == local && !reads_only(k)
    })
}

/// Whether micro-op `u` is an increment of an int local that cannot leave the tagged range:
/// one this pass proved so (see the module doc).
pub(crate) fn increment_proved_in_range(u: &Inst) -> bool {
    u.op == op::INCREMENT_LOCAL_INT_BOUNDED
}

/// Turns every increment of `trace` that its guards prove in range into
/// `INCREMENT_LOCAL_INT_BOUNDED` (see the module doc).
pub(super) fn mark(trace: &mut Trace) {
    mark_uops(&mut trace.uops);
}

/// [`mark`] on micro-ops `uops` (jump and exit targets index them). A stretch ends at every
/// micro-op another jumps or exits to (it is entered from elsewhere, knowing nothing) and
/// after every micro-op that does not fall through.
fn mark_uops(uops: &mut [Inst]) {
    let n = uops.len();
    let mut entered = vec![false; n];
    for u in uops.iter() {
        let info = ops::info(u.op);
        if (info.jumps || info.exits) && (u.target as usize) < n {
            entered[u.target as usize] = true;
        }
    }
    // By local: its bounds in the current stretch (a trace names a handful of locals).
    let mut known: Vec<(u64, Bounds)> = Vec::new();
    let mut falls_in = false;
    for (i, &entered_here) in entered.iter().enumerate() {
        if entered_here || !falls_in {
            known.clear();
        }
        let u = uops[i];
        falls_in = crate::jit::falls_through(u.op);
        if u.op == op::INCREMENT_LOCAL_INT_KNOWN {
            let c = (u.arg1 as i64) >> 16;
            let bounds = known.iter().find(|k| k.0 == u.arg0).map(|k| k.1);
            if bounds.is_some_and(|b| in_range(b, c)) {
                uops[i].op = op::INCREMENT_LOCAL_INT_BOUNDED;
            }
        }
        known.retain(|k| !may_change(&u, k.0));
        let pushed = i.checked_sub(1).map(|p| uops[p]);
        if let (Some(load), Some(b)) = (pushed, proved_by(&u)) {
            if load.op == op::LOAD_INT && !entered_here {
                known.retain(|k| k.0 != load.arg0);
                known.push((load.arg0, b));
            }
        }
    }
}

/// Whether a local within `b` plus `c` stays in the tagged int range.
fn in_range(b: Bounds, c: i64) -> bool {
    match c {
        0.. => b
            .upper
            .and_then(|u| u.checked_add(c))
            .is_some_and(|s| s <= INT_MAX),
        _ => b
            .lower
            .and_then(|l| l.checked_add(c))
            .is_some_and(|s| s >= INT_MIN),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, op_names, records};
    use super::super::{project, End};
    use super::{mark_uops, proved_by, Bounds};
    use crate::abi::{Inst, INT_MAX, TYPE_INT, TYPE_NONE};
    use crate::ops::{self, op};

    /// Micro-op `op` on `arg0`, `arg1`, its exit (if it has one) past the micro-ops of the
    /// tests (an exit stub, which enters no stretch).
    fn uop(op: u32, arg0: u64, arg1: u64) -> Inst {
        Inst {
            op,
            target: 1_000,
            arg0,
            arg1,
        }
    }

    /// An int constant as the ops take it scaled.
    fn scaled(c: i64) -> u64 {
        (c << 16) as u64
    }

    /// Local `I` below: a loop counter.
    const I: u64 = 3;

    /// A loop body `LOAD_INT i; i < c; LOAD_INT i; POP; i += step; JUMP_TOP`, marked: whether
    /// its increment is proved.
    fn proved(body: &mut [Inst]) -> Vec<bool> {
        mark_uops(body);
        body.iter()
            .filter(|u| {
                u.op == op::INCREMENT_LOCAL_INT_BOUNDED || u.op == op::INCREMENT_LOCAL_INT_KNOWN
            })
            .map(super::increment_proved_in_range)
            .collect()
    }

    fn counted_loop(c: i64, step: i64) -> Vec<Inst> {
        vec![
            uop(op::LOAD_INT, I, 0),
            uop(op::LT_INT_CONST_GUARD_TRUE, 0, scaled(c)),
            uop(op::LOAD_INT, I, 0),
            uop(op::POP, 0, 0),
            uop(op::INCREMENT_LOCAL_INT_KNOWN, I, scaled(step)),
            uop(op::JUMP_TOP, 0, 0),
        ]
    }

    /// Every compare with a constant bounds the value it pops on the side that passing it
    /// says, and nothing else does.
    #[test]
    fn each_constant_guard_bounds_its_value_on_the_side_it_passes() {
        let k = 1000;
        let bounds = |lower, upper| Some(Bounds { lower, upper });
        let table = [
            (op::LT_INT_CONST_GUARD_TRUE, bounds(None, Some(k - 1))),
            (op::GE_INT_CONST_GUARD_FALSE, bounds(None, Some(k - 1))),
            (op::LE_INT_CONST_GUARD_TRUE, bounds(None, Some(k))),
            (op::GT_INT_CONST_GUARD_FALSE, bounds(None, Some(k))),
            (op::GT_INT_CONST_GUARD_TRUE, bounds(Some(k + 1), None)),
            (op::LE_INT_CONST_GUARD_FALSE, bounds(Some(k + 1), None)),
            (op::GE_INT_CONST_GUARD_TRUE, bounds(Some(k), None)),
            (op::LT_INT_CONST_GUARD_FALSE, bounds(Some(k), None)),
            (op::EQ_INT_CONST_GUARD_TRUE, bounds(Some(k), Some(k))),
            (op::NE_INT_CONST_GUARD_FALSE, bounds(Some(k), Some(k))),
            (op::NE_INT_CONST_GUARD_TRUE, None),
            (op::EQ_INT_CONST_GUARD_FALSE, None),
            (op::LT_INT_GUARD_TRUE, None),
        ];
        for (o, want) in table {
            assert_eq!(
                proved_by(&uop(o, 0, scaled(k))),
                want,
                "{}",
                ops::info(o).name
            );
        }
    }

    /// `i < c` before `i += step` proves it exactly when c - 1 + step is a tagged int.
    #[test]
    fn an_increment_is_proved_exactly_when_the_bound_plus_the_step_is_tagged() {
        let max = INT_MAX;
        assert_eq!(proved(&mut counted_loop(max, 1)), [true]);
        assert_eq!(proved(&mut counted_loop(max, 2)), [false]);
        assert_eq!(proved(&mut counted_loop(max - 6, 7)), [true]);
        assert_eq!(proved(&mut counted_loop(max - 5, 7)), [false]);
        assert_eq!(
            proved(&mut counted_loop(1000, -1)),
            [false],
            "an upper bound proves no decrement"
        );
    }

    /// Only a guard of the same local, in the same stretch, with nothing between that
    /// changes the local, proves an increment.
    #[test]
    fn a_write_an_entry_or_another_local_between_guard_and_increment_breaks_the_proof() {
        // A second increment: the first one changed i since the guard.
        let mut twice = counted_loop(1000, 1);
        twice.insert(4, uop(op::INCREMENT_LOCAL_INT_KNOWN, I, scaled(1)));
        assert_eq!(proved(&mut twice), [true, false]);
        // A store of i between.
        let mut stored = counted_loop(1000, 1);
        stored[3] = uop(op::STORE, I, 0);
        assert_eq!(proved(&mut stored), [false]);
        // The compare after the increment (the next iteration's is another stretch: the
        // back edge enters the body's start).
        // LOAD_INT i; i += 1; LOAD_INT i; i < 1000; POP; JUMP_TOP.
        let mut early = counted_loop(1000, 1);
        early.swap(1, 4);
        early.swap(3, 4);
        assert_eq!(early[3].op, op::LT_INT_CONST_GUARD_TRUE);
        assert_eq!(proved(&mut early), [false]);
        // An exit into the micro-op between enters the stretch there, knowing nothing.
        let mut entered = counted_loop(1000, 1);
        entered.push(Inst {
            target: 3,
            ..uop(op::LT_INT_CONST_GUARD_TRUE, 0, 0)
        });
        assert_eq!(proved(&mut entered), [false]);
        // A guard of another local.
        let mut other = counted_loop(1000, 1);
        other[0].arg0 = I + 1;
        assert_eq!(proved(&mut other), [false]);
        // A load of i or a list item indexed by it only reads it.
        let mut read = counted_loop(1000, 1);
        read[3] = uop(op::GETITEM_LOCALS_KNOWN, 0, I);
        assert_eq!(proved(&mut read), [true]);
    }

    /// The body of a peeled loop `while i CMP k: i += c` (i proved an int), as op names.
    fn body(cmp: &str, k: i64, c: i64) -> Vec<&'static str> {
        let text = format!(
            "loop:\n  load i; const {k}; {cmp}; jump_if_false done\n  load i; const {c}; add; store i\n  jump loop\ndone:"
        );
        let prog = function("i", &text);
        let f = &prog.functions[prog.main];
        let ints = [TYPE_INT, TYPE_INT, TYPE_NONE];
        let rs = records(0..9, &[(2, ints), (6, ints)]);
        let trace = project(f, &f.code, &rs, End::JumpTop, &[], None, None).unwrap();
        let start = trace.loop_body_start().expect("a peeled loop");
        op_names(&trace.uops[start..trace.body_len])
    }

    #[test]
    fn a_guarded_counter_is_incremented_without_an_overflow_check() {
        let bounded = ops::info(op::INCREMENT_LOCAL_INT_BOUNDED).name;
        // Up below a constant, down from at least one.
        assert!(
            body("lt", 1000, 1).contains(&bounded),
            "{:?}",
            body("lt", 1000, 1)
        );
        assert!(
            body("ge", 0, -1).contains(&bounded),
            "{:?}",
            body("ge", 0, -1)
        );
        assert!(body("gt", 0, -3).contains(&bounded));
        assert!(body("le", 5, 2).contains(&bounded));
    }

    #[test]
    fn an_increment_the_guard_does_not_bound_keeps_its_check() {
        let checked = ops::info(op::INCREMENT_LOCAL_INT_KNOWN).name;
        // The guard bounds the other side, or the sum may leave the range.
        for (cmp, k, c) in [
            ("lt", 1000, -1),
            ("ge", 0, 1),
            ("ne", 7, 1),
            ("lt", (1 << 47) - 1, 2),
            ("ge", -(1 << 47), -1),
        ] {
            let names = body(cmp, k, c);
            assert!(names.contains(&checked), "{cmp} {k} {c}: {names:?}");
        }
    }
}
