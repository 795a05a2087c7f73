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
//! Clippy runs beside the stencil check (in a fresh target directory it runs inside the dev
//! builds instead, `ci/lint.rs`), the long runs beside the matrix, and the examples
//! side by side at the lowest priority beside every step from the stencil check to the
//! matrix's self-test (`ci/beside.rs`), each still with its own line.
//! Each step's line has its wall time and the CPU time (user + system) of its processes:
//! on a machine of few cores CPU time is what a change of the suite saves or costs.
//! What no later step reads is deleted, and a failure on a full disk names it (`ci/disk.rs`).

mod beside;
pub(crate) mod disk;
mod lint;

use crate::matrix::{self, Counts, LongRun, Matrix};
use crate::util::{cargo, children_cpu_seconds, root};
use std::path::Path;
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

    // Left out of the native steps' selection (a failure to read them fails its own step;
    // the steps then select them as before).
    let generated = generated_packages(&root()).unwrap_or_else(|e| {
        eprintln!("ci: {e}");
        steps.push(plain("the generated stencil crates", false, Start::now()));
        Vec::new()
    });
    // In a fresh target directory the dev builds lint as they compile (`ci/lint.rs`).
    let lint = lint_in_build().unwrap_or_else(|e| {
        eprintln!("ci: {e}");
        steps.push(plain(
            "the workspace lints in the build",
            false,
            Start::now(),
        ));
        None
    });
    // The toolchain first: the stencil check and the examples run it, and clippy holds
    // cargo's lock for its whole run.
    let t = Start::now();
    let toolchain =
        crate::build_stencils::prepared_toolchain_with(lint.as_ref().map_or(&[], |l| l.envs()));
    let clippy = match &lint {
        None => Some(start_clippy(&generated)),
        Some(_) => {
            notes.push(format!(
                "workspace lints: by clippy-driver in the dev builds of this fresh target directory (ci/lint-wrapper): the toolchain's, `{LINTED_BUILD}`"
            ));
            None
        }
    };
    // The kit as outside crates use it, each example from its own directory, natively and
    // under qemu (examples/outside-crate-ci.sh): bf-jit (its script also packages the kit's
    // crates), ebpf-jit (checked against rbpf 0.4's interpreter) and stack-jit (ops pushed
    // by op id, members chosen by the kit), side by side, at the lowest priority, beside
    // every step from here to the matrix's self-test (`ci/beside.rs` has the measured why).
    // They build in their own target directory with this toolchain binary, so cargo's lock
    // holds up neither them nor the steps they run beside.
    let examples = beside::Examples::start(
        &root(),
        &beside::EXAMPLES,
        toolchain.as_deref().ok(),
        beside::NICE,
    );
    stencil_check_beside_clippy(&mut steps, toolchain, clippy, t);

    native_tests(&mut steps, lint.as_ref(), &generated);

    let definition = Matrix::load(&root())?;
    let long_runs = start_long_runs(&definition.long);
    let t = Start::now();
    let matrix_run = matrix::run_matrix(&matrix::Options::default(), &Default::default());
    let matrix_wall = t.wall.elapsed().as_secs_f64();
    let mut beside_cpu = 0.0;
    for (step, cpu) in long_runs
        .join()
        .expect("the long runs' thread does not panic")
    {
        beside_cpu += cpu;
        steps.push(step);
    }
    match matrix_run {
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
            let builds: f64 = report.builds.iter().map(|b| b.time.as_secs_f64()).sum();
            let builds_cpu: f64 = report.builds.iter().map(|b| b.cpu).sum();
            notes.push(format!(
                "test matrix: {matrix_wall:.1}s, {:.1}s CPU (archive builds {builds:.1}s, {builds_cpu:.1}s CPU; rows, checks; not the long runs or examples beside it)",
                t.cpu() - beside_cpu
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

    let examples = examples.finish();
    let cpu: f64 = examples.iter().map(|e| e.cpu).sum();
    let wall = examples.iter().map(|e| e.seconds).fold(0.0, f64::max);
    steps.extend(examples.into_iter().map(beside_step));
    notes.push(format!(
        "examples side by side, at the lowest priority beside the steps from the stencil check on: {wall:.1}s, {cpu:.1}s CPU"
    ));

    finish(&steps, &notes, start)
}

/// The native workspace tests and the doctests (without the `generated` crates), on the
/// build that lints as it compiles where there is one (`lint`).
fn native_tests(steps: &mut Vec<Step>, lint: Option<&lint::LintInBuild>, generated: &[String]) {
    // With the lints in the build, the test runs use the linted build too (cargo keeps
    // the builds with and without the wrapper apart: `ci/lint.rs`).
    let linted = |cmd: &mut Command| {
        if let Some(lint) = lint {
            lint.apply(cmd);
        }
    };
    let mut test_binaries = Vec::new();
    if lint.is_some() {
        // Built (and linted) as a step of its own, so that a lint's failure is its own line.
        let t = Start::now();
        let mut build = cargo();
        build.args(["nextest", "run", "--workspace", "--no-run"]);
        linted(&mut build);
        let built = disk::build_listing_test_binaries(excluding(&mut build, generated));
        steps.push(plain(LINTED_BUILD, built.is_ok(), t));
        match built {
            Ok(built) => test_binaries = built,
            Err(e) => eprintln!("ci: {LINTED_BUILD}: {e}"),
        }
    }
    let mut tests = cargo();
    tests.args(["nextest", "run", "--workspace"]);
    linted(&mut tests);
    steps.push(nextest_step(
        "cargo nextest run --workspace",
        excluding(&mut tests, generated),
    ));
    let t = Start::now();
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--doc"]);
    linted(&mut doc);
    let doc = crate::util::run(excluding(&mut doc, generated));
    steps.push(plain("cargo test --workspace --doc", doc.is_ok(), t));
    // A CI run builds a fresh clone once (`.ci/run`): no later step reads these (the long
    // runs and the matrix build their own profile, the examples their own directory).
    if disk::built_once() {
        let freed = disk::remove_files(&test_binaries);
        eprintln!(
            "ci: removed the {} native test binaries, read by no later step: {} freed",
            test_binaries.len(),
            disk::bytes(freed)
        );
    }
}

/// Starts `cargo clippy` (the workspace lints) to run beside `build-stencils --check`,
/// whose clang jobs leave a core idle at the end of each template set and target
/// (`ci/beside.rs`).
fn start_clippy(generated: &[String]) -> Result<beside::Logged, String> {
    // The workspace lints (Cargo.toml: the house rules on unsafe code) are denied, so
    // clippy fails on them; other clippy findings are warnings and do not fail the step.
    // The generated crates have no lints table and no unsafe code.
    let mut cmd = cargo();
    cmd.args(["clippy", "--quiet", "--workspace", "--tests"]);
    excluding(&mut cmd, generated);
    beside::Logged::start(CLIPPY, &mut cmd, &beside::log_path(&root(), CLIPPY))
}

/// Whether this run's dev builds lint as they compile (`ci/lint.rs`), with the generated
/// crates' directories left unlinted.
fn lint_in_build() -> Result<Option<lint::LintInBuild>, String> {
    let root = root();
    let sets = crate::build_stencils::kit_sets(&root)?;
    let unlinted: Vec<&Path> = sets.iter().map(|s| s.out.as_path()).collect();
    lint::LintInBuild::from_env(&root, &unlinted)
}

/// `cmd` (a cargo command over `--workspace`) without the `generated` packages.
fn excluding<'a>(cmd: &'a mut Command, generated: &[String]) -> &'a mut Command {
    for name in generated {
        cmd.args(["--exclude", name]);
    }
    cmd
}

