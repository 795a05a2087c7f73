//! cpjit-vm's integration tests, built as one test binary: each file of `tests/` is a
//! module of it. One binary per crate instead of one per file saves a link and the
//! repeated code generation of the crate's generics per file, for every Rust target the
//! matrix builds (`autotests = false` in `Cargo.toml`: add a new file here).

mod bigints;
mod bounded_increments;
mod cache_states;
mod calls;
mod common;
mod compare_copy;
mod compiler_hook;
mod debug_flags;
mod differential;
mod examples;
mod families;
mod float_conversion;
mod float_slots;
mod inlining;
mod list_items;
mod multiply_const;
mod pinned_floats;
mod pinning;
mod tierup;
mod typed_items;
mod typed_paths;
mod unwind_windows;
mod wide;
mod wide_counters;
mod wide_stack;
