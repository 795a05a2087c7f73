//! Minimal glob matching for manifest patterns: `*` matches any run of characters (within
//! one path component when matching paths), `?` exactly one; everything else is literal.
//! Used for source globs (`vm/*.c`), stencil function patterns (`op_*`) and allowed symbols.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Whether `text` matches `pattern` (`*` and `?` match any character, including `/`).
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative wildcard matching with single backtrack point (linear for one `*` run).
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether any of `patterns` matches `text`.
pub fn any_matches(patterns: &[String], text: &str) -> bool {
    patterns.iter().any(|p| matches(p, text))
}

/// Expands a relative path pattern (`testing/*.c`) against `root`, component by component,
/// returning the matching regular files as paths relative to `root`, sorted. A pattern that
/// matches nothing yields an empty list. `..` and absolute patterns are rejected.
pub fn expand(root: &Path, pattern: &str) -> Result<Vec<PathBuf>> {
    let components: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    if pattern.starts_with('/') || components.iter().any(|c| *c == ".." || *c == ".") {
        return Err(Error(format!(
            "source pattern `{pattern}` must be relative to the manifest and must not contain `.` or `..`"
        )));
    }
    let mut current = vec![PathBuf::new()];
    for (i, component) in components.iter().enumerate() {
        let last = i + 1 == components.len();
        let mut next = Vec::new();
        for dir in &current {
            let wild = component.contains(['*', '?']);
            if !wild {
                let candidate = dir.join(component);
                if is_kind(&root.join(&candidate), last) {
                    next.push(candidate);
                }
                continue;
            }
            let abs = root.join(dir);
            let Ok(entries) = std::fs::read_dir(&abs) else {
                continue;
            };
            for entry in entries {
                let entry = entry.map_err(|e| Error(format!("{}: {e}", abs.display())))?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                // Hidden files (editor swap files, `.gitkeep`) are never sources.
                if name.starts_with('.') || !matches(component, name) {
                    continue;
                }
                let candidate = dir.join(name);
                if is_kind(&root.join(&candidate), last) {
                    next.push(candidate);
                }
            }
        }
        current = next;
    }
    current.sort();
    Ok(current)
}

fn is_kind(path: &Path, want_file: bool) -> bool {
    if want_file {
        path.is_file()
    } else {
        path.is_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_question_mark() {
        assert!(matches("op_*", "op_add"));
        assert!(matches("op_*", "op_"));
        assert!(!matches("op_*", "xop_add"));
        assert!(matches("cpjit_test_*", "cpjit_test_mul_add"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("*_TARGET", "_JIT_JUMP_TARGET"));
        assert!(matches("*a*b*", "xxaxxbxx"));
        assert!(!matches("*a*b", "xxaxxbxx"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
    }

    #[test]
    fn expand_rejects_parent_dirs() {
        let err = expand(Path::new("."), "../x/*.c").unwrap_err();
        assert!(err.0.contains("../x/*.c"), "{err}");
    }
}
