//! The lowering's member look-ups, resolved once per micro-op: every table a micro-op's
//! member comes from (its op's members, those compiled for its depth operand, those on a
//! pinned local's register) made, once per backend, into rows of one flat table by kind and
//! entry state ([`MemberRows`]); a lowering picks each micro-op's row once
//! ([`MemberRows::row_of`], [`MemberRows::pinned_row`], [`MemberRows::float_pinned_row`]),
//! and every later look-up of that micro-op (the lowering asks up
//! to four, for the state it is in and for the runs of scaled ints and float slots it
//! weighs) is one read ([`MemberRows::member`]).
//!
//! Measured (callgrind, `cpjit-vm compile-time nbody.vm`): the look-ups through
//! [`CachedOps`] (the pinning's register, the depth members' list, the kind's fit, each an
//! `Option`) were about a quarter of the lowering's instructions.

use crate::abi::Inst;
use crate::cached::{CacheState, CachedOps, Kind, STATES};
use crate::ops;
use crate::pinning::{Held, FLOAT_PIN_REGS, PIN_REGS};

/// A member packed as its stencil index times 256 plus its exit state's bits; [`NONE`]
/// where there is none.
type Packed = u32;
const NONE: Packed = u32::MAX;

/// The kinds, by their index in a row.
const KINDS: [Kind; 4] = [Kind::Boxed, Kind::Scaled, Kind::Float, Kind::Wide];

/// By kind (`Kind as usize`), by entry state's bits: the member entered there whose
/// registers hold that kind.
type Row = [[Packed; STATES]; KINDS.len()];

/// The row of no member at all (row 0), which most pinned registers' ops share.
const EMPTY_ROW: u32 = 0;

/// In [`MemberRows::by_op`]: the op has rows for depth operands ([`MemberRows::at_depth`]).
const HAS_DEPTHS: u32 = 1 << 31;

/// Every member table of a set's cached ops as rows of one table (see the module doc).
#[derive(Clone, Debug, Default)]
pub(super) struct MemberRows {
    rows: Vec<Row>,
    /// By op id: the row of its members, plus [`HAS_DEPTHS`] if it has members compiled for
    /// a depth (so that the others cost one read).
    by_op: Vec<u32>,
    /// By op id, by pinned register, by [`Held`]: the row of its members on that register.
    pinned: Vec<[[u32; Held::COUNT]; PIN_REGS]>,
    /// By op id, by pinned float register: the row of its members on that register.
    float_pinned: Vec<[u32; FLOAT_PIN_REGS]>,
    /// By op id: (depth operand, row) for the depths it has members compiled for, each row
    /// those members where they exist and the op's own elsewhere (as the lowering looked
    /// them up: the depth's member first).
    at_depth: Vec<Vec<(u64, u32)>>,
}

impl MemberRows {
    /// The rows of `cached`'s tables, over `stencils` stencils.
    pub(super) fn of(cached: &CachedOps, stencils: usize) -> MemberRows {
        let mut out = MemberRows {
            rows: vec![[[NONE; STATES]; KINDS.len()]],
            ..MemberRows::default()
        };
        let n_ops = ops::OPS.len() as u32;
        for op in 0..n_ops {
            let row = out.add(|s, kind| cached.member_as(op, s, kind));
            out.by_op.push(row);
            let mut pinned = [[EMPTY_ROW; Held::COUNT]; PIN_REGS];
            // (Most ops have no member on a pinned local: their rows stay empty.)
            if cached.has_pinned(op) {
                for (r, by_held) in pinned.iter_mut().enumerate() {
                    for (h, slot) in by_held.iter_mut().enumerate() {
                        let held = Held::from_index(h).expect("Held::COUNT representations");
                        *slot = out.add(|s, kind| cached.pinned_member(op, r, held, s, kind));
                    }
                }
            }
            out.pinned.push(pinned);
            let mut float_pinned = [EMPTY_ROW; FLOAT_PIN_REGS];
            if cached.has_float_pinned(op) {
                for (q, slot) in float_pinned.iter_mut().enumerate() {
                    *slot = out.add(|s, kind| cached.float_pinned_member(op, q, s, kind));
                }
            }
            out.float_pinned.push(float_pinned);
        }
        out.at_depth = vec![Vec::new(); n_ops as usize];
        for stencil in 0..stencils {
            let (Some(op), Some(depth)) = (cached.op_of(stencil), cached.depth_of(stencil)) else {
                continue;
            };
            // (One row per depth: it holds the members of every kind and state there.)
            if out.at_depth[op as usize].iter().any(|d| d.0 == depth) {
                continue;
            }
            let row = out.add(|s, kind| {
                cached
                    .member_at_depth(op, s, kind, depth)
                    .or_else(|| cached.member_as(op, s, kind))
            });
            out.at_depth[op as usize].push((depth, row));
            out.by_op[op as usize] |= HAS_DEPTHS;
        }
        out
    }

