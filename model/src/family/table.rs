//! The storage of the family tables' stencil indices ([`Family::stencils`],
//! [`CacheSelect::members`]): [`StencilIndices`], a view of little-endian byte pairs.
//!
//! Why bytes: a generated crate spells each table as one byte-string literal, which rustc
//! reads as one token and one allocation, where an array literal costs it type checking,
//! MIR, borrow checking and const evaluation per cell: the VM's x86-64 crate has 44,000
//! cells, 0.69 G of rustc's 7.52 G instructions as arrays (callgrind, issue 40 wave 33).
//! The transitions stay an array of [`crate::Transition`]s: `TraceBuilder::push_ops` reads
//! one per op in its tuned loop, where a slice of structs is one bounds check.

use core::fmt;

#[cfg(doc)]
use super::{CacheSelect, Family};

/// A table of stencil indices ([`Family::NONE`] in an empty cell), two little-endian bytes
/// per cell. `Debug` prints the cells as numbers; equality compares the cells.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StencilIndices<'a> {
    bytes: &'a [u8],
}

impl<'a> StencilIndices<'a> {
    /// The table with no cells.
    pub const EMPTY: StencilIndices<'static> = StencilIndices { bytes: &[] };

    /// The table whose cell `k` is bytes `2k, 2k + 1` of `bytes`, little-endian (as a
    /// generated crate writes it). Panics, at compile time in a `static`, on an odd length.
    pub const fn from_le_bytes(bytes: &'a [u8]) -> StencilIndices<'a> {
        assert!(
            bytes.len() % 2 == 0,
            "a stencil-index table has two bytes per cell: regenerate the stencil crate with \
             `cpjit build-stencils`"
        );
        StencilIndices { bytes }
    }

    /// Number of cells.
    pub const fn len(&self) -> usize {
        self.bytes.len() / 2
    }

    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Cell `at` ([`Family::NONE`] where empty), `None` past the end.
    #[inline]
    pub fn get(&self, at: usize) -> Option<u16> {
        self.bytes.chunks_exact(2).nth(at).map(cell)
    }

    /// The cells in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u16> + 'a {
        self.bytes.chunks_exact(2).map(cell)
    }
}

fn cell(pair: &[u8]) -> u16 {
    u16::from_le_bytes([pair[0], pair[1]])
}

impl fmt::Debug for StencilIndices<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Family;

    #[test]
    fn cells_read_back_little_endian_and_print_as_numbers() {
        let t = StencilIndices::from_le_bytes(b"\x01\x00\xff\xff\x34\x12");
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(0), Some(1));
        assert_eq!(t.get(1), Some(Family::NONE));
        assert_eq!(t.get(2), Some(0x1234));
        assert_eq!(t.get(3), None);
        assert_eq!(t.get(usize::MAX / 2 + 1), None, "no wrap to cell 0");
        assert!(t.iter().eq([1, Family::NONE, 0x1234]));
        let mut text = Text::default();
        fmt::write(&mut text, format_args!("{t:?}")).unwrap();
        assert_eq!(text.as_str(), "[1, 65535, 4660]");
        assert!(StencilIndices::EMPTY.is_empty());
        assert_ne!(
            t,
            StencilIndices::from_le_bytes(b"\x01\x00\xff\xff\x35\x12")
        );
    }

    #[test]
    #[should_panic(expected = "two bytes per cell")]
    fn an_odd_cell_table_is_refused() {
        let odd: &[u8] = b"\x01\x00\x02";
        StencilIndices::from_le_bytes(odd);
    }

    /// A `no_std` buffer for `Debug` output.
    struct Text {
        bytes: [u8; 256],
        len: usize,
    }

    impl Default for Text {
        fn default() -> Text {
            Text {
                bytes: [0; 256],
                len: 0,
            }
        }
    }

    impl Text {
        fn as_str(&self) -> &str {
            core::str::from_utf8(&self.bytes[..self.len]).unwrap()
        }
    }

    impl fmt::Write for Text {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.bytes
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
}
