//! Stencil families through the whole pipeline on every target, so on every object format
//! (ELF, COFF, Mach-O): `tests/sets/family` has a family with a list and a variant
//! parameter, one combination skipped. Each target's generated crate must name the members
//! by the rule, hold the same table, and give a member exactly the stencil of the same op
//! written by hand; and the kit's own sets without families must generate no family items.
//! Needs clang-19, like `pipeline.rs`.

use crate::common;

use common::{options, set, stencil_item};
use cpjit_model::{Arch, ObjectFormat};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;

#[test]
fn a_family_builds_on_every_format_with_its_table_and_the_stencils_of_hand_written_ops() {
    let out = tempfile::tempdir().unwrap();
    let opts = options(set("family"), &[], out.path(), Cache::disabled());
    driver::build_stencils(&opts).unwrap();
    let targets = common::target_files();
    let mut formats = std::collections::BTreeSet::new();
    for t in &targets {
        formats.insert(t.format);
        let lib = std::fs::read_to_string(out.path().join(&t.triple).join("src/lib.rs")).unwrap();
        let index = "pub mod stencil {\n    pub const op_fam_add_1: usize = 0;\n    \
                     pub const op_fam_add_2: usize = 1;\n    pub const op_fam_xor_1: usize = 2;\n    \
                     pub const op_plain_xor_1: usize = 3;\n}";
        assert!(lib.contains(index), "{}: {lib}", t.triple);
        let table = "pub static FAMILIES: [Family<'static>; 1] = [\n    Family {\n        \
                     name: \"fam\",\n        elements: &[\"add\", \"xor\"],\n        params: &[\n            \
                     FamilyParam { name: \"N\", values: &[\"1\", \"2\"] },\n        ],\n        \
                     // 0, 1\n        // 2, -\n        \
                     stencils: StencilIndices::from_le_bytes(b\"\\\n            \\x00\\x00\\x01\\x00\\\n            \
                     \\x02\\x00\\xff\\xff\"),\n        cached: None,\n    },\n];";
        assert!(lib.contains(table), "{}: {lib}", t.triple);
        assert!(lib.contains("pub mod family {\n    pub const fam: usize = 0;\n}"));
        // The member and the hand-written op are the same stencil but for the name.
        let member = stencil_item(&lib, "op_fam_xor_1").replace("op_fam_xor_1", "NAME");
        let plain = stencil_item(&lib, "op_plain_xor_1").replace("op_plain_xor_1", "NAME");
        assert_eq!(member, plain, "{}", t.triple);
    }
    assert_eq!(
        formats.len(),
        3,
        "ELF, COFF and Mach-O targets: {formats:?}"
    );
}

#[test]
fn sets_without_families_generate_no_family_items() {
    // Besides the inputs digest (which covers the toolchain's sources), the writer adds
    // nothing for a set without `[[family]]`: no table, no index module, no facade function.
    let out = tempfile::tempdir().unwrap();
    let first = common::first_target();
    let opts = options(set("per_unit"), &[&first], out.path(), Cache::disabled());
    driver::build_stencils(&opts).unwrap();
    let lib = std::fs::read_to_string(out.path().join(&first).join("src/lib.rs")).unwrap();
    assert!(
        !lib.contains("Family") && !lib.contains("pub mod family"),
        "{lib}"
    );
    let facade = std::fs::read_to_string(out.path().join("facade/src/lib.rs")).unwrap();
    assert!(!facade.contains("families"), "{facade}");
}

/// A family whose members share a precompiled prefix (the template's `#include "shared.h"`):
/// an edit of the header the prefix reads reaches every member through the cache (their keys
/// cover the prefix's files), and the crate built before the edit fails `--check`.
#[test]
fn an_edited_prefix_header_rebuilds_the_members_and_fails_the_check_of_the_old_crate() {
    let set = tempfile::tempdir().unwrap();
    let shared = |k: u32| format!("#include \"cpjit.h\"\n#define SHARED_K {k}\n");
    common::write_set(
        set.path(),
        &[
            ("shared.h", &shared(3)),
            (
                "plain.c",
                "#include \"cpjit.h\"\n\
                 CPJIT_CC int64_t op_plain(struct cpjit_frame *frame, uint64_t *sp) {\n\
                 CPJIT_CONTINUE(frame, sp);\n}\n",
            ),
            (
                "fam.c",
                "/* The family template. */\n#include \"shared.h\"\n\
                 CPJIT_DECLARE_OPERAND(OPERAND0);\nenum { one = 1, two = 2 };\n\
                 CPJIT_CC int64_t op_fam(struct cpjit_frame *frame, uint64_t *sp) {\n\
                 sp[-1] = (sp[-1] * SHARED_K + ELEM + CPJIT_OPERAND(OPERAND0)) << N;\n\
                 CPJIT_CONTINUE(frame, sp);\n}\n",
            ),
        ],
        "name = \"prefix\"\nsources = [\"plain.c\"]\ninclude_dirs = [\"include\"]\n\
         cflags = [\"-O2\"]\n\n[stencils]\nfunctions = \"op_*\"\n\n[[family]]\nname = \"fam\"\n\
         source = \"fam.c\"\nstencil = \"op_fam_{elem}_{N}\"\nlist = [\"one\", \"two\"]\n\
         list_define = \"ELEM\"\n\n[family.params]\nN = [1, 2]\n",
    );
    let target = common::target(Arch::X86_64, ObjectFormat::Elf);
    let cache = tempfile::tempdir().unwrap();
    let build = |out: &std::path::Path, cache: Cache, check: bool| {
        let mut opts = common::options(set.path().to_path_buf(), &[&target], out, cache);
        opts.force = !check;
        opts.check = check;
        driver::build_stencils(&opts).map_err(|e| e.0)?;
        Ok::<String, String>(std::fs::read_to_string(out.join(&target).join("src/lib.rs")).unwrap())
    };
    let before = tempfile::tempdir().unwrap();
    let old = build(before.path(), Cache::new(cache.path().to_path_buf()), false).unwrap();
    assert!(
        common::cache_entries(cache.path(), "prefixdep1-") > 0,
        "no prefix was shared"
    );
    std::fs::write(set.path().join("shared.h"), shared(5)).unwrap();
    let after = tempfile::tempdir().unwrap();
    let new = build(after.path(), Cache::new(cache.path().to_path_buf()), false).unwrap();
    let uncached = tempfile::tempdir().unwrap();
    assert_eq!(
        new,
        build(uncached.path(), Cache::disabled(), false).unwrap()
    );
    assert_ne!(old, new, "SHARED_K is in every member's code");
    let err = build(before.path(), Cache::new(cache.path().to_path_buf()), true).unwrap_err();
    assert!(err.contains("stale"), "{err}");
}
