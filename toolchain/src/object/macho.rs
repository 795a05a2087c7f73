//! Mach-O objects (x86-64 and arm64 Apple) → [`ParsedObject`].
//!
//! Kept: instruction sections (one `__TEXT,__text`, split into functions by symbol address:
//! `MH_SUBSECTIONS_VIA_SYMBOLS`), literal and regular data (`__TEXT,*` and `__DATA,__const`
//! read-only, other `__DATA` writable) and zero-fill (`S_ZEROFILL`, `S_GB_ZEROFILL`).
//! Ignored: `S_ATTR_DEBUG` / `__DWARF` sections and `__LD,__compact_unwind` (unwind info
//! for the system linker; stencils are never unwound). Rejected: thread-local sections
//! (`__thread_*`), initializer/terminator pointer arrays, `__eh_frame`, and other unknown
//! section types.
//!
//! Symbols: C names carry a `_` prefix, which is removed; only `_`-prefixed symbols start
//! functions (assembler-private `ltmp*`/`l*` labels do not). A function runs to the next
//! function start in its section, so it may end in alignment padding.
//!
//! Addends: x86-64 ones are implicit. `SIGNED*`, `BRANCH`, `GOT` and `GOT_LOAD` store the
//! value such that the linker computes `S + inline - (P + 4)` for every variant (LLVM folds
//! the extra immediate bytes of `SIGNED_n` forms into the inline value), so the model's
//! addend is `inline - 4`. arm64 addends come from a preceding `ARM64_RELOC_ADDEND` (24-bit
//! signed payload in `r_symbolnum`), which must be followed by the `PAGE21`, `PAGEOFF12` or
//! `BRANCH26` it modifies. Section-relative (`r_extern = 0`) relocations hold an address in
//! the object's layout, rebased here to an offset in the target section.

use cpjit_model::{Arch, HoleKind};
use goblin::mach::MachO;

use super::error::{ObjectError, ObjectErrorKind};
use super::parsed::{
    Definition, ParsedObject, ParsedReloc, ParsedSection, ParsedSymbol, RelocTarget, SectionKind,
};
use cpjit_isa::aarch64;
use cpjit_isa::x86_64::{classify_rel32, Rel32Form};

const CPU_TYPE_X86_64: u32 = 0x0100_0007;
const CPU_TYPE_ARM64: u32 = 0x0100_000c;
const MH_OBJECT: u32 = 1;
const RELOCATION_SIZE: usize = 8;
const ARM64_RELOC_ADDEND: u8 = 10;

/// How a raw relocation type becomes a hole.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mapping {
    Unsigned,
    /// x86-64 PC-relative 32-bit field: `Some(kind)` fixed, `None` classified by instruction.
    X86Pc(Option<HoleKind>),
    Arm64(HoleKind),
    /// `ARM64_RELOC_PAGEOFF12`: `add` or a load/store, decided by the instruction.
    Arm64PageOffset,
    Addend,
    ThreadLocal,
    Unsupported(&'static str),
}

