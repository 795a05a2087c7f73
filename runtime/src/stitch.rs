//! Finishing a trace, in four named stages: [`layout`], [`allocate`], [`write`] (copy and
//! patch) and [`publish`].
//!
//! Layout: `[instance code...][tail jump][veneers]` in a code block, `[instance data...]
//! [GOT slots]` in a data block of the same arena chunk. Instances follow each other back
//! to back (the toolchain removed each stencil's trailing jump to its continuation), padded
//! with nops to each stencil's code alignment.
//!
//! Everything that is the same for every instance of a stencil was worked out once, in
//! [`Jit::new`](crate::Jit::new): each stencil's [`Program`] lists its holes with where
//! their values come from and how they are written. So `finish` makes one pass to lay out
//! the instances (their offsets are needed first, for forward jumps), takes the blocks from
//! the arena at an upper bound of GOT slots and veneers, then makes one pass that copies
//! each instance and runs its program, and finally returns the unused GOT and veneer space.
//! GOT slots and veneers are deduplicated by value in a [`SlotTable`] (O(1) per hole, no
//! allocation per trace). Every patch checks range, alignment and instruction bytes, in
//! release builds too.

use crate::arena::{round_up, GRANULE};
use crate::jit::Jit;
use crate::patch::{self, PatchError};
use crate::program::{Action, Bound, Checked, Program, Source, Step};
use crate::slots::SlotTable;
use crate::trace::{Instance, Target, Trace, TraceBuilder, View};
use crate::Error;
use cpjit_isa::x86_64 as x86;
use cpjit_model::{Hole, HoleKind, Section, Stencil};
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
    SCRATCH.with_borrow_mut(|scratch| {
        let mut layout = layout(&view, scratch)?;
        layout.reserve_internal(layout.code_len + layout.data_len, b.jit);
        let mut trace = allocate(b.jit, &layout)?;
        let mut writer = trace
            .block
            .code_writer(trace.code_len)
            .map_err(Error::Map)?;
        write(&view, &layout, &mut trace, writer.bytes(), scratch)?;
        writer.publish().map_err(Error::Map)?;
        settle(b.jit, &mut trace, layout, scratch);
        b.jit.flusher.flush(trace.block.code_rx, trace.code_len);
        trace.debug = crate::debug::register(b, &trace)?;
        Ok(trace)
    })
}

/// [`finish`] for the traces of a [`TraceBatch`](crate::TraceBatch): the same stages,
/// with one allocation cut into a block per trace, one writable view of all their code
/// (one `pwrite` on Linux) and one instruction-cache flush.
pub(crate) fn finish_batch(jit: &Jit<'_>, views: &[View<'_, '_, '_>]) -> Result<Vec<Trace>, Error> {
    if views.is_empty() {
        return Ok(Vec::new());
    }
    let in_batch = |trace: usize| {
        move |e: Error| Error::InBatch {
            trace,
            source: Box::new(e),
        }
    };
    SCRATCH.with_borrow_mut(|scratch| {
        let mut layouts = Vec::with_capacity(views.len());
        for (i, v) in views.iter().enumerate() {
            layouts.push(layout(v, scratch).map_err(in_batch(i))?);
        }
        let placed = place_batch(jit, &mut layouts);
        let mut traces = allocate_batch(jit, &placed)?;
        let (first, code_len) = (&traces[0].block, placed.code_len);
        let mut writer = first
            .source
            .open(first.code_offset, code_len)
            .map_err(Error::Map)?;
        let code = writer.bytes();
        for (i, ((v, layout), trace)) in views.iter().zip(&layouts).zip(&mut traces).enumerate() {
            let at = placed.starts[i].0;
            let mine = &mut code[at..at + trace.code_len];
            write(v, layout, trace, mine, scratch).map_err(in_batch(i))?;
            // Each trace's slot tables are its own (its GOT is in its own data).
            trace.veneers = scratch.veneers.len();
            trace.got_slots = scratch.got.len();
        }
        writer.publish().map_err(Error::Map)?;
        // Only once published: shrinking frees memory that another thread may then take
        // and write, which this batch's write must not overwrite.
        for (trace, layout) in traces.iter_mut().zip(layouts) {
            let (veneers, got_slots) = (trace.veneers, trace.got_slots);
            settle_counts(jit, trace, layout, veneers, got_slots);
        }
        jit.flusher.flush(traces[0].block.code_rx, code_len);
        if jit.debug.any() {
            for (i, (v, trace)) in views.iter().zip(&mut traces).enumerate() {
                trace.debug =
                    crate::debug::register(&v.to_builder(), trace).map_err(in_batch(i))?;
            }
        }
        Ok(traces)
    })
}

