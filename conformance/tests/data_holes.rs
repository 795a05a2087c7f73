//! Holes declared as data (`templates/datahole/ops.c`: `extern char _JIT_DATA_OPERAND[]`,
//! `extern void _JIT_CONTINUE`, `extern void _JIT_DATA_ZERO_TARGET`, each reached through
//! its address): on every stencil set this process can execute (narrowed by
//! `CPJIT_STENCILS`), the operand reads the patched value, the continuation falls through
//! to the next instance and the jump reaches its target, both ways of the branch, forwards
//! and backwards.

use crate::common;

use cpjit_model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, Target, TraceBuilder};

/// `[shim, push top, branch(→ exit), add(operand), exit]`: the exit status.
fn branch_then_add(jit: &Jit<'_>, top: u64, operand: u64) -> Result<u64, String> {
    let mut b = jit.trace();
    let shim = b.push_shim().map_err(|e| e.to_string())?;
    b.push_named("op_test_push", &[top], &[])
        .map_err(|e| e.to_string())?;
    let exit = InstanceId::from_index(4);
    b.push_named("op_test_data_branch", &[], &[Target::Instance(exit)])
        .map_err(|e| e.to_string())?;
    b.push_named("op_test_data_add", &[operand], &[])
        .map_err(|e| e.to_string())?;
    run(b, shim)
}

/// `[shim, push top, L: add(step), branch(→ L), exit]`: a backward jump, taken when
/// `top + step` wraps to zero (then the second pass leaves `step - 1`).
fn jump_back(jit: &Jit<'_>, top: u64, step: u64) -> Result<u64, String> {
    let mut b = jit.trace();
    let shim = b.push_shim().map_err(|e| e.to_string())?;
    b.push_named("op_test_push", &[top], &[])
        .map_err(|e| e.to_string())?;
    let head = b
        .push_named("op_test_data_add", &[step], &[])
        .map_err(|e| e.to_string())?;
    b.push_named("op_test_data_branch", &[], &[Target::Instance(head)])
        .map_err(|e| e.to_string())?;
    run(b, shim)
}

/// Ends the trace with `op_test_exit` and runs it from `shim`: the exit status.
fn run(mut b: TraceBuilder<'_, '_>, shim: InstanceId) -> Result<u64, String> {
    b.push_named("op_test_exit", &[], &[])
        .map_err(|e| e.to_string())?;
    let trace = b.finish().map_err(|e| e.to_string())?;
    let mut memory = vec![0u64; 8];
    let mut frame = [0u64; 4];
    // SAFETY: a trace of test ops using one value of `memory`; instance `shim` is the shim.
    Ok(
        unsafe { trace.entry_fn(shim).unwrap()(frame.as_mut_ptr().cast(), memory.as_mut_ptr()) }
            as u64,
    )
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let jit = Jit::new(set, |_| None).map_err(|e| format!("{target}: {e}"))?;
    let mut checks = 0;
    for (top, operand) in [
        (0u64, 5u64),
        (1, 5),
        (10, 0x1234_5678_9abc_def0),
        (u64::MAX, 1),
    ] {
        let got = branch_then_add(&jit, top, operand).map_err(|e| format!("{target}: {e}"))?;
        // Zero jumps straight to the exit (top stays 0); otherwise --top, then += operand.
        let want = if top == 0 {
            0
        } else {
            (top - 1).wrapping_add(operand)
        };
        common::expect_eq(&mut checks, got, want, || {
            format!("{target}: top {top:#x}, operand {operand:#x}")
        })?;
    }
    for (top, step) in [
        (0u64, 5u64),
        (5u64.wrapping_neg(), 5),
        (1, 1),
        (u64::MAX, 1),
    ] {
        let got = jump_back(&jit, top, step).map_err(|e| format!("{target}: {e}"))?;
        let sum = top.wrapping_add(step);
        // Nonzero: --sum and exit; zero: back to `add` (top = step), then step - 1.
        let want = if sum == 0 { step - 1 } else { sum - 1 };
        common::expect_eq(&mut checks, got, want, || {
            format!("{target}: jump back, top {top:#x}, step {step}")
        })?;
    }
    Ok(checks)
}

#[test]
fn data_declared_holes_read_operands_continue_and_jump() {
    common::check_every_executable_set("data-declared-hole", check);
}
