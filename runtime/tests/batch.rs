//! Batches of traces (`Jit::batch`): finished with one allocation, one write and one flush,
//! each trace behaving exactly as if finished alone (same results, its own instance ids,
//! targets and continuation), freed independently, and failing as a whole, with the
//! failing trace named and no memory kept, when one trace is bad.

use crate::common;
use common::{exit_address, resolve, run, Frame, SET};
use cpjit_runtime::{Error, InstanceId, Jit, JitOptions, Target, Trace, TraceBuilder};

/// Trace kind `k % 4` with constant `v`, pushed into `t`; returns its shim and what
/// running it returns from a zeroed frame (with `counter` set to 3).
fn push_trace(t: &mut TraceBuilder<'_, '_>, k: usize, v: u64, tail: u64) -> (InstanceId, i64) {
    let shim = t.push_shim().unwrap();
    match k % 4 {
        // Straight: load, add two constants, return.
        0 => {
            t.push_named("op_load_got", &[v], &[]).unwrap();
            t.push_named("op_add_got", &[v, 1], &[]).unwrap();
            t.push_named("op_return", &[], &[]).unwrap();
            (shim, 2 * v as i64 + 1)
        }
        // A loop through a target inside the trace (ids count from 0 in each trace).
        1 => {
            t.push_named("op_load_got", &[0], &[]).unwrap();
            let body = t.push_named("op_add_got", &[v, 2], &[]).unwrap();
            t.push_named("op_dec_jump_nz", &[], &[Target::Instance(body)])
                .unwrap();
            t.push_named("op_return", &[], &[]).unwrap();
            (shim, 3 * (v as i64 + 2))
        }
        // A helper call and a GOT call.
        2 => {
            t.push_named("op_load_got", &[v], &[]).unwrap();
            t.push_named("op_call_helper", &[], &[]).unwrap();
            t.push_named("op_call_got", &[], &[]).unwrap();
            t.push_named("op_return", &[], &[]).unwrap();
            (shim, v as i64 + 2000)
        }
        // Continues elsewhere: to a native exit, or to another trace's return.
        _ => {
            t.push_named("op_load_got", &[v], &[]).unwrap();
            if v % 2 == 0 {
                t.push_named("op_exit_to", &[], &[Target::Address(exit_address())])
                    .unwrap();
                (shim, 2 * v as i64)
            } else {
                t.push_named("op_skip_if_zero", &[], &[]).unwrap();
                t.continue_at(Target::Address(tail));
                (shim, v as i64)
            }
        }
    }
}

fn frame() -> Frame {
    Frame {
        counter: 3,
        ..Frame::default()
    }
}

/// A trace that only returns, for the continuations to reach.
fn return_trace(jit: &Jit<'_>) -> (Trace, u64) {
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let ret = t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    let address = trace.entry(ret) as u64;
    (trace, address)
}

fn batch_runs_like_single_traces(options: JitOptions, far: bool) {
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let (_tail, tail) = return_trace(&jit);
    let mut batch = jit.batch();
    let mut expected = Vec::new();
    for k in 0..24 {
        expected.push(push_trace(batch.trace(), k, k as u64 + 5, tail));
    }
    assert_eq!(batch.len(), 24);
    let traces = batch.finish().unwrap();
    assert_eq!(traces.len(), 24);
    for (k, (trace, &(shim, result))) in traces.iter().zip(&expected).enumerate() {
        assert_eq!(shim.index(), 0, "ids count from 0 in each trace");
        assert_eq!(run(trace, shim, &mut frame()), result, "trace {k}");
        // The same trace finished alone has the same size and GOT and veneer needs.
        let mut t = jit.trace();
        push_trace(&mut t, k, k as u64 + 5, tail);
        let alone = t.finish().unwrap();
        assert_eq!(
            (trace.code_bytes().len(), trace.got_slots(), trace.veneers()),
            (alone.code_bytes().len(), alone.got_slots(), alone.veneers()),
            "trace {k}"
        );
        assert_eq!(trace.instance_offsets(), alone.instance_offsets());
    }
    assert_eq!(
        traces.iter().any(|t| t.veneers() > 0),
        far,
        "veneers only when placed far from the helpers"
    );
    // The traces of a batch do not overlap, in code or data.
    let mut ranges: Vec<_> = traces
        .iter()
        .flat_map(|t| [t.code_range(), t.data_range()])
        .filter(|r| !r.is_empty())
        .collect();
    ranges.sort_by_key(|r| r.start);
    for pair in ranges.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{pair:x?}");
    }
}

