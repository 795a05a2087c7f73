//! `--check`: compares freshly generated crate files with the committed ones and describes
//! the first difference of each stale file (target, stencil, line).

/// Describes how `committed` differs from `generated` (`None` when equal). `file` names the
/// file; the stencil is found from the nearest `// ---- <name> (...)` marker above the line.
pub fn describe_difference(file: &str, committed: Option<&str>, generated: &str) -> Option<String> {
    let Some(committed) = committed else {
        return Some(format!("{file}: missing (not generated yet)"));
    };
    if committed == generated {
        return None;
    }
    let (old, new): (Vec<&str>, Vec<&str>) =
        (committed.lines().collect(), generated.lines().collect());
    let line = old
        .iter()
        .zip(&new)
        .position(|(a, b)| a != b)
        .unwrap_or(old.len().min(new.len()));
    let stencil = new[..line.min(new.len())]
        .iter()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix("// ---- "))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|name| format!(", in stencil `{name}`"))
        .unwrap_or_default();
    let show = |lines: &[&str]| {
        lines
            .get(line)
            .map(|l| format!("`{}`", l.trim()))
            .unwrap_or_else(|| "end of file".into())
    };
    Some(format!(
        "{file}: stale{stencil}; first difference at line {}:\n    committed: {}\n    generated: {}",
        line + 1,
        show(&old),
        show(&new)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_files_are_fine() {
        assert_eq!(describe_difference("f", Some("a\nb\n"), "a\nb\n"), None);
    }

    #[test]
    fn names_stencil_and_line() {
        let old = "h\n    // ---- op_add (vm/add.c): 3 B code\n    code: &[0x90],\n";
        let new = "h\n    // ---- op_add (vm/add.c): 3 B code\n    code: &[0xc3],\n";
        let d = describe_difference("stencils/t/src/lib.rs", Some(old), new).unwrap();
        assert!(
            d.contains("stencil `op_add`") && d.contains("line 3"),
            "{d}"
        );
        assert!(
            d.contains("`code: &[0x90],`") && d.contains("`code: &[0xc3],`"),
            "{d}"
        );
    }

    #[test]
    fn missing_and_truncated_files() {
        assert!(describe_difference("f", None, "x")
            .unwrap()
            .contains("missing"));
        let d = describe_difference("f", Some("a\n"), "a\nb\n").unwrap();
        assert!(d.contains("line 2") && d.contains("end of file"), "{d}");
    }
}