/// The relocation table: raw type → (name, mapping). `None`: unknown type.
fn relocation(arch: Arch, typ: u8) -> Option<(&'static str, Mapping)> {
    use HoleKind::*;
    use Mapping::*;
    Some(match (arch, typ) {
        (Arch::X86_64, 0) => ("X86_64_RELOC_UNSIGNED", Unsigned),
        (Arch::X86_64, 1) => ("X86_64_RELOC_SIGNED", X86Pc(None)),
        (Arch::X86_64, 2) => ("X86_64_RELOC_BRANCH", X86Pc(Some(X86Branch32))),
        (Arch::X86_64, 3) => ("X86_64_RELOC_GOT_LOAD", X86Pc(Some(X86RexGotPc32Relaxable))),
        (Arch::X86_64, 4) => ("X86_64_RELOC_GOT", X86Pc(Some(X86GotPc32))),
        (Arch::X86_64, 5) => (
            "X86_64_RELOC_SUBTRACTOR",
            Unsupported("a difference of two symbols"),
        ),
        (Arch::X86_64, 6) => ("X86_64_RELOC_SIGNED_1", X86Pc(None)),
        (Arch::X86_64, 7) => ("X86_64_RELOC_SIGNED_2", X86Pc(None)),
        (Arch::X86_64, 8) => ("X86_64_RELOC_SIGNED_4", X86Pc(None)),
        (Arch::X86_64, 9) => ("X86_64_RELOC_TLV", ThreadLocal),
        (Arch::Aarch64, 0) => ("ARM64_RELOC_UNSIGNED", Unsigned),
        (Arch::Aarch64, 1) => (
            "ARM64_RELOC_SUBTRACTOR",
            Unsupported("a difference of two symbols"),
        ),
        (Arch::Aarch64, 2) => ("ARM64_RELOC_BRANCH26", Arm64(Aarch64Branch26)),
        (Arch::Aarch64, 3) => ("ARM64_RELOC_PAGE21", Arm64(Aarch64AdrPage21)),
        (Arch::Aarch64, 4) => ("ARM64_RELOC_PAGEOFF12", Arm64PageOffset),
        (Arch::Aarch64, 5) => ("ARM64_RELOC_GOT_LOAD_PAGE21", Arm64(Aarch64AdrGotPage21)),
        (Arch::Aarch64, 6) => ("ARM64_RELOC_GOT_LOAD_PAGEOFF12", Arm64(Aarch64Ld64GotLo12)),
        (Arch::Aarch64, 7) => (
            "ARM64_RELOC_POINTER_TO_GOT",
            Unsupported("a pointer to a GOT slot"),
        ),
        (Arch::Aarch64, 8) => ("ARM64_RELOC_TLVP_LOAD_PAGE21", ThreadLocal),
        (Arch::Aarch64, 9) => ("ARM64_RELOC_TLVP_LOAD_PAGEOFF12", ThreadLocal),
        (Arch::Aarch64, 10) => ("ARM64_RELOC_ADDEND", Addend),
        _ => return None,
    })
}

/// One raw `relocation_info`.
#[derive(Clone, Copy)]
struct RawReloc {
    address: u32,
    symbolnum: u32,
    pcrel: bool,
    length: u8,
    is_extern: bool,
    typ: u8,
}

/// A kept section with the header fields the relocations need.
struct SectionInfo {
    kept: Option<usize>,
    addr: u64,
    reloff: u32,
    nreloc: u32,
}

pub fn parse(bytes: &[u8], arch: Arch) -> Result<ParsedObject, ObjectError> {
    let macho = MachO::parse(bytes, 0)?;
    check_header(&macho, arch)?;
    let mut obj = ParsedObject::default();
    let infos = read_sections(&macho, bytes, &mut obj)?;
    let targets = read_symbols(&macho, &infos, &mut obj)?;
    read_relocations(bytes, &infos, &targets, arch, &mut obj)?;
    Ok(obj)
}

/// Refuses an object of another architecture, file type or byte order.
fn check_header(macho: &MachO<'_>, arch: Arch) -> Result<(), ObjectError> {
    let expected = match arch {
        Arch::X86_64 => CPU_TYPE_X86_64,
        Arch::Aarch64 => CPU_TYPE_ARM64,
        Arch::Riscv64 => {
            return Err(ObjectError::corrupt(
                "no Mach-O objects for riscv64: RISC-V targets are ELF",
            ))
        }
    };
    if macho.header.cputype != expected
        || macho.header.filetype != MH_OBJECT
        || !macho.little_endian
    {
        return Err(ObjectError::corrupt(format!(
            "not a Mach-O object for {} (cputype {:#x}, filetype {})",
            arch.name(),
            macho.header.cputype,
            macho.header.filetype
        )));
    }
    Ok(())
}

