//! Every example program gives its committed expected output (including a runtime error's
//! message and location) in every execution mode: one test per program and mode, since only
//! `jit` reads `CPJIT_STENCILS` (the test matrix runs `interp` and `uops` once per Rust
//! target, not once per stencil set: `stencil_free` in ci/matrix.toml).

use crate::common;

use common::{config, run};
use cpjit_vm::Mode;

fn check(name: &str, program: &str, expected: &str, mode: Mode) {
    let out = run(program, config(mode));
    assert!(
        out == expected,
        "examples/{name}.vm in {mode:?} mode:\n{out}\nexpected:\n{expected}"
    );
}

macro_rules! examples {
    ($($name:ident)*) => {$(
        mod $name {
            use cpjit_vm::Mode;

            const PROGRAM: &str =
                include_str!(concat!("../examples/", stringify!($name), ".vm"));
            const EXPECTED: &str =
                include_str!(concat!("../examples/", stringify!($name), ".expected"));

            #[test]
            fn interp() {
                super::check(stringify!($name), PROGRAM, EXPECTED, Mode::Interp);
            }

            #[test]
            fn uops() {
                super::check(stringify!($name), PROGRAM, EXPECTED, Mode::Uops);
            }

            #[test]
            fn jit() {
                super::check(stringify!($name), PROGRAM, EXPECTED, Mode::Jit);
            }
        }
    )*};
}

examples!(sum fib nested collatz sieve mandelbrot nbody calls overflow integrate insertion recursion);

/// A mode added to the VM must get its test above: this match stops compiling.
#[allow(dead_code)]
fn every_mode_has_its_test(mode: Mode) {
    match mode {
        Mode::Interp | Mode::Uops | Mode::Jit => {}
    }
}

/// `cpjit-vm compile-time` compiles each program's traces again and reports nanoseconds per
/// instance; it refuses zero rounds, naming the flag. The programs are written to a
/// temporary directory from the test's own copy: the matrix runs archived test binaries,
/// whose working directory has no `examples/`. x86-64 Linux only, as the other tests that
/// start the `cpjit-vm` binary (`debug_flags.rs`): under qemu or wine, a child process of
/// the test is not started through the row's runner.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn compile_time_reports_the_backend_compile_per_instance() {
    let vm = env!("CARGO_BIN_EXE_cpjit-vm");
    let dir = std::env::temp_dir().join(format!("cpjit-vm-compile-time-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let programs = [
        ("sum.vm", include_str!("../examples/sum.vm")),
        ("calls.vm", include_str!("../examples/calls.vm")),
    ];
    let files: Vec<String> = programs
        .iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        })
        .collect();
    let out = std::process::Command::new(vm)
        .arg("compile-time")
        .args(&files)
        .args(["--rounds", "3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, file) in lines.iter().zip(&files) {
        assert!(line.starts_with(&format!("{file}: ")), "{line}");
        assert!(
            line.contains(" instances: ") && line.contains(" ns/instance (median of 3;"),
            "{line}"
        );
    }
    let out = std::process::Command::new(vm)
        .args(["compile-time", &files[0], "--rounds", "0"])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rounds > 0"));
}
