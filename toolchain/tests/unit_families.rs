//! Stencil families in a one-function-per-unit set (`translation_unit_entry`, the CPython
//! style: one template compiled once per op with `-D` defines, every member defining
//! `_JIT_ENTRY`): members are named by the family's rule, not after the template's file,
//! on every target; a member equals the same op written as its own unit; errors in a
//! member name the member's stencil.

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use cpjit_toolchain::scale_set::ScaleSet;
use std::path::Path;

use cpjit_toolchain::scale_set::FAMILY_TEMPLATE as TEMPLATE;

const FAMILY: &str = r#"
[[family]]
name = "arith"
source = "family/arith.c"
stencil = "op_arith_{elem}_{N}"
list = ["add", "sub"]
list_define = "ELEM"

[family.params]
N = [1, 2]
"#;

/// A small scale set plus the family and `ops/op_hand.c`, the member `sub`, `N = 2` written
/// out as its own unit.
fn write_set(dir: &Path) {
    ScaleSet {
        ops: 2,
        header_lines: 200,
        batch_size: None,
    }
    .write(dir)
    .unwrap();
    std::fs::create_dir_all(dir.join("family")).unwrap();
    std::fs::write(dir.join("family/arith.c"), TEMPLATE).unwrap();
    std::fs::write(
        dir.join("ops/op_hand.c"),
        format!("#define ELEM sub\n#define N 2\n{TEMPLATE}"),
    )
    .unwrap();
    let manifest = dir.join("manifest.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}{FAMILY}")).unwrap();
}

/// The stencil constant `def::NAME`'s item text, from its `pub const` line to the `};`.
fn stencil_item<'a>(lib: &'a str, name: &str) -> &'a str {
    let start = lib
        .find(&format!("pub const {name}: Stencil"))
        .unwrap_or_else(|| panic!("no stencil {name}"));
    let end = start + lib[start..].find("\n    };").unwrap();
    &lib[start..end]
}

#[test]
fn family_members_of_a_one_function_per_unit_set_are_named_by_the_rule_on_every_target() {
    let set = tempfile::tempdir().unwrap();
    write_set(set.path());
    let out = tempfile::tempdir().unwrap();
    let opts = options(set.path().to_path_buf(), &[], out.path(), Cache::disabled());
    driver::build_stencils(&opts).unwrap();
    for triple in all_targets() {
        let lib = std::fs::read_to_string(out.path().join(&triple).join("src/lib.rs")).unwrap();
        for name in [
            "op_arith_add_1",
            "op_arith_add_2",
            "op_arith_sub_1",
            "op_arith_sub_2",
        ] {
            assert!(
                lib.contains(&format!("pub const {name}: usize")),
                "{triple}: {name}"
            );
        }
        let index = &lib[lib.find("pub mod stencil {").unwrap()..];
        let index = &index[..index.find("\n}").unwrap()];
        assert!(
            !index.contains(" arith:") && !index.contains("_JIT_ENTRY"),
            "{triple}: a member named after the template's file or function: {index}"
        );
        assert!(
            lib.contains("name: \"arith\",\n        elements: &[\"add\", \"sub\"]"),
            "{triple}: {lib}"
        );
        let member = stencil_item(&lib, "op_arith_sub_2").replace("op_arith_sub_2", "NAME");
        let hand = stencil_item(&lib, "op_hand").replace("op_hand", "NAME");
        assert_eq!(member, hand, "{triple}");
    }
}

#[test]
fn an_error_in_a_member_names_the_member() {
    let set = tempfile::tempdir().unwrap();
    write_set(set.path());
    // Not a tail call: the musttail rule names the stencil.
    let template = set.path().join("family/arith.c");
    std::fs::write(
        &template,
        TEMPLATE.replace(
            "  TAIL_CALL(_JIT_CONTINUE);",
            "  int64_t r = ((jit_func *)&_JIT_CONTINUE)(frame, sp, ts);\n  return r + 1;",
        ),
    )
    .unwrap();
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
        err.contains("stencil `op_arith_add_1`") && err.contains("without musttail"),
        "{err}"
    );
    assert!(!err.contains("stencil `arith`"), "{err}");
    assert!(!err.contains("stencil `_JIT_ENTRY`"), "{err}");
}
