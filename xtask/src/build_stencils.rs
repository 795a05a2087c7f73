//! `cargo xtask build-stencils` and `cargo xtask stencils show`: check the set-up, then run
//! the LLVM-linked `cpjit` binary (package `cpjit-toolchain`) with the same arguments.
//!
//! The toolchain runs in the caller's directory, so relative paths on the command line are
//! the caller's; the kit's own `templates/`, `stencils/` and `model/` are passed first as
//! defaults, and later (the caller's) options override them.
//!
//! The toolchain runs in the dev profile (dependencies are optimised, see the workspace
//! `Cargo.toml`): the heavy work happens in clang and LLVM, so a release build would save
//! ~0.4 s per full build but cost a second LLVM-linked build next to the one `cargo test`
//! makes.

use crate::util::{cargo, root, run};
use std::path::{Path, PathBuf};

pub fn build_stencils(args: &[String]) -> Result<(), String> {
    toolchain(&["build-stencils"], args)
}

pub fn stencils(args: &[String]) -> Result<(), String> {
    match args.split_first() {
        Some((sub, rest)) if sub == "show" => toolchain(&["stencils", "show"], rest),
        // Let the toolchain report the unknown subcommand with its usage text.
        _ => toolchain(&["stencils"], args),
    }
}

/// The line printed before the toolchain binary is first built (its build links LLVM).
const FIRST_BUILD_NOTICE: &str =
    "xtask: building the LLVM-linked toolchain (first time takes minutes; cargo shows progress)...";

/// The notice to print when the toolchain binary in `target_dir` does not exist yet.
fn first_build_notice(target_dir: &Path) -> Option<&'static str> {
    let binary = target_dir
        .join("debug")
        .join(format!("cpjit{}", std::env::consts::EXE_SUFFIX));
    (!binary.is_file()).then_some(FIRST_BUILD_NOTICE)
}

fn toolchain(command: &[&str], args: &[String]) -> Result<(), String> {
    crate::setup::ensure()?;
    let root = root();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let notice = first_build_notice(&target_dir);
    if let Some(line) = notice {
        eprintln!("{line}");
    }
    let caller =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let mut cmd = cargo();
    cmd.current_dir(&caller).arg("run");
    if notice.is_none() {
        cmd.arg("--quiet");
    }
    cmd.arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["-p", "cpjit-toolchain", "--bin", "cpjit", "--"])
        .args(command)
        .arg("--templates")
        .arg(root.join("templates"));
    if command == ["build-stencils"] {
        cmd.arg("--out")
            .arg(root.join("stencils"))
            .arg("--model-path")
            .arg(root.join("model"));
    }
    run(cmd.args(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_build_prints_what_it_is_doing() {
        let dir = std::env::temp_dir().join(format!("xtask-notice-{}", std::process::id()));
        let bin = dir.join("debug");
        std::fs::create_dir_all(&bin).unwrap();
        assert_eq!(first_build_notice(&dir), Some(FIRST_BUILD_NOTICE));
        assert!(FIRST_BUILD_NOTICE.contains("building the LLVM-linked toolchain"));
        std::fs::write(
            bin.join(format!("cpjit{}", std::env::consts::EXE_SUFFIX)),
            "",
        )
        .unwrap();
        assert_eq!(first_build_notice(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
