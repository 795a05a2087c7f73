//! Per-stencil patch programs, compiled once in [`Jit::new`](crate::Jit::new) so that
//! `finish` does per instance only a copy and a tight loop over a short list of steps.
//!
//! A [`Program`] holds what never changes between instances of one stencil: its code and
//! data bytes with their alignment, and one [`Step`] per hole (or per adjacent AArch64 GOT
//! pair) saying where in the instance the hole is, where its value comes from and how it
//! is written ([`Action`]). The per-architecture facts `finish` needs (trap byte, tail jump,
//! veneer builder) are gathered once in [`ArchFacts`], so that the stitcher has no `match`
//! on the architecture.

use crate::patch;
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Section, Stencil, StencilSet};

/// Where a hole's value comes from, per instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The instance's operand `i` (a constant).
    Operand(u16),
    /// The instance's jump target `i`.
    Target(u16),
    /// The next instance, or the trace's continuation after the last one.
    Continue,
    /// The instance's own code.
    Code,
    /// The instance's own data.
    Data,
    /// External symbol `i`, resolved through the [`Jit`](crate::Jit)'s cache.
    Symbol(u16),
}

/// How a hole is written once its value is known; decided once per stencil from its kind,
/// addend and neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Patched as is (`S + A`).
    Plain,
    /// A direct branch: through a veneer if the destination is outside the trace and out
    /// of range.
    Branch,
    /// A load through a GOT slot holding the value.
    Got,
    /// An x86-64 GOT load (`REX_GOTPCRELX`, addend −4): relaxed to an immediate or a direct
    /// address where the value allows it, otherwise through a GOT slot.
    RelaxableGot,
    /// An AArch64 `adrp` + `ldr` GOT pair (this step is the `adrp`; the `ldr` is the
    /// stencil's hole `ldr_hole` at `ldr_offset`): relaxed to code that materialises the
    /// value where possible, otherwise both patched through a GOT slot.
    GotPair { ldr_hole: u16, ldr_offset: u32 },
}

/// Whether a step may need a GOT slot or a veneer, which `finish` adds up (before the trace
/// is placed) to an upper bound of the slots and veneers it reserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Never: the value is inside the trace, or a direct branch to the trace itself.
    Never,
    /// Unless the instance's operand fits: a relaxation probed on the stencil's bytes turns
    /// values that fit a sign-extended 32-bit (x86 `mov imm32`) or unsigned 32-bit
    /// (AArch64 `movz`/`movk`) immediate into code.
    OperandAbove { operand: u16, signed32: bool },
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

/// One hole of a stencil, ready to patch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    /// Offset of the hole into the instance's code or data.
    pub offset: u32,
    /// Index of the hole in the stencil (for errors).
    pub hole: u16,
    pub section: Section,
    pub kind: HoleKind,
    pub source: Source,
    pub addend: i64,
    pub action: Action,
    /// What was checked once, on the stencil's own bytes, of the instruction around the hole.
    pub checked: Checked,
}

/// What [`Program::new`] checked of a hole's instruction on the stencil's bytes, so that
/// `finish` only repeats the checks that depend on the value (range, alignment). Holes
/// checked here are x86-64 rel32 fields, whose instruction bytes (before the field) are the
/// stencil's own and never change between instances; every other hole, and one whose check
/// failed here, is checked in full by [`patch::patch`] per instance (which reports the
/// error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Nothing: the patch function checks everything.
    Nothing,
    /// An x86-64 rel32 field whose instruction is the class its kind patches: writing it
    /// only needs the displacement's range.
    Rel32,
    /// As `Rel32`, and a relaxable GOT reference decoded once into its site.
    X86GotSite(cpjit_isa::x86_64::GotSite),
}

/// A step that may need a GOT slot (`got`) or a veneer (otherwise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Need {
    /// Index into [`Program::steps`].
    pub step: u16,
    pub got: bool,
    pub bound: Bound,
}

