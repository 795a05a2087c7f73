//! `cargo xtask bench [ARGS]`: builds the release
//! `cpjit-toolchain` (whose binary the toolchain bench runs) and runs the `cpjit-bench`
//! binary with ARGS (it owns their syntax); it links LLVM and so is never part of xtask.

use crate::util::{cargo, run as run_cmd};

pub fn run(args: &[String]) -> Result<(), String> {
    crate::setup::ensure()?;
    // Both binaries land in the same target directory; the bench finds the toolchain next to
    // its own executable.
    run_cmd(cargo().args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "cpjit-toolchain",
        "-p",
        "cpjit-bench",
    ]))?;
    run_cmd(
        cargo()
            .args(["run", "--quiet", "--release", "-p", "cpjit-bench", "--"])
            .args(args),
    )
}
