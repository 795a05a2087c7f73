//! Halves of a 64-bit operand (`templates/testing/halves.c`, `CPJIT_DECLARE_OPERAND_HALVES`):
//! on every stencil set this process can execute (narrowed by `CPJIT_STENCILS`), each op
//! computes with the operand rebuilt from its two 32-bit halves for values at every edge
//! (0, the 32-bit boundaries, the top bit, low halves with bit 31 set, which a
//! sign-extending immediate would corrupt), and no value is refused. The halves reach the
//! code through exactly the expected hole kinds per target and no GOT slot on any target
//! (x86-64 `imm32`, AArch64 ELF `movz`+`movk`, RISC-V `lui`+`addiw`; AArch64 Mach-O and COFF
//! GOT loads, which the runtime relaxes into `movz`+`movk`). An operand that merely ends
//! in `_HI`/`_LO` without a halves declaration stays a plain 64-bit operand.

use crate::common;

use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat, OperandPart, StencilSet};
use cpjit_runtime::Jit;

/// Every operand value tried: the brief's edges and low halves with bit 31 set.
const VALUES: [u64; 12] = [
    0,
    1,
    0xffff_ffff,
    0x1_0000_0000,
    0x8000_0000_0000_0000,
    u64::MAX,
    0x1234_5678_9abc_def0,
    0x8000_0000,
    0x7fff_ffff_8000_0000,
    0xffff_ffff_8000_0001,
    0x0000_0001_8765_4321,
    0xfedc_ba98_7654_3210,
];

/// A trace of halves ops only, `[shim, push_halves(v), add_halves(v), push_high_half(v),
/// push_low_half(v), exit]`: it needs no GOT slot on any target (each half is an immediate
/// or a GOT load relaxed into one), and exits with the low half on top of `2v` and the
/// high half.
fn halves_only(jit: &Jit<'_>, v: u64) -> Result<(), String> {
    let target = jit.stencil_set().target;
    let mut b = jit.trace();
    let shim = b.push_shim().map_err(|e| e.to_string())?;
    for op in [
        "op_test_push_halves",
        "op_test_add_halves",
        "op_test_push_high_half",
        "op_test_push_low_half",
    ] {
        b.push_named(op, &[v], &[]).map_err(|e| e.to_string())?;
    }
    b.push_named("op_test_exit", &[], &[])
        .map_err(|e| e.to_string())?;
    let trace = b.finish().map_err(|e| format!("{target}: {v:#x}: {e}"))?;
    if trace.got_slots() != 0 {
        return Err(format!(
            "{target}: halves ops of {v:#x}: {} GOT slot(s), want none",
            trace.got_slots()
        ));
    }
    let mut memory = vec![0u64; 8];
    let mut frame = [0u64; 4];
    // SAFETY: a trace of test ops using three values of `memory`; `shim` is the shim.
    let exit =
        unsafe { trace.entry_fn(shim).unwrap()(frame.as_mut_ptr().cast(), memory.as_mut_ptr()) };
    let want = [v.wrapping_add(v), v >> 32, v & 0xffff_ffff];
    if exit as u64 != want[2] || memory[..3] != want {
        return Err(format!(
            "{target}: halves ops of {v:#x}: exit {exit:#x}, stack {:#x?}, want {want:#x?}",
            &memory[..3]
        ));
    }
    Ok(())
}

/// The kinds of the holes that carry one half into the code on `set`'s target, in code
/// order.
fn half_kinds(set: &StencilSet<'_>) -> Vec<HoleKind> {
    match (set.arch, set.format) {
        (Arch::X86_64, _) => vec![HoleKind::X86Abs32],
        (Arch::Aarch64, ObjectFormat::Elf) => {
            vec![HoleKind::Aarch64MovwG1, HoleKind::Aarch64MovwG0]
        }
        (Arch::Aarch64, _) => vec![HoleKind::Aarch64AdrGotPage21, HoleKind::Aarch64Ld64GotLo12],
        (Arch::Riscv64, _) => vec![HoleKind::RiscvHi20, HoleKind::RiscvLo12I],
    }
}

