//! Symbols whose direct branches are presumed to need no veneer: a resolved symbol (id
//! below 32) that every direct branch of the set reaches with one hole kind, and that is in
//! that kind's range from all the arena's code when it is resolved. A trace starts with
//! their veneer bits already counted ([`Layout::starting`](super::Layout::starting)), so
//! `push` neither counts nor reserves a veneer for them; `finish` checks, once the trace's
//! code block is placed, that the block lies in the window every presumed symbol reaches
//! (two comparisons), else each one against the block, and places the trace again with a
//! veneer for each if one is out of range ([`DirectSymbols::covers`],
//! [`DirectSymbols::reach`]). A veneer reserved for every trace that calls a helper and
//! then returned cost about 100 instructions per trace (callgrind, the bench's
//! straight-100: the count in `push`, the filler, the arena's `give_back`).

use super::{allocate, allocate_batch, place_batch, BatchPlacement, Sizes};
use crate::arena::Block;
use crate::jit::Jit;
use crate::memory::CodeSource;
use crate::patch;
use crate::program::{branch_bias, NeedFilter};
use crate::trace::Trace;
use crate::Error;
use cpjit_model::{HoleKind, HoleValue, Stencil};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids at or past this have no bit in [`NeedFilter::symbols`].
const BITS: usize = 32;

/// See the module docs. One per [`Jit`](crate::Jit).
pub(crate) struct DirectSymbols {
    /// The one kind of every direct branch to symbol `id` in the set; `None`: none, or
    /// branches of two kinds (never presumed).
    kinds: [Option<HoleKind>; BITS],
    /// Veneer bits ([`NeedFilter::symbol_bit`]) of the presumed symbols. Only ever grows:
    /// a symbol is resolved once.
    resolved: AtomicU64,
    /// The code addresses (16-byte aligned) from which every presumed symbol is in range:
    /// narrowed before a symbol's bit is set (only ever narrowed), so that a reader of the
    /// bits sees a window at least that narrow.
    window: (AtomicU64, AtomicU64),
}

