//! Differential tests on generated programs: random structured programs (assignments,
//! prints, `if`/`else`, `while` and do-while loops, early returns) whose expressions also
//! branch and loop *with values on the stack* (a conditional expression, a running sum), so
//! that jump targets are reached with values cached. Each program runs in the interpreter
//! and both JIT modes; all must agree. The cached traces need no glue: a jump takes its
//! member that exits in its label's state (the manifest keeps every member of the jumping
//! ops), and a label bound after a `jump` or `ret` (no fall-through) gets none; so each
//! cached trace has exactly one instance per op.

use stack_jit::programs::Asm;
use stack_jit::{interpret, Compiler, Mode, Op};

/// Programs per run (each compiled twice and run three times).
const PROGRAMS: usize = 2000;

/// Programs under qemu (`CPJIT_EXAMPLE_QEMU`, set by `../outside-crate-ci.sh`): the same
/// first seeds, each of which the native run also checks, to keep the emulated rows quick.
const PROGRAMS_UNDER_QEMU: usize = 300;

/// How many programs this run checks.
fn programs() -> usize {
    if std::env::var_os("CPJIT_EXAMPLE_QEMU").is_some() {
        PROGRAMS_UNDER_QEMU
    } else {
        PROGRAMS
    }
}

/// Locals 0..VARS are the program's variables; loop counters take VARS + nesting depth.
const VARS: u8 = 6;

struct Gen {
    rng: fastrand::Rng,
    asm: Asm,
    /// Loops open around the code being generated (counter locals in use).
    loops: u8,
}

impl Gen {
    fn value(&mut self) -> i64 {
        match self.rng.u8(0..4) {
            0 => self.rng.i64(..),
            1 => self.rng.i64(-3..=3),
            _ => self.rng.i64(0..100),
        }
    }

    /// Code that pushes one value.
    fn expr(&mut self, depth: u32) {
        use Op::*;
        let pick = if depth == 0 {
            self.rng.u8(0..2)
        } else {
            self.rng.u8(0..9)
        };
        match pick {
            0 => {
                let v = self.value();
                self.asm.ops(&[Const(v)]);
            }
            1 => {
                let v = self.rng.u8(0..VARS + self.loops);
                self.asm.ops(&[Load(v)]);
            }
            2..=4 => {
                self.expr(depth - 1);
                self.expr(depth - 1);
                let op = [Add, Sub, Mul, And, Shr, Lt, Eq, Mix][self.rng.usize(0..8)];
                self.asm.ops(&[op]);
            }
            // x * x, through dup
            5 => {
                self.expr(depth - 1);
                self.asm.ops(&[Dup, Mul]);
            }
            // b - a, through swap
            6 => {
                self.expr(depth - 1);
                self.expr(depth - 1);
                self.asm.ops(&[Swap, Sub]);
            }
            // c ? a : b, either branch first
            7 => {
                let (other, end) = (self.asm.label(), self.asm.label());
                self.expr(depth - 1);
                self.asm.ops(&[if self.rng.bool() {
                    Jz(other)
                } else {
                    Jnz(other)
                }]);
                self.expr(depth - 1);
                self.asm.ops(&[Jump(end)]);
                self.asm.place(other);
                self.expr(depth - 1);
                self.asm.place(end);
            }
            // the sum of k evaluations of e, the running sum on the stack (a do-while)
            _ if self.loops < 16 - VARS => {
                let counter = VARS + self.loops;
                let k = self.rng.i64(1..=4);
                let head = self.asm.label();
                self.asm.ops(&[Const(0), Const(k), Store(counter)]);
                self.asm.place(head);
                self.loops += 1;
                self.expr(depth - 1);
                self.loops -= 1;
                self.asm
                    .ops(&[Add, Load(counter), Const(1), Sub, Dup, Store(counter)]);
                self.asm.ops(&[Jnz(head)]);
            }
            _ => {
                self.asm.ops(&[Const(1)]);
            }
        }
    }

    fn expr_random(&mut self) {
        let depth = self.rng.u32(0..=3);
        self.expr(depth);
    }

