//! ELF relocatable objects (x86-64, AArch64 and RISC-V Linux) → [`ParsedObject`].
//!
//! Kept: allocated `SHT_PROGBITS` (executable → code, writable → data, else read-only) and
//! `SHT_NOBITS` (zero-fill). Ignored, because they never reach run time: `SHT_NULL`,
//! `SHT_SYMTAB`, `SHT_STRTAB`, `SHT_GROUP` (COMDAT bookkeeping), `SHT_NOTE` (`.note*`),
//! `SHT_LLVM_ADDRSIG`, and non-allocated sections (`.comment`, `.note.GNU-stack`, debug
//! info), `.eh_frame` (call-frame information, which `crate::frame` reads into frame
//! layouts); the `SHT_RELA` sections are read for the sections they apply to. Everything
//! else is an error: TLS (`SHF_TLS`), `.init_array`-style arrays, `SHT_REL` and unknown
//! types.
//!
//! Addends are explicit (RELA). `STT_FUNC` symbols start functions, with `st_size` as the
//! exact extent. Because the assembler resolves calls between functions of one section
//! without relocations when the callee is local, such local functions are recorded in
//! [`ParsedObject::unrelocated_locals`].

use cpjit_model::{Arch, HoleKind};
use goblin::elf::{header, section_header as sh, sym, Elf};

use super::error::{ObjectError, ObjectErrorKind};
use super::parsed::{
    Definition, ParsedObject, ParsedReloc, ParsedSection, ParsedSymbol, RelocTarget, SectionKind,
};
use cpjit_isa::x86_64::{classify_rel32, is_movabs_imm64, Rel32Form};

const SHT_LLVM_ADDRSIG: u32 = 0x6fff_4c03;
const SHT_X86_64_UNWIND: u32 = 0x7000_0001;

/// How a raw relocation type becomes a hole.
#[derive(Clone, Copy)]
enum Mapping {
    Kind(HoleKind),
    /// `R_X86_64_PC32`: a branch if the instruction is one, else a RIP-relative operand.
    X86Pc32OrBranch,
    /// `R_X86_64_64`: a data word, or in code the imm64 of a `movabs` (medium code model).
    X86Abs64,
    /// `R_X86_64_PLT32`: must sit on a `call`/`jmp`/`jcc`.
    X86Branch,
    ThreadLocal,
    /// A 32-bit absolute address: cannot hold a 64-bit address.
    Absolute32,
    /// RISC-V linker-relaxation markers: the code was built expecting a linker to shrink
    /// it, which a stencil never gets.
    RiscvRelaxation,
    /// RISC-V compressed branches and jumps (`c.beqz`, `c.bnez`, `c.j`) to a symbol.
    RiscvCompressed,
}

