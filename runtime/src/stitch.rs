//! Stitching a trace, in named stages: [`Layout::place`] and [`Layout::count`] (run by
//! each `push`), then in `finish` [`sizes`], [`allocate`], [`write()`] (copy and patch)
//! and [`settle`] (publish).
//!
//! Layout: `[instance code...][tail jump][veneers]` in a code block, `[instance data...]
//! [GOT slots]` in a data block of the same arena chunk. Instances follow each other back
//! to back (the toolchain removed each stencil's trailing jump to its continuation), padded
//! with nops to each stencil's code alignment.
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
//! veneer space. Per hole, a [`Fast`] form chosen once per stencil (x86-64: a
//! range-checked rel32 store, or an `imm32` store into an instruction the program already
//! holds in its immediate form) does the common case; any value it cannot take goes the
//! full path (out of line), which handles every case and reports every error. The
//! commonest whole programs (one or two `imm32` operands, one or two references to the
//! instance's data) also have a [`Quick`] form: their stores with one range test for all,
//! no loop and no dispatch per hole (4–5 % fewer instructions and about 4 % less time on
//! the bench's 1,000-instance trace). What `Jit::new` and `push` established is not checked
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
//! per rel32) cost more than the pass it saved. A separate loop for the common instances in
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

use crate::arena::{round_up, GRANULE};
use crate::error::try_grow;
use crate::jit::Jit;
use crate::memory::{CodeWriter, STAGE_BYTES};
use crate::patch::{self, PatchError};
use crate::program::{
    branch_bias, Action, Bound, Checked, Fast, Key, Need, NeedFilter, Program, Quick, Source, Step,
};
use crate::slots::SlotTable;
use crate::trace::{Instance, Offsets, Target, Trace, TraceBuilder, View};
use crate::Error;
use cpjit_isa::x86_64 as x86;
use cpjit_model::{HoleKind, Section};
use std::cell::RefCell;

