//! The stencil toolchain: C templates → LLVM IR (clang-19) → validated objects (LLVM
//! in-process) → normalized stencils (object readers) → one generated crate per target.
//!
//! Code map: `manifest`/`target` (inputs) → `clang` → `llvm` + `validate` → `object`
//! (readers, `stencil::StencilBuf`) → `pipeline` (one unit × target, with `cache`) → `set`
//! (one target's set) → `writer` (generated crate) / `check` / `listing`; `facade` (the
//! generated crate listing every set); `driver` and `cli` are the commands; `advice` gives
//! the kit's fix for template mistakes clang reports in its own words.
//!
//! Architecture invariant: only this crate links LLVM and goblin; its output (the generated
//! crates) depends on `cpjit-model` alone.

pub mod error;

pub mod advice;
pub mod batch;
pub mod batch_members;
pub mod batch_names;
pub mod batch_reach;
pub mod batch_split;
pub mod c_scan;
pub mod cache;
pub mod cache_deps;
pub mod cc1;
pub mod check;
pub mod clang;
pub mod cli;
pub mod digest;
pub mod disasm;
pub mod driver;
pub mod facade;
pub mod family;
pub mod frame;
pub mod glob;
pub mod instructions;
pub mod layout;
pub mod listing;
pub mod llvm;
pub mod manifest;
pub mod narrow;
pub mod object;
pub mod pipeline;
pub mod prefix;
pub mod progress;
pub mod scale_set;
pub mod select;
pub mod set;
pub mod stack_use;
pub mod stencil;
pub mod target;
pub mod validate;
pub mod writer;
