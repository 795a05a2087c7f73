//! [`Quick::Mixed`] on x86-64: a stencil of an operand's absolute field and range check, a
//! branch into its cold part and a jump to a target, whose cold part jumps to a target and
//! back into the hot code. Its hot and cold programs take the mixed form; the bytes it
//! writes are those the steps write, for targets in the trace and out of reach (a veneer)
//! and for operands at the edges of their range; an operand out of range is reported.

use super::{code_hole as hole, host_set, Quick, RelTo, X86_RET};
use crate::{Error, InstanceId, Jit, Target};
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Stencil, StencilSet};

#[rustfmt::skip]
const CODE: &[u8] = &[
    0xb9, 0, 0, 0, 0,             //  0: mov ecx, A
    0x0f, 0x85, 0, 0, 0, 0,       //  5: jne cold+0
    0xe9, 0, 0, 0, 0,             // 11: jmp target 0
    // Cold part (16..):
    0x0f, 0x84, 0, 0, 0, 0,       // 16: je target 1
    0xe9, 0, 0, 0, 0,             // 22: jmp code+11 (the hot `jmp`)
];
const HOT_LEN: usize = 16;
static HOLES: [Hole; 6] = [
    // A is a `u16`: a check (folded into the field's store), and its field.
    hole(1, HoleKind::OperandU16, HoleValue::Operand(0), 0),
    hole(1, HoleKind::X86Abs32, HoleValue::Operand(0), 0),
    hole(7, HoleKind::X86Branch32, HoleValue::Cold, -4),
    hole(12, HoleKind::X86Branch32, HoleValue::Target(0), -4),
    hole(18, HoleKind::X86Branch32, HoleValue::Target(1), -4),
    // Back to the hot `jmp`.
    hole(23, HoleKind::X86Branch32, HoleValue::Code, 11 - 4),
];
static STENCILS: [Stencil<'static>; 2] = [
    Stencil {
        name: "mixed",
        code: CODE,
        holes: &HOLES,
        operands: &["A"],
        targets: &["T", "U"],
        cold_len: (CODE.len() - HOT_LEN) as u32,
        falls_through: false,
        ..Stencil::EMPTY
    },
    X86_RET,
];
static SET: StencilSet<'static> = host_set(Arch::X86_64, &[0x90], &STENCILS, &[]);

/// The JIT of [`SET`], and the same with every quick form of the mixed stencil turned
/// off (its steps run one by one): the reference for the bytes.
fn jits() -> (Jit<'static>, Jit<'static>) {
    let quick = Jit::new(&SET, |_| None).unwrap();
    let mut steps = Jit::new(&SET, |_| None).unwrap();
    let p = &mut steps.programs[0];
    p.quick = Quick::General;
    p.cold.as_deref_mut().unwrap().quick = Quick::General;
    (quick, steps)
}

/// The code of a trace of two mixed instances (operands `a`, targets `targets`) and a
/// `ret`, or the error.
fn trace(jit: &Jit<'_>, a: [u64; 2], targets: [[Target; 2]; 2]) -> Result<Vec<u8>, Error> {
    let mut t = jit.trace();
    for (a, targets) in a.into_iter().zip(targets) {
        t.push(0, &[a], &targets)?;
    }
    t.push(1, &[], &[])?;
    let trace = t.finish()?;
    Ok(trace.code_bytes().to_vec())
}

/// The operand steps and the sites' destinations of a mixed form.
fn mixed(quick: Quick) -> (u16, Vec<RelTo>) {
    match quick {
        Quick::Mixed {
            len, count, sites, ..
        } => (len, sites[..count as usize].iter().map(|s| s.to).collect()),
        quick => panic!("not a mixed form: {quick:?}"),
    }
}

#[test]
fn mixed_programs_write_what_the_steps_write() {
    let (quick, steps) = jits();
    let p = &quick.programs[0];
    // The check folded into the store; the branch into the cold part and the jump.
    assert_eq!(mixed(p.quick), (1, vec![RelTo::Cold, RelTo::Target(0)]));
    // (For the cold part, the hot code is the other part.)
    let cold = p.cold.as_deref().unwrap().quick;
    assert_eq!(mixed(cold), (0, vec![RelTo::Target(1), RelTo::Cold]));

    let ret = Target::Instance(InstanceId::from_index(2));
    let first = Target::Instance(InstanceId::from_index(0));
    // Out of any rel32's reach from the trace: through a veneer (the steps' path).
    let far = Target::Address(0x7f00_0000_0000 ^ 0x1234_5678);
    let cases = [
        ([0, 65_535], [[ret, first], [first, ret]]),
        ([7, 300], [[far, ret], [ret, far]]),
        ([65_535, 1], [[far, far], [ret, ret]]),
    ];
    for (a, targets) in cases {
        let (q, s) = (trace(&quick, a, targets), trace(&steps, a, targets));
        let (q, s) = (q.unwrap(), s.unwrap());
        // Traces at different addresses: the veneers' absolute jumps are the same, and
        // every rel32 is relative to the trace itself.
        assert_eq!(q, s, "operands {a:?}");
        for (k, &a) in a.iter().enumerate() {
            assert_eq!(q[16 * k + 1..16 * k + 5], (a as u32).to_le_bytes());
        }
    }
    // A value the check refuses: the steps report it, naming the stencil and the instance.
    let e = trace(&quick, [5, 65_536], [[ret, ret], [ret, ret]]).unwrap_err();
    match e {
        Error::Patch {
            stencil, instance, ..
        } => assert_eq!((stencil.as_str(), instance), ("mixed", 1)),
        e => panic!("{e}"),
    }
}
