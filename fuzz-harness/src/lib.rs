//! The bodies of the fuzz targets in `fuzz/fuzz_targets/`: the entry points each target
//! calls, [`trace`] (the trace-API target with its independent checker) and [`seeds`] (the
//! committed inputs that seed each target).
//!
//! Every entry point takes arbitrary bytes and must return normally: a parse or read error is
//! an expected outcome, a panic (or a sanitizer report) is a finding.
//!
//! The crate is a workspace member built on stable, so the workspace tests replay the seeds
//! and deterministic mutations of them through these same entry points
//! (`tests/replay.rs`); `cargo xtask fuzz` runs the coverage-guided campaigns (nightly,
//! sanitizers) from `fuzz/`, which only wraps these functions.

pub mod seeds;
pub mod trace;

use std::path::PathBuf;

use cpjit_model::{Arch, ObjectFormat};
use cpjit_toolchain::object::{read_stencils, ReadOptions};

/// Reads `bytes` as an object of `format`, once for each architecture (the readers check
/// that the header's machine matches, so both paths are worth reaching).
pub fn read_object(format: ObjectFormat, bytes: &[u8]) {
    let select = |f: &str| f.starts_with("op_") || f == "cpjit_entry" || f == "_JIT_ENTRY";
    let limits = cpjit_toolchain::manifest::Limits::default();
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let opts = ReadOptions {
            target: "fuzz-target",
            arch,
            format,
            template: "fuzz.c",
            hole_prefix: "_JIT_",
            target_suffix: "_TARGET",
            select: &select,
            limits: &limits,
            // The AArch64 tail mover reads code bytes: fuzz it too.
            move_cold_tail: true,
        };
        let _ = read_stencils(bytes, &opts);
    }
}

/// Parses `bytes` both as a template-set manifest and as a target file.
pub fn parse_manifest_and_target(bytes: &[u8]) {
    let _ = cpjit_toolchain::manifest::Manifest::parse(
        "manifest.toml",
        PathBuf::from("fuzz-templates"),
        bytes.to_vec(),
    );
    let _ = cpjit_toolchain::target::Target::parse("fuzz.toml", "fuzz", bytes.to_vec());
}
