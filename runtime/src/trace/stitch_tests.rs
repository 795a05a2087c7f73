//! Unit tests that need the crate's internals: the icache flush covers exactly the code
//! that was written, veneers included (qemu-user cannot detect a missing flush, so this is
//! observed through the [`FlushIcache`] hook rather than by running code). Also the alignment
//! padding between instances: whole nops, and refused (naming the stencil) where the set's
//! nop does not divide it. And on x86-64 the quick forms of patch programs (`Quick`):
//! they write what the steps write, and leave a value they cannot take to the steps. And
//! the size of a `Trace`, which is moved by value.

use crate::icache::{FlushIcache, Hardware};
use crate::program::host_set;
use crate::{Error, Jit, JitOptions};
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Section, Stencil, StencilSet};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Recorder {
    ranges: Mutex<Vec<(usize, usize)>>,
}

impl FlushIcache for Recorder {
    fn flush(&self, start: usize, len: usize) {
        self.ranges.lock().unwrap().push((start, len));
        Hardware.flush(start, len);
    }
}

#[cfg(target_arch = "x86_64")]
mod host {
    use super::*;
    pub const ARCH: Arch = Arch::X86_64;
    pub const NOP: &[u8] = &[0x90];
    /// Two nops, as one 'nop' of a set whose nop is twice as long.
    pub const NOP2: &[u8] = &[0x90, 0x90];
    /// `call far` (e8 rel32), then falls through.
    pub const CALL: &[u8] = &[0xe8, 0, 0, 0, 0];
    pub const CALL_HOLE: Hole = Hole {
        section: Section::Code,
        offset: 1,
        kind: HoleKind::X86Branch32,
        value: HoleValue::Symbol(0),
        addend: -4,
    };
    /// `nop; nop; ret`
    pub const RET: &[u8] = &[0x90, 0x90, 0xc3];
}

#[cfg(target_arch = "aarch64")]
mod host {
    use super::*;
    pub const ARCH: Arch = Arch::Aarch64;
    pub const NOP: &[u8] = &[0x1f, 0x20, 0x03, 0xd5];
    /// Two nops, as one 'nop' of a set whose nop is twice as long.
    pub const NOP2: &[u8] = &[0x1f, 0x20, 0x03, 0xd5, 0x1f, 0x20, 0x03, 0xd5];
    /// `bl far`
    pub const CALL: &[u8] = &[0x00, 0x00, 0x00, 0x94];
    pub const CALL_HOLE: Hole = Hole {
        section: Section::Code,
        offset: 0,
        kind: HoleKind::Aarch64Branch26,
        value: HoleValue::Symbol(0),
        addend: 0,
    };
    /// `nop; ret`
    pub const RET: &[u8] = &[0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6];
}

#[cfg(target_arch = "riscv64")]
mod host {
    use super::*;
    pub const ARCH: Arch = Arch::Riscv64;
    pub const NOP: &[u8] = &[0x13, 0x00, 0x00, 0x00];
    /// Two nops, as one 'nop' of a set whose nop is twice as long.
    pub const NOP2: &[u8] = &[0x13, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00];
    /// `auipc ra, 0; jalr ra, 0(ra)` (`call far`)
    pub const CALL: &[u8] = &[0x97, 0x00, 0x00, 0x00, 0xe7, 0x80, 0x00, 0x00];
    pub const CALL_HOLE: Hole = Hole {
        section: Section::Code,
        offset: 0,
        kind: HoleKind::RiscvCall,
        value: HoleValue::Symbol(0),
        addend: 0,
    };
    /// `nop; ret`
    pub const RET: &[u8] = &[0x13, 0x00, 0x00, 0x00, 0x67, 0x80, 0x00, 0x00];
}

