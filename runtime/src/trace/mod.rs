//! The trace room: building a trace ([`TraceBuilder`]), or many at once ([`TraceBatch`]),
//! stitching it ([`stitch`]: the stages *sizes*, *allocate*, *write* (`stitch/write.rs`)
//! and *publish*), its typed entries ([`entry`]) and the finished, executable result
//! ([`Trace`]). It uses the [`Jit`] (the set's compiled patch programs, the arena, the
//! options) and nothing of the debug support, which registers finished traces through
//! [`Jit::register_trace`] and is kept by a trace only as [`Registrations`].

mod batch;
pub(crate) mod entry;
mod run;
pub(crate) mod select;
mod spare;
pub(crate) mod stitch;

#[cfg(all(test, target_arch = "x86_64"))]
mod operand_tests;
#[cfg(test)]
mod stitch_tests;
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod window_tests;

/// An address no arena of this process can reach directly (the tests' "far" helper, whose
/// calls need a veneer; it is never called): 1 TiB from this process's code, whatever its
/// load address. A fixed low address such as 0x10 is not: a static non-PIE binary
/// (musl's default on AArch64) is loaded near 0x400000, and an arena placed near it is
/// within an AArch64 branch's ±128 MiB of address 0.
#[cfg(test)]
fn out_of_reach() -> u64 {
    (out_of_reach as fn() -> u64 as usize as u64) ^ (1 << 40)
}

use crate::arena::{Arena, Block};
use crate::error::try_grow;
use crate::jit::{Jit, ShimFacts};
use crate::program::Program;
use crate::Error;
pub use batch::TraceBatch;
use entry::{Entry, EntrySignature};
use select::{Label, LabelSlot};
use spare::Spare;
pub(crate) use spare::{reserve_spare, SPARE_LIMIT};
use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::ops::Range;
use stitch::Layout;

/// What the debug support keeps for a finished trace: its registrations with debuggers and
/// profilers, released when the trace is dropped (before its code is trapped). The trace
/// knows only this trait and the publish stage calls the debug support through the [`Jit`]
/// ([`Jit::register_trace`]), so the debug support depends on the trace, not the other
/// way round.
pub(crate) trait Registrations: std::fmt::Debug + Send + Sync {
    /// The process-wide number the trace's symbols carry (`trace<N>:…`).
    fn id(&self) -> u64;
    /// The trace's listing, if its JIT asked for listings.
    fn listing(&self) -> Option<&str>;
}
use std::sync::Arc;

/// An instance in a trace: its position, in push order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId(pub(crate) u32);

impl InstanceId {
    /// The id of the instance pushed `index`-th (0-based), e.g. for a forward jump to an
    /// instance not pushed yet.
    // Inline: a client makes one per jump target it pushes (an out-of-line call from
    // another crate cost the reference VM about 3 instructions per instance).
    #[inline]
    pub fn from_index(index: usize) -> InstanceId {
        InstanceId(index.min(u32::MAX as usize) as u32)
    }

    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Appends `items` to `v`, which has room for them, element by element (a stencil takes a
/// few operands or targets: a `memcpy` call would cost more than the copy), with one length
/// update, and shows `seen` each item.
///
/// # Safety
/// `v` has room for `items.len()` more elements (`record` made it, fallibly).
#[inline(always)]
unsafe fn append<T: Copy>(v: &mut Vec<T>, items: &[T], mut seen: impl FnMut(T)) {
    debug_assert!(v.capacity() - v.len() >= items.len());
    let len = v.len();
    // SAFETY: there is room for `items.len()` more elements past `len` (the caller's
    // promise); each is written before the length covers it.
    unsafe {
        let to = v.as_mut_ptr().add(len);
        for (k, &item) in items.iter().enumerate() {
            to.add(k).write(item);
            seen(item);
        }
        v.set_len(len + items.len());
    }
}

/// Where a jump target (or the last instance's continuation) goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// An instance of the same trace.
    Instance(InstanceId),
    /// Any code address outside the trace (another trace, a native function).
    Address(u64),
    /// A label ([`TraceBuilder::label`]): the instance it is bound to
    /// ([`TraceBuilder::bind`], or [`TraceBuilder::place`] without selection). Given to
    /// [`TraceBuilder::push_op`], it also carries a cache state; given to `push` or
    /// `continue_at`, it is resolved at `finish`. A label never bound makes `finish` fail
    /// with [`Error::UnboundLabel`].
    Label(Label),
}

/// One pushed instance: its stencil, where its operands and targets start in the
/// builder's flat vectors (their counts are the stencil's), and where its code goes in the
/// trace's code (its data follows the previous instance's, at its alignment: `finish`
/// works that out again as it copies the data). One 16-byte record per push.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Instance {
    pub stencil: u32,
    pub operands: u32,
    pub targets: u32,
    pub code_at: u32,
}

