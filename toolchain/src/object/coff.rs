//! COFF objects (x86-64 and ARM64 Windows) → [`ParsedObject`].
//!
//! Kept: code (`IMAGE_SCN_CNT_CODE`/`MEM_EXECUTE`), initialized data (writable or not) and
//! uninitialized data (zero-fill). With `-ffunction-sections` each function has its own
//! COMDAT section, all named `.text`; messages then call them `.text#<number>`. Ignored:
//! `IMAGE_SCN_LNK_REMOVE`/`LNK_INFO` sections (`.drectve`, `.llvm_addrsig`), `.debug$*`,
//! `.pdata`/`.xdata` (unwind tables, read by `crate::frame`) and absolute symbols such as
//! `@feat.00` (an error only if a relocation uses one). Rejected: `.tls$*` (thread-locals)
//! and anything else unknown.
//!
//! Addends are implicit, in the instruction or data bytes: `ADDR64` the u64, `REL32_n` the
//! i32 minus 4 + n (the field is 4 + n bytes before the end of the instruction), ARM64
//! `PAGEBASE_REL21` the byte offset in `adrp`'s immhi:immlo, `PAGEOFFSET_12A` the `add`
//! imm12, `PAGEOFFSET_12L` the load/store imm12 times the access size, branches their
//! immediate times 4. `__imp_<sym>` targets (dllimport) become GOT holes for `<sym>`.
//!
//! goblin's relocation iterator unwraps internally, so relocations are read here, after a
//! bounds check of the whole table.

use cpjit_model::{Arch, HoleKind};
use goblin::pe::{section_table as st, symbol as sym, Coff};

use super::error::{ObjectError, ObjectErrorKind};
use super::parsed::{
    Definition, ParsedObject, ParsedReloc, ParsedSection, ParsedSymbol, RelocTarget, SectionKind,
};
use cpjit_isa::aarch64;
use cpjit_isa::x86_64::{classify_rel32, Rel32Form};

const MACHINE_X86_64: u16 = 0x8664;
const MACHINE_ARM64: u16 = 0xaa64;
const RELOCATION_SIZE: usize = 10;

/// How a raw relocation type becomes a hole.
#[derive(Clone, Copy)]
enum Mapping {
    /// `IMAGE_REL_*_ABSOLUTE`: a no-op the linker ignores.
    Ignore,
    Addr64,
    /// x86-64 `REL32_n`: 4-byte field followed by n more bytes of the instruction.
    Rel32(i64),
    Branch(HoleKind),
    PageBase,
    PageOffsetAdd,
    PageOffsetLoadStore,
    /// Section-relative forms: only thread-local accesses use them in code.
    SectionRelative,
    /// 32-bit absolute or image-relative addresses: cannot hold a 64-bit address.
    Absolute32,
    /// x86-64 `ADDR32` in code: an absolute 32-bit immediate or displacement, emitted only
    /// for narrow operands (the toolchain checks the symbol); implicit addend in the bytes.
    X86Abs32,
}