/// `op`'s holes: exactly `half_kinds` per half in `parts` (of its one operand `want`), no
/// check hole, no other operand hole.
fn check_holes(
    set: &StencilSet<'_>,
    op: &str,
    want: &str,
    parts: &[OperandPart],
) -> Result<(), String> {
    let target = set.target;
    let s = set.get(op).ok_or_else(|| format!("{target}: no {op}"))?;
    if s.operands != [want] {
        return Err(format!(
            "{target}: {op}: operands {:?}, want [{want}]",
            s.operands
        ));
    }
    for part in [OperandPart::Whole, OperandPart::High, OperandPart::Low] {
        let kinds: Vec<HoleKind> = s
            .holes
            .iter()
            .filter(|h| h.value.operand() == Some((0, part)))
            .map(|h| h.kind)
            .collect();
        let expected = if parts.contains(&part) {
            half_kinds(set)
        } else {
            vec![]
        };
        if kinds != expected {
            return Err(format!(
                "{target}: {op}: the {part:?} operand through {kinds:?}, want {expected:?}; \
                 holes: {:?}",
                s.holes
            ));
        }
    }
    Ok(())
}

/// On x86-64 both halves of a value are `imm32`s in the trace's code.
fn check_imm32(jit: &Jit<'_>) -> Result<(), String> {
    let set = jit.stencil_set();
    if set.arch != Arch::X86_64 {
        return Ok(());
    }
    let value = 0x8765_4321_9abc_def0_u64;
    let mut b = jit.trace();
    b.push_shim().map_err(|e| e.to_string())?;
    b.push_named("op_test_push_halves", &[value], &[])
        .map_err(|e| e.to_string())?;
    b.push_named("op_test_exit", &[], &[])
        .map_err(|e| e.to_string())?;
    let trace = b.finish().map_err(|e| e.to_string())?;
    for half in [value >> 32, value & 0xffff_ffff] {
        let imm = (half as u32).to_le_bytes();
        if !trace.code_bytes().windows(4).any(|w| w == imm) {
            return Err(format!("{}: imm32 {half:#x} not in the code", set.target));
        }
    }
    Ok(())
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let jit = Jit::new(set, |_| None).map_err(|e| format!("{target}: {e}"))?;
    use OperandPart::{High, Low};
    check_holes(set, "op_test_push_halves", "VALUE", &[High, Low])?;
    check_holes(set, "op_test_add_halves", "VALUE", &[High, Low])?;
    check_holes(set, "op_test_push_high_half", "VALUE", &[High])?;
    check_holes(set, "op_test_push_low_half", "VALUE", &[Low])?;
    check_imm32(&jit)?;
    // Read as halves and whole: one operand, holes of all three parts.
    let both = set
        .get("op_test_halves_and_whole")
        .ok_or("no op_test_halves_and_whole")?;
    for value in [
        HoleValue::Operand(0),
        HoleValue::OperandHigh(0),
        HoleValue::OperandLow(0),
    ] {
        if both.operands != ["WHOLE"] || !both.holes.iter().any(|h| h.value == value) {
            return Err(format!(
                "{target}: op_test_halves_and_whole: no {value} hole: {both:?}"
            ));
        }
    }
    // Names ending in _HI/_LO without a halves declaration: two plain operands.
    let plain = set
        .get("op_test_plain_hi_lo")
        .ok_or("no op_test_plain_hi_lo")?;
    if plain.operands != ["PAIR_HI", "PAIR_LO"]
        || plain.holes.iter().any(|h| {
            matches!(
                h.value,
                HoleValue::OperandHigh(_) | HoleValue::OperandLow(_)
            )
        })
    {
        return Err(format!("{target}: op_test_plain_hi_lo: {plain:?}"));
    }
    let mut checks = 0;
    for v in VALUES {
        for top in [0u64, 0x0123_4567_89ab_cdef, u64::MAX] {
            // `push` ops leave the pushed value on top; the others change the top.
            let expect = [
                ("op_test_push_halves", v),
                ("op_test_add_halves", top.wrapping_add(v)),
                ("op_test_push_high_half", v >> 32),
                ("op_test_push_low_half", v & 0xffff_ffff),
                ("op_test_halves_and_whole", v ^ v.wrapping_mul(3)),
            ];
            for (op, want) in expect {
                let got = common::run(&jit, &[top], op, &[v])?;
                common::expect_eq(&mut checks, got, want, || {
                    format!("{target}: {op} top {top:#x} operand {v:#x}")
                })?;
            }
        }
        halves_only(&jit, v)?;
        checks += 1;
        let got = common::run(&jit, &[5], "op_test_plain_hi_lo", &[v, 0x1234])?;
        let want = v.wrapping_sub(0x1234);
        common::expect_eq(&mut checks, got, want, || {
            format!("{target}: op_test_plain_hi_lo {v:#x} - 0x1234")
        })?;
    }
    Ok(checks)
}

#[test]
fn halves_rebuild_every_64_bit_value_in_place_on_every_target() {
    common::check_every_executable_set("halves", check);
}