/// Every section, in ordinal order (ordinals count across all segments): the kept ones
/// (code, data, zero-fill) pushed to `obj`, each with the header fields its relocations and
/// symbols need.
fn read_sections(
    macho: &MachO<'_>,
    bytes: &[u8],
    obj: &mut ParsedObject,
) -> Result<Vec<SectionInfo>, ObjectError> {
    // Section ordinal - 1 (ordinals count across all segments) → header info.
    let mut infos: Vec<SectionInfo> = vec![];
    for segment in macho.segments.iter() {
        for (section, _) in segment.sections()? {
            let segname = section.segname().unwrap_or("?").to_string();
            let sectname = section.name().unwrap_or("?").to_string();
            let name = format!("{segname},{sectname}");
            let kept = match classify_section(&segname, &sectname, section.flags)
                .map_err(|e| e.section(&name))?
            {
                None => None,
                Some(kind) => {
                    let size = usize::try_from(section.size)
                        .map_err(|_| ObjectError::corrupt("size").section(&name))?;
                    let data = if kind == SectionKind::ZeroFill {
                        // No bytes: the size is recorded, zeros are laid out per stencil under a limit.
                        Vec::new()
                    } else {
                        let start = section.offset as usize;
                        start
                            .checked_add(size)
                            .and_then(|end| bytes.get(start..end))
                            .ok_or_else(|| {
                                ObjectError::truncated(
                                    "section contents run past the end of the file",
                                )
                                .section(&name)
                            })?
                            .to_vec()
                    };
                    if section.align > 16 {
                        return Err(ObjectError::corrupt(format!(
                            "bad alignment 2^{}",
                            section.align
                        ))
                        .section(&name));
                    }
                    obj.sections.push(ParsedSection {
                        name,
                        kind,
                        align: 1 << section.align,
                        bytes: data,
                        size: size as u64,
                        relocs: vec![],
                    });
                    Some(obj.sections.len() - 1)
                }
            };
            infos.push(SectionInfo {
                kept,
                addr: section.addr,
                reloff: section.reloff,
                nreloc: section.nreloc,
            });
        }
    }
    Ok(infos)
}

/// Every symbol as a relocation target, by raw index (`None` for debugging symbols and
/// symbols of sections not kept); symbols pushed to `obj`.
fn read_symbols(
    macho: &MachO<'_>,
    infos: &[SectionInfo],
    obj: &mut ParsedObject,
) -> Result<Vec<Option<RelocTarget>>, ObjectError> {
    let mut targets: Vec<Option<RelocTarget>> = vec![];
    for entry in macho.symbols() {
        let (raw_name, nlist) = entry?;
        const N_STAB: u8 = 0xe0;
        const N_TYPE: u8 = 0x0e;
        const N_UNDF: u8 = 0x0;
        const N_SECT: u8 = 0xe;
        let name = raw_name.strip_prefix('_').unwrap_or(raw_name).to_string();
        let target = if nlist.n_type & N_STAB != 0 {
            None
        } else {
            match nlist.n_type & N_TYPE {
                N_UNDF if nlist.n_value != 0 => {
                    return Err(ObjectError::new(
                        ObjectErrorKind::Unsupported,
                        "common symbol: compile with -fno-common",
                    )
                    .symbol(&name))
                }
                N_UNDF => {
                    obj.symbols.push(ParsedSymbol {
                        name,
                        definition: None,
                    });
                    Some(RelocTarget::Symbol(obj.symbols.len() - 1))
                }
                N_SECT => {
                    let info = nlist
                        .n_sect
                        .checked_sub(1)
                        .and_then(|i| infos.get(i))
                        .ok_or_else(|| {
                            ObjectError::corrupt(format!("section ordinal {}", nlist.n_sect))
                                .symbol(&name)
                        })?;
                    match info.kept {
                        None => None,
                        Some(section) => {
                            let offset = nlist.n_value.checked_sub(info.addr).ok_or_else(|| {
                                ObjectError::corrupt("symbol address before its section")
                                    .symbol(&name)
                            })?;
                            let is_code = obj.sections[section].kind == SectionKind::Code;
                            obj.symbols.push(ParsedSymbol {
                                name,
                                definition: Some(Definition {
                                    section,
                                    offset,
                                    size: None,
                                    starts_range: is_code && raw_name.starts_with('_'),
                                }),
                            });
                            Some(RelocTarget::Symbol(obj.symbols.len() - 1))
                        }
                    }
                }
                _ => {
                    obj.symbols.push(ParsedSymbol {
                        name,
                        definition: None,
                    });
                    Some(RelocTarget::Absolute(obj.symbols.len() - 1))
                }
            }
        };
        targets.push(target);
    }
    Ok(targets)
}

