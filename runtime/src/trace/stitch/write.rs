//! Stage 3 of stitching, [`write()`]: each instance's code and data copied to its place and
//! its patch program run, through a view of the whole trace's code or, for a trace longer
//! than [`STAGE_BYTES`] staged on Linux, window by window (so that no heap copy of a huge
//! trace is made). [`Writer`] holds the trace's memory and works out each hole's value.

use super::{Scratch, Sizes};
use crate::arena::round_up;
use crate::error::try_grow;
use crate::memory::{CodeWriter, STAGE_BYTES};
use crate::patch::{self, PatchError};
use crate::program::{branch_bias, Action, Checked, Fast, Source, Step};
use crate::slots::SlotTable;
use crate::trace::{Instance, Target, Trace, View};
use crate::Error;
use cpjit_isa::x86_64 as x86;
use cpjit_model::{HoleKind, Section};

mod cold;
mod copy;
mod fast;
mod got;

use copy::{copy_code, copy_data, fill, index_of, pad_with_nops, store_offsets, write_rel32};

/// One trace's write: what it reads (its view and sizes) and what it fills (the trace's
/// memory and counts, the thread's GOT and veneer tables).
pub(super) struct Job<'a, 'v, 'j, 's> {
    pub b: &'a View<'v, 'j, 's>,
    pub layout: &'a Sizes,
    pub trace: &'a mut Trace,
    pub scratch: &'a mut Scratch,
}

/// Stage 3: copies each instance's code and data to its place and runs its patch program:
/// each hole's [`Fast`] form, or the full path when it has none or the value does not fit
/// it. The trace's code (`trace.code_len` bytes) is bytes `at..` of `writer`'s range, seen
/// through the writable view that exists only until the caller publishes it: whole, or (a
/// trace longer than [`STAGE_BYTES`] written through a staging buffer) window by window.
pub(super) fn write(
    job: Job<'_, '_, '_, '_>,
    writer: &mut CodeWriter,
    at: usize,
) -> Result<(), Error> {
    if writer.whole() {
        let code = &mut writer.bytes()[at..at + job.trace.code_len];
        write_whole(job, code)
    } else {
        write_windows(job, writer, at)
    }
}

/// [`write()`] through a view of the whole trace's code.
fn write_whole(mut job: Job<'_, '_, '_, '_>, code: &mut [u8]) -> Result<(), Error> {
    let data = job.start();
    let (b, layout, trap) = (job.b, job.layout, job.b.jit.facts.trap);
    let (code, veneers) = code.split_at_mut(layout.veneer_base());
    // Past the instances (and tail jump) and the cold parts: traps, later partly
    // overwritten by veneers.
    fill(&mut code[layout.hot_end..layout.cold_at], trap);
    fill(&mut code[layout.code_len..], trap);
    fill(veneers, trap);
    let (code, cold) = code.split_at_mut(layout.cold_at);
    let cold = &mut cold[..layout.code_len - layout.cold_at];
    let data_limit = layout.got_base();
    let (trace, scratch) = (&*job.trace, &mut *job.scratch);
    let mut w = Writer::new(b, layout, trace, 0, code, (cold, veneers), data, scratch);
    let (instances, limit) = (b.instances, layout.instances_end);
    // A trace without cold parts (the kit's straight traces) runs the loop without them.
    let ends = match layout.cold_at == layout.code_len {
        true => w.instances::<false>(instances, 0, (0, 0, 0), limit, data_limit)?,
        false => w.instances::<true>(instances, 0, (0, 0, 0), limit, data_limit)?,
    };
    w.end(layout, ends.1, 0)
}

