//! Pinned locals: a loop trace keeps up to [`PIN_REGS`] of its body's locals in registers
//! from the body's entry to its back edge, so that a loop-carried value (a counter, a sum)
//! never makes a round trip through the frame. Measured on `examples/sum.vm` before this
//! existed, that round trip (a store, then the next iteration's load of the same slot) was
//! most of an iteration's latency.
//!
//! The protocol (vm/templates/cached/ops.c, "Pinned locals"; cpjit.h's `CPJIT_PIN_REGS`):
//! every register-cached member passes the pinned registers on; `PIN k` copies local
//! `locals[k]` from the frame into pinned register k at the body's entry (before its first
//! micro-op, so the back edge does not run it again); the body's `LOAD`, `STORE`,
//! `INCREMENT_LOCAL_INT(_KNOWN)` and `ADD_TO_LOCAL_INT` of that local are the members
//! compiled on the register
//! (families `vm_pinned_*`); every exit stub the body leaves through starts with `UNPIN k`
//! for every pinned register, which writes it back, so the interpreter, side traces and the
//! frame-inspecting tools always find the locals in the frame. A list item on locals
//! (`GETITEM_LOCALS`, `SETITEM_LOCALS` and their `_KNOWN` forms) has members whose *index*
//! is pinned (families `vm_pinned_index_*`; [`pinned_operand`]), so a loop counter used as
//! an index stays pinned; the list stays in the frame.
//!
//! [`choose`] decides which locals, or none: a body qualifies when it has no jump but its
//! back edges (a branch merged into the body ends in one, and the exits into it keep the
//! registers live: `trace/merge.rs`), nothing that can fail through a helper, and no exit
//! stub shared with the preamble; a local qualifies when only those ops name it in the
//! body, and the
//! loop-carried locals (the body reads them before it writes them) go first, then those it
//! names most (an increment of an
//! int counting as four). A local the body proves an int where it starts is held scaled
//! (an int times 2**16: vm/templates/cached/ops.c, "Scaled ints"), so that its increments,
//! compares and adds need no unboxing; `PIN` scales it and `UNPIN` boxes it again. One the
//! body only adds into (`ADD_TO_LOCAL_INT`: a sum) is held *wide*, a raw 64-bit int
//! (cached/wide.h), so that a sum leaving the tagged 48 bits stays in its register; its
//! `UNPIN` makes a big int of it then, after the other registers are written back. A loop
//! counter the body only loads and increments, every increment proved in range by a guard
//! before it (`trace/bounded.rs`), is held wide too where that saves instructions
//! (`pinning/wide.rs`): its loads onto raw 64-bit registers are then moves, its bound an
//! immediate and its increment unchecked (a side trace that increments it unproved does not
//! inherit the registers).
//! The lowering ([`crate::jit::Backend::lower`]) then gives up pinning when a body micro-op
//! would need an uncached stencil (it would lose the registers). [`check`] proves a lowering
//! keeps the protocol, independently of how it was made.
//!
//! Inherited pinning. An exit stub of a pinned body that ends in `EXIT_TRACE` starts with
//! `LINK` (before its `UNPIN`s; the three are one stencil where the set has it,
//! vm/templates/cached/exit.c), which reads the exit's second link slot: if the VM has put
//! code there, it is entered with the pinned registers live and nothing is written back. The
//! VM puts there a side trace grown from that exit and compiled by [`inherit`] (its
//! `Trace::inherited_pins` are the parent's): the side trace keeps the same locals in the same
//! registers, held the same way, from its first micro-op (its own entry from Rust `PIN`s
//! them first), and its exits, its end included, leave through stubs that start with `LINK`
//! and write the registers back; so a side trace that ends at its loop's head enters the
//! loop body past its `PIN`s, and a hot branch of a loop never writes its locals back. The
//! VM links a pinned slot only between traces whose [`Pins`] are equal.
//!
//! Float locals. Up to [`FLOAT_PIN_REGS`] float locals a body carries from iteration to
//! iteration go into pinned *float* registers instead ([`float`]: `PIN_FLOAT`,
//! `UNPIN_FLOAT` and members on those registers, with the same protocol), chosen before the
//! general registers, which the others then compete for.
//!
//! Nothing reads the frame while a pinned body runs: it calls no helper that could (a call
//! or a failing helper keeps the loop unpinned), and every way out writes back first. Only a
//! debugger stopped inside the body sees a pinned local's frame slot as of the body's entry
//! (`run --no-pin` keeps every local in the frame).

