//! Frame layouts from the compiler's own call-frame information: the ELF object's
//! `.eh_frame` (its CIEs and FDEs, the pc-begin relocations that say which function each
//! FDE describes) is interpreted row by row, and each function copied into a stencil (the
//! [`CodePiece`]s the object reader recorded) gets its rows and register saves at stencil
//! code offsets. Nothing is decoded from instructions and nothing is guessed: a function
//! without an FDE, or an FDE whose program rows cannot express (a CFA expression, a save
//! above the CFA, a vendor opcode), leaves the stencil's layout
//! [`DerivedFrame::Unknown`] with the reason, naming target, stencil and code offset; the
//! runtime refuses to register unwind information for a trace that uses it. A malformed
//! `.eh_frame` is an error.
//!
//! x64 COFF objects carry `.pdata`/`.xdata` instead ([`pdata`]): prologue unwind codes,
//! replayed into the same rows; a function without a `.pdata` entry is, by the Windows x64
//! ABI, a leaf that neither moves `rsp` nor saves a register. Mach-O and ARM64 COFF objects
//! are compiled without unwind tables and their stencils' layouts are `Unknown`, with the
//! reason (see [`derive`]).

mod pdata;

use crate::error::{Error, Result};
use crate::stencil::{CodePiece, StencilBuf};
use crate::target::Target;
use cpjit_model::{Arch, FrameRow, FrameSave, ObjectFormat};
use goblin::elf::Elf;
use std::collections::BTreeMap;

/// A stencil's frame layout, owned (the generated crate's [`cpjit_model::FrameLayout`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DerivedFrame {
    Functions(Vec<DerivedFunction>),
    Unknown(String),
}

/// One function of a stencil's code ([`cpjit_model::FrameFunction`], owned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedFunction {
    pub start: u32,
    pub end: u32,
    pub rows: Vec<FrameRow>,
    pub saves: Vec<FrameSave>,
}

/// Whether [`derive`] reads `target`'s unwind tables, so that its objects must be compiled
/// with them: ELF `.eh_frame` and x64 COFF `.pdata`/`.xdata`.
pub fn reads_unwind_tables(target: &Target) -> bool {
    match target.format {
        ObjectFormat::Elf => true,
        ObjectFormat::Coff => target.arch == Arch::X86_64,
        ObjectFormat::MachO => false,
    }
}

/// What a function without an entry in the unwind tables is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Unknown (ELF: every function has an FDE when tables are on).
    Unknown,
    /// A leaf in the entry state throughout (the Windows x64 ABI's rule for functions
    /// without `.pdata`).
    Leaf,
}

/// Sets every stencil's [`StencilBuf::frame`] from `object` (the bytes it was read from).
pub fn derive(target: &Target, object: &[u8], stencils: &mut [StencilBuf]) -> Result<()> {
    let (fdes, missing) = match (target.format, target.arch) {
        (ObjectFormat::Elf, arch) => (
            read_eh_frame(object, arch).map_err(|e| Error(format!(".eh_frame: {e}")))?,
            Missing::Unknown,
        ),
        (ObjectFormat::Coff, Arch::X86_64) => (
            pdata::read(object).map_err(|e| Error(format!("{}: {e}", target.triple)))?,
            Missing::Leaf,
        ),
        (format, arch) => {
            let reason = match format {
                ObjectFormat::Coff => format!(
                    "{}: frame layouts are not read from {} COFF objects: ARM64 `.xdata` unwind codes are not decoded (Windows ARM64 unwinding cannot be run here: this target's stencils execute in a Linux host process), so they are built without unwind tables",
                    target.triple,
                    arch.name()
                ),
                _ => format!(
                    "{}: frame layouts are not read from Mach-O objects: `__compact_unwind` is exact only at calls and reading `__eh_frame` (`-femit-dwarf-unwind=always`) is not implemented, so they are built without unwind tables",
                    target.triple
                ),
            };
            for s in stencils {
                s.frame = Some(DerivedFrame::Unknown(reason.clone()));
            }
            return Ok(());
        }
    };
    for s in stencils {
        s.frame = Some(stencil_frame(&target.triple, s, &fdes, missing));
    }
    Ok(())
}

/// What one FDE says about one function: where it is (section name, offset, length) and its
/// rows relative to the function start, or why rows cannot express it.
#[derive(Debug)]
struct Fde {
    section: String,
    begin: u64,
    len: u64,
    rows: std::result::Result<Rows, (u64, String)>,
}

/// Rows and saves relative to the function start.
#[derive(Debug, Default)]
struct Rows {
    rows: Vec<FrameRow>,
    saves: Vec<FrameSave>,
}

