//! Unwind information for stitched code: one DWARF CIE and, per instance, one FDE per
//! function of its stencil, registered with the platform unwinder (`__register_frame`:
//! libgcc's on glibc Linux, which Rust's std uses for backtraces and panics, takes the
//! whole section; LLVM libunwind's, on macOS and in Rust's musl targets, one FDE per call)
//! and put into the GDB object's `.eh_frame`, so that a debugger or
//! `std::backtrace::Backtrace` walks from a helper through the trace to the Rust code that
//! entered it, and a panic unwinds through it.
//!
//! # Where the frames come from
//!
//! Each stencil's [`StencilFrame`] is the compiler's own call-frame information, read by the
//! toolchain from the object's `.eh_frame` and emitted as the generated crate's `FRAMES`
//! (see `cpjit_model::FrameLayout`): the runtime only re-encodes those rows per instance;
//! it decodes no instruction. Ops are entered by a jump with the stack pointer where the
//! shim's call left it, so an op's rows say "called from the shim"; the shim is an ordinary
//! function. The padding after an instance, the tail jump and the veneers run in that
//! entry state (the CIE's initial rule: x86-64 `CFA = rsp + 8`, AArch64 and RISC-V
//! `CFA = sp`).
//!
//! A stencil whose layout is `FrameLayout::Unknown` (all stencils of Mach-O and ARM64 COFF
//! sets, whose objects are built without unwind tables) may be in the set, but finishing a
//! trace that uses it is an error naming the stencil and the reason. On RISC-V, LLVM 19
//! describes prologues but not epilogues, so the rows are exact at calls (backtraces,
//! panics) but not on the few instructions between an epilogue and the jump that leaves
//! the stencil.
//!
//! # Windows x64
//!
//! The x64 COFF set's layouts come from its `.pdata`/`.xdata`; the runtime re-encodes each
//! stencil function's rows as an `UNWIND_INFO` once (see `win64`), and per trace registers
//! a table of `RUNTIME_FUNCTION`s with `RtlAddFunctionTable`, deleted when the trace is
//! dropped. Tested under wine in the Windows x64 matrix row
//! (`tests/debug_unwind_generated.rs`). There is no `.eh_frame` on Windows, so GDB's
//! object gets none.
//!
//! # Other platforms
//!
//! macOS: per-FDE registration is implemented (compile-checked for both Apple targets; not
//! run here), but the Apple sets have no layouts yet. Windows ARM64: not implemented (no
//! layouts, and `compile` refuses the option).

use crate::Error;
use cpjit_model::StencilSet;
pub use cpjit_model::{FrameFunction, FrameLayout, FrameRow, FrameSave, StencilFrame};

/// The host's unwind facts: the stack pointer's and the return address's DWARF numbers,
/// and where the CFA is relative to the stack pointer at entry (x86-64: above the pushed
/// return address; AArch64, RISC-V: the return address is in a register).
#[cfg(target_arch = "aarch64")]
mod host {
    pub const SP: u8 = 31;
    pub const RA: u8 = 30;
    pub const ENTRY_CFA: u32 = 0;
}
#[cfg(target_arch = "riscv64")]
mod host {
    pub const SP: u8 = 2;
    pub const RA: u8 = 1;
    pub const ENTRY_CFA: u32 = 0;
}
#[cfg(not(any(target_arch = "aarch64", target_arch = "riscv64")))]
#[cfg_attr(all(windows, target_arch = "x86_64"), allow(dead_code))] // RA, ENTRY_CFA: DWARF only
mod host {
    pub const SP: u8 = 7;
    pub const RA: u8 = 16;
    pub const ENTRY_CFA: u32 = 8;
}

/// The platforms whose unwinder takes our `.eh_frame` (see [`Registration`]).
const SUPPORTED: bool = platform::DWARF || cfg!(all(windows, target_arch = "x86_64"));

