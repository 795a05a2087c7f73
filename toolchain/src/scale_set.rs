//! A generated template set in the style of a real interpreter's (CPython's `Tools/jit`):
//! one `_JIT_ENTRY` function per unit, every unit including one large internal header,
//! holes declared as data (`extern char _JIT_OPARG[]`, `extern void _JIT_CONTINUE`) and
//! reached by tail calls through their addresses, three-argument ops and a three-argument
//! entry shim (`shim.c`). The toolchain tests build a small one for every target; the bench
//! builds a full-size one (hundreds of ops, a header of tens of thousands of lines) against
//! one clang run per op. Generated rather than committed: the size is a parameter.
//!
//! The header's inline functions compare through a macro (`SAME(a, b)` is `((a) == (b))`),
//! which clang only accepts silently while it sees the macro: compiling preprocessed text
//! instead warns (`-Wparentheses-equality`) once per use.

use std::fmt::Write as _;
use std::path::Path;

/// The size of a generated set.
#[derive(Debug, Clone, Copy)]
pub struct ScaleSet {
    /// Op units (`ops/op_NNNN.c`), besides the shim.
    pub ops: usize,
    /// At least this many lines in `include/scale.h`.
    pub header_lines: usize,
    /// `[stencils] batch_size` (units per clang run); `None`: one clang run per unit.
    pub batch_size: Option<usize>,
}

/// Lines one object kind adds to the header (see [`header`]).
const LINES_PER_KIND: usize = 17;

impl ScaleSet {
    /// Writes the set (manifest, header, shim, ops) into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir.join("include"))?;
        std::fs::create_dir_all(dir.join("ops"))?;
        let mut manifest = String::from(MANIFEST);
        if let Some(size) = self.batch_size {
            manifest.push_str(&format!("batch_size = {size}\n"));
        }
        std::fs::write(dir.join("manifest.toml"), manifest)?;
        std::fs::write(dir.join("shim.c"), SHIM)?;
        let kinds = self.kinds();
        std::fs::write(dir.join("include/scale.h"), header(kinds))?;
        for k in 0..self.ops {
            std::fs::write(dir.join(format!("ops/{}.c", op_name(k))), op(k, kinds))?;
        }
        Ok(())
    }

    /// Writes the same ops as one family over one template (`ops.c`, the way CPython's
    /// `Tools/jit` compiles its one template once per opcode): the shim is the set's one
    /// unit, each op a member `op_NNNN` whose `-DJIT_OP_IS_op_NNNN=1` selects its code; the
    /// stencils are the same names as [`ScaleSet::write`]'s, and `batch_size` batches the
    /// members.
    pub fn write_family(&self, dir: &Path) -> std::io::Result<()> {
        self.write_common(dir)?;
        let mut manifest = MANIFEST.replace(
            "sources = [\"shim.c\", \"ops/*.c\"]",
            "sources = [\"shim.c\"]",
        );
        if let Some(size) = self.batch_size {
            manifest.push_str(&format!("batch_size = {size}\n"));
        }
        let names: Vec<String> = (0..self.ops)
            .map(|k| format!("\"{}\"", op_name(k)))
            .collect();
        manifest.push_str(&format!(
            "\n[[family]]\nname = \"ops\"\nsource = \"ops.c\"\nstencil = \"{{elem}}\"\n\
             list_define = \"JIT_OP\"\nlist_flag = \"JIT_OP_IS_\"\nlist = [{}]\n",
            names.join(", ")
        ));
        std::fs::write(dir.join("manifest.toml"), manifest)?;
        let kinds = self.kinds();
        let mut template = String::from(OP_PRELUDE);
        for k in 0..self.ops {
            let keyword = if k == 0 { "#if" } else { "#elif" };
            template.push_str(&format!(
                "{keyword} defined(JIT_OP_IS_{})\n{}",
                op_name(k),
                op_function(k, kinds)
            ));
        }
        template.push_str("#endif\n");
        std::fs::write(dir.join("ops.c"), template)
    }

    /// The header and the shim, which both forms share.
    fn write_common(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir.join("include"))?;
        std::fs::write(dir.join("shim.c"), SHIM)?;
        std::fs::write(dir.join("include/scale.h"), header(self.kinds()))
    }

    /// Cuts `include/scale.h` of the set in `dir` into a chain of `parts` headers, as a
    /// real interpreter's internal headers are: `scale.h` keeps the conventions and
    /// includes `scale_1.h`, which includes `scale_2.h`, and so on, each with its guard and
    /// its share of the object kinds.
    pub fn chain_header(dir: &Path, parts: usize) -> std::io::Result<()> {
        let path = dir.join("include/scale.h");
        let text = std::fs::read_to_string(&path)?;
        let (head, kinds) = text.split_once("\n/* Object kind ").unwrap_or((&text, ""));
        let kinds = kinds.strip_suffix(HEADER_END).unwrap_or(kinds);
        let blocks: Vec<String> = kinds
            .split("\n/* Object kind ")
            .filter(|b| !b.is_empty())
            .map(|b| format!("\n/* Object kind {b}"))
            .collect();
        let per_part = blocks.len().div_ceil(parts.max(1)).max(1);
        let chunks: Vec<&[String]> = blocks.chunks(per_part).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let next = if i + 1 < chunks.len() {
                format!("#include \"scale_{}.h\"\n", i + 2)
            } else {
                String::new()
            };
            let guard = format!("SCALE_{}_H", i + 1);
            std::fs::write(
                dir.join(format!("include/scale_{}.h", i + 1)),
                format!(
                    "/* Part {} of the scale set's header chain. */\n#ifndef {guard}\n\
                     #define {guard}\n{}\n{next}#endif\n",
                    i + 1,
                    chunk.concat()
                ),
            )?;
        }
        std::fs::write(
            path,
            format!("{head}\n#include \"scale_1.h\"\n{HEADER_END}"),
        )
    }

    /// How many object kinds the header declares.
    pub fn kinds(&self) -> usize {
        self.header_lines.div_ceil(LINES_PER_KIND).max(1)
    }
}

