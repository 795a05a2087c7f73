//! Batched translation units (`[stencils] batch_size`): several units of a
//! one-function-per-unit set compiled by one clang run and split apart again give the same
//! stencils as one clang run per unit, and so do the same ops as a family, batched or not,
//! on every target; a changed unit recompiles only its batch and re-emits only its own
//! object; errors still name the unit's file and line; a batch clang rejects (two units
//! defining one name) falls back to one run per unit.

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::scale_set::ScaleSet;
use std::path::Path;

const SMALL: ScaleSet = ScaleSet {
    ops: 6,
    header_lines: 1_500,
    batch_size: None,
};

/// [`SMALL`] written to a new directory, in batches of `batch_size` units.
fn small_set(batch_size: Option<usize>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ScaleSet {
        batch_size,
        ..SMALL
    }
    .write(dir.path())
    .unwrap();
    dir
}

/// The set at `set` built for `triple` with the cache at `cache`.
fn cached_build(set: &Path, triple: &str, cache: &Path) -> serde_json::Value {
    build_json(set, &[triple], Cache::new(cache.to_path_buf()))
}

fn entries(cache: &Path, kind: &str) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{kind}-")))
        .collect()
}

/// Issue 43's "done when": the same ops as one clang run per unit, as units batched, as one
/// family over one template (each op selected by its member's define, the header cut into
/// a chain as a real interpreter's is) one clang run per member, and as that family
/// batched give byte-identical stencils (code, data, holes, frames, symbols) on every
/// target.
#[test]
fn units_batched_units_a_family_and_a_batched_family_give_identical_stencils_on_every_target() {
    // 7 units (6 ops and the shim) in batches of 3, 3 and 1; 6 members in 3 + 3 and the shim.
    let batched = ScaleSet {
        batch_size: Some(3),
        ..SMALL
    };
    let forms: [(&str, ScaleSet, bool); 4] = [
        ("one clang run per unit", SMALL, false),
        ("batched units", batched, false),
        ("one family", SMALL, true),
        ("one family batched", batched, true),
    ];
    let mut built = Vec::new();
    for (form, set, family) in forms {
        let dir = tempfile::tempdir().unwrap();
        if family {
            set.write_family(dir.path()).unwrap();
            ScaleSet::chain_header(dir.path(), 3).unwrap();
        } else {
            set.write(dir.path()).unwrap();
        }
        built.push((form, build_json(dir.path(), &[], Cache::disabled())));
    }
    let (_, alone) = &built[0];
    assert_eq!(alone.as_object().unwrap().len(), all_targets().len());
    for (triple, stencils) in alone.as_object().unwrap() {
        assert_eq!(
            stencils["stencils"].as_array().unwrap().len(),
            SMALL.ops + 1,
            "{triple}"
        );
        for (form, other) in &built[1..] {
            assert_eq!(
                stencils, &other[triple],
                "{triple}: {form} and one clang run per unit differ"
            );
        }
    }
}

#[test]
fn a_changed_unit_recompiles_its_batch_and_re_emits_only_its_own_object() {
    let set = small_set(Some(3));
    let triple = first_target();
    let cache = tempfile::tempdir().unwrap();
    let build = || cached_build(set.path(), &triple, cache.path());
    build();
    let (bitcode, objects) = (entries(cache.path(), "bc2"), entries(cache.path(), "obj"));
    assert_eq!(bitcode.len(), 3, "one bitcode entry per batch: {bitcode:?}");
    // One object per unit, two where the layout pass changed the unit (the kit's layout
    // and the set's own, compared stencil by stencil: `pipeline/emit.rs`).
    let units = SMALL.ops + 1;
    assert!(
        (units..=2 * units).contains(&objects.len()),
        "one or two objects per unit: {objects:?}"
    );
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
    assert!(
        (1..=2).contains(&new_objects.len()),
        "only op_0004's object (in each layout): {new_objects:?}"
    );
}