const DW_CFA_ADVANCE_LOC: u8 = 0x40;
const DW_CFA_ADVANCE_LOC1: u8 = 0x02;
const DW_CFA_ADVANCE_LOC2: u8 = 0x03;
const DW_CFA_ADVANCE_LOC4: u8 = 0x04;
const DW_CFA_OFFSET_EXTENDED: u8 = 0x05;
const DW_CFA_RESTORE_EXTENDED: u8 = 0x06;
const DW_CFA_DEF_CFA: u8 = 0x0c;
const DW_CFA_DEF_CFA_OFFSET: u8 = 0x0e;
const DW_CFA_OFFSET: u8 = 0x80;
const DW_CFA_RESTORE: u8 = 0xc0;

/// One function of a stencil: its code range (stencil offsets) and its unwind program in
/// the platform's encoding (a DWARF CFA program; on Windows x64 an `UNWIND_INFO`).
#[derive(Debug)]
pub(crate) struct FunctionProgram {
    pub start: u32,
    pub end: u32,
    pub program: Box<[u8]>,
    /// Where `program` is in [`Compiled`]'s image of all programs (Windows x64).
    pub image_offset: u32,
}

/// A stencil's FDE programs, or why it has none.
pub(crate) type StencilPrograms = Result<Box<[FunctionProgram]>, String>;

/// What a JIT with unwinding on keeps: each stencil's programs and, on Windows x64, the
/// image of all of them that function tables point into (copied near the code).
#[derive(Debug)]
pub(crate) struct Compiled {
    pub programs: Box<[StencilPrograms]>,
    #[cfg(all(windows, target_arch = "x86_64"))]
    pub images: super::win64::Images,
}

