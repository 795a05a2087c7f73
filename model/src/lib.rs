//! The normalized stencil model, shared by the toolchain (which produces it from object
//! files) and the runtime (which copies and patches it into executable memory).
//!
//! A *stencil* is the machine code of one template function plus the data it reads, with
//! *holes*: places whose bytes are filled in when the stencil is instantiated. Each hole has
//! an encoding ([`HoleKind`], decided by the relocation type it came from) and a value
//! ([`HoleValue`], decided by the symbol it referred to).
//!
//! Architecture invariant: this crate has no dependencies and no `unsafe`. The generated
//! stencil crates contain nothing but `static` items of these types, so they build anywhere
//! without LLVM, clang or an object-file reader. All types borrow their storage (`'a`), so a
//! generated crate uses `Stencil<'static>` while the toolchain builds views over its own
//! buffers.
#![no_std]
#![forbid(unsafe_code)]

use core::fmt;

pub mod format;
mod frame;
mod host;
pub use frame::{
    FrameFunction, FrameLayout, FrameRow, FrameSave, StencilFrame, X64_DWARF_XMM0,
    X64_UNWIND_DWARF_REGISTERS,
};
pub use host::{Host, Os};

/// Which byte image of the stencil a hole (or a relocation) lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// The stencil's machine code (mapped read + execute).
    Code,
    /// The stencil's data: read-only data, writable data and zero-fill, concatenated
    /// (mapped read + write, never execute).
    Data,
}

impl Section {
    pub const fn name(self) -> &'static str {
        match self {
            Section::Code => "code",
            Section::Data => "data",
        }
    }
}

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

/// One hole: where, how it is encoded, what fills it, and the constant added to the value.
///
/// For GOT kinds ([`HoleKind::uses_got`]) the instruction addresses a GOT slot that holds
/// `value` (without the addend), and `addend` is added to the slot's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hole {
    pub section: Section,
    pub offset: u32,
    pub kind: HoleKind,
    pub value: HoleValue,
    pub addend: i64,
}

/// The machine code and data of one template function, with its holes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stencil<'a> {
    /// The template function's name (e.g. `op_LOAD_CONST`), without any object-format
    /// symbol prefix.
    pub name: &'a str,
    /// Code bytes. A trailing jump to the continuation has been removed, so execution falls
    /// through to the next instance.
    pub code: &'a [u8],
    /// Required alignment of the code in bytes (a power of two).
    pub code_align: u32,
    /// The initialized part of the stencil's data: read-only data, then writable data.
    /// Zero-fill follows it (see [`Stencil::zero_fill`]); every instance gets `data_len`
    /// bytes, these first and zeros after them ([`Stencil::write_data`]).
    pub init_data: &'a [u8],
    /// Bytes of data per instance: `init_data`, then zeros up to this length (the
    /// zero-fill sections and the padding that aligns them).
    pub data_len: u32,
    /// Required alignment of the data in bytes (a power of two).
    pub data_align: u32,
    /// The zero-fill sections this stencil's data holds, each described once in
    /// [`StencilSet::zero_fill`], sorted by offset; all lie in `init_data.len()..data_len`.
    pub zero_fill: &'a [ZeroFillUse],
    /// Holes, sorted by (section, offset).
    pub holes: &'a [Hole],
    /// Operand names (hole symbol without prefix, e.g. `OPERAND0`; `NAME` for the halves
    /// `_JIT_NAME_HI`/`_JIT_NAME_LO`), sorted; a [`HoleValue::Operand`],
    /// [`HoleValue::OperandHigh`] or [`HoleValue::OperandLow`] indexes this list and the
    /// caller passes one 64-bit value per name, in this order.
    pub operands: &'a [&'a str],
    /// Jump-target names (e.g. `JUMP_TARGET`), sorted; a [`HoleValue::Target`] indexes this
    /// list.
    pub targets: &'a [&'a str],
    /// Indices into [`StencilSet::symbols`] of the external symbols this stencil needs, sorted.
    pub symbols: &'a [u16],
    /// Execution can run off the end of the hot part of `code` (all of it without a cold
    /// part, [`Stencil::cold_len`]) into whatever is placed next: the stencil's trailing jump
    /// to its continuation was removed. The last instance of a trace must not
    /// fall through unless the trace is given a continuation.
    pub falls_through: bool,
    /// The last `cold_len` bytes of `code` are the stencil's cold part (blocks that leave
    /// the trace, static helpers): the runtime copies them after the trace's hot code, not
    /// after the hot part, so that the hot part falls through into the next instance.
    /// Holes at offsets in it are patched there; [`HoleValue::Cold`] is its address, and
    /// [`HoleValue::Code`] in it still means the instance's hot code. 0: no cold part.
    pub cold_len: u32,
}

