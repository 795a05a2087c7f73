//! Jump tables (issue 42): a `switch` compiled to a table of code offsets in data (with
//! `-fjump-tables`, which undoes the toolchain's `-fno-jump-tables`) is refused with advice
//! that works, on both COFF targets among others: the review's Windows build got
//! "compile with -ffunction-sections", which the in-process code generator never sees.
//! AArch64's tables (offsets from an `adr` in the code) need no relocation and build.

use crate::common::{build_uncached, target, write_set};
use cpjit_model::{Arch, ObjectFormat};

/// Two ops in one file (so that on COFF both share one `.text`, as in the review), the
/// first a switch of twelve different computations: a jump table when tables are allowed.
const OPS: &str = "#include \"cpjit.h\"\n\
CPJIT_CC int64_t op_switch(struct cpjit_frame *f, uint64_t *sp) {\n\
  uint64_t a = sp[-2], b = sp[-1];\n\
  switch (sp[-3]) {\n\
  case 0: a = a + b; break;\n\
  case 1: a = a - b; break;\n\
  case 2: a = a * b; break;\n\
  case 3: a = a & b; break;\n\
  case 4: a = a | b; break;\n\
  case 5: a = a ^ b; break;\n\
  case 6: a = a << (b & 63); break;\n\
  case 7: a = a >> (b & 63); break;\n\
  case 8: a = b ? a / b : 0; break;\n\
  case 9: a = b ? a % b : 0; break;\n\
  case 10: a = (int64_t)a >> (b & 63); break;\n\
  case 11: a = a < b; break;\n\
  default: a = 0;\n\
  }\n\
  sp[-3] = a;\n\
  CPJIT_CONTINUE(f, sp - 2);\n\
}\n\
CPJIT_CC int64_t op_drop(struct cpjit_frame *f, uint64_t *sp) {\n\
  CPJIT_CONTINUE(f, sp - 1);\n\
}\n";

/// Builds the set with `manifest_extra` appended to its manifest (after `cflags`).
fn build(triple: &str, manifest_extra: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    write_set(
        dir.path(),
        &[("ops.c", OPS)],
        &format!(
            "name = \"jump_tables\"\nsources = [\"*.c\"]\ninclude_dirs = [\"include\"]\n\
             cflags = [\"-O2\", \"-fjump-tables\"]\n[stencils]\nfunctions = \"op_*\"\n\
             {manifest_extra}"
        ),
    );
    build_uncached(dir.path(), &[triple]).map(|_| ())
}

#[test]
fn a_jump_table_is_refused_with_advice_that_works() {
    for (arch, format) in [
        (Arch::X86_64, ObjectFormat::Coff),
        (Arch::X86_64, ObjectFormat::Elf),
        (Arch::Riscv64, ObjectFormat::Elf),
    ] {
        let triple = target(arch, format);
        let err = build(&triple, "").expect_err("a jump table must be refused");
        assert!(
            err.contains("a jump table")
                && !err.contains("R_R_")
                && err.contains("op_switch")
                && err.contains("-fno-jump-tables")
                && !err.contains("-ffunction-sections"),
            "{triple}: {err}"
        );
        // The advice, followed: the flag appended for the target wins, and the set builds.
        let fix = format!("[target.{triple}]\ncflags = [\"-fno-jump-tables\"]\n");
        build(&triple, &fix).unwrap_or_else(|e| panic!("{triple}, advice followed: {e}"));
    }
}

#[test]
fn aarch64_jump_tables_need_no_relocation_and_build() {
    for format in [ObjectFormat::Coff, ObjectFormat::Elf] {
        let triple = target(Arch::Aarch64, format);
        build(&triple, "").unwrap_or_else(|e| panic!("{triple}: {e}"));
    }
}
