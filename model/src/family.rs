//! Stencil families as generated crates export them: [`Family`] (the members of a
//! `[[family]]` by element and parameter values) and, for register-cached families, the
//! selection tables [`CacheSelect`] a runtime picks members and glue from.

mod table;
pub use table::StencilIndices;

#[cfg(doc)]
use crate::StencilSet;

/// A stencil family: stencils compiled from one template, per element of a list and/or per
/// combination of variant-parameter values (`[[family]]` in the manifest). A generated
/// crate with families exports them as `FAMILIES`, with index constants in `mod family`,
/// so a runtime user finds "the variant of op X for state (i, o)" by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Family<'a> {
    pub name: &'a str,
    /// The list's elements, in list order (empty when the family has no list).
    pub elements: &'a [&'a str],
    /// The variant parameters, sorted by name.
    pub params: &'a [FamilyParam<'a>],
    /// The stencil index (into [`StencilSet::stencils`]) of every combination, row-major:
    /// element first, then each parameter's value index in `params` order;
    /// [`Family::NONE`] where the manifest skipped the combination.
    pub stencils: StencilIndices<'a>,
    /// For a family of register-cached ops (`cached` in the manifest): what a runtime needs
    /// to pick each op's member and the glue between them itself.
    pub cached: Option<CacheSelect<'a>>,
}

/// The selection tables of a register-cached [`Family`], generated per target (the
/// toolchain's `select` module says how each entry is chosen).
///
/// An *op* (a `u16`) is a list element together with one value of each parameter that is
/// not a state parameter, numbered row-major, element first ([`CacheSelect::op`]); the
/// numbers are the same on every target. A *state* is a number of cached values,
/// `0..states`, or, in a family with float cache slots (`CPJIT_FLOAT_CACHE`), a number
/// that also says which slots hold floats ([`FloatState`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSelect<'a> {
    /// Indices into [`Family::params`] of the entry and exit state parameters.
    pub entry_param: u8,
    pub exit_param: u8,
    /// How many states there are: state values are `0..states`.
    pub states: u8,
    /// Ops per element (the combinations of the other parameters' values).
    pub combos: u16,
    /// The element whose members move the state (spill or fill), [`Family::NONE`] if none.
    pub glue: u16,
    /// Each element's `[pop, push]`, [`CacheSelect::NO_EFFECT`] where undeclared.
    pub effects: &'a [[u8; 2]],
    /// `(op * states + entry) * states + exit` → stencil index, [`Family::NONE`] if the
    /// family has no such member.
    pub members: StencilIndices<'a>,
    /// `op * states + entry` → what to push for the op in that state.
    pub transitions: &'a [Transition],
}

/// What to push for an op in a state: if `glue` is not [`Family::NONE`], that stencil
/// (moving the state to `via`) first, then `member`, which leaves state `exit`. A
/// `member` of [`Family::NONE`]: the op cannot be pushed in that state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub member: u16,
    pub glue: u16,
    pub via: u8,
    pub exit: u8,
}

impl Transition {
    /// The entry of an op with no way from a state.
    pub const NONE: Transition = Transition {
        member: Family::NONE,
        glue: Family::NONE,
        via: 0,
        exit: 0,
    };
}

impl<'a> CacheSelect<'a> {
    /// The `effects` entry of an element whose stack effect the manifest does not state.
    pub const NO_EFFECT: [u8; 2] = [u8::MAX, u8::MAX];

    /// Number of ops.
    pub fn ops(&self) -> usize {
        self.transitions.len() / (self.states as usize).max(1)
    }

    /// The op of element `element` (index into [`Family::elements`]) with value index
    /// `values[k]` of the `k`-th parameter that is not a state parameter; `None` if out of
    /// range.
    pub fn op(&self, family: &Family<'_>, element: usize, values: &[usize]) -> Option<u16> {
        let mut op = element;
        let mut k = 0;
        for (p, param) in family.params.iter().enumerate() {
            if p == self.entry_param as usize || p == self.exit_param as usize {
                continue;
            }
            let v = *values.get(k)?;
            if v >= param.values.len() {
                return None;
            }
            op = op * param.values.len() + v;
            k += 1;
        }
        (k == values.len() && op < self.ops()).then_some(op as u16)
    }

    /// The op of the element named `element`, for a family whose only parameters are the
    /// state parameters.
    pub fn op_named(&self, family: &Family<'_>, element: &str) -> Option<u16> {
        self.op(family, family.element_index(element)?, &[])
    }

    /// The transition of `op` in state `state` ([`Transition::NONE`] if out of range).
    #[inline(always)]
    pub fn transition(&self, op: u16, state: u8) -> Transition {
        let at = op as usize * self.states as usize + state as usize;
        match self.transitions.get(at) {
            Some(t) if state < self.states => *t,
            _ => Transition::NONE,
        }
    }

