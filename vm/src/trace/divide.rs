//! Divisions by a constant: which micro-op replaces `const d; floordiv` (`mod`) on an int
//! ([`division_by`]), and the operands its stencils take ([`DivisorOperands`]), worked out
//! here once per divisor so that the stencils only multiply (vm/templates/vm_values.h,
//! `vm_floordiv_by` and the rest, where each form is proved exact).
//!
//! - d > 0 a power of two: a shift or a mask (`FLOORDIV_INT_POW2`, `MOD_INT_POW2`);
//! - 3 <= d < 2**15: the high word of one multiplication for `//`, two multiplications
//!   for `%` (`FLOORDIV_INT_BY`, `MOD_INT_BY`), on the dividend plus a bias that makes it
//!   non-negative, so no sign fix-up;
//! - any other d with |d| >= 2: the same with a shift after the multiplication
//!   (`*_BY_LARGE` from 2**15 on), and the dividend negated for a negative d
//!   (`*_BY_NEGATIVE`);
//! - 0 and -1 keep the typed division (a zero division raises; `INT_MIN // -1` leaves the
//!   tagged range).

use crate::ops::op;

/// Divisors from 3 below this (powers of two aside) take `FLOORDIV_INT_BY` and
/// `MOD_INT_BY`: their bias plus 2**47 times their magic's error stays below 2**64.
pub const SMALL_LIMIT: u64 = 1 << 15;

/// The micro-op and its operands that replace `const d; floordiv` (`floor`) or `const d;
/// mod` on an int dividend; `None` where the typed division stays (d = 0 or -1).
pub fn division_by(d: i64, floor: bool) -> Option<(u32, u64, u64)> {
    let a = d.unsigned_abs();
    if d > 0 && a.is_power_of_two() {
        // The shift takes its count (a shift by a count read from a hole is two
        // instructions; computing it from d at run time was five), the mask the divisor.
        return Some(if floor {
            (op::FLOORDIV_INT_POW2, u64::from(a.trailing_zeros()), 0)
        } else {
            (op::MOD_INT_POW2, a, 0)
        });
    }
    if (3..SMALL_LIMIT).contains(&a) && d > 0 {
        let by = if floor {
            op::FLOORDIV_INT_BY
        } else {
            op::MOD_INT_BY
        };
        return Some((by, a, small_magic(a)));
    }
    if a < 2 {
        return None;
    }
    let any = match (d > 0, floor) {
        (true, true) => op::FLOORDIV_INT_BY_LARGE,
        (true, false) => op::MOD_INT_BY_LARGE,
        (false, true) => op::FLOORDIV_INT_BY_NEGATIVE,
        (false, false) => op::MOD_INT_BY_NEGATIVE,
    };
    Some((any, d as u64, any_magic(a).0))
}

/// `FLOORDIV_INT_BY`'s multiplier for `d` (3 <= d < [`SMALL_LIMIT`], no power of two):
/// ceil(2**64 / d).
pub fn small_magic(d: u64) -> u64 {
    assert!(
        (3..SMALL_LIMIT).contains(&d) && !d.is_power_of_two(),
        "no small magic for divisor {d}"
    );
    ((1u128 << 64) / u128::from(d)) as u64 + 1
}

/// `vm_div_any_quotient`'s multiplier and shift for `a >= 2`: floor(y / a) is the high word
/// of y * m shifted right by s for every y < 2**63.
pub fn any_magic(a: u64) -> (u64, u8) {
    assert!(a >= 2, "no magic for divisor {a}");
    let log2 = 63 - a.leading_zeros();
    if a.is_power_of_two() {
        return (1 << 63, (log2 - 1) as u8);
    }
    // a is no power of two, so 2**(64 + s) / a is no integer: its ceiling is the floor + 1,
    // below 2**64 since a > 2**s.
    let m = (1u128 << (64 + log2)) / u128::from(a) + 1;
    (m as u64, log2 as u8)
}

/// The operands of a division by the constant d besides d and its magic (stencil.h's
/// `DIV_*`), as `vm_values.h` works them out in the interpreters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DivisorOperands {
    /// |d|.
    pub abs: u64,
    /// `vm_div_any_quotient`'s shift ([`any_magic`]).
    pub shift: u8,
    /// B = |d| * 2**(47 - floor(log2 |d|)): a multiple of |d| in [2**47, 2**48), which added
    /// to a tagged int makes it non-negative.
    pub bias: u64,
    /// B / |d|.
    pub bias_quotient: u64,
}

