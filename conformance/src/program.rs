//! Programs over the hole-exercising test ops of `templates/testing/holes.c`, their Rust
//! reference semantics, and a seeded generator of valid, terminating programs.

use crate::rng::Rng;

/// One test op (`op_test_*` in `templates/testing/holes.c`). The value stack holds `u64`s
/// and grows upward; the C code's signed arithmetic wraps on every target, as here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// push OPERAND0
    Push,
    /// push OPERAND0, OPERAND1
    Push2,
    /// pop b, a; push a + b
    Add,
    /// pop c, b, a; push cpjit_test_mul_add(a, b, c) = a * b + c (an external helper call)
    Helper,
    /// top = TABLE[top & 7] (a read-only table in the stencil's data)
    Table,
    /// counter += top; top = counter (writable data, one counter per instance)
    Counter,
    /// push top + 16 (symbol + addend references)
    AddrAddend,
    /// top -= 1; if top != 0 jump to JUMP_TARGET
    DecJumpNz,
    /// drop top
    Pop,
    /// return top from the trace
    Exit,
}

impl Op {
    pub const ALL: [Op; 10] = [
        Op::Push,
        Op::Push2,
        Op::Add,
        Op::Helper,
        Op::Table,
        Op::Counter,
        Op::AddrAddend,
        Op::DecJumpNz,
        Op::Pop,
        Op::Exit,
    ];

    pub fn stencil_name(self) -> &'static str {
        match self {
            Op::Push => "op_test_push",
            Op::Push2 => "op_test_push2",
            Op::Add => "op_test_add",
            Op::Helper => "op_test_helper",
            Op::Table => "op_test_table",
            Op::Counter => "op_test_counter",
            Op::AddrAddend => "op_test_addr_addend",
            Op::DecJumpNz => "op_test_dec_jump_nz",
            Op::Pop => "op_test_pop",
            Op::Exit => "op_test_exit",
        }
    }

    pub fn operand_count(self) -> usize {
        match self {
            Op::Push => 1,
            Op::Push2 => 2,
            _ => 0,
        }
    }

    /// Values the op consumes from the top (it must find at least this many).
    fn needs(self) -> usize {
        match self {
            Op::Push | Op::Push2 => 0,
            Op::Add => 2,
            Op::Helper => 3,
            _ => 1,
        }
    }

    /// Values the op leaves in place of the ones it consumed (straight-line ops only).
    fn leaves(self) -> usize {
        match self {
            Op::Push2 | Op::AddrAddend => 2,
            Op::Pop => 0,
            _ => 1,
        }
    }
}

/// `table` of holes.c.
pub const TABLE: [u64; 8] = [
    3 * 1000003,
    1000003,
    4 * 1000003,
    1000003,
    5 * 1000003,
    9 * 1000003,
    2 * 1000003,
    6 * 1000003,
];

/// The helper the test stencils call (`cpjit_test_mul_add`), in reference form.
pub fn mul_add(a: i64, b: i64, c: i64) -> i64 {
    a.wrapping_mul(b).wrapping_add(c)
}

/// One instance: op, operand values, and the instruction index a jump goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instr {
    pub op: Op,
    pub operands: Vec<u64>,
    pub target: Option<usize>,
}

impl Instr {
    pub fn new(op: Op, operands: &[u64]) -> Instr {
        assert_eq!(operands.len(), op.operand_count(), "{op:?}");
        Instr {
            op,
            operands: operands.to_vec(),
            target: None,
        }
    }

    pub fn jump(target: usize) -> Instr {
        Instr {
            op: Op::DecJumpNz,
            operands: Vec::new(),
            target: Some(target),
        }
    }
}

/// A straight sequence of instances (index 0 runs first) ending in [`Op::Exit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub instrs: Vec<Instr>,
}

/// What a run produced: the exit value and the stack contents at exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub exit: i64,
    pub stack: Vec<u64>,
}

/// The most values a program may keep on the stack (the JIT run gets this much memory).
pub const STACK_CAPACITY: usize = 256;
/// The most instances the reference executes in one run before calling it non-terminating.
pub const STEP_LIMIT: usize = 100_000;

/// Reference state that outlives one run: each `Counter` instance's counter.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    counters: Vec<i64>,
}

impl Reference {
    pub fn new(program: &Program) -> Reference {
        Reference {
            counters: vec![0; program.instrs.len()],
        }
    }

    /// Runs `program` once; an invalid program (stack underflow or overflow, a jump out of
    /// the program, no exit within [`STEP_LIMIT`]) is an error describing it.
    pub fn run(&mut self, program: &Program) -> Result<Outcome, String> {
        let mut stack: Vec<u64> = Vec::new();
        let mut pc = 0;
        for _ in 0..STEP_LIMIT {
            let instr = program
                .instrs
                .get(pc)
                .ok_or_else(|| format!("ran off the end at instruction {pc}"))?;
            if stack.len() < instr.op.needs() {
                return Err(format!(
                    "stack underflow at instruction {pc} ({:?})",
                    instr.op
                ));
            }
            let top = stack.len().wrapping_sub(1);
            pc += 1;
            match instr.op {
                Op::Push => stack.push(instr.operands[0]),
                Op::Push2 => stack.extend_from_slice(&instr.operands),
                Op::Add => {
                    let b = stack.pop().unwrap();
                    let a = stack.pop().unwrap();
                    stack.push(a.wrapping_add(b));
                }
                Op::Helper => {
                    let c = stack.pop().unwrap() as i64;
                    let b = stack.pop().unwrap() as i64;
                    let a = stack.pop().unwrap() as i64;
                    stack.push(mul_add(a, b, c) as u64);
                }
                Op::Table => stack[top] = TABLE[(stack[top] & 7) as usize],
                Op::Counter => {
                    let c = &mut self.counters[pc - 1];
                    *c = c.wrapping_add(stack[top] as i64);
                    stack[top] = *c as u64;
                }
                Op::AddrAddend => stack.push(stack[top].wrapping_add(16)),
                Op::DecJumpNz => {
                    stack[top] = stack[top].wrapping_sub(1);
                    if stack[top] != 0 {
                        pc = instr.target.ok_or("dec_jump_nz without a target")?;
                    }
                }
                Op::Pop => {
                    stack.pop();
                }
                Op::Exit => {
                    return Ok(Outcome {
                        exit: stack[top] as i64,
                        stack,
                    });
                }
            }
            if stack.len() > STACK_CAPACITY {
                return Err(format!("stack overflow at instruction {}", pc - 1));
            }
        }
        Err(format!("no exit within {STEP_LIMIT} steps"))
    }
}

