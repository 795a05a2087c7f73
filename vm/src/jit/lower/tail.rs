//! The tail of a trace's exit stubs (what `trace/exits.rs` appends after the body: a
//! `RESET_STACK` where the exit resumes inside an inlined call, then `EXIT_TRACE`), lowered
//! by a loop of its own ([`Backend::lower_tail`]): its ops have no member in any table, so
//! it needs none of the general loop's look-ups of members nor the steps' rows, and a third
//! of nbody's micro-ops are such stubs. Measured (callgrind, `cpjit-vm compile-time`, the
//! lowering per stitched instance, with the step pass reading the tail's flags only):
//! nbody 232.7 -> 212.7, calls 206.6 -> 193.3, sum 261.1 -> 238.4, collatz 251.3 -> 243.5
//! instructions; trace bytes unchanged. And how a stub of a pinned body opens
//! ([`Backend::open_stub`]), which both loops do.
//!
//! Measured and dropped: a pinned body's stub that cuts the stack (`UNPIN`s, `RESET_STACK`,
//! `EXIT_TRACE`, 15 of nbody's stubs) as one whole stub (members `EXIT_PINNED_RESET_*` of
//! cached/exit.c, the depth in `EXIT_PINS`' high half, merged by this loop): nbody 548 -> 503
//! instances, but the compile's callgrind instructions per micro-op 619.6 -> 619.0 (push
//! -5.4, finish +3.7: the cheap instances it removes cost the push about 60 instructions
//! each, and the whole stub has about their bytes and holes), calls 715.6 -> 724.9, sum
//! 726.3 -> 747.9 (the wide member is 386 bytes where its four were 257); nbody's compile
//! time per pair 0.96-1.02, median 1.00; run instructions unchanged (+0.02 to +0.13 %).

use super::super::rows::MemberRows;
use super::super::Backend;
use super::{LoweredId, LoweredInstance};
use crate::abi::Inst;
use crate::cached::CacheState;
use crate::ops;
use crate::pinning::Pinning;
use crate::trace::Trace;

/// The exit stubs of the trace being lowered, as [`Backend::open_stub`] opens them.
pub(super) struct Stubs {
    /// A stub that leaves the trace, once the VM has given the exit its link slots, is one
    /// stencil where the set has it (and its operand `EXIT_PINS`): `LINK`, `UNPIN`s and
    /// `EXIT_TRACE` were 2 + n instances.
    pub(super) whole: Option<(usize, u64)>,
    /// The UNPINs, pushed at the first stub that takes them and copied from there into
    /// every later one: worked out per stub, an iterator chain cost the lowering of nbody 12
    /// instructions per micro-op; made up front, with the PINs, they cost sum's 21, and a
    /// body whose stubs are whole takes none. (Made into an array of their own and copied
    /// from it, they cost the compile 3 to 7 instructions per micro-op more.)
    pub(super) unpins: Option<std::ops::Range<usize>>,
}

/// What [`Backend::lower_tail`] appends to: the lowering's instances, instance of each
/// micro-op, links and exit entries.
type TailParts<'a> = (
    &'a mut Vec<LoweredInstance>,
    &'a mut Vec<LoweredId>,
    &'a mut Vec<usize>,
    &'a mut Vec<Option<LoweredId>>,
);

/// The stencils of the ops of a trace's tail of exit stubs (`RESET_STACK`, `EXIT_TRACE`),
/// where the set has them and gives those ops no member in any table (so that the tail
/// needs no look-up of members: [`Backend::lower_tail`]).
#[derive(Clone, Copy, Debug)]
pub(in crate::jit) struct TailStencils {
    reset_stack: usize,
    exit_trace: usize,
}

impl TailStencils {
    /// Of the set whose op stencils are `stencils` (by op id) and whose member rows are
    /// `rows`; `None` where either op lacks its stencil or has a member.
    pub(in crate::jit) fn of_set(
        stencils: &[Option<usize>],
        rows: &MemberRows,
    ) -> Option<TailStencils> {
        let plain = |op: u32| {
            stencils
                .get(op as usize)
                .copied()
                .flatten()
                .filter(|_| rows.has_none(op))
        };
        Some(TailStencils {
            reset_stack: plain(ops::op::RESET_STACK)?,
            exit_trace: plain(ops::op::EXIT_TRACE)?,
        })
    }

    /// The stencil of op `op`, if it is a tail op.
    #[inline(always)]
    fn of(self, op: u32) -> Option<usize> {
        match op {
            ops::op::RESET_STACK => Some(self.reset_stack),
            ops::op::EXIT_TRACE => Some(self.exit_trace),
            _ => None,
        }
    }
}

