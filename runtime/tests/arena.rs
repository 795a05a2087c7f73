//! Many small traces share pages: 1,000 one-stencil traces cost a small multiple of their
//! real size, and freed space is reused.

mod common;
use common::{resolve, run, Frame, SET};
use cpjit_runtime::Jit;

#[test]
fn a_thousand_tiny_traces_share_pages() {
    let jit = Jit::new(SET, resolve).unwrap();
    // `op_data_counter` falls through, so each trace loops back onto itself: one stencil
    // plus the tail jump the runtime appends.
    let traces: Vec<_> = (0..1000)
        .map(|_| {
            let mut t = jit.trace();
            let op = t.push_named("op_data_counter", &[], &[]).unwrap();
            t.continue_at(cpjit_runtime::Target::Instance(op));
            t.finish().unwrap()
        })
        .collect();
    let real: usize = traces
        .iter()
        .map(|t| t.code_range().len() + t.data_range().len())
        .sum();
    let stats = jit.memory_stats();
    let chunk = 2 << 20; // the default chunk: 1 MiB of code + 1 MiB of data
    println!(
        "1000 traces: real {real} B, used {} B ({} code + {} data), mapped {} B in {} chunk(s)",
        stats.used(),
        stats.code_used,
        stats.data_used,
        stats.mapped(),
        stats.chunks
    );
    assert_eq!(stats.traces, 1000);
    assert!(stats.used() <= 2 * real, "{stats:?} vs real {real}");
    assert!(
        stats.mapped() <= 2 * real + chunk,
        "{stats:?} vs real {real}"
    );
    drop(traces);
    let after = jit.memory_stats();
    assert_eq!((after.used(), after.traces), (0, 0));

    // Freed space is reused: the same again maps nothing new.
    let mapped = after.mapped();
    let again: Vec<_> = (0..1000)
        .map(|_| {
            let mut t = jit.trace();
            let shim = t.push_shim().unwrap();
            t.push_named("op_load_got", &[3], &[]).unwrap();
            t.push_named("op_return", &[], &[]).unwrap();
            (t.finish().unwrap(), shim)
        })
        .collect();
    assert_eq!(jit.memory_stats().mapped(), mapped);
    for (trace, shim) in &again {
        assert_eq!(run(trace, *shim, &mut Frame::default()), 3);
    }
}

#[test]
fn a_trace_larger_than_a_chunk_gets_its_own() {
    let options = cpjit_runtime::JitOptions {
        chunk_bytes: 4096,
        ..Default::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_load_got", &[0], &[]).unwrap();
    for _ in 0..2000 {
        t.push_named("op_add_got", &[1, 2], &[]).unwrap();
    }
    t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert!(trace.code_range().len() > 4096);
    assert_eq!(run(&trace, shim, &mut Frame::default()), 6000);
}
