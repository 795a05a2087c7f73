//! The register-cached members of the VM's ops in one stencil set, and the cache states they
//! are entered and left in.
//!
//! A cache state says how many top-of-stack values are in registers (0 to 3, cpjit.h's
//! `CPJIT_CACHE_REGS`) and what those registers hold ([`Kind`]): boxed values, *scaled ints*
//! (an int times 2**16: vm/templates/cached/ops.c, "Scaled ints") or values in *float slots*
//! (FP registers: "Float slots", [`float`]) or *raw 64-bit ints* ([`wide`]). It is one byte,
//! [`CacheState`]: the depth, plus 4 when the registers are scaled, 8 when they are float
//! slots, 12 when they are wide; with nothing cached there is one state, 0, whatever the
//! registers would hold.
//!
//! The members come from the kit's selection tables (`Family::cached`, generated from the
//! families' `cached` declarations) of the set's families whose name starts with `vm_`: for
//! each of the VM's ops and each entry state, the member the kit's
//! `TraceBuilder::push_op` picks, and the kit's op ([`KitOp`]) the checks look it up by. The families
//! (vm/templates/manifest.toml): parameters `IN` and `OUT` (the depths on entry and exit),
//! optionally `SCALED` (the registers are scaled: 1, or wide: 2), `FLOATS` (they are float slots, the
//! states the kit's float-slot numbers, [`float`]), `PINNED` (the op runs on the local in
//! that pinned register, [`crate::pinning`]), `PINNED_SCALED` (how that register holds its
//! local: [`Held`]), `PINNED_OPERAND` (which of the op's locals it is, checked against
//! [`crate::pinning::pinned_operand`]), `PINNED_FLOAT` (the op runs on the local in that
//! pinned float register, [`crate::pinning::float`]) and `DEPTH` (a `COPY` compiled for that depth operand only); elements are ops of `ops.def`, or `SPILL` (store every cached value),
//! `BOX` (turn scaled registers into boxed ones in place), `PIN`, `UNPIN` (and
//! `PIN_FLOAT`, `UNPIN_FLOAT` of a pinned float register), `LINK` (enter
//! an exit's pinned link with the pinned registers live, [`crate::pinning`]) and
//! `EXIT_PINNED_*` (a whole exit stub of a pinned body: the three). A member that
//! pushes, entered with nothing cached, leaves its value scaled or boxed as its `SCALED`
//! says; so an op may have two members entered in state 0, and [`CachedOps::member_as`]
//! takes which one.

use crate::ops;
use crate::pinning::{self, Held, PIN_REGS};
use cpjit_model::StencilSet;

mod exit;
pub mod float;
mod params;
mod pinned_float;
pub mod wide;

use params::{value_combinations, Params, OPTIONAL};

/// Cache states ([`CacheState`]): depths 0 to 3, boxed, scaled or float slots (the encodings
/// with depth 0 all spell the empty state).
pub const STATES: usize = 16;

/// What the cached registers of a state hold; a member's kind is that of the states it is
/// entered in (any, with nothing cached) and leaves (but `BOX`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Boxed values in general registers.
    Boxed,
    /// Ints times 2**16 in general registers.
    Scaled,
    /// Values' bits in FP registers (float slots).
    Float,
    /// Raw 64-bit ints in general registers ([`wide`]).
    Wide,
}

impl Kind {
    /// The kinds, by [`Kind::index`].
    const COUNT: usize = 4;

    /// Its index in the tables by kind.
    fn index(self) -> usize {
        self as usize
    }
}

/// A cache state: how many top-of-stack values are in registers and what they hold
/// ([`Kind`]). One byte, the depth plus 4 when the registers are scaled, plus 8 when they are
/// float slots (the encoding the tables below index by); with nothing cached there is one
/// state, [`CacheState::EMPTY`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheState(u8);

impl CacheState {
    /// Nothing cached.
    pub const EMPTY: CacheState = CacheState(0);

