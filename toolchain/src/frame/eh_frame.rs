//! ELF `.eh_frame` → frame rows, on the `gimli` crate: gimli parses the CIEs and FDEs and
//! runs their call-frame programs into unwind rows; this module does what an object file
//! adds to that and what the rows must be for a stencil.
//!
//! - **Relocations.** In a relocatable object an FDE's pc-begin is a relocation (the
//!   architecture's pc-relative 32-bit type) against the function's section; that names the
//!   function. Every relocation of the section must be one of those: any other (in a range
//!   or a program) is an error. RISC-V writes ranges and advances as label differences
//!   (ADD/SUB and SET/SUB pairs within one function's section); they are applied to a copy
//!   of the section before gimli reads it.
//! - **What rows can express.** A CFA of register + offset, and registers saved below the
//!   CFA. A CFA expression, a save above the CFA, a register rule other than "saved at
//!   CFA + n" (a value expression, another register, ...) or an instruction gimli does not
//!   know (a vendor extension) makes the function's rows `Err((code offset, why))`, and the
//!   stencil's layout is `Unknown` with that reason. A malformed section, a personality, an
//!   LSDA, a signal frame or a pointer encoding other than pc-relative `sdata4` is an error.

use super::{Fde, Rows};
use cpjit_model::{Arch, FrameRow, FrameSave};
use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EhFrame, EndianSlice, LittleEndian, RegisterRule,
    UnwindContext, UnwindSection,
};
use goblin::elf::Elf;
use std::collections::BTreeMap;

type Section<'a> = EhFrame<EndianSlice<'a, LittleEndian>>;
type FdeOf<'a> = gimli::FrameDescriptionEntry<EndianSlice<'a, LittleEndian>>;

/// `DW_EH_PE_pcrel | DW_EH_PE_sdata4`: how LLVM encodes an FDE's pc-begin and range.
const PCREL_SDATA4: gimli::DwEhPe = gimli::DwEhPe(0x1b);

/// The pc-relative 32-bit relocation of an FDE's pc-begin field, per architecture.
fn pc_begin_relocation(arch: Arch) -> u32 {
    match arch {
        Arch::X86_64 => 2,    // R_X86_64_PC32
        Arch::Aarch64 => 261, // R_AARCH64_PREL32
        Arch::Riscv64 => 57,  // R_RISCV_32_PCREL
    }
}

/// Every FDE of the object's `.eh_frame` (none if it has no such section).
pub(super) fn read(object: &[u8], arch: Arch) -> Result<Vec<Fde>, String> {
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
    let section = EhFrame::new(&bytes, LittleEndian);
    // The section at address 0: a pc-relative pointer then reads as its field's offset.
    let bases = BaseAddresses::default().set_eh_frame(0);
    let mut fdes = Vec::new();
    // Each FDE as gimli parsed it, with its function's section index (for `cold_parts`).
    let mut parsed = Vec::new();
    let mut used_relocs = 0usize;
    let mut entries = section.entries(&bases);
    while let Some(entry) = entries.next().map_err(|e| format!("{e}"))? {
        match entry {
            CieOrFde::Cie(cie) => check_cie(&cie)?,
            CieOrFde::Fde(partial) => {
                let fde = partial
                    .parse(|s, b, o| s.cie_from_offset(b, o))
                    .map_err(|e| format!("FDE: {e}"))?;
                let at = fde.offset() as u64;
                check_cie(fde.cie())?;
                // Length (4 bytes; 64-bit DWARF is refused by the check below) and CIE
                // pointer (4), then pc-begin.
                let field = at + 8;
                let end = at + 4 + fde.entry_len() as u64;
                let (kind, function_section, value) = relocs
                    .get(&field)
                    .copied()
                    .ok_or(format!("FDE at {at:#x}: pc-begin has no relocation"))?;
                if kind != pc_begin_relocation(arch) {
                    return Err(format!(
                        "FDE at {at:#x}: pc-begin relocation type {kind}, not the pc-relative 32-bit one"
                    ));
                }
                used_relocs += 1;
                if relocs.range(field + 1..end).next().is_some() {
                    return Err(format!(
                        "FDE at {at:#x}: relocation inside the FDE after pc-begin (range or program)"
                    ));
                }
                let begin = u64::try_from(value)
                    .map_err(|_| format!("FDE at {at:#x}: negative pc-begin"))?;
                fdes.push(Fde {
                    section: name_of(function_section).to_string(),
                    begin,
                    len: fde.len(),
                    rows: rows(&section, &bases, &fde),
                });
                parsed.push((fde, function_section, begin));
            }
        }
    }
    cold_parts(&elf, &bytes, &parsed, &mut fdes);
    if used_relocs != relocs.len() {
        return Err(format!(
            "{} relocations outside FDE pc-begin fields",
            relocs.len() - used_relocs
        ));
    }
    Ok(fdes)
}

