//! Rust mirrors of the C ABI declared in `vm/templates/vm_abi.h` (frame, instruction, record,
//! list), with compile-time size and offset checks; the C side has matching
//! `_Static_assert`s, and a test compares the constants with the C compiler's values.

use std::cell::Cell;
use std::mem::{offset_of, size_of};

mod low;
pub use low::{CallSites, LinkBlocks, LowSlice};

pub const TAG_SHIFT: u32 = 48;
pub const TAG_INT: u64 = 0xFFF9;
pub const TAG_BOOL: u64 = 0xFFFA;
pub const TAG_NONE: u64 = 0xFFFB;
pub const TAG_LIST: u64 = 0xFFFC;
pub const TAG_BIGINT: u64 = 0xFFFD;
pub const PAYLOAD_MASK: u64 = 0x0000_FFFF_FFFF_FFFF;
pub const INT_MIN: i64 = -(1 << 47);
pub const INT_MAX: i64 = (1 << 47) - 1;

pub const TYPE_FLOAT: u8 = 0;
pub const TYPE_INT: u8 = 1;
pub const TYPE_BOOL: u8 = 2;
pub const TYPE_NONE: u8 = 3;
pub const TYPE_LIST: u8 = 4;
/// An int outside the tagged range (Python's type is `int`).
pub const TYPE_BIGINT: u8 = 5;

pub const EXIT_RETURN: i64 = 0;
pub const EXIT_ERROR: i64 = 1;
pub const EXIT_HOT_LOOP: i64 = 2;
pub const EXIT_ENTER_EXECUTOR: i64 = 3;
pub const EXIT_SIDE: i64 = 4;
pub const EXIT_RECORDED: i64 = 5;
pub const EXIT_RECORD_FULL: i64 = 6;

pub const ERR_TYPE: i64 = 1;
pub const ERR_ZERO_DIVISION: i64 = 2;
pub const ERR_OVERFLOW: i64 = 3;
pub const ERR_INDEX: i64 = 4;
pub const ERR_VALUE: i64 = 5;
pub const ERR_PROPAGATED: i64 = 6;
pub const ERR_INTERNAL: i64 = 7;

/// `struct vm_list`.
#[repr(C)]
#[derive(Debug)]
pub struct VmList {
    pub len: i64,
    pub cap: i64,
    pub items: *mut u64,
}

/// `struct vm_inst`: a bytecode or a micro-op.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inst {
    pub op: u32,
    pub target: u32,
    pub arg0: u64,
    pub arg1: u64,
}

/// `struct vm_record`: one bytecode seen by the recorder.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Record {
    pub pc: i64,
    pub types: [u8; 3],
    pub pad: [u8; 5],
}

/// `struct cpjit_frame` (header only; locals and the value stack follow it).
#[repr(C)]
#[derive(Debug)]
pub struct Frame {
    pub vm: *const core::ffi::c_void,
    pub pc: i64,
    pub sp: *mut u64,
    pub aux: i64,
    pub error_code: i64,
    pub error_a: u64,
    pub error_b: u64,
    pub ret: u64,
    pub backedge_threshold: i64,
    pub nlocals: i64,
    pub globals: *mut u64,
}

pub const FRAME_HEADER_BYTES: usize = 88;
pub const FRAME_HEADER_WORDS: usize = FRAME_HEADER_BYTES / 8;

/// `struct vm_frame_link`: what precedes every frame on the frame stack.
#[repr(C)]
#[derive(Debug)]
pub struct FrameLink {
    pub prev: *mut FrameLink,
    pub func: i64,
}

pub const FRAME_LINK_WORDS: usize = size_of::<FrameLink>() / 8;

/// `struct vm_frame_stack`: the VM's frame stack, shared with compiled calls.
#[repr(C)]
#[derive(Debug)]
pub struct FrameStack {
    pub top: *mut u64,
    pub limit: *mut u64,
    pub last: *mut FrameLink,
    pub depth: i64,
    pub max_depth: i64,
    pub epoch: u64,
    pub direct_calls: u64,
}

/// `struct vm_callee`: a function as compiled call sites see it. `code` is written by Rust
/// while compiled code may read it (single thread, between ops), hence the cell.
#[repr(C)]
#[derive(Debug)]
pub struct Callee {
    pub code: std::cell::Cell<u64>,
    pub stack: *mut FrameStack,
    pub func: i64,
    pub nlocals: i64,
    pub frame_words: i64,
}

