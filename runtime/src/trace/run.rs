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
//!
//! A [`RunTable`] (a family's rows joined with a JIT's programs, [`RunRow`]) makes the
//! loop read one 16-byte row per op instead of the op's transition and then its member's
//! program, whose fields the loop reads lie on two of its three cache lines; a lean member
//! (plain, nothing to count but a wide operand) needs no program at all. Measured against
//! the transitions (the bench's straight-N end to end, `--select`): callgrind straight-10
//! 5,995,306 -> 5,907,306 instructions (-1.5 %), straight-100 -2.0 %, straight-1000
//! -2.0 %; thread CPU, 8 alternated pairs at load 12 to 18: straight-10 -2.7 %,
//! straight-100 10.79 -> 10.46 ns per instance (-3.5 %), straight-1000 -4.4 %. The same
//! loop over the transitions (no table: [`Joined`]) runs 0.6 % more instructions and 3.5 %
//! more time than the loop it replaced did (straight-100); a client of `push_ops` makes
//! its table once. A row that stops the run is told by its operand count alone (no test
//! of its member, none of an `Option`'s niche): callgrind straight-10 5,723,306 ->
//! 5,575,306 instructions (-2.6 %), straight-100 -4.4 %, straight-1000 -4.7 % (970 -> 861
//! per `push_ops` call on straight-100); thread CPU unchanged within noise (4 sets of 9
//! alternated pairs, load 8 to 17, each set's median ratio: straight-10 0.991 to 1.001,
//! straight-100 1.001 to 1.007, straight-1000 0.982 to 0.999).

use super::select::Selector;
use super::stitch::Layout;
use super::{Instance, Target, TraceBuilder};
use crate::error::try_grow;
use crate::program::{NeedFilter, Program};
use crate::{Error, Jit};
use cpjit_model::{Family, Transition};

/// Where a run stands: the next op, and the next operand and target of the flat slices.
type Cursor = (usize, usize, usize);

