//! Member selection for register-cached families: [`TraceBuilder::push_op`] pushes an *op*
//! of a family (a generated id, [`cpjit_model::CacheSelect`]) and the kit picks its member
//! for the cache state the previous instance left, inserting the family's glue (a spill or
//! fill) where the op has no member for that state. One table read per instance, no
//! allocation, no string work; names are resolved once, by [`Selector::op`]. A straight run
//! of ops goes in one call, [`TraceBuilder::push_ops`] (`run.rs`), which takes the same path
//! op by op for glue, jumps and refusals.
//!
//! **Jump targets and merge points** are [`Label`]s. A label's cache state is fixed by the
//! first edge that reaches it in push order: a jump from [`push_op`](TraceBuilder::push_op)
//! (the state the jumping member leaves) or the fall-through at [`bind`](TraceBuilder::bind)
//! (the current state). Every later edge ends in that state: a jumping op takes the member
//! that exits in it (or glue first, then such a member), the fall-through at `bind` gets
//! glue (unless the instance before it never continues: an exit or a return, after which
//! glue would be dead code); where the family has neither, the push is refused with
//! [`Error::Selection`]. A
//! label bound before it is used (a loop head) thus fixes its state at `bind`; a forward
//! label at its first jump. Jumps to labels not bound yet are patched when the label is
//! bound (a chain through the builder's targets, so no allocation per jump); finishing
//! with a used label unbound is refused.
//!
//! Instances pushed by stencil index ([`push`](TraceBuilder::push)) leave the tracked state
//! as it was: a client mixing both says what state its own members leave with
//! [`set_cache_state`](TraceBuilder::set_cache_state). Such a client may jump to labels too
//! (`push` and `continue_at` take [`Target::Label`]) and place them with
//! [`place`](TraceBuilder::place), which binds without selection; those targets are
//! resolved when the trace is finished, so `push` pays
//! nothing for them.

pub use super::run::RunTable;
use super::{InstanceId, Target, TraceBuilder};
use crate::error::try_grow;
use crate::Error;
use cpjit_model::{CacheSelect, Family, Transition};

/// A cached family ready for [`TraceBuilder::push_op`]: the family (of the JIT's stencil
/// set) and its selection tables.
#[derive(Clone, Copy, Debug)]
pub struct Selector<'f> {
    family: &'f Family<'f>,
    table: CacheSelect<'f>,
    /// The family's rows joined with a JIT's programs, if it came from
    /// [`RunTable::selector`].
    run: Option<&'f RunTable<'f>>,
}

impl<'f> Selector<'f> {
    /// The selector of `family`; refused if the family declares no cache state (`cached`
    /// in the manifest), so has no selection tables.
    pub fn new(family: &'f Family<'f>) -> Result<Selector<'f>, Error> {
        match family.cached {
            // Every state a row leads to is one of the table's (so `push_ops` need not check
            // the state it carries from op to op).
            Some(table)
                if table
                    .transitions
                    .iter()
                    .all(|t| t.exit < table.states && t.via < table.states) =>
            {
                Ok(Selector {
                    family,
                    table,
                    run: None,
                })
            }
            Some(table) => Err(Error::Selection {
                family: family.name.to_string(),
                reason: format!(
                    "its selection table leads to a state outside its {} states: the \
                     stencil crate is damaged; regenerate it (`cargo xtask build-stencils`)",
                    table.states
                ),
            }),
            None => Err(Error::Selection {
                family: family.name.to_string(),
                reason: "the family declares no cache state (`cached` in its manifest entry), \
                         so it has no selection tables: push its members by stencil index"
                    .to_string(),
            }),
        }
    }

    pub fn family(&self) -> &'f Family<'f> {
        self.family
    }

    pub fn table(&self) -> &CacheSelect<'f> {
        &self.table
    }

    /// The run table this selector carries (see [`RunTable`]).
    pub(crate) fn run_table(&self) -> Option<&'f RunTable<'f>> {
        self.run
    }

    /// This selector carrying `run` (built from it).
    pub(crate) fn with_run_table<'r>(&self, run: &'r RunTable<'r>) -> Selector<'r>
    where
        'f: 'r,
    {
        Selector {
            run: Some(run),
            ..*self
        }
    }

    /// The op of element `element` (a family whose only parameters are its state
    /// parameters); resolve names once per set, then push by id.
    pub fn op(&self, element: &str) -> Result<u16, Error> {
        self.op_with(element, &[])
    }

    /// The op of element `element` with the other parameters' values `values` (in the
    /// family's parameter order, state parameters left out), each as written in the
    /// manifest.
    pub fn op_with(&self, element: &str, values: &[&str]) -> Result<u16, Error> {
        let fail = |what: String| Error::Selection {
            family: self.family.name.to_string(),
            reason: what,
        };
        let e = self.family.element_index(element).ok_or_else(|| {
            fail(format!(
                "no element `{element}` (its elements: {})",
                self.family.elements.join(", ")
            ))
        })?;
        let t = &self.table;
        let others = self
            .family
            .params
            .iter()
            .enumerate()
            .filter(|&(p, _)| p != t.entry_param as usize && p != t.exit_param as usize);
        let mut indices = [0usize; 16];
        let mut n = 0;
        for ((_, param), value) in others.zip(values) {
            let v = param
                .values
                .iter()
                .position(|v| v == value)
                .ok_or_else(|| {
                    fail(format!(
                        "parameter `{}` has no value `{value}` (its values: {})",
                        param.name,
                        param.values.join(", ")
                    ))
                })?;
            *indices
                .get_mut(n)
                .ok_or_else(|| fail("too many parameters".into()))? = v;
            n += 1;
        }
        t.op(self.family, e, &indices[..n]).ok_or_else(|| {
            fail(format!(
                "element `{element}` with values {values:?}: give one value per parameter \
                 other than the state parameters"
            ))
        })
    }

    /// `op`'s name for errors (`element` or `element(values)`).
    pub(crate) fn op_name(&self, op: u16) -> String {
        let combos = self.table.combos.max(1) as usize;
        let element = self
            .family
            .elements
            .get(op as usize / combos)
            .copied()
            .unwrap_or("?");
        if combos == 1 {
            element.to_string()
        } else {
            format!("{element} (combination {})", op as usize % combos)
        }
    }

    pub(crate) fn error(&self, reason: String) -> Error {
        Error::Selection {
            family: self.family.name.to_string(),
            reason,
        }
    }
}