/// Where each trace of a batch goes in the batch's code and data blocks.
struct BatchPlacement {
    /// Each trace's (code, data) offset into the blocks.
    starts: Vec<(usize, usize)>,
    code_len: usize,
    data_len: usize,
    code_align: usize,
    data_align: usize,
}

/// Stage 1 of a batch, after each trace's [`layout`]: the traces one after another, each at
/// its alignment and with room for all its possible veneers and GOT slots.
fn place_batch(jit: &Jit<'_>, layouts: &mut [Layout]) -> BatchPlacement {
    let total: usize = layouts.iter().map(|l| l.code_len + l.data_len).sum();
    let mut p = BatchPlacement {
        starts: Vec::with_capacity(layouts.len()),
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
        let code_at = round_up(p.code_len, code_align);
        let data_at = round_up(p.data_len, data_align);
        p.starts.push((code_at, data_at));
        p.code_len = code_at + round_up(code_size.max(1), GRANULE);
        p.data_len = data_at + round_up(data_size, GRANULE);
        p.code_align = p.code_align.max(code_align);
        p.data_align = p.data_align.max(data_align);
    }
    p
}

/// Stage 2 of a batch: one allocation, cut into a block per trace; from here on, dropping
/// the traces (on an error) frees it.
fn allocate_batch(jit: &Jit<'_>, p: &BatchPlacement) -> Result<Vec<Trace>, Error> {
    let block = jit
        .arena
        .alloc(p.code_len, p.code_align, p.data_len, p.data_align)?;
    let traces = jit
        .arena
        .split(block, &p.starts)
        .into_iter()
        .map(|block| Trace {
            arena: jit.arena.clone(),
            instance_offsets: Vec::new(),
            veneers: 0,
            got_slots: 0,
            code_len: block.code_len,
            data_len: block.data_len,
            trap: jit.facts.trap,
            debug: None,
            shim: None,
            block,
        })
        .collect();
    Ok(traces)
}

/// Where everything goes, before any memory is taken.
struct Layout {
    instance_offsets: Vec<u32>,
    /// Bytes of instance code (with padding) and of the tail jump, if any.
    code_len: usize,
    /// Bytes of instance data (with padding).
    data_len: usize,
    code_align: usize,
    data_align: usize,
    /// At most this many GOT slots and veneers are needed.
    got_bound: u32,
    veneer_bound: u32,
    /// References to the trace itself that need a GOT slot only if its code and data may
    /// be far apart ([`Bound::Internal`]); see [`Layout::reserve_internal`].
    internal: u32,
    /// The jump to the continuation, appended after the last instance.
    tail: Option<Hole>,
}