/// The stencil name of op `k` (its unit's file stem).
/// A family template in the set's style, for tests of families of one-function-per-unit
/// sets: the member's defines `ELEM` (`add` or `sub`) and `N` (a shift) choose the operation.
pub const FAMILY_TEMPLATE: &str = r#"/* Family template: ELEM and N come from the member's defines. */
#include "scale.h"

JIT_HOLE char _JIT_OPARG[];
extern void _JIT_CONTINUE;

#define APPLY_add(a, b) ((a) + (b))
#define APPLY_sub(a, b) ((a) - (b))
#define CAT(a, b) a##b
#define APPLY(op, a, b) CAT(APPLY_, op)(a, b)

JIT_CC int64_t _JIT_ENTRY(frame_t *frame, int64_t *sp, thread_t *ts) {
  sp[-1] = APPLY(ELEM, sp[-1], (int64_t)(uintptr_t)_JIT_OPARG) << N;
  TAIL_CALL(_JIT_CONTINUE);
}
"#;

pub fn op_name(k: usize) -> String {
    format!("op_{k:04}")
}

const MANIFEST: &str = r#"# Generated by cpjit_toolchain::scale_set: a set in the style of CPython's templates.
name = "scale"
sources = ["shim.c", "ops/*.c"]
include_dirs = ["include"]
precompiled_header = "include/scale.h"
cflags = ["-O2"]
hole_prefix = "_JIT_"

[stencils]
translation_unit_entry = "_JIT_ENTRY"
shim = "shim"
parameters = 3
"#;

const SHIM: &str = r#"/* The entry shim: the C convention in, the ops' convention out; not a tail call (the
 * trace returns here). Three arguments: frame, stack pointer, thread state. */
#include "scale.h"

extern void _JIT_CONTINUE;

int64_t _JIT_ENTRY(frame_t *frame, int64_t *sp, thread_t *ts) {
  return ((jit_func *)&_JIT_CONTINUE)(frame, sp, ts);
}
"#;

/// The large shared header: conventions first, then `kinds` object kinds, each a struct,
/// an enum, field macros, two inline functions and an external helper.
fn header(kinds: usize) -> String {
    let mut h = String::from(
        r#"/* scale.h: the shared internal header of the generated scale set. */
#ifndef SCALE_H
#define SCALE_H
#include <stddef.h>
#include <stdint.h>

#if defined(__riscv)
#define JIT_CC
#else
#define JIT_CC __attribute__((preserve_none))
#endif
#if defined(CPJIT_DLLIMPORT_HOLES)
#define JIT_HOLE extern __declspec(dllimport)
#else
#define JIT_HOLE extern
#endif

typedef struct frame frame_t;
typedef struct thread thread_t;
typedef JIT_CC int64_t jit_func(frame_t *frame, int64_t *sp, thread_t *ts);

#define SAME(a, b) ((a) == (b))
#define TAIL_CALL(hole) __attribute__((musttail)) return ((jit_func *)&(hole))(frame, sp, ts)
"#,
    );
    for i in 0..kinds {
        let _ = write!(
            h,
            r#"
/* Object kind {i}. */
typedef struct obj{i} {{ int64_t refcnt; struct obj{i} *next; int64_t value; int64_t tag; }} obj{i}_t;
enum obj{i}_kind {{ OBJ{i}_SMALL, OBJ{i}_LARGE, OBJ{i}_OTHER }};
#define OBJ{i}_VALUE(o) ((o)->value)
#define OBJ{i}_IS(o, t) SAME((o)->tag, (t))
static inline int64_t obj{i}_sum(obj{i}_t *o) {{
  int64_t s = 0;
  for (obj{i}_t *p = o; p != NULL; p = p->next) {{
    s += OBJ{i}_VALUE(p) * {m};
  }}
  return s;
}}
static inline void obj{i}_set(obj{i}_t *o, int64_t v) {{
  if (SAME(o->value, v)) return;
  o->value = v;
}}
extern int64_t obj{i}_helper(obj{i}_t *o, int64_t x);
"#,
            m = i % 7 + 1
        );
    }
    h.push_str(HEADER_END);
    h
}

