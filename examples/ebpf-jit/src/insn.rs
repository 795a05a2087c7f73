//! eBPF instructions: decoding and the opcodes rbpf 0.4 knows.

/// Bytes per instruction.
pub const INSN_SIZE: usize = 8;
/// The most instructions a program may have (rbpf's `PROG_MAX_INSNS`).
pub const PROG_MAX_INSNS: usize = 1_000_000;
/// The stack's size in bytes; r10 starts one past its end.
pub const STACK_SIZE: usize = 512;
/// How far r10 moves down per eBPF-to-eBPF call.
pub const LOCAL_FUNCTION_STACK_SIZE: u64 = 256;
/// How deep eBPF-to-eBPF calls nest.
pub const MAX_CALL_DEPTH: usize = 8;

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub opc: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

/// Instruction `index` of `prog` (whose length is a multiple of 8 past it).
#[inline]
pub fn insn(prog: &[u8], index: usize) -> Insn {
    // One 8-byte load (the compiler and the interpreter decode every instruction).
    let w = u64::from_le_bytes(
        prog[index * INSN_SIZE..(index + 1) * INSN_SIZE]
            .try_into()
            .expect("8 bytes"),
    );
    Insn {
        opc: w as u8,
        dst: (w >> 8) as u8 & 0x0f,
        src: (w >> 12) as u8 & 0x0f,
        off: (w >> 16) as u16 as i16,
        imm: (w >> 32) as u32 as i32,
    }
}

impl Insn {
    /// The instruction's 8 bytes.
    pub fn encode(&self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.opc,
            (self.src << 4) | (self.dst & 0x0f),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }
}

/// An ALU operation (the opcode's high nibble).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    Or,
    And,
    Lsh,
    Rsh,
    Neg,
    Mod,
    Xor,
    Mov,
    Arsh,
}

/// A jump condition (the opcode's high nibble).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Eq,
    Gt,
    Ge,
    Set,
    Ne,
    Sgt,
    Sge,
    Lt,
    Le,
    Slt,
    Sle,
}

/// An access width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    B,
    H,
    W,
    Dw,
}

impl Width {
    pub const fn bytes(self) -> usize {
        match self {
            Width::B => 1,
            Width::H => 2,
            Width::W => 4,
            Width::Dw => 8,
        }
    }
}

/// What an opcode does. `wide` is 64-bit (ALU64, JMP), `reg` a register source (BPF_X).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Alu {
        op: AluOp,
        wide: bool,
        reg: bool,
    },
    /// LE (`to_be == false`) or BE, width in `imm`.
    End {
        to_be: bool,
    },
    LdDw,
    LdAbs(Width),
    LdInd(Width),
    Ldx(Width),
    St(Width),
    Stx(Width),
    Ja,
    Jmp {
        cond: Cond,
        wide: bool,
        reg: bool,
    },
    Call,
    Exit,
    /// Known to rbpf, refused by its verifier.
    Xadd,
    TailCall,
}

const fn width(opc: u8) -> Width {
    match opc & 0x18 {
        0x00 => Width::W,
        0x08 => Width::H,
        0x10 => Width::B,
        _ => Width::Dw,
    }
}

/// The opcodes rbpf 0.4 has a meaning for; `None` for every other byte. A table lookup:
/// the verifier and the compiler decode every instruction more than once.
pub fn decode(opc: u8) -> Option<Kind> {
    DECODED[opc as usize]
}

/// [`decode_opcode`] of every byte.
static DECODED: [Option<Kind>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = decode_opcode(i as u8);
        i += 1;
    }
    t
};

