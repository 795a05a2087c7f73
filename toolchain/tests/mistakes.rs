//! Template mistakes answered with their fix: each test runs one mistake through the
//! toolchain (a set in a temporary directory, with `cpjit.h` as `cpjit header` writes it)
//! and checks that the error names the fix, not only what a compiler said about it.

use crate::common::{assert_says, build_uncached, target, workspace, write_set};
use cpjit_model::{Arch, ObjectFormat};

/// Builds a set of `sources` (file name, C text; `op_*` functions) for `triples` and
/// returns the error.
fn build_error(sources: &[(&str, &str)], triples: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_set(
        dir.path(),
        sources,
        "name = \"mistakes\"\nsources = [\"*.c\"]\ninclude_dirs = [\"include\"]\n\
         cflags = [\"-O2\"]\n[stencils]\nfunctions = \"op_*\"\n",
    );
    build_uncached(dir.path(), triples)
        .map(|_| ())
        .expect_err("the mistake must be refused")
}

fn x86_64_elf() -> String {
    target(Arch::X86_64, ObjectFormat::Elf)
}

#[test]
fn an_op_that_continues_without_cpjit_cc_is_told_to_add_it() {
    let ops = "#include \"cpjit.h\"\n\
               int64_t op_forgot_cc(struct cpjit_frame *f, uint64_t *sp) {\n\
               \x20 sp[-1] += 1;\n\
               \x20 CPJIT_CONTINUE(f, sp);\n\
               }\n";
    // Every target with preserve_none (RISC-V ops use the C convention, so there the op is
    // right as written).
    for triple in [x86_64_elf(), target(Arch::Aarch64, ObjectFormat::MachO)] {
        let err = build_error(&[("ops.c", ops)], &[&triple]);
        assert!(
            err.contains("incompatible calling convention"),
            "{triple}: clang's words stay: {err}"
        );
        let says = [
            "cpjit: ",
            "ops.c:4:",
            "tail-calls `_JIT_CONTINUE`",
            "fix: declare the op with CPJIT_CC",
        ];
        assert_says(&err, &says, &triple);
    }
}

#[test]
fn an_operand_used_without_its_declaration_is_told_to_declare_it() {
    // Clang suggests `_JIT_CONTINUE` for this one.
    let ops = "#include \"cpjit.h\"\n\
               CPJIT_CC int64_t op_add_slot(struct cpjit_frame *f, uint64_t *sp) {\n\
               \x20 sp[-1] += CPJIT_OPERAND(CONTINU);\n\
               \x20 CPJIT_CONTINUE(f, sp);\n\
               }\n";
    let err = build_error(&[("ops.c", ops)], &[&x86_64_elf()]);
    assert!(
        err.contains("use of undeclared identifier '_JIT_CONTINU'"),
        "{err}"
    );
    assert!(
        err.contains(
            "/ops.c:3:13: the operand `CONTINU` is not declared; fix: add \
             `CPJIT_DECLARE_OPERAND(CONTINU);` at file scope, before the first use \
             (clang's suggestion `_JIT_CONTINUE` is another hole, not this one)"
        ),
        "{err}"
    );
    assert!(err.contains("\ncpjit: /"), "a line of its own: {err}");
    let jump = "#include \"cpjit.h\"\n\
                CPJIT_CC int64_t op_back(struct cpjit_frame *f, uint64_t *sp) {\n\
                \x20 if (--sp[-1]) CPJIT_JUMP(LOOP, f, sp);\n\
                \x20 CPJIT_CONTINUE(f, sp);\n\
                }\n";
    let err = build_error(&[("ops.c", jump)], &[&x86_64_elf()]);
    assert!(
        err.contains("fix: add `CPJIT_DECLARE_TARGET(LOOP);`"),
        "{err}"
    );
}

#[test]
fn a_memcpy_the_compiler_introduced_is_answered_with_how_to_allow_or_avoid_it() {
    let ops = "#include \"cpjit.h\"\n\
               struct big { uint64_t v[1024]; };\n\
               CPJIT_CC int64_t op_copy(struct cpjit_frame *f, uint64_t *sp) {\n\
               \x20 *(struct big *)sp[-1] = *(struct big *)sp[-2];\n\
               \x20 CPJIT_CONTINUE(f, sp);\n\
               }\n";
    let err = build_error(&[("ops.c", ops)], &[&x86_64_elf()]);
    let says = [
        "references `memcpy`",
        "fix: add `memcpy` to allowed_symbols in manifest.toml",
        "use __builtin_memcpy with a small constant size",
    ];
    assert_says(&err, &says, "x86-64 ELF");
}

#[test]
fn a_tail_call_through_a_misspelt_target_is_refused_naming_the_target() {
    // A hand-declared target (as CPython's templates declare theirs) with its suffix
    // misspelt: without the check it became an operand.
    let ops = "#include \"cpjit.h\"\n\
               extern char _JIT_BACK_TARGTE;\n\
               CPJIT_CC int64_t op_loop(struct cpjit_frame *f, uint64_t *sp) {\n\
               \x20 if (--sp[-1]) { CPJIT_MUSTTAIL return ((cpjit_op *)&_JIT_BACK_TARGTE)(f, sp); }\n\
               \x20 CPJIT_CONTINUE(f, sp);\n\
               }\n";
    for triple in [x86_64_elf(), target(Arch::Aarch64, ObjectFormat::Coff)] {
        let err = build_error(&[("ops.c", ops)], &[&triple]);
        let says = [
            "stencil `op_loop`: tail-calls hole `_JIT_BACK_TARGTE`, which is neither",
            "but 2 edits from one",
            "did you mean `_JIT_BACK_TARGET`?",
            "fix: rename the hole `_JIT_BACK_TARGET`",
        ];
        assert_says(&err, &says, &triple);
    }
}

/// The kit's guide lists every message above in its error table (and the runtime's
/// refusals that answer a client's mistake with its fix).
#[test]
fn the_guide_lists_these_messages() {
    let guide = std::fs::read_to_string(workspace().join("templates/README.md")).unwrap();
    for message in [
        "fix: declare the op with CPJIT_CC",
        "fix: add `CPJIT_DECLARE_OPERAND(NAME);`",
        "fix: add `memcpy` to allowed_symbols",
        "tail-calls hole `_JIT_X`, which is neither the continuation",
        // cached_family.rs's stack effects, select.rs's unit tests of `prune`/`keep`.
        "declares the stack effect [p, q] ..., but its member",
        "`cached.keep` names members to compile although pruned, but `cached.prune` is not set",
        "matches no member",
        // returns.rs: an unguarded precompiled header.
        "has no include guard and this unit reads it twice",
        // The runtime's, tested in runtime/tests/errors.rs and execute.rs.
        "`Error::PrunedMember`",
        "`Error::NotAnEntry`",
        "`Error::UnboundLabel`",
        "`Error::Label`",
    ] {
        assert!(
            guide.contains(message),
            "templates/README.md lacks `{message}`"
        );
    }
}
