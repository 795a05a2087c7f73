//! RISC-V (RV64GC): the instruction formats and immediate fields of every RISC-V hole kind,
//! the hi20/lo12 split of a PC-relative distance, the continuation jump (`auipc t1` +
//! `jr t1`, what clang emits for a `musttail` call), a call pair relaxed to `jal` + `nop`
//! and back, `nop` and the veneer.
//!
//! Encodings from the RISC-V Unprivileged ISA (chapter 2, "RV32I Base Integer Instruction
//! Set", and chapter 34, "RV32/64G Instruction Set Listings"); relocation semantics from the
//! RISC-V ELF psABI. Instruction words are 32-bit little endian; the stencils are built
//! without relaxation (`-mno-relax`), so every relocated instruction is a full 32-bit word
//! (compressed instructions only occur where the assembler resolved the offset itself).

use cpjit_model::HoleKind;

/// `addi x0, x0, 0`: the canonical `nop`.
pub const NOP: u32 = 0x0000_0013;

/// `c.nop`: the 2-byte padding a compressed function may end with.
pub const C_NOP: u16 = 0x0001;

/// `auipc t1, 0`: the first half of a `musttail` call and of the veneer.
pub const AUIPC_T1_ZERO: u32 = 0x0000_0317;

/// `jalr x0, 0(t1)` (`jr t1`): the second half of a `musttail` call.
pub const JR_T1_ZERO: u32 = 0x0003_0067;

/// The continuation jump as a stencil ends with it: `auipc t1, 0` + `jr t1`, fields zero,
/// relocated by one `R_RISCV_CALL_PLT`.
pub const TAIL_ZERO: [u8; 8] = {
    let a = AUIPC_T1_ZERO.to_le_bytes();
    let j = JR_T1_ZERO.to_le_bytes();
    [a[0], a[1], a[2], a[3], j[0], j[1], j[2], j[3]]
};

/// `t1` (`x6`): the register the veneer jumps through. It is a temporary that no argument
/// is passed in, and the compiler's own `musttail` sequence already clobbers it between
/// the caller and the callee, so a stencil never has a live value in it at a call or jump.
pub const VENEER_REGISTER: u32 = 6;

/// Size in bytes of [`veneer`]: three instructions, a `nop` so the literal is 8-aligned
/// when the veneer is, and the 8-byte destination.
pub const VENEER_SIZE: usize = 24;

/// Major opcodes (bits 0..7) of the instructions the hole kinds patch.
mod opcode {
    pub const LOAD: u32 = 0x03;
    pub const LOAD_FP: u32 = 0x07;
    pub const OP_IMM: u32 = 0x13;
    pub const AUIPC: u32 = 0x17;
    pub const LUI: u32 = 0x37;
    pub const OP_IMM_32: u32 = 0x1b;
    pub const STORE: u32 = 0x23;
    pub const STORE_FP: u32 = 0x27;
    pub const BRANCH: u32 = 0x63;
    pub const JALR: u32 = 0x67;
    pub const JAL: u32 = 0x6f;
}

