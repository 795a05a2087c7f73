//! Holes' encodings and values: [`HoleKind`] (one variant per instruction or data
//! encoding, the contract between the object readers' tables and the runtime's patch
//! functions), the AArch64 and operand-range details it carries, and [`HoleValue`] (what
//! fills a hole).

use crate::Arch;
#[cfg(doc)]
use crate::{Stencil, StencilSet};
use core::fmt;

/// How a hole's bytes encode its value: one variant per instruction/data encoding.
///
/// The object readers map every raw relocation type of every supported format to exactly
/// one of these (one table per format); the runtime has one patch function per variant.
/// In the formulas, `S + A` is the resolved value plus addend, `P` the address of the hole,
/// `G` the address of the GOT slot that holds `S`, and `Page(x) = x & !0xfff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HoleKind {
    /// 8 bytes, little endian: `S + A`. (`R_X86_64_64`, `R_AARCH64_ABS64`,
    /// `*_RELOC_UNSIGNED` length 3, `IMAGE_REL_*_ADDR64`.)
    Abs64,
    /// x86-64 RIP-relative 32-bit operand of a data access (`lea`, `mov`, ...): `S + A - P`,
    /// signed 32 bits. (`R_X86_64_PC32`, `X86_64_RELOC_SIGNED*`, `IMAGE_REL_AMD64_REL32*`
    /// on a memory operand.)
    X86Pc32,
    /// x86-64 `call`/`jmp`/`jcc` rel32: `S + A - P`, signed 32 bits; out of range goes
    /// through a veneer. (`R_X86_64_PLT32`, `X86_64_RELOC_BRANCH`, `IMAGE_REL_AMD64_REL32`
    /// after `E8`/`E9`/`0F 8x`.)
    X86Branch32,
    /// x86-64 RIP-relative reference to a GOT slot, in an instruction that is not rewritten:
    /// `G + A - P`. (`R_X86_64_GOTPCREL`, `X86_64_RELOC_GOT`, `IMAGE_REL_AMD64_REL32` against
    /// `__imp_`, where the instruction has no rewrite.)
    X86GotPc32,
    /// x86-64 RIP-relative GOT reference that the runtime may rewrite: `G + A - P`, or, when
    /// `S` allows it, `mov reg, [rip+G]` → `lea reg, [rip+S]` and `call`/`jmp [rip+G]` → a
    /// direct `call`/`jmp`; any other instruction keeps loading through the slot. No REX
    /// prefix is known to precede the opcode, so nothing that needs one is rewritten.
    /// (`R_X86_64_GOTPCRELX`; COFF `REL32` against `__imp_` and Mach-O `GOT` on a `mov`,
    /// `call` or `jmp` without REX prefix, decided by the toolchain from the disassembly.)
    X86GotPc32Relaxable,
    /// As [`HoleKind::X86GotPc32Relaxable`], and the byte before the opcode is the
    /// instruction's REX prefix: with `REX.W`, `mov`, `test` and the ALU operations (`add`,
    /// `or`, `adc`, `sbb`, `and`, `sub`, `xor`, `cmp`) of the slot's value may also become
    /// their `imm32` forms. (`R_X86_64_REX_GOTPCRELX`, `X86_64_RELOC_GOT_LOAD`, which is only
    /// emitted on `movq`; COFF `REL32` against `__imp_` and Mach-O `GOT` on such a use with a
    /// REX prefix, decided by the toolchain from the disassembly.)
    X86RexGotPc32Relaxable,
    /// AArch64 `b`/`bl` imm26: `(S + A - P) >> 2`, ±128 MiB; out of range goes through a
    /// veneer. (`R_AARCH64_CALL26`/`JUMP26`, `ARM64_RELOC_BRANCH26`, `IMAGE_REL_ARM64_BRANCH26`.)
    Aarch64Branch26,
    /// AArch64 `b.cond`/`cbz`/`cbnz` imm19: `(S + A - P) >> 2`, ±1 MiB.
    /// (`R_AARCH64_CONDBR19`, `IMAGE_REL_ARM64_BRANCH19`.)
    Aarch64Branch19,
    /// AArch64 `tbz`/`tbnz` imm14: `(S + A - P) >> 2`, ±32 KiB. (`R_AARCH64_TSTBR14`,
    /// `IMAGE_REL_ARM64_BRANCH14`.)
    Aarch64Branch14,
    /// AArch64 `adrp` immhi:immlo: `Page(S + A) - Page(P)`, ±4 GiB.
    /// (`R_AARCH64_ADR_PREL_PG_HI21`, `ARM64_RELOC_PAGE21`, `IMAGE_REL_ARM64_PAGEBASE_REL21`.)
    Aarch64AdrPage21,
    /// AArch64 `adrp` of a GOT slot: `Page(G + A) - Page(P)`.
    /// (`R_AARCH64_ADR_GOT_PAGE`, `ARM64_RELOC_GOT_LOAD_PAGE21`, COFF `PAGEBASE_REL21`
    /// against `__imp_`.)
    Aarch64AdrGotPage21,
    /// AArch64 `add` imm12: `(S + A) & 0xfff`. (`R_AARCH64_ADD_ABS_LO12_NC`,
    /// `ARM64_RELOC_PAGEOFF12` on `add`, `IMAGE_REL_ARM64_PAGEOFFSET_12A`.)
    Aarch64AddLo12,
    /// AArch64 `ldr`/`str` imm12 scaled by the access size (1, 2, 4, 8 or 16 bytes):
    /// `((S + A) & 0xfff) >> log2(size)`; the low bits must be zero.
    /// (`R_AARCH64_LDST{8,16,32,64,128}_ABS_LO12_NC`, `ARM64_RELOC_PAGEOFF12` on a load or
    /// store, `IMAGE_REL_ARM64_PAGEOFFSET_12L`.)
    Aarch64LdSt8Lo12,
    Aarch64LdSt16Lo12,
    Aarch64LdSt32Lo12,
    Aarch64LdSt64Lo12,
    Aarch64LdSt128Lo12,
    /// AArch64 `ldr xN` of a GOT slot: `((G + A) & 0xfff) >> 3`.
    /// (`R_AARCH64_LD64_GOT_LO12_NC`, `ARM64_RELOC_GOT_LOAD_PAGEOFF12`, COFF `PAGEOFFSET_12L`
    /// against `__imp_`.)
    Aarch64Ld64GotLo12,
    /// AArch64 `movz`/`movk` imm16 with bits 0..16, 16..32, 32..48, 48..64 of `S + A`.
    /// (`R_AARCH64_MOVW_UABS_G0_NC`, `G1_NC`, `G2_NC`, `G3`.)
    Aarch64MovwG0,
    Aarch64MovwG1,
    Aarch64MovwG2,
    Aarch64MovwG3,
    /// RISC-V `auipc rd` + `jalr rs1=rd` pair (8 bytes): `S + A - P` split into hi20 and
    /// lo12, ±2 GiB; out of range goes through a veneer. (`R_RISCV_CALL_PLT`,
    /// `R_RISCV_CALL`.)
    RiscvCall,
    /// RISC-V `auipc` hi20 of `S + A - P`, rounded so that the paired lo12 (signed) adds
    /// back: `(S + A - P + 0x800) >> 12`, ±2 GiB. (`R_RISCV_PCREL_HI20`.)
    RiscvPcrelHi20,
    /// RISC-V I-type imm12 (`addi`, loads, `jalr`) paired with a [`HoleKind::RiscvPcrelHi20`]:
    /// the low 12 bits of `S + A - P`, where the toolchain gives this hole the HI20's value
    /// and folds the distance from the `auipc` to this instruction into `A`, so `S + A - P`
    /// is the HI20's distance. (`R_RISCV_PCREL_LO12_I`, which names the `auipc`'s label.)
    RiscvPcrelLo12I,
    /// As [`HoleKind::RiscvPcrelLo12I`] in an S-type (store) immediate.
    /// (`R_RISCV_PCREL_LO12_S`.)
    RiscvPcrelLo12S,
    /// RISC-V `auipc` hi20 of a GOT slot: `(G + A - P + 0x800) >> 12`.
    /// (`R_RISCV_GOT_HI20`.)
    RiscvGotHi20,
    /// RISC-V I-type imm12 (`ld`) paired with a [`HoleKind::RiscvGotHi20`]: the low 12 bits
    /// of `G + A - P`, the pair's distance folded into `A` as for
    /// [`HoleKind::RiscvPcrelLo12I`]. (`R_RISCV_PCREL_LO12_I` naming a `GOT_HI20`'s label.)
    RiscvGotLo12I,
    /// RISC-V `jal` imm20: `S + A - P`, even, ±1 MiB; out of range goes through a veneer.
    /// (`R_RISCV_JAL`.)
    RiscvJal,
    /// RISC-V `beq`/`bne`/`blt`/`bge`/`bltu`/`bgeu` imm12: `S + A - P`, even, ±4 KiB.
    /// (`R_RISCV_BRANCH`.)
    RiscvBranch,
    /// RISC-V `lui` hi20 of the absolute value `S + A`, rounded so that the paired lo12
    /// (signed) adds back: bits 12..32 of `S + A + 0x800`. With its
    /// [`HoleKind::RiscvLo12I`] the pair yields the low 32 bits of `S + A`, sign-extended
    /// (by an `addiw`, or by `addi` when `S + A` lies in `[-2^31 - 2^11, 2^31 - 2^11)`, the
    /// range `ld.lld` accepts); `S + A` must lie in `[-2^31, 2^32)`, and the narrow operand's
    /// `Operand*` check hole enforces its declared range exactly. Only narrow operands (see
    /// `cpjit.h`) get this kind. (`R_RISCV_HI20`.)
    RiscvHi20,
    /// RISC-V I-type imm12 (`addi`, `addiw`) of the absolute value `S + A`: its low 12 bits,
    /// which the paired [`HoleKind::RiscvHi20`]'s rounding makes a signed offset (alone, an
    /// `addi rd, zero, lo12` yields `S + A` in `-2048..=2047`). Only narrow operands get this
    /// kind. (`R_RISCV_LO12_I`.)
    RiscvLo12I,
    /// x86-64 absolute 32-bit immediate or displacement (4 bytes, little endian): the low 32
    /// bits of `S + A`, which must lie in `[-2^31, 2^32)`; the instruction zero-extends
    /// (`R_X86_64_32`) or sign-extends (`R_X86_64_32S`) it as the compiler chose from the
    /// operand's declared range, which its `Operand*` check hole enforces exactly. Only
    /// narrow operands (see `cpjit.h`) get this kind. (`R_X86_64_32`, `R_X86_64_32S`,
    /// `IMAGE_REL_AMD64_ADDR32`.)
    X86Abs32,
    /// Patches nothing: the operand must be an unsigned 8-bit value (`0..=255`), the range
    /// the template declared for it (`CPJIT_DECLARE_NARROW(NAME, u8)`). Added by the
    /// toolchain once per narrow operand at code offset 0, so the value is checked whatever
    /// instructions the compiler used it in (an immediate, a relaxed GOT load, ...).
    OperandU8,
    /// As [`HoleKind::OperandU8`] for `s8`: `-128..=127` (as a two's complement `u64`).
    OperandS8,
    /// As [`HoleKind::OperandU8`] for `u16`: `0..=65535`.
    OperandU16,
    /// As [`HoleKind::OperandU8`] for `s16`: `-32768..=32767`.
    OperandS16,
    /// As [`HoleKind::OperandU8`] for `u32`: `0..=2^32-1`.
    OperandU32,
    /// As [`HoleKind::OperandU8`] for `s32`: `-2^31..=2^31-1`.
    OperandS32,
    /// x86-64 `movabs r64, imm64` (`REX.W B8+r`): the 8-byte immediate is `S + A`, any
    /// value. What holes become under `-mcmodel=medium -mlarge-data-threshold=0 -fno-pic`,
    /// where every address is materialised in a register. (`R_X86_64_64` in code.)
    X86Imm64,
    /// Patches nothing: marks the set's entry shim as taking `A` (the addend) parameters
    /// instead of the default two ([`DEFAULT_ENTRY_PARAMETERS`]). Added by the toolchain
    /// at code offset 0 of the shim, with value [`HoleValue::Code`], only when the set
    /// declares another count (`[stencils] parameters`); read by
    /// [`Stencil::entry_parameters`], and by the runtime to refuse a typed entry of another
    /// arity.
    EntryParameters,
}

