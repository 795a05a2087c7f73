//! AArch64: the instruction classes and immediate fields of every AArch64 hole kind, the
//! implicit addends COFF stores in them, the GOT-pair relaxation, `b`, `nop` and the veneer.
//!
//! Encodings from the Arm ARM (C4.1, "A64 instruction set encoding"); relocation semantics
//! from the AArch64 ELF psABI. All instruction words are little endian in memory.

use cpjit_model::{Aarch64Hole, HoleKind};

/// `nop`: what AArch64 code is padded with.
pub const NOP: u32 = 0xd503_201f;

/// Whether `bytes` is exactly one `nop` instruction (little-endian).
pub fn is_nop(bytes: &[u8]) -> bool {
    bytes == NOP.to_le_bytes()
}

/// `b .`: an unconditional branch with a zero imm26 field, as bytes.
pub const B_ZERO: [u8; 4] = 0x1400_0000u32.to_le_bytes();

/// `b` with the signed word offset `imm26` (`(target - place) / 4`, truncated to 26 bits).
pub const fn encode_b(imm26: i32) -> u32 {
    0x1400_0000 | (imm26 as u32 & 0x03ff_ffff)
}

/// The 32-bit little-endian instruction at `offset`, if it lies within `bytes`.
pub fn read_insn(bytes: &[u8], offset: u64) -> Option<u32> {
    let o = usize::try_from(offset).ok()?;
    let word = bytes.get(o..o.checked_add(4)?)?;
    Some(u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
}

/// `adrp xN, label`: op = 1, bits 28..24 = 10000.
pub const fn is_adrp(insn: u32) -> bool {
    insn & 0x9f00_0000 == 0x9000_0000
}

/// The destination register of an `adrp` (`None` for any other instruction). An `adrp`
/// reads no register and writes only this one.
pub const fn adrp_rd(insn: u32) -> Option<u32> {
    if is_adrp(insn) {
        Some(insn & 31)
    } else {
        None
    }
}

/// The registers of an `ldr xT, [xN, #imm]` (unsigned offset; `None` for any other
/// instruction): `(T, N)`. It reads only `xN` and writes only `xT`.
pub const fn ldr_x_registers(insn: u32) -> Option<(u32, u32)> {
    if is_ldr_x(insn) {
        Some((insn & 31, insn >> 5 & 31))
    } else {
        None
    }
}

/// `add` (immediate), 32 or 64 bits, not setting flags, unshifted: `sf 0 0 100010 sh=0`.
/// Bit 22 (`sh`) must be clear: a `*_LO12` value is never shifted by 12.
pub const fn is_add_immediate(insn: u32) -> bool {
    insn & 0x7fc0_0000 == 0x1100_0000
}

/// `ldr xT, [xN, #imm12 * 8]` (64-bit, unsigned offset): the form GOT slots are loaded with.
pub const fn is_ldr_x(insn: u32) -> bool {
    insn & 0xffc0_0000 == 0xf940_0000
}

/// Unconditional `b` (not `bl`): the only form of a trailing jump that can be elided.
pub const fn is_b(insn: u32) -> bool {
    insn & 0xfc00_0000 == 0x1400_0000
}

/// `b` or `bl` (imm26).
pub const fn is_b_or_bl(insn: u32) -> bool {
    insn & 0x7c00_0000 == 0x1400_0000
}

/// `b.cond` and `bc.cond` (bit 4 tells them apart), `cbz` and `cbnz` (32 and 64 bits): the
/// imm19 branches.
pub const fn is_branch19(insn: u32) -> bool {
    insn & 0xff00_0000 == 0x5400_0000 || insn & 0x7e00_0000 == 0x3400_0000
}

/// `tbz` and `tbnz`: the imm14 branches.
pub const fn is_branch14(insn: u32) -> bool {
    insn & 0x7e00_0000 == 0x3600_0000
}

/// The hole kind of a direct branch's immediate: `b` and `bl` (imm26), the imm19 branches
/// ([`is_branch19`]), `tbz` and `tbnz` (imm14); `None` for any other instruction.
pub const fn branch_kind(insn: u32) -> Option<HoleKind> {
    if is_b_or_bl(insn) {
        Some(HoleKind::Aarch64Branch26)
    } else if is_branch19(insn) {
        Some(HoleKind::Aarch64Branch19)
    } else if is_branch14(insn) {
        Some(HoleKind::Aarch64Branch14)
    } else {
        None
    }
}

/// `adr`, `adrp` and the loads of a pc-relative literal (`ldr` general-purpose or SIMD&FP,
/// `ldrsw`, `prfm`): the instructions besides branches whose operand is relative to their
/// own address.
pub const fn is_pc_relative_data(insn: u32) -> bool {
    insn & 0x1f00_0000 == 0x1000_0000 || insn & 0x3b00_0000 == 0x1800_0000
}

/// `movz` or `movk` (not `movn`) with shift field `hw`; shifts 32 and 48 need 64 bits.
pub const fn is_movz_movk(insn: u32, hw: u32) -> bool {
    let op = insn & 0x7f80_0000;
    let sf = insn >> 31 == 1;
    (op == 0x5280_0000 || op == 0x7280_0000) && insn >> 21 & 3 == hw && (sf || hw < 2)
}

/// log2 of the access size of a load/store (register, unsigned immediate offset), general
/// purpose or SIMD&FP, including `prfm`; `None` for any other instruction (and for the
/// unallocated SIMD&FP encodings with `opc<1>` set and a size other than 00).
pub const fn ldst_log2_size(insn: u32) -> Option<u32> {
    if insn & 0x3b00_0000 != 0x3900_0000 {
        return None;
    }
    let size = insn >> 30;
    let simd = insn >> 26 & 1 == 1;
    let opc_high = insn >> 23 & 1 == 1;
    match (simd, opc_high) {
        // ldr/str q: size 00 with opc<1> set.
        (true, true) if size == 0 => Some(4),
        (true, true) => None,
        _ => Some(size),
    }
}

/// The `LdSt*Lo12` kind for an access of `1 << log2_size` bytes.
pub const fn ldst_kind(log2_size: u32) -> HoleKind {
    match log2_size {
        0 => HoleKind::Aarch64LdSt8Lo12,
        1 => HoleKind::Aarch64LdSt16Lo12,
        2 => HoleKind::Aarch64LdSt32Lo12,
        3 => HoleKind::Aarch64LdSt64Lo12,
        _ => HoleKind::Aarch64LdSt128Lo12,
    }
}

/// The hole kind of a page-offset relocation that does not name the instruction (Mach-O
/// `PAGEOFF12`, COFF `PAGEOFFSET_12L`), decided by the instruction it sits on.
pub const fn page_offset_kind(insn: u32) -> Option<HoleKind> {
    if is_add_immediate(insn) {
        Some(HoleKind::Aarch64AddLo12)
    } else {
        match ldst_log2_size(insn) {
            Some(size) => Some(ldst_kind(size)),
            None => None,
        }
    }
}

/// Whether `insn` is the instruction class a hole of `kind` patches; `Err` carries what was
/// expected, for messages. Non-AArch64 kinds are never an AArch64 instruction's.
pub fn check_class(kind: HoleKind, insn: u32) -> Result<(), &'static str> {
    let Some(hole) = kind.aarch64() else {
        return Err("an AArch64 instruction");
    };
    let (ok, expected) = match hole {
        Aarch64Hole::Branch26 => (is_b_or_bl(insn), "b or bl"),
        Aarch64Hole::Branch19 => (is_branch19(insn), "b.cond, cbz or cbnz"),
        Aarch64Hole::Branch14 => (is_branch14(insn), "tbz or tbnz"),
        Aarch64Hole::AdrPage21 | Aarch64Hole::AdrGotPage21 => (is_adrp(insn), "adrp"),
        Aarch64Hole::AddLo12 => (is_add_immediate(insn), "add (immediate, unshifted)"),
        Aarch64Hole::LdSt8Lo12 => (ldst_log2_size(insn) == Some(0), LDST_EXPECTED[0]),
        Aarch64Hole::LdSt16Lo12 => (ldst_log2_size(insn) == Some(1), LDST_EXPECTED[1]),
        Aarch64Hole::LdSt32Lo12 => (ldst_log2_size(insn) == Some(2), LDST_EXPECTED[2]),
        Aarch64Hole::LdSt64Lo12 => (ldst_log2_size(insn) == Some(3), LDST_EXPECTED[3]),
        Aarch64Hole::LdSt128Lo12 => (ldst_log2_size(insn) == Some(4), LDST_EXPECTED[4]),
        Aarch64Hole::Ld64GotLo12 => (is_ldr_x(insn), "ldr xN, [xM, #imm] (64-bit load)"),
        Aarch64Hole::MovwG0 => (is_movz_movk(insn, 0), "movz or movk without shift"),
        Aarch64Hole::MovwG1 => (is_movz_movk(insn, 1), "movz or movk with lsl #16"),
        Aarch64Hole::MovwG2 => (is_movz_movk(insn, 2), "64-bit movz or movk with lsl #32"),
        Aarch64Hole::MovwG3 => (is_movz_movk(insn, 3), "64-bit movz or movk with lsl #48"),
    };
    if ok {
        Ok(())
    } else {
        Err(expected)
    }
}