/// The 32-bit little-endian instruction at `offset`, if it lies within `bytes`.
pub fn read_insn(bytes: &[u8], offset: u64) -> Option<u32> {
    let o = usize::try_from(offset).ok()?;
    let word = bytes.get(o..o.checked_add(4)?)?;
    Some(u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
}

const fn major(insn: u32) -> u32 {
    insn & 0x7f
}

const fn rd(insn: u32) -> u32 {
    insn >> 7 & 0x1f
}

const fn rs1(insn: u32) -> u32 {
    insn >> 15 & 0x1f
}

const fn funct3(insn: u32) -> u32 {
    insn >> 12 & 7
}

/// `auipc rd, imm20`.
pub const fn is_auipc(insn: u32) -> bool {
    major(insn) == opcode::AUIPC
}

/// `lui rd, imm20`.
pub const fn is_lui(insn: u32) -> bool {
    major(insn) == opcode::LUI
}

/// `addi rd, rs1, imm12` or `addiw rd, rs1, imm12`: what the absolute lo12 of a narrow
/// operand fills.
pub const fn is_addi_or_addiw(insn: u32) -> bool {
    matches!(major(insn), opcode::OP_IMM | opcode::OP_IMM_32) && funct3(insn) == 0
}

/// `jalr rd, imm12(rs1)` (funct3 000).
pub const fn is_jalr(insn: u32) -> bool {
    major(insn) == opcode::JALR && funct3(insn) == 0
}

/// `jal rd, imm20`.
pub const fn is_jal(insn: u32) -> bool {
    major(insn) == opcode::JAL
}

/// `jal x0`: the plain jump (not a call).
pub const fn is_j(insn: u32) -> bool {
    is_jal(insn) && rd(insn) == 0
}

/// A conditional branch: `beq`, `bne`, `blt`, `bge`, `bltu`, `bgeu` (funct3 010 and 011
/// are unallocated).
pub const fn is_branch(insn: u32) -> bool {
    major(insn) == opcode::BRANCH && funct3(insn) != 2 && funct3(insn) != 3
}

/// An instruction whose I-type imm12 a `PCREL_LO12_I` may fill: integer and FP loads,
/// `addi`-class immediates (32 and 64 bits) and `jalr`.
pub const fn is_i_type(insn: u32) -> bool {
    matches!(
        major(insn),
        opcode::LOAD | opcode::LOAD_FP | opcode::OP_IMM | opcode::OP_IMM_32
    ) || is_jalr(insn)
}

/// An integer or FP store, whose S-type imm12 a `PCREL_LO12_S` fills.
pub const fn is_store(insn: u32) -> bool {
    matches!(major(insn), opcode::STORE | opcode::STORE_FP)
}

/// `ld rd, imm12(rs1)`: how a GOT slot is loaded.
pub const fn is_ld(insn: u32) -> bool {
    major(insn) == opcode::LOAD && funct3(insn) == 3
}

/// `auipc rd` followed by `jalr _, _(rd)`: the pair a `R_RISCV_CALL*` relocates.
pub const fn is_call_pair(auipc: u32, jalr: u32) -> bool {
    is_auipc(auipc) && is_jalr(jalr) && rs1(jalr) == rd(auipc)
}

/// `jal rd, offset`: a direct call (`rd` = `ra`) or jump (`rd` = `zero`) within ±1 MiB;
/// `offset` is even and is truncated to 21 bits, as [`insert_j`] does.
pub const fn jal(rd: u32, offset: i32) -> u32 {
    insert_j(opcode::JAL | (rd & 0x1f) << 7, offset)
}

/// A call pair (`auipc rX` + `jalr rd, rX`) whose target is within a `jal`'s reach, relaxed
/// as lld relaxes `R_RISCV_CALL[_PLT]` without compressed instructions: `jal rd, offset`,
/// then a `nop` where lld would delete the `jalr` (code is never moved here). `rX` is no
/// longer written: only the `auipc` of the pair set it, for the `jalr` alone.
pub const fn relaxed_call(rd: u32, offset: i32) -> [u32; 2] {
    [jal(rd, offset), NOP]
}

/// `jal` + `nop`: a call pair as [`relaxed_call`] leaves it.
pub const fn is_relaxed_call(first: u32, second: u32) -> bool {
    is_jal(first) && second == NOP
}

/// The call pair a relaxed call `jal rd` expands back into when its new target is out of
/// the `jal`'s reach, fields zero: `auipc rd` + `jalr rd, 0(rd)` for a call (as clang
/// writes `call`: the `jalr` reads `rd` before writing it), and for a jump (`rd` = `zero`)
/// `auipc t1` + `jr t1`, the continuation jump, through [`VENEER_REGISTER`], which the
/// veneer already clobbers at any call or jump of a stencil.
pub const fn unrelaxed_call(jal: u32) -> [u32; 2] {
    let link = rd(jal);
    let via = if link == 0 { VENEER_REGISTER } else { link };
    [
        opcode::AUIPC | via << 7,
        opcode::JALR | link << 7 | via << 15,
    ]
}

/// Whether `insn` is the instruction class a hole of `kind` patches (for
/// [`HoleKind::RiscvCall`], the `auipc`; [`is_call_pair`] checks both); `Err` carries what
/// was expected, for messages. Non-RISC-V kinds are never a RISC-V instruction's.
pub fn check_class(kind: HoleKind, insn: u32) -> Result<(), &'static str> {
    let (ok, expected) = match kind {
        HoleKind::RiscvCall => (
            is_auipc(insn),
            "auipc followed by jalr through its register",
        ),
        HoleKind::RiscvPcrelHi20 | HoleKind::RiscvGotHi20 => (is_auipc(insn), "auipc"),
        HoleKind::RiscvPcrelLo12I => (
            is_i_type(insn),
            "an I-type instruction (load, addi-class or jalr)",
        ),
        HoleKind::RiscvPcrelLo12S => (is_store(insn), "a store (S-type)"),
        HoleKind::RiscvGotLo12I => (is_ld(insn), "ld"),
        HoleKind::RiscvJal => (is_jal(insn), "jal"),
        HoleKind::RiscvBranch => (is_branch(insn), "a conditional branch (B-type)"),
        HoleKind::RiscvHi20 => (is_lui(insn), "lui"),
        HoleKind::RiscvLo12I => (is_addi_or_addiw(insn), "addi or addiw"),
        _ => (false, "a RISC-V instruction"),
    };
    if ok {
        Ok(())
    } else {
        Err(expected)
    }
}

