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

examples!(sum fib nested collatz sieve mandelbrot nbody calls overflow);

/// A mode added to the VM must get its test above: this match stops compiling.
#[allow(dead_code)]
fn every_mode_has_its_test(mode: Mode) {
    match mode {
        Mode::Interp | Mode::Uops | Mode::Jit => {}
    }
}
