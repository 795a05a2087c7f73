//! The arena's free lists: free ranges of one part of a chunk (or of the code object's file
//! offsets), first fit, coalesced; and the placement rule for code written by the page.
//!
//! **Fewest pages.** Where code is written through the kernel (Linux without protection
//! keys: one `pwrite` per trace into the code memfd), the write's cost grows with the pages
//! it touches, not with its bytes: measured (wave 33, this kernel, C loop) 237–256 ns for a
//! 1,088-byte write inside one page, 352–354 ns across a page boundary. So the code part's
//! list places a block where it spans no more pages than its length needs
//! ([`FreeList::alloc_on_fewest_pages`]): a block that fits in a page is never split across
//! two, a longer one starts where it spans the fewest. The bytes skipped stay a free range
//! that a later, shorter block can take (first fit).
//!
//! Measured again (wave 36, load about 20; writes counted in `pwrite_all`, the rule
//! switched off by a temporary build): with the rule no write of the clients spans more
//! pages than its length needs; without it, 2 % of straight-10's writes (bench,
//! `--profile-stitch`, 112 bytes each), 20 % of straight-100's (944 bytes) and 22 % of the
//! VM's on nbody (`compile-time`) would, the eBPF JIT's compile-and-drop loop none (its
//! block is at offset 0 either way). Straight-100's thread CPU per instance without the
//! rule: 11.14 ns (11.11–11.23) against 10.91 (10.76–11.68) with it, nine alternated pairs,
//! ratio 1.023 (0.95–1.04), about 115 ns per write that crosses. Its memory cost (the
//! bench's `memory` case, 1,000 live traces): none for 3 or 10 instances per trace, 82
//! bytes per trace (+3.8 % mapped) for 100, +0.8 % for 100 traces of 1,000.

use super::round_up;

/// Free ranges `(start, len)` of one part, sorted by start, never adjacent (coalesced).
/// (Also the free file offsets of an arena's code object, `memory/code_file.rs`.)
pub(crate) struct FreeList {
    ranges: Vec<(usize, usize)>,
}

/// `at`, or if a block of `len` bytes there would span more pages (of `page` bytes, a power
/// of two) than its length needs, the next page boundary, where it spans the fewest.
#[inline(always)]
fn on_fewest_pages(at: usize, len: usize, page: usize) -> usize {
    if (at & (page - 1)) + len > round_up(len, page) {
        round_up(at, page)
    } else {
        at
    }
}

impl FreeList {
    pub(crate) fn new(len: usize) -> FreeList {
        FreeList {
            ranges: vec![(0, len)],
        }
    }

    /// Whether the list is one free range `0..len` (nothing of a part of `len` bytes in use).
    pub(crate) fn is_whole(&self, len: usize) -> bool {
        self.ranges[..] == [(0, len)]
    }

    /// First fit: the lowest free range that holds `len` bytes at an `align`ed offset.
    // Inline: the common case (the first range, aligned, holds it) is a few instructions,
    // and the call to the search was as many again (about 57 instructions per block).
    #[inline]
    pub(crate) fn alloc(&mut self, len: usize, align: usize) -> Option<usize> {
        if let Some((start, size)) = self.ranges.first_mut() {
            if *start & (align - 1) == 0 && len < *size {
                let at = *start;
                (*start, *size) = (at + len, *size - len);
                return Some(at);
            }
        }
        self.first_fit(len, align, |at| at)
    }

