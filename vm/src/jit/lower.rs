//! Lowering a trace onto the set's stencils: each micro-op becomes the register-cached
//! member for the cache state it is entered in (or a spill, a `BOX`, the uncached op), with
//! the pinned registers' `PIN`s, `UNPIN`s and `LINK`s around a loop body; and the check that
//! a lowering keeps the cache states, independently of how it was made.

use super::{falls_through, Backend};
use crate::cached::{float, CacheState, Kind};
use crate::ops;
use crate::pinning::{self, FloatPins, Held, Pinning};
use crate::trace::Trace;
use cpjit_runtime::InstanceId;

mod run;
mod step;
mod tail;
mod wide;

use run::{RunEnd, RunInput};
pub(super) use step::op_flags;
use step::{Step, BOUNDARY, FALLS, KEEPS_PINS, ON_UNBOXED, PIN_POINT};
use tail::Stubs;
pub(super) use tail::TailStencils;

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
///
/// Measured and dropped (wave 36): a 24-byte record instead of 64 (the micro-op a `u32`,
/// a `PIN`'s local and a `LINK`'s exit one word told apart by a tag): the compile's
/// instructions (callgrind, `cpjit-vm compile-time`) nbody -0.20 %, calls -0.20 %, sum -0.13 %,
/// collatz -0.08 %; the lowering's time goes to its look-ups, not to these stores.
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// By pinned register: how it holds its local.
    pub pinned_held: Vec<Held>,
    /// The locals the loop body keeps in pinned float registers.
    pub pinned_floats: FloatPins,
    /// The instance entered with the pinned registers live: a loop body's first micro-op
    /// (past its `PIN`s), or an inheriting side trace's ([`pinning::inherit`]).
    pub pinned_entry: Option<LoweredId>,
    /// Whether the pinning is inherited from the trace's parent (a side trace).
    pub inherited: bool,
    /// The `EXIT_TRACE` micro-op of each `LINK`, in order (what a compiled trace's pinned
    /// links are worked out from, without a pass over every instance).
    pub links: Vec<usize>,
    /// The operand `EXIT_PINS` of the trace's whole exit stubs (`CachedOps::exit_pinned`):
    /// 16 bits per pinned register (register 0 lowest), its local's byte offset in the
    /// frame plus how it holds the local ([`Held::index`]); 0 without such stubs.
    pub exit_pins: u64,
    /// By micro-op: its row of members and flags under the pinning being lowered
    /// ([`Step`]).
    steps: Vec<Step>,
}

impl Lowering {
    /// An empty lowering whose vectors hold traces of up to `instances` instances (and as
    /// many micro-ops) without growing.
    pub fn with_capacity(instances: usize) -> Lowering {
        Lowering {
            instances: Vec::with_capacity(instances),
            instance_of_uop: Vec::with_capacity(instances),
            exit_entry: Vec::with_capacity(instances),
            steps: Vec::with_capacity(instances),
            ..Lowering::default()
        }
    }

    /// The instance an exit to micro-op `uop` jumps to.
    pub fn exit_instance(&self, uop: usize) -> LoweredId {
        self.exit_entry
            .get(uop)
            .copied()
            .flatten()
            .unwrap_or(self.instance_of_uop[uop])
    }
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
            | MUL_INT_CONST
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

/// The micro-ops some other micro-op jumps or exits to, into `targets`.
fn jump_targets(trace: &Trace, targets: &mut Vec<bool>) {
    targets.clear();
    targets.resize(trace.uops.len(), false);
    for u in &trace.uops {
        let info = ops::info(u.op);
        if info.jumps || info.exits {
            if let Some(t) = targets.get_mut(u.target as usize) {
                *t = true;
            }
        }
    }
}

impl Backend {
    /// Lowers `trace` onto the set's stencils, tracking the register-cache state: each
    /// micro-op becomes the member entered in the current state where its op has one, else
    /// (scaled registers, float slots) a `BOX` into the boxed state of the same depth and
    /// the member entered there, else a spill to state 0 (if anything is cached) and the
    /// member entered with nothing cached or, if none, the uncached op. With nothing cached,
    /// a micro-op that pushes starts a run of scaled ints or float slots where the micro-ops
    /// until the stack is back to nothing cached have such members ([`Backend::run_of`],
    /// [`crate::cached::float`]). Jump targets (the loop
    /// head, exit stubs) are entered in state 0. A loop body whose locals qualify keeps them
    /// in pinned registers ([`crate::pinning`]), scaled where the body proves them ints; if
    /// one of its micro-ops then has no member, it is lowered with them boxed, then without.
    pub fn lower(&self, trace: &Trace) -> Result<Lowering, String> {
        let mut lowering = Lowering::default();
        self.lower_into(trace, &mut lowering)?;
        Ok(lowering)
    }