/// The relocation table: raw type → (name, mapping). `None`: unknown type.
fn relocation(arch: Arch, typ: u16) -> Option<(&'static str, Mapping)> {
    use Mapping::*;
    Some(match (arch, typ) {
        (Arch::X86_64, 0x0) => ("IMAGE_REL_AMD64_ABSOLUTE", Ignore),
        (Arch::X86_64, 0x1) => ("IMAGE_REL_AMD64_ADDR64", Addr64),
        (Arch::X86_64, 0x2) => ("IMAGE_REL_AMD64_ADDR32", X86Abs32),
        (Arch::X86_64, 0x3) => ("IMAGE_REL_AMD64_ADDR32NB", Absolute32),
        (Arch::X86_64, 0x4) => ("IMAGE_REL_AMD64_REL32", Rel32(0)),
        (Arch::X86_64, 0x5) => ("IMAGE_REL_AMD64_REL32_1", Rel32(1)),
        (Arch::X86_64, 0x6) => ("IMAGE_REL_AMD64_REL32_2", Rel32(2)),
        (Arch::X86_64, 0x7) => ("IMAGE_REL_AMD64_REL32_3", Rel32(3)),
        (Arch::X86_64, 0x8) => ("IMAGE_REL_AMD64_REL32_4", Rel32(4)),
        (Arch::X86_64, 0x9) => ("IMAGE_REL_AMD64_REL32_5", Rel32(5)),
        (Arch::X86_64, 0xb) => ("IMAGE_REL_AMD64_SECREL", SectionRelative),
        (Arch::Aarch64, 0x0) => ("IMAGE_REL_ARM64_ABSOLUTE", Ignore),
        (Arch::Aarch64, 0x1) => ("IMAGE_REL_ARM64_ADDR32", Absolute32),
        (Arch::Aarch64, 0x2) => ("IMAGE_REL_ARM64_ADDR32NB", Absolute32),
        (Arch::Aarch64, 0x3) => (
            "IMAGE_REL_ARM64_BRANCH26",
            Branch(HoleKind::Aarch64Branch26),
        ),
        (Arch::Aarch64, 0x4) => ("IMAGE_REL_ARM64_PAGEBASE_REL21", PageBase),
        (Arch::Aarch64, 0x6) => ("IMAGE_REL_ARM64_PAGEOFFSET_12A", PageOffsetAdd),
        (Arch::Aarch64, 0x7) => ("IMAGE_REL_ARM64_PAGEOFFSET_12L", PageOffsetLoadStore),
        (Arch::Aarch64, 0x8) => ("IMAGE_REL_ARM64_SECREL", SectionRelative),
        (Arch::Aarch64, 0x9) => ("IMAGE_REL_ARM64_SECREL_LOW12A", SectionRelative),
        (Arch::Aarch64, 0xa) => ("IMAGE_REL_ARM64_SECREL_HIGH12A", SectionRelative),
        (Arch::Aarch64, 0xb) => ("IMAGE_REL_ARM64_SECREL_LOW12L", SectionRelative),
        (Arch::Aarch64, 0xe) => ("IMAGE_REL_ARM64_ADDR64", Addr64),
        (Arch::Aarch64, 0xf) => (
            "IMAGE_REL_ARM64_BRANCH19",
            Branch(HoleKind::Aarch64Branch19),
        ),
        (Arch::Aarch64, 0x10) => (
            "IMAGE_REL_ARM64_BRANCH14",
            Branch(HoleKind::Aarch64Branch14),
        ),
        _ => return None,
    })
}

pub fn parse(bytes: &[u8], arch: Arch) -> Result<ParsedObject, ObjectError> {
    let machine = match bytes.get(0..2) {
        Some(m) => u16::from_le_bytes([m[0], m[1]]),
        None => return Err(ObjectError::truncated("no COFF header")),
    };
    let expected = match arch {
        Arch::X86_64 => MACHINE_X86_64,
        Arch::Aarch64 => MACHINE_ARM64,
        Arch::Riscv64 => {
            return Err(ObjectError::corrupt(
                "no COFF objects for riscv64: RISC-V targets are ELF",
            ))
        }
    };
    if machine != expected {
        return Err(ObjectError::corrupt(format!(
            "not a COFF object for {} (machine {machine:#x})",
            arch.name()
        )));
    }
    let coff = Coff::parse(bytes)?;

    let mut obj = ParsedObject::default();
    let names = raw_section_names(&coff);
    let unique = section_names(&coff);
    // COFF section number (1-based) - 1 → index in obj.sections.
    let mut kept: Vec<Option<usize>> = vec![None; coff.sections.len()];
    let mut comdat: Vec<bool> = vec![];
    for (index, section) in coff.sections.iter().enumerate() {
        let name = unique[index].clone();
        let Some(kind) = classify_section(section, &names[index], &name)? else {
            continue;
        };
        let size = section.size_of_raw_data as usize;
        let data = if kind == SectionKind::ZeroFill {
            // No bytes: the size is recorded, zeros are laid out per stencil under a limit.
            Vec::new()
        } else {
            let start = section.pointer_to_raw_data as usize;
            bytes
                .get(start..start + size)
                .ok_or_else(|| {
                    ObjectError::truncated("section contents run past the end of the file")
                        .section(&name)
                })?
                .to_vec()
        };
        let align_code = (section.characteristics >> 20) & 0xf;
        let align = match align_code {
            0 => 16, // "default" alignment of object files
            1..=14 => 1u32 << (align_code - 1),
            _ => {
                return Err(
                    ObjectError::corrupt(format!("bad alignment code {align_code}")).section(&name),
                )
            }
        };
        kept[index] = Some(obj.sections.len());
        comdat.push(section.characteristics & st::IMAGE_SCN_LNK_COMDAT != 0);
        obj.sections.push(ParsedSection {
            name,
            kind,
            align,
            bytes: data,
            size: size as u64,
            relocs: vec![],
        });
    }

    // Symbols: raw index → (target, is __imp_).
    let count = coff.header.number_of_symbol_table as usize;
    if count > bytes.len() / 18 {
        return Err(ObjectError::truncated(format!(
            "{count} symbols cannot fit in the file"
        )));
    }
    let mut targets: Vec<Option<(RelocTarget, bool)>> = vec![None; count];
    // The string table follows the symbol table (its offsets count its 4-byte size field).
    let strings_at = (coff.header.pointer_to_symbol_table as usize).saturating_add(count * 18);
    if let (Some(table), Some(_)) = (&coff.symbols, &coff.strings) {
        let mut i = 0;
        while i < count {
            let (_, s) = table
                .get(i)
                .ok_or_else(|| ObjectError::truncated(format!("symbol {i}")))?;
            let name = symbol_name(bytes, strings_at, &s)
                .ok_or_else(|| ObjectError::corrupt(format!("name of symbol {i}")))?;
            targets[i] = symbol_target(&mut obj, &kept, &comdat, &s, name)?;
            i += 1 + s.number_of_aux_symbols as usize;
        }
    } else if count > 0 {
        return Err(ObjectError::truncated("symbol table"));
    }

    for (index, section) in coff.sections.iter().enumerate() {
        let Some(kept_index) = kept[index] else {
            continue;
        };
        let relocs = read_relocations(bytes, section)
            .map_err(|e| e.section(&obj.sections[kept_index].name))?;
        let mut parsed = Vec::with_capacity(relocs.len());
        for (offset, symbol, typ) in relocs {
            let s = &obj.sections[kept_index];
            let type_name = relocation(arch, typ)
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| format!("#{typ:#x}"));
            let Some((target, dllimport)) = targets.get(symbol as usize).copied().flatten() else {
                return Err(ObjectError::new(
                    ObjectErrorKind::MissingSymbol,
                    format!("relocation names symbol index {symbol}, which is not usable"),
                )
                .section(&s.name)
                .offset(offset)
                .relocation(&type_name));
            };
            let symbol_name = match target {
                RelocTarget::Symbol(i) | RelocTarget::Absolute(i) => obj.symbols[i].name.clone(),
                RelocTarget::Section(i) => obj.sections[i].name.clone(),
            };
            if matches!(relocation(arch, typ), Some((_, Mapping::Ignore))) {
                continue;
            }
            let (kind, addend) = match map_kind(arch, typ, &s.bytes, offset, dllimport) {
                Ok((kind, addend)) => (Ok(kind), addend),
                Err(e) => (
                    Err(e
                        .section(&s.name)
                        .offset(offset)
                        .relocation(&type_name)
                        .symbol(&symbol_name)),
                    0,
                ),
            };
            parsed.push(ParsedReloc {
                offset,
                type_name,
                kind,
                target,
                addend,
            });
        }
        parsed.sort_by_key(|r| r.offset);
        obj.sections[kept_index].relocs = parsed;
    }
    Ok(obj)
}

