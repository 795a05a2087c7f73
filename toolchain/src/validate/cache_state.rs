//! A cached op's declared cache state, parsed from the annotation `CPJIT_CACHED_OP` puts on
//! it ([`CACHED_ANNOTATION`]).

use super::CACHED_ANNOTATION;

/// A cached op's declared cache state (`CPJIT_CACHED_OP(NAME, IN, OUT)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CacheState {
    /// Values cached in registers on entry.
    pub(super) entry: usize,
    /// Values cached in registers when it continues or jumps.
    pub(super) exit: usize,
    /// Cache registers of the convention (`CPJIT_CACHE_REGS`).
    pub(super) registers: usize,
    /// Pinned registers, before the last cache register (`CPJIT_PIN_REGS`): the JIT's,
    /// passed by every op and not checked here.
    pub(super) pinned: usize,
}

impl CacheState {
    /// The parameter (or call argument) index of cache register `k`, after `first` leading
    /// ones: cpjit.h puts the pinned registers between the second-to-last and the last cache
    /// register.
    pub(super) fn parameter(&self, first: usize, k: usize) -> usize {
        if self.pinned > 0 && k + 1 == self.registers {
            first + k + self.pinned
        } else {
            first + k
        }
    }

    /// Parses the annotation's text after [`CACHED_ANNOTATION`]: three or four integers, the
    /// states at most the register count, then the pinned registers (0 if absent).
    pub(super) fn parse(text: &str) -> Result<CacheState, String> {
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let number = |s: &str| s.parse::<usize>().ok();
        let (i, o, n, p) = match fields[..] {
            [i, o, n] => (i, o, n, "0"),
            [i, o, n, p] => (i, o, n, p),
            _ => {
                return Err(format!(
                    "malformed cache-state annotation `{CACHED_ANNOTATION}{text}`"
                ))
            }
        };
        match (number(i), number(o), number(n), number(p)) {
            (Some(entry), Some(exit), Some(registers), Some(pinned))
                if (1..=8).contains(&registers)
                    && entry <= registers
                    && exit <= registers
                    && pinned <= 4 =>
            {
                Ok(CacheState {
                    entry,
                    exit,
                    registers,
                    pinned,
                })
            }
            _ => Err(format!(
                "declared cache state `IN = {i}, OUT = {o}` with {n} cache registers is not \
                 two integer literals from 0 to the register count (CPJIT_CACHED_OP's IN \
                 and OUT must expand to integers, e.g. a family's -DIN=2), or its pinned \
                 registers `{p}` are not 0 to 4 (CPJIT_PIN_REGS)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CacheState;

    /// cpjit.h's cached signature: `frame, sp, c0, c1, [p0, p1,] c2`. The pinned registers sit
    /// between the last two cache registers, so that c2 takes the seventh argument register
    /// (x86-64's rdx) when there are pinned ones.
    #[test]
    fn pinned_registers_sit_between_the_last_two_cache_registers() {
        let parameters = |annotation: &str| {
            let state = CacheState::parse(annotation).unwrap();
            (0..state.registers)
                .map(|k| state.parameter(2, k))
                .collect::<Vec<_>>()
        };
        assert_eq!(parameters("1,1,3"), [2, 3, 4]);
        assert_eq!(parameters("1,1,3,0"), [2, 3, 4]);
        assert_eq!(parameters("3,0,3,2"), [2, 3, 6]);
    }
}
