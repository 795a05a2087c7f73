//! The committed seed inputs of each fuzz target. Std only: `xtask` compiles this file too
//! (through `#[path]`, since xtask must not depend on the LLVM-linked toolchain) to seed the
//! corpora of `cargo xtask fuzz`, and the replay tests read the same seeds.

use std::fs;
use std::path::{Path, PathBuf};

/// Every fuzz target of `fuzz/Cargo.toml`, in the order `cargo xtask fuzz` runs them.
pub const TARGETS: [&str; 5] = [
    "object_elf",
    "object_coff",
    "object_macho",
    "manifest",
    "trace",
];

/// Which object fuzz target a file belongs to, by its magic (the golden fixtures' folder
/// names are target triples, which only `targets/` may spell out).
pub fn object_target(bytes: &[u8]) -> Option<&'static str> {
    match bytes.get(..4)? {
        [0x7f, b'E', b'L', b'F'] => Some("object_elf"),
        [0xcf, 0xfa, 0xed, 0xfe] => Some("object_macho"),
        // COFF: the machine field (x86-64 0x8664, arm64 0xaa64).
        [0x64, 0x86, ..] | [0x64, 0xaa, ..] => Some("object_coff"),
        _ => None,
    }
}

/// The committed files that seed `target`, sorted: the golden object fixtures of its format,
/// or the manifest and target files. The trace target has none (any bytes are a trace).
pub fn seed_files(root: &Path, target: &str) -> Result<Vec<PathBuf>, String> {
    let mut seeds = Vec::new();
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
                    if object_target(&bytes) == Some(object) {
                        seeds.push(file);
                    }
                }
            }
            if seeds.is_empty() {
                return Err(format!("no seed objects found for fuzz target {object}"));
            }
        }
    }
    Ok(seeds)
}

/// The entries of `dir`, sorted by path.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
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
