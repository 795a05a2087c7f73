//! JIT mode: compiles a projected trace with the copy-and-patch runtime. The entry shim
//! comes first; then one stencil instance per micro-op, in trace order, with a spill
//! instance before a micro-op where the register cache must be emptied.
//!
//! Register caching: the set's families `vm_*` (vm/templates/cached/ops.c) hold each
//! cacheable op once per entry state (0 to 3 top-of-stack values in registers), each member
//! ending in its canonical exit state. The kit's selection tables for those families
//! (`Family::cached`) say which member an op takes in each state; [`crate::cached`] resolves
//! the VM's ops to the kit's once per set and reads those tables into rows of members.
//! [`Backend::lower`] tracks the state through the trace (the depth as the kit does, and
//! whether the registers hold scaled ints, which op the VM asks for) and takes the member
//! the kit's table picks, which the compile pushes by its stencil index (a push of the op,
//! `TraceBuilder::push_op`, would look up again what the lowering knows: 5 % of the
//! compile); [`Backend::check_cache_states`] checks that each is the kit's pick. Where an op has none, it first spills
//! to state 0 and takes the op's member for nothing cached or, without one, the uncached op
//! (calls, exits, `RETURN`, ...); a jump target (the loop head, an exit stub) is entered in
//! state 0 too, the state of the memory stack the interpreter and uncached ops see. A cached member's side exit spills before it jumps, so every exit
//! stub is entered with the whole stack in memory. [`Backend::check_cache_states`] proves
//! each lowering consistent before it is stitched, in debug builds and wherever
//! [`Backend::with_checks`] asks (`Config::check_lowerings`: the VM's tests and differential
//! runs, in every build); a release build trusts the construction, which costs about as
//! much as the check.
//! (The lowering and its check are the submodule `lower`: [`Lowering`], instances by
//! [`LoweredId`], states by [`crate::cached::CacheState`].)
//!
//! Scaled ints ([`crate::cached`]): int ops also have members whose registers hold ints
//! times 2**16, where an add is `add; jo` and a compare `cmp; jcc`. Where nothing is cached,
//! the lowering starts a run of those when every micro-op until nothing is cached again has
//! one (and one of them gains from it), and converts in place (`BOX`) where a run meets an
//! op without one; members that push what the trace proved an int (`LOAD_INT`,
//! `CONST_INT`, `COPY_INT`) start the runs. `COPY` of an inlined callee's local has members
//! compiled for its depth.
//!
//! Pinned locals ([`crate::pinning`]): in a loop trace's body, up to two locals live in
//! pinned registers that every cached member passes on; the lowering picks the members on
//! those registers, puts `PIN`s at the body's entry and `UNPIN`s at the start of the body's
//! exit stubs, and [`crate::pinning::check`] proves the protocol kept. A stub that leaves the
//! trace (`LINK`, the `UNPIN`s, `EXIT_TRACE`) is one stencil where the set has it
//! (vm/templates/cached/exit.c): stitching costs per instance, and those were a quarter of
//! nbody's.
//!
//! The stencil set is the host's by default; `CPJIT_STENCILS=<triple>` (or
//! [`crate::Vm::with_stencils`]) selects any set compiled for this process's ABI, e.g.
//! the Apple AArch64 stencils in a Linux aarch64 process.
//!
//! Another compiler can take copy-and-patch's place ([`TraceCompiler`], installed with
//! [`crate::Config::compiler`]), e.g. the benchmark's LLVM JIT of the same stencil IR. Its
//! code must keep the stitched code's contract: entered through the C-ABI shim
//! `int64_t (*)(struct cpjit_frame *, uint64_t *)`, leaving with the same exit statuses and
//! frame fields, and reachable from other traces' link slots at a body address that takes
//! the ops' own calling convention ([`CompiledTrace::from_external`]).

mod exit_bits;
mod external;
mod lower;
mod plan;
mod rows;

