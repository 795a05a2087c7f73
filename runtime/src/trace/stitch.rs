//! Stitching a trace, in named stages: [`Layout::place`] and [`Layout::count`] (run by
//! each `push`), then in `finish` [`sizes`], [`allocate`], [`write()`](write::write) (copy
//! and patch, in [`write`]) and [`settle`] (publish).
//!
//! Layout: `[instance code...][tail jump][cold parts...][veneers]` in a code block,
//! `[instance data...][instance code offsets][GOT slots]` in a data block of the same
//! arena chunk (the offsets, one `u32` per instance, are what
//! [`Trace::instance_offsets`](crate::Trace::instance_offsets) reads). Instances
//! follow each other back to back (the toolchain removed each stencil's trailing jump to
//! its continuation), padded with nops to each stencil's code alignment. The cold parts of
//! their stencils (`Stencil::cold_len`: blocks that leave the trace, helpers) follow the
//! hot code in the same order, so that each hot path falls through into the next instance;
//! branches between the two are holes like any other.
//!
//! Everything that is the same for every instance of a stencil was worked out once, in
//! [`Jit::new`](crate::Jit::new): each stencil's [`Program`] holds its code and its data
//! padded to 16-byte blocks, and its holes with where their values come from and how they
//! are written. Each `push` appends one 16-byte record (stencil, where its operands and
//! targets start, code offset), adds its data to the trace's data size, and adds up upper
//! bounds of the GOT slots and veneers the trace may need (a symbol's once, by its id):
//! first through the stencil's [`NeedFilter`], a few comparisons that rule out most
//! instances (operands that fit their immediates, jump targets inside the trace, symbols
//! already counted), then, for the rest, need by need. So
//! `finish` has no layout pass: it takes the blocks from the arena at those bounds, makes
//! one pass that copies each instance (whole 16-byte blocks of code, and of data where the
//! same computation as `push`'s puts it) and runs its program, and returns the unused GOT and
//! veneer space. Per hole, a [`Fast`](crate::program::Fast) form chosen once per stencil (x86-64: a
//! range-checked rel32 store, or an `imm32` store into an instruction the program already
//! holds in its immediate form) does the common case; any value it cannot take goes the
//! full path (out of line), which handles every case and reports every error. The
//! commonest whole programs (one or two `imm32` operands, one or two references to the
//! instance's data) also have a [`Quick`](crate::program::Quick) form: their stores with one range test for all,
//! no loop and no dispatch per hole (4–5 % fewer instructions and about 4 % less time on
//! the bench's 1,000-instance trace); so do programs of operand steps alone (any number
//! of `imm32`, absolute 32-bit and range-check fields,
//! [`Quick::Operands`](crate::program::Quick)): one loop over flat 32-byte
//! [`OperandStep`](crate::program::OperandStep)s, one range test and one store each (the
//! eBPF example's 100-instruction compile 47.4k → 41.1k instructions). What `Jit::new` and
//! `push` established is not checked
//! again per instance: a recorded stencil index is in the program table and its operands
//! are in the builder's vector, a quick form's fields lie inside its stencil's code (which
//! one check per instance places inside the trace's code), so those reads and stores have
//! no bounds checks (debug builds assert them). GOT
//! slots and veneers are deduplicated in a [`SlotTable`] (by symbol id, else by value; O(1)
//! per hole, no allocation per trace). Every patch checks range, alignment and instruction
//! bytes, in release builds too.
//!
//! Why two passes (record in `push`, copy and patch in `finish`) rather than copying in
//! `push`: measured (callgrind, 1,000-instance straight trace, x86-64), staging each
//! instance's code and its position-independent holes in `push` and leaving `finish` a copy
//! and a list of rel32 fixups took 21 % more instructions per instance (push and write, 225
//! → 273): the bookkeeping moved into `push` (its vectors' capacity checks, a 24-byte fixup
//! per rel32) cost more than the pass it saved. Estimated again (wave 35, callgrind per
//! line, end to end): of straight-100's 153 instructions per instance in `push_run` and
//! `write`, the second walk (record load, placement again, padding test, code offsets) and
//! the record's store are at most 30, while the copy and the patches stay; fixups (helper
//! calls, data references, the VM's forward exits) and a staging copy in the in-place write
//! modes would take part of that back: not built. A program's `plain` flag (alignment 1,
//! no data, no cold part) lets both passes place such an instance with one test instead
//! (straight-100 193.7 → 183.9 instructions per instance, the VM's compiles 2 % fewer). A separate loop for the common instances in
//! `write` (unchecked indexing, the general path out of line) saved 4 % of `write`'s
//! instructions, and a per-step table of 12-byte quick forms on top of it gave them back;
//! neither was kept. `push` counts the GOT slots and veneers exactly (each operand against
//! its immediate, each symbol once per trace): a per-stencil constant instead saved 16 % of
//! `push` but reserved more than traces keep, so freed holes no longer fit traces of the
//! same shape (the arena test `one_chunk_commits_more_as_it_fills_and_reuses_before_growing`
//! failed); counting in a pass of its own in `finish` cost more than it saved in `push`.
//! The [`NeedFilter`] keeps the counts exact and skips the per-need loop (whose dispatch
//! on the kind of bound the processor mispredicted) for most instances: on the bench's
//! 1,000-instance trace 5 % fewer instructions per instance and 10 – 15 % less time.
//! Removing other data-dependent branches the same way (copying two code blocks and two
//! operand slots unconditionally, placing empty data without a test) added instructions
//! and saved no time; not kept.