impl<'a> Stencil<'a> {
    /// Bytes of the hot part: `code` before the cold part ([`Stencil::cold_len`]).
    pub fn hot_len(&self) -> usize {
        self.code.len().saturating_sub(self.cold_len as usize)
    }

    /// Index of the operand called `name`, if the stencil has it.
    pub fn operand_index(&self, name: &str) -> Option<usize> {
        self.operands.iter().position(|o| *o == name)
    }

    /// Index of the jump target called `name`, if the stencil has it.
    pub fn target_index(&self, name: &str) -> Option<usize> {
        self.targets.iter().position(|t| *t == name)
    }

    /// How many parameters the stencil takes as an entry shim: the addend of its
    /// [`HoleKind::EntryParameters`] marker, or [`DEFAULT_ENTRY_PARAMETERS`] without one.
    pub fn entry_parameters(&self) -> usize {
        self.holes
            .iter()
            .find(|h| h.kind == HoleKind::EntryParameters)
            .map_or(DEFAULT_ENTRY_PARAMETERS, |h| {
                usize::try_from(h.addend).unwrap_or(usize::MAX)
            })
    }

    /// Holes in the code section.
    pub fn code_holes(&self) -> impl Iterator<Item = &'a Hole> {
        self.holes.iter().filter(|h| h.section == Section::Code)
    }

    /// Holes in the data section.
    pub fn data_holes(&self) -> impl Iterator<Item = &'a Hole> {
        self.holes.iter().filter(|h| h.section == Section::Data)
    }

    /// Writes one instance's data into `dst` (exactly `data_len` bytes): the initialized
    /// bytes, then zeros. Zero-fill is written, never copied from a stored image, so a large
    /// `.bss` costs its size only in the instances that hold it.
    ///
    /// # Panics
    /// If `dst.len() != data_len` or `init_data` is longer than `data_len` (a set that
    /// [`Stencil::check_data`] rejects).
    pub fn write_data(&self, dst: &mut [u8]) {
        assert_eq!(
            dst.len(),
            self.data_len as usize,
            "instance data of {}",
            self.name
        );
        let (init, zeros) = dst.split_at_mut(self.init_data.len());
        init.copy_from_slice(self.init_data);
        zeros.fill(0);
    }

    /// Checks the data description against `set`'s zero-fill table: the initialized bytes
    /// fit in `data_len`, and every zero-fill use names a section of the set and lies, in
    /// order and without overlap, between the initialized bytes and `data_len`.
    pub fn check_data(&self, set: &StencilSet<'_>) -> Result<(), DataError> {
        let len = u64::from(self.data_len);
        if self.init_data.len() as u64 > len {
            return Err(DataError::InitLongerThanData {
                init: self.init_data.len() as u64,
                len,
            });
        }
        let mut end = self.init_data.len() as u64;
        for (i, z) in self.zero_fill.iter().enumerate() {
            let section =
                set.zero_fill
                    .get(z.section as usize)
                    .ok_or(DataError::UnknownZeroFill {
                        use_index: i,
                        section: z.section,
                    })?;
            let start = u64::from(z.offset);
            let align = u64::from(section.align.max(1));
            if start < end || start % align != 0 || start + u64::from(section.size) > len {
                return Err(DataError::ZeroFillOutOfPlace {
                    use_index: i,
                    section: z.section,
                });
            }
            end = start + u64::from(section.size);
        }
        Ok(())
    }
}

/// A zero-initialized section (`.bss`, `__bss`, `__common`, COFF uninitialized data) of a
/// set's objects, described once per set: stencils whose data holds it refer to it by
/// index ([`ZeroFillUse`]) instead of carrying its zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZeroFill<'a> {
    /// `<template>:<section>`, e.g. `testing/holes.c:.bss.counter`.
    pub name: &'a str,
    /// Size in bytes.
    pub size: u32,
    /// Alignment in bytes (a power of two).
    pub align: u32,
}

