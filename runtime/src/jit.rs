//! [`Jit`]: one stencil set, the caller's symbol table, and the arena its traces live in.

use crate::arena::{Arena, MemoryStats, TraceFacts};
use crate::icache::{FlushIcache, Hardware};
use crate::program::{self, ArchFacts, OperandStep, Programs};
use crate::trace::stitch::direct::DirectSymbols;
use crate::trace::{TraceBatch, TraceBuilder};
use crate::Error;
use cpjit_model::{HoleKind, HoleValue, Host, Section, Stencil, StencilSet};
use std::sync::{Arc, OnceLock};

/// How a [`Jit`] maps its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JitOptions {
    /// Place code near this address (within ±2 GiB on x86-64, ±128 MiB on AArch64, when
    /// free) so that calls to helpers there are direct rather than through veneers.
    /// `None`: near this crate's own code, i.e. usually near the helpers in the same binary.
    pub near: Option<u64>,
    /// The most address space (code + data) the arena may reserve; chunks are committed
    /// (made accessible) only as far as traces use them. Beyond it `finish` fails with
    /// [`Error::OutOfMemory`].
    pub reserve_bytes: usize,
    /// Size of the code part and of the data part of each arena chunk (rounded up to the
    /// page size), from 1 byte to [`JitOptions::MAX_CHUNK_BYTES`] (otherwise `Jit::new`
    /// fails with [`Error::InvalidOption`]). A trace larger than a chunk gets a chunk of its
    /// own.
    pub chunk_bytes: usize,
    /// The most address space (code + data) that *idle* chunks, which no trace uses any
    /// more, keep reserved and mapped: when freeing a trace leaves its chunk idle and the
    /// idle chunks would hold more than this, that chunk is returned to the system
    /// (unmapped; on Linux its pages of the arena's one code object freed, on macOS and
    /// Windows its own code object closed). Below it,
    /// idle chunks stay for the next traces, so that stitching and freeing in waves does not
    /// map and unmap chunks. `usize::MAX` keeps every chunk; 0 returns each one as soon as
    /// it is idle. Default: 2 MiB (one chunk of the default size, code and data: a
    /// burst's memory goes back when it ends, and one chunk stays for the next trace; a
    /// trace larger than a chunk has its own, returned when it is freed unless it fits).
    pub idle_chunk_bytes: usize,
    /// Append every trace's instances to the perf map `/tmp/perf-<pid>.map` (see
    /// [`debug::perf`](crate::debug::perf)). Off by default.
    pub perf_map: bool,
    /// Write every trace's code to the jitdump file `jit-<pid>.dump` for `perf inject
    /// --jit` (Linux). Off by default.
    pub jitdump: bool,
    /// Register every trace with GDB's JIT interface ([`debug::gdb`](crate::debug::gdb)).
    /// Off by default.
    pub gdb: bool,
    /// Keep a listing of every trace ([`Trace::listing`](crate::Trace::listing)). Off by
    /// default.
    pub listing: bool,
    /// Register unwind information for every trace (Linux, x86-64 Windows; macOS
    /// untested), built from
    /// these frame layouts, one per stencil of the set: a generated crate's `FRAMES`
    /// ([`debug::unwind`](crate::debug::unwind)), so that debuggers, `std::backtrace` and
    /// panics walk through JIT code. Off (`None`) by default.
    pub unwind: Option<&'static [crate::debug::unwind::StencilFrame<'static>]>,
    /// How finished code reaches the executable view ([`CodeWrites`]). By default no
    /// thread can write live code except the one finishing a trace, inside a write window
    /// that closes before `finish` returns: with memory protection keys where the processor
    /// and kernel have them (x86-64 Linux with `pku`), else with no writable view of code
    /// outliving the write. [`CodeWrites::WithoutKeys`], or the environment variable
    /// `CPJIT_NO_PROTECTION_KEYS=1` for every JIT of the process, forces the latter;
    /// [`Jit::protection_key`] tells which one a JIT uses.
    pub code_writes: CodeWrites,
    /// Overwrite a freed trace's code with traps, so that a stale pointer into it faults
    /// instead of running whatever is stitched there next. On by default. Off saves a
    /// write per freed trace (under [`CodeWrites::Transient`] on Linux a `pwrite`, about as
    /// long as stitching a short trace): for a client that frees about as many short traces
    /// as it stitches and never keeps a pointer into a freed one (the bytes stay executable
    /// until the next trace overwrites them, as with a JIT that frees code to the heap).
    pub trap_freed_code: bool,
}

