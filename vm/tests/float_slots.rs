//! Float slots (vm/templates/cached/ops.c, "Float slots"; the families `vm_float_*`): float
//! chains run on FP registers, a chain that meets an op without a float-slot member boxes
//! into general registers and goes on, and the checker refuses a boxed member entered where
//! float slots are live.

use crate::common;

use common::{agree_with, config, example, record, Recorder};
use cpjit_vm::cached::{CacheState, Kind};
use cpjit_vm::{Config, Mode};

/// The names of the stencils of every compiled trace's loop body (or whole trace).
fn body_stencils(recorder: &Recorder) -> Vec<&'static str> {
    let set = recorder.backend.set();
    let lowerings = recorder.lowerings.borrow();
    let mut names = Vec::new();
    for (trace, lowering) in lowerings.iter() {
        let start = lowering.body_entry.map_or(0, |b| b.index());
        let body = lowering.instances[start..]
            .iter()
            .take_while(|i| i.uop.is_none_or(|u| u < trace.body_len));
        names.extend(body.map(|i| set.stencils[i.stencil].name));
    }
    names
}

#[test]
fn mandelbrots_float_chains_run_on_float_slots_and_the_checker_refuses_a_boxed_member_there() {
    let (recorder, out) = record(&example("mandelbrot", "vm"));
    assert_eq!(out, example("mandelbrot", "expected"));
    let body = body_stencils(&recorder);
    // The escape test (`zr2 + zi2 <= 4.0`) and the updates of zi and zr: float adds,
    // multiplies and the compare on FP registers, none on boxed values.
    for op in [
        "op_ADD_FLOAT_LOCAL_float1_",
        "op_MUL_FLOAT_float1_",
        "op_LE_FLOAT_GUARD_TRUE_float1_",
        "op_STORE_float1_",
    ] {
        assert!(body.iter().any(|n| n.starts_with(op)), "{op} in {body:?}");
    }
    for boxed in ["op_MUL_FLOAT_cached_", "op_ADD_FLOAT_LOCAL_cached_"] {
        assert!(
            body.iter().all(|n| !n.starts_with(boxed)),
            "{boxed} in {body:?}"
        );
    }

    // A boxed member where the instance before leaves float slots: the same depth, but the
    // general registers it reads hold nothing.
    let backend = &recorder.backend;
    let lowerings = recorder.lowerings.borrow();
    let (trace, lowering, k) = lowerings
        .iter()
        .find_map(|(t, l)| {
            let k = l.instances.iter().position(|i| {
                i.uop.is_some()
                    && i.entry.kind() == Kind::Float
                    && backend
                        .cached_ops()
                        .member(
                            t.uops[i.uop.unwrap()].op,
                            CacheState::boxed(i.entry.depth()),
                        )
                        .is_some()
            })?;
            Some((t, l, k))
        })
        .expect("a member entered with float slots whose op has a boxed member too");
    let inst = lowering.instances[k];
    let boxed = CacheState::boxed(inst.entry.depth());
    let (stencil, exit) = backend
        .cached_ops()
        .member(trace.uops[inst.uop.unwrap()].op, boxed)
        .unwrap();
    let mut mixed = lowering.clone();
    mixed.instances[k].stencil = stencil;
    mixed.instances[k].entry = boxed;
    mixed.instances[k].exit = exit;
    let err = backend.check_cache_states(trace, &mixed).unwrap_err();
    assert!(
        err.contains(&format!("leaves {}f", inst.entry.depth())),
        "{err}"
    );
}

/// `b = x * x < 3.0` while x grows: the product is made on float slots, then the compare
/// that is not fused with a branch (no float-slot member: it pushes a bool) finds them boxed
/// into general registers (`BOX`), and the chain goes on boxed; every mode prints the same.
#[test]
fn a_float_chain_meeting_an_op_without_a_float_member_boxes_and_goes_on() {
    let text = "func main()\n  locals i x b\n\
                const 0; store i\n  const 1.5; store x\n  const 0; store b\n\
                loop:\n  load i; const 300; lt; jump_if_false done\n\
                load x; load x; mul; const 3.0; lt; store b\n\
                load x; const 0.001; add; store x\n\
                load i; const 1; add; store i\n  jump loop\n\
                done:\n  load b; load x; print 2\n  const none; return\nend\n";
    let (out, _) = agree_with(text, config, |_: &mut Config| {});
    assert_eq!(out, "False 1.799999999999967\n");
    let recorder = Recorder::new();
    let (jit, _) = recorder.run(text, common::eager(Mode::Jit));
    assert_eq!(jit, out);
    let body = body_stencils(&recorder);
    // (x is pinned: its multiply is the pinned register's member.)
    for (op, kind) in [
        ("op_MUL_FLOAT_LOCAL_", "_float1_"),
        ("op_VM_BOX_float1_", ""),
        ("op_LT_FLOAT_cached_", ""),
    ] {
        let found = body.iter().any(|n| n.starts_with(op) && n.contains(kind));
        assert!(found, "{op} ({kind}) in {body:?}");
    }
}

/// integrate.vm's `g(x) = x * sqrt(x)`, inlined: the square root of an argument proved a
/// float is SQRT_FLOAT (no helper call, no spill around it), so the whole statement
/// `t = t + g(x)` runs on float slots; being an accumulation into a float local, its
/// argument is forwarded (read from x, never copied) and its sum added into t in place, so
/// the body copies and nips nothing.
#[test]
fn an_inlined_square_root_of_a_float_runs_on_float_slots() {
    let (recorder, out) = record(&example("integrate", "vm"));
    assert_eq!(out, example("integrate", "expected"));
    let ops = recorder.ops();
    assert!(ops.contains(&cpjit_vm::ops::op::SQRT_FLOAT), "{ops:?}");
    assert!(!ops.contains(&cpjit_vm::ops::op::SQRT), "{ops:?}");
    let body = body_stencils(&recorder);
    for op in ["op_SQRT_FLOAT_float1_", "op_ADD_FLOAT_LOCAL_"] {
        assert!(body.iter().any(|n| n.starts_with(op)), "{op} in {body:?}");
    }
    for op in ["op_COPY_", "op_NIP_"] {
        assert!(
            !body.iter().any(|n| n.starts_with(op)),
            "no {op} in {body:?}"
        );
    }
}

/// A negative argument reaching the inlined SQRT_FLOAT leaves the trace at the call, and the
/// interpreter raises there as it does in every mode.
#[test]
fn a_negative_square_root_in_an_inlined_call_raises_in_every_mode() {
    let text = "func g(x)\n  load x; sqrt; return\nend\n\
                func main()\n  locals i s\n  const 0; store i\n  const 0.0; store s\n\
                loop:\n  load i; const 40; lt; jump_if_false done\n\
                load s; const 20.5; load i; float; sub; call g; add; store s\n\
                load i; const 1; add; store i\n  jump loop\n\
                done:\n  load s; print\n  const none; return\nend\n";
    let (out, _) = agree_with(text, common::eager, |_: &mut Config| {});
    assert!(out.contains("ValueError"), "{out}");
}
