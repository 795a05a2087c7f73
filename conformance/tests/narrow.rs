//! Narrow operands (`templates/testing/narrow.c`, `CPJIT_DECLARE_NARROW`): each op runs on
//! every stencil set this process can execute (narrowed by `CPJIT_STENCILS`) with values at
//! both edges of its declared range, which must compute what the C cast says, and with the
//! value one past each edge, which `finish` must refuse naming the operand's range. Where
//! the object format can express it (all but AArch64 Mach-O and COFF) the operand must
//! reach the code in immediates, through exactly the expected hole kinds (no GOT slot, no
//! 64-bit load): x86-64 `imm32`, AArch64 ELF `movz`(+`movk`), RISC-V `addi` or `lui`+`addiw`.

use crate::common;

use cpjit_model::{Arch, HoleKind, ObjectFormat, OperandRange, StencilSet};
use cpjit_runtime::Jit;

/// The value of `v` after the op's C cast to the range's type, sign- or zero-extended.
fn cast(range: OperandRange, v: u64) -> u64 {
    match range {
        OperandRange::U8 => v as u8 as u64,
        OperandRange::S8 => v as i8 as i64 as u64,
        OperandRange::U16 => v as u16 as u64,
        OperandRange::S16 => v as i16 as i64 as u64,
        OperandRange::U32 => v as u32 as u64,
        OperandRange::S32 => v as i32 as i64 as u64,
    }
}

/// The hole kinds that carry a narrow operand of `range` straight into instructions on
/// `set`'s target, or `None` where the object format cannot express them (AArch64 Mach-O
/// and COFF: a GOT load the runtime relaxes).
fn immediate_kinds(set: &StencilSet<'_>, range: OperandRange) -> Option<Vec<HoleKind>> {
    let wide = matches!(range, OperandRange::U32 | OperandRange::S32);
    match (set.arch, set.format) {
        (Arch::X86_64, _) => Some(vec![HoleKind::X86Abs32]),
        (Arch::Aarch64, ObjectFormat::Elf) if wide => {
            Some(vec![HoleKind::Aarch64MovwG1, HoleKind::Aarch64MovwG0])
        }
        (Arch::Aarch64, ObjectFormat::Elf) => Some(vec![HoleKind::Aarch64MovwG0]),
        (Arch::Riscv64, _) if matches!(range, OperandRange::U8 | OperandRange::S8) => {
            Some(vec![HoleKind::RiscvLo12I])
        }
        (Arch::Riscv64, _) => Some(vec![HoleKind::RiscvHi20, HoleKind::RiscvLo12I]),
        _ => None,
    }
}

/// Where the target can express it, the narrow op's code holds the operand in immediates
/// (exactly the expected hole kinds, no GOT slot); on x86-64 the `imm32` is in the code.
fn check_immediate(jit: &Jit<'_>, range: OperandRange) -> Result<(), String> {
    let set = jit.stencil_set();
    let Some(kinds) = immediate_kinds(set, range) else {
        return Ok(());
    };
    let op = format!("op_test_narrow_{}", range.name());
    let stencil = set
        .get(&op)
        .ok_or_else(|| format!("{}: no {op}", set.target))?;
    let carried: Vec<HoleKind> = stencil
        .holes
        .iter()
        .map(|h| h.kind)
        .filter(|k| k.width() > 0 && *k != HoleKind::Abs64)
        .filter(|k| !k.is_branch())
        .collect();
    if carried != kinds {
        return Err(format!(
            "{}: {op} should read its operand through {kinds:?}, holes: {:?}",
            set.target, stencil.holes
        ));
    }
    if set.arch != Arch::X86_64 {
        return Ok(());
    }
    let value = 0x5a_u64;
    let mut b = jit.trace();
    b.push_shim().map_err(|e| e.to_string())?;
    b.push_named(&op, &[value], &[])
        .map_err(|e| e.to_string())?;
    b.push_named("op_test_exit", &[], &[])
        .map_err(|e| e.to_string())?;
    let trace = b.finish().map_err(|e| e.to_string())?;
    let imm = (value as u32).to_le_bytes();
    if !trace.code_bytes().windows(4).any(|w| w == imm) {
        return Err(format!(
            "{}: {op}: imm32 {value:#x} not in the code",
            set.target
        ));
    }
    Ok(())
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let jit = Jit::new(set, |_| None).map_err(|e| format!("{target}: {e}"))?;
    let mut checks = 0;
    for range in OperandRange::ALL {
        check_immediate(&jit, range)?;
        let op = format!("op_test_narrow_{}", range.name());
        let (lo, hi) = range.bounds();
        for top in [0u64, 7, u64::MAX] {
            for v in [lo, lo + 1, 0, hi - 1, hi] {
                let v = v as u64;
                let got = common::run(&jit, &[top], &op, &[v])?;
                let want = top.wrapping_mul(3).wrapping_add(cast(range, v));
                common::expect_eq(&mut checks, got, want, || {
                    format!("{target}: {op} top {top:#x} operand {}", v as i64)
                })?;
            }
        }
        for past in [lo - 1, hi + 1] {
            checks += 1;
            match common::run(&jit, &[1], &op, &[past as u64]) {
                Ok(got) => {
                    return Err(format!(
                        "{target}: {op} accepted {past}, outside {}, and returned {got:#x}",
                        range.name()
                    ))
                }
                Err(e) if e.contains(range.name()) && e.contains("declared") => {}
                Err(e) => {
                    return Err(format!(
                        "{target}: {op} refused {past} without naming the range: {e}"
                    ))
                }
            }
        }
    }
    // Two narrow operands and a 64-bit one in one op (operands in name order).
    let mixed = set
        .get("op_test_narrow_mixed")
        .ok_or("no op_test_narrow_mixed")?;
    let order: Vec<&str> = mixed.operands.to_vec();
    if order != ["IMM_S8", "IMM_U16", "OPERAND0"] {
        return Err(format!("{target}: op_test_narrow_mixed operands {order:?}"));
    }
    for (s8, u16, o) in [(-128i64, 0xffffu64, u64::MAX), (127, 0, 0x1234_5678_9abc)] {
        let got = common::run(&jit, &[9], "op_test_narrow_mixed", &[s8 as u64, u16, o])?;
        let want = (9 ^ u16).wrapping_mul(s8 as u64).wrapping_add(o);
        common::expect_eq(&mut checks, got, want, || {
            format!("{target}: op_test_narrow_mixed")
        })?;
    }
    if common::run(&jit, &[9], "op_test_narrow_mixed", &[0, 0x1_0000, 0]).is_ok() {
        return Err(format!(
            "{target}: op_test_narrow_mixed accepted u16 0x10000"
        ));
    }
    Ok(checks)
}

#[test]
fn narrow_operands_compute_at_their_range_edges_and_refuse_one_past() {
    common::check_every_executable_set("narrow-operand", check);
}
