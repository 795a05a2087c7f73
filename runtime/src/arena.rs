//! The arena: code and data of many traces share chunks of mapped memory.
//!
//! Each chunk is one [`Region`] (code part + adjacent data part) with a first-fit free list
//! per part; freed blocks coalesce with their neighbours and are reused. A trace takes its
//! code block and its data block from the *same* chunk, so its data and GOT are always
//! within RIP-relative / `adrp` reach of its code. New chunks are reserved near the hint
//! address when more space is needed, up to a configured limit on reserved bytes.
//!
//! A chunk only *reserves* its address space; the arena *commits* (makes accessible, see
//! [`Region::commit`]) the page-rounded high-water mark of the blocks it has handed out in
//! each part, growing it when a block ends past it. First fit keeps that mark low: freed
//! space below it is reused before anything past it. So for traces that are never freed,
//! mapped memory exceeds used memory only by alignment padding, the unused tail of the
//! last (not yet shrunk) code block, and less than one page per part per chunk.
//!
//! A chunk whose last block is freed is *idle*. Idle chunks are kept, up to
//! [`JitOptions::idle_chunk_bytes`](crate::JitOptions::idle_chunk_bytes) of them (reserved
//! bytes, code + data), so that a JIT freeing and stitching traces in waves does not map and
//! unmap a chunk every time; a chunk that would exceed it is returned to the system as it
//! becomes idle (unmapped, its code pages freed): a large trace's own chunk, typically. Its
//! slot in the chunk table is reused by the next chunk reserved. On Linux every chunk's code
//! is a range of the arena's one memfd ([`CodeObject`]), so the descriptors a JIT holds do
//! not grow with its chunks.

use crate::jit::ShimFacts;
use crate::memory::{granularity, CodeObject, CodeSource, CodeWriter, Region};
use crate::Error;
use std::sync::Mutex;

mod free_list;
pub(crate) use free_list::FreeList;

/// Blocks are multiples of this many bytes and aligned to it (at least).
pub(crate) const GRANULE: usize = 16;

/// Where a trace's code and data live. (Kept small, and without its chunk's
/// [`CodeSource`]: a [`Trace`](crate::Trace) holds it and is moved several times on its
/// way to the caller, and a `Trace` over 128 bytes was moved by a `memcpy` call each time.)
#[derive(Debug)]
pub(crate) struct Block {
    pub chunk: u32,
    /// Bytes before `code_offset` that the block also holds: those skipped to place its
    /// code on the fewest pages ([`FreeList::alloc_on_fewest_pages`]), returned with it.
    pub code_lead: u32,
    pub code_offset: usize,
    pub code_len: usize,
    pub data_offset: usize,
    pub data_len: usize,
    /// Addresses: RX view of the code, data.
    pub code_rx: usize,
    pub data: usize,
}

impl Block {
    /// No block: what [`Arena::alloc_into`] writes over, and what a
    /// [`Trace`](crate::Trace) that never got its block holds (its drop frees nothing).
    pub const UNALLOCATED: Block = Block {
        chunk: u32::MAX,
        code_lead: 0,
        code_offset: 0,
        code_len: 0,
        data_offset: 0,
        data_len: 0,
        code_rx: 0,
        data: 0,
    };

    /// Whether the block was allocated (is not [`Block::UNALLOCATED`]).
    #[inline]
    pub fn allocated(&self) -> bool {
        self.chunk != u32::MAX
    }

    /// A writable view of the block's first `len` code bytes through `source` (its
    /// chunk's, as [`Arena::alloc`] returned it), until dropped: the only way code is
    /// written (no writable view of code exists otherwise).
    pub fn code_writer(&self, source: &CodeSource, len: usize) -> Result<CodeWriter, Error> {
        debug_assert!(len <= self.code_len);
        source.open(self.code_offset, len)
    }
}

