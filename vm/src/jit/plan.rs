//! Where the operands and jump targets of the VM's stencils come from: resolved from their
//! names once per stencil when the backend is made ([`StencilPlan`]), so that a compile
//! does no string work per instance; and the value each operand hole takes
//! ([`operand_value`]), for a compiler of the stencils' IR.

use crate::abi::{Inst, FRAME_HEADER_BYTES};

/// Where the value of a stencil operand comes from ([`OPERAND_NAMES`], [`operand_value`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    /// `ARG0`, `STACK_DEPTH`, `SHIFT_COUNT`, `MUL_FACTOR`.
    Arg0,
    /// `ARG1`, `LINK_SLOT`.
    Arg1,
    /// `ARG1_RAW`: the int of `arg1`, an int passed scaled (times 2**16), as a raw 64-bit int
    /// (the members on raw 64-bit ints, vm/templates/cached/wide.h and wide_stack.h).
    Arg1Raw,
    /// `LOCAL0_AT`: the byte offset of local `arg0` from the frame.
    Local0At,
    /// `LOCAL1_AT`: likewise of local `arg1`.
    Local1At,
    /// `WIDE_MAGIC` and `WIDE_SHIFT`: a wide member's operands of its division by the
    /// constant `arg0` ([`crate::cached::wide::wide_magic`]).
    WideMagic,
    WideShift,
    /// `DIV_ABS`, `DIV_SHIFT`, `DIV_BIAS`, `DIV_BIAS_QUOTIENT`: a division's
    /// operands besides its divisor `arg0` and magic `arg1`
    /// ([`crate::trace::DivisorOperands`]).
    DivAbs,
    DivShift,
    DivBias,
    DivBiasQuotient,
    /// `EXIT_PINS`: the trace's pinned registers, as a whole exit stub of a body with pinned
    /// locals writes them back ([`super::Lowering::exit_pins`]): not the micro-op's.
    ExitPins,
}

impl Operand {
    fn of_name(name: &str) -> Option<Operand> {
        match name {
            "ARG0" | "STACK_DEPTH" | "SHIFT_COUNT" | "MUL_FACTOR" => Some(Operand::Arg0),
            "ARG1" | "LINK_SLOT" => Some(Operand::Arg1),
            "ARG1_RAW" => Some(Operand::Arg1Raw),
            "LOCAL0_AT" => Some(Operand::Local0At),
            "LOCAL1_AT" => Some(Operand::Local1At),
            "EXIT_PINS" => Some(Operand::ExitPins),
            "WIDE_MAGIC" => Some(Operand::WideMagic),
            "WIDE_SHIFT" => Some(Operand::WideShift),
            "DIV_ABS" => Some(Operand::DivAbs),
            "DIV_SHIFT" => Some(Operand::DivShift),
            "DIV_BIAS" => Some(Operand::DivBias),
            "DIV_BIAS_QUOTIENT" => Some(Operand::DivBiasQuotient),
            _ => None,
        }
    }

    /// Its value for micro-op `u` in a trace whose exit stubs take `exit_pins`; `None`
    /// when a local's offset overflows or a division's divisor has no magic or operands.
    #[inline(always)]
    fn value(self, u: &Inst, exit_pins: u64) -> Option<u64> {
        let local_at = |i: u64| i.checked_mul(8)?.checked_add(FRAME_HEADER_BYTES as u64);
        match self {
            Operand::Arg0 => Some(u.arg0),
            Operand::Arg1 => Some(u.arg1),
            // (An arithmetic shift: the scaled int's sign is its top bit.)
            Operand::Arg1Raw => Some(((u.arg1 as i64) >> 16) as u64),
            Operand::Local0At => local_at(u.arg0),
            Operand::Local1At => local_at(u.arg1),
            Operand::ExitPins => Some(exit_pins),
            Operand::WideMagic => crate::cached::wide::wide_magic(u.arg0).map(|(m, _)| m),
            Operand::WideShift => crate::cached::wide::wide_magic(u.arg0).map(|(_, s)| s.into()),
            Operand::DivAbs => divisor(u).map(|d| d.abs),
            Operand::DivShift => divisor(u).map(|d| d.shift.into()),
            Operand::DivBias => divisor(u).map(|d| d.bias),
            Operand::DivBiasQuotient => divisor(u).map(|d| d.bias_quotient),
        }
    }
}

/// The operands of micro-op `u`'s division by its constant `arg0`; `None` for a divisor
/// without them.
fn divisor(u: &Inst) -> Option<crate::trace::DivisorOperands> {
    crate::trace::DivisorOperands::of(u.arg0)
}

/// Where a stencil jump target goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Jump {
    /// `JUMP_TARGET`: the instance of micro-op `target`.
    Jump,
    /// `EXIT_TARGET`: the instance an exit to micro-op `target` enters.
    Exit,
}

/// Most operands and jump targets a stencil of the VM takes: 3 operands today, fewer than the
/// names (a stencil with more is refused when pushed, [`StencilPlan::operand_count`]; a test
/// checks every stencil of the host's set). Every compiled instance and every plan carries an
/// array of this length.
pub(super) const MAX_OPERANDS: usize = 8;
pub(super) const MAX_TARGETS: usize = 2;

