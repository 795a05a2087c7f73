//! Batched translation units (`[stencils] batch_size`): several units of a
//! one-function-per-unit set compiled by one clang run and split apart again give the same
//! stencils as one clang run per unit, on every target; a changed unit recompiles only its
//! batch and re-emits only its own object; errors still name the unit's file and line; a
//! batch clang rejects (two units defining one name) falls back to one run per unit.

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use cpjit_toolchain::scale_set::ScaleSet;
use std::path::Path;

const SMALL: ScaleSet = ScaleSet {
    ops: 6,
    header_lines: 1_500,
    batch_size: None,
};

/// Builds `set` for `only` (all targets when empty) with the JSON dump; returns it with
/// every target's inputs digest removed (the manifests differ in `batch_size`).
fn build_json(set: &Path, only: &[&str], cache: Cache) -> serde_json::Value {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("set.json");
    let mut opts = options(set.to_path_buf(), only, &out.path().join("crates"), cache);
    opts.json = Some(json.clone());
    driver::build_stencils(&opts).unwrap();
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    for (_, target) in value.as_object_mut().unwrap() {
        target.as_object_mut().unwrap().remove("digest");
    }
    value
}

fn entries(cache: &Path, kind: &str) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{kind}-")))
        .collect()
}

#[test]
fn batched_units_give_the_stencils_of_one_clang_run_per_unit_on_every_target() {
    let plain = tempfile::tempdir().unwrap();
    SMALL.write(plain.path()).unwrap();
    let batched = tempfile::tempdir().unwrap();
    // 7 units (6 ops and the shim) in batches of 3, 3 and 1.
    ScaleSet {
        batch_size: Some(3),
        ..SMALL
    }
    .write(batched.path())
    .unwrap();
    let a = build_json(plain.path(), &[], Cache::disabled());
    let b = build_json(batched.path(), &[], Cache::disabled());
    assert_eq!(a.as_object().unwrap().len(), all_targets().len());
    for (triple, stencils) in a.as_object().unwrap() {
        assert_eq!(
            stencils["stencils"].as_array().unwrap().len(),
            SMALL.ops + 1,
            "{triple}"
        );
        assert_eq!(
            stencils, &b[triple],
            "{triple}: batched and per-unit differ"
        );
    }
}

#[test]
fn a_changed_unit_recompiles_its_batch_and_re_emits_only_its_own_object() {
    let set = tempfile::tempdir().unwrap();
    ScaleSet {
        batch_size: Some(3),
        ..SMALL
    }
    .write(set.path())
    .unwrap();
    let triple = first_target();
    let cache = tempfile::tempdir().unwrap();
    let build = || {
        build_json(
            set.path(),
            &[&triple],
            Cache::new(cache.path().to_path_buf()),
        )
    };
    build();
    let (bitcode, objects) = (entries(cache.path(), "bc2"), entries(cache.path(), "obj"));
    assert_eq!(bitcode.len(), 3, "one bitcode entry per batch: {bitcode:?}");
    assert_eq!(objects.len(), SMALL.ops + 1, "one object per unit");
    let unit = set.path().join("ops/op_0004.c");
    let text = std::fs::read_to_string(&unit).unwrap();
    let edited = text.replacen("+ (int64_t)", "- (int64_t)", 1);
    assert_ne!(edited, text);
    std::fs::write(&unit, edited).unwrap();
    build();
    let new_bitcode: Vec<_> = entries(cache.path(), "bc2")
        .difference(&bitcode)
        .cloned()
        .collect();
    let new_objects: Vec<_> = entries(cache.path(), "obj")
        .difference(&objects)
        .cloned()
        .collect();
    assert_eq!(
        new_bitcode.len(),
        1,
        "only op_0004's batch: {new_bitcode:?}"
    );
    assert_eq!(
        new_objects.len(),
        1,
        "only op_0004's object: {new_objects:?}"
    );
}

#[test]
fn errors_in_a_batched_unit_name_its_file_and_line() {
    let set = tempfile::tempdir().unwrap();
    ScaleSet {
        batch_size: Some(4),
        ..SMALL
    }
    .write(set.path())
    .unwrap();
    let unit = set.path().join("ops/op_0002.c");
    let text = std::fs::read_to_string(&unit).unwrap();
    let line = common::break_continuation(&unit);
    let triple = first_target();
    let out = tempfile::tempdir().unwrap();
    let opts = options(
        set.path().to_path_buf(),
        &[&triple],
        out.path(),
        Cache::disabled(),
    );
    let err = driver::build_stencils(&opts).unwrap_err().0;
    assert!(
        err.contains(&format!("ops/op_0002.c:{line}:")) && err.contains("error"),
        "{err}"
    );
    assert!(!err.contains("op_0001.c"), "only the broken unit: {err}");
    // A check after clang names the unit and its stencil too.
    std::fs::write(
        &unit,
        text.replace(
            "  TAIL_CALL(_JIT_CONTINUE);",
            "  int64_t r = ((jit_func *)&_JIT_CONTINUE)(frame, sp, ts);\n  return r + 1;",
        ),
    )
    .unwrap();
    let err = driver::build_stencils(&opts).unwrap_err().0;
    assert!(
        err.contains(&format!("{triple}: ops/op_0002.c: stencil `op_0002`"))
            && err.contains("without musttail"),
        "{err}"
    );
}

