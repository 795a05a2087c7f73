//! [`ParsedObject`] → stencils: the format-independent half of object reading.
//!
//! For each selected function: its code range, then (transitively, through relocations) the
//! local functions it calls and the data sections it or they reference. Layout rules:
//!
//! * Code: the stencil's function at offset 0 (the hot part); then its cold part: the cold
//!   blocks the code generator split off (`<op>.cold`, ELF) or the reader moved (the code
//!   after an AArch64 function's last continuation jump, COFF and Mach-O: [`tail`]) and the local helpers it
//!   references (static functions the compiler did not inline), in discovery order, each at
//!   its section's alignment, padded with the architecture's `nop`. References to the hot
//!   part are [`HoleValue::Code`] holes, to the cold part [`HoleValue::Cold`] holes, with the
//!   offset in the addend. The runtime lays the cold parts after the trace's hot code.
//! * Data: every referenced data section, whole: read-only sections, then writable, then
//!   zero-fill (as zero bytes), each group in section order, each at its alignment.
//!   References become [`HoleValue::Data`] holes with the offset in the addend.
//! * Externals: `<prefix>CONTINUE` → continue, `<prefix><X><suffix>` → jump target
//!   `<X><suffix>`, other `<prefix><X>` → operand `<X>`, anything else → external symbol
//!   (stack-protector and TLS helpers are rejected).
//! * The immediate fields of every hole are zeroed, so the bytes do not depend on addends.
//! * Elision: when the hot part's last instruction is a jump to the
//!   continuation (x86 `E9 rel32` with addend −4, AArch64 `b` with addend 0), the jump is
//!   removed. Trailing padding is dropped first, but only where it is provably padding:
//!   for symbol-delimited ranges (no recorded size), the bytes after that `jmp` must all be
//!   `nop`/`int3` forms; on AArch64, trailing `nop` words.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use cpjit_isa::{aarch64, continuation_jump, riscv64, x86_64};
use cpjit_model::{Arch, Hole, HoleKind, HoleValue, Section};

use super::error::{ObjectError, ObjectErrorKind};
use super::parsed::{ParsedObject, ParsedReloc, RelocTarget, SectionKind};
use super::ReadOptions;
use crate::stencil::{CodePiece, StencilBuf, ZeroFillBuf};

mod holes;
mod lengthen;
mod tail;

use holes::{collect_holes, index_holes, Indexed};
use lengthen::Lengthened;

/// Names whose presence means the stencil was compiled with a stack protector.
const STACK_PROTECTOR_SYMBOLS: &[&str] = &[
    "__stack_chk_guard",
    "__stack_chk_fail",
    "__stack_chk_fail_local",
    "__security_cookie",
    "__security_check_cookie",
];

/// Runtime helpers of thread-local storage models.
const TLS_SYMBOLS: &[&str] = &[
    "__tls_get_addr",
    "_tls_index",
    "_tls_array",
    "__tlv_bootstrap",
];

/// Builds every selected stencil, sorted by name.
pub fn assemble(obj: &ParsedObject, opts: &ReadOptions) -> Result<Vec<StencilBuf>, ObjectError> {
    let mut chosen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, symbol) in obj.symbols.iter().enumerate() {
        let Some(def) = symbol.definition else {
            continue;
        };
        let is_code = obj
            .sections
            .get(def.section)
            .is_some_and(|s| s.kind == SectionKind::Code);
        if !is_code || !def.starts_range || !(opts.select)(&symbol.name) {
            continue;
        }
        if chosen.insert(&symbol.name, index).is_some() {
            return Err(ObjectError::corrupt("function defined twice").symbol(&symbol.name));
        }
    }
    chosen
        .into_iter()
        .map(|(name, index)| build(obj, opts, index).map_err(|e| e.stencil(name)))
        .collect()
}

/// A function copied into the stencil's code.
#[derive(Clone, Copy, Debug)]
struct Piece {
    section: usize,
    start: u64,
    end: u64,
    /// Offset in the stencil's code.
    at: u64,
}

