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
use std::process::Command;

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
    run(&mut toolchain_command(
        &root,
        &caller,
        notice.is_none(),
        command,
        args,
    ))
}

/// `cargo run` of the toolchain in the caller's directory, with the kit's paths first and
/// the caller's arguments after them (so that theirs win); quiet unless it first builds.
fn toolchain_command(
    root: &Path,
    caller: &Path,
    quiet: bool,
    command: &[&str],
    args: &[String],
) -> Command {
    let mut cmd = cargo();
    cmd.current_dir(caller).arg("run");
    if quiet {
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
    cmd.args(args);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_in_the_callers_directory_with_the_kits_paths_as_overridable_defaults() {
        let args = ["--templates".to_string(), "mine".to_string()];
        let cmd = toolchain_command(
            Path::new("/kit"),
            Path::new("/home/me/proj"),
            true,
            &["build-stencils"],
            &args,
        );
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/home/me/proj")));
        let argv: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let tail = argv.iter().position(|a| a == "--").unwrap();
        assert_eq!(
            argv[tail + 1..],
            [
                "build-stencils",
                "--templates",
                "/kit/templates",
                "--out",
                "/kit/stencils",
                "--model-path",
                "/kit/model",
                "--templates",
                "mine"
            ]
        );
        assert!(argv.contains(&"--quiet".to_string()));
        let show = toolchain_command(
            Path::new("/kit"),
            Path::new("/x"),
            false,
            &["stencils", "show"],
            &[],
        );
        let argv: Vec<_> = show
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            !argv.contains(&"--quiet".to_string()),
            "the first build shows cargo's progress"
        );
        assert!(argv.ends_with(&[
            "stencils".into(),
            "show".into(),
            "--templates".into(),
            "/kit/templates".into()
        ]));
    }

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
