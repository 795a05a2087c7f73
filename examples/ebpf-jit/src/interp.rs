//! The reference interpreter: rbpf 0.4's semantics, written from its documented behaviour,
//! in safe Rust (an access is made through the region slice that holds it).

use crate::helper::HelperMap;
use crate::insn::{
    decode, insn, AluOp, Cond, Kind, Width, LOCAL_FUNCTION_STACK_SIZE, MAX_CALL_DEPTH, STACK_SIZE,
};
use crate::Error;

/// The region holding `[addr, addr + len)` and the offset in it, as rbpf's `check_mem`.
fn find(regions: &[&mut [u8]; 3], addr: u64, len: u64) -> Option<(usize, usize)> {
    let end = addr.checked_add(len)?;
    regions.iter().enumerate().find_map(|(i, r)| {
        let lo = r.as_ptr() as u64;
        (lo <= addr && end <= lo + r.len() as u64).then(|| (i, (addr - lo) as usize))
    })
}

pub fn alu(op: AluOp, wide: bool, d: u64, s: u64) -> u64 {
    if wide {
        match op {
            AluOp::Add => d.wrapping_add(s),
            AluOp::Sub => d.wrapping_sub(s),
            AluOp::Mul => d.wrapping_mul(s),
            AluOp::Div => d.checked_div(s).unwrap_or(0),
            AluOp::Or => d | s,
            AluOp::And => d & s,
            AluOp::Lsh => d << (s & 63),
            AluOp::Rsh => d >> (s & 63),
            AluOp::Neg => d.wrapping_neg(),
            AluOp::Mod => d.checked_rem(s).unwrap_or(d),
            AluOp::Xor => d ^ s,
            AluOp::Mov => s,
            AluOp::Arsh => ((d as i64) >> (s & 63)) as u64,
        }
    } else {
        let (d32, s32) = (d as u32, s as u32);
        let r = match op {
            AluOp::Add => d32.wrapping_add(s32),
            AluOp::Sub => d32.wrapping_sub(s32),
            AluOp::Mul => d32.wrapping_mul(s32),
            AluOp::Div => d32.checked_div(s32).unwrap_or(0),
            AluOp::Or => d32 | s32,
            AluOp::And => d32 & s32,
            AluOp::Lsh => d32 << (s32 & 31),
            AluOp::Rsh => d32 >> (s32 & 31),
            AluOp::Neg => d32.wrapping_neg(),
            // MOD32 by zero keeps all 64 bits of the destination.
            AluOp::Mod if s32 == 0 => return d,
            AluOp::Mod => d32 % s32,
            AluOp::Xor => d32 ^ s32,
            AluOp::Mov => s32,
            AluOp::Arsh => ((d32 as i32) >> (s32 & 31)) as u32,
        };
        u64::from(r)
    }
}

/// Whether condition `c` holds for `d` and `s`. JMP32 (`wide` false) compares the low
/// halves: widened as the condition reads them (sign-extended for the signed compares,
/// zero-extended for the others), they compare as 64-bit values exactly as 32-bit ones.
pub fn cond(c: Cond, wide: bool, d: u64, s: u64) -> bool {
    let (d, s) = if wide {
        (d, s)
    } else {
        let signed = matches!(c, Cond::Sgt | Cond::Sge | Cond::Slt | Cond::Sle);
        let widen = |x: u64| {
            if signed {
                x as u32 as i32 as i64 as u64
            } else {
                u64::from(x as u32)
            }
        };
        (widen(d), widen(s))
    };
    match c {
        Cond::Eq => d == s,
        Cond::Gt => d > s,
        Cond::Ge => d >= s,
        Cond::Set => d & s != 0,
        Cond::Ne => d != s,
        Cond::Sgt => (d as i64) > (s as i64),
        Cond::Sge => (d as i64) >= (s as i64),
        Cond::Lt => d < s,
        Cond::Le => d <= s,
        Cond::Slt => (d as i64) < (s as i64),
        Cond::Sle => (d as i64) <= (s as i64),
    }
}

/// The immediate operand of an ALU or jump instruction as rbpf widens it: sign-extended,
/// except for the unsigned comparisons of JMP (zero-extended); JMP32 and ALU32 use the low
/// 32 bits either way.
pub fn imm_operand(kind: Kind, imm: i32) -> u64 {
    match kind {
        Kind::Jmp {
            cond: Cond::Eq | Cond::Gt | Cond::Ge | Cond::Ne | Cond::Lt | Cond::Le,
            ..
        } => u64::from(imm as u32),
        _ => imm as i64 as u64,
    }
}