/// Collects stencil instances; [`finish`](TraceBuilder::finish) copies, lays out and
/// patches them into executable memory.
pub struct TraceBuilder<'j, 's> {
    pub(crate) jit: &'j Jit<'s>,
    /// `jit.programs`, here so that `push` finds a program with one load fewer.
    programs: &'j [Program],
    /// The thread's spare vectors while this builder has them ([`Spare`]; `drop` puts them
    /// back without dropping them).
    pub(crate) instances: ManuallyDrop<Vec<Instance>>,
    pub(crate) operands: ManuallyDrop<Vec<u64>>,
    pub(crate) targets: ManuallyDrop<Vec<Target>>,
    pub(crate) continuation: Option<Target>,
    /// The current trace's layout so far, extended by each push.
    pub(crate) layout: Layout,
    /// The cache state the last instance left, as [`push_op`](TraceBuilder::push_op)
    /// tracks it ([`select`]).
    pub(crate) cache_state: u8,
    /// The current trace's labels ([`select`]), and how many jumps wait for one unbound.
    pub(crate) labels: ManuallyDrop<Vec<LabelSlot>>,
    pub(crate) unbound: u32,
    /// Whether `push` or `continue_at` was given a [`Target::Label`] in the current trace:
    /// only then has `finish` labels to resolve (`push_op` rewrites its own in place).
    pub(crate) labels_given: bool,
    /// Index in `instances` of the current trace's first instance: 0, except in a
    /// [`TraceBatch`], whose traces share the vectors one after another.
    pub(crate) start: u32,
    /// The thread's spare vectors, taken for this builder (see [`Spare`]): its `counted`
    /// is used in place (the GOT slots and veneers the current trace's layout has
    /// counted), and the other vectors go back into it when the builder is dropped.
    spare: ManuallyDrop<Box<Spare>>,
}

impl<'j, 's> TraceBuilder<'j, 's> {
    pub(crate) fn new(jit: &'j Jit<'s>) -> TraceBuilder<'j, 's> {
        // (Read first: read between the vectors' moves and the builder, it made the
        // builder be built on the stack and copied, 17 instructions per trace.)
        let layout = Layout::starting(jit);
        let spare = Spare::take();
        // SAFETY: the vectors are moved out; the spare set's copies are stale until `drop`
        // writes the vectors back over them (or empty ones, before the set is dropped), and
        // nothing reads or drops them meanwhile.
        let (instances, operands, targets, labels) = unsafe {
            use std::ptr::read;
            (
                ManuallyDrop::new(read(&spare.instances)),
                ManuallyDrop::new(read(&spare.operands)),
                ManuallyDrop::new(read(&spare.targets)),
                ManuallyDrop::new(read(&spare.labels)),
            )
        };
        TraceBuilder {
            jit,
            programs: &jit.programs,
            instances,
            operands,
            targets,
            continuation: None,
            layout,
            cache_state: 0,
            labels,
            unbound: 0,
            labels_given: false,
            start: 0,
            spare: ManuallyDrop::new(spare),
        }
    }