/// A stencil's operands and jump targets, resolved from their names.
#[derive(Clone, Copy, Debug)]
pub(super) struct StencilPlan {
    /// The stencil's name (for listings, without a look-up in the set's large records).
    pub(super) name: &'static str,
    /// The kit's op of a cached member ([`crate::cached::KitOp`]), whose table's pick the
    /// checks compare with the member.
    pub(super) kit_op: Option<crate::cached::KitOp>,
    pub(super) operands: [Operand; MAX_OPERANDS],
    /// How many operands, [`UNKNOWN`] when `unknown` is set (so that one test per
    /// instance, [`StencilPlan::operand_count`], both refuses it and bounds the operands).
    pub(super) n_operands: u8,
    pub(super) targets: [Jump; MAX_TARGETS],
    pub(super) n_targets: u8,
    /// A cached member's entry state as the kit numbers it
    /// ([`crate::cached::CacheState::kit_state`] in its family), where the checks look the
    /// kit's pick up.
    pub(super) kit_entry: u8,
    /// A name the VM does not know (or too many of them): an error when an instance of it
    /// is pushed, as it was before the names were resolved up front.
    pub(super) unknown: Option<&'static str>,
}

/// [`StencilPlan::n_operands`] of a stencil with a name the VM does not know.
const UNKNOWN: u8 = u8::MAX;

impl StencilPlan {
    pub(super) fn of(stencil: &cpjit_model::Stencil<'static>) -> StencilPlan {
        let mut plan = StencilPlan {
            name: stencil.name,
            kit_op: None,
            operands: [Operand::Arg0; MAX_OPERANDS],
            n_operands: 0,
            targets: [Jump::Jump; MAX_TARGETS],
            n_targets: 0,
            kit_entry: 0,
            unknown: None,
        };
        for &name in stencil.operands.iter() {
            match Operand::of_name(name) {
                Some(o) if (plan.n_operands as usize) < MAX_OPERANDS => {
                    plan.operands[plan.n_operands as usize] = o;
                    plan.n_operands += 1;
                }
                _ => plan.unknown = plan.unknown.or(Some(name)),
            }
        }
        for &name in stencil.targets.iter() {
            let jump = match name {
                "JUMP_TARGET" => Some(Jump::Jump),
                "EXIT_TARGET" => Some(Jump::Exit),
                _ => None,
            };
            match jump {
                Some(j) if (plan.n_targets as usize) < MAX_TARGETS => {
                    plan.targets[plan.n_targets as usize] = j;
                    plan.n_targets += 1;
                }
                _ => plan.unknown = plan.unknown.or(Some(name)),
            }
        }
        if plan.unknown.is_some() {
            plan.n_operands = UNKNOWN;
        }
        plan
    }

    /// How many operands an instance takes; an error for a stencil with a name the VM does
    /// not know.
    #[inline(always)]
    pub(super) fn operand_count(&self) -> Result<usize, String> {
        match self.n_operands as usize {
            n if n <= MAX_OPERANDS => Ok(n),
            _ => Err(self.unknown_error()),
        }
    }

    /// The values of an instance's operands (micro-op `u`'s, as this stencil reads them, in
    /// a trace whose exit stubs take `exit_pins`) into `out`: how many. An error for a
    /// stencil with a name the VM does not know, a local whose offset overflows or a wide
    /// division's divisor without a magic.
    #[inline(always)]
    pub(super) fn operands_of(
        &self,
        u: &Inst,
        exit_pins: u64,
        out: &mut [u64; MAX_OPERANDS],
    ) -> Result<usize, String> {
        let n = self.operand_count()?;
        for (value, operand) in out.iter_mut().zip(&self.operands[..n]) {
            *value = operand
                .value(u, exit_pins)
                .ok_or_else(|| self.overflow_error(u))?;
        }
        Ok(n)
    }

    #[cold]
    fn overflow_error(&self, u: &Inst) -> String {
        format!(
            "stencil {}: an operand has no value for operands {}, {}: a local's offset \
             overflows, or a division's divisor has no magic (a wide one: from 3 to 65535, no \
             power of two; any other: |d| from 2 to 2**47)",
            self.name, u.arg0, u.arg1
        )
    }

    #[cold]
    fn unknown_error(&self) -> String {
        format!(
            "stencil {} has an unknown operand or jump target {}",
            self.name,
            self.unknown.unwrap_or("(too many operands)")
        )
    }
}

/// Every operand name of the VM's stencils (vm/templates/stencil.h), as the kit lists a
/// stencil's operands: `LINK_SLOT` is read as two 32-bit halves, holes of their own
/// ([`HALF_NAMES`]). (`EXIT_TRACE`'s `ARG0` is no operand of theirs: they read it from the
/// exit's link block, [`crate::abi::ExitLink`].)
const STENCIL_OPERAND_NAMES: [&str; 15] = [
    "ARG0",
    "ARG1",
    "ARG1_RAW",
    "LOCAL0_AT",
    "LOCAL1_AT",
    "STACK_DEPTH",
    "SHIFT_COUNT",
    "MUL_FACTOR",
    "LINK_SLOT",
    "WIDE_MAGIC",
    "WIDE_SHIFT",
    "DIV_ABS",
    "DIV_SHIFT",
    "DIV_BIAS",
    "DIV_BIAS_QUOTIENT",
];
const STENCIL_OPERANDS: usize = STENCIL_OPERAND_NAMES.len();

