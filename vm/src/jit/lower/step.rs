//! What the lowering asks of each micro-op, worked out in one pass per lowering attempt
//! ([`Step::fill`]): its row of members under the pinning being lowered
//! ([`super::super::rows::MemberRows::row_of`]) and the facts its loop and every walk over a
//! run test (jump target, pinned body's entry or exit stub, falls through, on a pinned
//! register), so that each test is one bit of one record rather than a look-up in the
//! targets, the pinning's stubs and registers and the op's table, each bounds-checked.
//!
//! Measured (callgrind, `cpjit-vm compile-time`, `Backend::compile` per micro-op): nbody
//! 716.6 -> 689.6, calls 798.2 -> 777.3, sum 846.4 -> 817.0, collatz 765.3 -> 739.1
//! instructions, against a pass of rows alone and the tests where the lowering made them.
//! The same pass marks the jump and exit targets (the op's flags, [`op_flags`], say which
//! ops name one), which a pass of its own over the trace did before it: the lowering per
//! stitched instance 236.2 -> 232.7 (nbody), 212.3 -> 206.6 (calls), 263.8 -> 261.1 (sum),
//! 257.4 -> 251.3 (collatz) instructions.

use super::super::{falls_through, Backend};
use crate::abi::Inst;
use crate::ops;
use crate::pinning::{Held, Pinning};
use crate::trace::Trace;

/// One micro-op as the lowering reads it: its row of members and its flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Step {
    /// Its row of members ([`super::super::rows::MemberRows::row_of`]).
    pub(super) row: u32,
    flags: u8,
}

/// A jump or exit target, or a pinned body's first micro-op or one of its exit stubs: the
/// lowering spills before it, and a run ends there.
pub(super) const BOUNDARY: u8 = 1;
/// A pinned body's first micro-op or one of its exit stubs (the lowering puts `PIN`s or
/// `UNPIN`s before it).
pub(super) const PIN_POINT: u8 = 2;
/// In a pinned body, or on a pinned register: it must have a member (an uncached stencil
/// would lose the pinned registers).
pub(super) const KEEPS_PINS: u8 = 4;
/// It goes on to the next instance when it does not jump or leave ([`falls_through`]).
pub(super) const FALLS: u8 = 8;
/// On a pinned register that holds its local unboxed (scaled or wide).
pub(super) const ON_UNBOXED: u8 = 16;
/// On a pinned register that holds its local wide ([`crate::pinning::Held::Wide`]).
pub(super) const ON_WIDE: u8 = 32;

/// In [`op_flags`] only: the op jumps or exits to its micro-op's `target`, which is then
/// a [`BOUNDARY`].
const NAMES_TARGET: u8 = 128;

/// By op id: [`FALLS`] where it falls through ([`falls_through`]) and [`NAMES_TARGET`] where
/// it jumps or exits to its target, made once per backend so that [`Step::fill`] reads
/// both in one load.
pub(in crate::jit) fn op_flags() -> Vec<u8> {
    ops::OPS
        .iter()
        .enumerate()
        .map(|(op, info)| {
            let falls = if falls_through(op as u32) { FALLS } else { 0 };
            let names = if info.jumps || info.exits {
                NAMES_TARGET
            } else {
                0
            };
            falls | names
        })
        .collect()
}

impl Step {
    /// Makes `steps` the steps of `trace`'s micro-ops under `pinning`: one pass over the
    /// trace and the pinning's vectors side by side, which also marks each jump or exit
    /// target a [`BOUNDARY`] (flags are or-ed in, so a target before or after its jump is
    /// marked alike; a pass of its own over the trace for the targets cost 15 instructions
    /// per micro-op of nbody's compile). The tail of exit stubs from micro-op `tail` on
    /// ([`Backend::lower_tail`], which reads no step) gets its flags and target marks only,
    /// for the walks over runs, and the row of no member, which is its ops' in every table.
    pub(super) fn fill(
        steps: &mut Vec<Step>,
        backend: &Backend,
        trace: &Trace,
        pinning: Option<&Pinning>,
        tail: usize,
    ) {
        let n = trace.uops.len();
        steps.clear();
        steps.resize(n, Step::default());
        let (rows, op_flags) = (&backend.rows, &backend.op_flags[..]);
        // The op's own flags; its target marked.
        let flags_of = |steps: &mut [Step], u: &Inst| {
            let flags = op_flags.get(u.op as usize).copied().unwrap_or(FALLS);
            if flags & NAMES_TARGET != 0 {
                if let Some(t) = steps.get_mut(u.target as usize) {
                    t.flags |= BOUNDARY;
                }
            }
            flags & !NAMES_TARGET
        };
        for (i, u) in trace.uops.iter().enumerate().skip(tail) {
            let flags = flags_of(steps, u);
            steps[i].flags |= flags;
        }
        let uops = &trace.uops[..tail];
        let Some(p) = pinning else {
            for (i, u) in uops.iter().enumerate() {
                let flags = flags_of(steps, u);
                let step = &mut steps[i];
                step.row = rows.row_of(u);
                step.flags |= flags;
            }
            return;
        };
        let (held, registers) = (p.held(), p.registers());
        assert!(p.stubs.len() == n, "a pinning of this trace");
        for (i, u) in uops.iter().enumerate() {
            let mut flags = flags_of(steps, u);
            if i == p.body_start() || p.stubs[i] {
                flags |= BOUNDARY | PIN_POINT;
            }
            let (register, float) = registers.of(i, u);
            if p.in_body(i) {
                flags |= KEEPS_PINS;
            }
            let row = match (float, register) {
                (Some(q), _) => rows.float_pinned_row(u.op, q as usize),
                (None, Some(r)) => {
                    let held = held[r as usize];
                    if held.is_unboxed() {
                        flags |= ON_UNBOXED;
                    }
                    if held == Held::Wide {
                        flags |= ON_WIDE;
                    }
                    rows.pinned_row(u.op, r as usize, held)
                }
                (None, None) => rows.row_of(u),
            };
            let step = &mut steps[i];
            step.row = row;
            step.flags |= flags;
        }
    }

    /// Whether it has flag `flag` ([`BOUNDARY`], [`PIN_POINT`], [`KEEPS_PINS`], [`FALLS`],
    /// [`ON_UNBOXED`]).
    #[inline(always)]
    pub(super) fn is(self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}