/// An exit's link block (`vm_abi.h`, `VM_LINK_*`; [`crate::vm::Executor::links`]): what
/// compiled code reads through the address `EXIT_TRACE`'s `arg1` holds. Never moved while
/// its executor lives ([`LinkBlocks`]).
#[repr(C)]
#[derive(Debug, Default)]
pub struct ExitLink {
    /// 0 or the code the exit continues in (its `EXIT_TRACE` jumps there).
    pub link: Cell<u64>,
    /// 0 or the code entered with the exit's pinned registers live (its `LINK` jumps there;
    /// [`crate::pinning`], "Inherited pinning").
    pub pinned: Cell<u64>,
    /// The exit's `EXIT_TRACE` `arg0` (its pc << 32 | executor << 16 | exit), which the
    /// stencils read here when they leave to the interpreter rather than as operands: two
    /// holes fewer in every exit stub.
    pub exit_at: Cell<u64>,
}

/// `struct vm_call_site`: one `CALL_JIT` of a trace.
#[repr(C)]
#[derive(Debug)]
pub struct CallSite {
    pub callee: *const Callee,
    pub pc: i64,
    pub argc: i64,
}

const _: () = assert!(size_of::<VmList>() == 24);
const _: () = assert!(size_of::<Inst>() == 24);
const _: () = assert!(size_of::<Record>() == 16);
const _: () = assert!(size_of::<Frame>() == FRAME_HEADER_BYTES);
const _: () = assert!(offset_of!(Frame, pc) == 8);
const _: () = assert!(offset_of!(Frame, sp) == 16);
const _: () = assert!(offset_of!(Frame, aux) == 24);
const _: () = assert!(offset_of!(Frame, error_code) == 32);
const _: () = assert!(offset_of!(Frame, ret) == 56);
const _: () = assert!(offset_of!(Frame, backedge_threshold) == 64);
const _: () = assert!(offset_of!(Frame, nlocals) == 72);
const _: () = assert!(offset_of!(Frame, globals) == 80);
const _: () = assert!(size_of::<FrameLink>() == 16);
const _: () = assert!(size_of::<FrameStack>() == 56);
const _: () = assert!(offset_of!(FrameStack, epoch) == 40);
const _: () = assert!(size_of::<Callee>() == 40);
const _: () = assert!(offset_of!(Callee, frame_words) == 32);
const _: () = assert!(size_of::<CallSite>() == 24);
const _: () = assert!(offset_of!(Record, types) == 8);
const _: () = assert!(offset_of!(Inst, arg0) == 8);
const _: () = assert!(offset_of!(VmList, items) == 16);

extern "C" {
    /// Constants as the C compiler sees them (see `vm_abi_constants` in csrc/interp.c).
    pub static vm_abi_constants: [u64; 33];
    pub fn vm_interp(frame: *mut Frame, sp: *mut u64, code: *mut Inst) -> i64;
    pub fn vm_record(
        frame: *mut Frame,
        sp: *mut u64,
        code: *mut Inst,
        rec: *mut Record,
        rec_cap: i64,
        rec_len: *mut i64,
        stop_pc: i64,
        heads: *const u8,
    ) -> i64;
    pub fn vm_uop_interp(frame: *mut Frame, sp: *mut u64, trace: *mut Inst) -> i64;
}

/// The constants Rust expects `vm_abi_constants` to hold, in its order.
pub fn expected_abi_constants() -> [u64; 33] {
    [
        crate::ops::OPS.len() as u64,
        TAG_INT,
        TAG_BOOL,
        TAG_NONE,
        TAG_LIST,
        TAG_BIGINT,
        TYPE_BIGINT as u64,
        // The last VM_BIG_* code: the C side and `BigOp` have as many operations.
        crate::bigint::BigOp::COUNT as u64 - 1,
        EXIT_RETURN as u64,
        EXIT_ERROR as u64,
        EXIT_HOT_LOOP as u64,
        EXIT_ENTER_EXECUTOR as u64,
        EXIT_SIDE as u64,
        EXIT_RECORDED as u64,
        EXIT_RECORD_FULL as u64,
        ERR_TYPE as u64,
        ERR_ZERO_DIVISION as u64,
        ERR_OVERFLOW as u64,
        ERR_INDEX as u64,
        ERR_VALUE as u64,
        ERR_PROPAGATED as u64,
        ERR_INTERNAL as u64,
        size_of::<Frame>() as u64,
        size_of::<Inst>() as u64,
        size_of::<Record>() as u64,
        size_of::<VmList>() as u64,
        size_of::<FrameLink>() as u64,
        size_of::<FrameStack>() as u64,
        size_of::<Callee>() as u64,
        size_of::<CallSite>() as u64,
        (size_of::<ExitLink>() / size_of::<u64>()) as u64,
        offset_of!(ExitLink, pinned) as u64,
        offset_of!(ExitLink, exit_at) as u64,
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn c_and_rust_agree_on_the_abi() {
        // SAFETY: a constant array defined in interp.c.
        let c = unsafe { super::vm_abi_constants };
        assert_eq!(c, super::expected_abi_constants());
    }
}