use crate::abi::Inst;
use crate::jit::CachedOps;
use crate::ops::{self, op, OperandKind};
use crate::trace::Trace;
use std::ops::RangeInclusive;

mod check;
pub mod float;
mod wide;
pub use check::check;
pub use float::{FloatPins, FLOAT_PIN_REGS};

/// Pinned registers of the VM's cached ops (`CPJIT_PIN_REGS` in vm/templates/cached/ops.c).
pub const PIN_REGS: usize = 2;

/// How a pinned register holds its local: the value of the families' `PINNED_SCALED`
/// (vm/templates/cached/ops.c): boxed (0), scaled (1: an int times 2**16, "Scaled ints") or
/// wide (2: a raw 64-bit int, cached/wide.h), by index into the tables by representation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Held {
    #[default]
    Boxed,
    Scaled,
    Wide,
}

impl Held {
    /// How many representations there are (the tables' length).
    pub const COUNT: usize = 3;

    /// The representation of `PINNED_SCALED` value `n`.
    pub fn from_index(n: usize) -> Option<Held> {
        [Held::Boxed, Held::Scaled, Held::Wide].get(n).copied()
    }

    /// Its `PINNED_SCALED` value, the tables' index.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the register holds an int unboxed (scaled or wide): the ops on it need no
    /// unboxing, which a run of scaled registers keeps.
    pub fn is_unboxed(self) -> bool {
        self != Held::Boxed
    }
}

/// Locals held in pinned registers: what two traces linked with the registers live must
/// agree on. At most [`PIN_REGS`] of them, held inline (a trace's pins are copied into its
/// compiled form and its side traces' without an allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pins {
    /// How many registers hold a local; the entries past it stay zero (so `==` compares
    /// only what is held).
    len: u8,
    locals: [u64; PIN_REGS],
    held: [Held; PIN_REGS],
    /// The locals in pinned float registers ([`float`]).
    floats: FloatPins,
}

impl Pins {
    /// `locals[k]` in pinned register k, held as `held[k]` says.
    ///
    /// # Panics
    /// With more than [`PIN_REGS`] locals, or another number of representations.
    pub fn new(locals: &[u64], held: &[Held]) -> Pins {
        assert!(
            locals.len() <= PIN_REGS && held.len() == locals.len(),
            "{} pinned locals with {} representations (at most {PIN_REGS} registers)",
            locals.len(),
            held.len()
        );
        let mut pins = Pins {
            len: locals.len() as u8,
            ..Pins::default()
        };
        pins.locals[..locals.len()].copy_from_slice(locals);
        pins.held[..held.len()].copy_from_slice(held);
        pins
    }

    /// The local in each pinned register (register k holds `locals()[k]`).
    pub fn locals(&self) -> &[u64] {
        &self.locals[..self.len as usize]
    }

    /// By pinned register: how it holds its local (scaled or wide only where the body proves
    /// the local an int where it starts; vm/templates/cached/ops.c, "Scaled ints").
    pub fn held(&self) -> &[Held] {
        &self.held[..self.len as usize]
    }

    /// Whether a general register holds local `local` wide.
    pub fn holds_wide(&self, local: u64) -> bool {
        let at = self.locals().iter().position(|&l| l == local);
        at.is_some_and(|r| self.held()[r] == Held::Wide)
    }