/// GOT and veneer tables, kept per thread so that finishing a trace allocates nothing but
/// the trace's own offset table.
#[derive(Default)]
struct Scratch {
    got: SlotTable,
    veneers: SlotTable,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

pub(crate) fn finish(b: &TraceBuilder<'_, '_>) -> Result<Trace, Error> {
    let view = b.view();
    check(&view)?;
    let mut layout = sizes(&view);
    layout.reserve_internal(layout.code_len + layout.data_len, b.jit);
    let mut trace = allocate(b.jit, &layout)?;
    let mut writer = trace.block.code_writer(trace.code_len)?;
    // Only the write borrows the scratch tables (the trace is not moved in and out of
    // the closure: a tenth of a 10-instance trace's instructions were such moves).
    let slots = SCRATCH.with_borrow_mut(|scratch| {
        write(&view, &layout, &mut trace, &mut writer, 0, scratch)
            .map(|()| (scratch.veneers.len(), scratch.got.len()))
    })?;
    writer.publish().map_err(Error::Map)?;
    (trace.veneers, trace.got_slots) = slots;
    trace.instance_offsets = Offsets::of(view.instances)?;
    settle(b.jit, &mut trace, &layout);
    b.jit.flusher.flush(trace.block.code_rx, trace.code_len);
    trace.debug = crate::debug::register(b, &trace)?;
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
    SCRATCH.with_borrow_mut(|scratch| {
        let mut layouts = Vec::with_capacity(count);
        for i in 0..count {
            let v = view(i);
            check(&v).map_err(in_batch(i))?;
            layouts.push(sizes(&v));
        }
        let placed = place_batch(jit, &mut layouts);
        let mut traces = allocate_batch(jit, &placed, &layouts)?;
        let (first, code_len) = (&traces[0].block, placed.code_len);
        let mut writer = first.source.open(first.code_offset, code_len)?;
        for (i, (layout, trace)) in layouts.iter().zip(&mut traces).enumerate() {
            let v = view(i);
            write(&v, layout, trace, &mut writer, layout.code_at, scratch).map_err(in_batch(i))?;
            // Each trace's slot tables are its own (its GOT is in its own data).
            trace.veneers = scratch.veneers.len();
            trace.got_slots = scratch.got.len();
            trace.instance_offsets = Offsets::of(v.instances).map_err(in_batch(i))?;
        }
        writer.publish().map_err(Error::Map)?;
        // Only once published: shrinking frees memory that another thread may then take
        // and write, which this batch's write must not overwrite.
        for (trace, layout) in traces.iter_mut().zip(&layouts) {
            settle(jit, trace, layout);
        }
        jit.flusher.flush(traces[0].block.code_rx, code_len);
        if jit.debug.any() {
            for (i, trace) in traces.iter_mut().enumerate() {
                trace.debug =
                    crate::debug::register(&view(i).to_builder(), trace).map_err(in_batch(i))?;
            }
        }
        Ok(traces)
    })
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

/// Stage 2 of a batch: one allocation, cut into a block per trace; from here on, dropping
/// the traces (on an error) frees it.
fn allocate_batch(
    jit: &Jit<'_>,
    p: &BatchPlacement,
    layouts: &[Sizes],
) -> Result<Vec<Trace>, Error> {
    let block = jit
        .arena
        .alloc(p.code_len, p.code_align, p.data_len, p.data_align)?;
    let traces = jit.arena.split(
        block,
        layouts.len(),
        |i| (layouts[i].code_at, layouts[i].data_at),
        |block| Trace {
            arena: jit.arena.clone(),
            instance_offsets: Offsets::empty(),
            veneers: 0,
            got_slots: 0,
            code_len: block.code_len,
            data_len: block.data_len,
            trap: jit.facts.trap,
            debug: None,
            shim: None,
            block,
        },
    );
    Ok(traces)
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
    /// [`NeedFilter::symbols`].
    pub counted_symbols: u64,
}

impl Layout {
    /// Places an instance of `p`: returns its code offset and adds its data to the trace's
    /// (at the data alignment of `p`).
    // Its one caller is `push`, itself always inlined.
    #[inline(always)]
    pub fn place(&mut self, p: &Program) -> u32 {
        let code_at = round_up64(self.code_len, p.code_align as u64);
        self.code_len = code_at + p.code_len as u64;
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
        let f = &p.filter;
        let may = NeedFilter::ALWAYS
            | if wide { NeedFilter::OPERANDS } else { 0 }
            | if far { NeedFilter::TARGETS } else { 0 };
        if f.flags & may != 0 || f.symbols & !self.counted_symbols != 0 {
            self.count_each(p, operands, targets, counted);
        }
    }

    /// Counts each need of an instance of `p` (each known one once per trace, in
    /// `counted`: a symbol's by its id, an operand's by its value).
    // Out of line: most instances are ruled out by their filter, and the loop's registers
    // would be taken from `push`'s caller.
    #[inline(never)]
    fn count_each(
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
            if counts && counted.first(need, operands) {
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
    got: SlotTable,
    veneers: SlotTable,
}

impl Counted {
    /// Forgets everything.
    #[inline]
    pub fn reset(&mut self) {
        self.got.reset();
        self.veneers.reset();
    }

    /// Whether `need`'s GOT slot or veneer is counted for the first time in this trace.
    // Out of line: it runs only for needs that count, and inlined into `push` it cost the
    // loop registers (measured: 90.2 against 87.2 instructions per instance of push).
    #[inline(never)]
    fn first(&mut self, need: &Need, operands: &[u64]) -> bool {
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
            Key::Symbol(id) => table.slot_of_id(id).1,
        }
    }
}

/// What `finish` adds to a trace's [`Layout`]: the checks that need the whole trace, the
/// tail jump, and the sizes to reserve.
struct Sizes {
    /// Bytes of instance code (with padding), and of the tail jump if any.
    instances_end: usize,
    code_len: usize,
    /// Bytes of instance data (with padding).
    data_len: usize,
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
    fn got_base(&self) -> usize {
        round_up(self.data_len, 8)
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
fn check(b: &View<'_, '_, '_>) -> Result<(), Error> {
    let set = b.jit.set;
    let n = b.instances.len();
    let Some(last) = b.instances.last() else {
        return Err(Error::EmptyTrace);
    };
    // The last instance must end the trace (return, or jump elsewhere) unless the caller
    // said where the trace continues: running off its end would execute the trap filler.
    let stencil = &set.stencils[last.stencil as usize];
    if stencil.falls_through && b.continuation.is_none() {
        return Err(Error::TraceEndsWithContinue {
            stencil: stencil.name.to_string(),
            instance: n - 1,
        });
    }
    let l = &b.layout;
    // Each stencil is < 2 GiB, so offsets (u32) are exact while the totals are below this.
    if l.code_len > u32::MAX as u64 / 2 || l.data_len > u32::MAX as u64 / 2 {
        return Err(Error::TraceTooLarge {
            code_bytes: l.code_len,
            data_bytes: l.data_len,
        });
    }
    Ok(())
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
    Sizes {
        instances_end: l.code_len as usize,
        code_len,
        data_len: l.data_len as usize,
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
/// GOT slot); [`settle`] returns what was not used.
fn allocate(jit: &Jit<'_>, layout: &Sizes) -> Result<Trace, Error> {
    let (code_size, data_size) = layout.reserved_sizes(jit);
    let block = jit
        .arena
        .alloc(code_size, layout.code_align, data_size, layout.data_align)?;
    // From here on, dropping the trace (on an error) returns the memory.
    Ok(Trace {
        arena: jit.arena.clone(),
        instance_offsets: Offsets::empty(),
        veneers: 0,
        got_slots: 0,
        code_len: code_size,
        data_len: data_size,
        trap: jit.facts.trap,
        debug: None,
        shim: None,
        block,
    })
}

/// Stage 3: copies each instance's code and data to its place and runs its patch program:
/// each hole's [`Fast`] form, or the full path when it has none or the value does not fit
/// it. The trace's code (`trace.code_len` bytes) is bytes `at..` of `writer`'s range, seen
/// through the writable view that exists only until the caller publishes it: whole, or (a
/// trace longer than [`STAGE_BYTES`] written through a staging buffer) window by window.
fn write(
    b: &View<'_, '_, '_>,
    layout: &Sizes,
    trace: &mut Trace,
    writer: &mut CodeWriter,
    at: usize,
    scratch: &mut Scratch,
) -> Result<(), Error> {
    if writer.whole() {
        let code = &mut writer.bytes()[at..at + trace.code_len];
        write_whole(b, layout, trace, code, scratch)
    } else {
        write_windows(b, layout, trace, writer, at, scratch)
    }
}

/// [`write()`] through a view of the whole trace's code.
fn write_whole(
    b: &View<'_, '_, '_>,
    layout: &Sizes,
    trace: &mut Trace,
    code: &mut [u8],
    scratch: &mut Scratch,
) -> Result<(), Error> {
    let trap = b.jit.facts.trap;
    let data = start_write(b, layout, trace, scratch);
    let (code, veneers) = code.split_at_mut(layout.veneer_base());
    // Past the instances (and tail jump): traps, later partly overwritten by veneers.
    code[layout.code_len..].fill(trap);
    veneers.fill(trap);
    let data_limit = layout.got_base();
    let mut w = Writer::new(b, layout, trace, 0, code, veneers, data, scratch);
    let ends = w.instances(b.instances, 0, (0, 0), layout.instances_end, data_limit)?;
    w.end(layout, ends.1, 0)
}

/// [`write()`] through a staging buffer, window by window: each window's instances
/// (those starting within [`STAGE_BYTES`] of its start, at least one) are copied and
/// patched into the buffer and written out before the next. The veneers, which any
/// instance may add, are assembled beside them and written last.
fn write_windows(
    b: &View<'_, '_, '_>,
    layout: &Sizes,
    trace: &mut Trace,
    writer: &mut CodeWriter,
    at: usize,
    scratch: &mut Scratch,
) -> Result<(), Error> {
    let programs = &b.jit.programs[..];
    let data = start_write(b, layout, trace, scratch);
    // The trap filler between the instances' end and the veneers, then the veneers.
    let mut after: Vec<u8> = Vec::new();
    let after_len = trace.code_len - layout.code_len;
    try_grow(&mut after, after_len, "the trace's veneers")?;
    after.resize(after_len, b.jit.facts.trap);
    let veneers = &mut after[layout.veneer_base() - layout.code_len..];
    let data_limit = layout.got_base();
    let (mut origin, mut data_end, mut rest) = (0, 0, b.instances);
    loop {
        let n = rest
            .partition_point(|i| (i.code_at as usize) < origin + STAGE_BYTES)
            .max(1);
        let last = n == rest.len();
        // A window ends where its last instance does (the padding before the next one
        // is the next window's), the last one after the tail jump.
        let end = if last {
            layout.code_len
        } else {
            let i = &rest[n - 1];
            i.code_at as usize + programs[i.stencil as usize].code_len as usize
        };
        let code = writer.stage(at + origin, end - origin)?;
        let (v, d, sc) = (&mut *veneers, &mut *data, &mut *scratch);
        let mut w = Writer::new(b, layout, trace, origin, code, v, d, sc);
        let limit = layout.instances_end.min(end) - origin;
        (_, data_end) = w.instances(&rest[..n], origin, (0, data_end), limit, data_limit)?;
        if last {
            w.end(layout, data_end, origin)?;
        }
        writer.put(at + origin, end - origin)?;
        if last {
            break;
        }
        (origin, rest) = (end, &rest[n..]);
    }
    writer.copy_to(at + layout.code_len, &after)
}

/// What [`write()`] does before the instances: the trace's shim, fresh GOT and veneer
/// tables; returns the trace's data.
#[inline(always)]
fn start_write<'d>(
    b: &View<'_, '_, '_>,
    layout: &Sizes,
    trace: &mut Trace,
    scratch: &mut Scratch,
) -> &'d mut [u8] {
    trace.shim = if b.is_shim(0) {
        b.jit.shim.clone()
    } else {
        None
    };
    scratch.got.reset();
    scratch.veneers.reset();
    // What `copy_code` and `copy_data` rely on (the instances end before the tail jump;
    // their data before the GOT slots, which steps write as they go).
    assert!(layout.instances_end <= layout.code_len);
    assert!(layout.got_base() <= trace.data_len);
    // SAFETY: the arena gave this trace exclusive use of its data block, which is at least
    // `data_len` bytes long and mapped RW, until the trace is dropped (after the write).
    unsafe { std::slice::from_raw_parts_mut(trace.block.data as *mut u8, trace.data_len) }
}

/// Stage 4 (after the code is published, and the trace's veneer and GOT slot counts are
/// set): records the sizes of what the trace uses and returns the rest of its reserve to
/// the arena. The caller then flushes the instruction cache.
fn settle(jit: &Jit<'_>, trace: &mut Trace, layout: &Sizes) {
    trace.code_len = if trace.veneers == 0 {
        layout.code_len
    } else {
        layout.veneer_base() + trace.veneers * jit.facts.veneer_size
    };
    trace.data_len = layout.got_base() + 8 * trace.got_slots;
    jit.arena
        .shrink(&mut trace.block, trace.code_len, trace.data_len);
}

/// Why a step failed, before the stencil name is attached.
enum StepError {
    Patch { hole: u16, source: PatchError },
    Other(Error),
}

impl StepError {
    fn error(self, b: &View<'_, '_, '_>, instance: usize) -> Error {
        let s = &b.jit.set.stencils[b.instances[instance].stencil as usize];
        match self {
            StepError::Patch { hole, source } => Error::Patch {
                stencil: s.name.to_string(),
                instance,
                hole: s.holes[hole as usize],
                source,
            },
            StepError::Other(e) => e,
        }
    }
}

/// The trace's memory during [`write()`], and the values instances refer to. `code` is
/// the trace's code from byte `origin` (0 unless written in windows): code offsets
/// relative to it are the instances' offsets minus `origin`.
struct Writer<'a, 'v, 'j, 's> {
    b: &'a View<'v, 'j, 's>,
    /// The trace's instances (for their code offsets: jump targets, continuations).
    instances: &'a [Instance],
    /// Instance 0 is the entry shim (which is no jump target).
    shim_first: bool,
    /// Run-time addresses (RX view) of the trace's code and of `code`.
    trace_base: u64,
    code_base: u64,
    /// Run-time address of the trace's data.
    data_base: u64,
    /// `data_base - code_base` (wrapping): what the quick data references add up.
    data_from_code: u64,
    code: &'a mut [u8],
    data: &'a mut [u8],
    got: &'a mut SlotTable,
    got_base: usize,
    veneers: &'a mut SlotTable,
    /// The veneer area (at the trace's [`Sizes::veneer_base`]), and its run-time address.
    veneer_code: &'a mut [u8],
    veneer_rx: u64,
    veneer_size: usize,
    write_veneer: crate::program::WriteVeneer,
}

impl<'a, 'v, 'j, 's> Writer<'a, 'v, 'j, 's> {
    /// A writer of `trace`'s code from byte `origin` (`code`), its veneers and its data.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn new(
        b: &'a View<'v, 'j, 's>,
        layout: &Sizes,
        trace: &Trace,
        origin: usize,
        code: &'a mut [u8],
        veneer_code: &'a mut [u8],
        data: &'a mut [u8],
        scratch: &'a mut Scratch,
    ) -> Self {
        let jit = b.jit;
        let trace_base = trace.block.code_rx as u64;
        let code_base = trace_base + origin as u64;
        Writer {
            b,
            instances: b.instances,
            shim_first: b.is_shim(0),
            trace_base,
            code_base,
            data_base: trace.block.data as u64,
            data_from_code: (trace.block.data as u64).wrapping_sub(code_base),
            code,
            data,
            got: &mut scratch.got,
            got_base: layout.got_base(),
            veneers: &mut scratch.veneers,
            veneer_code,
            veneer_rx: trace_base + layout.veneer_base() as u64,
            veneer_size: jit.facts.veneer_size,
            write_veneer: jit.facts.write_veneer,
        }
    }

    /// Copies and patches `instances` (a run of the trace's, whose code starts at
    /// `ends.0` and data at `ends.1` after the previous one's): code up to `code_limit`
    /// (relative to `origin`) in whole 16-byte blocks, data up to `data_limit`. Returns
    /// where their code and data end.
    // Always inlined: for a whole trace `origin` is 0 and the loop is what it always was.
    #[inline(always)]
    fn instances(
        &mut self,
        instances: &[Instance],
        origin: usize,
        ends: (usize, usize),
        code_limit: usize,
        data_limit: usize,
    ) -> Result<(usize, usize), Error> {
        let b = self.b;
        let set = b.jit.set;
        let nop = set.nop;
        let (mut code_end, mut data_end) = ends;
        let programs = &b.jit.programs[..];
        debug_assert!(code_limit <= self.code.len() && data_limit <= self.data.len());
        for inst in instances {
            debug_assert!((inst.stencil as usize) < programs.len());
            // SAFETY: `push` records only instances of stencils it found in `programs`.
            let p = unsafe { programs.get_unchecked(inst.stencil as usize) };
            let at = inst.code_at as usize - origin;
            if at != code_end {
                pad_with_nops(&mut self.code[code_end..at], nop).map_err(|reason| {
                    Error::InvalidStencil {
                        stencil: set.stencils[inst.stencil as usize].name.to_string(),
                        reason,
                    }
                })?;
            }
            copy_code(self.code, at, p, code_limit);
            code_end = at + p.code_len as usize;
            // The instance's data where its push placed it (the same computation, in the
            // same order: each at its alignment after the previous one's).
            let data_at = if p.data_len == 0 {
                data_end
            } else {
                let at = round_up(data_end, p.data_align as usize);
                copy_data(self.data, data_end, at, p, data_limit);
                data_end = at + p.data_len as usize;
                at
            };
            let done = match p.quick {
                Quick::Nothing => true,
                Quick::Imm32 { sites } => self.quick_imm32(inst, at, sites),
                Quick::DataRel32 { sites } => self.quick_data(at, data_at, sites),
                Quick::General => false,
            };
            if !done {
                // The instance's index, worked out here rather than counted for every
                // instance.
                let i = index_of(b.instances, inst);
                for step in p.steps.iter() {
                    self.step(i, inst, step, at, data_at)
                        .map_err(|e| e.error(b, i))?;
                }
            }
        }
        Ok((code_end, data_end))
    }

    /// What [`write()`] does after the instances (whose data ends at `data_end`): zeros
    /// up to the GOT, and the jump to the continuation (in `code`, from `origin`).
    fn end(&mut self, layout: &Sizes, data_end: usize, origin: usize) -> Result<(), Error> {
        let b = self.b;
        let (jit, set) = (b.jit, b.jit.set);
        self.data[data_end..layout.got_base()].fill(0);
        let Some(target) = b.continuation else {
            return Ok(());
        };
        // The jump to the continuation, appended after the last instance.
        let tail = jit.facts.tail_hole(layout.instances_end as u32);
        let at = tail.offset as usize - jit.facts.tail_hole_offset as usize - origin;
        self.code[at..at + jit.facts.tail_jump.len()].copy_from_slice(jit.facts.tail_jump);
        let n = b.instances.len();
        let (value, outside) = self.target(n - 1, target).map_err(|e| e.error(b, n - 1))?;
        let place = self.trace_base + tail.offset as u64;
        self.branch(
            tail.kind,
            tail.offset as usize - origin,
            place,
            value,
            tail.addend,
            outside,
            false,
            None,
        )
        .map_err(|source| Error::Patch {
            stencil: format!(
                "{} (the jump to the trace's continuation)",
                set.stencils[b.instances[n - 1].stencil as usize].name
            ),
            instance: n - 1,
            hole: tail,
            source,
        })
    }

    /// Writes one hole of instance `i` (code at `code_at`, data at `data_at`): its fast
    /// form if it has one and the value fits it, otherwise [`run`](Writer::run).
    #[inline]
    fn step(
        &mut self,
        i: usize,
        inst: &Instance,
        step: &Step,
        code_at: usize,
        data_at: usize,
    ) -> Result<(), StepError> {
        let offset = code_at + step.offset as usize;
        match step.fast {
            Fast::Full => {}
            Fast::Rel32 | Fast::Direct => {
                // The instance's own data and code and a symbol, the usual sources of a
                // rel32 field, here; the others through `fast_value`.
                let value = match step.source {
                    Source::Data => Some(self.data_base + data_at as u64),
                    Source::Code => Some(self.code_base + code_at as u64),
                    Source::Symbol(sym) => self.b.jit.symbol(sym),
                    _ => self.fast_value(i, inst, step.source, code_at, data_at),
                };
                if let Some(value) = value {
                    let place = self.code_base + offset as u64;
                    let target = value.wrapping_add(step.addend as u64);
                    if write_rel32(self.code, offset, place, target) {
                        return Ok(());
                    }
                }
                if step.fast == Fast::Direct {
                    // `lea` changed the opcode, `addr32 call` the opcode and ModRM.
                    self.restore(inst, step, code_at, 2);
                }
            }
            Fast::Imm32 { operand, part } => {
                let value = part.of(self.b.operands[inst.operands as usize + operand as usize]);
                if let (Ok(imm), Some(field)) = (
                    i32::try_from(value as i64),
                    self.code.get_mut(offset..offset + 4),
                ) {
                    field.copy_from_slice(&imm.to_le_bytes());
                    return Ok(());
                }
                // REX prefix, opcode and ModRM.
                self.restore(inst, step, code_at, 3);
            }
        }
        self.run(i, inst, step, code_at, data_at)
    }

    /// Runs a [`Quick::Imm32`] program of instance `inst` (code at `code_at`, copied): `false`
    /// if an operand does not fit its `imm32` (nothing written; the steps then write every
    /// field again).
    #[inline(always)]
    fn quick_imm32(&mut self, inst: &Instance, code_at: usize, sites: [(u32, u16); 2]) -> bool {
        let operands = &self.b.operands[inst.operands as usize..];
        debug_assert!(sites.iter().all(|s| (s.1 as usize) < operands.len()));
        // SAFETY: `push` recorded the instance with as many operands as its stencil takes,
        // and `Quick::of` took only sites whose operand is one of them.
        let (a, b) = unsafe {
            (
                *operands.get_unchecked(sites[0].1 as usize),
                *operands.get_unchecked(sites[1].1 as usize),
            )
        };
        self.store_pair(code_at, (sites[0].0, a), (sites[1].0, b))
    }

    /// Runs a [`Quick::DataRel32`] program of an instance (code at `code_at`, copied; data
    /// at `data_at`): `false` if a displacement does not fit 32 bits (nothing written).
    #[inline(always)]
    fn quick_data(&mut self, code_at: usize, data_at: usize, sites: [(u32, i64); 2]) -> bool {
        // `data + addend - place` is `data - code + k` at each site (`k`: addend - offset).
        let to_data = self
            .data_from_code
            .wrapping_add(data_at as u64)
            .wrapping_sub(code_at as u64);
        let a = to_data.wrapping_add(sites[0].1 as u64);
        let b = to_data.wrapping_add(sites[1].1 as u64);
        self.store_pair(code_at, (sites[0].0, a), (sites[1].0, b))
    }

    /// Stores the low 32 bits of two values (the same site twice for one) at their offsets
    /// from `code_at`, if both are sign-extended 32-bit values: `false` otherwise, with
    /// nothing written. The sites are a quick form's, each field inside the stencil's code
    /// (`Quick::of`), and the instance's code was copied to `code_at` ([`copy_code`]
    /// checked that it fits `code`).
    #[inline(always)]
    fn store_pair(&mut self, code_at: usize, a: (u32, u64), b: (u32, u64)) -> bool {
        // Both fit exactly when neither biased value has upper bits.
        if (a.1.wrapping_add(1 << 31) | b.1.wrapping_add(1 << 31)) >> 32 != 0 {
            return false;
        }
        for (offset, value) in [a, b] {
            let at = code_at + offset as usize;
            debug_assert!(at + 4 <= self.code.len());
            // SAFETY: as above, `at + 4 <= self.code.len()`.
            unsafe {
                self.code
                    .as_mut_ptr()
                    .add(at)
                    .cast::<u32>()
                    .write_unaligned((value as u32).to_le())
            };
        }
        true
    }

    /// Puts back the stencil's own instruction bytes (the `len` before the field) of a hole
    /// whose [`Fast`] form the program's code holds: the full path starts from them.
    #[cold]
    fn restore(&mut self, inst: &Instance, step: &Step, code_at: usize, len: usize) {
        let original = self.b.jit.set.stencils[inst.stencil as usize].code;
        let end = step.offset as usize;
        let start = end.saturating_sub(len);
        self.code[code_at + start..code_at + end].copy_from_slice(&original[start..end]);
    }

    /// The value of `source` for instance `i` where the fast forms can take it: `None` for
    /// what only the full path handles (the continuation, the shim or a missing instance as
    /// a target, an unknown symbol), which then reports it.
    #[inline]
    fn fast_value(
        &self,
        i: usize,
        inst: &Instance,
        source: Source,
        code_at: usize,
        data_at: usize,
    ) -> Option<u64> {
        let b = self.b;
        match source {
            Source::Operand(k, part) => {
                Some(part.of(b.operands[inst.operands as usize + k as usize]))
            }
            Source::Code => Some(self.code_base + code_at as u64),
            Source::Data => Some(self.data_base + data_at as u64),
            Source::Continue => self
                .instances
                .get(i + 1)
                .map(|next| self.trace_base + next.code_at as u64),
            Source::Target(k) => match b.targets[inst.targets as usize + k as usize] {
                Target::Address(a) => Some(a),
                Target::Instance(id) if id.0 != 0 || !self.shim_first => self
                    .instances
                    .get(id.index())
                    .map(|to| self.trace_base + to.code_at as u64),
                Target::Instance(_) => None,
            },
            Source::Symbol(sym) => b.jit.symbol(sym),
        }
    }

    /// Runs one step of instance `i` (code at `code_at`, data at `data_at`) in full: the
    /// path for every hole and value, which checks everything and reports errors.
    #[inline(never)]
    fn run(
        &mut self,
        i: usize,
        inst: &Instance,
        step: &Step,
        code_at: usize,
        data_at: usize,
    ) -> Result<(), StepError> {
        let (value, outside) = self.value(i, inst, step.source, code_at, data_at)?;
        let (offset, base) = match step.section {
            Section::Code => (code_at + step.offset as usize, self.code_base),
            Section::Data => (data_at + step.offset as usize, self.data_base),
        };
        let place = base + offset as u64;
        let failed = |source| StepError::Patch {
            hole: step.hole,
            source,
        };
        let addend = step.addend as u64;
        match step.action {
            Action::Plain => {
                let buf = self.section(step.section);
                let target = value.wrapping_add(addend);
                if step.checked != Checked::Nothing && write_rel32(buf, offset, place, target) {
                    return Ok(());
                }
                patch::patch(step.kind, buf, offset, place, target).map_err(failed)
            }
            Action::Branch => {
                let checked = step.checked != Checked::Nothing;
                // A veneer to a symbol itself (no addend left) is shared by its id.
                let symbol = match step.source {
                    Source::Symbol(id) if addend.wrapping_add(branch_bias(step.kind)) == 0 => {
                        Some(id)
                    }
                    _ => None,
                };
                self.branch(
                    step.kind,
                    offset,
                    place,
                    value,
                    step.addend,
                    outside,
                    checked,
                    symbol,
                )
                .map_err(failed)
            }
            Action::Got => self.through_got(step, offset, place, value).map_err(failed),
            Action::RelaxableGot => {
                let buf = self.section(step.section);
                let direct = value.wrapping_add(addend);
                if let Checked::X86GotSite(site) = step.checked {
                    // The site was decoded once from the stencil's bytes; only the value
                    // decides between an immediate, a direct reference and the GOT slot.
                    if outside && x86::relax_got_to_immediate(buf, offset, site, value) {
                        return Ok(());
                    }
                    if x86::relax_got_to_direct(buf, offset, site, place, direct) {
                        return Ok(());
                    }
                    return self.through_got(step, offset, place, value).map_err(failed);
                }
                if outside
                    && patch::relax_x86_got_load_constant(step.kind, buf, offset, value)
                        .map_err(failed)?
                {
                    return Ok(());
                }
                if patch::relax_x86_got_load(buf, offset, place, direct).map_err(failed)? {
                    return Ok(());
                }
                self.through_got(step, offset, place, value).map_err(failed)
            }
            Action::GotPair {
                ldr_hole,
                ldr_offset,
            } => {
                let ldr = code_at + ldr_offset as usize;
                if patch::relax_aarch64_got_pair(self.code, offset, ldr, place, value)
                    .map_err(failed)?
                {
                    return Ok(());
                }
                self.through_got(step, offset, place, value)
                    .map_err(failed)?;
                let ldr_step = Step {
                    kind: HoleKind::Aarch64Ld64GotLo12,
                    ..*step
                };
                let ldr_place = self.code_base + ldr as u64;
                self.through_got(&ldr_step, ldr, ldr_place, value)
                    .map_err(|source| StepError::Patch {
                        hole: ldr_hole,
                        source,
                    })
            }
        }
    }

    fn section(&mut self, section: Section) -> &mut [u8] {
        match section {
            Section::Code => self.code,
            Section::Data => self.data,
        }
    }

    /// The value of `source` for instance `i`, and whether it lies outside the trace.
    fn value(
        &self,
        i: usize,
        inst: &Instance,
        source: Source,
        code_at: usize,
        data_at: usize,
    ) -> Result<(u64, bool), StepError> {
        let b = self.b;
        if let Some(value) = self.fast_value(i, inst, source, code_at, data_at) {
            // Outside the trace: operands, symbols and addresses; inside: everything else.
            let outside = match source {
                Source::Operand(..) | Source::Symbol(_) => true,
                Source::Target(k) => matches!(
                    b.targets[inst.targets as usize + k as usize],
                    Target::Address(_)
                ),
                Source::Continue | Source::Code | Source::Data => false,
            };
            return Ok((value, outside));
        }
        // What `fast_value` leaves: the continuation after the last instance, and the
        // errors (a shim or missing instance as a jump target, an unknown symbol).
        let set = b.jit.set;
        let stencil = || set.stencils[inst.stencil as usize].name.to_string();
        match (source, b.continuation) {
            (Source::Target(k), _) => self.target(i, b.targets[inst.targets as usize + k as usize]),
            (Source::Continue, Some(t)) => self.target(i, t),
            (Source::Symbol(sym), _) => Err(StepError::Other(Error::UnknownSymbol {
                symbol: set.symbols[sym as usize].to_string(),
                stencil: stencil(),
                instance: i,
            })),
            // The last instance continues and the trace does not say where (operands, code
            // and data always have a value).
            _ => Err(StepError::Other(Error::TraceEndsWithContinue {
                stencil: stencil(),
                instance: i,
            })),
        }
    }

    /// The address of jump target `t` of instance `i`, and whether it is outside the trace.
    /// The entry shim is not a jump target: it sets up a native call frame.
    fn target(&self, i: usize, t: Target) -> Result<(u64, bool), StepError> {
        let b = self.b;
        match t {
            Target::Address(a) => Ok((a, true)),
            Target::Instance(id) => match self.instances.get(id.index()).map(|to| to.code_at) {
                Some(_) if b.is_shim(id.index()) => {
                    let set = b.jit.set;
                    Err(StepError::Other(Error::ShimAsTarget {
                        shim: set.stencils[b.instances[id.index()].stencil as usize]
                            .name
                            .to_string(),
                        stencil: set.stencils[b.instances[i].stencil as usize]
                            .name
                            .to_string(),
                        instance: i,
                    }))
                }
                Some(offset) => Ok((self.trace_base + offset as u64, false)),
                None => Err(StepError::Other(Error::MissingInstance {
                    stencil: b.jit.set.stencils[b.instances[i].stencil as usize]
                        .name
                        .to_string(),
                    instance: i,
                    target: id.index(),
                    count: self.instances.len(),
                })),
            },
        }
    }

    /// Patches a direct branch to `value + addend`, through a veneer when the destination
    /// is outside the trace and out of the branch's range. `checked`: the instruction is a
    /// rel32 branch checked once (see [`Checked`]); `symbol`: the destination is exactly
    /// this symbol, whose veneer is found by id.
    #[allow(clippy::too_many_arguments)]
    fn branch(
        &mut self,
        kind: HoleKind,
        offset: usize,
        place: u64,
        value: u64,
        addend: i64,
        outside: bool,
        checked: bool,
        symbol: Option<u16>,
    ) -> Result<(), PatchError> {
        let target = value.wrapping_add(addend as u64);
        if checked && write_rel32(self.code, offset, place, target) {
            return Ok(());
        }
        if !outside || patch::in_range(kind, place, target) {
            return patch::patch(kind, self.code, offset, place, target);
        }
        let bias = branch_bias(kind);
        let destination = target.wrapping_add(bias);
        let (slot, new) = match symbol {
            Some(id) => self.veneers.slot_of_id(id),
            None => self.veneers.slot(destination),
        };
        let at = slot as usize * self.veneer_size;
        if new {
            (self.write_veneer)(
                &mut self.veneer_code[at..at + self.veneer_size],
                destination,
            );
        }
        let veneer = self.veneer_rx + at as u64;
        patch::patch(kind, self.code, offset, place, veneer.wrapping_sub(bias))
    }

    /// Patches a GOT-form hole to load `value` from a GOT slot.
    fn through_got(
        &mut self,
        step: &Step,
        offset: usize,
        place: u64,
        value: u64,
    ) -> Result<(), PatchError> {
        // A symbol's slot holds its address: found by the symbol's id.
        let (slot, new) = match step.source {
            Source::Symbol(id) => self.got.slot_of_id(id),
            _ => self.got.slot(value),
        };
        let at = self.got_base + 8 * slot as usize;
        if new {
            self.data[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        let got = self.data_base + at as u64;
        let buf = self.section(step.section);
        let value = got.wrapping_add(step.addend as u64);
        if step.checked != Checked::Nothing && write_rel32(buf, offset, place, value) {
            return Ok(());
        }
        patch::patch(step.kind, buf, offset, place, value)
    }
}

/// Writes `value - place` into the x86-64 rel32 field at `buf[offset..]` whose instruction
/// was checked once ([`Checked`]); `false`, nothing written, if it does not fit 32 bits
/// (the caller then lets [`patch::patch`] report it, or routes the branch via a veneer).
#[inline]
fn write_rel32(buf: &mut [u8], offset: usize, place: u64, value: u64) -> bool {
    match (
        cpjit_isa::rel32(place, value),
        buf.get_mut(offset..offset + 4),
    ) {
        (Some(rel), Some(field)) => {
            field.copy_from_slice(&rel.to_le_bytes());
            true
        }
        _ => false,
    }
}

/// Fills alignment padding with whole nops.
fn pad_with_nops(padding: &mut [u8], nop: &[u8]) -> Result<(), String> {
    if padding.len() % nop.len() != 0 {
        return Err(format!(
            "{} bytes of alignment padding before it are not a multiple of the {}-byte nop",
            padding.len(),
            nop.len()
        ));
    }
    for chunk in padding.chunks_exact_mut(nop.len()) {
        chunk.copy_from_slice(nop);
    }
    Ok(())
}

/// Copies the data of an instance of `p` to `data[at..]`, and zeros the alignment padding
/// before it (from `end`, where the previous instance's data ended): the program's 16-byte
/// blocks (past the stencil's data they hold zeros, which the next instance overwrites or
/// the padding needs), or exactly the stencil's bytes where whole blocks would pass `limit`
/// (the end of the instances' data: the GOT slots follow). `limit` is at most `data.len()`.
#[inline(always)]
fn copy_data(data: &mut [u8], end: usize, at: usize, p: &Program, limit: usize) {
    debug_assert!(limit <= data.len() && end <= at);
    let blocks = &p.data[..];
    if at + blocks.len() <= limit && at - end <= 16 {
        // SAFETY: `end <= at`, `at + blocks.len() <= limit <= data.len()` (the caller's
        // promise), and `blocks.len()` is a non-zero multiple of 16 (`Program::data`), so
        // that `end + 16 <= at + 16 <= data.len()`: each move writes 16 bytes inside
        // `data[end..]` and reads 16 inside `blocks`, unaligned. The zeros at `end` go
        // first: the copy overwrites those past `at`.
        unsafe {
            let to = data.as_mut_ptr();
            to.add(end).cast::<u128>().write_unaligned(0);
            copy_blocks(blocks, to.add(at));
        }
    } else {
        data[end..at].fill(0);
        let len = p.data_len as usize;
        data[at..at + len].copy_from_slice(&blocks[..len]);
    }
}

/// Copies the code of an instance of `p` to `code[at..]`: the program's 16-byte blocks
/// (past the stencil's end they hold traps, which the next instance or the trailing trap
/// filler overwrites or matches), or exactly the stencil's bytes where whole blocks would
/// pass `limit` (the end of the instances: the tail jump and veneers follow). `limit` is
/// at most `code.len()`; afterwards `at + p.code_len <= code.len()` (the quick forms' stores
/// rely on it).
#[inline(always)]
fn copy_code(code: &mut [u8], at: usize, p: &Program, limit: usize) {
    debug_assert!(limit <= code.len());
    let blocks = &p.code[..];
    if at + blocks.len() <= limit {
        // SAFETY: `at + blocks.len() <= limit <= code.len()` (the caller's promise), and
        // `blocks.len()` is a multiple of 16 (`Program::code`): each move reads and writes
        // 16 bytes inside `blocks` and `code[at..]`, unaligned.
        unsafe { copy_blocks(blocks, code.as_mut_ptr().add(at)) }
    } else {
        let len = p.code_len as usize;
        code[at..at + len].copy_from_slice(&blocks[..len]);
    }
}

/// The index of `inst`, an element of `instances`.
fn index_of(instances: &[Instance], inst: &Instance) -> usize {
    (inst as *const Instance as usize - instances.as_ptr() as usize) / size_of::<Instance>()
}

/// Copies `blocks` (a multiple of 16 bytes long) to `to`, 16 bytes at a time, unaligned.
///
/// # Safety
/// `to` is valid for writes of `blocks.len()` bytes, outside `blocks`.
#[inline(always)]
unsafe fn copy_blocks(blocks: &[u8], to: *mut u8) {
    debug_assert!(blocks.len() % 16 == 0);
    let (mut from, mut to) = (blocks.as_ptr(), to);
    let end = from.add(blocks.len());
    while from < end {
        to.cast::<u128>()
            .write_unaligned(from.cast::<u128>().read_unaligned());
        from = from.add(16);
        to = to.add(16);
    }
}

fn round_up64(x: u64, align: u64) -> u64 {
    (x + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::{copy_data, Counted, Layout};
    use crate::program::{code_hole, NeedFilter, Program, PLAIN_STENCIL};
    use crate::trace::{InstanceId, Target};
    use cpjit_model::{Hole, HoleKind, HoleValue, Stencil};

    /// An x86-64 rel32 hole (addend −4).
    const fn hole(offset: u32, kind: HoleKind, value: HoleValue) -> Hole {
        code_hole(offset, kind, value, -4)
    }

    /// x86-64 stencils with every kind of need: operand loads that relax to an `imm32`, a
    /// GOTPCREL load that never does, calls and loads of symbols, a jump target, a load of
    /// the instance's own data.
    fn programs() -> Vec<Program> {
        use HoleKind::{X86Branch32, X86GotPc32, X86RexGotPc32Relaxable as RexGot};
        use HoleValue::{Data, Operand, Symbol, Target};
        #[rustfmt::skip]
        const CODE: &[u8] = &[
            0x48, 0x8b, 0x05, 0, 0, 0, 0, //  0: mov rax, [rip + G(operand)]
            0xe8, 0, 0, 0, 0, //              7: call symbol
            0xe9, 0, 0, 0, 0, //             12: jmp target
            0x48, 0x8b, 0x0d, 0, 0, 0, 0, // 17: mov rcx, [rip + G(symbol)]
            0x48, 0x03, 0x05, 0, 0, 0, 0, // 24: add rax, [rip + GOTPCREL(operand)]
            0x48, 0x8b, 0x15, 0, 0, 0, 0, // 31: mov rdx, [rip + G(data)]
            0xc3,
        ];
        let stencils: [&[Hole]; 6] = [
            // Operands only: filtered by their width.
            &[hole(3, RexGot, Operand(0)), hole(20, RexGot, Operand(1))],
            // Symbols only: filtered once counted.
            &[hole(8, X86Branch32, Symbol(0)), hole(20, RexGot, Symbol(1))],
            // A jump target: filtered unless it is an address.
            &[hole(13, X86Branch32, Target(0))],
            // A GOTPCREL load of an operand: always counted.
            &[hole(27, X86GotPc32, Operand(0))],
            // A GOT load of the instance's data (internal): always counted.
            &[hole(34, RexGot, Data)],
            // All of them.
            &[
                hole(3, RexGot, Operand(1)),
                hole(8, X86Branch32, Symbol(1)),
                hole(13, X86Branch32, Target(0)),
                hole(20, RexGot, Symbol(0)),
            ],
        ];
        stencils
            .iter()
            .map(|holes| {
                let stencil = Stencil {
                    name: "op",
                    code: CODE,
                    data_len: 8,
                    data_align: 8,
                    holes,
                    operands: &["A", "B"],
                    targets: &["T"],
                    symbols: &[0, 1],
                    ..PLAIN_STENCIL
                };
                Program::new(&stencil, false, 0xcc)
            })
            .collect()
    }

    #[test]
    fn need_filters_say_what_can_count() {
        let p = programs();
        let filters: Vec<(u8, u64, u64)> = p
            .iter()
            .map(|p| (p.filter.flags, p.filter.operand_bias, p.filter.symbols))
            .collect();
        let (o, t, a) = (
            NeedFilter::OPERANDS,
            NeedFilter::TARGETS,
            NeedFilter::ALWAYS,
        );
        let veneer0 = 1 << 32;
        assert_eq!(
            filters,
            [
                (o, 1 << 31, 0),
                (0, 0, veneer0 | 0b10),
                (t, 0, 0),
                (a, 0, 0),
                (a, 0, 0),
                (o | t, 1 << 31, (1 << 33) | 0b01),
            ]
        );
    }

    /// The filter only skips instances none of whose needs count: the GOT and veneer bounds
    /// after each push are those of counting every need of every instance.
    #[test]
    fn filtered_counts_equal_counting_every_need() {
        let programs = programs();
        let values = [
            0u64,
            7,
            (1 << 31) - 1,
            1 << 31,
            -(1i64 << 31) as u64,
            -(1i64 << 31) as u64 - 1,
            1 << 40,
            u64::MAX,
        ];
        let (mut filtered, mut every) = (Layout::default(), Layout::default());
        let (mut counted, mut counted_every) = (Counted::default(), Counted::default());
        counted.reset();
        counted_every.reset();
        // A fixed pseudo-random sequence (xorshift), reproducible without a dependency.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for i in 0..5_000 {
            if i % 500 == 0 {
                // A new trace: everything counted so far is forgotten.
                (filtered, every) = (Layout::default(), Layout::default());
                counted.reset();
                counted_every.reset();
            }
            let p = &programs[next(programs.len())];
            let operands = [values[next(values.len())], values[next(values.len())]];
            let targets = [if next(4) == 0 {
                Target::Address(0x1000 * next(3) as u64)
            } else {
                Target::Instance(InstanceId::from_index(next(8)))
            }];
            filtered.place(p);
            every.place(p);
            let wide = operands
                .iter()
                .fold(0, |w, &o| w | o.wrapping_add(p.filter.operand_bias));
            let far = matches!(targets[0], Target::Address(_));
            filtered.count(p, (wide >> 32 != 0, far), &operands, &targets, &mut counted);
            every.count_each(p, &operands, &targets, &mut counted_every);
            assert_eq!(
                (filtered.got_bound, filtered.veneer_bound, filtered.internal),
                (every.got_bound, every.veneer_bound, every.internal),
                "push {i}"
            );
        }
        // The sequence reached every kind of count.
        assert!(every.got_bound > 0 && every.veneer_bound > 0 && every.internal > 0);
    }

    /// `copy_data` writes the stencil's data exactly and zeros the padding before it, by
    /// whole blocks or exactly at the limit, and nothing before the previous end or past the
    /// limit: every data length up to 70 bytes, padding 0 to 40 bytes, limits from tight
    /// to roomy.
    #[test]
    fn copy_data_writes_the_data_and_zeros_the_padding_only() {
        let init: Vec<u8> = (1..=70u8).collect();
        for len in 1..=70usize {
            let stencil = Stencil {
                init_data: &init[..len],
                data_len: len as u32,
                data_align: 1,
                ..PLAIN_STENCIL
            };
            let p = Program::new(&stencil, false, 0xcc);
            for gap in 0..=40 {
                for slack in [0, 1, 15, 16, 17, 40] {
                    let (end, at) = (5, 5 + gap);
                    let limit = at + len + slack;
                    // 0xee before `end` and past `limit` must stay; 0xaa in between must
                    // become the padding's zeros and the data.
                    let mut buf = vec![0xaa; limit + 50];
                    buf[..end].fill(0xee);
                    buf[limit..].fill(0xee);
                    copy_data(&mut buf, end, at, &p, limit);
                    let what = format!("length {len}, gap {gap}, slack {slack}");
                    assert!(buf[..end].iter().all(|&b| b == 0xee), "{what}");
                    assert!(buf[end..at].iter().all(|&b| b == 0), "{what}");
                    assert_eq!(&buf[at..at + len], &init[..len], "{what}");
                    assert!(buf[limit..].iter().all(|&b| b == 0xee), "{what}");
                }
            }
        }
    }
}
