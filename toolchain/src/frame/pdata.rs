//! x64 COFF unwind tables → frame rows: each `.pdata` entry (`RUNTIME_FUNCTION`: begin,
//! end, unwind info, three `IMAGE_REL_AMD64_ADDR32NB` relocations) names a function and
//! the `UNWIND_INFO` in `.xdata` that describes its prologue; its unwind codes are replayed
//! in prologue order into the rows and saves [`super::Rows`] holds.
//!
//! Windows x64 describes prologues only: from the end of the prologue to the end of the
//! function the rows say "prologue done", and the platform unwinder recognizes an epilogue
//! from the code itself (the ABI fixes its form). So the rows are exact wherever a call
//! can be made (backtraces, panics) and wherever Windows reads them, which re-encodes them
//! as `UNWIND_INFO`. What the rows cannot express (a chained or handler-carrying entry,
//! `UWOP_PUSH_MACHFRAME`, version-2 epilogue codes, an allocation after a register save)
//! is reported at its code offset with the unwind code, and the stencil's layout is
//! `Unknown`. A malformed table (a bad relocation, an entry outside its section) is an
//! error.

use super::{Fde, Rows};
use crate::object::coff::{read_relocations, section_names};
use cpjit_model::{FrameRow, FrameSave, X64_DWARF_XMM0, X64_UNWIND_DWARF_REGISTERS};
use goblin::pe::Coff;
use std::collections::BTreeMap;

const IMAGE_REL_AMD64_ADDR32NB: u16 = 3;
const RUNTIME_FUNCTION_SIZE: usize = 12;
const UNW_FLAG_EHANDLER: u8 = 1;
const UNW_FLAG_UHANDLER: u8 = 2;
const UNW_FLAG_CHAININFO: u8 = 4;

/// DWARF numbers of x64's `rsp` and return address.
const RSP: u8 = 7;
const RETURN_ADDRESS: u8 = 16;

/// One unwind code, decoded: the prologue offset it applies from and what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    /// `UWOP_PUSH_NONVOL`: register (Windows number) pushed.
    Push(u8),
    /// `UWOP_ALLOC_SMALL`/`UWOP_ALLOC_LARGE`: bytes subtracted from `rsp`.
    Alloc(u32),
    /// `UWOP_SET_FPREG`: the frame register (Windows number, from the header) is set to
    /// `rsp` + the header's offset (already × 16).
    SetFrame(u8, u32),
    /// `UWOP_SAVE_NONVOL`(`_FAR`): register saved at the frame base + offset.
    Save(u8, u32),
    /// `UWOP_SAVE_XMM128`(`_FAR`): `xmm<n>` saved at the frame base + offset.
    SaveXmm(u8, u32),
}

/// Every function the object's `.pdata` sections describe, as [`Fde`]s (section name,
/// begin, length, rows or why there are none).
pub(super) fn read(object: &[u8]) -> Result<Vec<Fde>, String> {
    let coff = Coff::parse(object).map_err(|e| format!("not a COFF object: {e}"))?;
    let names = section_names(&coff);
    let symbols = symbol_sections(&coff)?;
    let mut fdes = Vec::new();
    for (index, section) in coff.sections.iter().enumerate() {
        if !is_named(&names[index], ".pdata") {
            continue;
        }
        let at = |e: String| format!("{}: {e}", names[index]);
        let bytes = section_bytes(object, section).map_err(at)?;
        if bytes.len() % RUNTIME_FUNCTION_SIZE != 0 {
            return Err(at(format!(
                "{} bytes, not a whole number of 12-byte RUNTIME_FUNCTION entries",
                bytes.len()
            )));
        }
        let mut fields: BTreeMap<u64, (usize, u64)> = BTreeMap::new();
        for (offset, symbol, typ) in
            read_relocations(object, section).map_err(|e| at(e.to_string()))?
        {
            if typ != IMAGE_REL_AMD64_ADDR32NB || offset % 4 != 0 {
                return Err(at(format!(
                    "relocation type {typ:#x} at {offset:#x}: only IMAGE_REL_AMD64_ADDR32NB on an entry field is expected"
                )));
            }
            let &(target, value) = symbols.get(&symbol).ok_or_else(|| {
                at(format!(
                    "relocation at {offset:#x} names symbol {symbol}, which has no section"
                ))
            })?;
            let field = bytes
                .get(offset as usize..offset as usize + 4)
                .ok_or_else(|| at(format!("relocation at {offset:#x} past the section end")))?;
            let addend = u64::from(u32::from_le_bytes(field.try_into().unwrap()));
            if fields.insert(offset, (target, value + addend)).is_some() {
                return Err(at(format!("two relocations at {offset:#x}")));
            }
        }
        for entry in (0..bytes.len() as u64).step_by(RUNTIME_FUNCTION_SIZE) {
            let field = |k: u64, what: &str| {
                fields.get(&(entry + 4 * k)).copied().ok_or_else(|| {
                    at(format!(
                        "entry at {entry:#x}: its {what} field has no relocation"
                    ))
                })
            };
            let (begin_section, begin) = field(0, "begin")?;
            let (end_section, end) = field(1, "end")?;
            let (info_section, info) = field(2, "unwind info")?;
            if end_section != begin_section || end <= begin {
                return Err(at(format!(
                    "entry at {entry:#x}: end is not after begin in the same section"
                )));
            }
            if !is_named(&names[info_section], ".xdata") {
                return Err(at(format!(
                    "entry at {entry:#x}: unwind info in `{}`, not `.xdata`",
                    names[info_section]
                )));
            }
            let xdata = section_bytes(object, &coff.sections[info_section])
                .map_err(|e| format!("{}: {e}", names[info_section]))?;
            let len = end - begin;
            fdes.push(Fde {
                section: names[begin_section].clone(),
                begin,
                len,
                rows: unwind_info(xdata, info as usize)
                    .map_err(|e| format!("{} at {info:#x}: {e}", names[info_section]))?
                    .and_then(|codes| rows(&codes, len)),
            });
        }
    }
    Ok(fdes)
}

