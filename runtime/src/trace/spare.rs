//! The vectors of finished and dropped builders, kept per thread ([`Spare`]): a builder
//! takes them when it starts and puts them back when it is dropped.

use super::select::LabelSlot;
use super::stitch::{Counted, Scratch};
use super::{Instance, Target, TraceBuilder};
use crate::error::try_grow;
use crate::Error;
use std::mem::ManuallyDrop;

/// The vectors of a finished or dropped builder, kept per thread for the next builder:
/// a JIT stitching trace after trace then pushes into memory it already has, without
/// growing (reallocating and copying) its vectors per trace.
#[derive(Default)]
pub(crate) struct Spare {
    pub instances: Vec<Instance>,
    pub operands: Vec<u64>,
    pub targets: Vec<Target>,
    pub labels: Vec<LabelSlot>,
    pub counted: Counted,
    /// The GOT and veneer tables of the current trace's write.
    pub scratch: Scratch,
}

thread_local! {
    /// Boxed, so that a builder takes and returns it as one pointer and moves only the
    /// vectors' headers (moving the whole struct in and out of a `RefCell` was a tenth of
    /// a 10-instance trace's stitching time).
    static SPARE: std::cell::Cell<Option<Box<Spare>>> = const { std::cell::Cell::new(None) };
}

/// Vectors larger than this many elements are freed rather than kept (a huge trace should
/// not pin its memory for the thread's life).
pub(crate) const SPARE_LIMIT: usize = 1 << 20;

/// Makes this thread's spare vectors and tables, which its next builder takes, hold a trace of
/// `c` without growing ([`Jit::reserve`](crate::Jit::reserve)); the labels' vector is left
/// as it is.
pub(crate) fn reserve_spare(c: &crate::reserve::Capacity) -> Result<(), Error> {
    fn room<T>(v: &mut Vec<T>, n: usize, what: &'static str) -> Result<(), Error> {
        match v.capacity() - v.len() < n {
            true => try_grow(v, n, what),
            false => Ok(()),
        }
    }
    let mut spare = Spare::of_thread();
    room(
        &mut spare.instances,
        c.instances,
        "the trace's instance records",
    )?;
    room(&mut spare.operands, c.operands, "the trace's operands")?;
    room(&mut spare.targets, c.targets, "the trace's jump targets")?;
    spare.counted.got.reserve(c.symbols, c.got_slots);
    spare.counted.veneers.reserve(c.symbols, c.veneers);
    spare.scratch.got.reserve(c.symbols, c.got_slots);
    spare.scratch.veneers.reserve(c.symbols, c.veneers);
    let _ = SPARE.try_with(|s| s.set(Some(spare)));
    Ok(())
}

impl Spare {
    /// This thread's spare vectors (fresh ones if another builder has them, or the
    /// thread's locals are gone).
    #[inline(always)]
    fn of_thread() -> Box<Spare> {
        SPARE
            .try_with(|s| s.take())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// [`of_thread`](Spare::of_thread), with nothing counted: for a new builder.
    #[inline(always)]
    pub(crate) fn take() -> Box<Spare> {
        let mut spare = Spare::of_thread();
        spare.counted.reset();
        spare
    }
}

impl Drop for TraceBuilder<'_, '_> {
    // The vectors are moved back over the spare set's stale copies (`new` moved them out
    // without writing empty ones in), not taken and then dropped: 115 -> 48 instructions
    // per trace, drop glue included.
    fn drop(&mut self) {
        // SAFETY: each `ManuallyDrop` field is taken or dropped exactly once, here; none is
        // used after it.
        let mut spare = unsafe { ManuallyDrop::take(&mut self.spare) };
        if self.instances.capacity() > SPARE_LIMIT
            || self.operands.capacity() > SPARE_LIMIT
            || self.targets.capacity() > SPARE_LIMIT
        {
            // SAFETY: see above; the spare set's stale copies are overwritten with empty
            // vectors, unread and undropped, before the set is dropped.
            unsafe {
                ManuallyDrop::drop(&mut self.instances);
                ManuallyDrop::drop(&mut self.operands);
                ManuallyDrop::drop(&mut self.targets);
                ManuallyDrop::drop(&mut self.labels);
                std::ptr::write(&mut spare.instances, Vec::new());
                std::ptr::write(&mut spare.operands, Vec::new());
                std::ptr::write(&mut spare.targets, Vec::new());
                std::ptr::write(&mut spare.labels, Vec::new());
            }
            return;
        }
        self.instances.clear();
        self.operands.clear();
        self.targets.clear();
        self.labels.clear();
        // SAFETY: see above; the spare set's stale copies (see `new`) are overwritten.
        unsafe {
            std::ptr::write(&mut spare.labels, ManuallyDrop::take(&mut self.labels));
            std::ptr::write(
                &mut spare.instances,
                ManuallyDrop::take(&mut self.instances),
            );
            std::ptr::write(&mut spare.operands, ManuallyDrop::take(&mut self.operands));
            std::ptr::write(&mut spare.targets, ManuallyDrop::take(&mut self.targets));
        }
        // A builder dropped while another is alive on this thread: the larger set stays.
        let _ = SPARE.try_with(|cell| match cell.take() {
            Some(other) if other.instances.capacity() > spare.instances.capacity() => {
                cell.set(Some(other))
            }
            _ => cell.set(Some(spare)),
        });
    }
}
