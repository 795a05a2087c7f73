//! Relaxation of an AArch64 GOT load pair (`adrp xN, G` + `ldr xN, [xN, lo12(G)]`) into
//! code that materializes the slot's value directly, removing a dependent memory load. The
//! rewrite itself is `cpjit_isa::aarch64::relax_got_pair`; this adds bounds and errors.

use super::{bytes, put, PatchError, Problem};
use cpjit_isa::aarch64 as isa;
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
    let error = |kind, offset: usize, problem| PatchError {
        kind,
        offset,
        place: adrp_place.wrapping_add(offset.wrapping_sub(adrp_offset) as u64),
        value: slot_value,
        problem,
    };
    let adrp_error = |problem| error(HoleKind::Aarch64AdrGotPage21, adrp_offset, problem);
    let ldr_error = |problem| error(HoleKind::Aarch64Ld64GotLo12, ldr_offset, problem);
    if adrp_offset.abs_diff(ldr_offset) < 4 {
        return Err(ldr_error(Problem::Overlap { other: adrp_offset }));
    }
    let adrp = u32::from_le_bytes(bytes::<4>(code, adrp_offset).map_err(adrp_error)?);
    let ldr = u32::from_le_bytes(bytes::<4>(code, ldr_offset).map_err(ldr_error)?);
    let class = |kind, insn, error: &dyn Fn(Problem) -> PatchError| {
        isa::check_class(kind, insn).map_err(|expected| {
            error(Problem::UnexpectedInstruction {
                found: insn,
                expected,
            })
        })
    };
    class(HoleKind::Aarch64AdrGotPage21, adrp, &adrp_error)?;
    class(HoleKind::Aarch64Ld64GotLo12, ldr, &ldr_error)?;
    let Some([first, second]) = isa::relax_got_pair(adrp, ldr, adrp_place, slot_value) else {
        return Ok(false);
    };
    put(code, adrp_offset, first.to_le_bytes());
    put(code, ldr_offset, second.to_le_bytes());
    Ok(true)
}
