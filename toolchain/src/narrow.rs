//! Narrow operands: operands a template declares small (`CPJIT_DECLARE_NARROW(NAME, u16)`
//! in `cpjit.h`), which the compiler may encode as immediates instead of loading 64 bits.
//!
//! The declaration gives the hole symbol an opaque struct type named after its range
//! (`struct cpjit_narrow_u16`), which survives into the IR. Two stages use it:
//! - [`declare_ranges`], on the IR before code generation, finds those symbols and, where
//!   the object format can express a 32-bit absolute value in 64-bit code (x86-64 ELF and
//!   COFF), marks them `!absolute_symbol` with their range: LLVM then folds them into
//!   instructions as `imm32`/`disp32` (`R_X86_64_32`/`32S`, `IMAGE_REL_AMD64_ADDR32`, hole
//!   kind `X86Abs32`) instead of GOT loads. Elsewhere the operand stays a GOT load, which
//!   the runtime relaxes into an immediate when the value allows (AArch64 `movz`/`movk`,
//!   x86-64 Mach-O `mov r, imm32`).
//! - [`add_checks`], on the stencils read from the object, adds one check hole
//!   (`HoleKind::Operand*`, code offset 0, width 0) per narrow operand of each stencil, so
//!   the runtime refuses a value outside the declared range on every target, whatever
//!   instructions the compiler used; and refuses a 32-bit absolute hole against anything
//!   but a narrow operand (an address would not fit).
//!
//! Halves of a 64-bit operand (`CPJIT_DECLARE_OPERAND_HALVES(NAME)`) are two u32 narrow
//! operands `_JIT_NAME_HI`/`_JIT_NAME_LO` of the declared types `struct cpjit_operand_hi` and
//! `struct cpjit_operand_lo` (the type decides, not the name). They take the same
//! instructions as a `u32` narrow operand; [`add_checks`] then folds each pair into ONE
//! operand of the stencil, `NAME`, whose holes become [`HoleValue::OperandHigh`] /
//! [`HoleValue::OperandLow`]. A half is a u32 by construction, so it gets no check hole and
//! no 64-bit value of `NAME` is refused. `NAME` may also be read whole (`_JIT_NAME`, a plain
//! or narrow operand) in the same stencil: it is the same operand, one value.
//!
//! Where LLVM has no way to fold an absolute symbol into an instruction (AArch64 ELF,
//! RISC-V, x86-64 Mach-O), `cpjit.h` reads a narrow operand with a few instructions of
//! inline assembly that carry the relocation (`movz`/`movk` `:abs_g*_nc:`, `lui`/`addi[w]`
//! `%hi`/`%lo`, `movl $sym`). The IR validator refuses inline assembly except exactly those
//! forms ([`is_narrow_asm`]): each only writes its output register, has no control flow and
//! names one narrow operand.

use crate::error::{Error, Result};
use crate::stencil::StencilBuf;
use crate::target::Target;
use cpjit_model::{Arch, Hole, HoleValue, ObjectFormat, OperandPart, OperandRange, Section};
use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMMetadataRef, LLVMValueRef};
use inkwell::module::Module;
use inkwell::types::AnyTypeEnum;
use inkwell::values::AsValueRef;
use std::collections::BTreeMap;

/// Part of the object cache key: bump when what [`declare_ranges`] does to the IR changes.
pub const CACHE_TAG: &[u8] = b"narrow-4";

/// The struct tag that declares a narrow operand of `range` (`cpjit_narrow_u16`).
/// The struct tag `ty_name` declares, without the `.N` suffix LLVM gives a named struct type
/// that another module loaded into the same context already named (the units of a `-cc1`
/// group, or a set's batch, share one context): `struct.cpjit_narrow_u16.3` is
/// `struct.cpjit_narrow_u16`.
fn declared_tag(ty_name: &[u8]) -> &[u8] {
    match ty_name.iter().rposition(|&b| b == b'.') {
        Some(dot)
            if dot + 1 < ty_name.len() && ty_name[dot + 1..].iter().all(u8::is_ascii_digit) =>
        {
            &ty_name[..dot]
        }
        _ => ty_name,
    }
}

