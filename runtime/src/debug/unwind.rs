//! Unwind information for stitched code (x86-64 Linux): one DWARF CIE and one FDE per
//! instance, registered with the platform unwinder (`__register_frame`, libgcc's, which
//! Rust's std uses for backtraces and panics) and put into the GDB object's `.eh_frame`,
//! so that a debugger or `std::backtrace::Backtrace` walks from a helper through the
//! trace to the Rust code that entered it.
//!
//! # The frame model
//!
//! Ops are entered with the stack pointer at the return address into the entry shim (the
//! shim called the first op; ops jump to each other) and leave it there; the shim is an
//! ordinary function called from native code. So every instance, shim included, has
//! `CFA = rsp + 8 + depth(pc)` with the return address at `CFA - 8`, where `depth` is what
//! the instance itself has pushed at `pc`. An op's caller is thus the shim (at its return
//! address), and the shim's caller is the Rust code. `rbp` is never written by ops (the
//! `preserve_none` convention keeps it) and stays the caller's.
//!
//! `depth` comes from each stencil's [`StencilFrame`], given by the caller in
//! [`JitOptions::unwind`](crate::JitOptions::unwind): the runtime does not decode
//! instructions. (The toolchain, which disassembles every stencil, is where these should
//! be computed and emitted into the generated crates.) Padding, the tail jump and veneers
//! run at depth 0.
//!
//! Registers the shim saves are not described: unwinding yields the right frames (CFA,
//! return address, `rbp`), but a debugger shows stale values of `rbx`, `r12`–`r15` in the
//! frames above the trace.
//!
//! # Other platforms
//!
//! AArch64 needs a second rule per step (where `x30` is saved, since the return address
//! is in a register at op entry); macOS's libunwind `__register_frame` takes one FDE per
//! call rather than a section; Windows needs `RUNTIME_FUNCTION` + `UNWIND_INFO` entries
//! per instance registered with `RtlAddGrowableFunctionTable` (and removed with
//! `RtlDeleteGrowableFunctionTable`) — the same depths, encoded as `UWOP_ALLOC_SMALL`/
//! `UWOP_PUSH_NONVOL` codes. None of these are implemented yet: the option is refused there.

use crate::Error;
use cpjit_model::StencilSet;

/// From code offset `offset` on (until the next step), the stencil has pushed `depth` bytes
/// below the stack pointer it was entered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameStep {
    pub offset: u32,
    pub depth: u32,
}

/// How one stencil moves the stack pointer: its steps, by increasing offset (depth 0
/// before the first), and the registers it saves for its caller (the shim's callee-saved
/// registers), each as `(DWARF register number, depth)`: saved at `depth` below the
/// entry stack pointer, valid while the stencil's depth is at least that (a push/pop
/// pair). Without them, unwinding finds the right frames, but a panic caught above the
/// trace would resume with the trace's values in those registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilFrame<'a> {
    pub stencil: &'a str,
    pub steps: &'a [FrameStep],
    pub saves: &'a [(u8, u32)],
}

const DW_CFA_ADVANCE_LOC: u8 = 0x40;
const DW_CFA_ADVANCE_LOC1: u8 = 0x02;
const DW_CFA_ADVANCE_LOC2: u8 = 0x03;
const DW_CFA_ADVANCE_LOC4: u8 = 0x04;
const DW_CFA_DEF_CFA: u8 = 0x0c;
const DW_CFA_DEF_CFA_OFFSET: u8 = 0x0e;
const DW_CFA_OFFSET: u8 = 0x80;
const DW_CFA_RESTORE: u8 = 0xc0;
const X86_64_RSP: u8 = 7;
const X86_64_RA: u8 = 16;

/// Each stencil's CFA program (by stencil index), checked against the set.
pub(crate) fn compile(
    set: &StencilSet<'_>,
    frames: &[StencilFrame<'_>],
) -> Result<Box<[Box<[u8]>]>, Error> {
    let unsupported = |reason: String| Error::InvalidStencil {
        stencil: "(unwind frames)".into(),
        reason,
    };
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(unsupported(format!(
            "unwind registration is implemented for x86-64 Linux only, not {}-{}",
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
        if let Some(&(reg, depth)) = f.saves.iter().find(|&&(reg, depth)| {
            reg >= 64 || reg == X86_64_RSP || reg == X86_64_RA || depth == 0 || depth % 8 != 0
        }) {
            return Err(invalid(format!(
                "save of DWARF register {reg} at depth {depth}: not a general register saved at a positive multiple of 8"
            )));
        }
        let mut program = Vec::new();
        let mut at = 0u32;
        let mut depth = 0u32;
        for (k, step) in f.steps.iter().enumerate() {
            if (k > 0 && step.offset <= at) || step.offset as usize >= s.code.len() {
                return Err(invalid(format!(
                    "step {k} at offset {:#x} is not after the previous one and inside the {} code bytes",
                    step.offset,
                    s.code.len()
                )));
            }
            if step.depth % 8 != 0 {
                return Err(invalid(format!(
                    "step {k} has depth {}, not a multiple of 8",
                    step.depth
                )));
            }
            advance(&mut program, step.offset - at);
            program.push(DW_CFA_DEF_CFA_OFFSET);
            uleb(&mut program, 8 + step.depth as u64);
            for &(reg, saved_at) in f.saves {
                match (saved_at <= depth, saved_at <= step.depth) {
                    (false, true) => {
                        program.push(DW_CFA_OFFSET | reg);
                        uleb(&mut program, (8 + saved_at as u64) / 8);
                    }
                    (true, false) => program.push(DW_CFA_RESTORE | reg),
                    _ => {}
                }
            }
            at = step.offset;
            depth = step.depth;
        }
        if let Some(last) = f.steps.last() {
            if last.depth != 0 && s.falls_through {
                return Err(invalid(format!(
                    "ends at depth {} but falls through to the next instance (depth 0)",
                    last.depth
                )));
            }
        }
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

/// An `.eh_frame` section: one CIE (`CFA = rsp + 8`, return address at `CFA - 8`,
/// absolute 8-byte addresses), one FDE per range, and the zero terminator.
pub(crate) fn eh_frame(ranges: &[Range<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + ranges.len() * 40);
    // CIE: length, id 0, version 1, "zR", code align 1, data align -8, RA register,
    // augmentation data (FDE pointer encoding: absolute), initial instructions.
    let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, X86_64_RA, 1, 0x00];
    cie.extend_from_slice(&[DW_CFA_DEF_CFA, X86_64_RSP, 8, DW_CFA_OFFSET | X86_64_RA, 1]);
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

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
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
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
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
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
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