/// What a relocation target is, relative to this object.
#[derive(Clone, Copy, Debug)]
enum Place {
    External(usize),
    /// A function by (section, start) and the offset within it.
    Function(usize, u64, u64),
    /// A data section and the offset within it.
    Data(usize, u64),
}

/// A hole before name indices are assigned: (section, offset, kind, value, addend); the
/// value is `Ok` for externals (named) and `Err` for code/data (already final).
type RawHole = (Section, u64, HoleKind, Result<External, HoleValue>, i64);

/// An external value, before indices are assigned.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum External {
    Continue,
    Target(String),
    Operand(String),
    Symbol(String),
}

fn build(obj: &ParsedObject, opts: &ReadOptions, symbol: usize) -> Result<StencilBuf, ObjectError> {
    let name = &obj.symbols[symbol].name;
    let (section, start, end, exact) = obj
        .function_range(symbol)
        .ok_or_else(|| ObjectError::corrupt("function extends past its section").symbol(name))?;

    let first = Piece {
        section,
        start,
        end,
        at: 0,
    };
    let (mut pieces, data_sections) = discover(obj, symbol, first)?;
    // The cold tail, where the reader moves it (see `tail`), is the first cold piece.
    let split = opts
        .move_cold_tail
        .then(|| tail::split_point(obj, opts, &pieces[0]))
        .flatten();
    if let Some(split) = &split {
        let tail = Piece {
            start: split.at,
            ..pieces[0]
        };
        pieces[0].end = split.at;
        pieces.insert(1, tail);
    }
    let lengthened = split.as_ref().and_then(|s| s.lengthened.as_ref());

    // Code layout. The first cold piece starts at the stencil's alignment, so that every
    // cold piece keeps its own alignment relative to the cold part's start (see `split_cold`).
    let mut code = Vec::new();
    let code_align = pieces
        .iter()
        .map(|p| obj.sections[p.section].align)
        .fold(1u32, u32::max);
    for (k, piece) in pieces.iter_mut().enumerate() {
        let s = &obj.sections[piece.section];
        let align = if k == 1 { code_align } else { s.align };
        pad_code(&mut code, align, opts.arch)?;
        piece.at = code.len() as u64;
        match lengthened.filter(|l| k < 2 && l.section == piece.section) {
            Some(l) => code.extend_from_slice(
                &l.bytes[l.relative(piece.start) as usize..l.relative(piece.end) as usize],
            ),
            None => code.extend_from_slice(&s.bytes[piece.start as usize..piece.end as usize]),
        }
    }

    let DataLayout {
        ordered,
        mut data,
        data_len,
        data_align,
        data_at,
        zero_fill,
    } = lay_out_data(obj, &data_sections, opts)?;

    let mut raw = collect_holes(obj, opts, &pieces, lengthened, &ordered, &data_at)?;
    if split.is_some() {
        raw.extend(tail::crossing_branches(obj, &pieces, lengthened)?);
    }

    // Zero each hole's field (validating the instruction form on AArch64).
    for (location, at, kind, _, _) in &raw {
        let bytes = if *location == Section::Code {
            &mut code
        } else {
            &mut data
        };
        clear_field(bytes, *at, *kind).map_err(|e| e.offset(*at).relocation(kind.name()))?;
    }

    let Indexed {
        mut holes,
        operands,
        targets,
        symbols,
    } = index_holes(&raw)?;

    let main_end = Lengthened::piece_offset(lengthened, &pieces[0], pieces[0].end);
    let (elided_continue, cold_len) = match pieces.get(1).map(|p| p.at) {
        None => (elide_continue(&mut code, &mut holes, opts.arch, exact), 0),
        Some(cold_start) => {
            let (elided, hot_len) = split_cold(
                &mut code, &mut holes, main_end, cold_start, opts.arch, exact,
            )?;
            for piece in &mut pieces[1..] {
                piece.at = piece.at - cold_start + hot_len;
            }
            (elided, code.len() as u64 - hot_len)
        }
    };
    let function = pieces[0].start;
    let pieces = pieces
        .iter()
        .enumerate()
        .map(|(k, p)| CodePiece {
            section: obj.sections[p.section].name.clone(),
            start: p.start,
            end: p.end,
            at: p.at,
            function: if k == 1 && split.is_some() {
                function
            } else {
                p.start
            },
            growth: match lengthened {
                Some(l) if k < 2 => l.growth.clone(),
                _ => Vec::new(),
            },
        })
        .collect();
    Ok(StencilBuf {
        pieces,
        frame: None,
        name: obj.symbols[symbol].name.clone(),
        code,
        code_align,
        init_data: data,
        data_len,
        data_align,
        zero_fill,
        holes,
        operands: operands.into_iter().collect(),
        targets: targets.into_iter().collect(),
        symbols: symbols.into_iter().collect(),
        elided_continue,
        cold_len: u32::try_from(cold_len)
            .map_err(|_| ObjectError::corrupt("stencil larger than 4 GiB"))?,
    })
}