/// Where one stencil's instance data holds a zero-fill section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZeroFillUse {
    /// Index into [`StencilSet::zero_fill`].
    pub section: u16,
    /// Offset of the section in the stencil's data.
    pub offset: u32,
}

/// Why a stencil's data description is inconsistent ([`Stencil::check_data`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataError {
    /// More initialized bytes than the data length.
    InitLongerThanData { init: u64, len: u64 },
    /// A zero-fill use names a section the set does not describe.
    UnknownZeroFill { use_index: usize, section: u16 },
    /// A zero-fill use overlaps the initialized bytes or the previous use, is misaligned, or
    /// runs past the data length.
    ZeroFillOutOfPlace { use_index: usize, section: u16 },
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataError::InitLongerThanData { init, len } => write!(
                f,
                "{init} bytes of initialized data exceed the data length {len}"
            ),
            DataError::UnknownZeroFill { use_index, section } => write!(
                f,
                "zero-fill use {use_index} names section {section}, which the set does not describe"
            ),
            DataError::ZeroFillOutOfPlace { use_index, section } => write!(
                f,
                "zero-fill use {use_index} (section {section}) overlaps the initialized data or \
                 the previous use, is misaligned, or runs past the data length"
            ),
        }
    }
}

/// Instruction-set architecture of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    X86_64,
    Aarch64,
    /// RV64GC.
    Riscv64,
}

impl Arch {
    /// Every architecture, in declaration order.
    pub const ALL: [Arch; 3] = [Arch::X86_64, Arch::Aarch64, Arch::Riscv64];

    /// The name used in target files, which is also Rust's `target_arch`.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::Riscv64 => "riscv64",
        }
    }

    /// The architecture of a triple's first component: its [`name`](Arch::name), or for
    /// RISC-V the name followed by ISA extension letters (`riscv64gc`).
    pub fn from_triple_component(component: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| {
            component == a.name()
                || (*a == Arch::Riscv64
                    && component
                        .strip_prefix(a.name())
                        .is_some_and(|ext| ext.bytes().all(|b| b.is_ascii_lowercase())))
        })
    }
}

/// Object-file format the stencils were read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectFormat {
    Elf,
    MachO,
    Coff,
}

impl ObjectFormat {
    pub const fn name(self) -> &'static str {
        match self {
            ObjectFormat::Elf => "elf",
            ObjectFormat::MachO => "macho",
            ObjectFormat::Coff => "coff",
        }
    }
}

/// Calling convention of the entry shim and of the external helpers the stencils call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Abi {
    /// x86-64 System V (Linux, macOS).
    SysV64,
    /// x86-64 Microsoft (Windows).
    Win64,
    /// AArch64 procedure-call standard (Linux; Apple and Windows reserve `x18` on top).
    Aapcs64,
    /// RISC-V LP64D (Linux): `gp` and `tp` belong to the process, never to a stencil.
    Lp64d,
}

impl Abi {
    /// Every ABI, in declaration order.
    pub const ALL: [Abi; 4] = [Abi::SysV64, Abi::Win64, Abi::Aapcs64, Abi::Lp64d];

    /// The name used in target files.
    pub const fn name(self) -> &'static str {
        match self {
            Abi::SysV64 => "sysv64",
            Abi::Win64 => "win64",
            Abi::Aapcs64 => "aapcs64",
            Abi::Lp64d => "lp64d",
        }
    }
}

/// All stencils of one template set compiled for one target: what a generated stencil
/// crate exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilSet<'a> {
    /// The target triple: the stem of its `targets/<triple>.toml`.
    pub target: &'a str,
    pub arch: Arch,
    pub format: ObjectFormat,
    pub abi: Abi,
    /// Registers the stencils never touch because the target OS reserves them (e.g. `x18`
    /// on Apple and Windows AArch64), as the target file lists them. A process whose OS
    /// reserves a register runs only sets that leave it alone ([`Host::runs_set`]).
    pub reserved_registers: &'a [&'a str],
    /// The bytes of one no-op instruction, used to pad code to its alignment.
    pub nop: &'a [u8],
    /// The C-ABI entry stencil through which native code enters a trace (its
    /// [`HoleValue::Continue`] is the first instance), by index into `stencils`.
    pub shim: Option<u16>,
    /// Stencils, sorted by name.
    pub stencils: &'a [Stencil<'a>],
    /// External symbol names referenced by any stencil, sorted.
    pub symbols: &'a [&'a str],
    /// Every zero-fill section any stencil's data holds, once, sorted by name.
    pub zero_fill: &'a [ZeroFill<'a>],
    /// Hex SHA-256 over everything the set was generated from.
    pub digest: &'a str,
    /// The generated-crate format it was written in ([`format::VERSION`] when current).
    pub format_version: u32,
    /// The members of cached families the manifest pruned (`prune = true` in
    /// `[family.cached]`: the selection tables never pick them, so they were not compiled),
    /// as (member, family), sorted by member: so that asking for one by name is answered
    /// with why it is missing ([`StencilSet::pruned_from`]).
    pub pruned: &'a [(&'a str, &'a str)],
}

