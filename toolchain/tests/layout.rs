//! The kit's layout pass is never worse than the set's own layout (issue 43): on every
//! template set of the repository that `cargo xtask build-stencils` builds (the kit's, its
//! nested ones and the clients' `<dir>/templates/`), on every target compiled on its own
//! where the pass acts (x86-64, the targets that split cold code and the AArch64 ones whose
//! cold tail the reader moves: today every target), no stencil of the default build
//! (`layout = "kit"`) has a larger hot part or loses a fall-through against the same set
//! built with `layout = "compiler"`.
//!
//! The sets are copies in a temporary directory beside each set (so that its relative
//! include directories and the build cache's `$SET`-relative keys are the set's own), built
//! with the workspace's build cache: the first build reuses what `cargo xtask build-stencils`
//! compiled, the second the bitcode and the set's own layout objects the first emitted.

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use std::path::{Path, PathBuf};

/// Per target: stencils compared, where the kit's layout differs from the set's own, and
/// where it is worse (each named with why).
#[derive(Default)]
struct Tally {
    stencils: usize,
    differ: usize,
    worse: Vec<String>,
}

/// The bytes of a stencil's hot part (`code` less `cold_len`) and whether it falls through.
fn shape(stencil: &serde_json::Value) -> (usize, bool) {
    let code = stencil["code"].as_str().unwrap().len() / 2;
    let cold = stencil["cold_len"].as_u64().unwrap() as usize;
    (code - cold, stencil["elided_continue"].as_bool().unwrap())
}

/// Compares the builds of one set, target by target, into `tallies`.
fn compare(
    set: &str,
    kit: &serde_json::Value,
    own: &serde_json::Value,
    tallies: &mut std::collections::BTreeMap<String, Tally>,
) {
    for (triple, built) in kit.as_object().unwrap() {
        let tally = tallies.entry(triple.clone()).or_default();
        let (kit, own) = (
            built["stencils"].as_array().unwrap(),
            own[triple]["stencils"].as_array().unwrap(),
        );
        assert_eq!(kit.len(), own.len(), "{set}: {triple}");
        for (k, o) in kit.iter().zip(own) {
            assert_eq!(k["name"], o["name"], "{set}: {triple}");
            tally.stencils += 1;
            tally.differ += usize::from(k != o);
            let ((kit_hot, kit_falls), (own_hot, own_falls)) = (shape(k), shape(o));
            let mut why = Vec::new();
            if own_falls && !kit_falls {
                why.push("lost its fall-through".to_string());
            }
            if kit_hot > own_hot {
                why.push(format!("{kit_hot} B hot against {own_hot} B"));
            }
            if !why.is_empty() {
                tally
                    .worse
                    .push(format!("{set} {}: {}", k["name"], why.join(", ")));
            }
        }
    }
}

/// The repository's template sets: `templates/`, each `templates/<name>/` with a manifest,
/// and each top-level `<dir>/templates/` with one (a client's).
fn repository_sets() -> Vec<PathBuf> {
    let root = workspace();
    let with_manifest = |dir: PathBuf| dir.join("manifest.toml").is_file().then_some(dir);
    let subdirs = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            // Hidden directories are other runs' copies (below), never sets.
            .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect()
    };
    let mut sets: Vec<PathBuf> = std::iter::once(root.join("templates"))
        .chain(subdirs(&root.join("templates")))
        .chain(subdirs(&root).into_iter().map(|d| d.join("templates")))
        .filter_map(with_manifest)
        .collect();
    sets.sort();
    sets.dedup();
    sets
}

/// Writes the manifest of `set` into its copy `dir`, with `[stencils] layout` set to
/// `layout` if given.
fn write_manifest(set: &Path, dir: &Path, layout: Option<&str>) {
    let text = std::fs::read_to_string(set.join("manifest.toml")).unwrap();
    let mut manifest: toml::Table = toml::from_str(&text).unwrap();
    if let Some(layout) = layout {
        let stencils = manifest
            .get_mut("stencils")
            .unwrap()
            .as_table_mut()
            .unwrap();
        assert!(!stencils.contains_key("layout"), "{}", set.display());
        stencils.insert("layout".into(), layout.into());
    }
    std::fs::write(
        dir.join("manifest.toml"),
        toml::to_string(&manifest).unwrap(),
    )
    .unwrap();
}

#[test]
fn the_kit_layout_is_never_worse_than_the_sets_own_on_the_repositorys_sets() {
    let targets: Vec<String> = common::target_files()
        .into_iter()
        .filter(|t| t.same_code_as.is_none())
        .filter(|t| {
            t.arch == cpjit_model::Arch::X86_64
                || cpjit_toolchain::layout::splits_cold(t)
                || cpjit_toolchain::layout::moves_cold_tail(t)
        })
        .map(|t| t.triple.clone())
        .collect();
    assert!(!targets.is_empty());
    let only: Vec<&str> = targets.iter().map(String::as_str).collect();
    let sets = repository_sets();
    // The kit's own sets and at least one client's.
    assert!(sets.len() >= 3, "{sets:?}");
    let mut tallies = std::collections::BTreeMap::new();
    for set in &sets {
        let name = set.strip_prefix(workspace()).unwrap().display().to_string();
        // The copy sits beside the set, at its depth: its include directories resolve as
        // the set's own, and the build cache (whose keys spell the set's directory `$SET`)
        // finds what `cargo xtask build-stencils` compiled for the set.
        let tmp = tempfile::Builder::new()
            .prefix(".layout-test-")
            .tempdir_in(set.parent().unwrap())
            .unwrap();
        let dir = tmp.path();
        copy_dir(set, dir);
        let cache = || Cache::new(Cache::default_dir(&workspace()));
        write_manifest(set, dir, None);
        let kit = build_json(dir, &only, cache());
        write_manifest(set, dir, Some("compiler"));
        let own = build_json(dir, &only, cache());
        compare(&name, &kit, &own, &mut tallies);
    }
    let mut worse = Vec::new();
    for (triple, t) in &tallies {
        eprintln!(
            "{triple}: {} stencils, {} laid out otherwise than the set's own layout, {} worse",
            t.stencils,
            t.differ,
            t.worse.len()
        );
        worse.extend(t.worse.iter().map(|w| format!("{triple}: {w}")));
    }
    assert_eq!(tallies.len(), targets.len());
    assert!(
        worse.is_empty(),
        "the kit's layout is worse than the set's own on {} stencils:\n{}",
        worse.len(),
        worse.join("\n")
    );
}
