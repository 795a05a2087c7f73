//! A family over an X-macro list of ops (the test set `listed_ops`: one `ops.def` of op
//! bodies expanded by one template, the layout of real interpreters and of the reference
//! VM's register-cached ops): with `list_flag`, a member expands only its own element, so a
//! body that does not even compile in another element leaves it alone, and a body that is
//! wrong in its own member is refused naming that member.

use crate::common;

use common::{first_target, options, set};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use std::path::Path;

/// Families that must fail, one member each.
const BAD_FAMILIES: &str = r#"
# The element that does not compile, as a member of its own.
[[family]]
name = "broken"
source = "ops.c"
stencil = "op_{elem}_{WIDTH}"
list = ["BROKEN"]
list_define = "OP_NAME"
list_flag = "OP_IS_"

[family.params]
WIDTH = [64]

# An element whose body references a symbol that is neither a hole nor allowed.
[[family]]
name = "undefined"
source = "ops.c"
stencil = "op_{elem}_{WIDTH}"
list = ["UNDEFINED"]
list_define = "OP_NAME"
list_flag = "OP_IS_"

[family.params]
WIDTH = [32]
"#;

/// A copy of the set in `dir` with `extra` appended to its manifest.
fn listed_set(dir: &Path, extra: &str) {
    let from = set("listed_ops");
    for file in ["ops.c", "ops.def", "plain.c"] {
        std::fs::copy(from.join(file), dir.join(file)).unwrap();
    }
    let manifest = std::fs::read_to_string(from.join("manifest.toml"))
        .unwrap()
        // The copy lives elsewhere: the kit's header by absolute path.
        .replace(
            "../../../../templates/include",
            &common::workspace()
                .join("templates/include")
                .display()
                .to_string(),
        );
    std::fs::write(dir.join("manifest.toml"), manifest + extra).unwrap();
}

#[test]
fn a_listed_member_compiles_only_its_own_element() {
    let triple = first_target();
    let out = tempfile::tempdir().unwrap();
    driver::build_stencils(&options(
        set("listed_ops"),
        &[&triple],
        out.path(),
        Cache::disabled(),
    ))
    .unwrap_or_else(|e| panic!("{triple}: the members must build beside BROKEN: {}", e.0));
    let lib = std::fs::read_to_string(out.path().join(&triple).join("src/lib.rs")).unwrap();
    for member in [
        "op_INC_32",
        "op_INC_64",
        "op_DOUBLE_64",
        "op_NEG_32",
        "op_nothing",
    ] {
        assert!(
            lib.contains(&format!("pub const {member}: Stencil")),
            "{triple}: {member} missing"
        );
    }
}

#[test]
fn a_listed_member_with_a_wrong_body_is_refused_naming_it() {
    let triple = first_target();
    let dir = tempfile::tempdir().unwrap();
    listed_set(dir.path(), BAD_FAMILIES);
    let err = common::build_error(dir.path(), &triple);
    let want = format!(
        "{triple}: ops.c (family member op_UNDEFINED_32): stencil `op_UNDEFINED_32`: \
         references `listed_ops_undefined_counter`, which is neither a hole"
    );
    assert!(err.contains(&want), "missing `{want}` in:\n{err}");
    // BROKEN's own member fails in clang, at its body; no other member does.
    assert!(
        err.contains("op_BROKEN_64") && err.contains("this body does not compile"),
        "BROKEN's member must fail in clang:\n{err}"
    );
    for good in ["op_INC", "op_DOUBLE", "op_NEG", "op_nothing"] {
        assert!(!err.contains(good), "{good} must build:\n{err}");
    }
}