impl<'a> StencilSet<'a> {
    /// The stencil called `name` (binary search: stencils are sorted by name).
    pub fn get(&self, name: &str) -> Option<&'a Stencil<'a>> {
        self.index_of(name).map(|i| &self.stencils[i])
    }

    /// Index of the stencil called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.stencils.binary_search_by(|s| s.name.cmp(name)).ok()
    }

    /// The family whose pruned member `name` is (see [`StencilSet::pruned`]): why
    /// [`index_of`](StencilSet::index_of) finds no such stencil.
    pub fn pruned_from(&self, name: &str) -> Option<&'a str> {
        let at = self.pruned.binary_search_by(|(m, _)| (*m).cmp(name)).ok()?;
        Some(self.pruned[at].1)
    }

    /// The entry shim stencil, if the set has one.
    pub fn shim(&self) -> Option<&'a Stencil<'a>> {
        self.shim.map(|i| &self.stencils[i as usize])
    }
}

/// A stencil family: stencils compiled from one template, per element of a list and/or per
/// combination of variant-parameter values (`[[family]]` in the manifest). A generated
/// crate with families exports them as `FAMILIES`, with index constants in `mod family`,
/// so a runtime user finds "the variant of op X for state (i, o)" by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Family<'a> {
    pub name: &'a str,
    /// The list's elements, in list order (empty when the family has no list).
    pub elements: &'a [&'a str],
    /// The variant parameters, sorted by name.
    pub params: &'a [FamilyParam<'a>],
    /// The stencil index (into [`StencilSet::stencils`]) of every combination, row-major:
    /// element first, then each parameter's value index in `params` order;
    /// [`Family::NONE`] where the manifest skipped the combination.
    pub stencils: &'a [u16],
    /// For a family of register-cached ops (`cached` in the manifest): what a runtime needs
    /// to pick each op's member and the glue between them itself.
    pub cached: Option<CacheSelect<'a>>,
}

/// The selection tables of a register-cached [`Family`], generated per target (the
/// toolchain's `select` module says how each entry is chosen).
///
/// An *op* (a `u16`) is a list element together with one value of each parameter that is
/// not a state parameter, numbered row-major, element first ([`CacheSelect::op`]); the
/// numbers are the same on every target. A *state* is a number of cached values,
/// `0..states`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSelect<'a> {
    /// Indices into [`Family::params`] of the entry and exit state parameters.
    pub entry_param: u8,
    pub exit_param: u8,
    /// How many states there are: state values are `0..states`.
    pub states: u8,
    /// Ops per element (the combinations of the other parameters' values).
    pub combos: u16,
    /// The element whose members move the state (spill or fill), [`Family::NONE`] if none.
    pub glue: u16,
    /// Each element's `[pop, push]`, [`CacheSelect::NO_EFFECT`] where undeclared.
    pub effects: &'a [[u8; 2]],
    /// `(op * states + entry) * states + exit` → stencil index, [`Family::NONE`] if the
    /// family has no such member.
    pub members: &'a [u16],
    /// `op * states + entry` → what to push for the op in that state.
    pub transitions: &'a [Transition],
}

/// What to push for an op in a state: if `glue` is not [`Family::NONE`], that stencil
/// (moving the state to `via`) first, then `member`, which leaves state `exit`. A
/// `member` of [`Family::NONE`]: the op cannot be pushed in that state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub member: u16,
    pub glue: u16,
    pub via: u8,
    pub exit: u8,
}

