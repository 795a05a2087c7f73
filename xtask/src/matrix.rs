//! `cargo xtask test-matrix`: runs each target's suites with that target's stencils, as
//! defined by `ci/matrix.toml`, and prints one result row per target.
//!
//! Test binaries are built once per Rust target (`cargo test --no-run`), then each row runs
//! them with `CPJIT_STENCILS=<triple>` through the Rust target's runner (qemu, wine).

mod binaries;
mod config;
mod json;
mod libtest;
mod report;
mod toml;

pub use config::Matrix;
pub use libtest::{parse as parse_libtest, Counts};
pub use report::Report;

use binaries::TestBinary;
use config::{Execution, Row};
use report::{CheckResult, RowResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const USAGE: &str = "\
usage: cargo xtask test-matrix [--target T]... [--suite S]... [--native] [--no-check]
                               [--self-test] [--json]
  --target T   run only the row of stencil target T (repeatable)
  --suite S    run only suite S of ci/matrix.toml (repeatable)
  --native     run on this host without emulators: the rows whose stencils or Rust target
               are the host's own (what the native GitHub runners do)
  --no-check   skip the compile-only `cargo check` targets
  --self-test  break the stencils of [self_test].break (CPJIT_BREAK) and check that exactly
               that row fails
  --json       print the result as JSON on stdout (progress goes to stderr)";

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub targets: Vec<String>,
    pub suites: Vec<String>,
    pub native: bool,
    pub no_check: bool,
    pub self_test: bool,
    pub json: bool,
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--target" => o
                    .targets
                    .push(it.next().ok_or("--target needs a value")?.clone()),
                "--suite" => o
                    .suites
                    .push(it.next().ok_or("--suite needs a value")?.clone()),
                "--native" => o.native = true,
                "--no-check" => o.no_check = true,
                "--self-test" => o.self_test = true,
                "--json" => o.json = true,
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown option `{other}`\n{USAGE}")),
            }
        }
        Ok(o)
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    if opts.self_test {
        return self_test(&opts);
    }
    let report = run_matrix(&opts, &BTreeMap::new())?;
    if opts.json {
        print!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
    if report.passed() {
        Ok(())
    } else {
        Err("test matrix failed".into())
    }
}