/// The relocation table: raw type → (name, mapping). `None`: unknown type.
fn relocation(arch: Arch, r_type: u32) -> Option<(&'static str, Mapping)> {
    use HoleKind::*;
    use Mapping::*;
    Some(match (arch, r_type) {
        (Arch::X86_64, 1) => ("R_X86_64_64", X86Abs64),
        (Arch::X86_64, 2) => ("R_X86_64_PC32", X86Pc32OrBranch),
        (Arch::X86_64, 4) => ("R_X86_64_PLT32", X86Branch),
        (Arch::X86_64, 9) => ("R_X86_64_GOTPCREL", Kind(X86GotPc32)),
        (Arch::X86_64, 41) => ("R_X86_64_GOTPCRELX", Kind(X86GotPc32Relaxable)),
        (Arch::X86_64, 42) => ("R_X86_64_REX_GOTPCRELX", Kind(X86RexGotPc32Relaxable)),
        // Only narrow operands may use these (checked by the toolchain's `narrow` stage).
        (Arch::X86_64, 10) => ("R_X86_64_32", Kind(X86Abs32)),
        (Arch::X86_64, 11) => ("R_X86_64_32S", Kind(X86Abs32)),
        (Arch::X86_64, 16) => ("R_X86_64_DTPMOD64", ThreadLocal),
        (Arch::X86_64, 17) => ("R_X86_64_DTPOFF64", ThreadLocal),
        (Arch::X86_64, 18) => ("R_X86_64_TPOFF64", ThreadLocal),
        (Arch::X86_64, 19) => ("R_X86_64_TLSGD", ThreadLocal),
        (Arch::X86_64, 20) => ("R_X86_64_TLSLD", ThreadLocal),
        (Arch::X86_64, 21) => ("R_X86_64_DTPOFF32", ThreadLocal),
        (Arch::X86_64, 22) => ("R_X86_64_GOTTPOFF", ThreadLocal),
        (Arch::X86_64, 23) => ("R_X86_64_TPOFF32", ThreadLocal),
        (Arch::X86_64, 34) => ("R_X86_64_GOTPC32_TLSDESC", ThreadLocal),
        (Arch::X86_64, 35) => ("R_X86_64_TLSDESC_CALL", ThreadLocal),
        (Arch::Aarch64, 257) => ("R_AARCH64_ABS64", Kind(Abs64)),
        (Arch::Aarch64, 264) => ("R_AARCH64_MOVW_UABS_G0_NC", Kind(Aarch64MovwG0)),
        (Arch::Aarch64, 266) => ("R_AARCH64_MOVW_UABS_G1_NC", Kind(Aarch64MovwG1)),
        (Arch::Aarch64, 268) => ("R_AARCH64_MOVW_UABS_G2_NC", Kind(Aarch64MovwG2)),
        (Arch::Aarch64, 269) => ("R_AARCH64_MOVW_UABS_G3", Kind(Aarch64MovwG3)),
        (Arch::Aarch64, 275) => ("R_AARCH64_ADR_PREL_PG_HI21", Kind(Aarch64AdrPage21)),
        (Arch::Aarch64, 277) => ("R_AARCH64_ADD_ABS_LO12_NC", Kind(Aarch64AddLo12)),
        (Arch::Aarch64, 278) => ("R_AARCH64_LDST8_ABS_LO12_NC", Kind(Aarch64LdSt8Lo12)),
        (Arch::Aarch64, 284) => ("R_AARCH64_LDST16_ABS_LO12_NC", Kind(Aarch64LdSt16Lo12)),
        (Arch::Aarch64, 285) => ("R_AARCH64_LDST32_ABS_LO12_NC", Kind(Aarch64LdSt32Lo12)),
        (Arch::Aarch64, 286) => ("R_AARCH64_LDST64_ABS_LO12_NC", Kind(Aarch64LdSt64Lo12)),
        (Arch::Aarch64, 299) => ("R_AARCH64_LDST128_ABS_LO12_NC", Kind(Aarch64LdSt128Lo12)),
        (Arch::Aarch64, 311) => ("R_AARCH64_ADR_GOT_PAGE", Kind(Aarch64AdrGotPage21)),
        (Arch::Aarch64, 312) => ("R_AARCH64_LD64_GOT_LO12_NC", Kind(Aarch64Ld64GotLo12)),
        (Arch::Aarch64, 283) => ("R_AARCH64_CALL26", Kind(Aarch64Branch26)),
        (Arch::Aarch64, 282) => ("R_AARCH64_JUMP26", Kind(Aarch64Branch26)),
        (Arch::Aarch64, 280) => ("R_AARCH64_CONDBR19", Kind(Aarch64Branch19)),
        (Arch::Aarch64, 279) => ("R_AARCH64_TSTBR14", Kind(Aarch64Branch14)),
        // The whole TLS block of the AArch64 ELF ABI (TLSGD_*, TLSLD_*, TLSIE_*, TLSLE_*,
        // TLSDESC_*).
        (Arch::Aarch64, 512..=573) => ("R_AARCH64_TLS*", ThreadLocal),
        (Arch::Riscv64, _) => return riscv_relocation(r_type),
        _ => return None,
    })
}