/// A random valid program from `seed`: straight-line ops, count-down loops (a backward
/// jump) and conditional skips (a forward jump), ending in `Exit`.
pub fn generate(seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let mut p: Vec<Instr> = Vec::new();
    let mut depth = 0usize;
    let blocks = 3 + rng.below(14);
    for _ in 0..blocks {
        match rng.below(12) {
            // Count-down loop: push n; L: dup; dec_jump_nz L. Leaves n, n-1, ..., 1, 0.
            0 if depth < 64 => {
                let n = 1 + rng.below(12);
                p.push(Instr::new(Op::Push, &[n]));
                let head = p.len();
                push_dup(&mut p);
                p.push(Instr::jump(head));
                depth += n as usize + 1;
            }
            // Conditional skip: push v; dec_jump_nz F; push x; add; F: -- one value either way.
            1 => {
                let v = 1 + rng.below(3);
                p.push(Instr::new(Op::Push, &[v]));
                let after = p.len() + 3;
                p.push(Instr::jump(after));
                p.push(Instr::new(Op::Push, &[rng.operand()]));
                p.push(Instr::new(Op::Add, &[]));
                depth += 1;
            }
            _ => {
                let ops = 1 + rng.below(6);
                for _ in 0..ops {
                    let op = loop {
                        let op = Op::ALL[rng.below(Op::ALL.len() as u64) as usize];
                        let fits = depth >= op.needs() && !matches!(op, Op::DecJumpNz | Op::Exit);
                        let too_deep =
                            depth > 96 && matches!(op, Op::Push | Op::Push2 | Op::AddrAddend);
                        if fits && !too_deep {
                            break op;
                        }
                    };
                    let operands: Vec<u64> =
                        (0..op.operand_count()).map(|_| rng.operand()).collect();
                    p.push(Instr::new(op, &operands));
                    depth = depth - op.needs() + op.leaves();
                }
            }
        }
    }
    if depth == 0 {
        p.push(Instr::new(Op::Push, &[rng.operand()]));
    }
    p.push(Instr::new(Op::Exit, &[]));
    Program { instrs: p }
}

/// `dup` from the test ops: push top + 16, push -16, add.
pub fn push_dup(p: &mut Vec<Instr>) {
    p.push(Instr::new(Op::AddrAddend, &[]));
    p.push(Instr::new(Op::Push, &[(-16i64) as u64]));
    p.push(Instr::new(Op::Add, &[]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_programs_are_valid_and_use_every_op() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..500 {
            let p = generate(seed);
            let mut r = Reference::new(&p);
            let first = r
                .run(&p)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}: {p:?}"));
            r.run(&p).unwrap();
            assert!(first.stack.len() <= STACK_CAPACITY);
            seen.extend(p.instrs.iter().map(|i| i.op));
        }
        assert_eq!(seen.len(), Op::ALL.len());
    }

    #[test]
    fn count_down_loop_leaves_n_to_zero() {
        let mut p = vec![Instr::new(Op::Push, &[3])];
        push_dup(&mut p);
        p.push(Instr::jump(1));
        p.push(Instr::new(Op::Exit, &[]));
        let p = Program { instrs: p };
        let out = Reference::new(&p).run(&p).unwrap();
        assert_eq!(out.stack, [3, 2, 1, 0]);
        assert_eq!(out.exit, 0);
    }

    #[test]
    fn counters_persist_per_instance() {
        let p = Program {
            instrs: vec![
                Instr::new(Op::Push, &[5]),
                Instr::new(Op::Counter, &[]),
                Instr::new(Op::Counter, &[]),
                Instr::new(Op::Exit, &[]),
            ],
        };
        let mut r = Reference::new(&p);
        assert_eq!(r.run(&p).unwrap().exit, 5);
        // Run 2: first counter 10, second 5 + 10.
        assert_eq!(r.run(&p).unwrap().exit, 15);
    }

    #[test]
    fn invalid_programs_are_rejected() {
        let under = Program {
            instrs: vec![Instr::new(Op::Add, &[]), Instr::new(Op::Exit, &[])],
        };
        assert!(Reference::new(&under)
            .run(&under)
            .unwrap_err()
            .contains("underflow"));
        let forever = Program {
            instrs: vec![
                Instr::new(Op::Push, &[0]),
                Instr::jump(1),
                Instr::new(Op::Exit, &[]),
            ],
        };
        // 0 - 1 wraps to u64::MAX: the loop does not end within the step limit.
        assert!(Reference::new(&forever)
            .run(&forever)
            .unwrap_err()
            .contains("no exit"));
    }
}