pub(crate) mod direct;
mod write;

use crate::arena::{round_up, Block, GRANULE};
use crate::jit::Jit;
use crate::memory::CodeSource;
use crate::program::{Bound, Key, Need, NeedFilter, Program};
use crate::slots::SlotTable;
use crate::trace::{Target, Trace, TraceBuilder, View};
use crate::Error;
use direct::{place_again, place_and_allocate_batch};
use write::{write, Job};

/// The GOT and veneer tables a trace's write fills, kept with the builder's vectors
/// ([`Spare`](super::spare::Spare), per thread) so that finishing a trace allocates
/// nothing (in a thread local of their own, their borrow was 8 instructions per trace).
#[derive(Default)]
pub(crate) struct Scratch {
    pub(super) got: SlotTable,
    pub(super) veneers: SlotTable,
}

// (The trace made inside an `Ok` and returned whole, to spare its copy into the result:
// the same code.)
pub(crate) fn finish(b: &mut TraceBuilder<'_, '_>) -> Result<Trace, Error> {
    let jit = b.jit;
    let (view, scratch) = b.view_and_scratch();
    check(&view)?;
    let mut layout = sizes(&view);
    layout.reserve_internal(layout.code_len + layout.data_len, jit);
    let mut trace = Trace::unallocated(jit);
    let mut source = allocate(jit, &layout, &mut trace)?;
    // The veneers of the symbols presumed direct are not reserved: checked here, once the
    // code is placed (with the trace in place: moved through a call, it was a copy).
    let presumed = jit.direct.in_trace(view.layout.counted_symbols);
    if presumed != 0
        && !jit
            .direct
            .covers(trace.block.code_rx as u64, trace.code_len)
    {
        source = place_again(jit, &mut layout, presumed, &mut trace)?;
    }
    let mut writer = trace.block.code_writer(&source, trace.code_len)?;
    let job = Job {
        b: &view,
        layout: &layout,
        trace: &mut trace,
        scratch,
    };
    write(job, &mut writer, 0)?;
    writer.publish().map_err(Error::Map)?;
    (trace.veneers, trace.got_slots) = (scratch.veneers.len() as u32, scratch.got.len() as u32);
    trace.set_instances(&layout);
    settle(jit, &mut trace, &layout);
    jit.flusher.flush(trace.block.code_rx, trace.code_len);
    // (Checked here, inline: most JITs register nothing, and the call and the store of
    // `None` were 20 instructions per trace.)
    if jit.registers_traces() {
        trace.debug = jit.register_trace(b, &trace)?;
    }
    Ok(trace)
}

