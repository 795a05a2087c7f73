//! Stitching speed, measured rather than asserted: nanoseconds per stencil instance for
//! `push` + `finish` of straight traces (10, 100, 1,000 and 10,000 instances) with a warm
//! arena, next to a plain `memcpy` of the same number of code bytes timed in the same
//! rounds. Modes alternate run by run (stitch, memcpy, stitch, memcpy …) so that a change of
//! machine load moves both; the report gives median and min–max per mode and the median
//! ratio of the pairs. Stitching is timed on the wall clock and on the thread's CPU clock
//! (Unix), which does not count the time the thread waits for a core on a loaded machine.
//! Traces are dropped after the clocks stop.
//!
//! `cargo bench -p cpjit-runtime --bench stitch [-- ROUNDS [INSTANCES] [--batch] [--alias]]`
//! (one size only when `INSTANCES` is given, e.g. under `valgrind --tool=callgrind`;
//! `--batch` stitches each round's traces as batches of 100 through `Jit::batch`, like the
//! peer bench's batch rows, so that a profile shows what a trace of a batch costs; `--alias`
//! writes code through a persistent alias, `CodeWrites::PersistentAlias`, Linux only;
//! `--batch --one-batch` times one batch per round, each after the previous round's traces
//! were dropped, as the peer bench's batch rows do; `--cold` writes 64 MiB before each
//! timed round, so that it starts with the stitcher's code and tables out of the caches,
//! as after the peer bench's Cranelift runs).
//!
//! On x86_64 Linux it stitches the generated stencil set's test ops
//! (`templates/testing/holes.c`) in the bench's own `straight` recipe (`bench/src/
//! workload.rs`), so that figures compare with `cargo xtask bench --only stitch`; elsewhere
//! the runtime's hand-written test stencils.

#[path = "../tests/common/mod.rs"]
mod common;

use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{CodeWrites, InstanceId, Jit, JitOptions, Target, Trace};
use std::hint::black_box;
use std::time::Instant;

/// One pushed instance: stencil index, operands, jump targets (instance indices).
struct Step {
    stencil: usize,
    operands: Vec<u64>,
    targets: Vec<Target>,
}