fn stencil_frame(triple: &str, s: &StencilBuf, fdes: &[Fde], missing: Missing) -> DerivedFrame {
    let len = s.code.len() as u64;
    let mut functions = Vec::with_capacity(s.pieces.len());
    for piece in &s.pieces {
        let unknown = |offset: u64, why: &str| {
            DerivedFrame::Unknown(format!(
                "{triple}: stencil `{}`, code offset {offset:#x} (`{}`+{:#x}): {why}",
                s.name,
                piece.section,
                offset - piece.at + piece.start
            ))
        };
        let leaf;
        let fde = match fdes
            .iter()
            .find(|f| f.section == piece.section && f.begin == piece.start)
        {
            Some(fde) => fde,
            None if missing == Missing::Leaf => {
                leaf = leaf_fde(piece);
                &leaf
            }
            None => return unknown(piece.at, "the function has no FDE in .eh_frame"),
        };
        // COFF symbols have no size, so a COFF piece runs to the next symbol and includes
        // the alignment padding after the function; its `.pdata` entry ends at the
        // function's last instruction. ELF pieces are exactly the function (`st_size`).
        let function_len = match missing {
            Missing::Leaf => fde.len.min(piece.end - piece.start),
            Missing::Unknown if fde.len < piece.end - piece.start => {
                return unknown(piece.at, "the FDE is shorter than the function")
            }
            Missing::Unknown => piece.end - piece.start,
        };
        let rows = match &fde.rows {
            Ok(rows) => rows,
            Err((loc, why)) => return unknown(piece.at + loc, why),
        };
        let function = place(piece, function_len, rows, len);
        // A function emptied by the removal of the continuation jump (a shim that only
        // jumps) has nothing to describe.
        if function.start < function.end {
            functions.push(function);
        }
    }
    DerivedFrame::Functions(functions)
}

/// A leaf function's description: the entry state (x64: `CFA = rsp + 8`, return address
/// at `CFA - 8`) throughout.
fn leaf_fde(piece: &CodePiece) -> Fde {
    let len = piece.end - piece.start;
    Fde {
        section: piece.section.clone(),
        begin: piece.start,
        len,
        rows: Ok(Rows {
            rows: vec![FrameRow {
                offset: 0,
                cfa_register: 7,
                cfa_offset: 8,
            }],
            saves: vec![FrameSave {
                register: 16,
                cfa_offset: 8,
                from: 0,
                to: len as u32,
            }],
        }),
    }
}

/// A function's rows at stencil offsets, cut at the end of the stencil's code (whose
/// trailing continuation jump may have been removed).
fn place(piece: &CodePiece, function_len: u64, rows: &Rows, code_len: u64) -> DerivedFunction {
    let start = piece.at as u32;
    let end = (piece.at + function_len).min(code_len) as u32;
    let placed_rows = rows
        .rows
        .iter()
        .map(|r| FrameRow {
            offset: r.offset + start,
            ..*r
        })
        .filter(|r| r.offset < end)
        .collect();
    let saves = rows
        .saves
        .iter()
        .map(|v| FrameSave {
            from: v.from + start,
            to: (v.to + start).min(end),
            ..*v
        })
        .filter(|v| v.from < v.to)
        .collect();
    DerivedFunction {
        start,
        end,
        rows: placed_rows,
        saves,
    }
}

/// A CIE's facts that its FDEs use.
#[derive(Clone, Debug)]
struct Cie {
    code_align: u64,
    data_align: i64,
    /// `DW_EH_PE_*` encoding of the FDE's pc-begin and range.
    pointer_encoding: u8,
    augmentation_data: bool,
    initial: Vec<u8>,
}

/// The pc-relative 32-bit relocation of an FDE's pc-begin field, per architecture.
fn pc_begin_relocation(arch: Arch) -> u32 {
    match arch {
        Arch::X86_64 => 2,    // R_X86_64_PC32
        Arch::Aarch64 => 261, // R_AARCH64_PREL32
        Arch::Riscv64 => 57,  // R_RISCV_32_PCREL
    }
}