/// How a [`Jit`] writes code into its executable memory (the crate docs' "Memory").
/// No view is ever writable and executable at once in any mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CodeWrites {
    /// Write access to code is the stitching thread's alone, and only until the write is
    /// done. On x86-64 Linux with memory protection keys (`pku` and `ospke` in
    /// `/proc/cpuinfo`): the code object is also mapped read-write (never executable) at a
    /// second address tagged with the process's protection key, which every thread's PKRU
    /// denies; the thread finishing a trace grants it to itself (`wrpkru`) for the copy and
    /// patch and denies it again before `finish` returns, on every path. Other threads, and
    /// signal handlers (which Linux runs with the initial PKRU), cannot write code
    /// meanwhile; reading code through its executable addresses stays open to every
    /// thread. No system call per trace; the alias takes as much address space (not
    /// memory) as the code. Elsewhere, or when `pkey_alloc` fails, or with
    /// `CPJIT_NO_PROTECTION_KEYS=1` in the environment: as [`CodeWrites::WithoutKeys`].
    #[default]
    Transient,
    /// No writable view of code outlives the write that needs it, and no protection key is
    /// used: on Linux a trace (or a batch) is assembled in a private buffer and written
    /// with one `pwrite` (one per 1 MiB window of a longer trace: the buffer stays that
    /// small), on macOS x86-64 and Windows through a window mapped for the write, on macOS
    /// arm64 with the thread's `MAP_JIT` write access toggled. A stray write elsewhere in
    /// the process cannot reach live code. Costs a system call per trace (per batch in a
    /// [`TraceBatch`](crate::TraceBatch)): about 0.7 µs, more than stitching a
    /// 10-instance trace takes. What [`CodeWrites::Transient`] does where keys are missing.
    WithoutKeys,
    /// Linux only (refused elsewhere with [`Error::Unsupported`]): the code object is also
    /// mapped read-write (never executable) at a second, kernel-chosen address for the
    /// arena's life, and traces are written straight through it: no system call per trace.
    /// The price: code written there is live, so a memory-safety bug that learns the
    /// alias's address can change running code. Choose it only where that is acceptable
    /// (the usual dual-mapping JIT design) and trace latency matters.
    PersistentAlias,
}

impl JitOptions {
    /// The largest [`chunk_bytes`](JitOptions::chunk_bytes): 1 GiB, so that a chunk's code
    /// and data parts (2 GiB together) stay within RIP-relative reach of each other.
    pub const MAX_CHUNK_BYTES: usize = 1 << 30;

    /// Refuses a size outside its range, naming the option, the value and the range.
    fn check(&self) -> Result<(), Error> {
        if !(1..=JitOptions::MAX_CHUNK_BYTES).contains(&self.chunk_bytes) {
            return Err(Error::InvalidOption {
                option: "JitOptions::chunk_bytes",
                value: self.chunk_bytes,
                min: 1,
                max: JitOptions::MAX_CHUNK_BYTES,
                why: "the bytes of each part, code and data, of an arena chunk; the two \
                      parts must stay within 2 GiB of each other",
            });
        }
        Ok(())
    }
}

impl Default for JitOptions {
    fn default() -> JitOptions {
        JitOptions {
            near: None,
            reserve_bytes: 256 << 20,
            chunk_bytes: 1 << 20,
            idle_chunk_bytes: 2 << 20,
            perf_map: false,
            jitdump: false,
            gdb: false,
            listing: false,
            unwind: None,
            code_writes: CodeWrites::Transient,
            trap_freed_code: true,
        }
    }
}

type Resolver<'s> = Box<dyn Fn(&str) -> Option<u64> + Send + Sync + 's>;