/// The workload: a stencil set, its symbols and a recipe for a straight trace of `n`.
struct Workload {
    set: &'static StencilSet<'static>,
    resolve: fn(&str) -> Option<u64>,
    straight: fn(&StencilSet<'_>, usize) -> Vec<Step>,
}

fn step(set: &StencilSet<'_>, name: &str, operands: &[u64], targets: &[usize]) -> Step {
    Step {
        stencil: set
            .index_of(name)
            .unwrap_or_else(|| panic!("no stencil {name}")),
        operands: operands.to_vec(),
        targets: targets
            .iter()
            .map(|&t| Target::Instance(InstanceId::from_index(t)))
            .collect(),
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod workload {
    use super::*;

    extern "C" fn cpjit_test_mul_add(a: i64, b: i64, c: i64) -> i64 {
        a.wrapping_mul(b).wrapping_add(c)
    }

    fn resolve(name: &str) -> Option<u64> {
        (name == "cpjit_test_mul_add").then_some(cpjit_test_mul_add as *const () as u64)
    }

    /// `bench/src/workload.rs::straight`, as stencil indices.
    fn straight(set: &StencilSet<'_>, n: usize) -> Vec<Step> {
        let mut v = vec![
            step(set, "cpjit_entry", &[], &[]),
            step(set, "op_test_push", &[0], &[]),
        ];
        let mut k = 0u64;
        while v.len() < n - 1 {
            let room = n - 1 - v.len();
            let at = v.len();
            let group = match k % 3 {
                0 => vec![
                    step(set, "op_test_push2", &[k, k + 1], &[]),
                    step(set, "op_test_add", &[], &[]),
                    step(set, "op_test_table", &[], &[]),
                    step(set, "op_test_counter", &[], &[]),
                    step(set, "op_test_pop", &[], &[]),
                ],
                1 => vec![
                    step(set, "op_test_push2", &[2, 3], &[]),
                    step(set, "op_test_push", &[k], &[]),
                    step(set, "op_test_helper", &[], &[]),
                    step(set, "op_test_addr_addend", &[], &[]),
                    step(set, "op_test_add", &[], &[]),
                    step(set, "op_test_pop", &[], &[]),
                ],
                _ => vec![
                    step(set, "op_test_push", &[2], &[]),
                    step(set, "op_test_dec_jump_nz", &[], &[at + 2]),
                    step(set, "op_test_pop", &[], &[]),
                ],
            };
            if group.len() <= room {
                v.extend(group);
            } else {
                v.extend((0..room).map(|i| step(set, "op_test_push", &[i as u64], &[])));
            }
            k += 1;
        }
        v.push(step(set, "op_test_exit", &[], &[]));
        v
    }

    pub(super) fn get() -> Workload {
        Workload {
            set: cpjit_stencils::native().expect("a stencil set for this host"),
            resolve,
            straight,
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod workload {
    use super::*;

    /// GOT operands, a helper call, data and a loop branch, from the hand-written set.
    fn straight(set: &StencilSet<'_>, n: usize) -> Vec<Step> {
        let mut v = vec![
            step(set, "cpjit_entry", &[], &[]),
            step(set, "op_load_got", &[1], &[]),
        ];
        while v.len() < n - 1 {
            let i = v.len() as u64;
            v.push(match i % 4 {
                0 => step(set, "op_add_got", &[i, i + 1], &[]),
                1 => step(set, "op_call_helper", &[], &[]),
                2 => step(set, "op_data_counter", &[], &[]),
                _ => step(set, "op_dec_jump_nz", &[], &[1]),
            });
        }
        v.push(step(set, "op_return", &[], &[]));
        v
    }

    pub(super) fn get() -> Workload {
        Workload {
            set: common::SET,
            resolve: common::resolve,
            straight,
        }
    }
}

/// `push` + `finish` of one trace; never inlined, so that a profile (callgrind) shows its
/// inclusive cost.
#[inline(never)]
fn stitch(jit: &Jit<'_>, steps: &[Step]) -> Trace {
    let mut t = jit.trace();
    for s in steps {
        t.push(s.stencil, &s.operands, &s.targets).unwrap();
    }
    t.finish().unwrap()
}

/// `count` traces as one batch (`Jit::batch`); never inlined, like [`stitch`].
#[inline(never)]
fn stitch_batch(jit: &Jit<'_>, steps: &[Step], count: usize) -> Vec<Trace> {
    let mut batch = jit.batch();
    for _ in 0..count {
        let t = batch.trace();
        for s in steps {
            t.push(s.stencil, &s.operands, &s.targets).unwrap();
        }
    }
    batch.finish().unwrap()
}

/// Bytes written before each timed round in `--cold` mode: more than the caches hold.
const COLD_BYTES: usize = 64 << 20;

/// Traces per batch in `--batch` mode (the peer bench's batch rows use 100 too).
const BATCH_TRACES: usize = 100;

/// Copies each instance's stencil code back to back: the copy step alone.
fn copy_pieces(pieces: &[&[u8]], out: &mut [u8]) {
    let mut at = 0;
    for p in pieces {
        out[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
}

/// CPU time this thread has used, in ns (`CLOCK_THREAD_CPUTIME_ID`; NaN where not known).
fn thread_cpu_ns() -> f64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid clock id and a timespec to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
    }
    #[cfg(not(unix))]
    {
        f64::NAN
    }
}

/// Median, min and max of `xs` (sorted in place).
fn summary(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(|a, b| a.total_cmp(b));
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

fn main() {
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = numbers.first().copied().unwrap_or(21);
    let batched = std::env::args().any(|a| a == "--batch");
    let alias = std::env::args().any(|a| a == "--alias");
    let one_batch = batched && std::env::args().any(|a| a == "--one-batch");
    let cold = std::env::args().any(|a| a == "--cold");
    let sizes: Vec<usize> = match numbers.get(1) {
        Some(&n) => vec![n],
        None => vec![10, 100, 1_000, 10_000],
    };
    let w = workload::get();
    let options = JitOptions {
        code_writes: if alias {
            CodeWrites::PersistentAlias
        } else {
            CodeWrites::Transient
        },
        ..JitOptions::default()
    };
    let jit = Jit::with_options(w.set, w.resolve, options).unwrap();
    println!(
        "{} stencils of {}; {rounds} alternating rounds{}{}; ns per instance: median (min–max)",
        w.set.stencils.len(),
        w.set.target,
        if alias {
            ", code written through a persistent alias"
        } else {
            ""
        },
        if batched {
            format!(", traces stitched in batches of {BATCH_TRACES}")
        } else {
            String::new()
        }
    );
    for n in sizes {
        let steps = (w.straight)(w.set, n);
        let code_bytes = stitch(&jit, &steps).code_bytes().len();
        // About 2 ms of work per timed batch.
        let mut batch = (200_000 / n).clamp(1, 2_000);
        if batched {
            batch = batch.next_multiple_of(BATCH_TRACES);
        }
        if one_batch {
            batch = BATCH_TRACES;
        }
        let mut keep: Vec<Trace> = Vec::with_capacity(batch);
        let source = vec![0x90u8; code_bytes];
        let mut sink = vec![0u8; code_bytes];
        for _ in 0..batch.min(50) {
            keep.push(stitch(&jit, &steps));
        }
        keep.clear();
        let pieces: Vec<&[u8]> = steps
            .iter()
            .map(|s| w.set.stencils[s.stencil].code)
            .collect();
        let (mut stitch_ns, mut copy_ns, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        let (mut pieces_ns, mut cpu_ns) = (Vec::new(), Vec::new());
        let mut thrash_buffer = vec![0u8; if cold { COLD_BYTES } else { 0 }];
        for round in 0..rounds {
            if cold {
                // Evicts the stitcher's code and tables from the caches, as a peer compiler
                // run between two timed batches does.
                thrash_buffer.fill(round as u8);
                black_box(&mut thrash_buffer);
            }
            let cpu = thread_cpu_ns();
            let start = Instant::now();
            if batched {
                for _ in 0..batch / BATCH_TRACES {
                    keep.extend(stitch_batch(&jit, &steps, BATCH_TRACES));
                }
            } else {
                for _ in 0..batch {
                    keep.push(stitch(&jit, &steps));
                }
            }
            let s = start.elapsed().as_nanos() as f64 / (batch * n) as f64;
            cpu_ns.push((thread_cpu_ns() - cpu) / (batch * n) as f64);
            keep.clear();
            let start = Instant::now();
            for _ in 0..batch {
                sink.copy_from_slice(black_box(&source));
                black_box(&mut sink);
            }
            let c = start.elapsed().as_nanos() as f64 / (batch * n) as f64;
            let start = Instant::now();
            for _ in 0..batch {
                copy_pieces(black_box(&pieces), &mut sink);
                black_box(&mut sink);
            }
            pieces_ns.push(start.elapsed().as_nanos() as f64 / (batch * n) as f64);
            stitch_ns.push(s);
            copy_ns.push(c);
            ratio.push(s / c);
        }
        let (s, s_lo, s_hi) = summary(&mut stitch_ns);
        let (c, c_lo, c_hi) = summary(&mut copy_ns);
        let (p, p_lo, p_hi) = summary(&mut pieces_ns);
        let (r, _, _) = summary(&mut ratio);
        let (u, u_lo, u_hi) = summary(&mut cpu_ns);
        println!(
            "{n:>6} instances ({code_bytes:>6} B code): stitch {s:6.1} ({s_lo:.1}–{s_hi:.1}), \
             thread CPU {u:6.1} ({u_lo:.1}–{u_hi:.1}), \
             one memcpy {c:5.2} ({c_lo:.2}–{c_hi:.2}), stitch/memcpy {r:5.1}×, \
             memcpy per instance {p:5.2} ({p_lo:.2}–{p_hi:.2})"
        );
    }
    println!("arena after the run: {:?}", jit.memory_stats());
}