/// [`write()`] through a staging buffer, window by window: each window's instances
/// (those starting within [`STAGE_BYTES`] of its start, at least one) are copied and
/// patched into the buffer and written out before the next. The veneers, which any
/// instance may add, are assembled beside them and written last.
fn write_windows(
    mut job: Job<'_, '_, '_, '_>,
    writer: &mut CodeWriter,
    at: usize,
) -> Result<(), Error> {
    let data = job.start();
    let (b, layout, trace) = (job.b, job.layout, &*job.trace);
    let programs = &b.jit.programs[..];
    // After the tail jump: the trap filler, the cold parts and the veneers.
    let mut after: Vec<u8> = Vec::new();
    let after_len = trace.code_len - layout.hot_end;
    try_grow(&mut after, after_len, "the trace's cold parts and veneers")?;
    after.resize(after_len, b.jit.facts.trap);
    let (cold, veneers) = after.split_at_mut(layout.veneer_base() - layout.hot_end);
    let cold = &mut cold[layout.cold_at - layout.hot_end..layout.code_len - layout.hot_end];
    let data_limit = layout.got_base();
    let (mut origin, mut data_end, mut cold_end, mut rest) = (0, 0, 0, b.instances);
    loop {
        let n = rest
            .partition_point(|i| (i.code_at as usize) < origin + STAGE_BYTES)
            .max(1);
        let last = n == rest.len();
        // A window ends where its last instance does (the padding before the next one
        // is the next window's), the last one after the tail jump.
        let end = if last {
            layout.hot_end
        } else {
            let i = &rest[n - 1];
            i.code_at as usize + programs[i.stencil as usize].code_len as usize
        };
        let code = writer.stage(at + origin, end - origin)?;
        let (c, v, d, sc) = (&mut *cold, &mut *veneers, &mut *data, &mut *job.scratch);
        let mut w = Writer::new(b, layout, trace, origin, code, (c, v), d, sc);
        let limit = layout.instances_end.min(end) - origin;
        let ends = (0, data_end, cold_end);
        (_, data_end, cold_end) =
            w.instances::<true>(&rest[..n], origin, ends, limit, data_limit)?;
        if last {
            w.end(layout, data_end, origin)?;
        }
        writer.put(at + origin, end - origin)?;
        if last {
            break;
        }
        (origin, rest) = (end, &rest[n..]);
    }
    writer.copy_to(at + layout.hot_end, &after)
}

