//! `cargo xtask`: the project's task runner (the cargo-xtask convention).
//!
//! Architecture invariant: xtask is thin and builds in seconds on light, well-kept crates
//! (clap, serde, toml, serde_json, quick-xml) and `cpjit-model`; it never links LLVM. The
//! LLVM-linked stencil toolchain and the bench are separate binaries that xtask builds and
//! runs after checking the system set-up; their arguments are theirs to parse.
//!
//! Every task acts on the kit checkout `--kit DIR` or `CPJIT_KIT` names, else on the one
//! holding the current directory (`kit.rs`), whichever checkout built this binary.

mod bench;
mod build_stencils;
mod cargo_env;
mod ci;
mod fuzz;
mod kit;
mod matrix;
mod setup;
mod sidecar;
mod support;
mod targets;
mod util;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Tasks of the cpjit workspace",
    version
)]
struct Cli {
    /// The kit checkout to act on [default: $CPJIT_KIT, else the checkout holding the
    /// current directory].
    #[arg(long, value_name = "DIR")]
    kit: Option<PathBuf>,
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Compile the template set into one stencil crate per target (arguments go to the
    /// toolchain; `cargo xtask build-stencils --help` lists them).
    #[command(disable_help_flag = true)]
    BuildStencils(Passthrough),
    /// Disassemble stencils with their holes annotated (arguments go to the toolchain).
    #[command(disable_help_flag = true)]
    Stencils(Passthrough),
    /// Run every target's tests with that target's stencils (rows: targets/*.toml).
    TestMatrix(matrix::Options),
    /// Write the support report (docs/support/support-report.{md,json}): every target's
    /// facts, how the matrix executes it, its stencil sets, test results and known limits.
    SupportReport(support::Options),
    /// Benchmarks (arguments go to the cpjit-bench binary).
    #[command(disable_help_flag = true)]
    Bench(Passthrough),
    /// Run the fuzz targets of fuzz/ for a bounded time each (nightly and cargo-fuzz are
    /// installed on demand).
    Fuzz(FuzzOptions),
    /// The full test suite (what .ci/run runs); ends with `N passed, M failed`.
    Ci,
    /// Install or check system packages, rustup targets, cargo-nextest and the wine prefix.
    Setup,
    /// Print the kit checkout the tasks act on (see --kit).
    Kit,
    /// Print, as shell `export` lines, the linker, runner and C compiler of each Rust
    /// target that xtask gives cargo (from targets/*.toml), for running cargo by hand.
    Env,
}

/// `cargo xtask fuzz`.
#[derive(clap::Args)]
struct FuzzOptions {
    /// Seconds each target runs.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Targets to run (default: all).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(fuzz::TARGETS))]
    targets: Vec<String>,
}

/// Arguments handed unparsed to another binary, which owns their syntax and usage text.
#[derive(clap::Args)]
struct Passthrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env = std::env::var_os(kit::ENV).map(PathBuf::from);
    let explicit = cli.kit.as_deref().or(env.as_deref());
    let root = match locate(explicit) {
        Ok(root) => root,
        Err(e) => return fail(&e),
    };
    // A binary compiled in another checkout (a shared target directory) run for this one:
    // rebuild it here and run that.
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run_for = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    if kit::stale_build(compiled, run_for.as_deref(), &root, explicit.is_some()) {
        let args: Vec<_> = std::env::args_os().skip(1).collect();
        return match kit::rerun_from(&root, compiled, &args) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => fail(&e),
        };
    }
    util::set_root(root);
    let result = match cli.task {
        Task::BuildStencils(p) => build_stencils::build_stencils(&p.args),
        Task::Stencils(p) => build_stencils::stencils(&p.args),
        Task::TestMatrix(o) => matrix::run(&o),
        Task::SupportReport(o) => support::run(&o),
        Task::Bench(p) => bench::run(&p.args),
        Task::Fuzz(o) => fuzz::run(o.seconds, &o.targets),
        Task::Ci => ci::run(),
        Task::Setup => setup::ensure(),
        Task::Kit => {
            println!("{}", util::root().display());
            Ok(())
        }
        Task::Env => cargo_env::all_variables(&util::root()).map(|vars| {
            for (k, v) in vars {
                println!("export {k}='{v}'");
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// The kit checkout to act on: `explicit` (`--kit`, else `CPJIT_KIT`), else the current
/// directory's.
fn locate(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    kit::find(explicit, &cwd)
}

fn fail(e: &str) -> ExitCode {
    eprintln!("xtask: error: {e}");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn toolchain_arguments_pass_through_untouched() {
        let cli = Cli::try_parse_from(["xtask", "build-stencils", "--check", "--help", "-j", "2"])
            .unwrap();
        let Task::BuildStencils(p) = cli.task else {
            panic!("not build-stencils")
        };
        assert_eq!(p.args, ["--check", "--help", "-j", "2"]);
    }

    #[test]
    fn matrix_options_parse_and_unknown_flags_are_errors() {
        let cli = Cli::try_parse_from([
            "xtask",
            "test-matrix",
            "--target",
            "a",
            "--suite",
            "vm",
            "--json",
            "--native",
        ])
        .unwrap();
        let Task::TestMatrix(o) = cli.task else {
            panic!("not test-matrix")
        };
        assert_eq!(o.targets, ["a"]);
        assert_eq!(o.suites, ["vm"]);
        assert!(o.json && o.native && !o.self_test);
        assert!(Cli::try_parse_from(["xtask", "test-matrix", "--frob"]).is_err());
        assert!(Cli::try_parse_from(["xtask", "test-matrix", "--target"]).is_err());
        assert!(Cli::try_parse_from(["xtask", "ci", "--x"]).is_err());
        let cli = Cli::try_parse_from(["xtask", "fuzz", "--seconds", "5", "trace"]).unwrap();
        let Task::Fuzz(f) = cli.task else {
            panic!("not fuzz")
        };
        assert_eq!(
            (f.seconds, f.targets.as_slice()),
            (5, ["trace".to_string()].as_slice())
        );
        assert!(Cli::try_parse_from(["xtask", "fuzz", "nonesuch"]).is_err());
        let cli = Cli::try_parse_from([
            "xtask",
            "support-report",
            "--matrix",
            "m.json",
            "--date",
            "2026-11-29",
            "--check",
        ])
        .unwrap();
        let Task::SupportReport(s) = cli.task else {
            panic!("not support-report")
        };
        assert_eq!(s.matrix.as_deref(), Some(Path::new("m.json")));
        assert!(s.check && s.date.as_deref() == Some("2026-11-29") && s.out.is_none());
    }
}
