//! JIT mode: compiles a projected trace with the copy-and-patch runtime. The entry shim
//! comes first; then one stencil instance per micro-op, in trace order, with a spill
//! instance before a micro-op where the register cache must be emptied.
//!
//! Register caching: the set's families `vm_*` (templates/vm/cached/ops.c) hold each
//! cacheable op once per entry state (0 to 3 top-of-stack values in registers), each member
//! ending in its canonical exit state. [`Backend::lower`] tracks the state through the trace
//! and picks the member entered in the current state; where an op has none, it first spills
//! to state 0 and takes the op's member for nothing cached or, without one, the uncached op
//! (calls, exits, `RETURN`, ...); a jump target (the loop head, an exit stub) is entered in
//! state 0 too, the state of the memory stack the interpreter and uncached ops see. A cached member's side exit spills before it jumps, so every exit
//! stub is entered with the whole stack in memory. [`Backend::check_cache_states`] proves
//! each lowering consistent before it is stitched.
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
use crate::ops;
use crate::pinning::{self, Pinning, PIN_REGS};
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

/// Cache states: how many top-of-stack values are in registers (cpjit.h's
/// `CPJIT_CACHE_REGS` is 3).
const STATES: usize = 4;

/// By entry state: a member's stencil index and exit state.
type ByEntryState = [Option<(usize, u8)>; STATES];

/// The register-cached members of the VM's ops in one set: the families whose name starts
/// with `vm_` (manifest.toml), with parameters `IN` and `OUT` (the cache state on entry and
/// exit) and ops of `ops.def` (or `SPILL`) as elements; and the members on pinned locals
/// (parameters `IN`, `OUT`, `PINNED`), `PIN` and `UNPIN` ([`crate::pinning`]).
#[derive(Clone, Debug, Default)]
pub struct CachedOps {
    /// By op id, by entry state: the member's stencil index and exit state.
    members: Vec<ByEntryState>,
    /// By entry state: the stencil that spills that many cached values to memory.
    spills: [Option<usize>; STATES],
    /// By op id, by pinned register, by entry state: the member that runs the op on the
    /// local in that register (families `vm_pinned_*`) and its exit state.
    pinned: Vec<[ByEntryState; PIN_REGS]>,
    /// By pinned register: the `PIN` and `UNPIN` stencils (family `vm_pin`).
    pins: [Option<usize>; PIN_REGS],
    unpins: [Option<usize>; PIN_REGS],
    /// By stencil index: the pinned register of a member on a pinned local.
    pinned_register: std::collections::HashMap<usize, usize>,
    /// (entry, exit) state of every cached stencil, by stencil index.
    states: std::collections::HashMap<usize, (u8, u8)>,
}

