//! JIT mode: compiles a projected trace with the copy-and-patch runtime. The entry shim
//! comes first; then one stencil instance per micro-op, in trace order, with a spill
//! instance before a micro-op where the register cache must be emptied.
//!
//! Register caching: the set's families `vm_*` (vm/templates/cached/ops.c) hold each
//! cacheable op once per entry state (0 to 3 top-of-stack values in registers), each member
//! ending in its canonical exit state. [`Backend::lower`] tracks the state through the trace
//! and picks the member entered in the current state; where an op has none, it first spills
//! to state 0 and takes the op's member for nothing cached or, without one, the uncached op
//! (calls, exits, `RETURN`, ...); a jump target (the loop head, an exit stub) is entered in
//! state 0 too, the state of the memory stack the interpreter and uncached ops see. A cached member's side exit spills before it jumps, so every exit
//! stub is entered with the whole stack in memory. [`Backend::check_cache_states`] proves
//! each lowering consistent before it is stitched.
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
//! exit stubs, and [`crate::pinning::check`] proves the protocol kept.
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

use crate::abi::{Frame, Inst, FRAME_HEADER_BYTES};
use crate::cached::CacheState;
pub use crate::cached::CachedOps;
use crate::ops;
use crate::pinning::{self, Pinning, Pins};
use crate::trace::Trace;
use cpjit_model::StencilSet;
pub use cpjit_runtime::EntryFn;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target};
use std::any::Any;
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
}

/// A lowered instance: its index in [`Lowering::instances`]. The stitched trace has the
/// entry shim before them, so that the instance it stitches is one further on
/// ([`LoweredId::instance`], the one place that knows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LoweredId(pub usize);

impl LoweredId {
    /// The id the next instance pushed onto `instances` gets.
    pub fn next(instances: &[LoweredInstance]) -> LoweredId {
        LoweredId(instances.len())
    }

    /// Its index in [`Lowering::instances`].
    pub fn index(self) -> usize {
        self.0
    }

    /// The stitched trace's instance (the entry shim is instance 0).
    pub fn instance(self) -> InstanceId {
        InstanceId::from_index(self.0 + 1)
    }

    /// The lowered instance the stitched trace's instance `index` is (`None`: the shim).
    pub fn of_instance(index: usize) -> Option<LoweredId> {
        index.checked_sub(1).map(LoweredId)
    }
}

/// As the stitched trace numbers it (the listings' `[k]`).
impl std::fmt::Display for LoweredId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.instance().index())
    }
}

/// One instance of a lowered trace (the entry shim, instance 0, is not listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoweredInstance {
    /// Index into the set's stencils.
    pub stencil: usize,
    /// The micro-op it runs; `None` for a spill, `PIN` or `UNPIN`.
    pub uop: Option<usize>,
    /// Cached values on entry and on exit, as the lowering tracked them.
    pub entry: CacheState,
    pub exit: CacheState,
    /// The local a `PIN` or `UNPIN` copies.
    pub local: Option<u64>,
    /// For a `LINK`: the `EXIT_TRACE` micro-op whose exit's pinned link slot it reads.
    pub link: Option<usize>,
}

impl LoweredInstance {
    /// Micro-op `uop` run by `stencil`, entered in state `entry` and leaving `exit`.
    pub fn uop(stencil: usize, uop: usize, entry: CacheState, exit: CacheState) -> Self {
        LoweredInstance {
            stencil,
            uop: Some(uop),
            entry,
            exit,
            local: None,
            link: None,
        }
    }

    /// A spill or `BOX`: `stencil` from state `entry` to `exit`, running no micro-op.
    pub fn glue(stencil: usize, entry: CacheState, exit: CacheState) -> Self {
        LoweredInstance {
            stencil,
            uop: None,
            entry,
            exit,
            local: None,
            link: None,
        }
    }

    /// A `PIN` or `UNPIN` (`stencil`) of local `local`, with nothing cached.
    pub fn copy(stencil: usize, local: u64) -> Self {
        LoweredInstance {
            local: Some(local),
            ..LoweredInstance::glue(stencil, CacheState::EMPTY, CacheState::EMPTY)
        }
    }

