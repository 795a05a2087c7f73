//! AArch64 instruction holes: branches (imm26/imm19/imm14), `adrp` pages (imm21), low-12
//! offsets of `add` and scaled loads/stores, and `movz`/`movk` 16-bit groups.
//!
//! Each kind has a field function (range and alignment: what [`super::in_range`] checks), an
//! instruction-class check, and an insertion that clears the field and ORs in the new one.
//! Encodings: Arm ARM C4.1; relocation semantics: the AArch64 ELF psABI (as lld implements
//! them in `lld/ELF/Arch/AArch64.cpp`).

use super::{bytes, put, Problem};
use cpjit_model::HoleKind;

/// `nop`.
pub(super) const NOP: u32 = 0xd503_201f;

/// Checks the instruction at `code[offset]` and writes the field for `value` into it.
pub(super) fn patch(
    kind: HoleKind,
    code: &mut [u8],
    offset: usize,
    place: u64,
    value: u64,
) -> Result<(), Problem> {
    let insn = u32::from_le_bytes(bytes::<4>(code, offset)?);
    check_class(kind, insn)?;
    let field = field(kind, place, value)?;
    put(code, offset, insert(kind, insn, field).to_le_bytes());
    Ok(())
}

/// The value of the kind's immediate field (right-aligned), or why `value` cannot be encoded.
pub(super) fn field(kind: HoleKind, place: u64, value: u64) -> Result<u32, Problem> {
    match kind {
        HoleKind::Aarch64Branch26 => branch(place, value, 26),
        HoleKind::Aarch64Branch19 => branch(place, value, 19),
        HoleKind::Aarch64Branch14 => branch(place, value, 14),
        HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64AdrGotPage21 => page21(place, value),
        HoleKind::Aarch64AddLo12 => Ok(lo12(value)),
        HoleKind::Aarch64LdSt8Lo12 => scaled_lo12(value, 0),
        HoleKind::Aarch64LdSt16Lo12 => scaled_lo12(value, 1),
        HoleKind::Aarch64LdSt32Lo12 => scaled_lo12(value, 2),
        HoleKind::Aarch64LdSt64Lo12 | HoleKind::Aarch64Ld64GotLo12 => scaled_lo12(value, 3),
        HoleKind::Aarch64LdSt128Lo12 => scaled_lo12(value, 4),
        HoleKind::Aarch64MovwG0 => Ok(value as u32 & 0xffff),
        HoleKind::Aarch64MovwG1 => Ok((value >> 16) as u32 & 0xffff),
        HoleKind::Aarch64MovwG2 => Ok((value >> 32) as u32 & 0xffff),
        HoleKind::Aarch64MovwG3 => Ok((value >> 48) as u32 & 0xffff),
        // Not AArch64 instruction kinds; `super::patch` never routes them here.
        HoleKind::Abs64
        | HoleKind::X86Pc32
        | HoleKind::X86Branch32
        | HoleKind::X86GotPc32
        | HoleKind::X86GotPc32Relaxable => Err(Problem::UnexpectedInstruction {
            found: 0,
            expected: "an AArch64 hole kind",
        }),
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
pub(super) fn page21(place: u64, value: u64) -> Result<u32, Problem> {
    let distance = (value & !0xfff).wrapping_sub(place & !0xfff) as i64;
    let (min, max) = (-(1i64 << 32), (1i64 << 32) - 0x1000);
    if distance < min || distance > max {
        return Err(Problem::OutOfRange {
            min,
            max,
            actual: distance,
        });
    }
    Ok((distance >> 12) as u32 & 0x1f_ffff)
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

/// Clears the kind's field in `insn` and inserts `field` (as returned by [`field`]).
pub(super) fn insert(kind: HoleKind, insn: u32, field: u32) -> u32 {
    match kind {
        HoleKind::Aarch64Branch26 => (insn & !0x03ff_ffff) | field,
        HoleKind::Aarch64Branch19 => (insn & !(0x7_ffff << 5)) | (field << 5),
        HoleKind::Aarch64Branch14 => (insn & !(0x3fff << 5)) | (field << 5),
        // immlo in bits 29..31, immhi in bits 5..24.
        HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64AdrGotPage21 => {
            (insn & !(0x6000_0000 | (0x7_ffff << 5)))
                | ((field & 3) << 29)
                | ((field >> 2 & 0x7_ffff) << 5)
        }
        HoleKind::Aarch64MovwG0
        | HoleKind::Aarch64MovwG1
        | HoleKind::Aarch64MovwG2
        | HoleKind::Aarch64MovwG3 => (insn & !(0xffff << 5)) | (field << 5),
        // imm12 in bits 10..22 (add and the unsigned-offset loads/stores alike).
        _ => (insn & !(0xfff << 10)) | (field << 10),
    }
}

/// Whether `insn` is the instruction class `kind` patches.
pub(super) fn check_class(kind: HoleKind, insn: u32) -> Result<(), Problem> {
    let (ok, expected) = match kind {
        HoleKind::Aarch64Branch26 => (insn & 0x7c00_0000 == 0x1400_0000, "b or bl"),
        HoleKind::Aarch64Branch19 => (
            // b.cond and bc.cond; cbz and cbnz (32 and 64 bits).
            insn & 0xff00_0000 == 0x5400_0000 || insn & 0x7e00_0000 == 0x3400_0000,
            "b.cond, cbz or cbnz",
        ),
        HoleKind::Aarch64Branch14 => (insn & 0x7e00_0000 == 0x3600_0000, "tbz or tbnz"),
        HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64AdrGotPage21 => (is_adrp(insn), "adrp"),
        HoleKind::Aarch64AddLo12 => (
            // add (immediate), 32 or 64 bits, not the `lsl #12` form.
            insn & 0x7fc0_0000 == 0x1100_0000,
            "add (immediate, unshifted)",
        ),
        HoleKind::Aarch64LdSt8Lo12 => (ldst_log2_size(insn) == Some(0), LDST_EXPECTED[0]),
        HoleKind::Aarch64LdSt16Lo12 => (ldst_log2_size(insn) == Some(1), LDST_EXPECTED[1]),
        HoleKind::Aarch64LdSt32Lo12 => (ldst_log2_size(insn) == Some(2), LDST_EXPECTED[2]),
        HoleKind::Aarch64LdSt64Lo12 => (ldst_log2_size(insn) == Some(3), LDST_EXPECTED[3]),
        HoleKind::Aarch64LdSt128Lo12 => (ldst_log2_size(insn) == Some(4), LDST_EXPECTED[4]),
        HoleKind::Aarch64Ld64GotLo12 => (is_ldr_x(insn), "ldr xN, [xM, #imm] (64-bit load)"),
        HoleKind::Aarch64MovwG0 => (is_movz_movk(insn, 0), "movz or movk without shift"),
        HoleKind::Aarch64MovwG1 => (is_movz_movk(insn, 1), "movz or movk with lsl #16"),
        HoleKind::Aarch64MovwG2 => (is_movz_movk(insn, 2), "64-bit movz or movk with lsl #32"),
        HoleKind::Aarch64MovwG3 => (is_movz_movk(insn, 3), "64-bit movz or movk with lsl #48"),
        HoleKind::Abs64
        | HoleKind::X86Pc32
        | HoleKind::X86Branch32
        | HoleKind::X86GotPc32
        | HoleKind::X86GotPc32Relaxable => (false, "an AArch64 instruction"),
    };
    if ok {
        Ok(())
    } else {
        Err(Problem::UnexpectedInstruction {
            found: insn,
            expected,
        })
    }
}

const LDST_EXPECTED: [&str; 5] = [
    "a 1-byte ldr/str (unsigned offset)",
    "a 2-byte ldr/str (unsigned offset)",
    "a 4-byte ldr/str (unsigned offset)",
    "an 8-byte ldr/str (unsigned offset)",
    "a 16-byte ldr/str q (unsigned offset)",
];

pub(super) fn is_adrp(insn: u32) -> bool {
    insn & 0x9f00_0000 == 0x9000_0000
}

/// `ldr xT, [xN, #imm12 * 8]`.
pub(super) fn is_ldr_x(insn: u32) -> bool {
    insn & 0xffc0_0000 == 0xf940_0000
}

/// log2 of the access size of a load/store (register, unsigned immediate offset), general
/// purpose or SIMD&FP, including prfm; `None` for any other instruction.
fn ldst_log2_size(insn: u32) -> Option<u32> {
    if insn & 0x3b00_0000 != 0x3900_0000 {
        return None;
    }
    let size = insn >> 30;
    let simd = insn >> 26 & 1 == 1;
    let opc_high = insn >> 23 & 1 == 1;
    match (simd, opc_high) {
        // ldr/str q: size 00 with opc<1> set; other sizes with opc<1> are unallocated.
        (true, true) if size == 0 => Some(4),
        (true, true) => None,
        _ => Some(size),
    }
}

/// `movz` or `movk` (not `movn`) with shift field `hw`; shifts 32 and 48 need 64 bits.
fn is_movz_movk(insn: u32, hw: u32) -> bool {
    let op = insn & 0x7f80_0000;
    let sf = insn >> 31 == 1;
    (op == 0x5280_0000 || op == 0x7280_0000) && insn >> 21 & 3 == hw && (sf || hw < 2)
}
