//! cpjit-runtime's integration tests, built as one test binary: each file of `tests/` is a
//! module of it. One binary per crate instead of one per file saves a link and the
//! repeated code generation of the crate's generics per file, for every Rust target the
//! matrix builds (`autotests = false` in `Cargo.toml`: add a new file here).

mod arena;
mod batch;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod burst;
mod code_writes;
mod common;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod debug_frames;
mod debug_gdb;
mod debug_listing;
mod debug_perf;
mod debug_platform;
mod debug_unwind;
mod debug_unwind_generated;
mod errors;
mod execute;
mod host_check;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod memory_limits;
mod patch_fixtures;
mod patch_no_panic;
mod patch_ranges;
mod patch_riscv_relax;
mod pkey;
mod reserve;
mod stitch_fast;
mod threads;
mod wx;