    /// Appends an instance of stencil `stencil` (index into the set's stencils) with one
    /// value per stencil operand and one target per stencil jump target, in the order of
    /// [`Stencil::operands`](cpjit_model::Stencil::operands) and
    /// [`Stencil::targets`](cpjit_model::Stencil::targets).
    ///
    /// The instance is laid out here (stage 1 of stitching): its code and data offsets and
    /// the GOT slots and veneers it may need are known once it is pushed.
    // Always inlined: a JIT calls it once per instance, in its translation loop, where the
    // builder's vectors and layout then stay in registers (measured: 259 against 226
    // instructions per instance of push + finish when LLVM chose not to inline it).
    #[inline(always)]
    pub fn push(
        &mut self,
        stencil: usize,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        self.push_noting::<true>(stencil, operands, targets)
    }

    /// [`push`](TraceBuilder::push), noting a [`Target::Label`] among `targets` with
    /// `LABELS` (`push_op`, which rewrites each label it pushes in place, leaves none for
    /// `finish` to resolve).
    #[inline(always)]
    fn push_noting<const LABELS: bool>(
        &mut self,
        stencil: usize,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        // The counts come from the stencil's program (one table row); the shim and the
        // errors are worked out off the hot path.
        match self.programs.get(stencil) {
            Some(p)
                if operands.len() == p.push_operands as usize
                    && targets.len() == p.push_targets =>
            {
                self.record::<LABELS>(stencil, p, operands, targets)
            }
            _ => self.push_rest(stencil, operands, targets),
        }
    }

    /// What [`push`](TraceBuilder::push)'s fast path does not take: the entry shim (as
    /// instance 0 only), and every refusal.
    #[cold]
    #[inline(never)]
    fn push_rest(
        &mut self,
        stencil: usize,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        match self.jit.programs.get(stencil) {
            Some(p) if p.shim && self.is_empty() => {
                // The shim of the kit's sets takes no operands and no targets: recorded
                // here with nothing to copy (a few instructions; the general record inline
                // made this function's frame 81 instructions per trace).
                if operands.is_empty() && p.operands == 0 && targets.is_empty() && p.targets == 0 {
                    return self.record::<false>(stencil, p, &[], &[]);
                }
                self.record_shim(stencil, operands, targets)
            }
            _ => Err(self.push_error(stencil, operands.len(), targets.len())),
        }
    }

    /// [`push_rest`](TraceBuilder::push_rest) for the shim `stencil` (pushed first) with
    /// operands or targets (or the wrong counts of them).
    #[cold]
    #[inline(never)]
    fn record_shim(
        &mut self,
        stencil: usize,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        let p = &self.programs[stencil];
        if operands.len() == p.operands as usize && targets.len() == p.targets as usize {
            return self.record::<true>(stencil, p, operands, targets);
        }
        Err(self.push_error(stencil, operands.len(), targets.len()))
    }

    /// Lays out and appends an instance of stencil `stencil` (program `p`), whose counts
    /// were checked; with `LABELS`, notes a [`Target::Label`] among `targets`
    /// ([`labels_given`](TraceBuilder::labels_given)). Fails, recording nothing, only if
    /// the builder's vectors cannot grow.
    #[inline(always)]
    fn record<const LABELS: bool>(
        &mut self,
        stencil: usize,
        p: &'j Program,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        // Each vector's capacity is checked where `Vec::push` and `reserve` checked it, and
        // grown fallibly (out of line), operands and targets first: if one cannot grow,
        // what this push appended is taken back, so that a trace too large for the process
        // is an error that changes nothing, at no cost per instance.
        let (operands_at, targets_at) = (self.operands.len(), self.targets.len());
        // On the way, what the stencil's need filter asks: whether an operand is too wide
        // for its immediates (its upper 32 bits, after the bias, are not zero), whether a
        // target is an address.
        let (mut wide, mut far) = (0u64, false);
        // (Most instances take neither: then not even a capacity check.)
        if !operands.is_empty() {
            if self.operands.capacity() - operands_at < operands.len() {
                try_grow(&mut self.operands, operands.len(), "the trace's operands")?;
            }
            // SAFETY: there is room, checked or made just above; the length then covers
            // what was written. (One or two operands without a loop, as `push_ops` does.)
            unsafe {
                wide = run::copy_operands(self.operands.as_mut_ptr().add(operands_at), operands, p);
                self.operands.set_len(operands_at + operands.len());
            }
        }
        if !targets.is_empty() {
            if self.targets.capacity() - targets_at < targets.len() {
                self.grow_or_undo(targets.len(), (operands_at, targets_at))?;
            }
            // SAFETY: there is room, checked or made just above.
            unsafe {
                append(&mut self.targets, targets, |t| {
                    // (With `LABELS`, an address or a label is told apart out of line, so
                    // that an instance costs one test, as before labels were noted.)
                    far |= !matches!(t, Target::Instance(_))
                        && (LABELS || matches!(t, Target::Address(_)))
                })
            };
            if LABELS && far {
                far = self.note_labels(targets);
            }
        }
        if self.instances.len() == self.instances.capacity() {
            self.grow_or_undo(0, (operands_at, targets_at))?;
        }
        let id = InstanceId(self.instances.len() as u32 - self.start);
        let code_at = self.layout.place(p);
        let record = Instance {
            stencil: stencil as u32,
            operands: operands_at as u32,
            targets: targets_at as u32,
            code_at,
        };
        // SAFETY: there is room for one more, checked or made above.
        unsafe { append(&mut self.instances, &[record], |_| ()) };
        let filtered = (wide >> 32 != 0, far);
        self.layout
            .count(p, filtered, operands, targets, &mut self.spare.counted);
        Ok(id)
    }

