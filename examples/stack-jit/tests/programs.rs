//! Hand-written programs: each op's meaning (checked against values worked out here, not
//! only against the interpreter), the loop programs of the bench in all three modes, and the
//! verifier's refusals.

use stack_jit::programs::{collatz, fib_mix, series};
use stack_jit::{interpret, verify, Compiler, Mode, Op, Outcome};
use Op::*;

/// Runs `ops` in the interpreter and both JIT modes; all must agree; returns the outcome.
fn run_all(ops: &[Op]) -> Outcome {
    let want = interpret(ops).expect("the program verifies");
    let compiler = Compiler::new().expect("the host's stencil set loads");
    for mode in [Mode::Uncached, Mode::Cached] {
        let got = compiler
            .compile(ops, mode)
            .expect("the program compiles")
            .run();
        assert_eq!(
            got, want,
            "{mode:?} differs from the interpreter on {ops:?}"
        );
    }
    want
}

fn result(ops: &[Op]) -> i64 {
    run_all(ops).result
}

#[test]
fn each_op_computes_what_it_says() {
    assert_eq!(result(&[Const(7), Const(5), Sub, Ret]), 2);
    assert_eq!(result(&[Const(i64::MAX), Const(1), Add, Ret]), i64::MIN);
    assert_eq!(result(&[Const(1 << 40), Const(1 << 30), Mul, Ret]), 0);
    assert_eq!(result(&[Const(-1), Const(60), Shr, Ret]), 15);
    assert_eq!(
        result(&[Const(-8), Const(65), Shr, Ret]),
        ((-8i64 as u64) >> 1) as i64
    );
    assert_eq!(result(&[Const(0b1100), Const(0b1010), And, Ret]), 0b1000);
    assert_eq!(result(&[Const(-1), Const(0), Lt, Ret]), 1);
    assert_eq!(result(&[Const(0), Const(-1), Lt, Ret]), 0);
    assert_eq!(result(&[Const(3), Const(3), Eq, Ret]), 1);
    assert_eq!(result(&[Const(3), Const(1), Swap, Sub, Ret]), -2);
    assert_eq!(result(&[Const(9), Dup, Mul, Ret]), 81);
    assert_eq!(result(&[Const(1), Const(2), Drop, Ret]), 1);
    assert_eq!(result(&[Const(11), Store(15), Const(0), Load(15), Ret]), 11);
    assert_eq!(
        result(&[Const(5), Const(6), Mix, Ret]),
        stack_jit::mix(5, 6)
    );
    let out = run_all(&[Const(4), Print, Const(-2), Print, Const(0), Ret]);
    assert_eq!(out.output, [4, -2]);
}

#[test]
fn jumps_keep_values_on_the_stack_across_edges() {
    // 1 + (c ? 10 : 20) for c = 0 and 1, with three values live around the branch.
    for (c, want) in [(0, 100 + 1 + 20), (1, 100 + 1 + 10)] {
        let ops = [
            Const(100),
            Const(1),
            Const(c),
            Jz(6),
            Const(10),
            Jump(7),
            Const(20),
            Add,
            Add,
            Ret,
        ];
        assert_eq!(result(&ops), want);
    }
    // A loop whose running sum stays on the stack: sum of 1..=10 with Jnz as the back edge.
    let ops = [
        Const(0),
        Const(10),
        Store(0),
        Load(0),
        Add,
        Load(0),
        Const(1),
        Sub,
        Dup,
        Store(0),
        Jnz(3),
        Ret,
    ];
    assert_eq!(result(&ops), 55);
}

#[test]
fn the_bench_programs_agree_in_every_mode() {
    // Totals computed independently in Rust.
    let steps: i64 = (1..=1000i64)
        .map(|mut n| {
            let mut s = 0;
            while n != 1 {
                n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
                s += 1;
            }
            s
        })
        .sum();
    assert_eq!(result(&collatz(1000)), steps);
    let sum: i64 = (0..5000i64).map(|i| ((i * i) & 0xffff) + i).sum();
    assert_eq!(result(&series(5000)), sum);
    let out = run_all(&fib_mix(30));
    assert_eq!(out.output[..6], [0, 1, 1, 2, 3, 5]);
    assert_eq!(out.result, 832_040);
}

#[test]
fn caching_keeps_values_in_registers() {
    // The cached trace is the same program with fewer loads and stores: smaller code. (If
    // the kit chose the plain members, or glue everywhere, it would not be.)
    let compiler = Compiler::new().unwrap();
    let ops = series(10);
    let plain = compiler.compile(&ops, Mode::Uncached).unwrap();
    let cached = compiler.compile(&ops, Mode::Cached).unwrap();
    assert!(
        cached.code_bytes().len() * 4 < plain.code_bytes().len() * 3,
        "cached {} B, uncached {} B",
        cached.code_bytes().len(),
        plain.code_bytes().len()
    );
}

#[test]
fn invalid_programs_are_refused_with_the_op_and_the_reason() {
    let refused = |ops: &[Op], want: &str| {
        let e = verify(ops).expect_err("refused");
        assert!(e.to_string().contains(want), "{e} does not say `{want}`");
        let compiler = Compiler::new().unwrap();
        let e = compiler.compile(ops, Mode::Cached).err().expect("refused");
        assert!(e.to_string().contains(want), "{e} does not say `{want}`");
    };
    refused(&[], "the program is empty");
    refused(&[Add, Ret], "op 0: Add pops 2 values, the stack holds 0");
    refused(&[Const(1)], "op 0: the program runs off its end");
    refused(&[Load(16), Ret], "op 0: local 16 does not exist");
    refused(
        &[Const(0), Jz(9), Const(1), Ret],
        "op 1: jumps to op 9, past the end",
    );
    refused(
        &[Const(0), Jz(3), Const(1), Const(2), Ret],
        "op 3: reached with 1 and with 0 values",
    );
    let deep: Vec<Op> = std::iter::repeat_n(Const(1), 65).chain([Ret]).collect();
    refused(&deep, "op 64: the stack would hold more than 64 values");
}