/// The header's last lines.
const HEADER_END: &str = "\n#endif /* SCALE_H */\n";

/// What every op's unit (and the family template) declares before its function.
const OP_PRELUDE: &str = r#"#include "scale.h"

JIT_HOLE char _JIT_OPARG[];
extern void _JIT_CONTINUE;
extern void _JIT_EXIT_TARGET;

"#;

/// Op `k`: reads an object of one kind from the stack, exits through `_JIT_EXIT_TARGET`
/// if it is NULL, else pushes its sum plus the operand and continues.
fn op(k: usize, kinds: usize) -> String {
    let i = k * 37 % kinds;
    format!(
        "/* Generated op {k} (object kind {i}). */\n{OP_PRELUDE}{}",
        op_function(k, kinds)
    )
}

/// Op `k`'s function (see [`op`]).
fn op_function(k: usize, kinds: usize) -> String {
    let i = k * 37 % kinds;
    format!(
        r#"JIT_CC int64_t _JIT_ENTRY(frame_t *frame, int64_t *sp, thread_t *ts) {{
  obj{i}_t *o = (obj{i}_t *)(uintptr_t)sp[-1];
  if (SAME(o, NULL)) {{
    TAIL_CALL(_JIT_EXIT_TARGET);
  }}
  obj{i}_set(o, {k});
  sp[-1] = obj{i}_sum(o) + (int64_t)(uintptr_t)_JIT_OPARG;
  TAIL_CALL(_JIT_CONTINUE);
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_has_the_requested_size_and_ops_their_units() {
        let dir = tempfile::tempdir().unwrap();
        let set = ScaleSet {
            ops: 3,
            header_lines: 20_000,
            batch_size: Some(2),
        };
        set.write(dir.path()).unwrap();
        let header = std::fs::read_to_string(dir.path().join("include/scale.h")).unwrap();
        assert!(header.lines().count() >= 20_000);
        let ops: Vec<_> = std::fs::read_dir(dir.path().join("ops")).unwrap().collect();
        assert_eq!(ops.len(), 3);
        let op = std::fs::read_to_string(dir.path().join("ops/op_0002.c")).unwrap();
        assert!(op.contains("extern void _JIT_CONTINUE;") && op.contains("_JIT_ENTRY"));
        let manifest = std::fs::read_to_string(dir.path().join("manifest.toml")).unwrap();
        assert!(
            manifest.ends_with("parameters = 3\nbatch_size = 2\n"),
            "{manifest}"
        );
    }

    #[test]
    fn the_family_form_selects_each_op_by_its_flag_and_the_chain_keeps_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let set = ScaleSet {
            ops: 3,
            header_lines: 20_000,
            batch_size: Some(2),
        };
        set.write_family(dir.path()).unwrap();
        let whole = std::fs::read_to_string(dir.path().join("include/scale.h")).unwrap();
        ScaleSet::chain_header(dir.path(), 4).unwrap();
        let chain: Vec<String> = [
            "scale.h",
            "scale_1.h",
            "scale_2.h",
            "scale_3.h",
            "scale_4.h",
        ]
        .iter()
        .map(|f| std::fs::read_to_string(dir.path().join("include").join(f)).unwrap())
        .collect();
        assert!(!dir.path().join("include/scale_5.h").exists());
        assert!(chain.iter().map(|t| t.lines().count()).sum::<usize>() >= 20_000);
        for kind in ["obj0_sum", &format!("obj{}_helper", set.kinds() - 1)] {
            assert!(
                !whole.is_empty() && chain.iter().any(|t| t.contains(kind)),
                "{kind}"
            );
        }
        assert!(chain[0].contains("#include \"scale_1.h\"") && chain[0].ends_with(HEADER_END));
        assert!(chain[1].contains("#include \"scale_2.h\""));
        let template = std::fs::read_to_string(dir.path().join("ops.c")).unwrap();
        assert!(template.contains("#if defined(JIT_OP_IS_op_0000)\nJIT_CC int64_t _JIT_ENTRY"));
        assert!(template.contains("#elif defined(JIT_OP_IS_op_0002)"));
        let manifest = std::fs::read_to_string(dir.path().join("manifest.toml")).unwrap();
        assert!(
            manifest.contains("sources = [\"shim.c\"]")
                && manifest.contains("batch_size = 2\n\n[[family]]")
                && manifest.contains("list = [\"op_0000\", \"op_0001\", \"op_0002\"]"),
            "{manifest}"
        );
    }
}
