//! What an instance of a stencil may need besides its code and data: GOT slots and veneers.
//! Each step that may need one has a [`Need`] saying when it does ([`Bound`]) and what the
//! slot or veneer is known by ([`Key`]), so that `push` counts each once per trace; a
//! stencil's [`NeedFilter`] lets `push` skip the count for most instances.

use super::{branch_bias, copy, Action};
use crate::patch;
use cpjit_model::{Hole, HoleValue, OperandPart, Section, Stencil};

/// Whether a step may need a GOT slot or a veneer, which `finish` adds up (before the trace
/// is placed) to an upper bound of the slots and veneers it reserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// A plain tag byte (no niche in a field): `push` and `write` dispatch on it directly.
#[repr(u8)]
pub(crate) enum Bound {
    /// Never: the value is inside the trace, or a direct branch to the trace itself.
    Never,
    /// Unless the instance's operand fits: a relaxation probed on the stencil's bytes turns
    /// values that fit a sign-extended 32-bit (x86 `mov imm32`) or unsigned 32-bit
    /// (AArch64 `movz`/`movk`) immediate into code.
    /// `part` is the part of the operand the hole holds (a half always fits `movz`/`movk`).
    OperandAbove {
        operand: u16,
        part: OperandPart,
        signed32: bool,
    },
    /// When the instance's jump target `i` is an address outside the trace.
    Target(u16),
    /// When it continues outside the trace (the last instance, with a continuation).
    Continue,
    /// Only if the trace's code and data could be more than 1 GiB apart (a huge trace or
    /// chunk): an address inside the trace, which a direct reference reaches otherwise.
    Internal,
    /// Always.
    Always,
}

/// A step that may need a GOT slot (`got`) or a veneer (otherwise), which `push` counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Need {
    pub got: bool,
    pub bound: Bound,
    /// What the slot or veneer is known by when the instance is pushed, so that `push`
    /// counts each one once per trace, as `finish` will share it.
    pub key: Key,
}

impl Need {
    /// What the step of hole `h` (patched by `action`) may need, if anything.
    /// `probe` is a buffer to try relaxations in.
    pub(super) fn of(
        stencil: &Stencil<'_>,
        h: &Hole,
        action: Action,
        probe: &mut Vec<u8>,
    ) -> Option<Need> {
        let (got, bound) = match action {
            Action::Plain => return None,
            Action::Branch => (
                false,
                match h.value {
                    HoleValue::Target(t) => Bound::Target(t),
                    HoleValue::Continue => Bound::Continue,
                    HoleValue::Operand(_)
                    | HoleValue::OperandHigh(_)
                    | HoleValue::OperandLow(_)
                    | HoleValue::Symbol(_) => Bound::Always,
                    HoleValue::Code | HoleValue::Cold | HoleValue::Data => Bound::Never,
                },
            ),
            _ => (true, got_bound(stencil, h, action, probe)),
        };
        if bound == Bound::Never {
            return None;
        }
        let bias = if got {
            0
        } else {
            (h.addend as u64).wrapping_add(branch_bias(h.kind))
        };
        let key = match (h.value, h.value.operand()) {
            (HoleValue::Symbol(id), _) if bias == 0 => Key::Symbol(id),
            (_, Some((operand, part))) => Key::Operand {
                operand,
                part,
                bias,
            },
            _ => Key::Unknown,
        };
        Some(Need { got, bound, key })
    }
}

/// Merges the needs of one stencil that name the same GOT slot or veneer (equal `got` and
/// [`Key`], not [`Key::Unknown`]) into one, which counts when either did (the one that
/// always does, if either does): `push` then looks up an instance's operand loaded at
/// several holes once. (Counting an operand's slot per instance without the look-up, a
/// third of `count_each` on the reference VM's calls trace, reserved more than traces keep:
/// the arena test `one_chunk_commits_more_as_it_fills_and_reuses_before_growing` failed.)
pub(super) fn merge_shared(needs: &mut Vec<Need>) {
    let mut kept = 0;
    for i in 0..needs.len() {
        let n = needs[i];
        let shared = needs[..kept].iter_mut().find(|m| {
            m.got == n.got
                && m.key == n.key
                && n.key != Key::Unknown
                && (m.bound == n.bound || m.bound == Bound::Always || n.bound == Bound::Always)
                && ![m.bound, n.bound]
                    .iter()
                    .any(|b| matches!(b, Bound::Never | Bound::Continue | Bound::Internal))
        });
        match shared {
            Some(m) if n.bound == Bound::Always => m.bound = Bound::Always,
            Some(_) => {}
            None => {
                needs[kept] = n;
                kept += 1;
            }
        }
    }
    needs.truncate(kept);
}

/// What a GOT slot or veneer is known by when its instance is pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// A symbol, by its id: its GOT slot holds its address, and a veneer for a branch to
    /// it jumps to it exactly (no addend left), so all its holes share one.
    Symbol(u16),
    /// The instance's operand `operand` (its `part`): its value, plus `bias` (a branch's
    /// addend and bias: the veneer's destination; 0 for a GOT slot, which holds the value).
    Operand {
        operand: u16,
        part: OperandPart,
        bias: u64,
    },
    /// Not known before `finish` (a jump target, an address in the trace): counted per hole.
    Unknown,
}

