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
/// A guard: `jne cold+0`, its cold part one `jmp` to its target (an exit).
#[rustfmt::skip]
const GUARD: &[u8] = &[
    0x0f, 0x85, 0, 0, 0, 0,       //  0: jne cold+0
    0xe9, 0, 0, 0, 0,             //  6: jmp target 0 (the cold part)
];
static GUARD_HOLES: [Hole; 2] = [
    hole(2, HoleKind::X86Branch32, HoleValue::Cold, -4),
    hole(7, HoleKind::X86Branch32, HoleValue::Target(0), -4),
];
static STENCILS: [Stencil<'static>; 3] = [
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
    Stencil {
        name: "guard",
        code: GUARD,
        holes: &GUARD_HOLES,
        targets: &["EXIT"],
        cold_len: 5,
        ..Stencil::EMPTY
    },
];
static SET: StencilSet<'static> = host_set(Arch::X86_64, &[0x90], &STENCILS, &[]);

/// The JIT of [`SET`], and the same with every quick form of the mixed stencil turned
/// off (its steps run one by one): the reference for the bytes.
fn jits() -> (Jit<'static>, Jit<'static>) {
    let quick = Jit::new(&SET, |_| None).unwrap();
    let mut steps = Jit::new(&SET, |_| None).unwrap();
    for p in [0, 2] {
        let p = &mut steps.programs[p];
        p.quick = Quick::General;
        p.cold.as_mut().unwrap().get_mut().quick = Quick::General;
    }
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

/// A cold part of one branch to a jump target (a guard's exit) takes the mixed form of one
/// site, which `write` runs inline for cold parts; it writes what the steps write, for a
/// target in the trace and one out of reach (the steps' veneer, after the inline form
/// declined).
#[test]
fn a_guards_exit_is_a_mixed_cold_part_of_one_site() {
    let (quick, steps) = jits();
    let cold = quick.programs[2].cold.as_deref().unwrap().quick;
    assert_eq!(mixed(cold), (0, vec![RelTo::Target(0)]));
    let ret = Target::Instance(InstanceId::from_index(3));
    let far = Target::Address(0x7f00_0000_0000 ^ 0x1234_5678);
    for exits in [[ret, ret, ret], [ret, far, ret], [far, far, far]] {
        let code = |jit: &Jit<'_>| {
            let mut t = jit.trace();
            for exit in exits {
                t.push(2, &[], &[exit]).unwrap();
            }
            t.push(1, &[], &[]).unwrap();
            t.finish().unwrap().code_bytes().to_vec()
        };
        let q = code(&quick);
        assert_eq!(q, code(&steps), "exits {exits:?}");
        // The first guard's branch leads to its cold part's `jmp`, which reaches the `ret`
        // (at 18, after three guards) when that is the target.
        let rel = |at: usize| i32::from_le_bytes(q[at..at + 4].try_into().unwrap()) as i64;
        let cold = (6 + rel(2)) as usize;
        assert_eq!(q[cold], 0xe9);
        if exits[0] == ret {
            assert_eq!(cold as i64 + 5 + rel(cold + 1), 18, "exits {exits:?}");
        }
    }
}
