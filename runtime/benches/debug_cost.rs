//! What each debugging/profiling option costs when stitching, measured rather than
//! asserted: ns per stencil instance for `push` + `finish` of a 100-instance trace of the
//! host's generated set (its testing ops; unwinding with the set's derived `FRAMES`), with
//! every option off, then each one on (and all on).
//! Modes alternate within each round (off, perf map, jitdump, gdb, listing, unwind, all, …) so
//! that a change of machine load moves all of them; the report gives median (min–max).
//!
//! `cargo bench -p cpjit-runtime --bench debug_cost [-- ROUNDS]` (the perf map and jitdump
//! are files of this process: `/tmp/perf-<pid>.map`, `$TMPDIR/jit-<pid>.dump`, both removed
//! at the end). GDB is not attached, so `gdb` measures building and linking each trace's
//! ELF object, not GDB reading it. Linux, and x86-64 Windows (under wine: `cargo bench
//! --target x86_64-pc-windows-gnu ...`), where the options the platform refuses (perf map,
//! jitdump) are reported as skipped.

use cpjit_runtime::debug::perf;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target, Trace};
use std::time::Instant;

const INSTANCES: usize = 100;
const BATCH: usize = 200;

extern "C" fn mul_add(a: i64, b: i64, c: i64) -> i64 {
    a.wrapping_mul(b).wrapping_add(c)
}

fn resolve(name: &str) -> Option<u64> {
    (name == "cpjit_test_mul_add").then_some(mul_add as *const () as usize as u64)
}

fn build(jit: &Jit<'_>) -> Trace {
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_test_push2", &[1, 2], &[]).unwrap();
    for i in 2..INSTANCES - 1 {
        match i % 3 {
            0 => t.push_named("op_test_push", &[i as u64], &[]),
            1 => t.push_named("op_test_helper", &[], &[]),
            _ => t.push_named(
                "op_test_dec_jump_nz",
                &[],
                &[Target::Instance(InstanceId::from_index(1))],
            ),
        }
        .unwrap();
    }
    t.push_named("op_test_exit", &[], &[]).unwrap();
    t.finish().unwrap()
}

fn main() {
    #[cfg(not(any(target_os = "linux", all(windows, target_arch = "x86_64"))))]
    return;
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(15);
    let off = JitOptions::default();
    let set = cpjit_stencils::native().expect("a generated set for this host");
    let frames = cpjit_stencils::frames(set);
    let modes: [(&str, JitOptions); 7] = [
        ("off", off),
        (
            "perf_map",
            JitOptions {
                perf_map: true,
                ..off
            },
        ),
        (
            "jitdump",
            JitOptions {
                jitdump: true,
                ..off
            },
        ),
        ("gdb", JitOptions { gdb: true, ..off }),
        (
            "listing",
            JitOptions {
                listing: true,
                ..off
            },
        ),
        (
            "unwind",
            JitOptions {
                unwind: frames,
                ..off
            },
        ),
        (
            "all",
            JitOptions {
                perf_map: true,
                jitdump: true,
                gdb: true,
                listing: true,
                unwind: frames,
                ..off
            },
        ),
    ];
    let mut jits: Vec<Jit<'_>> = Vec::new();
    let modes: Vec<(&str, JitOptions)> = modes
        .into_iter()
        .filter(|(name, o)| match Jit::with_options(set, resolve, *o) {
            Ok(jit) => {
                jits.push(jit);
                true
            }
            Err(e) if !cfg!(target_os = "linux") => {
                println!("  skipped {name}: {e}");
                false
            }
            Err(e) => panic!("{name}: {e}"),
        })
        .collect();
    let mut samples = vec![Vec::new(); modes.len()];
    for round in 0..=rounds {
        for (m, jit) in jits.iter().enumerate() {
            let mut keep = Vec::with_capacity(BATCH);
            let t0 = Instant::now();
            for _ in 0..BATCH {
                keep.push(build(jit));
            }
            let ns = t0.elapsed().as_nanos() as f64 / (BATCH * INSTANCES) as f64;
            drop(keep);
            if round > 0 {
                samples[m].push(ns); // round 0 warms the arenas and files
            }
        }
    }
    println!(
        "{} ({}), {INSTANCES}-instance traces, {BATCH} per sample, {rounds} alternating rounds; ns per instance: median (min–max)",
        set.target,
        std::env::consts::ARCH
    );
    for ((name, _), xs) in modes.iter().zip(&mut samples) {
        xs.sort_by(|a, b| a.total_cmp(b));
        println!(
            "  {name:9} {:7.1} ({:.1}–{:.1})",
            xs[xs.len() / 2],
            xs[0],
            xs[xs.len() - 1]
        );
    }
    let _ = std::fs::remove_file(perf::perf_map_path());
    let _ = std::fs::remove_file(perf::jitdump_path());
}
