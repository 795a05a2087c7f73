//! Data holes: the 64-bit absolute address (`HoleKind::Abs64`), in data or in an
//! instruction's immediate (x86 `movabs`); the x86-64 absolute 32-bit immediate
//! (`HoleKind::X86Abs32`); and the narrow operands' range checks (`HoleKind::Operand*`),
//! which write nothing.

use super::{bytes, put, Problem};
use cpjit_model::OperandRange;

/// `S + A`, 8 bytes little endian. Every value fits; only the bounds can fail.
pub(super) fn patch_abs64(code: &mut [u8], offset: usize, value: u64) -> Result<(), Problem> {
    bytes::<8>(code, offset)?;
    put(code, offset, value.to_le_bytes());
    Ok(())
}

/// The low 32 bits of `S + A`, 4 bytes little endian; `S + A` must lie in `[-2^31, 2^32)`,
/// the union of what `R_X86_64_32` (zero-extended) and `R_X86_64_32S` (sign-extended) hold.
pub(super) fn patch_x86_abs32(code: &mut [u8], offset: usize, value: u64) -> Result<(), Problem> {
    bytes::<4>(code, offset)?;
    let v = value as i64;
    let (min, max) = (i32::MIN as i64, u32::MAX as i64);
    if v < min || v > max {
        return Err(Problem::ValueOutOfRange { min, max });
    }
    put(code, offset, (value as u32).to_le_bytes());
    Ok(())
}

/// Checks a narrow operand against its declared `range`; writes nothing (the hole is
/// empty, but `offset` must still lie within `code`).
pub(super) fn check_operand(
    code: &[u8],
    offset: usize,
    range: OperandRange,
    value: u64,
) -> Result<(), Problem> {
    bytes::<0>(code, offset)?;
    if range.contains(value) {
        Ok(())
    } else {
        let (min, max) = range.bounds();
        Err(Problem::ValueOutOfRange { min, max })
    }
}
