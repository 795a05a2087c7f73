//! x86-64 holes: 32-bit PC-relative displacements (data operands, branches, GOT slots), and
//! the relaxations of GOT loads into direct addresses or immediates (lld's `relaxGot` and
//! `relaxGotNoPic` in `lld/ELF/Arch/X86_64.cpp`).
//!
//! A rel32 field holds no other bits, so the instruction checks look at the bytes *before*
//! the hole: the opcode or RIP-relative ModRM byte that makes the hole what its kind says.

use super::{bytes, put, PatchError, PrecedingBytes, Problem};
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
        HoleKind::X86Pc32 | HoleKind::X86GotPc32 => check_rip_relative(code, offset)?,
        HoleKind::X86Branch32 => check_branch(code, offset)?,
        HoleKind::X86GotPc32Relaxable => {
            got_form(code, offset)?;
        }
        _ => {
            return Err(unexpected(code, offset, "an x86-64 instruction"));
        }
    }
    let rel = rel32(place, value)?;
    put(code, offset, rel.to_le_bytes());
    Ok(())
}

/// `value - place` as a signed 32-bit displacement.
pub(super) fn rel32(place: u64, value: u64) -> Result<i32, Problem> {
    let distance = value.wrapping_sub(place) as i64;
    i32::try_from(distance).map_err(|_| Problem::OutOfRange {
        min: i32::MIN.into(),
        max: i32::MAX.into(),
        actual: distance,
    })
}

fn unexpected(code: &[u8], offset: usize, expected: &'static str) -> Problem {
    Problem::UnexpectedBytes {
        found: PrecedingBytes::before(code, offset),
        expected,
    }
}

/// The byte before the hole at `offset`, if any.
fn before(code: &[u8], offset: usize, back: usize) -> Option<u8> {
    offset.checked_sub(back).and_then(|i| code.get(i)).copied()
}

/// ModRM with mod = 00 and r/m = 101: `[rip + disp32]` in 64-bit mode.
fn is_rip_relative_modrm(b: u8) -> bool {
    b & 0xc7 == 0x05
}

/// A RIP-relative memory operand ends in ModRM + disp32 (no SIB byte exists for it), so the
/// byte before the hole is its ModRM. An immediate may follow the displacement (the
/// addend then folds in its size), which does not change where the ModRM is.
fn check_rip_relative(code: &[u8], offset: usize) -> Result<(), Problem> {
    match before(code, offset, 1) {
        Some(modrm) if is_rip_relative_modrm(modrm) => Ok(()),
        _ => Err(unexpected(
            code,
            offset,
            "a RIP-relative ModRM byte (mod=00, r/m=101)",
        )),
    }
}

/// `call rel32` (E8), `jmp rel32` (E9) or `jcc rel32` (0F 80..8F).
fn check_branch(code: &[u8], offset: usize) -> Result<(), Problem> {
    let opcode = before(code, offset, 1);
    let escape = before(code, offset, 2);
    match (escape, opcode) {
        (_, Some(0xe8 | 0xe9)) => Ok(()),
        (Some(0x0f), Some(0x80..=0x8f)) => Ok(()),
        _ => Err(unexpected(
            code,
            offset,
            "call/jmp rel32 (e8/e9) or jcc rel32 (0f 8x)",
        )),
    }
}

/// The instruction forms a relaxable GOT hole may sit in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GotForm {
    /// `mov r, [rip + G]`: `[REX] 8B modrm`.
    Mov,
    /// `call [rip + G]`: `FF 15`.
    Call,
    /// `jmp [rip + G]`: `FF 25`.
    Jmp,
}

fn got_form(code: &[u8], offset: usize) -> Result<GotForm, Problem> {
    match (before(code, offset, 2), before(code, offset, 1)) {
        (Some(0x8b), Some(modrm)) if is_rip_relative_modrm(modrm) => Ok(GotForm::Mov),
        (Some(0xff), Some(0x15)) => Ok(GotForm::Call),
        (Some(0xff), Some(0x25)) => Ok(GotForm::Jmp),
        _ => Err(unexpected(
            code,
            offset,
            "mov r, [rip+G] (8b), call [rip+G] (ff 15) or jmp [rip+G] (ff 25)",
        )),
    }
}

