//! The cold tail of a stencil in a format without split sections (COFF, Mach-O, where LLVM
//! 19's machine function splitter cannot run): the layout pass puts the blocks that cannot
//! reach the continuation last (`layout::Cold::Tail`), so the hot path ends with the
//! function's last continuation jump; what follows it is moved into the stencil's cold
//! part, as the splitter's `<op>.cold` is on ELF.
//!
//! The assembler resolved the branches between the two without relocations; each one that
//! crosses the split becomes a hole (a [`HoleValue::Cold`] branch from the hot part, a
//! [`HoleValue::Code`] branch back from the tail), decoded by `cpjit_isa`. On x86-64 those
//! branches are first lengthened to `rel32` ([`lengthen`]), since a `rel8` cannot reach a
//! cold part laid after the trace. A function with anything else that could refer across
//! the split (a pc-relative load or address without a relocation, a relocation against the
//! function itself) is not split.

use cpjit_isa::{aarch64, continuation_jump, x86_64};
use cpjit_model::{Arch, HoleKind, HoleValue, Section};

use super::lengthen::{lengthen, Lengthened};
use super::{external, place, relocs_in, External, Piece, Place, RawHole};
use crate::object::error::ObjectError;
use crate::object::parsed::{ParsedObject, ParsedReloc, SectionKind};
use crate::object::ReadOptions;

/// Where a function splits, and on x86-64 its code with the crossing branches lengthened.
pub(super) struct Split {
    /// The old section offset of the tail's first byte.
    pub at: u64,
    pub lengthened: Option<Lengthened>,
}

/// Where the function `piece` splits: just after its last continuation jump, if code (not
/// only padding) follows it and nothing refers across the split but direct branches.
pub(super) fn split_point(obj: &ParsedObject, opts: &ReadOptions, piece: &Piece) -> Option<Split> {
    let section = &obj.sections[piece.section];
    let word = |at: u64| aarch64::read_insn(&section.bytes, at);
    let jump = continuation_jump(opts.arch);
    let is_jump = |at: u64| match opts.arch {
        Arch::Aarch64 => word(at).is_some_and(aarch64::is_b),
        Arch::X86_64 => at
            .checked_sub(jump.field_offset as u64)
            .and_then(|op| section.bytes.get(op as usize..at as usize))
            .is_some_and(|op| op == &jump.bytes[..jump.field_offset]),
        Arch::Riscv64 => false,
    };
    let last = relocs_in(obj, piece.section, piece.start, piece.end)
        .filter(|r| r.kind == Ok(jump.kind) && r.addend == jump.addend && is_jump(r.offset))
        .filter(|r| match place(obj, r) {
            Ok(Place::External(i)) => {
                external(&obj.symbols[i].name, opts).is_ok_and(|e| e == External::Continue)
            }
            _ => false,
        })
        .map(|r| r.offset)
        .max()?;
    let split = last + jump.kind.width() as u64;
    let rest = section.bytes.get(split as usize..piece.end as usize)?;
    // A COFF function runs to the next symbol: alignment padding after the jump is no tail.
    if rest.is_empty() || opts.arch == Arch::X86_64 && x86_64::is_padding(rest) {
        return None;
    }
    // A reference to the function from itself or from data (a jump table, a table of code
    // addresses) may point into the tail, or past a lengthened branch.
    let to_self = |r: &ParsedReloc| {
        matches!(place(obj, r), Ok(Place::Function(s, start, _))
            if (s, start) == (piece.section, piece.start))
    };
    let from_data = obj
        .sections
        .iter()
        .filter(|s| s.kind != SectionKind::Code)
        .flat_map(|s| &s.relocs);
    if relocs_in(obj, piece.section, piece.start, piece.end)
        .chain(from_data)
        .any(to_self)
    {
        return None;
    }
    match opts.arch {
        Arch::X86_64 => lengthen(obj, piece, split).map(|l| Split {
            at: split,
            lengthened: Some(l),
        }),
        _ => {
            let unrelocated_data_reference = (piece.start..piece.end).step_by(4).any(|at| {
                relocs_in(obj, piece.section, at, at + 4).next().is_none()
                    && word(at).is_some_and(aarch64::is_pc_relative_data)
            });
            (!unrelocated_data_reference).then_some(Split {
                at: split,
                lengthened: None,
            })
        }
    }
}

