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

mod family;
pub mod format;
mod frame;
mod hole;
mod host;
pub use family::{CacheSelect, Family, FamilyParam, FloatState, StencilIndices, Transition};
pub use frame::{
    FrameFunction, FrameLayout, FrameRow, FrameSave, StencilFrame, X64_DWARF_XMM0,
    X64_UNWIND_DWARF_REGISTERS,
};
pub use hole::{
    Aarch64Hole, HoleKind, HoleValue, OperandPart, OperandRange, DEFAULT_ENTRY_PARAMETERS,
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
    /// A stencil with nothing in it: no code, data, holes, operands, targets or symbols,
    /// byte alignment, and an end that falls through (running it runs into what follows).
    /// Stencils written by hand (in tests, in sets written without the toolchain) name only
    /// the fields that set them apart: `Stencil { name, code, holes, ..Stencil::EMPTY }`.
    pub const EMPTY: Stencil<'a> = Stencil {
        name: "",
        code: &[],
        code_align: 1,
        init_data: &[],
        data_len: 0,
        data_align: 1,
        zero_fill: &[],
        holes: &[],
        operands: &[],
        targets: &[],
        symbols: &[],
        falls_through: true,
        cold_len: 0,
    };

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
            stencils: StencilIndices::from_le_bytes(
                b"\0\0\x01\0\x02\0\x03\0\x04\0\x05\0\x06\0\x07\0\x08\0\x09\0\x0a\0\xff\xff",
            ),
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
            stencils: StencilIndices::from_le_bytes(&[7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0]),
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
        falls_through: false,
        ..Stencil::EMPTY
    };

    /// An x86-64 ELF set of `stencils` (with `zero_fill`) for the tests.
    fn test_set<'a>(
        stencils: &'a [Stencil<'a>],
        shim: Option<u16>,
        zero_fill: &'a [ZeroFill<'a>],
    ) -> StencilSet<'a> {
        StencilSet {
            target: "test-target",
            arch: Arch::X86_64,
            format: ObjectFormat::Elf,
            abi: Abi::SysV64,
            reserved_registers: &[],
            nop: &[0x90],
            shim,
            stencils,
            symbols: &[],
            zero_fill,
            digest: "",
            format_version: format::VERSION,
            pruned: &[],
        }
    }

    #[test]
    fn set_lookup_is_by_name() {
        const A: Stencil<'static> = Stencil { name: "a", ..NOP };
        let b = Stencil { name: "b", ..A };
        let stencils = [A, b];
        let set = test_set(&stencils, Some(0), &[]);
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
            init_data: &[1, 2, 3],
            data_len: 24,
            data_align: 8,
            zero_fill: &[ZeroFillUse {
                section: 0,
                offset: 8,
            }],
            ..NOP
        };
        let stencils = [S];
        let set = test_set(&stencils, None, &ZERO_FILL);
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
