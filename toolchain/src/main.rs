//! `cpjit`: the LLVM-linked stencil toolchain, behind `cargo xtask build-stencils` and
//! `cargo xtask stencils show`, installable with `cargo install --path toolchain`.
//! Usage: `cpjit --help` (the text comes from `cli::Cli`).

use clap::Parser;
use cpjit_toolchain::cli::{Cli, Command, StencilsCommand};
use cpjit_toolchain::driver;
use cpjit_toolchain::error::{Error, Result};
use std::process::ExitCode;

fn main() -> ExitCode {
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
