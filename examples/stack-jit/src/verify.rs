//! The checks every program passes before it runs, so that neither the interpreter nor the
//! JIT's ops need run-time checks: locals and jump targets in range, a stack depth that is
//! the same on every path into an op, never below what an op pops nor above [`MAX_STACK`],
//! and no path that runs off the end.

use crate::{Op, LOCALS, MAX_STACK};
use std::fmt;

/// Why a program was refused: the op index and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub at: usize,
    pub reason: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op {}: {}", self.at, self.reason)
    }
}

impl std::error::Error for VerifyError {}

/// `(pop, push)` of `op`: what the verifier assumes, and what the template set's manifest
/// must declare (`tests/effects.rs` checks the two agree).
pub fn effect(op: Op) -> (usize, usize) {
    match op {
        Op::Const(_) | Op::Load(_) => (0, 1),
        Op::Store(_) | Op::Drop | Op::Print | Op::Jz(_) | Op::Jnz(_) | Op::Ret => (1, 0),
        Op::Add | Op::Sub | Op::Mul | Op::And | Op::Shr | Op::Lt | Op::Eq | Op::Mix => (2, 1),
        Op::Dup => (1, 2),
        Op::Swap => (2, 2),
        Op::Jump(_) => (0, 0),
    }
}

/// Checks `ops`; returns the deepest stack it needs.
pub fn verify(ops: &[Op]) -> Result<usize, VerifyError> {
    let fail = |at: usize, reason: String| Err(VerifyError { at, reason });
    if ops.is_empty() {
        return fail(0, "the program is empty: end it with `ret`".into());
    }
    // The depth on entry to each op, None until a path reaches it.
    let mut depth: Vec<Option<usize>> = vec![None; ops.len()];
    let mut work = vec![(0usize, 0usize)];
    let mut deepest = 0;
    while let Some((at, d)) = work.pop() {
        match depth[at] {
            Some(seen) if seen == d => continue,
            Some(seen) => {
                return fail(
                    at,
                    format!("reached with {seen} and with {d} values on the stack"),
                )
            }
            None => depth[at] = Some(d),
        }
        let op = ops[at];
        let (pop, push) = effect(op);
        if d < pop {
            return fail(at, format!("{op:?} pops {pop} values, the stack holds {d}"));
        }
        let after = d - pop + push;
        if after > MAX_STACK {
            return fail(
                at,
                format!("the stack would hold more than {MAX_STACK} values"),
            );
        }
        deepest = deepest.max(after);
        match op {
            Op::Load(n) | Op::Store(n) if n as usize >= LOCALS => {
                return fail(
                    at,
                    format!("local {n} does not exist (locals 0 to {})", LOCALS - 1),
                )
            }
            _ => {}
        }
        let target = match op {
            Op::Jump(t) | Op::Jz(t) | Op::Jnz(t) => Some(t as usize),
            _ => None,
        };
        if let Some(t) = target {
            if t >= ops.len() {
                return fail(
                    at,
                    format!("jumps to op {t}, past the end ({} ops)", ops.len()),
                );
            }
            work.push((t, after));
        }
        if !matches!(op, Op::Jump(_) | Op::Ret) {
            if at + 1 == ops.len() {
                return fail(
                    at,
                    "the program runs off its end: end every path with `ret`".into(),
                );
            }
            work.push((at + 1, after));
        }
    }
    Ok(deepest)
}