/// A jump target whose instance may not be pushed yet: made by [`TraceBuilder::label`],
/// placed by [`TraceBuilder::bind`], used as [`Target::Label`] (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(pub(crate) u32);

/// A label's state in the builder.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LabelSlot {
    /// The instance it names (relative to the trace), [`UNSET`] until bound.
    instance: u32,
    /// Its fixed cache state, [`UNFIXED`] until an edge reaches it.
    state: u8,
    /// The last slot in the targets vector that jumps to it while unbound ([`UNSET`]:
    /// none); each such slot holds [`Target::Label`] of the previous one.
    chain: u32,
}

const UNSET: u32 = u32::MAX;
const UNFIXED: u8 = u8::MAX;

/// The most jump targets an op of a cached family may take.
const MAX_TARGETS: usize = 4;

impl TraceBuilder<'_, '_> {
    /// The cache state (values cached in registers) the last instance left, as tracked by
    /// [`push_op`](TraceBuilder::push_op): 0 at the start of a trace.
    pub fn cache_state(&self) -> u8 {
        self.cache_state
    }

    /// Says which cache state the instances pushed so far leave (after members a client
    /// pushed itself by stencil index).
    pub fn set_cache_state(&mut self, state: u8) {
        self.cache_state = state;
    }

    /// Instance `id` as recorded: its stencil index (the member a selection picked, or
    /// the glue), operands and targets (jumps to labels bound since are instances); for a
    /// client that selects once and stitches the same trace many times, or checks choices.
    pub fn instance(&self, id: InstanceId) -> Option<(usize, &[u64], &[Target])> {
        let at = self.start as usize + id.index();
        let inst = self.instances.get(at)?;
        let p = &self.jit.programs[inst.stencil as usize];
        let (o, t) = (inst.operands as usize, inst.targets as usize);
        Some((
            inst.stencil as usize,
            &self.operands[o..o + p.operands as usize],
            &self.targets[t..t + p.targets as usize],
        ))
    }

    /// A new label, not bound yet.
    // Not inline: inlined into the bench's loop it cut 0.3 % of the instructions and cost
    // 2-6 % of the time, straight-10 (which makes no label) included (11 alternated pairs).
    pub fn label(&mut self) -> Result<Label, Error> {
        if self.labels.len() == self.labels.capacity() {
            try_grow(&mut self.labels, 1, "the trace's labels")?;
        }
        self.labels.push(LabelSlot {
            instance: UNSET,
            state: UNFIXED,
            chain: UNSET,
        });
        Ok(Label(self.labels.len() as u32 - 1))
    }