/// How many parameters an entry shim takes when its stencil has no
/// [`HoleKind::EntryParameters`] marker: `(struct cpjit_frame *frame, uint64_t *sp)`.
pub const DEFAULT_ENTRY_PARAMETERS: usize = 2;

impl HoleKind {
    /// Every kind, in declaration order.
    pub const ALL: [HoleKind; 41] = [
        HoleKind::Abs64,
        HoleKind::X86Pc32,
        HoleKind::X86Branch32,
        HoleKind::X86GotPc32,
        HoleKind::X86GotPc32Relaxable,
        HoleKind::X86RexGotPc32Relaxable,
        HoleKind::Aarch64Branch26,
        HoleKind::Aarch64Branch19,
        HoleKind::Aarch64Branch14,
        HoleKind::Aarch64AdrPage21,
        HoleKind::Aarch64AdrGotPage21,
        HoleKind::Aarch64AddLo12,
        HoleKind::Aarch64LdSt8Lo12,
        HoleKind::Aarch64LdSt16Lo12,
        HoleKind::Aarch64LdSt32Lo12,
        HoleKind::Aarch64LdSt64Lo12,
        HoleKind::Aarch64LdSt128Lo12,
        HoleKind::Aarch64Ld64GotLo12,
        HoleKind::Aarch64MovwG0,
        HoleKind::Aarch64MovwG1,
        HoleKind::Aarch64MovwG2,
        HoleKind::Aarch64MovwG3,
        HoleKind::RiscvCall,
        HoleKind::RiscvPcrelHi20,
        HoleKind::RiscvPcrelLo12I,
        HoleKind::RiscvPcrelLo12S,
        HoleKind::RiscvGotHi20,
        HoleKind::RiscvGotLo12I,
        HoleKind::RiscvJal,
        HoleKind::RiscvBranch,
        HoleKind::RiscvHi20,
        HoleKind::RiscvLo12I,
        HoleKind::X86Abs32,
        HoleKind::OperandU8,
        HoleKind::OperandS8,
        HoleKind::OperandU16,
        HoleKind::OperandS16,
        HoleKind::OperandU32,
        HoleKind::OperandS32,
        HoleKind::X86Imm64,
        HoleKind::EntryParameters,
    ];

