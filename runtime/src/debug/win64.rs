//! Windows x64 unwind information for stitched code: each stencil function's frame rows
//! re-encoded as an `UNWIND_INFO` (once per stencil, when the JIT is created, all of them
//! concatenated in one image, [`Images`]), and per trace a table of `RUNTIME_FUNCTION`s (one
//! per function of each instance) registered with `RtlAddFunctionTable` and deleted with
//! `RtlDeleteFunctionTable` when the trace is dropped. A table's addresses are 32-bit
//! offsets from one base, so its `UNWIND_INFO`s must lie within 4 GiB of the code: the
//! image is copied once to free memory just above the JIT's code (`NearImage`, shared by
//! every trace in reach, freed with the last of them).
//!
//! The rows come from the stencils' own `.pdata`/`.xdata` (the toolchain replays the
//! prologue codes), so they have the prologue shape `UNWIND_INFO` can say: the CFA only
//! grows on `rsp`, optionally moves once to a frame register, and every save lasts to the
//! function's end. Windows recognizes epilogues from the code (the ABI fixes their form).
//! A cold tail the toolchain moved off a function with a frame starts in the function's
//! body state: that whole state becomes prologue codes at offset 0 with a prologue of size
//! 0, which the unwinder applies in full from the tail's first byte.
//! Rows of another shape (e.g. DWARF epilogue rows) are refused with the reason. Code that
//! no entry covers (padding, the tail jump, veneers) is a leaf for Windows: the return
//! address at `rsp`, which is exactly the state it runs in.
//!
//! The encoder and the table layout are pure (tested on every host); only the registration
//! calls are Windows-only.

// The table and image builders are used by the Windows x64 registration only (tested
// everywhere).
#![cfg_attr(not(all(windows, target_arch = "x86_64")), allow(dead_code))]

use cpjit_model::{FrameFunction, X64_DWARF_XMM0, X64_UNWIND_DWARF_REGISTERS};

/// DWARF numbers of `rsp` and the return address.
const RSP: u8 = 7;
const RETURN_ADDRESS: u8 = 16;

const UWOP_PUSH_NONVOL: u8 = 0;
const UWOP_ALLOC_LARGE: u8 = 1;
const UWOP_ALLOC_SMALL: u8 = 2;
const UWOP_SET_FPREG: u8 = 3;
const UWOP_SAVE_NONVOL: u8 = 4;
const UWOP_SAVE_NONVOL_FAR: u8 = 5;
const UWOP_SAVE_XMM128: u8 = 8;
const UWOP_SAVE_XMM128_FAR: u8 = 9;

/// The Windows register number of DWARF general-purpose register `dwarf`.
fn windows_register(dwarf: u8) -> Option<u8> {
    X64_UNWIND_DWARF_REGISTERS
        .iter()
        .position(|&d| d == dwarf)
        .map(|w| w as u8)
}

/// One unwind code: its prologue offset, operation, op info and operand slots.
struct Code {
    offset: u8,
    operation: u8,
    info: u8,
    operands: Vec<u16>,
}