/// Bytes reserved, mapped and used by an arena, for
/// [`Jit::memory_stats`](crate::Jit::memory_stats). For each part, code and data:
/// `used <= mapped <= reserved`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Address space reserved for the code and data parts of all chunks: inaccessible
    /// until committed, costing no memory. [`JitOptions::reserve_bytes`] limits the total.
    ///
    /// [`JitOptions::reserve_bytes`]: crate::JitOptions::reserve_bytes
    pub code_reserved: usize,
    pub data_reserved: usize,
    /// Bytes mapped accessible (committed) for code and data, in all chunks: each chunk's
    /// page-rounded high-water mark per part.
    pub code_mapped: usize,
    pub data_mapped: usize,
    /// Bytes in live blocks (trace code with veneers, and the bytes skipped before it to
    /// keep it on the fewest pages where code is written by the page; trace data with
    /// GOT), rounded up to the 16-byte granule.
    pub code_used: usize,
    pub data_used: usize,
    /// Chunks reserved and traces alive.
    pub chunks: usize,
    pub traces: usize,
}

impl MemoryStats {
    /// Address space reserved, code + data.
    pub fn reserved(&self) -> usize {
        self.code_reserved + self.data_reserved
    }
    /// Bytes mapped accessible (committed), code + data.
    pub fn mapped(&self) -> usize {
        self.code_mapped + self.data_mapped
    }
    /// Bytes in live blocks, code + data.
    pub fn used(&self) -> usize {
        self.code_used + self.data_used
    }
}

pub(crate) struct Arena {
    inner: Mutex<Inner>,
    near: Option<(u64, u64)>,
    chunk_bytes: usize,
    limit: usize,
    /// Most reserved bytes idle chunks keep (see the module docs).
    idle_limit: usize,
    /// Where chunks take their code part from (on Linux one memfd for all), and whether
    /// they map it with a persistent writable alias, keyed or not ([`crate::CodeWrites`]).
    object: CodeObject,
    /// The page size if code is written page by page through the system (a `pwrite` on
    /// Linux, a mapped window elsewhere), so that a block is placed on the fewest pages
    /// ([`FreeList::alloc_on_fewest_pages`]); 0 where code is written in place (through an
    /// alias, or `MAP_JIT` on macOS arm64), where a page boundary costs nothing.
    code_page: usize,
    /// What a finished trace asks of its JIT, kept here because a trace holds its arena
    /// and nothing else of the JIT (see [`Arena::with_trace_facts`]).
    pub(crate) trace_facts: TraceFacts,
}

/// What a [`Trace`](crate::Trace) needs of its JIT after `finish`: the byte that fills its
/// code when it is freed ([`JitOptions::trap_freed_code`](crate::JitOptions)), and the entry
/// shim's facts ([`Trace::entry_as`](crate::Trace::entry_as)). Read through the arena, a
/// trace keeps no copy of them (the shim's name was an `Arc` clone per trace).
#[derive(Default)]
pub(crate) struct TraceFacts {
    pub freed_fill: Option<u8>,
    pub shim: Option<ShimFacts>,
}

struct Inner {
    /// By index ([`Block::chunk`]); `None`: returned to the system, the slot free.
    chunks: Vec<Option<Chunk>>,
    stats: MemoryStats,
}

struct Chunk {
    region: Region,
    code_free: FreeList,
    data_free: FreeList,
}

impl Arena {
    /// `near`: (address, reach) to place chunks close to; `chunk_bytes`: size of each part
    /// of a normal chunk; `limit`: most bytes (code + data) ever reserved; `object`: where
    /// chunks take their code from, and how it is written ([`crate::memory::code_object`]);
    /// `idle_limit`: most reserved bytes idle chunks keep.
    pub fn new(
        near: Option<(u64, u64)>,
        chunk_bytes: usize,
        limit: usize,
        object: CodeObject,
        idle_limit: usize,
    ) -> Arena {
        Arena {
            inner: Mutex::new(Inner {
                chunks: Vec::new(),
                stats: MemoryStats::default(),
            }),
            near,
            chunk_bytes: round_up(chunk_bytes.max(1), granularity()),
            limit,
            idle_limit,
            code_page: if object.alias || cfg!(all(target_os = "macos", target_arch = "aarch64")) {
                0
            } else {
                crate::memory::page_size()
            },
            object,
            trace_facts: TraceFacts::default(),
        }
    }

