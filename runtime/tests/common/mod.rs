//! Shared by the runtime's integration tests: the hand-written stencil set for the host
//! (bytes assembled by llvm-mc-19, see `tests/stencils/gen.py`), the helpers its stencils
//! call, and a way to run a trace.
#![allow(dead_code)]

#[cfg(target_arch = "x86_64")]
#[path = "stencils_x86_64.rs"]
mod stencils;
#[cfg(target_arch = "aarch64")]
#[path = "stencils_aarch64.rs"]
mod stencils;
#[cfg(target_arch = "riscv64")]
#[path = "stencils_riscv64.rs"]
mod stencils;

use cpjit_runtime::model::{Hole, HoleKind, HoleValue, Section, Stencil, StencilSet};
use cpjit_runtime::{InstanceId, Jit, Trace};

pub static SET: &StencilSet<'static> = &stencils::SET;

/// What every hand-written stencil shares, so that the generated files name only what sets
/// each one apart: code aligned for its architecture's instructions (`code_align`), 8-byte
/// data, no zero fill nor cold part, and until told otherwise no holes and a fall-through end.
pub const fn hand_written(code_align: u32) -> Stencil<'static> {
    Stencil {
        code_align,
        data_align: 8,
        ..Stencil::EMPTY
    }
}

/// A hole of a hand-written stencil, as one short call in the generated files.
pub const fn hole(
    section: Section,
    offset: u32,
    kind: HoleKind,
    value: HoleValue,
    addend: i64,
) -> Hole {
    Hole {
        section,
        offset,
        kind,
        value,
        addend,
    }
}

/// The frame the test ops work on (through x20 / r12 / s2).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    pub acc: i64,
    pub counter: i64,
    pub data: i64,
    pub helper_calls: i64,
    pub nonzero: i64,
}

/// Called by `op_call_helper` and `op_call_got`: counts the call, returns 1000.
pub extern "C" fn cpjit_test_helper(frame: *mut Frame) -> i64 {
    // SAFETY: the ops pass the frame pointer they were entered with.
    unsafe { (*frame).helper_calls += 1 };
    1000
}

/// Reached by `op_exit_to` with a tail jump: the trace returns twice the accumulator.
pub extern "C" fn cpjit_test_exit(frame: *mut Frame) -> i64 {
    // SAFETY: as above.
    unsafe { (*frame).acc * 2 }
}

pub fn resolve(name: &str) -> Option<u64> {
    match name {
        "cpjit_test_helper" => Some(cpjit_test_helper as *const () as usize as u64),
        _ => None,
    }
}

pub fn exit_address() -> u64 {
    cpjit_test_exit as *const () as usize as u64
}

/// A trace of the test set's ops: the shim, each (op, operands) of `ops` (none with a jump
/// target), then `op_return`; with the shim's instance, to [`run`] it through.
pub fn returning_trace(jit: &Jit<'_>, ops: &[(&str, &[u64])]) -> (Trace, InstanceId) {
    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    for (op, operands) in ops {
        t.push_named(op, operands, &[])
            .unwrap_or_else(|e| panic!("{op}: {e}"));
    }
    t.push_named("op_return", &[], &[]).unwrap();
    (t.finish().unwrap(), shim)
}

/// Calls the trace through its shim instance.
pub fn run(trace: &Trace, shim: InstanceId, frame: &mut Frame) -> i64 {
    let mut stack = [0u64; 8];
    // SAFETY: every test trace starts with the shim and is built from the host's ops.
    unsafe { trace.entry_fn(shim).unwrap()(frame as *mut Frame as *mut _, stack.as_mut_ptr()) }
}

/// The backtrace a helper took last ([`capture_backtrace`]), for the unwind tests: they
/// hold [`unwind_serial`] while a trace runs and they read it.
static CAPTURED: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Serializes the unwind tests (of the hand-written and the generated sets) around
/// [`CAPTURED`].
pub fn unwind_serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Called by a helper of a trace: keeps this thread's backtrace for [`take_backtrace`].
pub fn capture_backtrace() {
    *CAPTURED.lock().unwrap() = std::backtrace::Backtrace::force_capture().to_string();
}

/// The backtrace the last [`capture_backtrace`] kept (it is then forgotten).
pub fn take_backtrace() -> String {
    std::mem::take(&mut *CAPTURED.lock().unwrap())
}

/// Takes the backtrace a helper called from a trace kept: it shows `helper`, and it reaches
/// all of `callers` (the Rust frames that entered the trace) exactly when `unwind` info was
/// registered; `what` names the case.
pub fn assert_backtrace_reaches(helper: &str, callers: &[&str], unwind: bool, what: &str) {
    let bt = take_backtrace();
    assert!(bt.contains(helper), "{what}: {bt}");
    let through = callers.iter().all(|c| bt.contains(c));
    assert_eq!(
        through,
        unwind,
        "{what}, unwind info {}: the backtrace should {}reach the trace's caller:\n{bt}",
        if unwind { "registered" } else { "absent" },
        if unwind { "" } else { "not " }
    );
}

/// Calls `enter` (a trace whose helper panics with `message`) under `catch_unwind`: the
/// panic must reach it, with the values the compiler keeps in callee-saved registers across
/// the call intact (the unwinder restores the ones the trace's frames saved).
pub fn assert_panic_unwinds(enter: impl FnOnce() -> i64, message: &str) {
    let live: [u64; 6] = std::hint::black_box([11, 22, 33, 44, 55, 66]);
    let (a, b, c, d, e, f) = (live[0], live[1], live[2], live[3], live[4], live[5]);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(enter));
    let panicked = caught.expect_err("the helper panicked");
    assert_eq!(panicked.downcast_ref::<&str>(), Some(&message));
    assert_eq!(
        std::hint::black_box([a, b, c, d, e, f]),
        [11, 22, 33, 44, 55, 66]
    );
}

/// Runs `body` in a child process, this test binary run again for test `name` (its path
/// as the test harness lists it) with `CPJIT_TEST_CHILD` set: for tests that change or
/// measure the whole process (resource limits, descriptors, mappings), which other tests
/// running in threads of this one would disturb. Panics with the child's output unless
/// it succeeds and prints `child: done`. (Not under an emulator: the binary is run
/// directly.)
#[cfg(unix)]
pub fn in_child(name: &str, body: fn()) {
    const CHILD: &str = "CPJIT_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        body();
        println!("child: done");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("child: done"),
        "the child process failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}