    /// How many general registers hold a local.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether no register, general or float, holds a local.
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.floats.locals().is_empty()
    }

    /// These pins with `floats` in the pinned float registers.
    pub fn with_floats(mut self, floats: FloatPins) -> Pins {
        self.floats = floats;
        self
    }

    /// The locals in pinned float registers.
    pub fn floats(&self) -> FloatPins {
        self.floats
    }
}

/// The locals a loop body keeps in pinned registers. One is kept per backend and filled in
/// place for trace after trace ([`choose`], [`inherit`]), so that deciding costs no
/// allocation once its vectors have grown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pinning {
    /// The locals and how each register holds its local.
    pub pins: Pins,
    /// The body's micro-ops: its first (the back edge's target) to its `JUMP_TOP`.
    body_start: usize,
    body_end: usize,
    /// By micro-op: whether it is an exit stub the body leaves through.
    pub stubs: Vec<bool>,
    /// [`choose`]'s uses by local, kept for its next trace.
    uses: Vec<(u64, Uses)>,
    /// Bit k: register k holds a bounded loop counter wide ([`wide::CounterUses::gain`]),
    /// which [`Pinning::narrow_wide_counters`] holds scaled instead.
    wide_counters: u8,
}

impl Pinning {
    /// A pinning whose vectors hold traces of up to `uops` micro-ops without growing.
    pub fn with_capacity(uops: usize) -> Pinning {
        Pinning {
            stubs: Vec::with_capacity(uops),
            ..Pinning::default()
        }
    }

    /// Makes this the pinning of `pins` in `trace`'s micro-ops `body`, its stubs already
    /// marked in `self.stubs`.
    fn fill(&mut self, pins: Pins, body: RangeInclusive<usize>) {
        self.pins = pins;
        (self.body_start, self.body_end) = body.into_inner();
    }

    /// Clears the stubs for a trace of `n` micro-ops.
    fn clear_stubs(&mut self, n: usize) {
        self.stubs.clear();
        self.stubs.resize(n, false);
    }

    /// The local in each pinned register (register k holds `locals()[k]`).
    pub fn locals(&self) -> &[u64] {
        self.pins.locals()
    }

    /// By pinned register: how it holds its local.
    pub fn held(&self) -> &[Held] {
        self.pins.held()
    }

    /// The body's first micro-op (the back edge's target).
    pub fn body_start(&self) -> usize {
        self.body_start
    }

    /// Whether micro-op `i` is in the body.
    pub fn in_body(&self, i: usize) -> bool {
        (self.body_start..=self.body_end).contains(&i)
    }

    /// Which pinned registers hold the locals the body's micro-ops run on ([`Registers`]).
    pub(crate) fn registers(&self) -> Registers<'_> {
        Registers {
            pinning: self,
            facts: op_facts(),
        }
    }

    /// Holds every local boxed in its register; `false` if every one already was.
    pub fn box_all(&mut self) -> bool {
        let changed = self.pins.held().iter().any(|h| h.is_unboxed());
        self.pins.held = [Held::Boxed; PIN_REGS];
        changed
    }

    /// Holds every loop counter held wide scaled instead (accumulators stay wide); `false`
    /// if there was none. (A wide counter's loads have members on raw 64-bit registers only,
    /// which a run of its loop body may lack.)
    pub fn narrow_wide_counters(&mut self) -> bool {
        let counters = std::mem::take(&mut self.wide_counters);
        for (k, h) in self.pins.held.iter_mut().enumerate() {
            if counters & (1 << k) != 0 {
                *h = Held::Scaled;
            }
        }
        counters != 0
    }

    /// Holds every wide local scaled instead; `false` if none was wide.
    pub fn narrow_wide(&mut self) -> bool {
        self.wide_counters = 0;
        let mut changed = false;
        for h in &mut self.pins.held {
            if *h == Held::Wide {
                *h = Held::Scaled;
                changed = true;
            }
        }
        changed
    }
}