/// [`finish`] for the traces of a [`TraceBatch`](crate::TraceBatch): the same stages,
/// with one allocation cut into a block per trace, one writable view of all their code
/// (one `pwrite` on Linux) and one instruction-cache flush. `view(i)` is trace `i` of the
/// `count`.
pub(crate) fn finish_batch<'a, 'j, 's>(
    jit: &'j Jit<'s>,
    count: usize,
    view: impl Fn(usize) -> View<'a, 'j, 's>,
    scratch: &mut Scratch,
) -> Result<Vec<Trace>, Error>
where
    'j: 'a,
    's: 'a,
{
    if count == 0 {
        return Ok(Vec::new());
    }
    let in_batch = |trace: usize| {
        move |e: Error| Error::InBatch {
            trace,
            source: Box::new(e),
        }
    };
    {
        let mut layouts = Vec::with_capacity(count);
        for i in 0..count {
            let v = view(i);
            check(&v).map_err(in_batch(i))?;
            layouts.push(sizes(&v));
        }
        let presumed = |i: usize| jit.direct.in_trace(view(i).layout.counted_symbols);
        let (placed, mut traces, source) = place_and_allocate_batch(jit, &mut layouts, presumed)?;
        // The whole batch's code, from the first trace's block on.
        let (first, code_len) = (&traces[0].block, placed.code_len);
        let mut writer = source.open(first.code_offset, code_len)?;
        for (i, (layout, trace)) in layouts.iter().zip(&mut traces).enumerate() {
            let v = view(i);
            let job = Job {
                b: &v,
                layout,
                trace,
                scratch,
            };
            write(job, &mut writer, layout.code_at).map_err(in_batch(i))?;
            // Each trace's slot tables are its own (its GOT is in its own data).
            trace.veneers = scratch.veneers.len() as u32;
            trace.got_slots = scratch.got.len() as u32;
            trace.set_instances(layout);
        }
        writer.publish().map_err(Error::Map)?;
        // Only once published: shrinking frees memory that another thread may then take
        // and write, which this batch's write must not overwrite.
        for (trace, layout) in traces.iter_mut().zip(&layouts) {
            settle(jit, trace, layout);
        }
        jit.flusher.flush(traces[0].block.code_rx, code_len);
        if jit.registers_traces() {
            for (i, trace) in traces.iter_mut().enumerate() {
                trace.debug = jit
                    .register_trace(&view(i).to_builder(), trace)
                    .map_err(in_batch(i))?;
            }
        }
        Ok(traces)
    }
}

/// Where the traces of a batch go together: the sizes and alignments of the batch's code
/// and data blocks (each trace's offsets into them are in its [`Sizes`]).
struct BatchPlacement {
    code_len: usize,
    data_len: usize,
    code_align: usize,
    data_align: usize,
}

/// Stage 1 of a batch, after each trace's [`sizes`]: the traces one after another, each at
/// its alignment and with room for all its possible veneers and GOT slots.
fn place_batch(jit: &Jit<'_>, layouts: &mut [Sizes]) -> BatchPlacement {
    let total: usize = layouts.iter().map(|l| l.code_len + l.data_len).sum();
    let mut p = BatchPlacement {
        code_len: 0,
        data_len: 0,
        code_align: GRANULE,
        data_align: GRANULE,
    };
    for l in layouts {
        // Code and data of a trace are as far apart as the batch is large.
        l.reserve_internal(total, jit);
        let (code_size, data_size) = l.reserved_sizes(jit);
        let (code_align, data_align) = (l.code_align.max(GRANULE), l.data_align.max(GRANULE));
        l.code_at = round_up(p.code_len, code_align);
        l.data_at = round_up(p.data_len, data_align);
        p.code_len = l.code_at + round_up(code_size.max(1), GRANULE);
        p.data_len = l.data_at + round_up(data_size, GRANULE);
        p.code_align = p.code_align.max(code_align);
        p.data_align = p.data_align.max(data_align);
    }
    p
}