/// Each section's name as written (long names resolved through the string table).
fn raw_section_names(coff: &Coff<'_>) -> Vec<String> {
    coff.sections
        .iter()
        .map(|s| {
            s.real_name
                .clone()
                .or_else(|| s.name().ok().map(str::to_string))
                .unwrap_or_default()
        })
        .collect()
}

/// Each section's name as messages and stencils' code pieces call it: the name, or
/// `<name>#<section number>` when several sections share it (`-ffunction-sections`).
pub(crate) fn section_names(coff: &Coff<'_>) -> Vec<String> {
    let names = raw_section_names(coff);
    names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            if names.iter().filter(|n| *n == name).count() > 1 {
                format!("{name}#{}", index + 1)
            } else {
                name.clone()
            }
        })
        .collect()
}

fn classify_section(
    section: &st::SectionTable,
    raw_name: &str,
    name: &str,
) -> Result<Option<SectionKind>, ObjectError> {
    let c = section.characteristics;
    let unsupported =
        |kind: ObjectErrorKind, message: &str| Err(ObjectError::new(kind, message).section(name));
    if raw_name.starts_with(".tls") {
        return unsupported(
            ObjectErrorKind::ThreadLocal,
            "thread-local data section: stencils cannot have thread-locals",
        );
    }
    if c & (st::IMAGE_SCN_LNK_REMOVE | st::IMAGE_SCN_LNK_INFO) != 0
        || raw_name.starts_with(".debug$")
    {
        return Ok(None);
    }
    if raw_name == ".pdata" || raw_name == ".xdata" {
        // Unwind tables: read by the toolchain's `frame` stage, not copied into stencils.
        return Ok(None);
    }
    Ok(Some(
        if c & (st::IMAGE_SCN_CNT_CODE | st::IMAGE_SCN_MEM_EXECUTE) != 0 {
            SectionKind::Code
        } else if c & st::IMAGE_SCN_CNT_UNINITIALIZED_DATA != 0 {
            SectionKind::ZeroFill
        } else if c & st::IMAGE_SCN_CNT_INITIALIZED_DATA != 0 {
            if c & st::IMAGE_SCN_MEM_WRITE != 0 {
                SectionKind::Writable
            } else {
                SectionKind::ReadOnly
            }
        } else {
            return unsupported(
                ObjectErrorKind::UnsupportedSection,
                &format!("section characteristics {c:#x}"),
            );
        },
    ))
}