/// The `UNWIND_INFO` (version 1, no handler) that says what `f`'s rows and saves say.
pub(crate) fn unwind_info(f: &FrameFunction<'_>) -> Result<Vec<u8>, String> {
    let Some(first) = f
        .rows
        .first()
        .filter(|r| r.offset == f.start && r.cfa_register == RSP && r.cfa_offset >= 8)
    else {
        return Err("the first row is not at the function's start with the CFA on rsp (the entry state CFA = rsp + 8, or a cold tail's body state)".into());
    };
    // A cold tail the toolchain moved off its function (COFF hot/cold split) starts in its
    // function's body state: that state becomes prologue codes at offset 0, the prologue's
    // size stays 0, and the unwinder applies every code at every address of the piece.
    let body_state_at_start = first.cfa_offset != 8;
    let is_return_address =
        |s: &&cpjit_model::FrameSave| s.register == RETURN_ADDRESS && s.cfa_offset == 8;
    if let Some(s) = f
        .saves
        .iter()
        .find(|s| s.to != f.end && !(is_return_address(s) && s.from == f.start))
    {
        return Err(format!(
            "the save of DWARF register {} ends at {:#x}, before the function's end: only prologues can be described",
            s.register, s.to
        ));
    }
    let from_row = if body_state_at_start { 0 } else { 1 };
    let mut offsets: Vec<u32> = f.rows[from_row..].iter().map(|r| r.offset).collect();
    offsets.extend(
        f.saves
            .iter()
            .filter(|s| !is_return_address(s))
            .map(|s| s.from),
    );
    offsets.sort_unstable();
    offsets.dedup();
    let mut codes: Vec<Code> = Vec::new();
    let mut depth = 8u32; // bytes between the CFA and rsp
    let mut frame: Option<(u8, u8, u32)> = None; // register, offset / 16, depth at setting
    let mut saved_any = false;
    for at in offsets {
        let offset = u8::try_from(at - f.start).map_err(|_| {
            format!(
                "a prologue step at {:#x}, more than 255 bytes into the function",
                at
            )
        })?;
        let fail = |why: &str| Err(format!("at {at:#x}: {why}"));
        let mut pending: Vec<_> = f
            .saves
            .iter()
            .filter(|s| s.from == at && !is_return_address(s))
            .collect();
        if let Some(row) = f.rows.iter().find(|r| r.offset == at) {
            if frame.is_some() {
                return fail("the CFA rule changes after the frame register was set");
            }
            if row.cfa_register == RSP {
                if row.cfa_offset <= depth || saved_any {
                    return fail("the CFA moves down, or rsp moves after a register save: not a prologue step");
                }
                let grown = row.cfa_offset - depth;
                depth = row.cfa_offset;
                let pushed = pending.iter().position(|s| {
                    grown == 8 && s.cfa_offset == depth && windows_register(s.register).is_some()
                });
                if let Some(k) = pushed {
                    let s = pending.remove(k);
                    codes.push(Code {
                        offset,
                        operation: UWOP_PUSH_NONVOL,
                        info: windows_register(s.register).unwrap(),
                        operands: vec![],
                    });
                } else {
                    codes.push(alloc(offset, grown).map_err(|e| format!("at {at:#x}: {e}"))?);
                }
            } else {
                let register = windows_register(row.cfa_register)
                    .filter(|&r| r != 4)
                    .ok_or_else(|| format!("at {at:#x}: CFA on DWARF register {}, not a general-purpose frame register", row.cfa_register))?;
                let scaled = depth
                    .checked_sub(row.cfa_offset)
                    .filter(|x| x % 16 == 0 && *x <= 240);
                let Some(scaled) = scaled else {
                    return fail("the frame register is not rsp plus a multiple of 16 up to 240");
                };
                frame = Some((register, (scaled / 16) as u8, depth));
                codes.push(Code {
                    offset,
                    operation: UWOP_SET_FPREG,
                    info: 0,
                    operands: vec![],
                });
            }
        }
        for s in pending {
            let base = frame.map_or(depth, |(_, _, d)| d);
            let Some(below_base) = base.checked_sub(s.cfa_offset) else {
                return fail("a register saved above the frame base");
            };
            saved_any = true;
            let xmm = (X64_DWARF_XMM0..X64_DWARF_XMM0 + 16).contains(&s.register);
            let (info, scale, near, far) = if xmm {
                (
                    s.register - X64_DWARF_XMM0,
                    16,
                    UWOP_SAVE_XMM128,
                    UWOP_SAVE_XMM128_FAR,
                )
            } else {
                let r = windows_register(s.register).ok_or_else(|| {
                    format!(
                        "at {at:#x}: DWARF register {} has no x64 unwind code",
                        s.register
                    )
                })?;
                (r, 8, UWOP_SAVE_NONVOL, UWOP_SAVE_NONVOL_FAR)
            };
            let code = if below_base % scale == 0 && below_base / scale <= 0xffff {
                Code {
                    offset,
                    operation: near,
                    info,
                    operands: vec![(below_base / scale) as u16],
                }
            } else {
                Code {
                    offset,
                    operation: far,
                    info,
                    operands: vec![below_base as u16, (below_base >> 16) as u16],
                }
            };
            codes.push(code);
        }
    }
    encode(&codes, frame.map_or(0, |(r, o, _)| r | o << 4))
}

