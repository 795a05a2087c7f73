//! `JitOptions::code_writes`: with `CodeWrites::PersistentAlias` (Linux) traces are written
//! through a read-write alias of the code object instead of a `pwrite` per trace; they must
//! run exactly as with the default, the alias must never be executable, and freed code must
//! be replaced (a reused block runs its new code). Elsewhere the option is refused.

use crate::common;
use common::{resolve, SET};
use cpjit_runtime::{CodeWrites, Jit, JitOptions};

fn alias_options(chunk_bytes: usize) -> JitOptions {
    JitOptions {
        chunk_bytes,
        code_writes: CodeWrites::PersistentAlias,
        ..JitOptions::default()
    }
}

#[test]
fn the_default_writes_code_transiently() {
    assert_eq!(JitOptions::default().code_writes, CodeWrites::Transient);
}

#[cfg(not(target_os = "linux"))]
#[test]
fn a_persistent_alias_is_refused_off_linux_naming_the_option_and_the_os() {
    let Err(e) = Jit::with_options(SET, resolve, alias_options(1 << 20)) else {
        panic!(
            "a persistent alias was accepted on {}",
            std::env::consts::OS
        );
    };
    assert!(
        matches!(e, cpjit_runtime::Error::Unsupported { .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("CodeWrites::PersistentAlias") && text.contains(std::env::consts::OS),
        "{text}"
    );
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use common::{run, Frame};
    use cpjit_runtime::{InstanceId, Target};

    /// Held by every test here that creates aliased code: `views` reads the whole process's
    /// mappings, so one test's "no view outlives its Jit" would otherwise see another's
    /// live Jit when the test harness runs them on parallel threads.
    static ALIASED_JITS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Permissions of every mapping whose name contains `name`, and whether any mapping of
    /// the process is writable and executable at once.
    fn views(name: &str) -> (Vec<String>, bool) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut perms = Vec::new();
        let mut wx = false;
        for line in maps.lines() {
            let p = line.split_whitespace().nth(1).unwrap();
            wx |= p.contains('w') && p.contains('x');
            if line.contains(name) {
                perms.push(p.to_string());
            }
        }
        (perms, wx)
    }

    /// A trace returning `value + 1` (through a GOT load, instance data and a helper-free
    /// add) and whose loop runs `frame.counter` times.
    fn build(jit: &Jit<'_>, value: u64) -> (cpjit_runtime::Trace, InstanceId) {
        let mut t = jit.trace();
        let shim = t.push_shim().unwrap();
        t.push_named("op_load_got", &[value], &[]).unwrap();
        let body = t.push_named("op_add_got", &[0, 1], &[]).unwrap();
        t.push_named("op_dec_jump_nz", &[], &[Target::Instance(body)])
            .unwrap();
        t.push_named("op_return", &[], &[]).unwrap();
        (t.finish().unwrap(), shim)
    }

    fn run_once(trace: &cpjit_runtime::Trace, shim: InstanceId) -> u64 {
        let mut frame = Frame {
            counter: 1,
            ..Frame::default()
        };
        run(trace, shim, &mut frame) as u64
    }

    #[test]
    fn aliased_traces_run_and_the_alias_is_never_executable() {
        let _only_aliased_jit = ALIASED_JITS.lock().unwrap_or_else(|e| e.into_inner());
        let jit = Jit::with_options(SET, resolve, alias_options(4096)).unwrap();
        let mut kept = Vec::new();
        for i in 0..150u64 {
            let (trace, shim) = build(&jit, i * 7);
            assert_eq!(run_once(&trace, shim), i * 7 + 1);
            kept.push((trace, shim, i * 7));
        }
        assert!(jit.memory_stats().chunks > 1, "{:?}", jit.memory_stats());
        let (perms, wx) = views("memfd:cpjit-aliased-code");
        assert!(!wx, "a mapping is writable and executable: {perms:?}");
        assert!(
            perms.iter().any(|p| p.starts_with("r-x"))
                && perms.iter().any(|p| p.starts_with("rw-")),
            "expected the RX view and the RW alias of the code: {perms:?}"
        );
        assert!(
            perms.iter().all(|p| !(p.contains('w') && p.contains('x'))),
            "{perms:?}"
        );
        // Free every other trace, then build new ones into the freed blocks: each must run
        // its own new code (freed code is overwritten with traps through the alias).
        let mut survivors = Vec::new();
        for (n, entry) in kept.into_iter().enumerate() {
            if n % 2 == 0 {
                survivors.push(entry);
            }
        }
        for i in 0..75u64 {
            let value = 1_000_000 + i;
            let (trace, shim) = build(&jit, value);
            assert_eq!(run_once(&trace, shim), value + 1);
            survivors.push((trace, shim, value));
        }
        for (trace, shim, value) in &survivors {
            assert_eq!(run_once(trace, *shim), value + 1, "a kept trace changed");
        }
        drop(survivors);
        drop(jit);
        let (perms, _) = views("memfd:cpjit-aliased-code");
        assert!(perms.is_empty(), "views outlive the Jit: {perms:?}");
    }

    #[test]
    fn aliased_batches_and_threads_stitch_the_same_code_as_the_default() {
        let _only_aliased_jit = ALIASED_JITS.lock().unwrap_or_else(|e| e.into_inner());
        let aliased = Jit::with_options(SET, resolve, alias_options(1 << 16)).unwrap();
        let without_keys = JitOptions {
            code_writes: CodeWrites::WithoutKeys,
            ..JitOptions::default()
        };
        let plain = Jit::with_options(SET, resolve, without_keys).unwrap();
        // Batches: one write for all their traces, with or without the alias.
        for jit in [&aliased, &plain] {
            let mut batch = jit.batch();
            for i in 0..30u64 {
                let t = batch.trace();
                t.push_shim().unwrap();
                t.push_named("op_load_got", &[i], &[]).unwrap();
                t.push_named("op_add_got", &[i, 1], &[]).unwrap();
                t.push_named("op_return", &[], &[]).unwrap();
            }
            for (i, trace) in batch.finish().unwrap().iter().enumerate() {
                let shim = InstanceId::from_index(0);
                assert_eq!(
                    run(trace, shim, &mut Frame::default()) as u64,
                    2 * i as u64 + 1
                );
            }
        }
        // Without keys no writable view of the code object is kept (with keys the
        // default keeps a keyed one: `wx.rs`).
        let (perms, _) = views("memfd:cpjit-code");
        assert!(perms.iter().all(|p| !p.contains('w')), "{perms:?}");
        // Threads stitching at once into one aliased arena (disjoint blocks, no buffer).
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let jit = &aliased;
                scope.spawn(move || {
                    for i in 0..100u64 {
                        let value = thread * 1_000_000 + i;
                        let (trace, shim) = build(jit, value);
                        assert_eq!(run_once(&trace, shim), value + 1);
                    }
                });
            }
        });
    }
}

