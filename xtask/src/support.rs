//! `cargo xtask support-report`: one page, Markdown and JSON (`docs/support/`), saying for
//! the current tree what each target is (object format, architecture, ABI), how the test
//! matrix executes its stencils, each generated set's counts and digest, the tests a matrix
//! run ran and passed per row (from `cargo xtask test-matrix --json` output given with
//! `--matrix FILE`; without it, "not run") and the target's known limits.
//!
//! Everything is derived: the target files (`targets/*.toml`), the generated crates'
//! `stencil-set.json` sidecars of every set `build-stencils` builds, the matrix report, and
//! the limit rules of [`facts`]. The output is deterministic (targets sorted by triple, sets
//! in build order, no timestamp unless `--date` passes one), so it is committed and
//! `--check` can say whether it is current. [`lists`] checks the hand-written target lists
//! of the docs against the same facts.

mod facts;
pub mod lists;
mod render;

use crate::sidecar::{Counts, Sidecar};
use cpjit_targets_schema::TargetFile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Options of `cargo xtask support-report`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Options {
    /// A `cargo xtask test-matrix --json` report (its stdout, saved) to take the tests run
    /// and passed per row from [default: none; the report says "not run"].
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// A date (any text) to print in the report; without it the report has none, so it is
    /// the same for the same tree.
    #[arg(long, value_name = "TEXT")]
    pub date: Option<String>,
    /// Where to write support-report.md and support-report.json [default: docs/support in
    /// the kit checkout].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write nothing; fail if the files in the output directory differ from what would be
    /// written, or if a hand-written target list disagrees with the target files.
    #[arg(long)]
    pub check: bool,
}

/// The output directory, relative to the kit checkout.
pub const OUT_DIR: &str = "docs/support";
/// The report's file names, without extension.
const STEM: &str = "support-report";

