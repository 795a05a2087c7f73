//! Relaxation of an AArch64 GOT load pair (`adrp xN, G` + `ldr xN, [xN, lo12(G)]`) into
//! code that materializes the slot's value directly, removing a dependent memory load.

use super::aarch64::{is_adrp, is_ldr_x, page21, NOP};
use super::{bytes, put, PatchError, Problem};
use cpjit_model::HoleKind;

/// Rewrites the GOT load pair at `adrp_offset` / `ldr_offset` (both in `code`, the `adrp`
/// at run-time address `adrp_place`) whose slot will hold `slot_value`:
/// - `slot_value < 2^16`: `movz xN, #v` + `nop`;
/// - `slot_value < 2^32`: `movz xN, #lo16` + `movk xN, #hi16, lsl #16`;
/// - `Page(slot_value)` within ±4 GiB of `Page(adrp_place)`: `adrp xN, v` +
///   `add xN, xN, #lo12(v)` (what lld does for a non-preemptible symbol);
/// - otherwise `Ok(false)`, bytes untouched: patch the GOT pair as usual.
///
/// The new instructions replace the old ones in place (the first at `adrp_offset`), so the
/// caller must pair an `adrp` with the only `ldr` that uses its result. Also `Ok(false)`
/// when the two instructions do not use one register (`adrp xN` + `ldr xN, [xN, ...]`).
/// Errors when either instruction is not of its class or lies outside `code`.
pub fn relax_aarch64_got_pair(
    code: &mut [u8],
    adrp_offset: usize,
    ldr_offset: usize,
    adrp_place: u64,
    slot_value: u64,
) -> Result<bool, PatchError> {
    let adrp_error = |problem| PatchError {
        kind: HoleKind::Aarch64AdrGotPage21,
        offset: adrp_offset,
        place: adrp_place,
        value: slot_value,
        problem,
    };
    let ldr_error = |problem| PatchError {
        kind: HoleKind::Aarch64Ld64GotLo12,
        offset: ldr_offset,
        place: adrp_place.wrapping_add(ldr_offset.wrapping_sub(adrp_offset) as u64),
        value: slot_value,
        problem,
    };
    if adrp_offset.abs_diff(ldr_offset) < 4 {
        return Err(ldr_error(Problem::Overlap { other: adrp_offset }));
    }
    let adrp = u32::from_le_bytes(bytes::<4>(code, adrp_offset).map_err(adrp_error)?);
    let ldr = u32::from_le_bytes(bytes::<4>(code, ldr_offset).map_err(ldr_error)?);
    if !is_adrp(adrp) {
        return Err(adrp_error(Problem::UnexpectedInstruction {
            found: adrp,
            expected: "adrp",
        }));
    }
    if !is_ldr_x(ldr) {
        return Err(ldr_error(Problem::UnexpectedInstruction {
            found: ldr,
            expected: "ldr xN, [xM, #imm] (64-bit load)",
        }));
    }
    let reg = adrp & 31;
    // Register 31 would be xzr for adrp but sp for the ldr base.
    if reg == 31 || ldr & 31 != reg || ldr >> 5 & 31 != reg {
        return Ok(false);
    }
    let (first, second) = if slot_value < 1 << 16 {
        (movz(reg, slot_value as u32), NOP)
    } else if slot_value < 1 << 32 {
        let movk_lsl16 = 0xf2a0_0000 | ((slot_value >> 16) as u32) << 5 | reg;
        (movz(reg, slot_value as u32 & 0xffff), movk_lsl16)
    } else if let Ok(pages) = page21(adrp_place, slot_value) {
        let adrp = 0x9000_0000 | (pages & 3) << 29 | (pages >> 2 & 0x7_ffff) << 5 | reg;
        let add = 0x9100_0000 | (slot_value as u32 & 0xfff) << 10 | reg << 5 | reg;
        (adrp, add)
    } else {
        return Ok(false);
    };
    put(code, adrp_offset, first.to_le_bytes());
    put(code, ldr_offset, second.to_le_bytes());
    Ok(true)
}

/// `movz xN, #imm16`.
fn movz(reg: u32, imm16: u32) -> u32 {
    0xd280_0000 | imm16 << 5 | reg
}
