//! [`Quick::Mixed`](super::Quick::Mixed): a program of operand steps (the
//! [`OperandStep`](super::OperandStep)s of [`Quick::Operands`](super::Quick::Operands)) and
//! up to [`MIXED_SITES`] x86-64 rel32 fields ([`RelSite`]) to the instance's own code,
//! cold part or data, the next instance, a jump target or a symbol. The reference VM's
//! guards, item loads and stores and their cold parts are such programs (a branch into the
//! cold part, exits to other instances, local offsets and their range checks): `write`
//! runs them without the per-step dispatch of the general path, which was two thirds of
//! the VM's `finish` on nbody (issue 36).
//!
//! A site's field lies inside the stencil's code (checked here, once), so `write` stores it
//! without a bounds check; a value that is not known inline (a target outside the trace, a
//! symbol not resolved yet, the continuation after the last instance) or does not fit 32
//! bits sends the whole program down the steps, which write every field again and take
//! the full path where they must.

use super::{Fast, OperandStep, Program, Quick, Section, Source, Step};

/// How many rel32 sites a [`Quick::Mixed`](super::Quick::Mixed) program holds at most
/// (the VM's commonest programs have one to three; more would make [`Quick`] and so
/// [`Program`](super::Program) larger).
pub(crate) const MIXED_SITES: usize = 3;

/// Where a [`RelSite`]'s field points: the values of a [`Fast::Rel32`] or [`Fast::Direct`]
/// step's [`Source`] that `write` works out inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// A plain tag byte: `write` dispatches on it directly.
#[repr(u8)]
pub(crate) enum RelTo {
    /// The instance's own code (run for a cold part, that part).
    Code,
    /// The instance's other part (its cold part, or for a cold part its hot code).
    Cold,
    /// The instance's data.
    Data,
    /// The next instance.
    Continue,
    /// Jump target `i`, when it is an instance of the trace.
    Target(u16),
    /// Symbol `i`, once resolved.
    Symbol(u16),
}

/// One rel32 field of a [`Quick::Mixed`](super::Quick::Mixed) program: the field at
/// `offset` in the instance's code takes `to + addend - place` (`place`: the field's
/// run-time address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RelSite {
    pub offset: u16,
    pub addend: i16,
    pub to: RelTo,
}

impl RelSite {
    /// The site of step `s` of a stencil of `code_len` bytes of code, if it is an x86-64
    /// rel32 field in the code whose form `write` runs inline with offset and addend small
    /// enough for a site.
    pub fn of(s: &Step, code_len: u32) -> Option<RelSite> {
        if !matches!(s.fast, Fast::Rel32 | Fast::Direct) || s.section != Section::Code {
            return None;
        }
        if s.offset.checked_add(4).is_none_or(|end| end > code_len) {
            return None;
        }
        // (A `Direct` form's fallback restores the instruction: only the steps do that,
        // after the quick form declined without writing the field.)
        let to = match s.source {
            Source::Code => RelTo::Code,
            Source::Cold => RelTo::Cold,
            Source::Data => RelTo::Data,
            Source::Continue => RelTo::Continue,
            Source::Target(i) => RelTo::Target(i),
            Source::Symbol(i) => RelTo::Symbol(i),
            Source::Operand(..) => return None,
        };
        Some(RelSite {
            offset: u16::try_from(s.offset).ok()?,
            addend: i16::try_from(s.addend).ok()?,
            to,
        })
    }
}

/// The quick form of `p` (a stencil's program or its cold part) that needs the flat array
/// of operand steps, their steps appended to `flat`: [`Quick::Operands`] for a program of
/// operand steps alone, [`Quick::Mixed`] for one of operand steps and a few rel32 fields;
/// `p.quick` where it is another form already, or the program is neither. `scratch` holds
/// the operand steps while they are sorted out.
pub(super) fn flat_quick(
    p: &Program,
    cold: bool,
    flat: &mut Vec<OperandStep>,
    scratch: &mut Vec<Step>,
) -> Quick {
    // A cold part's `DataRel32` would add the hot code's distance to the data (`write`'s
    // form of it assumes the hot code): its steps are mixed instead, or run one by one.
    let keep = match p.quick {
        Quick::General => Quick::General,
        Quick::DataRel32 { .. } if cold => Quick::General,
        // A cold part's one branch (a guard's exit to a jump target) as a mixed program of
        // one site: the cold part `write` runs inline.
        quick @ Quick::Target { .. } if cold => quick,
        quick => return quick,
    };
    let mut sites = [RelSite {
        offset: 0,
        addend: 0,
        to: RelTo::Code,
    }; MIXED_SITES];
    let mut count = 0;
    scratch.clear();
    for s in p.steps.iter() {
        if OperandStep::one(s, p.code_len, p.operands).is_some() {
            scratch.push(*s);
            continue;
        }
        match (RelSite::of(s, p.code_len), sites.get_mut(count)) {
            (Some(site), Some(slot)) => {
                *slot = site;
                count += 1;
            }
            _ => return keep,
        }
    }
    let from = flat.len();
    if !OperandStep::extend(scratch, p.code_len, p.operands, flat) {
        return keep;
    }
    // A program whose steps all store is the operands form, whose loop tests no step for a
    // store (3 instructions a step); one with a check of its own (of an operand with no
    // field) is mixed, of no sites or some. `write` runs the first operand step untested:
    // none at all is `Quick::Nothing`, returned above. (A set's steps are far fewer than
    // 2^32, a program's than 2^16.)
    let all_store = flat[from..].iter().all(|s| s.store);
    match (u32::try_from(from), u16::try_from(flat.len() - from), count) {
        (Ok(from), Ok(len @ 1..), 0) if all_store => Quick::Operands {
            from,
            len: len.into(),
        },
        (Ok(from), Ok(len @ 1..), _) | (Ok(from), Ok(len), 1..) => Quick::Mixed {
            from,
            len,
            count: count as u8,
            sites,
        },
        _ => {
            flat.truncate(from);
            keep
        }
    }
}