use crate::abi::{Frame, Inst};
use crate::cached::CacheState;
pub use crate::cached::CachedOps;
use crate::ops;
use crate::pinning::Pins;
use crate::trace::Trace;
use cpjit_model::StencilSet;
pub use cpjit_runtime::EntryFn;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target};
pub use external::{LoweredStencil, LoweredTrace};
pub use lower::{LoweredId, LoweredInstance, Lowering};
pub use plan::{operand_value, OPERAND_NAMES};
use plan::{Jump, StencilPlan, MAX_OPERANDS, MAX_TARGETS};
use std::any::Any;
use std::cell::RefCell;
use std::fmt::Write as _;

/// A compiler of traces: copy-and-patch ([`Backend`]) or one provided from outside the VM
/// (set [`crate::Config::compiler`]).
pub trait TraceCompiler {
    /// What the compiler is, for listings and errors (e.g. `"copy-and-patch"`).
    fn name(&self) -> &str;

    /// Compiles `trace` (its `EXIT_TRACE` operands already name the executor's link slots).
    /// An error makes the VM stop tracing the function, as a failed copy-and-patch would.
    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String>;
}

impl std::fmt::Debug for dyn TraceCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TraceCompiler({})", self.name())
    }
}

/// The stencil sets linked into this binary (those whose ABI this process has).
pub fn available_sets() -> Vec<&'static StencilSet<'static>> {
    crate::stencil_sets::linked()
}

/// The set [`Backend::host`] stitches: the one `CPJIT_STENCILS` names (the test matrix sets
/// it per row), else the host's own.
pub fn selected_set() -> Result<&'static StencilSet<'static>, String> {
    match std::env::var("CPJIT_STENCILS") {
        Ok(triple) => set_for(&triple).ok_or_else(|| {
            format!(
                "CPJIT_STENCILS={triple}: no such stencil set in this binary (linked: {})",
                linked_names()
            )
        }),
        Err(_) => crate::stencil_sets::host().ok_or_else(|| {
            format!(
                "no stencil set for this host (linked: {}); run `cargo xtask build-stencils`",
                linked_names()
            )
        }),
    }
}

/// The set for `triple`, if linked.
pub fn set_for(triple: &str) -> Option<&'static StencilSet<'static>> {
    available_sets().into_iter().find(|s| s.target == triple)
}

/// A copy-and-patch compiler of traces for one stencil set.
pub struct Backend {
    jit: Jit<'static>,
    set: &'static StencilSet<'static>,
    /// Stencil index of each op (by op id), if the set has it.
    stencils: Vec<Option<usize>>,
    cached: CachedOps,
    /// Loop bodies keep locals in pinned registers ([`crate::pinning`]; on by default).
    pin_locals: bool,
    /// By stencil index: where its operands and jump targets come from, resolved from their
    /// names once, here, rather than per instance.
    plans: Vec<StencilPlan>,
    /// The cached ops' members as rows the lowering reads, one per micro-op.
    rows: rows::MemberRows,
    /// By op id: the flags the lowering's steps take from the op alone
    /// ([`lower::op_flags`]).
    op_flags: Vec<u8>,
    /// The stencils of a trace's tail of exit stubs, lowered without look-ups of members
    /// (`None`: the set gives their ops members, and the general loop lowers them).
    tail_stencils: Option<lower::TailStencils>,
    /// Whether every lowering is checked before it is stitched ([`Backend::check_cache_states`]):
    /// on in debug builds and wherever [`Backend::with_checks`] says (the VM's tests, the
    /// differential runs), off in release, where the lowering's construction is what makes
    /// its choices right.
    check: bool,
    /// The last compile's lowering and pinning, whose vectors the next one reuses.
    scratch: RefCell<Scratch>,
    /// Whether the runtime keeps listings (`JitOptions::listing`): only then does a compile
    /// name its instances for [`CompiledTrace::listing`] (a pass over the instances and an
    /// allocation, 3 % of the compile of nbody's traces, for listings rarely asked for).
    listing: bool,
}

