//! The checker's x86-64 decoders: what a patched hole leads to, read back from the stitched
//! bytes as the CPU would (a displacement, a GOT slot, a veneer, a GOT load relaxed to an
//! immediate or a direct form), without the runtime's patch code.

use super::Memory;
use cpjit_model::{Hole, HoleKind};

/// Decodes where the patched hole leads, as the CPU would see it: the value `S` that the
/// instruction (or data word) now refers to, through a GOT slot or a veneer where one was
/// used. `original` is the stencil's code, `copied` the instance's bytes in the trace.
pub(super) fn decode_target(
    hole: &Hole,
    original: &[u8],
    copied: &[u8],
    place: u64,
    code: &Memory,
    data: &Memory,
) -> Result<u64, String> {
    let o = hole.offset as usize;
    let a = hole.addend as u64;
    let field = |at: usize| -> Result<i64, String> {
        copied
            .get(at..at + 4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as i64)
            .ok_or_else(|| "hole runs past the code".to_string())
    };
    // The relocation's own formula, inverted: the field holds `S + A - P` (or `G + A - P`).
    let pc_relative =
        || -> Result<u64, String> { Ok(place.wrapping_add(field(o)? as u64).wrapping_sub(a)) };
    let slot = |g: u64| -> Result<u64, String> {
        data.u64_at(g)
            .ok_or_else(|| format!("GOT slot {g:#x} is outside the trace's data"))
    };
    match hole.kind {
        // A data word, or a movabs's imm64 (its opcode bytes, outside the hole, are
        // compared with the stencil's like every unpatched byte).
        HoleKind::Abs64 | HoleKind::X86Imm64 => copied
            .get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()).wrapping_sub(a))
            .ok_or_else(|| "hole runs past the code".to_string()),
        HoleKind::X86Pc32 => pc_relative(),
        HoleKind::X86Branch32 => {
            let to = pc_relative()?;
            Ok(through_veneer(to, code).unwrap_or(to))
        }
        HoleKind::X86GotPc32 => slot(pc_relative()?),
        HoleKind::X86GotPc32Relaxable => {
            decode_got_load(original, copied, o, place, a, data, false)
        }
        HoleKind::X86RexGotPc32Relaxable => {
            decode_got_load(original, copied, o, place, a, data, true)
        }
        other => Err(format!("{other} is not an x86-64 hole")),
    }
}

/// A branch into one of the trace's veneers (`jmp [rip+0]; .quad target`) continues at
/// `target`.
pub(super) fn through_veneer(to: u64, code: &Memory) -> Option<u64> {
    let v = code.get(to, 14)?;
    (v[..6] == [0xff, 0x25, 0, 0, 0, 0]).then(|| u64::from_le_bytes(v[6..14].try_into().unwrap()))
}

