//! Register-cached traces (vm/templates/cached/ops.c, the families `vm_*`): every trace the
//! examples and random programs compile is lowered with a consistent cache state (each
//! instance entered in the state the one before it leaves, jump and exit targets and
//! uncached ops entered with nothing cached), the checker catches a stale state, and loops
//! really run cached members.

use crate::common;

use common::{eager, example, gen, record, Recorder};
use cpjit_vm::cached::{CacheState, Kind};
use cpjit_vm::jit::{Backend, LoweredId, Lowering};
use cpjit_vm::{Config, Mode};

#[test]
fn every_example_trace_is_lowered_with_consistent_cache_states() {
    for name in [
        "sum",
        "fib",
        "nested",
        "collatz",
        "sieve",
        "calls",
        "overflow",
        "mandelbrot",
        "nbody",
    ] {
        let read = |ext: &str| example(name, ext);
        let compiler = Recorder::new();
        let (out, stats) = compiler.run(&read("vm"), eager(Mode::Jit));
        assert_eq!(out, read("expected"), "examples/{name}.vm");
        assert!(stats.traces > 0, "{name}: {stats:?}");
        assert_eq!(stats.compile_failures, 0, "{name}");
        assert!(
            compiler.cached_instances() > 0,
            "{name}: no trace kept a value in a register"
        );
    }
}

/// The compile reuses one lowering's vectors from trace to trace
/// ([`Backend::lower_into`]): whatever the last trace left there, the next lowering is the one
/// made afresh (stale exit entries, pins or jump targets of a longer trace would show here).
#[test]
fn a_lowering_into_reused_vectors_is_the_fresh_lowering() {
    let compiler = Recorder::new();
    for name in ["nbody", "calls", "collatz", "sieve", "sum"] {
        let text = example(name, "vm");
        compiler.run(&text, eager(Mode::Jit));
    }
    let lowerings = compiler.lowerings.borrow();
    assert!(lowerings.len() > 10, "{} traces", lowerings.len());
    assert!(lowerings.iter().any(|(_, l)| !l.pinned.is_empty()));
    assert!(lowerings.iter().any(|(_, l)| l.pinned.is_empty()));
    let mut reused = Lowering::default();
    for (trace, fresh) in lowerings.iter().chain(lowerings.iter().rev()) {
        compiler.backend.lower_into(trace, &mut reused).unwrap();
        assert_eq!(&reused, fresh, "{trace:?}");
    }
}

/// The kit picks the members (`TraceBuilder::push_op` on the kit's selection tables): every
/// cached member a lowering plans is the one the kit's table gives for its op in the state
/// the lowering enters it in, every cached stencil of the set is some op's member there,
/// and no uncached stencil is.
#[test]
fn the_kit_picks_every_cached_member_the_lowering_plans() {
    let compiler = Recorder::new();
    for name in ["nbody", "calls", "collatz", "sieve", "sum", "mandelbrot"] {
        let text = example(name, "vm");
        compiler.run(&text, eager(Mode::Jit));
    }
    let backend = &compiler.backend;
    let cached = backend.cached_ops();
    let selectors = cached.selectors();
    let mut by_op = 0;
    for (trace, lowering) in compiler.lowerings.borrow().iter() {
        for inst in &lowering.instances {
            let Some(k) = cached.kit_op(inst.stencil) else {
                assert!(!cached.is_cached(inst.stencil), "{trace:?}");
                continue;
            };
            let table = selectors[k.family as usize].table();
            // (A family with float slots numbers its states the kit's way.)
            let t = table.transition(k.op, inst.entry.kit_state(k.floats));
            assert_eq!(t.member as usize, inst.stencil, "{trace:?}");
            assert_eq!(t.exit, inst.exit.kit_state(k.floats), "{trace:?}");
            by_op += 1;
        }
    }
    assert!(by_op > 100, "{by_op} instances pushed by op");
    // Every member the families compile is one the kit pushes for some op and state (one
    // member per entry state: none is left out of the selection tables).
    let set = backend.set();
    let families = cpjit_vm_stencils::families(set);
    let mut members = 0;
    for family in families.iter().filter(|f| f.name.starts_with("vm_")) {
        for stencil in family.stencils.iter().filter(|&s| s != u16::MAX) {
            let name = set.stencils[stencil as usize].name;
            assert!(cached.kit_op(stencil as usize).is_some(), "{name}");
            members += 1;
        }
    }
    assert!(members > 100, "{members} members");
}

