//! Pure patch functions, one per hole encoding ([`HoleKind`]), operating on byte slices.
//!
//! [`patch`] writes a hole's final value into a copied stencil; [`in_range`] tells the
//! assembler beforehand whether a value fits the encoding, so that it can route an
//! out-of-range branch through a veneer ([`x86_64_veneer`], [`aarch64_veneer`],
//! [`riscv64_veneer`]) or an
//! out-of-range address through a GOT slot. The relaxations ([`relax_x86_got_load`],
//! [`relax_x86_got_load_constant`], [`relax_aarch64_got_pair`]) turn a GOT load into a direct
//! address or constant when the value allows it, removing a memory load.
//! [`patch`] itself relaxes a RISC-V call pair (`auipc` + `jalr`) to `jal` + `nop` when
//! the target is within the `jal`'s ±1 MiB, as lld relaxes `call` and `tail`.
//!
//! Conventions shared by every function here:
//! - `place` is the run-time address of `code[offset]`; `value` is the final target: `S + A`
//!   for non-GOT kinds, `G + A` (GOT slot address plus addend) for GOT kinds. Biases such as
//!   x86's `-4` (and `REL32_n`/`SIGNED_n`) are already folded into the addend.
//! - PC-relative distances are computed modulo 2^64 (as the CPU computes addresses).
//! - Nothing panics on any input: the slice may be short, the bytes may be anything. Every
//!   check (bounds, instruction class, range, alignment) runs in release builds, and a
//!   failure is an error naming kind, offset, place and value; the assembler adds the
//!   stencil name. Nothing is written unless every check passes.
//! - Every field is cleared before it is written, so a hole can be re-patched with another
//!   value (and implicit addends left in the bytes by COFF/Mach-O objects are overwritten).
//!   A RISC-V call pair relaxed to `jal` + `nop` (a target within ±1 MiB) is re-patched from
//!   that form too (expanded back to a pair when the new target is out of the `jal`'s reach).
//!
//! Instruction knowledge (classes, fields, relaxed forms, veneers) comes from `cpjit-isa`,
//! which the toolchain shares; this module adds ranges, bounds and errors. The encodings
//! follow the ELF psABIs for x86-64, AArch64 and RISC-V and lld's implementation of them; the tests
//! compare every function byte for byte with what llvm-mc-19 and the lld
//! linkers produce for the same relocation (`runtime/tests/fixtures/patch/`).

mod aarch64;
mod aarch64_relax;
mod data;
mod error;
mod riscv64;
mod x86_64;

pub use aarch64_relax::relax_aarch64_got_pair;
pub use cpjit_isa::aarch64::veneer as aarch64_veneer;
pub use cpjit_isa::riscv64::veneer as riscv64_veneer;
pub use cpjit_isa::x86_64::veneer as x86_64_veneer;
pub use cpjit_isa::{veneer_size, VENEER_SIZE};
pub use error::{PatchError, PrecedingBytes, Problem};
pub use x86_64::{relax_x86_got_load, relax_x86_got_load_constant};

use cpjit_model::{Arch, HoleKind};

