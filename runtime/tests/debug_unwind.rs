//! Unwinding through stitched code (Linux, x86-64 natively and AArch64 under qemu): with `JitOptions::unwind`, a backtrace
//! taken in a helper called from a trace reaches the Rust frames that entered the trace,
//! and a panic in such a helper unwinds through the trace to `catch_unwind` with the
//! caller's callee-saved registers intact. Without it, the backtrace stops in the trace.
//! These tests use the hand-written test set, whose frame layouts are checked against
//! llvm-mc-19's decoding; `debug_unwind_generated.rs` does the same with a generated set.
#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

use crate::common;
use crate::debug_frames;
use common::{Frame, SET};
use cpjit_runtime::{InstanceId, Jit, JitOptions, Trace};
use debug_frames::frame_of;

extern "C" fn capturing_helper(frame: *mut Frame) -> i64 {
    common::capture_backtrace();
    // SAFETY: the ops pass the frame they were entered with.
    unsafe { (*frame).helper_calls += 1 };
    1000
}

extern "C-unwind" fn panicking_helper(_frame: *mut Frame) -> i64 {
    panic!("helper panics inside JIT code");
}

fn jit(helper: usize, unwind: bool) -> Jit<'static> {
    let options = JitOptions {
        unwind: unwind.then(debug_frames::frames),
        ..JitOptions::default()
    };
    Jit::with_options(
        SET,
        move |name| (name == "cpjit_test_helper").then_some(helper as u64),
        options,
    )
    .unwrap()
}

fn helper_trace(jit: &Jit<'_>, op: &str) -> Trace {
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_got", &[5], &[]).unwrap();
    t.push_named(op, &[], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    t.finish().unwrap()
}

type UnwindingEntry = unsafe extern "C-unwind" fn(*mut std::ffi::c_void, *mut u64) -> i64;

#[inline(never)]
fn unwind_test_enter(trace: &Trace) -> i64 {
    let mut frame = Frame::default();
    let mut stack = [0u64; 8];
    // SAFETY: the shim is a C function; the helpers it may reach unwind ("C-unwind").
    let entry: UnwindingEntry =
        unsafe { std::mem::transmute(trace.entry_fn(InstanceId::from_index(0)).unwrap()) };
    // SAFETY: the trace starts with the shim and is built from the host's ops.
    let r = unsafe { entry(&mut frame as *mut Frame as *mut _, stack.as_mut_ptr()) };
    std::hint::black_box(r)
}

#[test]
fn a_backtrace_in_a_helper_walks_through_the_trace_to_its_caller() {
    let _serial = common::unwind_serial();
    let callers = [
        "unwind_test_enter",
        "a_backtrace_in_a_helper_walks_through_the_trace_to_its_caller",
    ];
    for op in ["op_call_helper", "op_call_got"] {
        for unwind in [true, false] {
            let jit = jit(capturing_helper as *const () as usize, unwind);
            let trace = helper_trace(&jit, op);
            assert_eq!(unwind_test_enter(&trace), 1005);
            common::assert_backtrace_reaches("capturing_helper", &callers, unwind, op);
        }
    }
}

#[test]
fn a_panic_in_a_helper_unwinds_through_the_trace_to_catch_unwind() {
    let _serial = common::unwind_serial();
    let jit = jit(panicking_helper as *const () as usize, true);
    let trace = helper_trace(&jit, "op_call_helper");
    common::assert_panic_unwinds(
        || unwind_test_enter(&trace),
        "helper panics inside JIT code",
    );
    // The JIT still works after the unwind.
    drop(trace);
    let jit = self::jit(capturing_helper as *const () as usize, true);
    assert_eq!(
        unwind_test_enter(&helper_trace(&jit, "op_call_helper")),
        1005
    );
}

/// Depth after each instruction, from llvm-mc's decoding: the frame layouts above are
/// what the stencils' bytes do.
#[test]
fn frame_layouts_match_the_stencils_instructions() {
    for s in SET.stencils {
        let hex: Vec<String> = s.code.iter().map(|b| format!("0x{b:02x}")).collect();
        let out = std::process::Command::new("llvm-mc-19")
            .args(["--disassemble", "--show-encoding", "--print-imm-hex"])
            .args(if cfg!(target_arch = "x86_64") {
                ["-triple=x86_64", "--output-asm-variant=1"]
            } else {
                ["-triple=aarch64", "--output-asm-variant=0"]
            })
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(hex.join(" ").as_bytes())?;
                c.wait_with_output()
            })
            .expect("llvm-mc-19 is installed");
        let text = String::from_utf8(out.stdout).unwrap();
        let (mut at, mut depth) = (0u32, 0u32);
        let mut steps = Vec::new();
        for line in text.lines().filter(|l| l.contains("encoding:")) {
            let (asm, enc) = line.split_once("encoding: [").unwrap();
            let asm = asm.trim_end().trim_end_matches(['#', '/']);
            let len = enc.split(']').next().unwrap().split(',').count() as u32;
            let words: Vec<&str> = asm
                .split([' ', '\t', ','])
                .filter(|w| !w.is_empty())
                .collect();
            let new_depth = match words.as_slice() {
                // x86-64
                ["push", _] => depth + 8,
                ["pop", _] => depth - 8,
                ["sub", "rsp", n] => depth + parse(n),
                ["add", "rsp", n] => depth - parse(n),
                [_, "rsp", ..] => panic!("{}: unmodelled stack-pointer write `{asm}`", s.name),
                // AArch64: pre-indexed stores and post-indexed loads on sp
                ["stp" | "str", .., "[sp", n] if n.ends_with("]!") => {
                    depth + parse(&n[1..n.len() - 2].replace('-', ""))
                }
                ["ldp" | "ldr", .., "[sp]", n] => depth - parse(&n[1..]),
                ["sub", "sp", "sp", n] => depth + parse(&n[1..]),
                ["add", "sp", "sp", n] => depth - parse(&n[1..]),
                [_, "sp", ..] => panic!("{}: unmodelled stack-pointer write `{asm}`", s.name),
                _ => depth,
            };
            at += len;
            if new_depth != depth {
                steps.push((at, new_depth));
                depth = new_depth;
            }
        }
        assert_eq!(at as usize, s.code.len(), "{}: decoded every byte", s.name);
        let frame = frame_of(s.name);
        let declared: Vec<(u32, u32)> =
            frame.steps.iter().map(|st| (st.offset, st.depth)).collect();
        assert_eq!(declared, steps, "{}", s.name);
    }
}