/// Stage 2 of a batch: one allocation, cut into a block per trace, and how to write its
/// code; from here on, dropping the traces (on an error) frees it.
fn allocate_batch(
    jit: &Jit<'_>,
    p: &BatchPlacement,
    layouts: &[Sizes],
) -> Result<(Vec<Trace>, CodeSource), Error> {
    let (block, source) = jit
        .arena
        .alloc(p.code_len, p.code_align, p.data_len, p.data_align)?;
    let traces = jit.arena.split(
        block,
        layouts.len(),
        |i| (layouts[i].code_at, layouts[i].data_at),
        |block| Trace {
            arena: jit.arena.clone(),
            instances: 0,
            offsets_at: 0,
            veneers: 0,
            got_slots: 0,
            code_len: block.code_len,
            data_len: block.data_len,
            debug: None,
            shim: false,
            block,
        },
    );
    Ok((traces, source))
}

/// Stage 1, run by [`TraceBuilder::push`](crate::TraceBuilder::push) as each instance
/// arrives: where its code and data go (each at its stencil's alignment, [`Layout::place`]),
/// and upper bounds of the GOT slots and veneers the trace may need ([`Layout::count`]).
/// `finish` starts from the result, with no pass over the instances before it copies them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Layout {
    /// Bytes of instance code and of instance data so far, with alignment padding (the
    /// trace's own alignments are the set's largest, [`Jit::code_align`] and
    /// [`Jit::data_align`]).
    pub code_len: u64,
    pub data_len: u64,
    /// At most this many GOT slots and veneers are needed (the last instance's
    /// [`Bound::Continue`] and the tail jump are added by `finish`).
    pub got_bound: u32,
    pub veneer_bound: u32,
    /// References to the trace itself that need a GOT slot only if its code and data may
    /// be far apart ([`Bound::Internal`]); see [`Sizes::reserve_internal`].
    pub internal: u32,
    /// The symbols whose GOT slot or veneer this trace has counted, as bits of
    /// [`NeedFilter::symbols`]; from the start, the veneers of the symbols presumed
    /// direct ([`DirectSymbols`](direct::DirectSymbols), checked by `finish`).
    pub counted_symbols: u64,
    /// Bytes of the instances' cold parts, each at its alignment from the start of the
    /// trace's cold area (which `finish` aligns to [`Jit::code_align`]).
    pub cold_len: u64,
}

impl Layout {
    /// The layout of a trace of `jit` before its first push.
    #[inline(always)]
    pub fn starting(jit: &Jit<'_>) -> Layout {
        Layout {
            counted_symbols: jit.direct.presumed(),
            ..Layout::default()
        }
    }

    /// Places an instance of `p`: returns its code offset and adds its data to the trace's
    /// (at the data alignment of `p`).
    // Its one caller is `push`, itself always inlined.
    #[inline(always)]
    pub fn place(&mut self, p: &Program) -> u32 {
        if p.plain {
            // No rounding, no data, no cold part: one test instead of three.
            let code_at = self.code_len;
            self.code_len = code_at + p.code_len as u64;
            return code_at as u32;
        }
        let code_at = round_up64(self.code_len, p.code_align as u64);
        self.code_len = code_at + p.code_len as u64;
        if p.cold_len != 0 {
            // Where it goes is worked out again by `write`, in the same order.
            self.cold_len = round_up64(self.cold_len, p.cold_align as u64) + p.cold_len as u64;
        }
        if p.data_len != 0 {
            // Where the data goes is worked out again by `write`, which copies it.
            let at = round_up64(self.data_len, p.data_align as u64);
            self.data_len = at + p.data_len as u64;
        }
        // Offsets past 2 GiB are refused by `finish` (`TraceTooLarge`), before any is used.
        code_at as u32
    }

    /// Counts the GOT slots and veneers an instance of `p` with these operands and targets
    /// may need, unless its [`NeedFilter`] rules them all out: `wide` says that an operand
    /// does not fit the filter's immediate range, `far` that a target is an address.
    #[inline(always)]
    pub fn count(
        &mut self,
        p: &Program,
        (wide, far): (bool, bool),
        operands: &[u64],
        targets: &[Target],
        counted: &mut Counted,
    ) {
        if self.may_need(p, (wide, far)) {
            self.count_each(p, operands, targets, counted);
        }
    }