static HOLES: [Hole; 1] = [host::CALL_HOLE];
static STENCILS: [Stencil<'static>; 2] = [
    Stencil {
        name: "call_far",
        code: host::CALL,
        code_align: 4,
        holes: &HOLES,
        symbols: &[0],
        ..Stencil::EMPTY
    },
    Stencil {
        name: "ret",
        code: host::RET,
        code_align: 4,
        falls_through: false,
        cold_len: 0,
        ..Stencil::EMPTY
    },
];
static SET: StencilSet<'static> = host_set(host::ARCH, host::NOP, &STENCILS, &["far"]);

fn jit(recorder: &Arc<Recorder>) -> Jit<'static> {
    // Out of direct reach of any arena, so the call needs a veneer.
    let resolve = Box::new(|name: &str| (name == "far").then(super::out_of_reach));
    Jit::with_flusher(&SET, resolve, JitOptions::default(), recorder.clone()).unwrap()
}

#[test]
fn flush_covers_exactly_the_written_code_including_veneers() {
    let recorder = Arc::new(Recorder::default());
    let jit = jit(&recorder);
    assert!(recorder.ranges.lock().unwrap().is_empty());

    let mut t = jit.trace();
    t.push(0, &[], &[]).unwrap();
    t.push(1, &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert_eq!(trace.veneers(), 1);
    let code_len = host::CALL.len().next_multiple_of(4) + host::RET.len(); // call, pad, ret
    let expected_len = code_len.next_multiple_of(16) + crate::patch::veneer_size(host::ARCH);
    assert_eq!(trace.code_range().len(), expected_len);
    assert_eq!(
        *recorder.ranges.lock().unwrap(),
        [(trace.code_range().start, expected_len)]
    );

    // Without a veneer: exactly the instances' bytes, not the rounded-up block.
    let mut t = jit.trace();
    t.push(1, &[], &[]).unwrap();
    t.push(1, &[], &[]).unwrap();
    let plain = t.finish().unwrap();
    let len = (host::RET.len().next_multiple_of(4)) + host::RET.len();
    assert_eq!(plain.code_range().len(), len);
    assert_eq!(
        recorder.ranges.lock().unwrap()[1],
        (plain.code_range().start, len)
    );

    // Freeing writes traps but makes nothing executable: no flush.
    drop(trace);
    drop(plain);
    assert_eq!(recorder.ranges.lock().unwrap().len(), 2);
}

#[test]
fn a_batch_is_flushed_once_over_all_its_traces() {
    let recorder = Arc::new(Recorder::default());
    let jit = jit(&recorder);
    let mut batch = jit.batch();
    for k in 0..5 {
        let t = batch.trace();
        // Traces with and without a veneer, one after another in one block.
        if k % 2 == 0 {
            t.push(0, &[], &[]).unwrap();
        }
        t.push(1, &[], &[]).unwrap();
    }
    let traces = batch.finish().unwrap();
    let ranges = recorder.ranges.lock().unwrap().clone();
    assert_eq!(ranges.len(), 1, "one flush for the batch: {ranges:x?}");
    let (start, len) = ranges[0];
    for (k, t) in traces.iter().enumerate() {
        assert_eq!(t.veneers(), usize::from(k % 2 == 0), "trace {k}");
        let code = t.code_range();
        assert!(
            start <= code.start && code.end <= start + len,
            "trace {k} at {code:x?} is outside the flushed {start:#x}+{len:#x}"
        );
    }
    assert_eq!(start, traces[0].code_range().start);
}

/// A program of one rel32 call to a symbol has the quick form `Quick::Symbol`: once the
/// symbol is resolved (by the first trace, through the steps), a symbol in reach (a
/// function of this binary, which the arena is placed near) is patched by it, and one out
/// of reach goes on to the steps, which route the call through a veneer.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_call_to_a_symbol_is_quick_in_reach_and_gets_a_veneer_out_of_reach() {
    use crate::program::Quick;
    let near =
        a_call_to_a_symbol_is_quick_in_reach_and_gets_a_veneer_out_of_reach as fn() as usize as u64;
    for (address, veneers) in [(near, 0), (super::out_of_reach(), 1)] {
        let jit = Jit::new(&SET, move |_| Some(address)).unwrap();
        assert_eq!(
            jit.programs[0].quick,
            Quick::Symbol {
                offset: 1,
                symbol: 0,
                k: -5
            }
        );
        // The first trace resolves the symbol; the second takes the quick form's test.
        for round in 0..2 {
            let mut t = jit.trace();
            t.push(0, &[], &[]).unwrap();
            t.push(1, &[], &[]).unwrap();
            let trace = t.finish().unwrap();
            assert_eq!(trace.veneers(), veneers, "{address:#x}, trace {round}");
            let at = trace.code_range().start;
            // SAFETY: the trace's code is mapped readable until it is dropped.
            let rel = unsafe { ((at + 1) as *const i32).read_unaligned() };
            let callee = (at as u64 + 5).wrapping_add(rel as i64 as u64);
            if veneers == 0 {
                assert_eq!(callee, address, "trace {round}");
            } else {
                // Into the veneer, after the instances in the trace's code.
                let code = trace.code_range();
                assert!(
                    callee as usize >= at + 8 && code.contains(&(callee as usize)),
                    "trace {round}: {callee:#x} in {code:x?}"
                );
            }
        }
    }
}