/// Every FDE of the object's `.eh_frame` (none if it has no such section).
fn read_eh_frame(object: &[u8], arch: Arch) -> std::result::Result<Vec<Fde>, String> {
    let elf = Elf::parse(object).map_err(|e| format!("not an ELF object: {e}"))?;
    let name_of = |index: usize| {
        elf.section_headers
            .get(index)
            .and_then(|h| elf.shdr_strtab.get_at(h.sh_name))
            .unwrap_or("")
    };
    let Some(eh) = (0..elf.section_headers.len()).find(|&i| name_of(i) == ".eh_frame") else {
        return Ok(vec![]);
    };
    let header = &elf.section_headers[eh];
    let bytes = usize::try_from(header.sh_offset)
        .ok()
        .and_then(|o| object.get(o..o.checked_add(header.sh_size as usize)?))
        .ok_or("section past the end of the object")?;
    let mut bytes = bytes.to_vec();
    let relocs = relocations(&elf, eh, arch, &mut bytes)?;
    let bytes = &bytes[..];
    let mut cies: BTreeMap<u64, Cie> = BTreeMap::new();
    let mut fdes = Vec::new();
    let mut used_relocs = 0usize;
    let mut at = 0u64;
    while (at as usize) < bytes.len() {
        let mut r = Reader::new(bytes, at as usize);
        let len = r.u32()? as u64;
        if len == 0 {
            break;
        }
        if len == 0xffff_ffff {
            return Err(format!("entry at {at:#x}: 64-bit DWARF length"));
        }
        let end = (at + 4 + len) as usize;
        if end > bytes.len() {
            return Err(format!(
                "entry at {at:#x}: length {len} past the section end"
            ));
        }
        let id_at = at + 4;
        let id = r.u32()?;
        let mut body = Reader::new(&bytes[..end], r.at);
        if id == 0 {
            cies.insert(
                at,
                read_cie(&mut body).map_err(|e| format!("CIE at {at:#x}: {e}"))?,
            );
        } else {
            let cie_at = id_at
                .checked_sub(u64::from(id))
                .ok_or(format!("FDE at {at:#x}: CIE pointer before the section"))?;
            let cie = cies
                .get(&cie_at)
                .ok_or(format!("FDE at {at:#x}: no CIE at {cie_at:#x}"))?;
            if cie.pointer_encoding != 0x1b {
                return Err(format!(
                    "FDE at {at:#x}: pointer encoding {:#x}, not pc-relative sdata4 (0x1b)",
                    cie.pointer_encoding
                ));
            }
            let field = body.at as u64;
            let (kind, section, value) = relocs
                .get(&field)
                .copied()
                .ok_or(format!("FDE at {at:#x}: pc-begin has no relocation"))?;
            if kind != pc_begin_relocation(arch) {
                return Err(format!(
                    "FDE at {at:#x}: pc-begin relocation type {kind}, not the pc-relative 32-bit one"
                ));
            }
            used_relocs += 1;
            let _placeholder = body.u32()?; // pc-begin, relocated
            if relocs.range(field + 1..end as u64).next().is_some() {
                return Err(format!(
                    "FDE at {at:#x}: relocation inside the FDE after pc-begin (range or program)"
                ));
            }
            let range = u64::from(body.u32()?);
            if cie.augmentation_data {
                let n = body.uleb()?;
                body.skip(n as usize)?;
            }
            let program = &bytes[body.at..end];
            let begin =
                u64::try_from(value).map_err(|_| format!("FDE at {at:#x}: negative pc-begin"))?;
            fdes.push(Fde {
                section: name_of(section).to_string(),
                begin,
                len: range,
                rows: run_program(cie, program, range),
            });
        }
        at = end as u64;
    }
    if used_relocs != relocs.len() {
        return Err(format!(
            "{} relocations outside FDE pc-begin fields",
            relocs.len() - used_relocs
        ));
    }
    Ok(fdes)
}

/// The relocations of section `eh` (`.eh_frame`): offset → (type, the symbol's section, the
/// symbol's value + addend). RISC-V label differences (ADD/SUB and SET/SUB pairs within one
/// function's section) are applied to `bytes`, a copy of the section, instead.
fn relocations(
    elf: &Elf<'_>,
    eh: usize,
    arch: Arch,
    bytes: &mut [u8],
) -> std::result::Result<BTreeMap<u64, (u32, usize, i64)>, String> {
    let mut differences: BTreeMap<u64, usize> = BTreeMap::new();
    let mut relocs = BTreeMap::new();
    for (rela_index, section) in &elf.shdr_relocs {
        if elf.section_headers[*rela_index].sh_info as usize != eh {
            continue;
        }
        for r in section.iter() {
            let sym = elf
                .syms
                .get(r.r_sym)
                .ok_or_else(|| format!("relocation at {:#x}: bad symbol", r.r_offset))?;
            let value = (sym.st_value as i64).wrapping_add(r.r_addend.unwrap_or(0));
            if arch == Arch::Riscv64 && riscv_difference(bytes, &r, value)? {
                // Both halves of a difference must name the same section.
                let first = *differences.entry(r.r_offset).or_insert(sym.st_shndx);
                if first != sym.st_shndx {
                    return Err(format!(
                        "label difference at {:#x} across sections",
                        r.r_offset
                    ));
                }
                continue;
            }
            if relocs
                .insert(r.r_offset, (r.r_type, sym.st_shndx, value))
                .is_some()
            {
                return Err(format!("two relocations at {:#x}", r.r_offset));
            }
        }
    }
    Ok(relocs)
}

