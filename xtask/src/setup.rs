//! `cargo xtask setup`: runs `ci/setup.sh` with the Debian packages the target files name
//! (each `[test]` table's `packages`, and `--wine` when a row runs under wine) and the
//! full-system QEMU rows of `ci/matrix.toml` need (their packages and kernels), which
//! installs (as root) or names (otherwise) the missing system packages, cargo-nextest and
//! the wine prefix, then adds the rustup targets the target files name (each `[test]`
//! table's `rust_target` and `check_target`) and the rustfmt and clippy components.
//! Idempotent and fast when everything is present. `cargo xtask bench` runs it with
//! `--bench` ([`ensure_bench`]), which adds what only the bench needs (PyPy).

use crate::targets::{Execution, TargetFacts};
use crate::util::{root, run};
use std::collections::BTreeSet;
use std::process::Command;

pub fn ensure() -> Result<(), String> {
    ensure_with(&[])
}

/// [`ensure`] plus the bench's own needs: `pypy3`, a peer of the `pyvm` bench group.
pub fn ensure_bench() -> Result<(), String> {
    ensure_with(&["--bench"])
}

fn ensure_with(args: &[&str]) -> Result<(), String> {
    let targets = crate::targets::load_all(&root().join("targets"))?;
    let (rust_targets, packages) = wanted(&targets);
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    for p in packages {
        args.extend(["--package".to_string(), p]);
    }
    if targets.iter().any(|t| t.test.execution == Execution::Wine) {
        args.push("--wine".into());
    }
    args.extend(system_rows(&crate::matrix::Matrix::load(&root())?));
    setup_script(&args)?;
    rustup_components()?;
    rustup_targets(&rust_targets)
}

/// `ci/setup.sh`'s arguments for the full-system QEMU rows: their packages, and each
/// row's kernel package with the directory it is unpacked in.
fn system_rows(matrix: &crate::matrix::Matrix) -> Vec<String> {
    let mut args = Vec::new();
    for row in &matrix.system {
        for p in &row.packages {
            args.extend(["--package".to_string(), p.clone()]);
        }
        args.extend(["--kernel".to_string(), row.kernel_package.clone()]);
    }
    if !args.is_empty() {
        let dir = crate::matrix::kernel_dir();
        args.extend(["--kernel-dir".to_string(), dir.display().to_string()]);
    }
    args
}

/// What the target files need installed: the Rust targets the matrix builds or checks for
/// (`rust_target`, `check_target`) and the Debian packages of their rows (`packages`).
pub fn wanted(targets: &[TargetFacts]) -> (BTreeSet<String>, BTreeSet<String>) {
    let rust = targets
        .iter()
        .flat_map(|t| {
            [
                Some(t.test.rust_target.clone()),
                t.test.check_target.clone(),
            ]
        })
        .flatten()
        .collect();
    let packages = targets
        .iter()
        .flat_map(|t| t.test.packages.iter().cloned())
        .collect();
    (rust, packages)
}

/// The rustup components `cargo xtask ci` runs: rustfmt and clippy (in rustup's default
/// profile, but not in its minimal one).
fn rustup_components() -> Result<(), String> {
    let out = Command::new("rustup")
        .args(["component", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !out.status.success() {
        return Err(format!("rustup component list --installed: {}", out.status));
    }
    let installed = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = ["rustfmt", "clippy"]
        .into_iter()
        .filter(|c| !installed.lines().any(|l| l.starts_with(&format!("{c}-"))))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("setup: rustup component add {}", missing.join(" "));
    run(Command::new("rustup")
        .args(["component", "add"])
        .args(&missing))
    .map_err(|e| format!("set-up incomplete: {e}"))
}

fn setup_script(args: &[String]) -> Result<(), String> {
    run(Command::new("bash")
        .arg(root().join("ci/setup.sh"))
        .args(args))
    .map_err(|e| format!("set-up incomplete: {e}"))
}

fn rustup_targets(wanted: &BTreeSet<String>) -> Result<(), String> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !out.status.success() {
        return Err(format!("rustup target list --installed: {}", out.status));
    }
    let installed = String::from_utf8_lossy(&out.stdout);
    let installed: BTreeSet<&str> = installed.lines().map(str::trim).collect();
    let missing: Vec<&str> = wanted
        .iter()
        .map(String::as_str)
        .filter(|t| !installed.contains(t))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("setup: rustup target add {}", missing.join(" "));
    run(Command::new("rustup")
        .args(["target", "add"])
        .args(&missing))
    .map_err(|e| format!("set-up incomplete: {e}"))
}
