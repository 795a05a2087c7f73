//! The kit's own fix for template mistakes that another tool reports in its own words.
//!
//! Clang sees only C: an op without `CPJIT_CC` that continues is "an incompatible calling
//! convention" of a tail call, and `CPJIT_OPERAND(X)` without `CPJIT_DECLARE_OPERAND(X)` is
//! an undeclared identifier (for which clang may even suggest `_JIT_CONTINUE`). These
//! functions recognise such diagnostics by their text and the `cpjit.h` macro they were
//! expanded from, and give one `cpjit:` line per mistake saying what to change. The
//! object and IR checks use [`symbol_fix`] for the library calls compilers introduce.

/// The prefix of every line of advice appended to another tool's output.
pub const PREFIX: &str = "cpjit: ";

/// The hole prefix of `cpjit.h`'s macros (`CPJIT_OPERAND(X)` names `_JIT_X`).
const HEADER_PREFIX: &str = "_JIT_";

/// One line of advice per mistake clang's `stderr` reports that the kit knows the fix of
/// (empty when none), each starting with [`PREFIX`] and the diagnostic's location.
pub fn for_clang(stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut advice = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((location, message)) = line.split_once(": error: ") else {
            continue;
        };
        // The notes that belong to this error: up to the next error or warning.
        let notes: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| !l.contains(": error: ") && !l.contains(": warning: "))
            .copied()
            .collect();
        let macros: Vec<&str> = notes.iter().filter_map(|n| expanded_from(n)).collect();
        let fix = explain(message, &macros).or_else(|| unguarded(message, &notes));
        if let Some(fix) = fix {
            let line = format!("{PREFIX}{location}: {fix}");
            if !advice.contains(&line) {
                advice.push(line);
            }
        }
    }
    advice
}

/// The macro a note `... note: expanded from macro 'NAME'` names.
fn expanded_from(note: &str) -> Option<&str> {
    note.split_once("note: expanded from macro '")?
        .1
        .split('\'')
        .next()
}

/// The fix for one clang error `message` whose location was expanded from `macros`
/// (innermost first), if the kit knows it.
fn explain(message: &str, macros: &[&str]) -> Option<String> {
    if let Some(callee) = quoted_after(message, "cannot perform a tail call to function '") {
        if message.contains("incompatible calling convention") {
            return Some(format!(
                "the function tail-calls `{callee}` (a musttail call: CPJIT_CONTINUE or \
                 CPJIT_JUMP), but is not declared with the hole's calling convention; fix: \
                 declare the op with CPJIT_CC, as in `CPJIT_CC int64_t op_name(struct \
                 cpjit_frame *frame, uint64_t *sp)` (a hand-declared hole type needs CPJIT_CC \
                 too)"
            ));
        }
        if message.contains("signature is incompatible") {
            return Some(format!(
                "the function tail-calls `{callee}`, whose type differs from the op's own \
                 (a musttail call needs the same parameters and return type); fix: give the \
                 op exactly the hole's signature (cpjit.h's cpjit_op: `int64_t \
                 op_name(struct cpjit_frame *frame, uint64_t *sp)`) and cast inside, or \
                 declare the hole with the op's type"
            ));
        }
    }
    let name = quoted_after(message, "use of undeclared identifier '")
        .or_else(|| quoted_after(message, "call to undeclared function '"))?;
    let hole = name.strip_prefix(HEADER_PREFIX)?;
    let from = |wanted: &[&str]| macros.iter().any(|m| wanted.contains(m));
    let suggestion = quoted_after(message, "did you mean '")
        .map(|s| format!(" (clang's suggestion `{s}` is another hole, not this one)"))
        .unwrap_or_default();
    let declaration = if from(&["CPJIT_JUMP", "CPJIT_JUMP_CACHED", "CPJIT_JUMP_SPILLED"]) {
        let target = hole.strip_suffix("_TARGET").unwrap_or(hole);
        format!("the jump target `{target}` is not declared; fix: add `CPJIT_DECLARE_TARGET({target});`")
    } else if from(&[
        "CPJIT_OPERAND_HI",
        "CPJIT_OPERAND_LO",
        "CPJIT_OPERAND_HALVES",
    ]) {
        let operand = crate::narrow::operand_half(hole).map_or(hole, |(name, _)| name);
        format!(
            "the halves of operand `{operand}` are not declared; fix: add \
             `CPJIT_DECLARE_OPERAND_HALVES({operand});`"
        )
    } else if from(&["CPJIT_NARROW"]) {
        format!(
            "the narrow operand `{hole}` is not declared; fix: add \
             `CPJIT_DECLARE_NARROW({hole}, RANGE);` with the range CPJIT_NARROW reads it as"
        )
    } else if from(&["CPJIT_OPERAND"]) {
        format!("the operand `{hole}` is not declared; fix: add `CPJIT_DECLARE_OPERAND({hole});`")
    } else if let Some(target) = hole.strip_suffix("_TARGET") {
        format!("the hole `{name}` is not declared; fix: add `CPJIT_DECLARE_TARGET({target});`")
    } else {
        format!("the hole `{name}` is not declared; fix: add `CPJIT_DECLARE_OPERAND({hole});`")
    };
    Some(format!(
        "{declaration} at file scope, before the first use{suggestion}"
    ))
}

