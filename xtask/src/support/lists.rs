//! The hand-written target lists of the docs, checked against the target files (a tidy
//! check: its unit test runs on the real docs, and `cargo xtask support-report` runs it
//! too): the README's target table (triple, object format, how the matrix executes the
//! stencils, reserved registers), the count of targets in the README's and ARCHITECTURE.md's
//! prose, and the ABI table of templates/README.md (the registers of the op calling
//! convention, the helpers' ABI, reserved registers).
//!
//! The docs stay hand-written (their cells carry prose the target files do not); every row
//! must agree with the facts, and every target needs a row. Each error names the document,
//! the row and what the target file says, which is the fix.

use super::facts;
use cpjit_model::Arch;
use cpjit_targets_schema::{OpCallingConvention, TargetFile};
use std::path::Path;

/// The header of the README's target table.
pub const README_HEADER: &str = "| target | object format | how CI executes its stencils |";
/// The header of templates/README.md's ABI table.
pub const ABI_HEADER: &str =
    "| target | frame (1st) | sp (2nd) | status | helpers are called with | notes |";

/// The registers of the first two op arguments (frame, sp) and of the exit status, per
/// architecture and op calling convention: LLVM 19's `preserve_none` argument order, or the
/// C convention's. A fact of LLVM, not of a target file, so kept here.
const ENTRY_REGISTERS: &[(Arch, OpCallingConvention, [&str; 3])] = &[
    (
        Arch::X86_64,
        OpCallingConvention::PreserveNone,
        ["r12", "r13", "rax"],
    ),
    (
        Arch::Aarch64,
        OpCallingConvention::PreserveNone,
        ["x20", "x21", "x0"],
    ),
    (Arch::Riscv64, OpCallingConvention::C, ["a0", "a1", "a0"]),
];

/// Every disagreement of the docs under `root` with `targets`.
pub fn check_docs(root: &Path, targets: &[TargetFile]) -> Vec<String> {
    let read = |doc: &str| {
        std::fs::read_to_string(root.join(doc)).map_err(|e| format!("{doc}: cannot read: {e}"))
    };
    let mut errors = Vec::new();
    match read("README.md") {
        Ok(text) => {
            errors.extend(check_target_table("README.md", &text, targets));
            errors.extend(check_count("README.md", &text, targets.len()));
        }
        Err(e) => errors.push(e),
    }
    match read("ARCHITECTURE.md") {
        Ok(text) => errors.extend(check_count("ARCHITECTURE.md", &text, targets.len())),
        Err(e) => errors.push(e),
    }
    match read("templates/README.md") {
        Ok(text) => errors.extend(check_abi_table("templates/README.md", &text, targets)),
        Err(e) => errors.push(e),
    }
    errors
}

/// The rows (cells, trimmed) of the Markdown table whose header line is `header`.
fn table(text: &str, header: &str) -> Option<Vec<Vec<String>>> {
    let mut lines = text.lines().map(str::trim);
    lines.find(|l| *l == header)?;
    lines.next().filter(|l| l.starts_with("|-"))?;
    Some(
        lines
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let inner = l.trim_start_matches('|').trim_end_matches('|');
                inner.split('|').map(|c| c.trim().to_string()).collect()
            })
            .collect(),
    )
}

/// The rows of `header`'s table by target, with errors for rows of no target, duplicate
/// rows, rows of the wrong width and targets without a row (`expected` gives the row to add).
fn rows_by_target<'a>(
    doc: &str,
    text: &str,
    header: &str,
    targets: &'a [TargetFile],
    expected: impl Fn(&TargetFile) -> String,
    errors: &mut Vec<String>,
) -> Vec<(&'a TargetFile, Vec<String>)> {
    let Some(rows) = table(text, header) else {
        errors.push(format!(
            "{doc}: no table with the header `{header}` (the tidy check reads the target list \
             there; if the table moved or changed its header, update xtask/src/support/lists.rs)"
        ));
        return Vec::new();
    };
    let width = header.matches('|').count() - 1;
    let mut found: Vec<(&TargetFile, Vec<String>)> = Vec::new();
    for row in rows {
        let triple = row[0].trim_matches('`').to_string();
        if row.len() != width {
            errors.push(format!(
                "{doc}: row `{triple}` has {} cells, the header {width}",
                row.len()
            ));
            continue;
        }
        let Some(t) = targets.iter().find(|t| t.triple == triple) else {
            errors.push(format!(
                "{doc}: row `{triple}`: no targets/{triple}.toml; remove the row or add the \
                 target file"
            ));
            continue;
        };
        if found.iter().any(|(f, _)| f.triple == triple) {
            errors.push(format!("{doc}: row `{triple}` twice; remove one"));
            continue;
        }
        found.push((t, row));
    }
    for t in targets {
        if !found.iter().any(|(f, _)| f.triple == t.triple) {
            errors.push(format!(
                "{doc}: no row for `{}` (targets/{}.toml); add: {}",
                t.triple,
                t.triple,
                expected(t)
            ));
        }
    }
    found
}

