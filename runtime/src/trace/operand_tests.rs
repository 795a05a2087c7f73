//! Programs of operand steps ([`Quick::Mixed`](crate::program::Quick) of no sites, for its
//! range check of an operand without a field) on x86-64: an
//! `imm32` load, an absolute 32-bit field and a range check of one stencil are written in
//! one loop where every value fits; a value that does not sends the instance to the steps
//! (a GOT load for the wide `imm32` operand), and one out of its range is reported, naming
//! the stencil, the instance and the hole.

use crate::program::{code_hole as hole, host_set, Quick, X86_RET};
use crate::{Error, Jit};
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Stencil, StencilSet};

#[rustfmt::skip]
const CODE: &[u8] = &[
    0x48, 0x8b, 0x05, 0, 0, 0, 0, // 0: mov rax, [rip + G(A)]
    0xb9, 0, 0, 0, 0,             // 7: mov ecx, B
];
static HOLES: [Hole; 3] = [
    // C is a `u8`: a check, no bytes.
    hole(0, HoleKind::OperandU8, HoleValue::Operand(2), 0),
    hole(
        3,
        HoleKind::X86RexGotPc32Relaxable,
        HoleValue::Operand(0),
        -4,
    ),
    hole(8, HoleKind::X86Abs32, HoleValue::Operand(1), 0),
];
static STENCILS: [Stencil<'static>; 2] = [
    Stencil {
        name: "three",
        code: CODE,
        holes: &HOLES,
        operands: &["A", "B", "C"],
        ..Stencil::EMPTY
    },
    X86_RET,
];
static SET: StencilSet<'static> = host_set(Arch::X86_64, &[0x90], &STENCILS, &[]);

#[test]
fn operand_programs_write_what_the_steps_write() {
    let jit = Jit::new(&SET, |_| None).unwrap();
    // C's check stays a step of its own (no field of C to take it over): the mixed form
    // of no sites, whose loop tests each step for a store; a program whose every step
    // stores is the operands form.
    assert!(matches!(
        jit.programs[0].quick,
        Quick::Mixed {
            from: 0,
            len: 3,
            count: 0,
            ..
        }
    ));
    assert_eq!(jit.operand_steps.len(), 3);
    let big = 1u64 << 40;
    let pushes = [
        [7, 0x1234, 200],
        [big, 5, 3],
        [(-2i64) as u64, u32::MAX as u64, 0],
        [9, (i32::MIN as i64) as u64, 255],
    ];
    let mut t = jit.trace();
    for operands in pushes {
        t.push(0, &operands, &[]).unwrap();
    }
    t.push(1, &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    let code = trace.code_bytes();
    let base = trace.code_range().start as u64;
    let field = |at: usize| u32::from_le_bytes(code[at..at + 4].try_into().unwrap());
    for (i, (&at, operands)) in trace.instance_offsets().iter().zip(&pushes).enumerate() {
        let at = at as usize;
        // The load: `mov rax, imm32` where the operand fits, a GOT load otherwise.
        let loaded = match code[at..at + 3] {
            [0x48, 0xc7, 0xc0] => field(at + 3) as i32 as i64 as u64,
            [0x48, 0x8b, 0x05] => {
                let slot = (base + at as u64 + 7).wrapping_add(field(at + 3) as i32 as u64);
                // SAFETY: a GOT slot of the live trace, in its data.
                unsafe { (slot as *const u64).read_unaligned() }
            }
            ref other => panic!("instruction {other:x?} of instance {i}"),
        };
        assert_eq!(loaded, operands[0], "instance {i}");
        assert_eq!(field(at + 8), operands[1] as u32, "instance {i}");
    }
    assert_eq!(trace.got_slots(), 1);

    // Out of range: the check's operand, then the absolute field's.
    for (operands, hole) in [([1, 2, 256], 0), ([1, 1 << 32, 3], 2)] {
        let mut t = jit.trace();
        t.push(0, &[1, 2, 3], &[]).unwrap();
        t.push(0, &operands, &[]).unwrap();
        t.push(1, &[], &[]).unwrap();
        match t.finish() {
            Err(Error::Patch {
                stencil,
                instance: 1,
                hole: h,
                ..
            }) if stencil == "three" && h == HOLES[hole] => {}
            other => panic!("{operands:?}: {other:?}"),
        }
    }
}