/// `UWOP_ALLOC_SMALL` (8..=128 bytes) or `UWOP_ALLOC_LARGE`.
fn alloc(offset: u8, bytes: u32) -> Result<Code, String> {
    if bytes % 8 != 0 {
        return Err(format!("rsp moves by {bytes}, not a multiple of 8"));
    }
    Ok(match bytes {
        8..=128 => Code {
            offset,
            operation: UWOP_ALLOC_SMALL,
            info: (bytes / 8 - 1) as u8,
            operands: vec![],
        },
        _ if bytes / 8 <= 0xffff => Code {
            offset,
            operation: UWOP_ALLOC_LARGE,
            info: 0,
            operands: vec![(bytes / 8) as u16],
        },
        _ => Code {
            offset,
            operation: UWOP_ALLOC_LARGE,
            info: 1,
            operands: vec![bytes as u16, (bytes >> 16) as u16],
        },
    })
}

/// The `UNWIND_INFO` bytes: header, codes last first, padded to a whole number of 4 bytes.
fn encode(codes: &[Code], frame: u8) -> Result<Vec<u8>, String> {
    let slots: usize = codes.iter().map(|c| 1 + c.operands.len()).sum();
    let count =
        u8::try_from(slots).map_err(|_| format!("{slots} unwind code slots (at most 255)"))?;
    let prologue = codes.last().map_or(0, |c| c.offset);
    let mut out = vec![1, prologue, count, frame];
    for c in codes.iter().rev() {
        out.extend_from_slice(&[c.offset, c.operation | c.info << 4]);
        for o in &c.operands {
            out.extend_from_slice(&o.to_le_bytes());
        }
    }
    out.resize(out.len().next_multiple_of(4), 0);
    Ok(out)
}

/// A code range and where its `UNWIND_INFO` is in the set's image.
pub(crate) struct Function {
    pub start: u64,
    pub len: u64,
    pub info: u32,
}

/// Writes one `RUNTIME_FUNCTION` per function (3 words each, sorted by address) into
/// `table`, pointing into the image of `UNWIND_INFO`s at `image_at` (`image_len` bytes), with
/// addresses relative to the returned base (the lowest of the code and the image). An
/// error if an address is 4 GiB or more above the base.
pub(crate) fn fill_table(
    table: &mut [u32],
    functions: &mut [Function],
    image_at: u64,
    image_len: u64,
) -> Result<u64, String> {
    functions.sort_by_key(|f| f.start);
    let lowest_code = functions.first().map_or(image_at, |f| f.start);
    let base = lowest_code.min(image_at);
    let rva = |address: u64| {
        u32::try_from(address - base).map_err(|_| {
            format!(
                "address {address:#x} is 4 GiB or more above {base:#x}: the unwind information at {image_at:#x} and the code cannot share a base"
            )
        })
    };
    rva(image_at + image_len)?;
    for (k, f) in functions.iter().enumerate() {
        if u64::from(f.info) >= image_len {
            return Err(format!(
                "unwind info offset {:#x} outside the image",
                f.info
            ));
        }
        table[3 * k] = rva(f.start)?;
        table[3 * k + 1] = rva(f.start + f.len)?;
        table[3 * k + 2] = rva(image_at + u64::from(f.info))?;
    }
    Ok(base)
}

/// A set's `UNWIND_INFO`s, concatenated, and the copies of them made near code (a function
/// table can only point 4 GiB or less above its base, and the heap may be farther from the
/// JIT's memory than that).
#[derive(Debug)]
pub(crate) struct Images {
    image: Box<[u8]>,
    #[cfg(all(windows, target_arch = "x86_64"))]
    copies: std::sync::Mutex<Vec<std::sync::Arc<NearImage>>>,
}