    /// Adds the row `member` gives for each kind and state (the shared empty row if it
    /// gives none) and returns its index.
    fn add(&mut self, member: impl Fn(CacheState, Kind) -> Option<(usize, CacheState)>) -> u32 {
        let mut row = [[NONE; STATES]; KINDS.len()];
        for (k, &kind) in KINDS.iter().enumerate() {
            for (bits, slot) in row[k].iter_mut().enumerate() {
                if let Some((stencil, exit)) = member(CacheState::from_bits(bits as u8), kind) {
                    *slot = u32::try_from(stencil)
                        .ok()
                        .filter(|&s| s < 1 << 24)
                        .expect("fewer than 2**24 stencils in a set")
                        << 8
                        | exit.bits() as u32;
                }
            }
        }
        if row == self.rows[EMPTY_ROW as usize] {
            return EMPTY_ROW;
        }
        self.rows.push(row);
        assert!(
            self.rows.len() < HAS_DEPTHS as usize,
            "rows fit below the depth flag"
        );
        self.rows.len() as u32 - 1
    }

    /// The row of micro-op `u` where nothing pins its local: its op's members (those
    /// compiled for its depth operand first).
    #[inline(always)]
    pub(super) fn row_of(&self, u: &Inst) -> u32 {
        let op = u.op as usize;
        let row = self.by_op.get(op).copied().unwrap_or(EMPTY_ROW);
        if row & HAS_DEPTHS == 0 {
            return row;
        }
        self.at_depth[op]
            .iter()
            .find(|d| d.0 == u.arg0)
            .map_or(row & !HAS_DEPTHS, |d| d.1)
    }

    /// Whether op `op` has no member in any table: its own, at a depth, on a pinned register
    /// (general or float).
    pub(super) fn has_none(&self, op: u32) -> bool {
        let op = op as usize;
        let empty = |row: &u32| *row == EMPTY_ROW;
        self.by_op.get(op).is_none_or(empty)
            && self
                .pinned
                .get(op)
                .is_none_or(|by| by.iter().flatten().all(empty))
            && self
                .float_pinned
                .get(op)
                .is_none_or(|by| by.iter().all(empty))
    }

    /// The row of op `op`'s members on pinned register `r` holding its local as `held`.
    #[inline(always)]
    pub(super) fn pinned_row(&self, op: u32, r: usize, held: Held) -> u32 {
        self.pinned
            .get(op as usize)
            .map_or(EMPTY_ROW, |by| by[r][held.index()])
    }

    /// The row of op `op`'s members on pinned float register `q`.
    #[inline(always)]
    pub(super) fn float_pinned_row(&self, op: u32, q: usize) -> u32 {
        self.float_pinned
            .get(op as usize)
            .map_or(EMPTY_ROW, |by| by[q])
    }

    /// The member of row `row` entered in state `entry` whose registers hold `kind`: its
    /// stencil and exit state.
    #[inline(always)]
    pub(super) fn member(
        &self,
        row: u32,
        entry: CacheState,
        kind: Kind,
    ) -> Option<(usize, CacheState)> {
        let packed = self.rows[row as usize][kind as usize][entry.bits() as usize % STATES];
        // (Masked to the 4 bits a state has, which `add` stored: the mask lets the compiler
        // drop `from_bits`' range check from every look-up.)
        (packed != NONE).then(|| {
            (
                (packed >> 8) as usize,
                CacheState::from_bits((packed & 0xf) as u8),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::selected_set;

    /// Every row gives what the tables it was made from give, for every kind and state.
    #[test]
    fn rows_agree_with_the_cached_ops_tables() {
        let set = selected_set().expect("the host's set");
        let cached = CachedOps::of_set(set).expect("the set's cached ops");
        let rows = MemberRows::of(&cached, set.stencils.len());
        let states = (0..STATES as u8).map(CacheState::from_bits);
        let (mut found, mut depths) = (0, 0);
        for op in 0..ops::OPS.len() as u32 {
            for s in states.clone() {
                for kind in KINDS {
                    let own = cached.member_as(op, s, kind);
                    found += own.is_some() as usize;
                    let row = rows.by_op[op as usize] & !HAS_DEPTHS;
                    assert_eq!(rows.member(row, s, kind), own);
                    for (r, by_held) in rows.pinned[op as usize].iter().enumerate() {
                        for (h, &row) in by_held.iter().enumerate() {
                            let held = Held::from_index(h).unwrap();
                            let pinned = cached.pinned_member(op, r, held, s, kind);
                            assert_eq!(rows.member(row, s, kind), pinned, "op {op} on {r}");
                        }
                    }
                    for (q, &row) in rows.float_pinned[op as usize].iter().enumerate() {
                        let pinned = cached.float_pinned_member(op, q, s, kind);
                        assert_eq!(rows.member(row, s, kind), pinned, "op {op} on q{q}");
                    }
                    for &(depth, row) in &rows.at_depth[op as usize] {
                        depths += 1;
                        let at = cached.member_at_depth(op, s, kind, depth).or(own);
                        assert_eq!(rows.member(row, s, kind), at, "op {op} at depth {depth}");
                    }
                }
            }
        }
        assert!(
            found > 0 && depths > 0,
            "the set has cached members ({found}) and depth members ({depths})"
        );
    }
}