    /// The state of `depth` cached values (0 to 3), scaled ints or boxed.
    pub fn new(depth: u8, scaled: bool) -> CacheState {
        assert!(depth < 4, "no cache state of depth {depth}");
        if depth == 0 {
            CacheState::EMPTY
        } else {
            CacheState(depth | if scaled { 4 } else { 0 })
        }
    }

    /// `depth` boxed values cached.
    pub fn boxed(depth: u8) -> CacheState {
        CacheState::new(depth, false)
    }

    /// `depth` scaled ints cached.
    pub fn scaled(depth: u8) -> CacheState {
        CacheState::new(depth, true)
    }

    /// The state whose encoding is `bits` (see [`CacheState`], below 16), taken as it is: 4,
    /// 8 and 12 are other spellings of the empty state, which no table holds.
    pub fn from_bits(bits: u8) -> CacheState {
        assert!((bits as usize) < STATES, "no cache state encoded {bits}");
        CacheState(bits)
    }

    /// The encoding: the depth, plus 4 when the registers are scaled, 8 when float slots.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// How many values it caches.
    pub fn depth(self) -> u8 {
        self.0 & 3
    }

    /// Whether nothing is cached.
    pub fn is_empty(self) -> bool {
        self.depth() == 0
    }

    /// Whether its registers hold scaled ints.
    pub fn is_scaled(self) -> bool {
        self.0 & 12 == 4
    }

    /// What its registers hold (boxed values with nothing cached).
    pub fn kind(self) -> Kind {
        if self.is_wide() {
            Kind::Wide
        } else if self.is_scaled() {
            Kind::Scaled
        } else if self.is_float() {
            Kind::Float
        } else {
            Kind::Boxed
        }
    }

    /// The state of `depth` cached values of kind `kind`.
    pub fn of_kind(depth: u8, kind: Kind) -> CacheState {
        match kind {
            Kind::Boxed => CacheState::boxed(depth),
            Kind::Scaled => CacheState::scaled(depth),
            Kind::Float => CacheState::float(depth),
            Kind::Wide => CacheState::wide(depth),
        }
    }

    /// Its index in the tables by entry state.
    fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether a member of kind `kind` can be entered in this state: any with nothing
    /// cached, else one whose registers hold what this state's do.
    fn fits(self, kind: Kind) -> bool {
        self.is_empty() || kind == self.kind()
    }

    /// The state as text: `2` (two boxed values), `2s` (two scaled ints), `2f` (two float
    /// slots), `2w` (two wide ints).
    pub fn describe(self) -> String {
        self.to_string()
    }
}

impl std::fmt::Display for CacheState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}",
            self.depth(),
            match self.kind() {
                Kind::Boxed => "",
                Kind::Scaled => "s",
                Kind::Float => "f",
                Kind::Wide => "w",
            }
        )
    }
}

/// By entry state: a member's stencil index and exit state.
type ByEntryState = [Option<(usize, CacheState)>; STATES];

/// By member kind ([`Kind::index`]), then by entry state.
type ByKind = [ByEntryState; Kind::COUNT];

/// By pinned register, by [`Held`], by member kind, then by entry state.
type ByPinned = [[ByKind; Held::COUNT]; PIN_REGS];