pub(crate) const fn decode_opcode(opc: u8) -> Option<Kind> {
    let reg = opc & 0x08 != 0;
    match opc & 0x07 {
        0x00 => match opc & 0xe0 {
            0x00 if opc == 0x18 => Some(Kind::LdDw),
            0x20 => Some(Kind::LdAbs(width(opc))),
            0x40 => Some(Kind::LdInd(width(opc))),
            _ => None,
        },
        0x01 if opc & 0xe0 == 0x60 => Some(Kind::Ldx(width(opc))),
        0x02 if opc & 0xe0 == 0x60 => Some(Kind::St(width(opc))),
        0x03 if opc & 0xe0 == 0x60 => Some(Kind::Stx(width(opc))),
        0x03 if opc == 0xc3 || opc == 0xdb => Some(Kind::Xadd),
        class @ (0x04 | 0x07) => {
            let wide = class == 0x07;
            let op = match opc & 0xf0 {
                0x00 => AluOp::Add,
                0x10 => AluOp::Sub,
                0x20 => AluOp::Mul,
                0x30 => AluOp::Div,
                0x40 => AluOp::Or,
                0x50 => AluOp::And,
                0x60 => AluOp::Lsh,
                0x70 => AluOp::Rsh,
                0x80 if !reg => AluOp::Neg,
                0x90 => AluOp::Mod,
                0xa0 => AluOp::Xor,
                0xb0 => AluOp::Mov,
                0xc0 => AluOp::Arsh,
                0xd0 if !wide => return Some(Kind::End { to_be: reg }),
                _ => return None,
            };
            Some(Kind::Alu { op, wide, reg })
        }
        class @ (0x05 | 0x06) => {
            let wide = class == 0x05;
            let cond = match opc & 0xf0 {
                0x00 if opc == 0x05 => return Some(Kind::Ja),
                0x80 if opc == 0x85 => return Some(Kind::Call),
                0x80 if opc == 0x8d => return Some(Kind::TailCall),
                0x90 if opc == 0x95 => return Some(Kind::Exit),
                0x10 => Cond::Eq,
                0x20 => Cond::Gt,
                0x30 => Cond::Ge,
                0x40 => Cond::Set,
                0x50 => Cond::Ne,
                0x60 => Cond::Sgt,
                0x70 => Cond::Sge,
                0xa0 => Cond::Lt,
                0xb0 => Cond::Le,
                0xc0 => Cond::Slt,
                0xd0 => Cond::Sle,
                _ => return None,
            };
            Some(Kind::Jmp { cond, wide, reg })
        }
        _ => None,
    }
}

/// The opcode of `kind` (the inverse of [`decode`]).
pub fn encode_kind(kind: Kind) -> u8 {
    let w = |w: Width| match w {
        Width::W => 0x00,
        Width::H => 0x08,
        Width::B => 0x10,
        Width::Dw => 0x18,
    };
    let x = |reg: bool| if reg { 0x08 } else { 0x00 };
    match kind {
        Kind::Alu { op, wide, reg } => {
            let hi = match op {
                AluOp::Add => 0x00,
                AluOp::Sub => 0x10,
                AluOp::Mul => 0x20,
                AluOp::Div => 0x30,
                AluOp::Or => 0x40,
                AluOp::And => 0x50,
                AluOp::Lsh => 0x60,
                AluOp::Rsh => 0x70,
                AluOp::Neg => 0x80,
                AluOp::Mod => 0x90,
                AluOp::Xor => 0xa0,
                AluOp::Mov => 0xb0,
                AluOp::Arsh => 0xc0,
            };
            hi | x(reg) | if wide { 0x07 } else { 0x04 }
        }
        Kind::End { to_be } => 0xd4 | x(to_be),
        Kind::LdDw => 0x18,
        Kind::LdAbs(wd) => 0x20 | w(wd),
        Kind::LdInd(wd) => 0x40 | w(wd),
        Kind::Ldx(wd) => 0x61 | w(wd),
        Kind::St(wd) => 0x62 | w(wd),
        Kind::Stx(wd) => 0x63 | w(wd),
        Kind::Ja => 0x05,
        Kind::Jmp { cond, wide, reg } => {
            let hi = match cond {
                Cond::Eq => 0x10,
                Cond::Gt => 0x20,
                Cond::Ge => 0x30,
                Cond::Set => 0x40,
                Cond::Ne => 0x50,
                Cond::Sgt => 0x60,
                Cond::Sge => 0x70,
                Cond::Lt => 0xa0,
                Cond::Le => 0xb0,
                Cond::Slt => 0xc0,
                Cond::Sle => 0xd0,
            };
            hi | x(reg) | if wide { 0x05 } else { 0x06 }
        }
        Kind::Call => 0x85,
        Kind::Exit => 0x95,
        Kind::Xadd => 0xc3,
        Kind::TailCall => 0x8d,
    }
}