fn struct_name(range: OperandRange) -> String {
    format!("struct.cpjit_narrow_{}", range.name())
}

/// The halves of a 64-bit operand: the struct tag that declares each (`cpjit.h`'s
/// `CPJIT_DECLARE_OPERAND_HALVES`), and the suffix its hole symbol carries after the
/// operand's name.
const HALVES: [(&str, OperandPart, &str); 2] = [
    ("struct.cpjit_operand_hi", OperandPart::High, "_HI"),
    ("struct.cpjit_operand_lo", OperandPart::Low, "_LO"),
];

/// The half declared by the struct tag `ty_name`, if it is one of [`HALVES`].
fn half_of(ty_name: &[u8]) -> Option<(OperandPart, &'static str)> {
    HALVES
        .iter()
        .find(|(tag, _, _)| tag.as_bytes() == ty_name)
        .map(|&(_, part, suffix)| (part, suffix))
}

/// The operand a halves hole names and which half it is: `NAME_HI` → (`NAME`, high),
/// `NAME_LO` → (`NAME`, low); `None` for any other hole name (without prefix).
pub fn operand_half(hole: &str) -> Option<(&str, OperandPart)> {
    HALVES
        .iter()
        .find_map(|&(_, part, suffix)| Some((hole.strip_suffix(suffix)?, part)))
}

/// What a translation unit declares narrow, by hole symbol without prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// Narrow operands (`CPJIT_DECLARE_NARROW`): name → range.
    pub ranges: BTreeMap<String, OperandRange>,
    /// Halves (`CPJIT_DECLARE_OPERAND_HALVES`): hole name (`NAME_HI`) → which half it is
    /// and the suffix its name must end with.
    pub halves: BTreeMap<String, (OperandPart, &'static str)>,
}

/// Whether the target's object format has a 32-bit absolute relocation usable in 64-bit
/// code, so that narrow operands can be immediates chosen by the compiler. Mach-O x86-64
/// has none ("32-bit absolute addressing is not supported in 64-bit mode"); AArch64 and
/// RISC-V reach symbols page- or PC-relatively in the small code model.
fn absolute_immediates(target: &Target) -> bool {
    target.arch == Arch::X86_64 && target.format != ObjectFormat::MachO
}

/// Narrow operands and halves declared in `module`; on targets with absolute immediates
/// their hole symbols are marked `!absolute_symbol` with the range (`u32` for a half).
pub fn declare_ranges(module: &Module, hole_prefix: &str, target: &Target) -> Declared {
    let mut declared = Declared::default();
    let mark = absolute_immediates(target);
    for global in module.get_globals() {
        let name = global.get_name().to_string_lossy().into_owned();
        let Some(operand) = name.strip_prefix(hole_prefix) else {
            continue;
        };
        let AnyTypeEnum::StructType(ty) = global.get_value_type() else {
            continue;
        };
        let Some(ty_name) = ty.get_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        let tag = declared_tag(ty_name.as_bytes());
        let range = if let Some(half) = half_of(tag) {
            declared.halves.insert(operand.to_string(), half);
            OperandRange::U32
        } else if let Some(range) = OperandRange::ALL
            .into_iter()
            .find(|r| struct_name(*r).as_bytes() == tag)
        {
            declared.ranges.insert(operand.to_string(), range);
            range
        } else {
            continue;
        };
        if mark {
            mark_absolute(module, global.as_value_ref(), range);
        }
    }
    declared
}

/// The inline assembly of `CPJIT_NARROW` in `cpjit.h` as the IR spells it (template,
/// constraints): `%0` the result register, `%1` the operand's symbol. Keep in step with
/// `cpjit.h`.
const NARROW_ASM: [(&str, &str); 5] = [
    // AArch64 ELF, 8- and 16-bit ranges: R_AARCH64_MOVW_UABS_G0_NC.
    ("movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"),
    // AArch64 ELF, 32-bit ranges: the two halves, G1_NC then G0_NC.
    (
        "movz ${0:w}, #:abs_g1_nc:${1:c}\n\tmovk ${0:w}, #:abs_g0_nc:${1:c}",
        "=r,S",
    ),
    // RISC-V, 8-bit ranges: R_RISCV_LO12_I.
    ("addi $0, zero, %lo($1)", "=r,S"),
    // RISC-V, 16- and 32-bit ranges: R_RISCV_HI20 + R_RISCV_LO12_I.
    ("lui $0, %hi($1)\n\taddiw $0, $0, %lo($1)", "=r,S"),
    // x86-64 Mach-O: X86_64_RELOC_UNSIGNED of 4 bytes.
    ("movl $1, ${0:k}", "=r,i,~{dirflag},~{fpsr},~{flags}"),
];

