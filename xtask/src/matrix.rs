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
mod report;
mod wine;

pub use config::Matrix;
pub use nextest::{junit_path, parse_junit, Outcome, PROFILE};
pub use report::{Counts, Report};

use crate::targets::Execution;
use config::Row;
use cpjit_model::{Arch, Host, Os};
pub use report::{CheckResult, RowResult};
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

/// Runs the matrix with `CPJIT_BREAK=<broken row>` and checks that exactly that row fails.
pub fn self_test(opts: &Options) -> Result<(), String> {
    let matrix = Matrix::load(&crate::util::root())?;
    let broken = match opts.targets.first() {
        Some(t) => t.clone(),
        None => matrix.self_test_row()?.triple.clone(),
    };
    let mut o = opts.clone();
    o.targets.clear();
    o.no_check = true;
    if o.suites.is_empty() {
        o.suites = matrix.self_test_suites.clone();
    }
    eprintln!("self-test: breaking {broken} (CPJIT_BREAK); expecting exactly that row to fail");
    let env = BTreeMap::from([("CPJIT_BREAK".to_string(), broken.clone())]);
    let report = run_matrix(&o, &env)?;
    print_report(&report, opts.json)?;
    check_self_test(&report, &broken)
}

fn check_self_test(report: &Report, broken: &str) -> Result<(), String> {
    if report.rows.iter().all(|r| r.triple != broken) {
        return Err(format!("self-test: row {broken} did not run"));
    }
    let failed: Vec<&str> = report
        .rows
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.triple.as_str())
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
            "self-test: expected exactly {broken} to fail with failed tests, but failed rows are [{}]",
            failed.join(", ")
        ))
    }
}

/// Builds and runs the selected rows; `extra_env` goes to every test.
pub fn run_matrix(opts: &Options, extra_env: &BTreeMap<String, String>) -> Result<Report, String> {
    let start = Instant::now();
    let root = crate::util::root();
    let matrix = Matrix::load(&root)?;
    let host = host_triple()?;
    let rows = select_rows(&matrix, opts, &host)?;
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
    let packages: Vec<String> = suites.iter().map(|(_, s)| s.package.clone()).collect();
    let mut report = Report::default();

    // One archive per Rust target, shared by every row that runs it.
    let mut archives: BTreeMap<&str, Result<PathBuf, String>> = BTreeMap::new();
    for row in &rows {
        let target = row.rust_target.as_str();
        if archives.contains_key(target) {
            continue;
        }
        eprintln!(
            "matrix: building the test archive for {target} ({})",
            packages.join(", ")
        );
        let t = Instant::now();
        let built = nextest::archive(&root, target, &host, &matrix.profile, &packages);
        archives.insert(target, built);
        report.builds.push((target.to_string(), t.elapsed()));
    }

    let stencil_free_row = stencil_free_rows(&rows);
    for row in &rows {
        let runs_stencil_free = stencil_free_row[row.rust_target.as_str()] == row.triple;
        let row_suites: Vec<RowSuite> = suites
            .iter()
            .filter_map(|(name, s)| {
                s.filter(runs_stencil_free).map(|filter| RowSuite {
                    name,
                    package: &s.package,
                    filter,
                })
            })
            .collect();
        if row_suites.is_empty() {
            // Only with `--suite`: every selected suite ignores CPJIT_STENCILS and so runs
            // once per Rust target, in another row.
            eprintln!(
                "matrix: {}: nothing to run (the selected suites run once for {}, in the row of {})",
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
            extra_env,
        );
        eprintln!(
            "matrix: {} {} ({} passed, {} failed)",
            row.triple,
            if result.passed() { "ok" } else { "FAILED" },
            result.counts.passed,
            result.counts.failed
        );
        report.rows.push(result);
    }

    for target in check_targets(opts, &rows) {
        report.checks.push(check(&target, &matrix.check_packages));
    }
    report.total_time = start.elapsed();
    Ok(report)
}

/// The compile-only checks of a run: the `check_target`s of the selected `rows` (so
/// `--target` restricts them too), sorted and once each; none with `--no-check` or
/// `--native` (whose host need not have the other targets' standard libraries).
fn check_targets(opts: &Options, rows: &[Row]) -> Vec<String> {
    if opts.no_check || opts.native {
        return Vec::new();
    }
    let targets: std::collections::BTreeSet<&String> = rows
        .iter()
        .filter_map(|r| r.check_target.as_ref())
        .collect();
    targets.into_iter().cloned().collect()
}

/// A suite as one row runs it: the nextest filterset of its tests there.
struct RowSuite<'a> {
    name: &'a String,
    package: &'a str,
    filter: String,
}