impl Compiled {
    /// [`compile`]s the set's frames.
    pub(crate) fn new(
        set: &StencilSet<'_>,
        frames: &[StencilFrame<'_>],
    ) -> Result<Compiled, Error> {
        #[allow(unused_mut)] // image offsets are assigned on Windows x64 only
        let mut programs = compile(set, frames)?;
        Ok(Compiled {
            #[cfg(all(windows, target_arch = "x86_64"))]
            images: super::win64::Images::new(&mut programs),
            programs,
        })
    }
}

/// Each stencil's FDE programs (by stencil index), checked against the set.
pub(crate) fn compile(
    set: &StencilSet<'_>,
    frames: &[StencilFrame<'_>],
) -> Result<Box<[StencilPrograms]>, Error> {
    let unsupported = |reason: String| Error::InvalidStencil {
        stencil: "(unwind frames)".into(),
        reason,
    };
    if !SUPPORTED {
        return Err(unsupported(format!(
            "unwind registration is implemented for Linux (x86-64, AArch64, RISC-V), macOS and x86-64 Windows, not {}-{}",
            std::env::consts::ARCH,
            std::env::consts::OS
        )));
    }
    let mut programs: Vec<Option<StencilPrograms>> = Vec::new();
    programs.resize_with(set.stencils.len(), || None);
    for (k, f) in frames.iter().enumerate() {
        // Generated `FRAMES` are in set order; other lists are looked up by name.
        let index = match set.stencils.get(k) {
            Some(s) if s.name == f.stencil => k,
            _ => set
                .index_of(f.stencil)
                .ok_or_else(|| unsupported(format!("stencil `{}` is not in the set", f.stencil)))?,
        };
        let s = &set.stencils[index];
        let compiled = match f.layout {
            FrameLayout::Unknown(why) => Err(why.to_string()),
            FrameLayout::Functions(functions) => Ok(functions
                .iter()
                .map(|func| {
                    function_program(func, s.code.len() as u32).map_err(|reason| {
                        Error::InvalidStencil {
                            stencil: s.name.to_string(),
                            reason: format!(
                                "frame layout, function at {:#x}..{:#x}: {reason}",
                                func.start, func.end
                            ),
                        }
                    })
                })
                .collect::<Result<Box<[_]>, Error>>()?),
        };
        if let Ok(list) = &compiled {
            if list.windows(2).any(|w| w[1].start < w[0].end) {
                return Err(Error::InvalidStencil {
                    stencil: s.name.to_string(),
                    reason: "frame layout: functions overlap or are not in code order".into(),
                });
            }
        }
        programs[index] = Some(compiled);
    }
    programs
        .into_iter()
        .zip(set.stencils)
        .map(|(p, s)| {
            p.ok_or_else(|| Error::InvalidStencil {
                stencil: s.name.to_string(),
                reason: "no frame layout in JitOptions::unwind".into(),
            })
        })
        .collect()
}

/// The CFA program of one function (offsets relative to its start): at each offset where
/// the CFA rule changes or a save starts or ends, in offset order.
fn function_program(f: &FrameFunction<'_>, len: u32) -> Result<FunctionProgram, String> {
    if f.start >= f.end || f.end > len {
        return Err(format!("not a range inside the {len} code bytes"));
    }
    if f.rows.first().map(|r| r.offset) != Some(f.start) {
        return Err("the first row is not at the function's start".into());
    }
    let mut at = f.start;
    for (k, row) in f.rows.iter().enumerate() {
        if (k > 0 && row.offset <= at) || row.offset >= f.end {
            return Err(format!(
                "row {k} (offset {:#x}) is not after the previous one and inside the function",
                row.offset
            ));
        }
        at = row.offset;
    }
    for save in f.saves {
        if save.register == host::SP
            || save.cfa_offset == 0
            || save.cfa_offset % 8 != 0
            || save.from >= save.to
            || save.from < f.start
            || save.to > f.end
        {
            return Err(format!(
                "save of DWARF register {} at CFA-{} for {:#x}..{:#x}: not a register saved at a positive multiple of 8 below the CFA for a range inside the function",
                save.register, save.cfa_offset, save.from, save.to
            ));
        }
    }
    let program = if cfg!(all(windows, target_arch = "x86_64")) {
        super::win64::unwind_info(f)?
    } else {
        dwarf_program(f)
    };
    Ok(FunctionProgram {
        start: f.start,
        end: f.end,
        program: program.into_boxed_slice(),
        image_offset: 0,
    })
}

/// The DWARF CFA program of a checked function (offsets relative to its start).
fn dwarf_program(f: &FrameFunction<'_>) -> Vec<u8> {
    let mut offsets: Vec<u32> = f.rows.iter().map(|r| r.offset).collect();
    offsets.extend(f.saves.iter().flat_map(|s| [s.from, s.to]));
    offsets.sort_unstable();
    offsets.dedup();
    let mut program = Vec::new();
    let mut at = f.start;
    let mut cfa_register = host::SP;
    for offset in offsets.into_iter().filter(|&o| o < f.end) {
        advance(&mut program, offset - at);
        at = offset;
        if let Some(row) = f.rows.iter().find(|r| r.offset == offset) {
            if row.cfa_register == cfa_register {
                program.push(DW_CFA_DEF_CFA_OFFSET);
            } else {
                program.push(DW_CFA_DEF_CFA);
                uleb(&mut program, u64::from(row.cfa_register));
                cfa_register = row.cfa_register;
            }
            uleb(&mut program, u64::from(row.cfa_offset));
        }
        for save in f.saves {
            let r = save.register;
            if save.to == offset {
                if r < 64 {
                    program.push(DW_CFA_RESTORE | r);
                } else {
                    program.push(DW_CFA_RESTORE_EXTENDED);
                    uleb(&mut program, u64::from(r));
                }
            }
        }
        for save in f.saves.iter().filter(|s| s.from == offset) {
            let r = save.register;
            if r < 64 {
                program.push(DW_CFA_OFFSET | r);
            } else {
                program.push(DW_CFA_OFFSET_EXTENDED);
                uleb(&mut program, u64::from(r));
            }
            uleb(&mut program, u64::from(save.cfa_offset / 8));
        }
    }
    program
}

fn advance(program: &mut Vec<u8>, delta: u32) {
    match delta {
        0 => {}
        1..=0x3f => program.push(DW_CFA_ADVANCE_LOC | delta as u8),
        0x40..=0xff => program.extend_from_slice(&[DW_CFA_ADVANCE_LOC1, delta as u8]),
        0x100..=0xffff => {
            program.push(DW_CFA_ADVANCE_LOC2);
            program.extend_from_slice(&(delta as u16).to_le_bytes());
        }
        _ => {
            program.push(DW_CFA_ADVANCE_LOC4);
            program.extend_from_slice(&delta.to_le_bytes());
        }
    }
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A code range and its unwind program ([`FunctionProgram::program`]; empty: the entry
/// state throughout).
pub(crate) struct Range<'p> {
    pub start: u64,
    pub len: u64,
    pub program: &'p [u8],
    /// [`FunctionProgram::image_offset`] (0 for an empty program; read on Windows x64).
    #[cfg_attr(not(all(windows, target_arch = "x86_64")), allow(dead_code))]
    pub image_offset: u32,
}

/// An `.eh_frame` section: one CIE (x86-64: `CFA = rsp + 8`, return address at `CFA - 8`;
/// AArch64: `CFA = sp`, return address in `x30`; absolute 8-byte addresses), one FDE per
/// range, and the zero terminator.
#[cfg_attr(all(windows, target_arch = "x86_64"), allow(dead_code))] // DWARF platforms only
pub(crate) fn eh_frame(ranges: &[Range<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + ranges.len() * 40);
    // CIE: length, id 0, version 1, "zR", code align 1, data align -8, RA register,
    // augmentation data (FDE pointer encoding: absolute), initial instructions.
    let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, host::RA, 1, 0x00];
    cie.extend_from_slice(&[DW_CFA_DEF_CFA, host::SP, host::ENTRY_CFA as u8]);
    if host::ENTRY_CFA != 0 {
        // x86-64: the return address was pushed by the call.
        cie.extend_from_slice(&[DW_CFA_OFFSET | host::RA, 1]);
    }
    entry(&mut out, &cie);
    for r in ranges {
        let mut fde = Vec::with_capacity(24 + r.program.len());
        let cie_pointer = (out.len() + 4) as u32; // back from this field to the CIE at 0
        fde.extend_from_slice(&cie_pointer.to_le_bytes());
        fde.extend_from_slice(&r.start.to_le_bytes());
        fde.extend_from_slice(&r.len.to_le_bytes());
        fde.push(0); // no augmentation data
        fde.extend_from_slice(r.program);
        entry(&mut out, &fde);
    }
    out.extend_from_slice(&[0; 4]);
    out
}

/// Appends a length-prefixed CIE/FDE padded with `DW_CFA_nop`s to a multiple of 8.
#[cfg_attr(all(windows, target_arch = "x86_64"), allow(dead_code))] // DWARF platforms only
fn entry(out: &mut Vec<u8>, body: &[u8]) {
    let len = (body.len() + 4).next_multiple_of(8) - 4;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(body);
    out.resize(out.len() + len - body.len(), 0);
}

/// The unwinder's DWARF registration calls (Linux, macOS); nothing elsewhere (Windows x64
/// registers function tables; on other platforms [`compile`] refuses the option, so no
/// registration is ever made). [`SUPPORTED`] follows from it. By OS alone: on an
/// architecture the kit has no stencils for (say, Linux on s390x) `Jit::new` refuses every
/// set before it looks at unwinding.
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod platform {
    /// The unwinder takes DWARF call-frame information from us here.
    pub const DWARF: bool = true;

    extern "C" {
        fn __register_frame(begin: *const u8);
        fn __deregister_frame(begin: *const u8);
    }

    /// # Safety
    /// `entry` is a well-formed, terminated `.eh_frame` (libgcc) or FDE (libunwind: macOS,
    /// musl) that stays in place until [`deregister`]ed.
    pub unsafe fn register(entry: *const u8) {
        // SAFETY: as required of the caller.
        unsafe { __register_frame(entry) }
    }

    /// # Safety
    /// `entry` was [`register`]ed.
    pub unsafe fn deregister(entry: *const u8) {
        // SAFETY: as required of the caller.
        unsafe { __deregister_frame(entry) }
    }
}
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[allow(dead_code)] // Windows x64 registers a function table instead (see `Registration`)
mod platform {
    /// No DWARF registration here.
    pub const DWARF: bool = false;

    pub unsafe fn register(_entry: *const u8) {}
    pub unsafe fn deregister(_entry: *const u8) {}
}

/// A trace's unwind information, registered with the unwinder until dropped: an
/// `.eh_frame` on the DWARF platforms, a function table ([`super::win64`]) on Windows x64.
pub(crate) struct Registration {
    /// The registered `.eh_frame` (empty on Windows x64).
    section: Box<[u8]>,
    /// The registered `RUNTIME_FUNCTION` table (Windows x64 only).
    table: Box<[u32]>,
    /// The copy of the set's `UNWIND_INFO`s the table points into (Windows x64 only).
    #[cfg(all(windows, target_arch = "x86_64"))]
    #[allow(dead_code)] // kept alive, never read
    image: Option<std::sync::Arc<super::win64::NearImage>>,
}

impl Registration {
    /// Builds and registers the unwind information of `ranges`.
    #[cfg_attr(not(all(windows, target_arch = "x86_64")), allow(unused_variables))]
    pub(crate) fn new(ranges: &[Range<'_>], compiled: &Compiled) -> Result<Registration, Error> {
        #[cfg(all(windows, target_arch = "x86_64"))]
        {
            Registration::function_table(ranges, &compiled.images)
        }
        #[cfg(not(all(windows, target_arch = "x86_64")))]
        {
            let section = eh_frame(ranges).into_boxed_slice();
            for entry in registered_entries(&section) {
                // SAFETY: a well-formed, terminated .eh_frame (libgcc: the whole section;
                // libunwind: each FDE) that lives, unmoved, until deregistered in `drop`.
                unsafe { platform::register(section.as_ptr().add(entry)) };
            }
            Ok(Registration {
                section,
                table: Box::new([]),
            })
        }
    }

    /// The function table of the ranges with a program (the others are leaves for
    /// Windows, which is the state they run in), pointing into a copy of the set's
    /// `UNWIND_INFO`s near the code, registered with `RtlAddFunctionTable`.
    #[cfg(all(windows, target_arch = "x86_64"))]
    fn function_table(
        ranges: &[Range<'_>],
        images: &super::win64::Images,
    ) -> Result<Registration, Error> {
        use super::win64;
        let refused = |reason: String| Error::InvalidStencil {
            stencil: "(unwind frames)".into(),
            reason,
        };
        let mut functions: Vec<win64::Function> = ranges
            .iter()
            .filter(|r| !r.program.is_empty())
            .map(|r| win64::Function {
                start: r.start,
                len: r.len,
                info: r.image_offset,
            })
            .collect();
        let Some(lo) = functions.iter().map(|f| f.start).min() else {
            return Ok(Registration {
                section: Box::new([]),
                table: Box::new([]),
                image: None,
            });
        };
        let hi = functions
            .iter()
            .map(|f| f.start + f.len)
            .max()
            .unwrap_or(lo);
        let image = images.near(lo, hi).map_err(refused)?;
        let mut table = vec![0u32; 3 * functions.len()].into_boxed_slice();
        let base = win64::fill_table(&mut table, &mut functions, image.at(), image.len())
            .map_err(refused)?;
        let count = functions.len() as u32;
        // SAFETY: `count` sorted entries, relative to `base`, whose UNWIND_INFOs are in
        // `image` (kept alive by this registration); the boxed table lives, unmoved, until
        // deleted in `drop`, before the trace's code is freed (the trace drops its debug
        // state first).
        if !unsafe { win64::platform::add(table.as_ptr(), count, base) } {
            return Err(refused(format!(
                "RtlAddFunctionTable refused a table of {count} functions"
            )));
        }
        Ok(Registration {
            section: Box::new([]),
            table,
            image: Some(image),
        })
    }

    /// The `.eh_frame` that was registered (none on Windows x64).
    pub(crate) fn eh_frame(&self) -> Option<&[u8]> {
        (!self.section.is_empty()).then_some(&self.section[..])
    }
}

/// Whether the unwinder linked into this process is LLVM's libunwind, whose
/// `__register_frame` takes one FDE (a whole section is refused: `bad fde: FDE is really a
/// CIE`): macOS's system unwinder, and the in-tree libunwind Rust's std links on musl
/// targets. Elsewhere on Linux it is libgcc's, which takes a whole `.eh_frame`.
const PER_FDE_UNWINDER: bool = cfg!(any(target_os = "macos", target_env = "musl"));

/// The offsets `__register_frame` is called with: libgcc takes the whole section (offset 0)
/// and walks it; libunwind ([`PER_FDE_UNWINDER`]) takes one FDE per call.
#[cfg_attr(all(windows, target_arch = "x86_64"), allow(dead_code))] // DWARF platforms only
fn registered_entries(section: &[u8]) -> Vec<usize> {
    if !PER_FDE_UNWINDER {
        return vec![0];
    }
    fde_offsets(section)
}

/// The offset of every FDE (entries after the CIE at 0) of a section built by [`eh_frame`].
#[cfg_attr(all(windows, target_arch = "x86_64"), allow(dead_code))] // DWARF platforms only
fn fde_offsets(section: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= section.len() {
        let len = u32::from_le_bytes(section[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        if at > 0 {
            out.push(at);
        }
        at += 4 + len;
    }
    out
}

impl Drop for Registration {
    fn drop(&mut self) {
        #[cfg(all(windows, target_arch = "x86_64"))]
        if !self.table.is_empty() {
            // SAFETY: added in `function_table` with this pointer (an empty table, of no
            // functions, was not added).
            unsafe { super::win64::platform::delete(self.table.as_ptr()) };
        }
        #[cfg(not(all(windows, target_arch = "x86_64")))]
        for entry in registered_entries(&self.section) {
            // SAFETY: registered in `new` with this pointer.
            unsafe { platform::deregister(self.section.as_ptr().add(entry)) };
        }
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("eh_frame_bytes", &self.section.len())
            .field("function_table_words", &self.table.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_use_the_shortest_form() {
        let mut p = Vec::new();
        for d in [0, 1, 0x3f, 0x40, 0xff, 0x100, 0x1_0000] {
            advance(&mut p, d);
        }
        assert_eq!(
            p,
            [0x41, 0x7f, 0x02, 0x40, 0x02, 0xff, 0x03, 0x00, 0x01, 0x04, 0x00, 0x00, 0x01, 0x00]
        );
    }

    #[test]
    fn eh_frame_entries_are_aligned_and_point_back_to_the_cie() {
        let program = [DW_CFA_ADVANCE_LOC | 4, DW_CFA_DEF_CFA_OFFSET, 16];
        let ranges = [
            Range {
                start: 0x1000,
                len: 0x20,
                program: &program,
                image_offset: 0,
            },
            Range {
                start: 0x1020,
                len: 0x8,
                program: &[],
                image_offset: 0,
            },
        ];
        let s = eh_frame(&ranges);
        let mut at = 0;
        let mut fdes = 0;
        loop {
            let len = u32::from_le_bytes(s[at..at + 4].try_into().unwrap()) as usize;
            if len == 0 {
                assert_eq!(at + 4, s.len(), "terminator last");
                break;
            }
            assert_eq!((len + 4) % 8, 0);
            let id = u32::from_le_bytes(s[at + 4..at + 8].try_into().unwrap()) as usize;
            if at > 0 {
                assert_eq!(at + 4 - id, 0, "CIE pointer");
                let start = u64::from_le_bytes(s[at + 8..at + 16].try_into().unwrap());
                assert_eq!(start, ranges[fdes].start);
                fdes += 1;
            }
            at += 4 + len;
        }
        assert_eq!(fdes, 2);
    }
}
