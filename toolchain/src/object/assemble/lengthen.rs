//! An x86-64 function's direct branches lengthened so that every one crossing its cold
//! tail's split point is a `jmp`/`jcc rel32` (`tail.rs` moves the tail into the cold part,
//! which the runtime lays after the trace: a `rel8` cannot reach it, a `rel32` is a hole).
//!
//! The assembler resolved the function's own branches without relocations and chose `rel8`
//! where the target was near. The function is decoded whole (instruction boundaries from
//! LLVM's disassembler, the branch forms from `cpjit_isa::x86_64`), each crossing `rel8`
//! is re-encoded as `rel32` (2 bytes grow to 5 or 6), the code after it shifts, and every
//! direct branch gets its displacement again (a `rel8` pushed out of range grows too, until
//! none does). Relocations move with their instructions ([`Lengthened::map`]), so nothing
//! but unrelocated branches needs fixing: the function is left whole (`None`) when anything
//! else could refer within it without a relocation (a RIP-relative operand, a `call`,
//! `loop` or `jrcxz`, a branch into the middle of an instruction) or when a byte does not
//! decode.

use cpjit_isa::x86_64::{self, DirectBranch};

use super::{emit_width, relocs_in, Piece};
use crate::object::parsed::ParsedObject;
use crate::stencil::grown_before;

/// A function's code with its direct branches lengthened (see the module docs).
#[derive(Debug)]
pub(super) struct Lengthened {
    /// The function's section and old start.
    pub section: usize,
    start: u64,
    /// The function's new bytes (its old range `start..end`, grown).
    pub bytes: Vec<u8>,
    /// Each lengthened instruction's old section offset and how many bytes it grew, in
    /// order.
    pub growth: Vec<(u64, u64)>,
    /// Every direct branch without a relocation: its new offset and length in the function,
    /// and its target's new offset.
    pub branches: Vec<(u64, u64, u64)>,
}

impl Lengthened {
    /// The new offset of old section offset `offset` (an instruction start, or a field in an
    /// instruction that did not grow).
    pub fn map(&self, offset: u64) -> u64 {
        offset + grown_before(&self.growth, offset)
    }

    /// Where old section offset `offset` of `piece` lies from the piece's start: moved by
    /// the growth when the piece is part of this function (the hot part or the tail).
    pub fn piece_offset(this: Option<&Self>, piece: &Piece, offset: u64) -> u64 {
        match this {
            Some(l) if l.section == piece.section => l.map(offset) - l.map(piece.start),
            _ => offset - piece.start,
        }
    }

    /// The function's new offset of old section offset `offset`.
    pub fn relative(&self, offset: u64) -> u64 {
        self.map(offset) - self.start
    }
}

/// One instruction of the function: its old offset in the function, its length, and the
/// direct branch it is (unrelocated) with its target's instruction index.
struct Insn {
    at: u64,
    len: u64,
    branch: Option<(DirectBranch, usize)>,
}

