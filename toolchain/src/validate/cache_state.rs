//! A cached op's declared cache state, parsed from the annotation `CPJIT_CACHED_OP` puts on
//! it ([`CACHED_ANNOTATION`]), and its registers: slot `k`'s int register `c<k>` and, with
//! float cache slots (`CPJIT_FLOAT_CACHE`), its float register `f<k>`.

use super::CACHED_ANNOTATION;
use cpjit_model::FloatState;

/// A cached op's declared cache state (`CPJIT_CACHED_OP(NAME, IN, OUT)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CacheState {
    /// The state on entry: values cached in registers, or with float slots the state's
    /// number ([`FloatState`]).
    pub(super) entry: usize,
    /// The state when it continues or jumps.
    pub(super) exit: usize,
    /// Cache registers of the convention (`CPJIT_CACHE_REGS`).
    pub(super) registers: usize,
    /// Pinned registers, before the last cache register (`CPJIT_PIN_REGS`): the JIT's,
    /// passed by every op and not checked here.
    pub(super) pinned: usize,
    /// Float cache registers, one per slot, after the int ones (`CPJIT_FLOAT_CACHE`: 0 or
    /// `registers`).
    pub(super) floats: usize,
    /// Pinned float registers, after the float cache registers (`CPJIT_PIN_FLOAT_REGS`).
    pub(super) pinned_floats: usize,
}

/// One cache register: slot `slot`'s int register `c<slot>` or float register `f<slot>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Register {
    pub(super) slot: usize,
    pub(super) float: bool,
}

impl std::fmt::Display for Register {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", if self.float { 'f' } else { 'c' }, self.slot)
    }
}