/// Whether `call`, a call of the inline assembly `asm`, is one of `cpjit.h`'s narrow-operand
/// reads ([`NARROW_ASM`]) of a narrow operand declared with `CPJIT_DECLARE_NARROW` or a half
/// declared with `CPJIT_DECLARE_OPERAND_HALVES`.
///
/// # Safety
/// `call` must be a call instruction whose called value is `asm`, an inline-asm value.
pub unsafe fn is_narrow_asm(call: LLVMValueRef, asm: LLVMValueRef, hole_prefix: &str) -> bool {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let (template, constraints) = crate::llvm::inline_asm_strings(asm);
        if !NARROW_ASM
            .iter()
            .any(|(t, c)| *t == template && *c == constraints)
        {
            return false;
        }
        // The one argument (the callee is the last operand): a narrow operand's symbol.
        if LLVMGetNumArgOperands(call) != 1 {
            return false;
        }
        let symbol = LLVMGetOperand(call, 0);
        if symbol.is_null() || LLVMIsAGlobalVariable(symbol).is_null() {
            return false;
        }
        let name = crate::llvm::value_name(symbol);
        let ty = LLVMGlobalGetValueType(symbol);
        if LLVMGetTypeKind(ty) != inkwell::llvm_sys::LLVMTypeKind::LLVMStructTypeKind {
            return false;
        }
        let ty_name = LLVMGetStructName(ty);
        if !name.starts_with(hole_prefix) || ty_name.is_null() {
            return false;
        }
        let ty_name = declared_tag(std::ffi::CStr::from_ptr(ty_name).to_bytes());
        half_of(ty_name).is_some()
            || OperandRange::ALL
                .iter()
                .any(|r| ty_name == struct_name(*r).as_bytes())
    }
}

/// Attaches `!absolute_symbol !{i64 lo, i64 hi+1}` (a half-open range) to `global`.
///
/// Unsigned ranges are given as they are. A signed operand is given as `[0, 2^32)`: the
/// symbol's value is then its low 32 bits (what an `X86Abs32` hole writes), and the cast
/// in `CPJIT_NARROW` to the signed C type sign-extends them. LLVM materializes a wrapping
/// (negative) range only with a 10-byte `movabs`, so this keeps the 5-byte `mov r32, imm32`.
fn mark_absolute(
    module: &Module,
    global: inkwell::llvm_sys::prelude::LLVMValueRef,
    range: OperandRange,
) {
    let (lo, hi) = match range.bounds() {
        (0, hi) => (0, hi),
        _ => (0, u32::MAX as i64),
    };
    // SAFETY: `global` is a global of `module`, whose context outlives this call; the
    // constants and metadata are created in that same context.
    unsafe {
        let context = LLVMGetModuleContext(module.as_mut_ptr());
        let i64_type = LLVMInt64TypeInContext(context);
        let bound = |v: i64| LLVMValueAsMetadata(LLVMConstInt(i64_type, v as u64, 1));
        let mut operands: [LLVMMetadataRef; 2] = [bound(lo), bound(hi.wrapping_add(1))];
        let node = LLVMMDNodeInContext2(context, operands.as_mut_ptr(), operands.len());
        let kind_name = "absolute_symbol";
        let kind =
            LLVMGetMDKindIDInContext(context, kind_name.as_ptr().cast(), kind_name.len() as u32);
        LLVMGlobalSetMetadata(global, kind, node);
    }
}