/// Issue 43: a family whose one template changed inside one member's function compiles
/// that member alone (its batch's other members, and the other batches, are found by their
/// preprocessed text), also when the change moves the other members' lines; a change
/// outside the members' functions (a header) rebuilds them all. Every build gives what a
/// build without the cache gives.
#[test]
fn a_family_member_changed_in_its_function_compiles_alone_and_the_rest_is_found() {
    let set = tempfile::tempdir().unwrap();
    ScaleSet {
        batch_size: Some(3),
        ..SMALL
    }
    .write_family(set.path())
    .unwrap();
    let triple = first_target();
    let cache = tempfile::tempdir().unwrap();
    let build = || cached_build(set.path(), &triple, cache.path());
    let fresh = || build_json(set.path(), &[&triple], Cache::disabled());
    build();
    let members = entries(cache.path(), "ppm");
    assert_eq!(
        members.len(),
        SMALL.ops,
        "one entry per member: {members:?}"
    );
    let template = set.path().join("ops.c");
    let text = std::fs::read_to_string(&template).unwrap();
    // op_0004's function: one more line, its constant changed.
    let edited = text.replacen("_set(o, 4);", "_set(o,\n    4 + 1000);", 1);
    assert_ne!(edited, text);
    std::fs::write(&template, &edited).unwrap();
    let (bitcode, batches) = (
        entries(cache.path(), "bc2"),
        entries(cache.path(), "optbatch"),
    );
    assert_eq!(build(), fresh());
    let new_bitcode: Vec<_> = entries(cache.path(), "bc2")
        .difference(&bitcode)
        .cloned()
        .collect();
    assert_eq!(new_bitcode.len(), 1, "op_0004 alone: {new_bitcode:?}");
    assert_eq!(
        entries(cache.path(), "optbatch"),
        batches,
        "no batch split again"
    );
    assert_eq!(entries(cache.path(), "ppm").len(), SMALL.ops + 1);
    // A header's change reaches every member.
    let header = set.path().join("include/scale.h");
    let h = std::fs::read_to_string(&header).unwrap();
    std::fs::write(&header, h.replacen("s += OBJ", "s -= OBJ", 1)).unwrap();
    let before = entries(cache.path(), "ppm").len();
    assert_eq!(build(), fresh());
    assert_eq!(entries(cache.path(), "ppm").len(), before + SMALL.ops);
}

#[test]
fn errors_in_a_batched_unit_name_its_file_and_line() {
    let set = small_set(Some(4));
    let unit = set.path().join("ops/op_0002.c");
    let text = std::fs::read_to_string(&unit).unwrap();
    let line = common::break_continuation(&unit);
    let triple = first_target();
    let err = build_error(set.path(), &triple);
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
    let err = build_error(set.path(), &triple);
    assert!(
        err.contains(&format!("{triple}: ops/op_0002.c: stencil `op_0002`"))
            && err.contains("without musttail"),
        "{err}"
    );
}

#[test]
fn a_batch_clang_rejects_is_compiled_unit_by_unit_with_a_notice() {
    let set = small_set(Some(8));
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
    let plain = small_set(None);
    share_an_unguarded_header(plain.path());
    let batched = small_set(Some(3));
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
    // a bitcode entry each): 7 units in batches of 3, 3 and 1, per target compiled (a
    // target with a twin is compiled as the twin).
    let bitcode = entries(cache.path(), "bc2");
    assert_eq!(
        bitcode.len(),
        3 * compiled_targets().len(),
        "one bitcode entry per batch: {bitcode:?}"
    );
    // Cached as the batch: a second build compiles nothing.
    build_json(batched.path(), &[], Cache::new(cache.path().to_path_buf()));
    assert_eq!(entries(cache.path(), "bc2"), bitcode);
}

