//! What the verifier, the scan and the compiler read of an opcode, whatever the stencil set:
//! one row per opcode byte ([`SHAPES`], built at compile time from `insn::decode_opcode`),
//! so that a pass over a program is a table read per instruction, not a decode.

use crate::insn::{decode_opcode, Kind, Width};

/// Which eBPF register a member's D (`SHIFT` 8) or S (`SHIFT` 12) is, of an instruction's
/// word `w`: `((w >> SHIFT) & mask) | fixed`, the dst or src field, r0, r1, or `NO_REG`
/// (none), without a branch or a table per instruction. A pass reads both roles at once
/// ([`Regs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Role<const SHIFT: u32> {
    mask: u8,
    fixed: u8,
}

/// The role of a member's D register: the dst field or a fixed register.
pub(crate) type DRole = Role<8>;
/// The role of a member's S register: the src field or a fixed register.
pub(crate) type SRole = Role<12>;

/// The register of a member's D or S of role "none": its place is the frame, and no
/// member reads it (r15: no verified program names it).
const NO_REG: usize = 15;

impl<const SHIFT: u32> Role<SHIFT> {
    pub const NONE: Self = Self::fixed(NO_REG as u8);
    pub const R0: Self = Self::fixed(0);
    pub const R1: Self = Self::fixed(1);
    /// The instruction's field (dst for [`DRole`], src for [`SRole`]).
    pub const FIELD: Self = Role { mask: 15, fixed: 0 };

    const fn fixed(r: u8) -> Self {
        Role { mask: 0, fixed: r }
    }
}

/// Both roles of an opcode at once, on the instruction's register byte (`dst | src << 4`):
/// `(byte & mask) | fixed` holds D's register in its low and S's in its high four bits
/// (a pass reads both with one load of the pair and no shift of the word per role).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Regs {
    mask: u8,
    fixed: u8,
}

impl Regs {
    pub const fn of_roles(d: DRole, s: SRole) -> Regs {
        Regs {
            mask: d.mask | s.mask << 4,
            fixed: d.fixed | s.fixed << 4,
        }
    }

    /// The registers (D, S) of instruction word `w`, each 0..=15.
    #[inline(always)]
    pub fn of(self, w: u64) -> (usize, usize) {
        let r = ((w >> 8) as u8 & self.mask) | self.fixed;
        (usize::from(r & 15), usize::from(r >> 4))
    }
}

/// What the compiler does with an instruction besides pushing its member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Only the member.
    Plain,
    /// JA and the conditional jumps: the member jumps to `off`'s instruction.
    Jump,
    /// LDX: the member leaves the trace itself where the access faults (operand `IDX`).
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

/// One opcode's shape. (Aligned to 16 bytes, its 11 rounded up: a pass finds an opcode's
/// with one shift, not two multiply-adds.)
#[derive(Clone, Copy, Debug)]
#[repr(align(16))]
pub(crate) struct Shape {
    pub action: Action,
    /// Its D and S registers (those of its members).
    pub d: DRole,
    pub s: SRole,
    /// Both, as one pass reads them.
    pub regs: Regs,
    /// Access width in bytes (loads and stores).
    pub width: u8,
    /// What the verifier checks ([`PLAIN`] .. [`OTHER`]).
    pub check: u8,
    /// The bit of [`REGS`] that says the verifier need check nothing more of the
    /// instruction's registers: [`REGS_ANY`] (dst r0..r9), [`REGS_STORE`] (also r10); 0 where
    /// it checks more ([`LD_DW`], [`OTHER`]).
    pub fast: u8,
    /// `fast` where the action is `Plain`, `Load`, `Store` or `Exit`, else 0: the verifier's
    /// one test for an instruction it has nothing more to do with (the scan counts nothing
    /// of an access since it is one instance with no target, `Emit::target`, nor of an
    /// EXIT, which every program has: out of line it cost about 40 instructions).
    pub plain: u8,
}

/// [`Shape::fast`] of an opcode the verifier checks as `check`.
const fn fast(check: u8) -> u8 {
    match check {
        PLAIN | JUMP => REGS_ANY,
        STORE => REGS_STORE,
        _ => 0,
    }
}

const fn shape(kind: Option<Kind>) -> Shape {
    const fn src(reg: bool) -> SRole {
        if reg {
            SRole::FIELD
        } else {
            SRole::NONE
        }
    }
    let (action, d, s, width, check) = match kind {
        Some(Kind::Alu { reg, .. }) => (Action::Plain, DRole::FIELD, src(reg), Width::B, PLAIN),
        Some(Kind::Jmp { reg, .. }) => (Action::Jump, DRole::FIELD, src(reg), Width::B, JUMP),
        Some(Kind::LdDw) => (Action::LdDw, DRole::FIELD, SRole::NONE, Width::B, LD_DW),
        Some(Kind::LdAbs(_)) => (Action::Plain, DRole::R0, SRole::NONE, Width::B, PLAIN),
        Some(Kind::LdInd(_)) => (Action::Plain, DRole::R0, SRole::FIELD, Width::B, PLAIN),
        Some(Kind::Ldx(w)) => (Action::Load, DRole::FIELD, SRole::FIELD, w, PLAIN),
        Some(Kind::St(w)) => (Action::Store, DRole::FIELD, SRole::NONE, w, STORE),
        Some(Kind::Stx(w)) => (Action::Store, DRole::FIELD, SRole::FIELD, w, STORE),
        Some(Kind::End { .. }) => (Action::End, DRole::FIELD, SRole::NONE, Width::B, OTHER),
        Some(Kind::Ja) => (Action::Jump, DRole::NONE, SRole::NONE, Width::B, JUMP),
        Some(Kind::Call) => (Action::Call, DRole::R0, SRole::R1, Width::B, OTHER),
        Some(Kind::Exit) => (Action::Exit, DRole::R0, SRole::NONE, Width::B, PLAIN),
        Some(Kind::Xadd | Kind::TailCall) | None => {
            (Action::Invalid, DRole::NONE, SRole::NONE, Width::B, OTHER)
        }
    };
    Shape {
        action,
        d,
        s,
        regs: Regs::of_roles(d, s),
        width: width.bytes() as u8,
        check,
        fast: fast(check),
        plain: match action {
            Action::Plain | Action::Load | Action::Store | Action::Exit => fast(check),
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

/// [`REGS`]' bits: the instruction's dst is in r0..r9 and its src in r0..r10 ...
pub(crate) const REGS_ANY: u8 = 1;
/// ... its dst is in r0..r10 (a store may name r10) and its src in r0..r10.
pub(crate) const REGS_STORE: u8 = 2;

/// Per register byte of an instruction (`dst | src << 4`), which of [`REGS_ANY`] and
/// [`REGS_STORE`] hold: the verifier's register checks are one table read and a test.
pub(crate) static REGS: [u8; 256] = {
    let mut t = [0; 256];
    let mut b = 0;
    while b < 256 {
        let (dst, src) = (b & 15, b >> 4);
        if src <= 10 {
            t[b] = if dst <= 9 { REGS_ANY } else { 0 } | if dst <= 10 { REGS_STORE } else { 0 };
        }
        b += 1;
    }
    t
};