/// A backend's vectors reused from compile to compile: no allocation per trace for its
/// lowering or its choice of pinned locals once they have grown.
#[derive(Default)]
struct Scratch {
    lowering: Lowering,
    pinning: crate::pinning::Pinning,
}

/// The instances a backend's lowering vectors hold from the start: more than the examples'
/// largest trace has (nbody's, 225 micro-ops), so that the first compiles do not grow them.
const SCRATCH_INSTANCES: usize = 512;

impl Scratch {
    fn with_capacity(instances: usize) -> Scratch {
        Scratch {
            lowering: Lowering::with_capacity(instances),
            pinning: crate::pinning::Pinning::with_capacity(instances),
        }
    }
}

/// What the kit makes ready when a backend is made ([`Jit::reserve`]): the arena's first
/// chunk (reserved, committed, its code pages written, its data touched) and the making
/// thread's stitching buffers, for a trace as large as the lowering's vectors hold
/// ([`SCRATCH_INSTANCES`] and the shim) and more code and data than the examples' largest
/// trace has (nbody's: 9.0 KiB of code). So the first compile pays for stitching alone:
/// the arena's system calls (`memfd_create`, three `mmap`s, `ftruncate`, the first
/// `pwrite`) and page faults leave its clock. Measured (callgrind, a fresh VM's compiles
/// against the throwaway trace stitched before for the same end): sum's one trace 32.0k →
/// 25.9k instructions, nbody's 429k → 401k; start-up 7.40M → 7.43M.
const RESERVATION: cpjit_runtime::Reservation = cpjit_runtime::Reservation {
    instances: SCRATCH_INSTANCES + 1,
    code_bytes: 16 << 10,
    data_bytes: 4 << 10,
};

/// Where an exit's pinned link slot is, from its link slot's address (`EXIT_TRACE`'s
/// second operand): the VM keeps the two side by side in the exit's link block
/// ([`crate::abi::ExitLink`]; [`crate::pinning`], "Inherited pinning").
pub const PINNED_LINK_OFFSET: u64 = std::mem::offset_of!(crate::abi::ExitLink, pinned) as u64;

/// Whether micro-op `op` goes on to the next instance when it does not jump or leave.
pub(crate) fn falls_through(op: u32) -> bool {
    !matches!(
        op,
        ops::op::EXIT_TRACE | ops::op::RETURN | ops::op::JUMP_TOP | ops::op::ENTER_EXECUTOR
    )
}

impl Backend {
    /// The set named by `CPJIT_STENCILS`, else the host's.
    pub fn host() -> Result<Backend, String> {
        Backend::host_with(JitOptions::default())
    }

    /// [`Backend::host`] with explicit runtime options (perf map, GDB, listings).
    pub fn host_with(options: JitOptions) -> Result<Backend, String> {
        Backend::with_options(selected_set()?, options)
    }

    pub fn new(set: &'static StencilSet<'static>) -> Result<Backend, String> {
        Backend::with_options(set, JitOptions::default())
    }