/// The relocations of every kept section, mapped to hole kinds and targets.
fn read_relocations(
    bytes: &[u8],
    infos: &[SectionInfo],
    targets: &[Option<RelocTarget>],
    arch: Arch,
    obj: &mut ParsedObject,
) -> Result<(), ObjectError> {
    for info in infos {
        let Some(section) = info.kept else { continue };
        let raw = raw_relocations(bytes, info.reloff, info.nreloc)
            .map_err(|e| e.section(&obj.sections[section].name))?;
        let relocs = map_relocations(obj, infos, targets, section, info.addr, &raw, arch)?;
        obj.sections[section].relocs = relocs;
    }
    Ok(())
}

fn classify_section(
    segname: &str,
    sectname: &str,
    flags: u32,
) -> Result<Option<SectionKind>, ObjectError> {
    const S_ATTR_DEBUG: u32 = 0x0200_0000;
    const S_ATTR_PURE_INSTRUCTIONS: u32 = 0x8000_0000;
    const S_ATTR_SOME_INSTRUCTIONS: u32 = 0x0000_0400;
    let unsupported = |kind, message: &str| Err(ObjectError::new(kind, message));
    if flags & S_ATTR_DEBUG != 0
        || segname == "__DWARF"
        || (segname == "__LD" && sectname == "__compact_unwind")
    {
        return Ok(None);
    }
    if sectname == "__eh_frame" {
        return unsupported(
            ObjectErrorKind::UnsupportedSection,
            "unwind tables: compile with -fno-asynchronous-unwind-tables",
        );
    }
    match flags & 0xff {
        0x11..=0x15 => unsupported(
            ObjectErrorKind::ThreadLocal,
            "thread-local section: stencils cannot have thread-locals",
        ),
        0x09 | 0x0a => unsupported(
            ObjectErrorKind::UnsupportedSection,
            "initializers/terminators cannot run in a stencil",
        ),
        0x01 | 0x0c => Ok(Some(SectionKind::ZeroFill)),
        _ if flags & (S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS) != 0 => {
            Ok(Some(SectionKind::Code))
        }
        // Regular, C strings, fixed-size literals, literal pointers.
        0x00 | 0x02..=0x05 | 0x0e => Ok(Some(if segname == "__DATA" && sectname != "__const" {
            SectionKind::Writable
        } else {
            SectionKind::ReadOnly
        })),
        other => unsupported(
            ObjectErrorKind::UnsupportedSection,
            &format!("section type {other:#x}"),
        ),
    }
}

fn raw_relocations(bytes: &[u8], reloff: u32, nreloc: u32) -> Result<Vec<RawReloc>, ObjectError> {
    let start = reloff as usize;
    let len = (nreloc as usize)
        .checked_mul(RELOCATION_SIZE)
        .filter(|&len| start.checked_add(len).is_some_and(|end| end <= bytes.len()))
        .ok_or_else(|| ObjectError::truncated("relocation table runs past the end of the file"))?;
    let mut out = Vec::with_capacity(nreloc as usize);
    for r in bytes[start..start + len].chunks_exact(RELOCATION_SIZE) {
        let address = u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        let info = u32::from_le_bytes([r[4], r[5], r[6], r[7]]);
        if address & 0x8000_0000 != 0 {
            return Err(ObjectError::new(
                ObjectErrorKind::Unsupported,
                "scattered relocation (32-bit only)",
            )
            .offset(u64::from(address & 0x00ff_ffff)));
        }
        out.push(RawReloc {
            address,
            symbolnum: info & 0x00ff_ffff,
            pcrel: (info >> 24) & 1 != 0,
            length: ((info >> 25) & 3) as u8,
            is_extern: (info >> 27) & 1 != 0,
            typ: (info >> 28) as u8,
        });
    }
    Ok(out)
}