    /// Binds `label` to the next instance pushed. The fall-through into it ends in the
    /// label's state if an earlier jump fixed one (glue of `selector`'s family is pushed
    /// if needed), else fixes it to the current state. Refused for a label already bound
    /// or of another builder, or when no glue leads to the label's state.
    // Inline, the commonest case (an open label whose state is unfixed or the current one:
    // no glue) first; the rest out of line.
    #[inline]
    pub fn bind(&mut self, selector: &Selector<'_>, label: Label) -> Result<(), Error> {
        match self.labels.get(label.0 as usize) {
            Some(&slot)
                if slot.instance == UNSET
                    && (slot.state == UNFIXED || slot.state == self.cache_state) =>
            {
                self.attach(label, slot);
                Ok(())
            }
            _ => self.bind_rest(selector, label),
        }
    }

    /// What [`bind`](TraceBuilder::bind)'s fast path does not take: glue, refusals.
    #[inline(never)]
    fn bind_rest(&mut self, selector: &Selector<'_>, label: Label) -> Result<(), Error> {
        let slot = self.open_slot(label).map_err(|e| selector.error(e))?;
        // After an op that never continues (an exit, a return), nothing falls through into
        // the label: its state needs no glue, and glue there would be dead code.
        let reachable = self.last_instance_continues();
        if reachable && slot.state != UNFIXED && slot.state != self.cache_state {
            let glue = selector.table.glue_op(0).map_or(Family::NONE, |g| {
                selector.table.member(g, self.cache_state, slot.state)
            });
            if glue == Family::NONE {
                return Err(selector.error(format!(
                    "label {}: a jump fixed its state to {} cached values, and the fall-through \
                     into it leaves {}, with no glue member between them (declare `cached.glue`)",
                    label.0, slot.state, self.cache_state
                )));
            }
            self.push(glue as usize, &[], &[])?;
        }
        self.attach(label, slot);
        Ok(())
    }

    /// Binds `label` to the next instance pushed, for a client that pushes members itself
    /// ([`push`](TraceBuilder::push) with [`Target::Label`]s): no selection, no glue. Its
    /// state (for [`push_op`](TraceBuilder::push_op) jumps to it, if the client mixes both)
    /// is the tracked state ([`set_cache_state`](TraceBuilder::set_cache_state)). Refused
    /// with [`Error::Label`] for a label already bound or of another builder, and when a
    /// `push_op` jump fixed its state to another than the one falling through (bind it with
    /// [`bind`](TraceBuilder::bind), which pushes glue, instead).
    pub fn place(&mut self, label: Label) -> Result<(), Error> {
        let fail = |reason: String| Error::Label {
            label: label.0,
            reason,
        };
        let slot = self.open_slot(label).map_err(fail)?;
        let reachable = self.last_instance_continues();
        if reachable && slot.state != UNFIXED && slot.state != self.cache_state {
            return Err(fail(format!(
                "a jump pushed by op fixed its state to {} cached values, and the fall-through \
                 into it leaves {}: bind it with `bind(&selector, label)`, which pushes glue",
                slot.state, self.cache_state
            )));
        }
        self.attach(label, slot);
        Ok(())
    }

    /// `label`'s slot if it is a label of this trace not bound yet; else why not.
    fn open_slot(&self, label: Label) -> Result<LabelSlot, String> {
        match self.labels.get(label.0 as usize) {
            Some(s) if s.instance == UNSET => Ok(*s),
            Some(_) => Err(format!("label {} is bound twice", label.0)),
            None => Err(format!(
                "label {} is not a label of this trace ({} made)",
                label.0,
                self.labels.len()
            )),
        }
    }

    /// Binds `label` (its `slot`, open) to the next instance: patches the jumps
    /// [`push_op`](TraceBuilder::push_op) chained to it, and fixes its state (the one a
    /// jump fixed, else the current one) as the current state.
    #[inline]
    fn attach(&mut self, label: Label, slot: LabelSlot) {
        let state = if slot.state == UNFIXED {
            self.cache_state
        } else {
            slot.state
        };
        let instance = self.len() as u32;
        // Patch every jump that reached it while unbound.
        let mut at = slot.chain;
        while at != UNSET {
            let next = match self.targets[at as usize] {
                Target::Label(Label(next)) => next,
                _ => UNSET,
            };
            self.targets[at as usize] = Target::Instance(InstanceId(instance));
            self.unbound -= 1;
            at = next;
        }
        self.labels[label.0 as usize] = LabelSlot {
            instance,
            state,
            chain: UNSET,
        };
        self.cache_state = state;
    }

