//! Lowering of a [`TraceSpec`] of the uncached test ops (`templates/testing/holes.c`) onto
//! their register-cached variants (`templates/families/cached.c`, family `test_cached`):
//! what a JIT author's trace builder does when it tracks the cache state while pushing.
//!
//! The lowering is driven by one table ([`LOWERING`]: test op → family element and stack
//! effect) and the generated family table (`Family::stencil(element, [IN, OUT])`): no
//! stencil name is formatted. Each op enters in the state the previous instance left and
//! leaves in its *natural* state (as many values cached as it leaves on the stack, at most
//! the register count). Jump targets need one entry state for every edge: a target's state
//! is fixed by the first edge that reaches it, and the other edges end in that state (the
//! jumping op, or the op before a fall-through, picks its exit state accordingly, since the
//! family has every (IN, OUT) pair; a `move` spill/fill is inserted only where the previous
//! op's exit state is already pinned by a jump of its own). Stencils the table does not
//! know are kept and entered with nothing cached.

use crate::workload::{Instance, TraceSpec};
use cpjit_runtime::model::{Family, StencilSet};
use std::collections::{BTreeSet, HashMap};

/// Name of the family of cached test ops in the kit's template set.
pub const FAMILY: &str = "test_cached";

/// Values the convention caches in registers at most (`CPJIT_CACHE_REGS` in cpjit.h).
pub const REGISTERS: usize = 3;

/// One uncached test op's cached counterpart.
struct Lowered {
    stencil: &'static str,
    element: &'static str,
    pops: usize,
    pushes: usize,
    /// Whether it continues to the next instance (the exits return).
    continues: bool,
}

const fn op(stencil: &'static str, element: &'static str, pops: usize, pushes: usize) -> Lowered {
    Lowered {
        stencil,
        element,
        pops,
        pushes,
        continues: true,
    }
}

/// The test ops with a cached family element (`cached.c` computes what `holes.c` does).
const LOWERING: &[Lowered] = &[
    op("op_test_push", "push", 0, 1),
    op("op_test_push2", "push2", 0, 2),
    op("op_test_add", "add", 2, 1),
    op("op_test_helper", "helper", 3, 1),
    op("op_test_table", "table", 1, 1),
    op("op_test_counter", "counter", 1, 1),
    op("op_test_addr_addend", "addr_addend", 1, 2),
    op("op_test_pop", "pop", 1, 0),
    op("op_test_dec_jump_nz", "dec_jump_nz", 1, 1),
    Lowered {
        continues: false,
        ..op("op_test_exit", "exit", 1, 0)
    },
];

/// The cached family of `set`, with its state parameters' value indices.
struct Cached<'a> {
    set: &'a StencilSet<'static>,
    family: &'a Family<'static>,
    /// Value index of states 0..=REGISTERS of `IN` and of `OUT`.
    states: [[usize; REGISTERS + 1]; 2],
}

impl<'a> Cached<'a> {
    fn new(set: &'a StencilSet<'static>) -> Result<Cached<'a>, String> {
        let family = cpjit_stencils::families(set)
            .iter()
            .find(|f| f.name == FAMILY)
            .ok_or_else(|| format!("{}: the stencil set has no family {FAMILY}", set.target))?;
        let mut states = [[0; REGISTERS + 1]; 2];
        for (p, param) in ["IN", "OUT"].iter().enumerate() {
            for (k, slot) in states[p].iter_mut().enumerate() {
                *slot = family.value_index(param, &k.to_string()).ok_or_else(|| {
                    format!("{}: family {FAMILY} has no {param} = {k}", set.target)
                })?;
            }
        }
        Ok(Cached {
            set,
            family,
            states,
        })
    }

    /// The name of `element`'s member from state `entry` to `exit`.
    fn member(&self, element: &str, entry: usize, exit: usize) -> Result<&'static str, String> {
        let e = self.family.element_index(element);
        e.and_then(|e| {
            self.family
                .stencil(e, &[self.states[0][entry], self.states[1][exit]])
        })
        .map(|i| self.set.stencils[i].name)
        .ok_or_else(|| {
            format!(
                "{}: family {FAMILY} has no member for {element} from {entry} to {exit} cached values",
                self.set.target
            )
        })
    }
}

/// The instance last pushed, while its exit state may still be changed.
struct Open {
    at: usize,
    element: &'static str,
    entry: usize,
}

