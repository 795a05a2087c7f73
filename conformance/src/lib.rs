//! Conformance of the runtime with real generated stencils: every stencil set this process
//! can execute (natively, under qemu, under wine, or another OS's set with the same ABI) runs
//! programs over the hole-exercising test ops (`templates/testing/holes.c`), and each result
//! is compared with a Rust reference interpreter.
//!
//! The tests live in `tests/stencil_sets.rs`; this library holds the reference
//! ([`program`]), the stitching and running ([`exec`]) and the set selection ([`select`]).

pub mod exec;
pub mod program;
pub mod rng;
pub mod select;