    /// [`alloc`](FreeList::alloc) at the lowest offset where the block also spans no more
    /// pages of `page` bytes (a power of two, at least `align`) than its length needs (see
    /// the module docs): the block's offset and its *lead*, the bytes before it that the
    /// caller holds with it and frees with it (`free(at - lead, lead + len)`). From the
    /// front of the first range, the bytes skipped to the next page boundary are the lead,
    /// not a free range of their own: a range there would be first in the list, and every
    /// later block that does not fit it would search past it (callgrind, straight-10: 96
    /// instructions more per trace). Inline for the same reason as `alloc`.
    #[inline]
    pub(crate) fn alloc_on_fewest_pages(
        &mut self,
        len: usize,
        align: usize,
        page: usize,
    ) -> Option<(usize, usize)> {
        if let Some((start, size)) = self.ranges.first_mut() {
            let (from, end) = (*start, *start + *size);
            let at = on_fewest_pages(from, len, page);
            if from & (align - 1) == 0 && at + len < end {
                (*start, *size) = (at + len, end - (at + len));
                return Some((at, at - from));
            }
        }
        let at = self.first_fit(len, align, |at| on_fewest_pages(at, len, page))?;
        Some((at, 0))
    }

    /// The allocations in general: the first range that holds `len` bytes at an `align`ed
    /// offset moved on by `place` (which only moves it up, keeping it aligned), split around
    /// them.
    #[inline(never)]
    fn first_fit(
        &mut self,
        len: usize,
        align: usize,
        place: impl Fn(usize) -> usize,
    ) -> Option<usize> {
        let (i, start) = self
            .ranges
            .iter()
            .enumerate()
            .find_map(|(i, &(start, size))| {
                // (Most ranges a search passes are too short for any placement: the bytes
                // left before a page boundary, or a freed short block's.)
                if size < len {
                    return None;
                }
                let at = place(round_up(start, align));
                (at + len <= start + size).then_some((i, at))
            })?;
        let (range_start, range_len) = self.ranges[i];
        let range_end = range_start + range_len;
        let before = (range_start, start - range_start);
        let after = (start + len, range_end - (start + len));
        match (before.1 != 0, after.1 != 0) {
            (false, false) => {
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i] = before,
            (false, true) => self.ranges[i] = after,
            (true, true) => {
                self.ranges[i] = before;
                self.ranges.insert(i + 1, after);
            }
        }
        Some(start)
    }

    /// The highest free range.
    #[cfg(target_os = "linux")]
    pub(crate) fn last(&self) -> Option<(usize, usize)> {
        self.ranges.last().copied()
    }

    /// [`free`](FreeList::free) with its commonest case first and inline: the range ends
    /// where the first free range starts, so it only extends that range down (no range
    /// lies below it, so none merges from there); else the search. So it is for the unused
    /// tail of a block just taken from the front of the first range ([`Arena::shrink`]),
    /// and for a freed block, which a JIT freeing its last trace, or its traces in the
    /// order it made them, frees there (the search and its frame were 41 instructions per
    /// call, two per freed trace).
    ///
    /// [`Arena::shrink`]: super::Arena::shrink
    #[inline]
    pub(super) fn free_front(&mut self, start: usize, len: usize) {
        if let Some(first) = self.ranges.first_mut() {
            if start + len == first.0 {
                (first.0, first.1) = (start, first.1 + len);
                return;
            }
        }
        self.free(start, len);
    }

