//! The holes of one stencil: every relocation of its code pieces and data sections read
//! as a hole (its kind checked against the target and the place, its value a name or the
//! stencil's own code, cold part or data), then names turned into indices.

use super::lengthen::Lengthened;
use super::{
    emit_width, external, offset_addend, place, reloc_context, relocs_in, External, Piece, Place,
    RawHole,
};
use crate::object::error::{ObjectError, ObjectErrorKind};
use crate::object::parsed::{ParsedObject, ParsedReloc, SectionKind};
use crate::object::ReadOptions;
use cpjit_model::{Hole, HoleKind, HoleValue, Section};
use std::collections::{BTreeMap, BTreeSet};

/// Every relocation of the stencil's code pieces and data sections as a hole, in piece and
/// section order; a relocation that crosses its function's or section's end, or sits in
/// zero-fill, is refused.
pub(super) fn collect_holes(
    obj: &ParsedObject,
    opts: &ReadOptions,
    pieces: &[Piece],
    lengthened: Option<&Lengthened>,
    ordered: &[usize],
    data_at: &BTreeMap<usize, u64>,
) -> Result<Vec<RawHole>, ObjectError> {
    let mut raw: Vec<RawHole> = vec![];
    for piece in pieces {
        for r in relocs_in(obj, piece.section, piece.start, piece.end) {
            let width = emit_width(r);
            if r.offset + width > piece.end {
                return Err(reloc_context(
                    ObjectError::corrupt("relocation crosses the end of the function"),
                    obj,
                    piece.section,
                    r,
                ));
            }
            raw.push(raw_hole(
                obj,
                opts,
                pieces,
                data_at,
                (
                    Section::Code,
                    piece.at + Lengthened::piece_offset(lengthened, piece, r.offset),
                ),
                piece.section,
                r,
            )?);
        }
    }
    for &i in ordered {
        let len = obj.sections[i].size;
        if let (SectionKind::ZeroFill, Some(r)) =
            (obj.sections[i].kind, obj.sections[i].relocs.first())
        {
            return Err(reloc_context(
                ObjectError::corrupt("relocation in a zero-fill section, which has no bytes"),
                obj,
                i,
                r,
            ));
        }
        for r in &obj.sections[i].relocs {
            if r.offset.saturating_add(emit_width(r)) > len {
                return Err(reloc_context(
                    ObjectError::truncated("relocation past the section end"),
                    obj,
                    i,
                    r,
                ));
            }
            let at = (Section::Data, data_at[&i] + r.offset);
            raw.push(raw_hole(obj, opts, pieces, data_at, at, i, r)?);
        }
    }
    Ok(raw)
}

