//! Ops that return a pointer (`T *op(frame, sp)`, as real interpreters' templates declare
//! them) build on every target: the exit status comes back in the return register, so any
//! register-sized return is the set's ABI; a narrower one is still refused.

use crate::common::{all_targets, build_uncached, compiled_targets, options};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;

/// Holes declared by hand with the ops' own type (cpjit.h's are `int64_t` functions).
const POINTER_OPS: &str = "#include <stdint.h>\n\
    #if defined(__riscv)\n#define P_CC\n#else\n#define P_CC __attribute__((preserve_none))\n#endif\n\
    struct cpjit_frame;\n\
    typedef P_CC uint64_t *pointer_op(struct cpjit_frame *frame, uint64_t *sp);\n\
    extern pointer_op _JIT_CONTINUE;\n\
    extern pointer_op _JIT_DONE_TARGET;\n\
    P_CC uint64_t *op_ptr_inc(struct cpjit_frame *frame, uint64_t *sp) {\n\
    \x20 sp[-1] += 1;\n\
    \x20 __attribute__((musttail)) return _JIT_CONTINUE(frame, sp);\n\
    }\n\
    P_CC uint64_t *op_ptr_exit(struct cpjit_frame *frame, uint64_t *sp) {\n\
    \x20 if (sp[-1] == 0) { __attribute__((musttail)) return _JIT_DONE_TARGET(frame, sp); }\n\
    \x20 return sp;\n\
    }\n\
    uint64_t *pointer_entry(struct cpjit_frame *frame, uint64_t *sp) {\n\
    \x20 return _JIT_CONTINUE(frame, sp);\n\
    }\n";

/// Builds a set of `ops.c` = `source` on `triples`.
fn build(source: &str, triples: &[&str]) -> Result<driver::Report, String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ops.c"), source).unwrap();
    std::fs::write(
        dir.path().join("manifest.toml"),
        "name = \"returns\"\nsources = [\"ops.c\"]\ncflags = [\"-O2\"]\n\
         [stencils]\nfunctions = \"*_*\"\nshim = \"pointer_entry\"\n",
    )
    .unwrap();
    build_uncached(dir.path(), triples)
}

/// `report` has every one of `triples` built with the set's three stencils.
fn every_target_built_three(report: &driver::Report, triples: &[String]) {
    for triple in triples {
        assert!(
            report
                .lines
                .iter()
                .any(|l| l.starts_with(&format!("{triple}: 3 stencils,"))),
            "{triple}: {:?}",
            report.lines
        );
    }
}

#[test]
fn ops_returning_a_pointer_build_on_every_target() {
    let triples = all_targets();
    let refs: Vec<&str> = triples.iter().map(String::as_str).collect();
    let report = build(POINTER_OPS, &refs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.built.len(), triples.len(), "{:?}", report.lines);
    every_target_built_three(&report, &triples);
}

#[test]
fn a_return_narrower_than_a_register_is_refused() {
    let narrow = format!(
        "{POINTER_OPS}P_CC int32_t op_ptr_narrow(struct cpjit_frame *frame, uint64_t *sp) {{\n\
         \x20 return (int32_t)sp[-1];\n}}\n"
    );
    let triples = all_targets();
    let err = build(&narrow, &[&triples[0]]).unwrap_err();
    assert!(
        err.contains("stencil `op_ptr_narrow`: signature is `i32 (ptr, ptr)` but the set's ABI requires `i64 (ptr, ptr)` (or any register-sized return: `ptr`, `i64`)"),
        "{err}"
    );
}