impl Transition {
    /// The entry of an op with no way from a state.
    pub const NONE: Transition = Transition {
        member: Family::NONE,
        glue: Family::NONE,
        via: 0,
        exit: 0,
    };
}

impl<'a> CacheSelect<'a> {
    /// The `effects` entry of an element whose stack effect the manifest does not state.
    pub const NO_EFFECT: [u8; 2] = [u8::MAX, u8::MAX];

    /// Number of ops.
    pub fn ops(&self) -> usize {
        self.transitions.len() / (self.states as usize).max(1)
    }

    /// The op of element `element` (index into [`Family::elements`]) with value index
    /// `values[k]` of the `k`-th parameter that is not a state parameter; `None` if out of
    /// range.
    pub fn op(&self, family: &Family<'_>, element: usize, values: &[usize]) -> Option<u16> {
        let mut op = element;
        let mut k = 0;
        for (p, param) in family.params.iter().enumerate() {
            if p == self.entry_param as usize || p == self.exit_param as usize {
                continue;
            }
            let v = *values.get(k)?;
            if v >= param.values.len() {
                return None;
            }
            op = op * param.values.len() + v;
            k += 1;
        }
        (k == values.len() && op < self.ops()).then_some(op as u16)
    }

    /// The op of the element named `element`, for a family whose only parameters are the
    /// state parameters.
    pub fn op_named(&self, family: &Family<'_>, element: &str) -> Option<u16> {
        self.op(family, family.element_index(element)?, &[])
    }

    /// The transition of `op` in state `state` ([`Transition::NONE`] if out of range).
    #[inline(always)]
    pub fn transition(&self, op: u16, state: u8) -> Transition {
        let at = op as usize * self.states as usize + state as usize;
        match self.transitions.get(at) {
            Some(t) if state < self.states => *t,
            _ => Transition::NONE,
        }
    }

    /// The member of `op` from state `entry` to state `exit` ([`Family::NONE`] if none).
    pub fn member(&self, op: u16, entry: u8, exit: u8) -> u16 {
        let s = self.states as usize;
        if entry as usize >= s || exit as usize >= s {
            return Family::NONE;
        }
        let at = (op as usize * s + entry as usize) * s + exit as usize;
        self.members.get(at).copied().unwrap_or(Family::NONE)
    }

    /// The glue element's op for `op` (same values of the other parameters), if the family
    /// has a glue element.
    pub fn glue_op(&self, op: u16) -> Option<u16> {
        (self.glue != Family::NONE)
            .then(|| {
                self.glue as usize * self.combos as usize
                    + op as usize % self.combos.max(1) as usize
            })
            .and_then(|g| u16::try_from(g).ok())
    }

    /// `op`'s element's `[pop, push]`, `None` where undeclared.
    pub fn effect(&self, op: u16) -> Option<[u8; 2]> {
        let e = *self
            .effects
            .get(op as usize / self.combos.max(1) as usize)?;
        (e != CacheSelect::NO_EFFECT).then_some(e)
    }
}

/// One variant parameter of a [`Family`]: its name (the macro it is passed in) and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilyParam<'a> {
    pub name: &'a str,
    pub values: &'a [&'a str],
}

impl<'a> Family<'a> {
    /// The entry of a skipped combination in [`Family::stencils`].
    pub const NONE: u16 = u16::MAX;

    /// The stencil index of `element` (0 for a family without a list) with value index
    /// `values[k]` of parameter `k`; `None` if skipped or out of range.
    pub fn stencil(&self, element: usize, values: &[usize]) -> Option<usize> {
        if values.len() != self.params.len() || element >= self.elements.len().max(1) {
            return None;
        }
        let mut at = element;
        for (p, &v) in self.params.iter().zip(values) {
            if v >= p.values.len() {
                return None;
            }
            at = at * p.values.len() + v;
        }
        match self.stencils.get(at) {
            Some(&i) if i != Family::NONE => Some(i as usize),
            _ => None,
        }
    }

    /// Index of the list element called `name`.
    pub fn element_index(&self, name: &str) -> Option<usize> {
        self.elements.iter().position(|e| *e == name)
    }

    /// Index of parameter `param`'s value written `value` (e.g. `"2"`).
    pub fn value_index(&self, param: &str, value: &str) -> Option<usize> {
        let p = self.params.iter().find(|p| p.name == param)?;
        p.values.iter().position(|v| *v == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed buffer to format into (the crate is `no_std`).
    struct Buf<'a>(&'a mut [u8], usize);

    impl core::fmt::Write for Buf<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let end = self.1 + s.len();
            self.0
                .get_mut(self.1..end)
                .ok_or(core::fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.1 = end;
            Ok(())
        }
    }

