//! `cargo xtask setup`: runs `ci/setup.sh`, which installs (as root) or names (otherwise)
//! the missing system packages, cargo-nextest and the wine prefix, then adds the rustup
//! targets the target files name (each `[test]` table's `rust_target` and
//! `check_target`) and the rustfmt and clippy components. Idempotent and fast when everything
//! is present. `cargo xtask bench`
//! runs it with `--bench` ([`ensure_bench`]), which adds what only the bench needs (PyPy).

use crate::util::{root, run};
use std::collections::BTreeSet;
use std::process::Command;

pub fn ensure() -> Result<(), String> {
    setup_script(&[])?;
    rustup_components()?;
    rustup_targets()
}

/// [`ensure`] plus the bench's own needs: `pypy3`, a peer of the `pyvm` bench group.
pub fn ensure_bench() -> Result<(), String> {
    setup_script(&["--bench"])?;
    rustup_components()?;
    rustup_targets()
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

fn setup_script(args: &[&str]) -> Result<(), String> {
    run(Command::new("bash")
        .arg(root().join("ci/setup.sh"))
        .args(args))
    .map_err(|e| format!("set-up incomplete: {e}"))
}

/// The Rust targets the matrix builds or checks for.
pub fn wanted_rust_targets() -> Result<BTreeSet<String>, String> {
    let targets = crate::targets::load_all(&root().join("targets"))?;
    Ok(targets
        .into_iter()
        .flat_map(|t| [Some(t.test.rust_target), t.test.check_target])
        .flatten()
        .collect())
}

fn rustup_targets() -> Result<(), String> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !out.status.success() {
        return Err(format!("rustup target list --installed: {}", out.status));
    }
    let installed = String::from_utf8_lossy(&out.stdout);
    let installed: BTreeSet<&str> = installed.lines().map(str::trim).collect();
    let missing: Vec<String> = wanted_rust_targets()?
        .into_iter()
        .filter(|t| !installed.contains(t.as_str()))
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
