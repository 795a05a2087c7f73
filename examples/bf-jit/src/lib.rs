//! bf-jit: a Brainfuck JIT built with the copy-and-patch kit, as an outside crate would.
//!
//! [`parse`] turns source text into [`Op`]s (runs of `+ - < >` folded, `[-]` recognised),
//! [`interpret`] runs them directly (the reference), and [`Compiler`] stitches them into one
//! trace of stencils from the set in `templates/` (built by the `cpjit` CLI) and runs it.
//! Both report the same [`Outcome`]: the output bytes and an exit [`Status`].

mod interp;
mod jit;
mod parse;

pub use interp::interpret;
pub use jit::{Compiled, Compiler};
pub use parse::{parse, Op, ParseError};

/// Cells on the tape (the classic size).
pub const TAPE_CELLS: usize = 30_000;

/// How a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It ran to its end.
    Ok,
    /// The data pointer would have left the tape (the program is stopped before it does).
    TapeOverflow,
}

impl Status {
    /// The status from a trace's exit code (`BF_OK`, `BF_TAPE_OVERFLOW` in `bf.h`).
    pub fn from_code(code: i64) -> Option<Status> {
        match code {
            0 => Some(Status::Ok),
            1 => Some(Status::TapeOverflow),
            _ => None,
        }
    }
}

/// What running a program produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub output: Vec<u8>,
    pub status: Status,
}