    /// The variant's name as written in generated code and text dumps.
    pub const fn name(self) -> &'static str {
        match self {
            HoleKind::Abs64 => "Abs64",
            HoleKind::X86Pc32 => "X86Pc32",
            HoleKind::X86Branch32 => "X86Branch32",
            HoleKind::X86GotPc32 => "X86GotPc32",
            HoleKind::X86GotPc32Relaxable => "X86GotPc32Relaxable",
            HoleKind::X86RexGotPc32Relaxable => "X86RexGotPc32Relaxable",
            HoleKind::Aarch64Branch26 => "Aarch64Branch26",
            HoleKind::Aarch64Branch19 => "Aarch64Branch19",
            HoleKind::Aarch64Branch14 => "Aarch64Branch14",
            HoleKind::Aarch64AdrPage21 => "Aarch64AdrPage21",
            HoleKind::Aarch64AdrGotPage21 => "Aarch64AdrGotPage21",
            HoleKind::Aarch64AddLo12 => "Aarch64AddLo12",
            HoleKind::Aarch64LdSt8Lo12 => "Aarch64LdSt8Lo12",
            HoleKind::Aarch64LdSt16Lo12 => "Aarch64LdSt16Lo12",
            HoleKind::Aarch64LdSt32Lo12 => "Aarch64LdSt32Lo12",
            HoleKind::Aarch64LdSt64Lo12 => "Aarch64LdSt64Lo12",
            HoleKind::Aarch64LdSt128Lo12 => "Aarch64LdSt128Lo12",
            HoleKind::Aarch64Ld64GotLo12 => "Aarch64Ld64GotLo12",
            HoleKind::Aarch64MovwG0 => "Aarch64MovwG0",
            HoleKind::Aarch64MovwG1 => "Aarch64MovwG1",
            HoleKind::Aarch64MovwG2 => "Aarch64MovwG2",
            HoleKind::Aarch64MovwG3 => "Aarch64MovwG3",
            HoleKind::RiscvCall => "RiscvCall",
            HoleKind::RiscvPcrelHi20 => "RiscvPcrelHi20",
            HoleKind::RiscvPcrelLo12I => "RiscvPcrelLo12I",
            HoleKind::RiscvPcrelLo12S => "RiscvPcrelLo12S",
            HoleKind::RiscvGotHi20 => "RiscvGotHi20",
            HoleKind::RiscvGotLo12I => "RiscvGotLo12I",
            HoleKind::RiscvJal => "RiscvJal",
            HoleKind::RiscvBranch => "RiscvBranch",
            HoleKind::RiscvHi20 => "RiscvHi20",
            HoleKind::RiscvLo12I => "RiscvLo12I",
            HoleKind::X86Abs32 => "X86Abs32",
            HoleKind::OperandU8 => "OperandU8",
            HoleKind::OperandS8 => "OperandS8",
            HoleKind::OperandU16 => "OperandU16",
            HoleKind::OperandS16 => "OperandS16",
            HoleKind::OperandU32 => "OperandU32",
            HoleKind::OperandS32 => "OperandS32",
            HoleKind::X86Imm64 => "X86Imm64",
            HoleKind::EntryParameters => "EntryParameters",
        }
    }

    /// Parses a name produced by [`HoleKind::name`].
    pub fn from_name(name: &str) -> Option<HoleKind> {
        HoleKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// How many bytes at the hole's offset the patch reads and writes.
    pub const fn width(self) -> usize {
        match self {
            HoleKind::Abs64 | HoleKind::RiscvCall | HoleKind::X86Imm64 => 8,
            HoleKind::EntryParameters
            | HoleKind::OperandU8
            | HoleKind::OperandS8
            | HoleKind::OperandU16
            | HoleKind::OperandS16
            | HoleKind::OperandU32
            | HoleKind::OperandS32 => 0,
            _ => 4,
        }
    }

    /// The hole addresses a GOT slot holding its value rather than the value itself.
    pub const fn uses_got(self) -> bool {
        matches!(
            self,
            HoleKind::X86GotPc32
                | HoleKind::X86GotPc32Relaxable
                | HoleKind::X86RexGotPc32Relaxable
                | HoleKind::Aarch64AdrGotPage21
                | HoleKind::Aarch64Ld64GotLo12
                | HoleKind::RiscvGotHi20
                | HoleKind::RiscvGotLo12I
        )
    }

    /// An x86-64 GOT reference the runtime may relax into a direct or immediate form.
    pub const fn is_relaxable_x86_got(self) -> bool {
        matches!(
            self,
            HoleKind::X86GotPc32Relaxable | HoleKind::X86RexGotPc32Relaxable
        )
    }

    /// A 32-bit absolute field (or half of one) that only a narrow operand may fill: an
    /// address of code, data or a helper never fits in it.
    pub const fn is_narrow_only(self) -> bool {
        matches!(
            self,
            HoleKind::X86Abs32 | HoleKind::RiscvHi20 | HoleKind::RiscvLo12I
        )
    }

    /// A direct branch whose out-of-range target may be reached through a veneer.
    pub const fn is_branch(self) -> bool {
        matches!(
            self,
            HoleKind::X86Branch32
                | HoleKind::Aarch64Branch26
                | HoleKind::Aarch64Branch19
                | HoleKind::Aarch64Branch14
                | HoleKind::RiscvCall
                | HoleKind::RiscvJal
                | HoleKind::RiscvBranch
        )
    }

    /// The architecture whose instructions this kind patches (`None` for plain data).
    pub const fn arch(self) -> Option<Arch> {
        match self {
            HoleKind::Abs64
            | HoleKind::OperandU8
            | HoleKind::OperandS8
            | HoleKind::OperandU16
            | HoleKind::OperandS16
            | HoleKind::OperandU32
            | HoleKind::OperandS32
            | HoleKind::EntryParameters => None,
            HoleKind::X86Abs32
            | HoleKind::X86Imm64
            | HoleKind::X86Pc32
            | HoleKind::X86Branch32
            | HoleKind::X86GotPc32
            | HoleKind::X86GotPc32Relaxable
            | HoleKind::X86RexGotPc32Relaxable => Some(Arch::X86_64),
            HoleKind::RiscvCall
            | HoleKind::RiscvPcrelHi20
            | HoleKind::RiscvPcrelLo12I
            | HoleKind::RiscvPcrelLo12S
            | HoleKind::RiscvGotHi20
            | HoleKind::RiscvGotLo12I
            | HoleKind::RiscvJal
            | HoleKind::RiscvBranch
            | HoleKind::RiscvHi20
            | HoleKind::RiscvLo12I => Some(Arch::Riscv64),
            _ => Some(Arch::Aarch64),
        }
    }

    /// The kind as an AArch64 instruction hole, if it is one (exactly the kinds whose
    /// [`arch`](HoleKind::arch) is AArch64).
    pub const fn aarch64(self) -> Option<Aarch64Hole> {
        Some(match self {
            HoleKind::Aarch64Branch26 => Aarch64Hole::Branch26,
            HoleKind::Aarch64Branch19 => Aarch64Hole::Branch19,
            HoleKind::Aarch64Branch14 => Aarch64Hole::Branch14,
            HoleKind::Aarch64AdrPage21 => Aarch64Hole::AdrPage21,
            HoleKind::Aarch64AdrGotPage21 => Aarch64Hole::AdrGotPage21,
            HoleKind::Aarch64AddLo12 => Aarch64Hole::AddLo12,
            HoleKind::Aarch64LdSt8Lo12 => Aarch64Hole::LdSt8Lo12,
            HoleKind::Aarch64LdSt16Lo12 => Aarch64Hole::LdSt16Lo12,
            HoleKind::Aarch64LdSt32Lo12 => Aarch64Hole::LdSt32Lo12,
            HoleKind::Aarch64LdSt64Lo12 => Aarch64Hole::LdSt64Lo12,
            HoleKind::Aarch64LdSt128Lo12 => Aarch64Hole::LdSt128Lo12,
            HoleKind::Aarch64Ld64GotLo12 => Aarch64Hole::Ld64GotLo12,
            HoleKind::Aarch64MovwG0 => Aarch64Hole::MovwG0,
            HoleKind::Aarch64MovwG1 => Aarch64Hole::MovwG1,
            HoleKind::Aarch64MovwG2 => Aarch64Hole::MovwG2,
            HoleKind::Aarch64MovwG3 => Aarch64Hole::MovwG3,
            _ => return None,
        })
    }
}

