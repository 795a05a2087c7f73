//! Frame layouts of the hand-written test stencils (`tests/stencils/*.s`; offsets from the
//! listings in `common/stencils_*.rs`), as depths below the entry stack pointer, for the
//! tests that use the hand-written set (the generated sets carry their own `FRAMES`).
//! `debug_unwind.rs` checks the depths against llvm-mc-19's decoding of the stencils' bytes;
//! [`frames`] turns them into the model's rows.
#![allow(dead_code)]

use cpjit_runtime::debug::unwind::{FrameFunction, FrameLayout, FrameRow, FrameSave};

/// From code offset `offset` on, the stencil has pushed `depth` bytes.
#[derive(Clone, Copy, Debug)]
pub struct FrameStep {
    pub offset: u32,
    pub depth: u32,
}

/// A register saved at `depth` below the entry stack pointer for offsets `from..to`.
#[derive(Clone, Copy, Debug)]
pub struct Save {
    pub register: u8,
    pub depth: u32,
    pub from: u32,
    pub to: u32,
}

/// One stencil's steps and saves.
#[derive(Clone, Copy, Debug)]
pub struct StencilFrame<'a> {
    pub stencil: &'a str,
    pub steps: &'a [FrameStep],
    pub saves: &'a [Save],
}

/// The CFA at entry, above the stack pointer (x86-64: the return address the shim's call
/// pushed) and the stack pointer's DWARF number.
const ENTRY_CFA: u32 = if cfg!(target_arch = "x86_64") { 8 } else { 0 };
const SP: u8 = if cfg!(target_arch = "x86_64") { 7 } else { 31 };

fn leak<T>(v: Vec<T>) -> &'static [T] {
    v.leak()
}

/// The frame of the test set's stencil `name`: as [`FRAMES`] lists it, or [`flat`].
pub fn frame_of(name: &'static str) -> StencilFrame<'static> {
    FRAMES
        .iter()
        .find(|f| f.stencil == name)
        .copied()
        .unwrap_or(flat(name))
}

/// Every stencil's frame ([`frame_of`]) as the model's frame layouts, for
/// `JitOptions::unwind` with the test set.
pub fn frames() -> &'static [cpjit_runtime::debug::unwind::StencilFrame<'static>] {
    let list: Vec<_> = super::common::SET
        .stencils
        .iter()
        .map(|s| {
            let f = frame_of(s.name);
            let len = super::common::SET.get(f.stencil).unwrap().code.len() as u32;
            let mut rows = vec![FrameRow {
                offset: 0,
                cfa_register: SP,
                cfa_offset: ENTRY_CFA,
            }];
            rows.extend(f.steps.iter().map(|s| FrameRow {
                offset: s.offset,
                cfa_register: SP,
                cfa_offset: ENTRY_CFA + s.depth,
            }));
            let saves: Vec<FrameSave> = f
                .saves
                .iter()
                .map(|s| FrameSave {
                    register: s.register,
                    cfa_offset: ENTRY_CFA + s.depth,
                    from: s.from,
                    to: s.to,
                })
                .collect();
            let function = FrameFunction {
                start: 0,
                end: len,
                rows: leak(rows),
                saves: leak(saves),
            };
            cpjit_runtime::debug::unwind::StencilFrame {
                stencil: f.stencil,
                layout: FrameLayout::Functions(leak(vec![function])),
            }
        })
        .collect();
    leak(list)
}

const fn step(offset: u32, depth: u32) -> FrameStep {
    FrameStep { offset, depth }
}

const fn save(register: u8, depth: u32, from: u32, to: u32) -> Save {
    Save {
        register,
        depth,
        from,
        to,
    }
}

/// A stencil that never moves the stack pointer nor saves a register: every one that
/// [`FRAMES`] does not list.
const fn flat(stencil: &'static str) -> StencilFrame<'static> {
    StencilFrame {
        stencil,
        steps: &[],
        saves: &[],
    }
}

#[cfg(target_arch = "x86_64")]
pub static FRAMES: &[StencilFrame<'static>] = &[
    StencilFrame {
        stencil: "cpjit_entry",
        // push r12; push r13; push rax; mov; mov; call; pop rcx; pop r13; pop r12; ret
        steps: &[
            step(0x2, 8),
            step(0x4, 16),
            step(0x5, 24),
            step(0x11, 16),
            step(0x13, 8),
            step(0x15, 0),
        ],
        saves: &[save(12, 8, 0x2, 0x15), save(13, 16, 0x4, 0x13)],
    },
    StencilFrame {
        stencil: "op_call_helper",
        // sub rsp, 8; mov rdi, r12; call; add rsp, 8; add [r12], rax
        steps: &[step(0x4, 8), step(0x10, 0)],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_call_got",
        steps: &[step(0x4, 8), step(0x11, 0)],
        saves: &[],
    },
];

#[cfg(target_arch = "aarch64")]
pub static FRAMES: &[StencilFrame<'static>] = &[
    StencilFrame {
        stencil: "cpjit_entry",
        // stp x29, x30, [sp, #-32]!; mov x29, sp; stp x20, x21, [sp, #16]; mov; mov; bl;
        // ldp x20, x21, [sp, #16]; ldp x29, x30, [sp], #32; ret
        steps: &[step(0x4, 32), step(0x20, 0)],
        saves: &[
            save(29, 32, 0x4, 0x20),
            save(30, 24, 0x4, 0x20),
            save(20, 16, 0xc, 0x1c),
            save(21, 8, 0xc, 0x1c),
        ],
    },
    StencilFrame {
        stencil: "op_call_got",
        // stp x29, x30, [sp, #-16]!; mov; adrp; ldr; blr x16; ldp x29, x30, [sp], #16; ...
        steps: &[step(0x4, 16), step(0x18, 0)],
        saves: &[save(29, 16, 0x4, 0x18), save(30, 8, 0x4, 0x18)],
    },
    StencilFrame {
        stencil: "op_call_helper",
        steps: &[step(0x4, 16), step(0x10, 0)],
        saves: &[save(29, 16, 0x4, 0x10), save(30, 8, 0x4, 0x10)],
    },
];