/// The pinned registers holding the locals of a pinning's body micro-ops
/// ([`Pinning::registers`]), worked out where the lowering's step pass reads each micro-op
/// anyway: two vectors filled per trace for that pass cost nbody's compile 13 instructions
/// per micro-op.
pub(crate) struct Registers<'p> {
    pinning: &'p Pinning,
    facts: &'static [OpFacts],
}

impl Registers<'_> {
    /// The pinned register and the pinned float register holding the local micro-op `u`,
    /// the trace's `i`th, runs on, if it is a body micro-op on a pinned local.
    #[inline(always)]
    pub(crate) fn of(&self, i: usize, u: &Inst) -> (Option<u8>, Option<u8>) {
        let p = self.pinning;
        let local = match p.in_body(i) {
            true => self
                .facts
                .get(u.op as usize)
                .and_then(|f| f.pinned_local(u)),
            false => None,
        };
        let Some(local) = local else {
            return (None, None);
        };
        let general = p.pins.locals().iter().position(|&l| l == local);
        let float = p.pins.floats.register_of(local);
        (general.map(|r| r as u8), float.map(|q| q as u8))
    }
}

/// Which of `op`'s operands names the local its members on a pinned register take from that
/// register: the local of a load, store, in-place add or float op with a local operand
/// (families `vm_pinned_*`), the index
/// of a list item on locals (`vm_pinned_index_*`, whose list stays in the frame); `None` for
/// an op without such members. The families say the same with `PINNED_OPERAND`
/// (vm/templates/cached/ops.c), which [`crate::cached`] checks against this.
pub fn pinned_operand(op: u32) -> Option<usize> {
    match op {
        op::LOAD
        | op::LOAD_INT
        | op::LOAD_INT_FLOAT
        | op::STORE
        | op::INCREMENT_LOCAL_INT
        | op::INCREMENT_LOCAL_INT_KNOWN
        | op::INCREMENT_LOCAL_INT_BOUNDED
        | op::ADD_TO_LOCAL_INT
        | op::ADD_FLOAT_LOCAL
        | op::SUB_FLOAT_LOCAL
        | op::MUL_FLOAT_LOCAL => Some(0),
        op::GETITEM_LOCALS
        | op::GETITEM_LOCALS_KNOWN
        | op::GETITEM_INT_LOCALS_KNOWN
        | op::GETITEM_FLOAT_LOCALS_KNOWN
        | op::SETITEM_LOCALS
        | op::SETITEM_LOCALS_KNOWN
        | op::SETITEM_LOCALS_NEXT
        | op::SETITEM_LOCALS_NEXT_KNOWN
        | op::COPY_ITEM_TO_NEXT
        | op::COPY_ITEM_TO_NEXT_IF_GT
        | op::ADD_FLOAT_TO_ITEM
        | op::SUB_FLOAT_FROM_ITEM => Some(1),
        _ => None,
    }
}

/// The local micro-op `u` would take from a pinned register, if its op has such members.
pub fn pinned_local(u: &Inst) -> Option<u64> {
    pinned_operand(u.op).map(|k| [u.arg0, u.arg1][k])
}

/// What choosing and keeping pinned locals asks of an op, worked out once for every op
/// ([`op_facts`]): one table load per micro-op where [`choose`], [`inherit`] and
/// [`Pinning::fill`] read the op's metadata and matched its id several times.
#[derive(Clone, Copy, Debug, Default)]
struct OpFacts {
    jumps: bool,
    exits: bool,
    fails: bool,
    /// [`pinned_operand`], [`NOT_PINNED`] for none.
    pinned: u8,
    /// A member on a pinned local only reads it: a load, a float op on a local, a list item
    /// (whose pinned operand is its index).
    reads_only: bool,
    /// An in-place increment of an int local (it counts as four uses).
    increments: bool,
    /// Bit k: operand k names a local other than through the pinned operand.
    other_locals: u8,
}

/// [`OpFacts::pinned`] of an op without members on a pinned local.
const NOT_PINNED: u8 = u8::MAX;