    /// The `LINK` (`stencil`) of the exit of `EXIT_TRACE` micro-op `exit_uop`.
    pub fn link(stencil: usize, exit_uop: usize) -> Self {
        LoweredInstance {
            link: Some(exit_uop),
            ..LoweredInstance::glue(stencil, CacheState::EMPTY, CacheState::EMPTY)
        }
    }
}

/// A trace lowered onto stencils, instance by instance ([`LoweredId`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lowering {
    pub instances: Vec<LoweredInstance>,
    /// The instance of each micro-op.
    pub instance_of_uop: Vec<LoweredId>,
    /// By micro-op: the instance an exit into it enters, where that is an `UNPIN` before it
    /// (an exit stub of a body with pinned locals); else its own instance.
    pub exit_entry: Vec<Option<LoweredId>>,
    /// The first `PIN` of a loop body with pinned locals, where links into the body enter.
    pub body_entry: Option<LoweredId>,
    /// The locals the loop body pins, by pinned register (empty: none).
    pub pinned: Vec<u64>,
    /// By pinned register: whether it holds its local scaled.
    pub pinned_scaled: Vec<bool>,
    /// The instance entered with the pinned registers live: a loop body's first micro-op
    /// (past its `PIN`s), or an inheriting side trace's ([`pinning::inherit`]).
    pub pinned_entry: Option<LoweredId>,
    /// Whether the pinning is inherited from the trace's parent (a side trace).
    pub inherited: bool,
}

impl Lowering {
    /// The instance an exit to micro-op `uop` jumps to.
    pub fn exit_instance(&self, uop: usize) -> LoweredId {
        self.exit_entry
            .get(uop)
            .copied()
            .flatten()
            .unwrap_or(self.instance_of_uop[uop])
    }
}

/// Where an exit's pinned link slot is, from its link slot's address (`EXIT_TRACE`'s
/// second operand): the VM keeps the two side by side ([`crate::pinning`], "Inherited
/// pinning").
pub const PINNED_LINK_OFFSET: u64 = 8;

/// Whether micro-op `op` goes on to the next instance when it does not jump or leave.
/// Every operand name of the VM's stencils (vm/templates/stencil.h).
pub const OPERAND_NAMES: [&str; 6] = [
    "ARG0",
    "ARG1",
    "LOCAL0_AT",
    "LOCAL1_AT",
    "STACK_DEPTH",
    "SHIFT_COUNT",
];

/// The value of stencil operand `name` for micro-op `u`: `ARG0` and `ARG1` as they are,
/// `LOCAL0_AT` and `LOCAL1_AT` the byte offsets from the frame of the locals they name (the
/// header, then 8 bytes per local), which the stencils use as their loads' and stores'
/// displacements, `STACK_DEPTH` and `SHIFT_COUNT` `ARG0` again (a value-stack depth, a
/// shift count, read as narrow operands); `None` for a name not in [`OPERAND_NAMES`]. The
/// runtime refuses a value outside an operand's declared range (`u16`, `u8`) when it
/// patches.
pub fn operand_value(name: &str, u: &Inst) -> Option<u64> {
    let local_at = |i: u64| i.checked_mul(8)?.checked_add(FRAME_HEADER_BYTES as u64);
    match name {
        "ARG0" => Some(u.arg0),
        "ARG1" => Some(u.arg1),
        "LOCAL0_AT" => local_at(u.arg0),
        "LOCAL1_AT" => local_at(u.arg1),
        "STACK_DEPTH" | "SHIFT_COUNT" => Some(u.arg0),
        _ => None,
    }
}

pub(crate) fn falls_through(op: u32) -> bool {
    !matches!(
        op,
        ops::op::EXIT_TRACE | ops::op::RETURN | ops::op::JUMP_TOP | ops::op::ENTER_EXECUTOR
    )
}