    /// Notes whether `targets` has a [`Target::Label`] (for `finish`, see
    /// [`labels_given`](TraceBuilder::labels_given)); returns whether it has an address.
    #[cold]
    #[inline(never)]
    pub(super) fn note_labels(&mut self, targets: &[Target]) -> bool {
        self.labels_given |= targets.iter().any(|t| matches!(t, Target::Label(_)));
        targets.iter().any(|t| matches!(t, Target::Address(_)))
    }

    /// At the end of a trace: refuses jumps [`push_op`](TraceBuilder::push_op) chained to
    /// labels never bound, then resolves the labels given to [`push`](TraceBuilder::push)
    /// and [`continue_at`](TraceBuilder::continue_at) (every `Target::Label` left in the
    /// trace's targets: `push_op`'s chains are all patched once their labels are bound) to
    /// their instances, refusing those never bound. Nothing to do in a trace without labels.
    pub(crate) fn resolve_labels(&mut self) -> Result<(), Error> {
        self.check_labels()?;
        // (A trace whose labels all went through `push_op` has none left: the scan was 58
        // instructions per trace on the bench's straight-100.)
        if self.labels.is_empty() || !self.labels_given {
            return Ok(());
        }
        let from = self
            .instances
            .get(self.start as usize)
            .map_or(self.targets.len(), |i| i.targets as usize);
        let labels = &self.labels;
        let mut unbound = 0;
        let mut resolve = |t: &mut Target| {
            if let Target::Label(l) = *t {
                match labels.get(l.0 as usize) {
                    Some(s) if s.instance != UNSET => *t = Target::Instance(InstanceId(s.instance)),
                    _ => unbound += 1,
                }
            }
        };
        self.targets[from..].iter_mut().for_each(&mut resolve);
        if let Some(t) = self.continuation.as_mut() {
            resolve(t);
        }
        match unbound {
            0 => Ok(()),
            jumps => Err(Error::UnboundLabel { jumps }),
        }
    }

    /// Whether execution can reach the next instance pushed from the one before it: true at
    /// the start of a trace and after a stencil that continues (a continuation hole, or
    /// one whose trailing jump was elided); false after one that only returns or jumps.
    fn last_instance_continues(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        match self.instances.last() {
            Some(last) => self.programs[last.stencil as usize].continues,
            None => true,
        }
    }

    /// Pushes op `op` of `selector`'s family: the member for the current cache state
    /// (after glue where the family needs it), with `operands` and `targets` as for
    /// [`push`](TraceBuilder::push); returns the op's instance (not the glue's). Targets
    /// may be [`Target::Label`]s (see the module doc for their states); other targets
    /// are taken as given, the state there being the client's business.
    #[inline(always)]
    pub fn push_op(
        &mut self,
        selector: &Selector<'_>,
        op: u16,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        let t = selector.table.transition(op, self.cache_state);
        // Without glue and labels (jumps to instances or addresses, the state there being
        // the client's business) the member is pushed as it is: one table row and a push.
        let labels = targets.iter().any(|t| matches!(t, Target::Label(_)));
        let plain = t.glue == Family::NONE && t.member != Family::NONE;
        if !labels && plain {
            let id = self.push(t.member as usize, operands, targets)?;
            self.cache_state = t.exit;
            return Ok(id);
        }
        if let ([Target::Label(label)], true) = (targets, plain) {
            return self.push_jump(selector, op, t, operands, *label);
        }
        self.push_op_rest(selector, op, t, operands, targets)
    }

    /// [`push_op`](TraceBuilder::push_op) of a member without glue whose one target is
    /// `label` (the commonest jump): pushed as it is when the label's state is unfixed or
    /// the member's exit state, its target then rewritten (the label's instance, or a link
    /// of its chain); anything else through `push_op_rest`. Small and out of line: through
    /// `push_op_rest`, whose frame its refusals and glue make large, such a jump cost
    /// about 200 instructions (callgrind, the bench's straight-1000: 14.5 per instance).
    #[inline(never)]
    fn push_jump(
        &mut self,
        selector: &Selector<'_>,
        op: u16,
        t: Transition,
        operands: &[u64],
        label: Label,
    ) -> Result<InstanceId, Error> {
        let fits = |s: &LabelSlot| s.state == UNFIXED || s.state == t.exit;
        if !self.labels.get(label.0 as usize).is_some_and(fits) {
            return self.push_op_rest(selector, op, t, operands, &[Target::Label(label)]);
        }
        let at = self.targets.len();
        let id = self.push_noting::<false>(t.member as usize, operands, &[Target::Label(label)])?;
        self.link(at, label, t.exit);
        self.cache_state = t.exit;
        Ok(id)
    }