/// The holes of the direct branches between the hot part `pieces[0]` and the tail
/// `pieces[1]` (split off it at `pieces[1].start`): a branch into the tail refers to the
/// cold part (which the tail starts), one back to the hot part's code.
pub(super) fn crossing_branches(
    obj: &ParsedObject,
    pieces: &[Piece],
    lengthened: Option<&Lengthened>,
) -> Result<Vec<RawHole>, ObjectError> {
    let (hot, tail) = (pieces[0], pieces[1]);
    // Each unrelocated direct branch: its kind, field (new offset in the function) and
    // target (the same), with the tail's new start.
    let (branches, tail_start) = match lengthened {
        Some(l) => (x86_branches(l), l.relative(tail.start)),
        None => (aarch64_branches(obj, hot, tail)?, tail.start - hot.start),
    };
    let mut holes = Vec::new();
    for (kind, field, target, addend) in branches {
        let (from_tail, to_tail) = (field >= tail_start, target >= tail_start);
        if from_tail == to_tail {
            continue;
        }
        let (value, target) = if to_tail {
            (HoleValue::Cold, target - tail_start)
        } else {
            (HoleValue::Code, target)
        };
        let at = if from_tail {
            tail.at + (field - tail_start)
        } else {
            hot.at + field
        };
        holes.push((Section::Code, at, kind, Err(value), target as i64 + addend));
    }
    Ok(holes)
}

/// An x86-64 function's direct branches (all crossing ones are `rel32` by now): the rel32
/// field is the instruction's last four bytes, and the addend is −4 (relative to the field).
fn x86_branches(l: &Lengthened) -> Vec<(HoleKind, u64, u64, i64)> {
    l.branches
        .iter()
        .filter(|&&(_, len, _)| len > 2)
        .map(|&(at, len, target)| (HoleKind::X86Branch32, at + len - 4, target, -4))
        .collect()
}

/// An AArch64 function's unrelocated branches that stay within it, by offset from `hot`'s
/// start.
fn aarch64_branches(
    obj: &ParsedObject,
    hot: Piece,
    tail: Piece,
) -> Result<Vec<(HoleKind, u64, u64, i64)>, ObjectError> {
    let section = &obj.sections[hot.section];
    let mut branches = Vec::new();
    for at in (hot.start..tail.end).step_by(4) {
        let Some(insn) = aarch64::read_insn(&section.bytes, at) else {
            return Err(ObjectError::truncated(
                "instruction past the function's end",
            ));
        };
        let Some(kind) = aarch64::branch_kind(insn) else {
            continue;
        };
        if relocs_in(obj, hot.section, at, at + 4).next().is_some() {
            continue;
        }
        let target = at.wrapping_add_signed(aarch64::branch_addend(insn, kind));
        if (hot.start..tail.end).contains(&target) {
            branches.push((kind, at - hot.start, target - hot.start, 0));
        }
    }
    Ok(branches)
}

