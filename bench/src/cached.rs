//! The bench's traces ([`TraceSpec`]s of the uncached test ops, `templates/testing/holes.c`)
//! as a client's *op list* over their register-cached variants (`templates/families/cached.c`,
//! family `test_cached`), compiled by the kit's selection: [`TraceBuilder::push_ops`] picks
//! each op's member for the cache state the previous instance left, a straight run of ops
//! per call, [`TraceBuilder::push_op`] each jump, and [`Label`]s carry the state across jumps
//! (the runtime's `trace/select.rs`, `trace/run.rs`). Nothing here tracks the cache state.
//!
//! [`ops`] turns a spec into an [`OpList`] once, as a JIT's front end has bytecode at hand:
//! op ids (names resolved once per set through [`Selector::op`]), operand values in the
//! members' order, jump targets as label numbers, cut into runs where labels are bound and
//! jumps are. [`push_ops`] is what a compile costs on top
//! of stitching: it runs inside the bench's end-to-end clock (selection + push + finish).
//! Stencils the table does not know (the entry shim) are pushed by index; the state is 0 after
//! the shim.

use crate::workload::TraceSpec;
use cpjit_runtime::model::{Family, StencilSet};
use cpjit_runtime::{Label, Selector, Target, TraceBuilder};

/// Name of the family of cached test ops in the kit's template set.
pub const FAMILY: &str = "test_cached";

/// The test ops with a cached family element (`cached.c` computes what `holes.c` does).
const LOWERING: &[(&str, &str)] = &[
    ("op_test_push", "push"),
    ("op_test_push2", "push2"),
    ("op_test_add", "add"),
    ("op_test_helper", "helper"),
    ("op_test_table", "table"),
    ("op_test_counter", "counter"),
    ("op_test_addr_addend", "addr_addend"),
    ("op_test_pop", "pop"),
    ("op_test_dec_jump_nz", "dec_jump_nz"),
    ("op_test_exit", "exit"),
];

/// The selector of `set`'s cached test family.
pub fn selector(set: &'static StencilSet<'static>) -> Result<Selector<'static>, String> {
    let family: &'static Family<'static> = cpjit_stencils::families(set)
        .iter()
        .find(|f| f.name == FAMILY)
        .ok_or_else(|| format!("{}: the stencil set has no family {FAMILY}", set.target))?;
    Selector::new(family).map_err(|e| format!("{}: {e}", set.target))
}

/// A spec as a client's op list (see the module doc): the shim, then ops, cut into pieces
/// each pushed in one call: a run of ops without jumps ([`TraceBuilder::push_ops`]), or one
/// op that jumps to labels ([`TraceBuilder::push_op`]), each after the label bound there.
pub struct OpList {
    pub name: String,
    shim: usize,
    /// Op ids, in order.
    ops: Vec<u16>,
    /// Every op's operands, flat and in order (each takes its members' count).
    operands: Vec<u64>,
    /// Label numbers of the jumping ops, in order.
    targets: Vec<u32>,
    /// Labels the trace uses.
    labels: usize,
    pieces: Vec<Piece>,
}

const NO_LABEL: u32 = u32::MAX;

/// Ops pushed in one call, and where their operands and targets end in the flat vectors.
struct Piece {
    ops_end: u32,
    operands_end: u32,
    targets_end: u32,
    /// The label bound before the piece, [`NO_LABEL`] if none.
    bind: u32,
    /// One op that jumps (to labels, its targets), rather than a run.
    jumps: bool,
}

/// The op list of `spec` (instance 0 must be the entry shim of `set`).
pub fn ops(
    set: &'static StencilSet<'static>,
    sel: &Selector<'static>,
    spec: &TraceSpec,
) -> Result<OpList, String> {
    let shim = match spec.instances.first() {
        Some(x) if set.shim.map(usize::from) == set.index_of(x.stencil) => {
            set.index_of(x.stencil).unwrap_or(0)
        }
        _ => return Err(format!("{}: a trace starts with the entry shim", spec.name)),
    };
    // Label numbers of the jump targets, by instance.
    let mut label = vec![NO_LABEL; spec.instances.len()];
    let mut labels = 0;
    for x in &spec.instances {
        for &(_, t) in &x.targets {
            if t == 0 || t >= spec.instances.len() {
                return Err(format!("{}: a jump to instance {t}", spec.name));
            }
            if label[t] == NO_LABEL {
                (label[t], labels) = (labels, labels + 1);
            }
        }
    }
    let mut list = OpList {
        name: spec.name.clone(),
        shim,
        ops: Vec::with_capacity(spec.instances.len()),
        operands: Vec::new(),
        targets: Vec::new(),
        labels: labels as usize,
        pieces: Vec::new(),
    };
    let table = sel.table();
    for (i, x) in spec.instances.iter().enumerate().skip(1) {
        let at = || format!("{}: instance {i} ({})", spec.name, x.stencil);
        let element = LOWERING
            .iter()
            .find(|l| l.0 == x.stencil)
            .ok_or_else(|| format!("{}: no cached op for it", at()))?
            .1;
        let op = sel.op(element).map_err(|e| format!("{}: {e}", at()))?;
        // Operands in the members' order (every member of an element has its holes).
        let member = (0..table.states)
            .map(|s| table.transition(op, s).member)
            .find(|&m| m != Family::NONE)
            .ok_or_else(|| format!("{}: {element} has no member", at()))?;
        let stencil = &set.stencils[member as usize];
        for name in stencil.operands {
            list.operands.push(x.operand(name, at)?);
        }
        for name in stencil.targets {
            list.targets.push(label[x.target(name, at)?]);
        }
        list.ops.push(op);
        // A new piece where a label is bound, for each jumping op and after it.
        let jumps = !stencil.targets.is_empty();
        let extend = !jumps && label[i] == NO_LABEL && list.pieces.last().is_some_and(|p| !p.jumps);
        if !extend {
            list.pieces.push(Piece {
                ops_end: 0,
                operands_end: 0,
                targets_end: 0,
                bind: label[i],
                jumps,
            });
        }
        if let Some(piece) = list.pieces.last_mut() {
            piece.ops_end = list.ops.len() as u32;
            piece.operands_end = list.operands.len() as u32;
            piece.targets_end = list.targets.len() as u32;
        }
    }
    Ok(list)
}