/// Applies a RISC-V label-difference relocation (`R_RISCV_ADD32`/`SUB32`, `SET6`/`SUB6`,
/// `SET8`/`SUB8`, `SET16`/`SUB16`, `SET32`) at its offset; `Ok(false)` for other types.
fn riscv_difference(
    bytes: &mut [u8],
    r: &goblin::elf::Reloc,
    value: i64,
) -> std::result::Result<bool, String> {
    let at = r.r_offset as usize;
    let field = |n: usize| {
        format!(
            "relocation type {} at {at:#x} past the section ({n} bytes)",
            r.r_type
        )
    };
    let v = value as u64;
    match r.r_type {
        35 | 39 | 56 => {
            let b = bytes.get_mut(at..at + 4).ok_or_else(|| field(4))?;
            let old = u32::from_le_bytes(b.try_into().unwrap());
            let new = match r.r_type {
                35 => old.wrapping_add(v as u32),
                39 => old.wrapping_sub(v as u32),
                _ => v as u32,
            };
            b.copy_from_slice(&new.to_le_bytes());
        }
        55 | 38 => {
            let b = bytes.get_mut(at..at + 2).ok_or_else(|| field(2))?;
            let old = u16::from_le_bytes(b.try_into().unwrap());
            let new = if r.r_type == 55 {
                v as u16
            } else {
                old.wrapping_sub(v as u16)
            };
            b.copy_from_slice(&new.to_le_bytes());
        }
        54 | 37 => {
            let b = bytes.get_mut(at).ok_or_else(|| field(1))?;
            *b = if r.r_type == 54 {
                v as u8
            } else {
                b.wrapping_sub(v as u8)
            };
        }
        53 | 52 => {
            let b = bytes.get_mut(at).ok_or_else(|| field(1))?;
            let low = if r.r_type == 53 {
                v as u8
            } else {
                (*b & 0x3f).wrapping_sub(v as u8)
            };
            *b = (*b & 0xc0) | (low & 0x3f);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn read_cie(r: &mut Reader<'_>) -> std::result::Result<Cie, String> {
    let version = r.u8()?;
    if version != 1 && version != 3 {
        return Err(format!("version {version}"));
    }
    let mut augmentation = Vec::new();
    loop {
        match r.u8()? {
            0 => break,
            c => augmentation.push(c),
        }
    }
    let code_align = r.uleb()?;
    let data_align = r.sleb()?;
    let _return_address = if version == 1 {
        u64::from(r.u8()?)
    } else {
        r.uleb()?
    };
    let mut pointer_encoding = 0;
    let augmentation_data = augmentation.first() == Some(&b'z');
    if augmentation_data {
        let n = r.uleb()? as usize;
        let data_end = r.at + n;
        for &c in &augmentation[1..] {
            match c {
                b'R' => pointer_encoding = r.u8()?,
                other => {
                    return Err(format!(
                        "augmentation `{}` (personality, LSDA, signal frame) is not expected in a stencil",
                        other as char
                    ))
                }
            }
        }
        r.at = data_end;
    } else if !augmentation.is_empty() {
        return Err(format!(
            "augmentation `{}`",
            String::from_utf8_lossy(&augmentation)
        ));
    }
    Ok(Cie {
        code_align,
        data_align,
        pointer_encoding,
        augmentation_data,
        initial: r.rest().to_vec(),
    })
}

/// The CFA rule and the saved registers (register → offset from the CFA) at one location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    cfa_register: u8,
    cfa_offset: i64,
    saved: BTreeMap<u8, i64>,
}

/// Runs the CIE's initial instructions and the FDE's program over a function of `len`
/// bytes, into rows; `Err((location, why))` for what rows cannot express.
fn run_program(cie: &Cie, program: &[u8], len: u64) -> std::result::Result<Rows, (u64, String)> {
    let mut state = State::default();
    let mut loc = 0u64;
    let mut history: Vec<(u64, State)> = Vec::new();
    let initial = execute(cie, &cie.initial, &mut state, &mut loc, None, &mut history)
        .map_err(|why| (0, format!("CIE initial instructions: {why}")))?;
    history.clear();
    loc = 0;
    execute(
        cie,
        program,
        &mut state,
        &mut loc,
        Some(&initial),
        &mut history,
    )
    .map_err(|why| (loc, why))?;
    history.push((loc, state));
    // The state in force at each location, later entries for one location winning.
    let mut by_loc: Vec<(u64, State)> = Vec::new();
    for (l, s) in history {
        match by_loc.last_mut() {
            Some((last, st)) if *last == l => *st = s,
            _ => by_loc.push((l, s)),
        }
    }
    let mut rows = Rows::default();
    let mut open: BTreeMap<u8, (i64, u64)> = BTreeMap::new();
    let close = |rows: &mut Rows, register: u8, offset: i64, from: u64, to: u64| {
        if from < to {
            rows.saves.push(FrameSave {
                register,
                cfa_offset: (-offset) as u32,
                from: from as u32,
                to: to as u32,
            });
        }
    };
    let mut previous: Option<(u8, i64)> = None;
    for (l, s) in &by_loc {
        let l = (*l).min(len);
        if u32::try_from(s.cfa_offset).is_err() {
            return Err((
                l,
                format!("CFA offset {} is not a 32-bit unsigned value", s.cfa_offset),
            ));
        }
        if previous != Some((s.cfa_register, s.cfa_offset)) && l < len {
            rows.rows.push(FrameRow {
                offset: l as u32,
                cfa_register: s.cfa_register,
                cfa_offset: s.cfa_offset as u32,
            });
            previous = Some((s.cfa_register, s.cfa_offset));
        }
        for (&reg, &(offset, from)) in open.clone().iter() {
            if s.saved.get(&reg) != Some(&offset) {
                close(&mut rows, reg, offset, from, l);
                open.remove(&reg);
            }
        }
        for (&reg, &offset) in &s.saved {
            if !open.contains_key(&reg) {
                if offset >= 0 || -offset > i64::from(u32::MAX) {
                    return Err((
                        l,
                        format!("register {reg} saved at CFA{offset:+}, not below the CFA"),
                    ));
                }
                open.insert(reg, (offset, l));
            }
        }
    }
    for (reg, (offset, from)) in open {
        close(&mut rows, reg, offset, from, len);
    }
    rows.saves.sort_by_key(|v| (v.from, v.register));
    Ok(rows)
}

const DW_CFA_ADVANCE_LOC: u8 = 0x40;
const DW_CFA_OFFSET: u8 = 0x80;
const DW_CFA_RESTORE: u8 = 0xc0;

/// Executes call-frame instructions, recording the state before every advance in `history`.
/// `initial` is the CIE's state (for `DW_CFA_restore`), `None` while running the CIE.
fn execute(
    cie: &Cie,
    program: &[u8],
    state: &mut State,
    loc: &mut u64,
    initial: Option<&State>,
    history: &mut Vec<(u64, State)>,
) -> std::result::Result<State, String> {
    let mut r = Reader::new(program, 0);
    let mut remembered: Vec<State> = Vec::new();
    let register = |v: u64| u8::try_from(v).map_err(|_| format!("register {v}"));
    let restore = |state: &mut State, reg: u8| {
        match initial.and_then(|i| i.saved.get(&reg)) {
            Some(&o) => state.saved.insert(reg, o),
            None => state.saved.remove(&reg),
        };
    };
    while r.at < program.len() {
        let op = r.u8()?;
        let mut advance = |delta: u64, state: &State| {
            history.push((*loc, state.clone()));
            *loc += delta * cie.code_align;
        };
        match (op & 0xc0, op & 0x3f) {
            (DW_CFA_ADVANCE_LOC, delta) => advance(u64::from(delta), state),
            (DW_CFA_OFFSET, reg) => {
                let n = r.uleb()? as i64;
                state.saved.insert(reg, n * cie.data_align);
            }
            (DW_CFA_RESTORE, reg) => restore(state, reg),
            _ => match op {
                0x00 => {}                                    // nop
                0x02 => advance(u64::from(r.u8()?), state),   // advance_loc1
                0x03 => advance(u64::from(r.u16()?), state),  // advance_loc2
                0x04 => advance(u64::from(r.u32()?), state),  // advance_loc4
                0x05 => {
                    // offset_extended
                    let reg = register(r.uleb()?)?;
                    let n = r.uleb()? as i64;
                    state.saved.insert(reg, n * cie.data_align);
                }
                0x06 => restore(state, register(r.uleb()?)?), // restore_extended
                0x07 | 0x08 => {
                    // undefined, same_value: the caller's value is not in memory here
                    let reg = register(r.uleb()?)?;
                    state.saved.remove(&reg);
                }
                0x0a => remembered.push(state.clone()), // remember_state
                0x0b => {
                    // restore_state: the CFA rule and saves, not the location
                    *state = remembered.pop().ok_or("restore_state without remember_state")?;
                }
                0x0c => {
                    // def_cfa
                    state.cfa_register = register(r.uleb()?)?;
                    state.cfa_offset = r.uleb()? as i64;
                }
                0x0d => state.cfa_register = register(r.uleb()?)?, // def_cfa_register
                0x0e => state.cfa_offset = r.uleb()? as i64,       // def_cfa_offset
                other => {
                    return Err(format!(
                        "call-frame instruction {other:#04x} (an expression, a signed or                          register rule, or a vendor extension) has no frame-row equivalent"
                    ))
                }
            },
        }
    }
    Ok(state.clone())
}

/// A little-endian cursor over `.eh_frame` bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], at: usize) -> Reader<'a> {
        Reader { bytes, at }
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let s = self
            .bytes
            .get(self.at..self.at + n)
            .ok_or_else(|| format!("truncated at {:#x}", self.at))?;
        self.at += n;
        Ok(s)
    }

    fn skip(&mut self, n: usize) -> std::result::Result<(), String> {
        self.take(n).map(|_| ())
    }

    fn rest(&self) -> &'a [u8] {
        &self.bytes[self.at.min(self.bytes.len())..]
    }

    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> std::result::Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }

    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn uleb(&mut self) -> std::result::Result<u64, String> {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = self.u8()?;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
    }

    fn sleb(&mut self) -> std::result::Result<i64, String> {
        let (mut v, mut shift) = (0i64, 0);
        loop {
            let b = self.u8()?;
            if shift < 64 {
                v |= i64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    v |= -1 << shift;
                }
                return Ok(v);
            }
        }
    }
}