/// `cell` names each of `t`'s reserved registers (in backticks), or the errors.
fn names_reserved(doc: &str, t: &TargetFile, cell: &str, errors: &mut Vec<String>) {
    for r in &t.reserved_registers {
        if !cell.contains(&format!("`{r}`")) {
            errors.push(format!(
                "{doc}: row `{}`: does not name `{r}`, which targets/{}.toml reserves \
                 (reserved_registers); mention it in the row's last cell",
                t.triple, t.triple
            ));
        }
    }
}

/// The README's table: triple, object format, how the matrix executes the stencils.
pub fn check_target_table(doc: &str, text: &str, targets: &[TargetFile]) -> Vec<String> {
    let mut errors = Vec::new();
    let how = |t: &TargetFile| facts::how_executed(t, targets).unwrap_or_default();
    let expected = |t: &TargetFile| {
        format!(
            "| `{}` | {} | {} |",
            t.triple,
            facts::format_name(t.format),
            how(t)
        )
    };
    for (t, row) in rows_by_target(doc, text, README_HEADER, targets, expected, &mut errors) {
        let format = facts::format_name(t.format);
        if row[1] != format {
            errors.push(format!(
                "{doc}: row `{}`: object format `{}`, but targets/{}.toml has format = \"{}\" \
                 (write {format})",
                t.triple,
                row[1],
                t.triple,
                t.format.name()
            ));
        }
        let how = how(t);
        if !row[2].starts_with(&how) {
            let test = t.test.as_ref();
            errors.push(format!(
                "{doc}: row `{}`: how executed `{}` must start with `{how}` (targets/{}.toml \
                 [test] execution = \"{}\", rust_target = \"{}\")",
                t.triple,
                row[2],
                t.triple,
                test.map_or("none", |x| x.execution.name()),
                test.map_or("", |x| x.rust_target.as_str())
            ));
        }
        names_reserved(doc, t, &row[2], &mut errors);
    }
    errors
}

/// templates/README.md's ABI table: the registers of the first two op arguments and of the
/// status ([`ENTRY_REGISTERS`]), the helpers' ABI, the reserved registers and, for targets
/// whose ops use the C convention, a note saying so.
pub fn check_abi_table(doc: &str, text: &str, targets: &[TargetFile]) -> Vec<String> {
    let mut errors = Vec::new();
    let registers = |t: &TargetFile| {
        ENTRY_REGISTERS
            .iter()
            .find(|(a, cc, _)| *a == t.arch && *cc == t.op_calling_convention)
            .map(|(_, _, r)| *r)
    };
    let expected = |t: &TargetFile| {
        let r = registers(t).unwrap_or(["?"; 3]);
        format!(
            "| `{}` | `{}` | `{}` | `{}` | {} | ... |",
            t.triple,
            r[0],
            r[1],
            r[2],
            facts::abi_name(t.abi)
        )
    };
    for (t, row) in rows_by_target(doc, text, ABI_HEADER, targets, expected, &mut errors) {
        match registers(t) {
            None => errors.push(format!(
                "{doc}: row `{}`: no known argument registers for {} with {} ops; add them \
                 to ENTRY_REGISTERS in xtask/src/support/lists.rs",
                t.triple,
                t.arch.name(),
                facts::op_convention_name(t.op_calling_convention)
            )),
            Some(regs) => {
                for (i, (what, reg)) in ["frame", "sp", "status"].iter().zip(regs).enumerate() {
                    let want = format!("`{reg}`");
                    if row[i + 1] != want {
                        errors.push(format!(
                            "{doc}: row `{}`: {what} register {}, but a {} op with {} has it \
                             in {want}",
                            t.triple,
                            row[i + 1],
                            t.arch.name(),
                            facts::op_convention_name(t.op_calling_convention)
                        ));
                    }
                }
            }
        }
        let abi = facts::abi_name(t.abi);
        if !row[4].starts_with(abi) {
            errors.push(format!(
                "{doc}: row `{}`: helpers are called with `{}`, but targets/{}.toml has \
                 abi = \"{}\" (start the cell with {abi})",
                t.triple,
                row[4],
                t.triple,
                t.abi.name()
            ));
        }
        names_reserved(doc, t, &row[5], &mut errors);
        if t.op_calling_convention == OpCallingConvention::C && !row[5].contains("C convention") {
            errors.push(format!(
                "{doc}: row `{}`: targets/{}.toml has op_calling_convention = \"c\"; say \
                 \"C convention\" in the notes",
                t.triple, t.triple
            ));
        }
    }
    errors
}