/// The RISC-V part of the table (RISC-V ELF psABI, "Relocations"). A `PCREL_LO12_*` is
/// mapped to the direct lo12 kind here and paired with the HI20 it names afterwards
/// ([`pair_riscv_lo12`]).
fn riscv_relocation(r_type: u32) -> Option<(&'static str, Mapping)> {
    use HoleKind::*;
    use Mapping::*;
    Some(match r_type {
        1 => ("R_RISCV_32", Absolute32),
        2 => ("R_RISCV_64", Kind(Abs64)),
        6..=11 => ("R_RISCV_TLS_*", ThreadLocal),
        16 => ("R_RISCV_BRANCH", Kind(RiscvBranch)),
        17 => ("R_RISCV_JAL", Kind(RiscvJal)),
        18 => ("R_RISCV_CALL", Kind(RiscvCall)),
        19 => ("R_RISCV_CALL_PLT", Kind(RiscvCall)),
        20 => ("R_RISCV_GOT_HI20", Kind(RiscvGotHi20)),
        21 => ("R_RISCV_TLS_GOT_HI20", ThreadLocal),
        22 => ("R_RISCV_TLS_GD_HI20", ThreadLocal),
        23 => ("R_RISCV_PCREL_HI20", Kind(RiscvPcrelHi20)),
        24 => ("R_RISCV_PCREL_LO12_I", Kind(RiscvPcrelLo12I)),
        25 => ("R_RISCV_PCREL_LO12_S", Kind(RiscvPcrelLo12S)),
        // Only narrow operands may use these (checked by the toolchain's `narrow` stage).
        26 => ("R_RISCV_HI20", Kind(RiscvHi20)),
        27 => ("R_RISCV_LO12_I", Kind(RiscvLo12I)),
        28 => ("R_RISCV_LO12_S", Absolute32),
        29..=32 => ("R_RISCV_TPREL_*", ThreadLocal),
        43 => ("R_RISCV_ALIGN", RiscvRelaxation),
        44 => ("R_RISCV_RVC_BRANCH", RiscvCompressed),
        45 => ("R_RISCV_RVC_JUMP", RiscvCompressed),
        51 => ("R_RISCV_RELAX", RiscvRelaxation),
        62..=65 => ("R_RISCV_TLSDESC_*", ThreadLocal),
        _ => return None,
    })
}