/// Writes the generated crate's `FRAMES`: one [`cpjit_model::StencilFrame`] per stencil, in
/// `SET` order, one line each.
pub fn write_frames(o: &mut String, stencils: &[StencilBuf]) {
    use std::fmt::Write as _;
    o.push_str(
        "/// The frame layout of each stencil of [`SET`], in the same order (from the \
         compiler's call-frame information; `JitOptions::unwind`).\n#[rustfmt::skip]\n\
         pub static FRAMES: &[StencilFrame<'static>] = &[\n",
    );
    for s in stencils {
        let layout = match &s.frame {
            Some(DerivedFrame::Functions(functions)) => {
                let mut f = String::from("FrameLayout::Functions(&[");
                for (i, func) in functions.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    let rows: Vec<String> = func
                        .rows
                        .iter()
                        .map(|r| {
                            format!(
                                "FrameRow {{ offset: {}, cfa_register: {}, cfa_offset: {} }}",
                                r.offset, r.cfa_register, r.cfa_offset
                            )
                        })
                        .collect();
                    let saves: Vec<String> = func
                        .saves
                        .iter()
                        .map(|v| {
                            format!(
                                "FrameSave {{ register: {}, cfa_offset: {}, from: {}, to: {} }}",
                                v.register, v.cfa_offset, v.from, v.to
                            )
                        })
                        .collect();
                    let _ = write!(
                        f,
                        "{sep}FrameFunction {{ start: {}, end: {}, rows: &[{}], saves: &[{}] }}",
                        func.start,
                        func.end,
                        rows.join(", "),
                        saves.join(", ")
                    );
                }
                f.push_str("])");
                f
            }
            Some(DerivedFrame::Unknown(why)) => format!("FrameLayout::Unknown({why:?})"),
            None => "FrameLayout::Unknown(\"not derived\")".into(),
        };
        let _ = writeln!(
            o,
            "    StencilFrame {{ stencil: {:?}, layout: {layout} }},",
            s.name
        );
    }
    o.push_str("];\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x86-64's CIE as LLVM writes it: `CFA = rsp + 8`, return address at `CFA - 8`.
    fn x86_cie() -> Cie {
        Cie {
            code_align: 1,
            data_align: -8,
            pointer_encoding: 0x1b,
            augmentation_data: true,
            initial: vec![0x0c, 7, 8, 0x80 | 16, 1],
        }
    }

    pub(super) fn row(offset: u32, cfa_register: u8, cfa_offset: u32) -> FrameRow {
        FrameRow {
            offset,
            cfa_register,
            cfa_offset,
        }
    }

    pub(super) fn save(register: u8, cfa_offset: u32, from: u32, to: u32) -> FrameSave {
        FrameSave {
            register,
            cfa_offset,
            from,
            to,
        }
    }

    /// The object llvm-mc-19 assembles from `source` for `triple`.
    fn assemble(triple: &str, source: &str) -> Vec<u8> {
        let out = std::process::Command::new("llvm-mc-19")
            .args([&format!("-triple={triple}"), "-filetype=obj", "-o", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(source.as_bytes())?;
                c.wait_with_output()
            })
            .expect("llvm-mc-19 is installed");
        assert!(out.status.success());
        out.stdout
    }

    /// A stencil of `len` code bytes made of `pieces`, without a frame yet.
    fn stencil(name: &str, pieces: Vec<CodePiece>, len: usize) -> StencilBuf {
        StencilBuf {
            name: name.into(),
            code: vec![0x90; len],
            code_align: 1,
            init_data: vec![],
            data_len: 0,
            data_align: 1,
            zero_fill: vec![],
            holes: vec![],
            operands: vec![],
            targets: vec![],
            symbols: vec![],
            elided_continue: false,
            pieces,
            frame: None,
        }
    }

    #[test]
    fn a_program_with_an_early_epilogue_becomes_rows_and_saves() {
        // push rbx (1 byte); ...; an epilogue at 10 (pop rbx), a jump out at 11, and the
        // other path at 12 back in the pushed state (remember/restore), until 20.
        let program = [
            0x41, // advance 1
            0x0e,
            16, // def_cfa_offset 16
            0x80 | 3,
            2,    // rbx at CFA-16
            0x49, // advance 9 (to 10)
            0x0a, // remember_state
            0x0e,
            8,        // def_cfa_offset 8
            0xc0 | 3, // restore rbx
            0x42,     // advance 2 (to 12)
            0x0b,     // restore_state
            0x00,     // nop
        ];
        let rows = run_program(&x86_cie(), &program, 20).unwrap();
        assert_eq!(
            rows.rows,
            [row(0, 7, 8), row(1, 7, 16), row(10, 7, 8), row(12, 7, 16)]
        );
        assert_eq!(
            rows.saves,
            [save(16, 8, 0, 20), save(3, 16, 1, 10), save(3, 16, 12, 20)]
        );
    }

    #[test]
    fn what_rows_cannot_express_is_reported_at_its_offset() {
        // advance 4, then DW_CFA_def_cfa_expression.
        let e = run_program(&x86_cie(), &[0x44, 0x0f, 1, 0x77], 8).unwrap_err();
        assert_eq!(e.0, 4);
        assert!(e.1.contains("0x0f"), "{}", e.1);
        // A register "saved" above the CFA.
        let e = run_program(&x86_cie(), &[0x42, 0x05, 3, 0x7f], 8);
        assert!(
            e.is_ok(),
            "offset_extended with a factored offset is a save"
        );
        let mut cie = x86_cie();
        cie.data_align = 8;
        cie.initial.truncate(3); // only the CFA rule
        let e = run_program(&cie, &[0x42, 0x80 | 3, 1], 8).unwrap_err();
        assert_eq!(e.0, 2);
        assert!(e.1.contains("not below the CFA"), "{}", e.1);
    }

    #[test]
    fn riscv_label_differences_are_applied_in_place() {
        let reloc = |r_type, r_offset| goblin::elf::Reloc {
            r_offset,
            r_addend: Some(0),
            r_sym: 0,
            r_type,
        };
        let mut bytes = vec![0u8; 8];
        bytes[4] = 0x40; // DW_CFA_advance_loc with a zero delta
        assert!(riscv_difference(&mut bytes, &reloc(35, 0), 0x30).unwrap()); // ADD32
        assert!(riscv_difference(&mut bytes, &reloc(39, 0), 0x10).unwrap()); // SUB32
        assert!(riscv_difference(&mut bytes, &reloc(53, 4), 0x2a).unwrap()); // SET6
        assert!(riscv_difference(&mut bytes, &reloc(52, 4), 0x28).unwrap()); // SUB6
        assert!(!riscv_difference(&mut bytes, &reloc(57, 0), 1).unwrap()); // 32_PCREL
        assert_eq!(u32::from_le_bytes(bytes[..4].try_into().unwrap()), 0x20);
        assert_eq!(bytes[4], 0x42);
    }

    /// An object assembled by llvm-mc-19 from CFI directives: each function's FDE lands on
    /// the stencil's pieces at their code offsets; an FDE with an expression makes the
    /// stencil's layout `Unknown`, naming target, stencil and offset.
    #[test]
    fn fdes_of_an_assembled_object_land_on_the_stencils_pieces() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        let target = Target::load_all(&dir)
            .unwrap()
            .into_iter()
            .find(|t| t.arch == Arch::X86_64 && t.format == ObjectFormat::Elf)
            .unwrap();
        let source = "
            .section .text.f,\"ax\",@progbits
            f:
            .cfi_startproc
            push %rbx
            .cfi_def_cfa_offset 16
            .cfi_offset %rbx, -16
            call g
            pop %rbx
            .cfi_def_cfa_offset 8
            ret
            .cfi_endproc
            .section .text.g,\"ax\",@progbits
            g:
            .cfi_startproc
            nop
            .cfi_escape 0x0f, 0x01, 0x77
            ret
            .cfi_endproc
        ";
        let object = assemble("x86_64", source);
        let piece = |section: &str, len: u64, at: u64| CodePiece {
            section: section.into(),
            start: 0,
            end: len,
            at,
        };
        // f: push(1) call(5) pop(1) ret(1) = 8 bytes; g at 8 after it.
        let mut stencils = [
            stencil("f_alone", vec![piece(".text.f", 8, 0)], 8),
            stencil(
                "f_and_g",
                vec![piece(".text.f", 8, 0), piece(".text.g", 2, 8)],
                10,
            ),
        ];
        derive(&target, &object, &mut stencils).unwrap();
        let DerivedFrame::Functions(f) = stencils[0].frame.clone().unwrap() else {
            panic!("{:?}", stencils[0].frame)
        };
        assert_eq!(
            f,
            [DerivedFunction {
                start: 0,
                end: 8,
                rows: vec![row(0, 7, 8), row(1, 7, 16), row(7, 7, 8)],
                saves: vec![save(16, 8, 0, 8), save(3, 16, 1, 8)],
            }]
        );
        let Some(DerivedFrame::Unknown(why)) = &stencils[1].frame else {
            panic!("{:?}", stencils[1].frame)
        };
        assert!(
            why.contains(&target.triple)
                && why.contains("f_and_g")
                && why.contains("code offset 0x9")
                && why.contains("0x0f"),
            "{why}"
        );
    }

    /// The x64 COFF path on an object llvm-mc-19 assembled from `.seh_*` directives: a
    /// function with `.pdata`, a leaf without (the ABI's entry state), padding after a
    /// function (COFF pieces run to the next symbol) and a code rows cannot express.
    #[test]
    fn pdata_entries_of_an_assembled_object_land_on_the_stencils_pieces() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        let target = Target::load_all(&dir)
            .unwrap()
            .into_iter()
            .find(|t| t.arch == Arch::X86_64 && t.format == ObjectFormat::Coff)
            .unwrap();
        assert!(reads_unwind_tables(&target));
        let source = "
            .text
            .globl f
            f:
            .seh_proc f
            push %rbx
            .seh_pushreg %rbx
            sub $32, %rsp
            .seh_stackalloc 32
            .seh_endprologue
            call g
            add $32, %rsp
            pop %rbx
            ret
            .seh_endproc
            .p2align 5
            .globl g
            g:
            .seh_proc g
            nop
            .seh_pushframe
            .seh_endprologue
            ret
            .seh_endproc
            .globl h
            h:
            ret
        ";
        let coff_x64 = crate::target::test_target(Arch::X86_64, ObjectFormat::Coff);
        let object = assemble(coff_x64.llvm_triple(), source);
        let piece = |start: u64, end: u64, at: u64| CodePiece {
            section: ".text".into(),
            start,
            end,
            at,
        };
        // f: push(1) sub(4) call(5) add(4) pop(1) ret(1) = 16 bytes, padded to g at 32;
        // g: nop, ret; h: ret at 34.
        let mut stencils = [
            stencil("f_and_h", vec![piece(0, 32, 0), piece(34, 35, 32)], 33),
            stencil("g_alone", vec![piece(32, 34, 0)], 2),
        ];
        derive(&target, &object, &mut stencils).unwrap();
        let DerivedFrame::Functions(f) = stencils[0].frame.clone().unwrap() else {
            panic!("{:?}", stencils[0].frame)
        };
        assert_eq!(
            f,
            [
                DerivedFunction {
                    start: 0,
                    end: 16,
                    rows: vec![row(0, 7, 8), row(1, 7, 16), row(5, 7, 48)],
                    saves: vec![save(16, 8, 0, 16), save(3, 16, 1, 16)],
                },
                DerivedFunction {
                    start: 32,
                    end: 33,
                    rows: vec![row(32, 7, 8)],
                    saves: vec![save(16, 8, 32, 33)],
                }
            ]
        );
        let Some(DerivedFrame::Unknown(why)) = &stencils[1].frame else {
            panic!("{:?}", stencils[1].frame)
        };
        assert!(
            why.contains(&target.triple)
                && why.contains("g_alone")
                && why.contains("code offset 0x1")
                && why.contains("UWOP_PUSH_MACHFRAME"),
            "{why}"
        );
    }
}