fn symbol_target(
    obj: &mut ParsedObject,
    kept: &[Option<usize>],
    comdat: &[bool],
    s: &sym::Symbol,
    name: String,
) -> Result<Option<(RelocTarget, bool)>, ObjectError> {
    Ok(match s.section_number {
        sym::IMAGE_SYM_UNDEFINED => {
            if s.value != 0 && !s.is_weak_external() {
                return Err(ObjectError::new(
                    ObjectErrorKind::Unsupported,
                    "common symbol: compile with -fno-common",
                )
                .symbol(&name));
            }
            let (name, dllimport) = match name.strip_prefix("__imp_") {
                Some(rest) => (rest.to_string(), true),
                None => (name, false),
            };
            obj.symbols.push(ParsedSymbol {
                name,
                definition: None,
            });
            Some((RelocTarget::Symbol(obj.symbols.len() - 1), dllimport))
        }
        sym::IMAGE_SYM_ABSOLUTE => {
            obj.symbols.push(ParsedSymbol {
                name,
                definition: None,
            });
            Some((RelocTarget::Absolute(obj.symbols.len() - 1), false))
        }
        n if n > 0 => {
            let Some(section) = kept.get(n as usize - 1).copied().flatten() else {
                return Ok(None); // a symbol in an ignored section
            };
            if s.is_section_definition() && s.value == 0 {
                return Ok(Some((RelocTarget::Section(section), false)));
            }
            let is_function = s.derived_type() == sym::IMAGE_SYM_DTYPE_FUNCTION;
            // A COMDAT section holds exactly its function: its length is the exact size.
            let size = (is_function && comdat[section]).then(|| {
                (obj.sections[section].bytes.len() as u64).saturating_sub(u64::from(s.value))
            });
            obj.symbols.push(ParsedSymbol {
                name,
                definition: Some(Definition {
                    section,
                    offset: u64::from(s.value),
                    size,
                    starts_range: is_function,
                }),
            });
            Some((RelocTarget::Symbol(obj.symbols.len() - 1), false))
        }
        _ => None, // debug symbols
    })
}

/// A symbol's name: inline (8 bytes, NUL-padded) or, when the first 4 bytes are zero, at an
/// offset into the string table. (goblin's `Symbol::name` underflows on offsets below 4.)
fn symbol_name(bytes: &[u8], strings_at: usize, s: &sym::Symbol) -> Option<String> {
    let raw: &[u8] = if s.name[..4] == [0; 4] {
        let offset = u32::from_le_bytes([s.name[4], s.name[5], s.name[6], s.name[7]]) as usize;
        if offset < 4 {
            return None;
        }
        bytes.get(strings_at.checked_add(offset)?..)?
    } else {
        &s.name
    };
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    std::str::from_utf8(&raw[..end]).ok().map(str::to_string)
}

/// (offset, symbol index, type) of each relocation, with the table bounds-checked.
pub(crate) fn read_relocations(
    bytes: &[u8],
    section: &st::SectionTable,
) -> Result<Vec<(u64, u32, u16)>, ObjectError> {
    let start = section.pointer_to_relocations as usize;
    let mut count = section.number_of_relocations as usize;
    let read = |index: usize| -> Result<(u64, u32, u16), ObjectError> {
        let at = start + index * RELOCATION_SIZE;
        let r = bytes.get(at..at + RELOCATION_SIZE).ok_or_else(|| {
            ObjectError::truncated("relocation table runs past the end of the file")
        })?;
        Ok((
            u64::from(u32::from_le_bytes([r[0], r[1], r[2], r[3]])),
            u32::from_le_bytes([r[4], r[5], r[6], r[7]]),
            u16::from_le_bytes([r[8], r[9]]),
        ))
    };
    let mut first = 0;
    // More than 0xfffe relocations: the real count is in the first entry's address field.
    if section.characteristics & st::IMAGE_SCN_LNK_NRELOC_OVFL != 0 && count == 0xffff {
        count = read(0)?.0 as usize;
        first = 1;
    }
    if count > bytes.len() / RELOCATION_SIZE + 1 {
        return Err(ObjectError::truncated(format!(
            "{count} relocations cannot fit in the file"
        )));
    }
    (first..count).map(read).collect()
}