    /// Makes room for `targets` more targets (if not 0) or else for one more instance
    /// record; if that fails, takes back the operands and targets this push appended (from
    /// `appended`: the vectors' lengths before it) and fails with
    /// [`Error::AllocationFailed`].
    #[cold]
    #[inline(never)]
    fn grow_or_undo(&mut self, targets: usize, appended: (usize, usize)) -> Result<(), Error> {
        let grown = if targets != 0 {
            try_grow(&mut self.targets, targets, "the trace's jump targets")
        } else {
            try_grow(&mut self.instances, 1, "the trace's instance records")
        };
        if grown.is_err() {
            self.operands.truncate(appended.0);
            self.targets.truncate(appended.1);
        }
        grown
    }

    /// Why [`push`](TraceBuilder::push) refused an instance.
    #[cold]
    fn push_error(&self, stencil: usize, operands: usize, targets: usize) -> Error {
        let set = self.jit.set;
        let Some(s) = set.stencils.get(stencil) else {
            return Error::UnknownStencilIndex {
                index: stencil,
                count: set.stencils.len(),
            };
        };
        if operands != s.operands.len() {
            return Error::OperandCount {
                stencil: s.name.to_string(),
                expected: s.operands.len(),
                got: operands,
            };
        }
        if targets != s.targets.len() {
            return Error::TargetCount {
                stencil: s.name.to_string(),
                expected: s.targets.len(),
                got: targets,
            };
        }
        Error::ShimNotFirst {
            stencil: s.name.to_string(),
            instance: self.len(),
        }
    }

    /// [`push`](TraceBuilder::push) by stencil name ([`Jit::stencil_index`]: a pruned
    /// member is refused with [`Error::PrunedMember`]).
    pub fn push_named(
        &mut self,
        name: &str,
        operands: &[u64],
        targets: &[Target],
    ) -> Result<InstanceId, Error> {
        let index = self.jit.stencil_index(name)?;
        self.push(index, operands, targets)
    }

    /// Appends the set's C-ABI entry shim; call the finished trace through
    /// [`Trace::entry_fn`] of the returned id (which refuses any other instance). The shim can only be the first instance
    /// and is never a jump target: it is entered from native code, with a native frame.
    /// A shim of other than two parameters ([`EntryFn`]'s) is refused with
    /// [`Error::EntrySignature`]: push it with [`push_shim_as`](TraceBuilder::push_shim_as).
    pub fn push_shim(&mut self) -> Result<InstanceId, Error> {
        self.push_shim_as::<EntryFn>().map(|e| e.id())
    }

