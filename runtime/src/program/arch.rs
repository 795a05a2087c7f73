//! What the stitcher needs to know about the architecture ([`ArchFacts`]): trap byte,
//! tail jump, veneers and branch reach, gathered once so that the stitcher has no `match`
//! on the architecture.

use crate::patch;
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Section};

/// Writes a veneer (its bytes, `veneer_size` of them) that jumps to an address.
pub(crate) type WriteVeneer = fn(&mut [u8], u64);

/// What the stitcher needs to know about the architecture, gathered in one place.
pub(crate) struct ArchFacts {
    /// Byte that fills unused code: a trapping instruction (`int3`; `udf #0` as zeros).
    pub trap: u8,
    /// The jump appended when a trace continues elsewhere, its hole kind, the hole's
    /// offset into it and its addend.
    pub tail_jump: &'static [u8],
    pub tail_kind: HoleKind,
    pub tail_hole_offset: u32,
    pub tail_addend: i64,
    /// Size of one veneer, and how to write one that jumps to an address.
    pub veneer_size: usize,
    pub write_veneer: WriteVeneer,
    /// How far (bytes) a direct branch reaches; used to place chunks near the helpers.
    pub reach: u64,
}

impl ArchFacts {
    pub fn of(arch: Arch) -> ArchFacts {
        // The continuation jump and veneers come from the ISA crate, the one owner of
        // encodings; a trap byte and a branch reach are all that is left per architecture.
        let jump = cpjit_isa::continuation_jump(arch);
        let (trap, write_veneer, reach): (u8, WriteVeneer, u64) = match arch {
            // int3; rel32 reaches ±2 GiB (less a margin for the trace itself).
            Arch::X86_64 => (
                0xcc,
                |out, to| out.copy_from_slice(&patch::x86_64_veneer(to)),
                (1 << 31) - (64 << 20),
            ),
            // udf #0; b/bl reach ±128 MiB.
            Arch::Aarch64 => (
                0x00,
                |out, to| out.copy_from_slice(&patch::aarch64_veneer(to)),
                128 << 20,
            ),
            // An all-zero word is illegal; auipc pairs reach ±2 GiB.
            Arch::Riscv64 => (
                0x00,
                |out, to| out.copy_from_slice(&patch::riscv64_veneer(to)),
                (1 << 31) - (64 << 20),
            ),
        };
        ArchFacts {
            trap,
            tail_jump: jump.bytes,
            tail_kind: jump.kind,
            tail_hole_offset: jump.field_offset as u32,
            tail_addend: jump.addend,
            veneer_size: cpjit_isa::veneer_size(arch),
            write_veneer,
            reach,
        }
    }

    /// The hole of the tail jump placed at `at` in the trace's code.
    pub fn tail_hole(&self, at: u32) -> Hole {
        Hole {
            section: Section::Code,
            offset: at + self.tail_hole_offset,
            kind: self.tail_kind,
            value: HoleValue::Continue,
            addend: self.tail_addend,
        }
    }
}
