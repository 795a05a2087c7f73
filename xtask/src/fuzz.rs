//! `cargo xtask fuzz`: runs the coverage-guided fuzz targets of `fuzz/` (cargo-fuzz,
//! libFuzzer) for a bounded time each.
//!
//! Fuzzing needs a nightly toolchain and `cargo-fuzz`; they are installed here, only when this
//! task is asked for (`rustup toolchain install nightly --profile minimal`, `cargo install
//! cargo-fuzz --locked`), never by the plain set-up. Each target's corpus lives in
//! `fuzz/corpus/<target>/` (ignored by git) and is seeded on every run from committed files:
//! the golden object fixtures sorted by their format's magic, the manifest and target files.
//! A crash leaves its input in `fuzz/artifacts/<target>/` and fails the task.
//!
//! The targets' bodies live in `fuzz-harness/`, whose workspace tests replay the same seeds
//! on stable; that replay, not a nightly campaign, is what `cargo xtask ci` runs.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::util::root;

/// The target list and seed selection, shared with the harness's replay tests (a std-only
/// file: xtask must not depend on the LLVM-linked toolchain the harness needs).
#[path = "../../fuzz-harness/src/seeds.rs"]
mod seeds;

pub use seeds::TARGETS;

/// Runs each of `targets` (all when empty) for `seconds`, after building them once.
pub fn run(seconds: u64, targets: &[String]) -> Result<(), String> {
    let chosen: Vec<&str> = if targets.is_empty() {
        TARGETS.to_vec()
    } else {
        targets
            .iter()
            .map(|t| {
                TARGETS.iter().copied().find(|k| k == t).ok_or_else(|| {
                    format!("unknown fuzz target `{t}` (known: {})", TARGETS.join(", "))
                })
            })
            .collect::<Result<_, _>>()?
    };
    ensure_tools()?;
    let root = root();
    status(
        cargo_fuzz(&root).args(["build", "-O", "--debug-assertions"]),
        "cargo +nightly fuzz build",
    )?;
    let mut failed = Vec::new();
    for target in chosen {
        let corpus = root.join("fuzz/corpus").join(target);
        let seeds = root.join("target/fuzz-seeds").join(target);
        fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
        write_seeds(&root, target, &seeds)?;
        eprintln!("fuzz: {target} for {seconds} s");
        let ok = cargo_fuzz(&root)
            .args(["run", "-O", "--debug-assertions", target])
            .arg(&corpus)
            .arg(&seeds)
            .args([
                "--".to_string(),
                format!("-max_total_time={seconds}"),
                "-print_final_stats=1".to_string(),
                "-rss_limit_mb=4096".to_string(),
                "-timeout=20".to_string(),
            ])
            .status()
            .map_err(|e| format!("cannot run cargo fuzz: {e}"))?
            .success();
        if !ok {
            failed.push(target);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzz target(s) failed: {} (inputs in fuzz/artifacts/<target>/; reproduce with \
             `cargo +nightly fuzz run <target> <input>`)",
            failed.join(", ")
        ))
    }
}

fn cargo_fuzz(root: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).args(["+nightly", "fuzz"]);
    cmd
}

fn status(cmd: &mut Command, what: &str) -> Result<(), String> {
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what} failed ({s})")),
        Err(e) => Err(format!("cannot run {what}: {e}")),
    }
}

/// Installs the nightly toolchain and cargo-fuzz when missing.
fn ensure_tools() -> Result<(), String> {
    let have_nightly = Command::new("rustc")
        .args(["+nightly", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_nightly {
        eprintln!("fuzz: installing the nightly toolchain (needed for sanitizer builds)");
        status(
            Command::new("rustup").args([
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
            ]),
            "rustup toolchain install nightly",
        )?;
    }
    let have_fuzz = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_fuzz {
        eprintln!("fuzz: installing cargo-fuzz");
        status(
            Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]),
            "cargo install cargo-fuzz",
        )?;
    }
    Ok(())
}

/// Fills `dir` with the committed seed inputs of `target`.
fn write_seeds(root: &Path, target: &str, dir: &Path) -> Result<(), String> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (i, seed) in seeds::seed_files(root, target)?.iter().enumerate() {
        let to = dir.join(format!("seed-{i:03}"));
        fs::copy(seed, &to).map_err(|e| format!("{} -> {}: {e}", seed.display(), to.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every golden object fixture is recognised as one of the three formats, and each
    /// format has seeds.
    #[test]
    fn golden_objects_are_sorted_by_magic() {
        let root = root();
        let mut per_format = std::collections::BTreeMap::<&str, usize>::new();
        for triple_dir in seeds::files(&root.join("toolchain/tests/golden/obj")).unwrap() {
            for file in seeds::files(&triple_dir).unwrap() {
                let bytes = fs::read(&file).unwrap();
                let format = seeds::object_target(&bytes)
                    .unwrap_or_else(|| panic!("{}: unknown object magic", file.display()));
                *per_format.entry(format).or_default() += 1;
            }
        }
        for target in &TARGETS[..3] {
            assert!(per_format.get(target).copied().unwrap_or(0) > 0, "{target}");
        }
    }

    /// The list here and the `[[bin]]`s of fuzz/Cargo.toml are the same targets, and each
    /// target only wraps the harness (whose replay tests are what CI runs).
    #[test]
    fn targets_match_fuzz_manifest() {
        #[derive(serde::Deserialize)]
        struct Manifest {
            bin: Vec<Bin>,
        }
        #[derive(serde::Deserialize)]
        struct Bin {
            name: String,
        }
        let text = fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
        let manifest: Manifest = toml::from_str(&text).unwrap();
        let declared: Vec<&str> = manifest.bin.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(declared, TARGETS);
        for target in TARGETS {
            let source = root().join(format!("fuzz/fuzz_targets/{target}.rs"));
            let text = fs::read_to_string(&source).unwrap();
            assert!(
                text.contains("cpjit_fuzz_harness::"),
                "{} does not call fuzz-harness",
                source.display()
            );
        }
    }
}
