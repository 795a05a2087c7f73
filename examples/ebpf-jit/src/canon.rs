//! Equivalent instructions for the register places the set has no member for, so that it
//! need not have them (templates/manifest.toml, families `rd` and `rj`):
//!
//! - an ALU op whose source is its destination (`add r2, r2`) becomes an op with an
//!   immediate (`lsh r2, 1`; `sub`/`xor` → `mov 0`; `or`/`and`/`mov` → nothing, or for
//!   ALU32 `and32 r, -1`, which zero-extends): no member with D and S in the same slot;
//! - a jump comparing a register with itself becomes JA (always), nothing (never) or a
//!   compare with 0 (`jset r, r` → `jne r, 0`);
//! - a jump whose destination has a higher place than its source swaps them with the
//!   mirrored condition (`jgt a, b` ≡ `jlt b, a`): members only for D ≤ S.
//!
//! That leaves 16 of 36 members per jump and 31 per such ALU op (the frame's pair stays: two
//! registers both in the frame). The compiler asks only where an opcode's row has
//! no member for the places (one flag per opcode, [`flags`], says what may be rewritten)
//! and rewrites the instruction word, out of line.

use crate::insn::{decode_opcode, AluOp, Kind};
use crate::table::FRAME;

/// What may be rewritten in an opcode: the same register as destination and source.
pub(crate) const SAME: u8 = 1;
/// ...and a destination in a higher place than the source (jumps only).
pub(crate) const SWAPPED: u8 = 2;

/// The opcode's rewrite flags ([`SAME`], [`SWAPPED`]).
pub(crate) const fn flags(opc: u8) -> u8 {
    match decode_opcode(opc) {
        Some(Kind::Jmp { reg: true, .. }) => SAME | SWAPPED,
        Some(Kind::Alu {
            op: AluOp::Add | AluOp::Sub | AluOp::Or | AluOp::And | AluOp::Xor | AluOp::Mov,
            reg: true,
            ..
        }) => SAME,
        _ => 0,
    }
}

/// Whether an opcode of rewrite flags `flags` needs its member for places `d`, `s` (those it
/// is never rewritten at: what the set must have, and all it needs to have).
pub(crate) fn needed(flags: u8, d: usize, s: usize) -> bool {
    let same = flags & SAME != 0 && d == s && d < FRAME;
    let swapped = flags & SWAPPED != 0 && d > s;
    !same && !swapped
}

/// Whether the set needs the helper call for r0 in place `d` and r1 in place `s`, of family
/// `call` with `args` (`Some(ARGS)`) or else of family `rc`: the compiler moves pinned r1, r2
/// and r3 into the slots of their argument registers (3, 4, 2: `emit::natural_arguments`),
/// so r1 is in slot 3 or the frame, and r0 is in none of the slots the others hold.
pub(crate) fn call_needed(args: Option<usize>, d: usize, s: usize) -> bool {
    let args = args.unwrap_or(0);
    let taken = |slot: usize, bit: usize| args & bit != 0 && d == slot;
    (s == 3 || s == FRAME) && (d != s || d == FRAME) && !taken(4, 1) && !taken(2, 2)
}

/// The opcode of LE64, which is the nop (`Table::end`), with its width 64 in the immediate.
const NOP: u64 = 0xd4 | (64 << 32);

/// Instruction word `w` rewritten for `why` ([`SAME`]: its registers are one; [`SWAPPED`]:
/// its destination's place is above its source's), an equivalent instruction whose member
/// the set has. Jumps keep their offset.
#[cold]
#[inline(never)]
pub(crate) fn rewrite(w: u64, why: u8) -> u64 {
    let (opc, hi, class) = (w & 0xff, w & 0xf0, w & 0x07);
    let dst = w & 0xf00;
    let off = w & 0xffff_0000;
    let imm = |v: i32| u64::from(v as u32) << 32;
    let jump = class == 0x05 || class == 0x06;
    if why == SWAPPED {
        // The mirrored condition: gt ↔ lt, ge ↔ le, sgt ↔ slt, sge ↔ sle; the rest agree.
        let mirrored = match hi {
            0x20 => 0xa0,
            0xa0 => 0x20,
            0x30 => 0xb0,
            0xb0 => 0x30,
            0x60 => 0xc0,
            0xc0 => 0x60,
            0x70 => 0xd0,
            0xd0 => 0x70,
            h => h,
        };
        let (d, s) = ((w >> 8) & 15, (w >> 12) & 15);
        return (opc & 0x0f) | mirrored | s << 8 | d << 12 | off | (w & !0xffff_ffff);
    }
    if jump {
        return match hi {
            // Always: eq, ge, le, sge, sle.
            0x10 | 0x30 | 0xb0 | 0x70 | 0xd0 => 0x05 | off,
            // jset r, r: r != 0.
            0x40 => 0x50 | class | dst | off,
            // Never: gt, lt, ne, sgt, slt.
            _ => NOP | dst,
        };
    }
    match hi {
        0x00 => 0x60 | class | dst | imm(1),
        // sub, xor: 0 (in either width).
        0x10 | 0xa0 => 0xb7 | dst,
        // or, and, mov of 64 bits: nothing.
        _ if class == 0x07 => NOP | dst,
        // ALU32's: the low half, zero-extended.
        _ => 0x54 | dst | imm(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Insn = (u8, u8, u8, i16, i32);

    fn word((opc, dst, src, off, imm): Insn) -> u64 {
        u64::from(opc)
            | u64::from(dst) << 8
            | u64::from(src) << 12
            | u64::from(off as u16) << 16
            | u64::from(imm as u32) << 32
    }

    #[test]
    fn rewrites() {
        let cases: [(Insn, u8, Insn); 11] = [
            // jgt r2, r3, +4 ≡ jlt r3, r2, +4 (JMP32 too); jeq is its own mirror.
            ((0x2d, 2, 3, 4, 9), SWAPPED, (0xad, 3, 2, 4, 9)),
            ((0xde, 2, 3, -4, 0), SWAPPED, (0x7e, 3, 2, -4, 0)),
            ((0x1d, 2, 3, 4, 0), SWAPPED, (0x1d, 3, 2, 4, 0)),
            // jge r, r: JA; jne32 r, r: nothing (LE64); jset32 r, r: jne32 r, 0.
            ((0x3d, 2, 2, -3, 0), SAME, (0x05, 0, 0, -3, 0)),
            ((0x5e, 2, 2, 3, 0), SAME, (0xd4, 2, 0, 0, 64)),
            ((0x4e, 2, 2, 3, 0), SAME, (0x56, 2, 0, 3, 0)),
            // add64, add32: lsh 1; xor32: mov 0; mov64: nothing; and32: and32 -1.
            ((0x0f, 4, 4, 0, 0), SAME, (0x67, 4, 0, 0, 1)),
            ((0x0c, 4, 4, 0, 0), SAME, (0x64, 4, 0, 0, 1)),
            ((0xac, 4, 4, 0, 0), SAME, (0xb7, 4, 0, 0, 0)),
            ((0xbf, 4, 4, 0, 0), SAME, (0xd4, 4, 0, 0, 64)),
            ((0x5c, 4, 4, 0, 0), SAME, (0x54, 4, 0, 0, -1)),
        ];
        for (from, why, to) in cases {
            assert_eq!(rewrite(word(from), why), word(to), "{from:x?}");
        }
        assert_eq!(flags(0x0f), SAME);
        assert_eq!(flags(0x2f), 0);
        assert_eq!(flags(0x1e), SAME | SWAPPED);
        assert_eq!(flags(0x15), 0);
        assert_eq!(flags(0x8d), 0);
    }
}
