//! `cargo xtask ci`: the whole test suite, as run by `.ci/run`.
//!
//! Steps: set-up (`ci/setup.sh`), `cargo fmt --check`, `build-stencils --check`, the native
//! `cargo test --workspace`, the long runs of `ci/matrix.toml` (`[[long]]`), the test
//! matrix with its compile-only checks, and the matrix self-test. Later steps still run
//! when one fails (except the set-up, which everything needs). The last line is
//! `N passed, M failed`: tests counted from libtest output, plus one per step that has no
//! tests of its own (formatting, stencil check, compile-only checks, self-test) or that
//! failed without a failing test (a build error).

use crate::matrix::{self, Counts, Matrix};
use crate::util::{cargo, root};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

struct Step {
    name: String,
    counts: Counts,
    ok: bool,
    seconds: f64,
}

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("ci takes no options (got `{a}`)"));
    }
    let start = Instant::now();
    let mut steps: Vec<Step> = Vec::new();

    let t = Instant::now();
    let setup = crate::setup::ensure();
    steps.push(plain("setup (ci/setup.sh)", setup.is_ok(), t));
    if let Err(e) = setup {
        eprintln!("ci: {e}");
        return finish(&steps, start);
    }

    let t = Instant::now();
    let fmt = crate::util::run(cargo().args(["fmt", "--all", "--", "--check"]));
    steps.push(plain("cargo fmt --all -- --check", fmt.is_ok(), t));

    let t = Instant::now();
    let stencils = crate::build_stencils::build_stencils(&["--check".to_string()]);
    if let Err(e) = &stencils {
        eprintln!("ci: {e}");
    }
    steps.push(plain(
        "cargo xtask build-stencils --check",
        stencils.is_ok(),
        t,
    ));

    steps.push(cargo_test(
        "cargo test --workspace",
        cargo().args(["test", "--workspace"]),
    ));

    let definition = Matrix::load(&root())?;
    for long in &definition.long {
        let mut cmd = cargo();
        cmd.arg("test");
        if long.release {
            cmd.arg("--release");
        }
        cmd.args(["-p", &long.package, "--"])
            .args(&long.args)
            .envs(&long.env);
        steps.push(cargo_test(&format!("long: {}", long.name), &mut cmd));
    }

    let t = Instant::now();
    match matrix::run_matrix(&matrix::Options::default(), &Default::default()) {
        Ok(report) => {
            print!("{}", report.table());
            for row in &report.rows {
                steps.push(Step {
                    name: format!("matrix: {} ({})", row.triple, row.executed),
                    counts: row.counts,
                    ok: row.passed(),
                    seconds: row.time.as_secs_f64(),
                });
            }
            for c in &report.checks {
                steps.push(Step {
                    name: format!("matrix: cargo check --target {}", c.target),
                    counts: Counts::default(),
                    ok: c.error.is_none(),
                    seconds: c.time.as_secs_f64(),
                });
            }
        }
        Err(e) => {
            eprintln!("ci: test matrix: {e}");
            steps.push(plain("test matrix", false, t));
        }
    }

    let t = Instant::now();
    let self_test = matrix::self_test(&matrix::Options::default());
    if let Err(e) = &self_test {
        eprintln!("ci: {e}");
    }
    steps.push(plain("test matrix --self-test", self_test.is_ok(), t));

    finish(&steps, start)
}

/// A step without tests of its own.
fn plain(name: &str, ok: bool, started: Instant) -> Step {
    Step {
        name: name.to_string(),
        counts: Counts::default(),
        ok,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Runs a `cargo test` command, echoing its output and counting libtest results.
fn cargo_test(name: &str, cmd: &mut Command) -> Step {
    eprintln!("ci: {name}");
    let start = Instant::now();
    let mut text = String::new();
    let status = cmd.stdout(Stdio::piped()).spawn().and_then(|mut child| {
        let out = child.stdout.take().expect("piped");
        for line in BufReader::new(out).lines() {
            let line = line?;
            println!("{line}");
            text.push_str(&line);
            text.push('\n');
        }
        child.wait()
    });
    let summary = matrix::parse_libtest(&text);
    let ok = match status {
        Ok(s) => s.success() && summary.counts.failed == 0,
        Err(e) => {
            eprintln!("ci: cannot run {cmd:?}: {e}");
            false
        }
    };
    Step {
        name: name.to_string(),
        counts: summary.counts,
        ok,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// Prints the step summary and the final `N passed, M failed` line.
fn finish(steps: &[Step], start: Instant) -> Result<(), String> {
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
        println!(
            "  {:<6} {:>7.1}s  {}  {tests}",
            if s.ok { "ok" } else { "FAILED" },
            s.seconds,
            s.name
        );
    }
    println!("total time {:.1}s", start.elapsed().as_secs_f64());
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
        }
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