    /// Whether an instance of `p` may need a GOT slot or veneer its [`NeedFilter`] cannot
    /// rule out (`wide`, `far`: as for [`count`](Layout::count)).
    #[inline(always)]
    pub fn may_need(&self, p: &Program, (wide, far): (bool, bool)) -> bool {
        let f = &p.filter;
        if f.flags == 0 {
            // Nothing can count (no symbols either): one test.
            return false;
        }
        let may = NeedFilter::ALWAYS
            | if wide { NeedFilter::OPERANDS } else { 0 }
            | if far { NeedFilter::TARGETS } else { 0 };
        f.flags & may != 0 || f.symbols & !self.counted_symbols != 0
    }

    /// Counts each need of an instance of `p` (each known one once per trace, in
    /// `counted`: a symbol's by its id, an operand's by its value).
    // Out of line: most instances are ruled out by their filter, and the loop's registers
    // would be taken from `push`'s caller.
    #[inline(never)]
    pub(crate) fn count_each(
        &mut self,
        p: &Program,
        operands: &[u64],
        targets: &[Target],
        counted: &mut Counted,
    ) {
        for need in p.needs.iter() {
            let counts = match need.bound {
                Bound::Never | Bound::Continue => false,
                Bound::Always => true,
                Bound::OperandAbove {
                    operand,
                    part,
                    signed32,
                } => {
                    // One unsigned comparison either way, without a branch: `v` fits a
                    // sign-extended imm32 exactly when `v + 2^31` (mod 2^64) is below 2^32.
                    let bias = if signed32 { 1 << 31 } else { 0 };
                    part.of(operands[operand as usize]).wrapping_add(bias) > u32::MAX as u64
                }
                Bound::Target(t) => matches!(targets[t as usize], Target::Address(_)),
                Bound::Internal => {
                    self.internal = self.internal.saturating_add(1);
                    false
                }
            };
            if counts && counted.first(need, operands, self.counted_symbols) {
                let bound = if need.got {
                    &mut self.got_bound
                } else {
                    &mut self.veneer_bound
                };
                *bound = bound.saturating_add(1);
            }
            if let Key::Symbol(id) = need.key {
                // Counted now (or before, in this trace): the filter may rule it out.
                self.counted_symbols |= NeedFilter::symbol_bit(need.got, id).unwrap_or(0);
            }
        }
    }
}

/// The GOT slots and veneers a trace's [`Layout`] has counted, by what they are known by
/// ([`Key`]): symbols by id, operand values by value, in a [`SlotTable`] per kind (only
/// whether a key is new is used). Kept with the builder's vectors from trace to trace;
/// starting a trace costs nothing while no trace has counted anything.
#[derive(Default)]
pub(crate) struct Counted {
    pub(super) got: SlotTable,
    pub(super) veneers: SlotTable,
}

impl Counted {
    /// Forgets everything.
    #[inline]
    pub fn reset(&mut self) {
        self.got.reset();
        self.veneers.reset();
    }

    /// Whether `need`'s GOT slot or veneer is counted for the first time in this trace: a
    /// symbol's with a bit, unless `symbols` ([`Layout::counted_symbols`]) has it (counted,
    /// or presumed direct), others in a table.
    // Inlined into `count_each`, which is itself out of line (inlined into `push` it cost
    // the loop registers: 90.2 against 87.2 instructions per instance of push).
    #[inline(always)]
    fn first(&mut self, need: &Need, operands: &[u64], symbols: u64) -> bool {
        let table = if need.got {
            &mut self.got
        } else {
            &mut self.veneers
        };
        match need.key {
            Key::Unknown => true,
            Key::Operand {
                operand,
                part,
                bias,
            } => {
                table
                    .slot(part.of(operands[operand as usize]).wrapping_add(bias))
                    .1
            }
            Key::Symbol(id) => match NeedFilter::symbol_bit(need.got, id) {
                Some(bit) => symbols & bit == 0,
                None => table.slot_of_id(id).1,
            },
        }
    }
}

