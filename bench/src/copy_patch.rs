//! The copy-and-patch backend for [`TraceSpec`]s: stitches the stencil set built for this
//! process (the facade's `native`) with `cpjit-runtime`.

use crate::workload::TraceSpec;
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, Target, Trace};

/// The generated stencil set the benches stitch: the one built for a process like this one.
pub fn set() -> &'static StencilSet<'static> {
    cpjit_stencils::native().expect("the facade has a stencil set for this process")
}

/// A JIT over [`set`] with the workload's helpers.
pub fn jit() -> Result<Jit<'static>, String> {
    Jit::new(set(), crate::workload::resolve).map_err(|e| format!("cpjit-runtime: {e}"))
}

/// Stitches `spec` into executable memory (push every instance, then `finish`: copy, patch,
/// make executable, flush).
pub fn compile(jit: &Jit<'_>, spec: &TraceSpec) -> Result<Trace, String> {
    let mut b = jit.trace();
    for (i, x) in spec.instances.iter().enumerate() {
        let at = || format!("{}: instance {i} ({})", spec.name, x.stencil);
        if i == 0 {
            b.push_shim().map_err(|e| format!("{}: {e}", at()))?;
            continue;
        }
        let stencil = jit
            .stencil_set()
            .get(x.stencil)
            .ok_or_else(|| format!("{}: the stencil set has no such stencil", at()))?;
        let operands = stencil
            .operands
            .iter()
            .map(|name| {
                x.operands
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|&(_, v)| v)
                    .ok_or_else(|| format!("{}: no value for operand {name}", at()))
            })
            .collect::<Result<Vec<u64>, String>>()?;
        let targets = stencil
            .targets
            .iter()
            .map(|name| {
                x.targets
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|&(_, t)| Target::Instance(InstanceId::from_index(t)))
                    .ok_or_else(|| format!("{}: no instance for jump target {name}", at()))
            })
            .collect::<Result<Vec<Target>, String>>()?;
        b.push_named(x.stencil, &operands, &targets)
            .map_err(|e| format!("{}: {e}", at()))?;
    }
    b.finish().map_err(|e| format!("{}: {e}", spec.name))
}

/// Runs a trace compiled from `spec` from its shim; returns the exit status.
pub fn run(trace: &Trace, spec: &TraceSpec) -> i64 {
    let mut stack = vec![0u64; spec.stack_slots];
    let entry = trace.entry_fn(InstanceId::from_index(0));
    // SAFETY: instance 0 is the shim; the test ops ignore the frame and use at most
    // `stack_slots` slots of the stack (workload invariant).
    unsafe { entry(std::ptr::null_mut(), stack.as_mut_ptr()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{counting_loop, straight, take_checksum};

    #[test]
    fn straight_traces_run_and_return_their_top_of_stack() {
        let jit = jit().unwrap();
        for n in [3, 10, 100] {
            let spec = straight(n);
            let trace = compile(&jit, &spec).unwrap();
            // Stack-neutral groups keep the initial 0 on top, unless filler pushes ended it.
            let status = run(&trace, &spec);
            let last = &spec.instances[n - 2];
            let expected = match last.stencil {
                "op_test_push" => last.operands[0].1 as i64,
                _ => 0,
            };
            assert_eq!(status, expected, "{}", spec.name);
        }
    }

    #[test]
    fn the_counting_loop_calls_its_helper_once_per_round() {
        let jit = jit().unwrap();
        let spec = counting_loop(1000);
        let trace = compile(&jit, &spec).unwrap();
        take_checksum();
        assert_eq!(run(&trace, &spec), 0);
        // (7 + 9) * 3 + 5 = 53 per round.
        assert_eq!(take_checksum(), 53 * 1000);
    }
}
