//! Ops that return a pointer (`T *op(frame, sp)`, as real interpreters' templates declare
//! them) build on every target: the exit status comes back in the return register, so any
//! register-sized return is the set's ABI; a narrower one is still refused.

use crate::common::{all_targets, options};
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
    let out = tempfile::tempdir().unwrap();
    driver::build_stencils(&options(
        dir.path().to_path_buf(),
        triples,
        out.path(),
        Cache::disabled(),
    ))
    .map_err(|e| e.0)
}

#[test]
fn ops_returning_a_pointer_build_on_every_target() {
    let triples = all_targets();
    let refs: Vec<&str> = triples.iter().map(String::as_str).collect();
    let report = build(POINTER_OPS, &refs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.built.len(), triples.len(), "{:?}", report.lines);
    for triple in &triples {
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