/// Every "for <N> targets" / "for <N> target triples" in `text` must count `n`, and there
/// must be one.
pub fn check_count(doc: &str, text: &str, n: usize) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut errors = Vec::new();
    let mut found = 0;
    for (i, w) in words.iter().enumerate() {
        let Some(count) = (*w == "for")
            .then(|| words.get(i + 1).and_then(|c| number(c)))
            .flatten()
        else {
            continue;
        };
        let noun = |k: usize| {
            words.get(i + k).map_or("", |w| {
                w.trim_end_matches(|c: char| c.is_ascii_punctuation())
            })
        };
        let phrase = match (noun(2), noun(3)) {
            ("targets", _) => "targets",
            ("target", "triples") => "target triples",
            _ => continue,
        };
        found += 1;
        if count != n {
            errors.push(format!(
                "{doc}: \"for {} {phrase}\", but targets/ has {n} target files; write {}",
                words[i + 1],
                NUMBERS.get(n).copied().unwrap_or("the number")
            ));
        }
    }
    if found == 0 {
        errors.push(format!(
            "{doc}: no \"for <N> targets\" or \"for <N> target triples\"; the tidy check \
             expects the count of targets there (if the prose changed, update \
             xtask/src/support/lists.rs)"
        ));
    }
    errors
}

const NUMBERS: [&str; 21] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
];