/// The stencil's pieces of code (its function first, then the helpers it reaches) and the
/// data sections it references: breadth-first, in relocation order, so deterministic.
fn discover(
    obj: &ParsedObject,
    symbol: usize,
    first: Piece,
) -> Result<(Vec<Piece>, BTreeSet<usize>), ObjectError> {
    let mut pieces = vec![first];
    let mut data_sections: BTreeSet<usize> = BTreeSet::new();
    let mut queue: VecDeque<(bool, usize)> = VecDeque::from([(true, 0)]);
    while let Some((is_piece, index)) = queue.pop_front() {
        let (sec, lo, hi) = if is_piece {
            let p = pieces[index];
            check_unrelocated_locals(obj, p.section, symbol)?;
            (p.section, p.start, p.end)
        } else {
            (index, 0, obj.sections[index].size)
        };
        for r in relocs_in(obj, sec, lo, hi) {
            if !is_piece {
                check_code_offsets_in_data(obj, sec, r)?;
            }
            match place(obj, r).map_err(|e| reloc_context(e, obj, sec, r))? {
                Place::External(_) => {}
                Place::Function(fsec, fstart, _) => {
                    if !pieces
                        .iter()
                        .any(|p| p.section == fsec && p.start == fstart)
                    {
                        let (_, s, e, _) = function_at(obj, fsec, fstart).ok_or_else(|| {
                            reloc_context(ObjectError::corrupt("bad function"), obj, sec, r)
                        })?;
                        pieces.push(Piece {
                            section: fsec,
                            start: s,
                            end: e,
                            at: 0,
                        });
                        queue.push_back((true, pieces.len() - 1));
                    }
                }
                Place::Data(dsec, _) => {
                    if data_sections.insert(dsec) {
                        queue.push_back((false, dsec));
                    }
                }
            }
        }
    }
    Ok((pieces, data_sections))
}

/// The stencil's data: its sections in kind order (read-only, writable, zero-fill; section
/// order within each), the initialized bytes, and where each section starts.
struct DataLayout {
    ordered: Vec<usize>,
    data: Vec<u8>,
    /// Initialized and zero-fill bytes.
    data_len: u64,
    data_align: u32,
    data_at: BTreeMap<usize, u64>,
    zero_fill: Vec<ZeroFillBuf>,
}

