//! The inputs digest written into each generated crate's header: SHA-256 over everything
//! the crate is generated from (template files, manifest, target file, the toolchain's own
//! source, the clang and LLVM versions). Paths enter only relative to the template root,
//! so the digest is the same on every machine. Equal digests mean the crate is up to date.

use crate::cache;
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::target::Target;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// SHA-256 of the toolchain's sources and of the stencil model (computed by `build.rs`).
pub const TOOLCHAIN_SOURCE_HASH: &str = env!("CPJIT_TOOLCHAIN_SOURCE_HASH");

/// Every file of a template set except hidden files, `*.md` and nested sets (directories
/// below the manifest's that hold a `manifest.toml` of their own, such as the kit's
/// `templates/threearg/`: another set's inputs, so editing one set never makes the other's
/// crates stale): `(name, bytes)` sorted by name, where the name is relative to the
/// manifest's directory (or `include:<dir>/...` for include dirs outside it).
pub fn template_files(manifest: &Manifest) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    walk(&manifest.root, &manifest.root, "", &mut files)?;
    for dir in &manifest.include_dirs {
        let abs = manifest.root.join(dir);
        let canon = abs.canonicalize().map_err(|e| {
            Error(format!(
                "{}: include_dirs entry `{dir}`: {e}",
                manifest.root.join("manifest.toml").display()
            ))
        })?;
        if !canon.starts_with(&manifest.root) {
            walk(&canon, &canon, &format!("include:{dir}/"), &mut files)?;
        } else if manifest.nested_set_of(&Path::new(dir).join("x")).is_some() {
            // Inside a nested set, which the walk of the root leaves out: named relative
            // to the root like the root's own files.
            walk(&manifest.root, &canon, "", &mut files)?;
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

fn walk(root: &Path, dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error(format!("{}: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error(format!("{}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Hidden files (editor state) and documentation are not inputs.
        if !name.starts_with('.') && !name.ends_with(".md") {
            paths.push(entry.path());
        }
    }
    for path in paths {
        if path.is_dir() {
            if path.join("manifest.toml").is_file() {
                continue; // a nested set
            }
            walk(root, &path, prefix, out)?;
        } else {
            let bytes =
                std::fs::read(&path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let name: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push((format!("{prefix}{}", name.join("/")), bytes));
        }
    }
    Ok(())
}

/// The digest of one target's crate.
pub fn compute(
    files: &[(String, Vec<u8>)],
    manifest: &Manifest,
    target: &Target,
    clang_version: &str,
    llvm_version: &str,
) -> String {
    let mut h = Sha256::new();
    let mut part = |label: &str, bytes: &[u8]| {
        h.update(label.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part("format", b"cpjit-stencils 1");
    part(
        "toolchain",
        format!("{} {TOOLCHAIN_SOURCE_HASH}", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    part("clang", clang_version.as_bytes());
    part("llvm", llvm_version.as_bytes());
    part("manifest", &manifest.bytes);
    part("target", &target.bytes);
    for (name, bytes) in files {
        part("file", name.as_bytes());
        part("bytes", bytes);
    }
    cache::hex(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_set_is_not_an_input_of_the_outer_one() {
        let dir = std::env::temp_dir().join(format!("cpjit-digest-nested-{}", std::process::id()));
        let nested = dir.join("inner");
        std::fs::create_dir_all(nested.join("include")).unwrap();
        let manifest = "name = \"outer\"\nsources = [\"a.c\"]\n[stencils]\nfunctions = \"op_*\"\n";
        std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
        std::fs::write(dir.join("a.c"), "int x;").unwrap();
        std::fs::write(nested.join("manifest.toml"), manifest).unwrap();
        std::fs::write(nested.join("include").join("b.h"), "int y;").unwrap();
        let names = |dir: &Path| -> Vec<String> {
            let files = template_files(&Manifest::load(dir).unwrap()).unwrap();
            files.into_iter().map(|(n, _)| n).collect()
        };
        assert_eq!(names(&dir), ["a.c", "manifest.toml"]);
        assert_eq!(names(&nested), ["include/b.h", "manifest.toml"]);
        // An outer set that includes a nested set's headers: those are its inputs too.
        let with_include = format!("include_dirs = [\"inner/include\"]\n{manifest}");
        std::fs::write(dir.join("manifest.toml"), with_include).unwrap();
        assert_eq!(names(&dir), ["a.c", "inner/include/b.h", "manifest.toml"]);
        // Its sources cannot be the nested set's files.
        let stealing = manifest.replace("[\"a.c\"]", "[\"a.c\", \"inner/include/b.h\"]");
        std::fs::write(dir.join("manifest.toml"), stealing).unwrap();
        let err = Manifest::load(&dir)
            .unwrap()
            .translation_units()
            .unwrap_err();
        assert!(
            err.0.contains("inner/include/b.h") && err.0.contains("nested template set `inner/`"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