/// Folds each stencil's halves into their operands ([`fold_halves`]), adds the check hole
/// of every narrow operand to each stencil and refuses `X86Abs32` holes whose value is not
/// a narrow operand or a half. `template` names the unit in errors; `is_jump_hole` says
/// whether a hole symbol (with prefix) is the continuation or a jump target, which a
/// halves declaration may not name.
pub fn add_checks(
    stencils: &mut [StencilBuf],
    declared: &Declared,
    hole_prefix: &str,
    is_jump_hole: &dyn Fn(&str) -> bool,
    target: &Target,
    template: &str,
) -> Result<()> {
    let ranges = &declared.ranges;
    let mut errors = Vec::new();
    for stencil in stencils.iter_mut() {
        if let Err(e) = fold_halves(stencil, &declared.halves, hole_prefix, is_jump_hole) {
            errors.push(Error(format!(
                "{}: {template}: stencil `{}`: {}",
                target.triple, stencil.name, e
            )));
            continue;
        }
        for hole in &stencil.holes {
            if !hole.kind.is_narrow_only() {
                continue;
            }
            let narrow = match hole.value {
                HoleValue::Operand(i) => stencil
                    .operands
                    .get(i as usize)
                    .is_some_and(|o| ranges.contains_key(o)),
                HoleValue::OperandHigh(_) | HoleValue::OperandLow(_) => true,
                _ => false,
            };
            if !narrow {
                errors.push(Error(format!(
                    "{}: {template}: stencil `{}`: {} hole at {}+{:#x} refers to {}, which is \
                     not a narrow operand: a 32-bit absolute value cannot hold an address \
                     (declare the operand with CPJIT_DECLARE_NARROW, or keep -fpic)",
                    target.triple,
                    stencil.name,
                    hole.kind,
                    hole.section.name(),
                    hole.offset,
                    stencil.value_text(hole.value)
                )));
            }
        }
        let checks: Vec<Hole> = stencil
            .operands
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                ranges.get(name).map(|range| Hole {
                    section: Section::Code,
                    offset: 0,
                    kind: range.check_kind(),
                    value: HoleValue::Operand(i as u16),
                    addend: 0,
                })
            })
            .collect();
        // First: (code, 0) is the smallest position, and a hole pair that starts at offset 0
        // (an AArch64 `adrp` + `ldr`) stays adjacent, as the runtime's relaxation needs.
        stencil.holes.splice(0..0, checks);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::many(errors))
    }
}