pub fn run(
    prog: &[u8],
    helpers: &impl HelperMap,
    mem: &mut [u8],
    mbuff: &mut [u8],
) -> Result<u64, Error> {
    let mut stack = [0u8; STACK_SIZE];
    let mut reg = [0u64; 11];
    reg[10] = stack.as_ptr() as u64 + STACK_SIZE as u64;
    if !mbuff.is_empty() {
        reg[1] = mbuff.as_ptr() as u64;
    } else if !mem.is_empty() {
        reg[1] = mem.as_ptr() as u64;
    }
    let mem_base = mem.as_ptr() as u64;
    let mut regions: [&mut [u8]; 3] = [&mut stack, mem, mbuff];
    let mut calls: Vec<([u64; 4], usize)> = Vec::new();
    let n = prog.len() / 8;
    let mut pc = 0usize;
    loop {
        if pc >= n {
            return Err(Error::FellOffEnd { insn: pc });
        }
        let i = pc;
        let ins = insn(prog, i);
        pc += 1;
        let (dst, src) = (usize::from(ins.dst), usize::from(ins.src));
        let Some(kind) = decode(ins.opc) else {
            return Err(Error::InvalidInstruction { insn: i });
        };
        let load = |regions: &[&mut [u8]; 3], addr: u64, w: Width, check: u64| {
            let (r, o) = find(regions, addr, check).ok_or(Error::OutOfBounds {
                insn: i,
                store: false,
                addr,
                len: check,
            })?;
            let mut b = [0u8; 8];
            b[..w.bytes()].copy_from_slice(&regions[r][o..o + w.bytes()]);
            Ok::<u64, Error>(u64::from_le_bytes(b))
        };
        let store = |regions: &mut [&mut [u8]; 3], addr: u64, w: Width, v: u64| {
            let len = w.bytes() as u64;
            let (r, o) = find(regions, addr, len).ok_or(Error::OutOfBounds {
                insn: i,
                store: true,
                addr,
                len,
            })?;
            regions[r][o..o + w.bytes()].copy_from_slice(&v.to_le_bytes()[..w.bytes()]);
            Ok::<(), Error>(())
        };
        let off = ins.off as i64 as u64;
        match kind {
            Kind::Alu { op, wide, reg: r } => {
                let s = if r {
                    reg[src]
                } else {
                    imm_operand(kind, ins.imm)
                };
                reg[dst] = alu(op, wide, reg[dst], s);
            }
            Kind::End { to_be } => {
                let d = reg[dst];
                reg[dst] = match (ins.imm, to_be) {
                    (16, false) => u64::from(d as u16),
                    (32, false) => u64::from(d as u32),
                    (16, true) => u64::from((d as u16).swap_bytes()),
                    (32, true) => u64::from((d as u32).swap_bytes()),
                    (_, false) => d,
                    (_, true) => d.swap_bytes(),
                };
            }
            Kind::LdDw => {
                let hi = insn(prog, pc).imm as u32;
                pc += 1;
                reg[dst] = u64::from(ins.imm as u32) | (u64::from(hi) << 32);
            }
            Kind::LdAbs(w) => {
                reg[0] = load(
                    &regions,
                    mem_base.wrapping_add(u64::from(ins.imm as u32)),
                    w,
                    8,
                )?
            }
            Kind::LdInd(w) => {
                let a = mem_base
                    .wrapping_add(reg[src])
                    .wrapping_add(u64::from(ins.imm as u32));
                reg[0] = load(&regions, a, w, 8)?;
            }
            Kind::Ldx(w) => {
                reg[dst] = load(&regions, reg[src].wrapping_add(off), w, w.bytes() as u64)?
            }
            Kind::St(w) => store(
                &mut regions,
                reg[dst].wrapping_add(off),
                w,
                ins.imm as i64 as u64,
            )?,
            Kind::Stx(w) => store(&mut regions, reg[dst].wrapping_add(off), w, reg[src])?,
            Kind::Ja => pc = (pc as i64 + i64::from(ins.off)) as usize,
            Kind::Jmp {
                cond: c,
                wide,
                reg: r,
            } => {
                let s = if r {
                    reg[src]
                } else {
                    imm_operand(kind, ins.imm)
                };
                if cond(c, wide, reg[dst], s) {
                    pc = (pc as i64 + i64::from(ins.off)) as usize;
                }
            }
            Kind::Call if ins.src == 0 => {
                let id = ins.imm as u32;
                let h = helpers
                    .helper(id)
                    .ok_or(Error::UnknownHelper { insn: i, id })?;
                reg[0] = h.call(reg[1], reg[2], reg[3], reg[4], reg[5]);
            }
            Kind::Call => {
                if calls.len() >= MAX_CALL_DEPTH {
                    return Err(Error::CallDepth { insn: i });
                }
                calls.push(([reg[6], reg[7], reg[8], reg[9]], pc));
                reg[10] = reg[10].wrapping_sub(LOCAL_FUNCTION_STACK_SIZE);
                pc = (pc as i64 + i64::from(ins.imm)) as usize;
            }
            Kind::Exit => match calls.pop() {
                None => return Ok(reg[0]),
                Some((saved, ret)) => {
                    reg[6..10].copy_from_slice(&saved);
                    reg[10] = reg[10].wrapping_add(LOCAL_FUNCTION_STACK_SIZE);
                    pc = ret;
                }
            },
            Kind::Xadd | Kind::TailCall => return Err(Error::InvalidInstruction { insn: i }),
        }
    }
}