#[test]
fn a_batch_clang_rejects_is_compiled_unit_by_unit_with_a_notice() {
    let set = tempfile::tempdir().unwrap();
    ScaleSet {
        batch_size: Some(8),
        ..SMALL
    }
    .write(set.path())
    .unwrap();
    // Two units defining the same file-scope name: fine alone, a redefinition together.
    for k in [1, 2] {
        let unit = set.path().join(format!("ops/op_000{k}.c"));
        let text = std::fs::read_to_string(&unit).unwrap();
        std::fs::write(
            &unit,
            text.replace(
                "JIT_CC int64_t _JIT_ENTRY",
                &format!("static int64_t twice(int64_t x) {{ return x * {k}; }}\n\nJIT_CC int64_t _JIT_ENTRY"),
            )
            .replace("sp[-1] = ", "sp[-1] = twice(1) + "),
        )
        .unwrap();
    }
    let triple = first_target();
    let out = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let result = std::process::Command::new(env!("CARGO_BIN_EXE_cpjit"))
        .args(["build-stencils", "--templates"])
        .arg(set.path())
        .arg("--targets-dir")
        .arg(workspace().join("targets"))
        .arg("--out")
        .arg(out.path())
        .args(["--target", &triple])
        .env("CPJIT_STENCIL_CACHE", cache.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(
        stderr.contains("failed to compile as one unit")
            && stderr.contains("compiled one by one")
            && stderr.contains("redefinition of 'twice'"),
        "{stderr}"
    );
    let lib = std::fs::read_to_string(out.path().join(&triple).join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub const op_0002: usize"), "{lib}");
}

/// Adds `include/shared.h`, a header without include guard (a struct and an inline
/// function: a redefinition when one translation unit parses it twice), to every op of the
/// scale set in `dir`.
fn share_an_unguarded_header(dir: &Path) {
    std::fs::write(
        dir.join("include/shared.h"),
        "/* No include guard. */\nstruct shared_pair { int64_t a, b; };\n\
         static inline int64_t shared_twice(int64_t x) { return 2 * x; }\n",
    )
    .unwrap();
    for entry in std::fs::read_dir(dir.join("ops")).unwrap() {
        let unit = entry.unwrap().path();
        let text = std::fs::read_to_string(&unit).unwrap();
        let edited = text
            .replace(
                "#include \"scale.h\"\n",
                "#include \"scale.h\"\n#include \"shared.h\"\n",
            )
            .replace("sp[-1] = ", "sp[-1] = shared_twice(1) + ");
        assert_ne!(edited, text);
        std::fs::write(&unit, edited).unwrap();
    }
}

#[test]
fn a_shared_header_without_include_guard_builds_batched_on_every_target() {
    let plain = tempfile::tempdir().unwrap();
    SMALL.write(plain.path()).unwrap();
    share_an_unguarded_header(plain.path());
    let batched = tempfile::tempdir().unwrap();
    ScaleSet {
        batch_size: Some(3),
        ..SMALL
    }
    .write(batched.path())
    .unwrap();
    share_an_unguarded_header(batched.path());
    let cache = tempfile::tempdir().unwrap();
    let a = build_json(plain.path(), &[], Cache::disabled());
    let b = build_json(batched.path(), &[], Cache::new(cache.path().to_path_buf()));
    for (triple, stencils) in a.as_object().unwrap() {
        assert_eq!(
            stencils, &b[triple],
            "{triple}: batched and per-unit differ"
        );
    }
    // Compiled as batches, not unit by unit after a failed batch (whose units would have
    // a bitcode entry each): 7 units in batches of 3, 3 and 1.
    let bitcode = entries(cache.path(), "bc2");
    assert_eq!(
        bitcode.len(),
        3 * all_targets().len(),
        "one bitcode entry per batch: {bitcode:?}"
    );
    // Cached as the batch: a second build compiles nothing.
    build_json(batched.path(), &[], Cache::new(cache.path().to_path_buf()));
    assert_eq!(entries(cache.path(), "bc2"), bitcode);
}