    /// A backend for `set` whose runtime has `options`.
    pub fn with_options(
        set: &'static StencilSet<'static>,
        options: JitOptions,
    ) -> Result<Backend, String> {
        // Unwind information needs every stencil's layout: refuse up front rather than
        // have every trace fail to compile (and silently stay interpreted).
        let unknown = options
            .unwind
            .into_iter()
            .flatten()
            .find_map(|f| match f.layout {
                cpjit_model::FrameLayout::Unknown(why) => Some((f.stencil, why)),
                cpjit_model::FrameLayout::Functions(_) => None,
            });
        if let Some((stencil, why)) = unknown {
            return Err(format!(
                "stencil set {}: unwind information needs frame layouts, and `{stencil}` has none: {why}",
                set.target
            ));
        }
        let listing = options.listing;
        let jit = Jit::with_options(set, resolve, options)
            .map_err(|e| format!("stencil set {}: {e}", set.target))?;
        // The code arena and this thread's stitching buffers, made at start-up rather
        // than by the first compile (see `RESERVATION`).
        jit.reserve(RESERVATION)
            .map_err(|e| format!("stencil set {}: preparing the code arena: {e}", set.target))?;
        let stencils: Vec<_> = ops::OPS.iter().map(|o| set.index_of(o.stencil)).collect();
        let cached = CachedOps::of_set(set)?;
        let plans = set
            .stencils
            .iter()
            .enumerate()
            .map(|(i, stencil)| {
                let kit_op = cached.kit_op(i);
                StencilPlan {
                    kit_op,
                    kit_entry: kit_op.map_or(0, |k| cached.states_of(i).0.kit_state(k.floats)),
                    ..StencilPlan::of(stencil)
                }
            })
            .collect();
        let rows = rows::MemberRows::of(&cached, set.stencils.len());
        let tail_stencils = lower::TailStencils::of_set(&stencils, &rows);
        let backend = Backend {
            jit,
            set,
            stencils,
            rows,
            op_flags: lower::op_flags(),
            tail_stencils,
            cached,
            pin_locals: true,
            plans,
            check: cfg!(debug_assertions),
            scratch: RefCell::new(Scratch::with_capacity(SCRATCH_INSTANCES)),
            listing,
        };
        crate::pinning::prepare();
        Ok(backend)
    }

    /// Whether every lowering is checked ([`Backend::check_cache_states`]) before it is
    /// stitched: on by default in debug builds only; `Config::check_lowerings`.
    pub fn with_checks(mut self, on: bool) -> Backend {
        self.check = on;
        self
    }

    /// Whether loop bodies keep locals in pinned registers ([`crate::pinning`]; on by
    /// default): `Config::pin_locals`, `run --no-pin`.
    pub fn with_pinned_locals(mut self, on: bool) -> Backend {
        self.pin_locals = on;
        self
    }

    /// The memory of the kit's code arena ([`Jit::memory_stats`]): chunks, bytes mapped and
    /// used, live traces.
    pub fn memory_stats(&self) -> cpjit_runtime::MemoryStats {
        self.jit.memory_stats()
    }

    /// The set's register-cached ops.
    pub fn cached_ops(&self) -> &CachedOps {
        &self.cached
    }

    pub fn set(&self) -> &'static StencilSet<'static> {
        self.set
    }