    /// [`Backend::lower`] into `out`, reusing its vectors: the compile of trace after trace
    /// then allocates nothing for its lowering. Whatever `out` held is replaced.
    pub fn lower_into(&self, trace: &Trace, out: &mut Lowering) -> Result<(), String> {
        self.lower_reusing(trace, out, &mut Pinning::default())
    }

    /// [`Backend::lower_into`] deciding the pinning in `pin`, whose vectors are reused too
    /// (the compile keeps one from trace to trace): pinned, else with the pinning boxed,
    /// else unpinned.
    pub(super) fn lower_reusing(
        &self,
        trace: &Trace,
        out: &mut Lowering,
        pin: &mut Pinning,
    ) -> Result<(), String> {
        if self.pin_locals {
            // A side trace keeps its parent's pinned registers as they are, or none.
            if pinning::inherit(trace, &self.cached, pin) {
                if self.lower_with(trace, Some(pin), out)? {
                    return Ok(());
                }
            } else if pinning::choose(trace, &self.cached, pin) {
                if self.lower_with(trace, Some(pin), out)? {
                    return Ok(());
                }
                // Wide registers have members for fewer ops than scaled ones: counters held
                // wide go scaled first (accumulators keep their 64 bits), then every one.
                if pin.narrow_wide_counters() && self.lower_with(trace, Some(pin), out)? {
                    return Ok(());
                }
                if pin.narrow_wide() && self.lower_with(trace, Some(pin), out)? {
                    return Ok(());
                }
                if pin.box_all() && self.lower_with(trace, Some(pin), out)? {
                    return Ok(());
                }
                // A float local's op without a member where it is entered (a load into
                // boxed registers that gains nothing from float slots, say): keep the
                // general registers only.
                if pin.drop_floats() && self.lower_with(trace, Some(pin), out)? {
                    return Ok(());
                }
            }
        }
        let lowered = self.lower_with(trace, None, out)?;
        assert!(lowered, "a lowering without pinned locals always exists");
        Ok(())
    }

    /// The member running micro-op `step` entered in state `entry`, with registers of kind
    /// `kind`: on its pinned local's register where the pinning pins it (its row under that
    /// pinning, [`Step`]).
    #[inline(always)]
    fn find_member(
        &self,
        step: Step,
        entry: CacheState,
        kind: Kind,
    ) -> Option<(usize, CacheState)> {
        self.rows.member(step.row, entry, kind)
    }

    /// Whether micro-op `i`, entered with nothing cached, should leave its value of kind
    /// `kind` (a scaled int, a float slot): every micro-op from it until nothing is cached
    /// again (or a jump target, where the lowering spills) has a member of that kind for the
    /// state it is entered in (float slots: until the first that has none), and one of them
    /// gains from it (scaled: an int op, a guard, a pinned local; float slots: float
    /// arithmetic or a compare), not only moves a value.
    fn run_of(&self, input: RunInput<'_>, i: usize, kind: Kind) -> bool {
        let (trace, steps) = (input.trace, input.steps);
        let mut gains = false;
        let end = self.walk_run(input, i, kind, |j| {
            let op = trace.uops[j].op;
            gains |= match kind {
                Kind::Float => float::gains_from_float_slots(op),
                _ => gains_from_scaled_ints(op) || steps[j].is(ON_UNBOXED),
            };
        });
        match end {
            RunEnd::Boundary | RunEnd::Ended { .. } => gains,
            // Float slots hold the boxed values' bits: where a member is missing the
            // lowering boxes or spills them (a move or store per value), which a gain
            // before pays for.
            RunEnd::Missing => kind == Kind::Float && gains,
            RunEnd::Exhausted => false,
        }
    }

