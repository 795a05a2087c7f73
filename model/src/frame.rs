//! Frame layouts: how to find a stencil's caller from any of its code offsets, so that a
//! debugger, a profiler or a panic can unwind through stitched code.
//!
//! A layout is a table of DWARF call-frame rows, exactly what the compiler's own call-frame
//! information said for the stencil's functions (the toolchain reads it from the object and
//! never guesses: ELF `.eh_frame`, or x64 COFF `.pdata`/`.xdata`, whose unwind codes
//! describe prologues only, so those rows hold "prologue done" through the epilogue, where
//! Windows' unwinder reads the code instead). Registers are the architecture's DWARF numbers (x86-64: `rsp` 7, `rbp` 6,
//! return address 16; AArch64: `x29` 29, `x30` 30, `sp` 31; RISC-V: `ra` 1, `sp` 2, `s0` 8).
//! The *CFA* (canonical frame address) is the caller's stack pointer value before the call
//! that entered the function (x86-64: above the pushed return address).
//!
//! A stencil's code holds its template function and any static helpers copied with it, so
//! a layout lists one [`FrameFunction`] per function, by code offset. Ops are entered by a
//! jump, with the stack pointer where the entry shim's call left it, so an op's rows say
//! "called from the shim" and unwinding walks op → shim → the native caller.

/// From code offset `offset` on (until the next row), `CFA = cfa_register + cfa_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRow {
    pub offset: u32,
    pub cfa_register: u8,
    pub cfa_offset: u32,
}

/// For code offsets in `from..to`, the caller's value of `register` is saved in memory at
/// `CFA - cfa_offset` (on x86-64 this includes the return address, register 16, at
/// `CFA - 8` everywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSave {
    pub register: u8,
    pub cfa_offset: u32,
    pub from: u32,
    pub to: u32,
}

/// One function of a stencil's code: `start..end` (code offsets), its rows by increasing
/// offset (the first at `start`), and its register saves. Code outside every function
/// (alignment padding between them) never runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameFunction<'a> {
    pub start: u32,
    pub end: u32,
    pub rows: &'a [FrameRow],
    pub saves: &'a [FrameSave],
}

/// What is known about how a stencil uses the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameLayout<'a> {
    /// The call-frame rows of each function in the stencil's code, by increasing `start`.
    Functions(&'a [FrameFunction<'a>]),
    /// No layout, and why (e.g. the object format's unwind tables are not read, or the
    /// compiler described the frame in a way rows cannot express, at which offset). A
    /// trace that uses the stencil cannot register unwind information.
    Unknown(&'a str),
}

/// The frame layout of the stencil called `stencil` (a generated crate's `FRAMES` has one
/// per stencil of its `SET`, in the same order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilFrame<'a> {
    pub stencil: &'a str,
    pub layout: FrameLayout<'a>,
}

/// The DWARF number (the numbering [`FrameRow`] and [`FrameSave`] use) of each x64 Windows
/// unwind-code register number (`UNWIND_CODE` op info, `UNWIND_INFO` frame register:
/// rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15), so that the toolchain's `.pdata`
/// reader and the runtime's `UNWIND_INFO` writer agree on one table.
pub const X64_UNWIND_DWARF_REGISTERS: [u8; 16] =
    [0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15];

/// The DWARF number of x64 register `xmm0` (`xmm<n>` is this plus `n`).
pub const X64_DWARF_XMM0: u8 = 17;