impl Images {
    /// Concatenates every program (each a multiple of 4 bytes) and records where each is.
    pub(crate) fn new(programs: &mut [super::unwind::StencilPrograms]) -> Images {
        let mut image = Vec::new();
        for f in programs.iter_mut().flatten().flat_map(|p| p.iter_mut()) {
            f.image_offset = image.len() as u32;
            image.extend_from_slice(&f.program);
        }
        Images {
            image: image.into_boxed_slice(),
            #[cfg(all(windows, target_arch = "x86_64"))]
            copies: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A copy of the image that a table for code in `lo..hi` can point into: one made for
    /// earlier code if it is close enough, else a new one above `hi`.
    #[cfg(all(windows, target_arch = "x86_64"))]
    pub(crate) fn near(&self, lo: u64, hi: u64) -> Result<std::sync::Arc<NearImage>, String> {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        let reach = |c: &NearImage| {
            let (a, b) = (lo.min(c.at()), hi.max(c.at() + c.len()));
            b - a < 1 << 32
        };
        if let Some(c) = copies.iter().find(|c| reach(c)) {
            return Ok(c.clone());
        }
        let copy = std::sync::Arc::new(NearImage::new(&self.image, hi)?);
        if !reach(&copy) {
            return Err(format!(
                "no memory for unwind information within 4 GiB of the code at {lo:#x}..{hi:#x}"
            ));
        }
        copies.retain(|c| std::sync::Arc::strong_count(c) > 1);
        copies.push(copy.clone());
        Ok(copy)
    }
}

/// A read-only copy of an [`Images`] image, placed just above some code.
#[cfg(all(windows, target_arch = "x86_64"))]
#[derive(Debug)]
pub(crate) struct NearImage {
    at: usize,
    len: usize,
}

#[cfg(all(windows, target_arch = "x86_64"))]
impl NearImage {
    /// Maps a copy of `image` at the first free 64 KiB-aligned address at or above `from`
    /// (walking the address space with `VirtualQuery`, at most 2 GiB up).
    fn new(image: &[u8], from: u64) -> Result<NearImage, String> {
        use windows_sys::Win32::System::Memory::{
            VirtualAlloc, VirtualProtect, VirtualQuery, MEMORY_BASIC_INFORMATION, MEM_COMMIT,
            MEM_FREE, MEM_RESERVE, PAGE_READONLY, PAGE_READWRITE,
        };
        const GRANULARITY: u64 = 0x1_0000;
        let len = image.len().max(1);
        let limit = from.saturating_add(1 << 31);
        let mut probe = from.next_multiple_of(GRANULARITY);
        while probe < limit {
            // SAFETY: a zeroed MEMORY_BASIC_INFORMATION is valid; VirtualQuery writes it.
            let mut info: MEMORY_BASIC_INFORMATION = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<MEMORY_BASIC_INFORMATION>();
            // SAFETY: querying any address is allowed; `info` is writable.
            if unsafe { VirtualQuery(probe as *const _, &mut info, size) } == 0 {
                break;
            }
            let region_end = info.BaseAddress as u64 + info.RegionSize as u64;
            if info.State == MEM_FREE && region_end - probe >= len as u64 {
                // SAFETY: a fresh allocation at a free address; on success it is ours.
                let p = unsafe {
                    VirtualAlloc(
                        probe as *const _,
                        len,
                        MEM_RESERVE | MEM_COMMIT,
                        PAGE_READWRITE,
                    )
                };
                if !p.is_null() {
                    // SAFETY: `p` is `len` fresh writable bytes.
                    unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), p.cast(), image.len()) };
                    let mut old = 0;
                    // SAFETY: our allocation; read-only from now on.
                    unsafe { VirtualProtect(p, len, PAGE_READONLY, &mut old) };
                    return Ok(NearImage {
                        at: p as usize,
                        len,
                    });
                }
            }
            probe = region_end.next_multiple_of(GRANULARITY);
        }
        Err(format!(
            "no free memory for {len} bytes of unwind information within 2 GiB above {from:#x}"
        ))
    }

    pub(crate) fn at(&self) -> u64 {
        self.at as u64
    }

    pub(crate) fn len(&self) -> u64 {
        self.len as u64
    }
}