/// The fix for a redefinition clang traces to a header without include guard read twice
/// by one unit: typically the set's `precompiled_header` (loaded before the unit) that the
/// unit also `#include`s, or a header included twice.
fn unguarded(message: &str, notes: &[&str]) -> Option<String> {
    if !message.starts_with("redefinition of") {
        return None;
    }
    let note = notes
        .iter()
        .find(|n| n.contains(": note: unguarded header"))?;
    let header = note.split_once(": note: ")?.0;
    let header = header.rsplitn(3, ':').nth(2).unwrap_or(header);
    Some(format!(
        "`{header}` has no include guard and this unit reads it twice (from the set's \
         `precompiled_header`, loaded before the unit, and from an `#include`, or from two \
         `#include`s), so its definitions are defined twice; fix: add `#pragma once` (or an \
         `#ifndef`/`#define` guard) to the header, or precompile a guarded header instead"
    ))
}

/// The text between `start` and the next `'` in `message`.
fn quoted_after<'a>(message: &'a str, start: &str) -> Option<&'a str> {
    let rest = message.split_once(start)?.1;
    rest.split_once('\'').map(|(quoted, _)| quoted)
}

/// The fix for a stencil that references `symbol`, which the set does not allow: for the
/// C library's memory functions, which compilers call for copies and fills by themselves
/// (`-fno-builtin` notwithstanding), how to allow or avoid them; for anything else, where
/// to allow it.
pub fn symbol_fix(symbol: &str) -> String {
    if matches!(symbol, "memcpy" | "memmove" | "memset" | "memcmp" | "bcmp") {
        format!(
            "fix: add `{symbol}` to allowed_symbols in manifest.toml (and resolve it to the C \
             library's `{symbol}` in your symbol resolver), or avoid the call: the compiler \
             emits it for a copy, fill or comparison it does not expand inline (a large struct \
             or array assignment or initialisation, a call in the source, a \
             __builtin_{symbol} of a variable or large size); use __builtin_{symbol} with a \
             small constant size, or work through a pointer instead of copying"
        )
    } else {
        format!(
            "fix: if `{symbol}` is a helper, add it (or a glob matching it) to allowed_symbols \
             in manifest.toml and resolve it at run time; if it is meant to be a hole, give it \
             the set's hole prefix"
        )
    }
}

/// Edits at most between a hole's name and a jump hole's for the name to be taken for a
/// misspelling of it (a transposed pair of letters is two).
pub const MISSPELT: usize = 2;

/// The jump-hole name nearest to `name` and its edit distance: one of `declared`, the
/// continuation, or `name` with its end made the target suffix (`_JIT_BACK_TARGTE` ->
/// `_JIT_BACK_TARGET`); on a tie, the latter (the hole's own name, its suffix mended).
pub fn nearest_jump_hole(
    name: &str,
    prefix: &str,
    suffix: &str,
    declared: &[String],
) -> (String, usize) {
    let rest = name.strip_prefix(prefix).unwrap_or(name);
    // Longest stem first: on a tie, keep as much of the name as it is.
    let with_suffix = (1..=rest.len())
        .rev()
        .filter(|&k| rest.is_char_boundary(k))
        .map(|k| format!("{prefix}{}{suffix}", &rest[..k]));
    with_suffix
        .chain(declared.iter().cloned())
        .chain(std::iter::once(format!("{prefix}CONTINUE")))
        .map(|candidate| {
            let distance = edit_distance(name, &candidate);
            (candidate, distance)
        })
        .min_by_key(|(_, distance)| *distance)
        .expect("the continuation is always a candidate")
}

