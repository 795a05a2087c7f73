//! The copy-and-patch runtime: copies stencils from a generated stencil crate into
//! executable memory, one after another, and patches their holes.
//!
//! Architecture invariant: depends on nothing heavy (no LLVM, clang or object-file reader);
//! it only needs `cpjit-model` and the OS's memory API.
//!
//! # Using it
//!
//! A [`Jit`] holds one [`StencilSet`](cpjit_model::StencilSet) and the caller's symbol
//! table. A trace is a sequence of stencil instances; each gets its operand values and jump
//! targets. The entry shim (`templates/shim.c`) goes first: it is a normal C function that
//! calls the first op with the ops' calling convention, which Rust cannot do itself.
//!
//! ```no_run
//! use cpjit_runtime::{Jit, Target};
//! # fn demo(set: &cpjit_runtime::model::StencilSet<'_>, helper_address: u64) -> Result<(), cpjit_runtime::Error> {
//! let jit = Jit::new(set, |symbol| match symbol {
//!     "my_helper" => Some(helper_address),
//!     _ => None,
//! })?;
//! let mut trace = jit.trace();
//! let entry = trace.push_shim()?;
//! let top = trace.push_named("op_load_const", &[42], &[])?;
//! trace.push_named("op_dec_jump_nz", &[], &[Target::Instance(top)])?;
//! trace.push_named("op_return", &[], &[])?;
//! let trace = trace.finish()?;
//! let mut stack = [0u64; 16];
//! // SAFETY: the trace was built from the set's ops, which expect a frame and a stack.
//! // `entry_fn` refuses an instance that is not the shim (`Error::NotAnEntry`).
//! let status = unsafe { trace.entry_fn(entry)?(std::ptr::null_mut(), stack.as_mut_ptr()) };
//! # let _ = status; Ok(()) }
//! ```
//!
//! # Entry shims of other signatures
//!
//! A set whose shim takes other than the two default arguments (`[stencils] parameters`)
//! is entered through [`TraceBuilder::push_shim_as`] and [`Trace::entry_typed`], typed with
//! the C function type the set declares; a type of another arity is refused with
//! [`Error::EntrySignature`] (see [`Entry`]).
//!
//! # Many traces at once
//!
//! [`Jit::batch`] finishes many traces together ([`TraceBatch`]): one allocation, one write
//! of all their code (on Linux one `pwrite`) and one instruction-cache flush, which on short
//! traces cost more than stitching them. Each trace of a batch is still a [`Trace`] of its
//! own, freed when it is dropped.
//!
//! # Before the first trace
//!
//! The first trace also maps the arena's first chunk and grows the stitching thread's
//! buffers from nothing. A JIT whose first compiles are on the clock makes them ready at
//! start-up with [`Jit::reserve`], for the largest trace it expects ([`Reservation`]).
//!
//! # Memory
//!
//! Pages are never writable and executable at once, and by default no thread can write
//! live code except the one finishing a trace, inside a write window that closes before
//! `finish` returns: on x86-64 Linux with memory protection keys a per-thread window
//! (`wrpkru`, no system call), elsewhere with no writable view of code outliving the write
//! ([`CodeWrites`]; the `memory` module documents how code is written per OS). On Linux a
//! JIT may instead opt for [`CodeWrites::PersistentAlias`]: a read-write
//! alias of its code object is kept, and traces are written through it with no system call
//! per trace (a 10-instance trace then stitches about 3× faster), at the price that code can
//! be changed through the alias by anything that finds it. Code
//! and data of many traces share arena chunks
//! ([`Jit::memory_stats`]); chunks no trace uses are returned to the system beyond
//! [`JitOptions::idle_chunk_bytes`]; chunks are placed near the helpers so that calls are direct,
//! and a branch that cannot reach its destination goes through a veneer. Every patch checks
//! its range in release builds: a value that does not fit is an [`Error`], never a
//! silently wrong instruction.

mod arena;
pub mod debug;
mod error;
mod icache;
mod jit;
mod memory;
pub mod patch;
mod program;
mod reserve;
mod slots;
mod trace;

pub use arena::MemoryStats;
pub use cpjit_model as model;
pub use error::Error;
pub use jit::{CodeWrites, Jit, JitOptions};
pub use reserve::Reservation;
pub use trace::entry::{Entry, EntryArgument, EntryReturn, EntrySignature};
pub use trace::select::{Label, RunTable, Selector};
pub use trace::{EntryFn, InstanceId, Target, Trace, TraceBatch, TraceBuilder};