/// Stitches traces from one stencil set. `Send + Sync`: traces may be built from several
/// threads at once.
pub struct Jit<'s> {
    pub(crate) set: &'s StencilSet<'s>,
    resolve: Resolver<'s>,
    /// Resolved lazily, once, by index into `set.symbols` (`None`: unknown to the caller).
    symbols: Box<[OnceLock<Option<u64>>]>,
    /// The resolved symbols whose direct branches a trace presumes need no veneer.
    pub(crate) direct: DirectSymbols,
    pub(crate) arena: Arc<Arena>,
    pub(crate) flusher: Arc<dyn FlushIcache>,
    /// Each stencil's patch program, by stencil index (see [`Program`](program::Program)), and the buffer they point into.
    pub(crate) programs: Programs,
    /// The steps of every [`Quick::Operands`](crate::program::Quick) program, one flat array
    /// (each program names its range; kept out of [`Program`](program::Program), whose 192 bytes are three
    /// cache lines).
    pub(crate) operand_steps: Box<[OperandStep]>,
    /// The largest code and data alignment of the set's stencils (data at least 8, for GOT
    /// slots): every trace's blocks are aligned to them, so that a push places its
    /// instance without tracking the trace's alignment (in the generated sets all stencils
    /// share one code alignment, and data alignments are at most the arena's granule).
    pub(crate) code_align: u32,
    pub(crate) data_align: u32,
    pub(crate) facts: ArchFacts,
    /// The protection key guarding writes of this JIT's code ([`Jit::protection_key`]).
    protection_key: Option<u32>,
    pub(crate) debug: crate::debug::Options,
    /// `debug.any()`, worked out once: `finish` asks it per trace (five loads and tests).
    registers_traces: bool,
}

/// What a [`Trace`](crate::Trace) whose first instance is the entry shim knows of it
/// (through its arena, [`TraceFacts`](crate::arena::TraceFacts)).
#[derive(Clone, Debug)]
pub(crate) struct ShimFacts {
    pub name: Arc<str>,
    pub parameters: usize,
}

impl<'s> Jit<'s> {
    /// Whether finished traces are registered with debuggers or profilers (any debug
    /// option is on).
    #[inline(always)]
    pub(crate) fn registers_traces(&self) -> bool {
        self.registers_traces
    }

    /// The publish stage's hook into the debug support: registers the just-finished
    /// `trace` (built by `b`) with every facility this JIT's options enable.
    pub(crate) fn register_trace(
        &self,
        b: &TraceBuilder<'_, 's>,
        trace: &crate::Trace,
    ) -> Result<Option<Box<dyn crate::trace::Registrations>>, Error> {
        crate::debug::register(b, trace)
    }

