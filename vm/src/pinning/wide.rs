//! Loop counters held *wide* (a raw 64-bit int, vm/templates/cached/wide.h) rather than
//! scaled: [`wide_counter_gain`] says which locals qualify, and what they gain.
//!
//! Why. A counter held scaled (an int times 2**16) costs a shift back at every use as an
//! operand of a run of raw 64-bit ints (`calls`: four per iteration), and its compare with a
//! loop bound past 2**15 a GOT load (the bound scaled fits no imm32: `sum` at 3 M); held
//! raw, a load is a move and the bound an imm32.
//!
//! Why bounded. A register holding a local wide is checked at 64 bits, not 48, and a side
//! trace grown from an exit of the body starts from the types the body proved there
//! (`Trace::exit_types`): a counter that could leave the tagged range in its register
//! would be written back a big int where the side trace assumed an int. So a counter is held
//! wide only where the body keeps it in the tagged range itself: it starts as an int the
//! body proves, the body compares it with a constant before its only increment (by a
//! positive constant) and leaves where the compare fails, and the largest value that passes
//! the compare plus the increment is still a tagged int. Its increment then cannot overflow
//! and is compiled without a check (cached/wide.h): `add` where a scaled one is `add; jo`.
//! A side trace that increments the counter is bounded by nothing, so it does not inherit
//! the register (`inherit` in the parent module) and increments it in the frame, checked;
//! and the exits of any side trace holding it wide leave its type unknown
//! (`Trace::exit_types`).
//!
//! Why weighed. Held wide, a counter's exit stubs write it back through a helper that may
//! make a big int (the generic whole stub, `EXIT_PINNED_WIDE`), and its loads push onto raw
//! registers only; so it is held wide only where that saves instructions per iteration:
//! [`wide_counter_gain`] counts the loads used as operands (a shift saved in a run of raw
//! ints, nothing lost in another: the run goes raw) and a bound whose scaled form fits no
//! imm32 (a GOT load saved). `mandelbrot`'s `it < 1000`, the counter loaded only for its
//! compare, gains nothing and stays scaled.

use crate::abi::Inst;
use crate::ops::{op, OperandKind};
use crate::trace::Trace;
use std::ops::RangeInclusive;

/// The largest tagged int (vm/templates/vm_abi.h, `VM_INT_MAX`).
const INT_MAX: i64 = (1 << 47) - 1;

/// The int of a scaled operand (an int times 2**16: `OperandKind::ScaledInt`).
fn scaled_int(operand: u64) -> i64 {
    (operand as i64) >> 16
}

/// The largest value of the top of the stack that passes compare guard `u` with a constant,
/// where passing bounds it from above (`< c`, `<= c`, not `>= c`, not `> c`).
fn upper_bound(u: &Inst) -> Option<i64> {
    let c = scaled_int(u.arg1);
    match u.op {
        op::LT_INT_CONST_GUARD_TRUE | op::GE_INT_CONST_GUARD_FALSE => c.checked_sub(1),
        op::LE_INT_CONST_GUARD_TRUE | op::GT_INT_CONST_GUARD_FALSE => Some(c),
        _ => None,
    }
}

/// How many instructions per iteration holding int local `local` wide saves in loop body
/// `body` of `trace` (its first micro-op to its last, merged branches included; its first
/// back edge ends the main path), 0 where the body does not keep it in the tagged range as
/// the module doc says: the local is named only by `LOAD_INT` and one
/// `INCREMENT_LOCAL_INT_KNOWN` (or `_BOUNDED`) by a positive constant on the main path, after a `LOAD_INT`
/// of it compared with a constant that bounds it so that the increment stays tagged.
pub fn wide_counter_gain(trace: &Trace, body: RangeInclusive<usize>, local: u64) -> usize {
    if !trace.loop_body_proves_int(local) {
        return 0;
    }
    let uops = &trace.uops[body];
    // The loads used as operands (not only compared with a constant), and a constant
    // compared with that no imm32 holds scaled.
    let mut gain = 0;
    for (k, u) in uops.iter().enumerate() {
        if u.op == op::LOAD_INT && u.arg0 == local {
            match uops
                .get(k + 1)
                .filter(|next| is_compare_with_constant(next))
            {
                Some(next) => gain += usize::from(i32::try_from(next.arg1 as i64).is_err()),
                None => gain += 1,
            }
        }
    }
    if gain == 0 || !bounded(uops, local) {
        return 0;
    }
    gain
}

/// Whether `u` compares the top of the stack with a constant before a branch: an op that
/// pops one value and pushes none, leaves where the compare fails, and takes the constant
/// boxed and scaled (ops.def, `VM_COMPARE_CONST_GUARD`).
fn is_compare_with_constant(u: &Inst) -> bool {
    let info = crate::ops::info(u.op);
    let args = [u.arg0, u.arg1];
    info.exits
        && info.operands == [OperandKind::Const, OperandKind::ScaledInt]
        && (info.pop.count(args), info.push.count(args)) == (1, 0)
}