#[test]
fn random_programs_lower_consistently_and_agree_with_the_interpreter() {
    for seed in 0..40 {
        let text = gen::program(seed);
        let reference = common::run(&text, Config::default());
        // The recorder checks every lowering's cache states as it compiles.
        let (_, out) = record(&text);
        assert_eq!(out, reference, "seed {seed}:\n{text}");
    }
}

#[test]
fn the_checker_refuses_a_stale_cache_state() {
    let text = example("sum", "vm");
    let compiler = Recorder::new();
    compiler.run(&text, eager(Mode::Jit));
    let lowerings = compiler.lowerings.borrow();
    let backend = &compiler.backend;
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| l.instances.iter().any(|i| !i.exit.is_empty()))
        .expect("a trace with a cached member");
    backend.check_cache_states(trace, lowering).unwrap();

    // Drop the spill before an instance that expects nothing cached, or the member
    // after one that leaves values cached: the state no longer matches.
    let k = lowering
        .instances
        .iter()
        .position(|i| !i.exit.is_empty())
        .unwrap();
    let mut stale = lowering.clone();
    stale.instances.remove(k + 1);
    for u in stale.instance_of_uop.iter_mut() {
        if u.index() > k {
            *u = LoweredId(u.index() - 1);
        }
    }
    assert!(backend.check_cache_states(trace, &stale).is_err());

    // Claim a member was entered in another state than its stencil's.
    let mut wrong = lowering.clone();
    wrong.instances[k].entry = CacheState::from_bits(wrong.instances[k].entry.bits() ^ 1);
    let err = backend.check_cache_states(trace, &wrong).unwrap_err();
    assert!(err.contains("recorded states"), "{err}");

    // Enter a jump target (the loop head, or an exit stub) with a value cached: replace the
    // uncached stencil of a target by a member entered in state 1.
    let cached = backend.cached_ops();
    let targets: Vec<usize> = trace
        .uops
        .iter()
        .filter(|u| cpjit_vm::ops::info(u.op).exits)
        .map(|u| u.target as usize)
        .collect();
    let t = targets[0];
    let mut entered = lowering.clone();
    let at = entered.instance_of_uop[t].index();
    let op = trace.uops[t].op;
    if let Some((stencil, exit)) = cached.member(op, CacheState::boxed(1)) {
        entered.instances[at].stencil = stencil;
        entered.instances[at].entry = CacheState::boxed(1);
        entered.instances[at].exit = exit;
        assert!(backend.check_cache_states(trace, &entered).is_err());
    }
}

#[test]
fn uncached_ops_and_exit_stubs_are_entered_with_nothing_cached() {
    let text = example("calls", "vm");
    let compiler = Recorder::new();
    // (calls.vm's callees are inlined by default: no call would be left.)
    let config = cpjit_vm::Config {
        inline_calls: false,
        ..eager(Mode::Jit)
    };
    compiler.run(&text, config);
    let backend = &compiler.backend;
    let mut seen_call = false;
    for (trace, lowering) in compiler.lowerings.borrow().iter() {
        for inst in &lowering.instances {
            let Some(u) = inst.uop else { continue };
            let op = trace.uops[u].op;
            if backend
                .cached_ops()
                .member(op, CacheState::boxed(1))
                .is_none()
                && backend.cached_ops().member(op, CacheState::EMPTY).is_none()
            {
                let empty = (CacheState::EMPTY, CacheState::EMPTY);
                assert_eq!((inst.entry, inst.exit), empty, "uncached micro-op {u}");
            }
            if u >= trace.body_len {
                assert_eq!(inst.entry, CacheState::EMPTY, "exit stub {u}");
            }
            // Traces call through CALL_JIT (CALL is the bytecode), an uncached op.
            seen_call |= op == cpjit_vm::ops::op::CALL_JIT;
        }
    }
    assert!(seen_call, "calls.vm traces a CALL_JIT");
}

