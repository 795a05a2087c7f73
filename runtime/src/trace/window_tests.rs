//! Unit tests of code written in windows (Linux, x86-64): a trace longer than
//! [`STAGE_BYTES`] is staged and written window by window, and its bytes are exactly those
//! the same trace gets written whole (through a persistent alias); the thread's staging
//! buffer stays bounded and does not keep a large trace's size.

use crate::memory::{staged_capacity, STAGE_BYTES};
use crate::program::{host_set, X86_RET};
use crate::{CodeWrites, InstanceId, Jit, JitOptions, Target, Trace};
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Section, Stencil, StencilSet};

/// 4,093 bytes of nops: with a 16-byte code alignment, every instance is padded.
static PAD: [u8; 4093] = [0x90; 4093];

const fn hole(offset: u32, kind: HoleKind, value: HoleValue) -> Hole {
    Hole {
        section: Section::Code,
        offset,
        kind,
        value,
        addend: -4,
    }
}

static CALL_HOLES: [Hole; 1] = [hole(1, HoleKind::X86Branch32, HoleValue::Symbol(0))];
static JUMP_HOLES: [Hole; 1] = [hole(1, HoleKind::X86Branch32, HoleValue::Target(0))];
static DATA_HOLES: [Hole; 1] = [hole(3, HoleKind::X86RexGotPc32Relaxable, HoleValue::Data)];
static OPERAND_HOLES: [Hole; 1] = [hole(
    3,
    HoleKind::X86RexGotPc32Relaxable,
    HoleValue::Operand(0),
)];
/// `mov rax, [rip + G(x)]`
const GOT_LOAD: &[u8] = &[0x48, 0x8b, 0x05, 0, 0, 0, 0];
/// Hot: `test rdi, rdi; je cold+0; lea rax, [rdi + rdi]`; cold: `mov rdi, 21; call far;
/// jmp code+9`.
#[rustfmt::skip]
const GUARD: &[u8] = &[
    0x48, 0x85, 0xff, 0x0f, 0x84, 0, 0, 0, 0, 0x48, 0x8d, 0x04, 0x3f,
    0x48, 0xc7, 0xc7, 0x15, 0, 0, 0, 0xe8, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0,
];
static GUARD_HOLES: [Hole; 3] = [
    hole(5, HoleKind::X86Branch32, HoleValue::Cold),
    hole(21, HoleKind::X86Branch32, HoleValue::Symbol(0)),
    Hole {
        addend: 9 - 4,
        ..hole(26, HoleKind::X86Branch32, HoleValue::Code)
    },
];

static STENCILS: [Stencil<'static>; 7] = [
    Stencil {
        name: "pad",
        code: &PAD,
        code_align: 16,
        ..Stencil::EMPTY
    },
    // `call far` (through a veneer: `far` is out of reach).
    Stencil {
        name: "call_far",
        code: &[0xe8, 0, 0, 0, 0],
        holes: &CALL_HOLES,
        symbols: &[0],
        ..Stencil::EMPTY
    },
    // `jmp target`
    Stencil {
        name: "jump",
        code: &[0xe9, 0, 0, 0, 0],
        holes: &JUMP_HOLES,
        targets: &["T"],
        ..Stencil::EMPTY
    },
    Stencil {
        name: "load_data",
        code: GOT_LOAD,
        holes: &DATA_HOLES,
        init_data: &[1, 2, 3, 4, 5, 6, 7, 8],
        data_len: 8,
        data_align: 8,
        ..Stencil::EMPTY
    },
    Stencil {
        name: "load_operand",
        code: GOT_LOAD,
        holes: &OPERAND_HOLES,
        operands: &["A"],
        ..Stencil::EMPTY
    },
    X86_RET,
    // A cold part (after the trace's hot code, across windows) with a far call.
    Stencil {
        name: "guard",
        code: GUARD,
        holes: &GUARD_HOLES,
        symbols: &[0],
        cold_len: (GUARD.len() - 13) as u32,
        ..Stencil::EMPTY
    },
];

static SET: StencilSet<'static> = host_set(Arch::X86_64, &[0x90], &STENCILS, &["far"]);