/// Lays out `data_sections` (see [`DataLayout`]), refusing more than the data limit.
fn lay_out_data(
    obj: &ParsedObject,
    data_sections: &BTreeSet<usize>,
    opts: &ReadOptions,
) -> Result<DataLayout, ObjectError> {
    let mut ordered: Vec<usize> = data_sections.iter().copied().collect();
    ordered.sort_by_key(|&i| (obj.sections[i].kind, i));
    let mut data = Vec::new();
    let mut data_align = 1u32;
    let mut data_at: BTreeMap<usize, u64> = BTreeMap::new();
    let data_size = ordered.iter().fold(0u64, |at, &i| {
        let s = &obj.sections[i];
        at.next_multiple_of(u64::from(s.align))
            .saturating_add(s.size)
    });
    if data_size > opts.limits.data_bytes as u64 {
        return Err(data_limit_error(
            obj,
            &ordered,
            data_size,
            opts.limits.data_bytes,
        ));
    }
    // Zero-fill comes last (kind order), so the initialized bytes are a prefix; zero-fill
    // sections are only described (name, size, offset), never materialized as zeros.
    let mut data_len = 0u64;
    let mut zero_fill = Vec::new();
    for &i in &ordered {
        let s = &obj.sections[i];
        data_align = data_align.max(s.align);
        let at = data_len.next_multiple_of(u64::from(s.align));
        data_at.insert(i, at);
        if s.kind == SectionKind::ZeroFill {
            zero_fill.push(ZeroFillBuf {
                section: s.name.clone(),
                size: s.size,
                align: s.align,
                offset: at,
            });
        } else {
            data.resize(at as usize, 0);
            data.extend_from_slice(&s.bytes);
        }
        data_len = at + s.size;
    }
    Ok(DataLayout {
        ordered,
        data,
        data_len,
        data_align,
        data_at,
        zero_fill,
    })
}

/// Splits code laid out as `[main function][padding][cold pieces]` (`main_end`, `cold_start`)
/// into the hot part, the main function with its trailing continuation jump elided (so
/// that it falls through into the next instance), and the cold part right after it: the
/// other pieces (cold blocks the code generator split off, static helpers), which the
/// runtime lays after the trace's hot code. References into the cold part become
/// [`HoleValue::Cold`] holes with the offset into it; holes inside it move with it.
/// Returns whether the jump was elided, and the hot part's length.
fn split_cold(
    code: &mut Vec<u8>,
    holes: &mut Vec<Hole>,
    main_end: u64,
    cold_start: u64,
    arch: Arch,
    exact: bool,
) -> Result<(bool, u64), ObjectError> {
    let cold = code.split_off(cold_start as usize);
    code.truncate(main_end as usize);
    let in_cold = |h: &Hole| h.section == Section::Code && u64::from(h.offset) >= cold_start;
    let (cold_holes, mut hot_holes): (Vec<Hole>, Vec<Hole>) =
        holes.iter().partition(|h| in_cold(h));
    let elided = elide_continue(code, &mut hot_holes, arch, exact);
    let hot_len = code.len() as u64;
    let shift = |offset: u32| -> Result<u32, ObjectError> {
        u32::try_from(u64::from(offset) - cold_start + hot_len)
            .map_err(|_| ObjectError::corrupt("stencil larger than 4 GiB"))
    };
    holes.clear();
    holes.extend(hot_holes);
    for mut h in cold_holes {
        h.offset = shift(h.offset)?;
        holes.push(h);
    }
    holes.sort_by_key(|h| (h.section, h.offset));
    code.extend_from_slice(&cold);
    Ok((elided, hot_len))
}

/// `offset + addend` as a hole addend, or an error if it does not fit.
fn offset_addend(offset: u64, addend: i64) -> Result<i64, ObjectError> {
    i64::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(addend))
        .ok_or_else(|| ObjectError::corrupt(format!("addend {addend:#x} out of range")))
}

/// Bytes a relocation covers: its kind's width, or 4 for a kind that failed to map (the
/// error is reported when the hole is emitted).
fn emit_width(r: &ParsedReloc) -> u64 {
    r.kind.as_ref().map(|k| k.width() as u64).unwrap_or(4)
}

fn relocs_in(
    obj: &ParsedObject,
    section: usize,
    lo: u64,
    hi: u64,
) -> impl Iterator<Item = &ParsedReloc> {
    obj.sections[section]
        .relocs
        .iter()
        .filter(move |r| r.offset >= lo && r.offset < hi)
}

