//! Loop counters held *wide* (a raw 64-bit int, vm/templates/cached/wide.h) rather than
//! scaled: [`CounterUses::gain`] says which locals qualify, and what they gain.
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
//! [`CounterUses::gain`] counts the loads used as operands (a shift saved in a run of raw
//! ints, nothing lost in another: the run goes raw) and a bound whose scaled form fits no
//! imm32 (a GOT load saved). `mandelbrot`'s `it < 1000`, the counter loaded only for its
//! compare, gains nothing and stays scaled.

use crate::abi::Inst;
use crate::ops::{op, OperandKind};
use crate::trace::increment_proved_in_range;

/// How a loop body uses one int local, as far as holding it wide goes: gathered micro-op by
/// micro-op in the parent module's one pass over the body (`choose`), where a separate pass
/// per candidate local cost sum's compile 10 instructions per micro-op.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct CounterUses {
    /// Instructions per iteration its loads save held wide (see [`CounterUses::gain`]).
    loads_gain: u32,
    /// A body micro-op increments it, proved in range.
    incremented: bool,
    /// A body micro-op on it is neither a `LOAD_INT` nor an increment proved in range.
    otherwise: bool,
}

impl CounterUses {
    /// Notes body micro-op `u`, which runs on the local (its pinned operand names it), and
    /// `next`, the body's micro-op after it, if any.
    #[inline]
    pub(super) fn see(&mut self, u: &Inst, next: Option<&Inst>) {
        match u.op {
            op::LOAD_INT => match next.filter(|n| is_compare_with_constant(n)) {
                Some(compare) => {
                    self.loads_gain += u32::from(i32::try_from(compare.arg1 as i64).is_err())
                }
                None => self.loads_gain += 1,
            },
            _ if increment_proved_in_range(u) => self.incremented = true,
            _ => self.otherwise = true,
        }
    }

    /// How many instructions per iteration holding the local wide saves in the body (its
    /// first micro-op to its last, merged branches included), 0 where the body does not
    /// keep it in the tagged range as the module doc says: the local is named only by
    /// `LOAD_INT` and increments the trace proved in range, at least one. (The caller
    /// checks that the body proves it an int where it starts.)
    pub(super) fn gain(self) -> usize {
        match self.incremented && !self.otherwise {
            true => self.loads_gain as usize,
            false => 0,
        }
    }
}

/// Whether `u` compares the int on top of the stack with its constant operand and exits
/// (`LT_INT_CONST_GUARD_TRUE` and the like), its operand the scaled constant.
fn is_compare_with_constant(u: &Inst) -> bool {
    let info = crate::ops::info(u.op);
    let args = [u.arg0, u.arg1];
    info.exits
        && info.operands == [OperandKind::Const, OperandKind::ScaledInt]
        && (info.pop.count(args), info.push.count(args)) == (1, 0)
}

#[cfg(test)]
mod tests {
    use super::{is_compare_with_constant, CounterUses};
    use crate::abi::Inst;
    use crate::ops::{self, op};

    /// What holding `local` wide gains in `body`, fed to [`CounterUses`] as the parent
    /// module's pass does: the micro-ops on the local, each with the next.
    fn gain_of(body: &[Inst], local: u64) -> usize {
        let mut uses = CounterUses::default();
        for (k, u) in body.iter().enumerate() {
            if crate::pinning::pinned_local(u) == Some(local) {
                uses.see(u, body.get(k + 1));
            }
        }
        uses.gain()
    }

    /// Whether `body` keeps `local` in the tagged range with a gain.
    fn kept_tagged(body: &[Inst], local: u64) -> bool {
        gain_of(body, local) > 0
    }

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

    /// A load gains one instruction where it is an operand, and where it is compared with a
    /// constant only if the constant scaled fits no imm32; the body's order is what counts.
    #[test]
    fn a_load_gains_as_an_operand_or_before_a_bound_past_an_imm32() {
        const I: u64 = 3;
        let one = (1i64 << 16) as u64;
        let gain = |bound: u64, operand_load: bool| {
            let mut body = vec![
                uop(op::LOAD_INT, I, 0),
                uop(op::LT_INT_CONST_GUARD_TRUE, 0, bound * one),
            ];
            if operand_load {
                body.extend([uop(op::LOAD_INT, I, 0), uop(op::POP, 0, 0)]);
            }
            body.extend([
                uop(op::INCREMENT_LOCAL_INT_BOUNDED, I, one),
                uop(op::JUMP_TOP, 0, 0),
            ]);
            gain_of(&body, I)
        };
        assert_eq!(gain(1000, false), 0, "a bound that fits an imm32 scaled");
        assert_eq!(gain(3_000_000, false), 1, "a bound past an imm32 scaled");
        assert_eq!(gain(1000, true), 1, "an operand load");
        assert_eq!(gain(3_000_000, true), 2, "both");
    }
}
