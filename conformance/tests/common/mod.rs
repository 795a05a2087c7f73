//! What the conformance test binaries share: every generated stencil set, the test
//! families' reference, and a one-op trace run.

use cpjit_model::StencilSet;
use cpjit_runtime::{Jit, Trace};

/// Every generated set of this process's architecture (the ones the facade links): each
/// test binary runs the ones its own process can run.
pub fn all_sets() -> Vec<&'static StencilSet<'static>> {
    cpjit_stencils::all().to_vec()
}

/// Runs `check` on every set this process can execute and fails naming every set that
/// failed (all of them, not only the first); `what` names the checks in each set's count.
pub fn check_every_executable_set(
    what: &str,
    check: impl Fn(&'static StencilSet<'static>) -> Result<usize, String>,
) {
    let sets = cpjit_conformance::select::selected(&all_sets());
    assert!(!sets.is_empty(), "no stencil set this process can execute");
    let mut failures = Vec::new();
    for set in sets {
        match check(set) {
            Ok(n) => eprintln!("{}: {n} {what} checks passed", set.target),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One check of a set: counted in `checks`; unless `got` is `want`, an error naming `what`
/// was run (the target first) and both values in hex.
pub fn expect_eq(
    checks: &mut usize,
    got: u64,
    want: u64,
    what: impl FnOnce() -> String,
) -> Result<(), String> {
    *checks += 1;
    if got == want {
        Ok(())
    } else {
        Err(format!("{}: got {got:#x}, want {want:#x}", what()))
    }
}

/// The table of the test families' `table` op (`templates/families/cached.c`).
const TABLE: [u64; 8] = [3, 1, 4, 1, 5, 9, 2, 6];

/// What an op of the kit's test families (operands `a`, `b`) does to `stack`; whether it
/// jumps (`dec_jump_nz`); `None` for an op not shared by the cached and selection tests.
pub fn reference(op: &str, a: u64, b: u64, stack: &mut Vec<u64>) -> Option<bool> {
    let mut pop = || stack.pop().expect("the reference stack has values");
    match op {
        "push" => stack.push(a),
        "push2" => stack.extend([a, b]),
        "add" => {
            let (y, x) = (pop(), pop());
            stack.push(x.wrapping_add(y));
        }
        "table" => {
            let x = pop();
            stack.push(TABLE[(x & 7) as usize] * 1_000_003);
        }
        // The instance's counter starts at 0: counter = top; top = counter.
        "counter" => {}
        "addr_addend" => {
            let x = *stack.last().unwrap();
            stack.push(x.wrapping_add(16));
        }
        "pop" => {
            pop();
        }
        "dec_jump_nz" => {
            let x = pop().wrapping_sub(1);
            stack.push(x);
            return Some(x != 0);
        }
        _ => return None,
    }
    Some(false)
}

/// Runs `[shim, push each of stack, op(operands), exit]` of the kit's test ops (no exit after
/// a `*_jump` op) and returns the exit status.
pub fn run(jit: &Jit<'_>, stack: &[u64], op: &str, operands: &[u64]) -> Result<u64, String> {
    run_trace(jit, stack, op, operands).map(|(exit, _)| exit)
}

/// [`run`], also returning the finished trace.
pub fn run_trace(
    jit: &Jit<'_>,
    stack: &[u64],
    op: &str,
    operands: &[u64],
) -> Result<(u64, Trace), String> {
    let target = jit.stencil_set().target;
    let mut b = jit.trace();
    let shim = b.push_shim().map_err(|e| e.to_string())?;
    for &v in stack {
        b.push_named("op_test_push", &[v], &[])
            .map_err(|e| e.to_string())?;
    }
    b.push_named(op, operands, &[])
        .map_err(|e| format!("{target}: push {op}: {e}"))?;
    if !op.ends_with("_jump") {
        b.push_named("op_test_exit", &[], &[])
            .map_err(|e| e.to_string())?;
    }
    let trace = b
        .finish()
        .map_err(|e| format!("{target}: {op} with operands {operands:#x?}: finish: {e}"))?;
    let mut memory = vec![0u64; 64];
    let mut frame = [0u64; 4];
    // SAFETY: a trace of test ops that uses at most `stack.len()` values of `memory`, and
    // whose operands (addresses of `mul_add`, a live stack slot, the jump destination) are
    // what the ops expect; instance `shim` is the entry shim.
    let exit =
        unsafe { trace.entry_fn(shim).unwrap()(frame.as_mut_ptr().cast(), memory.as_mut_ptr()) };
    Ok((exit as u64, trace))
}

/// Runs `check` on every generated set, whether or not this process can run it, and fails
/// naming every set that failed.
pub fn check_every_set(check: impl Fn(&'static StencilSet<'static>) -> Result<usize, String>) {
    let failures: Vec<String> = all_sets()
        .into_iter()
        .filter_map(|s| check(s).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs a trace whose first instance is the shim and whose ops end in a side exit that
/// returns `sp`: the stack is read back from `memory`.
pub fn run_spilled(trace: &Trace, memory: &mut [u64]) -> Result<Vec<u64>, String> {
    let mut frame = [0u64; 4];
    let entry = trace
        .entry_fn(cpjit_runtime::InstanceId::from_index(0))
        .map_err(|e| e.to_string())?;
    // SAFETY: test ops that ignore the frame and stay within `memory` (the traces keep
    // fewer than `memory.len()` values).
    let sp = unsafe { entry(frame.as_mut_ptr().cast(), memory.as_mut_ptr()) };
    let depth = (sp - memory.as_ptr() as i64) / 8;
    if !(0..=memory.len() as i64).contains(&depth) {
        return Err(format!(
            "the side exit returned sp {sp:#x} outside the stack"
        ));
    }
    Ok(memory[..depth as usize].to_vec())
}