    /// A JIT for `set` with default options; `resolve` maps external symbol names (helper
    /// functions, globals) to addresses and is asked at most once per symbol, when a trace
    /// first needs it.
    pub fn new(
        set: &'s StencilSet<'s>,
        resolve: impl Fn(&str) -> Option<u64> + Send + Sync + 's,
    ) -> Result<Jit<'s>, Error> {
        Jit::with_options(set, resolve, JitOptions::default())
    }

    /// A JIT for `set` with explicit [`JitOptions`].
    pub fn with_options(
        set: &'s StencilSet<'s>,
        resolve: impl Fn(&str) -> Option<u64> + Send + Sync + 's,
        options: JitOptions,
    ) -> Result<Jit<'s>, Error> {
        Jit::with_flusher(set, Box::new(resolve), options, Arc::new(Hardware))
    }

    pub(crate) fn with_flusher(
        set: &'s StencilSet<'s>,
        resolve: Resolver<'s>,
        options: JitOptions,
        flusher: Arc<dyn FlushIcache>,
    ) -> Result<Jit<'s>, Error> {
        validate(set)?;
        options.check()?;
        let (alias, keys) = match options.code_writes {
            CodeWrites::Transient => (false, true),
            CodeWrites::WithoutKeys => (false, false),
            CodeWrites::PersistentAlias if crate::memory::PERSISTENT_ALIAS => (true, false),
            CodeWrites::PersistentAlias => {
                return Err(Error::Unsupported {
                    option: "JitOptions::code_writes = CodeWrites::PersistentAlias",
                    reason: format!(
                        "a persistent writable alias of code is implemented on Linux only, \
                         not on {}",
                        std::env::consts::OS
                    ),
                })
            }
        };
        let near = options
            .near
            .unwrap_or(validate as fn(&StencilSet<'_>) -> Result<(), Error> as usize as u64);
        let facts = ArchFacts::of(set.arch);
        let reach = facts.reach;
        let freed_fill = options.trap_freed_code.then_some(facts.trap);
        let (programs, operand_steps) = program::compile(set);
        let object = crate::memory::code_object(alias, keys);
        let protection_key = object.key();
        let debug = crate::debug::Options::open(&options, set)?;
        Ok(Jit {
            set,
            resolve,
            symbols: set.symbols.iter().map(|_| OnceLock::new()).collect(),
            direct: DirectSymbols::of(set.stencils),
            arena: Arc::new(
                Arena::new(
                    Some((near, reach)),
                    options.chunk_bytes,
                    options.reserve_bytes,
                    object,
                    options.idle_chunk_bytes,
                )
                .with_trace_facts(TraceFacts {
                    freed_fill,
                    shim: set.shim().map(|s| ShimFacts {
                        name: s.name.into(),
                        parameters: s.entry_parameters(),
                    }),
                }),
            ),
            flusher,
            programs,
            operand_steps,
            code_align: set.stencils.iter().map(|s| s.code_align).max().unwrap_or(1),
            data_align: set.stencils.iter().map(|s| s.data_align).fold(8, u32::max),
            facts,
            protection_key,
            registers_traces: debug.any(),
            debug,
        })
    }

    /// The stencil set traces are built from.
    pub fn stencil_set(&self) -> &'s StencilSet<'s> {
        self.set
    }

    /// The index of the stencil called `name`, for [`TraceBuilder::push`]: refused with
    /// [`Error::PrunedMember`] for a member the manifest pruned (it says why and what to do
    /// instead), else [`Error::UnknownStencilName`] if the set has no such stencil.
    pub fn stencil_index(&self, name: &str) -> Result<usize, Error> {
        let set = self.set;
        set.index_of(name)
            .ok_or_else(|| match set.pruned_from(name) {
                Some(family) => Error::PrunedMember {
                    name: name.to_string(),
                    family: family.to_string(),
                },
                None => Error::UnknownStencilName {
                    name: name.to_string(),
                },
            })
    }

    /// Starts a new trace.
    pub fn trace(&self) -> TraceBuilder<'_, 's> {
        TraceBuilder::new(self)
    }

    /// Starts a batch of traces, finished together with one allocation, one write of their
    /// code and one instruction-cache flush (see [`TraceBatch`]).
    pub fn batch(&self) -> TraceBatch<'_, 's> {
        TraceBatch::new(self)
    }

    /// Bytes mapped and used by all live traces.
    pub fn memory_stats(&self) -> MemoryStats {
        self.arena.stats()
    }

    /// The memory protection key that guards writes of this JIT's code, when it writes
    /// with per-thread windows ([`CodeWrites::Transient`] on x86-64 Linux with `pku`):
    /// only a thread inside a window grants it to itself. `None`: code is written without
    /// keys ([`CodeWrites::WithoutKeys`], [`CodeWrites::PersistentAlias`], keys missing or
    /// turned off with `CPJIT_NO_PROTECTION_KEYS`). One key serves every JIT of a process.
    pub fn protection_key(&self) -> Option<u32> {
        self.protection_key
    }

    /// Symbol `index`'s address if it was resolved already and has one (no call to the
    /// resolver): for the write loop's inline forms, which leave the first use to
    /// [`symbol`](Jit::symbol).
    #[inline(always)]
    pub(crate) fn resolved(&self, index: u16) -> Option<u64> {
        self.symbols.get(index as usize).and_then(|s| *s.get()?)
    }

    /// The address of external symbol `index`, asking the resolver the first time. The
    /// resolver is the caller's code and may run during `finish`: it runs with this
    /// thread's write window closed, so that neither it nor a thread it starts can write
    /// code.
    pub(crate) fn symbol(&self, index: u16) -> Option<u64> {
        let i = index as usize;
        *self.symbols[i].get_or_init(|| {
            let address = crate::memory::closed_while(|| (self.resolve)(self.set.symbols[i]));
            self.direct.note(i, address, || self.arena.code_span());
            address
        })
    }
}