/// The fixture of issue 43: ops that name themselves (`__func__`, `__FUNCTION__`), use
/// string literals another unit of their batch uses too (after one of their own), a static
/// table and a register-hungry inline helper from a shared header (several callers in a
/// batch, one alone).
fn write_faithfulness_fixture(dir: &Path, batch_size: Option<usize>) {
    let set = ScaleSet {
        batch_size,
        ..SMALL
    };
    set.write(dir).unwrap();
    let manifest = std::fs::read_to_string(dir.join("manifest.toml")).unwrap();
    std::fs::write(
        dir.join("manifest.toml"),
        manifest.replace(
            "hole_prefix = \"_JIT_\"\n",
            "hole_prefix = \"_JIT_\"\nallowed_symbols = [\"scale_*\"]\n",
        ),
    )
    .unwrap();
    let mix = register_hungry_header("FIXTURE_H", "scale_", "fixture_mix", "int64_t");
    std::fs::write(dir.join("include/fixture.h"), mix).unwrap();
    for k in 0..SMALL.ops {
        let name = scale_op_name(k);
        std::fs::write(
            dir.join(format!("ops/{name}.c")),
            format!(
                "/* Fixture op {k}. */\n#include \"scale.h\"\n#include \"fixture.h\"\n\n\
                 JIT_HOLE char _JIT_OPARG[];\nextern void _JIT_CONTINUE;\n\n\
                 JIT_CC int64_t _JIT_ENTRY(frame_t *frame, int64_t *sp, thread_t *ts) {{\n\
                 \x20 scale_note(\"{name} alone\");\n\
                 \x20 if (sp[-1] < 0) scale_fatal(__func__, \"negative operand\");\n\
                 \x20 if (sp[-2] < 0) scale_fatal(__FUNCTION__, \"negative second operand\");\n\
                 \x20 scale_note(\"shared note\");\n\
                 \x20 sp[-1] = fixture_mix(sp, {k}) + (int64_t)(uintptr_t)_JIT_OPARG;\n\
                 \x20 TAIL_CALL(_JIT_CONTINUE);\n}}\n"
            ),
        )
        .unwrap();
    }
}

fn scale_op_name(k: usize) -> String {
    cpjit_toolchain::scale_set::op_name(k)
}

#[test]
fn batched_units_naming_themselves_and_sharing_strings_give_what_each_alone_gives() {
    let plain = tempfile::tempdir().unwrap();
    write_faithfulness_fixture(plain.path(), None);
    let batched = tempfile::tempdir().unwrap();
    write_faithfulness_fixture(batched.path(), Some(4));
    let a = build_json(plain.path(), &[], Cache::disabled());
    let b = build_json(batched.path(), &[], Cache::disabled());
    assert_eq!(a.as_object().unwrap().len(), all_targets().len());
    let mut differing = Vec::new();
    for (triple, stencils) in a.as_object().unwrap() {
        let (alone, together) = (
            stencils["stencils"].as_array().unwrap(),
            b[triple]["stencils"].as_array().unwrap(),
        );
        assert_eq!(alone.len(), SMALL.ops + 1, "{triple}");
        assert_eq!(alone.len(), together.len(), "{triple}");
        for (x, y) in alone.iter().zip(together) {
            if x != y {
                differing.push(format!("{triple}: {}", x["name"]));
            }
        }
        // Each op names itself `_JIT_ENTRY` (what it alone gives), never the batch's alias.
        for y in together.iter().filter(|y| y["name"] != "shim") {
            let hex = y["data"].as_str().unwrap();
            let data: Vec<u8> = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            let has = |s: &[u8]| data.windows(s.len()).any(|w| w == s);
            assert!(
                has(b"_JIT_ENTRY\0") && !has(b"cpjit_batch") && has(b"shared note"),
                "{triple}: {}: {:?}",
                y["name"],
                String::from_utf8_lossy(&data)
            );
        }
    }
    assert!(
        differing.is_empty(),
        "batched and alone differ: {differing:?}"
    );
}