fn jit(code_writes: CodeWrites) -> Jit<'static> {
    let options = JitOptions {
        code_writes,
        // Freed code is read below: keep idle chunks mapped.
        idle_chunk_bytes: usize::MAX,
        ..JitOptions::default()
    };
    // Out of direct reach of any arena: calls to it need a veneer.
    Jit::with_options(
        &SET,
        |name| (name == "far").then(super::out_of_reach),
        options,
    )
    .unwrap()
}

/// `instances` pads with, now and then, a far call, a jump back or forward (across windows),
/// a load of the instance's data, an operand load (narrow or wide) and a stencil with a
/// cold part; then a return.
fn push_trace(t: &mut crate::TraceBuilder<'_, '_>, instances: usize) {
    for k in 0..instances {
        t.push(0, &[], &[]).unwrap();
        match k % 5 {
            0 => t.push(1, &[], &[]).map(|_| ()),
            1 => {
                let to = InstanceId::from_index((k * 37) % (instances * 2));
                t.push(2, &[], &[Target::Instance(to)]).map(|_| ())
            }
            2 => t.push(3, &[], &[]).map(|_| ()),
            3 => t.push(6, &[], &[]).map(|_| ()),
            _ => t.push(4, &[k as u64 * 0x1_0001_0001], &[]).map(|_| ()),
        }
        .unwrap();
    }
    t.push(5, &[], &[]).unwrap();
}

/// The trace's code, and how far its data is from it (the data references in the code
/// are relative to it: two traces' code is the same only for the same distance).
fn bytes(trace: &Trace) -> (Vec<u8>, usize) {
    let distance = trace.data_range().start - trace.code_range().start;
    (trace.code_bytes().to_vec(), distance)
}

#[test]
fn a_trace_longer_than_a_window_is_written_as_if_whole() {
    let instances = 700;
    let windowed = jit(CodeWrites::WithoutKeys);
    let whole = jit(CodeWrites::PersistentAlias);
    let build = |jit: &Jit<'static>| {
        let mut t = jit.trace();
        push_trace(&mut t, instances);
        t.finish().unwrap()
    };
    let (a, b) = (build(&windowed), build(&whole));
    assert!(
        a.code_range().len() > 2 * STAGE_BYTES,
        "{} bytes: not written in windows",
        a.code_range().len()
    );
    assert_eq!(a.veneers(), 1);
    assert_eq!(a.instance_offsets(), b.instance_offsets());
    assert_eq!((a.veneers(), a.got_slots()), (b.veneers(), b.got_slots()));
    let (code_a, code_b) = (bytes(&a), bytes(&b));
    assert_eq!(code_a.1, code_b.1, "the arenas place data alike");
    for (i, (x, y)) in code_a.0.iter().zip(&code_b.0).enumerate() {
        assert_eq!(x, y, "code byte {i:#x} of {:#x}", code_a.0.len());
    }
    assert_eq!(code_a.0.len(), code_b.0.len());
    // The thread keeps no buffer the size of the trace.
    assert!(
        staged_capacity() <= 2 * STAGE_BYTES,
        "the staging buffer kept {} bytes",
        staged_capacity()
    );
}

/// A batch whose code is longer than a window is written trace by trace, each as if
/// whole; freeing a large trace fills its code with traps, also window by window, and
/// keeps no large buffer either.
#[test]
fn a_batch_longer_than_a_window_is_written_as_if_whole() {
    let windowed = jit(CodeWrites::WithoutKeys);
    let whole = jit(CodeWrites::PersistentAlias);
    let build = |jit: &Jit<'static>| {
        let mut batch = jit.batch();
        for instances in [3, 400, 5, 300] {
            push_trace(batch.trace(), instances);
        }
        batch.finish().unwrap()
    };
    let (a, b) = (build(&windowed), build(&whole));
    for (k, (a, b)) in a.iter().zip(&b).enumerate() {
        assert_eq!(a.instance_offsets(), b.instance_offsets(), "trace {k}");
        assert!(bytes(a) == bytes(b), "trace {k}");
    }
    let first = a[1].code_range();
    assert!(first.len() > STAGE_BYTES);
    drop(a);
    // The freed code is traps again, written window by window.
    // SAFETY: the arena keeps freed code mapped (readable); nothing writes it meanwhile.
    let freed = unsafe { std::slice::from_raw_parts(first.start as *const u8, first.len()) };
    assert!(freed.iter().all(|&b| b == 0xcc));
    assert!(staged_capacity() <= 2 * STAGE_BYTES);
}