/// The register-cached members of the VM's ops in one set (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct CachedOps {
    /// By op id: its members.
    members: Vec<ByKind>,
    /// By op id, by pinned register, by how it holds its local ([`Held`]): the members on a
    /// pinned local. Boxed for the few ops that have such members: a full table per op was
    /// 0.9 MB that every start-up filled (a third of the empty program's page faults).
    pinned: Vec<Option<Box<ByPinned>>>,
    /// By entry state: the stencil that spills every cached value.
    spills: [Option<usize>; STATES],
    /// By entry state (scaled): the stencil that boxes the registers, and its exit state.
    boxes: ByEntryState,
    /// By pinned register, by [`Held`]: the `PIN` and `UNPIN` stencils.
    pins: ByHeld,
    unpins: ByHeld,
    /// The `LINK` stencil: enters an exit's pinned link with the pinned registers live.
    link: Option<usize>,
    /// The exit stubs of bodies with pinned locals in one stencil (`LINK`, `UNPIN`s,
    /// `EXIT_TRACE`: vm/templates/cached/exit.c), by [`exit::slot`].
    exit_pinned: [Option<usize>; exit::SLOTS],
    /// The members on pinned float registers, their `PIN_FLOAT`s and `UNPIN_FLOAT`s.
    float_pinned: pinned_float::FloatPinned,
    /// By op id: its members compiled for one depth operand (`COPY`), as (kind, entry
    /// state, depth, stencil, exit state). Empty for almost every op, so that the lowering's
    /// look-up costs one length test there (it was a hash of four fields per micro-op).
    at_depth: Vec<Vec<DepthMember>>,
    /// By stencil index (every stencil of the set): what a cached member is.
    facts: Vec<MemberFacts>,
    /// The selectors of the set's `vm_*` families ([`KitOp::family`]).
    selectors: Vec<cpjit_runtime::Selector<'static>>,
}

/// By pinned register, by [`Held`]: a stencil.
type ByHeld = [[Option<usize>; Held::COUNT]; PIN_REGS];

/// A member compiled for one depth operand: (kind, entry state, depth, stencil, exit state).
type DepthMember = (Kind, CacheState, u64, usize, CacheState);

/// A cached member's op in the kit's selection tables: the family's selector (index into
/// [`CachedOps::selectors`]) and the op's id there: the lowering takes the member the
/// kit's table picks for the state it tracks, and its checks compare the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KitOp {
    pub family: u16,
    pub op: u16,
    /// Whether the family has float slots: its states are the kit's float-slot numbers
    /// ([`CacheState::kit_state`]).
    pub floats: bool,
}

/// What a cached stencil is (all `None` for an uncached one).
#[derive(Clone, Copy, Debug, Default)]
struct MemberFacts {
    /// The kit's op whose member it is (in the state it is entered in).
    kit_op: Option<KitOp>,
    /// (entry, exit) state.
    states: Option<(CacheState, CacheState)>,
    /// The op it runs (none for `SPILL`, `BOX`, `PIN`, `UNPIN`, `LINK`).
    op: Option<u32>,
    /// The pinned register a member on a pinned local runs on, and how that register holds
    /// its local.
    pinned: Option<(usize, Held)>,
    /// The depth operand a member compiled for one depth takes.
    depth: Option<u64>,
    /// The pinned float register a member on a pinned float local runs on.
    float_pinned: Option<usize>,
}

/// A pinned family member's register: which, how it holds its local, and which of the op's
/// operands is that local (`PINNED_OPERAND`, 0 unless the family says).
#[derive(Clone, Copy, Debug)]
struct PinnedRegister {
    register: usize,
    held: Held,
    operand: usize,
}