/// Runs the matrix with `CPJIT_BREAK=<break row>` and checks that exactly that row fails.
pub fn self_test(opts: &Options) -> Result<(), String> {
    let matrix = Matrix::load(&crate::util::root())?;
    let broken = opts
        .targets
        .first()
        .cloned()
        .unwrap_or_else(|| matrix.self_test_break.clone());
    let mut o = opts.clone();
    o.targets.clear();
    o.no_check = true;
    if o.suites.is_empty() {
        o.suites = matrix.self_test_suites.clone();
    }
    eprintln!("self-test: breaking {broken} (CPJIT_BREAK); expecting exactly that row to fail");
    let env = BTreeMap::from([("CPJIT_BREAK".to_string(), broken.clone())]);
    let report = run_matrix(&o, &env)?;
    if opts.json {
        print!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
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

/// Builds and runs the selected rows; `extra_env` goes to every test binary.
pub fn run_matrix(opts: &Options, extra_env: &BTreeMap<String, String>) -> Result<Report, String> {
    let start = Instant::now();
    let root = crate::util::root();
    let matrix = Matrix::load(&root)?;
    let host = binaries::host_triple()?;
    let rows = select_rows(&matrix, opts, &host)?;
    for s in &opts.suites {
        if !matrix.suites.contains_key(s) {
            return Err(format!(
                "unknown suite `{s}` (ci/matrix.toml has: {})",
                matrix.suites.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let workspace = binaries::workspace_packages()?;
    let mut report = Report::default();

    // One build per Rust target, covering the suites of every row that uses it.
    let mut wanted: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for row in &rows {
        let packages = wanted.entry(row.rust_target.as_str()).or_default();
        for s in row_suites(row, opts) {
            let p = &matrix.suites[s].package;
            if !packages.contains(p) {
                packages.push(p.clone());
            }
        }
    }
    let mut built: BTreeMap<&str, Result<Vec<TestBinary>, String>> = BTreeMap::new();
    for (target, packages) in &wanted {
        eprintln!(
            "matrix: building test binaries for {target} ({})",
            packages.join(", ")
        );
        let t = Instant::now();
        built.insert(
            target,
            binaries::build(target, &host, matrix.release, packages, &workspace),
        );
        report.builds.push((target.to_string(), t.elapsed()));
    }

    for row in &rows {
        let result = run_row(
            &root,
            &matrix,
            row,
            opts,
            &host,
            &built[row.rust_target.as_str()],
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

    if !opts.no_check && !opts.native {
        for target in &matrix.check_targets {
            report.checks.push(check(target, &matrix.check_packages));
        }
    }
    report.total_time = start.elapsed();
    Ok(report)
}

/// The rows to run. With `--native`, a row runs when its stencils or its Rust target are
/// the host's, and then with the host as Rust target and no runner.
fn select_rows(matrix: &Matrix, opts: &Options, host: &str) -> Result<Vec<Row>, String> {
    for t in &opts.targets {
        if matrix.row(t).is_none() {
            return Err(format!(
                "no row for target `{t}` in ci/matrix.toml (rows: {})",
                matrix
                    .rows
                    .iter()
                    .map(|r| r.triple.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let mut rows: Vec<Row> = matrix
        .rows
        .iter()
        .filter(|r| opts.targets.is_empty() || opts.targets.contains(&r.triple))
        .cloned()
        .collect();
    if opts.native {
        rows.retain(|r| r.triple == host || r.rust_target == host);
        for r in &mut rows {
            r.execution = if r.triple == host {
                Execution::Native
            } else {
                Execution::HostAbi
            };
            r.rust_target = host.to_string();
        }
        if rows.is_empty() {
            return Err(format!(
                "--native: no row of ci/matrix.toml runs on host {host}"
            ));
        }
    } else if host != "x86_64-unknown-linux-gnu" {
        return Err(format!(
            "the emulated matrix needs an x86_64-unknown-linux-gnu host (this is {host}); \
             use --native"
        ));
    }
    Ok(rows)
}

fn row_suites<'r>(row: &'r Row, opts: &'r Options) -> impl Iterator<Item = &'r String> {
    row.suites
        .iter()
        .filter(move |s| opts.suites.is_empty() || opts.suites.contains(s))
}

fn run_row(
    root: &Path,
    matrix: &Matrix,
    row: &Row,
    opts: &Options,
    host: &str,
    built: &Result<Vec<TestBinary>, String>,
    extra_env: &BTreeMap<String, String>,
) -> RowResult {
    let runner = if row.rust_target == host {
        Vec::new()
    } else {
        matrix
            .runners
            .get(&row.rust_target)
            .cloned()
            .unwrap_or_default()
    };
    let mut result = RowResult {
        triple: row.triple.clone(),
        executed: describe(row, &runner),
        ..Default::default()
    };
    match stencil_count(root, &row.triple) {
        Ok(n) => result.stencils = Some(n),
        Err(e) => result.problems.push(e),
    }
    let binaries = match built {
        Ok(b) => b,
        Err(e) => {
            result.problems.push(e.clone());
            return result;
        }
    };
    let start = Instant::now();
    for suite_name in row_suites(row, opts) {
        let suite = &matrix.suites[suite_name];
        let mut suite_counts = Counts::default();
        let suite_binaries: Vec<&TestBinary> = binaries
            .iter()
            .filter(|b| b.package == suite.package)
            .collect();
        if suite_binaries.is_empty() {
            result.problems.push(format!(
                "suite {suite_name}: {} has no test binaries",
                suite.package
            ));
            continue;
        }
        for bin in suite_binaries {
            let mut cmd = runner_command(root, &runner, &bin.path);
            cmd.args(&suite.args)
                .current_dir(&bin.manifest_dir)
                .env("CARGO_MANIFEST_DIR", &bin.manifest_dir)
                .env("CPJIT_STENCILS", &row.triple)
                .envs(&row.env)
                .envs(extra_env);
            let started = Instant::now();
            let outcome = run_binary(&mut cmd);
            if let Ok((summary, status, _)) = &outcome {
                eprintln!(
                    "matrix: {} {suite_name}/{}: {} passed, {} failed, {:.1}s ({status})",
                    row.triple,
                    bin.name,
                    summary.counts.passed,
                    summary.counts.failed,
                    started.elapsed().as_secs_f64()
                );
            }
            match outcome {
                Ok((summary, status, output)) => {
                    suite_counts.add(summary.counts);
                    let what = format!("suite {suite_name}: {} ({})", bin.name, bin.path.display());
                    if !summary.complete {
                        result
                            .problems
                            .push(format!("{what}: no libtest result ({status})"));
                    } else if !summary.failed_names.is_empty() || summary.counts.failed > 0 {
                        result.problems.push(format!(
                            "{what}: failed tests: {}",
                            summary.failed_names.join(", ")
                        ));
                    } else if !status.success() {
                        result
                            .problems
                            .push(format!("{what}: exited with {status}"));
                    }
                    if !status.success() || !summary.complete {
                        eprintln!(
                            "--- {} {what} ({status}), last lines:\n{}",
                            row.triple,
                            tail(&output, 40)
                        );
                    }
                }
                Err(e) => result.problems.push(format!("suite {suite_name}: {e}")),
            }
        }
        if suite_counts.run == 0 {
            result
                .problems
                .push(format!("suite {suite_name}: no tests ran"));
        }
        result.counts.add(suite_counts);
    }
    result.time = start.elapsed();
    result
}

fn describe(row: &Row, runner: &[String]) -> String {
    let how = match row.execution {
        Execution::Native => return "native".into(),
        e => e.name(),
    };
    let via = runner
        .first()
        .map(|r| {
            let name = Path::new(r)
                .file_name()
                .map_or(r.clone(), |n| n.to_string_lossy().into_owned());
            format!(" ({})", name.trim_start_matches("run-"))
        })
        .unwrap_or_default();
    format!("{how}: {}{via}", row.rust_target)
}

fn runner_command(root: &Path, runner: &[String], exe: &Path) -> Command {
    match runner.split_first() {
        None => Command::new(exe),
        Some((program, args)) => {
            // Like cargo: a runner path with a slash is relative to the workspace root.
            let program: PathBuf = if program.contains('/') {
                root.join(program)
            } else {
                program.into()
            };
            let mut cmd = Command::new(program);
            cmd.args(args).arg(exe);
            cmd
        }
    }
}

/// Runs one test binary with its output in temporary files, not pipes: wine leaves helper
/// processes behind that inherit the output handles and would hold a pipe open for
/// seconds after the test binary exited.
fn run_binary(
    cmd: &mut Command,
) -> Result<(libtest::Summary, std::process::ExitStatus, String), String> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("cpjit-matrix-{}-{n}", std::process::id()));
    let (out_path, err_path) = (base.with_extension("out"), base.with_extension("err"));
    let create = |p: &Path| {
        std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let status = cmd
        .stdin(std::process::Stdio::null())
        .stdout(create(&out_path)?)
        .stderr(create(&err_path)?)
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"));
    let read = |p: &Path| {
        let bytes = std::fs::read(p).unwrap_or_default();
        let _ = std::fs::remove_file(p);
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    let status = status?;
    let all = format!("{stdout}{stderr}");
    Ok((libtest::parse(&stdout), status, all))
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

/// Number of stencils in the generated crate `stencils/<triple>/`: the entries of its
/// `pub mod stencil` index module.
pub fn stencil_count(root: &Path, triple: &str) -> Result<usize, String> {
    let path = root.join("stencils").join(triple).join("src/lib.rs");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "stencil crate missing ({}: {e}); run cargo xtask build-stencils",
            path.display()
        )
    })?;
    count_stencils(&text)
        .ok_or_else(|| format!("{}: no `pub mod stencil` index found", path.display()))
}

fn count_stencils(lib_rs: &str) -> Option<usize> {
    let start = lib_rs.find("pub mod stencil {")?;
    let body = &lib_rs[start..];
    let end = body.find("\n}").unwrap_or(body.len());
    Some(
        body[..end]
            .lines()
            .filter(|l| l.trim_start().starts_with("pub const "))
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_reject_unknown_flags() {
        let args: Vec<String> = ["--target", "a", "--suite", "vm", "--json", "--native"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = Options::parse(&args).unwrap();
        assert_eq!(o.targets, ["a"]);
        assert_eq!(o.suites, ["vm"]);
        assert!(o.json && o.native && !o.self_test);
        assert!(Options::parse(&["--frob".to_string()])
            .unwrap_err()
            .contains("unknown option `--frob`"));
        assert!(Options::parse(&["--target".to_string()]).is_err());
    }

    #[test]
    fn native_selection_uses_the_host_as_rust_target() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let native = Options {
            native: true,
            ..Default::default()
        };
        let rows = select_rows(&m, &native, "aarch64-unknown-linux-gnu").unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.triple.as_str()).collect();
        assert_eq!(
            names,
            [
                "aarch64-unknown-linux-gnu",
                "aarch64-apple-darwin",
                "aarch64-pc-windows-msvc"
            ]
        );
        assert_eq!(rows[0].execution, Execution::Native);
        assert_eq!(rows[1].execution, Execution::HostAbi);
        let rows = select_rows(&m, &native, "x86_64-pc-windows-msvc").unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].rust_target, "x86_64-pc-windows-msvc");
        let rows = select_rows(&m, &native, "aarch64-apple-darwin").unwrap();
        assert_eq!(rows.len(), 1);
        assert!(select_rows(&m, &Options::default(), "aarch64-apple-darwin").is_err());
        let bad = Options {
            targets: vec!["riscv64".into()],
            ..Default::default()
        };
        assert!(select_rows(&m, &bad, "x86_64-unknown-linux-gnu")
            .unwrap_err()
            .contains("no row"));
    }

    #[test]
    fn describes_how_rows_execute() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let runner = |r: &Row| m.runners.get(&r.rust_target).cloned().unwrap_or_default();
        let d: Vec<String> = m.rows.iter().map(|r| describe(r, &runner(r))).collect();
        assert_eq!(d[0], "native");
        assert_eq!(d[1], "qemu: aarch64-unknown-linux-gnu (aarch64)");
        assert_eq!(d[2], "wine: x86_64-pc-windows-gnu (wine)");
        assert_eq!(d[3], "host-abi: x86_64-unknown-linux-gnu");
        assert_eq!(d[4], "host-abi: aarch64-unknown-linux-gnu (aarch64)");
    }

    #[test]
    fn stencil_index_is_counted() {
        let lib = "pub static SET: X = X;\npub mod stencil {\n    pub const op_a: usize = 0;\n    \
                   pub const op_b: usize = 1;\n}\npub const OTHER: u8 = 0;\n";
        assert_eq!(count_stencils(lib), Some(2));
        assert_eq!(count_stencils("pub static SET: X = X;\n"), None);
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
