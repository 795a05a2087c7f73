//! Unwind information for stitched code (Linux, x86-64 and AArch64): one DWARF CIE and one
//! FDE per instance, registered with the platform unwinder (`__register_frame`, libgcc's,
//! which Rust's std uses for backtraces and panics) and put into the GDB object's
//! `.eh_frame`, so that a debugger or `std::backtrace::Backtrace` walks from a helper
//! through the trace to the Rust code that entered it, and a panic unwinds through it.
//!
//! # The frame model
//!
//! Ops are entered with the stack pointer where the shim's call left it (x86-64: at the
//! return address into the shim; AArch64: the return address is in `x30`), jump to each
//! other, and leave the stack pointer there; the shim is an ordinary function called from
//! native code. So every instance, shim included, has `CFA = sp + entry + depth(pc)`
//! (`entry` = 8 on x86-64, 0 on AArch64), where `depth` is what the instance itself has
//! pushed at `pc`; the return address is at `CFA - 8` (x86-64) or in `x30` unless saved.
//! An op's caller is thus the shim (at its return address), and the shim's caller is the
//! Rust code. `rbp` (x86-64) is never written by `preserve_none` ops and stays the caller's.
//!
//! `depth` and the register saves come from each stencil's [`StencilFrame`], given by the
//! caller in [`JitOptions::unwind`](crate::JitOptions::unwind): the runtime does not decode
//! instructions. The toolchain, which disassembles every stencil (or could keep the
//! templates' own CFI), is where these should be computed and emitted into the generated
//! crates. Padding, the tail jump and veneers run at depth 0.
//!
//! # Other platforms
//!
//! macOS's libunwind `__register_frame` takes one FDE per call rather than a section (and
//! LLDB reads the GDB object). Windows needs `RUNTIME_FUNCTION` + `UNWIND_INFO` entries per
//! instance registered with `RtlAddGrowableFunctionTable` (removed with
//! `RtlDeleteGrowableFunctionTable`) — the same depths and saves, encoded as
//! `UWOP_ALLOC_SMALL`/`UWOP_PUSH_NONVOL` codes, which must describe a prologue at the start
//! of the function, so ops that push mid-body need one function entry per depth range.
//! Neither is implemented: the option is refused there.

use crate::Error;
use cpjit_model::StencilSet;

/// From code offset `offset` on (until the next step), the stencil has pushed `depth` bytes
/// below the stack pointer it was entered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameStep {
    pub offset: u32,
    pub depth: u32,
}

/// A register the stencil saved for its caller (the shim's callee-saved registers, and on
/// AArch64 the link register `x30` holding the return address): for code offsets in
/// `from..to` its caller's value is at `depth` bytes below the entry stack pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Save {
    /// DWARF register number (x86-64: rbx 3, r12–r15 12–15; AArch64: x0–x30 0–30).
    pub register: u8,
    pub depth: u32,
    pub from: u32,
    pub to: u32,
}

/// How one stencil moves the stack pointer: its steps, by increasing offset (depth 0
/// before the first), and the registers it saves. Without the saves, unwinding finds the
/// right frames on x86-64, but a panic caught above the trace would resume with the
/// trace's values in those registers (and on AArch64 the return address is lost once an
/// op has called a helper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilFrame<'a> {
    pub stencil: &'a str,
    pub steps: &'a [FrameStep],
    pub saves: &'a [Save],
}

/// The host's unwind facts: the stack pointer's and the return address's DWARF numbers,
/// and where the CFA is relative to the stack pointer at entry (x86-64: above the pushed
/// return address; AArch64: the return address is in `x30`).
#[cfg(target_arch = "aarch64")]
mod host {
    pub const SP: u8 = 31;
    pub const RA: u8 = 30;
    pub const ENTRY_CFA: u32 = 0;
}
#[cfg(not(target_arch = "aarch64"))]
mod host {
    pub const SP: u8 = 7;
    pub const RA: u8 = 16;
    pub const ENTRY_CFA: u32 = 8;
}

const DW_CFA_ADVANCE_LOC: u8 = 0x40;
const DW_CFA_ADVANCE_LOC1: u8 = 0x02;
const DW_CFA_ADVANCE_LOC2: u8 = 0x03;
const DW_CFA_ADVANCE_LOC4: u8 = 0x04;
const DW_CFA_DEF_CFA: u8 = 0x0c;
const DW_CFA_DEF_CFA_OFFSET: u8 = 0x0e;
const DW_CFA_OFFSET: u8 = 0x80;
const DW_CFA_RESTORE: u8 = 0xc0;