/// What `finish` adds to a trace's [`Layout`]: the checks that need the whole trace, the
/// tail jump, and the sizes to reserve.
struct Sizes {
    /// Bytes of instance code (with padding), then of the tail jump if any (`hot_end`),
    /// then where the cold parts start (`cold_at`, aligned) and where all code ends.
    instances_end: usize,
    hot_end: usize,
    cold_at: usize,
    code_len: usize,
    /// Bytes of instance data (with padding).
    data_len: usize,
    /// Instances in the trace: their code offsets follow the instance data, as `u32`s
    /// from [`offsets_at`](Sizes::offsets_at), before the GOT slots.
    instances: usize,
    code_align: usize,
    data_align: usize,
    /// At most this many GOT slots and veneers are needed.
    got_bound: u32,
    veneer_bound: u32,
    /// See [`Layout::internal`].
    internal: u32,
    /// Where the trace's code and data start in its batch's blocks (0 alone).
    code_at: usize,
    data_at: usize,
}

impl Sizes {
    fn veneer_base(&self) -> usize {
        round_up(self.code_len, GRANULE)
    }
    /// Where the instances' code offsets start in the trace's data (kept there rather than
    /// on the heap: a 100-instance trace's table cost a `malloc` and a `free`, 650
    /// instructions, and a short trace's inline table made every move of a `Trace` a
    /// `memcpy` call).
    fn offsets_at(&self) -> usize {
        round_up(self.data_len, 4)
    }
    fn got_base(&self) -> usize {
        round_up(self.offsets_at() + 4 * self.instances, 8)
    }

    /// Counts the [`Bound::Internal`] GOT slots if the trace's code and data could be more
    /// than 256 MiB apart: when `span` bytes (the trace's, or its batch's, code + data) or
    /// a chunk are that large.
    fn reserve_internal(&mut self, span: usize, jit: &Jit<'_>) {
        if span > 1 << 28 || jit.arena.chunk_bytes() > 1 << 28 {
            self.got_bound = self.got_bound.saturating_add(self.internal);
            self.internal = 0;
        }
    }

    /// Bytes of code and of data to reserve: room for every possible veneer and GOT slot.
    fn reserved_sizes(&self, jit: &Jit<'_>) -> (usize, usize) {
        (
            self.veneer_base() + self.veneer_bound as usize * jit.facts.veneer_size,
            self.got_base() + self.got_bound as usize * 8,
        )
    }
}

/// Checks what only the whole trace tells: it is not empty, does not run off its end,
/// is not too large.
// Inline, its errors made out of line: out of line it was 46 instructions per trace,
// mostly the frame its error strings needed.
#[inline]
fn check(b: &View<'_, '_, '_>) -> Result<(), Error> {
    let set = b.jit.set;
    let Some(last) = b.instances.last() else {
        return Err(Error::EmptyTrace);
    };
    // The last instance must end the trace (return, or jump elsewhere) unless the caller
    // said where the trace continues: running off its end would execute the trap filler.
    let stencil = &set.stencils[last.stencil as usize];
    if stencil.falls_through && b.continuation.is_none() {
        return Err(ends_with_continue(stencil.name, b.instances.len() - 1));
    }
    let l = &b.layout;
    // Each stencil is < 2 GiB, so offsets (u32) are exact while the totals are below this.
    if l.code_len + l.cold_len > u32::MAX as u64 / 2 || l.data_len > u32::MAX as u64 / 2 {
        return Err(Error::TraceTooLarge {
            code_bytes: l.code_len + l.cold_len,
            data_bytes: l.data_len,
        });
    }
    Ok(())
}

/// [`check`]'s refusal of a trace whose last instance, `instance` of stencil `stencil`,
/// runs off its end.
#[cold]
#[inline(never)]
fn ends_with_continue(stencil: &str, instance: usize) -> Error {
    Error::TraceEndsWithContinue {
        stencil: stencil.to_string(),
        instance,
    }
}

