//! x86-64 holes: 32-bit PC-relative displacements (data operands, branches, GOT slots), the
//! 64-bit immediate of `movabs` (medium code model), and the relaxations of GOT references
//! into direct addresses or immediates.
//!
//! A rel32 field holds no other bits, so the instruction checks look at the bytes *before*
//! the hole (`cpjit_isa::x86_64` decodes them): the opcode or RIP-relative ModRM byte that
//! makes the hole what its kind says, and for [`HoleKind::X86RexGotPc32Relaxable`] the REX
//! prefix its relocation type promises.

use super::{bytes, put, PatchError, PrecedingBytes, Problem};
use cpjit_isa::x86_64 as isa;
use cpjit_model::HoleKind;

/// Checks the bytes before `code[offset]` and writes `value - place` as a signed rel32.
pub(super) fn patch(
    kind: HoleKind,
    code: &mut [u8],
    offset: usize,
    place: u64,
    value: u64,
) -> Result<(), Problem> {
    bytes::<4>(code, offset)?;
    match kind {
        HoleKind::X86Pc32 | HoleKind::X86GotPc32 => {
            if !isa::is_rip_relative_field(code, offset) {
                return Err(unexpected(
                    code,
                    offset,
                    "a RIP-relative ModRM byte (mod=00, r/m=101)",
                ));
            }
        }
        HoleKind::X86Branch32 => {
            if !isa::is_branch_rel32(code, offset) {
                return Err(unexpected(
                    code,
                    offset,
                    "call/jmp rel32 (e8/e9) or jcc rel32 (0f 8x)",
                ));
            }
        }
        HoleKind::X86GotPc32Relaxable | HoleKind::X86RexGotPc32Relaxable => {
            got_site(kind, code, offset)?;
        }
        _ => return Err(unexpected(code, offset, "an x86-64 instruction")),
    }
    let rel = rel32(place, value)?;
    put(code, offset, rel.to_le_bytes());
    Ok(())
}

/// `S + A` into the 8-byte immediate of `movabs r64, imm64` ([`HoleKind::X86Imm64`]):
/// every value fits, so only the bounds and the instruction (`REX.W B8+r` just before the
/// field) can fail.
pub(super) fn patch_imm64(code: &mut [u8], offset: usize, value: u64) -> Result<(), Problem> {
    bytes::<8>(code, offset)?;
    if !isa::is_movabs_imm64(code, offset) {
        return Err(unexpected(code, offset, "movabs r64, imm64 (REX.W b8+r)"));
    }
    put(code, offset, value.to_le_bytes());
    Ok(())
}

/// `value - place` as a signed 32-bit displacement.
pub(super) fn rel32(place: u64, value: u64) -> Result<i32, Problem> {
    cpjit_isa::rel32(place, value).ok_or(Problem::OutOfRange {
        min: i32::MIN.into(),
        max: i32::MAX.into(),
        actual: value.wrapping_sub(place) as i64,
    })
}

fn unexpected(code: &[u8], offset: usize, expected: &'static str) -> Problem {
    Problem::UnexpectedBytes {
        found: PrecedingBytes::before(code, offset),
        expected,
    }
}

/// The decoded GOT reference of a relaxable hole; whether a REX prefix exists comes from
/// the kind (that is, from the relocation type), never from the bytes.
fn got_site(kind: HoleKind, code: &[u8], offset: usize) -> Result<isa::GotSite, Problem> {
    let has_rex = kind == HoleKind::X86RexGotPc32Relaxable;
    isa::decode_got_site(code, offset, has_rex)
        .map_err(|expected| unexpected(code, offset, expected))
}

/// Relaxes the GOT reference of a relaxable hole ([`HoleKind::is_relaxable_x86_got`]) into a
/// direct reference to `direct_value` (`S + A`), as lld does for a non-preemptible symbol:
/// - `mov r, [rip + G]` (`8B`) → `lea r, [rip + S]` (`8D`);
/// - `call [rip + G]` (`FF 15`) → `addr32 call S` (`67 E8`): one instruction, same length;
/// - `jmp [rip + G]` (`FF 25`) → `jmp S` (`E9`, one byte earlier) + `nop`.
///
/// Returns `Ok(false)`, bytes untouched, for any other instruction with a RIP-relative
/// operand (`add`, `cmp`, `test`, ...: they keep loading through the slot, or take an
/// immediate with [`relax_x86_got_load_constant`]) and if the displacement does not fit 32
/// bits; the caller then patches the GOT form with [`super::patch`]. The addend must be the
/// usual `-4` (the displacement ends the instruction), as lld requires; other addends
/// address part of the slot and must not be relaxed. Errors if the bytes before the hole
/// are not a RIP-relative operand.
pub fn relax_x86_got_load(
    code: &mut [u8],
    offset: usize,
    place: u64,
    direct_value: u64,
) -> Result<bool, PatchError> {
    let kind = HoleKind::X86GotPc32Relaxable;
    let error = |problem| PatchError {
        kind,
        offset,
        place,
        value: direct_value,
        problem,
    };
    bytes::<4>(code, offset).map_err(error)?;
    // None of the direct forms depends on a REX prefix.
    let site = got_site(kind, code, offset).map_err(error)?;
    Ok(isa::relax_got_to_direct(
        code,
        offset,
        site,
        place,
        direct_value,
    ))
}

/// Relaxes the 64-bit use of a GOT slot holding `constant` at a hole of `kind` into the
/// instruction's `imm32` form when `constant` fits a sign-extended 32-bit immediate: `mov`
/// (`REX.W C7 /0`), `test` (`REX.W F7 /0`) and the ALU operations `add`, `or`, `adc`,
/// `sbb`, `and`, `sub`, `xor`, `cmp` (`REX.W 81 /op`), same length, one memory load less.
///
/// Only a [`HoleKind::X86RexGotPc32Relaxable`] hole can be rewritten: its relocation type
/// (`R_X86_64_REX_GOTPCRELX`, `X86_64_RELOC_GOT_LOAD`) says that the byte before the opcode
/// is the REX prefix the rewrite edits; for any other kind (where that byte may end the
/// previous instruction, as in `add al, 0x4c; mov eax, [rip + G]` = `04 4c 8b 05 …`),
/// for a prefix without `REX.W`, other instructions and constants that do not fit, it
/// returns `Ok(false)` with the bytes untouched. Errors (with `place` 0, which the
/// relaxation does not need) if the bytes do not match the kind.
pub fn relax_x86_got_load_constant(
    kind: HoleKind,
    code: &mut [u8],
    offset: usize,
    constant: u64,
) -> Result<bool, PatchError> {
    if !kind.is_relaxable_x86_got() {
        return Ok(false);
    }
    let error = |problem| PatchError {
        kind,
        offset,
        place: 0,
        value: constant,
        problem,
    };
    bytes::<4>(code, offset).map_err(error)?;
    let site = got_site(kind, code, offset).map_err(error)?;
    Ok(isa::relax_got_to_immediate(code, offset, site, constant))
}
