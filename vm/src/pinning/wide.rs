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
//! body proves, and every write of it in the body is an increment the trace proved in range
//! (`INCREMENT_LOCAL_INT_BOUNDED`: a guard before it bounds the counter, `i < n` before
//! `i += 1`; vm/src/trace/bounded.rs owns that proof, this module only asks it). Such an
//! increment has no overflow check on any register: `add` where a scaled checked one is
//! `add; jo`. A side trace inherits the register only where its own increments of the
//! counter are proved too (`inherit` in the parent module); the exits of any side trace
//! holding it wide leave its type unknown (`Trace::exit_types`).
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
use crate::trace::{increment_proved_in_range, Trace};
use std::ops::RangeInclusive;

/// How many instructions per iteration holding int local `local` wide saves in loop body
/// `body` of `trace` (its first micro-op to its last, merged branches included), 0 where the body does not keep it in the tagged range as
/// the module doc says: the local is named only by `LOAD_INT` and increments the trace
/// proved in range, at least one.
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
    if gain == 0 || !kept_tagged(uops, local) {
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

/// Whether the body's micro-ops `uops` keep `local` tagged (see [`wide_counter_gain`]):
/// every micro-op that runs on it loads it or increments it in range, and one increments it.
fn kept_tagged(uops: &[Inst], local: u64) -> bool {
    let mut incremented = false;
    // (A pinned local is named only through the operand its members take from the register:
    // `choose` picks no other.)
    for u in uops
        .iter()
        .filter(|u| crate::pinning::pinned_local(u) == Some(local))
    {
        match u.op {
            op::LOAD_INT => {}
            _ if increment_proved_in_range(u) => incremented = true,
            _ => return false,
        }
    }
    incremented
}

#[cfg(test)]
mod tests {
    use super::{is_compare_with_constant, kept_tagged};
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

    /// A counter stays tagged where every write of it is an increment the trace proved in
    /// range (trace/bounded.rs decides which; its tests say when), and one is: an unproved
    /// increment, a store or no increment at all keeps it out of a wide register.
    #[test]
    fn a_counter_is_kept_tagged_only_by_proved_increments() {
        const I: u64 = 3;
        let one = (1i64 << 16) as u64;
        let body = |increment: u32| {
            vec![
                uop(op::LOAD_INT, I, 0),
                uop(op::LT_INT_CONST_GUARD_TRUE, 0, 1000 * one),
                uop(op::LOAD_INT, I, 0),
                uop(op::POP, 0, 0),
                uop(increment, I, one),
                uop(op::JUMP_TOP, 0, 0),
            ]
        };
        let proved = op::INCREMENT_LOCAL_INT_BOUNDED;
        assert!(kept_tagged(&body(proved), I));
        assert!(!kept_tagged(&body(op::INCREMENT_LOCAL_INT_KNOWN), I));
        assert!(!kept_tagged(&body(proved), I + 1), "another local");
        let mut twice = body(proved);
        twice.insert(4, uop(proved, I, one));
        assert!(kept_tagged(&twice, I), "two proved increments");
        twice[4].op = op::INCREMENT_LOCAL_INT_KNOWN;
        assert!(!kept_tagged(&twice, I), "one of two unproved");
        let mut stored = body(proved);
        stored[3] = uop(op::STORE, I, 0);
        assert!(!kept_tagged(&stored, I));
        let mut loaded_only = body(proved);
        loaded_only[4] = uop(op::POP, 0, 0);
        assert!(!kept_tagged(&loaded_only, I), "no increment");
    }
}
