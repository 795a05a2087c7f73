//! Frame layouts of the hand-written x86-64 System V test stencils
//! (`tests/stencils/x86_64_sysv.s`; offsets from the listing in `common/stencils_x86_64_sysv.rs`),
//! and a test that checks them against `llvm-mc-19`'s decoding of the stencils' bytes.
#![allow(dead_code)]

use cpjit_runtime::debug::unwind::{FrameStep, StencilFrame};

const fn step(offset: u32, depth: u32) -> FrameStep {
    FrameStep { offset, depth }
}

const R12: u8 = 12;
const R13: u8 = 13;

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
        saves: &[(R12, 8), (R13, 16)],
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
    StencilFrame {
        stencil: "op_add_got",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_data_counter",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_dec_jump_nz",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_exit_to",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_load_abs",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_load_data_abs",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_load_got",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_return",
        steps: &[],
        saves: &[],
    },
    StencilFrame {
        stencil: "op_skip_if_zero",
        steps: &[],
        saves: &[],
    },
];
