//! A compiled trace's set of exits by exit index (which exits' stubs start with a `LINK`):
//! bits, the first [`INLINE_EXITS`] held inline so that a compile allocates nothing for
//! them (a `Vec<bool>` per pinned trace was 174 instructions of sum's 23.7k per compile).

/// Exits held without an allocation: more than the examples' traces have.
pub(crate) const INLINE_EXITS: usize = 256;

const WORD: usize = u64::BITS as usize;

/// A set of exit indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExitBits {
    inline: [u64; INLINE_EXITS / WORD],
    /// Exits from [`INLINE_EXITS`] on, by word (empty until one is added).
    more: Vec<u64>,
}

impl ExitBits {
    /// Adds exit `exit`. (Inline: a call per `LINK` was 22 instructions, most of it the
    /// call's.)
    #[inline]
    pub(crate) fn insert(&mut self, exit: usize) {
        let (word, bit) = (exit / WORD, 1u64 << (exit % WORD));
        match self.inline.get_mut(word) {
            Some(w) => *w |= bit,
            None => {
                let at = word - self.inline.len();
                if self.more.len() <= at {
                    self.more.resize(at + 1, 0);
                }
                self.more[at] |= bit;
            }
        }
    }

    /// Whether exit `exit` was added.
    pub(crate) fn contains(&self, exit: usize) -> bool {
        let (word, bit) = (exit / WORD, 1u64 << (exit % WORD));
        let w = match self.inline.get(word) {
            Some(&w) => w,
            None => self
                .more
                .get(word - self.inline.len())
                .copied()
                .unwrap_or(0),
        };
        w & bit != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exits below, at and past the inline bits are kept apart, and only those added are
    /// there; none allocates below [`INLINE_EXITS`].
    #[test]
    fn holds_exits_inline_and_beyond() {
        let mut set = ExitBits::default();
        let added = [0, 1, 63, 64, 200, INLINE_EXITS - 1];
        for &e in &added {
            set.insert(e);
        }
        assert_eq!(set.more.capacity(), 0, "no allocation below {INLINE_EXITS}");
        let beyond = [INLINE_EXITS, INLINE_EXITS + 70, 65_535];
        for &e in &beyond {
            set.insert(e);
        }
        for e in 0..=65_535 {
            let want = added.contains(&e) || beyond.contains(&e);
            assert_eq!(set.contains(e), want, "exit {e}");
        }
        assert!(!set.contains(70_000));
    }
}