    /// The member of micro-op `i` entered with nothing cached: the one starting a run of
    /// wide ints where it pays ([`Backend::wide_run`]), of scaled ints or float slots where
    /// it pays ([`Backend::run_of`]), else the boxed one. (Kept inline: out of line, to
    /// spare the loop's registers, the compile took 1.1 to 2.3 % more instructions, wave 36.)
    fn member_from_empty(&self, input: RunInput<'_>, i: usize) -> Option<(usize, CacheState)> {
        let (empty, step) = (CacheState::EMPTY, input.steps[i]);
        if self.wide_run(input, i) {
            return self.find_member(step, empty, Kind::Wide);
        }
        for kind in [Kind::Scaled, Kind::Float] {
            // (The member, if the run is taken, is the one looked up first.)
            let member = self.find_member(step, empty, kind);
            if member.is_some() && self.run_of(input, i, kind) {
                return member;
            }
        }
        self.find_member(step, empty, Kind::Boxed)
    }

    /// [`Backend::lower`] with the given pinned locals, into `out` (its
    /// vectors reused); `false` when a body micro-op would need an uncached stencil (it
    /// would lose the pinned registers) or a pinned local's op has no member where it is
    /// entered.
    fn lower_with(
        &self,
        trace: &Trace,
        pinning: Option<&Pinning>,
        out: &mut Lowering,
    ) -> Result<bool, String> {
        let Lowering {
            instances,
            instance_of_uop,
            exit_entry,
            links,
            steps,
            exit_pins,
            ..
        } = out;
        // The exit stubs at the end are lowered by a loop of their own (`lower_tail`).
        let tail = self.tail_start(trace);
        // (One pass: the loop below and every walk over a run read one record per micro-op.)
        Step::fill(steps, self, trace, pinning, tail);
        let steps = &steps[..];
        instances.clear();
        instance_of_uop.clear();
        links.clear();
        exit_entry.clear();
        exit_entry.resize(trace.uops.len(), None);
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
        let mut stubs = Stubs {
            whole: pinning.and_then(|p| self.whole_exit_stub(p)),
            unpins: None,
        };
        *exit_pins = stubs.whole.map_or(0, |w| w.1);
        for (i, (u, &step)) in trace.uops[..tail].iter().zip(steps).enumerate() {
            if step.is(BOUNDARY) {
                spill(instances, &mut state)?;
            }
            let mut whole = None;
            if let Some(p) = pinning.filter(|_| step.is(PIN_POINT)) {
                if i == p.body_start() {
                    body_entry = Some(LoweredId::next(instances));
                    self.push_copies(p, false, instances);
                    pinned_entry = Some(LoweredId::next(instances));
                } else {
                    // An exit stub. (An inheriting side trace's last micro-op is a stub it
                    // falls into.)
                    whole = self.open_stub(p, i, u, &mut stubs, instances, links, exit_entry);
                }
            }
            // The member for the current state; from scaled registers or float slots, the
            // boxed state's.
            let mut member = whole.map(|(stencil, _)| (stencil, CacheState::EMPTY));
            if state.depth() > 0 {
                member = self.find_member(step, state, state.kind());
                if member.is_none() && state.kind() != Kind::Boxed {
                    // (BOX only where a boxed member follows: a spill stores any kind.)
                    if let Some((stencil, exit)) = self.cached.boxing(state) {
                        member = self.find_member(step, exit, Kind::Boxed);
                        if member.is_some() {
                            instances.push(LoweredInstance::glue(stencil, state, exit));
                            state = exit;
                        }
                    }
                }
                if member.is_none() {
                    spill(instances, &mut state)?;
                }
            }
            if member.is_none() {
                let input = RunInput { trace, steps };
                member = self.member_from_empty(input, i);
            }
            let (stencil, entry, exit) = match member {
                Some((stencil, exit)) => (stencil, state, exit),
                None if step.is(KEEPS_PINS) => return Ok(false),
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
            instance_of_uop.push(LoweredId::next(instances));
            instances.push(LoweredInstance::uop(stencil, i, entry, exit));
            state = if step.is(FALLS) {
                exit
            } else {
                CacheState::EMPTY
            };
        }
        if tail < trace.uops.len() {
            spill(instances, &mut state)?;
            let parts = (instances, instance_of_uop, links, exit_entry);
            self.lower_tail(trace, tail, pinning, &mut stubs, parts);
        }
        out.body_entry = body_entry;
        out.pinned_entry = pinned_entry;
        out.pinned.clear();
        out.pinned_held.clear();
        out.pinned_floats = FloatPins::default();
        if let Some(p) = pinning {
            out.pinned.extend_from_slice(p.locals());
            out.pinned_held.extend_from_slice(p.held());
            out.pinned_floats = p.pins.floats();
        }
        out.inherited = trace.inherited_pins.is_some() && pinning.is_some();
        Ok(true)
    }

    /// The stencil of a whole exit stub of `p`'s body (`LINK`, `UNPIN`s, `EXIT_TRACE`) and
    /// its operand `EXIT_PINS` ([`Lowering::exit_pins`]); `None` where the set has none, or a
    /// register holds its local in a way the stencil does not write back, or a local's
    /// offset does not fit 16 bits (the `UNPIN`s then name it, or refuse it).
    fn whole_exit_stub(&self, p: &Pinning) -> Option<(usize, u64)> {
        // (It writes back the general registers only.)
        if !p.float_locals().is_empty() {
            return None;
        }
        let operand = pinning::exit_pins(p.locals(), p.held())?;
        Some((self.cached.exit_pinned(p.held())?, operand))
    }

    /// Pushes onto `out` the `PIN` (or `UNPIN`) of every register `p` pins, general then
    /// float, with nothing cached; wide ones written back last, since boxing one may collect
    /// big ints, which finds the others in the frame.
    ///
    /// Measured and dropped: both general registers in one stencil (`PIN_PAIR`,
    /// `UNPIN_PAIR` of a family `vm_pin_pair`, 9 representations each): nbody 548 -> 526
    /// instances, compile instructions per micro-op (callgrind) nbody 572.4 -> 564.7, calls
    /// 641.6 -> 637.5, sum 676.8 -> 660.2, collatz 630.4 -> 626.3, but compile time per
    /// instance (25 alternated pairs) 1.000, 1.012, 1.019, 1.017 (simulated branch misses
    /// +7.8 % on collatz); run instructions +0.006 to +0.018 %.
    fn push_copies(&self, p: &Pinning, unpin: bool, out: &mut Vec<LoweredInstance>) {
        let registers = p.locals().iter().zip(p.held()).enumerate();
        let last = |held: Held| unpin && held == Held::Wide;
        let copy = |(r, (&local, &held)): (usize, (&u64, &Held))| {
            let stencil = if unpin {
                self.cached.unpin(r, held)
            } else {
                self.cached.pin(r, held)
            };
            let stencil = stencil.expect("pinning::choose checks PIN and UNPIN exist");
            LoweredInstance::copy(stencil, local)
        };
        for r in registers.clone().filter(|(_, (_, &h))| !last(h)) {
            out.push(copy(r));
        }
        for (q, &local) in p.float_locals().iter().enumerate() {
            let stencil = match unpin {
                true => self.cached.unpin_float(q),
                false => self.cached.pin_float(q),
            };
            let stencil = stencil.expect("pinning::choose checks PIN_FLOAT and UNPIN_FLOAT exist");
            out.push(LoweredInstance::copy(stencil, local));
        }
        for r in registers.filter(|(_, (_, &h))| last(h)) {
            out.push(copy(r));
        }
    }

    /// Checks `lowering` of `trace` against the set's families, independently of how it was
    /// made: every instance's recorded states are its stencil's (uncached stencils are
    /// (0, 0)); each instance that falls through leaves the state the next one is entered
    /// in (depth and whether the registers are scaled); the first instance, every jump and
    /// exit target, and every uncached op are entered with nothing cached; each micro-op's
    /// stencil runs its op, a cached one being the member the kit's table picks for the op
    /// in its entry state (the compile pushes it by its index); the micro-ops appear in order, each once; an instance without one
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
                        && self.kit_picks(inst.stencil)
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
                        || self.cached.unpin_register_of(inst.stencil).is_some()
                        || self.cached.pin_float_register_of(inst.stencil).is_some()
                        || self.cached.unpin_float_register_of(inst.stencil).is_some());
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
        let mut targets = Vec::new();
        jump_targets(trace, &mut targets);
        for (t, &is_target) in targets.iter().enumerate() {
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
}