    /// The arena with `facts` for its traces (none by default: freed code is left as it
    /// is, and no trace starts with an entry shim).
    pub fn with_trace_facts(self, facts: TraceFacts) -> Arena {
        Arena {
            trace_facts: facts,
            ..self
        }
    }

    /// The size of each part of a normal chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// The most reserved bytes idle chunks keep (`JitOptions::idle_chunk_bytes`).
    pub fn idle_limit(&self) -> usize {
        self.idle_limit
    }

    pub fn stats(&self) -> MemoryStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the free lists half-updated (each
        // update is a single Vec operation), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A code block of `code_len` bytes aligned to `code_align` and a data block of
    /// `data_len` bytes aligned to `data_align`, in the same chunk, and how to write the
    /// chunk's code ([`Block::code_writer`]).
    pub fn alloc(
        &self,
        code_len: usize,
        code_align: usize,
        data_len: usize,
        data_align: usize,
    ) -> Result<(Block, CodeSource), Error> {
        let mut block = Block::UNALLOCATED;
        let source = self.alloc_into(&mut block, (code_len, code_align), (data_len, data_align))?;
        Ok((block, source))
    }

    /// [`alloc`](Arena::alloc) into `out` (left as it is on an error): a `finish` takes
    /// its trace's block in place (moved out of a returned `Result`, into the trace and
    /// out of another `Result`, a block was copied four times per trace).
    pub fn alloc_into(
        &self,
        out: &mut Block,
        (code_len, code_align): (usize, usize),
        (data_len, data_align): (usize, usize),
    ) -> Result<CodeSource, Error> {
        let code_len = round_up(code_len.max(1), GRANULE);
        let data_len = round_up(data_len, GRANULE);
        let code_align = code_align.max(GRANULE);
        let data_align = data_align.max(GRANULE);
        let mut inner = self.lock();
        for index in 0..inner.chunks.len() {
            let Some(chunk) = &mut inner.chunks[index] else {
                continue;
            };
            let sizes = (code_len, code_align, self.code_page);
            if chunk.take(index, sizes, data_len, data_align, out) {
                let source = chunk.region.code_source();
                // The common case once a chunk is warm, here rather than through `commit`'s
                // look-up of the chunk (callgrind: 48 instructions per trace in `commit`).
                if chunk.committed(out) {
                    inner.stats.count(out);
                } else if let Err(e) = inner.commit(out) {
                    // (`commit` returned the block to the free lists.)
                    *out = Block::UNALLOCATED;
                    return Err(e);
                }
                return Ok(source);
            }
        }
        // Reserve a new chunk big enough for this request (alignment slack included).
        let g = granularity();
        let code_part = round_up(code_len + code_align, g).max(self.chunk_bytes);
        let data_part = round_up(data_len + data_align, g).max(self.chunk_bytes);
        let reserved = inner.stats.reserved();
        if reserved + code_part + data_part > self.limit {
            return Err(Error::OutOfMemory {
                requested: code_part + data_part,
                reserved,
                limit: self.limit,
            });
        }
        let region =
            Region::map(code_part, data_part, self.near, &self.object).map_err(Error::Map)?;
        let mut chunk = Chunk {
            code_free: FreeList::new(region.code_len),
            data_free: FreeList::new(region.data_len),
            region,
        };
        // The first free slot (of a chunk returned to the system), else a new one.
        let index = match inner.chunks.iter().position(Option::is_none) {
            Some(index) => index,
            None => {
                inner.chunks.push(None);
                inner.chunks.len() - 1
            }
        };
        let mut block = Block::UNALLOCATED;
        let taken = chunk.take(
            index,
            (code_len, code_align, self.code_page),
            data_len,
            data_align,
            &mut block,
        );
        let source = chunk.region.code_source();
        inner.stats.chunks += 1;
        inner.stats.code_reserved += chunk.region.code_len;
        inner.stats.data_reserved += chunk.region.data_len;
        inner.chunks[index] = Some(chunk);
        match taken {
            true => inner.commit(&block).map(|()| {
                *out = block;
                source
            }),
            false => unreachable!("a fresh chunk is sized for the request"),
        }
    }

    /// The addresses from the first to the end of the last code part of the arena's
    /// chunks (`None` before the first): what a symbol must be in reach of to be
    /// presumed direct ([`DirectSymbols`](crate::trace::stitch::direct::DirectSymbols)).
    pub fn code_span(&self) -> Option<std::ops::Range<u64>> {
        let inner = self.lock();
        let parts = inner.chunks.iter().flatten().map(|c| {
            let start = c.region.code_rx as u64;
            (start, start + c.region.code_len as u64)
        });
        parts
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
            .map(|(a, b)| a..b)
    }

    /// A writable view of the first `len` code bytes of `block` (a live block of this
    /// arena), for a trace that no longer has its chunk's [`CodeSource`] (freed code
    /// overwritten with traps).
    pub fn code_writer(&self, block: &Block, len: usize) -> Result<CodeWriter, Error> {
        let source = live(&mut self.lock().chunks, block.chunk)
            .region
            .code_source();
        block.code_writer(&source, len)
    }

    /// Returns the code bytes past `code_len` and the data bytes past `data_len` (each
    /// rounded up to the granule) to the arena.
    /// Inline: most traces use all they reserved, and then this is a comparison.
    #[inline]
    pub fn shrink(&self, block: &mut Block, code_len: usize, data_len: usize) {
        let code_len = round_up(code_len.max(1), GRANULE);
        let data_len = round_up(data_len, GRANULE);
        if code_len >= block.code_len && data_len >= block.data_len {
            return;
        }
        self.give_back(block, code_len, data_len);
    }

    // Each part in its own call of `shrink_part`, not a loop over an array of both (which
    // the compiler built on the stack: 67 instructions per trace, callgrind, straight-100).
    #[inline(never)]
    fn give_back(&self, block: &mut Block, code_len: usize, data_len: usize) {
        let mut inner = self.lock();
        let Inner { chunks, stats } = &mut *inner;
        let chunk = live(chunks, block.chunk);
        let code = (block.code_offset, &mut block.code_len);
        shrink_part(&mut chunk.code_free, code, code_len, &mut stats.code_used);
        let data = (block.data_offset, &mut block.data_len);
        shrink_part(&mut chunk.data_free, data, data_len, &mut stats.data_used);
    }

    /// Cuts `block` into `count` consecutive blocks, block `i` starting at `start(i)`
    /// (code and data offsets into `block`, increasing, the first `(0, 0)`, each a multiple
    /// of [`GRANULE`]), which together cover it, and returns `make` of each; each is then
    /// freed (or shrunk) on its own, as a block of its own.
    pub fn split<T>(
        &self,
        block: Block,
        count: usize,
        start: impl Fn(usize) -> (usize, usize),
        mut make: impl FnMut(Block) -> T,
    ) -> Vec<T> {
        debug_assert!(count > 0 && start(0) == (0, 0));
        // Collected from a range (exact length): each value is built in its place.
        let out: Vec<T> = (0..count)
            .map(|i| {
                let (code, data) = start(i);
                let (code_end, data_end) = if i + 1 < count {
                    start(i + 1)
                } else {
                    (block.code_len, block.data_len)
                };
                debug_assert!(code % GRANULE == 0 && code < code_end && data <= data_end);
                make(Block {
                    chunk: block.chunk,
                    code_lead: if i == 0 { block.code_lead } else { 0 },
                    code_offset: block.code_offset + code,
                    code_len: code_end - code,
                    data_offset: block.data_offset + data,
                    data_len: data_end - data,
                    code_rx: block.code_rx + code,
                    data: block.data + data,
                })
            })
            .collect();
        if count > 1 {
            self.lock().stats.traces += count - 1;
        }
        out
    }

    pub fn free(&self, block: &Block) {
        let mut inner = self.lock();
        let chunk = live(&mut inner.chunks, block.chunk);
        chunk.region.retire_code(block.code_offset, block.code_len);
        let (held_at, held) = block.code_held();
        chunk.code_free.free_front(held_at, held);
        if block.data_len != 0 {
            chunk
                .data_free
                .free_front(block.data_offset, block.data_len);
        }
        let idle = chunk.idle();
        inner.stats.code_used -= held;
        inner.stats.data_used -= block.data_len;
        inner.stats.traces -= 1;
        // Idle chunks can hold more than the limit only if all chunks do (one test: a JIT
        // freeing its only trace leaves its only chunk idle, usually within the limit).
        if idle && inner.stats.reserved() > self.idle_limit {
            release_if_over(inner, block.chunk as usize, self.idle_limit);
        }
    }
}

/// Shrinks one part of a block (at `offset`, `len` bytes) to `new_len` bytes, if shorter:
/// its tail goes back to `free` and out of the `used` count.
#[inline(always)]
fn shrink_part(
    free: &mut FreeList,
    (offset, len): (usize, &mut usize),
    new_len: usize,
    used: &mut usize,
) {
    if new_len < *len {
        let tail = *len - new_len;
        free.free_front(offset + new_len, tail);
        *used -= tail;
        *len = new_len;
    }
}

/// The chunk of a block (of a live or just freed trace, so its chunk is mapped).
fn live(chunks: &mut [Option<Chunk>], index: u32) -> &mut Chunk {
    match &mut chunks[index as usize] {
        Some(chunk) => chunk,
        None => unreachable!("a block of chunk {index}, which was returned to the system"),
    }
}

impl Inner {
    /// Commits the chunk's parts up to the end of `block` and counts the block as used; on
    /// failure the block goes back to the free lists (and whatever was committed before the
    /// failure stays committed and counted). By reference: a `Block` is 88 bytes, and
    /// moving it in and out was a tenth of `alloc`'s instructions.
    #[inline(never)]
    fn commit(&mut self, block: &Block) -> Result<(), Error> {
        let chunk = live(&mut self.chunks, block.chunk);
        if chunk.committed(block) {
            self.stats.count(block);
            return Ok(());
        }
        let region = &mut chunk.region;
        let before = (region.code_committed, region.data_committed);
        let result = region.commit(block.code_offset + block.code_len, block.data_end());
        self.stats.code_mapped += region.code_committed - before.0;
        self.stats.data_mapped += region.data_committed - before.1;
        if let Err(e) = result {
            let (held_at, held) = block.code_held();
            chunk.code_free.free(held_at, held);
            if block.data_len != 0 {
                chunk.data_free.free(block.data_offset, block.data_len);
            }
            return Err(Error::Map(e));
        }
        self.stats.count(block);
        Ok(())
    }
}

impl MemoryStats {
    /// Counts `block` as used by a live trace.
    #[inline]
    fn count(&mut self, block: &Block) {
        self.code_used += block.code_len + block.code_lead as usize;
        self.data_used += block.data_len;
        self.traces += 1;
    }
}

impl Block {
    /// The code bytes the block holds, its lead included: (first offset, length).
    #[inline]
    fn code_held(&self) -> (usize, usize) {
        let lead = self.code_lead as usize;
        (self.code_offset - lead, self.code_len + lead)
    }

