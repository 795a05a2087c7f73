//! stack-jit: a JIT for a small stack machine, built with the copy-and-patch kit as an
//! outside crate would, with the top of the value stack cached in registers.
//!
//! A program is a list of [`Op`]s (a bytecode: constants, locals, arithmetic, comparisons,
//! jumps for `while` and `if`, a helper call into Rust, `print` and `ret`), checked once by
//! [`verify`]. [`interpret`] runs it with a plain `match` loop (the reference);
//! [`Compiler`] stitches it into one trace of stencils from the set in `templates/`, either
//! [`Mode::Uncached`] (every op keeps the whole stack in memory) or [`Mode::Cached`] (up to
//! three top values in registers, the members chosen by the kit). All three report the same
//! [`Outcome`].

mod interp;
mod jit;
pub mod programs;
mod verify;

pub use interp::interpret;
pub use jit::{CompileError, Compiled, Compiler, Mode};
pub use verify::{effect, verify, VerifyError};

/// Local variables per program (`STACK_LOCALS` in `templates/include/stack.h`).
pub const LOCALS: usize = 16;

/// The deepest value stack a program may need ([`verify`] checks).
pub const MAX_STACK: usize = 64;

/// One instruction. Values are `i64`; arithmetic wraps. Jump operands are op indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Push the value.
    Const(i64),
    /// Push local `n`.
    Load(u8),
    /// Pop into local `n`.
    Store(u8),
    /// Pop `b`, pop `a`, push `a + b` (and so on for the other binary ops).
    Add,
    Sub,
    Mul,
    And,
    /// `a >> (b & 63)`, logical.
    Shr,
    /// `a < b` (signed) as 1 or 0.
    Lt,
    /// `a == b` as 1 or 0.
    Eq,
    /// Push a copy of the top value.
    Dup,
    /// Pop and forget.
    Drop,
    /// Exchange the two top values.
    Swap,
    /// Pop `b`, pop `a`, push [`mix`]`(a, b)`: a call into Rust.
    Mix,
    /// Pop and append to the output (a call into Rust).
    Print,
    /// Continue at op `n`.
    Jump(u32),
    /// Pop; continue at op `n` if it was 0.
    Jz(u32),
    /// Pop; continue at op `n` if it was not 0.
    Jnz(u32),
    /// Pop and end the program with that result.
    Ret,
}

/// The helper behind [`Op::Mix`] (the JIT's ops call it through `stack_mix`).
pub fn mix(a: i64, b: i64) -> i64 {
    (a ^ b.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as i64) ^ (a >> 29)
}

/// What running a program produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The value `ret` returned.
    pub result: i64,
    /// The values `print` wrote, in order.
    pub output: Vec<i64>,
}
