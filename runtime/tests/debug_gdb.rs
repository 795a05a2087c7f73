//! The GDB JIT interface, checked by GDB itself: this test binary re-runs itself under
//! `gdb -batch` with a breakpoint in a helper that a trace calls, and the backtrace must
//! name the calling instance's stencil. Also: registration and unregistration keep GDB's
//! list exact when traces are built and dropped on several threads.
// GDB runs the test binary natively: x86-64 only (AArch64 test binaries run under qemu).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use crate::common;
#[cfg(target_arch = "x86_64")]
use crate::debug_frames;
use common::{Frame, SET};
use cpjit_runtime::debug::gdb;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Trace};
use std::process::Command;

/// The helper the trace calls; GDB stops here.
///
/// # Safety
/// `frame` must point to a live [`Frame`].
#[no_mangle]
#[inline(never)]
pub unsafe extern "C" fn cpjit_debug_test_helper(frame: *mut Frame) -> i64 {
    // SAFETY: the ops pass the frame they were entered with.
    unsafe { (*frame).helper_calls += 1 };
    std::hint::black_box(1000)
}

fn resolve(name: &str) -> Option<u64> {
    (name == "cpjit_test_helper").then_some(cpjit_debug_test_helper as *const () as usize as u64)
}

/// GDB registration, with unwind information where the runtime has it (x86-64).
fn with_gdb() -> JitOptions {
    JitOptions {
        gdb: true,
        #[cfg(target_arch = "x86_64")]
        unwind: Some(debug_frames::frames()),
        ..JitOptions::default()
    }
}

fn helper_trace(jit: &Jit<'_>) -> Trace {
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_got", &[5], &[]).unwrap();
    t.push_named("op_call_helper", &[], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    t.finish().unwrap()
}

/// The Rust frame that enters the trace; the backtrace should reach it.
#[no_mangle]
#[inline(never)]
pub extern "C" fn cpjit_debug_test_enter(trace: &Trace) -> i64 {
    let mut frame = Frame::default();
    let mut stack = [0u64; 8];
    // SAFETY: the trace starts with the shim and is built from the host's ops.
    let r = unsafe {
        trace.entry_fn(InstanceId::from_index(0)).unwrap()(
            &mut frame as *mut Frame as *mut _,
            stack.as_mut_ptr(),
        )
    };
    std::hint::black_box(r)
}

/// What runs under GDB (only when the parent test asks for it).
#[test]
fn child_under_gdb() {
    if std::env::var_os("CPJIT_GDB_CHILD").is_none() {
        return;
    }
    let jit = Jit::with_options(SET, resolve, with_gdb()).unwrap();
    let trace = helper_trace(&jit);
    assert_eq!(cpjit_debug_test_enter(&trace), 1005);
    drop(trace);
    // Stops GDB a second time, after the trace was unregistered.
    let mut frame = Frame::default();
    // SAFETY: a live frame.
    unsafe { cpjit_debug_test_helper(&mut frame) };
}

/// The libtest name of `child_under_gdb`: its module path without the test crate's name
/// (`debug_gdb::child_under_gdb` in the runtime's one test binary).
fn child_test_name() -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::child_under_gdb"),
        None => "child_under_gdb".to_string(),
    }
}

fn gdb_session(commands: &[&str]) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut gdb = Command::new("gdb");
    gdb.args(["-batch", "-nx"]);
    for c in commands {
        gdb.args(["-ex", c]);
    }
    gdb.arg("--args")
        .arg(&exe)
        .args([
            "--exact",
            &child_test_name(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CPJIT_GDB_CHILD", "1");
    let out = gdb
        .output()
        .expect("gdb must be installed (ci/setup.sh installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn gdb_backtrace_names_the_stencil_of_the_calling_instance() {
    let out = gdb_session(&[
        "break cpjit_debug_test_helper",
        "run",
        "bt 8",
        "up",
        "info symbol $pc",
        "echo ---- after drop\\n",
        "continue",
        "info functions ^trace[0-9]+:",
        "continue",
    ]);
    let bt: Vec<&str> = out.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        bt.first()
            .is_some_and(|l| l.contains("cpjit_debug_test_helper")),
        "gdb did not stop in the helper:\n{out}"
    );
    let caller = bt.get(1).copied().unwrap_or_default();
    assert!(
        caller.contains("trace") && caller.contains(":op_call_helper"),
        "frame #1 should be the op_call_helper instance:\n{out}"
    );
    if cfg!(target_arch = "x86_64") {
        // With the trace's .eh_frame in its object, GDB walks on: the shim, then the Rust
        // function that entered the trace and the test that called it.
        let shim = bt.get(2).copied().unwrap_or_default();
        assert!(
            shim.contains(":cpjit_entry ()"),
            "frame #2 should be the shim:\n{out}"
        );
        let caller = bt.get(3).copied().unwrap_or_default();
        assert!(
            caller.contains("cpjit_debug_test_enter"),
            "frame #3 should be the Rust caller:\n{out}"
        );
        assert!(bt.iter().any(|l| l.contains("child_under_gdb")), "{out}");
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("trace") && l.contains(":op_call_helper + ")),
        "`info symbol` should place the return address inside the instance:\n{out}"
    );
    let (_, after_drop) = out.split_once("---- after drop").expect("second stop");
    assert!(
        !after_drop
            .lines()
            .any(|l| l.starts_with("0x") && l.contains(":op_call_helper")),
        "the dropped trace's symbols should be gone from gdb:\n{out}"
    );
    // The child's own "test result" line can be split by gdb's thread messages (both write
    // to the same terminal); its exit status cannot.
    assert!(
        out.contains("exited normally]"),
        "the child test failed:\n{out}"
    );
}

#[test]
fn dropping_traces_unregisters_them_on_every_thread() {
    let jit = Jit::with_options(SET, resolve, with_gdb()).unwrap();
    // The only test of this binary that registers traces in its own process.
    assert_eq!(gdb::registered_objects(), 0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let kept = helper_trace(&jit);
                for _ in 0..50 {
                    let t = helper_trace(&jit);
                    assert!((2..=8).contains(&gdb::registered_objects()));
                    drop(t);
                    assert_eq!(cpjit_debug_test_enter(&kept), 1005);
                }
            });
        }
    });
    assert_eq!(gdb::registered_objects(), 0, "every trace unlinked itself");
}