fn map_kind(
    arch: Arch,
    typ: u16,
    bytes: &[u8],
    offset: u64,
    dllimport: bool,
) -> Result<(HoleKind, i64), ObjectError> {
    let Some((name, mapping)) = relocation(arch, typ) else {
        return Err(ObjectError::new(
            ObjectErrorKind::UnknownRelocation,
            format!(
                "relocation type {typ:#x} is not in the {} COFF table",
                arch.name()
            ),
        ));
    };
    let at = usize::try_from(offset).unwrap_or(usize::MAX);
    let inline32 = || -> Result<i64, ObjectError> {
        let b = bytes
            .get(at..at.saturating_add(4))
            .ok_or_else(|| ObjectError::truncated("relocation past the section end"))?;
        Ok(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    };
    let insn = || {
        aarch64::read_insn(bytes, offset)
            .ok_or_else(|| ObjectError::truncated("relocation past the section end"))
    };
    let unexpected = |what: &str| {
        Err(ObjectError::new(
            ObjectErrorKind::UnexpectedInstruction,
            format!("{name} {what}"),
        ))
    };
    let no_import = |kind: HoleKind| {
        if dllimport {
            Err(ObjectError::new(
                ObjectErrorKind::Unsupported,
                format!("{name} cannot address an `__imp_` slot"),
            ))
        } else {
            Ok(kind)
        }
    };
    match mapping {
        Mapping::Ignore => Ok((HoleKind::Abs64, 0)),
        Mapping::Addr64 => {
            let b = bytes
                .get(at..at.saturating_add(8))
                .ok_or_else(|| ObjectError::truncated("relocation past the section end"))?;
            let inline = i64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            Ok((no_import(HoleKind::Abs64)?, inline))
        }
        Mapping::X86Abs32 => Ok((no_import(HoleKind::X86Abs32)?, inline32()?)),
        Mapping::Rel32(extra) => {
            let addend = inline32()? - 4 - extra;
            let form = classify_rel32(bytes, offset);
            let kind = match (form, dllimport) {
                (Some(Rel32Form::MovLoad | Rel32Form::IndirectBranch), true) => {
                    HoleKind::X86GotPc32Relaxable
                }
                (Some(Rel32Form::RipOperand), true) => HoleKind::X86GotPc32,
                (Some(Rel32Form::Branch), true) => {
                    return unexpected("is a direct branch to an `__imp_` slot")
                }
                (Some(Rel32Form::Branch), false) => HoleKind::X86Branch32,
                (Some(_), false) => HoleKind::X86Pc32,
                (None, _) => {
                    return unexpected("is neither on a branch nor on a RIP-relative operand")
                }
            };
            Ok((kind, addend))
        }
        Mapping::Branch(kind) => {
            let insn = insn()?;
            Ok((no_import(kind)?, aarch64::branch_addend(insn, kind)))
        }
        Mapping::PageBase => {
            let insn = insn()?;
            if !aarch64::is_adrp(insn) {
                return unexpected("is not on an adrp");
            }
            let kind = if dllimport {
                HoleKind::Aarch64AdrGotPage21
            } else {
                HoleKind::Aarch64AdrPage21
            };
            Ok((kind, aarch64::adrp_addend(insn)))
        }
        Mapping::PageOffsetAdd => {
            let insn = insn()?;
            if !aarch64::is_add_immediate(insn) {
                return unexpected("is not on an add");
            }
            Ok((
                no_import(HoleKind::Aarch64AddLo12)?,
                aarch64::imm12_addend(insn, 0),
            ))
        }
        Mapping::PageOffsetLoadStore => {
            let insn = insn()?;
            let Some(scale) = aarch64::ldst_log2_size(insn) else {
                return unexpected("is not on a load or store");
            };
            let kind = if !dllimport {
                aarch64::ldst_kind(scale)
            } else if aarch64::is_ldr_x(insn) {
                HoleKind::Aarch64Ld64GotLo12
            } else {
                return unexpected("loads an `__imp_` slot with something other than a 64-bit ldr");
            };
            Ok((kind, aarch64::imm12_addend(insn, scale)))
        }
        Mapping::SectionRelative => Err(ObjectError::new(
            ObjectErrorKind::ThreadLocal,
            "section-relative access (thread-local storage): stencils cannot have thread-locals",
        )),
        Mapping::Absolute32 => Err(ObjectError::new(
            ObjectErrorKind::UnknownRelocation,
            format!("{name} holds a 32-bit address, which cannot reach stencil memory"),
        )),
    }
}
