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

/// The process's open descriptors and mappings, and of those the JIT's: its code objects
/// (`memfd:cpjit-code`) and their mappings (Linux `/proc`). Thread stacks and per-thread
/// malloc arenas that the C library keeps after a burst of threads are the process's, not
/// the JIT's, so the JIT is judged by its own.
#[cfg(target_os = "linux")]
#[derive(Clone, Copy, Debug)]
struct Usage {
    fds: usize,
    maps: usize,
    jit_fds: usize,
    jit_maps: usize,
}

#[cfg(target_os = "linux")]
fn usage() -> Usage {
    let jit = |text: &str| text.contains("memfd:cpjit-code");
    let links: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    Usage {
        fds: links.len(),
        maps: maps.lines().count(),
        jit_fds: links.iter().filter(|l| jit(l)).count(),
        jit_maps: maps.lines().filter(|l| jit(l)).count(),
    }
}

/// A burst of traces from 8 threads, then idleness, while the `Jit` lives: memory handed
/// back (issue 42). `CPJIT_BURST_SECONDS` (default 60) of building, running and dropping
/// traces of 4 to 400 instances, up to 1,024 alive per thread; then `CPJIT_IDLE_SECONDS`
/// (default 10) with none. Prints the descriptors, mappings and arena figures at the
/// baseline (the `Jit` made, one trace built and dropped), at the burst's peak and after
/// the idle time, for `JitOptions::idle_chunk_bytes` from `CPJIT_IDLE_CHUNK_BYTES`
/// (default: the default, 8 MiB); asserts that every trace was freed and that the JIT's
/// code objects and mappings are back within 10 % of the baseline plus the chunks the idle
/// limit keeps.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "a 70-second measurement, run by hand"]
fn burst_then_idle_hands_memory_back() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let defaults = JitOptions::default();
    let options = JitOptions {
        idle_chunk_bytes: env("CPJIT_IDLE_CHUNK_BYTES", defaults.idle_chunk_bytes as u64) as usize,
        ..defaults
    };
    let (chunk_bytes, idle_chunk_bytes) = (options.chunk_bytes, options.idle_chunk_bytes);
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let build = |instances: u64, value: u64| {
        let mut t = jit.trace();
        let shim = t.push_shim().unwrap();
        t.push_named("op_load_got", &[value], &[]).unwrap();
        for _ in 0..instances {
            t.push_named("op_add_got", &[1, 1], &[]).unwrap();
        }
        t.push_named("op_return", &[], &[]).unwrap();
        (t.finish().unwrap(), shim)
    };
    drop(build(4, 0));
    let baseline = usage();
    let report = |when: &str, u: Usage| {
        let s = jit.memory_stats();
        println!(
            "{when}: {} fds ({} the JIT's code objects), {} mappings ({} of its code); \
             arena: {} traces, {} chunks",
            u.fds, u.jit_fds, u.maps, u.jit_maps, s.traces, s.chunks
        );
    };
    report("baseline", baseline);
    let burst = Duration::from_secs(env("CPJIT_BURST_SECONDS", 60));
    let built = AtomicUsize::new(0);
    let peak = std::sync::Mutex::new(baseline);
    let end = Instant::now() + burst;
    std::thread::scope(|scope| {
        for thread in 0..8u64 {
            let (build, built, peak) = (&build, &built, &peak);
            scope.spawn(move || {
                let mut alive = std::collections::VecDeque::new();
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ thread;
                let mut i = 0u64;
                while Instant::now() < end {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let instances = 4 + state % 397;
                    let value = thread * 1_000_000 + i;
                    let (trace, shim) = build(instances, value);
                    let mut frame = Frame::default();
                    assert_eq!(run(&trace, shim, &mut frame) as u64, value + 2 * instances);
                    alive.push_back(trace);
                    if alive.len() > 1024 {
                        alive.pop_front();
                    }
                    built.fetch_add(1, Ordering::Relaxed);
                    if i % 256 == 0 {
                        let now = usage();
                        let mut peak = peak.lock().unwrap();
                        if now.jit_maps > peak.jit_maps {
                            *peak = now;
                        }
                    }
                    i += 1;
                }
            });
        }
    });
    println!(
        "burst: {} traces in {} s from 8 threads",
        built.load(Ordering::Relaxed),
        burst.as_secs()
    );
    let peak = *peak.lock().unwrap();
    report("burst peak (sampled)", peak);
    std::thread::sleep(Duration::from_secs(env("CPJIT_IDLE_SECONDS", 10)));
    let after = usage();
    report("after idle", after);
    assert_eq!(jit.memory_stats().traces, 0);
    // What the idle limit may keep: its chunks, each one code object and its mappings (as
    // many as the baseline's chunk has).
    let kept = idle_chunk_bytes / chunk_bytes;
    let per_chunk = baseline.jit_maps.max(1);
    let bound = |base: usize, each: usize| base + base / 10 + each * kept;
    assert!(
        after.jit_fds <= bound(baseline.jit_fds, 1)
            && after.jit_maps <= bound(baseline.jit_maps, per_chunk),
        "after idle {after:?}, baseline {baseline:?}, up to {kept} idle chunks kept"
    );
}
