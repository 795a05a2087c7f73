//! The command line, `ebpf-jit run PROG.bin [--mem FILE] [--mbuff FILE] [--engine
//! jit|interp]`: runs a raw little-endian eBPF program with the JIT (or the reference
//! interpreter) and prints r0. A refused program or a faulting access prints one line naming
//! the instruction index and what was wrong, and exits with status 1. In the library so that
//! the tests run it in-process (also under qemu).

use crate::EbpfVm;
use std::io::Write;

const USAGE: &str =
    "usage: ebpf-jit run PROG.bin [--mem FILE] [--mbuff FILE] [--engine jit|interp]";

/// Helpers every program run from the command line may call (ids as in rbpf's `helpers`
/// module where they overlap): 1 = r1 + r2 + r3 + r4 + r5, 2 = r1 * r2 (wrapping),
/// 6 = print r1..r5 in hex on stderr and return 0.
fn sum(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
    a.wrapping_add(b)
        .wrapping_add(c)
        .wrapping_add(d)
        .wrapping_add(e)
}
fn mul(a: u64, b: u64, _: u64, _: u64, _: u64) -> u64 {
    a.wrapping_mul(b)
}
fn trace(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
    eprintln!("trace: {a:#x} {b:#x} {c:#x} {d:#x} {e:#x}");
    0
}

/// Runs the command line `args` (without the program name), writing r0 to `out` and
/// errors to `err`; returns the exit status (0, 1 for an error, 2 for a usage error).
pub fn main_with(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match parse(args) {
        Some(opts) => match run(&opts) {
            Ok(r0) => {
                let _ = writeln!(out, "{r0}");
                0
            }
            Err(e) => {
                let _ = writeln!(err, "ebpf-jit: {}: {e}", opts.prog);
                1
            }
        },
        None => {
            let _ = writeln!(err, "{USAGE}");
            2
        }
    }
}

struct Options {
    prog: String,
    mem: Option<String>,
    mbuff: Option<String>,
    jit: bool,
}

fn parse(args: &[String]) -> Option<Options> {
    let (cmd, rest) = args.split_first()?;
    if cmd != "run" {
        return None;
    }
    let mut opts = Options {
        prog: String::new(),
        mem: None,
        mbuff: None,
        jit: true,
    };
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mem" => opts.mem = Some(it.next()?.clone()),
            "--mbuff" => opts.mbuff = Some(it.next()?.clone()),
            "--engine" => {
                opts.jit = match it.next()?.as_str() {
                    "jit" => true,
                    "interp" => false,
                    _ => return None,
                }
            }
            p if !p.starts_with("--") && opts.prog.is_empty() => opts.prog = p.to_string(),
            _ => return None,
        }
    }
    (!opts.prog.is_empty()).then_some(opts)
}

fn run(opts: &Options) -> Result<u64, Box<dyn std::error::Error>> {
    let prog = std::fs::read(&opts.prog)?;
    let read = |f: &Option<String>| f.as_ref().map_or(Ok(Vec::new()), std::fs::read);
    let mut mem = read(&opts.mem)?;
    let mut mbuff = read(&opts.mbuff)?;
    let mut vm = EbpfVm::new(&prog)?;
    vm.register_helper(1, sum);
    vm.register_helper(2, mul);
    vm.register_helper(6, trace);
    Ok(if opts.jit {
        vm.jit_compile()?;
        vm.execute_jit_mbuff(&mut mem, &mut mbuff)?
    } else {
        vm.interpret_mbuff(&mut mem, &mut mbuff)?
    })
}