fn parse(n: &str) -> u32 {
    match n.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).unwrap(),
        None => n.parse().unwrap(),
    }
}

#[test]
fn bad_frame_layouts_are_refused_naming_the_stencil() {
    use cpjit_runtime::debug::unwind::{FrameFunction, FrameLayout, FrameRow, StencilFrame};
    let try_frames = |frames: &'static [StencilFrame<'static>]| {
        let options = JitOptions {
            unwind: Some(frames),
            ..JitOptions::default()
        };
        Jit::with_options(SET, common::resolve, options)
            .expect_err("refused")
            .to_string()
    };
    let good = debug_frames::frames();
    // A stencil without a layout.
    let missing: Vec<StencilFrame<'static>> = good
        .iter()
        .filter(|f| f.stencil != "op_return")
        .copied()
        .collect();
    let e = try_frames(missing.leak());
    assert!(
        e.contains("op_return") && e.contains("no frame layout"),
        "{e}"
    );
    // A function past the stencil's code, and a first row that is not at its start.
    let row = |offset| FrameRow {
        offset,
        cfa_register: 7,
        cfa_offset: 8,
    };
    for (function, what) in [
        (
            FrameFunction {
                start: 0,
                end: 0x1000,
                rows: Vec::leak(vec![row(0)]),
                saves: &[],
            },
            "inside the",
        ),
        (
            FrameFunction {
                start: 0,
                end: 1,
                rows: Vec::leak(vec![row(1)]),
                saves: &[],
            },
            "first row",
        ),
    ] {
        let functions: &'static [FrameFunction<'static>] = Vec::leak(vec![function]);
        let bad: Vec<StencilFrame<'static>> = good
            .iter()
            .map(|f| match f.stencil {
                "op_load_got" => StencilFrame {
                    layout: FrameLayout::Functions(functions),
                    ..*f
                },
                _ => *f,
            })
            .collect();
        let e = try_frames(bad.leak());
        assert!(e.contains("op_load_got") && e.contains(what), "{e}");
    }
}

#[test]
fn unwind_registrations_from_several_threads_come_and_go() {
    let _serial = common::unwind_serial();
    let jit = jit(capturing_helper as *const () as usize, true);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    let t = helper_trace(&jit, "op_call_got");
                    drop(t);
                }
            });
        }
    });
    // After 400 registrations and deregistrations (whose code ranges were reused), a
    // backtrace through a fresh trace still finds its frames and its caller.
    let trace = helper_trace(&jit, "op_call_helper");
    assert_eq!(unwind_test_enter(&trace), 1005);
    let bt = common::take_backtrace();
    assert!(bt.contains("unwind_test_enter"), "{bt}");
}