const LDST_EXPECTED: [&str; 5] = [
    "a 1-byte ldr/str (unsigned offset)",
    "a 2-byte ldr/str (unsigned offset)",
    "a 4-byte ldr/str (unsigned offset)",
    "an 8-byte ldr/str (unsigned offset)",
    "a 16-byte ldr/str q (unsigned offset)",
];

/// The bits of the instruction that a hole of `kind` fills in (0 for non-AArch64 kinds).
pub const fn field_mask(kind: HoleKind) -> u32 {
    let Some(hole) = kind.aarch64() else {
        return 0;
    };
    match hole {
        Aarch64Hole::Branch26 => 0x03ff_ffff,
        Aarch64Hole::Branch19 => 0x7_ffff << 5,
        Aarch64Hole::Branch14 => 0x3fff << 5,
        // immlo in bits 29..31, immhi in bits 5..24.
        Aarch64Hole::AdrPage21 | Aarch64Hole::AdrGotPage21 => (3 << 29) | (0x7_ffff << 5),
        // imm12 in bits 10..22 (add and the unsigned-offset loads/stores alike).
        Aarch64Hole::AddLo12
        | Aarch64Hole::LdSt8Lo12
        | Aarch64Hole::LdSt16Lo12
        | Aarch64Hole::LdSt32Lo12
        | Aarch64Hole::LdSt64Lo12
        | Aarch64Hole::LdSt128Lo12
        | Aarch64Hole::Ld64GotLo12 => 0xfff << 10,
        Aarch64Hole::MovwG0 | Aarch64Hole::MovwG1 | Aarch64Hole::MovwG2 | Aarch64Hole::MovwG3 => {
            0xffff << 5
        }
    }
}