    /// Code that leaves the stack as it found it.
    fn stmts(&mut self, n: usize, depth: u32) {
        use Op::*;
        for _ in 0..n {
            let pick = if depth == 0 {
                self.rng.u8(0..4)
            } else {
                self.rng.u8(0..8)
            };
            match pick {
                0 | 1 => {
                    self.expr_random();
                    let v = self.rng.u8(0..VARS);
                    self.asm.ops(&[Store(v)]);
                }
                2 => {
                    self.expr_random();
                    self.asm.ops(&[Print]);
                }
                3 => {
                    self.expr_random();
                    self.asm.ops(&[Drop]);
                }
                4 => {
                    let (other, end) = (self.asm.label(), self.asm.label());
                    self.expr_random();
                    self.asm.ops(&[Jz(other)]);
                    let k = self.rng.usize(1..4);
                    self.stmts(k, depth - 1);
                    self.asm.ops(&[Jump(end)]);
                    self.asm.place(other);
                    let k = self.rng.usize(0..3);
                    self.stmts(k, depth - 1);
                    self.asm.place(end);
                }
                // while counter < k
                5 | 6 if self.loops < 16 - VARS => {
                    let counter = VARS + self.loops;
                    let k = self.rng.i64(0..=5);
                    let (head, end) = (self.asm.label(), self.asm.label());
                    self.asm.ops(&[Const(0), Store(counter)]);
                    self.asm.place(head);
                    self.asm.ops(&[Load(counter), Const(k), Lt, Jz(end)]);
                    self.loops += 1;
                    let n = self.rng.usize(1..4);
                    self.stmts(n, depth - 1);
                    self.loops -= 1;
                    self.asm
                        .ops(&[Load(counter), Const(1), Add, Store(counter), Jump(head)]);
                    self.asm.place(end);
                }
                // if e { return e }
                _ => {
                    let skip = self.asm.label();
                    self.expr_random();
                    self.asm.ops(&[Jz(skip)]);
                    self.expr_random();
                    self.asm.ops(&[Ret]);
                    self.asm.place(skip);
                }
            }
        }
    }
}

fn program(seed: u64) -> Vec<Op> {
    let mut g = Gen {
        rng: fastrand::Rng::with_seed(seed),
        asm: Asm::default(),
        loops: 0,
    };
    let n = g.rng.usize(1..8);
    g.stmts(n, 3);
    g.expr_random();
    g.asm.ops(&[Op::Ret]);
    g.asm.finish()
}

#[test]
fn generated_programs_agree_in_every_mode() {
    let count = programs();
    let compiler = Compiler::new().expect("the host's stencil set loads");
    let (mut ops_total, mut glued, mut labels) = (0, Vec::new(), 0);
    for seed in 0..count as u64 {
        let ops = program(seed);
        ops_total += ops.len();
        let want = interpret(&ops).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{ops:?}"));
        for mode in [Mode::Uncached, Mode::Cached] {
            let compiled = compiler
                .compile(&ops, mode)
                .unwrap_or_else(|e| panic!("seed {seed}, {mode:?}: {e}\n{ops:?}"));
            let got = compiled.run();
            assert_eq!(got, want, "seed {seed}, {mode:?}\n{ops:?}");
            if mode == Mode::Cached && compiled.instances() > ops.len() + 1 {
                glued.push(seed);
            }
        }
    }
    // The generator must reach what it is for: programs of some size, with jumps.
    assert!(
        ops_total > count * 20,
        "{ops_total} ops in {count} programs"
    );
    for seed in 0..count as u64 {
        labels += program(seed)
            .iter()
            .filter(|op| matches!(op, Op::Jump(_) | Op::Jz(_) | Op::Jnz(_)))
            .count();
    }
    assert!(labels > count * 2, "{labels} jumps in {count} programs");
    // And no glue: dead glue after a jump, or a state the tables let disagree (see above).
    assert!(
        glued.is_empty(),
        "{} of {count} cached traces have more instances than ops (glue), seeds {:?}",
        glued.len(),
        &glued[..glued.len().min(10)]
    );
    eprintln!(
        "{count} programs, {ops_total} ops, {labels} jumps, {} with glue",
        glued.len()
    );
}