/// Everything `finish` needs of one stencil.
pub(crate) struct Program {
    pub steps: Box<[Step]>,
    /// The steps that may need a GOT slot or a veneer.
    pub needs: Box<[Need]>,
    /// The stencil's code and data sizes and alignments (copied here so that laying out a
    /// trace reads one table).
    pub code_len: u32,
    pub data_len: u32,
    pub code_align: u32,
    pub data_align: u32,
    /// Operands and jump targets an instance takes, and whether the stencil is the set's
    /// entry shim (checked by `push`).
    pub operands: u16,
    pub targets: u16,
    pub shim: bool,
}

impl Program {
    /// Compiles `stencil`'s holes, which [`Jit::new`](crate::Jit::new) has validated (each
    /// lies inside its section and refers to an operand, target or symbol that exists).
    pub fn new(stencil: &Stencil<'_>, shim: bool) -> Program {
        let mut steps = Vec::with_capacity(stencil.holes.len());
        let mut needs = Vec::new();
        let mut i = 0;
        while i < stencil.holes.len() {
            let h = &stencil.holes[i];
            if h.kind == HoleKind::EntryParameters {
                // A marker (the shim's parameter count, see `Jit::shim`): nothing to patch.
                i += 1;
                continue;
            }
            let next = stencil.holes[i + 1..]
                .iter()
                .find(|n| n.kind != HoleKind::EntryParameters);
            let action = match next {
                Some(ldr) if is_adjacent_got_pair(h, ldr) => Action::GotPair {
                    ldr_hole: (i + 1) as u16,
                    ldr_offset: ldr.offset,
                },
                _ if h.kind.is_relaxable_x86_got() && h.addend == -4 => Action::RelaxableGot,
                _ if h.kind.uses_got() => Action::Got,
                _ if h.kind.is_branch() => Action::Branch,
                _ => Action::Plain,
            };
            let need = match action {
                Action::Plain => None,
                Action::Branch => Some(Need {
                    step: steps.len() as u16,
                    got: false,
                    bound: match h.value {
                        HoleValue::Target(t) => Bound::Target(t),
                        HoleValue::Continue => Bound::Continue,
                        HoleValue::Operand(_) | HoleValue::Symbol(_) => Bound::Always,
                        HoleValue::Code | HoleValue::Data => Bound::Never,
                    },
                }),
                _ => Some(Need {
                    step: steps.len() as u16,
                    got: true,
                    bound: got_bound(stencil, h, action),
                }),
            };
            needs.extend(need.filter(|n| n.bound != Bound::Never));
            steps.push(Step {
                offset: h.offset,
                hole: i as u16,
                section: h.section,
                kind: h.kind,
                source: source(h.value),
                addend: h.addend,
                action,
                checked: checked(stencil, h),
            });
            i += if matches!(action, Action::GotPair { .. }) {
                2
            } else {
                1
            };
        }
        Program {
            steps: steps.into_boxed_slice(),
            needs: needs.into_boxed_slice(),
            code_len: stencil.code.len() as u32,
            data_len: stencil.data_len,
            code_align: stencil.code_align,
            data_align: stencil.data_align,
            operands: stencil.operands.len() as u16,
            targets: stencil.targets.len() as u16,
            shim,
        }
    }
}

/// The programs of every stencil of `set`, by stencil index.
pub(crate) fn compile(set: &StencilSet<'_>) -> Box<[Program]> {
    set.stencils
        .iter()
        .enumerate()
        .map(|(i, s)| Program::new(s, set.shim == Some(i as u16)))
        .collect()
}