impl Job<'_, '_, '_, '_> {
    /// What [`write()`] does before the instances: the trace's shim, fresh GOT and veneer
    /// tables; returns the trace's data.
    #[inline(always)]
    fn start<'d>(&mut self) -> &'d mut [u8] {
        let (layout, trace) = (self.layout, &mut *self.trace);
        trace.shim = self.b.is_shim(0);
        self.scratch.got.reset();
        self.scratch.veneers.reset();
        // What `copy_code` and `copy_data` rely on (the instances end before the tail jump;
        // their data before the GOT slots, which steps write as they go).
        assert!(layout.instances_end <= layout.code_len);
        assert!(layout.got_base() <= trace.data_len);
        // SAFETY: the arena gave this trace exclusive use of its data block, which is at
        // least `data_len` bytes long and mapped RW, until the trace is dropped (after the
        // write).
        unsafe { std::slice::from_raw_parts_mut(trace.block.data as *mut u8, trace.data_len) }
    }
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
    /// The trace's cold area (at [`Sizes::cold_at`]) and its run-time address: while a
    /// cold part's steps run, it is swapped with `code` (and `cold_base` with
    /// `code_base`), so that the steps patch the cold part as the instance's code.
    cold: &'a mut [u8],
    cold_base: u64,
    /// The run-time address of the current instance's other part ([`Source::Cold`]).
    other: u64,
    /// Where the current steps' hole offsets start in the stencil's code (its hot length
    /// while a cold part's steps run), for [`Writer::restore`].
    restore_at: usize,
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
        (cold, veneer_code): (&'a mut [u8], &'a mut [u8]),
        data: &'a mut [u8],
        scratch: &'a mut Scratch,
    ) -> Self {
        let jit = b.jit;
        let trace_base = trace.block.code_rx as u64;
        let code_base = trace_base + origin as u64;
        Writer {
            b,
            instances: b.instances,
            // (`trace.shim`, which `Job::start` set, instead: −11 to −23 instructions per
            // trace, but the VM's compile 0.5–2.5 % slower in 9 alternated pairs.)
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
            cold,
            cold_base: trace_base + layout.cold_at as u64,
            other: 0,
            restore_at: 0,
            veneer_code,
            veneer_rx: trace_base + layout.veneer_base() as u64,
            veneer_size: jit.facts.veneer_size,
            write_veneer: jit.facts.write_veneer,
        }
    }

    /// Copies and patches `instances` (a run of the trace's, whose code starts at
    /// `ends.0`, data at `ends.1` and cold parts at `ends.2` after the previous one's): code
    /// up to `code_limit` (relative to `origin`) in whole 16-byte blocks, data up to
    /// `data_limit`. Returns where their code, data and cold parts end. `COLD`: whether
    /// an instance may have a cold part (`false` only if none has).
    // Always inlined: for a whole trace `origin` is 0 and the loop is what it always was.
    #[inline(always)]
    fn instances<const COLD: bool>(
        &mut self,
        instances: &[Instance],
        origin: usize,
        ends: (usize, usize, usize),
        code_limit: usize,
        data_limit: usize,
    ) -> Result<(usize, usize, usize), Error> {
        let b = self.b;
        let set = b.jit.set;
        let nop = set.nop;
        let (mut code_end, mut data_end, mut cold_end) = ends;
        let programs = &b.jit.programs[..];
        let operand_steps = &b.jit.operand_steps[..];
        debug_assert!(code_limit <= self.code.len() && data_limit <= self.data.len());
        for inst in instances {
            debug_assert!((inst.stencil as usize) < programs.len());
            // SAFETY: `push` records only instances of stencils it found in `programs`.
            let p = unsafe { programs.get_unchecked(inst.stencil as usize) };
            let at = inst.code_at as usize - origin;
            let (data_at, cold_at) = if p.plain {
                // Right after the previous instance (alignment 1), no data, no cold part.
                debug_assert_eq!(at, code_end);
                (data_end, cold_end)
            } else {
                if at != code_end {
                    pad_with_nops(&mut self.code[code_end..at], nop).map_err(|reason| {
                        Error::InvalidStencil {
                            stencil: set.stencils[inst.stencil as usize].name.to_string(),
                            reason,
                        }
                    })?;
                }
                // The instance's data where its push placed it (the same computation, in
                // the same order: each at its alignment after the previous one's).
                let data_at = if p.data_len == 0 {
                    data_end
                } else {
                    let at = round_up(data_end, p.data_align as usize);
                    copy_data(self.data, data_end, at, p, data_limit);
                    data_end = at + p.data_len as usize;
                    at
                };
                // Where its cold part goes (as `push` computed it), for the hot code's
                // branches into it: only a stencil with one has holes of its address
                // (`Jit::new`).
                debug_assert!(COLD || p.cold.is_none());
                let cold_at = if !COLD || p.cold_len == 0 {
                    cold_end
                } else {
                    let cold_at = round_up(cold_end, p.cold_align as usize);
                    self.other = self.cold_base + cold_at as u64;
                    cold_at
                };
                (data_at, cold_at)
            };
            copy_code(self.code, at, p, code_limit);
            code_end = at + p.code_len as usize;
            let done = self.quick(inst, p, (at, data_at), operand_steps);
            if !done {
                self.steps(inst, &p.steps, at, data_at)?;
            }
            if let (true, Some(cold)) = (COLD, p.cold.as_deref()) {
                if cold_at != cold_end || !self.guard_exit(inst, cold, at, cold_at, data_at) {
                    self.cold_part(inst, cold, (at, cold_end, cold_at, data_at), p.hot_len)?;
                }
                cold_end = cold_at + cold.code_len as usize;
            }
        }
        Ok((code_end, data_end, cold_end))
    }

    /// What [`write()`] does after the instances (whose data ends at `data_end`): their code
    /// offsets and zeros up to the GOT, the jump to the continuation (in `code`, from `origin`).
    // (The continuation's jump out of line: −7 and −11 instructions per trace on straight-10
    // and eBPF at 10, but the VM's traces, which all continue, compiled 0.5–2.9 % slower in
    // 9 alternated pairs; dropped in wave 36.)
    fn end(&mut self, layout: &Sizes, data_end: usize, origin: usize) -> Result<(), Error> {
        let b = self.b;
        let (jit, set) = (b.jit, b.jit.set);
        let ends = (data_end, layout.offsets_at(), layout.got_base());
        store_offsets(self.data, ends, b.instances);
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
    // Out of line: the copy loop runs the commonest forms itself (`lean_step`).
    #[inline(never)]
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
            Fast::Full | Fast::Got { .. } => {}
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
                    self.restore::<2>(inst, step, code_at);
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
                self.restore_before(inst, step, code_at);
                // An operand (from outside the trace, always a value) too wide for the
                // immediate: the full path's relaxable GOT load, without its look-up of the
                // value (a 64-bit address an exit loads, for the reference VM).
                if let (Action::RelaxableGot, Section::Code) = (step.action, step.section) {
                    let place = self.code_base + offset as u64;
                    return self
                        .relaxable_got(step, offset, place, value, true)
                        .map_err(|source| StepError::Patch {
                            hole: step.hole,
                            source,
                        });
                }
            }
            Fast::Abs32 { operand, part } => {
                let value = part
                    .of(self.b.operands[inst.operands as usize + operand as usize])
                    .wrapping_add(step.addend as u64);
                let fits = (i32::MIN as i64..=u32::MAX as i64).contains(&(value as i64));
                if let (true, Some(field)) = (fits, self.code.get_mut(offset..offset + 4)) {
                    field.copy_from_slice(&(value as u32).to_le_bytes());
                    return Ok(());
                }
            }
            Fast::Check {
                operand,
                part,
                range,
            } => {
                let value = part
                    .of(self.b.operands[inst.operands as usize + operand as usize])
                    .wrapping_add(step.addend as u64);
                if range.contains(value) {
                    return Ok(());
                }
            }
        }
        self.run(i, inst, step, code_at, data_at)
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
            Source::Cold => Some(self.other),
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
                Target::Instance(_) | Target::Label(_) => None,
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
            Action::RelaxableGot => self
                .relaxable_got(step, offset, place, value, outside)
                .map_err(failed),
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

    /// Patches an x86-64 relaxable GOT load ([`Action::RelaxableGot`]) of `value` (from
    /// outside the trace if `outside`) at `offset` (run-time address `place`): to an
    /// immediate or a direct reference where the value allows it, else through a GOT slot.
    fn relaxable_got(
        &mut self,
        step: &Step,
        offset: usize,
        place: u64,
        value: u64,
        outside: bool,
    ) -> Result<(), PatchError> {
        let buf = self.section(step.section);
        let direct = value.wrapping_add(step.addend as u64);
        if let Checked::X86GotSite(site) = step.checked {
            // The site was decoded once from the stencil's bytes; only the value decides
            // between an immediate, a direct reference and the GOT slot.
            if outside && x86::relax_got_to_immediate(buf, offset, site, value) {
                return Ok(());
            }
            if x86::relax_got_to_direct(buf, offset, site, place, direct) {
                return Ok(());
            }
            return self.through_got(step, offset, place, value);
        }
        if outside && patch::relax_x86_got_load_constant(step.kind, buf, offset, value)? {
            return Ok(());
        }
        if patch::relax_x86_got_load(buf, offset, place, direct)? {
            return Ok(());
        }
        self.through_got(step, offset, place, value)
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
                Source::Continue | Source::Code | Source::Cold | Source::Data => false,
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
            // `finish` resolves every label (`resolve_labels`) or refuses the trace.
            Target::Label(_) => Err(StepError::Other(Error::UnboundLabel { jumps: 1 })),
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
