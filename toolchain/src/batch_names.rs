//! What a batch renames and restores around each unit that the unit's text does not say
//! outright (issue 43): in a set with `functions` naming, the name of the one function a
//! family member defines (the batch renames it apart, as `_JIT_ENTRY` in a set with one
//! entry per unit), and in any batch, the macros a unit's template defines or undefines.
//!
//! A `functions` member's name usually comes out of the template's macros (`OPDEF(add, ...)`
//! defining `op_member`), so it is learnt from the first member's preprocessed text
//! ([`defined_functions`]): one `clang -E` per family batch's first member, remembered for
//! the build. Members that define another name are caught by the split (their alias is
//! missing, or a function the set's pattern matches is left unrenamed) and compiled alone.
//!
//! A unit alone starts without the macros an earlier unit's template defined: the batch
//! saves each macro a template defines with `#pragma push_macro` before the unit and
//! restores it with `pop_macro` after ([`template_macros`]), so a template's `#ifndef D` /
//! `#define D 5` or its per-member `#define DREG ...` sees what it sees alone, and no
//! redefinition warning fires. Headers keep their macros, as their include guard keeps
//! their declarations (and so does a header's macro a template overrides).

use crate::c_scan::CodeBytes;
use crate::error::{Error, Result};
use crate::family::Member;
use crate::pipeline::Pipeline;
use crate::target::Target;
use std::path::Path;

/// The names of the functions `pp` (preprocessed C) defines at file scope that `wanted`
/// accepts, in order: an identifier followed by a parenthesised parameter list and a `{`
/// at brace depth 0. Declarations (`;` after the list), calls and macro-free text inside
/// bodies, strings and character literals are not definitions.
pub fn defined_functions(pp: &str, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let bytes = pp.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut code = CodeBytes::new(pp, 0, true);
    while let Some((i, c)) = code.next() {
        match c {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            _ if depth == 0 && word(c) && (i == 0 || !word(bytes[i - 1])) => {
                let end = i + bytes[i..].iter().take_while(|&&b| word(b)).count();
                let name = &pp[i..end];
                if !name.as_bytes()[0].is_ascii_digit()
                    && wanted(name)
                    && defines_after(pp, end)
                    && !found.iter().any(|f| f == name)
                {
                    found.push(name.to_string());
                }
                code.resume_at(end);
            }
            _ => {}
        }
    }
    found
}

/// Whether the text at `from` (after an identifier) is a parameter list followed by a `{`:
/// the identifier is a function being defined.
fn defines_after(pp: &str, from: usize) -> bool {
    let rest = pp[from..].trim_start();
    if !rest.starts_with('(') {
        return false;
    }
    let mut depth = 0usize;
    for (at, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return rest[at + 1..].trim_start().starts_with('{');
                }
            }
            ';' | '{' | '}' => return false,
            _ => {}
        }
    }
    false
}

/// The macros the C text `source` (a unit's own file, not what it includes) defines
/// before any `#undef` of them, sorted and each once: what a batch saves before the unit
/// and restores after it. A name the template first undefines is a header's macro it
/// overrides (`#undef IMM64` / `#define IMM64 ...`): restoring it to its state before the
/// batch's first unit would take it from the units after, whose include guards skip the
/// header, so it is left as it is.
pub fn template_macros(source: &str) -> Vec<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut undefined = std::collections::BTreeSet::new();
    for line in source.lines() {
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let rest = rest.trim_start();
        let (define, rest) = match (rest.strip_prefix("define"), rest.strip_prefix("undef")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => continue,
        };
        if !rest.starts_with([' ', '\t']) {
            continue;
        }
        let rest = rest.trim_start();
        let len = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let name = &rest[..len];
        if len == 0 || undefined.contains(name) {
            continue;
        }
        if define {
            names.insert(name.to_string());
        } else if !names.contains(name) {
            undefined.insert(name.to_string());
        }
    }
    names.into_iter().collect()
}

/// The identifiers of C text `source` outside comments, string or character literals and
/// a function-like macro's own parameters: the names its code (and its directives) use.
pub fn code_identifiers(source: &str) -> std::collections::HashSet<String> {
    let bytes = source.as_bytes();
    // The text without comments and literals (each left as a space), lines kept.
    let mut code = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let (c, next) = (bytes[i], bytes.get(i + 1).copied());
        let skip_to = match c {
            b'/' if next == Some(b'/') => source[i..].find('\n').map_or(bytes.len(), |n| i + n),
            b'/' if next == Some(b'*') => source[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |n| i + n + 4),
            b'"' | b'\'' => {
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != c && bytes[j] != b'\n' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                (j + 1).min(bytes.len())
            }
            _ => {
                // The run of code up to the next possible comment or literal, copied whole
                // (one copy per run, not per character: headers are large).
                let run = bytes[i + 1..]
                    .iter()
                    .position(|b| matches!(b, b'/' | b'"' | b'\''))
                    .map_or(bytes.len(), |n| i + 1 + n);
                code.push_str(&source[i..run]);
                i = run;
                continue;
            }
        };
        code.push(' ');
        i = skip_to;
    }
    let mut names = std::collections::HashSet::new();
    for line in code.replace("\\\n", " ").lines() {
        let words = identifiers(line);
        let directive = line.trim_start().strip_prefix('#').map(str::trim_start);
        let params: Vec<&str> = match directive.and_then(|d| d.strip_prefix("define")) {
            // `#define NAME(a, b) ...`: the parameters are the macro's own.
            Some(rest) => {
                let rest = rest.trim_start();
                let name_len = identifiers(rest).first().map_or(0, |n| n.len());
                match rest[name_len..].strip_prefix('(') {
                    Some(list) => identifiers(list.split(')').next().unwrap_or("")),
                    None => Vec::new(),
                }
            }
            None => Vec::new(),
        };
        for word in words {
            // Most words repeat: a new String only for a new one.
            if !params.contains(&word) && !names.contains(word) {
                names.insert(word.to_string());
            }
        }
    }
    names
}