/// Completes the layout the pushes made of a trace that passed [`check`]: the last
/// instance's continuation and the tail jump are counted. (Infallible, so that the result
/// is built in its place rather than moved out of a `Result`.)
#[inline]
fn sizes(b: &View<'_, '_, '_>) -> Sizes {
    let jit = b.jit;
    let l = &b.layout;
    let mut veneer_bound = l.veneer_bound;
    let mut code_len = l.code_len as usize;
    // The toolchain removed the last instance's trailing jump; if the trace continues
    // somewhere, put a jump there back (for a fall-through and for its continue holes).
    if let Some(to) = b.continuation {
        code_len += jit.facts.tail_jump.len();
        veneer_bound = veneer_bound.saturating_add(1);
        if let (Target::Address(_), Some(last)) = (to, b.instances.last()) {
            let p = &jit.programs[last.stencil as usize];
            veneer_bound = veneer_bound.saturating_add(p.continue_needs as u32);
        }
    }
    let (hot_end, cold_len) = (code_len, l.cold_len as usize);
    let cold_at = if cold_len == 0 {
        hot_end
    } else {
        round_up(hot_end, jit.code_align as usize)
    };
    Sizes {
        instances_end: l.code_len as usize,
        hot_end,
        cold_at,
        code_len: cold_at + cold_len,
        data_len: l.data_len as usize,
        instances: b.instances.len(),
        code_align: jit.code_align as usize,
        data_align: jit.data_align as usize,
        got_bound: l.got_bound.min(u32::MAX / 16),
        veneer_bound: veneer_bound.min(u32::MAX / 16),
        internal: l.internal.min(u32::MAX / 16),
        code_at: 0,
        data_at: 0,
    }
}

/// Stage 2: code and data blocks at their largest possible size (every possible veneer and
/// GOT slot), and how to write the code; [`settle`] returns what was not used.
// Always inline: the block is taken in place (see `Arena::alloc_into`), and the trace
// is not moved in and out of a `Result` (which copied it three times per trace).
#[inline(always)]
fn allocate(jit: &Jit<'_>, layout: &Sizes, trace: &mut Trace) -> Result<CodeSource, Error> {
    let (code_size, data_size) = layout.reserved_sizes(jit);
    (trace.code_len, trace.data_len) = (code_size, data_size);
    jit.arena.alloc_into(
        &mut trace.block,
        (code_size, layout.code_align),
        (data_size, layout.data_align),
    )
}

impl Trace {
    /// A trace of `jit` without memory yet ([`Block::UNALLOCATED`]): [`allocate`] gives it
    /// its blocks, which dropping it (on an error) then returns.
    #[inline(always)]
    fn unallocated(jit: &Jit<'_>) -> Trace {
        Trace {
            arena: jit.arena.clone(),
            instances: 0,
            offsets_at: 0,
            veneers: 0,
            got_slots: 0,
            code_len: 0,
            data_len: 0,
            debug: None,
            shim: false,
            block: Block::UNALLOCATED,
        }
    }
}

impl Trace {
    /// Records the instances whose code offsets `write` stored in the trace's data (at
    /// [`Sizes::offsets_at`]), for [`Trace::instance_offsets`].
    fn set_instances(&mut self, layout: &Sizes) {
        // (Both fit: `check` refuses data past 2 GiB, and each instance is one offset.)
        self.offsets_at = layout.offsets_at() as u32;
        self.instances = layout.instances as u32;
    }
}

/// Stage 4 (after the code is published, and the trace's veneer and GOT slot counts are
/// set): records the sizes of what the trace uses and returns the rest of its reserve to
/// the arena. The caller then flushes the instruction cache.
fn settle(jit: &Jit<'_>, trace: &mut Trace, layout: &Sizes) {
    trace.code_len = if trace.veneers == 0 {
        layout.code_len
    } else {
        layout.veneer_base() + trace.veneers as usize * jit.facts.veneer_size
    };
    trace.data_len = layout.got_base() + 8 * trace.got_slots as usize;
    jit.arena
        .shrink(&mut trace.block, trace.code_len, trace.data_len);
}

fn round_up64(x: u64, align: u64) -> u64 {
    (x + align - 1) & !(align - 1)
}

#[cfg(test)]
mod layout_tests;