/// Resolves every `R_RISCV_PCREL_LO12_*` of one section against its HI20. The LO12 names
/// the label of the `auipc` (whose own relocation, `PCREL_HI20` or `GOT_HI20`, holds the
/// real symbol and addend), and its low bits are those of the *`auipc`'s* distance. So the
/// hole takes the HI20's target, the GOT kind if the HI20 is a GOT reference, and the
/// HI20's addend plus the distance from the `auipc` to itself, which turns `S + A - P` at
/// the LO12's place back into the HI20's `S + A - P`.
fn pair_riscv_lo12(obj: &mut ParsedObject, section: usize) {
    let relocs = &obj.sections[section].relocs;
    let mut resolved = Vec::new();
    for (i, lo) in relocs.iter().enumerate() {
        let s_form = match lo.kind {
            Ok(HoleKind::RiscvPcrelLo12I) => false,
            Ok(HoleKind::RiscvPcrelLo12S) => true,
            _ => continue,
        };
        let fail = |message: String| {
            Err(
                ObjectError::new(ObjectErrorKind::UnexpectedInstruction, message)
                    .section(&obj.sections[section].name)
                    .offset(lo.offset)
                    .relocation(&lo.type_name),
            )
        };
        let label = match lo.target {
            RelocTarget::Symbol(s) => obj.symbols[s].definition.map(|d| (d, &obj.symbols[s].name)),
            _ => None,
        };
        let paired = match label {
            _ if lo.addend != 0 => fail(format!(
                "addend {} on a PCREL_LO12 (it names the auipc's label; the HI20 carries the                  addend)",
                lo.addend
            )),
            Some((d, name)) if d.section == section => {
                let is_hi20 = |k: &Result<HoleKind, ObjectError>| {
                    matches!(k, Ok(HoleKind::RiscvPcrelHi20 | HoleKind::RiscvGotHi20))
                };
                let at_label = relocs.iter().filter(|hi| hi.offset == d.offset);
                let mut candidates = at_label.clone().filter(|hi| is_hi20(&hi.kind));
                match candidates.next().or_else(|| at_label.clone().next()) {
                    Some(hi) => match (&hi.kind, s_form) {
                        (Ok(HoleKind::RiscvPcrelHi20), false) => {
                            Ok((HoleKind::RiscvPcrelLo12I, hi))
                        }
                        (Ok(HoleKind::RiscvPcrelHi20), true) => Ok((HoleKind::RiscvPcrelLo12S, hi)),
                        (Ok(HoleKind::RiscvGotHi20), false) => Ok((HoleKind::RiscvGotLo12I, hi)),
                        (Ok(HoleKind::RiscvGotHi20), true) => {
                            fail(format!("store through the GOT slot address named by {name}"))
                        }
                        _ => fail(format!(
                            "label {name} is on a {}, not a PCREL_HI20 or GOT_HI20",
                            hi.type_name
                        )),
                    },
                    None => fail(format!(
                        "label {name} (offset {:#x}) has no PCREL_HI20 or GOT_HI20",
                        d.offset
                    )),
                }
            }
            _ => fail("a PCREL_LO12 must name an auipc label in the same section".into()),
        };
        resolved.push((
            i,
            paired.map(|(kind, hi)| {
                let delta = lo.offset.wrapping_sub(hi.offset) as i64;
                (kind, hi.target, hi.addend.wrapping_add(delta))
            }),
        ));
    }
    let relocs = &mut obj.sections[section].relocs;
    for (i, pairing) in resolved {
        match pairing {
            Ok((kind, target, addend)) => {
                relocs[i].kind = Ok(kind);
                relocs[i].target = target;
                relocs[i].addend = addend;
            }
            Err(e) => relocs[i].kind = Err(e),
        }
    }
}

fn raw_type_name(machine: u16, r_type: u32) -> String {
    match goblin::elf::reloc::r_to_str(r_type, machine) {
        name if name.contains("UNKNOWN") => format!("#{r_type}"),
        // goblin names RISC-V types with their prefix, x86-64 and AArch64 ones without.
        name if name.starts_with("R_") => name.to_string(),
        name => format!("R_{name}"),
    }
}

pub fn parse(bytes: &[u8], arch: Arch) -> Result<ParsedObject, ObjectError> {
    let elf = Elf::parse(bytes)?;
    let machine = elf.header.e_machine;
    let expected = match arch {
        Arch::X86_64 => header::EM_X86_64,
        Arch::Aarch64 => header::EM_AARCH64,
        Arch::Riscv64 => header::EM_RISCV,
    };
    if machine != expected || elf.header.e_type != header::ET_REL || !elf.is_64 {
        return Err(ObjectError::corrupt(format!(
            "not a 64-bit relocatable ELF object for {} (e_machine {machine}, e_type {})",
            arch.name(),
            elf.header.e_type
        )));
    }
    if !elf.little_endian {
        return Err(ObjectError::corrupt("big-endian ELF object"));
    }

    let mut obj = ParsedObject::default();
    let kept = read_sections(&elf, bytes, &mut obj)?;
    let targets = read_symbols(&elf, &kept, &mut obj)?;
    read_relocations(&elf, arch, &kept, &targets, &mut obj)?;
    Ok(obj)
}