/// What `push` tests, in a few comparisons, before it counts an instance's [`Need`]s one by
/// one: whether any of them can count for this instance. Most cannot (the operands fit
/// their immediates, the jump targets are instances of the trace, the symbols were counted
/// by an earlier instance), and then `push` skips the loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NeedFilter {
    /// Which needs count for an instance of this stencil unless ruled out: bits
    /// [`NeedFilter::ALWAYS`] (needs this filter cannot rule out), [`NeedFilter::OPERANDS`]
    /// (whole operands against one immediate range), [`NeedFilter::TARGETS`], and
    /// [`NeedFilter::SYMBOLS`] (`symbols` has a bit): 0 when nothing can count.
    pub flags: u8,
    /// Added to each operand before its upper 32 bits are tested (wrapping): `2^31` when the
    /// stencil's operand needs take a sign-extended 32-bit immediate, 0 when an unsigned
    /// one. An operand that passes fits every operand need of the stencil.
    pub operand_bias: u64,
    /// The symbols (ids below 32) whose GOT slot (bit `id`) or veneer (bit `32 + id`) the
    /// stencil always needs: counted once per trace, so ruled out once counted.
    pub symbols: u64,
}

impl NeedFilter {
    /// The stencil has needs that count whatever the instance's operands and targets.
    pub const ALWAYS: u8 = 1;
    /// An operand that does not fit [`NeedFilter::operand_bias`]'s range may count.
    pub const OPERANDS: u8 = 2;
    /// A jump target that is an address (outside the trace) may count.
    pub const TARGETS: u8 = 4;
    /// [`NeedFilter::symbols`] is not empty: so that `flags == 0` says that nothing can
    /// count, in one test (most stencils).
    pub const SYMBOLS: u8 = 8;

    /// The bit of symbol `id`'s GOT slot (`got`) or veneer in [`NeedFilter::symbols`], if
    /// the id has one.
    pub fn symbol_bit(got: bool, id: u16) -> Option<u64> {
        (id < 32).then(|| 1u64 << (id as u32 + if got { 0 } else { 32 }))
    }

    /// The filter of a stencil with these needs.
    pub(super) fn of(needs: &[Need]) -> NeedFilter {
        let mut f = NeedFilter::default();
        let mut signed = None;
        for n in needs {
            match (n.bound, n.key) {
                (Bound::Never | Bound::Continue, _) => {}
                (Bound::Target(_), _) => f.flags |= NeedFilter::TARGETS,
                (Bound::Always, Key::Symbol(id)) if NeedFilter::symbol_bit(n.got, id).is_some() => {
                    f.symbols |= NeedFilter::symbol_bit(n.got, id).unwrap_or(0)
                }
                // A half always fits an unsigned 32-bit immediate: it never counts.
                (
                    Bound::OperandAbove {
                        part: OperandPart::High | OperandPart::Low,
                        signed32: false,
                        ..
                    },
                    _,
                ) => {}
                (
                    Bound::OperandAbove {
                        part: OperandPart::Whole,
                        signed32,
                        ..
                    },
                    _,
                ) if signed.is_none_or(|s| s == signed32) => {
                    signed = Some(signed32);
                    f.flags |= NeedFilter::OPERANDS;
                }
                // Internal references, other operand checks, branches and loads that
                // always count: the loop decides.
                _ => f.flags |= NeedFilter::ALWAYS,
            }
        }
        f.operand_bias = if signed == Some(true) { 1 << 31 } else { 0 };
        if f.symbols != 0 {
            f.flags |= NeedFilter::SYMBOLS;
        }
        f
    }
}

/// When the GOT-form hole `h` (with `action`) may need a GOT slot. A relaxable form is
/// probed once on a copy of the stencil's code: if it relaxes for the value 0, it relaxes
/// for every value of the same immediate range, and for addresses inside the trace (which
/// are within reach of a direct reference).
fn got_bound(stencil: &Stencil<'_>, h: &Hole, action: Action, probe: &mut Vec<u8>) -> Bound {
    let offset = h.offset as usize;
    let (relaxes, signed32) = match action {
        Action::RelaxableGot if h.section == Section::Code => (
            patch::relax_x86_got_load_constant(h.kind, copy(probe, stencil.code), offset, 0)
                == Ok(true),
            true,
        ),
        Action::GotPair { ldr_offset, .. } => (
            patch::relax_aarch64_got_pair(
                copy(probe, stencil.code),
                offset,
                ldr_offset as usize,
                0,
                0,
            ) == Ok(true),
            false,
        ),
        _ => return Bound::Always,
    };
    match (h.value, h.value.operand()) {
        (_, Some((operand, part))) if relaxes => Bound::OperandAbove {
            operand,
            part,
            signed32,
        },
        // Inside the trace: `lea`/`adrp + add` reach it (the trace is < 2 GiB, see
        // `finish`'s size limit), whatever the instruction's register.
        (HoleValue::Code | HoleValue::Cold | HoleValue::Data, _)
            if action == Action::RelaxableGot || relaxes =>
        {
            Bound::Internal
        }
        _ => Bound::Always,
    }
}