impl CacheState {
    /// Every cache register: the int ones, then the float ones.
    pub(super) fn all(&self) -> impl Iterator<Item = Register> + '_ {
        let ints = (0..self.registers).map(|slot| Register { slot, float: false });
        ints.chain((0..self.floats).map(|slot| Register { slot, float: true }))
    }

    /// Whether `state` caches a value in `r`: its slot is cached, in `r`'s class.
    pub(super) fn holds(&self, state: usize, r: Register) -> bool {
        if self.floats == 0 {
            return !r.float && r.slot < state;
        }
        let s = FloatState::from_number(state as u8);
        r.slot < s.count as usize && s.is_float(r.slot as u8) == r.float
    }

    /// `state` as errors show it: `IN = 5` and, with float slots, which registers it uses.
    pub(super) fn describe(&self, what: &str, state: usize) -> String {
        if self.floats == 0 {
            return format!("{what} = {state}");
        }
        let held: Vec<String> = self
            .all()
            .filter(|&r| self.holds(state, r))
            .map(|r| r.to_string())
            .collect();
        format!("{what} = {state} (values in: {})", held.join(", "))
    }

    /// The parameter (or call argument) index of cache register `r`, after `first` leading
    /// ones: cpjit.h puts the pinned registers between the second-to-last and the last int
    /// cache register, then the pinned float registers, then the float cache registers (so
    /// that pinned float registers are in the same place in members with and without float
    /// slots).
    pub(super) fn parameter(&self, first: usize, r: Register) -> usize {
        if r.float {
            first + self.registers + self.pinned + self.pinned_floats + r.slot
        } else if self.pinned > 0 && r.slot + 1 == self.registers {
            first + r.slot + self.pinned
        } else {
            first + r.slot
        }
    }

    /// Parses the annotation's text after [`CACHED_ANNOTATION`]: three, four or six
    /// integers: the states, the register count, the pinned registers (0 if absent), the
    /// float cache registers (0 or the register count) and the pinned float registers.
    pub(super) fn parse(text: &str) -> Result<CacheState, String> {
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let number = |s: &str| s.parse::<usize>().ok();
        let (i, o, n, p, f, q) = match fields[..] {
            [i, o, n] => (i, o, n, "0", "0", "0"),
            [i, o, n, p] => (i, o, n, p, "0", "0"),
            [i, o, n, p, f, q] => (i, o, n, p, f, q),
            _ => {
                return Err(format!(
                    "malformed cache-state annotation `{CACHED_ANNOTATION}{text}`"
                ))
            }
        };
        let refused = |last: &str| {
            format!(
                "declared cache state `IN = {i}, OUT = {o}` with {n} cache registers is not two \
                 integer literals from 0 to {last} (CPJIT_CACHED_OP's IN and OUT must expand to \
                 integers, e.g. a family's -DIN=2; the last state is {n} with \
                 CPJIT_FLOAT_CACHE 0, 2**({n} + 1) - 2 with 1), or its pinned registers `{p}`, \
                 `{q}` are not 0 to 4 (CPJIT_PIN_REGS, CPJIT_PIN_FLOAT_REGS), or its float \
                 cache registers `{f}` are neither 0 nor {n} (CPJIT_FLOAT_CACHE)"
            )
        };
        let [Some(entry), Some(exit), Some(registers), Some(pinned), Some(floats), Some(pinned_floats)] =
            [i, o, n, p, f, q].map(number)
        else {
            return Err(refused("the last state"));
        };
        // With float slots a state numbers (count, floats): 2**(registers + 1) - 1 of them.
        let last = match floats {
            0 => registers,
            _ => (1usize << (registers + 1).min(8)) - 2,
        };
        if !(1..=7).contains(&registers)
            || entry > last
            || exit > last
            || pinned > 4
            || !(floats == 0 || floats == registers)
            || pinned_floats > 4
        {
            return Err(refused(&last.to_string()));
        }
        Ok(CacheState {
            entry,
            exit,
            registers,
            pinned,
            floats,
            pinned_floats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{CacheState, Register};

    fn parameters(annotation: &str) -> Vec<(String, usize)> {
        let state = CacheState::parse(annotation).unwrap();
        state
            .all()
            .map(|r| (r.to_string(), state.parameter(2, r)))
            .collect()
    }

    /// cpjit.h's cached signature: `frame, sp, c0, c1, [p0, p1,] c2`. The pinned registers sit
    /// between the last two cache registers, so that c2 takes the seventh argument register
    /// (x86-64's rdx) when there are pinned ones.
    #[test]
    fn pinned_registers_sit_between_the_last_two_cache_registers() {
        let at = |a: &str| parameters(a).into_iter().map(|p| p.1).collect::<Vec<_>>();
        assert_eq!(at("1,1,3"), [2, 3, 4]);
        assert_eq!(at("1,1,3,0"), [2, 3, 4]);
        assert_eq!(at("3,0,3,2"), [2, 3, 6]);
    }

    /// With CPJIT_FLOAT_CACHE, `f0 .. f2` follow every int register (the pinned ones too)
    /// and the pinned float registers, and a state (count, floats) numbered
    /// 2**count - 1 + floats puts each slot in one class.
    #[test]
    fn float_registers_follow_the_int_ones_and_states_choose_a_class_per_slot() {
        let want = |f0: usize| -> Vec<(String, usize)> {
            [("c0", 2), ("c1", 3), ("c2", 6), ("f0", f0)]
                .into_iter()
                .chain([("f1", f0 + 1), ("f2", f0 + 2)])
                .map(|(n, p)| (n.to_string(), p))
                .collect()
        };
        assert_eq!(parameters("5,14,3,2,3,0"), want(7));
        assert_eq!(parameters("5,14,3,2,3,2"), want(9));
        assert_eq!(parameters("5,14,3,2,3,4"), want(11));
        let state = CacheState::parse("5,14,3,0,3,0").unwrap();
        let held = |s: usize| -> Vec<String> {
            state
                .all()
                .filter(|&r| state.holds(s, r))
                .map(|r| r.to_string())
                .collect()
        };
        assert_eq!(held(0), Vec::<String>::new());
        assert_eq!(held(2), ["f0"]);
        assert_eq!(held(5), ["c0", "f1"]);
        assert_eq!(held(14), ["f0", "f1", "f2"]);
        assert_eq!(state.describe("IN", 4), "IN = 4 (values in: c1, f0)");
        let plain = CacheState::parse("2,1,3").unwrap();
        assert!(plain.holds(
            2,
            Register {
                slot: 1,
                float: false
            }
        ));
        assert!(!plain.holds(
            2,
            Register {
                slot: 2,
                float: false
            }
        ));
    }

    #[test]
    fn states_past_the_registers_and_odd_float_counts_are_refused() {
        assert!(CacheState::parse("4,0,3").is_err());
        assert!(CacheState::parse("14,0,3,0,3,0").is_ok());
        assert!(CacheState::parse("15,0,3,0,3,0").is_err());
        assert!(CacheState::parse("1,0,3,0,2,0").is_err());
        assert!(CacheState::parse("1,0,3,0,0,5").is_err());
        assert!(CacheState::parse("IN,0,3")
            .unwrap_err()
            .contains("integer literals"));
    }
}