/// A trace whose code block lies outside the window of the symbols presumed direct is
/// placed again (`place_again`): its first block goes back to the arena unwritten, the
/// second has room for a veneer to each presumed symbol out of reach, and the arena counts
/// one live trace, nothing once it is dropped. (The presumption is set up by hand: the
/// symbol noted in reach of code beside it, 1 TiB from the arena.)
#[test]
fn a_trace_outside_the_presumed_window_is_placed_again_with_its_veneers() {
    let recorder = Arc::new(Recorder::default());
    let jit = jit(&recorder);
    let far = super::out_of_reach();
    jit.direct.note(0, Some(far), || Some(far..far + 16));
    assert_ne!(jit.direct.presumed(), 0, "symbol 0 presumed direct");
    // The first trace places itself again before the symbol is resolved (its write asks
    // the resolver), the second after.
    for round in 0..2 {
        let mut t = jit.trace();
        t.push(0, &[], &[]).unwrap();
        t.push(1, &[], &[]).unwrap();
        let trace = t.finish().unwrap();
        assert_eq!(trace.veneers(), 1, "trace {round}");
        let stats = jit.memory_stats();
        assert_eq!((stats.traces, stats.chunks), (1, 1), "trace {round}");
        assert!(stats.code_used >= trace.code_range().len(), "trace {round}");
        drop(trace);
        assert_eq!(jit.memory_stats().used(), 0, "trace {round}");
    }
}

#[test]
fn alignment_padding_is_filled_with_nops() {
    let recorder = Arc::new(Recorder::default());
    let jit = jit(&recorder);
    let mut t = jit.trace();
    t.push(0, &[], &[]).unwrap();
    t.push(1, &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    let code = trace.code_bytes();
    let pad = host::CALL.len()..host::CALL.len().next_multiple_of(4);
    assert_eq!(trace.instance_offsets(), [0, pad.end as u32]);
    // The call's bytes before its hole are the stencil's; the padding is whole nops.
    let hole = host::CALL_HOLE.offset as usize;
    assert_eq!(code[..hole], host::CALL[..hole]);
    for chunk in code[pad.clone()].chunks(host::NOP.len()) {
        assert_eq!(chunk, host::NOP, "padding {pad:?} of {code:02x?}");
    }
    assert_eq!(&code[pad.end..pad.end + host::RET.len()], host::RET);
}

/// A set whose nop is two instructions long: one stencil of one instruction, then one
/// aligned to four instructions, leaves three instructions of padding, no whole number of
/// the set's nops.
static ODD_STENCILS: [Stencil<'static>; 2] = [
    Stencil {
        name: "one_nop",
        code: host::NOP,
        ..Stencil::EMPTY
    },
    Stencil {
        name: "aligned_ret",
        code: host::RET,
        code_align: host::NOP.len() as u32 * 4,
        falls_through: false,
        cold_len: 0,
        ..Stencil::EMPTY
    },
];
static ODD_SET: StencilSet<'static> = StencilSet {
    nop: host::NOP2,
    stencils: &ODD_STENCILS,
    symbols: &[],
    ..SET
};

