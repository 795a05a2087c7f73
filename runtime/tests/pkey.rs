//! Per-thread write windows through the public API: a JIT writes with a protection key
//! exactly where the processor and kernel have keys (`pku` and `ospke` in `/proc/cpuinfo`)
//! and nothing turns them off; `CodeWrites::WithoutKeys` and `CPJIT_NO_PROTECTION_KEYS`
//! force the fallback; code stays readable from every thread, older or younger than the
//! JIT, and from signal handlers; the symbol resolver, called during `finish`, runs with
//! the window closed. (The faults of writes outside a window are checked by the unit tests
//! of `memory::pkey_tests`.) The QEMU row whose CPU has keys runs these with
//! `CPJIT_EXPECT_PROTECTION_KEYS=1`, so that a JIT without a key fails there.
#![cfg(target_os = "linux")]

use crate::common;
use common::{resolve, run, Frame, SET};
use cpjit_runtime::{CodeWrites, Jit, JitOptions, Trace};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

/// Whether `/proc/cpuinfo` lists `flag` for the first processor.
fn cpu_has(flag: &str) -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    flags.split_whitespace().any(|f| f == flag)
}

fn set(variable: &str) -> bool {
    std::env::var_os(variable).is_some_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn keys_are_used_exactly_where_the_processor_and_kernel_have_them() {
    let keys = cfg!(target_arch = "x86_64") && cpu_has("pku") && cpu_has("ospke");
    let forced_off = set("CPJIT_NO_PROTECTION_KEYS");
    let jit = Jit::new(SET, resolve).unwrap();
    assert_eq!(
        jit.protection_key().is_some(),
        keys && !forced_off,
        "pku and ospke: {keys}; CPJIT_NO_PROTECTION_KEYS: {forced_off}"
    );
    if set("CPJIT_EXPECT_PROTECTION_KEYS") {
        assert!(
            keys,
            "CPJIT_EXPECT_PROTECTION_KEYS, but the CPU has no pku/ospke"
        );
        assert!(jit.protection_key().is_some(), "keys expected, none used");
    }
    if let Some(key) = jit.protection_key() {
        // One key per process, never 0 (the key of all other memory).
        assert_ne!(key, 0);
        let other = Jit::new(SET, resolve).unwrap();
        assert_eq!(other.protection_key(), Some(key));
    }
    // Whichever the mode, traces run.
    let (trace, shim) = common::returning_trace(&jit, &[("op_load_got", &[41])]);
    assert_eq!(run(&trace, shim, &mut Frame::default()), 41);
}

#[test]
fn the_fallback_is_forced_by_the_option_and_keys_serve_only_transient_writes() {
    for code_writes in [CodeWrites::WithoutKeys, CodeWrites::PersistentAlias] {
        let options = JitOptions {
            code_writes,
            ..JitOptions::default()
        };
        let jit = Jit::with_options(SET, resolve, options).unwrap();
        assert_eq!(jit.protection_key(), None, "{code_writes:?}");
        let (trace, shim) = common::returning_trace(&jit, &[("op_load_got", &[7])]);
        assert_eq!(
            run(&trace, shim, &mut Frame::default()),
            7,
            "{code_writes:?}"
        );
    }
}

/// The code bytes of `trace`, read through its executable addresses.
fn code_bytes(range: std::ops::Range<usize>) -> Vec<u8> {
    // SAFETY: a live trace's code range is mapped readable; nothing writes it now.
    unsafe { std::slice::from_raw_parts(range.start as *const u8, range.len()) }.to_vec()
}

static SIGNAL_READ_FROM: AtomicUsize = AtomicUsize::new(0);
static SIGNAL_READ_SUM: AtomicUsize = AtomicUsize::new(0);
static SIGNAL_READ_LEN: AtomicUsize = AtomicUsize::new(0);

/// Sums the code bytes at `SIGNAL_READ_FROM` (a handler runs with Linux's initial PKRU,
/// which denies every key but 0: the read must not need the JIT's key).
extern "C" fn read_code_in_handler(_: libc::c_int) {
    let (from, len) = (SIGNAL_READ_FROM.load(SeqCst), SIGNAL_READ_LEN.load(SeqCst));
    let mut sum = 0usize;
    for i in 0..len {
        // SAFETY: the trace's code range, mapped readable while the test holds the trace.
        sum += unsafe { std::ptr::read_volatile((from + i) as *const u8) } as usize;
    }
    SIGNAL_READ_SUM.store(sum, SeqCst);
}

#[test]
fn code_stays_readable_from_every_thread_and_from_signal_handlers() {
    // A thread that exists before the JIT (its PKRU predates the key), asked to read later.
    let (ask, asked) = std::sync::mpsc::channel::<std::ops::Range<usize>>();
    let older = std::thread::spawn(move || code_bytes(asked.recv().unwrap()));
    let jit = Jit::new(SET, resolve).unwrap();
    let (trace, shim): (Trace, _) = common::returning_trace(
        &jit,
        &[
            ("op_load_got", &[5]),
            ("op_call_helper", &[]),
            ("op_add_got", &[1, 2]),
        ],
    );
    let range = trace.code_range();
    let bytes = code_bytes(range.clone());
    assert!(bytes.iter().any(|&b| b != 0), "code was written");
    ask.send(range.clone()).unwrap();
    assert_eq!(older.join().unwrap(), bytes, "a thread older than the JIT");
    let younger = {
        let range = range.clone();
        std::thread::spawn(move || code_bytes(range))
    };
    assert_eq!(
        younger.join().unwrap(),
        bytes,
        "a thread younger than the JIT"
    );
    SIGNAL_READ_FROM.store(range.start, SeqCst);
    SIGNAL_READ_LEN.store(range.len(), SeqCst);
    // SAFETY: a handler for SIGUSR2, which nothing else in this test process uses; raise
    // runs it on this thread before it returns.
    unsafe {
        libc::signal(libc::SIGUSR2, read_code_in_handler as *const () as usize);
        assert_eq!(libc::raise(libc::SIGUSR2), 0);
        libc::signal(libc::SIGUSR2, libc::SIG_DFL);
    }
    let sum: usize = bytes.iter().map(|&b| b as usize).sum();
    assert_eq!(SIGNAL_READ_SUM.load(SeqCst), sum, "a signal handler");
    assert_eq!(run(&trace, shim, &mut Frame::default()), 5 + 1000 + 2 + 1);
}

/// This thread's PKRU (x86-64; only read when a key exists, which proves `ospke`).
#[cfg(target_arch = "x86_64")]
fn pkru() -> u32 {
    let value: u32;
    // SAFETY: rdpkru (ecx = 0) reads PKRU into eax and clears edx.
    unsafe {
        std::arch::asm!("rdpkru", in("ecx") 0, out("eax") value, out("edx") _,
            options(nomem, nostack, preserves_flags))
    };
    value
}

#[cfg(not(target_arch = "x86_64"))]
fn pkru() -> u32 {
    unreachable!("no protection keys off x86-64")
}

static KEY: AtomicUsize = AtomicUsize::new(usize::MAX);
static RESOLVED: AtomicBool = AtomicBool::new(false);
static RESOLVER_DENIED: AtomicBool = AtomicBool::new(false);

/// The tests' resolver, which also records whether it ran with writes under the JIT's key
/// denied (either of the key's PKRU bits set), as it must: it is the caller's code.
fn watching_resolver(name: &str) -> Option<u64> {
    let key = KEY.load(SeqCst);
    if key != usize::MAX {
        RESOLVER_DENIED.store((pkru() >> (2 * key)) & 0b11 != 0, SeqCst);
    }
    RESOLVED.store(true, SeqCst);
    resolve(name)
}

#[test]
fn the_resolver_runs_during_finish_with_the_window_closed() {
    let jit = Jit::new(SET, watching_resolver).unwrap();
    if let Some(key) = jit.protection_key() {
        KEY.store(key as usize, SeqCst);
    }
    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_call_helper", &[], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    assert!(
        !RESOLVED.load(SeqCst),
        "symbols are resolved when a trace needs them"
    );
    let trace = t.finish().unwrap();
    assert!(RESOLVED.load(SeqCst), "finish resolved the helper");
    if jit.protection_key().is_some() {
        assert!(
            RESOLVER_DENIED.load(SeqCst),
            "the resolver ran inside an open window"
        );
    }
    assert_eq!(run(&trace, shim, &mut Frame::default()), 1000);
}
