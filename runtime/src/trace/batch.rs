//! Many traces built one after another in one builder and finished together
//! ([`TraceBatch`]): one allocation, one write of their code, one flush.

use super::stitch::{self, Layout};
use super::{Target, Trace, TraceBuilder, View};
use crate::{Error, Jit};
use std::ops::Range;

/// Many traces finished together, with one memory allocation, one write of their code
/// (on Linux one `pwrite`) and one instruction-cache flush: for a JIT that compiles many
/// short functions at once, where those per-trace costs would dominate (on 10 instances
/// the `pwrite` alone is half the time).
///
/// Each trace is built as with [`Jit::trace`]: [`trace`](TraceBatch::trace) starts the
/// next one and returns its builder (instance ids count from 0 in each trace, and targets
/// of [`Target::Instance`] stay within their trace). [`finish`](TraceBatch::finish)
/// returns the traces in order, each an ordinary [`Trace`] that is dropped (its memory
/// freed) independently of the others.
///
/// ```no_run
/// # fn demo(jit: &cpjit_runtime::Jit<'_>) -> Result<(), cpjit_runtime::Error> {
/// let mut batch = jit.batch();
/// for constant in [1u64, 2, 3] {
///     let t = batch.trace();
///     t.push_shim()?;
///     t.push_named("op_load_const", &[constant], &[])?;
///     t.push_named("op_return", &[], &[])?;
/// }
/// let traces = batch.finish()?; // three traces, one write, one flush
/// # assert_eq!(traces.len(), 3); Ok(()) }
/// ```
pub struct TraceBatch<'j, 's> {
    builder: TraceBuilder<'j, 's>,
    /// The closed traces: each one's instances and continuation.
    closed: Vec<Closed>,
    /// Whether `builder` holds an open trace (started by [`trace`](TraceBatch::trace)).
    open: bool,
    /// The first trace closed with a jump to a label never bound, and why.
    failed: Option<(usize, Error)>,
}

/// A trace of a batch that a later [`TraceBatch::trace`] closed.
pub(crate) struct Closed {
    pub instances: Range<u32>,
    pub continuation: Option<Target>,
    pub layout: Layout,
}

impl<'j, 's> TraceBatch<'j, 's> {
    pub(crate) fn new(jit: &'j Jit<'s>) -> TraceBatch<'j, 's> {
        TraceBatch {
            builder: TraceBuilder::new(jit),
            closed: Vec::new(),
            open: false,
            failed: None,
        }
    }

    /// Starts the batch's next trace (closing the current one) and returns its builder.
    pub fn trace(&mut self) -> &mut TraceBuilder<'j, 's> {
        self.close();
        self.open = true;
        &mut self.builder
    }

    /// Number of traces started so far.
    pub fn len(&self) -> usize {
        self.closed.len() + usize::from(self.open)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn close(&mut self) {
        if !self.open {
            return;
        }
        let b = &mut self.builder;
        if let Err(e) = b.resolve_labels() {
            self.failed.get_or_insert((self.closed.len(), e));
        }
        b.labels.clear();
        (b.unbound, b.cache_state, b.labels_given) = (0, 0, false);
        let end = b.instances.len() as u32;
        self.closed.push(Closed {
            instances: b.start..end,
            continuation: b.continuation.take(),
            layout: std::mem::replace(&mut b.layout, Layout::starting(b.jit)),
        });
        b.spare.counted.reset();
        b.start = end;
        self.open = false;
    }

    /// Lays out, copies and patches every trace into one block of executable memory,
    /// published at once. Fails (keeping nothing) if any trace would fail on its own,
    /// with [`Error::InBatch`] naming the trace; an empty batch gives no traces.
    pub fn finish(mut self) -> Result<Vec<Trace>, Error> {
        self.close();
        if let Some((trace, e)) = self.failed.take() {
            return Err(Error::InBatch {
                trace,
                source: Box::new(e),
            });
        }
        let b = &mut self.builder;
        let closed = &self.closed[..];
        let (jit, instances, operands, targets) = (b.jit, &b.instances, &b.operands, &b.targets);
        let view = |i: usize| {
            let c = &closed[i];
            let range = c.instances.start as usize..c.instances.end as usize;
            View {
                jit,
                instances: &instances[range],
                operands,
                targets,
                continuation: c.continuation,
                layout: &c.layout,
            }
        };
        stitch::finish_batch(jit, closed.len(), view, &mut b.spare.scratch)
    }
}
