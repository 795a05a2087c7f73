//! `cpjit`: the LLVM-linked stencil toolchain, behind `cargo xtask build-stencils` and
//! `cargo xtask stencils show`, installable with `cargo install --path toolchain`.
//! Usage: `cpjit --help` (the text comes from `cli::Cli`).

use clap::Parser;
use cpjit_toolchain::cli::{self, Cli, Command, StencilsCommand};
use cpjit_toolchain::driver;
use cpjit_toolchain::error::{Error, Result};
use std::process::ExitCode;

fn main() -> ExitCode {
    // Before parsing, so that xtask can probe with `--version`: a binary compiled in
    // another checkout than the one xtask built it for must not act with that one's code.
    if let Some(expected) = std::env::var_os(cli::EXPECT_CHECKOUT_ENV) {
        if let Some(compiled) = cli::compiled_elsewhere(std::path::Path::new(&expected)) {
            eprintln!(
                "error: this cpjit was compiled in {}, not in {} ({}): a target directory \
                 shared by two checkouts; rebuild it from {}",
                compiled.display(),
                expected.to_string_lossy(),
                cli::EXPECT_CHECKOUT_ENV,
                expected.to_string_lossy()
            );
            return ExitCode::from(cli::OTHER_CHECKOUT_STATUS);
        }
    }
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    // Relative paths are the caller's: resolved against the directory `cpjit` runs in, as is
    // the kit checkout (cli::find_kit).
    let cwd = std::env::current_dir()
        .map_err(|e| Error(format!("cannot read the current directory: {e}")))?;
    match command {
        Command::BuildStencils(args) if args.list_stale => {
            for triple in driver::stale_crates(&args.options(&cwd)?)? {
                println!("{triple}");
            }
        }
        Command::BuildStencils(args) => {
            let report = driver::build_stencils(&args.options(&cwd)?)?;
            for line in report.lines {
                println!("{line}");
            }
        }
        Command::Stencils(StencilsCommand::Show(args)) => {
            print!(
                "{}",
                driver::show(&args.common.options(&cwd)?, args.name.as_deref())?
            );
        }
        Command::Header(args) => println!("{}", args.run(&cwd)?),
    }
    Ok(())
}
