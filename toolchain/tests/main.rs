//! cpjit-toolchain's integration tests, built as one test binary: each file of `tests/` is a
//! module of it. One binary per crate instead of one per file saves a link and the
//! repeated code generation of the crate's generics per file, for every Rust target the
//! matrix builds (`autotests = false` in `Cargo.toml`: add a new file here).

mod batch;
mod batch_functions;
mod cache;
mod cache_poison;
mod cache_trust;
mod cached;
mod cached_family;
mod cc1_groups;
mod cli;
mod common;
mod families;
mod guide;
mod halves;
mod jump_tables;
mod layout;
mod listed_ops;
mod mistakes;
mod objects_golden;
mod objects_readers;
mod pipeline;
mod recovery;
mod returns;
mod scale;
mod set_flags;
mod seventh_target;
mod unit_families;