#[cfg(all(windows, target_arch = "x86_64"))]
impl Drop for NearImage {
    fn drop(&mut self) {
        use windows_sys::Win32::System::Memory::{VirtualFree, MEM_RELEASE};
        // SAFETY: allocated by `new`; no table points into it any more (each holds an Arc).
        unsafe { VirtualFree(self.at as *mut _, 0, MEM_RELEASE) };
    }
}

/// Registration of a table built by [`fill_table`].
#[cfg(all(windows, target_arch = "x86_64"))]
pub(crate) mod platform {
    use windows_sys::Win32::System::Diagnostics::Debug::{
        RtlAddFunctionTable, RtlDeleteFunctionTable, IMAGE_RUNTIME_FUNCTION_ENTRY,
    };

    /// # Safety
    /// `table` holds `count` sorted entries whose addresses (relative to `base`) stay valid,
    /// and stays in place until [`delete`]d.
    pub unsafe fn add(table: *const u32, count: u32, base: u64) -> bool {
        // SAFETY: as required of the caller; the entries are 3 u32s, the layout of
        // IMAGE_RUNTIME_FUNCTION_ENTRY.
        unsafe { RtlAddFunctionTable(table.cast::<IMAGE_RUNTIME_FUNCTION_ENTRY>(), count, base) }
    }