impl Layout {
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

/// Stage 1: each instance's code offset, the trace's sizes and its GOT and veneer bounds
/// (values already known, operands and symbols, are counted once each).
fn layout(b: &View<'_, '_, '_>, scratch: &mut Scratch) -> Result<Layout, Error> {
    let jit = b.jit;
    let set = jit.set;
    let n = b.instances.len();
    let Some(last) = b.instances.last() else {
        return Err(Error::EmptyTrace);
    };
    // The last instance must end the trace (return, or jump elsewhere) unless the caller
    // said where the trace continues: running off its end would execute the trap filler.
    let last = &set.stencils[last.stencil as usize];
    if last.falls_through && b.continuation.is_none() {
        return Err(Error::TraceEndsWithContinue {
            stencil: last.name.to_string(),
            instance: n - 1,
        });
    }
    let mut instance_offsets = Vec::with_capacity(n);
    let (mut code_len, mut data_len) = (0u64, 0u64);
    let (mut code_align, mut data_align) = (1u32, 8u32);
    let (mut got_bound, mut veneer_bound) = (0u64, 0u64);
    let mut internal = 0u64;
    scratch.got.reset();
    scratch.veneers.reset();
    let last_instance = &b.instances[n - 1];
    for inst in b.instances {
        let p: &Program = &jit.programs[inst.stencil as usize];
        code_align = code_align.max(p.code_align);
        code_len = round_up64(code_len, p.code_align as u64);
        instance_offsets.push(code_len as u32);
        code_len += p.code_len as u64;
        if p.data_len != 0 {
            data_align = data_align.max(p.data_align);
            data_len = round_up64(data_len, p.data_align as u64) + p.data_len as u64;
        }
        for need in p.needs.iter() {
            let step = &p.steps[need.step as usize];
            let counts = match need.bound {
                Bound::Never => false,
                Bound::Always => true,
                Bound::OperandAbove { operand, signed32 } => {
                    let v = b.operands[inst.operands as usize + operand as usize];
                    if signed32 {
                        i32::try_from(v as i64).is_err()
                    } else {
                        v > u32::MAX as u64
                    }
                }
                Bound::Target(t) => matches!(
                    b.targets[inst.targets as usize + t as usize],
                    Target::Address(_)
                ),
                Bound::Continue => {
                    std::ptr::eq(inst, last_instance)
                        && matches!(b.continuation, Some(Target::Address(_)))
                }
                Bound::Internal => {
                    internal += 1;
                    false
                }
            };
            if !counts {
                continue;
            }
            // Constants known now are deduplicated now, as `write` will.
            let known = match step.source {
                Source::Operand(k) => Some(b.operands[inst.operands as usize + k as usize]),
                Source::Symbol(sym) => jit.symbol(sym),
                _ => None,
            };
            let (table, bound) = if need.got {
                (&mut scratch.got, &mut got_bound)
            } else {
                (&mut scratch.veneers, &mut veneer_bound)
            };
            *bound += match known {
                Some(v) if !need.got => {
                    let destination = v
                        .wrapping_add(step.addend as u64)
                        .wrapping_add(branch_bias(step.kind));
                    table.slot(destination).1 as u64
                }
                Some(v) => table.slot(v).1 as u64,
                None => 1,
            };
        }
        // Checked per instance so that offsets never wrap (each stencil is < 2 GiB).
        if code_len > u32::MAX as u64 / 2 || data_len > u32::MAX as u64 / 2 {
            return Err(Error::TraceTooLarge {
                code_bytes: code_len,
                data_bytes: data_len,
            });
        }
    }
    // The toolchain removed the last instance's trailing jump; if the trace continues
    // somewhere, put a jump there back (for a fall-through and for its continue holes).
    let tail = b.continuation.map(|_| {
        let hole = jit.facts.tail_hole(code_len as u32);
        code_len += jit.facts.tail_jump.len() as u64;
        veneer_bound += 1;
        hole
    });
    Ok(Layout {
        instance_offsets,
        code_len: code_len as usize,
        data_len: data_len as usize,
        code_align: code_align as usize,
        data_align: data_align as usize,
        got_bound: got_bound.min(u32::MAX as u64 / 16) as u32,
        veneer_bound: veneer_bound.min(u32::MAX as u64 / 16) as u32,
        internal: internal.min(u32::MAX as u64 / 16) as u32,
        tail,
    })
}

/// Stage 2: code and data blocks at their largest possible size (every possible veneer and
/// GOT slot); [`publish`] returns what was not used.
fn allocate(jit: &Jit<'_>, layout: &Layout) -> Result<Trace, Error> {
    let (code_size, data_size) = layout.reserved_sizes(jit);
    let block = jit
        .arena
        .alloc(code_size, layout.code_align, data_size, layout.data_align)?;
    // From here on, dropping the trace (on an error) returns the memory.
    Ok(Trace {
        arena: jit.arena.clone(),
        instance_offsets: Vec::new(),
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

/// Stage 3: copies each instance's code and data to its place and runs its patch program.
/// `code` is the trace's code (`trace.code_len` bytes), seen through the writable view that
/// exists only until the caller publishes it.
fn write(
    b: &View<'_, '_, '_>,
    layout: &Layout,
    trace: &mut Trace,
    code: &mut [u8],
    scratch: &mut Scratch,
) -> Result<(), Error> {
    let jit = b.jit;
    let set = jit.set;
    trace.shim = if b.is_shim(0) { jit.shim.clone() } else { None };
    scratch.got.reset();
    scratch.veneers.reset();
    // SAFETY: the arena gave this trace exclusive use of its data block, which is at least
    // `data_len` bytes long and mapped RW.
    let data =
        unsafe { std::slice::from_raw_parts_mut(trace.block.data as *mut u8, trace.data_len) };
    // Past the instances (and tail jump): traps, later partly overwritten by veneers.
    code[layout.code_len..].fill(jit.facts.trap);
    let mut w = Writer {
        b,
        offsets: &layout.instance_offsets,
        code_base: trace.block.code_rx as u64,
        data_base: trace.block.data as u64,
        code,
        data,
        got: &mut scratch.got,
        got_base: layout.got_base(),
        veneers: &mut scratch.veneers,
        veneer_base: layout.veneer_base(),
        veneer_size: jit.facts.veneer_size,
        write_veneer: jit.facts.write_veneer,
    };
    let nop = set.nop;
    let (mut code_end, mut data_end) = (0usize, 0usize);
    for (i, inst) in b.instances.iter().enumerate() {
        let s = &set.stencils[inst.stencil as usize];
        let at = layout.instance_offsets[i] as usize;
        if at != code_end {
            pad_with_nops(&mut w.code[code_end..at], nop).map_err(|reason| {
                Error::InvalidStencil {
                    stencil: s.name.to_string(),
                    reason,
                }
            })?;
        }
        copy_small(&mut w.code[at..at + s.code.len()], s.code);
        code_end = at + s.code.len();
        let data_at = if s.data_len == 0 {
            data_end
        } else {
            let data_at = round_up(data_end, s.data_align as usize);
            w.data[data_end..data_at].fill(0);
            data_end = data_at + s.data_len as usize;
            write_instance_data(s, &mut w.data[data_at..data_end]);
            data_at
        };
        let program = &jit.programs[inst.stencil as usize];
        for step in program.steps.iter() {
            w.run(i, inst, step, at, data_at)
                .map_err(|e| e.error(b, i))?;
        }
    }
    w.data[data_end..layout.got_base()].fill(0);
    if let (Some(tail), Some(target)) = (layout.tail, b.continuation) {
        let at = tail.offset as usize - jit.facts.tail_hole_offset as usize;
        w.code[at..at + jit.facts.tail_jump.len()].copy_from_slice(jit.facts.tail_jump);
        let n = b.instances.len();
        let (value, outside) = w.target(n - 1, target).map_err(|e| e.error(b, n - 1))?;
        let place = w.code_base + tail.offset as u64;
        w.branch(
            tail.kind,
            tail.offset as usize,
            place,
            value,
            tail.addend,
            outside,
            false,
        )
        .map_err(|source| Error::Patch {
            stencil: format!(
                "{} (the jump to the trace's continuation)",
                set.stencils[b.instances[n - 1].stencil as usize].name
            ),
            instance: n - 1,
            hole: tail,
            source,
        })?;
    }
    Ok(())
}

/// Stage 4 (after the code is published): returns unused veneer and GOT space to the arena
/// and records what the trace uses. The caller then flushes the instruction cache.
fn settle(jit: &Jit<'_>, trace: &mut Trace, layout: Layout, scratch: &Scratch) {
    settle_counts(jit, trace, layout, scratch.veneers.len(), scratch.got.len());
}

fn settle_counts(
    jit: &Jit<'_>,
    trace: &mut Trace,
    layout: Layout,
    veneers: usize,
    got_slots: usize,
) {
    trace.veneers = veneers;
    trace.code_len = if veneers == 0 {
        layout.code_len
    } else {
        layout.veneer_base() + veneers * jit.facts.veneer_size
    };
    trace.got_slots = got_slots;
    trace.data_len = layout.got_base() + 8 * got_slots;
    jit.arena
        .shrink(&mut trace.block, trace.code_len, trace.data_len);
    trace.instance_offsets = layout.instance_offsets;
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

/// The trace's memory during [`write`], and the values instances refer to.
struct Writer<'a, 'v, 'j, 's> {
    b: &'a View<'v, 'j, 's>,
    offsets: &'a [u32],
    /// Run-time addresses of the trace's code (RX view) and data.
    code_base: u64,
    data_base: u64,
    code: &'a mut [u8],
    data: &'a mut [u8],
    got: &'a mut SlotTable,
    got_base: usize,
    veneers: &'a mut SlotTable,
    veneer_base: usize,
    veneer_size: usize,
    write_veneer: fn(&mut [u8], u64),
}

impl Writer<'_, '_, '_, '_> {
    /// Runs one step of instance `i` (code at `code_at`, data at `data_at`).
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
                self.branch(
                    step.kind,
                    offset,
                    place,
                    value,
                    step.addend,
                    outside,
                    checked,
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
        Ok(match source {
            Source::Operand(k) => (b.operands[inst.operands as usize + k as usize], true),
            Source::Target(k) => self.target(i, b.targets[inst.targets as usize + k as usize])?,
            Source::Continue => match self.offsets.get(i + 1) {
                Some(&next) => (self.code_base + next as u64, false),
                None => match b.continuation {
                    Some(t) => self.target(i, t)?,
                    None => {
                        let s = &b.jit.set.stencils[inst.stencil as usize];
                        return Err(StepError::Other(Error::TraceEndsWithContinue {
                            stencil: s.name.to_string(),
                            instance: i,
                        }));
                    }
                },
            },
            Source::Code => (self.code_base + code_at as u64, false),
            Source::Data => (self.data_base + data_at as u64, false),
            Source::Symbol(sym) => match b.jit.symbol(sym) {
                Some(address) => (address, true),
                None => {
                    let set = b.jit.set;
                    return Err(StepError::Other(Error::UnknownSymbol {
                        symbol: set.symbols[sym as usize].to_string(),
                        stencil: set.stencils[inst.stencil as usize].name.to_string(),
                        instance: i,
                    }));
                }
            },
        })
    }

    /// The address of jump target `t` of instance `i`, and whether it is outside the trace.
    /// The entry shim is not a jump target: it sets up a native call frame.
    fn target(&self, i: usize, t: Target) -> Result<(u64, bool), StepError> {
        let b = self.b;
        match t {
            Target::Address(a) => Ok((a, true)),
            Target::Instance(id) => match self.offsets.get(id.index()) {
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
                Some(&offset) => Ok((self.code_base + offset as u64, false)),
                None => Err(StepError::Other(Error::MissingInstance {
                    stencil: b.jit.set.stencils[b.instances[i].stencil as usize]
                        .name
                        .to_string(),
                    instance: i,
                    target: id.index(),
                    count: self.offsets.len(),
                })),
            },
        }
    }

    /// Patches a direct branch to `value + addend`, through a veneer when the destination
    /// is outside the trace and out of the branch's range. `checked`: the instruction is a
    /// rel32 branch checked once (see [`Checked`]).
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
        let (slot, new) = self.veneers.slot(destination);
        let at = self.veneer_base + slot as usize * self.veneer_size;
        if new {
            (self.write_veneer)(&mut self.code[at..at + self.veneer_size], destination);
        }
        let veneer = self.code_base + at as u64;
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
        let (slot, new) = self.got.slot(value);
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

/// The destination of a branch hole with value `value` (`S + A`): x86 rel32 is relative to
/// the end of the 4-byte field, AArch64 offsets to the instruction itself.
fn branch_bias(kind: HoleKind) -> u64 {
    match kind {
        HoleKind::X86Branch32 => 4,
        _ => 0,
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

/// `dst.copy_from_slice(src)`, inline for the short lengths most stencils have: two
/// overlapping fixed-size moves (of 32 or 16 or 8 bytes) instead of a call to `memcpy`.
#[inline]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n);
    if (32..=64).contains(&n) {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else if (16..32).contains(&n) {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if (8..16).contains(&n) {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..].copy_from_slice(&src[n - 8..]);
    } else {
        dst.copy_from_slice(src);
    }
}

fn round_up64(x: u64, align: u64) -> u64 {
    (x + align - 1) & !(align - 1)
}

/// One instance's data: the stencil's initialized bytes, then its zero-fill written as zeros
/// (zero-fill is described once per set, never stored; `dst` is `data_len` bytes).
#[inline]
fn write_instance_data(s: &Stencil<'_>, dst: &mut [u8]) {
    let (init, zeros) = dst.split_at_mut(s.init_data.len());
    copy_small(init, s.init_data);
    zeros.fill(0);
}

#[cfg(test)]
mod tests {
    use super::copy_small;

    #[test]
    fn copy_small_copies_every_length_exactly() {
        let src: Vec<u8> = (1..=200u8).collect();
        for n in 0..=130 {
            // A canary byte either side shows that nothing outside `dst` is written.
            let mut out = vec![0u8; n + 2];
            copy_small(&mut out[1..n + 1], &src[..n]);
            assert_eq!(&out[1..n + 1], &src[..n], "length {n}");
            assert_eq!((out[0], out[n + 1]), (0, 0), "length {n}");
        }
    }
}