/// Relaxes the GOT load of an [`HoleKind::X86GotPc32Relaxable`] hole into a direct
/// reference to `direct_value` (`S + A`), as lld does for a non-preemptible symbol:
/// - `mov r, [rip + G]` (`8B`) → `lea r, [rip + S]` (`8D`);
/// - `call [rip + G]` (`FF 15`) → `addr32 call S` (`67 E8`): one instruction, same length;
/// - `jmp [rip + G]` (`FF 25`) → `jmp S` (`E9`, one byte earlier) + `nop`.
///
/// Returns `Ok(false)`, bytes untouched, if the displacement does not fit 32 bits; the
/// caller then patches the GOT form with [`super::patch`]. The addend must be the usual
/// `-4` (the displacement ends the instruction), as lld requires; other addends address
/// part of the slot and must not be relaxed. Errors if the bytes are not one of the forms.
pub fn relax_x86_got_load(
    code: &mut [u8],
    offset: usize,
    place: u64,
    direct_value: u64,
) -> Result<bool, PatchError> {
    let error = |problem| PatchError {
        kind: HoleKind::X86GotPc32Relaxable,
        offset,
        place,
        value: direct_value,
        problem,
    };
    bytes::<4>(code, offset).map_err(error)?;
    let form = got_form(code, offset).map_err(error)?;
    // The `jmp` moves one byte earlier, so its displacement grows by one.
    let bias = if form == GotForm::Jmp { 1 } else { 0 };
    let Ok(rel) = rel32(place, direct_value.wrapping_add(bias)) else {
        return Ok(false);
    };
    match form {
        GotForm::Mov => {
            code[offset - 2] = 0x8d;
            put(code, offset, rel.to_le_bytes());
        }
        GotForm::Call => {
            code[offset - 2] = 0x67;
            code[offset - 1] = 0xe8;
            put(code, offset, rel.to_le_bytes());
        }
        GotForm::Jmp => {
            code[offset - 2] = 0xe9;
            put(code, offset - 1, rel.to_le_bytes());
            code[offset + 3] = 0x90;
        }
    }
    Ok(true)
}

/// Relaxes `mov r64, [rip + G]` whose slot holds `constant` into `mov r64, imm32`
/// (`REX.W C7 /0`, the register moved from ModRM.reg to ModRM.rm and REX.R to REX.B; same
/// 7 bytes) when `constant` fits a sign-extended 32-bit immediate: one memory load less.
///
/// `Ok(false)`, bytes untouched, for a constant that does not fit, for `call`/`jmp`, and for
/// a `mov` without `REX.W` (a 32-bit load). The byte before the opcode is taken as the REX
/// prefix when it is `0x48..=0x4f`: the hole kind does not record whether the instruction
/// has one (ELF's `REX_GOTPCRELX` does), and compilers load GOT slots with 64-bit moves,
/// which always carry `REX.W`. Errors (with `place` 0, which the relaxation
/// does not need) if the bytes are not a relaxable GOT form.
pub fn relax_x86_got_load_constant(
    code: &mut [u8],
    offset: usize,
    constant: u64,
) -> Result<bool, PatchError> {
    let error = |problem| PatchError {
        kind: HoleKind::X86GotPc32Relaxable,
        offset,
        place: 0,
        value: constant,
        problem,
    };
    bytes::<4>(code, offset).map_err(error)?;
    if got_form(code, offset).map_err(error)? != GotForm::Mov {
        return Ok(false);
    }
    let Ok(imm) = i32::try_from(constant as i64) else {
        return Ok(false);
    };
    let rex = match before(code, offset, 3) {
        Some(rex) if rex & 0xf8 == 0x48 => rex,
        _ => return Ok(false),
    };
    let modrm = code[offset - 1];
    code[offset - 3] = (rex & !0x04) | (rex & 0x04) >> 2;
    code[offset - 2] = 0xc7;
    code[offset - 1] = 0xc0 | (modrm >> 3 & 7);
    put(code, offset, imm.to_le_bytes());
    Ok(true)
}