    /// Appends the set's C-ABI entry shim, to be called as the C function type `F`
    /// ([`Trace::entry_typed`]); refused with [`Error::EntrySignature`] if `F` takes
    /// another number of arguments than the set's shim declares.
    pub fn push_shim_as<F: EntrySignature>(&mut self) -> Result<Entry<F>, Error> {
        let set = self.jit.set;
        let (Some(shim), Some(facts)) = (set.shim, &self.jit.arena.trace_facts.shim) else {
            return Err(Error::NoShim {
                target: set.target.to_string(),
            });
        };
        check_signature::<F>(facts)?;
        // (`Jit::new` checked the index.) A shim of no operands and no targets as first
        // instance is recorded here, with nothing to copy; the others, and every refusal,
        // in `push_rest` (`push`'s fast path refuses the shim). Through `push_rest` it was
        // 71 instructions per trace more.
        let (stencil, p) = (shim as usize, &self.programs[shim as usize]);
        if self.is_empty() && p.operands == 0 && p.targets == 0 {
            return self.record::<false>(stencil, p, &[], &[]).map(Entry::new);
        }
        self.push_rest(stencil, &[], &[]).map(Entry::new)
    }

    /// Where the last instance continues, if it has a continue hole (otherwise finishing
    /// fails with [`Error::TraceEndsWithContinue`]).
    pub fn continue_at(&mut self, target: Target) -> &mut Self {
        self.continuation = Some(target);
        self.labels_given |= matches!(target, Target::Label(_));
        self
    }

    /// Number of instances pushed so far (the index the next one gets).
    pub fn len(&self) -> usize {
        self.instances.len() - self.start as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current trace's instances, operands, targets and continuation, and the GOT
    /// and veneer tables its write fills.
    pub(crate) fn view_and_scratch(&mut self) -> (View<'_, 'j, 's>, &mut stitch::Scratch) {
        let view = View {
            jit: self.jit,
            instances: &self.instances[self.start as usize..],
            operands: &self.operands,
            targets: &self.targets,
            continuation: self.continuation,
            layout: &self.layout,
        };
        (view, &mut self.spare.scratch)
    }

    /// Lays out, copies and patches the instances into executable memory.
    pub fn finish(mut self) -> Result<Trace, Error> {
        self.resolve_labels()?;
        stitch::finish(&mut self)
    }

    /// Refuses a trace with jumps to labels never bound.
    fn check_labels(&self) -> Result<(), Error> {
        match self.unbound {
            0 => Ok(()),
            jumps => Err(Error::UnboundLabel {
                jumps: jumps as usize,
            }),
        }
    }
}

/// One trace's part of a builder's vectors, as `finish` reads it: its instances (indices
/// relative to the trace), the shared operand and target vectors they index, and the
/// layout their pushes worked out.
pub(crate) struct View<'a, 'j, 's> {
    pub jit: &'j Jit<'s>,
    pub instances: &'a [Instance],
    pub operands: &'a [u64],
    pub targets: &'a [Target],
    pub continuation: Option<Target>,
    /// (By reference: a copy was a tenth of `finish`'s own instructions.)
    pub layout: &'a Layout,
}

impl<'j, 's> View<'_, 'j, 's> {
    /// A builder holding a copy of just this trace (for the debug registrations, which
    /// read a builder; only made when a [`JitOptions`](crate::JitOptions) debug option is
    /// on).
    pub(crate) fn to_builder(&self) -> TraceBuilder<'j, 's> {
        let mut b = TraceBuilder {
            jit: self.jit,
            programs: &self.jit.programs,
            instances: ManuallyDrop::new(Vec::with_capacity(self.instances.len())),
            operands: ManuallyDrop::new(Vec::new()),
            targets: ManuallyDrop::new(Vec::new()),
            continuation: self.continuation,
            layout: *self.layout,
            cache_state: 0,
            labels: ManuallyDrop::new(Vec::new()),
            unbound: 0,
            labels_given: false,
            start: 0,
            spare: Default::default(),
        };
        for inst in self.instances {
            let p = &self.jit.programs[inst.stencil as usize];
            let (o, t) = (inst.operands as usize, inst.targets as usize);
            b.instances.push(Instance {
                stencil: inst.stencil,
                operands: b.operands.len() as u32,
                targets: b.targets.len() as u32,
                code_at: inst.code_at,
            });
            b.operands
                .extend_from_slice(&self.operands[o..o + p.operands as usize]);
            b.targets
                .extend_from_slice(&self.targets[t..t + p.targets as usize]);
        }
        b
    }

    /// Whether instance `index` is the entry shim (which can only be instance 0).
    pub(crate) fn is_shim(&self, index: usize) -> bool {
        index == 0 && self.jit.set.shim.map(u32::from) == self.instances.first().map(|i| i.stencil)
    }
}