/// An AArch64 instruction hole: one of the [`HoleKind`]s `Aarch64*`, for the code that
/// only patches or checks those (the ISA crate's and the runtime's AArch64 modules), so
/// that its matches are exhaustive without listing the other architectures' kinds.
/// [`HoleKind::aarch64`] is the one place that tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Aarch64Hole {
    Branch26,
    Branch19,
    Branch14,
    AdrPage21,
    AdrGotPage21,
    AddLo12,
    LdSt8Lo12,
    LdSt16Lo12,
    LdSt32Lo12,
    LdSt64Lo12,
    LdSt128Lo12,
    Ld64GotLo12,
    MovwG0,
    MovwG1,
    MovwG2,
    MovwG3,
}

/// The value range a template declared for a narrow operand (`CPJIT_DECLARE_NARROW`):
/// the compiler may use the operand as an immediate of that width, so the runtime refuses
/// any other value when it patches (through the operand's [`HoleKind::operand_check`] hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OperandRange {
    U8,
    S8,
    U16,
    S16,
    U32,
    S32,
}

impl OperandRange {
    /// Every range, in declaration order.
    pub const ALL: [OperandRange; 6] = [
        OperandRange::U8,
        OperandRange::S8,
        OperandRange::U16,
        OperandRange::S16,
        OperandRange::U32,
        OperandRange::S32,
    ];