impl CachedOps {
    /// Reads the families of `set`; a set without them has no cached ops (every trace then
    /// stays in state 0).
    pub fn of_set(set: &'static StencilSet<'static>) -> Result<CachedOps, String> {
        let mut out = CachedOps {
            members: vec![[None; STATES]; ops::OPS.len()],
            pinned: vec![[[None; STATES]; PIN_REGS]; ops::OPS.len()],
            ..CachedOps::default()
        };
        for family in cpjit_stencils::families(set)
            .iter()
            .filter(|f| f.name.starts_with("vm_"))
        {
            let at = format!("stencil set {}: family {}", set.target, family.name);
            let names: Vec<&str> = family.params.iter().map(|p| p.name).collect();
            let pinned_family = match names[..] {
                ["IN", "OUT"] => false,
                ["IN", "OUT", "PINNED"] => true,
                _ => {
                    return Err(format!(
                        "{at}: parameters {names:?}, expected the cache states [\"IN\", \"OUT\"] \
                         (and \"PINNED\", a pinned register, for a family on pinned locals)"
                    ))
                }
            };
            let registers = if pinned_family {
                family.params[2].values.len()
            } else {
                1
            };
            let state = |p: usize, v: usize| -> Result<u8, String> {
                let text = family.params[p].values[v];
                text.parse::<u8>()
                    .ok()
                    .filter(|&s| (s as usize) < STATES)
                    .ok_or_else(|| format!("{at}: cache state `{text}` is not 0 to 3"))
            };
            for (e, element) in family.elements.iter().enumerate() {
                for (p, i) in (0..registers)
                    .flat_map(|p| (0..family.params[0].values.len()).map(move |i| (p, i)))
                {
                    let entry = state(0, i)?;
                    let register = if pinned_family {
                        let text = family.params[2].values[p];
                        Some(
                            text.parse::<usize>()
                                .ok()
                                .filter(|&r| r < PIN_REGS)
                                .ok_or_else(|| {
                                    format!(
                                        "{at}: pinned register `{text}` is not 0 to {}",
                                        PIN_REGS - 1
                                    )
                                })?,
                        )
                    } else {
                        None
                    };
                    let mut found = None;
                    for o in 0..family.params[1].values.len() {
                        let values = [i, o, p];
                        let values = if pinned_family {
                            &values[..]
                        } else {
                            &values[..2]
                        };
                        if let Some(stencil) = family.stencil(e, values) {
                            if found.is_some() {
                                return Err(format!(
                                    "{at}: {element} has more than one member entered with \
                                     {entry} cached values (one exit state per entry state)"
                                ));
                            }
                            found = Some((stencil, state(1, o)?));
                        }
                    }
                    let Some((stencil, exit)) = found else {
                        continue;
                    };
                    out.states.insert(stencil, (entry, exit));
                    if let Some(r) = register {
                        match *element {
                            "PIN" | "UNPIN" if (entry, exit) == (0, 0) => {
                                let slot = if *element == "PIN" {
                                    &mut out.pins[r]
                                } else {
                                    &mut out.unpins[r]
                                };
                                *slot = Some(stencil);
                            }
                            "PIN" | "UNPIN" => {
                                return Err(format!(
                                    "{at}: {element} of register {r} from {entry} cached values \
                                     (PIN and UNPIN run with nothing cached)"
                                ))
                            }
                            _ => {
                                let op = ops::by_name(element)
                                    .filter(|&op| pinning::runs_on_a_pinned_local(op))
                                    .ok_or_else(|| {
                                        format!(
                                            "{at}: element {element} is not a VM op that runs on \
                                             a pinned local"
                                        )
                                    })?;
                                out.pinned[op as usize][r][entry as usize] = Some((stencil, exit));
                                out.pinned_register.insert(stencil, r);
                            }
                        }
                        continue;
                    }
                    if *element == "SPILL" {
                        if exit != 0 {
                            return Err(format!("{at}: SPILL from {entry} ends in {exit}, not 0"));
                        }
                        out.spills[entry as usize] = Some(stencil);
                    } else {
                        let op = ops::by_name(element)
                            .ok_or_else(|| format!("{at}: element {element} is not a VM op"))?;
                        out.members[op as usize][entry as usize] = Some((stencil, exit));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The member of op `op` entered in state `entry`: its stencil and exit state.
    pub fn member(&self, op: u32, entry: u8) -> Option<(usize, u8)> {
        self.members.get(op as usize)?[entry as usize]
    }

    /// The (entry, exit) state of stencil `stencil`: (0, 0) for an uncached one.
    pub fn states_of(&self, stencil: usize) -> (u8, u8) {
        self.states.get(&stencil).copied().unwrap_or((0, 0))
    }

    /// Whether `stencil` is a register-cached member (it passes the pinned registers on).
    pub fn is_cached(&self, stencil: usize) -> bool {
        self.states.contains_key(&stencil)
    }

    /// The member of op `op` on the local in pinned register `register`, entered in state
    /// `entry`: its stencil and exit state.
    pub fn pinned_member(&self, op: u32, register: usize, entry: u8) -> Option<(usize, u8)> {
        self.pinned.get(op as usize)?.get(register)?[entry as usize]
    }

    /// The pinned register a member on a pinned local runs on.
    pub fn pinned_register_of(&self, stencil: usize) -> Option<usize> {
        self.pinned_register.get(&stencil).copied()
    }

    /// The stencil that loads pinned register `register` from its local.
    pub fn pin(&self, register: usize) -> Option<usize> {
        *self.pins.get(register)?
    }

    /// The stencil that writes pinned register `register` back to its local.
    pub fn unpin(&self, register: usize) -> Option<usize> {
        *self.unpins.get(register)?
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
    pub entry: u8,
    pub exit: u8,
    /// The local a `PIN` or `UNPIN` copies.
    pub local: Option<u64>,
}

/// A trace lowered onto stencils: instance `k + 1` is `instances[k]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lowering {
    pub instances: Vec<LoweredInstance>,
    /// The instance (index into the stitched trace, the shim being 0) of each micro-op.
    pub instance_of_uop: Vec<usize>,
    /// By micro-op: the instance an exit into it enters, where that is an `UNPIN` before it
    /// (an exit stub of a body with pinned locals); else its own instance.
    pub exit_entry: Vec<Option<usize>>,
    /// The first `PIN` of a loop body with pinned locals, where links into the body enter.
    pub body_entry: Option<usize>,
    /// The locals the loop body pins, by pinned register (empty: none).
    pub pinned: Vec<u64>,
}

impl Lowering {
    /// The instance an exit to micro-op `uop` jumps to.
    pub fn exit_instance(&self, uop: usize) -> usize {
        self.exit_entry
            .get(uop)
            .copied()
            .flatten()
            .unwrap_or(self.instance_of_uop[uop])
    }
}

/// Whether micro-op `op` goes on to the next instance when it does not jump or leave.
/// Every operand name of the VM's stencils (templates/vm/stencil.h).
pub const OPERAND_NAMES: [&str; 5] = ["ARG0", "ARG1", "LOCAL0_AT", "LOCAL1_AT", "STACK_DEPTH"];

/// The value of stencil operand `name` for micro-op `u`: `ARG0` and `ARG1` as they are,
/// `LOCAL0_AT` and `LOCAL1_AT` the byte offsets from the frame of the locals they name (the
/// header, then 8 bytes per local), which the stencils use as their loads' and stores'
/// displacements, `STACK_DEPTH` `ARG0` again (a value-stack depth, read as a narrow
/// operand); `None` for a name not in [`OPERAND_NAMES`]. The runtime refuses an offset
/// outside the operands' declared range (`u16`) when it patches.
pub fn operand_value(name: &str, u: &Inst) -> Option<u64> {
    let local_at = |i: u64| i.checked_mul(8)?.checked_add(FRAME_HEADER_BYTES as u64);
    match name {
        "ARG0" => Some(u.arg0),
        "ARG1" => Some(u.arg1),
        "LOCAL0_AT" => local_at(u.arg0),
        "LOCAL1_AT" => local_at(u.arg1),
        "STACK_DEPTH" => Some(u.arg0),
        _ => None,
    }
}

pub(crate) fn falls_through(op: u32) -> bool {
    !matches!(
        op,
        ops::op::EXIT_TRACE | ops::op::RETURN | ops::op::JUMP_TOP | ops::op::ENTER_EXECUTOR
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
    /// a spill to state 0 (if anything is cached) and the member entered with nothing cached
    /// or, if none, the uncached op. Jump targets (the loop head, exit stubs) are entered in
    /// state 0. A loop body whose locals qualify keeps them in pinned registers
    /// ([`crate::pinning`]); if one of its micro-ops has no cached stencil, it is lowered
    /// without.
    pub fn lower(&self, trace: &Trace) -> Result<Lowering, String> {
        if self.pin_locals {
            if let Some(pinning) = pinning::choose(trace, &self.cached) {
                if let Some(lowering) = self.lower_with(trace, Some(&pinning))? {
                    return Ok(lowering);
                }
            }
        }
        Ok(self
            .lower_with(trace, None)?
            .expect("a lowering without pinned locals always exists"))
    }

    /// [`Backend::lower`] with the given pinned locals; `None` when a body micro-op would need
    /// an uncached stencil (it would lose the pinned registers).
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
        let mut state = 0u8;
        let spill = |instances: &mut Vec<LoweredInstance>, state: &mut u8| {
            if *state == 0 {
                return Ok(());
            }
            let stencil = self.cached.spills[*state as usize].ok_or_else(|| {
                format!(
                    "stencil set {} has no spill from {} cached values (family vm_spill)",
                    self.set.target, state
                )
            })?;
            instances.push(LoweredInstance {
                stencil,
                uop: None,
                entry: *state,
                exit: 0,
                local: None,
            });
            *state = 0;
            Ok::<(), String>(())
        };
        // PIN (or UNPIN) of every pinned register, with nothing cached.
        let copies = |instances: &mut Vec<LoweredInstance>, p: &Pinning, unpin: bool| {
            for (r, &local) in p.locals.iter().enumerate() {
                let stencil = if unpin {
                    self.cached.unpin(r)
                } else {
                    self.cached.pin(r)
                };
                instances.push(LoweredInstance {
                    stencil: stencil.expect("pinning::choose checks PIN and UNPIN exist"),
                    uop: None,
                    entry: 0,
                    exit: 0,
                    local: Some(local),
                });
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
                    body_entry = Some(instances.len() + 1);
                    copies(&mut instances, p, false);
                } else if p.stubs[i] {
                    exit_entry[i] = Some(instances.len() + 1);
                    copies(&mut instances, p, true);
                }
            }
            let register = pinning.and_then(|p| p.register_of(trace, i));
            let member = match register {
                Some(r) => match self.cached.pinned_member(u.op, r, state) {
                    Some(m) => Some(m),
                    None => {
                        spill(&mut instances, &mut state)?;
                        match self.cached.pinned_member(u.op, r, 0) {
                            Some(m) => Some(m),
                            None => return Ok(None),
                        }
                    }
                },
                None => match self.cached.member(u.op, state) {
                    Some(m) => Some(m),
                    None => {
                        spill(&mut instances, &mut state)?;
                        self.cached.member(u.op, 0)
                    }
                },
            };
            let (stencil, entry, exit) = match member {
                Some((stencil, exit)) => (stencil, state, exit),
                None if in_body => return Ok(None),
                None => {
                    let stencil = self.stencils[u.op as usize].ok_or_else(|| {
                        format!(
                            "stencil set {} has no stencil {} (micro-op {i})",
                            self.set.target,
                            ops::info(u.op).stencil
                        )
                    })?;
                    (stencil, 0, 0)
                }
            };
            instance_of_uop.push(instances.len() + 1);
            instances.push(LoweredInstance {
                stencil,
                uop: Some(i),
                entry,
                exit,
                local: None,
            });
            state = if falls_through(u.op) { exit } else { 0 };
        }
        Ok(Some(Lowering {
            instances,
            instance_of_uop,
            exit_entry,
            body_entry,
            pinned: pinning.map(|p| p.locals.clone()).unwrap_or_default(),
        }))
    }

    /// Checks `lowering` of `trace` against the set's families, independently of how it was
    /// made: every instance's recorded states are its stencil's (uncached stencils are
    /// (0, 0)); each instance that falls through leaves the state the next one is entered
    /// in; the first instance, every jump and exit target, and every uncached op are entered
    /// with nothing cached; the micro-ops appear in order, each once.
    pub fn check_cache_states(&self, trace: &Trace, lowering: &Lowering) -> Result<(), String> {
        let fail = |k: usize, what: String| Err(format!("lowered instance {}: {what}", k + 1));
        let mut next_uop = 0;
        for (k, inst) in lowering.instances.iter().enumerate() {
            let (entry, exit) = self.cached.states_of(inst.stencil);
            if (entry, exit) != (inst.entry, inst.exit) {
                return fail(
                    k,
                    format!(
                        "recorded states ({}, {}), but stencil {} is ({entry}, {exit})",
                        inst.entry, inst.exit, self.set.stencils[inst.stencil].name
                    ),
                );
            }
            let before = match k {
                0 => Some(0), // the entry shim passes nothing cached
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
                        "{} is entered with {entry} cached values, but the instance before it \
                         leaves {before}",
                        self.set.stencils[inst.stencil].name
                    ),
                );
            }
            if let Some(u) = inst.uop {
                if u != next_uop || lowering.instance_of_uop.get(u) != Some(&(k + 1)) {
                    return fail(k, format!("micro-op {u} out of order or not mapped here"));
                }
                next_uop += 1;
                let op = trace.uops[u].op;
                let on_pinned = self
                    .cached
                    .pinned_register_of(inst.stencil)
                    .and_then(|r| self.cached.pinned_member(op, r, entry))
                    .map(|m| m.0);
                if self.cached.member(op, entry).map(|m| m.0) != Some(inst.stencil)
                    && on_pinned != Some(inst.stencil)
                    && (entry != 0 || self.stencils[op as usize] != Some(inst.stencil))
                {
                    return fail(
                        k,
                        format!(
                            "stencil {} does not run micro-op {u} ({}) from {entry} cached values",
                            self.set.stencils[inst.stencil].name,
                            ops::info(op).name
                        ),
                    );
                }
            } else if self.cached.spills.get(entry as usize).copied().flatten()
                != Some(inst.stencil)
                && !(0..PIN_REGS).any(|r| {
                    inst.local.is_some()
                        && (self.cached.pin(r) == Some(inst.stencil)
                            || self.cached.unpin(r) == Some(inst.stencil))
                })
            {
                return fail(
                    k,
                    "an instance without a micro-op that is no spill, PIN or UNPIN".into(),
                );
            }
        }
        if next_uop != trace.uops.len() {
            return Err(format!(
                "the lowering runs {next_uop} of {} micro-ops",
                trace.uops.len()
            ));
        }
        for (t, &is_target) in jump_targets(trace).iter().enumerate() {
            let k = lowering.instance_of_uop[t] - 1;
            if is_target && lowering.instances[k].entry != 0 {
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
            Target::Instance(InstanceId::from_index(
                lowering.instance_of_uop[uop_index as usize],
            ))
        };
        let mut names = Vec::with_capacity(lowering.instances.len());
        for inst in &lowering.instances {
            let index = inst.stencil;
            let stencil = &self.set.stencils[index];
            let Some(i) = inst.uop else {
                // A spill has no operand; PIN and UNPIN name their local like LOAD does.
                let local = Inst {
                    arg0: inst.local.unwrap_or(0),
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
                    "EXIT_TARGET" => Ok(Target::Instance(InstanceId::from_index(
                        lowering.exit_instance(u.target as usize),
                    ))),
                    other => Err(format!(
                        "stencil {} has an unknown jump target {other}",
                        stencil.name
                    )),
                })
                .collect::<Result<Vec<Target>, String>>()?;
            b.push(index, &operands, &targets)
                .map_err(|e| format!("micro-op {i} ({}): {e}", info.name))?;
            names.push(if inst.entry == 0 && inst.exit == 0 {
                info.name
            } else {
                stencil.name
            });
        }
        let compiled = b.finish().map_err(|e| e.to_string())?;
        let entry = compiled.entry_fn(shim);
        let loop_body_address = trace.loop_body_start().map(|at| {
            let entry = lowering.body_entry.unwrap_or(lowering.instance_of_uop[at]);
            compiled.entry(InstanceId::from_index(entry)) as u64
        });
        Ok(CompiledTrace {
            entry,
            names,
            loop_body_address,
            pinned_locals: lowering.pinned.len(),
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
    code: Code,
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
    ///   ops of `templates/vm/ops.def` set them.
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
            code: Code::External {
                body_address,
                code_bytes,
                compiler: compiler.to_string(),
                _owner: owner,
            },
        }
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
                write!(s, " [{}] {name}", i + 1).unwrap();
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
            let name = if i == 0 {
                "cpjit_entry"
            } else {
                self.names[i - 1]
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