fn number(word: &str) -> Option<usize> {
    let w = word.to_ascii_lowercase();
    NUMBERS
        .iter()
        .position(|n| *n == w)
        .or_else(|| w.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_the_hand_written_target_lists_match_the_target_files() {
        let root = crate::util::root();
        let targets = cpjit_targets_schema::load_all(&root.join("targets")).unwrap();
        let errors = check_docs(&root, &targets);
        assert!(
            errors.is_empty(),
            "hand-written target lists disagree with targets/*.toml:\n{}",
            errors.join("\n")
        );
    }

    fn target(name: &str, body: &str) -> TargetFile {
        let text =
            format!("triple = \"{name}\"\ncode_model = \"small\"\nreloc_model = \"pic\"\n{body}");
        TargetFile::parse(&format!("targets/{name}.toml"), name, text.into_bytes()).unwrap()
    }

    /// A native x86-64 ELF target and an Apple AArch64 one run in its Linux process.
    fn two() -> Vec<TargetFile> {
        vec![
            target(
                "x86_64-a-linux-gnu",
                "arch = \"x86_64\"\nformat = \"elf\"\nabi = \"sysv64\"\nnop = \"90\"\n\
                 code_align = 1\n[test]\nexecution = \"native\"\nrust_target = \"x86_64-a-linux-gnu\"\n",
            ),
            target(
                "aarch64-b-apple",
                "arch = \"aarch64\"\nformat = \"macho\"\nabi = \"aapcs64\"\nnop = \"1f2003d5\"\n\
                 code_align = 4\nreserved_registers = [\"x18\"]\n[test]\nexecution = \"host-abi\"\n\
                 rust_target = \"aarch64-b-linux-gnu\"\n",
            ),
        ]
    }

    const GOOD_README: &str = "intro\n\n\
        | target | object format | how CI executes its stencils |\n\
        |---|---|---|\n\
        | `x86_64-a-linux-gnu` | ELF | natively |\n\
        | `aarch64-b-apple` | Mach-O | in a Linux AArch64 process (`x18` never used) |\n\
        \nafter\n";

    #[test]
    fn a_correct_readme_table_passes() {
        assert_eq!(
            check_target_table("R", GOOD_README, &two()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_wrong_readme_table_fails_naming_row_and_fix() {
        let cases = [
            ("| Mach-O |", "| ELF |", "row `aarch64-b-apple`: object format `ELF`"),
            ("| natively |", "| under qemu |", "must start with `natively`"),
            ("(`x18` never used)", "", "does not name `x18`"),
            (
                "| `x86_64-a-linux-gnu` | ELF | natively |\n",
                "",
                "no row for `x86_64-a-linux-gnu` (targets/x86_64-a-linux-gnu.toml); add: \
                 | `x86_64-a-linux-gnu` | ELF | natively |",
            ),
            ("`aarch64-b-apple`", "`aarch64-c-apple`", "no targets/aarch64-c-apple.toml"),
            (
                "| `x86_64-a-linux-gnu` | ELF | natively |\n",
                "| `x86_64-a-linux-gnu` | ELF | natively |\n| `x86_64-a-linux-gnu` | ELF | natively |\n",
                "twice",
            ),
            ("| target | object", "| triple | object", "no table with the header"),
        ];
        for (from, to, expected) in cases {
            let wrong = GOOD_README.replace(from, to);
            assert_ne!(wrong, GOOD_README, "{from}");
            let errors = check_target_table("R", &wrong, &two()).join("\n");
            assert!(errors.contains(expected), "{from} -> {to}: {errors}");
        }
    }

    #[test]
    fn a_wrong_count_of_targets_fails() {
        assert!(check_count("A", "for two target triples, and", 2).is_empty());
        assert!(check_count("A", "into stencils for\n2 targets.", 2).is_empty());
        let e = check_count("A", "ops for six target triples, reads", 7).join("\n");
        assert!(
            e.contains("\"for six target triples\", but targets/ has 7") && e.contains("seven"),
            "{e}"
        );
        let e = check_count("A", "for every target", 7).join("\n");
        assert!(e.contains("no \"for <N> targets\""), "{e}");
    }

    const GOOD_ABI: &str = "\
        | target | frame (1st) | sp (2nd) | status | helpers are called with | notes |\n\
        |---|---|---|---|---|---|\n\
        | `x86_64-a-linux-gnu` | `r12` | `r13` | `rax` | System V | |\n\
        | `aarch64-b-apple` | `x20` | `x21` | `x0` | AAPCS64, Apple variant | `x18` reserved |\n";

    #[test]
    fn a_wrong_abi_table_fails() {
        assert_eq!(check_abi_table("T", GOOD_ABI, &two()), Vec::<String>::new());
        for (from, to, expected) in [
            ("`r13`", "`r14`", "sp register `r14`, but a x86_64 op with preserve_none has it in `r13`"),
            ("| System V |", "| Win64 |", "abi = \"sysv64\" (start the cell with System V)"),
            ("`x18` reserved", "reserved", "does not name `x18`"),
            (
                "| `aarch64-b-apple` | `x20` | `x21` | `x0` | AAPCS64, Apple variant | `x18` reserved |\n",
                "",
                "no row for `aarch64-b-apple` (targets/aarch64-b-apple.toml); add: | \
                 `aarch64-b-apple` | `x20` | `x21` | `x0` | AAPCS64 | ... |",
            ),
        ] {
            let wrong = GOOD_ABI.replace(from, to);
            assert_ne!(wrong, GOOD_ABI, "{from}");
            let errors = check_abi_table("T", &wrong, &two()).join("\n");
            assert!(errors.contains(expected), "{from} -> {to}: {errors}");
        }
        // A RISC-V row must use the C convention's registers and say so.
        let rv = vec![target(
            "riscv64gc-z-linux-gnu",
            "arch = \"riscv64\"\nformat = \"elf\"\nabi = \"lp64d\"\nnop = \"0100\"\ncode_align = 4\n\
             op_calling_convention = \"c\"\nreserved_registers = [\"gp\"]\n",
        )];
        let table =
            "| target | frame (1st) | sp (2nd) | status | helpers are called with | notes |\n\
            |---|---|---|---|---|---|\n\
            | `riscv64gc-z-linux-gnu` | `a0` | `a1` | `a0` | LP64D | `gp` reserved |\n";
        let e = check_abi_table("T", table, &rv).join("\n");
        assert!(e.contains("say \"C convention\""), "{e}");
        let fixed = table.replace("reserved |", "reserved; C convention |");
        assert!(check_abi_table("T", &fixed, &rv).is_empty());
    }
}