/// Whether `name` (a [`section_names`] name) is `base` or `base#<number>`.
fn is_named(name: &str, base: &str) -> bool {
    name == base
        || name
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('#'))
}

fn section_bytes<'a>(
    object: &'a [u8],
    s: &goblin::pe::section_table::SectionTable,
) -> Result<&'a [u8], String> {
    let start = s.pointer_to_raw_data as usize;
    object
        .get(start..start + s.size_of_raw_data as usize)
        .ok_or_else(|| "contents run past the end of the file".into())
}

/// Symbol index → (section index, value) for every symbol defined in a section.
fn symbol_sections(coff: &Coff<'_>) -> Result<BTreeMap<u32, (usize, u64)>, String> {
    let mut out = BTreeMap::new();
    let count = coff.header.number_of_symbol_table as usize;
    let Some(table) = &coff.symbols else {
        return Ok(out);
    };
    let mut i = 0;
    while i < count {
        let (_, s) = table
            .get(i)
            .ok_or_else(|| format!("symbol {i} is truncated"))?;
        if s.section_number > 0 && (s.section_number as usize) <= coff.sections.len() {
            out.insert(
                i as u32,
                (s.section_number as usize - 1, u64::from(s.value)),
            );
        }
        i += 1 + s.number_of_aux_symbols as usize;
    }
    Ok(out)
}