/// Clears the field of `kind` in `insn` and inserts `field` (right-aligned: the branch
/// offset in words, the page count, the scaled imm12, the imm16).
pub const fn insert(kind: HoleKind, insn: u32, field: u32) -> u32 {
    let mask = field_mask(kind);
    let placed = match kind {
        // immlo in bits 29..31, immhi in bits 5..24.
        HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64AdrGotPage21 => {
            (field & 3) << 29 | (field >> 2 & 0x7_ffff) << 5
        }
        // Every other field is contiguous and starts at its mask's lowest bit (an empty
        // mask, 32 trailing zeros, takes nothing).
        _ => field << (mask.trailing_zeros() % 32),
    };
    (insn & !mask) | (placed & mask)
}

/// `Page(value) - Page(place)` in pages as the 21-bit `adrp` field, or `None` beyond ±4 GiB.
pub const fn adrp_pages(place: u64, value: u64) -> Option<u32> {
    let distance = (value & !0xfff).wrapping_sub(place & !0xfff) as i64;
    if distance < -(1i64 << 32) || distance >= 1i64 << 32 {
        return None;
    }
    Some((distance >> 12) as u32 & 0x1f_ffff)
}

const fn sign_extend(value: u32, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((value as i64) << shift) >> shift
}

/// The byte addend COFF stores in an `adrp` (immhi:immlo, 21-bit signed).
pub const fn adrp_addend(insn: u32) -> i64 {
    sign_extend(((insn >> 29) & 3) | ((insn >> 3) & 0x1f_fffc), 21)
}

/// The addend COFF stores in a 12-bit immediate: the byte value, scaled by the access size
/// (`log2_size`) for loads and stores.
pub const fn imm12_addend(insn: u32, log2_size: u32) -> i64 {
    (((insn >> 10) & 0xfff) as i64) << log2_size
}

/// The byte offset a branch of `kind` encodes in its immediate (imm26, imm19 or imm14,
/// times 4); 0 for other kinds.
pub const fn branch_addend(insn: u32, kind: HoleKind) -> i64 {
    match kind {
        HoleKind::Aarch64Branch26 => sign_extend(insn & 0x03ff_ffff, 26) * 4,
        HoleKind::Aarch64Branch19 => sign_extend((insn >> 5) & 0x7_ffff, 19) * 4,
        HoleKind::Aarch64Branch14 => sign_extend((insn >> 5) & 0x3fff, 14) * 4,
        _ => 0,
    }
}