    /// # Safety
    /// `table` was [`add`]ed.
    pub unsafe fn delete(table: *const u32) {
        // SAFETY: as required of the caller.
        unsafe { RtlDeleteFunctionTable(table.cast::<IMAGE_RUNTIME_FUNCTION_ENTRY>()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpjit_model::{FrameRow, FrameSave};

    fn row(offset: u32, cfa_register: u8, cfa_offset: u32) -> FrameRow {
        FrameRow {
            offset,
            cfa_register,
            cfa_offset,
        }
    }

    /// The function at `start..end` with its `rows` and `saves`.
    fn function<'a>(
        start: u32,
        end: u32,
        rows: &'a [FrameRow],
        saves: &'a [FrameSave],
    ) -> FrameFunction<'a> {
        FrameFunction {
            start,
            end,
            rows,
            saves,
        }
    }

    fn save(register: u8, cfa_offset: u32, from: u32, to: u32) -> FrameSave {
        FrameSave {
            register,
            cfa_offset,
            from,
            to,
        }
    }

    #[test]
    fn prologue_rows_become_the_unwind_codes_they_came_from() {
        // At stencil offset 0x10: push r15 (2); push rbx (3); sub rsp, 0x48 (7);
        // movaps [rsp+0x20], xmm6 (12); function end 0x38.
        let rows = [
            row(0x10, 7, 8),
            row(0x12, 7, 16),
            row(0x13, 7, 24),
            row(0x17, 7, 96),
        ];
        let saves = [
            save(16, 8, 0x10, 0x38),
            save(15, 16, 0x12, 0x38),
            save(3, 24, 0x13, 0x38),
            save(23, 64, 0x1c, 0x38),
        ];
        let f = function(0x10, 0x38, &rows, &saves);
        let info = unwind_info(&f).unwrap();
        // The bytes the toolchain's reader test starts from (same prologue).
        assert_eq!(
            info,
            [1, 12, 5, 0, 0x0c, 0x68, 2, 0, 0x07, 0x82, 0x03, 0x30, 0x02, 0xf0, 0, 0]
        );
    }

    #[test]
    fn a_frame_register_and_a_leaf_encode() {
        let rows = [row(0, 7, 8), row(1, 7, 16), row(5, 7, 64), row(10, 6, 32)];
        let saves = [save(16, 8, 0, 30), save(6, 16, 1, 30), save(4, 56, 14, 30)];
        let f = function(0, 30, &rows, &saves);
        assert_eq!(
            unwind_info(&f).unwrap(),
            [
                1,
                14,
                5,
                5 | 2 << 4,
                0x0e,
                0x64,
                1,
                0,
                0x0a,
                0x03,
                0x05,
                0x52,
                0x01,
                0x50,
                0,
                0
            ]
        );
        let leaf = function(0, 4, &rows[..1], &saves[..1]);
        assert_eq!(unwind_info(&leaf).unwrap(), [1, 0, 0, 0]);
    }

    #[test]
    fn a_cold_tail_in_its_functions_body_state_unwinds_from_its_first_byte() {
        // A tail at 0x40..0x50 moved off a function that pushed rbx and reserved 8 bytes
        // (CFA = rsp + 24, rbx at CFA - 16): the whole state as codes at offset 0.
        let rows = [row(0x40, 7, 24)];
        let saves = [save(16, 8, 0x40, 0x50), save(3, 16, 0x40, 0x50)];
        let f = function(0x40, 0x50, &rows, &saves);
        // Prologue size 0, 3 slots: SAVE_NONVOL rbx at rsp + 8 (last first), ALLOC_SMALL 16.
        assert_eq!(
            unwind_info(&f).unwrap(),
            [1, 0, 3, 0, 0, 0x34, 1, 0, 0, 0x12, 0, 0]
        );
        // A tail whose CFA is on a frame register is not said this way.
        let rows = [row(0x40, 6, 24)];
        let e = unwind_info(&FrameFunction { rows: &rows, ..f }).unwrap_err();
        assert!(e.contains("first row"), "{e}");
    }

    #[test]
    fn epilogue_rows_are_refused_with_the_reason() {
        let rows = [row(0, 7, 8), row(1, 7, 16), row(10, 7, 8)];
        let saves = [save(16, 8, 0, 20), save(3, 16, 1, 10)];
        let f = function(0, 20, &rows, &saves);
        let e = unwind_info(&f).unwrap_err();
        assert!(e.contains("only prologues"), "{e}");
        let f = FrameFunction {
            saves: &saves[..1],
            ..f
        };
        let e = unwind_info(&f).unwrap_err();
        assert!(
            e.contains("0xa") && e.contains("not a prologue step"),
            "{e}"
        );
    }

    #[test]
    fn the_table_is_sorted_and_relative_to_the_lowest_address() {
        let mut functions = [
            Function {
                start: 0x2_0040,
                len: 0x20,
                info: 4,
            },
            Function {
                start: 0x2_0000,
                len: 0x10,
                info: 0,
            },
        ];
        let mut table = [0u32; 6];
        let base = fill_table(&mut table, &mut functions, 0x1_0000, 12).unwrap();
        assert_eq!(base, 0x1_0000);
        assert_eq!(table, [0x1_0000, 0x1_0010, 0, 0x1_0040, 0x1_0060, 4]);
        // The image above the code: the code is the base.
        let base = fill_table(&mut table, &mut functions, 0x3_0000, 12).unwrap();
        assert_eq!(base, 0x2_0000);
        assert_eq!(table, [0, 0x10, 0x1_0000, 0x40, 0x60, 0x1_0004]);
        let far = fill_table(&mut table, &mut functions, 0x2_0000 + (1 << 32), 12).unwrap_err();
        assert!(far.contains("4 GiB"), "{far}");
        functions[0].info = 12;
        assert!(fill_table(&mut table, &mut functions, 0x1_0000, 12).is_err());
    }

    #[test]
    fn the_image_records_where_each_program_is() {
        use crate::debug::unwind::FunctionProgram;
        let program = |start, bytes: &[u8]| FunctionProgram {
            start,
            end: start + 4,
            program: bytes.into(),
            image_offset: u32::MAX,
        };
        let mut programs = vec![
            Ok(vec![
                program(0, &[1, 0, 0, 0]),
                program(8, &[1, 4, 2, 0, 4, 0x42, 0, 0]),
            ]
            .into_boxed_slice()),
            Err("unknown".to_string()),
            Ok(vec![program(0, &[1, 0, 0, 0])].into_boxed_slice()),
        ];
        let images = Images::new(&mut programs);
        assert_eq!(images.image.len(), 16);
        let offsets: Vec<u32> = programs
            .iter()
            .flatten()
            .flat_map(|p| p.iter().map(|f| f.image_offset))
            .collect();
        assert_eq!(offsets, [0, 4, 12]);
    }
}