impl DirectSymbols {
    /// The kinds of the direct branches to symbols of a set's `stencils`, none resolved
    /// yet.
    pub fn of(stencils: &[Stencil<'_>]) -> DirectSymbols {
        let mut kinds = [None; BITS];
        let mut mixed = 0u64;
        for h in stencils.iter().flat_map(|s| s.holes.iter()) {
            // The holes `Program::compile` patches as direct branches (`Action::Branch`).
            let direct = h.kind.is_branch() && !h.kind.uses_got();
            match h.value {
                HoleValue::Symbol(id) if direct && (id as usize) < BITS => {
                    let kind = &mut kinds[id as usize];
                    if kind.is_some_and(|k| k != h.kind) {
                        mixed |= 1 << id;
                    }
                    *kind = Some(h.kind);
                }
                _ => {}
            }
        }
        for (id, kind) in kinds.iter_mut().enumerate() {
            if mixed & (1 << id) != 0 {
                *kind = None;
            }
        }
        DirectSymbols {
            kinds,
            resolved: AtomicU64::new(0),
            window: (AtomicU64::new(0), AtomicU64::new(u64::MAX)),
        }
    }

    /// Records that symbol `id` resolved to `address` (`None`: unknown to the caller); it
    /// is presumed direct if its branches reach it from all of `code` (the arena's code, as
    /// [`Arena::code_span`](crate::arena::Arena::code_span) gives it).
    pub fn note(&self, id: usize, address: Option<u64>, code: impl FnOnce() -> Option<Range<u64>>) {
        let (Some(Some(kind)), Some(symbol), Some(bit)) = (
            self.kinds.get(id).copied(),
            address,
            NeedFilter::symbol_bit(false, id as u16),
        ) else {
            return;
        };
        let Some((low, high)) = window(kind, symbol.wrapping_sub(branch_bias(kind))) else {
            return;
        };
        match code() {
            Some(code) if low <= code.start && code.end <= high => {
                self.window.0.fetch_max(low, Ordering::Relaxed);
                self.window.1.fetch_min(high, Ordering::Relaxed);
                self.resolved.fetch_or(bit, Ordering::Release);
            }
            _ => {}
        }
    }

    /// The veneer bits a trace starts with: the symbols presumed to need no veneer.
    // Relaxed (an acquire load kept `TraceBuilder::new` from building the builder in place:
    // 17 instructions per trace); `in_trace` acquires the same bits or more before the
    // window is read.
    #[inline(always)]
    pub fn presumed(&self) -> u64 {
        self.resolved.load(Ordering::Relaxed)
    }

    /// Whether the `len` bytes of code at `start` (a trace's code block, run-time address)
    /// lie in the window every symbol presumed so far reaches.
    #[inline(always)]
    pub fn covers(&self, start: u64, len: usize) -> bool {
        let (low, high) = &self.window;
        low.load(Ordering::Relaxed) <= start && start + len as u64 <= high.load(Ordering::Relaxed)
    }

    /// Of the veneer bits `counted` (a trace's [`Layout`](super::Layout)), those of
    /// symbols presumed direct: each may have no veneer counted.
    #[inline(always)]
    pub fn in_trace(&self, counted: u64) -> u64 {
        counted & self.resolved.load(Ordering::Acquire)
    }

    /// Whether each symbol of `bits` (veneer bits of resolved symbols with a kind, at
    /// `addresses`) is in its branches' range from every byte of `code` (a trace's code
    /// block, run-time addresses): then none of its branches needs a veneer. A branch's
    /// range is an interval of displacements, so its ends decide.
    pub fn reach(&self, bits: u64, address: impl Fn(u16) -> Option<u64>, code: Range<u64>) -> bool {
        let mut left = bits >> BITS;
        while left != 0 {
            let id = left.trailing_zeros() as u16;
            left &= left - 1;
            let (Some(kind), Some(symbol)) = (self.kinds[id as usize], address(id)) else {
                return false;
            };
            // A veneer keyed by the symbol jumps to it exactly (the addend is `-bias`).
            let target = symbol.wrapping_sub(branch_bias(kind));
            if !(patch::in_range(kind, code.start, target)
                && patch::in_range(kind, code.end, target))
            {
                return false;
            }
        }
        true
    }
}

/// What `finish` does when a trace's code block is not in the window of the symbols
/// presumed direct (`presumed`, as veneer bits): places `placed` again, where it was if
/// each is in its branches' reach from the whole block, else with a veneer for each (in
/// `layout`).
#[cold]
#[inline(never)]
pub(super) fn place_again(
    jit: &Jit<'_>,
    layout: &mut Sizes,
    presumed: u64,
    placed: &mut Trace,
) -> Result<CodeSource, Error> {
    let start = placed.block.code_rx as u64;
    let code = start..start + placed.code_len as u64;
    let reached = jit.direct.reach(presumed, |id| jit.resolved(id), code);
    // Either way the block goes back to the arena (nothing was written to it), and the
    // same block (first fit) is taken again when the trace needs nothing more.
    jit.arena.free(&placed.block);
    placed.block = Block::UNALLOCATED;
    if !reached {
        layout.veneer_bound = layout.veneer_bound.saturating_add(presumed.count_ones());
    }
    allocate(jit, layout, placed)
}

/// Stages 1 and 2 of a batch, with the check of [`allocate_direct`] on the batch's whole
/// code: placed again with the veneers of the symbols presumed direct (`presumed(i)`, in
/// trace `i`) if one is out of reach.
#[allow(clippy::type_complexity)]
pub(super) fn place_and_allocate_batch(
    jit: &Jit<'_>,
    layouts: &mut [Sizes],
    presumed: impl Fn(usize) -> u64,
) -> Result<(BatchPlacement, Vec<Trace>, CodeSource), Error> {
    let placed = place_batch(jit, layouts);
    let (traces, source) = allocate_batch(jit, &placed, layouts)?;
    let all = (0..layouts.len()).fold(0, |all, i| all | presumed(i));
    let start = traces[0].block.code_rx as u64;
    let code = start..start + placed.code_len as u64;
    if all == 0
        || jit.direct.covers(code.start, placed.code_len)
        || jit.direct.reach(all, |id| jit.resolved(id), code)
    {
        return Ok((placed, traces, source));
    }
    drop(traces);
    for (i, l) in layouts.iter_mut().enumerate() {
        l.veneer_bound = l.veneer_bound.saturating_add(presumed(i).count_ones());
    }
    // (Placing again is the same computation: `reserve_internal` has moved what it moves.)
    let placed = place_batch(jit, layouts);
    let (traces, source) = allocate_batch(jit, &placed, layouts)?;
    Ok((placed, traces, source))
}

/// The 16-byte aligned places from which a branch of `kind` reaches `target`, as the
/// first and last of them (`None` if it does not reach it from beside it). The patch
/// functions are the judge: a branch's range is an interval of displacements, found by
/// bisection (once per symbol).
fn window(kind: HoleKind, target: u64) -> Option<(u64, u64)> {
    let at = target & !15;
    if !patch::in_range(kind, at, target) {
        return None;
    }
    let below = farthest(|k| {
        at.checked_sub(k * 16)
            .is_some_and(|p| patch::in_range(kind, p, target))
    });
    let above = farthest(|k| {
        at.checked_add(k * 16)
            .is_some_and(|p| patch::in_range(kind, p, target))
    });
    Some((at - below * 16, at + above * 16))
}

/// The largest `k` below 2^40 for which `reaches(k)` holds, `reaches` holding from 0 up to
/// some `k` and not after it.
fn farthest(reaches: impl Fn(u64) -> bool) -> u64 {
    let (mut yes, mut no) = (0u64, 1u64 << 40);
    if reaches(no) {
        return no;
    }
    while no - yes > 1 {
        let mid = yes + (no - yes) / 2;
        if reaches(mid) {
            yes = mid;
        } else {
            no = mid;
        }
    }
    yes
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpjit_model::{Hole, Section};

    fn hole(kind: HoleKind, id: u16) -> Hole {
        Hole {
            offset: 1,
            kind,
            value: HoleValue::Symbol(id),
            addend: -4,
            section: Section::Code,
        }
    }

    #[test]
    fn a_symbol_is_presumed_once_resolved_in_reach_if_its_branches_are_of_one_kind() {
        let one: &[Hole] = &[
            hole(HoleKind::X86Branch32, 0),
            hole(HoleKind::X86Branch32, 1),
        ];
        // (A rel32 that is no branch takes no veneer: symbol 0 keeps its one kind.)
        let other: &[Hole] = &[
            hole(HoleKind::X86Pc32, 0),
            hole(HoleKind::Aarch64Branch26, 1),
        ];
        let more: &[Hole] = &[hole(HoleKind::X86Branch32, 2)];
        let stencils = [
            Stencil {
                name: "a",
                holes: one,
                ..Stencil::EMPTY
            },
            Stencil {
                name: "b",
                holes: other,
                ..Stencil::EMPTY
            },
            Stencil {
                name: "c",
                holes: more,
                ..Stencil::EMPTY
            },
        ];
        let d = DirectSymbols::of(&stencils);
        let arena = || Some(0x1_0000_0000..0x1_0100_0000);
        assert_eq!(d.presumed(), 0);
        // Symbol 1 is reached by branches of two kinds: never presumed;
        // nor a symbol the caller does not know, nor one out of reach of the arena's code.
        d.note(1, Some(0x1_2000_0000), arena);
        d.note(0, None, arena);
        d.note(2, Some(0x9_0000_0000), arena);
        assert_eq!(d.presumed(), 0);
        assert!(d.covers(0, usize::MAX));
        d.note(0, Some(0x1_2000_0000), arena);
        assert_eq!(d.presumed(), 1 << 32);
        assert_eq!(d.in_trace((1 << 32) | (1 << 33) | 1), 1 << 32);
        // The window: what rel32 reaches of the symbol (its field's end is `place + 4`).
        assert!(d.covers(0x1_2000_0000 - (1 << 31) + 16, (1 << 32) - 32));
        assert!(!d.covers(0x1_2000_0000 - (1 << 31) - 16, 1 << 31));
        assert!(!d.covers(0x1_2000_0000, (1 << 31) + 16));
    }

    #[test]
    fn reach_is_checked_from_both_ends_of_the_code() {
        let holes: &[Hole] = &[hole(HoleKind::X86Branch32, 0)];
        let stencils = [Stencil {
            name: "a",
            holes,
            ..Stencil::EMPTY
        }];
        let d = DirectSymbols::of(&stencils);
        let at = |a: u64| move |_| Some(a);
        let code = 0x1_0000_0000..0x1_0001_0000;
        assert!(d.reach(1 << 32, at(0x1_2000_0000), code.clone()));
        // In reach of the start, not of the end; and of neither.
        assert!(!d.reach(
            1 << 32,
            at(0x1_0000_0000 - (1 << 31) + 0x8000),
            code.clone()
        ));
        assert!(!d.reach(1 << 32, at(0x9_0000_0000), code.clone()));
        // Unresolved, or no kind: not reached.
        assert!(!d.reach(1 << 32, |_| None, code.clone()));
        assert!(!d.reach(1 << 33, at(0x1_2000_0000), code.clone()));
        assert!(d.reach(0, |_| None, code));
    }
}