impl CachedOps {
    /// Reads the families of `set`; a set without them has no cached ops (every trace then
    /// stays in state 0).
    pub fn of_set(set: &'static StencilSet<'static>) -> Result<CachedOps, String> {
        let mut out = CachedOps {
            members: vec![[[None; STATES]; Kind::COUNT]; ops::OPS.len()],
            pinned: vec![None; ops::OPS.len()],
            at_depth: vec![Vec::new(); ops::OPS.len()],
            facts: vec![MemberFacts::default(); set.stencils.len()],
            ..CachedOps::default()
        };
        for family in cpjit_vm_stencils::families(set)
            .iter()
            .filter(|f| f.name.starts_with("vm_"))
        {
            let at = format!("stencil set {}: family {}", set.target, family.name);
            let p = Params::of(family, &at)?;
            let number = |param: usize, v: usize, limit: usize| -> Result<usize, String> {
                let text = family.params[param].values[v];
                text.parse::<usize>()
                    .ok()
                    .filter(|&n| n < limit)
                    .ok_or_else(|| {
                        format!(
                            "{at}: {} `{text}` is not 0 to {}",
                            family.params[param].name,
                            limit - 1
                        )
                    })
            };
            // The kit's selection tables for the family (generated from its `cached`
            // declaration): the VM resolves each of its ops to the kit's op once, here, and
            // takes the member the kit picks for each entry state.
            let table = family.cached.ok_or_else(|| {
                format!(
                    "{at}: no selection tables (`cached` in vm/templates/manifest.toml): the kit \
                     picks the VM's members from them"
                )
            })?;
            if (table.entry_param as usize, table.exit_param as usize) != (p.entry, p.exit) {
                return Err(format!(
                    "{at}: the selection tables' state parameters are not IN and OUT"
                ));
            }
            float::check_states(&at, table.states, p.floats.is_some())?;
            let selector =
                cpjit_runtime::Selector::new(family).map_err(|e| format!("{at}: {e}"))?;
            let slot = u16::try_from(out.selectors.len())
                .map_err(|_| format!("{at}: more than 65535 cached families"))?;
            out.selectors.push(selector);
            // Every combination of the optional parameters' values.
            let optional: [Option<usize>; OPTIONAL] = [
                p.pinned,
                p.pinned_scaled,
                p.scaled,
                p.depth,
                p.pinned_operand,
                p.floats,
                p.pinned_float,
            ];
            let combos = value_combinations(family, &optional);
            let flag = |param: Option<usize>, v: usize| -> Result<bool, String> {
                param.map_or(Ok(false), |param| Ok(number(param, v, 2)? == 1))
            };
            for (e, element) in family.elements.iter().enumerate() {
                for combo in &combos {
                    let (values, n) = p.kit_values(family, &optional, combo);
                    let op = table.op(family, e, &values[..n]).ok_or_else(|| {
                        format!("{at}: {element} {values:?}: no op in the selection tables")
                    })?;
                    let [r, ps, sc, d, po, fl, pf] = *combo;
                    let float_register = p
                        .pinned_float
                        .map(|param| number(param, pf, crate::pinning::FLOAT_PIN_REGS))
                        .transpose()?;
                    let scaled = p.scaled.map_or(Ok(0), |param| number(param, sc, 3))?;
                    let kind = match (scaled, flag(p.floats, fl)?) {
                        (0, false) => Kind::Boxed,
                        (1, false) => Kind::Scaled,
                        (_, false) => Kind::Wide,
                        (0, true) => Kind::Float,
                        _ => return Err(format!("{at}: {element}: both SCALED and FLOATS")),
                    };
                    for s in 0..table.states {
                        // The member the kit pushes for the op entered in state s (a
                        // transition through glue is no member entered there).
                        let t = table.transition(op, s);
                        if t.member == cpjit_model::Family::NONE
                            || t.glue != cpjit_model::Family::NONE
                        {
                            continue;
                        }
                        let stencil = t.member as usize;
                        let states = float::states_of_kit(s, t.exit, kind, *element == "BOX");
                        let Some(states) = states.filter(|_| stencil < out.facts.len()) else {
                            return Err(format!(
                                "{at}: {element}: the selection tables name stencil {stencil} \
                                 from state {s} to {}, which the VM does not cache (the set \
                                 has {} stencils)",
                                t.exit,
                                out.facts.len()
                            ));
                        };
                        let register = match p.pinned {
                            Some(param) => Some(PinnedRegister {
                                register: number(param, r, PIN_REGS)?,
                                held: match p.pinned_scaled {
                                    Some(param) => {
                                        Held::from_index(number(param, ps, Held::COUNT)?)
                                            .unwrap_or_default()
                                    }
                                    None => Held::Boxed,
                                },
                                operand: match p.pinned_operand {
                                    Some(param) => number(param, po, 2)?,
                                    None => 0,
                                },
                            }),
                            None if p.pinned_operand.is_some() => {
                                return Err(format!(
                                    "{at}: PINNED_OPERAND without PINNED (which register?)"
                                ))
                            }
                            None => None,
                        };
                        match (p.depth, float_register) {
                            (Some(param), _) => {
                                let depth = number(param, d, 1 << 16)? as u64;
                                out.add_at_depth(&at, element, stencil, states, kind, depth)?
                            }
                            (None, Some(q)) if register.is_none() => {
                                out.add_pinned_float(&at, element, stencil, states, kind, q)?
                            }
                            (None, Some(_)) => {
                                return Err(format!("{at}: both PINNED and PINNED_FLOAT"))
                            }
                            (None, None) => {
                                out.add(&at, element, stencil, states, kind, register)?
                            }
                        }
                        out.facts[stencil].kit_op = Some(KitOp {
                            family: slot,
                            op,
                            floats: p.floats.is_some(),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// Records a member compiled for one value of its op's first operand, a depth (`COPY`).
    fn add_at_depth(
        &mut self,
        at: &str,
        element: &str,
        stencil: usize,
        (entry, exit): (CacheState, CacheState),
        kind: Kind,
        depth: u64,
    ) -> Result<(), String> {
        let op = ops::by_name(element)
            .filter(|&op| ops::info(op).operands.first() == Some(&ops::OperandKind::Count))
            .ok_or_else(|| format!("{at}: element {element} has no depth operand"))?;
        self.facts[stencil] = MemberFacts {
            states: Some((entry, exit)),
            op: Some(op),
            depth: Some(depth),
            ..MemberFacts::default()
        };
        let members = &mut self.at_depth[op as usize];
        match members
            .iter_mut()
            .find(|m| (m.0, m.1, m.2) == (kind, entry, depth))
        {
            Some(m) => (m.3, m.4) = (stencil, exit),
            None => members.push((kind, entry, depth, stencil, exit)),
        }
        Ok(())
    }

    /// Records one member (see [`CachedOps::of_set`]).
    fn add(
        &mut self,
        at: &str,
        element: &str,
        stencil: usize,
        (entry, exit): (CacheState, CacheState),
        kind: Kind,
        register: Option<PinnedRegister>,
    ) -> Result<(), String> {
        self.facts[stencil].states = Some((entry, exit));
        match (element, register) {
            (
                "PIN" | "UNPIN",
                Some(PinnedRegister {
                    register: r,
                    held: ps,
                    operand: 0,
                }),
            ) => {
                if (entry, exit) != (CacheState::EMPTY, CacheState::EMPTY) {
                    return Err(format!(
                        "{at}: {element} of register {r} from state {} (PIN and UNPIN run with \
                         nothing cached)",
                        entry
                    ));
                }
                let table = if element == "PIN" {
                    &mut self.pins
                } else {
                    &mut self.unpins
                };
                table[r][ps.index()] = Some(stencil);
            }
            (_, None) if element == "LINK" || element.starts_with("EXIT_PINNED_") => {
                runs_with_nothing_cached(at, element, (entry, exit))?;
                match exit::slot(element) {
                    None if element == "LINK" => self.link = Some(stencil),
                    Some(slot) => {
                        self.exit_pinned[slot] = Some(stencil);
                        self.facts[stencil].op = Some(ops::op::EXIT_TRACE);
                    }
                    None => {
                        return Err(format!(
                            "{at}: {element} is no EXIT_PINNED_WIDE, nor EXIT_PINNED_ with B \
                             (boxed) or S (scaled) for each of one or two pinned registers"
                        ))
                    }
                }
            }
            ("SPILL", None) => {
                if exit != CacheState::EMPTY {
                    return Err(format!(
                        "{at}: SPILL from {} ends in {}, not 0",
                        entry, exit
                    ));
                }
                self.spills[entry.index()] = Some(stencil);
            }
            ("BOX", None) => {
                if entry.kind() == Kind::Boxed || exit != CacheState::boxed(entry.depth()) {
                    return Err(format!(
                        "{at}: BOX from {} to {} (it boxes scaled registers or float slots in \
                         place)",
                        entry, exit
                    ));
                }
                self.boxes[entry.index()] = Some((stencil, exit));
            }
            (
                _,
                Some(PinnedRegister {
                    register: r,
                    held: ps,
                    operand,
                }),
            ) => {
                let op = pinned_op(at, element, operand)?;
                let by_pinned = self.pinned[op as usize].get_or_insert_with(|| {
                    Box::new([[[[None; STATES]; Kind::COUNT]; Held::COUNT]; PIN_REGS])
                });
                by_pinned[r][ps.index()][kind.index()][entry.index()] = Some((stencil, exit));
                self.facts[stencil].pinned = Some((r, ps));
                self.facts[stencil].op = Some(op);
            }
            (_, None) => {
                let op = ops::by_name(element)
                    .ok_or_else(|| format!("{at}: element {element} is not a VM op"))?;
                self.members[op as usize][kind.index()][entry.index()] = Some((stencil, exit));
                self.facts[stencil].op = Some(op);
            }
        }
        Ok(())
    }

    /// The member of op `op` entered in state `entry` that keeps its registers as `entry`
    /// does (boxed from state 0): its stencil and exit state.
    pub fn member(&self, op: u32, entry: CacheState) -> Option<(usize, CacheState)> {
        self.member_as(op, entry, entry.kind())
    }

    /// The member of op `op` entered in state `entry` whose registers hold `kind`: `kind`
    /// must be `entry`'s unless nothing is cached on entry.
    pub fn member_as(&self, op: u32, entry: CacheState, kind: Kind) -> Option<(usize, CacheState)> {
        if !entry.fits(kind) {
            return None;
        }
        self.members.get(op as usize)?[kind.index()][entry.index()]
    }

    /// The member of op `op` compiled for operand `depth`, entered in state `entry` with
    /// registers of kind `kind` (as for [`CachedOps::member_as`]).
    pub fn member_at_depth(
        &self,
        op: u32,
        entry: CacheState,
        kind: Kind,
        operand: u64,
    ) -> Option<(usize, CacheState)> {
        let members = self.at_depth.get(op as usize)?;
        if members.is_empty() || !entry.fits(kind) {
            return None;
        }
        members
            .iter()
            .find(|m| (m.0, m.1, m.2) == (kind, entry, operand))
            .map(|m| (m.3, m.4))
    }

    /// The operand a member compiled for one depth takes (`None`: any).
    pub fn depth_of(&self, stencil: usize) -> Option<u64> {
        self.facts.get(stencil)?.depth
    }

    /// The kit's op of cached member `stencil` (`None` for an uncached stencil).
    #[inline]
    pub fn kit_op(&self, stencil: usize) -> Option<KitOp> {
        self.facts.get(stencil)?.kit_op
    }

    /// The selectors of the set's `vm_*` families, by [`KitOp::family`].
    pub fn selectors(&self) -> &[cpjit_runtime::Selector<'static>] {
        &self.selectors
    }

    /// The (entry, exit) state of stencil `stencil`: both empty for an uncached one.
    pub fn states_of(&self, stencil: usize) -> (CacheState, CacheState) {
        self.facts
            .get(stencil)
            .and_then(|f| f.states)
            .unwrap_or((CacheState::EMPTY, CacheState::EMPTY))
    }

    /// Whether `stencil` is a register-cached member (it passes the pinned registers on).
    pub fn is_cached(&self, stencil: usize) -> bool {
        self.facts.get(stencil).is_some_and(|f| f.states.is_some())
    }

    /// The op a cached member runs (none for `SPILL`, `BOX`, `PIN`, `UNPIN`, `LINK`).
    pub fn op_of(&self, stencil: usize) -> Option<u32> {
        self.facts.get(stencil)?.op
    }

    /// The member of op `op` on the local in pinned register `register` (holding it as
    /// `held`), entered in state `entry` with registers of kind `kind` (as for
    /// [`CachedOps::member_as`]): its stencil and exit state.
    pub fn pinned_member(
        &self,
        op: u32,
        register: usize,
        held: Held,
        entry: CacheState,
        kind: Kind,
    ) -> Option<(usize, CacheState)> {
        if !entry.fits(kind) {
            return None;
        }
        self.pinned.get(op as usize)?.as_deref()?.get(register)?[held.index()][kind.index()]
            [entry.index()]
    }

    /// Whether op `op` has members on a pinned local at all (otherwise
    /// [`CachedOps::pinned_member`] finds none for it, whatever it is asked).
    pub fn has_pinned(&self, op: u32) -> bool {
        self.pinned.get(op as usize).is_some_and(Option::is_some)
    }

    /// The pinned register a member on a pinned local runs on.
    pub fn pinned_register_of(&self, stencil: usize) -> Option<usize> {
        self.facts.get(stencil)?.pinned.map(|(r, _)| r)
    }

    /// The pinned register a member on a pinned local runs on, and how it takes the local.
    pub fn pinned_register_and_held_of(&self, stencil: usize) -> Option<(usize, Held)> {
        self.facts.get(stencil)?.pinned
    }

    /// The stencil that spills every cached value from state `entry`.
    pub fn spill(&self, entry: CacheState) -> Option<usize> {
        *self.spills.get(entry.index())?
    }

    /// The stencil that boxes the scaled registers or float slots of state `entry`, and its
    /// exit state.
    pub fn boxing(&self, entry: CacheState) -> Option<(usize, CacheState)> {
        *self.boxes.get(entry.index())?
    }

    /// The stencil that loads pinned register `register` from its local (to hold it as
    /// `held`).
    pub fn pin(&self, register: usize, held: Held) -> Option<usize> {
        self.pins.get(register)?[held.index()]
    }

    /// The stencil that writes pinned register `register`, holding its local as `held`, back
    /// to the local (boxing it).
    pub fn unpin(&self, register: usize, held: Held) -> Option<usize> {
        self.unpins.get(register)?[held.index()]
    }

    /// The stencil that enters an exit's pinned link slot (its operand) with the pinned
    /// registers live, or goes on if the slot is empty.
    pub fn link(&self) -> Option<usize> {
        self.link
    }

    /// Whether `stencil` is the `LINK` stencil.
    pub fn is_link(&self, stencil: usize) -> bool {
        self.link == Some(stencil)
    }

    /// The pinned register, its local's representation, of a `PIN` stencil.
    pub fn pin_register_of(&self, stencil: usize) -> Option<(usize, Held)> {
        find_register(&self.pins, stencil)
    }

    /// The pinned register, its local's representation, of an `UNPIN` stencil.
    pub fn unpin_register_of(&self, stencil: usize) -> Option<(usize, Held)> {
        find_register(&self.unpins, stencil)
    }
}

/// An error unless a member of `element` (a copy, a link, a whole exit stub) is entered and
/// left with nothing cached.
fn runs_with_nothing_cached(
    at: &str,
    element: &str,
    (entry, exit): (CacheState, CacheState),
) -> Result<(), String> {
    if (entry, exit) == (CacheState::EMPTY, CacheState::EMPTY) {
        return Ok(());
    }
    Err(format!(
        "{at}: {element} from state {entry} to {exit} (it runs with nothing cached)"
    ))
}

/// The op of a family element compiled with its operand `operand` in a pinned register: an
/// error unless the VM runs that op on a pinned local and takes the same operand from the
/// register (the template reads the register for the operand the family names, the
/// lowering for the one [`pinning::pinned_operand`] says: they must be the same).
fn pinned_op(at: &str, element: &str, operand: usize) -> Result<u32, String> {
    let (op, known) = ops::by_name(element)
        .and_then(|op| Some((op, pinning::pinned_operand(op)?)))
        .ok_or_else(|| {
            format!("{at}: element {element} is not a VM op that runs on a pinned local")
        })?;
    if operand != known {
        return Err(format!(
            "{at}: {element} is compiled with its operand {operand} pinned (PINNED_OPERAND), \
             but the VM pins its operand {known} (vm/src/pinning.rs, `pinned_operand`)"
        ));
    }
    Ok(op)
}

fn find_register(table: &ByHeld, stencil: usize) -> Option<(usize, Held)> {
    (0..PIN_REGS).find_map(|r| {
        (0..Held::COUNT)
            .find(|&s| table[r][s] == Some(stencil))
            .and_then(|s| Some((r, Held::from_index(s)?)))
    })
}

#[cfg(test)]
mod tests;