/// `movz xD, #imm16`.
pub const fn movz_x(rd: u32, imm16: u32) -> u32 {
    0xd280_0000 | (imm16 & 0xffff) << 5 | (rd & 31)
}

/// `movk xD, #imm16, lsl #16`.
pub const fn movk_x_lsl16(rd: u32, imm16: u32) -> u32 {
    0xf2a0_0000 | (imm16 & 0xffff) << 5 | (rd & 31)
}

/// `adrp xD, <pages>` with the 21-bit page field of [`adrp_pages`].
pub const fn adrp(rd: u32, pages: u32) -> u32 {
    insert(HoleKind::Aarch64AdrPage21, 0x9000_0000 | (rd & 31), pages)
}

/// `add xD, xN, #imm12`.
pub const fn add_x_imm(rd: u32, rn: u32, imm12: u32) -> u32 {
    0x9100_0000 | (imm12 & 0xfff) << 10 | (rn & 31) << 5 | (rd & 31)
}

/// The replacement for a GOT load pair `adrp xN, G` + `ldr xN, [xN, lo12(G)]` (the `adrp`
/// at `adrp_place`) whose slot holds `slot_value`, materializing the value without a load:
/// - `slot_value < 2^16`: `movz xN, #v` + `nop`;
/// - `slot_value < 2^32`: `movz xN, #lo16` + `movk xN, #hi16, lsl #16`;
/// - `Page(slot_value)` within ±4 GiB of `Page(adrp_place)`: `adrp xN, v` +
///   `add xN, xN, #lo12(v)` (lld's relaxation for a non-preemptible symbol).
///
/// `None` when neither fits, when the words are not `adrp` and a 64-bit `ldr`, or when the
/// two do not use one register (`adrp xN` + `ldr xN, [xN, ...]`, N ≠ 31).
pub const fn relax_got_pair(
    adrp_insn: u32,
    ldr: u32,
    adrp_place: u64,
    slot_value: u64,
) -> Option<[u32; 2]> {
    if !is_adrp(adrp_insn) || !is_ldr_x(ldr) {
        return None;
    }
    let reg = adrp_insn & 31;
    // Register 31 would be xzr for adrp but sp for the ldr base.
    if reg == 31 || ldr & 31 != reg || ldr >> 5 & 31 != reg {
        return None;
    }
    if slot_value < 1 << 16 {
        return Some([movz_x(reg, slot_value as u32), NOP]);
    }
    if slot_value < 1 << 32 {
        let (lo, hi) = (slot_value as u32 & 0xffff, (slot_value >> 16) as u32);
        return Some([movz_x(reg, lo), movk_x_lsl16(reg, hi)]);
    }
    match adrp_pages(adrp_place, slot_value) {
        Some(pages) => Some([
            adrp(reg, pages),
            add_x_imm(reg, reg, slot_value as u32 & 0xfff),
        ]),
        None => None,
    }
}

