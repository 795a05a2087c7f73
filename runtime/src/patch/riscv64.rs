//! RISC-V instruction holes: the `auipc`+`jalr` call pair (relaxed to `jal` + `nop` within
//! a `jal`'s reach), `auipc` hi20 (direct and GOT), the paired I- and S-type lo12, `jal`
//! and conditional branches, and the absolute `lui` hi20 / `addi[w]` lo12 of narrow
//! operands.
//!
//! Each kind has a range function (what [`super::in_range`] checks); instruction classes
//! and field insertion are `cpjit_isa::riscv64`'s. Relocation semantics: the RISC-V ELF
//! psABI, as lld implements them in `lld/ELF/Arch/RISCV.cpp`. A lo12 hole carries its
//! HI20's value, with the distance from the `auipc` to itself folded into the addend by
//! the toolchain, so `value - place` is the HI20's distance and both halves add back to it.

use super::{bytes, put, Problem};
use cpjit_isa::riscv64 as isa;
use cpjit_model::HoleKind;

/// Checks the call pair of a [`HoleKind::RiscvCall`] at `code[offset]` and points it at
/// `value`: as `jal rd` + `nop` when `value - place` is within the `jal`'s ±1 MiB (what
/// `ld.lld --relax` writes, but for the `nop`: one instruction fetched and no `auipc`
/// result waited on), else as `auipc rX` + `jalr rd, rX` with the halves of the distance.
///
/// The site may hold either form, so that it can be patched again: a relaxed one expands
/// back into the pair [`isa::unrelaxed_call`] gives (its `rX` is gone; a jump's becomes
/// `t1`, which the veneer also clobbers at every call or jump).
pub(super) fn patch_call(
    code: &mut [u8],
    offset: usize,
    place: u64,
    value: u64,
) -> Result<(), Problem> {
    let pair = bytes::<8>(code, offset)?;
    let first = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]);
    let second = u32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]);
    let [auipc, jalr] = if isa::is_call_pair(first, second) {
        [first, second]
    } else if isa::is_relaxed_call(first, second) {
        isa::unrelaxed_call(first)
    } else {
        let found = if isa::is_auipc(first) { second } else { first };
        let expected = "auipc rX followed by jalr through rX (or jal followed by nop)";
        return Err(unexpected(found, expected));
    };
    // An odd distance (never a stencil's) keeps the pair, as before relaxation.
    if let Ok(distance) = branch(place, value, 21) {
        let [jal, nop] = isa::relaxed_call(jalr >> 7 & 0x1f, distance);
        put(code, offset, jal.to_le_bytes());
        put(code, offset + 4, nop.to_le_bytes());
        return Ok(());
    }
    let (hi20, lo12) = split(place, value)?;
    put(code, offset, isa::insert_u(auipc, hi20).to_le_bytes());
    put(code, offset + 4, isa::insert_i(jalr, lo12).to_le_bytes());
    Ok(())
}

/// The instruction word `insn` of every other kind with the field for `value` written into
/// it, once checked to be of the class `kind` patches ([`super::patch_word`] reads and
/// writes the word).
pub(super) fn encode(kind: HoleKind, insn: u32, place: u64, value: u64) -> Result<u32, Problem> {
    isa::check_class(kind, insn).map_err(|expected| unexpected(insn, expected))?;
    Ok(match kind {
        HoleKind::RiscvPcrelHi20 | HoleKind::RiscvGotHi20 => {
            isa::insert_u(insn, split(place, value)?.0)
        }
        HoleKind::RiscvPcrelLo12I | HoleKind::RiscvGotLo12I => {
            isa::insert_i(insn, lo12(place, value))
        }
        HoleKind::RiscvPcrelLo12S => isa::insert_s(insn, lo12(place, value)),
        HoleKind::RiscvJal => isa::insert_j(insn, branch(place, value, 21)?),
        HoleKind::RiscvBranch => isa::insert_b(insn, branch(place, value, 13)?),
        HoleKind::RiscvHi20 => isa::insert_u(insn, absolute(value)?.0),
        HoleKind::RiscvLo12I => isa::insert_i(insn, absolute(value)?.1),
        // `super::patch` routes only RISC-V kinds here.
        _ => return Err(unexpected(insn, "a RISC-V hole kind")),
    })
}

fn unexpected(found: u32, expected: &'static str) -> Problem {
    Problem::UnexpectedInstruction { found, expected }
}

/// Whether `value` fits a hole of `kind` at `place` (range and alignment only).
pub(super) fn in_range(kind: HoleKind, place: u64, value: u64) -> bool {
    match kind {
        HoleKind::RiscvCall | HoleKind::RiscvPcrelHi20 | HoleKind::RiscvGotHi20 => {
            split(place, value).is_ok()
        }
        // The paired HI20 carries the range; the low bits always fit.
        HoleKind::RiscvPcrelLo12I | HoleKind::RiscvPcrelLo12S | HoleKind::RiscvGotLo12I => true,
        HoleKind::RiscvJal => branch(place, value, 21).is_ok(),
        HoleKind::RiscvBranch => branch(place, value, 13).is_ok(),
        HoleKind::RiscvHi20 | HoleKind::RiscvLo12I => absolute(value).is_ok(),
        _ => false,
    }
}

/// An absolute `value` (a narrow operand) as `(hi20, lo12)` for `lui` + `addi[w]`: its low
/// 32 bits, so it must lie in `[-2^31, 2^32)`.
fn absolute(value: u64) -> Result<(u32, u32), Problem> {
    isa::split_abs_hi20_lo12(value as i64).ok_or(Problem::ValueOutOfRange {
        min: i32::MIN as i64,
        max: u32::MAX as i64,
    })
}

/// `value - place` as `(hi20, lo12)`, within ±2 GiB (the `auipc` reach).
fn split(place: u64, value: u64) -> Result<(u32, u32), Problem> {
    let distance = value.wrapping_sub(place) as i64;
    isa::split_hi20_lo12(distance).ok_or(Problem::OutOfRange {
        min: i32::MIN as i64 - 0x800,
        max: i32::MAX as i64 - 0x800,
        actual: distance,
    })
}

/// The low 12 bits of `value - place` (the HI20's rounding makes them a signed offset).
fn lo12(place: u64, value: u64) -> u32 {
    value.wrapping_sub(place) as u32 & 0xfff
}

/// `value - place` as an even offset in a signed `bits`-bit field (`jal`: 21, branches: 13).
fn branch(place: u64, value: u64, bits: u32) -> Result<i32, Problem> {
    let distance = value.wrapping_sub(place) as i64;
    if distance & 1 != 0 {
        return Err(Problem::Misaligned { align: 2 });
    }
    let (min, max) = (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 2);
    if distance < min || distance > max {
        return Err(Problem::OutOfRange {
            min,
            max,
            actual: distance,
        });
    }
    Ok(distance as i32)
}
