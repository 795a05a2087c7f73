//! The copy-and-patch backend for [`TraceSpec`]s: stitches the stencil set built for this
//! process (the facade's `native`) with `cpjit-runtime`.
//!
//! A spec names stencils, operands and targets by string so that every backend can match
//! them to its own input. A JIT author's bytecode carries opcodes instead, mapped to op ids
//! once; so a spec is first resolved into an op list ([`Ops`]: ids of the register-cached
//! family's ops, operands, jump targets as labels), once per spec, and the end-to-end
//! [`select_stitch`] has the kit select each op's member as it pushes, then finishes the
//! trace: what compiling costs a JIT built on the kit. The *pre-lowered* [`Plan`] (stencil
//! indices, operands and targets in each stencil's order, selected once beforehand) is
//! what [`stitch`] pushes and finishes: stitching alone.

use crate::cached::OpList;
use crate::workload::TraceSpec;
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{
    CodeWrites, InstanceId, Jit, JitOptions, Label, RunTable, Target, Trace, TraceBuilder,
};

/// The generated stencil set the benches stitch: the one built for a process like this one.
pub fn set() -> &'static StencilSet<'static> {
    cpjit_stencils::native().expect("the facade has a stencil set for this process")
}

/// A JIT over [`set`] with the workload's helpers.
pub fn jit() -> Result<Jit<'static>, String> {
    jit_writing(CodeWrites::Transient)
}

/// A JIT over [`set`] with the workload's helpers that writes code as `code_writes` says
/// (`CodeWrites::PersistentAlias`: no system call per trace; Linux only).
pub fn jit_writing(code_writes: CodeWrites) -> Result<Jit<'static>, String> {
    let options = JitOptions {
        code_writes,
        ..JitOptions::default()
    };
    Jit::with_options(set(), crate::workload::resolve, options)
        .map_err(|e| format!("cpjit-runtime ({code_writes:?}): {e}"))
}

/// A [`TraceSpec`] resolved against a JIT's stencil set: what a bytecode-to-stencil
/// translator has at hand when it compiles.
pub struct Plan {
    name: String,
    /// Per instance: stencil index and the ends of its operands and targets in the flat
    /// vectors (each instance's start there is the previous instance's end).
    instances: Vec<Planned>,
    operands: Vec<u64>,
    targets: Vec<Target>,
}

impl Plan {
    /// Each instance's stencil index and instance targets (for tests of the selection).
    #[cfg(test)]
    pub(crate) fn instances(&self) -> impl Iterator<Item = (usize, Vec<usize>)> + '_ {
        let mut targets = 0;
        self.instances.iter().map(move |x| {
            let t = x.targets_end as usize;
            let to = self.targets[targets..t]
                .iter()
                .filter_map(|t| match t {
                    Target::Instance(id) => Some(id.index()),
                    _ => None,
                })
                .collect();
            targets = t;
            (x.stencil, to)
        })
    }
}

struct Planned {
    stencil: usize,
    operands_end: u32,
    targets_end: u32,
}

/// The pre-lowered plan of `spec`: its op list ([`crate::cached::ops`]) selected by the kit
/// once, then read back from the builder (stencil indices, operands, targets), for the rows
/// that time push + finish only.
pub fn plan(jit: &Jit<'static>, spec: &TraceSpec) -> Result<Plan, String> {
    let ops = Ops::new(jit, spec)?;
    let mut b = jit.trace();
    crate::cached::push_ops(&mut b, &ops.table.selector(), &ops.list, &mut Vec::new())?;
    let mut plan = Plan {
        name: spec.name.clone(),
        instances: Vec::with_capacity(b.len()),
        operands: Vec::new(),
        targets: Vec::new(),
    };
    for i in 0..b.len() {
        let (stencil, operands, targets) = b
            .instance(InstanceId::from_index(i))
            .ok_or_else(|| format!("{}: instance {i} was not recorded", spec.name))?;
        plan.operands.extend_from_slice(operands);
        plan.targets.extend_from_slice(targets);
        plan.instances.push(Planned {
            stencil,
            operands_end: plan.operands.len() as u32,
            targets_end: plan.targets.len() as u32,
        });
    }
    Ok(plan)
}

/// A spec as a client's op list with the cached test family's selection rows for the JIT
/// (a [`RunTable`], made once as a client makes it): the input of the end-to-end rows, which
/// time the kit's selection + push + finish ([`select_stitch`]).
pub struct Ops<'j> {
    table: RunTable<'j>,
    list: OpList,
}

impl<'j> Ops<'j> {
    pub fn new(jit: &'j Jit<'static>, spec: &TraceSpec) -> Result<Ops<'j>, String> {
        let set = jit.stencil_set();
        let selector = crate::cached::selector(set)?;
        let list = crate::cached::ops(set, &selector, spec)?;
        let table = RunTable::new(jit, &selector);
        Ok(Ops { table, list })
    }
}