fn reloc_context(
    e: ObjectError,
    obj: &ParsedObject,
    section: usize,
    r: &ParsedReloc,
) -> ObjectError {
    let symbol = match r.target {
        RelocTarget::Symbol(i) | RelocTarget::Absolute(i) => {
            obj.symbols.get(i).map(|s| s.name.as_str())
        }
        RelocTarget::Section(i) => obj.sections.get(i).map(|s| s.name.as_str()),
    };
    let e = e
        .section(&obj.sections[section].name)
        .offset(r.offset)
        .relocation(&r.type_name);
    match symbol {
        Some(s) => e.symbol(s),
        None => e,
    }
}

/// The stencil's data (every section it references, each instance a private copy) is over
/// the manifest's `[limits] data_bytes`: name the limit and the largest section.
fn data_limit_error(
    obj: &ParsedObject,
    sections: &[usize],
    size: u64,
    limit: usize,
) -> ObjectError {
    let largest = sections
        .iter()
        .map(|&i| &obj.sections[i])
        .max_by_key(|s| s.size)
        .expect("over the limit means at least one section");
    ObjectError::new(
        ObjectErrorKind::LimitExceeded,
        format!(
            "{size} B of data (every instance gets a copy) exceed the limit [limits] data_bytes \
             = {limit} in manifest.toml; largest section {} ({} B); keep large tables outside \
             the stencil (a helper or a pointer in the frame) or raise the limit",
            largest.name, largest.size
        ),
    )
}

/// Rejects a function whose section also holds a local function the assembler may have
/// called without a relocation (ELF without `-ffunction-sections`).
fn check_unrelocated_locals(
    obj: &ParsedObject,
    section: usize,
    stencil: usize,
) -> Result<(), ObjectError> {
    for &local in &obj.unrelocated_locals {
        let sym = &obj.symbols[local];
        if local != stencil && sym.definition.is_some_and(|d| d.section == section) {
            return Err(ObjectError::new(
                ObjectErrorKind::Unsupported,
                format!(
                    "local function `{}` shares this section with other functions; the assembler \
                     resolves calls to it without relocations, so they cannot be followed: compile \
                     with -ffunction-sections",
                    sym.name
                ),
            )
            .section(&obj.sections[section].name));
        }
    }
    Ok(())
}

/// Rejects a relocation in data that makes a relative offset of code (anything but a 64-bit
/// absolute address): a jump table, as a `switch` compiled with `-fjump-tables` gives on
/// x86-64 and RISC-V. An instance's data is a private copy at no fixed distance from its
/// code, so such an entry has no value to patch; AArch64's tables (offsets from an `adr` in
/// the code) and x86-64 Mach-O's (inside the code) need no relocation and pass.
fn check_code_offsets_in_data(
    obj: &ParsedObject,
    data: usize,
    r: &ParsedReloc,
) -> Result<(), ObjectError> {
    let target = match r.target {
        RelocTarget::Symbol(i) => obj
            .symbols
            .get(i)
            .and_then(|s| s.definition.map(|d| d.section)),
        RelocTarget::Section(s) => Some(s),
        RelocTarget::Absolute(_) => None,
    };
    let Some(code) = target
        .and_then(|s| obj.sections.get(s))
        .filter(|s| s.kind == SectionKind::Code)
    else {
        return Ok(());
    };
    if matches!(r.kind, Ok(HoleKind::Abs64)) {
        return Ok(());
    }
    Err(reloc_context(
        ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!(
                "a jump table: `{}` holds {} offsets of code in `{}`, as a `switch` compiled \
                 to a table of branch targets does; each instance's data is copied at no fixed \
                 distance from its code, so the entries cannot be patched. Fix: compile without \
                 jump tables: remove `-fjump-tables` from the set's flags (the toolchain passes \
                 `-fno-jump-tables`), or add `cflags = [\"-fno-jump-tables\"]` under \
                 `[target.<triple>]` in manifest.toml (appended last, it wins)",
                obj.sections[data].name, r.type_name, code.name
            ),
        ),
        obj,
        data,
        r,
    ))
}