impl<'j> TraceBuilder<'j, '_> {
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
        let table = selector.table();
        let states = table.states as usize;
        // No member ([`Family::NONE`]) lies past this slice, so that one bounds check
        // rules out both it and a stencil of another set.
        let all: &'j [Program] = self.programs;
        let programs = &all[..all.len().min(Family::NONE as usize)];
        let at = match selector.run_table() {
            // Built for this builder's JIT: one row per op.
            Some(run) if std::ptr::eq(run.programs, self.programs) => {
                let rows = Built(&run.rows, states);
                self.push_runs(selector, ops, operands, targets, rows)?
            }
            _ => {
                let rows = Joined(table.transitions, programs, states);
                self.push_runs(selector, ops, operands, targets, rows)?
            }
        };
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

    /// The runs of [`push_ops`](TraceBuilder::push_ops) and the ops between them, each op's
    /// row from `rows`; returns where the ops, operands and targets ended.
    #[inline(always)]
    fn push_runs(
        &mut self,
        selector: &Selector<'_>,
        ops: &[u16],
        operands: &[u64],
        targets: &[Target],
        rows: impl Rows<'j>,
    ) -> Result<Cursor, Error> {
        let mut at: Cursor = (0, 0, 0);
        loop {
            at = self.push_run(&rows, ops, operands, at)?;
            if at.0 == ops.len() {
                return Ok(at);
            }
            at = self.push_one(selector, ops, operands, targets, at)?;
        }
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
        rows: &impl Rows<'j>,
        ops: &[u16],
        operands: &[u64],
        (k, o, t): Cursor,
    ) -> Result<Cursor, Error> {
        let mut state = self.cache_state as usize;
        if state >= rows.states() {
            // `push_one` reports it.
            return Ok((k, o, t));
        }
        let rest = &ops[k..];
        // Room for every op of the run, once; glue (pushed by `push_one`) makes its own.
        self.reserve_run(rest.len(), operands.len() - o)?;
        let programs: &'j [Program] = self.programs;
        let mut layout = self.layout;
        let n_inst = self.instances.len();
        let targets_at = self.targets.len() as u32;
        // The run's operands still to take (`left` of them at `from`), and where the next
        // goes in the builder's vector (`to`, element `at`). (At most `u32::MAX - 1` of
        // them: a row that stops the run takes `u32::MAX`, see `RunRow::operands`.)
        let (mut from, mut left) = (
            operands[o..].as_ptr(),
            (operands.len() - o).min(u32::MAX as usize - 1),
        );
        let at_start = self.operands.len();
        let mut at = at_start;
        // SAFETY: `at` is the vector's length, within its allocation.
        let mut to = unsafe { self.operands.as_mut_ptr().add(at) };
        // SAFETY: `n_inst` is the vector's length, within its allocation.
        let first = unsafe { self.instances.as_mut_ptr().add(n_inst) };
        let mut records = first;
        for &op in rest {
            // (No row, or a row's `u32::MAX` operands, end the run: glue, no member, a
            // jump; see `RunRow::of`.)
            let Some(row) = rows.row(op, state) else {
                break;
            };
            let n_o = row.operands();
            if left < n_o {
                break;
            }
            // SAFETY: `n_o` operands are left at `from` (checked just above), and
            // `reserve_run` made room at `to` for every operand of the run.
            let taken = unsafe { std::slice::from_raw_parts(from, n_o) };
            // Out of line and rare, the counts: on a copy, so that `layout` stays in registers.
            let code_at = if let Some(len) = row.lean_len() {
                // SAFETY: as above.
                let wide = unsafe { copy_biased(to, taken, row.bias()) };
                let code_at = layout.code_len;
                layout.code_len = code_at + len as u64;
                if row.lean_may_count(&layout, wide) {
                    let mut counted = layout;
                    counted.count_each(row.program(programs), taken, &[], &mut self.spare.counted);
                    layout = counted;
                }
                code_at as u32
            } else {
                let p = row.program(programs);
                // SAFETY: as above.
                let wide = unsafe { copy_operands(to, taken, p) };
                let code_at = layout.place(p);
                if layout.may_need(p, (wide >> 32 != 0, false)) {
                    let mut counted = layout;
                    counted.count_each(p, taken, &[], &mut self.spare.counted);
                    layout = counted;
                }
                code_at
            };
            let record = Instance {
                stencil: row.member() as u32,
                operands: at as u32,
                targets: targets_at,
                code_at,
            };
            // SAFETY: room for one record per op of the run, and one more is written here.
            unsafe {
                records.write(record);
                records = records.add(1);
            }
            state = row.exit() as usize;
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
        Ok((k + done, o + (at - at_start), t))
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
/// filter's bias ([`copy_biased`]).
///
/// # Safety
/// `to` has room for `operands.len()` values.
#[inline(always)]
pub(super) unsafe fn copy_operands(to: *mut u64, operands: &[u64], p: &Program) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { copy_biased(to, operands, p.filter.operand_bias) }
}

/// Writes `operands` (of an instance) to `to`, and returns them or-ed after `bias`, its
/// program's need filter's (whether one is too wide for its immediates: its upper 32 bits). Most ops
/// take at most two operands: those are written without a loop (the loop's set-up was a
/// tenth of `push_run`'s instructions per op).
///
/// # Safety
/// `to` has room for `operands.len()` values.
#[inline(always)]
unsafe fn copy_biased(to: *mut u64, operands: &[u64], bias: u64) -> u64 {
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

/// What [`push_ops`](TraceBuilder::push_ops)' loop needs of an op in a state, in one
/// 16-byte row: its member, the state it leaves, its operands, and, for a *lean* member
/// (placed by its code length alone, nothing to count unless an operand is too wide for
/// its immediates: a plain program whose need filter has at most its operands' bit), that
/// length and the filter's operand test, so that the loop reads no program for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunRow {
    /// A lean member's code length, else [`RunRow::NOT_LEAN`]: its program is placed and
    /// counted as `push` does.
    lean_len: u32,
    /// A lean member's need filter's operand bias ([`NeedFilter::operand_bias`], 0 or
    /// `2^31`), and whether an operand too wide for it counts (the filter's operands bit).
    bias: u32,
    /// The member, [`Family::NONE`] where the loop stops (glue first, no member, a jump or
    /// the shim): `push_op` takes the op.
    member: u16,
    exit: u8,
    counts: bool,
    /// The member's operands, `u32::MAX` where the loop stops: more than a run has left
    /// (`push_run` takes at most `u32::MAX - 1`), so that the one test of the operands
    /// left also ends the run, with no test of the member.
    operands: u32,
}

// (One row per op and state, read per op: kept to 16 bytes.)
const _: () = assert!(std::mem::size_of::<RunRow>() == 16);

impl RunRow {
    const NOT_LEAN: u32 = u32::MAX;
    const STOP: RunRow = RunRow {
        lean_len: RunRow::NOT_LEAN,
        bias: 0,
        member: Family::NONE,
        exit: 0,
        counts: false,
        operands: u32::MAX,
    };

    /// The row of transition `tr`, its member one of `programs` (which holds no index from
    /// [`Family::NONE`] on), or [`RunRow::STOP`].
    #[inline(always)]
    fn of(tr: &Transition, programs: &[Program]) -> RunRow {
        let p = match programs.get(tr.member as usize) {
            Some(p) if tr.glue == Family::NONE => p,
            _ => return RunRow::STOP,
        };
        // (A jump's and the shim's `run_operands` is `u32::MAX`: see `Program`.)
        if p.run_operands == u32::MAX {
            return RunRow::STOP;
        }
        let f = &p.filter;
        let lean = p.plain && f.flags & !NeedFilter::OPERANDS == 0 && p.code_len != u32::MAX;
        RunRow {
            lean_len: if lean { p.code_len } else { RunRow::NOT_LEAN },
            // (0 or `2^31`: `NeedFilter::of`.)
            bias: f.operand_bias as u32,
            member: tr.member,
            exit: tr.exit,
            counts: f.flags != 0,
            operands: p.run_operands,
        }
    }
}

/// Where `push_run` finds what it needs of each op ([`Row`]): read as it goes from the
/// family's transitions and the programs ([`Joined`]), or from a [`RunTable`] ([`Built`]).
pub(super) trait Rows<'p> {
    type Row: Row<'p>;
    /// The number of cache states (rows per op).
    fn states(&self) -> usize;
    /// Op `op`'s row in state `state` (below [`Rows::states`]): `None` for an op past the
    /// table; where else the run stops (glue first, no member, a jump or the shim), `None`
    /// or a row whose [`Row::operands`] are `u32::MAX`.
    fn row(&self, op: u16, state: usize) -> Option<Self::Row>;
}