    /// Stitches `trace` into executable code.
    pub fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        // (A compile inside a compile, which nothing does, would lower into fresh vectors.)
        let mut own = None;
        let mut borrowed = self.scratch.try_borrow_mut().ok();
        let Scratch { lowering, pinning } = match borrowed.as_deref_mut() {
            Some(s) => s,
            None => own.insert(Scratch::default()),
        };
        self.lower_reusing(trace, lowering, pinning)?;
        if self.check {
            self.check_cache_states(trace, lowering)
                .map_err(|e| format!("stencil set {}: {e}", self.set.target))?;
        }
        let lowering = &*lowering;
        let mut b = self.jit.trace();
        let shim = b.push_shim().map_err(|e| e.to_string())?;
        self.push_lowering(&mut b, trace, lowering)?;
        // The listings' names, in a pass of their own: kept out of the push loop, whose
        // registers they took; none where the runtime keeps no listing.
        let names = match self.listing {
            true => self.instance_names(trace, lowering),
            false => Vec::new(),
        };
        let compiled = b.finish().map_err(|e| e.to_string())?;
        let entry = compiled.entry_fn(shim).map_err(|e| e.to_string())?;
        let (loop_body_address, pinned, links_pinned) =
            lowering.entry_points(trace, |k| compiled.entry(k.instance()) as u64);
        Ok(CompiledTrace {
            entry,
            names,
            loop_body_address,
            pinned_locals: lowering.pinned.len(),
            pinned,
            links_pinned,
            code: Code::Stitched(compiled),
        })
    }

    /// Pushes `lowering`'s instances of `trace` onto `b` (after its entry shim).
    fn push_lowering(
        &self,
        b: &mut cpjit_runtime::TraceBuilder<'_, 'static>,
        trace: &Trace,
        lowering: &Lowering,
    ) -> Result<(), String> {
        let mut operands = [0u64; MAX_OPERANDS];
        let mut jumps = [Target::Instance(InstanceId::from_index(0)); MAX_TARGETS];
        let mut glue = Inst::default();
        for inst in &lowering.instances {
            let index = inst.stencil;
            let plan = &self.plans[index];
            // A spill has no micro-op; PIN and UNPIN name their local like LOAD does; LINK
            // reads its exit's pinned link slot, the word after the one `EXIT_TRACE` reads
            // (`EXIT_TRACE`'s second operand, [`PINNED_LINK_OFFSET`]).
            let u = inst.operand_source(trace, &mut glue);
            let n_targets = match inst.uop {
                Some(_) => plan.n_targets as usize,
                None => 0,
            };
            let n_operands = plan.operands_of(u, lowering.exit_pins, &mut operands)?;
            for (target, jump) in jumps.iter_mut().zip(&plan.targets[..n_targets]) {
                *target = Target::Instance(lowering.jump_target(*jump, u).instance());
            }
            let (operands, jumps) = (&operands[..n_operands], &jumps[..n_targets]);
            // The member the lowering chose is pushed as it is. The lowering reads the
            // kit's selection tables for it (`rows`, made from `Family::cached` once per
            // set) and needs each member's exit state to go on (runs, pinned registers, the
            // depth a member is compiled for), so a push of the op would have the kit look
            // up again what the lowering already knows: 40 to 46 instructions per micro-op
            // (`Selector` row, state store, transition), 5 % of the compile. Debug builds
            // check that the kit's table picks the same member in the same state (as
            // [`Backend::check_cache_states`] does wherever the VM's checks are on).
            // (The push stays inlined: called out of line, which spared this loop's
            // spilled registers, the compile took 6.0 to 7.2 % more instructions, wave 36.)
            debug_assert!(
                self.kit_picks(index),
                "{}: the kit picks another member than the lowering",
                plan.name
            );
            let pushed = b.push(index, operands, jumps);
            if let Err(e) = pushed {
                return Err(match inst.uop {
                    Some(i) => format!("micro-op {i} ({}): {e}", ops::info(u.op).name),
                    None => format!("{}: {e}", plan.name),
                });
            }
        }
        Ok(())
    }

    /// Whether `stencil` is what the kit's selection table picks for its op in its entry
    /// state (as `TraceBuilder::push_op` would push it); true for an uncached stencil.
    fn kit_picks(&self, stencil: usize) -> bool {
        let plan = &self.plans[stencil];
        plan.kit_op.is_none_or(|k| {
            let table = self.cached.selectors()[k.family as usize].table();
            table.transition(k.op, plan.kit_entry).member as usize == stencil
        })
    }

    /// Each lowered instance's name for listings: its micro-op's where it runs one with
    /// nothing cached, else its stencil's.
    fn instance_names(&self, trace: &Trace, lowering: &Lowering) -> Vec<&'static str> {
        lowering
            .instances
            .iter()
            .map(|inst| match inst.uop {
                Some(i) if (inst.entry, inst.exit) == (CacheState::EMPTY, CacheState::EMPTY) => {
                    ops::info(trace.uops[i].op).name
                }
                _ => self.plans[inst.stencil].name,
            })
            .collect()
    }
}

impl TraceCompiler for Backend {
    fn name(&self) -> &str {
        "copy-and-patch"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        Backend::compile(self, trace)
    }
}

fn linked_names() -> String {
    let names: Vec<&str> = available_sets().iter().map(|s| s.target).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Helper addresses for the stencils' external symbols.
fn resolve(name: &str) -> Option<u64> {
    crate::helpers::symbols()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, a)| a as u64)
}