/// What a stencil's CIE may say: no personality, LSDA or signal frame, pointers pc-relative
/// `sdata4`.
fn check_cie(
    cie: &gimli::CommonInformationEntry<EndianSlice<'_, LittleEndian>>,
) -> Result<(), String> {
    let at = cie.offset();
    if cie.personality().is_some() || cie.lsda_encoding().is_some() || cie.is_signal_trampoline() {
        return Err(format!(
            "CIE at {at:#x}: a personality, LSDA or signal frame is not expected in a stencil"
        ));
    }
    match cie.fde_address_encoding() {
        Some(PCREL_SDATA4) => Ok(()),
        other => Err(format!(
            "CIE at {at:#x}: pointer encoding {:#x}, not pc-relative sdata4 (0x1b)",
            other.map_or(0, |e| e.0)
        )),
    }
}

/// The CFA rule and the saved registers (register → offset from the CFA) at one location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct State {
    pub cfa_register: u8,
    pub cfa_offset: i64,
    pub saved: BTreeMap<u8, i64>,
}

/// The FDE's rows at offsets from the function start ([`states`] converted by
/// [`rows_of_states`]); `Err((offset, why))` for what rows cannot express.
fn rows(
    section: &Section<'_>,
    bases: &BaseAddresses,
    fde: &FdeOf<'_>,
) -> Result<Rows, (u64, String)> {
    rows_of_states(states(section, bases, fde)?, fde.len())
}

/// Gives the cold part of a split function (the machine function splitter's `<f>.cold`)
/// whose own program fails the rows of its program read as the continuation of its hot
/// part's (`<f>`'s) program ([`continued_rows`]).
///
/// Why: LLVM 19's CFI fixup pass (AArch64) treats a split function's blocks as one stream
/// of call-frame instructions in layout order, hot section first, and does not restate the
/// frame at the cold section's start: the cold FDE begins with a `DW_CFA_restore_state` of
/// a state the hot FDE remembered (its empty stack fails the program on its own). x86-64
/// restates the whole frame at each section's start, so its cold FDEs read alone.
fn cold_parts(elf: &Elf<'_>, bytes: &[u8], parsed: &[(FdeOf<'_>, usize, u64)], fdes: &mut [Fde]) {
    for (i, (cold, section, begin)) in parsed.iter().enumerate() {
        if fdes[i].rows.is_ok() {
            continue;
        }
        let Some((hot_section, hot_begin)) = hot_part_of(elf, *section, *begin) else {
            continue;
        };
        let hot = parsed
            .iter()
            .find(|(_, s, b)| (*s, *b) == (hot_section, hot_begin));
        if let Some(Ok(rows)) = hot.map(|(hot, _, _)| continued_rows(bytes, hot, cold)) {
            fdes[i].rows = Ok(rows);
        }
    }
}