    /// The name used in `cpjit.h` (`CPJIT_DECLARE_NARROW(NAME, u16)`).
    pub const fn name(self) -> &'static str {
        match self {
            OperandRange::U8 => "u8",
            OperandRange::S8 => "s8",
            OperandRange::U16 => "u16",
            OperandRange::S16 => "s16",
            OperandRange::U32 => "u32",
            OperandRange::S32 => "s32",
        }
    }

    /// Parses a name produced by [`OperandRange::name`].
    pub fn from_name(name: &str) -> Option<OperandRange> {
        OperandRange::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The smallest and largest value, as signed 64-bit numbers.
    pub const fn bounds(self) -> (i64, i64) {
        match self {
            OperandRange::U8 => (0, u8::MAX as i64),
            OperandRange::S8 => (i8::MIN as i64, i8::MAX as i64),
            OperandRange::U16 => (0, u16::MAX as i64),
            OperandRange::S16 => (i16::MIN as i64, i16::MAX as i64),
            OperandRange::U32 => (0, u32::MAX as i64),
            OperandRange::S32 => (i32::MIN as i64, i32::MAX as i64),
        }
    }

    /// Whether `value` (a two's complement `u64`, as operands are passed) is in the range.
    pub const fn contains(self, value: u64) -> bool {
        let (lo, hi) = self.bounds();
        let v = value as i64;
        lo <= v && v <= hi
    }

    /// The check hole kind of an operand declared with this range.
    pub const fn check_kind(self) -> HoleKind {
        match self {
            OperandRange::U8 => HoleKind::OperandU8,
            OperandRange::S8 => HoleKind::OperandS8,
            OperandRange::U16 => HoleKind::OperandU16,
            OperandRange::S16 => HoleKind::OperandS16,
            OperandRange::U32 => HoleKind::OperandU32,
            OperandRange::S32 => HoleKind::OperandS32,
        }
    }
}