/// The unwind codes of the `UNWIND_INFO` at `at` in `.xdata`, in prologue order (the
/// table lists them last first), each with its code offset; `Ok(Err(..))` for an entry the
/// rows cannot express, `Err` for a malformed one.
#[allow(clippy::type_complexity)]
fn unwind_info(xdata: &[u8], at: usize) -> Result<Result<Vec<(u8, Code)>, (u64, String)>, String> {
    let header = xdata
        .get(at..at + 4)
        .ok_or("UNWIND_INFO past the section end")?;
    let (version, flags) = (header[0] & 7, header[0] >> 3);
    let (prologue, count) = (header[1], header[2] as usize);
    let (frame_register, frame_offset) = (header[3] & 15, header[3] >> 4);
    let slots = xdata
        .get(at + 4..at + 4 + 2 * count)
        .ok_or("unwind codes past the section end")?;
    let slot = |k: usize| u16::from_le_bytes([slots[2 * k], slots[2 * k + 1]]);
    if version != 1 {
        return Ok(Err((
            0,
            format!("UNWIND_INFO version {version} (only version 1 has no epilogue codes)"),
        )));
    }
    if flags & (UNW_FLAG_EHANDLER | UNW_FLAG_UHANDLER | UNW_FLAG_CHAININFO) != 0 || flags > 7 {
        return Ok(Err((
            0,
            format!("UNWIND_INFO flags {flags:#x} (an exception handler or chained unwind info)"),
        )));
    }
    let mut codes = Vec::with_capacity(count);
    let mut k = 0;
    while k < count {
        let [offset, op] = slot(k).to_le_bytes();
        let (operation, info) = (op & 15, op >> 4);
        let extra = |n: usize| -> Result<u32, String> {
            if k + n >= count {
                return Err(format!(
                    "unwind code at prologue offset {offset:#x}: operands past the code count"
                ));
            }
            Ok(match n {
                1 => u32::from(slot(k + 1)),
                _ => u32::from(slot(k + 1)) | u32::from(slot(k + 2)) << 16,
            })
        };
        let (code, used) = match operation {
            0 => (Code::Push(info), 1),
            1 if info == 0 => (Code::Alloc(extra(1)? * 8), 2),
            1 if info == 1 => (Code::Alloc(extra(2)?), 3),
            2 => (Code::Alloc(u32::from(info) * 8 + 8), 1),
            3 => (
                Code::SetFrame(frame_register, u32::from(frame_offset) * 16),
                1,
            ),
            4 => (Code::Save(info, extra(1)? * 8), 2),
            5 => (Code::Save(info, extra(2)?), 3),
            8 => (Code::SaveXmm(info, extra(1)? * 16), 2),
            9 => (Code::SaveXmm(info, extra(2)?), 3),
            other => {
                let name = match other {
                    10 => "UWOP_PUSH_MACHFRAME",
                    6 | 7 => "an epilogue or reserved code",
                    _ => "an unknown code",
                };
                return Ok(Err((
                    u64::from(offset),
                    format!(
                        "unwind code {other} ({name}, op info {info}) has no frame-row equivalent"
                    ),
                )));
            }
        };
        if offset > prologue {
            return Ok(Err((
                u64::from(offset),
                format!("unwind code {operation} after the {prologue}-byte prologue"),
            )));
        }
        if matches!(code, Code::SetFrame(..)) && frame_register == 0 {
            return Err("UWOP_SET_FPREG without a frame register".into());
        }
        codes.push((offset, code));
        k += used;
    }
    codes.reverse();
    if codes.windows(2).any(|w| w[1].0 < w[0].0) {
        return Err("unwind codes are not in prologue order".into());
    }
    Ok(Ok(codes))
}