/// Where the hot part `<f>` of the function whose cold part `<f>.cold` starts at `begin` of
/// section `section` is (section index, offset), by the symbol table.
fn hot_part_of(elf: &Elf<'_>, section: usize, begin: u64) -> Option<(usize, u64)> {
    let name = |s: &goblin::elf::Sym| elf.strtab.get_at(s.st_name).unwrap_or("");
    let cold = elf
        .syms
        .iter()
        .find(|s| s.st_shndx == section && s.st_value == begin && name(s).ends_with(".cold"))?;
    let hot = name(&cold).strip_suffix(".cold")?;
    elf.syms
        .iter()
        .find(|s| s.st_shndx != 0 && name(s) == hot)
        .map(|s| (s.st_shndx, s.st_value))
}

/// The rows of the cold part's FDE `cold` read as the continuation of the hot part's FDE
/// `hot` (see [`cold_parts`]): one FDE is appended to a copy of the section `bytes` with
/// the hot program, an advance to the hot part's end and the cold program, and its rows
/// from there on are the cold part's.
fn continued_rows(bytes: &[u8], hot: &FdeOf<'_>, cold: &FdeOf<'_>) -> Result<Rows, (u64, String)> {
    let fail = |why: &str| (0, format!("the cold part's program continued: {why}"));
    let section = EhFrame::new(bytes, LittleEndian);
    let bases = BaseAddresses::default().set_eh_frame(0);
    // The hot program's last location, in code alignment units.
    let mut at = 0u64;
    let mut instructions = hot.instructions(&section, &bases);
    while let Some(i) = instructions.next().map_err(|e| fail(&e.to_string()))? {
        match i {
            gimli::CallFrameInstruction::AdvanceLoc { delta } => at += u64::from(delta),
            gimli::CallFrameInstruction::SetLoc { .. } => return Err(fail("DW_CFA_set_loc")),
            _ => {}
        }
    }
    let factor = hot.cie().code_alignment_factor().max(1);
    let advance = u32::try_from((hot.len() / factor).wrapping_sub(at))
        .map_err(|_| fail("the hot program runs past its function"))?;
    let (hot_program, cold_program) = (program(bytes, hot)?, program(bytes, cold)?);
    let mut out = bytes.to_vec();
    let fde_at = out.len();
    let mut body = u32::try_from(fde_at + 4 - hot.cie().offset())
        .map_err(|_| fail("section too large"))?
        .to_le_bytes()
        .to_vec();
    body.extend_from_slice(&0i32.to_le_bytes()); // pc-begin: the field itself
    let len = hot.len() + cold.len();
    body.extend_from_slice(
        &u32::try_from(len)
            .map_err(|_| fail("too long"))?
            .to_le_bytes(),
    );
    if hot.cie().augmentation().is_some() {
        body.push(0); // augmentation data length
    }
    body.extend_from_slice(hot_program);
    body.push(gimli::constants::DW_CFA_advance_loc4.0);
    body.extend_from_slice(&advance.to_le_bytes());
    body.extend_from_slice(cold_program);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let section = EhFrame::new(&out, LittleEndian);
    let fde = section
        .fde_from_offset(&bases, gimli::EhFrameOffset(fde_at), |s, b, o| {
            s.cie_from_offset(b, o)
        })
        .map_err(|e| fail(&e.to_string()))?;
    let hot_len = hot.len();
    let states =
        states(&section, &bases, &fde).map_err(|(at, why)| (at.saturating_sub(hot_len), why))?;
    let cold_states = states
        .into_iter()
        .filter(|(at, _)| *at >= hot_len)
        .map(|(at, state)| (at - hot_len, state))
        .collect();
    rows_of_states(cold_states, cold.len())
}

