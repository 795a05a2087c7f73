//! [`Jit::reserve`]: the memory a JIT's first traces need, made ready before them.
//!
//! The first trace a [`Jit`] stitches pays for more than stitching: the arena reserves and
//! commits its first chunk (on Linux the code memfd is created, grown and mapped), the first
//! write of each code page allocates it in the code object, each data page faults in on
//! its first touch, and the stitching thread's vectors (instance records, operands, jump
//! targets, the tables numbering GOT slots and veneers) and code staging buffer grow from
//! nothing. A JIT whose first compiles are on the clock (a tiering VM's first trace) asks
//! for all of that at start-up, for the largest trace it expects ([`Reservation`]). Nothing
//! is stitched, so nothing appears in a profiler's or debugger's map of JIT code.

use crate::arena::GRANULE;
use crate::trace::SPARE_LIMIT;
use crate::{Error, Jit};

/// The largest trace [`Jit::reserve`] prepares for: after it, the first trace the calling
/// thread stitches with at most `instances` instances (the entry shim included), and at
/// most `code_bytes` of code and `data_bytes` of data (with the room `finish` sets aside
/// for GOT slots and veneers before it returns what the trace does not use), maps no
/// memory and allocates no heap memory in the kit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub instances: usize,
    /// From 0 to [`JitOptions::chunk_bytes`](crate::JitOptions::chunk_bytes) less the
    /// set's code alignment (at least 16): one arena chunk's code part holds it.
    pub code_bytes: usize,
    /// From 0 to `JitOptions::chunk_bytes` less the set's data alignment (at least 16).
    pub data_bytes: usize,
}

/// What a [`Reservation`] asks of the thread's vectors and tables, worked out for the set.
pub(crate) struct Capacity {
    pub instances: usize,
    pub operands: usize,
    pub targets: usize,
    /// The set's external symbols (GOT slots and veneers numbered by symbol id).
    pub symbols: usize,
    /// GOT slots (8 bytes of data each) and veneers (`veneer_size` bytes of code each)
    /// the trace's sizes leave room for.
    pub got_slots: usize,
    pub veneers: usize,
}

impl Jit<'_> {
    /// Makes the arena's first chunk and the calling thread's buffers ready for a trace
    /// of up to `r` ([`Reservation`]), so that the first compiles cost what later ones do:
    /// a chunk is reserved and committed as far as `r` reaches (unless one has room), its
    /// code written with the trap byte (which allocates its pages in the code object) and
    /// its data touched, then given back to the arena, where it stays as an idle chunk;
    /// and this thread's builder vectors, code staging buffer and GOT and veneer tables
    /// are grown to `r`'s trace. Other threads' buffers grow with their first traces (each
    /// may call `reserve` too). Idempotent: a second call with the same sizes maps and
    /// allocates nothing.
    ///
    /// Refused with [`Error::InvalidOption`] for sizes past one chunk's (or for more
    /// instances than a thread keeps vectors for), and when
    /// [`JitOptions::idle_chunk_bytes`](crate::JitOptions::idle_chunk_bytes) is below a
    /// chunk's reserved bytes (the chunk would be returned to the system at once). Fails
    /// with [`Error::Map`] or [`Error::OutOfMemory`] as `finish` would.
    ///
    /// ```no_run
    /// # fn demo(jit: &cpjit_runtime::Jit<'_>) -> Result<(), cpjit_runtime::Error> {
    /// use cpjit_runtime::Reservation;
    /// jit.reserve(Reservation { instances: 512, code_bytes: 16 << 10, data_bytes: 4 << 10 })?;
    /// # Ok(()) }
    /// ```
    pub fn reserve(&self, r: Reservation) -> Result<(), Error> {
        let capacity = self.capacity(&r)?;
        let (code_align, data_align) = (self.code_align as usize, self.data_align as usize);
        let (block, source) =
            self.arena
                .alloc(r.code_bytes, code_align, r.data_bytes, data_align)?;
        // Traps, not zeros, in code no trace has taken yet; a staged write grows the
        // thread's staging buffer to the block, which the next trace then reuses.
        let written = block
            .code_writer(&source, block.code_len)
            .and_then(|mut w| {
                w.fill(self.facts.trap)?;
                w.publish().map_err(Error::Map)
            });
        if written.is_ok() {
            // SAFETY: the block's data part is committed RW memory of `data_len` bytes,
            // this block's alone until it is freed below.
            unsafe { std::ptr::write_bytes(block.data as *mut u8, 0, block.data_len) };
        }
        self.arena.free(&block);
        written?;
        crate::trace::reserve_spare(&capacity)
    }

    /// `r` checked against the arena's chunk size and idle limit, and what it asks of the
    /// thread's vectors and tables for this set.
    fn capacity(&self, r: &Reservation) -> Result<Capacity, Error> {
        let chunk = self.arena.chunk_bytes();
        for (option, value, align) in [
            ("Reservation::code_bytes", r.code_bytes, self.code_align),
            ("Reservation::data_bytes", r.data_bytes, self.data_align),
        ] {
            let max = chunk - (align as usize).max(GRANULE);
            if value > max {
                return Err(Error::InvalidOption {
                    option,
                    value,
                    min: 0,
                    max,
                    why: "a reservation is one arena chunk's: raise JitOptions::chunk_bytes \
                          for more",
                });
            }
        }
        let stencils = self.set.stencils.iter();
        let operands = stencils
            .clone()
            .map(|s| s.operands.len())
            .max()
            .unwrap_or(0);
        let targets = stencils.map(|s| s.targets.len()).max().unwrap_or(0);
        let max = SPARE_LIMIT / operands.max(targets).max(1);
        if r.instances > max {
            return Err(Error::InvalidOption {
                option: "Reservation::instances",
                value: r.instances,
                min: 0,
                max,
                why: "a thread keeps a builder's vectors of up to 2^20 operands, targets or \
                      records between traces",
            });
        }
        let idle = self.arena.idle_limit();
        if idle < 2 * chunk {
            return Err(Error::InvalidOption {
                option: "JitOptions::idle_chunk_bytes",
                value: idle,
                min: 2 * chunk,
                max: usize::MAX,
                why: "Jit::reserve leaves its chunk idle until traces take it, and a lower \
                      limit returns it to the system at once",
            });
        }
        Ok(Capacity {
            instances: r.instances,
            operands: r.instances * operands,
            targets: r.instances * targets,
            symbols: self.set.symbols.len(),
            got_slots: r.data_bytes / 8,
            veneers: r.code_bytes / self.facts.veneer_size.max(1),
        })
    }
}
