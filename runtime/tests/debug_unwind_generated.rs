//! Unwinding through stitched code of the host's *generated* set, with the frame layouts
//! the toolchain derived from the compiler's unwind tables (the set's `FRAMES`): a
//! backtrace taken in a helper called from a trace of the testing ops reaches the Rust
//! frames that entered it (and does not without the registration), and a panic unwinds
//! through it to `catch_unwind` with the caller's callee-saved registers intact.
//!
//! Linux: `.eh_frame` layouts registered with `__register_frame` (x86-64 natively, AArch64
//! and RISC-V under qemu). Windows x64: `.pdata`/`.xdata` layouts re-encoded as
//! `UNWIND_INFO` and registered with `RtlAddFunctionTable` (the Windows x64 matrix row:
//! an x86_64-pc-windows-gnu process under wine). Sets without layouts (Mach-O, ARM64 COFF)
//! cannot finish a trace with unwinding on.
#![cfg(any(
    all(
        target_os = "linux",
        any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "riscv64"
        )
    ),
    all(windows, target_arch = "x86_64")
))]

use cpjit_model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Trace};

type UnwindingEntry = unsafe extern "C-unwind" fn(*mut std::ffi::c_void, *mut u64) -> i64;

extern "C" fn capturing_mul_add(a: i64, b: i64, c: i64) -> i64 {
    crate::common::capture_backtrace();
    a * b + c
}

extern "C-unwind" fn panicking_mul_add(_a: i64, _b: i64, _c: i64) -> i64 {
    panic!("generated-set helper panics inside JIT code");
}

/// The host's generated set (the one the toolchain built for this kind of process).
fn generated() -> &'static StencilSet<'static> {
    cpjit_stencils::native().expect("a generated set for this host")
}

fn generated_jit(
    set: &'static StencilSet<'static>,
    helper: usize,
    unwind: bool,
) -> Result<Jit<'static>, cpjit_runtime::Error> {
    let frames = cpjit_stencils::frames(set).expect("FRAMES of a generated set");
    let options = JitOptions {
        unwind: unwind.then_some(frames),
        ..JitOptions::default()
    };
    Jit::with_options(
        set,
        move |name| (name == "cpjit_test_mul_add").then_some(helper as u64),
        options,
    )
}

/// shim; push 6; push 7; push 8; op_test_helper (6 * 7 + 8); op_test_exit.
fn generated_trace(jit: &Jit<'_>) -> Result<Trace, cpjit_runtime::Error> {
    let mut t = jit.trace();
    t.push_shim()?;
    for v in [6, 7, 8] {
        t.push_named("op_test_push", &[v], &[])?;
    }
    t.push_named("op_test_helper", &[], &[])?;
    t.push_named("op_test_exit", &[], &[])?;
    t.finish()
}

#[inline(never)]
fn generated_test_enter(trace: &Trace) -> i64 {
    let mut frame = [0u64; 4];
    let mut stack = [0u64; 16];
    // SAFETY: the shim is a C function; the helpers it may reach unwind ("C-unwind").
    let entry: UnwindingEntry =
        unsafe { std::mem::transmute(trace.entry_fn(InstanceId::from_index(0)).unwrap()) };
    // SAFETY: the trace starts with the shim and is built from the host's generated ops.
    let r = unsafe { entry(frame.as_mut_ptr().cast(), stack.as_mut_ptr()) };
    std::hint::black_box(r)
}

#[test]
fn generated_frames_let_a_backtrace_walk_through_a_trace_to_its_caller() {
    let _serial = crate::common::unwind_serial();
    let set = generated();
    let callers = [
        "generated_test_enter",
        "generated_frames_let_a_backtrace_walk_through_a_trace_to_its_caller",
    ];
    for unwind in [true, false] {
        let jit = generated_jit(set, capturing_mul_add as *const () as usize, unwind).unwrap();
        let trace = generated_trace(&jit).unwrap();
        assert_eq!(generated_test_enter(&trace), 50);
        let helper = "capturing_mul_add";
        crate::common::assert_backtrace_reaches(helper, &callers, unwind, set.target);
    }
}

#[test]
fn generated_frames_let_a_panic_unwind_through_a_trace() {
    let _serial = crate::common::unwind_serial();
    let set = generated();
    let jit = generated_jit(set, panicking_mul_add as *const () as usize, true).unwrap();
    let trace = generated_trace(&jit).unwrap();
    let message = "generated-set helper panics inside JIT code";
    crate::common::assert_panic_unwinds(|| generated_test_enter(&trace), message);
    drop(trace);
    // The same JIT still stitches and runs after the unwind.
    let jit = generated_jit(set, capturing_mul_add as *const () as usize, true).unwrap();
    assert_eq!(generated_test_enter(&generated_trace(&jit).unwrap()), 50);
}

/// Whether the toolchain reads `set`'s unwind tables: ELF `.eh_frame`, x64 COFF
/// `.pdata`/`.xdata`.
fn has_unwind_tables(set: &StencilSet<'_>) -> bool {
    use cpjit_model::{Arch, ObjectFormat};
    set.format == ObjectFormat::Elf
        || (set.format == ObjectFormat::Coff && set.arch == Arch::X86_64)
}

/// Every stencil of every linked ELF and x64 COFF set (this architecture's: each in the
/// matrix's runtime run of its architecture) has a derived layout; the Mach-O and ARM64
/// COFF sets say why they have none.
#[test]
fn every_stencil_with_unwind_tables_has_a_derived_frame_layout() {
    use cpjit_runtime::debug::unwind::FrameLayout;
    for set in cpjit_stencils::all() {
        let frames = cpjit_stencils::frames(set).unwrap();
        assert_eq!(frames.len(), set.stencils.len(), "{}", set.target);
        for (f, s) in frames.iter().zip(set.stencils) {
            assert_eq!(f.stencil, s.name);
            match (has_unwind_tables(set), f.layout) {
                (true, FrameLayout::Functions(fs)) => {
                    assert!(
                        s.code.is_empty() || !fs.is_empty(),
                        "{}: {}",
                        set.target,
                        s.name
                    )
                }
                (true, FrameLayout::Unknown(why)) => panic!("{}: {}: {why}", set.target, s.name),
                (false, FrameLayout::Unknown(why)) => assert!(why.contains(set.target), "{why}"),
                (false, FrameLayout::Functions(_)) => panic!("{}: unexpected layout", set.target),
            }
        }
    }
}

/// A set whose layouts are unknown may have unwinding on, but a trace using it cannot
/// finish: the error names the stencil and why.
#[test]
fn a_trace_of_stencils_without_layouts_is_refused_naming_the_stencil() {
    let Some(set) = cpjit_stencils::runnable().find(|s| !has_unwind_tables(s)) else {
        return; // no set without layouts runs in this process
    };
    let jit = generated_jit(set, capturing_mul_add as *const () as usize, true).unwrap();
    let e = generated_trace(&jit).expect_err("refused").to_string();
    assert!(
        e.contains("cpjit_entry") && e.contains("no unwind information"),
        "{e}"
    );
}
