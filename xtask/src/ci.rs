//! `cargo xtask ci`: the whole test suite, as run by `.ci/run`.
//!
//! Steps: set-up (`ci/setup.sh`), `cargo fmt --check`, `cargo clippy` (the workspace lints),
//! `build-stencils --check`, the native
//! workspace tests on nextest and the doctests, the long runs of `ci/matrix.toml`
//! (`[[long]]`), the test matrix with its compile-only checks, the matrix self-test, the
//! outside-crate examples (`examples/{bf,ebpf,stack}-jit/ci.sh`). Fuzzing is covered on stable by the
//! workspace tests of `fuzz-harness/` (every target's seeds and deterministic mutations through
//! the targets' own bodies); the nightly, sanitizer-built campaigns of `cargo xtask fuzz` cost
//! four minutes of build alone and are run on their own.
//! Later steps still run when one fails (except the set-up, which everything needs). The
//! last line is `N passed, M failed`: tests counted from nextest's JUnit reports, plus one
//! per step that has no tests of its own (formatting, stencil check, doctests, compile-only
//! checks, self-test, example) or that failed without a failing test (a build error).
//! Each step's line has its wall time and the CPU time (user + system) of its processes:
//! on a machine of few cores CPU time is what a change of the suite saves or costs.

use crate::matrix::{self, Counts, Matrix};
use crate::util::{cargo, children_cpu_seconds, root};
use std::process::Command;
use std::time::Instant;

struct Step {
    name: String,
    counts: Counts,
    ok: bool,
    seconds: f64,
    /// CPU seconds of the step's processes; `None` for the matrix's rows, which share the
    /// CPU of the archive builds (printed once, after the steps).
    cpu: Option<f64>,
}

/// When a step started: wall clock and the CPU of the processes run so far.
#[derive(Clone, Copy)]
struct Start {
    wall: Instant,
    cpu: f64,
}

impl Start {
    fn now() -> Start {
        Start {
            wall: Instant::now(),
            cpu: children_cpu_seconds(),
        }
    }

    fn cpu(&self) -> f64 {
        children_cpu_seconds() - self.cpu
    }
}

pub fn run() -> Result<(), String> {
    let start = Start::now();
    let mut steps: Vec<Step> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    let t = Start::now();
    let setup = crate::setup::ensure();
    steps.push(plain("setup (ci/setup.sh)", setup.is_ok(), t));
    if let Err(e) = setup {
        eprintln!("ci: {e}");
        return finish(&steps, &notes, start);
    }

    let t = Start::now();
    let fmt = crate::util::run(cargo().args(["fmt", "--all", "--", "--check"]));
    steps.push(plain("cargo fmt --all -- --check", fmt.is_ok(), t));

    // The workspace lints (Cargo.toml: the house rules on unsafe code) are denied, so
    // clippy fails on them; other clippy findings are warnings and do not fail the step.
    let t = Start::now();
    let clippy = crate::util::run(cargo().args(["clippy", "--quiet", "--workspace", "--tests"]));
    steps.push(plain("cargo clippy --workspace --tests", clippy.is_ok(), t));

    let t = Start::now();
    let stencils = crate::build_stencils::build_stencils(&["--check".to_string()]);
    if let Err(e) = &stencils {
        eprintln!("ci: {e}");
    }
    steps.push(plain(
        "cargo xtask build-stencils --check",
        stencils.is_ok(),
        t,
    ));

    steps.push(nextest_step(
        "cargo nextest run --workspace",
        cargo().args(["nextest", "run", "--workspace"]),
    ));
    let t = Start::now();
    let doc = crate::util::run(cargo().args(["test", "--workspace", "--doc"]));
    steps.push(plain("cargo test --workspace --doc", doc.is_ok(), t));

    let definition = Matrix::load(&root())?;
    for long in &definition.long {
        let mut cmd = cargo();
        cmd.args(["nextest", "run", "--cargo-profile", &long.profile])
            .args(["-p", &long.package])
            .args(&long.args)
            .envs(&long.env);
        steps.push(nextest_step(&format!("long: {}", long.name), &mut cmd));
    }

    let t = Start::now();
    match matrix::run_matrix(&matrix::Options::default(), &Default::default()) {
        Ok(report) => {
            print!("{}", report.table());
            for row in &report.rows {
                steps.push(Step {
                    name: format!("matrix: {} ({})", row.triple, row.executed),
                    counts: row.counts,
                    ok: row.passed(),
                    seconds: row.time.as_secs_f64(),
                    cpu: None,
                });
            }
            for c in &report.checks {
                steps.push(Step {
                    name: format!("matrix: cargo check --target {}", c.target),
                    counts: Counts::default(),
                    ok: c.error.is_none(),
                    seconds: c.time.as_secs_f64(),
                    cpu: None,
                });
            }
            let builds: f64 = report.builds.iter().map(|(_, d)| d.as_secs_f64()).sum();
            notes.push(format!(
                "test matrix: {:.1}s, {:.1}s CPU (archive builds {builds:.1}s, rows, checks)",
                t.wall.elapsed().as_secs_f64(),
                t.cpu()
            ));
        }
        Err(e) => {
            eprintln!("ci: test matrix: {e}");
            steps.push(plain("test matrix", false, t));
        }
    }

    let t = Start::now();
    let self_test = matrix::self_test(&matrix::Options::default());
    if let Err(e) = &self_test {
        eprintln!("ci: {e}");
    }
    steps.push(plain("test matrix --self-test", self_test.is_ok(), t));

    // The kit as an outside crate uses it: the bf-jit example, from its own directory,
    // natively and under qemu-aarch64 (its script packages cpjit-model and cpjit-runtime).
    let t = Start::now();
    let example = crate::util::run(Command::new("bash").arg(root().join("examples/bf-jit/ci.sh")));
    steps.push(plain("examples/bf-jit/ci.sh", example.is_ok(), t));

    // The eBPF example, the same way (checked against rbpf 0.4's interpreter).
    let t = Start::now();
    let example =
        crate::util::run(Command::new("bash").arg(root().join("examples/ebpf-jit/ci.sh")));
    steps.push(plain("examples/ebpf-jit/ci.sh", example.is_ok(), t));

    // The register-caching example: its ops pushed by op id, members chosen by the kit.
    let t = Start::now();
    let example =
        crate::util::run(Command::new("bash").arg(root().join("examples/stack-jit/ci.sh")));
    steps.push(plain("examples/stack-jit/ci.sh", example.is_ok(), t));

    finish(&steps, &notes, start)
}