/// What can be checked once of hole `h`'s instruction (see [`Checked`]): the patch
/// function itself is the judge, run on a copy of the stencil's code with a value (0 at
/// place 0) that is in range for every rel32.
fn checked(stencil: &Stencil<'_>, h: &Hole) -> Checked {
    let rel32 = matches!(
        h.kind,
        HoleKind::X86Pc32
            | HoleKind::X86GotPc32
            | HoleKind::X86Branch32
            | HoleKind::X86GotPc32Relaxable
            | HoleKind::X86RexGotPc32Relaxable
    );
    if !rel32 || h.section != Section::Code {
        return Checked::Nothing;
    }
    let mut probe = stencil.code.to_vec();
    let offset = h.offset as usize;
    if patch::patch(h.kind, &mut probe, offset, 0, 0).is_err() {
        return Checked::Nothing;
    }
    if !h.kind.is_relaxable_x86_got() {
        return Checked::Rel32;
    }
    let has_rex = h.kind == HoleKind::X86RexGotPc32Relaxable;
    match cpjit_isa::x86_64::decode_got_site(stencil.code, offset, has_rex) {
        Ok(site) => Checked::X86GotSite(site),
        Err(_) => Checked::Nothing,
    }
}

fn source(value: HoleValue) -> Source {
    match value {
        HoleValue::Operand(i) => Source::Operand(i),
        HoleValue::Target(i) => Source::Target(i),
        HoleValue::Continue => Source::Continue,
        HoleValue::Code => Source::Code,
        HoleValue::Data => Source::Data,
        HoleValue::Symbol(i) => Source::Symbol(i),
    }
}

/// When the GOT-form hole `h` (with `action`) may need a GOT slot. A relaxable form is
/// probed once on a copy of the stencil's code: if it relaxes for the value 0, it relaxes
/// for every value of the same immediate range, and for addresses inside the trace (which
/// are within reach of a direct reference).
fn got_bound(stencil: &Stencil<'_>, h: &Hole, action: Action) -> Bound {
    let mut probe = stencil.code.to_vec();
    let offset = h.offset as usize;
    let (relaxes, signed32) = match action {
        Action::RelaxableGot if h.section == Section::Code => (
            patch::relax_x86_got_load_constant(h.kind, &mut probe, offset, 0) == Ok(true),
            true,
        ),
        Action::GotPair { ldr_offset, .. } => (
            patch::relax_aarch64_got_pair(&mut probe, offset, ldr_offset as usize, 0, 0)
                == Ok(true),
            false,
        ),
        _ => return Bound::Always,
    };
    match h.value {
        HoleValue::Operand(operand) if relaxes => Bound::OperandAbove { operand, signed32 },
        // Inside the trace: `lea`/`adrp + add` reach it (the trace is < 2 GiB, see
        // `finish`'s size limit), whatever the instruction's register.
        HoleValue::Code | HoleValue::Data if action == Action::RelaxableGot || relaxes => {
            Bound::Internal
        }
        _ => Bound::Always,
    }
}

/// An AArch64 GOT load of one value, `adrp xN, G` immediately followed by its
/// `ldr xN, [xN, lo12(G)]`, with no addend. Only adjacent pairs are relaxed: then nothing
/// can read the page address in between, and the `ldr` overwrites it, so rewriting the
/// pair cannot change what any other instruction sees.
fn is_adjacent_got_pair(adrp: &Hole, ldr: &Hole) -> bool {
    adrp.section == Section::Code
        && ldr.section == Section::Code
        && adrp.kind == HoleKind::Aarch64AdrGotPage21
        && ldr.kind == HoleKind::Aarch64Ld64GotLo12
        && ldr.offset == adrp.offset + 4
        && adrp.value == ldr.value
        && adrp.addend == 0
        && ldr.addend == 0
}

/// What the stitcher needs to know about the architecture, gathered in one place.
pub(crate) struct ArchFacts {
    /// Byte that fills unused code: a trapping instruction (`int3`; `udf #0` as zeros).
    pub trap: u8,
    /// The jump appended when a trace continues elsewhere, its hole kind, the hole's
    /// offset into it and its addend.
    pub tail_jump: &'static [u8],
    pub tail_kind: HoleKind,
    pub tail_hole_offset: u32,
    pub tail_addend: i64,
    /// Size of one veneer, and how to write one that jumps to an address.
    pub veneer_size: usize,
    pub write_veneer: fn(&mut [u8], u64),
    /// How far (bytes) a direct branch reaches; used to place chunks near the helpers.
    pub reach: u64,
}