impl OpFacts {
    fn of(op: u32) -> OpFacts {
        let info = ops::info(op);
        let pinned = pinned_operand(op);
        let mut other_locals = 0;
        for (k, kind) in info.operands.iter().enumerate().take(2) {
            if *kind == OperandKind::Local && pinned != Some(k) {
                other_locals |= 1 << k;
            }
        }
        OpFacts {
            jumps: info.jumps,
            exits: info.exits,
            fails: info.fails,
            pinned: pinned.map_or(NOT_PINNED, |k| k as u8),
            reads_only: matches!(
                op,
                op::LOAD
                    | op::LOAD_INT
                    | op::LOAD_INT_FLOAT
                    | op::ADD_FLOAT_LOCAL
                    | op::SUB_FLOAT_LOCAL
                    | op::MUL_FLOAT_LOCAL
            ) || pinned == Some(1),
            increments: matches!(
                op,
                op::INCREMENT_LOCAL_INT
                    | op::INCREMENT_LOCAL_INT_KNOWN
                    | op::INCREMENT_LOCAL_INT_BOUNDED
                    | op::ADD_TO_LOCAL_INT
            ),
            other_locals,
        }
    }

    /// The local micro-op `u` (of this op) would take from a pinned register.
    #[inline(always)]
    fn pinned_local(self, u: &Inst) -> Option<u64> {
        match self.pinned {
            0 => Some(u.arg0),
            1 => Some(u.arg1),
            _ => None,
        }
    }
}

/// Builds the table of op facts now (the backend does when it is made), so that the first
/// trace's [`choose`] does not: 14,000 instructions, a quarter of the first compile of sum's
/// trace (callgrind).
pub(crate) fn prepare() {
    op_facts();
}

/// Every op's [`OpFacts`], by op id.
fn op_facts() -> &'static [OpFacts] {
    static FACTS: std::sync::LazyLock<Vec<OpFacts>> =
        std::sync::LazyLock::new(|| (0..ops::OPS.len() as u32).map(OpFacts::of).collect());
    &FACTS
}

/// Whether micro-op `u` names a local in `locals` other than through its pinned operand (it
/// would read or write the frame's slot while the register holds the local).
fn names_otherwise(facts: OpFacts, u: &Inst, locals: &[u64]) -> bool {
    (facts.other_locals & 1 != 0 && locals.contains(&u.arg0))
        || (facts.other_locals & 2 != 0 && locals.contains(&u.arg1))
}

/// How a loop body uses a local, by the micro-ops that could run on its pinned register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Uses {
    /// The first of them reads it (it is not a `STORE`).
    read_first: bool,
    /// One of them writes it.
    written: bool,
    /// How many there are, an increment of an int counting four.
    count: usize,
    /// A micro-op names it otherwise (it cannot be pinned).
    named_otherwise: bool,
    /// A micro-op other than `ADD_TO_LOCAL_INT` runs on it (it cannot be held wide).
    not_only_added: bool,
    /// A micro-op without members on a pinned float register runs on it
    /// ([`float::float_pinnable`]).
    not_float: bool,
    /// What holding it wide gains ([`wide::CounterUses`]).
    counter: wide::CounterUses,
}

/// The locals to pin, at most [`PIN_REGS`], from how the body uses them: none named
/// otherwise; loop-carried ones (read before written) first, then by uses, ties to the lower
/// local. Picked in one pass (no list of candidates to allocate and sort per trace); every
/// register holds its local boxed.
fn pick(uses: &[(u64, Uses)]) -> Pins {
    let mut best: [Option<((bool, usize), u64)>; PIN_REGS] = [None; PIN_REGS];
    let candidates = uses
        .iter()
        .filter(|(_, u)| !u.named_otherwise && u.count > 0)
        .map(|&(l, u)| ((u.read_first && u.written, u.count), l));
    for candidate in candidates {
        let ahead = |b: &Option<((bool, usize), u64)>| {
            b.is_some_and(|b| b.0 > candidate.0 || (b.0 == candidate.0 && b.1 < candidate.1))
        };
        let at = best.iter().take_while(|b| ahead(b)).count();
        if at < PIN_REGS {
            // Shifted down by hand: `rotate_right` was a call per candidate.
            for k in (at + 1..PIN_REGS).rev() {
                best[k] = best[k - 1];
            }
            best[at] = Some(candidate);
        }
    }
    let mut pins = Pins::default();
    for &(_, local) in best.iter().flatten() {
        pins.locals[pins.len as usize] = local;
        pins.len += 1;
    }
    pins
}