/// Whether the body's micro-ops `uops` keep `local` tagged (see [`wide_counter_gain`]).
fn bounded(uops: &[Inst], local: u64) -> bool {
    let main_end = uops
        .iter()
        .position(|u| u.op == op::JUMP_TOP)
        .unwrap_or(uops.len());
    let mut bound: Option<i64> = None;
    let mut increment: Option<i64> = None;
    for (k, u) in uops.iter().enumerate() {
        // A compare of the value just loaded from the local bounds it (before the
        // increment, on the main path: where it fails, the body has left).
        if k > 0 && k < main_end && increment.is_none() {
            let loaded = &uops[k - 1];
            if loaded.op == op::LOAD_INT && loaded.arg0 == local {
                bound = bound.or(upper_bound(u));
            }
        }
        // (A pinned local is named only through the operand its members take from the
        // register: `choose` picks no other.)
        if crate::pinning::pinned_local(u) != Some(local) {
            continue;
        }
        match u.op {
            op::LOAD_INT => {}
            // (An increment a guard of its stretch bounds is BOUNDED, vm/src/trace/bounded.rs;
            // the loop's bound below is what holding it wide needs either way.)
            op::INCREMENT_LOCAL_INT_KNOWN | op::INCREMENT_LOCAL_INT_BOUNDED
                if increment.is_none() && k < main_end =>
            {
                let step = scaled_int(u.arg1);
                if step <= 0 {
                    return false;
                }
                increment = Some(step);
            }
            _ => return false,
        }
    }
    match (bound, increment) {
        (Some(bound), Some(step)) => bound.checked_add(step).is_some_and(|top| top <= INT_MAX),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{bounded, is_compare_with_constant, upper_bound};
    use crate::abi::Inst;
    use crate::ops::{self, op};

    fn uop(op: u32, arg0: u64, arg1: u64) -> Inst {
        Inst {
            op,
            arg0,
            arg1,
            ..Inst::default()
        }
    }

    /// An int constant as the ops take it scaled.
    fn scaled(c: i64) -> u64 {
        (c << 16) as u64
    }

    /// The ops read as compares with a constant are exactly ops.def's twelve
    /// `VM_COMPARE_CONST_GUARD`s, from the op table's metadata alone.
    #[test]
    fn the_compares_with_a_constant_are_the_twelve_constant_guards() {
        let found: Vec<&str> = (0..ops::OPS.len() as u32)
            .filter(|&o| is_compare_with_constant(&uop(o, 0, 0)))
            .map(|o| ops::info(o).name)
            .collect();
        assert_eq!(found.len(), 12, "{found:?}");
        assert!(
            found.iter().all(|n| n.contains("_INT_CONST_GUARD_")),
            "{found:?}"
        );
    }

    /// `i < c`, `i <= c` and their negations bound i from above; the others do not.
    #[test]
    fn only_compares_that_hold_below_a_constant_bound_it() {
        let c = scaled(1000);
        let bounds = [
            (op::LT_INT_CONST_GUARD_TRUE, 999),
            (op::GE_INT_CONST_GUARD_FALSE, 999),
            (op::LE_INT_CONST_GUARD_TRUE, 1000),
            (op::GT_INT_CONST_GUARD_FALSE, 1000),
        ];
        for (o, bound) in bounds {
            assert_eq!(
                upper_bound(&uop(o, 0, c)),
                Some(bound),
                "{}",
                ops::info(o).name
            );
        }
        for o in [op::GT_INT_CONST_GUARD_TRUE, op::NE_INT_CONST_GUARD_TRUE] {
            assert_eq!(upper_bound(&uop(o, 0, c)), None);
        }
    }

    /// A body `LOAD_INT i; i < c; ...; i += step; JUMP_TOP` keeps i tagged exactly when
    /// c - 1 + step fits 47 bits; a second increment, a store or an increment before the
    /// compare does not.
    #[test]
    fn a_counter_is_bounded_only_by_a_compare_before_its_one_increment() {
        const I: u64 = 3;
        let max = (1i64 << 47) - 1;
        let body = |c: i64, step: i64| {
            vec![
                uop(op::LOAD_INT, I, 0),
                uop(op::LT_INT_CONST_GUARD_TRUE, 0, scaled(c)),
                uop(op::LOAD_INT, I, 0),
                uop(op::POP, 0, 0),
                uop(op::INCREMENT_LOCAL_INT_KNOWN, I, scaled(step)),
                uop(op::JUMP_TOP, 0, 0),
            ]
        };
        assert!(bounded(&body(max, 1), I));
        let mut proved = body(max, 1);
        proved[4].op = op::INCREMENT_LOCAL_INT_BOUNDED;
        assert!(
            bounded(&proved, I),
            "an increment trace/bounded.rs proved counts too"
        );
        assert!(!bounded(&body(max, 2), I));
        assert!(bounded(&body(max - 6, 7), I));
        assert!(!bounded(&body(1000, -1), I), "a negative step");
        let mut twice = body(1000, 1);
        twice.insert(4, uop(op::INCREMENT_LOCAL_INT_KNOWN, I, scaled(1)));
        assert!(!bounded(&twice, I));
        let mut stored = body(1000, 1);
        stored[3] = uop(op::STORE, I, 0);
        assert!(!bounded(&stored, I));
        // LOAD_INT i; i += 1; LOAD_INT i; i < 1000; POP; JUMP_TOP.
        let mut early = body(1000, 1);
        early.swap(1, 4);
        early.swap(3, 4);
        assert_eq!(early[3].op, op::LT_INT_CONST_GUARD_TRUE);
        assert!(!bounded(&early, I), "the compare after the increment");
    }
}