/// What `push_run` reads of an op's row (the fields of [`RunRow`]); `'p`: the programs'.
pub(super) trait Row<'p> {
    fn member(&self) -> u16;
    fn exit(&self) -> u8;
    fn operands(&self) -> usize;
    /// The member's code length if it is placed by it alone (see [`RunRow`]).
    fn lean_len(&self) -> Option<u32>;
    /// The member's need filter's operand bias ([`NeedFilter::operand_bias`]).
    fn bias(&self) -> u64;
    /// For a member with a [`Row::lean_len`]: whether the instance may need a GOT slot or
    /// veneer its filter cannot rule out ([`Layout::may_need`]; `wide`: its operands or-ed
    /// after [`Row::bias`]).
    fn lean_may_count(&self, layout: &Layout, wide: u64) -> bool;
    /// The member's program, one of `programs` (the builder's).
    fn program(&self, programs: &'p [Program]) -> &'p Program;
}

/// Rows read as the loop goes: the transitions, the programs (sliced below
/// [`Family::NONE`]), the number of states.
pub(super) struct Joined<'t, 'p>(&'t [Transition], &'p [Program], usize);

impl<'t, 'p> Rows<'p> for Joined<'t, 'p> {
    type Row = (&'t Transition, &'p Program);
    fn states(&self) -> usize {
        self.2
    }
    #[inline(always)]
    fn row(&self, op: u16, state: usize) -> Option<Self::Row> {
        let tr = self.0.get(op as usize * self.2 + state)?;
        if tr.glue != Family::NONE {
            return None;
        }
        let p = self.1.get(tr.member as usize)?;
        Some((tr, p))
    }
}

impl<'p> Row<'p> for (&Transition, &'p Program) {
    #[inline(always)]
    fn member(&self) -> u16 {
        self.0.member
    }
    #[inline(always)]
    fn exit(&self) -> u8 {
        self.0.exit
    }
    #[inline(always)]
    fn operands(&self) -> usize {
        // (`u32::MAX` for a jump and the shim, more than any run has left.)
        self.1.run_operands as usize
    }
    #[inline(always)]
    fn lean_len(&self) -> Option<u32> {
        let (p, f) = (self.1, &self.1.filter);
        (p.plain && f.flags & !NeedFilter::OPERANDS == 0).then_some(p.code_len)
    }
    #[inline(always)]
    fn bias(&self) -> u64 {
        self.1.filter.operand_bias
    }
    #[inline(always)]
    fn lean_may_count(&self, _: &Layout, wide: u64) -> bool {
        // (As `RunRow`'s: the same filters are lean.)
        wide >> 32 != 0 && self.1.filter.flags != 0
    }
    #[inline(always)]
    fn program(&self, _: &'p [Program]) -> &'p Program {
        self.1
    }
}

/// Rows read from a [`RunTable`]'s, and the number of states.
pub(super) struct Built<'a>(&'a [RunRow], usize);

