//! `cargo xtask test-matrix`: runs each target's suites with that target's stencils and
//! prints one result row per target. The rows are the target files (`targets/*.toml`);
//! `ci/matrix.toml` holds the rest (suites, build profile, checks, long runs, self-test).
//!
//! Each Rust target's test binaries are built once as a nextest archive; each row runs the
//! archive with `CPJIT_STENCILS=<triple>` through the Rust target's cargo runner (qemu,
//! wine) and reads the results from nextest's JUnit report. The wine row runs with the
//! wine server held up (`wine.rs`) and with one wine log per process; a failed row's
//! reports and wine logs are kept under `target/nextest/matrix/`.

mod config;
mod nextest;
#[cfg(test)]
mod own_process;
mod report;
mod select;
mod system;
mod wine;

pub use config::{LongRun, Matrix};
pub use nextest::{junit_path, parse_junit, Outcome, PROFILE};
pub use report::{Counts, Report};
pub use select::host_triple;
use select::{check_targets, select_rows, stencil_free_rows};
pub use system::kernel_dir;

use crate::targets::Execution;
use config::Row;
pub use report::{ArchiveBuild, CheckResult, RowResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `cargo xtask test-matrix`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Options {
    /// Run only the row of stencil target T, and only its compile-only check (repeatable).
    #[arg(long = "target", value_name = "T")]
    pub targets: Vec<String>,
    /// Run only suite S of ci/matrix.toml (repeatable).
    #[arg(long = "suite", value_name = "S")]
    pub suites: Vec<String>,
    /// Run on this host without emulators: the rows whose stencils this host's own
    /// processes can run (what the native GitHub runners do).
    #[arg(long)]
    pub native: bool,
    /// Skip the compile-only `cargo check` targets.
    #[arg(long)]
    pub no_check: bool,
    /// Break one row's stencils (CPJIT_BREAK; the first host-abi row, or --target) and
    /// check that exactly that row fails.
    #[arg(long)]
    pub self_test: bool,
    /// Print the result as JSON on stdout (progress goes to stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(opts: &Options) -> Result<(), String> {
    if opts.self_test {
        return self_test(opts);
    }
    let report = run_matrix(opts, &BTreeMap::new())?;
    print_report(&report, opts.json)?;
    if report.passed() {
        Ok(())
    } else {
        Err("test matrix failed".into())
    }
}

fn print_report(report: &Report, json: bool) -> Result<(), String> {
    if json {
        println!("{}", report.json()?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

/// Runs the matrix with `CPJIT_BREAK=<broken row>` on the rows whose process can run the
/// broken stencils ([`select::self_test_rows`]) and checks that exactly that row fails.
pub fn self_test(opts: &Options) -> Result<(), String> {
    let root = crate::util::root();
    let matrix = Matrix::load(&root)?;
    let host = host_triple()?;
    let broken = match opts.targets.first() {
        Some(t) => t.clone(),
        None => matrix.self_test_row(&host)?.triple.clone(),
    };
    let facts = crate::targets::load_all(&root.join("targets"))?;
    let broken_facts = facts
        .iter()
        .find(|f| f.triple == broken)
        .ok_or_else(|| format!("self-test: no target file for {broken}"))?;
    let mut o = opts.clone();
    o.targets.clear();
    o.no_check = true;
    o.targets = select::self_test_rows(&select_rows(&matrix, &o, &host)?, broken_facts)?;
    if o.suites.is_empty() {
        o.suites = matrix.self_test_suites.clone();
    }
    eprintln!(
        "self-test: breaking {broken} (CPJIT_BREAK) in the rows whose process can run it ({}); \
         expecting exactly that row to fail",
        o.targets.join(", ")
    );
    let env = BTreeMap::from([("CPJIT_BREAK".to_string(), broken.clone())]);
    let report = run_matrix(&o, &env)?;
    print_report(&report, opts.json)?;
    check_self_test(&report, &broken)
}

fn check_self_test(report: &Report, broken: &str) -> Result<(), String> {
    // Rows that could not run prove nothing either way: say why, not which rows failed.
    let unbuilt: Vec<String> = report
        .builds
        .iter()
        .filter_map(|b| b.error.as_ref().map(|e| format!("{}: {e}", b.rust_target)))
        .collect();
    if !unbuilt.is_empty() {
        return Err(format!(
            "self-test: proves nothing, a test archive did not build ({})",
            unbuilt.join("; ")
        ));
    }
    if report.rows.iter().all(|r| r.triple != broken) {
        return Err(format!("self-test: row {broken} did not run"));
    }
    let failed: Vec<&str> = report
        .rows
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.triple.as_str())
        .collect();
    // A row that failed without a failed test failed for another reason: name it.
    let reasons: Vec<String> = report
        .rows
        .iter()
        .filter(|r| !r.passed() && r.counts.failed == 0)
        .filter_map(|r| {
            let first = r.problems.first()?.lines().next()?;
            Some(format!(
                "; {} failed without a failed test: {first}",
                r.triple
            ))
        })
        .collect();
    // A broken row counts only if a test failed: a crash or missing crate proves nothing.
    let caught = report
        .rows
        .iter()
        .any(|r| r.triple == broken && r.counts.failed > 0);
    if failed == [broken] && caught {
        println!("self-test: ok, exactly {broken} failed");
        Ok(())
    } else {
        Err(format!(
            "self-test: expected exactly {broken} to fail with failed tests, but failed rows are [{}]{}",
            failed.join(", "),
            reasons.concat()
        ))
    }
}

/// Builds and runs the selected rows; `extra_env` goes to every test.
pub fn run_matrix(opts: &Options, extra_env: &BTreeMap<String, String>) -> Result<Report, String> {
    let root = crate::util::root();
    run_matrix_in(&root, &Matrix::load(&root)?, opts, extra_env)
}

/// [`run_matrix`] of `matrix` in checkout `root` (its target files' cargo settings, its
/// stencil crates, its `target/`).
fn run_matrix_in(
    root: &Path,
    matrix: &Matrix,
    opts: &Options,
    extra_env: &BTreeMap<String, String>,
) -> Result<Report, String> {
    let start = Instant::now();
    let root = root.to_path_buf();
    let host = host_triple()?;
    let rows = select_rows(matrix, opts, &host)?;
    for s in &opts.suites {
        if !matrix.suites.contains_key(s) {
            return Err(format!(
                "unknown suite `{s}` (ci/matrix.toml has: {})",
                matrix.suites.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let suites: Vec<(&String, &config::Suite)> = matrix
        .suites
        .iter()
        .filter(|(name, _)| opts.suites.is_empty() || opts.suites.contains(name))
        .collect();
    let mut report = Report::default();

    // One archive per Rust target, shared by every row that runs it.
    let mut archives: BTreeMap<&str, Result<PathBuf, String>> = BTreeMap::new();
    for row in &rows {
        let target = row.rust_target.as_str();
        if archives.contains_key(target) {
            continue;
        }
        // The packages of the suites any selected row of this Rust target runs.
        let packages: Vec<String> = suites
            .iter()
            .filter(|(name, _)| rows.iter().any(|r| r.rust_target == target && r.runs(name)))
            .map(|(_, s)| s.package.clone())
            .collect();
        if packages.is_empty() {
            // Only with `--suite`: no row of this Rust target runs a selected suite.
            archives.insert(target, Err(format!("no selected suite runs on {target}")));
            continue;
        }
        eprintln!(
            "matrix: building the test archive for {target} ({})",
            packages.join(", ")
        );
        let t = Instant::now();
        let built = nextest::archive(&root, target, &host, &matrix.profile, &packages);
        report.builds.push(ArchiveBuild {
            rust_target: target.to_string(),
            time: t.elapsed(),
            cpu: built.as_ref().map_or(0.0, |(_, cpu)| *cpu),
            error: built.as_ref().err().cloned(),
        });
        archives.insert(target, built.map(|(path, _)| path));
    }

    let stencil_free_row = stencil_free_rows(&rows);
    let last_rows = last_row_of_each(&rows);
    for (i, row) in rows.iter().enumerate() {
        // Its archive is written, never read again, once its Rust target's last row ran.
        if i > 0 && last_rows.get(rows[i - 1].rust_target.as_str()) == Some(&(i - 1)) {
            remove_archive(&archives[rows[i - 1].rust_target.as_str()]);
        }
        let runs_stencil_free = stencil_free_row[row.rust_target.as_str()] == row.triple;
        let row_suites: Vec<RowSuite> = suites
            .iter()
            .filter(|(name, _)| row.runs(name))
            .filter_map(|(name, s)| {
                s.filter(runs_stencil_free).map(|filter| RowSuite {
                    name,
                    package: &s.package,
                    filter,
                })
            })
            .collect();
        if row_suites.is_empty() {
            // Only with `--suite`: every selected suite is not one of the row's
            // (`[test] suites`) or ignores CPJIT_STENCILS and so runs once per Rust target,
            // in another row.
            eprintln!(
                "matrix: {}: nothing to run (the selected suites are not the row's, or run once for {}, in the row of {})",
                row.triple,
                row.rust_target,
                stencil_free_row[row.rust_target.as_str()]
            );
            continue;
        }
        let result = run_row(
            &root,
            row,
            &row_suites,
            &archives[row.rust_target.as_str()],
            (&matrix.row_env, extra_env),
        );
        announce(&result);
        report.rows.push(result);
    }
    if let Some(last) = rows.last() {
        remove_archive(&archives[last.rust_target.as_str()]);
    }

    for system in system::selected(&matrix.system, opts) {
        let result = system::run(&root, &matrix.profile, system);
        announce(&result);
        report.rows.push(result);
    }

    for target in check_targets(opts, &rows) {
        report
            .checks
            .push(check(&root, &target, &matrix.check_packages));
    }
    report.total_time = start.elapsed();
    Ok(report)
}

/// The index of each Rust target's last row in `rows`.
fn last_row_of_each(rows: &[Row]) -> BTreeMap<&str, usize> {
    let mut last = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        last.insert(row.rust_target.as_str(), i);
    }
    last
}

/// Deletes a test archive that no row will read again: each run writes its own, the
/// test binaries stay in `target/` (cargo's build), and until the self-test's archive is
/// written the matrix's all stay on a disk that may be filling (`ci/disk.rs`).
fn remove_archive(archive: &Result<PathBuf, String>) {
    if let Ok(path) = archive {
        if let Err(e) = std::fs::remove_file(path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("matrix: cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// Says how a row ended, on stderr (its triple or name: the same as `row.triple`).
fn announce(result: &RowResult) {
    eprintln!(
        "matrix: {} {} ({} passed, {} failed)",
        result.triple,
        if result.passed() { "ok" } else { "FAILED" },
        result.counts.passed,
        result.counts.failed
    );
}

/// A suite as one row runs it: the nextest filterset of its tests there.
struct RowSuite<'a> {
    name: &'a String,
    package: &'a str,
    filter: String,
}

fn run_row(
    root: &Path,
    row: &Row,
    suites: &[RowSuite],
    archive: &Result<PathBuf, String>,
    (row_env, extra_env): (&BTreeMap<String, String>, &BTreeMap<String, String>),
) -> RowResult {
    let mut result = RowResult {
        triple: row.triple.clone(),
        executed: describe(row),
        ..Default::default()
    };
    match stencil_count(root, &row.triple) {
        Ok(n) => result.stencils = n,
        Err(e) => result.problems.push(e),
    }
    let archive = match archive {
        Ok(a) => a,
        Err(e) => {
            result.problems.push(e.clone());
            return result;
        }
    };
    let start = Instant::now();
    let mut env = row_env.clone();
    env.extend(extra_env.clone());
    env.insert("CPJIT_STENCILS".into(), row.triple.clone());
    let wine_logs = (row.execution == Execution::Wine).then(|| wine::log_dir(root, &row.triple));
    clear_evidence(root, wine_logs.as_deref());
    let hold = match &wine_logs {
        Some(dir) => {
            env.insert("CPJIT_WINE_LOG_DIR".into(), dir.display().to_string());
            match hold_wine_server(root, row, &env, dir) {
                Ok(hold) => Some(hold),
                Err(e) => {
                    result.problems.push(e);
                    keep_evidence(root, &mut result, wine_logs.as_deref());
                    return result;
                }
            }
        }
        None => None,
    };
    let filters: Vec<&str> = suites.iter().map(|s| s.filter.as_str()).collect();
    let named: Vec<(&String, &str)> = suites.iter().map(|s| (s.name, s.package)).collect();
    match nextest::run_archive(root, archive, &filters, &env) {
        Ok(outcome) => {
            judge(&mut result, &named, &outcome);
            // nextest extracts the archive into the temporary directory for each row.
            let saw_no_space = outcome.log.contains(crate::ci::disk::NO_SPACE);
            let dirs = crate::ci::disk::written_dirs(root);
            if !result.passed() {
                let what = format!("row {}", row.triple);
                result
                    .problems
                    .extend(crate::ci::disk::full_disk_line(&what, &dirs, saw_no_space));
            }
        }
        Err(e) => result.problems.push(e),
    }
    if let Some(hold) = hold {
        hold.release();
    }
    result.time = start.elapsed();
    keep_evidence(root, &mut result, wine_logs.as_deref());
    result
}

/// Starts the hold of the wine server for a wine row, through the runner nextest uses.
fn hold_wine_server(
    root: &Path,
    row: &Row,
    env: &BTreeMap<String, String>,
    wine_logs: &Path,
) -> Result<wine::Hold, String> {
    let runner = wine::runner(root, &row.rust_target)?;
    wine::Hold::start(&runner, env, &wine_logs.join("hold.stderr"))
}

/// Where a failed row's reports are kept: `target/nextest/matrix/failed/<triple>/`.
fn failed_dir(root: &Path, triple: &str) -> PathBuf {
    root.join("target/nextest")
        .join(PROFILE)
        .join("failed")
        .join(triple)
}

/// Removes what an earlier row left in the shared places: the nextest reports (so that
/// what is there after the row is the row's own) and the row's wine logs. The evidence of
/// an earlier failure (`failed/<triple>/`) stays until the row fails again: a red
/// `cargo xtask ci` runs the wine row once more in its self-test.
fn clear_evidence(root: &Path, wine_logs: Option<&Path>) {
    let _ = std::fs::remove_file(junit_path(root));
    let _ = std::fs::remove_file(nextest::log_path(root));
    if let Some(dir) = wine_logs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A failed row's JUnit report and nextest log are copied, and its wine logs moved, to
/// `failed/<triple>/` (replacing an earlier failure's), where later rows cannot overwrite
/// them, and a problem names them; a passed row's wine logs are deleted.
fn keep_evidence(root: &Path, result: &mut RowResult, wine_logs: Option<&Path>) {
    if result.passed() {
        if let Some(dir) = wine_logs {
            let _ = std::fs::remove_dir_all(dir);
        }
        return;
    }
    let kept = failed_dir(root, &result.triple);
    let _ = std::fs::remove_dir_all(&kept);
    let mut copied = Vec::new();
    let mut problems = Vec::new();
    if let Err(e) = std::fs::create_dir_all(&kept) {
        problems.push(format!("cannot create {}: {e}", kept.display()));
    } else {
        for (from, name) in [
            (junit_path(root), "junit.xml"),
            (nextest::log_path(root), "nextest.log"),
        ] {
            if !from.is_file() {
                continue;
            }
            match std::fs::copy(&from, kept.join(name)) {
                Ok(_) => copied.push(name),
                Err(e) => problems.push(format!("cannot copy {}: {e}", from.display())),
            }
        }
    }
    let mut kept_line = if copied.is_empty() {
        "no nextest report was written".to_string()
    } else {
        format!("reports kept in {} ({})", kept.display(), copied.join(", "))
    };
    if let Some(dir) = wine_logs {
        let moved = kept.join("wine-logs");
        let logs = match std::fs::rename(dir, &moved) {
            Ok(()) => moved,
            Err(_) => dir.to_path_buf(),
        };
        kept_line += &format!(
            "; wine logs, one per wine process with WINEDEBUG=-all,err+all, in {}",
            logs.display()
        );
    }
    result.problems.push(kept_line);
    result.problems.extend(problems);
}

/// Turns one nextest run into the row's counts and problems: any failed or crashed test,
/// a failing exit without a report, and a suite that ran no tests fail the row.
fn judge(result: &mut RowResult, suites: &[(&String, &str)], outcome: &nextest::RunOutcome) {
    let Some(cases) = &outcome.cases else {
        result.problems.push(format!(
            "nextest wrote no JUnit report ({}); last lines:\n{}",
            outcome.status,
            tail(&outcome.log, 30)
        ));
        return;
    };
    for (name, package) in suites {
        let mut counts = Counts::default();
        for c in cases.iter().filter(|c| c.package() == *package) {
            counts.add_case(c.outcome);
        }
        if counts.run == 0 {
            result
                .problems
                .push(format!("suite {name}: no tests ran ({package})"));
        }
        result.counts.add(counts);
    }
    let failed: Vec<String> = cases
        .iter()
        .filter(|c| c.outcome == Outcome::Failed)
        .map(|c| format!("{}::{}", c.binary, c.name))
        .collect();
    if !failed.is_empty() {
        result
            .problems
            .push(format!("failed tests: {}", failed.join(", ")));
    } else if !outcome.status.success() {
        result.problems.push(format!(
            "nextest exited with {} without a failed test; last lines:\n{}",
            outcome.status,
            tail(&outcome.log, 30)
        ));
    }
    if !outcome.status.success() {
        eprintln!(
            "--- {} ({}), last lines of nextest:\n{}",
            result.triple,
            outcome.status,
            tail(&outcome.log, 120)
        );
    }
}

fn describe(row: &Row) -> String {
    let how = match row.execution {
        Execution::Native => "native".into(),
        e => format!("{}: {}", e.name(), row.rust_target),
    };
    match &row.suites {
        Some(s) => format!("{how} ({})", s.join(", ")),
        None => how,
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `cargo check -p <packages> --target <target>`.
fn check(root: &Path, target: &str, packages: &[String]) -> CheckResult {
    eprintln!(
        "matrix: cargo check {} --target {target}",
        packages.join(" ")
    );
    let start = Instant::now();
    let mut cmd = crate::util::cargo_in(root);
    cmd.args(["check", "--quiet", "--target", target]);
    for p in packages {
        cmd.args(["-p", p]);
    }
    let error = crate::util::run(&mut cmd).err();
    CheckResult {
        target: target.to_string(),
        packages: packages.to_vec(),
        time: start.elapsed(),
        error,
    }
}

/// Stencils in the generated crate `stencils/<triple>/`, from its typed sidecar. A missing
/// crate fails the row; a crate without a sidecar (written by toolchains before the
/// sidecar existed) runs with its count unknown, and says so.
pub fn stencil_count(root: &Path, triple: &str) -> Result<Option<u64>, String> {
    let dir = root.join("stencils").join(triple);
    for file in ["Cargo.toml", "src/lib.rs"] {
        if !dir.join(file).is_file() {
            return Err(format!(
                "stencil crate missing ({} has no {file}); run cargo xtask build-stencils",
                dir.display()
            ));
        }
    }
    if !dir.join(crate::sidecar::FILE).exists() {
        eprintln!(
            "matrix: {triple}: no {} yet; stencil count unknown",
            crate::sidecar::FILE
        );
        return Ok(None);
    }
    crate::sidecar::Sidecar::load(&dir, triple).map(|s| Some(s.counts.stencils))
}

#[cfg(test)]
mod tests {
    use super::*;

    use nextest::TestCase;

    fn case(binary: &str, outcome: Outcome) -> TestCase {
        TestCase {
            binary: binary.into(),
            name: "t".into(),
            outcome,
        }
    }

    fn outcome(code: i32, cases: Option<Vec<TestCase>>) -> nextest::RunOutcome {
        use std::os::unix::process::ExitStatusExt;
        nextest::RunOutcome {
            status: std::process::ExitStatus::from_raw(code << 8),
            cases,
            log: "log".into(),
        }
    }

    #[test]
    fn a_row_fails_on_failed_tests_missing_reports_and_empty_suites() {
        let (a, b) = ("a".to_string(), "b".to_string());
        let suites = [(&a, "pa"), (&b, "pb")];
        let judged = |o: nextest::RunOutcome| {
            let mut r = RowResult::default();
            judge(&mut r, &suites, &o);
            r
        };
        let ok = judged(outcome(
            0,
            Some(vec![
                case("pa", Outcome::Passed),
                case("pb::it", Outcome::Passed),
            ]),
        ));
        assert!(ok.passed() && ok.counts.run == 2, "{:?}", ok.problems);
        let failed = judged(outcome(
            100,
            Some(vec![
                case("pa", Outcome::Failed),
                case("pb", Outcome::Passed),
            ]),
        ));
        assert_eq!(failed.counts.failed, 1);
        assert!(failed.problems[0].contains("failed tests: pa::t"));
        let crashed = judged(outcome(101, None));
        assert!(crashed.problems[0].contains("no JUnit report"));
        let empty = judged(outcome(0, Some(vec![case("pa", Outcome::Passed)])));
        assert!(empty.problems[0].contains("suite b: no tests ran"));
        let status_only = judged(outcome(
            1,
            Some(vec![
                case("pa", Outcome::Passed),
                case("pb", Outcome::Passed),
            ]),
        ));
        assert!(status_only.problems[0].contains("without a failed test"));
    }

    /// A failed row's JUnit report, nextest log and wine logs survive the rows after it
    /// (which rewrite the shared reports) and a passing rerun of the row, and the row's
    /// problems say where they are; a passed row leaves no wine logs behind.
    #[test]
    fn a_failed_row_keeps_its_reports_and_names_its_wine_logs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let wine_logs = wine::log_dir(root, "t-wine");
        let write_reports = |junit: &str| {
            std::fs::create_dir_all(&wine_logs).unwrap();
            std::fs::write(wine_logs.join("1-test.exe.log"), junit).unwrap();
            std::fs::write(junit_path(root), junit).unwrap();
            std::fs::write(nextest::log_path(root), "nextest log").unwrap();
        };
        let row = |problems: &[&str]| RowResult {
            triple: "t-wine".into(),
            problems: problems.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        write_reports("first");
        let mut failed = row(&["failed tests: a::b"]);
        keep_evidence(root, &mut failed, Some(&wine_logs));
        let kept = failed_dir(root, "t-wine");
        let read = |file: &str| std::fs::read_to_string(kept.join(file)).unwrap();
        assert_eq!(read("junit.xml"), "first");
        assert_eq!(read("nextest.log"), "nextest log");
        assert_eq!(read("wine-logs/1-test.exe.log"), "first");
        let named = failed.problems.last().unwrap();
        assert!(
            named.contains(&kept.display().to_string())
                && named.contains("junit.xml, nextest.log")
                && named.contains(&kept.join("wine-logs").display().to_string()),
            "{named}"
        );

        // Another row rewrites the shared reports; the kept ones stay.
        clear_evidence(root, None);
        assert!(!junit_path(root).exists() && kept.join("junit.xml").is_file());
        // A passing rerun of the row (the self-test's) keeps nothing of its own and
        // leaves the failure's evidence alone.
        clear_evidence(root, Some(&wine_logs));
        write_reports("second");
        let mut passed = row(&[]);
        keep_evidence(root, &mut passed, Some(&wine_logs));
        assert!(passed.passed() && !wine_logs.exists());
        assert_eq!(read("wine-logs/1-test.exe.log"), "first");
        // A new failure replaces the old evidence.
        write_reports("third");
        keep_evidence(root, &mut row(&["x"]), Some(&wine_logs));
        assert_eq!(read("junit.xml"), "third");
        assert_eq!(read("wine-logs/1-test.exe.log"), "third");

        // A row that failed before nextest wrote anything says so.
        clear_evidence(root, Some(&wine_logs));
        let mut early = row(&["hold failed"]);
        keep_evidence(root, &mut early, None);
        assert_eq!(early.problems[1], "no nextest report was written");
    }

    /// An archive goes once its Rust target's last row ran, rows of other targets between.
    #[test]
    fn each_archive_is_removed_after_its_last_row() {
        let row = |triple: &str, rust_target: &str| Row {
            triple: triple.into(),
            execution: Execution::Native,
            rust_target: rust_target.into(),
            check_target: None,
            suites: None,
        };
        let rows = [row("a", "x"), row("b", "y"), row("c", "x"), row("d", "y")];
        let last = last_row_of_each(&rows);
        assert_eq!(last, BTreeMap::from([("x", 2), ("y", 3)]));
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("x.tar.zst");
        std::fs::write(&archive, "archive").unwrap();
        remove_archive(&Ok(archive.clone()));
        assert!(!archive.exists());
        // Gone already, or never built: nothing to say.
        remove_archive(&Ok(archive));
        remove_archive(&Err("not built".into()));
    }

    #[test]
    fn self_test_requires_exactly_the_broken_row_to_fail_a_test() {
        let row = |t: &str, failed: u64, problems: &[&str]| RowResult {
            triple: t.into(),
            counts: Counts {
                run: 5,
                passed: 5 - failed,
                failed,
                ignored: 0,
            },
            problems: problems.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        let ok = Report {
            rows: vec![row("a", 0, &[]), row("b", 1, &["x"])],
            ..Default::default()
        };
        assert!(check_self_test(&ok, "b").is_ok());
        let none_failed = Report {
            rows: vec![row("a", 0, &[]), row("b", 0, &[])],
            ..Default::default()
        };
        assert!(check_self_test(&none_failed, "b").is_err());
        let both = Report {
            rows: vec![row("a", 1, &["x"]), row("b", 1, &["x"])],
            ..Default::default()
        };
        assert!(check_self_test(&both, "b").is_err());
        let crashed = Report {
            rows: vec![row("a", 0, &[]), row("b", 0, &["crash"])],
            ..Default::default()
        };
        assert!(check_self_test(&crashed, "b").is_err());
        // A row failing for another reason than its tests is named with that reason.
        let why = check_self_test(
            &Report {
                rows: vec![row("a", 0, &["no space\nmore"]), row("b", 1, &["x"])],
                ..Default::default()
            },
            "b",
        )
        .unwrap_err();
        assert!(
            why.ends_with("failed rows are [a, b]; a failed without a failed test: no space"),
            "{why}"
        );
        // An archive that did not build is the reason, whatever the rows say.
        let unbuilt = Report {
            rows: vec![row("a", 0, &["e"]), row("b", 0, &["e"])],
            builds: vec![report::ArchiveBuild {
                rust_target: "t".into(),
                time: std::time::Duration::ZERO,
                cpu: 0.0,
                error: Some("the disk is full".into()),
            }],
            ..Default::default()
        };
        assert_eq!(
            check_self_test(&unbuilt, "b").unwrap_err(),
            "self-test: proves nothing, a test archive did not build (t: the disk is full)"
        );
    }
}