/// A veneer reaching any 64-bit address: `ldr x16, #8` (`0x58000050`), `br x16`
/// (`0xd61f0200`), then the 8-byte target (8-aligned when the veneer is). `x16` is an
/// intra-procedure-call scratch register the procedure-call standard reserves for exactly
/// this, so no live argument is clobbered (CPython's veneer used `x8`: GH-157510).
pub fn veneer(target: u64) -> [u8; crate::VENEER_SIZE] {
    let mut v = [0; crate::VENEER_SIZE];
    v[..4].copy_from_slice(&0x5800_0050u32.to_le_bytes());
    v[4..8].copy_from_slice(&0xd61f_0200u32.to_le_bytes());
    v[8..].copy_from_slice(&target.to_le_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_immediate_excludes_the_shifted_and_flag_setting_forms() {
        // Arm ARM C4.1.92 "Add/subtract (immediate)": sf op S 100010 sh imm12 Rn Rd.
        assert!(is_add_immediate(0x9100_0400)); // add x0, x0, #1
        assert!(is_add_immediate(0x1100_0400)); // add w0, w0, #1
        assert!(!is_add_immediate(0x9140_0400)); // add x0, x0, #1, lsl #12 (sh = 1)
        assert!(!is_add_immediate(0xb100_0400)); // adds x0, x0, #1
        assert!(!is_add_immediate(0xd100_0400)); // sub x0, x0, #1
        assert!(check_class(HoleKind::Aarch64AddLo12, 0x9140_0400).is_err());
    }

    #[test]
    fn decodes_load_store_sizes_including_q_registers() {
        assert_eq!(ldst_log2_size(0x3940_0000), Some(0)); // ldrb w0, [x0]
        assert_eq!(ldst_log2_size(0x7940_0000), Some(1)); // ldrh w0, [x0]
        assert_eq!(ldst_log2_size(0xb940_0000), Some(2)); // ldr w0, [x0]
        assert_eq!(ldst_log2_size(0xf940_0000), Some(3)); // ldr x0, [x0]
        assert_eq!(ldst_log2_size(0x3dc0_0000), Some(4)); // ldr q0, [x0]
        assert_eq!(ldst_log2_size(0x3d80_0000), Some(4)); // str q0, [x0]
        assert_eq!(ldst_log2_size(0xfd40_0000), Some(3)); // ldr d0, [x0]
        assert_eq!(ldst_log2_size(0x7dc0_0000), None); // unallocated: size 01, opc 11
        assert_eq!(ldst_log2_size(0x9100_0000), None); // add x0, x0, #0
        assert_eq!(
            page_offset_kind(0x9100_0000),
            Some(HoleKind::Aarch64AddLo12)
        );
        assert_eq!(page_offset_kind(0xd65f_03c0), None); // ret
    }

    #[test]
    fn move_wide_classes_follow_the_shift() {
        assert!(is_movz_movk(0xd280_0000, 0)); // movz x0, #0
        assert!(is_movz_movk(0xf2a0_0000, 1)); // movk x0, #0, lsl #16
        assert!(is_movz_movk(0xf2c0_0000, 2)); // movk x0, #0, lsl #32
        assert!(!is_movz_movk(0x72c0_0000, 2)); // 32-bit form cannot shift by 32
        assert!(!is_movz_movk(0x9280_0000, 0)); // movn
    }

    #[test]
    fn decodes_coff_implicit_addends() {
        let insn = 0x9000_0000 | (1 << 29) | (2 << 5);
        assert_eq!(adrp_addend(insn), 9);
        let negative = 0x9000_0000 | (3 << 29) | (0x7_ffff << 5);
        assert_eq!(adrp_addend(negative), -1);
        assert_eq!(imm12_addend(0xf940_0000 | (3 << 10), 3), 24);
        assert_eq!(imm12_addend(0x9100_0000 | (5 << 10), 0), 5);
        assert_eq!(branch_addend(0x17ff_ffff, HoleKind::Aarch64Branch26), -4);
        assert_eq!(branch_addend(0x5400_0040, HoleKind::Aarch64Branch19), 8);
    }

    #[test]
    fn insert_replaces_only_the_field() {
        for kind in HoleKind::ALL {
            let mask = field_mask(kind);
            assert_eq!(insert(kind, u32::MAX, 0), !mask, "{kind}");
            assert_eq!(insert(kind, 0, u32::MAX), mask, "{kind}");
        }
        assert_eq!(
            0x97ff_ffff & !field_mask(HoleKind::Aarch64Branch26),
            0x9400_0000
        );
        assert_eq!(adrp(3, 0x1f_ffff), 0xf0ff_ffe3); // adrp x3, -1 page
    }

    #[test]
    fn got_pair_relaxation_picks_the_shortest_form() {
        let (adrp_x1, ldr_x1) = (0x9000_0001, 0xf940_0021);
        assert_eq!(
            relax_got_pair(adrp_x1, ldr_x1, 0, 0x1234),
            Some([0xd282_4681, NOP])
        );
        assert_eq!(
            relax_got_pair(adrp_x1, ldr_x1, 0, 0x5_1234),
            Some([0xd282_4681, 0xf2a0_00a1])
        );
        let far = 0x7f00_0000_1234;
        let [a, b] = relax_got_pair(adrp_x1, ldr_x1, far - 0x5000, far).unwrap();
        assert_eq!((a, b), (adrp(1, 5), add_x_imm(1, 1, 0x234)));
        assert_eq!(relax_got_pair(adrp_x1, ldr_x1, 0, far), None);
        assert_eq!(relax_got_pair(adrp_x1, 0xf940_0022, 0, 1), None); // ldr x2, [x1]
        assert_eq!(relax_got_pair(0x9000_001f, 0xf940_03ff, 0, 1), None); // x31
    }
}