/// The report (its JSON form; the Markdown page is rendered from it).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The JSON layout's version.
    pub format: u32,
    /// The workspace's version (`[workspace.package] version`).
    pub kit_version: String,
    pub date: Option<String>,
    /// The matrix report the test counts come from (its file name), or `None`: not run.
    pub matrix: Option<MatrixSummary>,
    pub targets: Vec<TargetReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MatrixSummary {
    pub file: String,
    pub passed: u64,
    pub failed: u64,
    pub ok: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct TargetReport {
    pub triple: String,
    /// `elf`, `macho`, `coff` (the target file's value).
    pub format: String,
    pub arch: String,
    pub abi: String,
    /// `preserve_none` or `c` (the target file's value).
    pub op_calling_convention: String,
    pub reserved_registers: Vec<String>,
    pub execution: ExecutionReport,
    pub stencil_sets: Vec<SetReport>,
    pub tests: TestsReport,
    pub limits: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExecutionReport {
    /// `native`, `qemu`, `wine`, `host-abi` (the `[test]` table's), or `none`.
    pub kind: String,
    pub rust_target: Option<String>,
    pub check_target: Option<String>,
    /// The phrase of the README's table ([`facts::how_executed`]).
    pub how: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct SetReport {
    /// The directory of the set's crates, relative to the checkout (`stencils`).
    pub dir: String,
    pub template_set: String,
    pub counts: CountsReport,
    pub inputs_digest: String,
    /// `sha256:<hex>` of each generated file.
    pub files: BTreeMap<String, String>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct CountsReport {
    pub stencils: u64,
    pub code_bytes: u64,
    /// Bytes of `code_bytes` in cold parts (laid after a trace's hot code).
    pub cold_bytes: u64,
    pub data_bytes: u64,
    pub holes: u64,
    pub elided_jumps: u64,
    /// Stencils that continue; `elided_jumps` of them fall through.
    pub continuing: u64,
}

impl From<Counts> for CountsReport {
    fn from(c: Counts) -> Self {
        CountsReport {
            stencils: c.stencils,
            code_bytes: c.code_bytes,
            cold_bytes: c.cold_bytes,
            data_bytes: c.data_bytes,
            holes: c.holes,
            elided_jumps: c.elided_jumps,
            continuing: c.continuing,
        }
    }
}

/// A row's results; the numbers are `None` when the matrix report has no such row.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TestsReport {
    /// `passed`, `failed` or `not run`.
    pub status: String,
    /// How the row was executed in that run (`--native` runs differ from the target file).
    pub executed: Option<String>,
    pub run: Option<u64>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub ignored: Option<u64>,
    pub problems: Vec<String>,
    /// The compile-only check of the target's `check_target`: `ok`, `failed` or `not run`.
    pub check: Option<String>,
}

/// What `cargo xtask test-matrix --json` prints (`matrix/report.rs`), as far as read here.
#[derive(Deserialize)]
struct MatrixJson {
    rows: Vec<MatrixRow>,
    checks: Vec<MatrixCheck>,
    passed: u64,
    failed: u64,
    ok: bool,
}

#[derive(Deserialize)]
struct MatrixRow {
    target: String,
    stencils: Option<u64>,
    executed: String,
    tests: u64,
    passed: u64,
    failed: u64,
    ignored: u64,
    ok: bool,
    problems: Vec<String>,
}

#[derive(Deserialize)]
struct MatrixCheck {
    target: String,
    ok: bool,
}

pub fn run(opts: &Options) -> Result<(), String> {
    let root = crate::util::root();
    let targets = cpjit_targets_schema::load_all(&root.join("targets"))
        .map_err(|errors| errors.join("\n"))?;
    let matrix = match &opts.matrix {
        Some(file) => Some((file_name(file), read_matrix(file)?)),
        None => None,
    };
    let report = build(&root, &targets, matrix, opts.date.clone())?;
    let json = serde_json::to_string_pretty(&report)
        .map_err(|e| format!("support report as JSON: {e}"))?
        + "\n";
    let md = render::markdown(&report);
    let out = opts.out.clone().unwrap_or_else(|| root.join(OUT_DIR));
    let files = [
        (out.join(format!("{STEM}.md")), md),
        (out.join(format!("{STEM}.json")), json),
    ];
    let mut problems = lists::check_docs(&root, &targets);
    if opts.check {
        for (path, text) in &files {
            if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
                problems.push(format!(
                    "{}: missing or stale; run cargo xtask support-report (with the same \
                     --matrix and --date as the committed one) and commit it",
                    path.display()
                ));
            }
        }
    } else {
        std::fs::create_dir_all(&out)
            .map_err(|e| format!("{}: cannot create: {e}", out.display()))?;
        for (path, text) in &files {
            std::fs::write(path, text)
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            eprintln!("support-report: wrote {}", path.display());
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

fn read_matrix(file: &Path) -> Result<MatrixJson, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("--matrix {}: cannot read: {e}", file.display()))?;
    parse_matrix(&file.display().to_string(), &text)
}

fn parse_matrix(file: &str, text: &str) -> Result<MatrixJson, String> {
    serde_json::from_str(text).map_err(|e| {
        format!(
            "--matrix {file}: not a `cargo xtask test-matrix --json` report ({e}); pass what \
             that command prints on stdout"
        )
    })
}

/// The workspace's version, from the root `Cargo.toml`.
fn kit_version(root: &Path) -> Result<String, String> {
    crate::util::toml_string(
        &root.join("Cargo.toml"),
        &["workspace", "package", "version"],
    )
}

/// Gathers the report: `targets` sorted by triple, the sidecars of every generated set, and
/// the matrix report (`(file name, report)`) if any.
fn build(
    root: &Path,
    targets: &[TargetFile],
    matrix: Option<(String, MatrixJson)>,
    date: Option<String>,
) -> Result<Report, String> {
    let sets = crate::build_stencils::kit_sets(root)?;
    let mut errors = Vec::new();
    let mut reports = Vec::new();
    for t in targets {
        let mut stencil_sets = Vec::new();
        for set in &sets {
            let crate_dir = set.out.join(&t.triple);
            match Sidecar::load(&crate_dir, &t.triple) {
                Ok(s) => stencil_sets.push(SetReport {
                    dir: relative(root, &set.out),
                    template_set: s.template_set,
                    counts: s.counts.into(),
                    inputs_digest: s.inputs_digest,
                    files: s.files,
                }),
                Err(e) => errors.push(e),
            }
        }
        let test = t.test.as_ref();
        reports.push(TargetReport {
            triple: t.triple.clone(),
            format: t.format.name().to_string(),
            arch: t.arch.name().to_string(),
            abi: t.abi.name().to_string(),
            op_calling_convention: facts::op_convention_key(t.op_calling_convention).into(),
            reserved_registers: t.reserved_registers.clone(),
            execution: ExecutionReport {
                kind: test.map_or("none", |x| x.execution.name()).to_string(),
                rust_target: test.map(|x| x.rust_target.clone()),
                check_target: test.and_then(|x| x.check_target.clone()),
                how: facts::how_executed(t, targets).unwrap_or_else(|| "not executed".into()),
            },
            stencil_sets,
            tests: TestsReport {
                status: "not run".into(),
                ..Default::default()
            },
            limits: facts::limits(t),
        });
    }
    let matrix = match matrix {
        Some((file, m)) => {
            // The full-system rows run a package's tests, not a target's stencils.
            let system: Vec<String> = crate::matrix::Matrix::load(root)
                .map(|m| m.system.into_iter().map(|s| s.name).collect())
                .unwrap_or_default();
            errors.extend(apply_matrix(&file, &m, &system, &mut reports));
            Some(MatrixSummary {
                file,
                passed: m.passed,
                failed: m.failed,
                ok: m.ok,
            })
        }
        None => None,
    };
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    Ok(Report {
        format: 1,
        kit_version: kit_version(root)?,
        date,
        matrix,
        targets: reports,
    })
}

/// Puts each matrix row's results on its target; returns what does not fit this tree.
fn apply_matrix(
    file: &str,
    m: &MatrixJson,
    system: &[String],
    reports: &mut [TargetReport],
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut seen = Vec::new();
    for row in m.rows.iter().filter(|r| !system.contains(&r.target)) {
        if seen.contains(&&row.target) {
            errors.push(format!(
                "--matrix {file}: row `{}` twice; pass one run's report",
                row.target
            ));
            continue;
        }
        seen.push(&row.target);
        let Some(r) = reports.iter_mut().find(|r| r.triple == row.target) else {
            errors.push(format!(
                "--matrix {file}: row `{}` has no target file in targets/: the report is from \
                 another tree; rerun cargo xtask test-matrix --json on this one",
                row.target
            ));
            continue;
        };
        // The default set is the one the matrix counts (`matrix::stencil_count`).
        let ours = r.stencil_sets.first().map(|s| s.counts.stencils);
        if let (Some(theirs), Some(ours)) = (row.stencils, ours) {
            if theirs != ours {
                errors.push(format!(
                    "--matrix {file}: row `{}` ran {theirs} stencils, but this tree's set has \
                     {ours}: the report is from another tree; rerun cargo xtask test-matrix \
                     --json on this one",
                    row.target
                ));
            }
        }
        r.tests = TestsReport {
            status: if row.ok { "passed" } else { "failed" }.into(),
            executed: Some(row.executed.clone()),
            run: Some(row.tests),
            passed: Some(row.passed),
            failed: Some(row.failed),
            ignored: Some(row.ignored),
            problems: row.problems.clone(),
            check: None,
        };
    }
    for r in reports.iter_mut() {
        let Some(c) = &r.execution.check_target else {
            continue;
        };
        r.tests.check = Some(
            match m.checks.iter().find(|k| &k.target == c) {
                Some(k) if k.ok => "ok",
                Some(_) => "failed",
                None => "not run",
            }
            .into(),
        );
    }
    errors
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{CheckResult, Counts as MatrixCounts, Report as MatrixReport, RowResult};
    use std::time::Duration;

    fn kit() -> (PathBuf, Vec<TargetFile>) {
        let root = crate::util::root();
        let targets = cpjit_targets_schema::load_all(&root.join("targets")).unwrap();
        (root, targets)
    }

    /// What `test-matrix --json` prints for one passed row of `triple` (and its check).
    fn matrix_json(triple: &str, stencils: u64, check: Option<&str>) -> String {
        MatrixReport {
            rows: vec![RowResult {
                triple: triple.into(),
                stencils: Some(stencils),
                executed: "native".into(),
                counts: MatrixCounts {
                    run: 12,
                    passed: 11,
                    failed: 1,
                    ignored: 2,
                },
                time: Duration::from_secs(3),
                problems: vec!["1 test failed".into()],
            }],
            checks: check
                .map(|c| CheckResult {
                    target: c.into(),
                    packages: vec!["cpjit-runtime".into()],
                    time: Duration::from_secs(1),
                    error: None,
                })
                .into_iter()
                .collect(),
            builds: vec![],
            total_time: Duration::from_secs(4),
        }
        .json()
        .unwrap()
    }

    #[test]
    fn without_a_matrix_every_row_is_not_run_and_has_no_numbers() {
        let (root, targets) = kit();
        let report = build(&root, &targets, None, None).unwrap();
        assert_eq!(report.targets.len(), targets.len());
        let sets = crate::build_stencils::kit_sets(&root).unwrap().len();
        for t in &report.targets {
            assert_eq!(t.tests.status, "not run");
            assert!(t.tests.run.is_none() && t.tests.passed.is_none());
            assert_eq!(t.stencil_sets.len(), sets, "{}", t.triple);
            assert!(t.stencil_sets[0].inputs_digest.starts_with("sha256:"));
        }
        let md = render::markdown(&report);
        assert!(md.contains("| not run |"), "{md}");
        assert!(!md.contains("date"), "no date unless passed: {md}");
        // Deterministic: the same tree gives the same bytes.
        let again = render::markdown(&build(&root, &targets, None, None).unwrap());
        assert_eq!(md, again);
    }

    #[test]
    fn a_matrix_report_gives_each_row_its_numbers_and_others_stay_not_run() {
        let (root, targets) = kit();
        let base = build(&root, &targets, None, None).unwrap();
        let first = &base.targets[0];
        let with_check = targets
            .iter()
            .find(|t| t.test.as_ref().is_some_and(|x| x.check_target.is_some()))
            .unwrap();
        let check = with_check.test.as_ref().unwrap().check_target.as_deref();
        let text = matrix_json(&first.triple, first.stencil_sets[0].counts.stencils, check);
        let m = parse_matrix("m.json", &text).unwrap();
        let report = build(&root, &targets, Some(("m.json".into(), m)), None).unwrap();
        let row = &report.targets[0].tests;
        assert_eq!(
            (row.status.as_str(), row.run, row.passed, row.failed),
            ("failed", Some(12), Some(11), Some(1))
        );
        assert!(report.targets[1..].iter().all(|t| t.tests.run.is_none()));
        let checked = report
            .targets
            .iter()
            .find(|t| t.triple == with_check.triple)
            .unwrap();
        assert_eq!(checked.tests.check.as_deref(), Some("ok"));
        let md = render::markdown(&report);
        assert!(md.contains("m.json"), "{md}");
        // The fixture's row ran natively, which its target file does not say: shown.
        if targets[0].test.as_ref().unwrap().execution != cpjit_targets_schema::Execution::Native {
            assert!(md.contains("| failed (run as native)"), "{md}");
        }
    }

    #[test]
    fn a_matrix_report_of_another_tree_is_refused_naming_the_row() {
        let (root, targets) = kit();
        let t = &targets[0].triple;
        let m = parse_matrix("m.json", &matrix_json(t, 1_000_000, None)).unwrap();
        let e = build(&root, &targets, Some(("m.json".into(), m)), None).unwrap_err();
        assert!(e.contains(t) && e.contains("another tree"), "{e}");
        let m = parse_matrix("m.json", &matrix_json("nonesuch-triple", 1, None)).unwrap();
        let e = build(&root, &targets, Some(("m.json".into(), m)), None).unwrap_err();
        assert!(e.contains("`nonesuch-triple` has no target file"), "{e}");
        let e = parse_matrix("m.json", "{\"rows\": 1}").err().unwrap();
        assert!(
            e.contains("not a `cargo xtask test-matrix --json` report"),
            "{e}"
        );
    }

    #[test]
    fn the_committed_report_is_current() {
        // Only the no-matrix, no-date form can be regenerated here; a committed report made
        // from a matrix run is checked by `cargo xtask support-report --check --matrix F`.
        let (root, targets) = kit();
        let json = root.join(OUT_DIR).join(format!("{STEM}.json"));
        let committed = std::fs::read_to_string(&json).unwrap_or_default();
        if committed.contains("\"matrix\": {") || committed.contains("\"date\": \"") {
            return;
        }
        let report = build(&root, &targets, None, None).unwrap();
        let expected = serde_json::to_string_pretty(&report).unwrap() + "\n";
        assert!(
            committed == expected,
            "{} is missing or stale: run cargo xtask support-report and commit docs/support/",
            json.display()
        );
    }
}
