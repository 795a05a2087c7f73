//! The matrix definition: the non-target facts of `ci/matrix.toml` (suites, build profile,
//! compile-only packages, long runs, self-test) and one row per target file of
//! `targets/`, derived from its `[test]` table.

use crate::targets::{self, Execution, TargetFacts};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A test suite: the test binaries of one workspace package.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub package: String,
    /// Whether the suite's tests depend on `CPJIT_STENCILS`. One that does not gives the
    /// same result in every row of a Rust target, so it runs once per Rust target (in the
    /// row of that target's own stencils when selected, else in its first row).
    #[serde(default = "yes")]
    pub reads_stencils: bool,
    /// The tests of a suite that reads `CPJIT_STENCILS` which do not (a nextest filterset,
    /// e.g. the VM's interpreter modes): like a suite that does not, they run once per Rust
    /// target, in the row that runs such suites; the other rows run the rest.
    #[serde(default)]
    pub stencil_free: Option<String>,
}

impl Suite {
    /// The nextest filterset of the suite's tests that a row runs: all of them in the row
    /// that runs the stencil-free tests of its Rust target, else those that read
    /// `CPJIT_STENCILS` (`None`: none).
    pub fn filter(&self, runs_stencil_free: bool) -> Option<String> {
        let package = format!("package(={})", self.package);
        match (&self.stencil_free, runs_stencil_free, self.reads_stencils) {
            (_, true, _) => Some(package),
            (_, false, false) => None,
            (None, false, true) => Some(package),
            (Some(free), false, true) => Some(format!("{package} & not ({free})")),
        }
    }
}

fn yes() -> bool {
    true
}

/// One row: a target's stencils executed by a process of `rust_target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The stencils' target triple (the `CPJIT_STENCILS` value).
    pub triple: String,
    pub execution: Execution,
    /// The Rust target whose test binaries execute the stencils.
    pub rust_target: String,
    /// The Rust target of the target's compile-only check (`[test] check_target`), if any.
    pub check_target: Option<String>,
    /// The suites the row runs (`[test] suites`; `None`: all).
    pub suites: Option<Vec<String>>,
}

impl Row {
    /// Whether the row runs the suite `name`.
    pub fn runs(&self, name: &str) -> bool {
        self.suites
            .as_ref()
            .is_none_or(|s| s.iter().any(|n| n == name))
    }
}

/// A slower native test run of `cargo xtask ci`, outside the rows (e.g. the VM's full
/// differential suite): `cargo nextest run --cargo-profile <profile> -p <package> <args>`
/// with `env`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongRun {
    pub name: String,
    pub package: String,
    /// The cargo profile (`dev` when not given); the matrix's own (`[build] profile`)
    /// shares the host's test binaries with the matrix.
    #[serde(default = "dev")]
    pub profile: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

fn dev() -> String {
    "dev".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Build {
    /// A cargo profile of the workspace's `Cargo.toml` (or `dev`, `release`).
    profile: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Check {
    packages: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SelfTest {
    suites: Vec<String>,
}

/// `ci/matrix.toml` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    build: Build,
    suites: BTreeMap<String, Suite>,
    check: Check,
    #[serde(default)]
    long: Vec<LongRun>,
    self_test: SelfTest,
    #[serde(default)]
    rows: RowsTable,
    system: Option<SystemTable>,
}

/// `[system]`: the file of the full-system QEMU rows.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SystemTable {
    file: String,
}

/// `[rows]`: what every row of a target file gets.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowsTable {
    /// Environment variables of every row's tests (not of the full-system rows).
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub suites: BTreeMap<String, Suite>,
    /// One per target file, sorted by triple.
    pub rows: Vec<Row>,
    pub check_packages: Vec<String>,
    /// The `check_target`s of the target files, sorted and deduplicated.
    pub check_targets: Vec<String>,
    pub self_test_suites: Vec<String>,
    pub long: Vec<LongRun>,
    /// Environment variables of every row's tests (`[rows] env`).
    pub row_env: BTreeMap<String, String>,
    /// The file of the full-system QEMU rows (`[system] file`), and its rows, read by
    /// [`Matrix::load`] (`system.rs`).
    pub system_file: Option<String>,
    pub system: Vec<super::system::SystemRow>,
    /// The cargo profile of the test binaries (`--cargo-profile`).
    pub profile: String,
}

