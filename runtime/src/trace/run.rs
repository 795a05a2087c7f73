//! A run of ops pushed in one call ([`TraceBuilder::push_ops`]): each op's member selected
//! and pushed in one tight loop that holds the builder's vector ends, layout and cache state
//! in locals, with one capacity check per run instead of three per op, and none of the
//! per-op checks the selection table already answers (the member's operand and target
//! counts come from its program; the state is always one of the table's). Whatever the loop
//! does not take (glue, a jump to a label, an op with no member in the state, the operands
//! running out) goes through [`TraceBuilder::push_op`], which takes and reports everything.
//!
//! Measured (callgrind, `cpjit-bench --profile-stitch straight-N --select`, end to end, the
//! bench's straight runs pushed by `push_ops` and its jumps by `push_op`, against every op by
//! `push_op`): straight-10 4,328 -> 4,080 instructions per trace, straight-100 302 -> 271 and
//! straight-1000 284 -> 254 per instance.

use super::select::Selector;
use super::{Instance, Target, TraceBuilder};
use crate::error::try_grow;
use crate::Error;
use cpjit_model::Family;

/// Where a run stands: the next op, and the next operand and target of the flat slices.
type Cursor = (usize, usize, usize);

impl TraceBuilder<'_, '_> {
    /// Pushes the ops `ops` of `selector`'s family one after another, as
    /// [`push_op`](TraceBuilder::push_op) would one by one: each op's member for the cache
    /// state the previous instance left, glue where the family needs it. The operands and
    /// targets of all the ops are `operands` and `targets`, flat and in order: each op takes
    /// as many of each as its members declare (every member of an op takes the same), so a
    /// client keeps one stream of operand values and no per-op counts.
    ///
    /// For straight-line code: a run of ops without labels costs one table row and one
    /// record per op, in one loop; targets may be [`Target::Label`]s (as for `push_op`,
    /// taken op by op), but a label is bound between runs ([`bind`](TraceBuilder::bind)).
    /// On an error, the ops before the one it names are pushed; refused with
    /// [`Error::Selection`] naming the op's position in `ops`: an op that is not one of the
    /// family's (an id of another set or family), one with no member for the state (and no
    /// glue to one), operands or targets that run out before the last op or are left over
    /// after it.
    pub fn push_ops(
        &mut self,
        selector: &Selector<'_>,
        ops: &[u16],
        operands: &[u64],
        targets: &[Target],
    ) -> Result<(), Error> {
        let mut at: Cursor = (0, 0, 0);
        loop {
            at = self.push_run(selector, ops, operands, at)?;
            if at.0 == ops.len() {
                break;
            }
            at = self.push_one(selector, ops, operands, targets, at)?;
        }
        if (at.1, at.2) != (operands.len(), targets.len()) {
            return Err(selector.error(format!(
                "push_ops: the {} ops took {} of the {} operands and {} of the {} targets: give \
                 each op exactly its members' operands and targets, in order",
                ops.len(),
                at.1,
                operands.len(),
                at.2,
                targets.len()
            )));
        }
        Ok(())
    }

    /// Op `at.0` of [`push_ops`](TraceBuilder::push_ops) through
    /// [`push_op`](TraceBuilder::push_op): glue, labels and every refusal, which names the
    /// op's position.
    #[inline(never)]
    fn push_one(
        &mut self,
        selector: &Selector<'_>,
        ops: &[u16],
        operands: &[u64],
        targets: &[Target],
        (k, o, t): Cursor,
    ) -> Result<Cursor, Error> {
        let op = ops[k];
        let name = |e: Error| match e {
            Error::Selection { family, reason } => Error::Selection {
                family,
                reason: format!("push_ops, op {k} of {}: {reason}", ops.len()),
            },
            e => e,
        };
        // The op's counts, from any of its members (all take the same).
        let table = selector.table();
        let member = (0..table.states)
            .map(|s| table.transition(op, s).member)
            .find(|&m| m != Family::NONE);
        let Some(p) = member.and_then(|m| self.programs.get(m as usize)) else {
            // No member at all (an op of another family): `push_op` says why.
            return Err(name(
                self.push_op(selector, op, &[], &[])
                    .err()
                    .unwrap_or_else(|| selector.error(format!("op {op} has no member"))),
            ));
        };
        let (n_o, n_t) = (p.operands as usize, p.targets as usize);
        if operands.len() - o < n_o || targets.len() - t < n_t {
            return Err(name(selector.error(format!(
                "op `{}` takes {n_o} operands and {n_t} targets, and only {} operands and {} \
                 targets are left",
                selector.op_name(op),
                operands.len() - o,
                targets.len() - t
            ))));
        }
        self.push_op(selector, op, &operands[o..o + n_o], &targets[t..t + n_t])
            .map_err(name)?;
        Ok((k + 1, o + n_o, t + n_t))
    }