/// The call-frame program of `fde` in `bytes` (its section): what follows its header
/// (length, CIE pointer, pc-begin and range as `sdata4`, the augmentation data).
fn program<'a>(bytes: &'a [u8], fde: &FdeOf<'_>) -> Result<&'a [u8], (u64, String)> {
    let truncated = || (0, format!("FDE at {:#x}: truncated", fde.offset()));
    let end = fde.offset() + 4 + fde.entry_len();
    let mut at = fde.offset() + 16;
    if fde.cie().augmentation().is_some() {
        let mut r = EndianSlice::new(bytes.get(at..end).ok_or_else(truncated)?, LittleEndian);
        let len = gimli::Reader::read_uleb128(&mut r).map_err(|_| truncated())?;
        at = end - gimli::Reader::len(&r) + len as usize;
    }
    bytes.get(at..end).ok_or_else(truncated)
}

/// The FDE's states (see [`State`]) at offsets from the function start, in order.
fn states(
    section: &Section<'_>,
    bases: &BaseAddresses,
    fde: &FdeOf<'_>,
) -> Result<Vec<(u64, State)>, (u64, String)> {
    let mut ctx = UnwindContext::new();
    let mut table = fde
        .rows(section, bases, &mut ctx)
        .map_err(|e| (0, format!("CIE initial instructions: {e}")))?;
    let start = fde.initial_address();
    let mut states = Vec::new();
    let mut loc = 0;
    loop {
        let row = match table.next_row() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => return Err((loc, format!("call-frame instruction: {e}"))),
        };
        loc = row.start_address().wrapping_sub(start);
        states.push((loc, state_of(row).map_err(|why| (loc, why))?));
        loc = row.end_address().wrapping_sub(start);
    }
    Ok(states)
}

/// One gimli row as a [`State`], or why rows cannot express it.
fn state_of<T: gimli::ReaderOffset>(row: &gimli::UnwindTableRow<T>) -> Result<State, String> {
    let register = |r: gimli::Register| u8::try_from(r.0).map_err(|_| format!("register {}", r.0));
    let mut state = match row.cfa() {
        CfaRule::RegisterAndOffset {
            register: r,
            offset,
        } => State {
            cfa_register: register(*r)?,
            cfa_offset: *offset,
            saved: BTreeMap::new(),
        },
        CfaRule::Expression(_) => {
            return Err(
                "the CFA is a DWARF expression (DW_CFA_def_cfa_expression, 0x0f), \
                        which has no frame-row equivalent"
                    .into(),
            )
        }
    };
    for (r, rule) in row.registers() {
        match rule {
            RegisterRule::Offset(offset) => {
                state.saved.insert(register(*r)?, *offset);
            }
            // The caller's value is not in memory here.
            RegisterRule::Undefined | RegisterRule::SameValue => {}
            other => {
                return Err(format!(
                    "register {} has rule {other:?} (a value, register or expression rule), \
                     which has no frame-row equivalent",
                    r.0
                ))
            }
        }
    }
    Ok(state)
}

/// Rows and saves from the state in force at each location (in order; later entries for one
/// location win) over a function of `len` bytes.
pub(super) fn rows_of_states(states: Vec<(u64, State)>, len: u64) -> Result<Rows, (u64, String)> {
    let mut by_loc: Vec<(u64, State)> = Vec::new();
    for (l, s) in states {
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
            if let std::collections::btree_map::Entry::Vacant(slot) = open.entry(reg) {
                if offset >= 0 || -offset > i64::from(u32::MAX) {
                    return Err((
                        l,
                        format!("register {reg} saved at CFA{offset:+}, not below the CFA"),
                    ));
                }
                slot.insert((offset, l));
            }
        }
    }
    for (reg, (offset, from)) in open {
        close(&mut rows, reg, offset, from, len);
    }
    rows.saves.sort_by_key(|v| (v.from, v.register));
    Ok(rows)
}

