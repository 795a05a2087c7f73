//! [`SlotTable`]: deduplicates GOT slots and veneers in O(1) per lookup (amortised), by
//! dense id where the key has one (an external symbol's index in the set) and by value
//! otherwise, reused from trace to trace without clearing or, once grown, allocating.
//!
//! Keys by id are a direct index into a vector. Keys by value use open addressing with
//! linear probing over a power-of-two table at most half full (doubled when it would be
//! fuller). Every entry carries the generation it was written in, so starting a new trace
//! is one counter increment rather than a clear of the tables.

/// Maps 64-bit values (slot contents, veneer destinations) and dense ids (symbols) to
/// slot numbers 0, 1, … in order of first use, one numbering for both. An id and a value
/// are different keys even if the symbol's address is that value (then the trace has one
/// slot more than it needs, never one too few).
#[derive(Default)]
pub(crate) struct SlotTable {
    entries: Vec<Entry>,
    /// By id: the slot and the generation it was given in.
    ids: Vec<IdEntry>,
    generation: u32,
    used: u32,
}

#[derive(Clone, Copy, Default)]
struct IdEntry {
    slot: u32,
    generation: u32,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    key: u64,
    slot: u32,
    generation: u32,
}

impl SlotTable {
    /// Empties the table (keeping its memory). Must come before the first lookup. Costs
    /// nothing when the table is already empty (most traces use no GOT slot or veneer).
    #[inline]
    pub fn reset(&mut self) {
        // Generation 0 is that of a fresh table's default entries: never current.
        if self.used != 0 || self.generation == 0 {
            self.next_generation();
        }
    }

    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // After 2^32 traces: old entries could look current again.
            self.entries.fill(Entry::default());
            self.ids.fill(IdEntry::default());
            self.generation = 1;
        }
        self.used = 0;
    }

    /// The slot of the key with dense id `id` and whether it is new (then it is the next
    /// unused slot number).
    #[inline]
    pub fn slot_of_id(&mut self, id: u16) -> (u32, bool) {
        let i = id as usize;
        if i >= self.ids.len() {
            self.ids.resize(i + 1, IdEntry::default());
        }
        let e = &mut self.ids[i];
        if e.generation == self.generation {
            return (e.slot, false);
        }
        *e = IdEntry {
            slot: self.used,
            generation: self.generation,
        };
        self.used += 1;
        (e.slot, true)
    }

    /// The slot of `key` and whether it is new (then it is the next unused slot number).
    // Inline, its growth out of line: the writer's call per GOT slot or veneer looked up
    // was 6.7 of the reference VM's calls trace's 689 instructions per instance.
    #[inline]
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

    /// Grows the table now, so that after a reset, ids below `ids` and up to `values` slots
    /// in all (by id or by value: they share the numbering) take no allocation
    /// ([`Jit::reserve`](crate::Jit::reserve)).
    pub fn reserve(&mut self, ids: usize, values: usize) {
        if self.ids.len() < ids {
            self.ids.resize(ids, IdEntry::default());
        }
        let len = (2 * values).next_power_of_two().max(64);
        if values == 0 || len <= self.entries.len() {
            return;
        }
        if self.used == 0 {
            // Nothing to keep (and `grow` would take a fresh table's entries, of generation
            // 0, for current ones): one allocation of zeros, which the system maps lazily.
            self.entries = vec![Entry::default(); len];
            return;
        }
        while len > self.entries.len() {
            self.grow();
        }
    }

    /// Doubles the table, keeping the current entries (amortised O(1) per key).
    #[cold]
    #[inline(never)]
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
    fn ids_are_deduplicated_by_id_and_share_the_numbering_with_values() {
        let mut t = SlotTable::default();
        t.reset();
        assert_eq!(t.slot_of_id(3), (0, true));
        assert_eq!(t.slot(3), (1, true), "a value is not an id");
        assert_eq!(t.slot_of_id(3), (0, false));
        assert_eq!(t.slot_of_id(0), (2, true));
        assert_eq!(t.slot_of_id(u16::MAX), (3, true));
        assert_eq!(t.slot_of_id(0), (2, false));
        assert_eq!(t.len(), 4);
        t.reset();
        assert_eq!(t.slot_of_id(0), (0, true), "reset forgets ids");
        assert_eq!(t.slot_of_id(3), (1, true));
        assert_eq!(t.slot_of_id(3), (1, false));
        // The generation wraps after 2^32 resets: ids from before must not come back.
        t.generation = u32::MAX;
        assert_eq!(t.slot_of_id(5), (2, true));
        t.reset();
        assert_eq!(t.generation, 1);
        assert_eq!(t.slot_of_id(5), (0, true));
        // Given in generation 1, before the wrap.
        assert_eq!(t.slot_of_id(u16::MAX), (1, true));
    }

    /// A reset of a table nothing was put in since the last one changes nothing, and what
    /// was put in before that stays forgotten.
    #[test]
    fn a_reset_of_an_unused_table_is_free_and_forgets_nothing_twice() {
        let mut t = SlotTable::default();
        t.reset();
        assert_eq!(
            t.generation, 1,
            "a fresh table's default entries are never current"
        );
        assert_eq!(t.slot(7), (0, true));
        assert_eq!(t.slot_of_id(2), (1, true));
        t.reset();
        let generation = t.generation;
        t.reset();
        assert_eq!(
            t.generation, generation,
            "nothing was used: no new generation"
        );
        assert_eq!(t.slot(7), (0, true));
        assert_eq!(t.slot_of_id(2), (1, true));
        assert_eq!(t.len(), 2);
    }

    /// After `reserve(ids, values)`, ids below `ids` and `values` slots in all go in without
    /// the table growing.
    #[test]
    fn a_reserved_table_takes_its_keys_without_growing() {
        let mut t = SlotTable::default();
        t.reserve(5, 100);
        let sizes = (t.ids.len(), t.entries.len());
        assert_eq!(sizes, (5, 256));
        t.reset();
        for id in 0..5 {
            assert_eq!(t.slot_of_id(id), (id as u32, true));
        }
        for k in 0..95u64 {
            assert_eq!(t.slot(k << 40), (k as u32 + 5, true));
        }
        assert_eq!((t.ids.len(), t.entries.len()), sizes);
        assert_eq!(t.slot_of_id(5), (100, true));
        assert_eq!(
            t.ids.len(),
            6,
            "an id past the reserved ones grows the table"
        );
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