#[test]
fn padding_of_no_whole_number_of_nops_is_refused_naming_the_stencil() {
    let jit = Jit::new(&ODD_SET, |_| None).unwrap();
    for batch in [false, true] {
        let result = if batch {
            let mut b = jit.batch();
            b.trace().push(1, &[], &[]).unwrap();
            let t = b.trace();
            t.push(0, &[], &[]).unwrap();
            t.push(1, &[], &[]).unwrap();
            b.finish().map(|_| ())
        } else {
            let mut t = jit.trace();
            t.push(0, &[], &[]).unwrap();
            t.push(1, &[], &[]).unwrap();
            t.finish().map(|_| ())
        };
        let padding = 3 * host::NOP.len();
        let message = format!(
            "{padding} bytes of alignment padding before it are not a multiple of the {}-byte nop",
            host::NOP2.len()
        );
        let refused = |e: &Error| {
            matches!(e, Error::InvalidStencil { stencil, reason }
                if stencil == "aligned_ret" && *reason == message)
        };
        match result {
            Err(Error::InBatch { trace: 1, source }) if batch && refused(&source) => {}
            Err(e) if !batch && refused(&e) => {}
            other => panic!("batch {batch}: {other:?}"),
        }
    }
}

/// x86-64 stencils whose programs have quick forms ([`Quick`]): two operand loads held in
/// their `imm32` form, two references to the instance's data.
#[cfg(target_arch = "x86_64")]
mod quick {
    use super::*;
    use crate::program::{code_hole as hole, Quick, X86_RET};