/// Relocation `r` of section `sec`, placed at `location` in the stencil, as a hole: its kind
/// checked against the target and the place, its value external (a name) or the stencil's
/// own code, cold part or data with the addend adjusted to where that lies.
fn raw_hole(
    obj: &ParsedObject,
    opts: &ReadOptions,
    pieces: &[Piece],
    data_at: &BTreeMap<usize, u64>,
    (location, at): (Section, u64),
    sec: usize,
    r: &ParsedReloc,
) -> Result<RawHole, ObjectError> {
    let fail = |e: ObjectError| reloc_context(e, obj, sec, r);
    let kind = r.kind.clone()?;
    if kind.arch().is_some_and(|a| a != opts.arch) {
        return Err(fail(ObjectError::corrupt(format!(
            "{kind} on {}",
            opts.arch.name()
        ))));
    }
    if location == Section::Data && kind != HoleKind::Abs64 {
        return Err(fail(ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!("only 64-bit absolute relocations may be in data, not {kind}"),
        )));
    }
    let local_got = |what: &str| {
        fail(ObjectError::new(
            ObjectErrorKind::Unsupported,
            format!(
                "GOT reference to {what} defined in the object: declare it `static` \
                 (or hidden) so it is addressed directly"
            ),
        ))
    };
    let (value, addend) = match place(obj, r).map_err(fail)? {
        Place::External(i) => (
            Ok(external(&obj.symbols[i].name, opts).map_err(fail)?),
            r.addend,
        ),
        Place::Function(fsec, fstart, offset) => {
            if kind.uses_got() {
                return Err(local_got("a function"));
            }
            // The main function is the hot part; every other piece is in the cold
            // part, which starts at the second piece (see `split_cold`).
            let k = pieces
                .iter()
                .position(|p| p.section == fsec && p.start == fstart);
            let (value, at) = match k {
                Some(k) if k > 0 => (HoleValue::Cold, pieces[k].at - pieces[1].at),
                Some(k) => (HoleValue::Code, pieces[k].at),
                None => (HoleValue::Code, 0),
            };
            (
                Err(value),
                offset_addend(at + offset, r.addend).map_err(fail)?,
            )
        }
        Place::Data(dsec, offset) => {
            if kind.uses_got() {
                return Err(local_got("data"));
            }
            let base = data_at.get(&dsec).copied().ok_or_else(|| {
                fail(ObjectError::corrupt(format!(
                    "internal: data section {dsec} not laid out"
                )))
            })?;
            (
                Err(HoleValue::Data),
                offset_addend(base + offset, r.addend).map_err(fail)?,
            )
        }
    };
    // A 32-bit absolute field holds a narrow operand's value (`narrow.rs` checks it
    // was declared narrow); an address of code, data or a helper never fits in one.
    if kind.is_narrow_only() && !matches!(value, Ok(External::Operand(_))) {
        return Err(fail(ObjectError::new(
            ObjectErrorKind::UnknownRelocation,
            format!(
                "{} holds a 32-bit absolute address, which cannot reach stencil \
                     memory (only an operand declared with CPJIT_DECLARE_NARROW may use \
                     one): compile with -fpic (or -mcmodel=medium/large)",
                r.type_name
            ),
        )));
    }
    Ok((location, at, kind, value, addend))
}

/// The holes with their external names turned into indices, and the names in index order.
pub(super) struct Indexed {
    pub(super) holes: Vec<Hole>,
    pub(super) operands: BTreeSet<String>,
    pub(super) targets: BTreeSet<String>,
    pub(super) symbols: BTreeSet<String>,
}

/// The holes with their external names turned into indices (operands, targets and symbols
/// each numbered in name order), sorted by place; two relocations at one place are refused.
pub(super) fn index_holes(raw: &[RawHole]) -> Result<Indexed, ObjectError> {
    let mut operands = BTreeSet::new();
    let mut targets = BTreeSet::new();
    let mut symbols = BTreeSet::new();
    for (_, _, _, value, _) in raw {
        match value {
            Ok(External::Operand(n)) => operands.insert(n.clone()),
            Ok(External::Target(n)) => targets.insert(n.clone()),
            Ok(External::Symbol(n)) => symbols.insert(n.clone()),
            _ => false,
        };
    }
    let index = |set: &BTreeSet<String>, n: &str| -> Result<u16, ObjectError> {
        let i = set.iter().position(|x| x == n).unwrap_or(0);
        u16::try_from(i)
            .map_err(|_| ObjectError::new(ObjectErrorKind::Unsupported, "more than 65536 names"))
    };
    let mut holes = Vec::with_capacity(raw.len());
    for (location, at, kind, value, addend) in raw {
        let value = match value {
            Err(v) => *v,
            Ok(External::Continue) => HoleValue::Continue,
            Ok(External::Operand(n)) => HoleValue::Operand(index(&operands, n)?),
            Ok(External::Target(n)) => HoleValue::Target(index(&targets, n)?),
            Ok(External::Symbol(n)) => HoleValue::Symbol(index(&symbols, n)?),
        };
        let offset =
            u32::try_from(*at).map_err(|_| ObjectError::corrupt("stencil larger than 4 GiB"))?;
        holes.push(Hole {
            section: *location,
            offset,
            kind: *kind,
            value,
            addend: *addend,
        });
    }
    holes.sort_by_key(|h| (h.section, h.offset));
    if let Some(w) = holes
        .windows(2)
        .find(|w| w[0].section == w[1].section && w[0].offset == w[1].offset)
    {
        return Err(ObjectError::corrupt("two relocations at the same place")
            .offset(u64::from(w[1].offset)));
    }
    Ok(Indexed {
        holes,
        operands,
        targets,
        symbols,
    })
}
