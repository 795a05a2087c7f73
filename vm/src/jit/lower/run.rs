//! The one walk over a *run*: the micro-ops from one entered with nothing cached until the
//! stack is back to nothing cached, each on a member of one register kind. The lowering asks
//! it whether a run pays in scaled ints or float slots ([`Backend::run_of`]) and whether it
//! goes wide ([`Backend::wide_run`]); each looks at the micro-ops on the way (`visit`) and at
//! how the run ended.
use super::super::Backend;
use super::step::{Step, BOUNDARY, FALLS};
use crate::cached::{CacheState, Kind};
use crate::trace::Trace;

/// The trace being lowered as a walk over a run reads it: its micro-ops and
/// each micro-op's row of members and flags ([`Step`]).
#[derive(Clone, Copy)]
pub(super) struct RunInput<'a> {
    pub(super) trace: &'a Trace,
    pub(super) steps: &'a [Step],
}

/// How a run walked by [`Backend::walk_run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RunEnd {
    /// At a jump target or a pinned body's entry or exit stub past its first micro-op, where
    /// the lowering spills.
    Boundary,
    /// At a micro-op with no member of the kind for the state it is entered in.
    Missing,
    /// At a micro-op that does not fall through or leaves nothing cached (`empty`).
    Ended { empty: bool },
    /// At the end of the trace.
    Exhausted,
}

impl Backend {
    /// Walks the run of `input` starting at micro-op `i` on members of kind `kind`, calling
    /// `visit` with each micro-op that has its member, in order, and returns how the run
    /// ended.
    pub(super) fn walk_run(
        &self,
        input: RunInput<'_>,
        i: usize,
        kind: Kind,
        mut visit: impl FnMut(usize),
    ) -> RunEnd {
        let mut state = CacheState::EMPTY;
        for (j, &step) in input.steps.iter().enumerate().skip(i) {
            if j > i && step.is(BOUNDARY) {
                return RunEnd::Boundary;
            }
            let Some((_, exit)) = self.find_member(step, state, kind) else {
                return RunEnd::Missing;
            };
            visit(j);
            if !step.is(FALLS) || exit.depth() == 0 {
                return RunEnd::Ended {
                    empty: exit.depth() == 0,
                };
            }
            state = exit;
        }
        RunEnd::Exhausted
    }
}