#[test]
fn int_loops_keep_ints_unboxed_in_registers_and_the_checker_refuses_a_mixed_state() {
    let text = example("sum", "vm");
    let (compiler, out) = record(&text);
    assert_eq!(out, "4499998500000\n");
    let lowerings = compiler.lowerings.borrow();
    let backend = &compiler.backend;
    let cached = backend.cached_ops();
    let set = backend.set();
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| !l.pinned.is_empty())
        .expect("sum.vm's loop pins its locals");
    // The loop body's add (`s = s + i`, into the pinned `s` in place, held wide) and compare
    // (with the bound, a constant) run on raw registers (the counter i is held wide,
    // vm/src/pinning/wide.rs): no tag is extracted or boxed.
    let body: Vec<&str> = lowering.instances[lowering.body_entry.unwrap().index()..]
        .iter()
        .take_while(|i| i.uop.is_none_or(|u| u < trace.body_len))
        .map(|i| set.stencils[i.stencil].name)
        .collect();
    for op in [
        "op_ADD_TO_LOCAL_INT_pinned1_22_",
        "op_LT_INT_CONST_GUARD_TRUE_scaled2_",
    ] {
        assert!(body.iter().any(|n| n.starts_with(op)), "{op} in {body:?}");
    }
    assert!(body.iter().all(|n| !n.contains("GUARD_INT")), "{body:?}");

    // A boxed member where the instance before leaves raw registers: the same depth, but
    // the registers would be read as boxed values.
    let k = lowering
        .instances
        .iter()
        .position(|i| i.uop.is_some() && !i.entry.is_empty() && i.entry.kind() != Kind::Boxed)
        .expect("a member entered with unboxed registers");
    let inst = lowering.instances[k];
    let op = trace.uops[inst.uop.unwrap()].op;
    let (stencil, exit) = cached
        .member(op, CacheState::boxed(inst.entry.depth()))
        .expect("the op has a boxed member too");
    let mut mixed = lowering.clone();
    mixed.instances[k].stencil = stencil;
    mixed.instances[k].entry = CacheState::boxed(inst.entry.depth());
    mixed.instances[k].exit = exit;
    let err = backend.check_cache_states(trace, &mixed).unwrap_err();
    assert!(err.contains(&format!("leaves {}", inst.entry)), "{err}");
}

/// `s = s + c * i` from `start`, leaving the 48-bit range early: in jit mode the loop body
/// keeps `s` and `i` in pinned registers (both wide: `s` only added into, `i` a bounded
/// counter), runs the multiply on raw registers and adds its product into `s`'s register in
/// place, the overflow flag the range check at 64 bits; once
/// `s` is a big int the loop goes on in the generic add (the body's guard fails, a side
/// trace takes it).
fn scaled_overflow(start: i64, c: i64) -> String {
    format!(
        "func main()
  locals i s
  const {start}; store s
  const 0; store i
loop:
  load i; const 100000; lt; jump_if_false done
  load s; const {c}; load i; mul; add; store s
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  const none; return
end
"
    )
}

#[test]
fn scaled_int_loops_leave_the_tagged_range_exactly_where_the_interpreter_does() {
    const MAX: i64 = (1 << 47) - 1;
    for (start, c) in [
        (MAX - 1_000_000, 3),
        (-MAX + 1_000_000, -5),
        (MAX - 50_000, 1),
    ] {
        let text = scaled_overflow(start, c);
        let reference = common::run(&text, Config::default());
        // Python's s: start + c * (0 + 1 + ... + 99999).
        let want = i128::from(start) + i128::from(c) * 4_999_950_000;
        assert_eq!(reference, format!("{want}\n"));
        let (compiler, out) = record(&text);
        assert_eq!(out, reference, "{start} + {c} * i");
        let lowerings = compiler.lowerings.borrow();
        let set = compiler.backend.set();
        let names: Vec<&str> = lowerings
            .iter()
            .flat_map(|(_, l)| l.instances.iter().map(|i| set.stencils[i.stencil].name))
            .collect();
        // (The counter i, bounded, is held wide: the multiply runs on raw registers.)
        for member in ["op_MUL_INT_scaled2_", "op_ADD_TO_LOCAL_INT_pinned"] {
            assert!(
                names.iter().any(|n| n.starts_with(member)),
                "{start} + {c} * i: no {member} in {names:?}"
            );
        }
    }
}