/// The holes of the operands the stencils read as halves (`CPJIT_DECLARE_OPERAND_HALVES`):
/// each operand's high and low 32 bits. Only the exits' link slot: rebuilding a 64-bit
/// value from halves costs 3 to 4 ALU instructions per execution where a GOT slot costs one
/// load, so the wide operands of hot ops (`CONST_INT`'s boxed int, the divisions'
/// reciprocal, `GUARD_CALL_DEPTH`'s call site) stay whole: as halves they saved the compile
/// of calls.vm 55 instructions per micro-op and cost its run 8.8 % more instructions.
const HALF_NAMES: [(&str, &str, bool); 2] = [
    ("LINK_SLOT_HI", "LINK_SLOT", true),
    ("LINK_SLOT_LO", "LINK_SLOT", false),
];

/// Every name of a hole an operand's value fills in the VM's stencils: each operand (whole)
/// and each half of the operands read as halves (what a compiler of the stencils' IR, such
/// as the bench's LLVM peer, replaces by [`operand_value`]).
pub const OPERAND_NAMES: [&str; STENCIL_OPERANDS + HALF_NAMES.len()] = {
    let mut names = [""; STENCIL_OPERANDS + HALF_NAMES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = if i < STENCIL_OPERANDS {
            STENCIL_OPERAND_NAMES[i]
        } else {
            HALF_NAMES[i - STENCIL_OPERANDS].0
        };
        i += 1;
    }
    names
};

/// The value of stencil operand (or operand half) `name` for micro-op `u`: `ARG0` and
/// `ARG1` as they are, `ARG1_RAW` the raw int of `ARG1` (an int passed scaled), `LOCAL0_AT` and `LOCAL1_AT` the byte offsets from the frame of the
/// locals they name (the header, then 8 bytes per local), which the stencils use as their
/// loads' and stores' displacements, `STACK_DEPTH`, `SHIFT_COUNT` and `MUL_FACTOR` `ARG0`
/// again (a value-stack depth, a shift count, a factor, read as narrow operands), `LINK_SLOT`
/// `ARG1` again, `<NAME>_HI` and `<NAME>_LO` its halves, `WIDE_MAGIC` and
/// `WIDE_SHIFT` the magic and shift of a division by `ARG0`, `DIV_*` the other operands of
/// such a division ([`crate::trace::DivisorOperands`]); `None` for a name not
/// in [`OPERAND_NAMES`]. The runtime refuses a value
/// outside an operand's declared range (`u16`, `u8`, `s32`) when it patches.
pub fn operand_value(name: &str, u: &Inst) -> Option<u64> {
    if let Some(&(_, operand, high)) = HALF_NAMES.iter().find(|h| h.0 == name) {
        let v = Operand::of_name(operand)?.value(u, 0)?;
        return Some(if high { v >> 32 } else { v & 0xffff_ffff });
    }
    let operand = Operand::of_name(name).filter(|&o| o != Operand::ExitPins)?;
    operand.value(u, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::selected_set;

    /// Every stencil of the host's set has a plan: names the VM knows, operands that fit.
    #[test]
    fn every_stencil_of_the_set_has_known_names_and_at_most_max_operands() {
        let set = selected_set().expect("the host's set");
        for stencil in set.stencils {
            let plan = StencilPlan::of(stencil);
            assert_eq!(plan.unknown, None, "{}", stencil.name);
            assert!(plan.operand_count().is_ok(), "{}", stencil.name);
        }
    }

    /// `ARG1_RAW` is the int of a scaled `ARG1`, negative ones too (an arithmetic shift).
    #[test]
    fn the_raw_operand_is_the_int_of_the_scaled_one() {
        for c in [0i64, 1, -1, 3_000_000, -(1 << 47), (1 << 47) - 1] {
            let u = Inst {
                arg1: (c << 16) as u64,
                ..Inst::default()
            };
            assert_eq!(operand_value("ARG1_RAW", &u), Some(c as u64), "{c}");
        }
    }

    /// A name the VM does not know is refused when an instance is pushed.
    #[test]
    fn a_stencil_with_an_unknown_operand_is_refused_by_its_operand_count() {
        let set = selected_set().expect("the host's set");
        let with = |operands: &'static [&'static str]| {
            StencilPlan::of(&cpjit_model::Stencil {
                operands,
                targets: &[],
                ..set.stencils[0]
            })
        };
        assert_eq!(with(&["ARG0", "LOCAL1_AT"]).operand_count(), Ok(2));
        let e = with(&["ARG0", "NOT_AN_OPERAND"])
            .operand_count()
            .unwrap_err();
        assert!(
            e.contains("has an unknown operand or jump target NOT_AN_OPERAND"),
            "{e}"
        );
    }
}
