//! Where the lowering keeps stack values *wide* (raw 64-bit ints, [`crate::cached::wide`]):
//! a run of micro-ops entered with nothing cached that gets back to nothing cached with
//! every micro-op on a wide member, no jump target or exit stub inside it (the lowering
//! would spill there, and a wide register is never stored inside a trace), and a *square*
//! (`x * x`, both factors loaded from one local), which leaves the tagged 48 bits once x
//! passes 11.86 M, within reach of a loop counter (`calls` at real sizes). Elsewhere the
//! scaled members stay the choice: the wide ones cost a shift per load of a scaled local
//! and a correction step per division by a constant (`nested`'s `i * j % 7`, never past
//! 48 bits, ran 5 % more instructions wide), and a product of two other ints or by a
//! constant (`3 * n + 1`) rarely leaves 48 bits.
use super::super::Backend;
use super::RunEnd;
use crate::cached::Kind;
use crate::ops::{self, op};
use crate::pinning::Pinning;
use crate::trace::Trace;

impl Backend {
    /// Whether micro-op `i`, entered with nothing cached, starts a run to keep wide (see the
    /// module doc).
    pub(super) fn wide_run(
        &self,
        trace: &Trace,
        pinning: Option<&Pinning>,
        rows: &[u32],
        targets: &[bool],
        i: usize,
    ) -> bool {
        let mut squares = false;
        // The local each value of the run (top last) was loaded from, if it was: at most
        // the registers' three.
        let mut loaded: [Option<u64>; 4] = [None; 4];
        let mut depth = 0usize;
        let end = self.walk_run(trace, pinning, (rows, targets), i, Kind::Wide, |j| {
            let u = &trace.uops[j];
            if u.op == op::MUL_INT && depth >= 2 {
                squares |= loaded[depth - 1].is_some() && loaded[depth - 1] == loaded[depth - 2];
            }
            let info = ops::info(u.op);
            let pop = info.pop.count([u.arg0, u.arg1]) as usize;
            let push = info.push.count([u.arg0, u.arg1]) as usize;
            depth = depth.saturating_sub(pop);
            for _ in 0..push.min(loaded.len() - depth) {
                loaded[depth] = (u.op == op::LOAD_INT).then_some(u.arg0);
                depth += 1;
            }
        });
        squares && end == (RunEnd::Ended { empty: true })
    }
}

#[cfg(test)]
mod tests {
    use crate::trace::reciprocal;

    /// `vm_floordiv_by_wide` of vm/templates/cached/wide_stack.h, step by step.
    fn floordiv_by_wide(x: i64, d: u64) -> i64 {
        let r = reciprocal(d);
        let t = x >> 63;
        let n = ((x ^ t) as u64).wrapping_add(d & t as u64);
        let mut q = ((u128::from(n) * u128::from(r)) >> 64) as u64;
        q += u64::from(n - q * d >= d);
        ((q as i64) ^ t) - t
    }

    /// `vm_mod_by_wide` of vm/templates/cached/wide_stack.h, step by step.
    fn mod_by_wide(x: i64, d: u64) -> i64 {
        let r = reciprocal(d);
        let t = x >> 63;
        let dt = d & t as u64;
        let n = ((x ^ t) as u64).wrapping_add(dt);
        let q = ((u128::from(n) * u128::from(r)) >> 64) as u64;
        let mut m = n - q * d;
        if m >= d {
            m -= d;
        }
        ((m ^ t as u64).wrapping_add(dt)) as i64
    }

    #[test]
    fn the_wide_floor_division_and_modulo_by_a_constant_are_exact_for_every_int64() {
        let edges = [
            i64::MIN,
            i64::MIN + 1,
            i64::MIN + 6,
            -(1 << 47) - 1,
            -(1 << 47),
            -7,
            -1,
            0,
            1,
            6,
            7,
            (1 << 47) - 1,
            1 << 47,
            (1 << 47) + 1,
            i64::MAX - 6,
            i64::MAX,
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let random = std::iter::repeat_with(move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as i64
        });
        for d in [3u64, 7, 10, 1000, 65_535, 12_345] {
            for x in edges.into_iter().chain(random.take(2_000)) {
                let want = i128::from(x).div_euclid(i128::from(d));
                assert_eq!(i128::from(floordiv_by_wide(x, d)), want, "{x} // {d}");
                let rem = i128::from(x).rem_euclid(i128::from(d));
                assert_eq!(i128::from(mod_by_wide(x, d)), rem, "{x} % {d}");
            }
        }
    }
}