/// The sections the kit keeps (code, data, zero-fill), in file order; returns, per ELF
/// section index, its index in `obj.sections`.
fn read_sections(
    elf: &Elf<'_>,
    bytes: &[u8],
    obj: &mut ParsedObject,
) -> Result<Vec<Option<usize>>, ObjectError> {
    // ELF section index → index in obj.sections.
    let mut kept: Vec<Option<usize>> = vec![None; elf.section_headers.len()];
    for (index, shdr) in elf.section_headers.iter().enumerate() {
        let name = elf
            .shdr_strtab
            .get_at(shdr.sh_name)
            .unwrap_or("<bad name>")
            .to_string();
        let Some(kind) = classify_section(shdr, &name)? else {
            continue;
        };
        let size = usize::try_from(shdr.sh_size).map_err(|_| ObjectError::corrupt("size"))?;
        let data = if kind == SectionKind::ZeroFill {
            // No bytes: the size is recorded, zeros are laid out per stencil under a limit.
            Vec::new()
        } else {
            let start = shdr.sh_offset as usize;
            start
                .checked_add(size)
                .and_then(|end| bytes.get(start..end))
                .ok_or_else(|| {
                    ObjectError::truncated("section contents run past the end of the file")
                        .section(&name)
                })?
                .to_vec()
        };
        let align = shdr.sh_addralign.max(1);
        if !align.is_power_of_two() || align > 1 << 16 {
            return Err(ObjectError::corrupt(format!("bad alignment {align}")).section(&name));
        }
        kept[index] = Some(obj.sections.len());
        obj.sections.push(ParsedSection {
            name,
            kind,
            align: align as u32,
            bytes: data,
            size: size as u64,
            relocs: vec![],
        });
    }
    Ok(kept)
}

/// The symbol table: undefined, absolute and defined symbols (functions with their sizes,
/// the splitter's `<function>.cold` parts among them) and, per raw symbol index, what a
/// relocation naming it refers to; also the local functions that share a section with
/// another (`unrelocated_locals`).
fn read_symbols(
    elf: &Elf<'_>,
    kept: &[Option<usize>],
    obj: &mut ParsedObject,
) -> Result<Vec<Option<RelocTarget>>, ObjectError> {
    // Raw symbol index → relocation target.
    let mut targets: Vec<Option<RelocTarget>> = Vec::with_capacity(elf.syms.len());
    let mut functions_per_section = vec![0usize; obj.sections.len()];
    let mut locals: Vec<usize> = vec![];
    for s in elf.syms.iter() {
        let name = elf.strtab.get_at(s.st_name).unwrap_or("").to_string();
        let shndx = s.st_shndx;
        let target = if s.st_type() == sym::STT_TLS {
            return Err(
                ObjectError::new(ObjectErrorKind::ThreadLocal, "thread-local variable")
                    .symbol(&name),
            );
        } else if shndx == sh::SHN_UNDEF as usize {
            if s.st_name == 0 {
                None // the null symbol
            } else {
                obj.symbols.push(ParsedSymbol {
                    name,
                    definition: None,
                });
                Some(RelocTarget::Symbol(obj.symbols.len() - 1))
            }
        } else if shndx == sh::SHN_COMMON as usize {
            return Err(ObjectError::new(
                ObjectErrorKind::Unsupported,
                "common symbol: compile with -fno-common",
            )
            .symbol(&name));
        } else if shndx >= sh::SHN_LORESERVE as usize {
            obj.symbols.push(ParsedSymbol {
                name,
                definition: None,
            });
            Some(RelocTarget::Absolute(obj.symbols.len() - 1))
        } else if let Some(section) = kept.get(shndx).copied().flatten() {
            if s.st_type() == sym::STT_SECTION {
                Some(RelocTarget::Section(section))
            } else {
                // The machine function splitter's `<function>.cold` (a function's cold
                // blocks, in `.text.split.<function>`) is a sized local without a type.
                let is_cold_part = s.st_type() == sym::STT_NOTYPE
                    && s.st_bind() == sym::STB_LOCAL
                    && s.st_size > 0
                    && name.ends_with(".cold")
                    && obj.sections[section].kind == SectionKind::Code;
                let is_function = s.st_type() == sym::STT_FUNC || is_cold_part;
                if is_function && !is_cold_part {
                    functions_per_section[section] += 1;
                    if s.st_bind() == sym::STB_LOCAL {
                        locals.push(obj.symbols.len());
                    }
                }
                obj.symbols.push(ParsedSymbol {
                    name,
                    definition: Some(Definition {
                        section,
                        offset: s.st_value,
                        size: is_function.then_some(s.st_size),
                        starts_range: is_function,
                    }),
                });
                Some(RelocTarget::Symbol(obj.symbols.len() - 1))
            }
        } else {
            None // defined in an ignored section (e.g. a file symbol or debug label)
        };
        targets.push(target);
    }
    obj.unrelocated_locals = locals
        .into_iter()
        .filter(|&i| {
            let section = obj.symbols[i]
                .definition
                .map(|d| d.section)
                .unwrap_or(usize::MAX);
            functions_per_section.get(section).is_some_and(|&n| n > 1)
        })
        .collect();
    Ok(targets)
}

