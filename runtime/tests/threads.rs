//! One `Jit` shared by several threads that build, run and drop traces at the same time.

use crate::common;
use common::{resolve, run, Frame, SET};
use cpjit_runtime::{Jit, JitOptions, Target};

#[test]
fn threads_build_run_and_free_traces_concurrently() {
    // Small chunks so that the threads also race on growing the arena.
    let options = JitOptions {
        chunk_bytes: 4096,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let jit = &jit;
            scope.spawn(move || {
                let mut kept = Vec::new();
                for i in 0..200u64 {
                    let value = thread * 1_000_000 + i;
                    let mut t = jit.trace();
                    let shim = t.push_shim().unwrap();
                    t.push_named("op_load_got", &[value], &[]).unwrap();
                    let body = t.push_named("op_add_got", &[1, 1], &[]).unwrap();
                    t.push_named("op_dec_jump_nz", &[], &[Target::Instance(body)])
                        .unwrap();
                    t.push_named("op_call_helper", &[], &[]).unwrap();
                    t.push_named("op_return", &[], &[]).unwrap();
                    let trace = t.finish().unwrap();
                    let mut frame = Frame {
                        counter: 3,
                        ..Frame::default()
                    };
                    assert_eq!(run(&trace, shim, &mut frame) as u64, value + 6 + 1000);
                    // Keep some traces alive so that others are freed around them.
                    if i % 3 == 0 {
                        kept.push((trace, shim, value));
                    }
                }
                for (trace, shim, value) in &kept {
                    let mut frame = Frame {
                        counter: 1,
                        ..Frame::default()
                    };
                    assert_eq!(run(trace, *shim, &mut frame) as u64, value + 2 + 1000);
                }
            });
        }
    });
    assert_eq!(jit.memory_stats().traces, 0);
}

#[test]
fn jit_and_trace_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Jit<'static>>();
    check::<cpjit_runtime::Trace>();
}