    /// Where the block's data ends in its chunk's data part (0 without data).
    #[inline]
    fn data_end(&self) -> usize {
        if self.data_len == 0 {
            0
        } else {
            self.data_offset + self.data_len
        }
    }
}

/// Takes idle chunk `index` out of the table and unmaps it, once `inner`'s lock is
/// released, if keeping it would make the idle chunks hold more than `limit` reserved
/// bytes. (Out of line, the chunk moved only here: inline, its moves were 16 instructions
/// of every free.)
#[cold]
#[inline(never)]
fn release_if_over(mut inner: std::sync::MutexGuard<'_, Inner>, index: usize, limit: usize) {
    let idle: usize = inner
        .chunks
        .iter()
        .flatten()
        .filter(|c| c.idle())
        .map(Chunk::reserved)
        .sum();
    if idle <= limit {
        return;
    }
    let Some(chunk) = inner.chunks[index].take() else {
        return;
    };
    let s = &mut inner.stats;
    s.chunks -= 1;
    s.code_reserved -= chunk.region.code_len;
    s.data_reserved -= chunk.region.data_len;
    s.code_mapped -= chunk.region.code_committed;
    s.data_mapped -= chunk.region.data_committed;
    // Unmapped once the lock is released.
    drop(inner);
    drop(chunk);
}

impl Chunk {
    /// Whether no block of the chunk is in use (every block has code, so then its code
    /// part is one free range).
    fn idle(&self) -> bool {
        self.code_free.is_whole(self.region.code_len)
    }