    #[rustfmt::skip]
    const IMM2: &[u8] = &[
        0x48, 0x8b, 0x05, 0, 0, 0, 0, // mov rax, [rip + G(A)]
        0x4c, 0x03, 0x2d, 0, 0, 0, 0, // add r13, [rip + G(B)]
    ];
    #[rustfmt::skip]
    const DATA2: &[u8] = &[
        0x48, 0x8d, 0x05, 0, 0, 0, 0, // lea rax, [rip + data]
        0x48, 0x8d, 0x0d, 0, 0, 0, 0, // lea rcx, [rip + data + 4]
    ];
    static IMM2_HOLES: [Hole; 2] = [
        hole(
            3,
            HoleKind::X86RexGotPc32Relaxable,
            HoleValue::Operand(0),
            -4,
        ),
        hole(
            10,
            HoleKind::X86RexGotPc32Relaxable,
            HoleValue::Operand(1),
            -4,
        ),
    ];
    static DATA2_HOLES: [Hole; 2] = [
        hole(3, HoleKind::X86Pc32, HoleValue::Data, -4),
        hole(10, HoleKind::X86Pc32, HoleValue::Data, 0),
    ];
    static STENCILS: [Stencil<'static>; 5] = [
        Stencil {
            name: "imm2",
            code: IMM2,
            holes: &IMM2_HOLES,
            operands: &["A", "B"],
            ..Stencil::EMPTY
        },
        Stencil {
            name: "data2",
            code: DATA2,
            init_data: &[1, 2, 3, 4, 5, 6, 7, 8],
            data_len: 8,
            data_align: 8,
            holes: &DATA2_HOLES,
            ..Stencil::EMPTY
        },
        X86_RET,
        // One step each: the first instruction and hole of the two above.
        Stencil {
            name: "imm1",
            code: IMM2.split_at(7).0,
            holes: IMM2_HOLES.split_at(1).0,
            operands: &["A"],
            ..Stencil::EMPTY
        },
        Stencil {
            name: "data1",
            code: DATA2.split_at(7).0,
            init_data: &[1, 2, 3, 4, 5, 6, 7, 8],
            data_len: 8,
            data_align: 8,
            holes: DATA2_HOLES.split_at(1).0,
            ..Stencil::EMPTY
        },
    ];
    static QUICK_SET: StencilSet<'static> = StencilSet {
        stencils: &STENCILS,
        symbols: &[],
        ..SET
    };

    /// The `imm32` fields and data references the quick forms write are what the steps
    /// write (checked here by decoding them), and an operand that does not fit sends the
    /// whole instance to the steps: a GOT load of the value, the other field as an `imm32`.
    #[test]
    fn quick_forms_write_what_the_steps_write() {
        let jit = Jit::new(&QUICK_SET, |_| None).unwrap();
        let quick: Vec<Quick> = jit.programs.iter().map(|p| p.quick).collect();
        assert_eq!(
            quick,
            [
                Quick::Imm32 {
                    sites: [(3, 0), (10, 1)]
                },
                Quick::DataRel32 {
                    sites: [(3, -7), (10, -10)]
                },
                Quick::Nothing,
                Quick::Imm32 {
                    sites: [(3, 0), (3, 0)]
                },
                Quick::DataRel32 {
                    sites: [(3, -7), (3, -7)]
                },
            ]
        );
        let big = 1u64 << 40;
        let pushes: [(usize, [u64; 2]); 11] = [
            (1, [0; 2]),
            (0, [7, (-5i64) as u64]),
            (0, [big, 9]),
            (4, [0; 2]),
            (1, [0; 2]),
            (3, [(-1i64) as u64, 0]),
            (0, [(1 << 31) - 1, 1 << 31]),
            (3, [1 << 31, 0]),
            (4, [0; 2]),
            (3, [3, 0]),
            (2, [0; 2]),
        ];
        let mut t = jit.trace();
        for (stencil, operands) in pushes {
            let count = jit.set.stencils[stencil].operands.len();
            t.push(stencil, &operands[..count], &[]).unwrap();
        }
        let trace = t.finish().unwrap();
        let code = trace.code_bytes();
        let base = trace.code_range().start as u64;
        let data = trace.data_range().start as u64;
        let field = |at: usize| i32::from_le_bytes(code[at..at + 4].try_into().unwrap());
        // What the instruction at `at` (7 bytes, field at +3) loads: its immediate, or the
        // GOT slot it reads.
        let loaded = |at: usize| -> u64 {
            match code[at..at + 3] {
                [0x48, 0xc7, 0xc0] | [0x49, 0x81, 0xc5] => field(at + 3) as i64 as u64,
                [0x48, 0x8b, 0x05] | [0x4c, 0x03, 0x2d] => {
                    let slot = (base + at as u64 + 7).wrapping_add(field(at + 3) as i64 as u64);
                    // SAFETY: a GOT slot of the live trace, in its data.
                    unsafe { (slot as *const u64).read_unaligned() }
                }
                ref other => panic!("instruction {other:x?} at {at}"),
            }
        };
        let offsets = trace.instance_offsets();
        let mut data_at = 0;
        for (i, (stencil, operands)) in pushes.iter().enumerate() {
            let at = offsets[i] as usize;
            match stencil {
                0 => assert_eq!([loaded(at), loaded(at + 7)], *operands, "instance {i}"),
                1 => {
                    let to = |at: usize| {
                        (base + at as u64 + 7).wrapping_add(field(at + 3) as i64 as u64)
                    };
                    assert_eq!([to(at), to(at + 7)], [data + data_at, data + data_at + 4]);
                    data_at += 8;
                }
                3 => assert_eq!(loaded(at), operands[0], "instance {i}"),
                4 => {
                    let to = (base + at as u64 + 7).wrapping_add(field(at + 3) as i64 as u64);
                    assert_eq!(to, data + data_at, "instance {i}");
                    data_at += 8;
                }
                _ => {}
            }
        }
        // The operands outside the sign-extended 32-bit range (2^40, and 2^31 twice, one
        // slot) took GOT slots, each instruction on its own; every other value is an
        // immediate.
        assert_eq!(trace.got_slots(), 2);
        let opcodes = |i: usize| {
            let at = offsets[i] as usize;
            [&code[at..at + 3], &code[at + 7..at + 10]]
        };
        assert_eq!(opcodes(1), [[0x48, 0xc7, 0xc0], [0x49, 0x81, 0xc5]]);
        assert_eq!(opcodes(2), [[0x48, 0x8b, 0x05], [0x49, 0x81, 0xc5]]);
        assert_eq!(opcodes(6), [[0x48, 0xc7, 0xc0], [0x4c, 0x03, 0x2d]]);
        let opcode = |i: usize| &code[offsets[i] as usize..offsets[i] as usize + 3];
        assert_eq!(opcode(5), [0x48, 0xc7, 0xc0]);
        assert_eq!(opcode(7), [0x48, 0x8b, 0x05]);
        assert_eq!(opcode(9), [0x48, 0xc7, 0xc0]);
    }
}