/// `(hi20, lo12)` with `hi20 << 12 + sign_extend(lo12) == distance`, or `None` if the
/// distance is beyond what `auipc` + a signed 12-bit offset reach
/// (`-2^31 - 2^11 ..= 2^31 - 2^11 - 1`).
pub const fn split_hi20_lo12(distance: i64) -> Option<(u32, u32)> {
    let rounded = distance.wrapping_add(0x800);
    if rounded < i32::MIN as i64 || rounded > i32::MAX as i64 {
        return None;
    }
    Some(((rounded as u32) >> 12, distance as u32 & 0xfff))
}

/// `(hi20, lo12)` of an absolute value for `lui` + `addiw`: `hi20` is bits 12..32 of
/// `value + 0x800`, so that `sign_extend(hi20 << 12) + sign_extend(lo12)` equals `value`
/// modulo 2^32 (and exactly when `value + 0x800` fits a signed 32 bits); `None` if `value`
/// is outside `[-2^31, 2^32)`, where its low 32 bits do not describe it.
pub const fn split_abs_hi20_lo12(value: i64) -> Option<(u32, u32)> {
    if value < i32::MIN as i64 || value > u32::MAX as i64 {
        return None;
    }
    let rounded = value.wrapping_add(0x800) as u64;
    Some(((rounded >> 12) as u32 & 0xf_ffff, value as u32 & 0xfff))
}

/// `auipc` or `lui` with its imm20 field replaced by `hi20`.
pub const fn insert_u(insn: u32, hi20: u32) -> u32 {
    (insn & 0xfff) | (hi20 << 12)
}

/// An I-type instruction with imm[11:0] (bits 20..32) replaced by `lo12`.
pub const fn insert_i(insn: u32, lo12: u32) -> u32 {
    (insn & 0x000f_ffff) | ((lo12 & 0xfff) << 20)
}

/// An S-type instruction with imm[11:5] (bits 25..32) and imm[4:0] (bits 7..12) replaced.
pub const fn insert_s(insn: u32, lo12: u32) -> u32 {
    (insn & 0x01ff_f07f) | ((lo12 >> 5 & 0x7f) << 25) | ((lo12 & 0x1f) << 7)
}

/// `jal` with its scattered imm[20|10:1|11|19:12] replaced by the even offset `offset`
/// (truncated to 21 bits).
pub const fn insert_j(insn: u32, offset: i32) -> u32 {
    let o = offset as u32;
    let imm = (o >> 20 & 1) << 31 | (o >> 1 & 0x3ff) << 21 | (o >> 11 & 1) << 20 | (o & 0xff000);
    (insn & 0xfff) | imm
}

/// A B-type branch with its scattered imm[12|10:5] and imm[4:1|11] replaced by the even
/// offset `offset` (truncated to 13 bits).
pub const fn insert_b(insn: u32, offset: i32) -> u32 {
    let o = offset as u32;
    let imm =
        (o >> 12 & 1) << 31 | (o >> 5 & 0x3f) << 25 | (o >> 1 & 0xf) << 8 | (o >> 11 & 1) << 7;
    (insn & 0x01ff_f07f) | imm
}

/// The signed offset of a `jal` (inverse of [`insert_j`]).
pub const fn decode_j(insn: u32) -> i32 {
    let imm = (insn >> 31 & 1) << 20
        | (insn >> 21 & 0x3ff) << 1
        | (insn >> 20 & 1) << 11
        | (insn & 0xff000);
    ((imm << 11) as i32) >> 11
}

/// The signed offset of a B-type branch (inverse of [`insert_b`]).
pub const fn decode_b(insn: u32) -> i32 {
    let imm = (insn >> 31 & 1) << 12
        | (insn >> 25 & 0x3f) << 5
        | (insn >> 8 & 0xf) << 1
        | (insn >> 7 & 1) << 11;
    ((imm << 19) as i32) >> 19
}

/// Whether `bytes` is exactly one `nop` instruction: `nop` or `c.nop`.
pub fn is_nop(bytes: &[u8]) -> bool {
    bytes == NOP.to_le_bytes() || bytes == C_NOP.to_le_bytes()
}