/// The function `piece` with every direct branch that crosses old section offset `split`
/// as `rel32`; `None` where the function cannot be transformed safely (module docs).
pub(super) fn lengthen(obj: &ParsedObject, piece: &Piece, split: u64) -> Option<Lengthened> {
    let insns = decode(obj, piece)?;
    let crossing = |i: &Insn, target: usize| {
        (piece.start + i.at < split) != (piece.start + insns[target].at < split)
    };
    // Which branches are long: rel32 already, crossing, or pushed out of rel8's range.
    let mut long: Vec<bool> = insns
        .iter()
        .map(|i| i.branch.is_some_and(|(b, t)| !b.short || crossing(i, t)))
        .collect();
    let starts = loop {
        let starts = new_starts(&insns, &long);
        let mut changed = false;
        for (k, i) in insns.iter().enumerate() {
            if let Some((_, t)) = i.branch.filter(|_| !long[k]) {
                let end = starts[k] + 2;
                if i8::try_from(starts[t] as i64 - end as i64).is_err() {
                    long[k] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break starts;
        }
    };
    let bytes = &obj.sections[piece.section].bytes;
    let mut out = Vec::with_capacity(starts[insns.len()] as usize);
    let mut growth = Vec::new();
    let mut branches = Vec::new();
    for (k, i) in insns.iter().enumerate() {
        let old = &bytes[(piece.start + i.at) as usize..(piece.start + i.at + i.len) as usize];
        let Some((b, t)) = i.branch else {
            out.extend_from_slice(old);
            continue;
        };
        let len = branch_len(b, long[k]);
        let displacement = i32::try_from(starts[t] as i64 - (starts[k] + len) as i64).ok()?;
        let new = DirectBranch {
            short: !long[k],
            displacement,
            ..b
        };
        out.extend_from_slice(&x86_64::encode_direct_branch(new)?[..len as usize]);
        if len > i.len {
            growth.push((piece.start + i.at, len - i.len));
        }
        branches.push((starts[k], len, starts[t]));
    }
    Some(Lengthened {
        section: piece.section,
        start: piece.start,
        bytes: out,
        growth,
        branches,
    })
}

/// The length of `branch` in its short or long form.
fn branch_len(branch: DirectBranch, long: bool) -> u64 {
    DirectBranch {
        short: !long,
        ..branch
    }
    .encoded_len() as u64
}

/// Each instruction's new start, and the function's new end last.
fn new_starts(insns: &[Insn], long: &[bool]) -> Vec<u64> {
    let mut at = 0;
    let mut starts = Vec::with_capacity(insns.len() + 1);
    for (i, &l) in insns.iter().zip(long) {
        starts.push(at);
        at += i.branch.map_or(i.len, |(b, _)| branch_len(b, l));
    }
    starts.push(at);
    starts
}

/// The function's instructions, with its unrelocated direct branches and their targets;
/// `None` if a byte does not decode, a branch lands between instruction starts, or an
/// unrelocated instruction refers relative to itself in another way.
fn decode(obj: &ParsedObject, piece: &Piece) -> Option<Vec<Insn>> {
    let bytes = &obj.sections[piece.section].bytes[piece.start as usize..piece.end as usize];
    let listing = crate::disasm::disassemble("x86_64", bytes).ok()?;
    let index: std::collections::HashMap<u64, usize> = listing
        .iter()
        .enumerate()
        .map(|(k, i)| (u64::from(i.offset), k))
        .chain([(bytes.len() as u64, listing.len())])
        .collect();
    // The function's relocation offsets, sorted: one pass over the section's relocations.
    let mut relocated: Vec<(u64, u64)> = relocs_in(obj, piece.section, piece.start, piece.end)
        .map(|r| (r.offset, r.offset + emit_width(r)))
        .collect();
    relocated.sort_unstable();
    let mut insns = Vec::with_capacity(listing.len() + 1);
    for i in &listing {
        let (at, len) = (u64::from(i.offset), u64::from(i.len));
        if i.text.starts_with(".byte") {
            return None;
        }
        let start = piece.start + at;
        let first = relocated.partition_point(|&(o, _)| o < start);
        let inside = relocated[first..]
            .iter()
            .take_while(|&&(o, _)| o < start + len);
        // A field must lie within its instruction, or moving the instruction would move it
        // away from the bytes it patches.
        if inside.clone().any(|&(_, end)| end > start + len) {
            return None;
        }
        if inside.count() > 0 {
            insns.push(Insn {
                at,
                len,
                branch: None,
            });
            continue;
        }
        let branch = match x86_64::decode_direct_branch(&bytes[at as usize..(at + len) as usize]) {
            Some(b) => {
                let target = (at + len).checked_add_signed(i64::from(b.displacement))?;
                Some((b, *index.get(&target)?))
            }
            None if refers_relative(&i.text) => return None,
            None => None,
        };
        insns.push(Insn { at, len, branch });
    }
    // The function's end, as a branch target (a jump to what follows it).
    insns.push(Insn {
        at: bytes.len() as u64,
        len: 0,
        branch: None,
    });
    Some(insns)
}

/// Whether an instruction, as LLVM's disassembler prints it (AT&T syntax), has an operand
/// relative to its own address: RIP-relative memory, or a direct `call`, `jmp`, `jcc`,
/// `loop`, `jrcxz` or `xbegin` (indirect ones take `*`).
fn refers_relative(text: &str) -> bool {
    let mnemonic = text.split(' ').next().unwrap_or("");
    let relative = ["j", "call", "loop", "xbegin"]
        .iter()
        .any(|p| mnemonic.starts_with(p));
    text.contains("%rip") || relative && !text.contains('*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::assemble::tail::fixture;
    use crate::object::parsed::{ParsedReloc, ParsedSection, RelocTarget, SectionKind};
    use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat};

    #[test]
    fn relative_operands_are_recognised_in_llvm_text() {
        assert!(refers_relative("leaq 0x10(%rip), %rax"));
        assert!(refers_relative("callq 0x20"));
        assert!(refers_relative("jrcxz 0x4"));
        assert!(refers_relative("loop 0x4"));
        assert!(!refers_relative("jmpq *%rax"));
        assert!(!refers_relative("movq %rax, (%rdi)"));
    }

    /// `op_t`: `jne tail` (rel8); `jmp .+0` (rel8); `mov rax, rax`; `jmp CONTINUE`;
    /// tail: `xor eax, eax`; `jmp op_t` (rel8); `ret`; with `extra` appended to the tail.
    fn object(extra: &[u8]) -> ParsedObject {
        let mut bytes = vec![
            0x75, 0x0a, 0xeb, 0x00, 0x48, 0x89, 0xc0, 0xe9, 0, 0, 0, 0, 0x48, 0x31, 0xc0, 0xeb,
            0xef, 0xc3,
        ];
        bytes.extend_from_slice(extra);
        fixture::object(Arch::X86_64, ObjectFormat::Coff, bytes, 8)
    }

    #[test]
    fn branches_across_the_split_grow_to_rel32_holes() {
        let s = fixture::read(&object(&[]), Arch::X86_64, ObjectFormat::Coff);
        assert!(s.elided_continue, "{}", s.to_text());
        assert_eq!(s.cold_len, 9, "{}", s.to_text());
        // jne rel32 (grown); jmp .+0 (still rel8) | xor; jmp rel32 (grown); ret.
        let code = [
            0x0f, 0x85, 0, 0, 0, 0, 0xeb, 0x00, 0x48, 0x89, 0xc0, 0x48, 0x31, 0xc0, 0xe9, 0, 0, 0,
            0, 0xc3,
        ];
        assert_eq!(s.code, code, "{}", s.to_text());
        assert_eq!(
            fixture::holes(&s),
            [
                (2, HoleKind::X86Branch32, HoleValue::Cold, -4),
                (15, HoleKind::X86Branch32, HoleValue::Code, -4),
            ],
            "{}",
            s.to_text()
        );
        // The frame reader sees both pieces of the function, and where it grew.
        assert_eq!(s.pieces[1].function, 0);
        assert_eq!(s.pieces[0].growth, [(0, 4), (15, 3)]);
    }

    #[test]
    fn a_rel8_pushed_out_of_range_grows_too() {
        // In the tail, after 119 nops, `jmp` back to its start (rel8 -127): in range until
        // the tail's first `jmp` grows.
        let mut extra = vec![0x90; 119];
        extra.extend([0xeb, 0x81]);
        let obj = object(&extra);
        let piece = Piece {
            section: 0,
            start: 0,
            end: obj.sections[0].size,
            at: 0,
        };
        let l = lengthen(&obj, &piece, 12).unwrap();
        assert_eq!(l.growth, [(0, 4), (15, 3), (137, 3)]);
        assert_eq!(l.branches.last(), Some(&(144, 5, 16)));
        assert_eq!(&l.bytes[144..149], [0xe9, 0x7b, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn a_reference_from_data_keeps_the_function_whole() {
        // A table in read-only data holding the function's address (with an offset, it
        // could point anywhere in it).
        let mut obj = object(&[]);
        obj.sections.push(ParsedSection {
            name: ".rdata".into(),
            kind: SectionKind::ReadOnly,
            align: 8,
            size: 8,
            bytes: vec![0; 8],
            relocs: vec![ParsedReloc {
                offset: 0,
                type_name: "IMAGE_REL_AMD64_ADDR64".into(),
                kind: Ok(HoleKind::Abs64),
                target: RelocTarget::Symbol(0),
                addend: 12,
            }],
        });
        let piece = Piece {
            section: 0,
            start: 0,
            end: obj.sections[0].size,
            at: 0,
        };
        let limits = crate::manifest::Limits::default();
        let opts = fixture::options(Arch::X86_64, ObjectFormat::Coff, &limits);
        assert!(super::super::tail::split_point(&obj, &opts, &piece).is_none());
    }

    #[test]
    fn an_unrelocated_rip_relative_operand_keeps_the_function_whole() {
        // lea rax, [rip + 0] in the tail: no relocation says what it addresses.
        let s = fixture::read(
            &object(&[0x48, 0x8d, 0x05, 0, 0, 0, 0]),
            Arch::X86_64,
            ObjectFormat::Coff,
        );
        assert!(!s.elided_continue && s.cold_len == 0, "{}", s.to_text());
    }
}
