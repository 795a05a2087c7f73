//! The cold tail of an AArch64 stencil in a format without split sections (COFF, Mach-O,
//! where LLVM 19's machine function splitter cannot run): the layout pass puts the blocks
//! that cannot reach the continuation last (`layout::ColdLayout::Tail`), so the hot path
//! ends with the function's last continuation jump; what follows it is moved into the
//! stencil's cold part, as the splitter's `<op>.cold` is on ELF.
//!
//! The assembler resolved the branches between the two without relocations; each one that
//! crosses the split becomes a hole (a [`HoleValue::Cold`] branch from the hot part, a
//! [`HoleValue::Code`] branch back from the tail), decoded by `cpjit_isa::aarch64`. A
//! function with anything else that could refer across the split (a pc-relative load or
//! address without a relocation, a relocation against the function itself) is not split.

use cpjit_isa::aarch64;
use cpjit_model::{HoleKind, HoleValue, Section};

use super::{external, place, relocs_in, External, Piece, Place, RawHole};
use crate::object::error::ObjectError;
use crate::object::parsed::ParsedObject;
use crate::object::ReadOptions;

/// Where the function `piece` splits: just after its last continuation jump (`b` to
/// `<prefix>CONTINUE`), if code follows it and nothing refers across the split but direct
/// branches.
pub(super) fn split_point(obj: &ParsedObject, opts: &ReadOptions, piece: &Piece) -> Option<u64> {
    let section = &obj.sections[piece.section];
    let word = |at: u64| aarch64::read_insn(&section.bytes, at);
    let jump = relocs_in(obj, piece.section, piece.start, piece.end)
        .filter(|r| matches!(r.kind, Ok(HoleKind::Aarch64Branch26)) && r.addend == 0)
        .filter(|r| word(r.offset).is_some_and(aarch64::is_b))
        .filter(|r| match place(obj, r) {
            Ok(Place::External(i)) => {
                external(&obj.symbols[i].name, opts).is_ok_and(|e| e == External::Continue)
            }
            _ => false,
        })
        .map(|r| r.offset)
        .max()?;
    let split = jump + 4;
    if split >= piece.end {
        return None;
    }
    let self_reference = relocs_in(obj, piece.section, piece.start, piece.end).any(|r| {
        matches!(place(obj, r), Ok(Place::Function(s, start, _))
            if (s, start) == (piece.section, piece.start))
    });
    let unrelocated_data_reference = (piece.start..piece.end).step_by(4).any(|at| {
        relocs_in(obj, piece.section, at, at + 4).next().is_none()
            && word(at).is_some_and(aarch64::is_pc_relative_data)
    });
    (!self_reference && !unrelocated_data_reference).then_some(split)
}

/// The holes of the direct branches between the hot part `pieces[0]` and the tail
/// `pieces[1]` (split off it at `pieces[1].start`): a branch into the tail refers to the
/// cold part (which the tail starts), one back to the hot part's code.
pub(super) fn crossing_branches(
    obj: &ParsedObject,
    pieces: &[Piece],
) -> Result<Vec<RawHole>, ObjectError> {
    let (hot, tail) = (pieces[0], pieces[1]);
    let section = &obj.sections[hot.section];
    let mut holes = Vec::new();
    for piece in [hot, tail] {
        for at in (piece.start..piece.end).step_by(4) {
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
            let (from_tail, to_tail) = (at >= tail.start, target >= tail.start);
            if from_tail == to_tail || !(hot.start..tail.end).contains(&target) {
                continue;
            }
            let (value, addend) = if to_tail {
                (HoleValue::Cold, target - tail.start)
            } else {
                (HoleValue::Code, target - hot.start)
            };
            holes.push((
                Section::Code,
                piece.at + (at - piece.start),
                kind,
                Err(value),
                addend as i64,
            ));
        }
    }
    Ok(holes)
}

#[cfg(test)]
mod tests {
    use crate::object::assemble::assemble;
    use crate::object::parsed::{
        Definition, ParsedObject, ParsedReloc, ParsedSection, ParsedSymbol, RelocTarget,
        SectionKind,
    };
    use crate::object::ReadOptions;
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
        let symbol = |name: &str, definition| ParsedSymbol {
            name: name.into(),
            definition,
        };
        ParsedObject {
            sections: vec![ParsedSection {
                name: "__TEXT,__text".into(),
                kind: SectionKind::Code,
                align: 4,
                size: bytes.len() as u64,
                bytes,
                relocs: vec![ParsedReloc {
                    offset: 4,
                    type_name: "ARM64_RELOC_BRANCH26".into(),
                    kind: Ok(HoleKind::Aarch64Branch26),
                    target: RelocTarget::Symbol(1),
                    addend: 0,
                }],
            }],
            symbols: vec![
                symbol(
                    "op_t",
                    Some(Definition {
                        section: 0,
                        offset: 0,
                        size: None,
                        starts_range: true,
                    }),
                ),
                symbol("_JIT_CONTINUE", None),
            ],
            unrelocated_locals: vec![],
        }
    }

    fn read(obj: &ParsedObject) -> crate::stencil::StencilBuf {
        let limits = crate::manifest::Limits::default();
        let opts = ReadOptions {
            target: "t",
            arch: Arch::Aarch64,
            format: ObjectFormat::MachO,
            template: "t.c",
            hole_prefix: "_JIT_",
            target_suffix: "_TARGET",
            select: &|n: &str| n == "op_t",
            limits: &limits,
            move_cold_tail: true,
        };
        assemble(obj, &opts).unwrap().remove(0)
    }

    #[test]
    fn the_tail_moves_and_branches_across_become_holes() {
        let s = read(&object(&[]));
        assert!(s.elided_continue, "{}", s.to_text());
        assert_eq!((s.code.len(), s.cold_len), (12, 8), "{}", s.to_text());
        let holes: Vec<_> = s
            .holes
            .iter()
            .map(|h| (h.offset, h.kind, h.value, h.addend))
            .collect();
        assert_eq!(
            holes,
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
        let s = read(&object(&[0x10ff_ffc1]));
        assert!(!s.elided_continue && s.cold_len == 0, "{}", s.to_text());
    }
}
