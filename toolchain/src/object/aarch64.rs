//! AArch64 instruction decoding the readers need: which load/store a page-offset relocation
//! sits on, the implicit addends of COFF, and the immediate fields each hole kind owns.

use cpjit_model::HoleKind;

/// The 32-bit little-endian instruction at `offset`, if it fits.
pub fn read_insn(bytes: &[u8], offset: u64) -> Option<u32> {
    let o = usize::try_from(offset).ok()?;
    let word = bytes.get(o..o.checked_add(4)?)?;
    Some(u32::from_le_bytes(word.try_into().ok()?))
}

/// `add` (immediate), 32 or 64 bit, without flags: the target of `*_LO12` on an address.
pub fn is_add_immediate(insn: u32) -> bool {
    insn & 0x7f80_0000 == 0x1100_0000
}

/// `ldr xN, [xM, #imm]` (64-bit unsigned offset): the form GOT page offsets load with.
pub fn is_ldr64_unsigned(insn: u32) -> bool {
    insn & 0xffc0_0000 == 0xf940_0000
}

/// `adrp`.
pub fn is_adrp(insn: u32) -> bool {
    insn & 0x9f00_0000 == 0x9000_0000
}

/// Unconditional `b` (not `bl`): the only form whose trailing jump can be elided.
pub fn is_b(insn: u32) -> bool {
    insn & 0xfc00_0000 == 0x1400_0000
}

/// `b` or `bl`.
pub fn is_b_or_bl(insn: u32) -> bool {
    insn & 0x7c00_0000 == 0x1400_0000
}

/// The word AArch64 assemblers pad code with.
pub const NOP: u32 = 0xd503_201f;

/// log2 of the access size of a load/store with an unsigned 12-bit immediate (integer or
/// SIMD&FP, including 128-bit `q` registers), or `None` for any other instruction.
pub fn ldst_scale(insn: u32) -> Option<u32> {
    if insn & 0x3b00_0000 != 0x3900_0000 {
        return None;
    }
    let size = insn >> 30;
    let simd = insn & (1 << 26) != 0;
    let opc = (insn >> 22) & 3;
    Some(if simd && size == 0 && opc & 2 != 0 {
        4
    } else {
        size
    })
}

/// The `LdSt*Lo12` kind for an access of `1 << scale` bytes.
pub fn ldst_kind(scale: u32) -> HoleKind {
    match scale {
        0 => HoleKind::Aarch64LdSt8Lo12,
        1 => HoleKind::Aarch64LdSt16Lo12,
        2 => HoleKind::Aarch64LdSt32Lo12,
        3 => HoleKind::Aarch64LdSt64Lo12,
        _ => HoleKind::Aarch64LdSt128Lo12,
    }
}

/// The hole kind of a page-offset relocation (Mach-O `PAGEOFF12`, COFF `PAGEOFFSET_12L`)
/// decided by the instruction it sits on.
pub fn page_offset_kind(insn: u32) -> Option<HoleKind> {
    if is_add_immediate(insn) {
        Some(HoleKind::Aarch64AddLo12)
    } else {
        ldst_scale(insn).map(ldst_kind)
    }
}

/// The bits of the instruction that a hole of `kind` fills in.
pub fn field_mask(kind: HoleKind) -> u32 {
    match kind {
        HoleKind::Aarch64Branch26 => 0x03ff_ffff,
        HoleKind::Aarch64Branch19 => 0x7_ffff << 5,
        HoleKind::Aarch64Branch14 => 0x3fff << 5,
        HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64AdrGotPage21 => (3 << 29) | (0x7_ffff << 5),
        HoleKind::Aarch64AddLo12
        | HoleKind::Aarch64LdSt8Lo12
        | HoleKind::Aarch64LdSt16Lo12
        | HoleKind::Aarch64LdSt32Lo12
        | HoleKind::Aarch64LdSt64Lo12
        | HoleKind::Aarch64LdSt128Lo12
        | HoleKind::Aarch64Ld64GotLo12 => 0xfff << 10,
        HoleKind::Aarch64MovwG0
        | HoleKind::Aarch64MovwG1
        | HoleKind::Aarch64MovwG2
        | HoleKind::Aarch64MovwG3 => 0xffff << 5,
        _ => 0,
    }
}

fn sign_extend(value: u32, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((value as i64) << shift) >> shift
}

/// The byte addend COFF stores in an `adrp` (immhi:immlo, 21-bit signed).
pub fn adrp_addend(insn: u32) -> i64 {
    sign_extend(((insn >> 29) & 3) | ((insn >> 3) & 0x1f_fffc), 21)
}

/// The addend COFF stores in a 12-bit immediate: the byte value, scaled by the access size
/// for loads and stores.
pub fn imm12_addend(insn: u32, scale: u32) -> i64 {
    (((insn >> 10) & 0xfff) as i64) << scale
}

/// The byte offset a branch encodes in its immediate (imm26, imm19 or imm14, times 4).
pub fn branch_addend(insn: u32, kind: HoleKind) -> i64 {
    match kind {
        HoleKind::Aarch64Branch26 => sign_extend(insn & 0x03ff_ffff, 26) * 4,
        HoleKind::Aarch64Branch19 => sign_extend((insn >> 5) & 0x7_ffff, 19) * 4,
        HoleKind::Aarch64Branch14 => sign_extend((insn >> 5) & 0x3fff, 14) * 4,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_load_store_sizes_including_q_registers() {
        assert_eq!(ldst_scale(0x3940_0000), Some(0)); // ldrb w0, [x0]
        assert_eq!(ldst_scale(0x7940_0000), Some(1)); // ldrh w0, [x0]
        assert_eq!(ldst_scale(0xb940_0000), Some(2)); // ldr w0, [x0]
        assert_eq!(ldst_scale(0xf940_0000), Some(3)); // ldr x0, [x0]
        assert_eq!(ldst_scale(0x3dc0_0000), Some(4)); // ldr q0, [x0]
        assert_eq!(ldst_scale(0x3d80_0000), Some(4)); // str q0, [x0]
        assert_eq!(ldst_scale(0xfd40_0000), Some(3)); // ldr d0, [x0]
        assert_eq!(ldst_scale(0x9100_0000), None); // add x0, x0, #0
        assert_eq!(
            page_offset_kind(0x9100_0000),
            Some(HoleKind::Aarch64AddLo12)
        );
        assert_eq!(page_offset_kind(0xd65f_03c0), None); // ret
    }

    #[test]
    fn decodes_coff_implicit_addends() {
        // adrp x0, #0x5000 (immlo = 1, immhi = 2: 0b1001 pages)... as a byte value: COFF
        // stores the raw byte offset, not pages.
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
    fn field_masks_cover_only_immediates() {
        assert_eq!(
            0x97ff_ffff & !field_mask(HoleKind::Aarch64Branch26),
            0x9400_0000
        );
        assert_eq!(
            0xf0ff_fff0 & !field_mask(HoleKind::Aarch64AdrPage21),
            0x9000_0010
        );
        assert_eq!(
            0xf97f_fc00 & !field_mask(HoleKind::Aarch64Ld64GotLo12),
            0xf940_0000
        );
    }
}
