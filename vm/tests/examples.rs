//! Every example program gives its committed expected output (including a runtime error's
//! message and location) in every execution mode.

use crate::common;

use common::{config, run, MODES};

fn check(name: &str, program: &str, expected: &str) {
    for mode in MODES {
        let out = run(program, config(mode));
        assert!(
            out == expected,
            "examples/{name}.vm in {mode:?} mode:\n{out}\nexpected:\n{expected}"
        );
    }
}

macro_rules! examples {
    ($($name:ident)*) => {$(
        #[test]
        fn $name() {
            check(
                stringify!($name),
                include_str!(concat!("../../examples/", stringify!($name), ".vm")),
                include_str!(concat!("../../examples/", stringify!($name), ".expected")),
            );
        }
    )*};
}

examples!(sum fib nested collatz sieve mandelbrot nbody calls overflow);