/// Levenshtein distance of `a` and `b` (by character).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_misspelt_target_suffix_is_answered_with_the_nearest_jump_hole() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        let declared = ["_JIT_CONTINUE".to_string(), "_JIT_EXIT_TARGET".to_string()];
        let nearest = |name| nearest_jump_hole(name, "_JIT_", "_TARGET", &declared);
        assert_eq!(nearest("_JIT_BACK_TARGTE"), ("_JIT_BACK_TARGET".into(), 2));
        assert_eq!(nearest("_JIT_EXIT_TARGE"), ("_JIT_EXIT_TARGET".into(), 1));
        assert_eq!(nearest("_JIT_CONTINEU"), ("_JIT_CONTINUE".into(), 2));
        assert_eq!(nearest("_JIT_LOOP").0, "_JIT_LOOP_TARGET");
        // An operand jumped through (positions.c's op_test_operand_jump) is not a misspelling.
        assert!(nearest("_JIT_OPERAND0").1 > MISSPELT);
    }

    #[test]
    fn an_op_without_cpjit_cc_that_continues_is_told_to_add_it() {
        let stderr = "a.c:5:3: error: cannot perform a tail call to function '_JIT_CONTINUE' because it uses an incompatible calling convention\n\
                      /i/cpjit.h:175:50: note: expanded from macro 'CPJIT_CONTINUE'\n\
                      /i/cpjit.h:173:1: note: target function has calling convention preserve_none (expected cdecl)\n\
                      1 error generated.\n";
        let advice = for_clang(stderr);
        assert_eq!(advice.len(), 1, "{advice:?}");
        assert!(
            advice[0].starts_with("cpjit: a.c:5:3: the function tail-calls `_JIT_CONTINUE`")
                && advice[0].contains("fix: declare the op with CPJIT_CC"),
            "{advice:?}"
        );
    }

    #[test]
    fn undeclared_holes_are_told_their_declaration() {
        let stderr = "b.c:4:13: error: use of undeclared identifier '_JIT_CONTINU'; did you mean '_JIT_CONTINUE'?\n\
                      /i/cpjit.h:49:52: note: expanded from macro 'CPJIT_OPERAND'\n\
                      b.c:9:5: error: call to undeclared function '_JIT_LOOP_TARGET'; ISO C99 and later do not support implicit function declarations\n\
                      /i/cpjit.h:176:50: note: expanded from macro 'CPJIT_JUMP'\n\
                      b.c:12:5: error: use of undeclared identifier '_JIT_D'\n\
                      /i/cpjit.h:140:50: note: expanded from macro 'CPJIT_NARROW'\n\
                      b.c:13:5: error: use of undeclared identifier 'other'\n";
        let advice = for_clang(stderr);
        assert_eq!(advice.len(), 3, "{advice:?}");
        assert!(
            advice[0].contains("b.c:4:13: the operand `CONTINU` is not declared; fix: add `CPJIT_DECLARE_OPERAND(CONTINU);`")
                && advice[0].contains("clang's suggestion `_JIT_CONTINUE` is another hole"),
            "{advice:?}"
        );
        assert!(
            advice[1].contains("fix: add `CPJIT_DECLARE_TARGET(LOOP);`"),
            "{advice:?}"
        );
        assert!(
            advice[2].contains("fix: add `CPJIT_DECLARE_NARROW(D, RANGE);`"),
            "{advice:?}"
        );
    }

    #[test]
    fn every_declaration_and_signature_mistake_has_its_line() {
        let error = |message: &str, from: &str| {
            let stderr = format!(
                "u.c:3:5: error: {message}\n/i/cpjit.h:1:1: note: expanded from macro '{from}'\n"
            );
            let advice = for_clang(&stderr);
            assert_eq!(advice.len(), 1, "{advice:?}");
            advice[0].clone()
        };
        assert!(error(
            "cannot perform a tail call to function '_JIT_CONTINUE' because its signature is incompatible with the calling function",
            "CPJIT_CONTINUE"
        )
        .contains("fix: give the op exactly the hole's signature (cpjit.h's cpjit_op"));
        assert!(error("use of undeclared identifier '_JIT_V_HI'", "CPJIT_OPERAND_HI")
            .contains("the halves of operand `V` are not declared; fix: add `CPJIT_DECLARE_OPERAND_HALVES(V);`"));
        // Holes named without cpjit.h's macros: by their suffix.
        assert!(error("use of undeclared identifier '_JIT_EXIT_TARGET'", "OTHER")
            .contains("the hole `_JIT_EXIT_TARGET` is not declared; fix: add `CPJIT_DECLARE_TARGET(EXIT);`"));
        assert!(
            error("use of undeclared identifier '_JIT_ARG'", "OTHER").contains(
                "the hole `_JIT_ARG` is not declared; fix: add `CPJIT_DECLARE_OPERAND(ARG);`"
            )
        );
        assert!(for_clang("u.c:1:1: error: use of undeclared identifier 'x'\n").is_empty());
    }

    #[test]
    fn memory_functions_get_their_own_fix() {
        assert!(symbol_fix("memcpy").contains("add `memcpy` to allowed_symbols"));
        assert!(symbol_fix("memcpy").contains("__builtin_memcpy with a small constant size"));
        assert!(symbol_fix("helper").contains("add it (or a glob matching it) to allowed_symbols"));
    }
}