/// A trace in executable memory.
pub struct CompiledTrace {
    entry: EntryFn,
    /// Micro-op names, for listings (stitched traces of a backend that keeps listings).
    names: Vec<&'static str>,
    /// Where a peeled loop's body starts (stitched traces only), for links that skip the
    /// preamble ([`Trace::loop_body_entry`]).
    loop_body_address: Option<u64>,
    /// How many locals the loop body keeps in pinned registers.
    pinned_locals: usize,
    /// Where the trace is entered with its locals pinned, if it pins any.
    pinned: Option<PinnedEntry>,
    /// The exits whose stub starts with `LINK` (it reads the exit's pinned link slot).
    links_pinned: exit_bits::ExitBits,
    code: Code,
}

/// Where a trace with pinned locals is entered with them live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedEntry {
    /// The locals and how they are held there.
    pub pins: Pins,
    /// The code address.
    pub address: u64,
    /// A side trace's first micro-op (its pinning inherited from its parent's exit), or
    /// else a loop body's first micro-op past its `PIN`s.
    pub inherited: bool,
}

/// Where a compiled trace's code lives.
enum Code {
    /// Stitched by copy-and-patch; the arena block is freed with it.
    Stitched(cpjit_runtime::Trace),
    /// Compiled by another [`TraceCompiler`]; `owner` keeps the code mapped.
    External {
        body_address: u64,
        code_bytes: usize,
        compiler: String,
        _owner: Box<dyn Any>,
    },
}

impl CompiledTrace {
    /// A trace compiled outside the VM, from its entry points and whatever keeps its code
    /// alive (`owner` is dropped with the trace, after the VM stopped using it).
    ///
    /// `compiler` names it in listings; `code_bytes` is its size as far as known (0 if not).
    ///
    /// # Safety
    /// - `entry` must be the trace's C-ABI shim: called with a live frame and its value-stack
    ///   pointer, it runs the trace's micro-ops from the first one and returns an exit status
    ///   (`EXIT_SIDE`, `EXIT_RETURN`, `EXIT_ERROR`) with the frame fields set exactly as the
    ///   ops of `vm/templates/ops.def` set them.
    /// - `body_address` must be the first micro-op's code, callable with the ops' calling
    ///   convention (`CPJIT_CC`, arguments `frame`, `sp`): other traces' `EXIT_TRACE` tail-call
    ///   it through their link slots.
    /// - The code must stay executable, unchanged, for as long as `owner` lives.
    pub unsafe fn from_external(
        compiler: &str,
        entry: EntryFn,
        body_address: u64,
        code_bytes: usize,
        owner: Box<dyn Any>,
    ) -> CompiledTrace {
        CompiledTrace {
            entry,
            names: Vec::new(),
            loop_body_address: None,
            pinned_locals: 0,
            pinned: None,
            links_pinned: exit_bits::ExitBits::default(),
            code: Code::External {
                body_address,
                code_bytes,
                compiler: compiler.to_string(),
                _owner: owner,
            },
        }
    }

    /// Where the trace is entered with its pinned locals live, and which they are.
    pub fn pinned_entry(&self) -> Option<&PinnedEntry> {
        self.pinned.as_ref()
    }

    /// Whether exit `exit`'s stub enters the exit's pinned link slot with the pinned
    /// registers live, when the VM fills it.
    pub fn links_pinned(&self, exit: usize) -> bool {
        self.links_pinned.contains(exit)
    }

    /// Runs the trace on `frame` from its first micro-op.
    ///
    /// # Safety
    /// `frame` must be a live frame of the function the trace was built for, with `sp` its
    /// value-stack pointer.
    pub unsafe fn run(&self, frame: *mut Frame, sp: *mut u64) -> i64 {
        // SAFETY: the caller upholds this function's # Safety contract.
        unsafe { (self.entry)(frame as *mut core::ffi::c_void, sp) }
    }

    /// The C-ABI entry shim (what [`CompiledTrace::run`] calls).
    pub fn entry(&self) -> EntryFn {
        self.entry
    }

