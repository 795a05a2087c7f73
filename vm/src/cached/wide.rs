//! Wide stack values: cache states whose registers hold raw 64-bit ints
//! (vm/templates/cached/wide_stack.h; the families `vm_wide_*` and `vm_pinned_wide_pop`,
//! `SCALED = 2`).
//!
//! A scaled register (an int times 2**16) overflows where the int leaves the tagged 48 bits,
//! which makes the CPU's overflow flag the range check; a wide one overflows at 64 bits, so a
//! product such as `x * x` in `(x * x + 3 * x) % 1000` stays in its register until a division
//! by a constant brings it back. The states are the depth plus 12 ([`CacheState::wide`]); the
//! lowering takes them only for a whole run of micro-ops from nothing cached back to nothing
//! cached (vm/src/jit/lower/wide.rs), so that no wide value is stored inside a trace: only an
//! exit stores one, boxed (a big int where it does not fit 48 bits).

use super::CacheState;

/// The operands a wide member's division by the constant `d` takes (vm/templates/cached/
/// wide_stack.h, `vm_floordiv_by_wide`): `(m, s)` with `s = floor(log2 d)` (`WIDE_SHIFT`) and
/// `m = ceil(2**(64 + s) / d)` (`WIDE_MAGIC`), with which `floor(n / d)` is the high word of
/// `n * m` shifted right by `s` for every `n < 2**63`; `None` for a `d` the trace never
/// divides by so (below 3, a power of two, or from 2**16).
pub fn wide_magic(d: u64) -> Option<(u64, u8)> {
    if !(3..1 << 16).contains(&d) || d.is_power_of_two() {
        return None;
    }
    let s = 63 - d.leading_zeros();
    // d is no power of two, so 2**(64 + s) / d is no integer: its ceiling is the floor + 1.
    let m = (1u128 << (64 + s)) / u128::from(d) + 1;
    Some((u64::try_from(m).ok()?, s as u8))
}

impl CacheState {
    /// `depth` raw 64-bit ints cached.
    pub fn wide(depth: u8) -> CacheState {
        assert!(depth < 4, "no cache state of depth {depth}");
        CacheState(if depth == 0 { 0 } else { depth | 12 })
    }

    /// Whether its registers hold raw 64-bit ints.
    pub fn is_wide(self) -> bool {
        self.0 & 12 == 12
    }
}

#[cfg(test)]
mod tests {
    use super::super::Kind;
    use super::*;

    #[test]
    fn wide_states_are_the_depth_plus_12_and_no_other_kind() {
        for depth in 1..4u8 {
            let w = CacheState::wide(depth);
            assert_eq!(
                (w.depth(), w.kind(), w.bits()),
                (depth, Kind::Wide, depth + 12)
            );
            assert_eq!(w.describe(), format!("{depth}w"));
            assert!(!w.is_scaled() && !w.is_float() && w.is_wide());
            assert_eq!(CacheState::of_kind(depth, Kind::Wide), w);
            assert_eq!(CacheState::from_bits(depth + 12), w);
            assert!(w.fits(Kind::Wide) && !w.fits(Kind::Scaled) && !w.fits(Kind::Boxed));
            // The other kinds of the same depth are not wide.
            for other in [Kind::Boxed, Kind::Scaled, Kind::Float] {
                let s = CacheState::of_kind(depth, other);
                assert!(!s.is_wide() && s.kind() == other, "{s}");
            }
            // A wide family's tables number states by depth, as the scaled ones do.
            assert_eq!(w.kit_state(false), depth);
            assert_eq!(
                super::super::float::states_of_kit(depth - 1, depth, Kind::Wide, false),
                Some((CacheState::of_kind(depth - 1, Kind::Wide), w))
            );
        }
        assert_eq!(CacheState::wide(0), CacheState::EMPTY);
        assert!(CacheState::EMPTY.fits(Kind::Wide));
    }
}