impl Matrix {
    /// Reads `ci/matrix.toml` and `targets/*.toml` under `root`.
    pub fn load(root: &Path) -> Result<Matrix, String> {
        let path = root.join("ci/matrix.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let targets = targets::load_all(&root.join("targets"))?;
        let mut matrix = Matrix::new("ci/matrix.toml", &text, &targets)?;
        if let Some(file) = &matrix.system_file {
            matrix.system = super::system::load(root, file)?;
        }
        let manifest = root.join("Cargo.toml");
        let manifest_text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
        matrix.check_profiles("ci/matrix.toml", &manifest_text)?;
        Ok(matrix)
    }

    /// Every cargo profile the matrix names is cargo's own or a `[profile.<name>]` of the
    /// workspace manifest `cargo_toml`, so a typo fails before any build, naming the key.
    pub fn check_profiles(&self, file: &str, cargo_toml: &str) -> Result<(), String> {
        let manifest: toml::Table = toml::from_str(cargo_toml)
            .map_err(|e| format!("Cargo.toml: {}", e.to_string().trim_end()))?;
        let defined = manifest.get("profile").and_then(|p| p.as_table());
        let known = |name: &str| {
            ["dev", "release", "test", "bench"].contains(&name)
                || defined.is_some_and(|d| d.contains_key(name))
        };
        let named = std::iter::once(("[build] profile".to_string(), &self.profile)).chain(
            self.long
                .iter()
                .map(|l| (format!("[[long]] `{}` profile", l.name), &l.profile)),
        );
        for (key, profile) in named {
            if !known(profile) {
                return Err(format!(
                    "{file}: {key}: no cargo profile `{profile}` (the workspace Cargo.toml \
                     has no [profile.{profile}])"
                ));
            }
        }
        Ok(())
    }

    /// The matrix of `text` (the contents of `file`) over `targets`.
    pub fn new(file: &str, text: &str, targets: &[TargetFacts]) -> Result<Matrix, String> {
        let raw: MatrixFile =
            toml::from_str(text).map_err(|e| format!("{file}: {}", e.to_string().trim_end()))?;
        if raw.suites.is_empty() {
            return Err(format!("{file}: no [suites]"));
        }
        for (name, suite) in &raw.suites {
            if suite.stencil_free.is_some() && !suite.reads_stencils {
                return Err(format!(
                    "{file}: [suites.{name}]: `stencil_free` names tests of a suite that reads \
                     CPJIT_STENCILS; this one has reads_stencils = false (all its tests are)"
                ));
            }
        }
        for s in &raw.self_test.suites {
            if !raw.suites.contains_key(s) {
                return Err(format!("{file}: [self_test] suites: unknown suite `{s}`"));
            }
        }
        for t in targets {
            for s in t.test.suites.iter().flatten() {
                if !raw.suites.contains_key(s) {
                    return Err(format!(
                        "targets/{}.toml: [test] suites: unknown suite `{s}` ({file} has: {})",
                        t.triple,
                        raw.suites.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
        let rows = targets
            .iter()
            .map(|t| Row {
                triple: t.triple.clone(),
                execution: t.test.execution,
                rust_target: t.test.rust_target.clone(),
                check_target: t.test.check_target.clone(),
                suites: t.test.suites.clone(),
            })
            .collect();
        let mut check_targets: Vec<String> = targets
            .iter()
            .filter_map(|t| t.test.check_target.clone())
            .collect();
        check_targets.sort();
        check_targets.dedup();
        Ok(Matrix {
            suites: raw.suites,
            rows,
            check_packages: raw.check.packages,
            check_targets,
            self_test_suites: raw.self_test.suites,
            long: raw.long,
            row_env: raw.rows.env,
            system_file: raw.system.map(|s| s.file),
            system: Vec::new(),
            profile: raw.build.profile,
        })
    }

    pub fn row(&self, triple: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.triple == triple)
    }

    /// The row `--self-test` breaks by default: a host-abi row, whose stencils meet a
    /// process of another OS (the case most likely to pass by accident); the first one run
    /// by a process of the `host`'s own Rust target if any (no emulator: the self-test then
    /// runs natively, [`super::select::self_test_rows`]), else the first one.
    pub fn self_test_row(&self, host: &str) -> Result<&Row, String> {
        let host_abi = || {
            self.rows
                .iter()
                .filter(|r| r.execution == Execution::HostAbi)
        };
        host_abi()
            .find(|r| r.rust_target == host)
            .or_else(|| host_abi().next())
            .ok_or_else(|| "self-test: no host-abi row to break; pass --target".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_matrix_has_one_row_per_target_file() {
        let root = crate::util::root();
        let m = Matrix::load(&root).unwrap();
        let files = std::fs::read_dir(root.join("targets")).unwrap().count();
        assert_eq!(m.rows.len(), files);
        for row in &m.rows {
            if matches!(row.execution, Execution::Native | Execution::Qemu) {
                assert_eq!(row.triple, row.rust_target);
            }
        }
        // On the host of a native row, the broken row is one that host's process runs.
        let native = m.rows.iter().find(|r| r.execution == Execution::Native);
        let host = &native.unwrap().rust_target;
        let broken = m.self_test_row(host).unwrap();
        assert_eq!(
            (broken.execution, &broken.rust_target),
            (Execution::HostAbi, host)
        );
        // A host without a host-abi row of its own breaks the first one.
        let first = m.rows.iter().find(|r| r.execution == Execution::HostAbi);
        assert_eq!(m.self_test_row("no-such-host").ok(), first);
        assert!(!m.check_targets.is_empty());
    }

    /// Adding a target is adding one file: a throwaway x86-64 FreeBSD target beside copies
    /// of the real files becomes a row, executed by a Linux process (host ABI).
    #[test]
    fn a_seventh_target_file_is_a_matrix_row() {
        let root = crate::util::root();
        let (dir, real) = targets::copy_of_the_targets();
        // Executed by the process that runs the x86-64 native row.
        let linux = real
            .iter()
            .find(|t| t.test.execution == Execution::Native && t.arch == cpjit_model::Arch::X86_64)
            .unwrap();
        std::fs::write(
            dir.path().join("x86_64-unknown-freebsd.toml"),
            format!(
                "triple = \"x86_64-unknown-freebsd\"\narch = \"x86_64\"\nformat = \"elf\"\n\
                 abi = \"sysv64\"\ncode_model = \"small\"\nreloc_model = \"pic\"\nnop = \"90\"\n\
                 code_align = 1\n[test]\nexecution = \"host-abi\"\nrust_target = \"{}\"\n",
                linux.test.rust_target
            ),
        )
        .unwrap();
        let targets = targets::load_all(dir.path()).unwrap();
        assert_eq!(targets.len(), real.len() + 1);
        let text = std::fs::read_to_string(root.join("ci/matrix.toml")).unwrap();
        let m = Matrix::new("ci/matrix.toml", &text, &targets).unwrap();
        let row = m
            .row("x86_64-unknown-freebsd")
            .expect("a row for the new target");
        assert_eq!(row.execution, Execution::HostAbi);
        assert_eq!(row.rust_target, linux.test.rust_target);
        assert_eq!(m.rows.len(), real.len() + 1);
    }

    /// A target file may restrict its row to some suites (`[test] suites`), which must be
    /// suites of the matrix; the row runs only those.
    #[test]
    fn a_row_runs_the_suites_its_target_file_names() {
        let file = |suites: &str| {
            let text = format!(
                "triple = \"x86_64-example-linux-musl\"\narch = \"x86_64\"\nformat = \"elf\"\n\
                 abi = \"sysv64\"\ncode_model = \"small\"\nreloc_model = \"pic\"\nnop = \"90\"\n\
                 code_align = 1\n[test]\nexecution = \"native\"\n\
                 rust_target = \"x86_64-example-linux-musl\"\n{suites}"
            );
            let name = "x86_64-example-linux-musl";
            let parsed = cpjit_targets_schema::TargetFile::parse(
                &format!("targets/{name}.toml"),
                name,
                text.into_bytes(),
            );
            TargetFacts::of(parsed.unwrap()).unwrap()
        };
        let two = MINIMAL.replace("[check]", "[suites.b]\npackage = \"q\"\n[check]");
        let m = Matrix::new("m.toml", &two, &[file("suites = [\"b\"]\n")]).unwrap();
        let row = &m.rows[0];
        assert!(row.runs("b") && !row.runs("a"));
        let m = Matrix::new("m.toml", &two, &[file("")]).unwrap();
        assert!(m.rows[0].runs("a") && m.rows[0].runs("b"));
        let e = Matrix::new("m.toml", &two, &[file("suites = [\"c\"]\n")]).unwrap_err();
        assert_eq!(
            e,
            "targets/x86_64-example-linux-musl.toml: [test] suites: unknown suite `c` \
             (m.toml has: a, b)"
        );
    }

    const MINIMAL: &str = r#"
[build]
profile = "dev"
[suites.a]
package = "p"
[check]
packages = ["p"]
[self_test]
suites = ["a"]
[[long]]
name = "full"
package = "p"
profile = "release"
args = ["--run-ignored", "only"]
env = { N = "10" }
"#;

    #[test]
    fn minimal_matrix_parses() {
        let m = Matrix::new("m.toml", MINIMAL, &[]).unwrap();
        assert_eq!(m.suites["a"].package, "p");
        assert!(m.suites["a"].reads_stencils);
        assert_eq!(m.long[0].args, ["--run-ignored", "only"]);
        assert_eq!(
            (m.long[0].profile.as_str(), m.profile.as_str()),
            ("release", "dev")
        );
        assert_eq!(m.long[0].env["N"], "10");
        let no_profile = MINIMAL.replace("profile = \"release\"\n", "");
        let m = Matrix::new("m.toml", &no_profile, &[]).unwrap();
        assert_eq!(m.long[0].profile, "dev");
        m.check_profiles("m.toml", "").unwrap();
        let fast = MINIMAL.replace("\"dev\"", "\"fast\"");
        let m = Matrix::new("m.toml", &fast, &[]).unwrap();
        let e = m.check_profiles("m.toml", "").unwrap_err();
        assert_eq!(
            e,
            "m.toml: [build] profile: no cargo profile `fast` (the workspace Cargo.toml has \
             no [profile.fast])"
        );
        m.check_profiles("m.toml", "[profile.fast]\ninherits = \"release\"\n")
            .unwrap();
        let long = MINIMAL.replace("\"release\"", "\"slow\"");
        let e = Matrix::new("m.toml", &long, &[])
            .unwrap()
            .check_profiles("m.toml", "")
            .unwrap_err();
        assert!(
            e.contains("[[long]] `full` profile: no cargo profile `slow`"),
            "{e}"
        );
    }

    #[test]
    fn a_row_runs_the_stencil_free_tests_of_a_suite_once_per_rust_target() {
        let suite = |reads_stencils, free: Option<&str>| Suite {
            package: "p".into(),
            reads_stencils,
            stencil_free: free.map(str::to_string),
        };
        let free = suite(true, Some("test(/interp$/)"));
        assert_eq!(free.filter(true).unwrap(), "package(=p)");
        assert_eq!(
            free.filter(false).unwrap(),
            "package(=p) & not (test(/interp$/))"
        );
        assert_eq!(suite(true, None).filter(false).unwrap(), "package(=p)");
        assert_eq!(suite(false, None).filter(true).unwrap(), "package(=p)");
        assert_eq!(suite(false, None).filter(false), None);
        let with_free = MINIMAL.replace(
            "package = \"p\"\n[check]",
            "package = \"p\"\nstencil_free = \"test(x)\"\n[check]",
        );
        let m = Matrix::new("m.toml", &with_free, &[]).unwrap();
        assert_eq!(m.suites["a"].stencil_free.as_deref(), Some("test(x)"));
        let contradictory =
            with_free.replace("stencil_free", "reads_stencils = false\nstencil_free");
        let e = Matrix::new("m.toml", &contradictory, &[]).unwrap_err();
        assert!(e.contains("m.toml") && e.contains("[suites.a]"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_key() {
        let bad = MINIMAL.replace("suites = [\"a\"]", "suites = [\"b\"]");
        let e = Matrix::new("m.toml", &bad, &[]).unwrap_err();
        assert!(
            e.contains("m.toml") && e.contains("unknown suite `b`"),
            "{e}"
        );
        let bad = MINIMAL.replace("package = \"p\"\n[check]", "packages = 1\n[check]");
        let e = Matrix::new("m.toml", &bad, &[]).unwrap_err();
        assert!(e.contains("packages"), "{e}");
        // Rows are not written here any more: a [[row]] is an unknown key.
        let e = Matrix::new("m.toml", &format!("{MINIMAL}[[row]]\n"), &[]).unwrap_err();
        assert!(e.contains("row"), "{e}");
    }
}