/// Lowers `spec` onto the cached variants of `set` (see the module doc). Targets keep
/// naming instances of the result.
pub fn lower(set: &StencilSet<'static>, spec: &TraceSpec) -> Result<TraceSpec, String> {
    let cached = Cached::new(set)?;
    let shim = set.shim.map(|s| set.stencils[s as usize].name);
    let targets: BTreeSet<usize> = spec
        .instances
        .iter()
        .flat_map(|x| x.targets.iter().map(|&(_, t)| t))
        .collect();
    let mut out: Vec<Instance> = Vec::with_capacity(spec.instances.len());
    // Index in `out` of every instance of `spec`; entry state fixed for every jump target.
    let mut map = Vec::with_capacity(spec.instances.len());
    let mut fixed: HashMap<usize, usize> = HashMap::new();
    let (mut state, mut falls, mut open) = (0usize, false, None::<Open>);
    // Ends the previous instance in state `want`: re-picks its exit state if it is still
    // open, else inserts a spill/fill.
    let settle = |out: &mut Vec<Instance>, open: &mut Option<Open>, state: usize, want: usize| {
        if state == want {
            return Ok(());
        }
        if let Some(o) = open.take() {
            out[o.at].stencil = cached.member(o.element, o.entry, want)?;
        } else {
            out.push(Instance {
                stencil: cached.member("move", state, want)?,
                operands: Vec::new(),
                targets: Vec::new(),
            });
        }
        Ok::<(), String>(())
    };
    for (i, x) in spec.instances.iter().enumerate() {
        let at = || format!("{}: instance {i} ({})", spec.name, x.stencil);
        if targets.contains(&i) {
            let want = *fixed.entry(i).or_insert(if falls { state } else { 0 });
            if falls {
                settle(&mut out, &mut open, state, want).map_err(|e| format!("{}: {e}", at()))?;
            }
            open = None; // Other edges already end in `want`.
            state = want;
        }
        let lowering = LOWERING.iter().find(|l| l.stencil == x.stencil);
        let mut instance = x.clone();
        match lowering {
            Some(l) if Some(x.stencil) != shim => {
                let natural = (state.saturating_sub(l.pops) + l.pushes).min(REGISTERS);
                let mut exit = if l.continues { natural } else { 0 };
                let mut pinned = false;
                for &(_, t) in &x.targets {
                    let want = *fixed.entry(t).or_insert(exit);
                    if pinned && want != exit {
                        return Err(format!(
                            "{}: jump targets need different cache states",
                            at()
                        ));
                    }
                    (exit, pinned) = (want, true);
                }
                instance.stencil = cached
                    .member(l.element, state, exit)
                    .map_err(|e| format!("{}: {e}", at()))?;
                map.push(out.len());
                open = (!pinned && l.continues).then_some(Open {
                    at: out.len(),
                    element: l.element,
                    entry: state,
                });
                out.push(instance);
                (state, falls) = (exit, l.continues);
            }
            _ => {
                // The shim and unknown stencils: nothing cached on entry and exit.
                if falls {
                    settle(&mut out, &mut open, state, 0).map_err(|e| format!("{}: {e}", at()))?;
                }
                for &(_, t) in &x.targets {
                    if *fixed.entry(t).or_insert(0) != 0 {
                        return Err(format!(
                            "{}: an uncached stencil jumps to an instance entered with cached values",
                            at()
                        ));
                    }
                }
                map.push(out.len());
                out.push(instance);
                (state, falls, open) = (0, true, None);
            }
        }
    }
    for x in &mut out {
        for (_, t) in &mut x.targets {
            *t = map[*t];
        }
    }
    Ok(TraceSpec {
        name: spec.name.clone(),
        instances: out,
        stack_slots: spec.stack_slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy_patch;
    use crate::workload::{counting_loop, straight};

    fn names(spec: &TraceSpec) -> Vec<&'static str> {
        spec.instances.iter().map(|x| x.stencil).collect()
    }

    #[test]
    fn the_counting_loop_keeps_its_counter_cached_around_the_back_edge() {
        let lowered = lower(copy_patch::set(), &counting_loop(10)).unwrap();
        assert_eq!(
            names(&lowered),
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
        assert_eq!(lowered.instances[9].targets, [("JUMP_TARGET", 2)]);
    }

    #[test]
    fn every_edge_into_a_jump_target_ends_in_its_entry_state() {
        // A forward jump fixes the target's state; the fall-through into it is re-picked.
        let set = copy_patch::set();
        for n in [3, 10, 11, 100] {
            let spec = straight(n);
            let lowered = lower(set, &spec).unwrap();
            assert_eq!(lowered.instances.len(), n, "no spill/fill needed");
            let state = |name: &str, k: usize| -> usize {
                let parts: Vec<&str> = name.rsplitn(3, '_').collect();
                parts[k].parse().unwrap()
            };
            for (i, x) in lowered.instances.iter().enumerate().skip(1) {
                let prev = lowered.instances[i - 1].stencil;
                if prev != "cpjit_entry" && !prev.contains("exit") {
                    assert_eq!(
                        state(prev, 0),
                        state(x.stencil, 1),
                        "{n}: {prev} -> {}",
                        x.stencil
                    );
                }
                for &(_, t) in &x.targets {
                    let entry = state(lowered.instances[t].stencil, 1);
                    assert_eq!(state(x.stencil, 0), entry, "{n}: jump {} -> {t}", x.stencil);
                }
            }
        }
    }

    #[test]
    fn lowered_traces_compute_what_the_uncached_ones_compute() {
        let jit = copy_patch::jit().unwrap();
        for spec in [straight(10), straight(100), counting_loop(1000)] {
            let outcome = |plan: copy_patch::Plan| {
                let trace = copy_patch::stitch(&jit, &plan).unwrap();
                crate::workload::take_checksum();
                let status = copy_patch::run(&trace, &spec);
                (status, crate::workload::take_checksum())
            };
            let uncached = outcome(copy_patch::plan_exact(&jit, &spec).unwrap());
            let cached = outcome(copy_patch::plan(&jit, &spec).unwrap());
            assert_eq!(cached, uncached, "{}", spec.name);
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
        let compiled = cl.compile(&spec).unwrap();
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