#[test]
fn a_batchs_traces_run_like_traces_finished_alone() {
    batch_runs_like_single_traces(JitOptions::default(), false);
}

/// Far from the helpers: every trace of the batch gets its own veneers and GOT slots.
#[test]
fn a_far_batch_gives_each_trace_its_own_veneers() {
    batch_runs_like_single_traces(
        JitOptions {
            near: Some(0x5000_0000_0000),
            ..JitOptions::default()
        },
        true,
    );
}

#[test]
fn traces_of_a_batch_are_freed_independently_and_their_memory_reused() {
    let jit = Jit::new(SET, resolve).unwrap();
    let (_tail, tail) = return_trace(&jit);
    let base = jit.memory_stats();
    let mut batch = jit.batch();
    let mut expected = Vec::new();
    for k in 0..40 {
        expected.push(push_trace(batch.trace(), k, k as u64, tail));
    }
    let mut traces: Vec<Option<Trace>> = batch.finish().unwrap().into_iter().map(Some).collect();
    let stats = jit.memory_stats();
    assert_eq!(stats.traces, base.traces + 40);
    let used: usize = traces
        .iter()
        .flatten()
        .map(|t| {
            let round = |n: usize| n.div_ceil(16) * 16;
            round(t.code_bytes().len().max(1)) + round(t.data_range().len())
        })
        .sum();
    assert_eq!(
        stats.used() - base.used(),
        used,
        "unused veneer and GOT space went back to the arena"
    );
    // Every other trace freed: the rest still run, and their memory is taken again.
    for t in traces.iter_mut().step_by(2) {
        *t = None;
    }
    assert_eq!(jit.memory_stats().traces, base.traces + 20);
    let mut again = jit.batch();
    for k in 0..20 {
        push_trace(again.trace(), 0, k, tail);
    }
    let again = again.finish().unwrap();
    for (k, t) in traces.iter().enumerate() {
        if let Some(t) = t {
            let (shim, result) = expected[k];
            assert_eq!(run(t, shim, &mut frame()), result, "trace {k}");
        }
    }
    for (k, t) in again.iter().enumerate() {
        assert_eq!(
            run(t, InstanceId::from_index(0), &mut frame()),
            2 * k as i64 + 1
        );
    }
    drop(traces);
    drop(again);
    assert_eq!(jit.memory_stats().used(), base.used());
    assert_eq!(jit.memory_stats().traces, base.traces);
}

#[test]
fn a_bad_trace_fails_the_batch_naming_it_and_keeps_no_memory() {
    let jit = Jit::new(SET, resolve).unwrap();
    let base = jit.memory_stats();
    // Trace 2 jumps to an instance it does not have; trace 1 of the other batch is empty.
    let mut batch = jit.batch();
    for k in 0..4 {
        let t = batch.trace();
        t.push_shim().unwrap();
        t.push_named("op_load_got", &[k], &[]).unwrap();
        let target = if k == 2 { 9 } else { 1 };
        t.push_named(
            "op_dec_jump_nz",
            &[],
            &[Target::Instance(InstanceId::from_index(target))],
        )
        .unwrap();
        t.push_named("op_return", &[], &[]).unwrap();
    }
    let error = batch.finish().unwrap_err();
    assert!(
        matches!(&error, Error::InBatch { trace: 2, source } if matches!(**source, Error::MissingInstance { target: 9, .. })),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with("trace 2 of the batch: "),
        "{error}"
    );
    let mut batch = jit.batch();
    push_trace(batch.trace(), 0, 1, 0);
    batch.trace();
    let error = batch.finish().unwrap_err();
    assert!(
        matches!(&error, Error::InBatch { trace: 1, source } if matches!(**source, Error::EmptyTrace)),
        "{error:?}"
    );
    assert_eq!(jit.memory_stats().used(), base.used());
    assert_eq!(jit.memory_stats().traces, base.traces);
    // An empty batch is no traces; a batch's shim can only start each of its traces.
    assert!(jit.batch().finish().unwrap().is_empty());
    let mut batch = jit.batch();
    batch.trace().push_shim().unwrap();
    let t = batch.trace();
    t.push_shim().unwrap();
    assert!(matches!(
        t.push_shim(),
        Err(Error::ShimNotFirst { instance: 1, .. })
    ));
}