/// Whether op `op` on scaled ints does less than on boxed ones (no tag to extract or box):
/// the int arithmetic, compares and guards. Moving an int (a load, a constant, a store to
/// the frame) costs a shift more scaled, and shifts and masks by powers of two about the
/// same.
fn gains_from_scaled_ints(op: u32) -> bool {
    use ops::op::*;
    matches!(
        op,
        ADD_INT
            | SUB_INT
            | MUL_INT
            | ADD_TO_LOCAL_INT
            | GUARD_INT_TOS
            | GUARD_INT_NOS
            | GUARD_INT_BOTH
            | LT_INT_GUARD_TRUE
            | LT_INT_GUARD_FALSE
            | LE_INT_GUARD_TRUE
            | LE_INT_GUARD_FALSE
            | GT_INT_GUARD_TRUE
            | GT_INT_GUARD_FALSE
            | GE_INT_GUARD_TRUE
            | GE_INT_GUARD_FALSE
            | EQ_INT_GUARD_TRUE
            | EQ_INT_GUARD_FALSE
            | NE_INT_GUARD_TRUE
            | NE_INT_GUARD_FALSE
            | LT_INT_CONST_GUARD_TRUE
            | LT_INT_CONST_GUARD_FALSE
            | LE_INT_CONST_GUARD_TRUE
            | LE_INT_CONST_GUARD_FALSE
            | GT_INT_CONST_GUARD_TRUE
            | GT_INT_CONST_GUARD_FALSE
            | GE_INT_CONST_GUARD_TRUE
            | GE_INT_CONST_GUARD_FALSE
            | EQ_INT_CONST_GUARD_TRUE
            | EQ_INT_CONST_GUARD_FALSE
            | NE_INT_CONST_GUARD_TRUE
            | NE_INT_CONST_GUARD_FALSE
    )
}

