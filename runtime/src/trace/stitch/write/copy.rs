//! The byte work of the write stage: copying an instance's code and data blocks to their
//! place, padding with nops, and the rel32 store the fast forms share.

use crate::program::Program;
use crate::trace::Instance;

/// Writes `value - place` into the x86-64 rel32 field at `buf[offset..]` whose instruction
/// was checked once ([`Checked`](crate::program::Checked)); `false`, nothing written, if it
/// does not fit 32 bits (the caller then lets [`patch::patch`](crate::patch::patch) report
/// it, or routes the branch via a veneer).
#[inline]
pub(super) fn write_rel32(buf: &mut [u8], offset: usize, place: u64, value: u64) -> bool {
    match (
        cpjit_isa::rel32(place, value),
        buf.get_mut(offset..offset + 4),
    ) {
        (Some(rel), Some(field)) => {
            field.copy_from_slice(&rel.to_le_bytes());
            true
        }
        _ => false,
    }
}

/// Fills `bytes` with `byte`, without a call when there are none (most traces have no
/// cold parts, no veneers and no padding before their GOT: two to four `memset` calls of
/// nothing were 40 instructions of a 10-instance trace).
// (Short lengths by two overlapping stores instead of `memset`: +24 instructions per
// straight-10 trace here, +34 at the code's padding to its veneers alone; dropped.)
#[inline(always)]
pub(super) fn fill(bytes: &mut [u8], byte: u8) {
    if !bytes.is_empty() {
        bytes.fill(byte);
    }
}

/// Fills alignment padding with whole nops.
pub(super) fn pad_with_nops(padding: &mut [u8], nop: &[u8]) -> Result<(), String> {
    if padding.len() % nop.len() != 0 {
        return Err(format!(
            "{} bytes of alignment padding before it are not a multiple of the {}-byte nop",
            padding.len(),
            nop.len()
        ));
    }
    for chunk in padding.chunks_exact_mut(nop.len()) {
        chunk.copy_from_slice(nop);
    }
    Ok(())
}

/// Copies the data of an instance of `p` to `data[at..]`, and zeros the alignment padding
/// before it (from `end`, where the previous instance's data ended): the program's 16-byte
/// blocks (past the stencil's data they hold zeros, which the next instance overwrites or
/// the padding needs), or exactly the stencil's bytes where whole blocks would pass `limit`
/// (the end of the instances' data: the GOT slots follow). `limit` is at most `data.len()`.
#[inline(always)]
pub(super) fn copy_data(data: &mut [u8], end: usize, at: usize, p: &Program, limit: usize) {
    debug_assert!(limit <= data.len() && end <= at);
    let blocks = &p.data[..];
    if at + blocks.len() <= limit && at - end <= 16 {
        // SAFETY: `end <= at`, `at + blocks.len() <= limit <= data.len()` (the caller's
        // promise), and `blocks.len()` is a non-zero multiple of 16 (`Program::data`), so
        // that `end + 16 <= at + 16 <= data.len()`: each move writes 16 bytes inside
        // `data[end..]` and reads 16 inside `blocks`, unaligned. The zeros at `end` go
        // first: the copy overwrites those past `at`.
        unsafe {
            let to = data.as_mut_ptr();
            to.add(end).cast::<u128>().write_unaligned(0);
            copy_blocks(blocks, to.add(at));
        }
    } else {
        data[end..at].fill(0);
        let len = p.data_len as usize;
        data[at..at + len].copy_from_slice(&blocks[..len]);
    }
}

/// Copies the code of an instance of `p` to `code[at..]`: the program's 16-byte blocks
/// (past the stencil's end they hold traps, which the next instance or the trailing trap
/// filler overwrites or matches), or exactly the stencil's bytes where whole blocks would
/// pass `limit` (the end of the instances: the tail jump and veneers follow). `limit` is
/// at most `code.len()`; afterwards `at + p.code_len <= code.len()` (the quick forms' stores
/// rely on it).
#[inline(always)]
pub(super) fn copy_code(code: &mut [u8], at: usize, p: &Program, limit: usize) {
    debug_assert!(limit <= code.len());
    let blocks = &p.code[..];
    if at + blocks.len() <= limit {
        // SAFETY: `at + blocks.len() <= limit <= code.len()` (the caller's promise), and
        // `blocks.len()` is a multiple of 16 (`Program::code`): each move reads and writes
        // 16 bytes inside `blocks` and `code[at..]`, unaligned.
        unsafe { copy_blocks(blocks, code.as_mut_ptr().add(at)) }
    } else {
        copy_exactly(code, at, p);
    }
}

