//! Where the lowering keeps stack values *wide* (raw 64-bit ints, [`crate::cached::wide`]):
//! a run of micro-ops entered with nothing cached that gets back to nothing cached with
//! every micro-op on a wide member, no jump target or exit stub inside it (the lowering
//! would spill there, and a wide register is never stored inside a trace), and either a
//! *square* (`x * x`, both factors loaded from one local), which leaves the tagged 48 bits
//! once x passes 11.86 M, within reach of a loop counter (`calls` at real sizes), or a load
//! of a local a pinned register holds wide (a loop counter, `crate::pinning`), whose only
//! members push onto raw 64-bit registers. Elsewhere the
//! scaled members stay the choice: the wide ones cost a shift per load of a scaled local
//! (`nested`'s `i * j % 7`, never past 48 bits, ran 5 % more instructions wide while a wide
//! division still took a correction step, wave 26; its division is now the scaled one's
//! length), and a product of two other ints or by a constant (`3 * n + 1`) rarely leaves
//! 48 bits.
use super::super::Backend;
use super::run::{RunEnd, RunInput};
use super::step::ON_WIDE;
use crate::cached::Kind;
use crate::ops::{self, op};

impl Backend {
    /// Whether micro-op `i` of `input`, entered with nothing cached, starts a run to keep
    /// wide (see the module doc).
    pub(super) fn wide_run(&self, input: RunInput<'_>, i: usize) -> bool {
        // Most micro-ops have no wide member: that answer before the walk's state is made
        // (7 to 12 instructions per micro-op of the compile of nbody, calls, sum, collatz).
        let first = input.steps[i];
        if self
            .find_member(first, crate::cached::CacheState::EMPTY, Kind::Wide)
            .is_none()
        {
            return false;
        }
        let (trace, steps) = (input.trace, input.steps);
        let mut squares = false;
        let mut loads_wide_local = false;
        // The local each value of the run (top last) was loaded from, if it was: at most
        // the registers' three.
        let mut loaded: [Option<u64>; 4] = [None; 4];
        let mut depth = 0usize;
        let end = self.walk_run(input, i, Kind::Wide, |j| {
            let u = &trace.uops[j];
            if u.op == op::MUL_INT && depth >= 2 {
                squares |= loaded[depth - 1].is_some() && loaded[depth - 1] == loaded[depth - 2];
            }
            loads_wide_local |= u.op == op::LOAD_INT && steps[j].is(ON_WIDE);
            let info = ops::info(u.op);
            let pop = info.pop.count([u.arg0, u.arg1]) as usize;
            let push = info.push.count([u.arg0, u.arg1]) as usize;
            depth = depth.saturating_sub(pop);
            for _ in 0..push.min(loaded.len() - depth) {
                loaded[depth] = (u.op == op::LOAD_INT).then_some(u.arg0);
                depth += 1;
            }
        });
        (squares || loads_wide_local) && end == (RunEnd::Ended { empty: true })
    }
}

#[cfg(test)]
mod tests {
    use crate::cached::wide::wide_magic;

    /// `vm_floordiv_by_wide` of vm/templates/cached/wide_stack.h, step by step.
    fn floordiv_by_wide(x: i64, d: u64) -> i64 {
        let (m, s) = wide_magic(d).expect("a divisor with a magic");
        let t = (x >> 63) as u64;
        let n = x as u64 ^ t;
        let q = (((u128::from(n) * u128::from(m)) >> 64) as u64) >> s;
        (q ^ t) as i64
    }

    /// `vm_mod_by_wide` of vm/templates/cached/wide_stack.h, step by step.
    fn mod_by_wide(x: i64, d: u64) -> i64 {
        (x as u64).wrapping_sub((floordiv_by_wide(x, d) as u64).wrapping_mul(d)) as i64
    }

    #[test]
    fn only_the_divisors_the_trace_divides_by_have_a_magic() {
        for d in [0, 1, 2, 4, 8, 1 << 15, 1 << 16, (1 << 16) + 1, u64::MAX] {
            assert_eq!(wide_magic(d), None, "{d}");
        }
        // The extremes: the magic's top bit is set, and it fits 64 bits.
        assert_eq!(wide_magic(3), Some((0xaaaa_aaaa_aaaa_aaab, 1)));
        let (m, s) = wide_magic(65_535).expect("65535");
        assert_eq!(s, 15);
        assert!(m >> 63 == 1, "{m:#x}");
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
        for d in [3u64, 5, 6, 7, 10, 1000, 12_345, 32_769, 65_533, 65_535] {
            // The multiples of d nearest the ends, and their neighbours: where a quotient
            // one too small or too large would show.
            let top = i64::MAX / d as i64 * d as i64;
            let near = [top - 1, top, top.saturating_add(1), -top - 1, -top, 1 - top];
            for x in edges.into_iter().chain(near).chain(random.take(2_000)) {
                let want = i128::from(x).div_euclid(i128::from(d));
                assert_eq!(i128::from(floordiv_by_wide(x, d)), want, "{x} // {d}");
                let rem = i128::from(x).rem_euclid(i128::from(d));
                assert_eq!(i128::from(mod_by_wide(x, d)), rem, "{x} % {d}");
            }
        }
    }
}