    /// Returns `start..start + len` (free of any range) to the list, merged with its
    /// neighbours.
    pub(crate) fn free(&mut self, start: usize, len: usize) {
        let i = self.ranges.partition_point(|&(s, _)| s < start);
        let merges_prev = i > 0 && {
            let (s, l) = self.ranges[i - 1];
            debug_assert!(s + l <= start, "double free at {start:#x}");
            s + l == start
        };
        let merges_next = i < self.ranges.len() && {
            debug_assert!(start + len <= self.ranges[i].0, "double free at {start:#x}");
            start + len == self.ranges[i].0
        };
        match (merges_prev, merges_next) {
            (true, true) => {
                let next_len = self.ranges[i].1;
                self.ranges[i - 1].1 += len + next_len;
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1].1 += len,
            (false, true) => {
                self.ranges[i].0 = start;
                self.ranges[i].1 += len;
            }
            (false, false) => self.ranges.insert(i, (start, len)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_first_fit_splits_and_coalesces() {
        let mut f = FreeList::new(256);
        assert_eq!(f.alloc(16, 16), Some(0));
        assert_eq!(f.alloc(32, 64), Some(64));
        assert_eq!(f.ranges, vec![(16, 48), (96, 160)]);
        assert_eq!(f.alloc(48, 16), Some(16));
        assert_eq!(f.alloc(512, 16), None);
        f.free(16, 48);
        f.free(0, 16);
        f.free(64, 32);
        assert_eq!(f.ranges, vec![(0, 256)]);
        // A block's tail returned (a shrunk trace) where the first range starts, and
        // where a range lies below the block: merged into the range above it either way.
        assert_eq!(f.alloc(64, 16), Some(0));
        f.free_front(48, 16);
        assert_eq!(f.ranges, vec![(48, 208)]);
        assert_eq!(f.alloc(32, 16), Some(48));
        f.free(16, 16);
        f.free_front(64, 16);
        assert_eq!(f.ranges, vec![(16, 16), (64, 192)]);
        f.free_front(32, 16);
        assert_eq!(f.ranges, vec![(16, 32), (64, 192)]);
    }

    /// Blocks placed on the fewest pages (pages of 256 bytes here): one that fits in a page
    /// is moved to the next page rather than split across two, the bytes skipped its lead;
    /// a longer one may start anywhere it spans no more pages than it must; a block placed
    /// past other free ranges leaves the bytes skipped free.
    #[test]
    fn blocks_span_no_more_pages_than_their_length_needs() {
        let mut f = FreeList::new(4096);
        assert_eq!(f.alloc_on_fewest_pages(160, 16, 256), Some((0, 0)));
        // 160..320 would straddle 256: at 256, 160..256 its lead.
        assert_eq!(f.alloc_on_fewest_pages(160, 16, 256), Some((256, 96)));
        assert_eq!(f.ranges, vec![(416, 3680)]);
        // 300 bytes need two pages, and touch two at 416 (416..716) and at 716.
        assert_eq!(f.alloc_on_fewest_pages(300, 4, 256), Some((416, 0)));
        assert_eq!(f.alloc_on_fewest_pages(300, 4, 256), Some((716, 0)));
        // 400 bytes at 1016 would touch three pages (1016..1416): at 1024 they touch two.
        assert_eq!(f.alloc_on_fewest_pages(400, 8, 256), Some((1024, 8)));
        // Exactly a page, at an offset inside one: moved to the boundary.
        assert_eq!(f.alloc_on_fewest_pages(256, 16, 256), Some((1536, 112)));
        assert_eq!(f.ranges, vec![(1792, 2304)]);
        // Freed with their leads, blocks coalesce as before.
        f.free(160, 96 + 160);
        f.free(1424, 112 + 256);
        assert_eq!(f.ranges, vec![(160, 256), (1424, 2672)]);
        // Nowhere: the list is unchanged.
        assert_eq!(f.alloc_on_fewest_pages(2800, 16, 256), None);
        assert_eq!(f.ranges, vec![(160, 256), (1424, 2672)]);
        // Past the first range (the search): 200 bytes at 1424 would straddle 1536, so at
        // 1536, and 1424..1536 stays free; 100 bytes then fit the first range's next page.
        assert_eq!(f.alloc_on_fewest_pages(200, 16, 256), Some((1536, 0)));
        assert_eq!(f.ranges, vec![(160, 256), (1424, 112), (1736, 2360)]);
        assert_eq!(f.alloc_on_fewest_pages(100, 16, 256), Some((256, 96)));
        assert_eq!(f.ranges, vec![(356, 60), (1424, 112), (1736, 2360)]);
        // Alignment first, then the page rule: 1424 aligned to 64 is 1472, and 1472..1536
        // stays inside its page.
        assert_eq!(f.alloc_on_fewest_pages(64, 64, 256), Some((1472, 0)));
    }
}
