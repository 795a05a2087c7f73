//! `cargo xtask bench [ARGS]`: installs what the bench needs (`ci/setup.sh --bench`: PyPy
//! for the `pyvm` group), builds the release `cpjit-toolchain` and `cpjit-vm` (whose binaries
//! the toolchain and `pyvm` groups run as child processes) and runs the `cpjit-bench`
//! binary with ARGS (it owns their syntax); it links LLVM and so is never part of xtask.

use crate::util::{cargo, run as run_cmd};

pub fn run(args: &[String]) -> Result<(), String> {
    crate::setup::ensure_bench()?;
    // The binaries land in the same target directory; the bench finds the toolchain and the
    // VM next to its own executable.
    run_cmd(cargo().args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "cpjit-toolchain",
        "-p",
        "cpjit-vm",
        "-p",
        "cpjit-bench",
    ]))?;
    // The bench acts on this checkout (its report, BENCHMARKS.md), whichever checkout last
    // built a binary in a shared target directory.
    run_cmd(
        cargo()
            .args(["run", "--quiet", "--release", "-p", "cpjit-bench", "--"])
            .args(args)
            .env(crate::kit::ENV, crate::util::root()),
    )
}
