//! Traces too large for the memory the process may use are errors, never aborts: under an
//! address-space limit (`RLIMIT_AS`, as `ulimit -v` sets), a trace's code is staged in
//! bounded windows (no heap copy of the whole trace), and what the builder cannot grow is
//! [`Error::AllocationFailed`]. The limit is set in a child process (this test binary run
//! again for this one test), so that it does not constrain the other tests.

use crate::common::{resolve, SET};
use cpjit_runtime::model::{Stencil, StencilSet};
use cpjit_runtime::{CodeWrites, Error, InstanceId, Jit, JitOptions, Target};
/// 64 KiB of nops (x86-64).
static PAD: [u8; 64 << 10] = [0x90; 64 << 10];

/// The test set's `op_return`, a 64 KiB stencil of nops, a 1-byte one and the test set's
/// `op_dec_jump_nz` (one jump target).
fn set() -> &'static StencilSet<'static> {
    let ret = SET.stencils[SET.index_of("op_return").unwrap()];
    let pad = Stencil {
        name: "pad",
        code: &PAD,
        falls_through: true,
        cold_len: 0,
        ..ret
    };
    let nop = Stencil {
        name: "nop",
        code: &PAD[..1],
        falls_through: true,
        cold_len: 0,
        ..ret
    };
    let jump = SET.stencils[SET.index_of("op_dec_jump_nz").unwrap()];
    let stencils = Box::leak(vec![ret, pad, nop, jump].into_boxed_slice());
    Box::leak(Box::new(StencilSet {
        stencils,
        shim: None,
        ..*SET
    }))
}

/// This process's address space (`VmSize`), in bytes.
fn address_space() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

fn limit_address_space(bytes: usize) {
    let limit = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit; it only constrains this (child) process.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

/// Code of the large trace: more than the headroom leaves for a second copy of it.
const LARGE: usize = 256 << 20;
/// Address space allowed past what the child has mapped when it sets the limit.
const HEADROOM: usize = LARGE + (64 << 20);

fn child() {
    let set = set();
    let options = JitOptions {
        reserve_bytes: 8 << 30,
        // The staged windows are what is tested (with keys, code is written in place
        // through a keyed alias, whose reservation would double the address space used).
        code_writes: CodeWrites::WithoutKeys,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(set, resolve, options).unwrap();
    limit_address_space(address_space() + HEADROOM);

    // A 256 MiB trace is finished (its code staged in 1 MiB windows), and freed.
    let mut t = jit.trace();
    for _ in 0..LARGE / PAD.len() {
        t.push(1, &[], &[]).unwrap();
    }
    t.push(0, &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert!(trace.code_range().len() > LARGE);
    drop(trace);
    // Its chunk, idle and larger than `JitOptions::idle_chunk_bytes`, was returned.
    assert_eq!(jit.memory_stats().reserved(), 0);
    println!("child: a {LARGE}-byte trace was finished");

    // One twice as large does not fit: an error naming the sizes.
    let mut t = jit.trace();
    for _ in 0..2 * LARGE / PAD.len() {
        t.push(1, &[], &[]).unwrap();
    }
    t.push(0, &[], &[]).unwrap();
    let e = t.finish().unwrap_err();
    println!("child: a trace twice as large: {e}");
    assert!(
        matches!(e, Error::Map(_) | Error::OutOfMemory { .. }),
        "{e:?}"
    );

    // Pushing until the builder's records or targets cannot grow: an error, and nothing
    // recorded (the instances pushed before are all there is).
    let mut t = jit.trace();
    let target = [Target::Instance(InstanceId::from_index(0))];
    let mut pushed = 0;
    let e = loop {
        match t.push(3, &[], &target) {
            Ok(id) => {
                assert_eq!(id.index(), pushed);
                pushed += 1;
                assert!(pushed < 1 << 30, "the limit never stopped the pushes");
            }
            Err(e) => break e,
        }
    };
    println!("child: after {pushed} pushes: {e}");
    assert_eq!(t.len(), pushed);
    let text = e.to_string();
    let Error::AllocationFailed { what, bytes } = e else {
        panic!("{e:?}")
    };
    assert!(
        ["the trace's instance records", "the trace's jump targets"].contains(&what),
        "{what}"
    );
    assert!(bytes > pushed * 16, "{bytes} bytes for {pushed} records");
    assert!(text.contains(&format!("allocating {bytes} bytes for {what} failed")));
}

#[test]
fn traces_too_large_for_the_address_space_are_errors_not_aborts() {
    crate::common::in_child(
        "memory_limits::traces_too_large_for_the_address_space_are_errors_not_aborts",
        child,
    );
}
