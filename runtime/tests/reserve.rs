//! `Jit::reserve`: after it, the first trace within the reservation maps no memory and makes
//! no heap allocation (a thread and JIT without it map a chunk and grow their buffers for
//! the same trace); sizes past one chunk, too many instances, and an idle limit that would
//! return the chunk at once are refused, naming the size and the range.

use crate::common::{self, resolve, run, Frame, SET};
use cpjit_runtime::{Error, InstanceId, Jit, JitOptions, Reservation, Trace};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The test binary's allocator: the system's, which also counts the allocations of a
/// thread inside [`allocations`] (no other thread, and no test elsewhere, sees a change).
struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

thread_local! {
    /// Allocations so far on this thread while counting; `None`: not counting.
    static COUNT: Cell<Option<usize>> = const { Cell::new(None) };
}

fn count() {
    // (A const thread-local without a destructor: reading it never allocates.)
    let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
}

// SAFETY: every call goes to the system allocator with the caller's arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// `f`'s result and the heap allocations it made on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, usize) {
    COUNT.set(Some(0));
    let out = f();
    (out, COUNT.take().expect("counting"))
}

/// A value too wide for an immediate: its loads need a GOT slot.
const BIG: u64 = 0x7654_3210_fedc_ba98;

/// A trace with GOT slots by value and by symbol, and helper calls; [`EXPECTED`] is what it
/// returns.
fn stitch(jit: &Jit<'_>) -> (Trace, InstanceId) {
    common::returning_trace(
        jit,
        &[
            ("op_load_got", &[BIG]),
            ("op_add_got", &[BIG, 5]),
            ("op_call_helper", &[]),
            ("op_call_got", &[]),
        ],
    )
}

/// `BIG + BIG + 5`, and 1,000 from each helper call.
const EXPECTED: u64 = BIG.wrapping_mul(2).wrapping_add(2005);

const SIZES: Reservation = Reservation {
    instances: 16,
    code_bytes: 4 << 10,
    data_bytes: 1 << 10,
};

#[test]
fn the_first_trace_after_reserve_maps_and_allocates_nothing() {
    // Each on a thread of its own: the buffers `reserve` grows are the thread's.
    std::thread::spawn(|| {
        let jit = Jit::new(SET, resolve).unwrap();
        jit.reserve(SIZES).unwrap();
        let ready = jit.memory_stats();
        assert_eq!(
            (ready.chunks, ready.traces, ready.used()),
            (1, 0, 0),
            "{ready:?}"
        );
        assert!(ready.code_mapped >= SIZES.code_bytes, "{ready:?}");
        assert!(ready.data_mapped >= SIZES.data_bytes, "{ready:?}");
        // Again: nothing more to map or grow.
        let ((), again) = allocations(|| jit.reserve(SIZES).unwrap());
        assert_eq!((again, jit.memory_stats()), (0, ready));
        let ((trace, shim), allocated) = allocations(|| stitch(&jit));
        assert_eq!(allocated, 0, "the first trace allocated after reserve");
        let after = jit.memory_stats();
        assert_eq!(
            (
                after.chunks,
                after.code_mapped,
                after.data_mapped,
                after.traces
            ),
            (1, ready.code_mapped, ready.data_mapped, 1),
            "{after:?}"
        );
        assert!(trace.got_slots() >= 1, "BIG's slot at least");
        let mut frame = Frame::default();
        assert_eq!(run(&trace, shim, &mut frame) as u64, EXPECTED);
        assert_eq!(frame.helper_calls, 2);
    })
    .join()
    .unwrap();
    // Without it, the same first trace maps the chunk and grows the thread's buffers.
    std::thread::spawn(|| {
        let jit = Jit::new(SET, resolve).unwrap();
        let ((trace, shim), allocated) = allocations(|| stitch(&jit));
        assert!(allocated > 0, "no allocation without reserve");
        assert_eq!(jit.memory_stats().chunks, 1);
        assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, EXPECTED);
    })
    .join()
    .unwrap();
}

#[test]
fn reserve_refuses_sizes_past_a_chunk_and_an_idle_limit_that_would_return_it() {
    let chunk = 64 << 10;
    let options = JitOptions {
        chunk_bytes: chunk,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let refused = |r: Reservation, option: &str, value: usize| {
        let e = jit.reserve(r).unwrap_err();
        assert!(
            matches!(e, Error::InvalidOption { option: o, value: v, .. } if o == option && v == value),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "{option} = {value} is out of range: give a value from"
            )),
            "{text}"
        );
    };
    let largest = chunk - 16;
    refused(
        Reservation {
            code_bytes: largest + 1,
            ..SIZES
        },
        "Reservation::code_bytes",
        largest + 1,
    );
    refused(
        Reservation {
            data_bytes: chunk,
            ..SIZES
        },
        "Reservation::data_bytes",
        chunk,
    );
    refused(
        Reservation {
            instances: usize::MAX,
            ..SIZES
        },
        "Reservation::instances",
        usize::MAX,
    );
    assert_eq!(jit.memory_stats().chunks, 0, "a refusal maps nothing");
    // The largest sizes fit one normal chunk.
    jit.reserve(Reservation {
        instances: 16,
        code_bytes: largest,
        data_bytes: largest,
    })
    .unwrap();
    let stats = jit.memory_stats();
    assert_eq!(
        (stats.chunks, stats.code_reserved, stats.data_reserved),
        (1, chunk, chunk)
    );

    let keeps_nothing = JitOptions {
        idle_chunk_bytes: 0,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, keeps_nothing).unwrap();
    let e = jit.reserve(SIZES).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "JitOptions::idle_chunk_bytes = 0 is out of range: give a value from 2097152"
        ),
        "{e}"
    );
}
