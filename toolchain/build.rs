//! Hashes the toolchain's own sources, the stencil model and the ISA module into
//! `CPJIT_TOOLCHAIN_SOURCE_HASH`, which is part of every generated crate's inputs digest:
//! a toolchain change may change the output, so it makes committed crates stale.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let roots = [
        manifest_dir.join("src"),
        manifest_dir.join("../model/src"),
        manifest_dir.join("../isa/src"),
    ];
    let mut files = Vec::new();
    for root in &roots {
        println!("cargo:rerun-if-changed={}", root.display());
        collect(root, &mut files);
    }
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            (
                p.strip_prefix(&manifest_dir)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/"),
                p,
            )
        })
        .collect();
    named.sort();
    let mut h = Sha256::new();
    for (name, path) in &named {
        let bytes = std::fs::read(path).unwrap();
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=CPJIT_TOOLCHAIN_SOURCE_HASH={hex}");
}
