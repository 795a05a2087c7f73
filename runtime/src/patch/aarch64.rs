//! AArch64 instruction holes: branches (imm26/imm19/imm14), `adrp` pages (imm21), low-12
//! offsets of `add` and scaled loads/stores, and `movz`/`movk` 16-bit groups.
//!
//! Each kind has a field function (range and alignment: what [`super::in_range`] checks);
//! the instruction-class check and the insertion of the field are `cpjit_isa::aarch64`'s.
//! Relocation semantics: the AArch64 ELF psABI (as lld implements them in
//! `lld/ELF/Arch/AArch64.cpp`).

use super::Problem;
use cpjit_isa::aarch64 as isa;
use cpjit_model::{Aarch64Hole, HoleKind};

/// The instruction word `insn` with the field for `value` written into it, once checked to
/// be of the class `kind` patches ([`super::patch_word`] reads and writes the word).
pub(super) fn encode(kind: HoleKind, insn: u32, place: u64, value: u64) -> Result<u32, Problem> {
    isa::check_class(kind, insn).map_err(|expected| Problem::UnexpectedInstruction {
        found: insn,
        expected,
    })?;
    Ok(isa::insert(kind, insn, field(kind, place, value)?))
}

/// The value of the kind's immediate field (right-aligned), or why `value` cannot be encoded.
pub(super) fn field(kind: HoleKind, place: u64, value: u64) -> Result<u32, Problem> {
    // `super::patch` routes only AArch64 kinds here.
    let Some(hole) = kind.aarch64() else {
        return Err(Problem::UnexpectedInstruction {
            found: 0,
            expected: "an AArch64 hole kind",
        });
    };
    match hole {
        Aarch64Hole::Branch26 => branch(place, value, 26),
        Aarch64Hole::Branch19 => branch(place, value, 19),
        Aarch64Hole::Branch14 => branch(place, value, 14),
        Aarch64Hole::AdrPage21 | Aarch64Hole::AdrGotPage21 => page21(place, value),
        Aarch64Hole::AddLo12 => Ok(lo12(value)),
        Aarch64Hole::LdSt8Lo12 => scaled_lo12(value, 0),
        Aarch64Hole::LdSt16Lo12 => scaled_lo12(value, 1),
        Aarch64Hole::LdSt32Lo12 => scaled_lo12(value, 2),
        Aarch64Hole::LdSt64Lo12 | Aarch64Hole::Ld64GotLo12 => scaled_lo12(value, 3),
        Aarch64Hole::LdSt128Lo12 => scaled_lo12(value, 4),
        Aarch64Hole::MovwG0 => Ok(value as u32 & 0xffff),
        Aarch64Hole::MovwG1 => Ok((value >> 16) as u32 & 0xffff),
        Aarch64Hole::MovwG2 => Ok((value >> 32) as u32 & 0xffff),
        Aarch64Hole::MovwG3 => Ok((value >> 48) as u32 & 0xffff),
    }
}

/// `(value - place) >> 2` in a signed `bits`-bit field: 4-aligned, ±2^(bits+1) bytes.
fn branch(place: u64, value: u64, bits: u32) -> Result<u32, Problem> {
    let distance = value.wrapping_sub(place) as i64;
    if distance & 3 != 0 {
        return Err(Problem::Misaligned { align: 4 });
    }
    let (min, max) = (-(1i64 << (bits + 1)), (1i64 << (bits + 1)) - 4);
    if distance < min || distance > max {
        return Err(Problem::OutOfRange {
            min,
            max,
            actual: distance,
        });
    }
    Ok((distance >> 2) as u32 & ((1 << bits) - 1))
}

/// `Page(value) - Page(place)` in pages, signed 21 bits (±4 GiB).
fn page21(place: u64, value: u64) -> Result<u32, Problem> {
    isa::adrp_pages(place, value).ok_or_else(|| Problem::OutOfRange {
        min: -(1i64 << 32),
        max: (1i64 << 32) - 0x1000,
        actual: (value & !0xfff).wrapping_sub(place & !0xfff) as i64,
    })
}

fn lo12(value: u64) -> u32 {
    value as u32 & 0xfff
}

/// `lo12(value) >> log2_size`; the access must be naturally aligned.
fn scaled_lo12(value: u64, log2_size: u32) -> Result<u32, Problem> {
    if value & ((1 << log2_size) - 1) != 0 {
        return Err(Problem::Misaligned {
            align: 1 << log2_size,
        });
    }
    Ok(lo12(value) >> log2_size)
}