/// For each Rust target, the row that runs the suites ignoring `CPJIT_STENCILS`: the row
/// of the Rust target's own stencils when selected, else its first row.
fn stencil_free_rows(rows: &[Row]) -> BTreeMap<&str, &str> {
    let mut chosen: BTreeMap<&str, &str> = BTreeMap::new();
    for row in rows.iter().rev() {
        let current = chosen.get(row.rust_target.as_str());
        if current.is_none_or(|t| *t != row.rust_target) {
            chosen.insert(&row.rust_target, &row.triple);
        }
    }
    chosen
}

/// The host's target triple (`rustc -vV`).
pub fn host_triple() -> Result<String, String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(&rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.to_string_lossy()))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| "`rustc -vV` printed no host line".to_string())
}

/// The rows to run. With `--native`, every row whose stencils a process of the host's own
/// target can run ([`Host::runs`]), executed by that process; otherwise the rows as the
/// target files define them, which need an x86_64 Linux host with qemu and wine.
fn select_rows(matrix: &Matrix, opts: &Options, host: &str) -> Result<Vec<Row>, String> {
    let known = || {
        matrix
            .rows
            .iter()
            .map(|r| r.triple.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for t in &opts.targets {
        if matrix.row(t).is_none() {
            return Err(format!("no target `{t}` (targets/*.toml has: {})", known()));
        }
    }
    let mut rows: Vec<Row> = matrix
        .rows
        .iter()
        .filter(|r| opts.targets.is_empty() || opts.targets.contains(&r.triple))
        .cloned()
        .collect();
    let this = Host::of_triple(host)
        .ok_or_else(|| format!("no stencils are built for this host's architecture ({host})"))?;
    if opts.native {
        let root = crate::util::root();
        let facts = crate::targets::load_all(&root.join("targets"))?;
        rows.retain(|r| {
            facts.iter().any(|f| {
                let reserved: Vec<&str> = f.reserved_registers.iter().map(String::as_str).collect();
                f.triple == r.triple && this.runs(f.arch, f.abi, &reserved)
            })
        });
        for r in &mut rows {
            r.execution = if r.triple == host {
                Execution::Native
            } else {
                Execution::HostAbi
            };
            r.rust_target = host.to_string();
        }
        if !rows.iter().any(|r| r.triple == host) {
            return Err(format!(
                "--native: host {host} has no target file, or --target left out its row \
                 (targets/*.toml has: {})",
                known()
            ));
        }
    } else if this
        != (Host {
            arch: Arch::X86_64,
            os: Os::Linux,
        })
    {
        return Err(format!(
            "the emulated matrix needs an x86_64 Linux host (this is {host}); use --native"
        ));
    }
    Ok(rows)
}

fn run_row(
    root: &Path,
    row: &Row,
    suites: &[RowSuite],
    archive: &Result<PathBuf, String>,
    extra_env: &BTreeMap<String, String>,
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
    let mut env = extra_env.clone();
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
        Ok(outcome) => judge(&mut result, &named, &outcome),
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
    match row.execution {
        Execution::Native => "native".into(),
        e => format!("{}: {}", e.name(), row.rust_target),
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `cargo check -p <packages> --target <target>`.
fn check(target: &str, packages: &[String]) -> CheckResult {
    eprintln!(
        "matrix: cargo check {} --target {target}",
        packages.join(" ")
    );
    let start = Instant::now();
    let mut cmd = crate::util::cargo();
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

    #[test]
    fn native_selection_follows_the_host_rule() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let native = Options {
            native: true,
            ..Default::default()
        };
        let facts = crate::targets::load_all(&crate::util::root().join("targets")).unwrap();
        // The Linux processes of the native and qemu rows.
        let hosts: Vec<&str> = facts
            .iter()
            .filter(|f| matches!(f.test.execution, Execution::Native | Execution::Qemu))
            .map(|f| f.test.rust_target.as_str())
            .collect();
        assert!(hosts.len() >= 2, "{hosts:?}");
        for host in hosts {
            let rows = select_rows(&m, &native, host).unwrap();
            let this = Host::of_triple(host).unwrap();
            for f in &facts {
                let reserved: Vec<&str> = f.reserved_registers.iter().map(String::as_str).collect();
                let selected = rows.iter().any(|r| r.triple == f.triple);
                assert_eq!(
                    selected,
                    this.runs(f.arch, f.abi, &reserved),
                    "{host} {}",
                    f.triple
                );
            }
            for r in &rows {
                assert_eq!(r.rust_target, host);
                let want = if r.triple == host {
                    Execution::Native
                } else {
                    Execution::HostAbi
                };
                assert_eq!(r.execution, want);
            }
        }
        assert!(select_rows(&m, &Options::default(), "aarch64-apple-ios").is_err());
        assert!(select_rows(&m, &native, "x86_64-unknown-netbsd")
            .unwrap_err()
            .contains("has no target file"));
        let bad = Options {
            targets: vec!["riscv64".into()],
            ..Default::default()
        };
        assert!(select_rows(&m, &bad, "x86_64-unknown-linux-musl")
            .unwrap_err()
            .contains("no target `riscv64`"));
    }

    /// `--target` restricts the compile-only checks to the selected rows' `check_target`s;
    /// without it every target file's are checked.
    #[test]
    fn the_selected_targets_restrict_the_compile_only_checks() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let host = m
            .rows
            .iter()
            .find(|r| r.execution == Execution::Native)
            .map(|r| r.rust_target.clone())
            .unwrap();
        let plan = |targets: Vec<String>, no_check: bool| {
            let opts = Options {
                targets,
                no_check,
                ..Default::default()
            };
            check_targets(&opts, &select_rows(&m, &opts, &host).unwrap())
        };
        assert_eq!(plan(vec![], false), m.check_targets);
        assert!(m.check_targets.len() >= 2, "{:?}", m.check_targets);
        let checked = m.rows.iter().find(|r| r.check_target.is_some()).unwrap();
        let unchecked = m.rows.iter().find(|r| r.check_target.is_none()).unwrap();
        assert_eq!(
            plan(vec![checked.triple.clone()], false),
            [checked.check_target.clone().unwrap()]
        );
        assert!(plan(vec![unchecked.triple.clone()], false).is_empty());
        let both = vec![checked.triple.clone(), unchecked.triple.clone()];
        assert_eq!(plan(both.clone(), false).len(), 1);
        assert!(plan(both, true).is_empty());
        let native = Options {
            native: true,
            ..Default::default()
        };
        assert!(check_targets(&native, &select_rows(&m, &native, &host).unwrap()).is_empty());
    }

    use nextest::TestCase;

    #[test]
    fn stencil_free_suites_run_once_per_rust_target_preferably_in_its_own_row() {
        let row = |triple: &str, rust_target: &str| Row {
            triple: triple.into(),
            execution: Execution::HostAbi,
            rust_target: rust_target.into(),
            check_target: None,
        };
        let rows = [
            row("a-other", "a-own"),
            row("a-own", "a-own"),
            row("b-x", "b-y"),
            row("b-z", "b-y"),
        ];
        let chosen = stencil_free_rows(&rows);
        assert_eq!(chosen["a-own"], "a-own");
        assert_eq!(chosen["b-y"], "b-x");
        assert_eq!(chosen.len(), 2);
        assert_eq!(stencil_free_rows(&rows[..1])["a-own"], "a-other");
    }

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
    }
}