/// Each stencil's CFA program (by stencil index), checked against the set.
pub(crate) fn compile(
    set: &StencilSet<'_>,
    frames: &[StencilFrame<'_>],
) -> Result<Box<[Box<[u8]>]>, Error> {
    let unsupported = |reason: String| Error::InvalidStencil {
        stencil: "(unwind frames)".into(),
        reason,
    };
    if !cfg!(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )) {
        return Err(unsupported(format!(
            "unwind registration is implemented for Linux on x86-64 and AArch64, not {}-{}",
            std::env::consts::ARCH,
            std::env::consts::OS
        )));
    }
    let mut programs: Vec<Option<Box<[u8]>>> = vec![None; set.stencils.len()];
    for f in frames {
        let index = set
            .index_of(f.stencil)
            .ok_or_else(|| unsupported(format!("stencil `{}` is not in the set", f.stencil)))?;
        let s = &set.stencils[index];
        let invalid = |reason: String| Error::InvalidStencil {
            stencil: s.name.to_string(),
            reason: format!("frame layout: {reason}"),
        };
        let program = cfa_program(f, s.code.len() as u32, s.falls_through).map_err(invalid)?;
        programs[index] = Some(program.into_boxed_slice());
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

/// The CFA program of one stencil: at each offset where the depth changes or a save
/// starts or ends, in offset order.
fn cfa_program(f: &StencilFrame<'_>, len: u32, falls_through: bool) -> Result<Vec<u8>, String> {
    let mut at = 0u32;
    for (k, step) in f.steps.iter().enumerate() {
        if (k > 0 && step.offset <= at) || step.offset >= len || step.depth % 8 != 0 {
            return Err(format!(
                "step {k} (offset {:#x}, depth {}) is not after the previous one, inside the {len} code bytes, at a multiple of 8",
                step.offset, step.depth
            ));
        }
        at = step.offset;
    }
    if falls_through && f.steps.last().is_some_and(|s| s.depth != 0) {
        return Err(
            "ends below its entry stack pointer but falls through to the next instance".into(),
        );
    }
    for save in f.saves {
        let r = save.register;
        if r >= 64
            || r == host::SP
            || (r == host::RA && host::ENTRY_CFA != 0)
            || save.depth == 0
            || save.depth % 8 != 0
            || save.from >= save.to
            || save.to > len
        {
            return Err(format!(
                "save of DWARF register {r} at depth {} for {:#x}..{:#x}: not a general register saved at a positive multiple of 8 for a range inside the code",
                save.depth, save.from, save.to
            ));
        }
    }
    // Events by offset: depth changes, then save starts/ends at the same offset.
    let mut offsets: Vec<u32> = f.steps.iter().map(|s| s.offset).collect();
    offsets.extend(f.saves.iter().flat_map(|s| [s.from, s.to]));
    offsets.sort_unstable();
    offsets.dedup();
    let mut program = Vec::new();
    let mut at = 0u32;
    for offset in offsets.into_iter().filter(|&o| o < len) {
        advance(&mut program, offset - at);
        at = offset;
        if let Some(step) = f.steps.iter().find(|s| s.offset == offset) {
            program.push(DW_CFA_DEF_CFA_OFFSET);
            uleb(&mut program, (host::ENTRY_CFA + step.depth) as u64);
        }
        for save in f.saves {
            if save.from == offset {
                program.push(DW_CFA_OFFSET | save.register);
                uleb(&mut program, ((host::ENTRY_CFA + save.depth) / 8) as u64);
            } else if save.to == offset {
                program.push(DW_CFA_RESTORE | save.register);
            }
        }
    }
    Ok(program)
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

/// A code range and its CFA program.
pub(crate) struct Range<'p> {
    pub start: u64,
    pub len: u64,
    pub program: &'p [u8],
}

/// An `.eh_frame` section: one CIE (x86-64: `CFA = rsp + 8`, return address at `CFA - 8`;
/// AArch64: `CFA = sp`, return address in `x30`; absolute 8-byte addresses), one FDE per
/// range, and the zero terminator.
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
fn entry(out: &mut Vec<u8>, body: &[u8]) {
    let len = (body.len() + 4).next_multiple_of(8) - 4;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(body);
    out.resize(out.len() + len - body.len(), 0);
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
extern "C" {
    fn __register_frame(begin: *const u8);
    fn __deregister_frame(begin: *const u8);
}

/// A trace's `.eh_frame`, registered with the unwinder until dropped.
pub(crate) struct Registration {
    section: Box<[u8]>,
}

impl Registration {
    pub(crate) fn new(section: Vec<u8>) -> Registration {
        let section = section.into_boxed_slice();
        // SAFETY: a well-formed, terminated .eh_frame that lives (unmoved) until
        // deregistered in `drop`.
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        unsafe {
            __register_frame(section.as_ptr())
        };
        Registration { section }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.section
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: registered in `new` with this pointer.
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        unsafe {
            __deregister_frame(self.section.as_ptr())
        };
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("eh_frame_bytes", &self.section.len())
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
            },
            Range {
                start: 0x1020,
                len: 0x8,
                program: &[],
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