    /// The loop of [`push_ops`](TraceBuilder::push_ops) from `at`: pushes ops while each has
    /// a member for the current state without glue and takes no target (a jump: rare in a
    /// straight run, and its targets may be labels), and returns where it stopped (at the
    /// end, or at an op for [`push_one`](TraceBuilder::push_one)).
    // Few values live across the loop (the operands' and records' destinations are the
    // sources' positions shifted; the target offset is constant), so that they stay in
    // registers (callgrind, straight-100: 111 instructions per op, 127 when the loop also
    // took targets). Inlined into `push_ops`: a client pushes a run per call between its
    // jumps and labels, and the second frame and its `Result` in memory cost 27 of the
    // about 180 instructions each call took besides its ops (straight-100 end to end:
    // 176.5 -> 174.6 instructions per instance, 2.4 % less time).
    #[inline(always)]
    fn push_run(
        &mut self,
        selector: &Selector<'_>,
        ops: &[u16],
        operands: &[u64],
        (k, o, t): Cursor,
    ) -> Result<Cursor, Error> {
        let table = selector.table();
        let (states, transitions) = (table.states as usize, table.transitions);
        let mut state = self.cache_state as usize;
        if state >= states {
            // `push_one` reports it.
            return Ok((k, o, t));
        }
        let rest = &ops[k..];
        // Room for every op of the run, once; glue (pushed by `push_one`) makes its own.
        self.reserve_run(rest.len(), operands.len() - o)?;
        // No member ([`Family::NONE`]) lies past this slice, so that one bounds check
        // rules out both it and a stencil of another set.
        let programs = &self.programs[..self.programs.len().min(Family::NONE as usize)];
        let mut layout = self.layout;
        let n_inst = self.instances.len();
        let targets_at = self.targets.len() as u32;
        // The run's operands still to take (`left` of them at `from`), and where the next
        // goes in the builder's vector (`to`, element `at`).
        let (mut from, mut left) = (operands[o..].as_ptr(), operands.len() - o);
        let mut at = self.operands.len();
        // SAFETY: `at` is the vector's length, within its allocation.
        let mut to = unsafe { self.operands.as_mut_ptr().add(at) };
        // SAFETY: `n_inst` is the vector's length, within its allocation.
        let first = unsafe { self.instances.as_mut_ptr().add(n_inst) };
        let mut records = first;
        for &op in rest {
            let Some(tr) = transitions.get(op as usize * states + state) else {
                break;
            };
            if tr.glue != Family::NONE {
                break;
            }
            let Some(p) = programs.get(tr.member as usize) else {
                break;
            };
            // (Also ends the run at a jump: see `Program::run_operands`.)
            let n_o = p.run_operands as usize;
            if left < n_o {
                break;
            }
            // SAFETY: `n_o` operands are left at `from` (checked just above), and
            // `reserve_run` made room at `to` for every operand of the run.
            let (taken, wide) = unsafe {
                let taken = std::slice::from_raw_parts(from, n_o);
                (taken, copy_operands(to, taken, p))
            };
            let record = Instance {
                stencil: tr.member as u32,
                operands: at as u32,
                targets: targets_at,
                code_at: layout.place(p),
            };
            // SAFETY: room for one record per op of the run, and one more is written here.
            unsafe {
                records.write(record);
                records = records.add(1);
            }
            if layout.may_need(p, (wide >> 32 != 0, false)) {
                // Out of line and rare: counted on a copy, so that `layout` stays in
                // registers.
                let mut counted = layout;
                counted.count_each(p, taken, &[], &mut self.spare.counted);
                layout = counted;
            }
            state = tr.exit as usize;
            // SAFETY: within the operands and the room made (see above).
            unsafe {
                from = from.add(n_o);
                to = to.add(n_o);
            }
            left -= n_o;
            at += n_o;
        }
        // SAFETY: `records` only moved forward from `first`, one record per op.
        let done = unsafe { records.offset_from(first) } as usize;
        // SAFETY: every element up to the new lengths was written above.
        unsafe {
            self.instances.set_len(n_inst + done);
            self.operands.set_len(at);
        }
        self.layout = layout;
        self.cache_state = state as u8;
        Ok((k + done, operands.len() - left, t))
    }

    /// Makes room for `instances` more records and `operands` more operands.
    fn reserve_run(&mut self, instances: usize, operands: usize) -> Result<(), Error> {
        if self.instances.capacity() - self.instances.len() < instances {
            try_grow(
                &mut self.instances,
                instances,
                "the trace's instance records",
            )?;
        }
        if self.operands.capacity() - self.operands.len() < operands {
            try_grow(&mut self.operands, operands, "the trace's operands")?;
        }
        Ok(())
    }
}

/// Writes `operands` (of an instance of `p`) to `to`, and returns them or-ed after the need
/// filter's bias (whether one is too wide for its immediates: its upper 32 bits). Most ops
/// take at most two operands: those are written without a loop (the loop's set-up was a
/// tenth of `push_run`'s instructions per op).
///
/// # Safety
/// `to` has room for `operands.len()` values.
#[inline(always)]
pub(super) unsafe fn copy_operands(
    to: *mut u64,
    operands: &[u64],
    p: &crate::program::Program,
) -> u64 {
    let bias = p.filter.operand_bias;
    // SAFETY: room for every operand (the caller's promise).
    unsafe {
        match *operands {
            [] => 0,
            [a] => {
                to.write(a);
                a.wrapping_add(bias)
            }
            [a, b] => {
                to.write(a);
                to.add(1).write(b);
                a.wrapping_add(bias) | b.wrapping_add(bias)
            }
            _ => {
                let mut wide = 0;
                for (j, &v) in operands.iter().enumerate() {
                    to.add(j).write(v);
                    wide |= v.wrapping_add(bias);
                }
                wide
            }
        }
    }
}
