//! Making stitched code visible to profilers and debuggers, each behind a [`JitOptions`]
//! field and off by default (a disabled option costs one branch per trace):
//!
//! - [`perf`]: the perf map (`/tmp/perf-<pid>.map`, read by `perf report` and `samply`)
//!   and the jitdump file (`jit-<pid>.dump`, code bytes included, for `perf inject --jit`);
//! - [`gdb`]: the GDB JIT interface (`__jit_debug_register_code`), one in-memory ELF
//!   object per trace with a symbol per instance, unregistered when the trace is dropped;
//! - `listing`: [`Trace::listing`], the stitched bytes with instance boundaries, stencil
//!   names and every hole's value;
//! - [`unwind`]: unwind information per instance, from per-stencil frame layouts: DWARF
//!   FDEs registered with the unwinder and given to GDB, or on Windows x64 a function
//!   table registered with `RtlAddFunctionTable` (`win64`).
//!
//! Every facility names code the same way: `trace<N>:<stencil>` for an instance (its hot
//! code, and its cold part after the trace's hot code, see `Stencil::cold_len`), with `N`
//! a process-wide trace number ([`Trace::debug_id`]), plus `trace<N>:tail` for the jump to
//! the trace's continuation and `trace<N>:veneers` for its veneers.
//!
//! [`JitOptions`]: crate::JitOptions

pub mod gdb;
mod listing;
pub mod perf;
pub mod unwind;
mod win64;

use crate::jit::{Jit, JitOptions};
use crate::patch::VENEER_SIZE;
use crate::trace::{Registrations, Trace, TraceBuilder};
use crate::Error;
use cpjit_model::StencilSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which facilities a [`Jit`] feeds (from its [`JitOptions`]).
#[derive(Debug, Default)]
pub(crate) struct Options {
    pub perf_map: bool,
    pub jitdump: bool,
    pub gdb: bool,
    pub listing: bool,
    /// Each stencil's unwind programs (or why it has none), by stencil index, if unwind
    /// info is registered.
    pub unwind: Option<unwind::Compiled>,
}

impl Options {
    /// The options of `o`, after opening the process-wide output files they need, so that
    /// a path or platform problem is reported by `Jit::with_options`, not by a later trace.
    pub(crate) fn open(o: &JitOptions, set: &StencilSet<'_>) -> Result<Options, Error> {
        let options = Options {
            perf_map: o.perf_map,
            jitdump: o.jitdump,
            gdb: o.gdb,
            listing: o.listing,
            unwind: o
                .unwind
                .map(|frames| unwind::Compiled::new(set, frames))
                .transpose()?,
        };
        if options.perf_map {
            perf::open_map()?;
        }
        if options.jitdump {
            perf::open_jitdump()?;
        }
        Ok(options)
    }

    pub(crate) fn any(&self) -> bool {
        self.perf_map || self.jitdump || self.gdb || self.listing || self.unwind.is_some()
    }
}

/// What a trace keeps for the facilities it was registered with.
#[derive(Debug)]
pub(crate) struct TraceDebug {
    pub id: u64,
    pub listing: Option<String>,
    /// Marks the trace's perf map lines dropped when dropped (never read otherwise).
    #[allow(dead_code)]
    pub perf_map: Option<perf::MapEntry>,
    /// Unregisters the trace from GDB when dropped (never read otherwise).
    #[allow(dead_code)]
    pub gdb: Option<gdb::Registration>,
    /// Deregisters the trace's unwind information when dropped (after GDB's object,
    /// which shows the same bytes).
    #[allow(dead_code)]
    pub unwind: Option<unwind::Registration>,
}

impl Registrations for TraceDebug {
    fn id(&self) -> u64 {
        self.id
    }

    fn listing(&self) -> Option<&str> {
        self.listing.as_deref()
    }
}

/// A named piece of a trace's code, at its executable address: `trace<trace>:<what>`
/// (formatted only when written, so that no name is allocated per instance).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CodeSymbol<'a> {
    pub trace: u64,
    /// The stencil's name, `tail` or `veneers`.
    pub what: &'a str,
    pub start: u64,
    pub size: u64,
}

