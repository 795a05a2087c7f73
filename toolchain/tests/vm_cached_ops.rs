//! The reference VM's register-cached ops (`vm/templates/cached/ops.c`, families `vm_*`), a
//! real client's set used as a fixture:
//! a member expands only its own op of `ops.def` (the families' `list_flag`), so a body
//! that does not even compile in another op leaves it alone, and the two ways a body can be
//! wrong for caching are still refused naming the member: a body that does not end in the
//! member's exit state (`cached_op_ends_in_a_state_other_than_OUT`) and one that uses `sp`,
//! the memory stack. Built from a copy of the VM's templates with one op added.

use crate::common;

use common::{copy_dir, first_target, options, workspace};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use std::path::Path;

/// An op whose body clang rejects: parsing it in any member would fail that member.
const BROKEN_OP: &str = "\nOP(BROKEN, \"\", 0, 0, { this body does not compile; })\n";

const MANIFEST: &str = r#"
name = "vm_cached_ops"
sources = ["plain.c"]
include_dirs = ["include"]
cflags = ["-O2"]
allowed_symbols = ["vm_*"]

[stencils]
functions = "op_*"

[[family]]
name = "binary"
source = "vm/cached/ops.c"
stencil = "op_{elem}_cached_{IN}_{OUT}"
cached = { entry = "IN", exit = "OUT", pop = 2, push = 1 }
list = ["ADD_INT", "GETITEM_LIST_INT"]
list_define = "VM_OP"
list_flag = "VM_OP_IS_"

[family.params]
IN = "0..=3"
OUT = "0..=3"
"#;

/// Families that must fail, one member each.
const BAD_FAMILIES: &str = r#"
# GUARD_TRUE pops one value, but is declared as keeping the state: it ends in 1, not 2.
[[family]]
name = "wrong_state"
source = "vm/cached/ops.c"
stencil = "op_{elem}_cached_{IN}_{OUT}"
cached = { entry = "IN", exit = "OUT", pop = 0, push = 0 }
list = ["GUARD_TRUE"]
list_define = "VM_OP"
list_flag = "VM_OP_IS_"

[family.params]
IN = [2]
OUT = "0..=3"

# STORE_GLOBAL works on `sp` directly.
[[family]]
name = "uses_sp"
source = "vm/cached/ops.c"
stencil = "op_{elem}_cached_{IN}_{OUT}"
cached = { entry = "IN", exit = "OUT", pop = 1, push = 0 }
list = ["STORE_GLOBAL"]
list_define = "VM_OP"
list_flag = "VM_OP_IS_"

[family.params]
IN = [1]
OUT = "0..=3"

# The op that does not compile, as a member of its own.
[[family]]
name = "broken"
source = "vm/cached/ops.c"
stencil = "op_{elem}_cached_{IN}_{OUT}"
cached = { entry = "IN", exit = "OUT", pop = 0, push = 0 }
list = ["BROKEN"]
list_define = "VM_OP"
list_flag = "VM_OP_IS_"

[family.params]
IN = [1]
OUT = "0..=3"
"#;

/// A template set in `dir`: the VM's templates (`vm/templates/` as `vm/`) and the kit's
/// header, BROKEN appended to ops.def, `manifest`.
fn vm_set(dir: &Path, manifest: &str) {
    copy_dir(&workspace().join("templates/include"), &dir.join("include"));
    copy_dir(&workspace().join("vm/templates"), &dir.join("vm"));
    // Its ops here, not a nested set of its own.
    std::fs::remove_file(dir.join("vm/manifest.toml")).unwrap();
    let ops = dir.join("vm/ops.def");
    let text = std::fs::read_to_string(&ops).unwrap() + BROKEN_OP;
    std::fs::write(&ops, text).unwrap();
    std::fs::write(
        dir.join("plain.c"),
        "#include \"cpjit.h\"\nCPJIT_CC int64_t op_nothing(struct cpjit_frame *frame, \
         uint64_t *sp) {\n  CPJIT_CONTINUE(frame, sp);\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
}

#[test]
fn a_cached_vm_member_compiles_only_its_own_op() {
    let triple = first_target();
    let set = tempfile::tempdir().unwrap();
    vm_set(set.path(), MANIFEST);
    let out = tempfile::tempdir().unwrap();
    driver::build_stencils(&options(
        set.path().to_path_buf(),
        &[&triple],
        out.path(),
        Cache::disabled(),
    ))
    .unwrap_or_else(|e| panic!("{triple}: the members must build beside BROKEN: {}", e.0));
    let lib = std::fs::read_to_string(out.path().join(&triple).join("src/lib.rs")).unwrap();
    for member in [
        "op_ADD_INT_cached_0_1",
        "op_ADD_INT_cached_3_2",
        "op_GETITEM_LIST_INT_cached_2_1",
    ] {
        assert!(
            lib.contains(&format!("pub const {member}: Stencil")),
            "{triple}: {member} missing"
        );
    }
}

#[test]
fn a_cached_vm_member_with_a_wrong_body_is_refused_naming_it() {
    let triple = first_target();
    let set = tempfile::tempdir().unwrap();
    vm_set(set.path(), &format!("{MANIFEST}{BAD_FAMILIES}"));
    let out = tempfile::tempdir().unwrap();
    let err = driver::build_stencils(&options(
        set.path().to_path_buf(),
        &[&triple],
        out.path(),
        Cache::disabled(),
    ))
    .expect_err("the set must be rejected")
    .0;
    let member = |name: &str| format!("{triple}: vm/cached/ops.c (family member {name})");
    for (name, says) in [
        (
            "op_GUARD_TRUE_cached_2_2",
            "references `cached_op_ends_in_a_state_other_than_OUT`, which is neither a hole",
        ),
        (
            "op_STORE_GLOBAL_cached_1_0",
            "references `sp`, which is neither a hole",
        ),
    ] {
        let want = format!("{}: stencil `{name}`: {says}", member(name));
        assert!(err.contains(&want), "missing `{want}` in:\n{err}");
    }
    // BROKEN's own member fails in clang, at its body; no other member does.
    assert!(
        err.contains("op_BROKEN_cached_1_1") && err.contains("this body does not compile"),
        "BROKEN's member must fail in clang:\n{err}"
    );
    for good in ["op_ADD_INT", "op_GETITEM_LIST_INT", "op_nothing"] {
        assert!(!err.contains(good), "{good} must build:\n{err}");
    }
}