/// [`copy_code`] where whole blocks would pass its limit (once per trace or window): out
/// of line, so that the copy loop keeps no `memcpy` call, whose address and arguments
/// cost it a register (callgrind, straight-100: 3 instructions per instance).
#[cold]
#[inline(never)]
fn copy_exactly(code: &mut [u8], at: usize, p: &Program) {
    let len = p.code_len as usize;
    code[at..at + len].copy_from_slice(&p.code[..len]);
}

/// The index of `inst`, an element of `instances`.
pub(super) fn index_of(instances: &[Instance], inst: &Instance) -> usize {
    (inst as *const Instance as usize - instances.as_ptr() as usize) / size_of::<Instance>()
}

/// Copies `blocks` (a multiple of 16 bytes long) to `to`, 16 bytes at a time, unaligned.
///
/// # Safety
/// `to` is valid for writes of `blocks.len()` bytes, outside `blocks`.
#[inline(always)]
unsafe fn copy_blocks(blocks: &[u8], to: *mut u8) {
    debug_assert!(blocks.len() % 16 == 0);
    let (mut from, mut to) = (blocks.as_ptr(), to);
    // SAFETY: `from` stays within `blocks` (a multiple of 16 bytes) and `to` within the
    // caller's `blocks.len()` writable bytes, which do not overlap `blocks`.
    unsafe {
        let end = from.add(blocks.len());
        while from < end {
            to.cast::<u128>()
                .write_unaligned(from.cast::<u128>().read_unaligned());
            from = from.add(16);
            to = to.add(16);
        }
    }
}

/// Zeros `data[end..got_base]` (past the instances' data, up to the GOT slots) but for
/// each instance's code offset, a `u32` stored at `offsets_at` (`Sizes::offsets_at`, with
/// room for them), which `Trace::instance_offsets` reads. (Stored, not zeroed first: a
/// 1,000-instance trace's `memset` of them was 4 instructions per instance.)
#[inline(always)]
pub(super) fn store_offsets(
    data: &mut [u8],
    (end, offsets_at, got_base): (usize, usize, usize),
    instances: &[Instance],
) {
    let (pad, offsets) = data[end..got_base].split_at_mut(offsets_at - end);
    fill(pad, 0);
    let (offsets, pad) = offsets.split_at_mut(4 * instances.len());
    fill(pad, 0);
    let to = offsets.as_mut_ptr().cast::<u32>();
    for (k, inst) in instances.iter().enumerate() {
        // SAFETY: `offsets` is `4 * instances.len()` bytes long (split above); unaligned
        // stores, one per instance (a loop over 4-byte chunks cost a third more).
        unsafe { to.add(k).write_unaligned(inst.code_at) };
    }
}

#[cfg(test)]
mod tests {
    use super::copy_data;
    use crate::program::Program;
    use cpjit_model::Stencil;

    /// `copy_data` writes the stencil's data exactly and zeros the padding before it, by
    /// whole blocks or exactly at the limit, and nothing before the previous end or past the
    /// limit: every data length up to 70 bytes, padding 0 to 40 bytes, limits from tight
    /// to roomy.
    #[test]
    fn copy_data_writes_the_data_and_zeros_the_padding_only() {
        let init: Vec<u8> = (1..=70u8).collect();
        for len in 1..=70usize {
            let stencil = Stencil {
                init_data: &init[..len],
                data_len: len as u32,
                data_align: 1,
                ..Stencil::EMPTY
            };
            let p = Program::alone(&stencil, false, 0xcc);
            for gap in 0..=40 {
                for slack in [0, 1, 15, 16, 17, 40] {
                    let (end, at) = (5, 5 + gap);
                    let limit = at + len + slack;
                    // 0xee before `end` and past `limit` must stay; 0xaa in between must
                    // become the padding's zeros and the data.
                    let mut buf = vec![0xaa; limit + 50];
                    buf[..end].fill(0xee);
                    buf[limit..].fill(0xee);
                    copy_data(&mut buf, end, at, &p, limit);
                    let what = format!("length {len}, gap {gap}, slack {slack}");
                    assert!(buf[..end].iter().all(|&b| b == 0xee), "{what}");
                    assert!(buf[end..at].iter().all(|&b| b == 0), "{what}");
                    assert_eq!(&buf[at..at + len], &init[..len], "{what}");
                    assert!(buf[limit..].iter().all(|&b| b == 0xee), "{what}");
                }
            }
        }
    }
}