/// Cold parts (`Stencil::cold_len`) on x86-64: laid after the trace's hot code (and tail
/// jump), so that each hot part falls through into the next instance; the hot part's branch
/// into its cold part and the cold part's jump back into the hot code are patched, and
/// the code runs.
#[cfg(target_arch = "x86_64")]
mod cold {
    use super::*;
    use crate::program::X86_RET;
    use crate::InstanceId;

    /// Hot: `test rdi, rdi; je cold+0; lea rax, [rdi + rdi]` (falls through); cold:
    /// `mov rdi, 21; jmp code+9` (back to the `lea`).
    #[rustfmt::skip]
    const GUARD: &[u8] = &[
        0x48, 0x85, 0xff,
        0x0f, 0x84, 0, 0, 0, 0,
        0x48, 0x8d, 0x04, 0x3f,
        0x48, 0xc7, 0xc7, 0x15, 0, 0, 0,
        0xe9, 0, 0, 0, 0,
    ];
    const HOT_LEN: usize = 13;
    static GUARD_HOLES: [Hole; 2] = [
        Hole {
            section: Section::Code,
            offset: 5,
            kind: HoleKind::X86Branch32,
            value: HoleValue::Cold,
            addend: -4,
        },
        Hole {
            section: Section::Code,
            offset: 21,
            kind: HoleKind::X86Branch32,
            value: HoleValue::Code,
            addend: 9 - 4,
        },
    ];
    static STENCILS: [Stencil<'static>; 2] = [
        Stencil {
            name: "guard",
            code: GUARD,
            // Both parts at their alignment: the hot one padded with nops, run through.
            code_align: 4,
            holes: &GUARD_HOLES,
            cold_len: (GUARD.len() - HOT_LEN) as u32,
            ..Stencil::EMPTY
        },
        X86_RET,
    ];
    static COLD_SET: StencilSet<'static> = StencilSet {
        stencils: &STENCILS,
        symbols: &[],
        nop: &[0x90],
        ..SET
    };

    #[test]
    fn cold_parts_follow_the_hot_code_and_run() {
        let jit = Jit::new(&COLD_SET, |_| None).unwrap();
        for batch in [false, true] {
            let trace = if batch {
                let mut b = jit.batch();
                let t = b.trace();
                for s in [0, 0, 1] {
                    t.push(s, &[], &[]).unwrap();
                }
                b.finish().unwrap().remove(0)
            } else {
                let mut t = jit.trace();
                for s in [0, 0, 1] {
                    t.push(s, &[], &[]).unwrap();
                }
                t.finish().unwrap()
            };
            // Hot parts back to back (each falls through), then the cold parts, each at
            // the stencil's alignment.
            assert_eq!(trace.instance_offsets(), [0, 16, 29]);
            let code = trace.code_bytes();
            assert_eq!(code[13..16], [0x90; 3]);
            let cold = 30usize.next_multiple_of(4);
            assert_eq!(code.len(), cold + 2 * 12);
            for k in 0..2 {
                let (hot, at) = (16 * k, cold + 12 * k);
                assert_eq!(code[hot..hot + 5], GUARD[..5]);
                assert_eq!(code[hot + 9..hot + HOT_LEN], GUARD[9..HOT_LEN]);
                assert_eq!(code[at..at + 7], GUARD[HOT_LEN..HOT_LEN + 7]);
                // `je` to the instance's cold part, `jmp` back to its `lea`.
                let je = i32::from_le_bytes(code[hot + 5..hot + 9].try_into().unwrap());
                assert_eq!(hot as i64 + 9 + i64::from(je), at as i64, "instance {k}");
                let jmp = i32::from_le_bytes(code[at + 8..at + 12].try_into().unwrap());
                assert_eq!(at as i64 + 12 + i64::from(jmp), hot as i64 + 9);
            }
            let entry = trace.entry(InstanceId::from_index(0));
            // SAFETY: the trace's code is the stencils above: it reads `rdi`, writes `rax`
            // and `rdi` (caller-saved in the System V ABI) and returns.
            let f: extern "sysv64" fn(u64) -> u64 = unsafe { std::mem::transmute(entry) };
            assert_eq!(f(5), 10);
            assert_eq!(f(0), 42, "through the first instance's cold part");
        }
    }
}