/// Writes the set of [`POINTER_OPS`] split one op per unit: a guarded header `ptr.h`
/// (the convention, the holes) and a header without include guard `shared.h` (a struct
/// and an inline helper: a redefinition when a unit parses it twice), which every unit
/// includes; the manifest batches the units three per clang run and precompiles
/// `precompiled`.
fn write_batched_pointer_set(dir: &std::path::Path, precompiled: &str) {
    let files = [
        (
            "include/ptr.h",
            "#ifndef PTR_H\n#define PTR_H\n#include <stdint.h>\n\
             #if defined(__riscv)\n#define P_CC\n#else\n\
             #define P_CC __attribute__((preserve_none))\n#endif\n\
             struct cpjit_frame;\n\
             typedef P_CC uint64_t *pointer_op(struct cpjit_frame *frame, uint64_t *sp);\n\
             extern pointer_op _JIT_CONTINUE;\n#endif\n",
        ),
        (
            "include/shared.h",
            "/* No include guard. */\n#include \"ptr.h\"\n\
             struct ptr_pair { uint64_t *a, *b; };\n\
             static inline uint64_t *ptr_top(uint64_t *sp) { return sp - 1; }\n",
        ),
        (
            "shim.c",
            "#include \"shared.h\"\n\
             uint64_t *_JIT_ENTRY(struct cpjit_frame *frame, uint64_t *sp) {\n\
             \x20 return _JIT_CONTINUE(frame, sp);\n}\n",
        ),
        (
            "ops/op_ptr_inc.c",
            "#include \"shared.h\"\n\
             P_CC uint64_t *_JIT_ENTRY(struct cpjit_frame *frame, uint64_t *sp) {\n\
             \x20 *ptr_top(sp) += 1;\n\
             \x20 __attribute__((musttail)) return _JIT_CONTINUE(frame, sp);\n}\n",
        ),
        (
            "ops/op_ptr_exit.c",
            "#include \"shared.h\"\nextern pointer_op _JIT_DONE_TARGET;\n\
             P_CC uint64_t *_JIT_ENTRY(struct cpjit_frame *frame, uint64_t *sp) {\n\
             \x20 if (*ptr_top(sp) == 0) {\n\
             \x20   __attribute__((musttail)) return _JIT_DONE_TARGET(frame, sp);\n\x20 }\n\
             \x20 return sp;\n}\n",
        ),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::write(
        dir.join("manifest.toml"),
        format!(
            "name = \"returns_batched\"\nsources = [\"shim.c\", \"ops/*.c\"]\n\
             include_dirs = [\"include\"]\nprecompiled_header = \"{precompiled}\"\n\
             cflags = [\"-O2\"]\nhole_prefix = \"_JIT_\"\n[stencils]\n\
             translation_unit_entry = \"_JIT_ENTRY\"\nshim = \"shim\"\nbatch_size = 3\n"
        ),
    )
    .unwrap();
}

/// Issue 41's set as real interpreters write it, all at once: ops returning a pointer, a
/// shared header without include guard, a precompiled header, units batched three per
/// clang run; it builds on every target, as one batch each (one bitcode entry per target
/// compiled, no unit-by-unit fallback).
#[test]
fn pointer_ops_with_an_unguarded_shared_header_build_batched_with_a_pch_on_every_target() {
    let dir = tempfile::tempdir().unwrap();
    write_batched_pointer_set(dir.path(), "include/ptr.h");
    let triples = all_targets();
    let refs: Vec<&str> = triples.iter().map(String::as_str).collect();
    let (out, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let report = driver::build_stencils(&options(
        dir.path().to_path_buf(),
        &refs,
        out.path(),
        Cache::new(cache.path().to_path_buf()),
    ))
    .unwrap_or_else(|e| panic!("{}", e.0));
    every_target_built_three(&report, &triples);
    let bitcode = walk(cache.path())
        .into_iter()
        .filter(|name| name.starts_with("bc2-"))
        .count();
    // A target whose code is its twin's (`same_code_as`) is compiled with it.
    assert_eq!(
        bitcode,
        compiled_targets().len(),
        "one batch per target compiled"
    );
}

/// The unguarded header as the precompiled header itself: every unit that also includes
/// it defines its contents twice, which clang reports as redefinitions; the kit adds the
/// fix (a guard), naming the header.
#[test]
fn an_unguarded_precompiled_header_is_answered_with_the_guard_to_add() {
    let dir = tempfile::tempdir().unwrap();
    write_batched_pointer_set(dir.path(), "include/shared.h");
    let triples = all_targets();
    let out = tempfile::tempdir().unwrap();
    let err = driver::build_stencils(&options(
        dir.path().to_path_buf(),
        &[&triples[0]],
        out.path(),
        Cache::disabled(),
    ))
    .expect_err("the unguarded precompiled header is read twice")
    .0;
    assert!(
        err.contains("shared.h` has no include guard and this unit reads it twice")
            && err.contains("fix: add `#pragma once`"),
        "{err}"
    );
}

/// The file names under `dir`, recursively.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            names.extend(walk(&path));
        } else {
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    names
}