    /// Rewrites the target at `at` (pushed as `label`, whose state is unfixed or `exit`) to
    /// the label's instance if it is bound, else to a link of its chain (the label's state
    /// then fixed to `exit`).
    #[inline(always)]
    fn link(&mut self, at: usize, label: Label, exit: u8) {
        let slot = &mut self.labels[label.0 as usize];
        self.targets[at] = if slot.instance != UNSET {
            Target::Instance(InstanceId(slot.instance))
        } else {
            slot.state = exit;
            let chained = Target::Label(Label(slot.chain));
            slot.chain = at as u32;
            self.unbound += 1;
            chained
        };
    }

    /// What [`push_op`](TraceBuilder::push_op)'s fast path does not take: glue, labels,
    /// refusals.
    // The member is pushed with its targets as given (a label is no address, so `push`
    // counts it as it counts an instance), then each label target is rewritten in place:
    // no copy of the targets (measured: 214 instructions per op with a forward jump when
    // they were copied and resolved first).
    #[inline(never)]
    fn push_op_rest(
        &mut self,
        selector: &Selector<'_>,
        op: u16,
        t: Transition,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        if t.member == Family::NONE || targets.len() > MAX_TARGETS {
            return Err(self.op_refused(selector, op, t.member == Family::NONE, targets.len()));
        }
        // The state every label target fixes (all must agree).
        let mut want = UNFIXED;
        for target in targets {
            if let Target::Label(l) = *target {
                let state = match self.labels.get(l.0 as usize) {
                    Some(slot) => slot.state,
                    None => {
                        return Err(
                            selector.error(format!("label {} is not a label of this trace", l.0))
                        )
                    }
                };
                if state != UNFIXED {
                    if want != UNFIXED && want != state {
                        return Err(selector.error(format!(
                            "op `{}` jumps to labels of different cache states ({want} and \
                             {state})",
                            selector.op_name(op),
                        )));
                    }
                    want = state;
                }
            }
        }
        // The glue (if any) and member that end in `want`.
        let (glue, member, exit) = if want == UNFIXED || want == t.exit {
            (t.glue, t.member, t.exit)
        } else {
            self.towards(selector, op, want)?
        };
        if glue != Family::NONE {
            self.push(glue as usize, &[], &[])?;
        }
        let first = self.targets.len();
        let id = self.push_noting::<false>(member as usize, operands, targets)?;
        // Labels bound already become instances; unbound ones join their chains (their
        // jumps' slots are known now).
        for (k, target) in targets.iter().enumerate() {
            if let Target::Label(l) = *target {
                self.link(first + k, l, exit);
            }
        }
        self.cache_state = exit;
        Ok(id)
    }

    /// Why `op` cannot be pushed in the current state (it has no member there, `no_member`),
    /// or else with `targets` targets.
    #[cold]
    fn op_refused(
        &self,
        selector: &Selector<'_>,
        op: u16,
        no_member: bool,
        targets: usize,
    ) -> Error {
        let table = &selector.table;
        let state = self.cache_state;
        selector.error(if !no_member {
            format!(
                "op `{}` with {targets} targets: pushed by op, a member takes at most \
                 {MAX_TARGETS}",
                selector.op_name(op),
            )
        } else if (op as usize) >= table.ops() {
            format!("op {op} is not an op of the family ({} ops)", table.ops())
        } else if state >= table.states {
            format!(
                "the cache state is {state}, but the family's states are 0 to {}",
                table.states - 1
            )
        } else {
            format!(
                "op `{}` has no member entered with {state} cached values, and no glue \
                 leads to a state that has one",
                selector.op_name(op)
            )
        })
    }

    /// The glue (or [`Family::NONE`]) and member of `op` that leave state `want` from the
    /// current state, and `want`: a jump to a label whose state an earlier edge fixed.
    #[cold]
    fn towards(&self, selector: &Selector<'_>, op: u16, want: u8) -> Result<(u16, u16, u8), Error> {
        let table = &selector.table;
        let state = self.cache_state;
        let direct = table.member(op, state, want);
        if direct != Family::NONE {
            return Ok((Family::NONE, direct, want));
        }
        let via = table.glue_op(op).and_then(|g| {
            (0..table.states).find_map(|v| {
                let (moved, m) = (table.member(g, state, v), table.member(op, v, want));
                (moved != Family::NONE && m != Family::NONE).then_some((moved, m))
            })
        });
        via.map(|(moved, m)| (moved, m, want)).ok_or_else(|| {
            selector.error(format!(
                "op `{}` entered with {state} cached values must leave {want} (the state of \
                 the label it jumps to), and the family has no member or glue that does",
                selector.op_name(op)
            ))
        })
    }
}