/// Writes `value` into the hole of encoding `kind` at `code[offset..offset + kind.width()]`,
/// whose run-time address is `place`, preserving every other instruction bit.
///
/// Fails, writing nothing, if the hole (or the opcode bytes it depends on) is outside
/// `code`, if the instruction there is not the class `kind` patches, or if `value` is out of
/// range or misaligned for the encoding.
pub fn patch(
    kind: HoleKind,
    code: &mut [u8],
    offset: usize,
    place: u64,
    value: u64,
) -> Result<(), PatchError> {
    let result = match kind {
        HoleKind::Abs64 => data::patch_abs64(code, offset, value),
        HoleKind::X86Abs32 => data::patch_x86_abs32(code, offset, value),
        HoleKind::X86Imm64 => x86_64::patch_imm64(code, offset, value),
        // A marker (the shim's parameter count): nothing to write or check.
        HoleKind::EntryParameters => bytes::<0>(code, offset).map(|_| ()),
        HoleKind::OperandU8
        | HoleKind::OperandS8
        | HoleKind::OperandU16
        | HoleKind::OperandS16
        | HoleKind::OperandU32
        | HoleKind::OperandS32 => kind.operand_check().map_or(Ok(()), |range| {
            data::check_operand(code, offset, range, value)
        }),
        // Instruction holes: each architecture's module (`HoleKind::arch` decides).
        _ => match kind.arch() {
            Some(Arch::X86_64) => x86_64::patch(kind, code, offset, place, value),
            Some(Arch::Aarch64) => patch_word(code, offset, |insn| {
                aarch64::encode(kind, insn, place, value)
            }),
            Some(Arch::Riscv64) if kind == HoleKind::RiscvCall => {
                riscv64::patch_call(code, offset, place, value)
            }
            Some(Arch::Riscv64) => patch_word(code, offset, |insn| {
                riscv64::encode(kind, insn, place, value)
            }),
            // Every kind without an architecture is data, matched above.
            None => Err(Problem::UnexpectedInstruction {
                found: 0,
                expected: "a data hole kind",
            }),
        },
    };
    result.map_err(|problem| PatchError {
        kind,
        offset,
        place,
        value,
        problem,
    })
}

/// Whether `value` can be encoded by a hole of kind `kind` at address `place` (range and
/// alignment only; the instruction is not looked at). For GOT kinds this is the range of
/// the GOT slot address. The assembler uses it to decide on a veneer or GOT slot before
/// patching; [`patch`] repeats the check.
pub fn in_range(kind: HoleKind, place: u64, value: u64) -> bool {
    match kind {
        HoleKind::Abs64 | HoleKind::X86Imm64 | HoleKind::EntryParameters => true,
        HoleKind::X86Abs32 => (i32::MIN as i64..=u32::MAX as i64).contains(&(value as i64)),
        HoleKind::OperandU8
        | HoleKind::OperandS8
        | HoleKind::OperandU16
        | HoleKind::OperandS16
        | HoleKind::OperandU32
        | HoleKind::OperandS32 => kind.operand_check().is_some_and(|r| r.contains(value)),
        _ => match kind.arch() {
            Some(Arch::X86_64) => x86_64::rel32(place, value).is_ok(),
            Some(Arch::Aarch64) => aarch64::field(kind, place, value).is_ok(),
            Some(Arch::Riscv64) => riscv64::in_range(kind, place, value),
            None => false,
        },
    }
}

/// `code[offset..offset + N]`, or the out-of-bounds problem.
fn bytes<const N: usize>(code: &[u8], offset: usize) -> Result<[u8; N], Problem> {
    let end = offset.checked_add(N);
    match end.and_then(|end| code.get(offset..end)) {
        // The slice has exactly N bytes, so the conversion cannot fail.
        Some(slice) => Ok(slice.try_into().unwrap_or([0; N])),
        None => Err(Problem::OutOfBounds {
            start: offset,
            end: end.unwrap_or(usize::MAX),
            len: code.len(),
        }),
    }
}

/// Patches the 32-bit instruction word at `code[offset]` (AArch64, RISC-V): `encode` checks
/// the word it is given and returns it with the hole's field written.
fn patch_word(
    code: &mut [u8],
    offset: usize,
    encode: impl FnOnce(u32) -> Result<u32, Problem>,
) -> Result<(), Problem> {
    let insn = u32::from_le_bytes(bytes::<4>(code, offset)?);
    put(code, offset, encode(insn)?.to_le_bytes());
    Ok(())
}

/// Writes `value` at `code[offset..]`; the caller has checked the bounds with [`bytes`].
fn put<const N: usize>(code: &mut [u8], offset: usize, value: [u8; N]) {
    code[offset..offset + N].copy_from_slice(&value);
}