/// The packages `build-stencils` generates, every crate in each set's output directory
/// (facades included): data without tests or doctests (a test checks), which the native
/// steps leave out of their selection; they are still built and checked as the
/// dependencies they are. Selected, the 30 of them had their empty test harnesses built
/// and linked (17.7 s of CPU), checked by clippy (about 20 s: `clippy --tests` on them
/// 44.9 s, on their libraries 25.6 s) and searched for doctests (3.6 s), measured at load
/// 20 on the two cores (wave 23).
fn generated_packages(root: &Path) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for set in crate::build_stencils::kit_sets(root)? {
        let entries = match std::fs::read_dir(&set.out) {
            Ok(entries) => entries,
            // A set not generated yet has no crates to leave out.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: cannot read: {e}", set.out.display())),
        };
        for entry in entries {
            let dir = entry
                .map_err(|e| format!("{}: {e}", set.out.display()))?
                .path();
            if dir.join("Cargo.toml").is_file() {
                names.push(package_name(&dir.join("Cargo.toml"))?);
            }
        }
    }
    names.sort();
    Ok(names)
}

/// The `[package] name` of the manifest at `path`.
fn package_name(path: &Path) -> Result<String, String> {
    crate::util::toml_string(path, &["package", "name"])
        .map_err(|e| format!("{e}; regenerate it with `cargo xtask build-stencils`"))
}

