//! The kit's layout pass is never worse than the set's own layout (issue 43): on the kit's
//! and the VM's template sets, on every target compiled on its own where the pass acts
//! (x86-64, and the targets that split cold code), no stencil of the default build
//! (`layout = "kit"`) has a larger hot part or loses a fall-through against the same set
//! built with `layout = "compiler"`. The AArch64 targets are left out because the pass
//! leaves their modules as they are (`layout::favour_continuation`), so both builds are one.
//!
//! The sets are copies in a temporary directory (the VM's headers from the kit read where
//! they are), built with the workspace's build cache: the second build reuses the first
//! one's bitcode and the set's own layout objects it emitted, and a later run of the test
//! reuses both.

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::target::Target;

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

#[test]
fn the_kit_layout_is_never_worse_than_the_sets_own_on_the_kits_and_the_vms_sets() {
    let targets: Vec<String> = Target::load_all(&workspace().join("targets"))
        .unwrap()
        .into_iter()
        .filter(|t| t.same_code_as.is_none())
        .filter(|t| t.arch == cpjit_model::Arch::X86_64 || cpjit_toolchain::layout::splits_cold(t))
        .map(|t| t.triple.clone())
        .collect();
    assert!(!targets.is_empty());
    let only: Vec<&str> = targets.iter().map(String::as_str).collect();
    let tmp = tempfile::tempdir().unwrap();
    let include = workspace().join("templates/include");
    let mut tallies = std::collections::BTreeMap::new();
    for set in ["templates", "vm/templates"] {
        let dir = tmp.path().join(set.replace('/', "-"));
        copy_dir(&workspace().join(set), &dir);
        let manifest = dir.join("manifest.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        // The VM's include directory is the kit's, relative to the VM's set.
        let text = text.replace(
            "\"../../templates/include\"",
            &format!("{:?}", include.display().to_string()),
        );
        assert!(text.contains("\n[stencils]\n") && !text.contains("\nlayout ="));
        std::fs::write(&manifest, &text).unwrap();
        let cache = || Cache::new(Cache::default_dir(&workspace()));
        let kit = build_json(&dir, &only, cache());
        std::fs::write(
            &manifest,
            text.replace("\n[stencils]\n", "\n[stencils]\nlayout = \"compiler\"\n"),
        )
        .unwrap();
        let own = build_json(&dir, &only, cache());
        compare(set, &kit, &own, &mut tallies);
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
