//! Where the blocks that compiled code finds by their address live: [`LowSlice`], for an
//! executor's exit link blocks ([`ExitLink`]) and call sites ([`CallSite`]). Every exit stub
//! takes its link block's address as a whole operand (`ARG1`, cached/exit.c), `CALL_JIT` and
//! `GUARD_CALL_DEPTH` their call site's (`ARG0`); the kit patches such an operand into an
//! `imm32` where it fits and loads it from a GOT slot where it does not. A heap address never
//! fits, so each of them cost its compile the wide operand's path (the program's quick form
//! tried and failed, its steps run one by one, a GOT slot looked up at `push` and again at
//! the write) and its run a load.
//!
//! On x86-64 Linux the blocks are therefore carved from chunks mapped below 2 GiB
//! (`MAP_32BIT`), where every address is a sign-extended 32-bit immediate; freed runs are
//! kept by size for the next executor (the chunks are never unmapped: a process keeps its
//! peak of live blocks, 24 bytes per exit or call). Elsewhere, or when that space is
//! exhausted, they are boxed on the heap as before (the wide path, correct but slower).
//!
//! (Under valgrind the heap itself lies below 2 GiB: callgrind counts of the VM's compile
//! never saw the wide path, which native runs took for every exit stub.)

use super::{CallSite, ExitLink};
use std::ops::Deref;
use std::ptr::NonNull;

/// An executor's exit link blocks, one per exit.
pub type LinkBlocks = LowSlice<ExitLink>;
/// An executor's call sites, one per call.
pub type CallSites = LowSlice<CallSite>;

/// A slice of `T`s that never moves while it lives, below 2 GiB where the target allows it
/// (see the module doc); freed (kept for reuse) when dropped. `T` is one of the blocks
/// above: 8-aligned, a multiple of 8 bytes, nothing to drop.
pub struct LowSlice<T: Block> {
    place: Place<T>,
}

/// What a [`LowSlice`] holds: plain data that compiled code reads and writes by address.
pub trait Block: Sized {}
impl Block for ExitLink {}
impl Block for CallSite {}

enum Place<T> {
    /// `len` elements in `pool`.
    Low(NonNull<T>, usize),
    Heap(Box<[T]>),
}

impl<T: Block> LowSlice<T> {
    /// `n` elements, element `k` made by `make(k)`.
    pub fn new(n: usize, mut make: impl FnMut(usize) -> T) -> LowSlice<T> {
        const {
            assert!(align_of::<T>() <= 8 && size_of::<T>() % 8 == 0 && size_of::<T>() > 0);
            assert!(!std::mem::needs_drop::<T>());
        }
        let place = match pool::take(n * size_of::<T>()) {
            Some(at) => {
                let ptr = at.cast::<T>();
                for k in 0..n {
                    // SAFETY: `take` gave room for `n` elements, 8-aligned, ours now.
                    unsafe { ptr.as_ptr().add(k).write(make(k)) };
                }
                Place::Low(ptr, n)
            }
            None => Place::Heap((0..n).map(make).collect()),
        };
        LowSlice { place }
    }

    /// Whether every element lies where a sign-extended 32-bit immediate reaches it.
    pub fn reachable_by_imm32(&self) -> bool {
        let end = self.as_ptr() as u64 + std::mem::size_of_val::<[T]>(self) as u64;
        end <= i32::MAX as u64
    }
}

impl<T: Block> Deref for LowSlice<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.place {
            // SAFETY: `new` wrote `len` elements there, ours until dropped.
            Place::Low(ptr, len) => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
            Place::Heap(b) => b,
        }
    }
}

impl<T: Block> Drop for LowSlice<T> {
    fn drop(&mut self) {
        if let Place::Low(ptr, len) = self.place {
            // (Nothing to drop in place: `Block`s are plain data, checked in `new`.)
            pool::give_back(ptr.cast(), len * size_of::<T>());
        }
    }
}

impl<T: Block + std::fmt::Debug> std::fmt::Debug for LowSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod pool {
    //! The pool of blocks below 2 GiB (x86-64 Linux).

    use std::ptr::NonNull;
    use std::sync::Mutex;

    /// Bytes mapped at a time.
    const CHUNK: usize = 64 << 10;
    /// Longer runs (an executor with more than 256 exits or calls) go to the heap.
    const MAX_RUN: usize = 256 * 24;

    /// Free runs by length in words (their addresses), and the unused rest of the last
    /// chunk.
    struct Pool {
        free: Vec<Vec<usize>>,
        next: usize,
        end: usize,
        /// No chunk could be mapped low once: no more tries.
        exhausted: bool,
        /// Where to ask for the next chunk when `MAP_32BIT` is not honoured.
        hint: usize,
    }

    static POOL: Mutex<Pool> = Mutex::new(Pool {
        free: Vec::new(),
        next: 0,
        end: 0,
        exhausted: false,
        hint: 1 << 30,
    });

