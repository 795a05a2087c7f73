//! The reference: a plain `match` loop over the ops, the stack in a fixed array.

use crate::{mix, verify, Op, Outcome, VerifyError, LOCALS, MAX_STACK};

/// Runs `ops` (after [`verify`]) with all locals 0.
pub fn interpret(ops: &[Op]) -> Result<Outcome, VerifyError> {
    verify(ops)?;
    let mut stack = [0i64; MAX_STACK];
    let mut sp = 0usize;
    let mut locals = [0i64; LOCALS];
    let mut output = Vec::new();
    let mut pc = 0usize;
    macro_rules! binary {
        ($f:expr) => {{
            let (a, b) = (stack[sp - 2], stack[sp - 1]);
            sp -= 1;
            stack[sp - 1] = $f(a, b);
        }};
    }
    loop {
        let op = ops[pc];
        pc += 1;
        match op {
            Op::Const(v) => {
                stack[sp] = v;
                sp += 1;
            }
            Op::Load(n) => {
                stack[sp] = locals[n as usize];
                sp += 1;
            }
            Op::Store(n) => {
                sp -= 1;
                locals[n as usize] = stack[sp];
            }
            Op::Add => binary!(i64::wrapping_add),
            Op::Sub => binary!(i64::wrapping_sub),
            Op::Mul => binary!(i64::wrapping_mul),
            Op::And => binary!(|a, b| a & b),
            Op::Shr => binary!(|a: i64, b: i64| ((a as u64) >> (b & 63)) as i64),
            Op::Lt => binary!(|a, b| i64::from(a < b)),
            Op::Eq => binary!(|a, b| i64::from(a == b)),
            Op::Mix => binary!(mix),
            Op::Dup => {
                stack[sp] = stack[sp - 1];
                sp += 1;
            }
            Op::Drop => sp -= 1,
            Op::Swap => stack.swap(sp - 1, sp - 2),
            Op::Print => {
                sp -= 1;
                output.push(stack[sp]);
            }
            Op::Jump(t) => pc = t as usize,
            Op::Jz(t) => {
                sp -= 1;
                if stack[sp] == 0 {
                    pc = t as usize;
                }
            }
            Op::Jnz(t) => {
                sp -= 1;
                if stack[sp] != 0 {
                    pc = t as usize;
                }
            }
            Op::Ret => {
                return Ok(Outcome {
                    result: stack[sp - 1],
                    output,
                })
            }
        }
    }
}