/// `JitOptions::trap_freed_code`: on by default, a freed trace's code is overwritten with
/// one trapping byte; off, the bytes stay as they were (until the next trace takes them).
#[test]
fn freed_code_is_trapped_unless_the_option_is_off() {
    assert!(JitOptions::default().trap_freed_code);
    for trap in [true, false] {
        let options = JitOptions {
            trap_freed_code: trap,
            ..JitOptions::default()
        };
        let jit = Jit::with_options(SET, resolve, options).unwrap();
        let mut t = jit.trace();
        t.push_shim().unwrap();
        t.push_named("op_return", &[], &[]).unwrap();
        let trace = t.finish().unwrap();
        let (code, range) = (trace.code_bytes().to_vec(), trace.code_range());
        drop(trace);
        // SAFETY: the freed block's chunk stays mapped (readable, executable) while the Jit
        // lives: the default `idle_chunk_bytes` keeps one idle chunk, and nothing is
        // stitched after the drop.
        let after = unsafe { std::slice::from_raw_parts(range.start as *const u8, range.len()) };
        if trap {
            assert!(
                after != code.as_slice() && after.iter().all(|&b| b == after[0]),
                "the freed code was not trapped: {after:02x?} (was {code:02x?})"
            );
        } else {
            assert_eq!(
                after,
                code.as_slice(),
                "the freed code changed with the option off"
            );
        }
    }
}