/// The tests' objects: one function `op_t` whose tail the reader moves, in each format the
/// tests use, and the options that read it.
#[cfg(test)]
pub(super) mod fixture {
    use crate::manifest::Limits;
    use crate::object::assemble::assemble;
    use crate::object::parsed::{
        Definition, ParsedObject, ParsedReloc, ParsedSection, ParsedSymbol, RelocTarget,
        SectionKind,
    };
    use crate::object::ReadOptions;
    use crate::stencil::StencilBuf;
    use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat};

    /// An object of one code section, all of it function `op_t` (`bytes`), whose one
    /// relocation is its jump to `_JIT_CONTINUE` at `jump_at`, spelt as `format` spells it
    /// for `arch` (x86-64 COFF or AArch64 Mach-O).
    pub fn object(arch: Arch, format: ObjectFormat, bytes: Vec<u8>, jump_at: u64) -> ParsedObject {
        let (section, align, type_name, kind, addend) = match (arch, format) {
            (Arch::X86_64, ObjectFormat::Coff) => (
                ".text",
                1,
                "IMAGE_REL_AMD64_REL32",
                HoleKind::X86Branch32,
                -4,
            ),
            (Arch::Aarch64, ObjectFormat::MachO) => (
                "__TEXT,__text",
                4,
                "ARM64_RELOC_BRANCH26",
                HoleKind::Aarch64Branch26,
                0,
            ),
            other => panic!("no test object for {other:?}"),
        };
        let op_t = Definition {
            section: 0,
            offset: 0,
            size: None,
            starts_range: true,
        };
        ParsedObject {
            sections: vec![ParsedSection {
                name: section.into(),
                kind: SectionKind::Code,
                align,
                size: bytes.len() as u64,
                bytes,
                relocs: vec![ParsedReloc {
                    offset: jump_at,
                    type_name: type_name.into(),
                    kind: Ok(kind),
                    target: RelocTarget::Symbol(1),
                    addend,
                }],
            }],
            symbols: vec![
                ParsedSymbol {
                    name: "op_t".into(),
                    definition: Some(op_t),
                },
                ParsedSymbol {
                    name: "_JIT_CONTINUE".into(),
                    definition: None,
                },
            ],
            unrelocated_locals: vec![],
        }
    }

    /// The options that read `op_t` from an object of `arch` and `format`, its cold tail
    /// moved.
    pub fn options(arch: Arch, format: ObjectFormat, limits: &Limits) -> ReadOptions<'_> {
        ReadOptions {
            target: "t",
            arch,
            format,
            template: "t.c",
            hole_prefix: "_JIT_",
            target_suffix: "_TARGET",
            select: &|n: &str| n == "op_t",
            limits,
            move_cold_tail: true,
        }
    }

    /// `s`'s holes as `(offset, kind, value, addend)`.
    pub fn holes(s: &StencilBuf) -> Vec<(u32, HoleKind, HoleValue, i64)> {
        s.holes
            .iter()
            .map(|h| (h.offset, h.kind, h.value, h.addend))
            .collect()
    }

    /// The stencil `op_t` of `obj`.
    pub fn read(obj: &ParsedObject, arch: Arch, format: ObjectFormat) -> StencilBuf {
        let limits = Limits::default();
        assemble(obj, &options(arch, format, &limits))
            .unwrap()
            .remove(0)
    }
}

#[cfg(test)]
mod tests {
    use super::fixture;
    use crate::object::parsed::ParsedObject;
    use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat};

    /// `op_t`: `cbz x0, tail`; `b CONTINUE`; tail: `b.eq` back to the `cbz`, `ret`; with
    /// `extra` appended to the tail.
    fn object(extra: &[u32]) -> ParsedObject {
        let mut words = vec![
            0xb400_0040u32,
            0x1400_0000,
            0x5400_0000 | (0x7_fffe << 5),
            0xd65f_03c0,
        ];
        words.extend_from_slice(extra);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        fixture::object(Arch::Aarch64, ObjectFormat::MachO, bytes, 4)
    }

    #[test]
    fn the_tail_moves_and_branches_across_become_holes() {
        let s = fixture::read(&object(&[]), Arch::Aarch64, ObjectFormat::MachO);
        assert!(s.elided_continue, "{}", s.to_text());
        assert_eq!((s.code.len(), s.cold_len), (12, 8), "{}", s.to_text());
        assert_eq!(
            fixture::holes(&s),
            [
                (0, HoleKind::Aarch64Branch19, HoleValue::Cold, 0),
                (4, HoleKind::Aarch64Branch19, HoleValue::Code, 0),
            ],
            "{}",
            s.to_text()
        );
    }

    #[test]
    fn a_pc_relative_address_without_relocation_keeps_the_function_whole() {
        // adr x1, .-8 (into the hot part): no relocation says where it points.
        let s = fixture::read(&object(&[0x10ff_ffc1]), Arch::Aarch64, ObjectFormat::MachO);
        assert!(!s.elided_continue && s.cold_len == 0, "{}", s.to_text());
    }
}
