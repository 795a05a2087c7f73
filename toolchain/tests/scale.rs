//! The generated CPython-style set (`cpjit_toolchain::scale_set`): one `_JIT_ENTRY` per unit,
//! a shared large header behind a precompiled header, holes declared as data and tail-called
//! through their addresses, three-argument ops and shim — on every target.

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use cpjit_toolchain::scale_set::{op_name, ScaleSet};
use cpjit_toolchain::writer::Sidecar;
use std::path::Path;

const SMALL: ScaleSet = ScaleSet {
    ops: 6,
    header_lines: 1_500,
    batch_size: None,
};

fn triples() -> Vec<String> {
    common::target_files()
        .into_iter()
        .map(|t| t.triple.clone())
        .collect()
}

fn lib_rs(out: &Path, triple: &str) -> String {
    std::fs::read_to_string(out.join(triple).join("src/lib.rs")).unwrap()
}

#[test]
fn the_small_scale_set_builds_for_every_target_with_every_continuation_elided() {
    let set = tempfile::tempdir().unwrap();
    SMALL.write(set.path()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let opts = options(
        set.path().to_path_buf(),
        &[],
        out.path(),
        Cache::new(cache.path().to_path_buf()),
    );
    driver::build_stencils(&opts).unwrap();
    for triple in triples() {
        let sidecar = Sidecar::read(&out.path().join(&triple)).unwrap();
        assert_eq!(sidecar.counts.stencils, SMALL.ops + 1, "{triple}");
        // Every op ends in its continuation through `&_JIT_CONTINUE`: recognised as a hole
        // call, so the reader may elide it (an elided jump without a recognised musttail
        // call is an error); where the layout pass runs (x86-64 ELF and COFF) every op's.
        let layout_runs = triple.starts_with("x86_64") && !triple.contains("apple");
        if layout_runs {
            assert_eq!(sidecar.counts.elided_jumps, SMALL.ops, "{triple}");
        }
        let lib = lib_rs(out.path(), &triple);
        for k in 0..SMALL.ops {
            assert!(
                lib.contains(&format!("pub const {}: usize", op_name(k))),
                "{triple}: {lib}"
            );
        }
        assert!(lib.contains("pub const shim: usize"), "{triple}");
        assert!(
            !lib.contains("shim: None"),
            "the shim is selected by its unit: {triple}"
        );
    }
    // Unchanged inputs: up to date without compiling.
    let report = driver::build_stencils(&opts).unwrap();
    assert!(report.built.is_empty(), "{:?}", report.lines);
}

/// Runs the `cpjit` binary on `set` for `triple`; returns (success, stderr).
fn cpjit(set: &Path, triple: &str) -> (bool, String) {
    let out = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let result = std::process::Command::new(env!("CARGO_BIN_EXE_cpjit"))
        .args(["build-stencils", "--templates"])
        .arg(set)
        .arg("--targets-dir")
        .arg(workspace().join("targets"))
        .arg("--out")
        .arg(out.path())
        .args(["--target", triple])
        .env("CPJIT_STENCIL_CACHE", cache.path())
        .output()
        .unwrap();
    (
        result.status.success(),
        String::from_utf8_lossy(&result.stderr).into_owned(),
    )
}

#[test]
fn warnings_are_those_of_the_sources_not_of_preprocessed_text() {
    let set = tempfile::tempdir().unwrap();
    SMALL.write(set.path()).unwrap();
    let triple = first_target();
    let (ok, stderr) = cpjit(set.path(), &triple);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // The same op compiled as preprocessed text warns: the test can fail.
    let unit = set.path().join("ops/op_0001.c");
    let include = format!("-I{}", set.path().join("include").display());
    let pp = std::process::Command::new("clang-19")
        .args(["-E", "-O2", &include])
        .arg(&unit)
        .output()
        .unwrap();
    let mut child = std::process::Command::new("clang-19")
        .args(["-x", "cpp-output", "-O2", "-fsyntax-only", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&pp.stdout).unwrap();
    let warned = child.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&warned.stderr).contains("-Wparentheses-equality"),
        "preprocessed text no longer warns; the check above proves nothing"
    );
}

#[test]
fn a_non_tail_call_to_a_data_declared_continuation_is_an_error_naming_the_unit() {
    let set = tempfile::tempdir().unwrap();
    SMALL.write(set.path()).unwrap();
    let unit = set.path().join("ops/op_0003.c");
    let text = std::fs::read_to_string(&unit).unwrap();
    let bad = text.replace(
        "  TAIL_CALL(_JIT_CONTINUE);",
        "  int64_t r = ((jit_func *)&_JIT_CONTINUE)(frame, sp, ts);\n  return r + 1;",
    );
    assert_ne!(bad, text);
    std::fs::write(&unit, bad).unwrap();
    // The error names the triple compiled (a target with a twin is compiled as the twin).
    for triple in compiled_targets() {
        let err = build_error(set.path(), &triple);
        assert!(
            err.contains(&format!("{triple}: ops/op_0003.c: stencil `op_0003`"))
                && err.contains("without musttail")
                && err.contains("_JIT_CONTINUE"),
            "{triple}: {err}"
        );
        assert!(!err.contains("op_0002"), "{err}");
    }
}