/// Every kept section's relocations, each mapped to its hole kind through the one table
/// (an unknown type is recorded as an error for the stencil that uses it; a relaxation
/// marker refuses the whole object), sorted by offset, RISC-V `lo12`s paired.
fn read_relocations(
    elf: &Elf<'_>,
    arch: Arch,
    kept: &[Option<usize>],
    targets: &[Option<RelocTarget>],
    obj: &mut ParsedObject,
) -> Result<(), ObjectError> {
    let machine = elf.header.e_machine;
    for (rela_index, relocs) in &elf.shdr_relocs {
        let Some(rela) = elf.section_headers.get(*rela_index) else {
            continue;
        };
        let Some(section) = kept.get(rela.sh_info as usize).copied().flatten() else {
            continue; // relocations of an ignored section
        };
        let section_name = obj.sections[section].name.clone();
        let mut parsed = Vec::with_capacity(relocs.len());
        for r in relocs.iter() {
            let type_name = relocation(arch, r.r_type)
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| raw_type_name(machine, r.r_type));
            let context = |e: ObjectError| {
                e.section(&section_name)
                    .offset(r.r_offset)
                    .relocation(&type_name)
            };
            // A relaxation marker (which names no symbol) means the whole object expects a
            // linker to rewrite its code: refuse it outright rather than per stencil.
            if let Some((_, Mapping::RiscvRelaxation)) = relocation(arch, r.r_type) {
                let kind = map_kind(arch, r.r_type, true, &[], r.r_offset);
                return Err(context(kind.err().unwrap_or_else(|| {
                    ObjectError::new(ObjectErrorKind::Unsupported, "relaxation marker")
                })));
            }
            let Some(target) = targets.get(r.r_sym).copied().flatten() else {
                return Err(context(ObjectError::new(
                    ObjectErrorKind::MissingSymbol,
                    format!(
                        "relocation names symbol index {} which is not usable",
                        r.r_sym
                    ),
                )));
            };
            let symbol_name = match target {
                RelocTarget::Symbol(i) | RelocTarget::Absolute(i) => obj.symbols[i].name.clone(),
                RelocTarget::Section(i) => obj.sections[i].name.clone(),
            };
            let s = &obj.sections[section];
            let kind = map_kind(
                arch,
                r.r_type,
                s.kind == SectionKind::Code,
                &s.bytes,
                r.r_offset,
            )
            .map_err(|e| context(e).symbol(&symbol_name));
            parsed.push(ParsedReloc {
                offset: r.r_offset,
                type_name,
                kind,
                target,
                addend: r.r_addend.unwrap_or(0),
            });
        }
        obj.sections[section].relocs.extend(parsed);
        obj.sections[section].relocs.sort_by_key(|r| r.offset);
        if arch == Arch::Riscv64 {
            pair_riscv_lo12(obj, section);
        }
    }
    Ok(())
}

