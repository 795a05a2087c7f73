//! [`SlotTable`]: deduplicates GOT slots and veneers by value in O(1) per lookup (amortised),
//! reused from trace to trace without clearing or, once grown, allocating.
//!
//! Open addressing with linear probing over a power-of-two table at most half full (doubled
//! when it would be fuller); each
//! entry carries the generation it was written in, so starting a new trace is one counter
//! increment rather than a clear of the table.

/// Maps 64-bit values (slot contents, veneer destinations) to dense slot numbers 0, 1, …
/// in order of first use.
#[derive(Default)]
pub(crate) struct SlotTable {
    entries: Vec<Entry>,
    generation: u32,
    used: u32,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    key: u64,
    slot: u32,
    generation: u32,
}

impl SlotTable {
    /// Empties the table (keeping its memory).
    pub fn reset(&mut self) {
        if self.entries.is_empty() {
            self.entries = vec![Entry::default(); 64];
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // After 2^32 traces: old entries could look current again.
            self.entries.fill(Entry::default());
            self.generation = 1;
        }
        self.used = 0;
    }

    /// The slot of `key` and whether it is new (then it is the next unused slot number).
    pub fn slot(&mut self, key: u64) -> (u32, bool) {
        if 2 * (self.used as usize + 1) > self.entries.len() {
            self.grow();
        }
        let mask = self.entries.len() - 1;
        let mut i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & mask;
        loop {
            let e = &mut self.entries[i];
            if e.generation != self.generation {
                *e = Entry {
                    key,
                    slot: self.used,
                    generation: self.generation,
                };
                self.used += 1;
                return (e.slot, true);
            }
            if e.key == key {
                return (e.slot, false);
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table, keeping the current entries (amortised O(1) per key).
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.entries);
        let current = self.generation;
        self.entries = vec![Entry::default(); (old.len() * 2).max(64)];
        let mask = self.entries.len() - 1;
        for e in old.into_iter().filter(|e| e.generation == current) {
            let mut i = (e.key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & mask;
            while self.entries[i].generation == current {
                i = (i + 1) & mask;
            }
            self.entries[i] = e;
        }
    }

    /// Distinct keys since the last reset.
    pub fn len(&self) -> usize {
        self.used as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_dense_in_first_use_order_and_reset_forgets() {
        let mut t = SlotTable::default();
        t.reset();
        assert_eq!(t.slot(7), (0, true));
        assert_eq!(t.slot(0), (1, true));
        assert_eq!(t.slot(7), (0, false));
        assert_eq!(t.slot(u64::MAX), (2, true));
        assert_eq!(t.len(), 3);
        t.reset();
        assert_eq!(t.len(), 0);
        assert_eq!(t.slot(u64::MAX), (0, true));
        assert_eq!(t.slot(7), (1, true));
    }

    #[test]
    fn many_colliding_keys_stay_distinct() {
        let mut t = SlotTable::default();
        t.reset();
        for k in 0..1000u64 {
            assert_eq!(t.slot(k << 40), (k as u32, true));
        }
        for k in 0..1000u64 {
            assert_eq!(t.slot(k << 40), (k as u32, false));
        }
    }
}