/// Refuses `F` if its arity is not the shim's.
fn check_signature<F: EntrySignature>(shim: &ShimFacts) -> Result<(), Error> {
    if F::PARAMETERS == shim.parameters {
        return Ok(());
    }
    Err(Error::EntrySignature {
        stencil: shim.name.to_string(),
        expected: shim.parameters,
        declared: F::PARAMETERS,
        signature: std::any::type_name::<F>(),
    })
}

/// The C-ABI signature of the default entry shim (`int64_t cpjit_entry(struct cpjit_frame *,
/// uint64_t *sp)`); sets whose shim takes other parameters use [`Trace::entry_typed`].
pub type EntryFn = unsafe extern "C" fn(frame: *mut c_void, sp: *mut u64) -> i64;

/// An executable trace. Dropping it returns its memory to the arena: no thread may be
/// executing it then.
///
/// At most 128 bytes (a test checks it): a trace is moved several times on its way out of
/// `finish` to the caller, and at 184 bytes each move was a `memcpy` call (29 instructions,
/// six per trace); what it needs of its JIT it finds through its arena
/// ([`TraceFacts`](crate::arena::TraceFacts)).
pub struct Trace {
    pub(crate) arena: Arc<Arena>,
    pub(crate) block: Block,
    /// Bytes of code actually used: instances, padding, veneers.
    pub(crate) code_len: usize,
    pub(crate) data_len: usize,
    /// Instances, and where their code offsets are in the trace's data (`u32`s, written
    /// with the data by `finish`, never changed after).
    pub(crate) instances: u32,
    pub(crate) offsets_at: u32,
    /// Veneers and GOT slots used (each at most `u32::MAX / 16`: `finish` bounds them).
    pub(crate) veneers: u32,
    pub(crate) got_slots: u32,
    /// Registrations with debuggers and profilers, if any option asked for them.
    pub(crate) debug: Option<Box<dyn Registrations>>,
    /// Whether instance 0 is the entry shim (whose facts are the arena's).
    pub(crate) shim: bool,
}

impl Trace {
    /// The executable address of instance `id`.
    ///
    /// # Panics
    /// If `id` does not belong to this trace (an id from another builder).
    pub fn entry(&self, id: InstanceId) -> *const u8 {
        match self.instance_offsets().get(id.index()) {
            Some(&offset) => (self.block.code_rx + offset as usize) as *const u8,
            None => panic!(
                "instance {} is not in this trace ({} instances)",
                id.index(),
                self.instance_offsets().len()
            ),
        }
    }

    /// Instance `id` as the default entry's C function type [`EntryFn`]: the id
    /// [`TraceBuilder::push_shim`] returned. Refused, with [`Error::NotAnEntry`], unless `id`
    /// is the trace's first instance and an instance of the set's entry shim (any other
    /// instance is an op of the ops' own calling convention, which native code cannot
    /// call), and with [`Error::EntrySignature`] if the shim takes other than
    /// [`EntryFn`]'s two arguments (see [`Trace::entry_typed`]). Calling the function is
    /// still `unsafe`: its arguments must be what the trace's ops expect.
    ///
    /// ```no_run
    /// # fn demo(jit: &cpjit_runtime::Jit<'_>) -> Result<(), cpjit_runtime::Error> {
    /// use cpjit_runtime::{Error, InstanceId};
    /// let mut t = jit.trace();
    /// let op = t.push_named("op_return", &[], &[])?; // no shim pushed
    /// let trace = t.finish()?;
    /// assert!(matches!(trace.entry_fn(op), Err(Error::NotAnEntry { instance: 0 })));
    /// # Ok(()) }
    /// ```
    pub fn entry_fn(&self, id: InstanceId) -> Result<EntryFn, Error> {
        self.entry_as::<EntryFn>(id)
    }