impl Backend {
    /// Where the trace's tail of exit stubs starts that [`Backend::lower_tail`] lowers: the
    /// first of the micro-ops after the body that are each a `RESET_STACK` or an
    /// `EXIT_TRACE` up to the end (what `trace/exits.rs` appends); the end where the set
    /// gives those ops members ([`TailStencils`]).
    pub(super) fn tail_start(&self, trace: &Trace) -> usize {
        let n = trace.uops.len();
        let Some(tail) = self.tail_stencils else {
            return n;
        };
        let stubs = trace.uops[trace.body_len.min(n)..].iter().rev();
        n - stubs.take_while(|u| tail.of(u.op).is_some()).count()
    }

    /// Lowers micro-ops `from..` of `trace`, each a `RESET_STACK` or `EXIT_TRACE` after the
    /// body ([`Backend::tail_start`]), entered with nothing cached: each its op's stencil,
    /// a stub of a pinned body first writing the registers back, or the whole exit stub, as
    /// the general loop of [`Backend::lower_with`] lowers them, without its look-ups of
    /// members these ops do not have (a third of nbody's micro-ops are such stubs).
    pub(super) fn lower_tail(
        &self,
        trace: &Trace,
        from: usize,
        pinning: Option<&Pinning>,
        stubs: &mut Stubs,
        parts: TailParts<'_>,
    ) {
        let (instances, instance_of_uop, links, exit_entry) = parts;
        let tail = self
            .tail_stencils
            .expect("a tail only where the set has its stencils");
        for (i, u) in trace.uops.iter().enumerate().skip(from) {
            let mut stencil = tail.of(u.op).expect("tail_start took stub ops only");
            if let Some(p) = pinning.filter(|p| p.stubs[i]) {
                if let Some(whole) = self.open_stub(p, i, u, stubs, instances, links, exit_entry) {
                    stencil = whole.0;
                }
            }
            instance_of_uop.push(LoweredId::next(instances));
            let empty = CacheState::EMPTY;
            instances.push(LoweredInstance::uop(stencil, i, empty, empty));
        }
    }

    /// Opens exit stub `i` (micro-op `u`) of a body pinned by `p`: a stub that leaves the
    /// trace (once the VM has given the exit its link slots) is the whole exit stub where
    /// the set has it, returned (its link noted); any other starts with the `LINK` (if it
    /// leaves) and the `UNPIN`s, its entry noted in `exit_entry`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn open_stub(
        &self,
        p: &Pinning,
        i: usize,
        u: &Inst,
        stubs: &mut Stubs,
        instances: &mut Vec<LoweredInstance>,
        links: &mut Vec<usize>,
        exit_entry: &mut [Option<LoweredId>],
    ) -> Option<(usize, u64)> {
        let leaves = u.op == ops::op::EXIT_TRACE && u.arg1 != 0;
        let whole = stubs.whole.filter(|_| leaves);
        if whole.is_some() {
            links.push(i);
            return whole;
        }
        exit_entry[i] = Some(LoweredId::next(instances));
        if let Some(link) = self.cached.link().filter(|_| leaves) {
            instances.push(LoweredInstance::link(link, i));
            links.push(i);
        }
        match stubs.unpins.clone() {
            Some(first) => instances.extend_from_within(first),
            None => {
                let at = instances.len();
                self.push_copies(p, true, instances);
                stubs.unpins = Some(at..instances.len());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::jit::Backend;
    use crate::{parse, Config, Mode, Vm};

    /// The tail loop lowers each example's traces (their executors' own, exits linked or
    /// not) exactly as the general loop does, and the host's set has its stencils.
    #[test]
    fn the_tail_loop_lowers_as_the_general_loop() {
        let fast = Backend::host().unwrap().with_checks(true);
        assert!(
            fast.tail_stencils.is_some(),
            "the host's set has plain stub ops"
        );
        let mut general = Backend::host().unwrap().with_checks(true);
        general.tail_stencils = None;
        let examples = [
            include_str!("../../../examples/nbody.vm"),
            include_str!("../../../examples/calls.vm"),
            include_str!("../../../examples/collatz.vm"),
        ];
        let mut tails = 0;
        for text in examples {
            let config = Config {
                mode: Mode::Jit,
                ..Config::default()
            };
            let vm = Vm::new(parse(text).unwrap(), config).unwrap();
            vm.run().unwrap();
            for trace in vm.traces() {
                let mut lowered = fast.lower(&trace).unwrap();
                fast.check_cache_states(&trace, &lowered).unwrap();
                let mut want = general.lower(&trace).unwrap();
                // (The steps are the lowering's scratch, which the tail's loop reads none of.)
                (lowered.steps, want.steps) = (Vec::new(), Vec::new());
                assert_eq!(lowered, want);
                tails += trace.uops.len() - fast.tail_start(&trace);
            }
        }
        assert!(tails > 100, "the examples' traces end in stubs ({tails})");
    }
}
