//! The checks rbpf 0.4's verifier makes, in its order, so that a program is refused here
//! exactly when rbpf refuses it.

use crate::insn::{decode, insn, Kind, INSN_SIZE, PROG_MAX_INSNS};
use crate::scan::{words, Plan, Scan};
use crate::shape::{Action, JUMP, LD_DW, REGS, SHAPES, STORE};
use crate::Error;

fn refuse<T>(insn: Option<usize>, reason: impl Into<String>) -> Result<T, Error> {
    Err(Error::Verifier {
        insn,
        reason: reason.into(),
    })
}

/// Accepts `prog` exactly when rbpf 0.4's `verifier::check` does; on the way, scans it for
/// the compiler (one pass for both).
pub(crate) fn check(prog: &[u8]) -> Result<Plan, Error> {
    if !prog.len().is_multiple_of(INSN_SIZE) {
        return refuse(None, "the program's length is not a multiple of 8 bytes");
    }
    if prog.len() > PROG_MAX_INSNS * INSN_SIZE {
        return refuse(None, format!("more than {PROG_MAX_INSNS} instructions"));
    }
    if prog.is_empty() {
        return refuse(None, "the program is empty");
    }
    let n = prog.len() / INSN_SIZE;
    if insn(prog, n - 1).opc & 0x07 != 0x05 {
        return refuse(
            Some(n - 1),
            "the program does not end with an instruction of class JMP",
        );
    }
    let mut scan = Scan::default();
    let words = words(prog);
    let mut i = 0;
    while i < words.len() {
        i = plain_pairs(words, i, &mut scan);
        let Some(&w) = words.get(i) else { break };
        let w = u64::from_le_bytes(w);
        let shape = &SHAPES[w as usize & 255];
        // One test for the common case, an ALU or memory instruction whose registers are in
        // range; everything else out of line.
        if REGS[(w >> 8) as u8 as usize] & shape.plain == 0 {
            i += special(prog, i, w, &mut scan)?;
            continue;
        }
        scan.count_uses(w, shape);
        i += 1;
    }
    Ok(scan.finish(prog))
}

/// Checks and scans the instructions from `i` on, two at a time, while both are ALU or
/// memory instructions with registers in range (one test for the two); returns where it
/// stopped.
/// (Straight 100: 214 instructions of the verifier's 2,350 less than one at a time.)
#[inline(always)]
fn plain_pairs(words: &[[u8; INSN_SIZE]], mut i: usize, scan: &mut Scan) -> usize {
    // (A pair as one slice: one bounds test for both words.)
    while let Some(&[w, x]) = words.get(i..i + 2) {
        let (w, x) = (u64::from_le_bytes(w), u64::from_le_bytes(x));
        let (shape_w, shape_x) = (&SHAPES[w as usize & 255], &SHAPES[x as usize & 255]);
        // (`plain` is REGS_ANY, REGS_STORE (ST, STX) or 0: the AND of the four is not 0 iff
        // both pass, or 0 for a store beside another instruction, which then takes the
        // test one at a time.)
        let plain = REGS[(w >> 8) as u8 as usize]
            & shape_w.plain
            & REGS[(x >> 8) as u8 as usize]
            & shape_x.plain;
        if plain == 0 {
            break;
        }
        scan.count_uses(w, shape_w);
        scan.count_uses(x, shape_x);
        i += 2;
    }
    i
}

/// Checks and scans instruction `i` (word `w`) but for a plain one with registers in
/// range: the jump's target, then ([`slow`]) everything else, in rbpf's order; returns how
/// many instruction slots it takes.
#[inline(never)]
fn special(prog: &[u8], i: usize, w: u64, scan: &mut Scan) -> Result<usize, Error> {
    let shape = &SHAPES[w as usize & 255];
    if shape.check == JUMP {
        jump(prog, i, i64::from((w >> 16) as i16))?;
    }
    if REGS[(w >> 8) as u8 as usize] & shape.fast == 0 {
        slow(prog, i)?;
    }
    scan.count_uses(w, shape);
    Ok(if shape.action == Action::Plain {
        1
    } else {
        scan.add_special(i, w, shape)
    })
}

/// Jump `i`'s target, `off` instructions after the next.
fn jump(prog: &[u8], i: usize, off: i64) -> Result<(), Error> {
    let n = prog.len() / INSN_SIZE;
    if off == -1 {
        return refuse(Some(i), "infinite loop (a jump to itself)");
    }
    let to = i as i64 + 1 + off;
    if to < 0 || to as usize >= n {
        return refuse(Some(i), format!("jump out of the program, to #{to}"));
    }
    if insn(prog, to as usize).opc == 0 {
        return refuse(
            Some(i),
            format!("jump into the middle of LD_DW #{}", to - 1),
        );
    }
    Ok(())
}

/// Instruction `i`'s checks besides a jump's target, in rbpf's order.
#[cold]
fn slow(prog: &[u8], i: usize) -> Result<(), Error> {
    let n = prog.len() / INSN_SIZE;
    let ins = insn(prog, i);
    // Whether it may name r10 as its destination.
    let store = matches!(SHAPES[usize::from(ins.opc)].check, STORE | LD_DW);
    match decode(ins.opc) {
        None => return refuse(Some(i), format!("unknown opcode {:#04x}", ins.opc)),
        Some(Kind::Xadd) => return refuse(Some(i), "XADD is not supported"),
        Some(Kind::TailCall) => return refuse(Some(i), "TAIL_CALL is not supported"),
        Some(Kind::End { .. }) if !matches!(ins.imm, 16 | 32 | 64) => {
            return refuse(
                Some(i),
                format!("LE/BE of width {} (16, 32 or 64)", ins.imm),
            );
        }
        // The last instruction is of class JMP, so an LD_DW always has a next one.
        Some(Kind::LdDw) if insn(prog, i + 1).opc != 0 => {
            return refuse(Some(i), "incomplete LD_DW (the next opcode is not 0)");
        }
        Some(Kind::Call) => match ins.src {
            0 => {}
            1 => {
                let to = i as i64 + 1 + i64::from(ins.imm);
                if to < 0 || to as usize >= n {
                    return refuse(Some(i), format!("call out of the program, to #{to}"));
                }
            }
            t => return refuse(Some(i), format!("unsupported call type {t}")),
        },
        Some(_) => {}
    }
    if ins.src > 10 {
        return refuse(Some(i), format!("invalid source register r{}", ins.src));
    }
    match (ins.dst, store) {
        (0..=9, _) | (10, true) => Ok(()),
        (10, false) => refuse(Some(i), "cannot write into register r10"),
        (d, _) => refuse(Some(i), format!("invalid destination register r{d}")),
    }
}