impl HoleKind {
    /// The declared range a check hole enforces (`None` for every other kind).
    pub const fn operand_check(self) -> Option<OperandRange> {
        match self {
            HoleKind::OperandU8 => Some(OperandRange::U8),
            HoleKind::OperandS8 => Some(OperandRange::S8),
            HoleKind::OperandU16 => Some(OperandRange::U16),
            HoleKind::OperandS16 => Some(OperandRange::S16),
            HoleKind::OperandU32 => Some(OperandRange::U32),
            HoleKind::OperandS32 => Some(OperandRange::S32),
            _ => None,
        }
    }
}

impl fmt::Display for HoleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a hole is filled with when a stencil is instantiated in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HoleValue {
    /// The address of the next instance in the trace (`_JIT_CONTINUE`).
    Continue,
    /// The code address of a jump target, by index into [`Stencil::targets`]
    /// (e.g. `_JIT_JUMP_TARGET`); the caller names an instance or an address for each.
    Target(u16),
    /// A 64-bit operand, by index into [`Stencil::operands`] (e.g. `_JIT_OPERAND0`).
    Operand(u16),
    /// The high 32 bits (`value >> 32`) of the 64-bit operand at this index into
    /// [`Stencil::operands`]: the hole `_JIT_<NAME>_HI` of a halves declaration
    /// (`CPJIT_DECLARE_OPERAND_HALVES(NAME)` in `cpjit.h`), where the operand is `NAME` and
    /// the caller passes it as one 64-bit value. A u32 by construction, so it fits every
    /// narrow (32-bit immediate) hole kind and needs no check hole.
    OperandHigh(u16),
    /// The low 32 bits (`value & 0xffff_ffff`) of the 64-bit operand at this index: the
    /// hole `_JIT_<NAME>_LO` of a halves declaration, as [`HoleValue::OperandHigh`].
    OperandLow(u16),
    /// The address of this instance's own code (references to its own code sections).
    Code,
    /// The address of this instance's own data (references to its own data sections).
    Data,
    /// The address of this instance's cold part (the last [`Stencil::cold_len`] bytes of its
    /// code, which the runtime lays after the trace's hot code): a hot path's branch to its
    /// cold blocks, with the offset into the cold part in the addend.
    Cold,
    /// An external symbol, by index into [`StencilSet::symbols`], resolved through the
    /// caller's symbol table (helper functions, globals).
    Symbol(u16),
}