/// Makes `out` the locals `trace`'s loop body pins, if it has a body that qualifies and
/// locals worth it (see the module doc); `false` (and `out` garbage) when not, or when
/// `cached` has no `PIN`/`UNPIN` stencils.
pub fn choose(trace: &Trace, cached: &CachedOps, out: &mut Pinning) -> bool {
    choose_pins(trace, cached, out).is_some()
}

/// [`choose`], `None` for `false`.
fn choose_pins(trace: &Trace, cached: &CachedOps, out: &mut Pinning) -> Option<()> {
    let start = trace.loop_body_start()?;
    let end = trace.body_len.checked_sub(1)?;
    let back_edge = |u: &Inst| u.op == op::JUMP_TOP && u.target as usize == start;
    if end < start || !back_edge(&trace.uops[end]) {
        return None;
    }
    out.clear_stubs(trace.uops.len());
    let stubs = &mut out.stubs;
    // By local, in the order first named (a body names a handful: a linear search is
    // cheaper than a tree per micro-op).
    let uses = &mut out.uses;
    uses.clear();
    let entry = |uses: &mut Vec<(u64, Uses)>, local: u64| match uses
        .iter()
        .position(|(l, _)| *l == local)
    {
        Some(at) => at,
        None => {
            uses.push((local, Uses::default()));
            uses.len() - 1
        }
    };
    let facts = op_facts();
    for i in start..=end {
        let u = &trace.uops[i];
        let f = facts[u.op as usize];
        // (A merged branch is a block of the body after a back edge, entered by exits:
        // crate::trace::merge.)
        if (f.jumps && !back_edge(u)) || f.fails {
            return None;
        }
        if f.exits {
            let t = u.target as usize;
            if !merged_block(trace, t) {
                if t < trace.body_len || t >= trace.uops.len() {
                    return None;
                }
                stubs[t] = true;
            }
        }
        if let Some(local) = f.pinned_local(u) {
            let at = entry(uses, local);
            let e = &mut uses[at].1;
            // Every op on a pinned local reads it first but STORE; loads and list items
            // only read it.
            if e.count == 0 {
                e.read_first = u.op != op::STORE;
            }
            e.written |= !f.reads_only;
            e.not_only_added |= u.op != op::ADD_TO_LOCAL_INT;
            e.not_float |= !float::float_pinnable(u.op);
            // (The body ends in its back edge: a micro-op on a local has one after it.)
            e.counter.see(u, trace.uops.get(i + 1));
            // An increment of a local held scaled is add/jo, of one in the frame a load, an
            // unbox, the add, a box and a store: it counts as much as four other uses.
            e.count += if f.increments && trace.loop_body_proves_int(local) {
                4
            } else {
                1
            };
        }
        for (k, arg) in [u.arg0, u.arg1].into_iter().enumerate() {
            if f.other_locals & (1 << k) != 0 {
                let at = entry(uses, arg);
                uses[at].1.named_otherwise = true;
            }
        }
    }
    // A stub the preamble (or another stub) also jumps to would write back registers that
    // hold nothing there.
    // (Two `any`s over slices, inlined: `any` over their chain was a call of its own, a
    // `for` over it tested which half per micro-op.)
    let to_stub =
        |u: &Inst| facts[u.op as usize].exits && stubs.get(u.target as usize) == Some(&true);
    if trace.uops[..start].iter().any(to_stub) || trace.uops[end + 1..].iter().any(to_stub) {
        return None;
    }
    // Loop-carried locals (the body reads them before it writes them) first: their store
    // and the next iteration's load are what pinning takes off the critical path; then by
    // uses. (A temporary the body writes before it reads gains no more than any local.)
    // Float locals first, into the pinned float registers; the rest compete for the general
    // ones.
    let floats = float::pick_floats(trace, uses, cached);
    let mut pins = pick(uses).with_floats(floats);
    out.wide_counters = 0;
    let copies_exist =
        |k: usize, held: Held| cached.pin(k, held).is_some() && cached.unpin(k, held).is_some();
    if pins.is_empty() || !(0..pins.len()).all(|k| copies_exist(k, Held::Boxed)) {
        return None;
    }
    for k in 0..pins.len() {
        let local = pins.locals[k];
        // An accumulator only added into is held wide: its sum may leave the tagged range
        // (`sum` at real sizes) and stays in its register up to 64 bits.
        // (`pick` took it from `uses`.)
        let used = uses.iter().find(|(l, _)| *l == local).map(|&(_, u)| u);
        let only_added = used.is_some_and(|u| !u.not_only_added);
        pins.held[k] = match trace.loop_body_proves_int(local) {
            false => Held::Boxed,
            true if only_added && copies_exist(k, Held::Wide) => Held::Wide,
            // A loop counter the body keeps tagged, where a raw register saves
            // instructions per iteration (pinning/wide.rs).
            true if copies_exist(k, Held::Wide) && used.is_some_and(|u| u.counter.gain() > 0) => {
                out.wide_counters |= 1 << k;
                Held::Wide
            }
            true if copies_exist(k, Held::Scaled) => Held::Scaled,
            true => Held::Boxed,
        };
    }
    out.fill(pins, start..=end);
    Some(())
}