impl DivisorOperands {
    /// The operands for divisor `d` (a micro-op's `arg0`); `None` for |d| < 2 or beyond
    /// the tagged ints.
    pub fn of(d: u64) -> Option<DivisorOperands> {
        let d = d as i64;
        let abs = d.unsigned_abs();
        if !(2..=1 << 47).contains(&abs) {
            return None;
        }
        let log2 = 63 - abs.leading_zeros();
        Some(DivisorOperands {
            abs,
            shift: any_magic(abs).1,
            bias: abs << (47 - log2),
            bias_quotient: 1 << (47 - log2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{INT_MAX as MAX, INT_MIN as MIN};

    /// Python's `//` and `%`: the remainder has the divisor's sign.
    fn floor_div(x: i64, d: i64) -> i64 {
        let q = x / d;
        if x % d != 0 && (x < 0) != (d < 0) {
            q - 1
        } else {
            q
        }
    }

    /// `vm_floordiv_by` and `vm_mod_by` of vm/templates/vm_values.h, step by step.
    fn small(x: i64, d: u64) -> (i64, i64) {
        let ops = DivisorOperands::of(d).unwrap();
        let m = small_magic(d);
        let n = (x as u64).wrapping_add(ops.bias);
        let q = (((u128::from(n) * u128::from(m)) >> 64) as u64).wrapping_sub(ops.bias_quotient);
        let fraction = n.wrapping_mul(m);
        let r = (u128::from(fraction) * u128::from(d)) >> 64;
        (q as i64, r as i64)
    }

    /// `vm_floordiv_by_any` and `vm_mod_by_any`, step by step (the sign -1 for a negative d,
    /// as `*_BY_NEGATIVE` passes it).
    fn any(x: i64, d: i64) -> (i64, i64) {
        let ops = DivisorOperands::of(d as u64).unwrap();
        let (m, s) = any_magic(ops.abs);
        let sign = d >> 63;
        let n = (((x ^ sign) - sign) as u64).wrapping_add(ops.bias);
        let h = (((u128::from(n) * u128::from(m)) >> 64) as u64) >> s;
        let r = n.wrapping_sub(h.wrapping_mul(ops.abs)) as i64;
        (h.wrapping_sub(ops.bias_quotient) as i64, (r ^ sign) - sign)
    }

    /// Dividends at every edge for divisor d: the ends of the tagged range, around 0 and
    /// the multiples of d near both ends, and a spread in between.
    fn dividends(d: i64, seed: &mut u64) -> Vec<i64> {
        let (d, max, min) = (i128::from(d), i128::from(MAX), i128::from(MIN));
        let mut xs = vec![
            0,
            1,
            -1,
            max,
            min,
            max - 1,
            min + 1,
            d,
            -d,
            d - 1,
            1 - d,
            d + 1,
        ];
        xs.extend([
            -d - 1,
            max / d * d,
            min / d * d,
            min / d * d - 1,
            max / d * d + 1,
        ]);
        for _ in 0..100 {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            xs.push(i128::from((*seed as i64) >> 16));
        }
        xs.into_iter()
            .filter_map(|x| i64::try_from(x).ok())
            .filter(|x| (MIN..=MAX).contains(x))
            .collect()
    }

    #[test]
    fn the_small_forms_divide_every_tagged_int_exactly() {
        let mut divisors: Vec<u64> = (3..3000).filter(|d: &u64| !d.is_power_of_two()).collect();
        divisors.extend([10_007, 16_383, 16_385, 32_765, 32_767]);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for d in divisors {
            for x in dividends(d as i64, &mut seed) {
                let di = d as i64;
                let want = (floor_div(x, di), x - di * floor_div(x, di));
                assert_eq!(small(x, d), want, "{x} by {d}");
            }
        }
    }

    #[test]
    fn the_any_forms_divide_every_tagged_int_exactly() {
        let mut divisors: Vec<i64> = (2..600).flat_map(|d| [d, -d]).collect();
        divisors.extend([32_768, 32_769, 65_537, 1_000_000_007, 3 << 40, MAX, MAX - 1]);
        divisors.extend([-32_769, -1_000_000_007, -(1 << 46), MIN + 1, MIN]);
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for d in divisors {
            for x in dividends(d, &mut seed) {
                let want = (floor_div(x, d), x - d * floor_div(x, d));
                assert_eq!(any(x, d), want, "{x} by {d}");
            }
        }
    }

    #[test]
    fn each_divisor_takes_its_form() {
        use op::*;
        let cases: [(i64, bool, u32); 12] = [
            (1, true, FLOORDIV_INT_POW2),
            (1, false, MOD_INT_POW2),
            (1 << 46, true, FLOORDIV_INT_POW2),
            (7, false, MOD_INT_BY),
            (32_767, true, FLOORDIV_INT_BY),
            (32_769, true, FLOORDIV_INT_BY_LARGE),
            (1_000_000_007, false, MOD_INT_BY_LARGE),
            (-2, true, FLOORDIV_INT_BY_NEGATIVE),
            (-7, false, MOD_INT_BY_NEGATIVE),
            (MIN, false, MOD_INT_BY_NEGATIVE),
            (MAX, true, FLOORDIV_INT_BY_LARGE),
            (2, false, MOD_INT_POW2),
        ];
        for (d, floor, want) in cases {
            assert_eq!(
                division_by(d, floor).map(|c| c.0),
                Some(want),
                "{d} {floor}"
            );
        }
        for d in [0, -1] {
            assert_eq!(division_by(d, true), None, "{d}");
            assert_eq!(division_by(d, false), None, "{d}");
        }
        assert_eq!(division_by(8, true), Some((FLOORDIV_INT_POW2, 3, 0)));
        assert_eq!(
            division_by(7, true),
            Some((FLOORDIV_INT_BY, 7, small_magic(7)))
        );
        let any7 = division_by(-7, true).unwrap();
        assert_eq!((any7.1 as i64, any7.2), (-7, any_magic(7).0));
    }

    #[test]
    fn the_operands_are_refused_where_no_form_divides() {
        for d in [0i64, 1, -1, (1 << 47) + 1, i64::MIN] {
            assert_eq!(DivisorOperands::of(d as u64), None, "{d}");
        }
        for d in [0, 1, 2, 4, 1024, SMALL_LIMIT, SMALL_LIMIT + 1] {
            assert!(std::panic::catch_unwind(|| small_magic(d)).is_err(), "{d}");
        }
        assert!(std::panic::catch_unwind(|| any_magic(1)).is_err());
        let ops = DivisorOperands::of(-3i64 as u64).unwrap();
        assert_eq!((ops.abs, ops.shift), (3, 1));
        assert_eq!((ops.bias, ops.bias_quotient), (3 << 46, 1 << 46));
    }
}