/// Which bits of a 64-bit operand a hole is filled with: all of them
/// ([`HoleValue::Operand`]) or one 32-bit half ([`HoleValue::OperandHigh`],
/// [`HoleValue::OperandLow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OperandPart {
    Whole,
    High,
    Low,
}

impl OperandPart {
    /// The part of the operand `value`: itself, `value >> 32` or `value & 0xffff_ffff`.
    #[inline]
    pub const fn of(self, value: u64) -> u64 {
        match self {
            OperandPart::Whole => value,
            OperandPart::High => value >> 32,
            OperandPart::Low => value & 0xffff_ffff,
        }
    }

    /// The hole value of this part of operand `index`.
    pub const fn value(self, index: u16) -> HoleValue {
        match self {
            OperandPart::Whole => HoleValue::Operand(index),
            OperandPart::High => HoleValue::OperandHigh(index),
            OperandPart::Low => HoleValue::OperandLow(index),
        }
    }
}

impl HoleValue {
    /// The operand index and part of an operand value (`None` for every other value).
    pub const fn operand(self) -> Option<(u16, OperandPart)> {
        match self {
            HoleValue::Operand(i) => Some((i, OperandPart::Whole)),
            HoleValue::OperandHigh(i) => Some((i, OperandPart::High)),
            HoleValue::OperandLow(i) => Some((i, OperandPart::Low)),
            _ => None,
        }
    }
}

impl fmt::Display for HoleValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoleValue::Continue => f.write_str("continue"),
            HoleValue::Target(i) => write!(f, "target[{i}]"),
            HoleValue::Operand(i) => write!(f, "operand[{i}]"),
            HoleValue::OperandHigh(i) => write!(f, "operand[{i}].hi"),
            HoleValue::OperandLow(i) => write!(f, "operand[{i}].lo"),
            HoleValue::Code => f.write_str("code"),
            HoleValue::Cold => f.write_str("cold"),
            HoleValue::Data => f.write_str("data"),
            HoleValue::Symbol(i) => write!(f, "symbol[{i}]"),
        }
    }
}
