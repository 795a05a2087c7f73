//! `cargo xtask build-stencils` and `cargo xtask stencils show`: check the set-up, then run
//! the LLVM-linked `cpjit-toolchain` binary with the same arguments.

use crate::util::{cargo, run};

pub fn build_stencils(args: &[String]) -> Result<(), String> {
    toolchain("build-stencils", args)
}

pub fn stencils(args: &[String]) -> Result<(), String> {
    toolchain("stencils", args)
}

fn toolchain(task: &str, args: &[String]) -> Result<(), String> {
    crate::setup::ensure()?;
    run(cargo()
        .args(["run", "--quiet", "--release", "-p", "cpjit-toolchain", "--"])
        .arg(task)
        .args(args))
}
