//! Glob matching for manifest patterns, on the `globset` crate: source globs (`vm/*.c`,
//! `ops/**/*.c`), stencil function patterns (`op_*`) and allowed symbols (`my_*`).
//!
//! Names are matched whole, with `*` matching any run of characters; paths are matched with
//! `*` and `?` staying within one path component and `**` crossing components. `[abc]` and
//! `{a,b}` work as in `globset`; `check` reports a malformed pattern when the manifest is
//! read, so matching itself never fails.

use crate::error::{Error, Result};
use globset::{Glob, GlobBuilder, GlobMatcher};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A name pattern compiled; `*` and `?` match any character.
fn name_matcher(pattern: &str) -> std::result::Result<GlobMatcher, globset::Error> {
    Glob::new(pattern).map(|g| g.compile_matcher())
}

thread_local! {
    /// Name patterns compiled once per thread: `matches` runs for every symbol and function
    /// of every unit, and compiling a glob (a regex) each time was about 1.5 % of a cold
    /// build's CPU. A set has a handful of patterns.
    static NAME_MATCHERS: RefCell<HashMap<String, Option<GlobMatcher>>> =
        RefCell::new(HashMap::new());
}

/// A path pattern compiled once; `*` and `?` never match `/`.
fn path_matcher(pattern: &str) -> std::result::Result<GlobMatcher, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
}

/// Checks that `pattern` is a well-formed glob; the error names `what` (a manifest key)
/// and the pattern.
pub fn check(what: &str, pattern: &str) -> Result<()> {
    name_matcher(pattern).map(|_| ()).map_err(|e| {
        Error(format!(
            "{what}: pattern `{pattern}` is not a valid glob: {e}"
        ))
    })
}

/// Whether `text` matches `pattern` (`*` and `?` match any character, including `/`).
/// A malformed pattern matches nothing (manifests are checked with `check` when read).
pub fn matches(pattern: &str, text: &str) -> bool {
    NAME_MATCHERS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(pattern) {
            cache.insert(pattern.to_string(), name_matcher(pattern).ok());
        }
        cache[pattern].as_ref().is_some_and(|m| m.is_match(text))
    })
}

/// Whether any of `patterns` matches `text`.
pub fn any_matches(patterns: &[String], text: &str) -> bool {
    patterns.iter().any(|p| matches(p, text))
}

/// Expands a relative path pattern (`testing/*.c`) against `root`, returning the matching
/// regular files as paths relative to `root`, sorted. Hidden entries (editor swap files,
/// `.gitkeep`) are never sources. A pattern that matches nothing yields an empty list;
/// `..`, `.` and absolute patterns are rejected.
pub fn expand(root: &Path, pattern: &str) -> Result<Vec<PathBuf>> {
    let components: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    if pattern.starts_with('/') || components.iter().any(|c| *c == ".." || *c == ".") {
        return Err(Error(format!(
            "source pattern `{pattern}` must be relative to the manifest and must not contain `.` or `..`"
        )));
    }
    let matcher = path_matcher(&components.join("/")).map_err(|e| {
        Error(format!(
            "source pattern `{pattern}` is not a valid glob: {e}"
        ))
    })?;
    // Walk only below the literal prefix (`vm/` in `vm/*.c`) and, without `**`, no deeper
    // than the pattern has components.
    let wild = |c: &str| c.contains(['*', '?', '[', '{']);
    let prefix: PathBuf = components.iter().take_while(|c| !wild(c)).collect();
    let max_depth = if components.iter().any(|c| c.contains("**")) {
        usize::MAX
    } else {
        components.len()
    };
    let mut found = Vec::new();
    let start = root.join(&prefix);
    if start.is_file() {
        found.push(prefix);
    } else if start.is_dir() {
        let depth = prefix.components().count();
        walk(root, &prefix, depth, max_depth, &matcher, &mut found)?;
    }
    found.sort();
    Ok(found)
}

/// Collects the files under `root/dir` (at path depth `depth`) whose `/`-separated path
/// relative to `root` matches.
fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    max_depth: usize,
    matcher: &GlobMatcher,
    found: &mut Vec<PathBuf>,
) -> Result<()> {
    if depth >= max_depth {
        return Ok(());
    }
    let abs = root.join(dir);
    let entries = std::fs::read_dir(&abs).map_err(|e| Error(format!("{}: {e}", abs.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error(format!("{}: {e}", abs.display())))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        let rel = dir.join(name);
        let path = root.join(&rel);
        if path.is_dir() {
            walk(root, &rel, depth + 1, max_depth, matcher, found)?;
        } else if path.is_file() && matcher.is_match(slashed(&rel)) {
            found.push(rel);
        }
    }
    Ok(())
}

/// `rel` with `/` separators on every host, as manifest patterns are written.
fn slashed(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
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
        assert!(matches("op_{add,sub}", "op_sub"));
    }

    #[test]
    fn malformed_patterns_are_reported_and_match_nothing() {
        let err = check("allowed_symbols", "op_[").unwrap_err();
        assert!(
            err.0.contains("allowed_symbols") && err.0.contains("op_["),
            "{err}"
        );
        assert!(!matches("op_[", "op_["));
        assert!(check("functions", "op_*").is_ok());
    }

    #[test]
    fn expand_rejects_parent_dirs() {
        let err = expand(Path::new("."), "../x/*.c").unwrap_err();
        assert!(err.0.contains("../x/*.c"), "{err}");
    }

    #[test]
    fn expand_stays_within_components_unless_double_star() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "a.c",
            "b.h",
            "ops/x.c",
            "ops/deep/y.c",
            "ops/.swp.c",
            ".hidden.c",
        ] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        let rel = |v: Vec<PathBuf>| -> Vec<String> { v.iter().map(|p| slashed(p)).collect() };
        assert_eq!(rel(expand(dir.path(), "*.c").unwrap()), ["a.c"]);
        assert_eq!(rel(expand(dir.path(), "ops/*.c").unwrap()), ["ops/x.c"]);
        assert_eq!(
            rel(expand(dir.path(), "ops/**/*.c").unwrap()),
            ["ops/deep/y.c", "ops/x.c"]
        );
        assert_eq!(rel(expand(dir.path(), "a.c").unwrap()), ["a.c"]);
        assert!(expand(dir.path(), "missing/*.c").unwrap().is_empty());
        assert!(expand(dir.path(), "nothing.c").unwrap().is_empty());
    }
}