fn map_relocations(
    obj: &ParsedObject,
    infos: &[SectionInfo],
    targets: &[Option<RelocTarget>],
    section: usize,
    section_addr: u64,
    raw: &[RawReloc],
    arch: Arch,
) -> Result<Vec<ParsedReloc>, ObjectError> {
    let bytes = &obj.sections[section].bytes;
    let section_name = &obj.sections[section].name;
    let mut out = Vec::with_capacity(raw.len());
    let mut pending_addend: Option<(u32, i64)> = None;
    for r in raw {
        let offset = u64::from(r.address);
        let entry = relocation(arch, r.typ);
        let type_name = entry
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| format!("#{}", r.typ));
        let context = |e: ObjectError| {
            e.section(section_name)
                .offset(offset)
                .relocation(&type_name)
        };
        if r.typ == ARM64_RELOC_ADDEND && arch == Arch::Aarch64 {
            if pending_addend.is_some() {
                return Err(context(ObjectError::new(
                    ObjectErrorKind::DanglingAddend,
                    "two ADDEND records in a row",
                )));
            }
            let payload = (((r.symbolnum << 8) as i32) >> 8) as i64;
            pending_addend = Some((r.address, payload));
            continue;
        }
        let explicit = pending_addend.take();
        if let Some((address, _)) = explicit {
            let pairs = matches!(
                entry,
                Some((
                    _,
                    Mapping::Arm64(HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64Branch26)
                ))
            ) || matches!(entry, Some((_, Mapping::Arm64PageOffset)));
            if address != r.address || !pairs {
                return Err(context(ObjectError::new(
                    ObjectErrorKind::DanglingAddend,
                    "ARM64_RELOC_ADDEND is not followed by a PAGE21, PAGEOFF12 or BRANCH26 at the same address",
                )));
            }
        }
        // Target, and for section-relative forms the base the inline address is relative to.
        let (target, rebase) = if r.is_extern {
            let t = targets
                .get(r.symbolnum as usize)
                .copied()
                .flatten()
                .ok_or_else(|| {
                    context(ObjectError::new(
                        ObjectErrorKind::MissingSymbol,
                        format!(
                            "relocation names symbol index {}, which is not usable",
                            r.symbolnum
                        ),
                    ))
                })?;
            (t, None)
        } else {
            let info = (r.symbolnum as usize)
                .checked_sub(1)
                .and_then(|i| infos.get(i))
                .ok_or_else(|| {
                    context(ObjectError::corrupt(format!(
                        "section ordinal {}",
                        r.symbolnum
                    )))
                })?;
            let kept = info.kept.ok_or_else(|| {
                context(ObjectError::new(
                    ObjectErrorKind::Unsupported,
                    "reference into an ignored section",
                ))
            })?;
            (RelocTarget::Section(kept), Some(info.addr))
        };
        let symbol_name = match target {
            RelocTarget::Symbol(i) | RelocTarget::Absolute(i) => obj.symbols[i].name.clone(),
            RelocTarget::Section(i) => obj.sections[i].name.clone(),
        };
        let mapped = map_kind(
            arch,
            entry,
            r,
            bytes,
            offset,
            explicit.map(|(_, a)| a),
            rebase,
            section_addr,
        );
        let (kind, addend) = match mapped {
            Ok((kind, addend)) => (Ok(kind), addend),
            Err(e) => (Err(context(e).symbol(&symbol_name)), 0),
        };
        out.push(ParsedReloc {
            offset,
            type_name,
            kind,
            target,
            addend,
        });
    }
    if pending_addend.is_some() {
        return Err(ObjectError::new(
            ObjectErrorKind::DanglingAddend,
            "ARM64_RELOC_ADDEND is the last relocation",
        )
        .section(section_name));
    }
    out.sort_by_key(|r| r.offset);
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn map_kind(
    arch: Arch,
    entry: Option<(&'static str, Mapping)>,
    r: &RawReloc,
    bytes: &[u8],
    offset: u64,
    explicit_addend: Option<i64>,
    rebase: Option<u64>,
    section_addr: u64,
) -> Result<(HoleKind, i64), ObjectError> {
    let Some((name, mapping)) = entry else {
        return Err(ObjectError::new(
            ObjectErrorKind::UnknownRelocation,
            format!(
                "relocation type {} is not in the {} Mach-O table",
                r.typ,
                arch.name()
            ),
        ));
    };
    let at = usize::try_from(offset).unwrap_or(usize::MAX);
    let past_end = || ObjectError::truncated("relocation past the section end");
    let unexpected = |what: &str| {
        Err(ObjectError::new(
            ObjectErrorKind::UnexpectedInstruction,
            format!("{name} {what}"),
        ))
    };
    match mapping {
        // `movl $sym, %r32`: a 32-bit absolute immediate, zero-extended by the instruction
        // (the assembler refuses sign-extended ones, "32-bit absolute addressing is not
        // supported in 64-bit mode"). Only a narrow operand may fill it (`assemble.rs` and
        // `narrow.rs` refuse anything else).
        Mapping::Unsigned
            if arch == Arch::X86_64 && r.length == 2 && !r.pcrel && rebase.is_none() =>
        {
            let b = bytes.get(at..at.saturating_add(4)).ok_or_else(past_end)?;
            let inline = i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            Ok((HoleKind::X86Abs32, inline))
        }
        Mapping::Unsigned => {
            if r.length != 3 || r.pcrel {
                return Err(ObjectError::new(
                    ObjectErrorKind::UnknownRelocation,
                    format!(
                        "{name} of 2^{} bytes cannot hold a 64-bit address",
                        r.length
                    ),
                ));
            }
            let b = bytes.get(at..at.saturating_add(8)).ok_or_else(past_end)?;
            let inline = i64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            Ok((
                HoleKind::Abs64,
                inline - rebase.map_or(0, |base| base as i64),
            ))
        }
        Mapping::X86Pc(fixed) => {
            let b = bytes.get(at..at.saturating_add(4)).ok_or_else(past_end)?;
            let inline = i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            let form = classify_rel32(bytes, offset);
            let kind = match (fixed, form) {
                (Some(HoleKind::X86Branch32), Some(Rel32Form::Branch)) => HoleKind::X86Branch32,
                (Some(HoleKind::X86Branch32), _) => {
                    return unexpected("is not on a call, jmp or jcc")
                }
                (Some(kind), _) => kind,
                (None, Some(Rel32Form::Branch)) => HoleKind::X86Branch32,
                (None, Some(_)) => HoleKind::X86Pc32,
                (None, None) => {
                    return unexpected("is neither on a branch nor on a RIP-relative operand")
                }
            };
            let addend = match rebase {
                // The field holds `target - (P + 4)` in the object's own layout.
                Some(base) => inline
                    .wrapping_add(section_addr.wrapping_add(offset) as i64)
                    .wrapping_sub(base as i64),
                None => inline - 4,
            };
            Ok((kind, addend))
        }
        Mapping::Arm64(_) | Mapping::Arm64PageOffset if rebase.is_some() => Err(ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!("section-relative {name}"),
        )),
        Mapping::Arm64(kind) => {
            let insn = aarch64::read_insn(bytes, offset).ok_or_else(past_end)?;
            if kind == HoleKind::Aarch64Ld64GotLo12 && !aarch64::is_ldr_x(insn) {
                return unexpected("is not on a 64-bit ldr");
            }
            Ok((kind, explicit_addend.unwrap_or(0)))
        }
        Mapping::Arm64PageOffset => {
            let insn = aarch64::read_insn(bytes, offset).ok_or_else(past_end)?;
            match aarch64::page_offset_kind(insn) {
                Some(kind) => Ok((kind, explicit_addend.unwrap_or(0))),
                None => unexpected("is neither on an add nor on a load/store"),
            }
        }
        Mapping::Addend => Err(ObjectError::new(
            ObjectErrorKind::DanglingAddend,
            "unpaired ADDEND",
        )),
        Mapping::ThreadLocal => Err(ObjectError::new(
            ObjectErrorKind::ThreadLocal,
            "thread-local access: stencils cannot have thread-locals",
        )),
        Mapping::Unsupported(what) => Err(ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!("{name}: {what}"),
        )),
    }
}
