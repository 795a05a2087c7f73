//! What the verifier, the scan and the compiler read of an opcode, whatever the stencil set:
//! one row per opcode byte ([`SHAPES`], built at compile time from `insn::decode_opcode`),
//! so that a pass over a program is a table read per instruction, not a decode.

use crate::insn::{decode_opcode, Kind, Width};

/// Which eBPF register a member's D or S is, read from an instruction's word `w` as
/// `((w >> shift) & mask) + add`: the dst or src field, r0, r1, or `NO_REG` (none), without
/// a branch or a table per instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Role {
    shift: u8,
    mask: u8,
    add: u8,
}

/// The register of a member's D or S of role "none": its place is the frame, and no
/// member reads it (r15: no verified program names it).
const NO_REG: usize = 15;

impl Role {
    pub const NONE: Role = Role::fixed(NO_REG as u8);
    pub const DST: Role = Role::field(8);
    pub const SRC: Role = Role::field(12);
    pub const R0: Role = Role::fixed(0);
    pub const R1: Role = Role::fixed(1);

    const fn field(shift: u8) -> Role {
        Role {
            shift,
            mask: 15,
            add: 0,
        }
    }

    const fn fixed(r: u8) -> Role {
        Role {
            shift: 0,
            mask: 0,
            add: r,
        }
    }

    /// The register of instruction word `w` in this role (0..=15).
    #[inline(always)]
    pub fn of(self, w: u64) -> usize {
        (((w >> self.shift) as usize & usize::from(self.mask)) + usize::from(self.add)) & 15
    }
}

/// What the compiler does with an instruction besides pushing its member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Only the member.
    Plain,
    /// JA and the conditional jumps: the member jumps to `off`'s instruction.
    Jump,
    /// LDX: the member jumps to a fault exit after the program.
    Load,
    /// ST and STX: likewise.
    Store,
    /// LD_DW: a 64-bit immediate from two instructions.
    LdDw,
    /// LE/BE: the member by width ([`Table::end`]).
    End,
    /// CALL: a helper's or a local call.
    Call,
    /// EXIT.
    Exit,
    /// XADD, TAIL_CALL: refused by the verifier.
    Invalid,
}

/// What the verifier checks of an opcode beyond its registers ([`Shape::check`]): nothing,
/// a jump's target, the second half and the register of LD_DW and a store (which may name
/// r10), and the rest (unknown and refused opcodes, LE/BE widths, calls) out of line.
pub(crate) const PLAIN: u8 = 0;
pub(crate) const STORE: u8 = 1;
pub(crate) const JUMP: u8 = 2;
pub(crate) const LD_DW: u8 = 3;
pub(crate) const OTHER: u8 = 4;

/// One opcode's shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub action: Action,
    /// Its D and S registers (those of its members).
    pub d: Role,
    pub s: Role,
    /// Access width in bytes (loads and stores).
    pub width: u8,
    /// What the verifier checks ([`PLAIN`] .. [`OTHER`]).
    pub check: u8,
    /// The destination registers the verifier needs to check nothing more for (a bit per
    /// register): r0..r9, and r10 for a store; none where it checks more ([`LD_DW`],
    /// [`OTHER`]).
    pub fast_dst: u16,
}

const fn shape(kind: Option<Kind>) -> Shape {
    const fn src(reg: bool) -> Role {
        if reg {
            Role::SRC
        } else {
            Role::NONE
        }
    }
    let (action, d, s, width, check) = match kind {
        Some(Kind::Alu { reg, .. }) => (Action::Plain, Role::DST, src(reg), Width::B, PLAIN),
        Some(Kind::Jmp { reg, .. }) => (Action::Jump, Role::DST, src(reg), Width::B, JUMP),
        Some(Kind::LdDw) => (Action::LdDw, Role::DST, Role::NONE, Width::B, LD_DW),
        Some(Kind::LdAbs(_)) => (Action::Plain, Role::R0, Role::NONE, Width::B, PLAIN),
        Some(Kind::LdInd(_)) => (Action::Plain, Role::R0, Role::SRC, Width::B, PLAIN),
        Some(Kind::Ldx(w)) => (Action::Load, Role::DST, Role::SRC, w, PLAIN),
        Some(Kind::St(w)) => (Action::Store, Role::DST, Role::NONE, w, STORE),
        Some(Kind::Stx(w)) => (Action::Store, Role::DST, Role::SRC, w, STORE),
        Some(Kind::End { .. }) => (Action::End, Role::DST, Role::NONE, Width::B, OTHER),
        Some(Kind::Ja) => (Action::Jump, Role::NONE, Role::NONE, Width::B, JUMP),
        Some(Kind::Call) => (Action::Call, Role::R0, Role::R1, Width::B, OTHER),
        Some(Kind::Exit) => (Action::Exit, Role::R0, Role::NONE, Width::B, PLAIN),
        Some(Kind::Xadd | Kind::TailCall) | None => {
            (Action::Invalid, Role::NONE, Role::NONE, Width::B, OTHER)
        }
    };
    Shape {
        action,
        d,
        s,
        width: width.bytes() as u8,
        check,
        fast_dst: match check {
            PLAIN | JUMP => 0x3ff,
            STORE => 0x7ff,
            _ => 0,
        },
    }
}

/// Every opcode byte's shape.
pub(crate) static SHAPES: [Shape; 256] = {
    let mut t = [shape(None); 256];
    let mut i = 0;
    while i < 256 {
        t[i] = shape(decode_opcode(i as u8));
        i += 1;
    }
    t
};