    #[test]
    fn aarch64_holes_are_exactly_the_aarch64_kinds() {
        for k in HoleKind::ALL {
            let aarch64 = k.aarch64().is_some();
            assert_eq!(aarch64, k.arch() == Some(Arch::Aarch64), "{k:?}");
            assert_eq!(aarch64, k.name().starts_with("Aarch64"), "{k:?}");
            if let Some(hole) = k.aarch64() {
                // Each kind its own hole (the variant names are the kinds' without the prefix).
                let name = k.name();
                assert!(name.strip_prefix("Aarch64").is_some_and(|rest| {
                    let mut buf = [0u8; 32];
                    let mut w = Buf(&mut buf, 0);
                    core::fmt::write(&mut w, format_args!("{hole:?}")).is_ok()
                        && &w.0[..w.1] == rest.as_bytes()
                }));
            }
        }
    }

    #[test]
    fn kind_names_round_trip_and_are_unique() {
        for (i, k) in HoleKind::ALL.iter().enumerate() {
            assert_eq!(HoleKind::from_name(k.name()), Some(*k));
            for other in &HoleKind::ALL[i + 1..] {
                assert_ne!(k.name(), other.name());
            }
        }
    }

    #[test]
    fn operand_ranges_map_to_their_check_kinds_and_bounds() {
        for r in OperandRange::ALL {
            assert_eq!(r.check_kind().operand_check(), Some(r));
            assert_eq!(OperandRange::from_name(r.name()), Some(r));
            let (lo, hi) = r.bounds();
            assert!(r.contains(lo as u64) && r.contains(hi as u64));
            assert!(!r.contains((lo - 1) as u64) && !r.contains((hi + 1) as u64));
        }
        assert!(OperandRange::S8.contains(-1i64 as u64));
        assert!(!OperandRange::U8.contains(-1i64 as u64));
    }

    #[test]
    fn operand_parts_split_the_value_and_name_their_hole_values() {
        extern crate std;
        use std::string::ToString;
        let v = 0x8123_4567_89ab_cdefu64;
        assert_eq!(OperandPart::Whole.of(v), v);
        assert_eq!(OperandPart::High.of(v), 0x8123_4567);
        assert_eq!(OperandPart::Low.of(v), 0x89ab_cdef);
        assert_eq!(OperandPart::High.of(u64::MAX), u32::MAX as u64);
        for part in [OperandPart::Whole, OperandPart::High, OperandPart::Low] {
            assert_eq!(part.value(3).operand(), Some((3, part)));
        }
        assert_eq!(HoleValue::Target(0).operand(), None);
        assert_eq!(HoleValue::OperandHigh(2).to_string(), "operand[2].hi");
        assert_eq!(HoleValue::OperandLow(2).to_string(), "operand[2].lo");
    }

