//! cpjit-conformance's integration tests, built as one test binary: each file of `tests/` is a
//! module of it. One binary per crate instead of one per file saves a link and the
//! repeated code generation of the crate's generics per file, for every Rust target the
//! matrix builds (`autotests = false` in `Cargo.toml`: add a new file here).

mod cached;
mod common;
mod data_holes;
mod families;
mod float_cache;
mod halves;
mod narrow;
mod positions;
mod push_ops;
mod selection;
mod stencil_sets;
mod three_arguments;