/// A program of one rel32 branch to a jump target has the quick form `Quick::Target`: a
/// target that is an instance of the trace is patched by it; an address out of reach goes
/// on to the steps, which route the branch through a veneer.
#[cfg(target_arch = "x86_64")]
mod branch {
    use super::*;
    use crate::program::{Quick, X86_RET};
    use crate::{InstanceId, Target};

    /// `test rdi, rdi; je target` (falls through).
    const JZ: &[u8] = &[0x48, 0x85, 0xff, 0x0f, 0x84, 0, 0, 0, 0];
    static JZ_HOLES: [Hole; 1] = [Hole {
        section: Section::Code,
        offset: 5,
        kind: HoleKind::X86Branch32,
        value: HoleValue::Target(0),
        addend: -4,
    }];
    static STENCILS: [Stencil<'static>; 2] = [
        Stencil {
            name: "jz",
            code: JZ,
            targets: &["JUMP_TARGET"],
            holes: &JZ_HOLES,
            ..Stencil::EMPTY
        },
        X86_RET,
    ];
    static BRANCH_SET: StencilSet<'static> = StencilSet {
        stencils: &STENCILS,
        symbols: &[],
        nop: &[0x90],
        ..SET
    };

    #[test]
    fn a_branch_to_an_instance_is_quick_and_to_a_far_address_gets_a_veneer() {
        let jit = Jit::new(&BRANCH_SET, |_| None).unwrap();
        let k = -9;
        assert_eq!(
            jit.programs[0].quick,
            Quick::Target {
                offset: 5,
                target: 0,
                k
            }
        );
        let far = Target::Address(super::super::out_of_reach());
        for (target, veneers) in [(Target::Instance(InstanceId::from_index(2)), 0), (far, 1)] {
            let mut t = jit.trace();
            t.push(0, &[], &[target]).unwrap();
            t.push(1, &[], &[]).unwrap();
            t.push(1, &[], &[]).unwrap();
            let trace = t.finish().unwrap();
            assert_eq!(trace.veneers(), veneers, "{target:?}");
            let code = trace.code_bytes();
            let rel = i32::from_le_bytes(code[5..9].try_into().unwrap());
            let to = 9 + i64::from(rel);
            let third = i64::from(trace.instance_offsets()[2]);
            if veneers == 0 {
                assert_eq!(to, third, "the third instance");
            } else {
                assert!(
                    to > third && to < code.len() as i64,
                    "into the veneer: {to}"
                );
            }
        }
    }
}

/// A `Trace` is moved several times between `finish` and its caller: at most 128 bytes,
/// it is moved by a few vector moves instead of a `memcpy` call each time (at 184 bytes the
/// calls were six per trace, 29 instructions each).
#[test]
fn a_trace_is_at_most_128_bytes() {
    let size = size_of::<crate::Trace>();
    assert!(size <= 128, "a Trace is {size} bytes");
}
