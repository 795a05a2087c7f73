//! `cpjit-vm`: the reference VM (issue 4) — Python-flavoured ops written once in C
//! (`vm/templates/ops.def`), run by a bytecode interpreter, a micro-op interpreter and the
//! copy-and-patch JIT, with tier-up on hot loops, side exits and invalidation.
//!
//! ```no_run
//! let program = cpjit_vm::parse("func main()\n const 42\n print\n const none\n return\nend\n").unwrap();
//! let vm = cpjit_vm::Vm::new(program, cpjit_vm::Config::default()).unwrap();
//! vm.run().unwrap();
//! assert_eq!(vm.output(), "42\n");
//! ```

pub mod abi;
pub mod bigint;
pub mod cached;
pub mod helpers;
pub mod inline;
pub mod jit;
pub mod ops;
pub mod parser;
pub mod pinning;
mod stencil_sets;
pub mod trace;
pub mod value;
pub mod vm;

pub use parser::{parse, ParseError, Program};
pub use vm::{Config, FrameInfo, Mode, RuntimeError, Stats, Vm};