#[test]
fn no_plt_keeps_continuation_elision_on_x86_64() {
    let triple = triples()
        .into_iter()
        .find(|t| t.starts_with("x86_64") && t.contains("linux"))
        .unwrap();
    let no_plt = |manifest: &str| {
        let edited = manifest.replace("cflags = [\"-O2\"]", "cflags = [\"-O2\", \"-fno-plt\"]");
        assert_ne!(edited, manifest);
        edited
    };
    let build = |dir: &Path| {
        let out = tempfile::tempdir().unwrap();
        driver::build_stencils(&options(
            dir.to_path_buf(),
            &[&triple],
            out.path(),
            Cache::disabled(),
        ))
        .unwrap();
        let elided = Sidecar::read(&out.path().join(&triple))
            .unwrap()
            .counts
            .elided_jumps;
        (elided, lib_rs(out.path(), &triple))
    };

    // The scale set's continuations are declared as data: the same count with and without.
    let set = tempfile::tempdir().unwrap();
    SMALL.write(set.path()).unwrap();
    let (without, _) = build(set.path());
    let manifest = set.path().join("manifest.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, no_plt(&text)).unwrap();
    let (with, _) = build(set.path());
    assert!(
        with > 0 && with == without,
        "scale set, -fno-plt: {with} elided, without: {without}"
    );

    // The default set's continuations are functions, which -fno-plt marks nonlazybind. Its
    // plain sources and the first element of each family (every source file and family
    // shape) are built with -fno-plt; each stencil must fall through exactly where the
    // committed crate's does (the committed crate is the build without -fno-plt, which
    // `build-stencils --check` proves fresh).
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("templates"), copy.path());
    let manifest = copy.path().join("manifest.toml");
    let text = first_family_elements(&no_plt(&std::fs::read_to_string(&manifest).unwrap()));
    std::fs::write(&manifest, text).unwrap();
    let (elided, lib) = build(copy.path());
    let built = falls_through(&lib);
    let committed = falls_through(&lib_rs(&workspace().join("stencils"), &triple));
    assert!(
        built.len() >= 50 && elided > 0,
        "{} stencils, {elided} elided",
        built.len()
    );
    for (name, falls) in &built {
        assert_eq!(
            Some(falls),
            committed.get(name),
            "{triple}: `{name}` with -fno-plt falls through: {falls}; the committed crate \
             (without -fno-plt): {:?}",
            committed.get(name)
        );
    }
    assert_eq!(
        elided,
        built.values().filter(|f| **f).count(),
        "the sidecar counts the stencils that fall through"
    );
}

/// `manifest` with each family's list cut to its first element (all its parameters kept).
fn first_family_elements(manifest: &str) -> String {
    let mut table: toml::Table = manifest.parse().unwrap();
    let families = table
        .get_mut("family")
        .and_then(|f| f.as_array_mut())
        .expect("the default set has families");
    for family in families {
        let list = family
            .get_mut("list")
            .and_then(|l| l.as_array_mut())
            .expect("a family with a list");
        list.truncate(1);
        let kept = list[0]
            .as_str()
            .expect("list elements are strings")
            .to_string();
        // A cached family's per-element facts may name only elements it still has.
        if let Some(cached) = family.get_mut("cached").and_then(|c| c.as_table_mut()) {
            if let Some(effects) = cached.get_mut("effects").and_then(|e| e.as_table_mut()) {
                effects.retain(|element, _| *element == kept);
            }
            if cached.get("glue").and_then(|g| g.as_str()) != Some(kept.as_str()) {
                cached.remove("glue");
            }
            if let Some(results) = cached
                .get_mut("float_results")
                .and_then(|r| r.as_array_mut())
            {
                results.retain(|element| element.as_str() == Some(kept.as_str()));
            }
            if let Some(keep) = cached.get_mut("keep").and_then(|k| k.as_array_mut()) {
                keep.retain(|rule| {
                    rule.get("elem").and_then(|e| e.as_str()) == Some(kept.as_str())
                });
            }
        }
    }
    toml::to_string(&table).unwrap()
}

/// Each stencil of a generated `lib.rs` and whether it falls through (its final jump to the
/// continuation elided).
fn falls_through(lib: &str) -> std::collections::BTreeMap<String, bool> {
    let mut out = std::collections::BTreeMap::new();
    let mut name: Option<&str> = None;
    for line in lib.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("pub const ") {
            if let Some(n) = rest.strip_suffix(": Stencil<'static> = Stencil {") {
                name = Some(n);
            }
        } else if let Some(value) = line.strip_prefix("falls_through: ") {
            let n = name.take().expect("falls_through inside a stencil");
            out.insert(n.to_string(), value == "true,");
        }
    }
    out
}

#[test]
fn the_precompiled_header_is_reused_when_touched_and_rebuilt_when_changed() {
    let set = tempfile::tempdir().unwrap();
    SMALL.write(set.path()).unwrap();
    let triple = first_target();
    let out = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut opts = options(
        set.path().to_path_buf(),
        &[&triple],
        out.path(),
        Cache::new(cache.path().to_path_buf()),
    );
    opts.force = true;
    driver::build_stencils(&opts).unwrap();
    let pchs = || common::cache_entries(cache.path(), "pch-");
    assert_eq!(pchs(), 1);
    // Same content, new modification time: clang's own PCH check would refuse the cached
    // header ("has been modified since the precompiled header was built"); the content key
    // keeps it.
    let header = set.path().join("include/scale.h");
    let text = std::fs::read_to_string(&header).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&header, &text).unwrap();
    driver::build_stencils(&opts).unwrap();
    assert_eq!(pchs(), 1, "reused");
    let digest = || {
        Sidecar::read(&out.path().join(&triple))
            .unwrap()
            .inputs_digest
    };
    let before = digest();
    // Inside the include guard: the unit's own `#include` after the PCH must be a no-op.
    let changed = text.replace(
        "#endif /* SCALE_H */",
        "static inline int added(void) { return 1; }\n#endif /* SCALE_H */",
    );
    assert_ne!(changed, text);
    std::fs::write(&header, changed).unwrap();
    driver::build_stencils(&opts).unwrap();
    assert_eq!(pchs(), 2, "rebuilt for the new content");
    assert_ne!(digest(), before);
}