/// The relocations of section `eh` (`.eh_frame`): offset → (type, the symbol's section, the
/// symbol's value + addend). RISC-V label differences (ADD/SUB and SET/SUB pairs within one
/// function's section) are applied to `bytes`, a copy of the section, instead.
fn relocations(
    elf: &Elf<'_>,
    eh: usize,
    arch: Arch,
    bytes: &mut [u8],
) -> Result<BTreeMap<u64, (u32, usize, i64)>, String> {
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
fn riscv_difference(bytes: &mut [u8], r: &goblin::elf::Reloc, value: i64) -> Result<bool, String> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{row, save};
    use super::*;

    /// An `.eh_frame` of x86-64's CIE as LLVM writes it (`CFA = rsp + 8`, return address at
    /// `CFA - 8`; data alignment `data_align`, initial instructions `initial`) and one FDE of
    /// a `len`-byte function running `program`, at address 0.
    fn section(data_align: i8, initial: &[u8], program: &[u8], len: u32) -> Vec<u8> {
        let mut cie = vec![
            0,
            0,
            0,
            0,
            1,
            b'z',
            b'R',
            0,
            1,
            (data_align as u8) & 0x7f,
            16,
            1,
            0x1b,
        ];
        cie.extend_from_slice(initial);
        while (cie.len() + 4) % 8 != 0 {
            cie.push(0);
        }
        let mut out = ((cie.len()) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&cie);
        let fde_at = out.len();
        let mut fde = ((fde_at + 4) as u32).to_le_bytes().to_vec(); // CIE pointer
                                                                    // pc-begin: pc-relative to the field itself, so the function starts at 0.
        fde.extend_from_slice(&(-((fde_at + 8) as i32)).to_le_bytes());
        fde.extend_from_slice(&len.to_le_bytes());
        fde.push(0); // augmentation data length
        fde.extend_from_slice(program);
        while (fde.len() + 4) % 8 != 0 {
            fde.push(0);
        }
        out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        out.extend_from_slice(&fde);
        out.extend_from_slice(&[0; 4]);
        out
    }

    /// The rows of the one FDE of `bytes`.
    fn rows_of(bytes: &[u8]) -> Result<Rows, (u64, String)> {
        let eh = EhFrame::new(bytes, LittleEndian);
        let bases = BaseAddresses::default().set_eh_frame(0);
        let mut entries = eh.entries(&bases);
        while let Some(entry) = entries.next().unwrap() {
            if let CieOrFde::Fde(partial) = entry {
                let fde = partial.parse(|s, b, o| s.cie_from_offset(b, o)).unwrap();
                return rows(&eh, &bases, &fde);
            }
        }
        panic!("no FDE")
    }

    /// `def_cfa rsp, 8; offset r16, 1` (factored by -8).
    const X86_INITIAL: [u8; 5] = [0x0c, 7, 8, 0x80 | 16, 1];

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
        let rows = rows_of(&section(-8, &X86_INITIAL, &program, 20)).unwrap();
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
        let e = rows_of(&section(-8, &X86_INITIAL, &[0x44, 0x0f, 1, 0x77], 8)).unwrap_err();
        assert_eq!(e.0, 4);
        assert!(e.1.contains("0x0f"), "{}", e.1);
        // offset_extended with a factored offset is a save.
        let ok = rows_of(&section(-8, &X86_INITIAL, &[0x42, 0x05, 3, 0x7f], 8));
        assert!(ok.is_ok(), "{ok:?}");
        // A register "saved" above the CFA.
        let e = rows_of(&section(8, &X86_INITIAL[..3], &[0x42, 0x80 | 3, 1], 8)).unwrap_err();
        assert_eq!(e.0, 2);
        assert!(e.1.contains("not below the CFA"), "{}", e.1);
        // A register kept in another register.
        let e = rows_of(&section(-8, &X86_INITIAL, &[0x43, 0x09, 3, 6], 8)).unwrap_err();
        assert_eq!(e.0, 3);
        assert!(e.1.contains("register 3 has rule Register"), "{}", e.1);
        // An instruction gimli does not know (a vendor extension): at the current offset.
        let e = rows_of(&section(-8, &X86_INITIAL, &[0x45, 0x3f], 8)).unwrap_err();
        assert_eq!(e.0, 5);
        assert!(e.1.contains("call-frame instruction"), "{}", e.1);
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
}