/// A step without tests of its own.
fn plain(name: &str, ok: bool, started: Start) -> Step {
    Step {
        name: name.to_string(),
        counts: Counts::default(),
        ok,
        seconds: started.wall.elapsed().as_secs_f64(),
        cpu: Some(started.cpu()),
    }
}

/// Runs a `cargo nextest run` command with the `matrix` profile, its output going to the
/// terminal, and counts the tests of its JUnit report.
fn nextest_step(name: &str, cmd: &mut Command) -> Step {
    eprintln!("ci: {name}");
    let start = Start::now();
    let report = matrix::junit_path(&root());
    let _ = std::fs::remove_file(&report);
    let status = cmd
        .args(["--profile", matrix::PROFILE, "--no-fail-fast"])
        .status();
    let mut counts = Counts::default();
    let mut ok = match status {
        Ok(s) => s.success(),
        Err(e) => {
            eprintln!("ci: cannot run {cmd:?}: {e}");
            false
        }
    };
    // The matrix's rows rewrite the report; a copy keeps the step's per-test times.
    let kept = report.with_file_name(format!("{}.junit.xml", slug(name)));
    let _ = std::fs::copy(&report, &kept);
    match std::fs::read_to_string(&report).map(|xml| matrix::parse_junit(&xml)) {
        Ok(Ok(cases)) => cases.iter().for_each(|c| counts.add_case(c.outcome)),
        Ok(Err(e)) => {
            eprintln!("ci: {name}: {}: {e}", report.display());
            ok = false;
        }
        Err(e) => {
            eprintln!("ci: {name}: no JUnit report {}: {e}", report.display());
            ok = false;
        }
    }
    Step {
        name: name.to_string(),
        counts,
        ok: ok && counts.failed == 0,
        seconds: start.wall.elapsed().as_secs_f64(),
        cpu: Some(start.cpu()),
    }
}

/// `name` as a file name: lower-case letters and digits, other runs as one `-`.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Prints the step summary and the final `N passed, M failed` line.
fn finish(steps: &[Step], notes: &[String], start: Start) -> Result<(), String> {
    let (passed, failed) = totals(steps);
    println!("\nci summary:");
    for s in steps {
        let tests = if s.counts.run + s.counts.ignored > 0 {
            format!(
                "{} passed, {} failed, {} ignored",
                s.counts.passed, s.counts.failed, s.counts.ignored
            )
        } else {
            String::new()
        };
        let cpu = match s.cpu {
            Some(cpu) => format!("{cpu:>7.1}s CPU"),
            None => " ".repeat(12),
        };
        println!(
            "  {:<6} {:>7.1}s {cpu}  {}  {tests}",
            if s.ok { "ok" } else { "FAILED" },
            s.seconds,
            s.name
        );
    }
    for note in notes {
        println!("  {note}");
    }
    println!(
        "total time {:.1}s, {:.1}s CPU",
        start.wall.elapsed().as_secs_f64(),
        start.cpu()
    );
    println!("{passed} passed, {failed} failed");
    if failed == 0 && steps.iter().all(|s| s.ok) {
        Ok(())
    } else {
        Err(format!("ci failed: {failed} failed"))
    }
}

fn totals(steps: &[Step]) -> (u64, u64) {
    let mut passed = 0;
    let mut failed = 0;
    for s in steps {
        if s.counts.run == 0 {
            // No tests of its own: the step counts as one.
            if s.ok {
                passed += 1;
            } else {
                failed += 1;
            }
        } else {
            passed += s.counts.passed;
            failed += s.counts.failed;
            if !s.ok && s.counts.failed == 0 {
                failed += 1;
            }
        }
    }
    (passed, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(ok: bool, passed: u64, failed: u64) -> Step {
        Step {
            name: "s".into(),
            counts: Counts {
                run: passed + failed,
                passed,
                failed,
                ignored: 0,
            },
            ok,
            seconds: 0.0,
            cpu: None,
        }
    }

    #[test]
    fn step_reports_are_kept_under_their_names_slug() {
        assert_eq!(
            slug("cargo nextest run --workspace"),
            "cargo-nextest-run-workspace"
        );
        assert_eq!(
            slug("long: vm differential, 10,000 programs"),
            "long-vm-differential-10-000-programs"
        );
    }

    #[test]
    fn totals_count_tests_and_test_less_steps() {
        // fmt ok (1), tests 10/2, a failed build without failed tests (1), a failed plain step.
        let steps = [
            step(true, 0, 0),
            step(false, 10, 2),
            step(false, 3, 0),
            step(false, 0, 0),
        ];
        assert_eq!(totals(&steps), (1 + 10 + 3, 2 + 1 + 1));
    }
}