/// The function (by range) that starts at or contains `offset` in `section`.
fn function_at(obj: &ParsedObject, section: usize, offset: u64) -> Option<(usize, u64, u64, bool)> {
    (0..obj.symbols.len())
        .filter(|&i| {
            obj.symbols[i]
                .definition
                .is_some_and(|d| d.section == section && d.starts_range)
        })
        .filter_map(|i| obj.function_range(i))
        .filter(|&(_, s, e, _)| s <= offset && (offset < e || s == offset))
        .max_by_key(|&(_, s, e, _)| (s, std::cmp::Reverse(e)))
}

fn place(obj: &ParsedObject, r: &ParsedReloc) -> Result<Place, ObjectError> {
    let (section, offset, by_section_symbol) = match r.target {
        RelocTarget::Symbol(i) => match obj.symbols.get(i).and_then(|s| s.definition) {
            None => return Ok(Place::External(i)),
            Some(d) => (d.section, d.offset, false),
        },
        RelocTarget::Section(s) => (s, 0, true),
        RelocTarget::Absolute(_) => {
            return Err(ObjectError::new(
                ObjectErrorKind::MissingSymbol,
                "relocation against an absolute symbol: the value has no place in a stencil",
            ))
        }
    };
    let s = obj
        .sections
        .get(section)
        .ok_or_else(|| ObjectError::corrupt("bad section index"))?;
    if s.kind != SectionKind::Code {
        return Ok(Place::Data(section, offset));
    }
    if by_section_symbol {
        let functions = obj
            .symbols
            .iter()
            .filter(|x| {
                x.definition
                    .is_some_and(|d| d.section == section && d.starts_range)
            })
            .count();
        if functions != 1 {
            return Err(ObjectError::new(
                ObjectErrorKind::Unsupported,
                "section-relative reference into a code section with several functions: \
                 compile with -ffunction-sections",
            ));
        }
    }
    let (_, start, _, _) = function_at(obj, section, offset).ok_or_else(|| {
        ObjectError::new(
            ObjectErrorKind::MissingSymbol,
            "reference into code outside any function",
        )
    })?;
    Ok(Place::Function(section, start, offset - start))
}

fn external(name: &str, opts: &ReadOptions) -> Result<External, ObjectError> {
    if let Some(rest) = name.strip_prefix(opts.hole_prefix) {
        return Ok(if rest == "CONTINUE" {
            External::Continue
        } else if rest.is_empty() {
            return Err(ObjectError::new(
                ObjectErrorKind::MissingSymbol,
                "hole symbol without a name",
            ));
        } else if !opts.target_suffix.is_empty()
            && rest.len() > opts.target_suffix.len()
            && rest.ends_with(opts.target_suffix)
        {
            External::Target(rest.to_string())
        } else {
            External::Operand(rest.to_string())
        });
    }
    if STACK_PROTECTOR_SYMBOLS.contains(&name) {
        return Err(ObjectError::new(
            ObjectErrorKind::StackProtector,
            "stack-protector symbol: the runtime has no canary; compile with -fno-stack-protector",
        ));
    }
    if TLS_SYMBOLS.contains(&name) {
        return Err(ObjectError::new(
            ObjectErrorKind::ThreadLocal,
            "thread-local storage helper: stencils cannot have thread-locals",
        ));
    }
    Ok(External::Symbol(name.to_string()))
}