/// Compiles an op list end to end: the kit selects each op's member (and glue) as it
/// pushes, then `finish`. `labels` is scratch kept between traces.
pub fn select_stitch(jit: &Jit<'_>, ops: &Ops, labels: &mut Vec<Label>) -> Result<Trace, String> {
    let mut b = jit.trace();
    crate::cached::push_ops(&mut b, &ops.table.selector(), &ops.list, labels)?;
    b.finish().map_err(|e| format!("{}: {e}", ops.list.name))
}

/// [`select_stitch`] for `count` copies as one [`TraceBatch`](cpjit_runtime::TraceBatch).
pub fn select_stitch_batch(
    jit: &Jit<'_>,
    ops: &Ops,
    count: usize,
    labels: &mut Vec<Label>,
) -> Result<Vec<Trace>, String> {
    let mut batch = jit.batch();
    let selector = ops.table.selector();
    for _ in 0..count {
        crate::cached::push_ops(batch.trace(), &selector, &ops.list, labels)?;
    }
    batch
        .finish()
        .map_err(|e| format!("{}: {e}", ops.list.name))
}

/// Resolves `spec` against `jit`'s stencil set with the stencils it names (the uncached
/// test ops, as the bench ran them before the cached variants existed): stencil indices,
/// operand values and jump targets in the order each stencil declares them (instance 0 must
/// be the entry shim).
pub fn plan_exact(jit: &Jit<'_>, spec: &TraceSpec) -> Result<Plan, String> {
    let set = jit.stencil_set();
    let mut plan = Plan {
        name: spec.name.clone(),
        instances: Vec::with_capacity(spec.instances.len()),
        operands: Vec::new(),
        targets: Vec::new(),
    };
    for (i, x) in spec.instances.iter().enumerate() {
        let at = || format!("{}: instance {i} ({})", spec.name, x.stencil);
        let stencil = set
            .index_of(x.stencil)
            .ok_or_else(|| format!("{}: the stencil set has no such stencil", at()))?;
        if i == 0 && set.shim != Some(stencil as u16) {
            return Err(format!("{}: a trace starts with the entry shim", at()));
        }
        let s = &set.stencils[stencil];
        for name in s.operands {
            plan.operands.push(x.operand(name, at)?);
        }
        for name in s.targets {
            let target = x.target(name, at)?;
            plan.targets
                .push(Target::Instance(InstanceId::from_index(target)));
        }
        plan.instances.push(Planned {
            stencil,
            operands_end: plan.operands.len() as u32,
            targets_end: plan.targets.len() as u32,
        });
    }
    Ok(plan)
}

/// Stitches a planned trace into executable memory: push every instance, then `finish`
/// (copy, patch, write the code, flush).
pub fn stitch(jit: &Jit<'_>, plan: &Plan) -> Result<Trace, String> {
    let mut b = jit.trace();
    push(&mut b, plan)?;
    b.finish().map_err(|e| format!("{}: {e}", plan.name))
}

/// Stitches `count` copies of a planned trace as one [`TraceBatch`](cpjit_runtime::TraceBatch):
/// one allocation, one write of the code, one flush for all of them, as a JIT compiling
/// many functions at once would.
pub fn stitch_batch(jit: &Jit<'_>, plan: &Plan, count: usize) -> Result<Vec<Trace>, String> {
    let mut batch = jit.batch();
    for _ in 0..count {
        push(batch.trace(), plan)?;
    }
    batch.finish().map_err(|e| format!("{}: {e}", plan.name))
}

/// Pushes every instance of `plan` into `b`.
fn push(b: &mut TraceBuilder<'_, '_>, plan: &Plan) -> Result<(), String> {
    let (mut operands, mut targets) = (0, 0);
    for x in &plan.instances {
        let (o, t) = (x.operands_end as usize, x.targets_end as usize);
        b.push(
            x.stencil,
            &plan.operands[operands..o],
            &plan.targets[targets..t],
        )
        // The builder's length is the refused instance's index (no counter kept for it).
        .map_err(|e| format!("{}: instance {}: {e}", plan.name, b.len()))?;
        (operands, targets) = (o, t);
    }
    Ok(())
}

/// The spec's op list compiled end to end ([`select_stitch`]), for callers that compile a
/// spec once.
pub fn compile(jit: &Jit<'static>, spec: &TraceSpec) -> Result<Trace, String> {
    select_stitch(jit, &Ops::new(jit, spec)?, &mut Vec::new())
}
/// Runs a trace compiled from `spec` from its shim; returns the exit status.
pub fn run(trace: &Trace, spec: &TraceSpec) -> i64 {
    let mut stack = vec![0u64; spec.stack_slots];
    let entry = trace
        .entry_fn(InstanceId::from_index(0))
        .expect("instance 0 is the shim");
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
