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
    let err = build_error(set.path(), &triple);
    assert!(
        err.contains("stencil `op_arith_add_1`") && err.contains("without musttail"),
        "{err}"
    );
    assert!(!err.contains("stencil `arith`"), "{err}");
    assert!(!err.contains("stencil `_JIT_ENTRY`"), "{err}");
}

/// A family template that names itself (`__func__`), shares string literals between members
/// and keeps many values live, for the batched-members test.
const RICH_TEMPLATE: &str = r#"/* Family template: ELEM and N come from the member's defines. */
#include "scale.h"

JIT_HOLE char _JIT_OPARG[];
extern void _JIT_CONTINUE;
extern _Noreturn void scale_fatal(const char *where, const char *what);
extern void scale_note(const char *what);

#define APPLY_add(a, b) ((a) + (b))
#define APPLY_sub(a, b) ((a) - (b))
#define APPLY_xor(a, b) ((a) ^ (b))
#define CAT(a, b) a##b
#define APPLY(op, a, b) CAT(APPLY_, op)(a, b)
#define STR2(x) #x
#define STR(x) STR2(x)

JIT_CC int64_t _JIT_ENTRY(frame_t *frame, int64_t *sp, thread_t *ts) {
  scale_note("member " STR(ELEM) " " STR(N));
  if (sp[-1] < 0) scale_fatal(__func__, "negative operand");
  int64_t a = sp[-1], b = sp[-2], c = sp[-3], d = sp[-4], e = sp[-5], f = sp[-6];
  for (int i = 0; i < N; i++) {
    a = APPLY(ELEM, a * b, c >> 1);
    b = APPLY(ELEM, b * c, d >> 2);
    c = APPLY(ELEM, c * d, e >> 3);
    d = APPLY(ELEM, d * e, f >> 1);
    e = APPLY(ELEM, e * f, a >> 2);
    f = APPLY(ELEM, f * a, b >> 3);
  }
  scale_note("shared note");
  sp[-1] = APPLY(ELEM, a ^ b ^ c, d ^ e ^ f) + (int64_t)(uintptr_t)_JIT_OPARG;
  TAIL_CALL(_JIT_CONTINUE);
}
"#;

/// The set of [`write_set`] with [`RICH_TEMPLATE`] as a 3 x 3 family, members batched
/// `batch_size` at a time (and units too) or one clang run each.
fn write_rich_set(dir: &Path, batch_size: Option<usize>) {
    ScaleSet {
        ops: 2,
        header_lines: 200,
        batch_size,
    }
    .write(dir)
    .unwrap();
    std::fs::create_dir_all(dir.join("family")).unwrap();
    std::fs::write(dir.join("family/arith.c"), RICH_TEMPLATE).unwrap();
    let manifest = dir.join("manifest.toml");
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "hole_prefix = \"_JIT_\"\n",
        "hole_prefix = \"_JIT_\"\nallowed_symbols = [\"scale_*\"]\n",
    );
    let family = FAMILY
        .replace("[\"add\", \"sub\"]", "[\"add\", \"sub\", \"xor\"]")
        .replace("N = [1, 2]", "N = [1, 2, 3]");
    std::fs::write(&manifest, format!("{text}{family}")).unwrap();
}

#[test]
fn batched_family_members_give_what_each_alone_gives_on_every_target() {
    let (plain, batched) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_rich_set(plain.path(), None);
    write_rich_set(batched.path(), Some(4));
    let a = build_json(plain.path(), &[], Cache::disabled());
    let b = build_json(batched.path(), &[], Cache::disabled());
    assert_eq!(a.as_object().unwrap().len(), all_targets().len());
    for (triple, set) in a.as_object().unwrap() {
        // 2 ops, the shim and 9 members.
        assert_eq!(set["stencils"].as_array().unwrap().len(), 12, "{triple}");
        assert_eq!(set, &b[triple], "{triple}: batched and alone differ");
    }
    // Batched indeed: one bitcode entry per batch (the 3 units; 4 + 4 + 1 members).
    let cache = tempfile::tempdir().unwrap();
    let triple = first_target();
    build_json(
        batched.path(),
        &[&triple],
        Cache::new(cache.path().to_path_buf()),
    );
    let bitcode = cache_entries(cache.path(), "bc2-");
    assert_eq!(bitcode, 4);
}

#[test]
fn members_whose_header_names_their_defines_are_compiled_one_by_one() {
    let set = tempfile::tempdir().unwrap();
    write_rich_set(set.path(), Some(4));
    // The header reads `N` (a comment naming it would not count): parsed once for a batch,
    // it could read differently per member.
    let header = set.path().join("include/scale.h");
    let text = std::fs::read_to_string(&header).unwrap();
    std::fs::write(
        &header,
        text.replace(
            "#endif /* SCALE_H */",
            "#if defined(N)\n#define SCALE_SEES_N 1\n#endif\n#endif /* SCALE_H */",
        ),
    )
    .unwrap();
    let (out, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let triple = first_target();
    let opts = options(
        set.path().to_path_buf(),
        &[&triple],
        out.path(),
        Cache::new(cache.path().to_path_buf()),
    );
    driver::build_stencils(&opts).unwrap();
    let bitcode = cache_entries(cache.path(), "bc2-");
    // The units' batch, then each of the 9 members alone.
    assert_eq!(bitcode, 1 + 9);
    let lib = std::fs::read_to_string(out.path().join(&triple).join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub const op_arith_xor_3: usize"), "{lib}");
}