/// `Ok(None)`: ignore the section; `Ok(Some(kind))`: keep it.
fn classify_section(
    shdr: &sh::SectionHeader,
    name: &str,
) -> Result<Option<SectionKind>, ObjectError> {
    let alloc = shdr.sh_flags & u64::from(sh::SHF_ALLOC) != 0;
    let unsupported = |message: &str| {
        Err(ObjectError::new(ObjectErrorKind::UnsupportedSection, message).section(name))
    };
    if alloc && shdr.sh_flags & u64::from(sh::SHF_TLS) != 0 {
        return Err(ObjectError::new(
            ObjectErrorKind::ThreadLocal,
            "thread-local data section: stencils cannot have thread-locals",
        )
        .section(name));
    }
    match shdr.sh_type {
        sh::SHT_NULL
        | sh::SHT_SYMTAB
        | sh::SHT_STRTAB
        | sh::SHT_GROUP
        | sh::SHT_NOTE
        | SHT_LLVM_ADDRSIG
        | sh::SHT_RELA => Ok(None),
        sh::SHT_REL => unsupported("SHT_REL (implicit addends) is not produced for x86-64/AArch64"),
        // Call-frame information: read separately by the toolchain's `frame` module.
        SHT_X86_64_UNWIND => Ok(None),
        _ if !alloc => Ok(None), // .comment, .note.GNU-stack, debug info
        _ if name == ".eh_frame" => Ok(None),
        sh::SHT_PROGBITS => Ok(Some(if shdr.sh_flags & u64::from(sh::SHF_EXECINSTR) != 0 {
            SectionKind::Code
        } else if shdr.sh_flags & u64::from(sh::SHF_WRITE) != 0 {
            SectionKind::Writable
        } else {
            SectionKind::ReadOnly
        })),
        sh::SHT_NOBITS => Ok(Some(SectionKind::ZeroFill)),
        sh::SHT_INIT_ARRAY | sh::SHT_FINI_ARRAY | sh::SHT_PREINIT_ARRAY => {
            unsupported("constructors/destructors cannot run in a stencil")
        }
        other => unsupported(&format!("section type {other:#x}")),
    }
}

/// The hole kind of relocation `r_type` at `offset` of a section holding `section` (code if
/// `in_code`).
fn map_kind(
    arch: Arch,
    r_type: u32,
    in_code: bool,
    section: &[u8],
    offset: u64,
) -> Result<HoleKind, ObjectError> {
    let Some((name, mapping)) = relocation(arch, r_type) else {
        return Err(ObjectError::new(
            ObjectErrorKind::UnknownRelocation,
            format!(
                "relocation type {r_type} is not in the {} ELF table",
                arch.name()
            ),
        ));
    };
    match mapping {
        Mapping::Kind(kind) => Ok(kind),
        Mapping::X86Abs64 if !in_code => Ok(HoleKind::Abs64),
        Mapping::X86Abs64 => match usize::try_from(offset) {
            Ok(o) if is_movabs_imm64(section, o) => Ok(HoleKind::X86Imm64),
            _ => Err(ObjectError::new(
                ObjectErrorKind::UnexpectedInstruction,
                format!("{name} in code is not the imm64 of a movabs (REX.W b8+r)"),
            )),
        },
        Mapping::X86Pc32OrBranch => match classify_rel32(section, offset) {
            Some(Rel32Form::Branch) => Ok(HoleKind::X86Branch32),
            _ => Ok(HoleKind::X86Pc32),
        },
        Mapping::X86Branch => match classify_rel32(section, offset) {
            Some(Rel32Form::Branch) => Ok(HoleKind::X86Branch32),
            _ => Err(ObjectError::new(
                ObjectErrorKind::UnexpectedInstruction,
                format!("{name} is not on a call, jmp or jcc"),
            )),
        },
        Mapping::ThreadLocal => Err(ObjectError::new(
            ObjectErrorKind::ThreadLocal,
            "thread-local access: stencils cannot have thread-locals",
        )),
        Mapping::RiscvRelaxation => Err(ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!(
                "{name}: linker-relaxation marker; a stencil is never relaxed by a linker, \
                 compile with -mno-relax"
            ),
        )),
        Mapping::RiscvCompressed => Err(ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!(
                "{name}: compressed branch or jump to a symbol (±256 B/±2 KiB cannot reach \
                 other code); the RISC-V stencils use the full-size forms"
            ),
        )),
        Mapping::Absolute32 => Err(ObjectError::new(
            ObjectErrorKind::UnknownRelocation,
            format!(
                "{name} holds a 32-bit absolute address, which cannot reach stencil memory: \
                 compile with -fpic (or -mcmodel=medium/large)"
            ),
        )),
    }
}