#[test]
fn a_member_compiled_for_one_copy_depth_runs_only_that_depth() {
    let text = example("calls", "vm");
    let (compiler, out) = record(&text);
    assert_eq!(out, "71913071429\n");
    let backend = &compiler.backend;
    let cached = backend.cached_ops();
    let lowerings = compiler.lowerings.borrow();
    let (trace, lowering, k, depth) = lowerings
        .iter()
        .find_map(|(t, l)| {
            l.instances
                .iter()
                .enumerate()
                .find_map(|(k, i)| cached.depth_of(i.stencil).map(|d| (t, l, k, d)))
        })
        .expect("calls.vm's inlined callees copy their argument at a fixed depth");
    backend.check_cache_states(trace, lowering).unwrap();
    // The same stencil for a COPY from another depth would read the wrong slot.
    let mut deeper = trace.clone();
    deeper.uops[lowering.instances[k].uop.unwrap()].arg0 = depth + 1;
    let err = backend.check_cache_states(&deeper, lowering).unwrap_err();
    assert!(err.contains("does not run micro-op"), "{err}");
}

/// The compile pushes each instance as it is lowered (jumps and exits to stubs not lowered
/// yet through the kit's labels): the stitched trace's instances are the lowering's, in
/// order, each of its jump targets the instance the lowering says (read from the runtime's
/// listing: every instance's stencil and every patched jump hole's instance).
#[test]
fn the_stitched_instances_and_jumps_are_the_lowerings() {
    let compiler = Recorder::new();
    for name in ["nbody", "calls", "collatz", "sum", "sieve"] {
        compiler.run(&example(name, "vm"), eager(Mode::Jit));
    }
    let options = cpjit_runtime::JitOptions {
        listing: true,
        ..Default::default()
    };
    let listing = Backend::host_with(options).expect("host stencils are linked");
    let set = listing.set();
    let mut jumps = 0;
    for (trace, lowering) in compiler.lowerings.borrow().iter() {
        let text = listing.compile(trace).unwrap().listing();
        // "[k] name at ..." starts instance k; its holes follow, "... TARGET = 0x.. (instance n)".
        let mut stitched: Vec<(String, Vec<(String, usize)>)> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix('[') {
                let (k, rest) = rest.split_once("] ").expect("[k] name");
                assert_eq!(k.parse::<usize>().unwrap(), stitched.len(), "{text}");
                let name = rest.split(' ').next().unwrap().to_string();
                stitched.push((name, Vec::new()));
            } else if let Some((_, hole)) = line.split_once("_TARGET = ") {
                let name = line
                    .split(": ")
                    .nth(1)
                    .unwrap()
                    .split(" = ")
                    .next()
                    .unwrap();
                let n = hole.split("(instance ").nth(1).expect("an instance");
                let n = n.split(')').next().unwrap().parse().unwrap();
                stitched.last_mut().unwrap().1.push((name.to_string(), n));
            }
        }
        assert_eq!(stitched.len(), lowering.instances.len() + 1, "{text}");
        for (k, inst) in lowering.instances.iter().enumerate() {
            let (name, targets) = &stitched[LoweredId(k).instance().index()];
            assert_eq!(
                name, set.stencils[inst.stencil].name,
                "instance {k}\n{text}"
            );
            for (hole, n) in targets {
                let u = &trace.uops[inst.uop.expect("glue jumps nowhere")];
                let want = match hole.as_str() {
                    "JUMP_TARGET" => lowering.instance_of_uop[u.target as usize],
                    "EXIT_TARGET" => lowering.exit_instance(u.target as usize),
                    other => panic!("jump hole {other}"),
                };
                assert_eq!(*n, want.instance().index(), "instance {k}: {hole}\n{text}");
                jumps += 1;
            }
        }
    }
    assert!(jumps > 100, "{jumps} jumps checked");
}
