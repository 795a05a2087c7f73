//! `cargo xtask fuzz`: runs the coverage-guided fuzz targets of `fuzz/` (cargo-fuzz,
//! libFuzzer) for a bounded time each.
//!
//! Fuzzing needs a nightly toolchain and `cargo-fuzz`; they are installed here, only when this
//! task is asked for (`rustup toolchain install nightly --profile minimal`, `cargo install
//! cargo-fuzz --locked`), never by the plain set-up. Each target's corpus lives in
//! `fuzz/corpus/<target>/` (ignored by git) and is seeded on every run from committed files:
//! the golden object fixtures sorted by their format's magic, the manifest and target files.
//! A crash leaves its input in `fuzz/artifacts/<target>/` and fails the task.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::root;

/// Every fuzz target of `fuzz/Cargo.toml`, in the order they run.
pub const TARGETS: [&str; 5] = [
    "object_elf",
    "object_coff",
    "object_macho",
    "manifest",
    "trace",
];

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

/// Which object format a file is, by its magic (the golden fixtures' folder names are
/// target triples, which only `targets/` may spell out).
fn object_format(bytes: &[u8]) -> Option<&'static str> {
    match bytes.get(..4)? {
        [0x7f, b'E', b'L', b'F'] => Some("object_elf"),
        [0xcf, 0xfa, 0xed, 0xfe] => Some("object_macho"),
        // COFF: the machine field (x86-64 0x8664, arm64 0xaa64).
        [0x64, 0x86, ..] | [0x64, 0xaa, ..] => Some("object_coff"),
        _ => None,
    }
}

/// Fills `dir` with the committed seed inputs of `target`.
fn write_seeds(root: &Path, target: &str, dir: &Path) -> Result<(), String> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut seeds: Vec<PathBuf> = Vec::new();
    match target {
        "manifest" => {
            seeds.push(root.join("templates/manifest.toml"));
            seeds.extend(files(&root.join("targets"))?);
        }
        "trace" => {}
        object => {
            for triple_dir in files(&root.join("toolchain/tests/golden/obj"))? {
                for file in files(&triple_dir)? {
                    let bytes = fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
                    if object_format(&bytes) == Some(object) {
                        seeds.push(file);
                    }
                }
            }
            if seeds.is_empty() {
                return Err(format!("no seed objects found for {object}"));
            }
        }
    }
    for (i, seed) in seeds.iter().enumerate() {
        let to = dir.join(format!("seed-{i:03}"));
        fs::copy(seed, &to).map_err(|e| format!("{} -> {}: {e}", seed.display(), to.display()))?;
    }
    Ok(())
}

fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .map(|e| {
            e.map(|e| e.path())
                .map_err(|e| format!("{}: {e}", dir.display()))
        })
        .collect::<Result<_, _>>()?;
    out.sort();
    Ok(out)
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
        for triple_dir in files(&root.join("toolchain/tests/golden/obj")).unwrap() {
            for file in files(&triple_dir).unwrap() {
                let bytes = fs::read(&file).unwrap();
                let format = object_format(&bytes)
                    .unwrap_or_else(|| panic!("{}: unknown object magic", file.display()));
                *per_format.entry(format).or_default() += 1;
            }
        }
        for target in &TARGETS[..3] {
            assert!(per_format.get(target).copied().unwrap_or(0) > 0, "{target}");
        }
    }

    /// The list here and the `[[bin]]`s of fuzz/Cargo.toml are the same targets.
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
    }
}