/// Whether micro-op `t` starts a branch merged into a loop body ([`crate::trace::merge`]):
/// inside the body, after a back edge. Exits into it keep the pinned registers live.
pub(super) fn merged_block(trace: &Trace, t: usize) -> bool {
    let Some(start) = trace.loop_body_start() else {
        return false;
    };
    t > start && t < trace.body_len && trace.uops[t - 1].op == op::JUMP_TOP
}

/// A side trace's pinning inherited from its parent's exit (`trace.inherited_pins`; see the
/// module doc), or `None` when the trace cannot keep it: its path must end in `EXIT_TRACE`
/// (its end then leaves through a stub of its own, which writes the registers back), call no
/// helper that could fail or read the frame, not jump, and name the pinned locals only in
/// ops that run on a pinned register. The body is every micro-op before the final
/// `EXIT_TRACE`; the final one and every exit target are stubs. Fills `out` in place
/// (`false`, and `out` garbage, when the trace cannot keep the pinning).
pub fn inherit(trace: &Trace, cached: &CachedOps, out: &mut Pinning) -> bool {
    inherit_pins(trace, cached, out).is_some()
}

/// [`inherit`], `None` for `false`.
fn inherit_pins(trace: &Trace, cached: &CachedOps, out: &mut Pinning) -> Option<()> {
    let pins = trace.inherited_pins?;
    cached.link()?;
    // (A side trace keeps its parent's representations as they are, or no pinning.)
    out.wide_counters = 0;
    let last = trace.body_len.checked_sub(1)?;
    if last == 0 || trace.uops[last].op != op::EXIT_TRACE {
        return None;
    }
    out.clear_stubs(trace.uops.len());
    let stubs = &mut out.stubs;
    stubs[last] = true;
    let facts = op_facts();
    for u in &trace.uops[..last] {
        let f = facts[u.op as usize];
        if f.jumps || f.fails {
            return None;
        }
        if f.exits {
            let t = u.target as usize;
            if t < trace.body_len || t >= trace.uops.len() {
                return None;
            }
            stubs[t] = true;
        }
        // (Most ops name no other local: tested first, it spares the two searches.)
        if f.other_locals != 0
            && (names_otherwise(f, u, pins.locals()) || names_otherwise(f, u, pins.floats.locals()))
        {
            return None;
        }
        // A counter held wide has members for increments proved in range only
        // (pinning/wide.rs): a side trace stepping it otherwise keeps it in the frame.
        if f.increments
            && u.op != op::ADD_TO_LOCAL_INT
            && !crate::trace::increment_proved_in_range(u)
            && pins.holds_wide(u.arg0)
        {
            return None;
        }
    }
    let float_copies_exist = (0..pins.floats.locals().len())
        .all(|q| cached.pin_float(q).is_some() && cached.unpin_float(q).is_some());
    let copies_exist = float_copies_exist
        && pins
            .held()
            .iter()
            .enumerate()
            .all(|(k, &held)| cached.pin(k, held).is_some() && cached.unpin(k, held).is_some());
    copies_exist.then(|| out.fill(pins, 0..=last - 1))
}

