//! One buffer per stencil set for what the patch programs keep (their code and data blocks,
//! steps, needs and cold parts), instead of an allocation each: compiling the reference VM's set made
//! 7,228 allocations (1.16M of `program::compile`'s 5.19M instructions), which every
//! client's [`Jit::new`](crate::Jit::new) paid.
//!
//! Each buffer is reserved once at a size no set can exceed (from its stencils' lengths
//! and hole counts) and never grows, so that a [`Pooled`] slice handed out stays where it
//! is; [`Programs`] keeps the buffers with the programs that point into them.

use super::{Need, Program, Step};
use cpjit_model::Stencil;
use std::ops::Deref;
#[cfg(test)]
use std::ops::DerefMut;
use std::ptr::NonNull;

/// A slice of a [`Pool`]'s buffer: what a program held as a `Box<[T]>` (the same 16
/// bytes, read the same way), without an allocation of its own. Only [`Pool`] makes one;
/// it lives in a [`Program`] of the [`Programs`] that owns the buffer.
pub(crate) struct Pooled<T> {
    ptr: NonNull<T>,
    len: usize,
}

impl<T> Deref for Pooled<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr..ptr + len` was written by `Pool::put` into a buffer that never
        // grows (no reallocation moves it) and is only read afterwards; the [`Programs`]
        // that holds this slice's program owns the buffer, and drops it after its programs.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Pooled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.deref().fmt(f)
    }
}

// SAFETY: a `Pooled` only reads its elements (as a `&[T]` would), which nothing writes
// once it exists.
unsafe impl<T: Sync> Send for Pooled<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Pooled<T> {}

/// A program's cold part in a [`Pool`]: what it held as a `Box<Program>` (8 bytes, read
/// the same way), without an allocation of its own; made and kept as a [`Pooled`] slice.
pub(crate) struct PooledCold(NonNull<Program>);

impl Deref for PooledCold {
    type Target = Program;

    #[inline(always)]
    fn deref(&self) -> &Program {
        // SAFETY: as `Pooled::deref`'s, of one program written by `Pool::cold`.
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: as `Pooled`'s: the program is only read.
unsafe impl Send for PooledCold {}
// SAFETY: as above.
unsafe impl Sync for PooledCold {}

impl PooledCold {
    /// The cold part, to change it (`compile` sets its quick form; tests turn it off): only
    /// through its program, which alone points to it, held `&mut`.
    pub fn get_mut(&mut self) -> &mut Program {
        // SAFETY: as `deref`'s; no other pointer to this program exists, and `self` is
        // borrowed `&mut` for as long as the result.
        unsafe { self.0.as_mut() }
    }
}

/// 16 bytes of a program's code or data, aligned as the allocator aligned the boxes the
/// blocks were (the copy loop moves them 16 bytes at a time).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Block([u8; 16]);

/// The buffers of one set's programs.
pub(crate) struct Pool {
    blocks: Vec<Block>,
    steps: Vec<Step>,
    needs: Vec<Need>,
    colds: Vec<Program>,
}

impl Pool {
    /// Buffers for the programs of `stencils`, large enough for any of them: per stencil
    /// its code in blocks (one more for a cold part split off, whose two parts are padded
    /// each), its data in blocks, one step and one need per hole at most, and its cold part's
    /// program if it has one.
    pub fn for_stencils(stencils: &[Stencil<'_>]) -> Pool {
        let blocks = |len: usize| len.div_ceil(16);
        let (mut b, mut holes, mut colds) = (0, 0, 0);
        for s in stencils {
            b += blocks(s.code.len()) + 1 + blocks(s.data_len as usize);
            holes += s.holes.len();
            colds += usize::from(s.cold_len != 0);
        }
        Pool {
            blocks: Vec::with_capacity(b),
            steps: Vec::with_capacity(holes),
            needs: Vec::with_capacity(holes),
            colds: Vec::with_capacity(colds),
        }
    }

    /// `bytes` then `fill` up to `len` bytes rounded up to 16 (`bytes` cut there if
    /// longer), as blocks.
    pub fn bytes(&mut self, bytes: &[u8], fill: u8, len: usize) -> Pooled<u8> {
        let n = len.div_ceil(16);
        let from = self.blocks.len();
        assert!(n <= self.blocks.capacity() - from, "pool sized for the set");
        self.blocks.resize(from + n, Block([fill; 16]));
        // (Through `as_mut_ptr`, which makes no reference to the whole buffer: the slices
        // handed out before stay valid.)
        // SAFETY: blocks `from..from + n` are initialized, 16 bytes each without padding
        // (`repr(C)` of one array), and `copied` is at most their `n * 16` bytes.
        let ptr =
            unsafe { NonNull::new_unchecked(self.blocks.as_mut_ptr().add(from)).cast::<u8>() };
        let copied = bytes.len().min(n * 16);
        // SAFETY: as above; `bytes` is another allocation.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), copied) };
        Pooled { ptr, len: n * 16 }
    }

    pub fn steps(&mut self, steps: &[Step]) -> Pooled<Step> {
        put(&mut self.steps, steps)
    }

    pub fn needs(&mut self, needs: &[Need]) -> Pooled<Need> {
        put(&mut self.needs, needs)
    }

    /// The cold part `cold` of a stencil's program (one per stencil: the pointer is the
    /// only one to it).
    pub fn cold(&mut self, cold: Program) -> PooledCold {
        let at = self.colds.len();
        assert!(at < self.colds.capacity(), "pool sized for the set");
        self.colds.push(cold);
        // SAFETY: as in `put`.
        PooledCold(unsafe { NonNull::new_unchecked(self.colds.as_mut_ptr().add(at)) })
    }
}

/// `items` appended to `buffer` (within its capacity: it never moves) and their slice.
fn put<T: Copy>(buffer: &mut Vec<T>, items: &[T]) -> Pooled<T> {
    let from = buffer.len();
    assert!(
        items.len() <= buffer.capacity() - from,
        "pool sized for the set"
    );
    buffer.extend_from_slice(items);
    // SAFETY: `from` is at most the length (`as_mut_ptr` makes no reference to the whole
    // buffer: the slices handed out before stay valid).
    let ptr = unsafe { NonNull::new_unchecked(buffer.as_mut_ptr().add(from)) };
    Pooled {
        ptr,
        len: items.len(),
    }
}

/// A set's programs, by stencil index, with the [`Pool`] they point into (dropped after
/// them: fields drop in order).
pub(crate) struct Programs {
    list: Box<[Program]>,
    _pool: Pool,
}

impl Programs {
    pub fn new(list: Box<[Program]>, pool: Pool) -> Programs {
        Programs { list, _pool: pool }
    }
}

impl Deref for Programs {
    type Target = [Program];

    fn deref(&self) -> &[Program] {
        &self.list
    }
}

// For tests that turn quick forms off. (Not in the kit: a `&mut` program could be swapped
// with one of another set's programs, which its pool would outlive.)
#[cfg(test)]
impl DerefMut for Programs {
    fn deref_mut(&mut self) -> &mut [Program] {
        &mut self.list
    }
}

/// A stencil's program compiled alone with a pool of its own, for tests.
#[cfg(test)]
pub(crate) struct Alone(pub Programs);

#[cfg(test)]
impl Deref for Alone {
    type Target = Program;

    fn deref(&self) -> &Program {
        &self.0[0]
    }
}

#[cfg(test)]
impl DerefMut for Alone {
    fn deref_mut(&mut self) -> &mut Program {
        &mut self.0[0]
    }
}
