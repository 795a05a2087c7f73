//! `cpjit-isa`: everything the kit knows about the instructions it patches, in one place
//! per architecture, shared by the toolchain (which reads, classifies and trims stencils)
//! and the runtime (which patches, relaxes and extends them).
//!
//! - [`x86_64`]: the instruction forms around a rel32 field (branch, RIP-relative operand,
//!   GOT load), their relaxations into direct and immediate forms, padding, `jmp rel32`, the
//!   veneer.
//! - [`aarch64`]: instruction classes and immediate fields of every AArch64 hole kind,
//!   implicit addends, the GOT-pair relaxation, `b`, `nop`, the veneer.
//! - [`riscv64`]: the RISC-V instruction formats and immediate fields, the hi20/lo12 split,
//!   the `auipc`+`jr` tail, `nop`, the veneer.
//! - [`continuation_jump`]: the jump to the next instance that the toolchain removes from a
//!   stencil's end and the runtime puts back after a trace's last instance.
//!
//! Everything here is a pure function on instruction words or byte slices: no allocation,
//! no panics on any input, no `unsafe`, and no dependency but the stencil model's
//! vocabulary ([`cpjit_model::HoleKind`]). Encodings follow the Arm ARM (C4.1) and the Intel
//! SDM (Vol. 2), relocation semantics the x86-64 and AArch64 ELF psABIs.
#![no_std]
#![forbid(unsafe_code)]

pub mod aarch64;
pub mod riscv64;
pub mod x86_64;

use cpjit_model::{Arch, HoleKind};

/// Size in bytes of a veneer on x86-64 and AArch64 ([`x86_64::veneer`],
/// [`aarch64::veneer`]); see [`veneer_size`] for every architecture.
pub const VENEER_SIZE: usize = 16;

/// Size in bytes of a veneer on `arch` (RISC-V needs three instructions before its literal).
pub const fn veneer_size(arch: Arch) -> usize {
    match arch {
        Arch::X86_64 | Arch::Aarch64 => VENEER_SIZE,
        Arch::Riscv64 => riscv64::VENEER_SIZE,
    }
}

/// The unconditional jump to the continuation as a stencil ends with it (field zeroed) and
/// as the runtime re-creates it after a continued trace's last instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContinuationJump {
    /// The instruction with its displacement field zero.
    pub bytes: &'static [u8],
    /// The hole kind of its field.
    pub kind: HoleKind,
    /// Where the field starts within `bytes`.
    pub field_offset: usize,
    /// The addend its relocation carries (x86's `-4`: the field ends the instruction).
    pub addend: i64,
}

/// The continuation jump of `arch`: `jmp rel32` on x86-64, `b imm26` on AArch64, `auipc t1`
/// + `jr t1` (clang's `musttail` sequence, one `R_RISCV_CALL_PLT`) on RISC-V.
pub const fn continuation_jump(arch: Arch) -> ContinuationJump {
    match arch {
        Arch::X86_64 => ContinuationJump {
            bytes: &x86_64::JMP_REL32_ZERO,
            kind: HoleKind::X86Branch32,
            field_offset: 1,
            addend: -4,
        },
        Arch::Aarch64 => ContinuationJump {
            bytes: &aarch64::B_ZERO,
            kind: HoleKind::Aarch64Branch26,
            field_offset: 0,
            addend: 0,
        },
        Arch::Riscv64 => ContinuationJump {
            bytes: &riscv64::TAIL_ZERO,
            kind: HoleKind::RiscvCall,
            field_offset: 0,
            addend: 0,
        },
    }
}

/// Whether `bytes` is exactly one whole `nop` instruction of `arch` (what a target file's
/// `nop` key must be).
pub fn is_nop(arch: Arch, bytes: &[u8]) -> bool {
    match arch {
        Arch::X86_64 => x86_64::is_nop(bytes),
        Arch::Aarch64 => aarch64::is_nop(bytes),
        Arch::Riscv64 => riscv64::is_nop(bytes),
    }
}

/// `value - place` as a signed 32-bit displacement, or `None` if it does not fit.
pub fn rel32(place: u64, value: u64) -> Option<i32> {
    i32::try_from(value.wrapping_sub(place) as i64).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_jumps_are_the_plain_unconditional_jumps() {
        let x86 = continuation_jump(Arch::X86_64);
        assert_eq!(x86.bytes, x86_64::encode_jmp_rel32(0));
        assert_eq!(x86.bytes.len() - x86.field_offset, x86.kind.width());
        let a64 = continuation_jump(Arch::Aarch64);
        assert_eq!(a64.bytes, aarch64::encode_b(0).to_le_bytes());
        assert!(aarch64::is_b(aarch64::encode_b(-1)));
    }

    #[test]
    fn nops_are_whole_nop_instructions_only() {
        for (arch, bytes) in [
            (Arch::X86_64, &[0x90][..]),
            (Arch::X86_64, &[0x66, 0x90]),
            (Arch::X86_64, &[0x0f, 0x1f, 0x00]),
            (Arch::X86_64, &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00]),
            (Arch::Aarch64, &[0x1f, 0x20, 0x03, 0xd5]),
            (Arch::Riscv64, &[0x13, 0x00, 0x00, 0x00]),
            (Arch::Riscv64, &[0x01, 0x00]),
        ] {
            assert!(is_nop(arch, bytes), "{arch:?} {bytes:02x?}");
        }
        for (arch, bytes) in [
            (Arch::X86_64, &[0xcc][..]),
            (Arch::X86_64, &[0x90, 0x90]),
            (Arch::X86_64, &[0x0f, 0x1f]),
            (Arch::X86_64, &[0x0f, 0x1f, 0x08]),
            (Arch::X86_64, &[]),
            (Arch::Aarch64, &[0x1f, 0x20, 0x03]),
            (Arch::Aarch64, &[0x90]),
            (Arch::Riscv64, &[0x1f, 0x20, 0x03, 0xd5]),
            (Arch::Riscv64, &[0x00, 0x00]),
        ] {
            assert!(!is_nop(arch, bytes), "{arch:?} {bytes:02x?}");
        }
    }

    #[test]
    fn rel32_is_the_wrapping_signed_distance() {
        assert_eq!(rel32(0x1000, 0x1010), Some(0x10));
        assert_eq!(rel32(0x1010, 0x1000), Some(-0x10));
        assert_eq!(rel32(0, 0x8000_0000), None);
        assert_eq!(rel32(0, u64::MAX), Some(-1));
    }
}