/// Pushes `list` into `b` through the kit's selection: the shim, then its pieces (runs of
/// ops by id, each jump alone), binding labels where jumps land. `labels` is scratch space (kept by the caller between traces).
// Inlined into the bench's loops, as a JIT's translation loop would hold it.
#[inline(always)]
pub fn push_ops(
    b: &mut TraceBuilder<'_, '_>,
    sel: &Selector<'_>,
    list: &OpList,
    labels: &mut Vec<Label>,
) -> Result<(), String> {
    let fail = |e: cpjit_runtime::Error, i: usize| format!("{}: op {i}: {e}", list.name);
    b.push(list.shim, &[], &[]).map_err(|e| fail(e, 0))?;
    labels.clear();
    for _ in 0..list.labels {
        labels.push(b.label().map_err(|e| fail(e, 0))?);
    }
    let (mut ops, mut operands, mut targets) = (0, 0, 0);
    let mut jumps = [Target::Address(0); 2];
    for (i, x) in list.pieces.iter().enumerate() {
        if x.bind != NO_LABEL {
            b.bind(sel, labels[x.bind as usize])
                .map_err(|e| fail(e, ops + 1))?;
        }
        let (k, o, t) = (
            x.ops_end as usize,
            x.operands_end as usize,
            x.targets_end as usize,
        );
        if x.jumps {
            for (j, &l) in jumps.iter_mut().zip(&list.targets[targets..t]) {
                *j = Target::Label(labels[l as usize]);
            }
            b.push_op(
                sel,
                list.ops[ops],
                &list.operands[operands..o],
                &jumps[..t - targets],
            )
            .map(|_| ())
        } else {
            b.push_ops(sel, &list.ops[ops..k], &list.operands[operands..o], &[])
        }
        .map_err(|e| format!("{}: piece {i} (ops {} to {k}): {e}", list.name, ops + 1))?;
        (ops, operands, targets) = (k, o, t);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::copy_patch;
    use crate::workload::{counting_loop, straight};

    /// The stencil names and targets the kit selected for `spec`.
    fn selected(spec: &crate::workload::TraceSpec) -> Vec<(&'static str, Vec<usize>)> {
        let jit = copy_patch::jit().unwrap();
        let set = copy_patch::set();
        copy_patch::plan(&jit, spec)
            .unwrap()
            .instances()
            .map(|(stencil, targets)| (set.stencils[stencil].name, targets))
            .collect()
    }

    #[test]
    fn the_counting_loop_keeps_its_counter_cached_around_the_back_edge() {
        let lowered = selected(&counting_loop(10));
        let names: Vec<&str> = lowered.iter().map(|x| x.0).collect();
        assert_eq!(
            names,
            [
                "cpjit_entry",
                "op_test_cached_push_0_1",
                "op_test_cached_push2_1_3", // the loop head, entered with the counter cached
                "op_test_cached_add_3_2",
                "op_test_cached_push2_2_3", // spills the counter
                "op_test_cached_helper_3_1",
                "op_test_cached_table_1_1",
                "op_test_cached_counter_1_1",
                "op_test_cached_pop_1_0",
                "op_test_cached_dec_jump_nz_0_1", // fills it back: the head's state
                "op_test_cached_exit_1_0",
            ]
        );
        assert_eq!(lowered[9].1, [2]);
    }

    #[test]
    fn every_edge_into_a_jump_target_ends_in_its_entry_state() {
        // A forward jump fixes the target's state; the fall-through into it ends there too.
        for n in [3, 10, 11, 100] {
            let lowered = selected(&straight(n));
            assert_eq!(lowered.len(), n, "no spill/fill needed");
            let state = |name: &str, k: usize| -> usize {
                let parts: Vec<&str> = name.rsplitn(3, '_').collect();
                parts[k].parse().unwrap()
            };
            for (i, (name, targets)) in lowered.iter().enumerate().skip(1) {
                let prev = lowered[i - 1].0;
                if prev != "cpjit_entry" && !prev.contains("exit") {
                    assert_eq!(state(prev, 0), state(name, 1), "{n}: {prev} -> {name}");
                }
                for &t in targets {
                    let entry = state(lowered[t].0, 1);
                    assert_eq!(state(name, 0), entry, "{n}: jump {name} -> {t}");
                }
            }
        }
    }

    #[test]
    fn selected_traces_compute_what_the_uncached_ones_compute() {
        let jit = copy_patch::jit().unwrap();
        for spec in [straight(10), straight(100), counting_loop(1000)] {
            let outcome = |trace: cpjit_runtime::Trace| {
                crate::workload::take_checksum();
                let status = copy_patch::run(&trace, &spec);
                (status, crate::workload::take_checksum())
            };
            let exact = copy_patch::plan_exact(&jit, &spec).unwrap();
            let uncached = outcome(copy_patch::stitch(&jit, &exact).unwrap());
            let end_to_end = outcome(copy_patch::compile(&jit, &spec).unwrap());
            let planned = copy_patch::plan(&jit, &spec).unwrap();
            let pre_lowered = outcome(copy_patch::stitch(&jit, &planned).unwrap());
            assert_eq!(end_to_end, uncached, "{}", spec.name);
            assert_eq!(pre_lowered, uncached, "{}", spec.name);
        }
    }

    /// The before/after figures of the cached lowering (not a test: it only prints):
    /// `cargo test --release -p cpjit-bench --bin cpjit-bench -- --ignored --nocapture
    /// cached_lowering_figures`. Counting-loop run time per round of copy-and-patch with the
    /// cached variants, with the uncached ops (fb5711c's) and Cranelift `cranelift-ssa`
    /// (opt speed), alternated run by run; medians, min–max and per-run ratios. Then code
    /// bytes per instance of the straight traces, uncached and cached.
    #[test]
    #[ignore = "a measurement: run it explicitly in a release build"]
    fn cached_lowering_figures() {
        use crate::cranelift::{Compiler, Variant};
        use crate::harness::{alternate, ratios, time, Measured, Timed};
        let jit = copy_patch::jit().unwrap();
        let iterations = 200_000;
        let spec = counting_loop(iterations);
        let cached = copy_patch::stitch(&jit, &copy_patch::plan(&jit, &spec).unwrap()).unwrap();
        let uncached =
            copy_patch::stitch(&jit, &copy_patch::plan_exact(&jit, &spec).unwrap()).unwrap();
        let ssa = Variant::ALL
            .into_iter()
            .find(|v| v.backend() == "cranelift-ssa" && v.opt_level() == "speed")
            .unwrap();
        let mut cl = Compiler::new(ssa, crate::workload::resolve).unwrap();
        let compiled = cl.compile_spec(&spec).unwrap();
        let per_round = |t: Measured| t / iterations as f64;
        let runs = 21;
        let mut ops = vec![
            Timed::new(2, runs, || {
                Ok(per_round(time(|| copy_patch::run(&cached, &spec)).1))
            }),
            Timed::new(2, runs, || {
                Ok(per_round(time(|| copy_patch::run(&uncached, &spec)).1))
            }),
            Timed::new(2, runs, || {
                // SAFETY: `cl` is not recycled while `compiled` lives.
                Ok(per_round(time(|| unsafe { compiled.run(&spec) }).1))
            }),
        ];
        let rounds = alternate(&mut ops).unwrap();
        drop(ops);
        let names = [
            "copy-and-patch, cached",
            "copy-and-patch, uncached (fb5711c ops)",
            "cranelift-ssa (speed)",
        ];
        for (i, name) in names.iter().enumerate() {
            let s = rounds.sample(i, 1);
            println!(
                "counting loop, {name}: median {:.3} ns/round (min {:.3}, max {:.3})",
                s.median_ns, s.min_ns, s.max_ns
            );
        }
        for (a, b) in [(0, 2), (1, 2), (0, 1)] {
            let r = ratios(&rounds, a, b).unwrap();
            println!(
                "ratio {} / {}: median {:.3} (min {:.3}, max {:.3})",
                names[a], names[b], r.median_ns, r.min_ns, r.max_ns
            );
        }
        for n in [10, 100, 1000, 10_000] {
            let spec = straight(n);
            let bytes = |plan| {
                copy_patch::stitch(&jit, &plan).unwrap().code_bytes().len() as f64 / n as f64
            };
            let before = bytes(copy_patch::plan_exact(&jit, &spec).unwrap());
            let after = bytes(copy_patch::plan(&jit, &spec).unwrap());
            println!("straight-{n}: code bytes per instance {before:.1} uncached, {after:.1} cached ({:.3}x)", after / before);
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("load average: {}", load.trim());
    }
}
