//! `cpjit-toolchain`: the LLVM-linked binary behind `cargo xtask build-stencils` and
//! `cargo xtask stencils show` (see `cli::USAGE`).

use cpjit_toolchain::cli::{self, Command};
use cpjit_toolchain::driver;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The workspace root: the parent of this crate's directory.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("toolchain/ is inside the workspace");
    let result = match cli::parse(&args, root) {
        Ok(Command::Help) => {
            print!("{}", cli::USAGE);
            Ok(())
        }
        Ok(Command::Build(opts)) => driver::build_stencils(&opts).map(|report| {
            for line in report.lines {
                println!("{line}");
            }
        }),
        Ok(Command::Show(opts, name)) => {
            driver::show(&opts, name.as_deref()).map(|text| print!("{text}"))
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
