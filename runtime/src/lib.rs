//! The copy-and-patch runtime: copies stencils from a generated stencil crate into
//! executable memory, one after another, and patches their holes.
//!
//! Architecture invariant: depends on nothing heavy (no LLVM, clang or object-file reader);
//! it only needs `cpjit-model` and the OS's memory API.

pub mod patch;

pub use cpjit_model as model;