/// Pads `code` with the architecture's `nop` to a multiple of `align`.
fn pad_code(code: &mut Vec<u8>, align: u32, arch: Arch) -> Result<(), ObjectError> {
    let gap = code.len().next_multiple_of(align as usize) - code.len();
    match arch {
        Arch::X86_64 => code.resize(code.len() + gap, x86_64::NOP),
        Arch::Aarch64 if gap % 4 == 0 => {
            for _ in 0..gap / 4 {
                code.extend_from_slice(&aarch64::NOP.to_le_bytes());
            }
        }
        Arch::Aarch64 => {
            return Err(ObjectError::corrupt(
                "AArch64 function size is not a multiple of 4",
            ))
        }
        Arch::Riscv64 if gap % 2 == 0 => {
            if gap % 4 == 2 {
                code.extend_from_slice(&riscv64::C_NOP.to_le_bytes());
            }
            for _ in 0..gap / 4 {
                code.extend_from_slice(&riscv64::NOP.to_le_bytes());
            }
        }
        Arch::Riscv64 => {
            return Err(ObjectError::corrupt(
                "RISC-V function size is not a multiple of 2",
            ))
        }
    }
    Ok(())
}

/// Zeroes the field a hole of `kind` at `at` fills in, checking the instruction's form.
fn clear_field(bytes: &mut [u8], at: u64, kind: HoleKind) -> Result<(), ObjectError> {
    let at = at as usize;
    let width = kind.width();
    let field = bytes
        .get_mut(at..at + width)
        .ok_or_else(|| ObjectError::truncated("hole past the end of the bytes"))?;
    if kind.arch() == Some(Arch::Riscv64) {
        return riscv64::clear_fields(kind, field).map_err(|expected| {
            ObjectError::new(
                ObjectErrorKind::UnexpectedInstruction,
                format!("instruction is not {expected}, the form {kind} patches"),
            )
        });
    }
    if kind.arch() != Some(Arch::Aarch64) {
        field.fill(0);
        return Ok(());
    }
    let insn = u32::from_le_bytes([field[0], field[1], field[2], field[3]]);
    if let Err(expected) = aarch64::check_class(kind, insn) {
        return Err(ObjectError::new(
            ObjectErrorKind::UnexpectedInstruction,
            format!("instruction {insn:#010x} is not {expected}, the form {kind} patches"),
        ));
    }
    field.copy_from_slice(&aarch64::insert(kind, insn, 0).to_le_bytes());
    Ok(())
}

/// Removes a trailing jump to the continuation (see the module docs); true if removed.
/// Also drops provable padding after a final x86 `jmp rel32` to anything. The jump is the
/// one `cpjit_isa::continuation_jump` describes (the one the runtime puts back), with its
/// field already cleared.
fn elide_continue(code: &mut Vec<u8>, holes: &mut Vec<Hole>, arch: Arch, exact: bool) -> bool {
    let jump = continuation_jump(arch);
    let last_code_hole = holes.iter().rposition(|h| h.section == Section::Code);
    let Some(last) = last_code_hole else {
        return false;
    };
    let hole = holes[last];
    let field = hole.offset as usize;
    let Some(start) = field.checked_sub(jump.field_offset) else {
        return false;
    };
    let end = start + jump.bytes.len();
    let is_jump = hole.kind == jump.kind && code.get(start..end) == Some(jump.bytes);
    let tail = code.get(end..).unwrap_or(&[]);
    // After a final jump the instruction boundary is known, so what follows it can be
    // proven to be padding and dropped, whatever the jump's target (x86 `nop` forms and
    // `int3`; AArch64 `nop` words).
    let padding = match arch {
        Arch::X86_64 => x86_64::is_padding(tail),
        Arch::Aarch64 => {
            tail.len() % 4 == 0
                && tail
                    .chunks_exact(4)
                    .all(|w| w == aarch64::NOP.to_le_bytes())
        }
        Arch::Riscv64 => riscv64::is_padding(tail),
    };
    let to_continuation = hole.value == HoleValue::Continue && hole.addend == jump.addend;
    // AArch64 drops its padding only with the jump itself, as it always has.
    if is_jump && !exact && padding && (arch == Arch::X86_64 || to_continuation) {
        code.truncate(end);
    }
    if !(is_jump && to_continuation && code.len() == end) {
        return false;
    }
    code.truncate(start);
    holes.remove(last);
    true
}