/// The identifiers of `text`, in order.
fn identifiers(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .collect()
}

/// The C lines saving (`push_macro`) or restoring (`pop_macro`) each of `names`.
pub fn macro_pragmas(names: &[String], action: &str) -> String {
    names
        .iter()
        .map(|n| format!("#pragma {action}(\"{n}\")\n"))
        .collect()
}

impl Pipeline<'_> {
    /// The one function that `member` (a family member of a set with `functions` naming)
    /// defines, which its batch renames apart: learnt from the preprocessed text of the
    /// first member of its family asked for (`preprocess_member_batches` asks in job
    /// order, so the family's first), once per family and target in a build, and taken
    /// for every member. Preprocessing the first member of each batch instead cost more
    /// than batching saved: 31 `clang -E` runs of 0.2 s of CPU each for the eBPF set's
    /// 31 batches on one target. A member that defines another name is caught by the
    /// split (`batch_split`: a stencil left unrenamed, or its alias missing) and its batch
    /// compiled member by member. An error when the member defines no function the set's
    /// pattern matches, or more than one: the batch is then compiled member by member,
    /// where the member's own checks name what is wrong.
    pub(crate) fn member_function(&self, target: &Target, member: &Member) -> Result<String> {
        // The answer, a name or why there is none, is kept ("ok\n" or "error\n" first).
        let key = format!("function\0{}\0{}", target.triple, member.family);
        let answer = match self.preprocessed.get(&key) {
            Some(answer) => answer,
            None => {
                let answer = match self.learn_member_function(target, member) {
                    Ok(name) => format!("ok\n{name}"),
                    Err(e) => format!("error\n{}", e.0),
                };
                self.preprocessed.insert(&key, answer);
                self.preprocessed.get(&key).unwrap_or_default()
            }
        };
        match answer.split_once('\n') {
            Some(("ok", name)) => Ok(name.to_string()),
            Some((_, why)) => Err(Error(why.to_string())),
            None => Err(Error(format!("{key}: no answer kept"))),
        }
    }

    /// The one function `member` defines, from its preprocessed text with its own defines.
    fn learn_member_function(&self, target: &Target, member: &Member) -> Result<String> {
        let flags = self.unit_flags(target, Some(member));
        let source = self.manifest.root.join(&member.source);
        let limit = self.manifest.limits.clang_time();
        let pp = crate::clang::preprocess_within(&flags, &source, limit)?;
        let pp = String::from_utf8_lossy(&pp);
        let found = defined_functions(&pp, |name| self.manifest.is_stencil_symbol(name));
        match found.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(Error(format!(
                "{}: error: the family member {} defines {} functions the set's `functions` \
                 pattern matches ({}), but a batch renames one apart",
                display(&source),
                member.stencil,
                found.len(),
                found.join(", ")
            ))),
        }
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_at_file_scope_are_found_and_declarations_calls_and_strings_are_not() {
        let pp = "# 1 \"t.c\"\nint op_decl(int);\n\
                  static const char *s = \"op_str(x) {\";\n\
                  __attribute__((annotate(\"x\"))) long op_member(int *a, long (*f)(int)) {\n\
                  \x20 return op_decl(a[0]) + op_call(1) + f(2);\n}\n\
                  int helper(void) { return op_member(0, 0); }\n\
                  int op_other (void)\n{ return 0; }\n";
        assert_eq!(
            defined_functions(pp, |n| n.starts_with("op_")),
            ["op_member", "op_other"]
        );
    }

    #[test]
    fn a_template_s_own_macro_directives_are_what_the_batch_restores() {
        let source = "#include \"ops.h\"\n#ifndef D\n#define D 5\n# define SYNCED 1\n#endif\n\
                      #undef IMM64\n#define IMM64 1\n#define CAT(a, b) a##b\n#undef CAT\n#defineX\n#pragma once\n";
        assert_eq!(template_macros(source), ["CAT", "D", "SYNCED"]);
        let header = "/* place D, S */\n#define SYM \"S\" // C\nint use(int D2, char c = 'C');\n\
                      #define COUNT(S) \\\n  ((S) + 1)\n";
        let words = code_identifiers(header);
        assert!(!words.contains("D") && !words.contains("S") && !words.contains("C"));
        assert!(["SYM", "D2", "c", "COUNT"]
            .iter()
            .all(|w| words.contains(*w)));
        assert_eq!(
            macro_pragmas(&["D".into()], "push_macro"),
            "#pragma push_macro(\"D\")\n"
        );
    }
}