/// The operand `EXIT_PINS` of a whole exit stub (vm/templates/cached/exit.c) writing back
/// `locals` held as `held` (register k holds `locals[k]`): 16 bits per register, its
/// local's byte offset in the frame (a multiple of 8) plus [`Held::index`]; `None` where an
/// offset does not fit or the stub does not write a representation back.
pub fn exit_pins(locals: &[u64], held: &[Held]) -> Option<u64> {
    let mut operand = 0;
    for (r, (&local, &held)) in locals.iter().zip(held).enumerate() {
        let at = local
            .checked_mul(8)?
            .checked_add(crate::abi::FRAME_HEADER_BYTES as u64)
            .filter(|&at| at < 1 << 16)?;
        (held.index() <= Held::Wide.index()).then_some(())?;
        operand |= (at | held.index() as u64) << (16 * r);
    }
    Some(operand)
}

#[cfg(test)]
mod tests {
    use super::{pick, Held, Pins, Uses, PIN_REGS};

    /// A local is held wide where its register says so, and only a pinned one.
    #[test]
    fn holds_wide_names_the_locals_of_wide_registers_only() {
        let pins = Pins::new(&[3, 5], &[Held::Scaled, Held::Wide]);
        assert!(pins.holds_wide(5));
        assert!(!pins.holds_wide(3), "held scaled");
        assert!(!pins.holds_wide(7), "not pinned");
        assert!(!Pins::default().holds_wide(0), "no register holds local 0");
    }

    /// `pick` chooses what sorting every candidate chose (the order it replaced): random
    /// uses of up to 8 locals, some named otherwise.
    #[test]
    fn pick_takes_the_first_locals_of_the_sorted_candidates() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for round in 0..2_000 {
            let n = next(9) as usize;
            let uses: Vec<(u64, Uses)> = (0..n)
                .map(|k| {
                    let u = Uses {
                        read_first: next(2) == 0,
                        written: next(2) == 0,
                        count: next(4) as usize,
                        named_otherwise: next(5) == 0,
                        not_only_added: next(2) == 0,
                        not_float: next(2) == 0,
                        ..Uses::default()
                    };
                    // Distinct locals, in no particular order.
                    (k as u64 * 7 % 11, u)
                })
                .collect();
            let mut sorted: Vec<((bool, usize), u64)> = uses
                .iter()
                .filter(|(_, u)| !u.named_otherwise && u.count > 0)
                .map(|&(l, u)| ((u.read_first && u.written, u.count), l))
                .collect();
            sorted.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let expected: Vec<u64> = sorted.iter().take(PIN_REGS).map(|&(_, l)| l).collect();
            let pins = pick(&uses);
            assert_eq!(pins.locals(), expected, "round {round}");
            assert_eq!(
                pins.held(),
                vec![Held::Boxed; expected.len()],
                "round {round}"
            );
        }
    }
}