    #[test]
    fn family_lookup_is_row_major_and_skips_none() {
        let f = Family {
            name: "push",
            elements: &["A", "B"],
            params: &[
                FamilyParam {
                    name: "IN",
                    values: &["0", "1", "2"],
                },
                FamilyParam {
                    name: "OUT",
                    values: &["0", "1"],
                },
            ],
            stencils: &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, Family::NONE],
            cached: None,
        };
        assert_eq!(f.stencil(0, &[0, 1]), Some(1));
        assert_eq!(f.stencil(1, &[1, 0]), Some(8));
        assert_eq!(f.stencil(1, &[2, 1]), None);
        assert_eq!(f.stencil(2, &[0, 0]), None);
        assert_eq!(f.stencil(0, &[3, 0]), None);
        assert_eq!(f.stencil(0, &[0]), None);
        assert_eq!(f.element_index("B"), Some(1));
        assert_eq!(f.value_index("OUT", "1"), Some(1));
        let no_list = Family {
            elements: &[],
            stencils: &[7; 6],
            cached: None,
            ..f
        };
        assert_eq!(no_list.stencil(0, &[2, 1]), Some(7));
        assert_eq!(no_list.stencil(1, &[0, 0]), None);
    }

    #[test]
    fn entry_parameters_come_from_the_marker_or_default_to_two() {
        const SHIM: Stencil<'static> = Stencil {
            name: "shim",
            code: &[0xc3],
            ..NOP
        };
        assert_eq!(SHIM.entry_parameters(), DEFAULT_ENTRY_PARAMETERS);
        let holes = [Hole {
            section: Section::Code,
            offset: 0,
            kind: HoleKind::EntryParameters,
            value: HoleValue::Code,
            addend: 3,
        }];
        let three = Stencil {
            holes: &holes,
            ..SHIM
        };
        assert_eq!(three.entry_parameters(), 3);
        assert_eq!(HoleKind::EntryParameters.width(), 0);
        assert_eq!(HoleKind::EntryParameters.arch(), None);
        assert_eq!(HoleKind::X86Imm64.width(), 8);
        assert_eq!(HoleKind::X86Imm64.arch(), Some(Arch::X86_64));
    }

    #[test]
    fn got_kinds_are_not_branches() {
        for k in HoleKind::ALL {
            assert!(!(k.uses_got() && k.is_branch()), "{k}");
        }
    }

    /// A stencil of one `nop` without data or holes.
    const NOP: Stencil<'static> = Stencil {
        name: "nop",
        code: &[0x90],
        code_align: 1,
        init_data: &[],
        data_len: 0,
        data_align: 1,
        zero_fill: &[],
        holes: &[],
        operands: &[],
        targets: &[],
        symbols: &[],
        falls_through: false,
        cold_len: 0,
    };

    #[test]
    fn set_lookup_is_by_name() {
        const A: Stencil<'static> = Stencil { name: "a", ..NOP };
        let b = Stencil { name: "b", ..A };
        let stencils = [A, b];
        let set = StencilSet {
            target: "test-target",
            arch: Arch::X86_64,
            format: ObjectFormat::Elf,
            abi: Abi::SysV64,
            reserved_registers: &[],
            nop: &[0x90],
            shim: Some(0),
            stencils: &stencils,
            symbols: &[],
            zero_fill: &[],
            digest: "",
            format_version: format::VERSION,
            pruned: &[],
        };
        assert_eq!(set.index_of("b"), Some(1));
        assert!(set.get("c").is_none());
        assert_eq!(set.shim().unwrap().name, "a");
    }

    #[test]
    fn instance_data_is_initialized_bytes_then_zeros_described_once_per_set() {
        const ZERO_FILL: [ZeroFill<'static>; 1] = [ZeroFill {
            name: "a.c:.bss",
            size: 16,
            align: 8,
        }];
        const S: Stencil<'static> = Stencil {
            name: "s",
            code: &[0x90],
            code_align: 1,
            init_data: &[1, 2, 3],
            data_len: 24,
            data_align: 8,
            zero_fill: &[ZeroFillUse {
                section: 0,
                offset: 8,
            }],
            holes: &[],
            operands: &[],
            targets: &[],
            symbols: &[],
            falls_through: false,
            cold_len: 0,
        };
        let stencils = [S];
        let set = StencilSet {
            target: "test-target",
            arch: Arch::X86_64,
            format: ObjectFormat::Elf,
            abi: Abi::SysV64,
            reserved_registers: &[],
            nop: &[0x90],
            shim: None,
            stencils: &stencils,
            symbols: &[],
            zero_fill: &ZERO_FILL,
            digest: "",
            format_version: format::VERSION,
            pruned: &[],
        };
        assert_eq!(S.check_data(&set), Ok(()));
        let mut dst = [0xaau8; 24];
        S.write_data(&mut dst);
        assert_eq!(dst[..3], [1, 2, 3]);
        assert!(dst[3..].iter().all(|&b| b == 0), "{dst:?}");

        // Overlapping the initialized bytes, misaligned, past the end, unknown section.
        for (offset, section) in [(0, 0), (4, 0), (16, 0), (8, 1)] {
            let uses = [ZeroFillUse { section, offset }];
            let misplaced = Stencil {
                zero_fill: &uses,
                ..S
            };
            assert!(misplaced.check_data(&set).is_err(), "{offset} {section}");
        }
        let short = Stencil {
            data_len: 2,
            zero_fill: &[],
            ..S
        };
        assert_eq!(
            short.check_data(&set),
            Err(DataError::InitLongerThanData { init: 3, len: 2 })
        );
    }
}