impl std::fmt::Display for CodeSymbol<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace{}:{}", self.trace, self.what)
    }
}

static NEXT_TRACE_ID: AtomicU64 = AtomicU64::new(1);

/// The hook of the publish stage: registers the just-finished `trace` (built by `b`) with
/// every facility the JIT's options enable. `Ok(None)` when all are off.
pub(crate) fn register(
    b: &TraceBuilder<'_, '_>,
    trace: &Trace,
) -> Result<Option<Box<dyn Registrations>>, Error> {
    let options = &b.jit.debug;
    if !options.any() {
        return Ok(None);
    }
    let id = NEXT_TRACE_ID.fetch_add(1, Ordering::Relaxed);
    let cold = cold_offsets(b, trace);
    let mut symbols = code_symbols(b.jit, b, trace, id);
    let cold_symbols = cold_symbols(b, trace, id, &cold);
    let ends = symbols.len();
    symbols.extend(cold_symbols);
    let perf_map = if options.perf_map {
        Some(perf::write_map(id, &symbols)?)
    } else {
        None
    };
    if options.jitdump {
        perf::write_jitdump(&symbols)?;
    }
    let unwind = match &options.unwind {
        Some(compiled) => Some(unwind::Registration::new(
            &unwind_ranges(
                b,
                (&symbols[..ends], &cold, trace.code_range().start as u64),
                &compiled.programs,
            )?,
            compiled,
        )?),
        None => None,
    };
    let gdb = options.gdb.then(|| {
        let eh_frame = unwind.as_ref().and_then(|u| u.eh_frame());
        gdb::register(b.jit.set.arch, trace, &symbols, eh_frame)
    });
    let listing = options
        .listing
        .then(|| listing::listing(b, trace, id, &cold));
    Ok(Some(Box::new(TraceDebug {
        id,
        listing,
        perf_map,
        gdb,
        unwind,
    })))
}

/// The trace's unwind ranges: one per function of each instance's stencil, one for the
/// padding after an instance (run in the entry state), and for the tail jump and veneers.
/// An error if a stencil of the trace has no frame layout.
/// `cold` is where each instance's cold part is ([`cold_offsets`], from the trace's code
/// at `base`): its functions are there.
fn unwind_ranges<'p>(
    b: &TraceBuilder<'_, '_>,
    (symbols, cold, base): (&[CodeSymbol<'_>], &[Option<u64>], u64),
    programs: &'p [unwind::StencilPrograms],
) -> Result<Vec<unwind::Range<'p>>, Error> {
    let n = b.instances.len();
    let mut ranges: Vec<unwind::Range<'p>> = Vec::with_capacity(symbols.len() + 1);
    for (i, inst) in b.instances.iter().enumerate() {
        let start = symbols[i].start;
        let functions =
            programs[inst.stencil as usize]
                .as_ref()
                .map_err(|why| Error::InvalidStencil {
                    stencil: symbols[i].what.to_string(),
                    reason: format!("no unwind information for this stencil: {why}"),
                })?;
        let hot_len = b.jit.set.stencils[inst.stencil as usize].hot_len() as u32;
        let place = |offset: u32| match cold[i] {
            Some(at) if offset >= hot_len => base + at + u64::from(offset - hot_len),
            _ => start + u64::from(offset),
        };
        ranges.extend(functions.iter().map(|f| unwind::Range {
            start: place(f.start),
            len: u64::from(f.end - f.start),
            program: &f.program,
            image_offset: f.image_offset,
        }));
        let code_end = start + symbols[i].size;
        let next = match symbols.get(i + 1) {
            Some(next) if i + 1 < n => next.start,
            _ => code_end,
        };
        if next > code_end {
            ranges.push(unwind::Range {
                start: code_end,
                len: next - code_end,
                program: &[],
                image_offset: 0,
            });
        }
    }
    ranges.extend(symbols[n..].iter().map(|s| unwind::Range {
        start: s.start,
        len: s.size,
        program: &[],
        image_offset: 0,
    }));
    Ok(ranges)
}