impl<'a, 'p> Rows<'p> for Built<'a> {
    // (By reference: an `Option<RunRow>` is told from `None` by a test of its `bool`.)
    type Row = &'a RunRow;
    fn states(&self) -> usize {
        self.1
    }
    #[inline(always)]
    fn row(&self, op: u16, state: usize) -> Option<&'a RunRow> {
        // (A row that stops the run is told by its operands: `RunRow::operands`.)
        self.0.get(op as usize * self.1 + state)
    }
}

impl<'p> Row<'p> for &RunRow {
    #[inline(always)]
    fn member(&self) -> u16 {
        self.member
    }
    #[inline(always)]
    fn exit(&self) -> u8 {
        self.exit
    }
    #[inline(always)]
    fn operands(&self) -> usize {
        self.operands as usize
    }
    #[inline(always)]
    fn lean_len(&self) -> Option<u32> {
        (self.lean_len != RunRow::NOT_LEAN).then_some(self.lean_len)
    }
    #[inline(always)]
    fn bias(&self) -> u64 {
        self.bias as u64
    }
    #[inline(always)]
    fn lean_may_count(&self, _: &Layout, wide: u64) -> bool {
        // (A lean row's filter has at most its operands' bit: `RunRow::of`.)
        wide >> 32 != 0 && self.counts
    }
    #[inline(always)]
    fn program(&self, programs: &'p [Program]) -> &'p Program {
        // (One of them: `RunRow::of` made the row from it.)
        &programs[self.member as usize]
    }
}

/// A cached family's selection table joined with a [`Jit`]'s programs, one 16-byte row per
/// op and cache state (member, exit state, operand count, code length), so that
/// [`push_ops`](TraceBuilder::push_ops) reads one row per op rather than the family's
/// transition and then the member's program. Built once per JIT and family (a row per
/// transition, no system call); push with [`RunTable::selector`]. A selector without one
/// pushes the same instances, reading the transitions and programs op by op (the bench's
/// straight-100 end to end with the table: 3.5 % less time, see `run.rs`). A table made
/// for another JIT is not used: its builders read the transitions.
///
/// ```no_run
/// # fn demo(jit: &cpjit_runtime::Jit<'_>, family: &cpjit_model::Family<'_>) -> Result<(), cpjit_runtime::Error> {
/// use cpjit_runtime::{RunTable, Selector};
/// let selector = Selector::new(family)?;
/// let table = RunTable::new(jit, &selector);
/// let selector = table.selector();
/// let mut b = jit.trace();
/// let push = selector.op("push")?;
/// b.push_ops(&selector, &[push, push], &[1, 2], &[])?;
/// # Ok(()) }
/// ```
pub struct RunTable<'j> {
    selector: Selector<'j>,
    /// The JIT's programs the rows were made from: a builder of another JIT reads the
    /// transitions instead.
    pub(super) programs: &'j [Program],
    pub(super) rows: Box<[RunRow]>,
}

impl<'j> RunTable<'j> {
    /// The rows of `selector`'s family for `jit`'s programs.
    pub fn new(jit: &'j Jit<'_>, selector: &Selector<'j>) -> RunTable<'j> {
        let programs = &jit.programs[..jit.programs.len().min(Family::NONE as usize)];
        let rows = selector.table().transitions;
        RunTable {
            selector: *selector,
            programs: &jit.programs,
            rows: rows.iter().map(|tr| RunRow::of(tr, programs)).collect(),
        }
    }

    /// The selector to push with: the one this table was made from, reading its rows.
    pub fn selector(&self) -> Selector<'_> {
        self.selector.with_run_table(self)
    }
}

impl std::fmt::Debug for RunTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTable")
            .field("family", &self.selector.family().name)
            .field("rows", &self.rows.len())
            .finish()
    }
}