/// An instruction using a GOT slot (`mov r, [rip+G]`, `call/jmp [rip+G]`, `test`, the ALU
/// operations), as left or as relaxed. `rex`: the relocation says a REX prefix precedes the
/// opcode.
fn decode_got_load(
    original: &[u8],
    copied: &[u8],
    o: usize,
    place: u64,
    a: u64,
    data: &Memory,
    rex: bool,
) -> Result<u64, String> {
    let before =
        |bytes: &[u8], back: usize| o.checked_sub(back).and_then(|i| bytes.get(i).copied());
    let disp = |at: usize| -> Option<u64> {
        copied
            .get(at..at + 4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as i64 as u64)
    };
    let (op, modrm) = (before(original, 2), before(original, 1));
    let (new_op, new_modrm) = (before(copied, 2), before(copied, 1));
    if (new_op, new_modrm) == (op, modrm) {
        // Unrelaxed: the field addresses the slot.
        let g = place.wrapping_add(disp(o).ok_or("short")?).wrapping_sub(a);
        return data
            .u64_at(g)
            .ok_or_else(|| format!("GOT slot {g:#x} is outside the trace's data"));
    }
    // A relaxed form is only right if the field was the instruction's last four bytes.
    if a != (-4i64) as u64 {
        return Err(format!("relaxed although the addend is {}", a as i64));
    }
    let end = place + 4;
    match (op, modrm, new_op, new_modrm) {
        // mov r, [rip+G] -> lea r, [rip+S]: same register, same REX.
        (Some(0x8b), Some(m), Some(0x8d), Some(n)) if m == n => {
            Ok(end.wrapping_add(disp(o).ok_or("short")?))
        }
        // mov/test/ALU r, [rip+G] -> the same operation on the register with an imm32.
        (Some(op), Some(m), Some(new), Some(n))
            if immediate_form(op).is_some_and(|f| f.0 == new) =>
        {
            let digit = immediate_form(op).unwrap().1;
            decode_register_immediate(original, copied, o, m, n, digit, rex).map_err(str::to_string)
        }
        // call [rip+G] -> addr32 call rel32.
        (Some(0xff), Some(0x15), Some(0x67), Some(0xe8)) => {
            Ok(end.wrapping_add(disp(o).ok_or("short")?))
        }
        // jmp [rip+G] -> jmp rel32; nop.
        (Some(0xff), Some(0x25), Some(0xe9), _) => {
            if copied.get(o + 3) != Some(&0x90) {
                return Err("relaxed jmp is not followed by a nop".into());
            }
            Ok((place + 3).wrapping_add(disp(o - 1).ok_or("short")?))
        }
        _ => Err(format!(
            "instruction bytes {op:02x?} {modrm:02x?} became {new_op:02x?} {new_modrm:02x?}"
        )),
    }
}

/// The opcode and `/digit` of the register-immediate form of a RIP-relative `op r, [rip+G]`
/// (Intel SDM): `mov` (8B) is `C7 /0`, `test` (85) is `F7 /0`, and the ALU operations
/// `03 0B 13 1B 23 2B 33 3B` are `81 /0`..`81 /7`.
fn immediate_form(opcode: u8) -> Option<(u8, u8)> {
    match opcode {
        0x8b => Some((0xc7, 0)),
        0x85 => Some((0xf7, 0)),
        op if op & 0xc7 == 0x03 => Some((0x81, op >> 3 & 7)),
        _ => None,
    }
}

/// `op r, [rip+G]` relaxed to `op r, imm32`: the register, the operation and the operand
/// size must be kept, and the operand is the immediate extended as the CPU does.
fn decode_register_immediate(
    original: &[u8],
    copied: &[u8],
    o: usize,
    modrm: u8,
    new_modrm: u8,
    digit: u8,
    has_rex: bool,
) -> Result<u64, &'static str> {
    if new_modrm & 0xf8 != 0xc0 | digit << 3 {
        return Err("relaxed instruction is not the register form of its operation");
    }
    let rex = |bytes: &[u8]| {
        o.checked_sub(3)
            .and_then(|i| bytes.get(i).copied())
            .filter(|b| has_rex && b & 0xf0 == 0x40)
            .unwrap_or(0)
    };
    let (old_rex, new_rex) = (rex(original), rex(copied));
    let old_reg = ((modrm >> 3) & 7) | (old_rex & 0x4) << 1;
    let new_reg = (new_modrm & 7) | (new_rex & 0x1) << 3;
    if old_reg != new_reg {
        return Err("relaxed instruction uses another register");
    }
    if old_rex & 0x8 != new_rex & 0x8 {
        return Err("relaxed instruction changed the operand size");
    }
    let imm = i32::from_le_bytes(copied[o..o + 4].try_into().unwrap());
    Ok(if new_rex & 0x8 != 0 {
        imm as i64 as u64
    } else if original.get(o - 2) == Some(&0x8b) {
        // A 32-bit `mov` zero-extends into the full register.
        imm as u32 as u64
    } else {
        return Err("a 32-bit operation relaxed to an immediate");
    })
}
