//! `cargo xtask build-stencils` and `cargo xtask stencils show`: check the set-up, then run
//! the LLVM-linked `cpjit-toolchain` binary with the same arguments.
//!
//! The toolchain runs in the dev profile (dependencies are optimised, see the workspace
//! `Cargo.toml`): the heavy work happens in clang and LLVM, so a release build would save
//! ~0.4 s per full build but cost a second LLVM-linked build next to the one `cargo test`
//! makes.

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
        .args(["run", "--quiet", "-p", "cpjit-toolchain", "--"])
        .arg(task)
        .args(args))
}
