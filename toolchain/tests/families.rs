//! Stencil families through the whole pipeline on every target, so on every object format
//! (ELF, COFF, Mach-O): `tests/sets/family` has a family with a list and a variant
//! parameter, one combination skipped. Each target's generated crate must name the members
//! by the rule, hold the same table, and give a member exactly the stencil of the same op
//! written by hand; and the kit's own sets without families must generate no family items.
//! Needs clang-19, like `pipeline.rs`.

use crate::common;

use common::{options, set, stencil_item};
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
                     stencils: &[\n            0, 1, 2, NONE,\n        ],\n        \
                     cached: None,\n    },\n];";
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