    /// `bytes` (a multiple of 8) below 2 GiB, 8-aligned, or `None` (none asked for, too
    /// many, or no low memory left).
    pub(super) fn take(bytes: usize) -> Option<NonNull<u8>> {
        if bytes == 0 || bytes > MAX_RUN {
            return None;
        }
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let at = match pool.free.get_mut(bytes / 8).and_then(Vec::pop) {
            Some(at) => at,
            None => pool.bump(bytes)?,
        };
        NonNull::new(at as *mut u8)
    }

    /// Keeps a run of `bytes` that [`take`] gave for the next of its size.
    pub(super) fn give_back(at: NonNull<u8>, bytes: usize) {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let words = bytes / 8;
        if pool.free.len() <= words {
            pool.free.resize_with(words + 1, Vec::new);
        }
        pool.free[words].push(at.as_ptr() as usize);
    }

    impl Pool {
        /// `bytes` fresh bytes below 2 GiB, 8-aligned.
        fn bump(&mut self, bytes: usize) -> Option<usize> {
            if self.end - self.next < bytes {
                if self.exhausted {
                    return None;
                }
                let Some(at) = self.map_low() else {
                    self.exhausted = true;
                    return None;
                };
                // (The rest of the previous chunk, shorter than this run, is left unused.)
                (self.next, self.end) = (at, at + CHUNK);
            }
            let at = self.next;
            self.next += bytes;
            Some(at)
        }

        /// A new chunk below 2 GiB: where `MAP_32BIT` puts it, else (a kernel or tool that
        /// does not honour the flag) at the address hinted next.
        fn map_low(&mut self) -> Option<usize> {
            for (hint, flags) in [(0, libc::MAP_32BIT), (self.hint, 0)] {
                // SAFETY: a new private anonymous mapping (a hint, never `MAP_FIXED`):
                // nothing else is affected.
                let at = unsafe {
                    libc::mmap(
                        hint as *mut libc::c_void,
                        CHUNK,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                        -1,
                        0,
                    )
                };
                if at == libc::MAP_FAILED {
                    continue;
                }
                if at as usize + CHUNK <= i32::MAX as usize {
                    self.hint = at as usize + CHUNK;
                    return Some(at as usize);
                }
                // SAFETY: the mapping just made, unused.
                unsafe { libc::munmap(at, CHUNK) };
            }
            None
        }
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod pool {
    //! No low pool on this target: every slice is boxed.

    use std::ptr::NonNull;

    pub(super) fn take(_bytes: usize) -> Option<NonNull<u8>> {
        None
    }

    pub(super) fn give_back(_at: NonNull<u8>, _bytes: usize) {
        unreachable!("no low blocks on this target")
    }
}

#[cfg(test)]
mod tests {
    use super::{CallSites, LinkBlocks};
    use crate::abi::{CallSite, ExitLink};

    const LOW: bool = cfg!(all(target_os = "linux", target_arch = "x86_64"));

    fn zeroed(l: &ExitLink) -> bool {
        (l.link.get(), l.pinned.get(), l.exit_at.get()) == (0, 0, 0)
    }

    /// Blocks start as made, stay where they are, and a freed run comes back to the next
    /// slice of its size made afresh; on x86-64 Linux they are reachable by an `imm32`.
    #[test]
    fn blocks_are_made_distinct_and_reused_made_afresh() {
        // A length no other test of this binary asks for: the freed run is the one reused.
        const N: usize = 37;
        let a = LinkBlocks::new(N, |_| ExitLink::default());
        let b = LinkBlocks::new(N, |_| ExitLink::default());
        assert_eq!((a.len(), b.len()), (N, N));
        assert_ne!(a.as_ptr(), b.as_ptr());
        // (Elsewhere the heap may lie low too: wine's did in one run of the matrix.)
        if LOW {
            assert!(a.reachable_by_imm32());
        }
        assert!(a.iter().all(zeroed));
        for (k, link) in a.iter().enumerate() {
            link.link.set(k as u64 + 1);
            link.pinned.set(7);
            link.exit_at.set(9);
        }
        // `b` is untouched by writes to `a`.
        assert!(b.iter().all(zeroed));
        let at = a.as_ptr();
        drop(a);
        let c = LinkBlocks::new(N, |_| ExitLink::default());
        assert!(c.iter().all(zeroed));
        if LOW {
            assert_eq!(c.as_ptr(), at, "the freed run is reused");
        }
        // Runs of one size serve another type of that size: the elements are made anew.
        drop(c);
        let sites = CallSites::new(N, |k| CallSite {
            callee: std::ptr::null(),
            pc: k as i64,
            argc: 3,
        });
        assert!(sites
            .iter()
            .enumerate()
            .all(|(k, s)| s.callee.is_null() && (s.pc, s.argc) == (k as i64, 3)));
        if LOW {
            assert_eq!(sites.as_ptr() as usize, at as usize);
        }
    }

    /// No elements, and more than the pool's longest run, still give slices (boxed).
    #[test]
    fn empty_and_long_slices_are_boxed() {
        let empty = LinkBlocks::new(0, |_| ExitLink::default());
        assert!(empty.is_empty());
        let long = LinkBlocks::new(1000, |_| ExitLink::default());
        assert_eq!(long.len(), 1000);
        assert!(long.iter().all(zeroed));
    }
}
