//! Data holes: the 64-bit absolute address (`HoleKind::Abs64`), in data or in an
//! instruction's immediate (x86 `movabs`).

use super::{bytes, put, Problem};

/// `S + A`, 8 bytes little endian. Every value fits; only the bounds can fail.
pub(super) fn patch_abs64(code: &mut [u8], offset: usize, value: u64) -> Result<(), Problem> {
    bytes::<8>(code, offset)?;
    put(code, offset, value.to_le_bytes());
    Ok(())
}
