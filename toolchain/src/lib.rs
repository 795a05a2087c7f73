//! The stencil toolchain: C templates → LLVM IR (clang-19) → validated objects (LLVM
//! in-process) → normalized stencils (object readers) → one generated crate per target.
//!
//! Architecture invariant: only this crate links LLVM and goblin; its output (the generated
//! crates) depends on `cpjit-model` alone.

pub mod object;
pub mod stencil;