/// Whether `bytes` is nothing but `nop` words and `c.nop` halfwords (what the assembler
/// pads RISC-V code with).
pub fn is_padding(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    loop {
        match rest {
            [] => return true,
            [a, b, c, d, tail @ ..] if u32::from_le_bytes([*a, *b, *c, *d]) == NOP => rest = tail,
            [a, b, tail @ ..] if u16::from_le_bytes([*a, *b]) == C_NOP => rest = tail,
            _ => return false,
        }
    }
}

/// Checks that `bytes` (the hole's [`HoleKind::width`] bytes) hold the instruction(s) a
/// hole of `kind` patches and zeroes the fields it fills in, as a stencil stores them.
pub fn clear_fields(kind: HoleKind, bytes: &mut [u8]) -> Result<(), &'static str> {
    let first = read_insn(bytes, 0).ok_or("a 4-byte instruction")?;
    if kind == HoleKind::RiscvCall {
        let second = read_insn(bytes, 4).ok_or("an auipc/jalr pair")?;
        if !is_call_pair(first, second) {
            return Err("auipc rX followed by jalr through rX");
        }
        bytes[4..8].copy_from_slice(&insert_i(second, 0).to_le_bytes());
    } else {
        check_class(kind, first)?;
    }
    let cleared = match kind {
        HoleKind::RiscvCall
        | HoleKind::RiscvPcrelHi20
        | HoleKind::RiscvGotHi20
        | HoleKind::RiscvHi20 => insert_u(first, 0),
        HoleKind::RiscvPcrelLo12I | HoleKind::RiscvGotLo12I | HoleKind::RiscvLo12I => {
            insert_i(first, 0)
        }
        HoleKind::RiscvPcrelLo12S => insert_s(first, 0),
        HoleKind::RiscvJal => insert_j(first, 0),
        HoleKind::RiscvBranch => insert_b(first, 0),
        _ => return Err("a RISC-V hole kind"),
    };
    bytes[..4].copy_from_slice(&cleared.to_le_bytes());
    Ok(())
}

