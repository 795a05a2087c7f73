//! The documentation's examples are real: the C blocks of the template author's guide
//! (`templates/README.md`) and of the top-level `README.md` build as template sets on all six
//! targets through the same pipeline as any set, with `cpjit.h` as `cpjit header` emits it,
//! and their `manifest.toml` blocks parse. Needs clang-19, like `pipeline.rs`.

use crate::common::write_set;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver::{self, BuildOptions, Options};
use cpjit_toolchain::manifest::Manifest;
use std::path::{Path, PathBuf};

fn kit() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The fenced blocks of `lang` in the Markdown file `rel` (relative to the kit).
fn blocks(rel: &str, lang: &str) -> Vec<String> {
    let text = std::fs::read_to_string(kit().join(rel)).unwrap();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_start() == format!("```{lang}") => current = Some(String::new()),
            Some(block) if line.trim_start() == "```" => {
                out.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

/// Builds a set of `sources` (file name, text) with the guide's shim on all six targets and
/// returns the summary lines.
fn build_set(sources: &[(&str, &str)], shim: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    write_set(
        dir.path(),
        sources,
        &format!(
            "name = \"guide\"\nsources = [\"*.c\"]\ninclude_dirs = [\"include\"]\n\
             cflags = [\"-O2\"]\nallowed_symbols = [\"my_*\"]\n\
             [stencils]\nfunctions = \"op_*\"\nshim = \"{shim}\"\n"
        ),
    );
    let out = dir.path().join("stencils");
    let report = driver::build_stencils(&BuildOptions {
        common: Options {
            templates: dir.path().to_path_buf(),
            targets_dir: kit().join("targets"),
            only: Vec::new(),
            jobs: 2,
            cache: Cache::disabled(),
        },
        out,
        model_dir: None,
        check: false,
        json: None,
        force: false,
    })
    .unwrap_or_else(|e| panic!("the documented example does not build:\n{e}"));
    report.built.clone()
}

/// Every target the kit has a file for.
fn target_count() -> usize {
    cpjit_toolchain::target::Target::load_all(&kit().join("targets"))
        .unwrap()
        .len()
}

/// The guide's shim block (the one defining a non-`CPJIT_CC` entry).
fn guide_shim() -> (String, String) {
    let shim = blocks("templates/README.md", "c")
        .into_iter()
        .find(|b| b.contains("_JIT_CONTINUE(frame, sp)") && !b.contains("CPJIT_CC"))
        .expect("the guide shows an entry shim");
    let name = shim
        .split("int64_t ")
        .nth(1)
        .and_then(|s| s.split('(').next())
        .unwrap()
        .to_string();
    (shim, name)
}

#[test]
fn guide_ops_build_on_every_target() {
    let c = blocks("templates/README.md", "c");
    let ops = c
        .iter()
        .find(|b| b.contains("struct cpjit_frame {"))
        .expect("the guide shows a complete op file");
    let (shim, name) = guide_shim();
    let built = build_set(&[("ops.c", ops), ("shim.c", &shim)], &name);
    assert_eq!(built.len(), target_count(), "{built:?}");
}

#[test]
fn readme_ops_build_on_every_target() {
    let c = blocks("README.md", "c");
    assert!(!c.is_empty(), "README.md shows ops");
    let (shim, name) = guide_shim();
    let mut sources: Vec<(String, &str)> = c
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("readme{i}.c"), b.as_str()))
        .collect();
    sources.push(("shim.c".into(), &shim));
    let refs: Vec<(&str, &str)> = sources.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    assert_eq!(build_set(&refs, &name).len(), target_count());
}

#[test]
fn documented_manifests_parse() {
    let mut n = 0;
    for file in ["README.md", "templates/README.md"] {
        for block in blocks(file, "toml") {
            if block.contains("[stencils]") {
                Manifest::parse(file, kit(), block.into_bytes())
                    .unwrap_or_else(|e| panic!("{file}: documented manifest: {e}"));
                n += 1;
            }
        }
    }
    assert!(n >= 1);
}