/// The clippy step's name.
const CLIPPY: &str = "cargo clippy --workspace --tests";

/// The name of the test build that lints as it compiles (`ci/lint.rs`), in place of
/// [`CLIPPY`].
const LINTED_BUILD: &str =
    "workspace lints: cargo nextest run --workspace --no-run by clippy-driver";

/// `build-stencils --check` with the `toolchain` built since `t`, then waits for `clippy`.
/// The toolchain runs no cargo, so clippy's hold on cargo's lock does not stop it.
fn stencil_check_beside_clippy(
    steps: &mut Vec<Step>,
    toolchain: Result<std::path::PathBuf, String>,
    clippy: Option<Result<beside::Logged, String>>,
    t: Start,
) {
    let stencils = toolchain.and_then(|binary| {
        crate::build_stencils::build_every_set(&binary, &["--check".to_string()])
    });
    if let Err(e) = &stencils {
        eprintln!("ci: {e}");
    }
    // Taken before clippy is waited for, so without its CPU.
    let check = plain("cargo xtask build-stencils --check", stencils.is_ok(), t);
    match clippy {
        None => {}
        Some(Ok(clippy)) => steps.push(beside_step(clippy.finish())),
        Some(Err(e)) => {
            eprintln!("ci: {CLIPPY}: {e}");
            steps.push(plain(CLIPPY, false, Start::now()));
        }
    }
    steps.push(check);
}

/// The step of a process tree run beside others.
fn beside_step(done: beside::Finished) -> Step {
    Step {
        name: done.name,
        counts: Counts::default(),
        ok: done.ok,
        seconds: done.seconds,
        cpu: Some(done.cpu),
    }
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
    let ok = match status {
        Ok(s) => s.success(),
        Err(e) => {
            eprintln!("ci: cannot run {cmd:?}: {e}");
            false
        }
    };
    let (counts, read) = junit_counts(name, &report);
    Step {
        name: name.to_string(),
        counts,
        ok: ok && read && counts.failed == 0,
        seconds: start.wall.elapsed().as_secs_f64(),
        cpu: Some(start.cpu()),
    }
}

/// The test counts of a step's JUnit report, and whether it could be read. A copy named for
/// the step keeps its per-test times (the matrix's rows rewrite the `matrix` report).
fn junit_counts(name: &str, report: &Path) -> (Counts, bool) {
    let kept = report.with_file_name(format!("{}.junit.xml", slug(name)));
    let _ = std::fs::copy(report, &kept);
    let mut counts = Counts::default();
    match std::fs::read_to_string(report).map(|xml| matrix::parse_junit(&xml)) {
        Ok(Ok(cases)) => cases.iter().for_each(|c| counts.add_case(c.outcome)),
        Ok(Err(e)) => {
            eprintln!("ci: {name}: {}: {e}", report.display());
            return (counts, false);
        }
        Err(e) => {
            eprintln!("ci: {name}: no JUnit report {}: {e}", report.display());
            return (counts, false);
        }
    }
    (counts, true)
}

/// The nextest profile of the long runs (`.config/nextest.toml`): they run beside the test
/// matrix, whose rows rewrite the `matrix` profile's report.
const LONG_PROFILE: &str = "long";