/// Checks once what the stitcher then relies on without re-checking per hole: this process
/// can run the set (the one host rule, [`Host::runs_set`]: architecture, calling convention
/// and the registers its OS reserves), and every hole lies inside its section and refers to
/// an operand, target or symbol that exists.
fn validate(set: &StencilSet<'_>) -> Result<(), Error> {
    if set.format_version != cpjit_model::format::VERSION {
        return Err(Error::StencilFormat {
            target: set.target.to_string(),
            found: set.format_version,
            expected: cpjit_model::format::VERSION,
        });
    }
    let host = Host::current();
    if !host.is_some_and(|h| h.runs_set(set)) {
        return Err(Error::HostCannotRun {
            target: set.target.to_string(),
            host: host.map_or_else(|| std::env::consts::ARCH.to_string(), |h| h.to_string()),
            who: Host::who_runs(set.arch, set.abi, set.reserved_registers).to_string(),
        });
    }
    let invalid = |stencil: &Stencil<'_>, reason: String| Error::InvalidStencil {
        stencil: stencil.name.to_string(),
        reason,
    };
    if set.nop.is_empty() {
        return Err(Error::InvalidStencil {
            stencil: "(set)".into(),
            reason: format!("target `{}` has an empty nop", set.target),
        });
    }
    if let Some(shim) = set.shim {
        if shim as usize >= set.stencils.len() {
            return Err(Error::InvalidStencil {
                stencil: "(set)".into(),
                reason: format!(
                    "shim index {shim} is past the {} stencils",
                    set.stencils.len()
                ),
            });
        }
    }
    for s in set.stencils {
        for (what, align) in [("code", s.code_align), ("data", s.data_align)] {
            if !align.is_power_of_two() || align > 4096 {
                return Err(invalid(
                    s,
                    format!("{what} alignment {align} is not a power of two ≤ 4096"),
                ));
            }
        }
        if s.code.len() > u32::MAX as usize / 2 || s.data_len > u32::MAX / 2 {
            return Err(invalid(s, "code or data larger than 2 GiB".into()));
        }
        if s.cold_len as usize > s.code.len() {
            return Err(invalid(
                s,
                format!(
                    "a cold part of {} bytes in {} bytes of code",
                    s.cold_len,
                    s.code.len()
                ),
            ));
        }
        if s.operands.len() > u16::MAX as usize || s.targets.len() > u16::MAX as usize {
            return Err(invalid(
                s,
                format!(
                    "{} operands and {} jump targets: at most {} of each",
                    s.operands.len(),
                    s.targets.len(),
                    u16::MAX
                ),
            ));
        }
        s.check_data(set)
            .map_err(|e| invalid(s, format!("data: {e}")))?;
        check_entry_parameters(set, s).map_err(|reason| invalid(s, reason))?;
        for h in s.holes {
            let len = match h.section {
                Section::Code => s.code.len(),
                Section::Data => s.data_len as usize,
            };
            if h.offset as usize + h.kind.width() > len {
                return Err(invalid(
                    s,
                    format!(
                        "{} hole at {}+{:#x} extends past the section's {len} bytes",
                        h.kind,
                        h.section.name(),
                        h.offset
                    ),
                ));
            }
            if h.kind.arch().is_some_and(|a| a != set.arch) {
                return Err(invalid(
                    s,
                    format!(
                        "{} hole at {}+{:#x} does not belong to {}",
                        h.kind,
                        h.section.name(),
                        h.offset,
                        set.arch.name()
                    ),
                ));
            }
            let (index, count) = match h.value {
                HoleValue::Operand(i) | HoleValue::OperandHigh(i) | HoleValue::OperandLow(i) => {
                    (i as usize, s.operands.len())
                }
                HoleValue::Target(i) => (i as usize, s.targets.len()),
                HoleValue::Symbol(i) => (i as usize, set.symbols.len()),
                // The cold part's address exists only where there is one.
                HoleValue::Cold => (0, usize::from(s.cold_len > 0)),
                HoleValue::Continue | HoleValue::Code | HoleValue::Data => (0, 1),
            };
            if index >= count {
                return Err(invalid(
                    s,
                    format!(
                        "hole at {}+{:#x} refers to {} but there are only {count}",
                        h.section.name(),
                        h.offset,
                        h.value
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The [`HoleKind::EntryParameters`] marker: only on the set's shim, at most once, at code
/// offset 0 with value `code`, and a count of 1 to 6 (what the toolchain accepts).
fn check_entry_parameters(set: &StencilSet<'_>, s: &Stencil<'_>) -> Result<(), String> {
    let mut markers = s
        .holes
        .iter()
        .filter(|h| h.kind == HoleKind::EntryParameters);
    let Some(h) = markers.next() else {
        return Ok(());
    };
    if set.shim().map(|shim| shim.name) != Some(s.name) {
        return Err("an EntryParameters marker on a stencil that is not the entry shim".into());
    }
    if markers.next().is_some() {
        return Err("more than one EntryParameters marker".into());
    }
    if h.section != Section::Code || h.offset != 0 || h.value != HoleValue::Code {
        return Err(format!(
            "EntryParameters marker at {}+{:#x} = {}: it must be at code+0 with value code",
            h.section.name(),
            h.offset,
            h.value
        ));
    }
    if !(1..=6).contains(&h.addend) {
        return Err(format!(
            "EntryParameters marker declares {} parameters: the shim takes 1 to 6",
            h.addend
        ));
    }
    Ok(())
}

impl std::fmt::Debug for Jit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jit")
            .field("target", &self.set.target)
            .field("memory", &self.memory_stats())
            .finish_non_exhaustive()
    }
}
