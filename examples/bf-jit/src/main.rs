//! `bf-jit FILE [--interpret]`: runs a Brainfuck program with the JIT (or the reference
//! interpreter), stdin as its input and its output on stdout.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, interpret) = match args.as_slice() {
        [f] => (f, false),
        [f, flag] if flag == "--interpret" => (f, true),
        _ => {
            eprintln!("usage: bf-jit FILE [--interpret]");
            return ExitCode::from(2);
        }
    };
    match run(file, interpret) {
        Ok(bf_jit::Status::Ok) => ExitCode::SUCCESS,
        Ok(bf_jit::Status::TapeOverflow) => {
            eprintln!("bf-jit: {file}: the data pointer left the tape");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bf-jit: {file}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(file: &str, interpret: bool) -> Result<bf_jit::Status, Box<dyn std::error::Error>> {
    let ops = bf_jit::parse(&std::fs::read(file)?)?;
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input)?;
    let outcome = if interpret {
        bf_jit::interpret(&ops, &input)
    } else {
        bf_jit::Compiler::new()?.compile(&ops)?.run(&input)
    };
    std::io::stdout().write_all(&outcome.output)?;
    Ok(outcome.status)
}