impl ArchFacts {
    pub fn of(arch: Arch) -> ArchFacts {
        // The continuation jump and veneers come from the ISA crate, the one owner of
        // encodings; a trap byte and a branch reach are all that is left per architecture.
        let jump = cpjit_isa::continuation_jump(arch);
        let (trap, write_veneer, reach): (u8, fn(&mut [u8], u64), u64) = match arch {
            // int3; rel32 reaches ±2 GiB (less a margin for the trace itself).
            Arch::X86_64 => (
                0xcc,
                |out, to| out.copy_from_slice(&patch::x86_64_veneer(to)),
                (1 << 31) - (64 << 20),
            ),
            // udf #0; b/bl reach ±128 MiB.
            Arch::Aarch64 => (
                0x00,
                |out, to| out.copy_from_slice(&patch::aarch64_veneer(to)),
                128 << 20,
            ),
            // An all-zero word is illegal; auipc pairs reach ±2 GiB.
            Arch::Riscv64 => (
                0x00,
                |out, to| out.copy_from_slice(&patch::riscv64_veneer(to)),
                (1 << 31) - (64 << 20),
            ),
        };
        ArchFacts {
            trap,
            tail_jump: jump.bytes,
            tail_kind: jump.kind,
            tail_hole_offset: jump.field_offset as u32,
            tail_addend: jump.addend,
            veneer_size: cpjit_isa::veneer_size(arch),
            write_veneer,
            reach,
        }
    }

    /// The hole of the tail jump placed at `at` in the trace's code.
    pub fn tail_hole(&self, at: u32) -> Hole {
        Hole {
            section: Section::Code,
            offset: at + self.tail_hole_offset,
            kind: self.tail_kind,
            value: HoleValue::Continue,
            addend: self.tail_addend,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn hole(offset: u32, kind: HoleKind, value: HoleValue, addend: i64) -> Hole {
        Hole {
            section: Section::Code,
            offset,
            kind,
            value,
            addend,
        }
    }

    #[test]
    fn steps_pair_got_loads_and_count_slots_and_far_branches() {
        let holes = [
            hole(0, HoleKind::Aarch64AdrGotPage21, HoleValue::Operand(0), 0),
            hole(4, HoleKind::Aarch64Ld64GotLo12, HoleValue::Operand(0), 0),
            hole(8, HoleKind::Aarch64Branch26, HoleValue::Symbol(0), 0),
            hole(12, HoleKind::Aarch64AdrGotPage21, HoleValue::Operand(1), 0),
            hole(20, HoleKind::Aarch64Ld64GotLo12, HoleValue::Operand(1), 0),
            hole(24, HoleKind::Aarch64Branch26, HoleValue::Code, 0),
        ];
        let stencil = Stencil {
            name: "op",
            code: &[0; 28],
            code_align: 4,
            init_data: &[],
            data_len: 0,
            data_align: 1,
            zero_fill: &[],
            holes: &holes,
            operands: &["A", "B"],
            targets: &[],
            symbols: &[],
            falls_through: true,
        };
        let p = Program::new(&stencil, false);
        let actions: Vec<Action> = p.steps.iter().map(|s| s.action).collect();
        assert_eq!(
            actions,
            [
                Action::GotPair {
                    ldr_hole: 1,
                    ldr_offset: 4
                },
                Action::Branch,
                Action::Got, // not adjacent: each hole on its own
                Action::Got,
                Action::Branch,
            ]
        );
        // The code is zeros, not an `adrp`: the pair does not relax, so it always needs a
        // slot; the branch to the instance's own code never needs a veneer.
        let needs: Vec<(bool, Bound)> = p.needs.iter().map(|n| (n.got, n.bound)).collect();
        assert_eq!(
            p.needs.iter().map(|n| n.step).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(
            needs,
            [
                (true, Bound::Always),
                (false, Bound::Always),
                (true, Bound::Always),
                (true, Bound::Always)
            ]
        );
        assert_eq!(p.steps[1].hole, 2);
    }
}