    /// Bytes reserved for both parts.
    fn reserved(&self) -> usize {
        self.region.code_len + self.region.data_len
    }

    /// Whether `block` (one of this chunk's) lies inside the committed prefixes.
    #[inline]
    fn committed(&self, block: &Block) -> bool {
        let region = &self.region;
        block.code_offset + block.code_len <= region.code_committed
            && block.data_end() <= region.data_committed
    }

    // Inline, as is the check of the committed prefixes in `alloc`: `alloc` with both out
    // of line was 227 instructions per trace, 160 with both inline (callgrind, straight-10);
    // always, since the page rule made the compiler leave it out of line (+40).
    // Into `out` (written only if it returns `true`): a block returned and then stored was
    // built on the stack and copied, 10 instructions per trace.
    #[inline(always)]
    fn take(
        &mut self,
        index: usize,
        (code_len, code_align, code_page): (usize, usize, usize),
        data_len: usize,
        data_align: usize,
        out: &mut Block,
    ) -> bool {
        // Alignment is of the run-time address, so align relative to the part's start
        // (parts start page-aligned, and alignments beyond a page are not supported).
        // Off the fewest pages rather than not at all: the rule never costs a new chunk.
        let code = match code_page {
            0 => self.code_free.alloc(code_len, code_align).map(|at| (at, 0)),
            page => (self.code_free)
                .alloc_on_fewest_pages(code_len, code_align, page)
                .or_else(|| Some((self.code_free.alloc(code_len, code_align)?, 0))),
        };
        let Some((code_offset, code_lead)) = code else {
            return false;
        };
        let data_offset = if data_len == 0 {
            0
        } else {
            match self.data_free.alloc(data_len, data_align) {
                Some(offset) => offset,
                None => {
                    self.code_free
                        .free(code_offset - code_lead, code_len + code_lead);
                    return false;
                }
            }
        };
        *out = Block {
            // (Chunks are at least a page each: their count fits; a lead is under a page.)
            chunk: index as u32,
            code_lead: code_lead as u32,
            code_offset,
            code_len,
            data_offset,
            data_len,
            code_rx: self.region.code_rx + code_offset,
            data: self.region.data + data_offset,
        };
        true
    }
}

pub(crate) fn round_up(x: usize, align: usize) -> usize {
    (x + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_reuses_freed_blocks_and_respects_its_limit() {
        let g = granularity();
        let arena = Arena::new(None, g, 4 * g, CodeObject::new(false), usize::MAX);
        let (a, _) = arena.alloc(100, 16, 40, 8).unwrap();
        let (b, _) = arena.alloc(100, 16, 0, 8).unwrap();
        assert_eq!((a.code_len, a.data_len, b.data_len), (112, 48, 0));
        assert_eq!(b.code_offset, 112);
        arena.free(&a);
        let (c, _) = arena.alloc(50, 16, 8, 8).unwrap();
        assert_eq!((c.code_offset, c.data_offset), (0, 0));
        let s = arena.stats();
        assert_eq!(
            (s.chunks, s.traces, s.code_used, s.data_used),
            (1, 2, 176, 16)
        );
        let page = crate::memory::page_size();
        assert_eq!((s.code_reserved, s.data_reserved), (g, g));
        assert_eq!((s.code_mapped, s.data_mapped), (page, page));
        // A request that does not fit the first chunk maps a bigger one, within the limit.
        let big = arena.alloc(g + 1, 16, 0, 8);
        assert!(matches!(big, Err(Error::OutOfMemory { .. })), "{big:?}");
        arena.free(&b);
        arena.free(&c);
        assert_eq!(arena.stats().used(), 0);
    }

    #[test]
    fn commits_follow_the_high_water_mark_and_survive_frees() {
        let page = crate::memory::page_size();
        let arena = Arena::new(None, 64 * page, 1 << 30, CodeObject::new(false), usize::MAX);
        let mut blocks = Vec::new();
        // Blocks of a third of a page: the mapped prefix grows page by page, never more
        // than one page ahead of the last block's end.
        let len = page / 3 / GRANULE * GRANULE;
        for i in 0..100 {
            let (b, source) = arena.alloc(len, 16, len, 16).unwrap();
            let s = arena.stats();
            let end = (i + 1) * len;
            for (mapped, reserved) in [
                (s.code_mapped, s.code_reserved),
                (s.data_mapped, s.data_reserved),
            ] {
                assert_eq!(mapped, round_up(end, page), "block {i}");
                assert_eq!(reserved, 64 * page);
            }
            // Every committed byte of both blocks is usable.
            let mut writer = b.code_writer(&source, b.code_len).unwrap();
            writer.bytes().fill(0xc3);
            writer.publish().unwrap();
            // SAFETY: the block's data part is committed RW memory of `data_len` bytes.
            unsafe {
                std::ptr::write_bytes(b.data as *mut u8, 0x11, b.data_len);
            }
            blocks.push(b);
        }
        let mapped = arena.stats().mapped();
        // Freeing does not decommit, and freed space is reused without committing more.
        for b in blocks.drain(..50) {
            arena.free(&b);
        }
        assert_eq!(arena.stats().mapped(), mapped);
        for _ in 0..50 {
            blocks.push(arena.alloc(len, 16, len, 16).unwrap().0);
        }
        let s = arena.stats();
        assert_eq!((s.mapped(), s.traces, s.chunks), (mapped, 100, 1));
        // Shrinking a block returns its tail for reuse below the mark.
        let (mut big, _) = arena.alloc(3 * page, 16, 64, 8).unwrap();
        let mark = arena.stats().code_mapped;
        arena.shrink(&mut big, 16, 16);
        assert_eq!((big.code_len, big.data_len), (16, 16));
        let (next, _) = arena.alloc(16, 16, 16, 8).unwrap();
        assert_eq!(next.code_offset, big.code_offset + 16);
        assert_eq!(next.data_offset, big.data_offset + 16);
        assert_eq!(arena.stats().code_mapped, mark);
        for b in blocks.iter().chain([&big, &next]) {
            arena.free(b);
        }
        assert_eq!(arena.stats().used(), 0);
    }

    /// Where code is written by the page (a `pwrite` here), a block that fits in a page is
    /// not split across two: it starts on the next page and holds the bytes skipped, which
    /// are counted as used and freed with it; through a persistent alias (written in place)
    /// blocks stay packed.
    #[test]
    fn code_written_by_the_page_is_placed_on_the_fewest_pages() {
        let page = crate::memory::page_size();
        let half = page / 2 + GRANULE;
        // Without a persistent alias (only Linux has one) the second case is the first
        // again; macOS arm64 writes in place (`MAP_JIT`) in both.
        let in_place =
            |alias: bool| alias || cfg!(all(target_os = "macos", target_arch = "aarch64"));
        for alias in [false, crate::memory::PERSISTENT_ALIAS] {
            let second_at = if in_place(alias) { half } else { page };
            let arena = Arena::new(None, 4 * page, 1 << 30, CodeObject::new(alias), 1 << 30);
            let (a, _) = arena.alloc(half, 16, 16, 16).unwrap();
            let (b, _) = arena.alloc(half, 16, 16, 16).unwrap();
            assert_eq!(
                (a.code_offset, b.code_offset),
                (0, second_at),
                "alias: {alias}"
            );
            assert_eq!(arena.stats().code_used, second_at + half);
            arena.free(&b);
            arena.free(&a);
            assert_eq!(arena.stats().used(), 0);
            // Every byte came back: a block of the whole part fits again.
            let (whole, _) = arena.alloc(4 * page - GRANULE, 16, 0, 16).unwrap();
            assert_eq!((whole.code_offset, arena.stats().chunks), (0, 1));
            arena.free(&whole);
        }
    }
}