    /// Instance `id` as the C function type `F`: refused with [`Error::NotAnEntry`] unless
    /// it is the trace's first instance and the set's entry shim, and with
    /// [`Error::EntrySignature`] if `F` takes another number of arguments than the shim.
    pub fn entry_as<F: EntrySignature>(&self, id: InstanceId) -> Result<F, Error> {
        let shim = self.arena.trace_facts.shim.as_ref().filter(|_| self.shim);
        match (shim, self.instance_offsets().first()) {
            (Some(shim), Some(&offset)) if id.index() == 0 => {
                check_signature::<F>(shim)?;
                let code = (self.block.code_rx + offset as usize) as *const u8;
                // SAFETY: instance 0 is the shim, of `F`'s arity (the argument and return
                // types are pointer-sized integers, as the shim's are).
                Ok(unsafe { F::from_code(code) })
            }
            _ => Err(Error::NotAnEntry {
                instance: id.index(),
            }),
        }
    }

    /// The entry pushed by [`TraceBuilder::push_shim_as`] as its C function type (refused
    /// as [`Trace::entry_as`] refuses, e.g. an entry of another trace that is not this
    /// one's shim).
    pub fn entry_typed<F: EntrySignature>(&self, entry: Entry<F>) -> Result<F, Error> {
        self.entry_as(entry.id())
    }

    /// The trace's machine code as executed (instances, padding, veneers).
    pub fn code_bytes(&self) -> &[u8] {
        // SAFETY: the RX view is readable and nothing writes this block while `self` lives.
        unsafe { std::slice::from_raw_parts(self.block.code_rx as *const u8, self.code_len) }
    }

    /// Executable addresses of the code.
    pub fn code_range(&self) -> Range<usize> {
        self.block.code_rx..self.block.code_rx + self.code_len
    }

    /// Addresses of the trace's data (instance data, each instance's code offset as a
    /// `u32`, then GOT slots).
    pub fn data_range(&self) -> Range<usize> {
        self.block.data..self.block.data + self.data_len
    }

    /// Offset of each instance's code from the start of the trace, in push order.
    pub fn instance_offsets(&self) -> &[u32] {
        if self.instances == 0 {
            return &[];
        }
        // SAFETY: `finish` wrote `instances` code offsets at `offsets_at` in the trace's data
        // block (RW memory the trace owns until dropped; 4-aligned: blocks are 16-aligned)
        // before setting `instances`, and nothing writes them after.
        unsafe {
            let at = (self.block.data + self.offsets_at as usize) as *const u32;
            std::slice::from_raw_parts(at, self.instances as usize)
        }
    }

    /// Veneers placed for out-of-range branches.
    pub fn veneers(&self) -> usize {
        self.veneers as usize
    }

    /// GOT slots in the trace's data.
    pub fn got_slots(&self) -> usize {
        self.got_slots as usize
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        // Unregistered from debuggers and profilers before the code is trapped and reused.
        self.debug = None;
        // Fill the freed code with traps so that a stale pointer into it faults instead of
        // running whatever is stitched there next. If no window can be mapped or staged
        // (out of memory), the bytes stay until the next trace overwrites them.
        if let (Some(trap), true) = (self.arena.trace_facts.freed_fill, self.block.allocated()) {
            if let Ok(mut writer) = self.arena.code_writer(&self.block, self.block.code_len) {
                if writer.fill(trap).is_ok() {
                    let _ = writer.publish();
                }
            }
        }
        if self.block.allocated() {
            self.arena.free(&self.block);
        }
    }
}

// SAFETY: a Trace only holds addresses of memory it owns exclusively until dropped.
unsafe impl Send for Trace {}
// SAFETY: as for Send; a shared Trace only reads its own memory.
unsafe impl Sync for Trace {}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("code", &format_args!("{:#x?}", self.code_range()))
            .field("data", &format_args!("{:#x?}", self.data_range()))
            .field("instances", &self.instance_offsets().len())
            .field("veneers", &self.veneers)
            .field("got_slots", &self.got_slots)
            .finish()
    }
}
