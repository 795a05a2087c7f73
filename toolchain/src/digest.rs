//! The inputs digest written into each generated crate's header: SHA-256 over everything
//! the crate is generated from (template files, manifest, the target file's facts, the
//! toolchain's own source, the clang and LLVM versions). Paths enter only relative to the
//! template root, so the digest is the same on every machine. Equal digests mean the crate
//! is up to date. Only what can change a crate enters: not the target file's `[test]`
//! table (how the matrix runs the target), its comments or its layout ([`target_facts`]).

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
    part("target", &target_facts(&target.bytes));
    for (name, bytes) in files {
        part("file", name.as_bytes());
        part("bytes", bytes);
    }
    cache::hex(&h.finalize())
}

/// A target file's `bytes` as far as its crates depend on them: every key but the `[test]`
/// table, as canonical TOML (sorted keys, no comments), so that changing how the matrix
/// runs a target, or a comment, does not make its committed crates stale.
pub fn target_facts(bytes: &[u8]) -> Vec<u8> {
    let table = std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok());
    match table {
        Some(mut table) => {
            table.remove("test");
            // Sorted whatever the order of the file (serde's map of toml may keep it).
            let sorted: std::collections::BTreeMap<_, _> = table.into_iter().collect();
            toml::to_string(&sorted)
                .expect("a parsed TOML table serializes")
                .into_bytes()
        }
        // Not TOML: the loader has refused it already; hash it as it is.
        None => bytes.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changing only the `[test]` table (or a comment) keeps a target's digest; changing a
    /// fact that reaches its stencils (a clang flag) changes it.
    #[test]
    fn the_digest_covers_the_targets_stencil_facts_only() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = "name = \"s\"\nsources = [\"a.c\"]\n[stencils]\nfunctions = \"op_*\"\n";
        std::fs::write(dir.path().join("manifest.toml"), manifest).unwrap();
        let manifest = Manifest::load(dir.path()).unwrap();
        let real =
            crate::target::test_target(cpjit_model::Arch::X86_64, cpjit_model::ObjectFormat::Elf);
        let text = String::from_utf8(real.bytes.clone()).unwrap();
        assert!(
            text.contains("\n[test]\n") && text.contains("cflags = ["),
            "{text}"
        );
        let digest = |text: &str| {
            let target = Target::parse("t.toml", &real.triple, text.as_bytes().to_vec()).unwrap();
            compute(&[], &manifest, &target, "clang 19", "llvm 19")
        };
        let original = digest(&text);
        let (facts, test) = text.split_once("\n[test]\n").unwrap();
        let same = [
            // No [test] table, another one, a comment.
            facts.to_string(),
            format!("{facts}\n[test]\nexecution = \"qemu\"\nrust_target = \"x\"\ncheck_target = \"y\"\n"),
            format!("# how this target is tested\n{facts}\n[test]\n{test}"),
        ];
        for variant in &same {
            assert_eq!(digest(variant), original, "{variant}");
        }
        let flag = text.replace("cflags = [", "cflags = [\"-DX\", ");
        assert_ne!(digest(&flag), original);
        // Every target file's facts are its keys without [test].
        let kit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        for t in Target::load_all(&kit).unwrap() {
            let facts: toml::Table = std::str::from_utf8(&target_facts(&t.bytes))
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                facts.contains_key("triple") && !facts.contains_key("test"),
                "{facts}"
            );
        }
    }

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
