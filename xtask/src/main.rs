//! `cargo xtask`: the project's task runner (the cargo-xtask convention).
//!
//! Architecture invariant: xtask is thin and compiles without LLVM, clang or any heavy
//! dependency. The LLVM-linked stencil toolchain is a separate binary
//! (`cpjit-toolchain`) that xtask builds and runs after checking the system set-up.

mod bench;
mod build_stencils;
mod ci;
mod fuzz;
mod matrix;
mod setup;
mod util;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  build-stencils [--target T]... [--all] [--templates DIR] [--out DIR] [--check] [--json FILE] [-j N]
                      compile the template set into one stencil crate per target
  stencils show [--target T] [NAME]
                      disassemble stencils with their holes annotated
  test-matrix [--target T]... [--suite S]... [--native] [--no-check] [--self-test] [--json]
                      run every target's tests with that target's stencils (ci/matrix.toml)
  bench [--quick] [--report] [--only GROUPS]
                      benchmarks: toolchain, stitching, memory, LLVM peer, examples;
                      --report rewrites BENCHMARKS.md and bench/report/*.svg
  fuzz [--seconds N] [TARGET]...
                      run the fuzz targets of fuzz/ (nightly + cargo-fuzz, installed on demand)
  ci                  the full test suite (what .ci/run runs)
  setup               install or check system packages, rustup targets and the wine prefix
";

/// `fuzz [--seconds N] [TARGET]...`
fn fuzz_args(args: &[String]) -> Result<(u64, Vec<String>), String> {
    let mut seconds = 60;
    let mut targets = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                let v = it.next().ok_or("--seconds needs a number")?;
                seconds = v
                    .parse()
                    .map_err(|_| format!("--seconds: `{v}` is not a whole number"))?;
            }
            t => targets.push(t.to_string()),
        }
    }
    Ok((seconds, targets))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match task.as_str() {
        "build-stencils" => build_stencils::build_stencils(rest),
        "stencils" => build_stencils::stencils(rest),
        "test-matrix" => matrix::run(rest),
        "bench" => bench::run(rest),
        "ci" => ci::run(rest),
        "fuzz" => fuzz_args(rest).and_then(|(s, t)| fuzz::run(s, &t)),
        "setup" => setup::ensure(),
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown task `{other}`\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