/// `cargo nextest run` of a long run, without its nextest profile.
fn long_command(long: &LongRun) -> Command {
    let mut cmd = cargo();
    cmd.args(["nextest", "run", "--cargo-profile", &long.profile])
        .args(["-p", &long.package])
        .envs(&long.env);
    cmd
}

/// Builds the long runs' test binaries here (cargo's lock, which the matrix's archive builds
/// take too, is free again afterwards), then runs them one after another beside the next
/// steps (`ci/beside.rs`). The thread gives each one's step and the CPU its run took there.
fn start_long_runs(runs: &[LongRun]) -> std::thread::JoinHandle<Vec<(Step, f64)>> {
    let mut built = Vec::new();
    for long in runs {
        let name = format!("long: {}", long.name);
        eprintln!("ci: {name}: building its tests");
        let t = Start::now();
        let ok = crate::util::run(long_command(long).arg("--no-run")).is_ok();
        let mut cmd = long_command(long);
        cmd.args(&long.args)
            .args(["--profile", LONG_PROFILE, "--no-fail-fast"]);
        built.push((name, cmd, ok, t.wall, t.cpu()));
    }
    let report = root()
        .join("target/nextest")
        .join(LONG_PROFILE)
        .join("junit.xml");
    std::thread::spawn(move || {
        let mut steps = Vec::new();
        for (name, mut cmd, built, started, build_cpu) in built {
            let (ok, counts, cpu) = if built {
                let _ = std::fs::remove_file(&report);
                match beside::Logged::start(&name, &mut cmd, &beside::log_path(&root(), &name)) {
                    Ok(run) => {
                        let done = run.finish();
                        let (counts, read) = junit_counts(&name, &report);
                        (done.ok && read && counts.failed == 0, counts, done.cpu)
                    }
                    Err(e) => {
                        eprintln!("ci: {name}: {e}");
                        (false, Counts::default(), 0.0)
                    }
                }
            } else {
                (false, Counts::default(), 0.0)
            };
            let step = Step {
                name,
                counts,
                ok,
                seconds: started.elapsed().as_secs_f64(),
                cpu: Some(build_cpu + cpu),
            };
            steps.push((step, cpu));
        }
        steps
    })
}

/// `name` as a file name: lower-case letters and digits, other runs as one `-`.
pub(crate) fn slug(name: &str) -> String {
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
    if steps.iter().any(|s| !s.ok) {
        let dirs = disk::written_dirs(&root());
        if let Some(full) = disk::full_disk_line("ci: failed steps", &dirs, false) {
            println!("{full}");
        }
    }
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

    /// The native steps leave the generated crates out because they have no tests: if the
    /// generator ever writes one, this fails rather than the steps silently skipping it.
    #[test]
    fn the_generated_crates_left_out_hold_no_tests() {
        let root = root();
        let generated = generated_packages(&root).unwrap();
        for name in [
            "cpjit-stencils",
            "cpjit-stencils-x86_64-unknown-linux-gnu",
            "cpjit-stencils-threearg-riscv64gc-unknown-linux-gnu",
            "cpjit-vm-stencils",
            "cpjit-vm-stencils-aarch64-apple-darwin",
        ] {
            assert!(
                generated.iter().any(|g| g == name),
                "{name} not in {generated:?}"
            );
        }
        assert!(!generated
            .iter()
            .any(|g| g == "cpjit-runtime" || g == "cpjit-vm"));
        let mut sources = 0;
        for set in crate::build_stencils::kit_sets(&root).unwrap() {
            for entry in std::fs::read_dir(&set.out).unwrap() {
                let src = entry.unwrap().path().join("src");
                for file in std::fs::read_dir(&src).into_iter().flatten() {
                    let path = file.unwrap().path();
                    let text = std::fs::read_to_string(&path).unwrap();
                    for test in ["#[test]", "#[cfg(test)]", "```"] {
                        assert!(!text.contains(test), "{} has `{test}`", path.display());
                    }
                    sources += 1;
                }
            }
        }
        assert!(sources >= generated.len(), "{sources} sources");
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