/// A veneer reaching any 64-bit address through [`VENEER_REGISTER`]: `auipc t1, 0`,
/// `ld t1, 16(t1)`, `jr t1`, `nop`, then the 8-byte destination (8-aligned when the veneer
/// is). A `jal`/branch or a call pair retargeted here keeps its link register (`ra` for a
/// call), so the callee returns straight to the stencil.
pub fn veneer(target: u64) -> [u8; VENEER_SIZE] {
    const LD_T1_16_T1: u32 = 16 << 20 | VENEER_REGISTER << 15 | 3 << 12 | VENEER_REGISTER << 7 | 3;
    let mut v = [0; VENEER_SIZE];
    let words = [AUIPC_T1_ZERO, LD_T1_16_T1, JR_T1_ZERO, NOP];
    for (i, w) in words.iter().enumerate() {
        v[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    v[16..].copy_from_slice(&target.to_le_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_adds_back_and_stops_at_the_auipc_range() {
        for d in [
            0i64,
            1,
            0x7ff,
            0x800,
            -0x800,
            -0x801,
            0x1234_5678,
            -0x7654_3210,
        ] {
            let (hi, lo) = split_hi20_lo12(d).unwrap();
            let lo = ((lo << 20) as i32 >> 20) as i64;
            assert_eq!(((hi << 12) as i32 as i64) + lo, d, "{d:#x}");
        }
        assert!(split_hi20_lo12(0x7fff_f7ff).is_some());
        assert!(split_hi20_lo12(0x7fff_f800).is_none());
        assert!(split_hi20_lo12(-0x8000_0800).is_some());
        assert!(split_hi20_lo12(-0x8000_0801).is_none());
    }

    /// What `lui rd, hi20` + `addiw rd, rd, lo12` leave in `rd`.
    fn lui_addiw(hi20: u32, lo12: u32) -> i64 {
        let upper = (hi20 << 12) as i32;
        upper.wrapping_add((lo12 << 20) as i32 >> 20) as i64
    }

    #[test]
    fn absolute_split_gives_the_low_32_bits_sign_extended() {
        for v in [
            0i64,
            1,
            0x7ff,
            0x800,
            0xffff,
            -1,
            -0x800,
            -0x801,
            0x7fff_f7ff,
            0x7fff_f800,
            0x7fff_ffff,
            i32::MIN as i64,
            0x8000_0000,
            0xffff_f800,
            0xffff_ffff,
        ] {
            let (hi, lo) = split_abs_hi20_lo12(v).unwrap();
            assert_eq!(lui_addiw(hi, lo), v as i32 as i64, "{v:#x}");
        }
        assert!(split_abs_hi20_lo12(u32::MAX as i64 + 1).is_none());
        assert!(split_abs_hi20_lo12(i32::MIN as i64 - 1).is_none());
    }

    #[test]
    fn scattered_fields_round_trip() {
        let jal = 0x0000_00ef; // jal ra, 0
        for o in [0, 2, -2, 0x7fffe, -0x80000, 0x800, 0x1000] {
            assert_eq!(decode_j(insert_j(jal, o)), o);
            assert_eq!(insert_j(jal, o) & 0xfff, jal);
        }
        let beq = 0x00b5_0063; // beq a0, a1, 0
        for o in [0, 2, -2, 0xffe, -0x1000, 0x800] {
            assert_eq!(decode_b(insert_b(beq, o)), o);
            assert_eq!(insert_b(beq, o) & 0x01ff_f07f, beq);
        }
    }

    /// `jal` as llvm-mc-19 encodes it (`llvm-mc-19 -triple=riscv64 -show-encoding` on
    /// `jal ra, 0xffffe`, `jal zero, -0x100000`, `jal t0, 0x800`, `jal ra, -2`, `j 0`).
    #[test]
    fn jal_matches_llvm_mc() {
        assert_eq!(jal(1, 0xffffe), 0x7fff_f0ef);
        assert_eq!(jal(0, -0x10_0000), 0x8000_006f);
        assert_eq!(jal(5, 0x800), 0x0010_02ef);
        assert_eq!(jal(1, -2), 0xffff_f0ef);
        assert_eq!(jal(0, 0), 0x0000_006f);
        assert_eq!(relaxed_call(1, 0x800), [0x0010_00ef, NOP]);
        assert!(is_relaxed_call(jal(0, 8), NOP));
        assert!(!is_relaxed_call(jal(0, 8), JR_T1_ZERO));
        assert!(!is_relaxed_call(AUIPC_T1_ZERO, NOP));
    }

    /// A relaxed jump expands back to the continuation jump, a relaxed call to `auipc ra` +
    /// `jalr ra, 0(ra)` (llvm-mc-19: `97 00 00 00` and `e7 80 00 00`, what `call` is with its
    /// fields zero).
    #[test]
    fn relaxed_calls_expand_back_to_call_pairs() {
        assert_eq!(unrelaxed_call(jal(0, 0x1234)), [AUIPC_T1_ZERO, JR_T1_ZERO]);
        assert_eq!(unrelaxed_call(jal(1, -0x40)), [0x0000_0097, 0x0000_80e7]);
        let [auipc, jalr] = unrelaxed_call(jal(5, 2));
        assert!(is_call_pair(auipc, jalr));
        assert_eq!((rd(auipc), rd(jalr), rs1(jalr)), (5, 5, 5));
    }

    #[test]
    fn classes() {
        assert!(is_call_pair(AUIPC_T1_ZERO, JR_T1_ZERO));
        assert!(!is_call_pair(0x0000_0097, JR_T1_ZERO)); // auipc ra; jr t1
        assert!(is_j(0x0000_006f));
        assert!(!is_j(0x0000_00ef));
        assert!(is_ld(0x0005_b583)); // ld a1, 0(a1)
        assert!(is_store(0x00b5_3023)); // sd a1, 0(a0)
        assert!(check_class(HoleKind::RiscvBranch, 0x00b5_2063).is_err()); // funct3 010
        assert!(check_class(HoleKind::Abs64, NOP).is_err());
    }

    #[test]
    fn clearing_keeps_registers_and_checks_the_pair() {
        let mut call = [0u8; 8];
        call[..4].copy_from_slice(&0x1234_5317u32.to_le_bytes()); // auipc t1, 0x12345
        call[4..].copy_from_slice(&0x6783_0067u32.to_le_bytes()); // jr 1656(t1)
        clear_fields(HoleKind::RiscvCall, &mut call).unwrap();
        assert_eq!(call, TAIL_ZERO);
        let mut bad = TAIL_ZERO;
        bad[0] = 0x97; // auipc ra: jalr goes through t1, not ra
        assert!(clear_fields(HoleKind::RiscvCall, &mut bad).is_err());
        assert!(is_padding(&[0x13, 0, 0, 0, 0x01, 0]));
        assert!(!is_padding(&[0x13, 0, 0]));
    }

    #[test]
    fn veneer_loads_its_literal_through_t1() {
        let v = veneer(0x1122_3344_5566_7788);
        assert_eq!(&v[4..8], &0x0103_3303u32.to_le_bytes()); // ld t1, 16(t1)
        assert_eq!(&v[16..], &0x1122_3344_5566_7788u64.to_le_bytes());
    }
}