    /// The address of the first micro-op (after the entry shim), where links jump to.
    pub fn body_address(&self) -> u64 {
        match &self.code {
            Code::Stitched(trace) => trace.entry(InstanceId::from_index(1)) as u64,
            Code::External { body_address, .. } => *body_address,
        }
    }

    /// The address of a peeled loop's body (copy-and-patch code only), which takes the
    /// ops' calling convention with nothing cached, like [`CompiledTrace::body_address`].
    pub fn loop_body_address(&self) -> Option<u64> {
        self.loop_body_address
    }

    /// How many locals the loop body keeps in pinned registers ([`crate::pinning`]).
    pub fn pinned_locals(&self) -> usize {
        self.pinned_locals
    }

    pub fn code_bytes(&self) -> usize {
        match &self.code {
            Code::Stitched(trace) => trace.code_bytes().len(),
            Code::External { code_bytes, .. } => *code_bytes,
        }
    }

    /// The runtime's listing of the stitched code ([`cpjit_runtime::Trace::listing`]:
    /// instance boundaries, stencil names, every hole's value) when the backend keeps
    /// listings; else the machine code of each instance, in hex (for an external
    /// compiler's trace: its name, size and addresses).
    pub fn listing(&self) -> String {
        let trace = match &self.code {
            Code::Stitched(trace) => trace,
            Code::External {
                body_address,
                code_bytes,
                compiler,
                ..
            } => {
                return format!(
                    "  machine code: {code_bytes} bytes by {compiler}, entry {:#x}, body {body_address:#x}\n",
                    self.entry as usize
                )
            }
        };
        if let Some(listing) = trace.listing() {
            let mut s = String::with_capacity(listing.len() + 64 * self.names.len());
            write!(
                s,
                "  machine code: {} bytes; micro-ops by instance:",
                trace.code_bytes().len()
            )
            .unwrap();
            for (i, name) in self.names.iter().enumerate() {
                write!(s, " [{}] {name}", LoweredId(i)).unwrap();
            }
            s.push('\n');
            s.push_str(listing);
            return s;
        }
        let code = trace.code_bytes();
        let offsets = trace.instance_offsets();
        let mut s = format!("  machine code: {} bytes\n", code.len());
        for (i, &start) in offsets.iter().enumerate() {
            let end = offsets.get(i + 1).map_or(code.len(), |&e| e as usize);
            // (Names are kept with the runtime's listings only.)
            let name = match LoweredId::of_instance(i) {
                Some(k) => self.names.get(k.index()).copied().unwrap_or(""),
                None => "vm_entry",
            };
            write!(s, "  {start:6x}  {name:<24}").unwrap();
            for b in &code[start as usize..end.max(start as usize)] {
                write!(s, " {b:02x}").unwrap();
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Config, Mode, Vm};

    /// The backend has the kit make its code arena ready when it is made (start-up,
    /// [`RESERVATION`]), so that no compile pays for it: the first trace goes into the
    /// chunk and the pages that exist already.
    #[test]
    fn the_code_arena_is_mapped_before_the_first_compile() {
        let backend = Backend::host().unwrap();
        let made = backend.memory_stats();
        assert_eq!((made.chunks, made.traces), (1, 0), "{made:?}");
        assert!(made.code_mapped > 0, "{made:?}");
        let program = parse(include_str!("../examples/sum.vm")).unwrap();
        let config = Config {
            mode: Mode::Jit,
            ..Config::default()
        };
        let vm = Vm::new(program, config).unwrap();
        vm.run().unwrap();
        let traces = vm.traces();
        assert_eq!(traces.len(), 1, "sum.vm compiles one loop trace");
        let compiled = backend.compile(&traces[0]).unwrap();
        let after = backend.memory_stats();
        assert_eq!((after.chunks, after.traces), (1, 1), "{after:?}");
        assert_eq!(
            (after.code_mapped, after.data_mapped),
            (made.code_mapped, made.data_mapped),
            "{after:?}"
        );
        drop(compiled);
    }
}