/// The trace code offset of each instance's cold part (`None` without one): after the hot
/// code and the tail jump, at the code alignment, one after another in instance order, each
/// at its stencil's code alignment, as `finish` laid them out.
fn cold_offsets(b: &TraceBuilder<'_, '_>, trace: &Trace) -> Vec<Option<u64>> {
    let (jit, set) = (b.jit, b.jit.set);
    let offsets = trace.instance_offsets();
    let hot_end = match (b.instances.last(), offsets.last()) {
        (Some(last), Some(&at)) => {
            let tail = if b.continuation.is_some() {
                jit.facts.tail_jump.len()
            } else {
                0
            };
            at as usize + set.stencils[last.stencil as usize].hot_len() + tail
        }
        _ => 0,
    };
    let mut at = hot_end.next_multiple_of(jit.code_align as usize) as u64;
    b.instances
        .iter()
        .map(|inst| {
            let s = &set.stencils[inst.stencil as usize];
            (s.cold_len > 0).then(|| {
                let start = at.next_multiple_of(u64::from(s.code_align));
                at = start + u64::from(s.cold_len);
                start
            })
        })
        .collect()
}

/// One symbol per cold part (named as its instance), at `cold` ([`cold_offsets`]).
fn cold_symbols<'s>(
    b: &TraceBuilder<'_, 's>,
    trace: &Trace,
    id: u64,
    cold: &[Option<u64>],
) -> Vec<CodeSymbol<'s>> {
    let base = trace.code_range().start as u64;
    b.instances
        .iter()
        .zip(cold)
        .filter_map(|(inst, at)| {
            let s = &b.jit.set.stencils[inst.stencil as usize];
            at.map(|at| CodeSymbol {
                trace: id,
                what: s.name,
                start: base + at,
                size: u64::from(s.cold_len),
            })
        })
        .collect()
}

/// One symbol per instance (its stencil's hot code, without the alignment padding before
/// the next one), then the tail jump and the veneers if the trace has them.
fn code_symbols<'s>(
    jit: &Jit<'s>,
    b: &TraceBuilder<'_, 's>,
    trace: &Trace,
    id: u64,
) -> Vec<CodeSymbol<'s>> {
    let set = jit.set;
    let base = trace.code_range().start as u64;
    let mut symbols = Vec::with_capacity(b.instances.len() + 2);
    let mut end = 0u64;
    for (inst, &offset) in b.instances.iter().zip(trace.instance_offsets()) {
        let s = &set.stencils[inst.stencil as usize];
        symbols.push(CodeSymbol {
            trace: id,
            what: s.name,
            start: base + offset as u64,
            size: s.hot_len() as u64,
        });
        end = offset as u64 + s.hot_len() as u64;
    }
    if b.continuation.is_some() {
        let size = jit.facts.tail_jump.len() as u64;
        symbols.push(CodeSymbol {
            trace: id,
            what: "tail",
            start: base + end,
            size,
        });
    }
    if trace.veneers() > 0 {
        let size = (trace.veneers() * VENEER_SIZE) as u64;
        symbols.push(CodeSymbol {
            trace: id,
            what: "veneers",
            start: trace.code_range().end as u64 - size,
            size,
        });
    }
    symbols
}

impl Trace {
    /// The process-wide number this trace's symbols carry (`trace<N>:…`), if its JIT has
    /// any debugging or profiling option on.
    pub fn debug_id(&self) -> Option<u64> {
        self.debug.as_ref().map(|d| d.id())
    }

    /// The stitched code with instance boundaries, stencil names and each hole's value (see
    /// the `listing` module), if the JIT was created with [`JitOptions::listing`].
    pub fn listing(&self) -> Option<&str> {
        self.debug.as_ref()?.listing()
    }
}
