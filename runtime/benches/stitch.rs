//! Stitching speed: nanoseconds per stencil instance for traces of 10, 100 and 1,000
//! instances of the hand-written test stencils, and patches per second. A plain timing
//! loop (no harness): `cargo bench -p cpjit-runtime --bench stitch`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{resolve, SET};
use cpjit_runtime::{Jit, Target};
use std::hint::black_box;
use std::time::Instant;

/// A trace of `n` instances mixing GOT operands, a helper call, data and a loop branch.
fn build(jit: &Jit<'_>, n: usize) -> cpjit_runtime::Trace {
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let top = t.push_named("op_load_got", &[1], &[]).unwrap();
    while t.len() < n - 1 {
        let i = t.len() as u64;
        match i % 4 {
            0 => t.push_named("op_add_got", &[i, i + 1], &[]).unwrap(),
            1 => t.push_named("op_call_helper", &[], &[]).unwrap(),
            2 => t.push_named("op_data_counter", &[], &[]).unwrap(),
            _ => t
                .push_named("op_dec_jump_nz", &[], &[Target::Instance(top)])
                .unwrap(),
        };
    }
    t.push_named("op_return", &[], &[]).unwrap();
    t.finish().unwrap()
}

fn main() {
    let jit = Jit::new(SET, resolve).unwrap();
    for n in [10usize, 100, 1000] {
        let holes: usize = {
            let trace = build(&jit, n);
            // Count holes of the instances actually pushed (same recipe as `build`).
            let _ = black_box(trace.code_bytes().len());
            let mut count = 0;
            for name in ["cpjit_entry", "op_load_got"] {
                count += SET.get(name).unwrap().holes.len();
            }
            for i in 2..n - 1 {
                let name = [
                    "op_add_got",
                    "op_call_helper",
                    "op_data_counter",
                    "op_dec_jump_nz",
                ][i % 4];
                count += SET.get(name).unwrap().holes.len();
            }
            count
        };
        let rounds = (200_000 / n).max(20);
        // Warm up the arena (so that timing excludes mapping the first chunk).
        for _ in 0..10 {
            black_box(build(&jit, n));
        }
        let start = Instant::now();
        for _ in 0..rounds {
            black_box(build(&jit, n));
        }
        let elapsed = start.elapsed().as_nanos() as f64;
        let per_instance = elapsed / (rounds * n) as f64;
        let patches_per_second = (rounds * holes) as f64 / (elapsed / 1e9);
        println!(
            "{n:>5} instances: {per_instance:7.1} ns/instance (push + finish + drop), \
             {:.1} M holes patched/s",
            patches_per_second / 1e6
        );
    }
    let stats = jit.memory_stats();
    println!("arena after the run: {stats:?}");
}