/// The micro-ops some other micro-op jumps or exits to.
fn jump_targets(trace: &Trace) -> Vec<bool> {
    let mut targets = vec![false; trace.uops.len()];
    for u in &trace.uops {
        let info = ops::info(u.op);
        if info.jumps || info.exits {
            if let Some(t) = targets.get_mut(u.target as usize) {
                *t = true;
            }
        }
    }
    targets
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
        let jit = Jit::with_options(set, resolve, options)
            .map_err(|e| format!("stencil set {}: {e}", set.target))?;
        let stencils = ops::OPS.iter().map(|o| set.index_of(o.stencil)).collect();
        let cached = CachedOps::of_set(set)?;
        Ok(Backend {
            jit,
            set,
            stencils,
            cached,
            pin_locals: true,
        })
    }

    /// Whether loop bodies keep locals in pinned registers ([`crate::pinning`]; on by
    /// default): `Config::pin_locals`, `run --no-pin`.
    pub fn with_pinned_locals(mut self, on: bool) -> Backend {
        self.pin_locals = on;
        self
    }

    /// The set's register-cached ops.
    pub fn cached_ops(&self) -> &CachedOps {
        &self.cached
    }

    /// Lowers `trace` onto the set's stencils, tracking the register-cache state: each
    /// micro-op becomes the member entered in the current state where its op has one, else
    /// (scaled registers) a `BOX` into the boxed state of the same depth and the member
    /// entered there, else a spill to state 0 (if anything is cached) and the member entered
    /// with nothing cached or, if none, the uncached op. With nothing cached, a micro-op that
    /// pushes starts a run of scaled ints where every micro-op until the stack is back to
    /// nothing cached has a scaled member ([`Backend::scaled_run`]). Jump targets (the loop
    /// head, exit stubs) are entered in state 0. A loop body whose locals qualify keeps them
    /// in pinned registers ([`crate::pinning`]), scaled where the body proves them ints; if
    /// one of its micro-ops then has no member, it is lowered with them boxed, then without.
    pub fn lower(&self, trace: &Trace) -> Result<Lowering, String> {
        if self.pin_locals {
            // A side trace keeps its parent's pinned registers as they are, or none.
            if let Some(inherited) = pinning::inherit(trace, &self.cached) {
                if let Some(lowering) = self.lower_with(trace, Some(&inherited))? {
                    return Ok(lowering);
                }
            } else if let Some(pinning) = pinning::choose(trace, &self.cached) {
                let boxed = pinning.boxed();
                let tries = if boxed == pinning {
                    vec![pinning]
                } else {
                    vec![pinning, boxed]
                };
                for p in &tries {
                    if let Some(lowering) = self.lower_with(trace, Some(p))? {
                        return Ok(lowering);
                    }
                }
            }
        }
        Ok(self
            .lower_with(trace, None)?
            .expect("a lowering without pinned locals always exists"))
    }

    /// The member running micro-op `i` entered in state `entry`, with registers scaled or
    /// not: on its pinned local's register where `pinning` pins it.
    fn find_member(
        &self,
        trace: &Trace,
        pinning: Option<&Pinning>,
        i: usize,
        entry: CacheState,
        scaled: bool,
    ) -> Option<(usize, CacheState)> {
        let u = &trace.uops[i];
        match pinning.and_then(|p| p.register_of(trace, i).map(|r| (r, p.scaled[r]))) {
            Some((r, local_scaled)) => {
                self.cached
                    .pinned_member(u.op, r, local_scaled, entry, scaled)
            }
            None => self
                .cached
                .member_at_depth(u.op, entry, scaled, u.arg0)
                .or_else(|| self.cached.member_as(u.op, entry, scaled)),
        }
    }

    /// Whether micro-op `i`, entered with nothing cached, should leave its value a scaled
    /// int: every micro-op from it until nothing is cached again (or a jump target, where
    /// the lowering spills) has a scaled member for the state it is entered in, and one of
    /// them gains from it (an int op, a guard, a pinned local), not only moves an int.
    fn scaled_run(
        &self,
        trace: &Trace,
        pinning: Option<&Pinning>,
        targets: &[bool],
        i: usize,
    ) -> bool {
        let mut s = CacheState::EMPTY;
        let mut gains = false;
        for (j, &target) in targets.iter().enumerate().skip(i) {
            let boundary = target || pinning.is_some_and(|p| j == *p.body.start() || p.stubs[j]);
            if j > i && boundary {
                return gains;
            }
            let Some((_, exit)) = self.find_member(trace, pinning, j, s, true) else {
                return false;
            };
            let op = trace.uops[j].op;
            let on_scaled_local =
                pinning.is_some_and(|p| p.register_of(trace, j).is_some_and(|r| p.scaled[r]));
            gains |= on_scaled_local || gains_from_scaled_ints(op);
            if !falls_through(op) {
                return gains;
            }
            s = exit;
            if s.depth() == 0 {
                return gains;
            }
        }
        false
    }

    /// [`Backend::lower`] with the given pinned locals; `None` when a body micro-op would need
    /// an uncached stencil (it would lose the pinned registers) or a pinned local's op has no
    /// member where it is entered.
    fn lower_with(
        &self,
        trace: &Trace,
        pinning: Option<&Pinning>,
    ) -> Result<Option<Lowering>, String> {
        let targets = jump_targets(trace);
        let mut instances: Vec<LoweredInstance> = Vec::with_capacity(trace.uops.len() + 8);
        let mut instance_of_uop = Vec::with_capacity(trace.uops.len());
        let mut exit_entry = vec![None; trace.uops.len()];
        let mut body_entry = None;
        let mut pinned_entry = None;
        let mut state = CacheState::EMPTY;
        let spill = |instances: &mut Vec<LoweredInstance>, state: &mut CacheState| {
            if *state == CacheState::EMPTY {
                return Ok(());
            }
            let stencil = self.cached.spill(*state).ok_or_else(|| {
                format!(
                    "stencil set {} has no spill from state {} (families vm_spill, \
                     vm_scaled_spill)",
                    self.set.target, *state
                )
            })?;
            instances.push(LoweredInstance::glue(stencil, *state, CacheState::EMPTY));
            *state = CacheState::EMPTY;
            Ok::<(), String>(())
        };
        // PIN (or UNPIN) of every pinned register, with nothing cached.
        let copies = |instances: &mut Vec<LoweredInstance>, p: &Pinning, unpin: bool| {
            for (r, &local) in p.locals.iter().enumerate() {
                let stencil = if unpin {
                    self.cached.unpin(r, p.scaled[r])
                } else {
                    self.cached.pin(r, p.scaled[r])
                };
                let stencil = stencil.expect("pinning::choose checks PIN and UNPIN exist");
                instances.push(LoweredInstance::copy(stencil, local));
            }
        };
        for (i, u) in trace.uops.iter().enumerate() {
            if targets[i] {
                spill(&mut instances, &mut state)?;
            }
            let in_body = pinning.is_some_and(|p| p.body.contains(&i));
            if let Some(p) = pinning {
                if i == *p.body.start() {
                    spill(&mut instances, &mut state)?;
                    body_entry = Some(LoweredId::next(&instances));
                    copies(&mut instances, p, false);
                    pinned_entry = Some(LoweredId::next(&instances));
                } else if p.stubs[i] {
                    // (An inheriting side trace's last micro-op is a stub it falls into.)
                    spill(&mut instances, &mut state)?;
                    exit_entry[i] = Some(LoweredId::next(&instances));
                    // A stub that leaves the trace may enter code that keeps the registers.
                    // (Only once the VM has given the exit its link slots.)
                    let link = self.cached.link().filter(|_| u.arg1 != 0);
                    if let (ops::op::EXIT_TRACE, Some(link)) = (u.op, link) {
                        instances.push(LoweredInstance::link(link, i));
                    }
                    copies(&mut instances, p, true);
                }
            }
            let on_pinned = pinning.is_some_and(|p| p.register_of(trace, i).is_some());
            // The member for the current state; from scaled registers, the boxed state's.
            let mut member = None;
            if state.depth() > 0 {
                member = self.find_member(trace, pinning, i, state, state.is_scaled());
                if member.is_none() && state.is_scaled() {
                    if let Some((stencil, exit)) = self.cached.boxing(state) {
                        instances.push(LoweredInstance::glue(stencil, state, exit));
                        state = exit;
                        member = self.find_member(trace, pinning, i, state, false);
                    }
                }
                if member.is_none() {
                    spill(&mut instances, &mut state)?;
                }
            }
            if member.is_none() {
                let empty = CacheState::EMPTY;
                let scaled = self.find_member(trace, pinning, i, empty, true).is_some()
                    && self.scaled_run(trace, pinning, &targets, i);
                member = self.find_member(trace, pinning, i, empty, scaled);
            }
            let (stencil, entry, exit) = match member {
                Some((stencil, exit)) => (stencil, state, exit),
                None if in_body || on_pinned => return Ok(None),
                None => {
                    let stencil = self.stencils[u.op as usize].ok_or_else(|| {
                        format!(
                            "stencil set {} has no stencil {} (micro-op {i})",
                            self.set.target,
                            ops::info(u.op).stencil
                        )
                    })?;
                    (stencil, CacheState::EMPTY, CacheState::EMPTY)
                }
            };
            instance_of_uop.push(LoweredId::next(&instances));
            instances.push(LoweredInstance::uop(stencil, i, entry, exit));
            state = if falls_through(u.op) {
                exit
            } else {
                CacheState::EMPTY
            };
        }
        Ok(Some(Lowering {
            instances,
            instance_of_uop,
            exit_entry,
            body_entry,
            pinned: pinning.map(|p| p.locals.clone()).unwrap_or_default(),
            pinned_scaled: pinning.map(|p| p.scaled.clone()).unwrap_or_default(),
            pinned_entry,
            inherited: trace.inherited_pins.is_some() && pinning.is_some(),
        }))
    }

    /// Checks `lowering` of `trace` against the set's families, independently of how it was
    /// made: every instance's recorded states are its stencil's (uncached stencils are
    /// (0, 0)); each instance that falls through leaves the state the next one is entered
    /// in (depth and whether the registers are scaled); the first instance, every jump and
    /// exit target, and every uncached op are entered with nothing cached; each micro-op's
    /// stencil runs its op; the micro-ops appear in order, each once; an instance without one
    /// is a spill, a `BOX`, a `PIN`/`UNPIN` of a local or the `LINK` of an exit.
    pub fn check_cache_states(&self, trace: &Trace, lowering: &Lowering) -> Result<(), String> {
        let fail =
            |k: usize, what: String| Err(format!("lowered instance {}: {what}", LoweredId(k)));
        let name = |stencil: usize| self.set.stencils[stencil].name;
        let mut next_uop = 0;
        for (k, inst) in lowering.instances.iter().enumerate() {
            let (entry, exit) = self.cached.states_of(inst.stencil);
            if (entry, exit) != (inst.entry, inst.exit) {
                return fail(
                    k,
                    format!(
                        "recorded states ({}, {}), but stencil {} is ({}, {})",
                        inst.entry,
                        inst.exit,
                        name(inst.stencil),
                        entry,
                        exit
                    ),
                );
            }
            let before = match k {
                0 => Some(CacheState::EMPTY), // the entry shim passes nothing cached
                _ => {
                    let prev = lowering.instances[k - 1];
                    match prev.uop {
                        Some(u) if !falls_through(trace.uops[u].op) => None,
                        _ => Some(prev.exit),
                    }
                }
            };
            if let Some(before) = before.filter(|&b| b != entry) {
                return fail(
                    k,
                    format!(
                        "{} is entered in state {}, but the instance before it leaves {}",
                        name(inst.stencil),
                        entry,
                        before
                    ),
                );
            }
            if let Some(u) = inst.uop {
                if u != next_uop || lowering.instance_of_uop.get(u) != Some(&LoweredId(k)) {
                    return fail(k, format!("micro-op {u} out of order or not mapped here"));
                }
                next_uop += 1;
                let op = trace.uops[u].op;
                let runs_op = if self.cached.is_cached(inst.stencil) {
                    self.cached.op_of(inst.stencil) == Some(op)
                        && self
                            .cached
                            .depth_of(inst.stencil)
                            .is_none_or(|d| d == trace.uops[u].arg0)
                } else {
                    entry == CacheState::EMPTY && self.stencils[op as usize] == Some(inst.stencil)
                };
                if !runs_op {
                    return fail(
                        k,
                        format!(
                            "stencil {} does not run micro-op {u} ({}) from state {}",
                            name(inst.stencil),
                            ops::info(op).name,
                            entry
                        ),
                    );
                }
            } else {
                let copy = inst.local.is_some()
                    && (self.cached.pin_register_of(inst.stencil).is_some()
                        || self.cached.unpin_register_of(inst.stencil).is_some());
                let glue = self.cached.spill(entry) == Some(inst.stencil)
                    || self.cached.boxing(entry).map(|b| b.0) == Some(inst.stencil);
                // A LINK reads the pinned slot of an EXIT_TRACE's exit.
                let link = self.cached.is_link(inst.stencil)
                    && entry == CacheState::EMPTY
                    && inst.link.is_some_and(|u| {
                        trace
                            .uops
                            .get(u)
                            .is_some_and(|u| u.op == ops::op::EXIT_TRACE)
                    });
                if !copy && !glue && !link {
                    return fail(
                        k,
                        "an instance without a micro-op that is no spill, BOX, PIN, UNPIN or \
                         LINK (of an EXIT_TRACE)"
                            .into(),
                    );
                }
            }
        }
        if next_uop != trace.uops.len() {
            return Err(format!(
                "the lowering runs {next_uop} of {} micro-ops",
                trace.uops.len()
            ));
        }
        for (t, &is_target) in jump_targets(trace).iter().enumerate() {
            let k = lowering.instance_of_uop[t].index();
            if is_target && lowering.instances[k].entry != CacheState::EMPTY {
                return fail(
                    k,
                    format!("micro-op {t} is a jump or exit target entered with values cached"),
                );
            }
        }
        pinning::check(trace, lowering, &self.cached)
    }

    pub fn set(&self) -> &'static StencilSet<'static> {
        self.set
    }

    /// Stitches `trace` into executable code.
    pub fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let lowering = self.lower(trace)?;
        self.check_cache_states(trace, &lowering)
            .map_err(|e| format!("stencil set {}: {e}", self.set.target))?;
        let mut b = self.jit.trace();
        let shim = b.push_shim().map_err(|e| e.to_string())?;
        let instance = |uop_index: u32| {
            Target::Instance(lowering.instance_of_uop[uop_index as usize].instance())
        };
        let mut names = Vec::with_capacity(lowering.instances.len());
        for inst in &lowering.instances {
            let index = inst.stencil;
            let stencil = &self.set.stencils[index];
            let Some(i) = inst.uop else {
                // A spill has no operand; PIN and UNPIN name their local like LOAD does; LINK
                // reads its exit's pinned link slot, the word after the one `EXIT_TRACE`
                // reads (`EXIT_TRACE`'s second operand, [`PINNED_LINK_OFFSET`]).
                let arg0 = match inst.link {
                    Some(exit) => trace.uops[exit].arg1 + PINNED_LINK_OFFSET,
                    None => inst.local.unwrap_or(0),
                };
                let local = Inst {
                    arg0,
                    ..Inst::default()
                };
                let operands = stencil
                    .operands
                    .iter()
                    .map(|name| {
                        operand_value(name, &local).ok_or_else(|| {
                            format!("stencil {} has an unknown operand {name}", stencil.name)
                        })
                    })
                    .collect::<Result<Vec<u64>, String>>()?;
                b.push(index, &operands, &[])
                    .map_err(|e| format!("{}: {e}", stencil.name))?;
                names.push(stencil.name);
                continue;
            };
            let u = &trace.uops[i];
            let info = ops::info(u.op);
            let operands = stencil
                .operands
                .iter()
                .map(|name| {
                    operand_value(name, u).ok_or_else(|| {
                        format!("stencil {} has an unknown operand {name}", stencil.name)
                    })
                })
                .collect::<Result<Vec<u64>, String>>()?;
            let targets = stencil
                .targets
                .iter()
                .map(|name| match *name {
                    "JUMP_TARGET" => Ok(instance(u.target)),
                    "EXIT_TARGET" => Ok(Target::Instance(
                        lowering.exit_instance(u.target as usize).instance(),
                    )),
                    other => Err(format!(
                        "stencil {} has an unknown jump target {other}",
                        stencil.name
                    )),
                })
                .collect::<Result<Vec<Target>, String>>()?;
            b.push(index, &operands, &targets)
                .map_err(|e| format!("micro-op {i} ({}): {e}", info.name))?;
            names.push(
                if (inst.entry, inst.exit) == (CacheState::EMPTY, CacheState::EMPTY) {
                    info.name
                } else {
                    stencil.name
                },
            );
        }
        let compiled = b.finish().map_err(|e| e.to_string())?;
        let entry = compiled.entry_fn(shim);
        let loop_body_address = trace.loop_body_start().map(|at| {
            let entry = lowering.body_entry.unwrap_or(lowering.instance_of_uop[at]);
            compiled.entry(entry.instance()) as u64
        });
        let pinned = lowering.pinned_entry.map(|k| PinnedEntry {
            pins: Pins {
                locals: lowering.pinned.clone(),
                scaled: lowering.pinned_scaled.clone(),
            },
            address: compiled.entry(k.instance()) as u64,
            inherited: lowering.inherited,
        });
        let mut links_pinned = vec![false; trace.exit_pcs.len()];
        for exit in lowering.instances.iter().filter_map(|i| i.link) {
            if let Some(l) = links_pinned.get_mut((trace.uops[exit].arg0 & 0xffff) as usize) {
                *l = true;
            }
        }
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
    /// Micro-op names, for listings (stitched traces only).
    names: Vec<&'static str>,
    /// Where a peeled loop's body starts (stitched traces only), for links that skip the
    /// preamble ([`Trace::loop_body_entry`]).
    loop_body_address: Option<u64>,
    /// How many locals the loop body keeps in pinned registers.
    pinned_locals: usize,
    /// Where the trace is entered with its locals pinned, if it pins any.
    pinned: Option<PinnedEntry>,
    /// By exit index: whether the exit's stub starts with `LINK` (it reads the exit's
    /// pinned link slot).
    links_pinned: Vec<bool>,
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
            links_pinned: Vec::new(),
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
        self.links_pinned.get(exit).copied().unwrap_or(false)
    }

    /// Runs the trace on `frame` from its first micro-op.
    ///
    /// # Safety
    /// `frame` must be a live frame of the function the trace was built for, with `sp` its
    /// value-stack pointer.
    pub unsafe fn run(&self, frame: *mut Frame, sp: *mut u64) -> i64 {
        (self.entry)(frame as *mut core::ffi::c_void, sp)
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
    /// listings; else the machine code of each instance, in hex, with its micro-op's name
    /// (for an external compiler's trace: its name, size and addresses).
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
            let name = match LoweredId::of_instance(i) {
                Some(k) => self.names[k.index()],
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