/// Replaces the halves among `stencil`'s operands (`NAME_HI`/`NAME_LO` of a halves
/// declaration) by the one operand `NAME` they are halves of, with their holes'
/// values [`HoleValue::OperandHigh`]/[`HoleValue::OperandLow`] of it; operands stay sorted,
/// every hole is re-indexed. `NAME` may also be an operand read whole. An error (naming the
/// symbol) when a half's name lacks its suffix or its operand would be a jump hole.
fn fold_halves(
    stencil: &mut StencilBuf,
    halves: &BTreeMap<String, (OperandPart, &'static str)>,
    hole_prefix: &str,
    is_jump_hole: &dyn Fn(&str) -> bool,
) -> std::result::Result<(), String> {
    if !stencil.operands.iter().any(|o| halves.contains_key(o)) {
        return Ok(());
    }
    // Each old operand: the operand it belongs to and which part of it it is.
    let mut parts = Vec::with_capacity(stencil.operands.len());
    for name in &stencil.operands {
        let Some(&(part, suffix)) = halves.get(name) else {
            parts.push((name.clone(), OperandPart::Whole));
            continue;
        };
        let symbol = format!("{hole_prefix}{name}");
        let base = match name.strip_suffix(suffix) {
            Some(base) if !base.is_empty() => base,
            _ => {
                let half = if part == OperandPart::High {
                    "high"
                } else {
                    "low"
                };
                return Err(format!(
                    "symbol `{symbol}` is declared as the {half} half of an operand but its \
                     name is not an operand name followed by `{suffix}`: declare halves with \
                     CPJIT_DECLARE_OPERAND_HALVES(NAME)"
                ));
            }
        };
        if is_jump_hole(&format!("{hole_prefix}{base}")) {
            return Err(format!(
                "symbol `{symbol}` is a half of `{hole_prefix}{base}`, which names the \
                 continuation or a jump target, not an operand: rename the operand"
            ));
        }
        parts.push((base.to_string(), part));
    }
    let mut operands: Vec<String> = parts.iter().map(|(n, _)| n.clone()).collect();
    operands.sort();
    operands.dedup();
    for hole in &mut stencil.holes {
        if let HoleValue::Operand(i) = hole.value {
            let (name, part) = &parts[i as usize];
            let index = operands
                .binary_search(name)
                .expect("every operand is listed");
            hole.value = part.value(index as u16);
        }
    }
    stencil.operands = operands;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_halves_hole_names_its_operand_and_half() {
        assert_eq!(
            operand_half("LINK_SLOT_HI"),
            Some(("LINK_SLOT", OperandPart::High))
        );
        assert_eq!(operand_half("PC_LO"), Some(("PC", OperandPart::Low)));
        assert_eq!(operand_half("OPERAND0"), None);
    }

    #[test]
    fn a_declared_tag_is_read_without_llvms_renaming_suffix() {
        assert_eq!(
            declared_tag(b"struct.cpjit_narrow_u16.12"),
            b"struct.cpjit_narrow_u16"
        );
        assert_eq!(
            declared_tag(b"struct.cpjit_narrow_u16"),
            b"struct.cpjit_narrow_u16"
        );
        assert_eq!(
            declared_tag(b"struct.cpjit_narrow_u16."),
            b"struct.cpjit_narrow_u16."
        );
        assert_eq!(
            declared_tag(b"struct.cpjit_narrow_u16.x1"),
            b"struct.cpjit_narrow_u16.x1"
        );
    }

    /// Each call's verdict, in order: `cpjit.h`'s forms of a narrow operand only.
    #[test]
    fn only_cpjit_h_narrow_asm_of_a_narrow_operand_is_admitted() {
        let ir = r#"
%struct.cpjit_narrow_u16 = type opaque
%struct.cpjit_narrow_u16.3 = type opaque
%struct.cpjit_narrow_u16.x = type opaque
%struct.other = type opaque
@_JIT_A = external constant %struct.cpjit_narrow_u16
@_JIT_E = external constant %struct.cpjit_narrow_u16.3
@_JIT_F = external constant %struct.cpjit_narrow_u16.x
@_JIT_B = external constant i8
@_JIT_C = external constant %struct.other
@D = external constant %struct.cpjit_narrow_u16
define i64 @f() {
  %1 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @_JIT_A)
  %2 = call i64 asm "movz ${0:w}, #:abs_g1_nc:${1:c}\0A\09movk ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @_JIT_A)
  %3 = call i64 asm "addi $0, zero, %lo($1)", "=r,S"(ptr @_JIT_A)
  %4 = call i64 asm "lui $0, %hi($1)\0A\09addiw $0, $0, %lo($1)", "=r,S"(ptr @_JIT_A)
  %5 = call i64 asm "movl $1, ${0:k}", "=r,i,~{dirflag},~{fpsr},~{flags}"(ptr @_JIT_A)
  %6 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @_JIT_B)
  %7 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @_JIT_C)
  %8 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @D)
  %9 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}\0A\09ret", "=r,S"(ptr @_JIT_A)
  %10 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S,~{x20}"(ptr @_JIT_A)
  %11 = call i64 asm "movl $1, ${0:k}", "=r,i,~{dirflag},~{fpsr},~{flags}"(i64 7)
  %12 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @_JIT_E)
  %13 = call i64 asm "movz ${0:w}, #:abs_g0_nc:${1:c}", "=r,S"(ptr @_JIT_F)
  ret i64 0
}
"#;
        let verdicts = crate::llvm::call_verdicts(ir, |call, callee| {
            // SAFETY: `call` is a call of the inline assembly `callee`, in a live module.
            unsafe { is_narrow_asm(call, callee, "_JIT_") }
        });
        let mut want = [true; 5].to_vec();
        want.extend([false; 6]);
        // The declaration renamed by LLVM (another module of the context had the tag first)
        // is still the narrow operand's; a tag that only starts like one is not.
        want.extend([true, false]);
        assert_eq!(verdicts, want);
    }
}