    /// The member of `op` from state `entry` to state `exit` ([`Family::NONE`] if none).
    pub fn member(&self, op: u16, entry: u8, exit: u8) -> u16 {
        let s = self.states as usize;
        if entry as usize >= s || exit as usize >= s {
            return Family::NONE;
        }
        let at = (op as usize * s + entry as usize) * s + exit as usize;
        self.members.get(at).unwrap_or(Family::NONE)
    }

    /// The glue element's op for `op` (same values of the other parameters), if the family
    /// has a glue element.
    pub fn glue_op(&self, op: u16) -> Option<u16> {
        (self.glue != Family::NONE)
            .then(|| {
                self.glue as usize * self.combos as usize
                    + op as usize % self.combos.max(1) as usize
            })
            .and_then(|g| u16::try_from(g).ok())
    }

    /// `op`'s element's `[pop, push]`, `None` where undeclared.
    pub fn effect(&self, op: u16) -> Option<[u8; 2]> {
        let e = *self
            .effects
            .get(op as usize / self.combos.max(1) as usize)?;
        (e != CacheSelect::NO_EFFECT).then_some(e)
    }
}

/// A cache state of a family with float cache slots (`CPJIT_FLOAT_CACHE 1` in cpjit.h):
/// `count` values cached, slot `k` in a float register where bit `k` of `floats` is set,
/// else in an int one. Its number, the family's state parameter value, is
/// `2**count - 1 + floats`: 0 caches nothing, 1 and 2 one int or float, 3 to 6 two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatState {
    pub count: u8,
    pub floats: u8,
}

impl FloatState {
    /// The state numbered `state`.
    pub const fn from_number(state: u8) -> FloatState {
        let next = state as u32 + 1;
        let count = u32::BITS - next.leading_zeros() - 1;
        FloatState {
            count: count as u8,
            floats: (next - (1 << count)) as u8,
        }
    }

    /// This state's number (the family's state parameter value).
    pub const fn number(self) -> u8 {
        ((1u32 << self.count) - 1 + self.floats as u32) as u8
    }

    /// Whether slot `k` is cached as a float.
    pub const fn is_float(self, k: u8) -> bool {
        k < self.count && self.floats >> k & 1 == 1
    }
}

/// One variant parameter of a [`Family`]: its name (the macro it is passed in) and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilyParam<'a> {
    pub name: &'a str,
    pub values: &'a [&'a str],
}

impl<'a> Family<'a> {
    /// The entry of a skipped combination in [`Family::stencils`].
    pub const NONE: u16 = u16::MAX;

    /// The stencil index of `element` (0 for a family without a list) with value index
    /// `values[k]` of parameter `k`; `None` if skipped or out of range.
    pub fn stencil(&self, element: usize, values: &[usize]) -> Option<usize> {
        if values.len() != self.params.len() || element >= self.elements.len().max(1) {
            return None;
        }
        let mut at = element;
        for (p, &v) in self.params.iter().zip(values) {
            if v >= p.values.len() {
                return None;
            }
            at = at * p.values.len() + v;
        }
        match self.stencils.get(at) {
            Some(i) if i != Family::NONE => Some(i as usize),
            _ => None,
        }
    }

    /// Index of the list element called `name`.
    pub fn element_index(&self, name: &str) -> Option<usize> {
        self.elements.iter().position(|e| *e == name)
    }

    /// Index of parameter `param`'s value written `value` (e.g. `"2"`).
    pub fn value_index(&self, param: &str, value: &str) -> Option<usize> {
        let p = self.params.iter().find(|p| p.name == param)?;
        p.values.iter().position(|v| *v == value)
    }
}

#[cfg(test)]
mod tests {
    use super::FloatState;

    /// cpjit.h numbers states (count, floats) as `2**count - 1 + floats`
    /// (`CPJIT_STATE_COUNT`, `CPJIT_STATE_FLOATS`): 0 | 1 2 | 3 4 5 6 | 7 .. 14.
    #[test]
    fn float_states_number_count_and_classes_as_cpjit_h_does() {
        let slots = |s: u8| {
            let f = FloatState::from_number(s);
            (f.count, f.floats)
        };
        assert_eq!(slots(0), (0, 0));
        assert_eq!(slots(2), (1, 1));
        assert_eq!(slots(4), (2, 1));
        assert_eq!(slots(6), (2, 3));
        assert_eq!(slots(7), (3, 0));
        assert_eq!(slots(14), (3, 7));
        for s in 0..15 {
            assert_eq!(FloatState::from_number(s).number(), s);
        }
        assert!(FloatState::from_number(5).is_float(1));
        assert!(!FloatState::from_number(5).is_float(0));
        assert!(!FloatState::from_number(5).is_float(2));
    }
}