/// Replays prologue codes into rows and saves over a function of `len` bytes: the entry
/// state (`CFA = rsp + 8`, return address at `CFA - 8`), then each code at its offset.
fn rows(codes: &[(u8, Code)], len: u64) -> Result<Rows, (u64, String)> {
    let len32 = len as u32;
    let mut out = Rows {
        rows: vec![FrameRow {
            offset: 0,
            cfa_register: RSP,
            cfa_offset: 8,
        }],
        saves: vec![FrameSave {
            register: RETURN_ADDRESS,
            cfa_offset: 8,
            from: 0,
            to: len32,
        }],
    };
    // Bytes between the CFA and rsp; once a frame register is set, the depth its value
    // (minus the frame offset) is at, which is the base of later saves.
    let mut depth = 8u32;
    let mut frame: Option<u32> = None;
    let mut saved_any = false;
    for &(offset, code) in codes {
        let at = u32::from(offset);
        let fail = |why: String| Err((u64::from(offset), why));
        let row = |out: &mut Rows, cfa_register: u8, cfa_offset: u32| match out.rows.last_mut() {
            Some(last) if last.offset == at => {
                last.cfa_register = cfa_register;
                last.cfa_offset = cfa_offset;
            }
            _ => out.rows.push(FrameRow {
                offset: at,
                cfa_register,
                cfa_offset,
            }),
        };
        let save = |out: &mut Rows, register: u8, cfa_offset: u32| {
            out.saves.push(FrameSave {
                register,
                cfa_offset,
                from: at,
                to: len32,
            });
        };
        let base = frame.unwrap_or(depth);
        match code {
            Code::Push(_) | Code::Alloc(_) if saved_any => {
                return fail(format!(
                    "unwind code {code:?} after a register save: the save's offset would be relative to a moving base"
                ))
            }
            Code::Push(r) => {
                depth += 8;
                save(&mut out, X64_UNWIND_DWARF_REGISTERS[usize::from(r)], depth);
                if frame.is_none() {
                    row(&mut out, RSP, depth);
                }
            }
            Code::Alloc(n) => {
                depth = depth.checked_add(n).ok_or((u64::from(offset), "allocation overflows".to_string()))?;
                if frame.is_none() {
                    row(&mut out, RSP, depth);
                }
            }
            Code::SetFrame(r, frame_offset) => {
                if frame.is_some() || frame_offset > depth {
                    return fail(format!(
                        "UWOP_SET_FPREG (offset {frame_offset}) twice or above the CFA"
                    ));
                }
                let register = X64_UNWIND_DWARF_REGISTERS[usize::from(r)];
                frame = Some(depth);
                row(&mut out, register, depth - frame_offset);
            }
            Code::Save(r, o) | Code::SaveXmm(r, o) => {
                if o >= base {
                    return fail(format!("register save at base+{o}, not below the CFA"));
                }
                let register = match code {
                    Code::SaveXmm(..) => X64_DWARF_XMM0 + r,
                    _ => X64_UNWIND_DWARF_REGISTERS[usize::from(r)],
                };
                saved_any = true;
                save(&mut out, register, base - o);
            }
        }
    }
    out.rows.retain(|r| u64::from(r.offset) < len);
    out.saves.retain(|v| u64::from(v.from) < len);
    out.saves.sort_by_key(|v| (v.from, v.register));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{row, save};
    use super::*;

    /// `UNWIND_INFO` bytes: version 1, no flags, the prologue size, codes (last first).
    fn info(prologue: u8, frame: u8, slots: &[u16]) -> Vec<u8> {
        let mut v = vec![1, prologue, slots.len() as u8, frame];
        for s in slots {
            v.extend_from_slice(&s.to_le_bytes());
        }
        v
    }

    #[test]
    fn a_shim_prologue_becomes_rows_and_saves() {
        // push r15 (2); push rbx (3); sub rsp, 0x48 (7); movaps [rsp+0x20], xmm6 (12).
        let codes = unwind_info(
            &info(
                12,
                0,
                &[
                    0x0c | 0x68 << 8,
                    2,
                    0x07 | 0x82 << 8,
                    0x03 | 0x30 << 8,
                    0x02 | 0xf0 << 8,
                ],
            ),
            0,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            codes,
            [
                (2, Code::Push(15)),
                (3, Code::Push(3)),
                (7, Code::Alloc(0x48)),
                (12, Code::SaveXmm(6, 0x20))
            ]
        );
        let r = rows(&codes, 40).unwrap();
        assert_eq!(
            r.rows,
            [row(0, 7, 8), row(2, 7, 16), row(3, 7, 24), row(7, 7, 96)]
        );
        assert_eq!(
            r.saves,
            [
                save(16, 8, 0, 40),
                save(15, 16, 2, 40),
                save(3, 24, 3, 40),
                save(23, 96 - 0x20, 12, 40)
            ]
        );
    }

    #[test]
    fn a_frame_register_moves_the_cfa_rule_and_the_save_base() {
        // push rbp (1); sub rsp, 0x30 (5); lea rbp, [rsp+0x20] (10): frame offset 2 (x16);
        // mov [rbp-0x20+8], rsi at 14 (base = rsp at the setting).
        let codes = unwind_info(
            &info(
                14,
                5 | 2 << 4,
                &[
                    0x0e | 0x64 << 8,
                    1,
                    0x0a | 0x03 << 8,
                    0x05 | 0x52 << 8,
                    0x01 | 0x50 << 8,
                ],
            ),
            0,
        )
        .unwrap()
        .unwrap();
        let r = rows(&codes, 30).unwrap();
        assert_eq!(
            r.rows,
            [
                row(0, 7, 8),
                row(1, 7, 16),
                row(5, 7, 64),
                row(10, 6, 64 - 32)
            ]
        );
        assert!(r.saves.contains(&save(6, 16, 1, 30)));
        assert!(r.saves.contains(&save(4, 64 - 8, 14, 30)), "{:?}", r.saves);
    }

    #[test]
    fn what_rows_cannot_express_is_reported_with_its_code_and_offset() {
        // UWOP_PUSH_MACHFRAME at 4.
        let e = unwind_info(&info(4, 0, &[0x04 | 0x0a << 8]), 0)
            .unwrap()
            .unwrap_err();
        assert_eq!(e.0, 4);
        assert!(e.1.contains("UWOP_PUSH_MACHFRAME"), "{}", e.1);
        // An exception handler.
        let mut v = info(0, 0, &[]);
        v[0] |= UNW_FLAG_EHANDLER << 3;
        assert!(unwind_info(&v, 0)
            .unwrap()
            .unwrap_err()
            .1
            .contains("handler"));
        // An allocation after a save.
        let codes = [
            (4, Code::Alloc(32)),
            (8, Code::Save(3, 8)),
            (12, Code::Alloc(16)),
        ];
        let e = rows(&codes, 20).unwrap_err();
        assert_eq!(e.0, 12);
        // Truncated tables are malformed, not unknown.
        assert!(unwind_info(&info(4, 0, &[0x04 | 0x01 << 8]), 0).is_err());
        assert!(unwind_info(&[1, 0], 0).is_err());
    }
}
