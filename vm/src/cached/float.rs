//! Float slots: cache states whose values are in FP registers (vm/templates/cached/ops.c,
//! "Float slots"; the families `vm_float_*`, parameter `FLOATS`).
//!
//! A float slot holds a value's 64 bits; the VM boxes a float as its bits, so any value may
//! be there and storing a slot stores the boxed value: which values go into float slots is a
//! question of cost only, never of correctness. The families' states are the kit's
//! float-slot numbers (`cpjit_model::FloatState`: `2**count - 1 + floats`); the VM uses those
//! with every slot a float (2, 6, 14: [`CacheState::float`]) and, as `BOX`'s exit, those with
//! every slot an int (1, 3, 7: the boxed states, whose registers are the same as the other
//! families'). [`CacheState::kit_state`] is the number the kit's tables index by.

use super::{CacheState, Kind};
use crate::ops;

impl CacheState {
    /// `depth` values cached in float slots.
    pub fn float(depth: u8) -> CacheState {
        assert!(depth < 4, "no cache state of depth {depth}");
        CacheState(if depth == 0 { 0 } else { depth | 8 })
    }

    /// Whether its registers are float slots.
    pub fn is_float(self) -> bool {
        self.0 & 12 == 8
    }

    /// The state's number in the kit's selection tables of a family with float slots
    /// (`float_family`: the float-slot number, every slot of this state's class) or without
    /// (its depth).
    pub fn kit_state(self, float_family: bool) -> u8 {
        match (float_family, self.is_float()) {
            (false, _) => self.depth(),
            (true, true) => (2 << self.depth()) - 2,
            (true, false) => (1 << self.depth()) - 1,
        }
    }
}

/// Checks that a family's tables have the states the VM reads: 0 to 3 (a depth), or for a
/// float-slot family (`floats`) the kit's float-slot numbers up to three values (0 to 14).
pub(super) fn check_states(at: &str, states: u8, floats: bool) -> Result<(), String> {
    let most = if floats { 15 } else { 4 };
    if states > most {
        return Err(format!(
            "{at}: states 0 to {}, but the VM caches at most 3 values{}",
            states - 1,
            if floats {
                " (float-slot states 0 to 14)"
            } else {
                ""
            }
        ));
    }
    Ok(())
}

/// The VM's (entry, exit) states of a member of kind `kind` whose family's tables go from
/// state `entry` to `exit`: a depth each, or (float slots) the float-slot numbers with every
/// slot a float, the exit of `BOX` (`boxes`) every slot an int. `None` for a state the VM
/// does not use.
pub(super) fn states_of_kit(
    entry: u8,
    exit: u8,
    kind: Kind,
    boxes: bool,
) -> Option<(CacheState, CacheState)> {
    let exit_kind = if boxes { Kind::Boxed } else { kind };
    if kind != Kind::Float {
        let depth = |s: u8| (s < 4).then_some(s);
        return Some((
            CacheState::of_kind(depth(entry)?, kind),
            CacheState::of_kind(depth(exit)?, exit_kind),
        ));
    }
    let state = |number: u8, kind: Kind| {
        let s = cpjit_model::FloatState::from_number(number);
        let all = (1u8 << s.count) - 1;
        let floats = if kind == Kind::Float { all } else { 0 };
        (s.count < 4 && s.floats == floats).then(|| CacheState::of_kind(s.count, kind))
    };
    Some((state(entry, kind)?, state(exit, exit_kind)?))
}

/// Whether op `op` does less on float slots than on boxed values: float arithmetic and
/// compares (no move between register files per operand and result), and the conversion of
/// an int local (its float is made in an FP register). A load, a constant or a store costs
/// the same in either.
pub(crate) fn gains_from_float_slots(op: u32) -> bool {
    use ops::op::*;
    matches!(
        op,
        ADD_FLOAT
            | LOAD_INT_FLOAT
            | SUB_FLOAT
            | MUL_FLOAT
            | DIV_FLOAT
            | SQRT_FLOAT
            | ADD_FLOAT_LOCAL
            | SUB_FLOAT_LOCAL
            | MUL_FLOAT_LOCAL
            | ADD_FLOAT_TO_ITEM
            | SUB_FLOAT_FROM_ITEM
            | LT_FLOAT_GUARD_TRUE
            | LT_FLOAT_GUARD_FALSE
            | GT_FLOAT_GUARD_TRUE
            | GT_FLOAT_GUARD_FALSE
            | LE_FLOAT_GUARD_TRUE
            | LE_FLOAT_GUARD_FALSE
            | GE_FLOAT_GUARD_TRUE
            | GE_FLOAT_GUARD_FALSE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_states_are_the_kits_all_float_numbers() {
        for depth in 1..4u8 {
            let f = CacheState::float(depth);
            assert_eq!((f.depth(), f.kind()), (depth, Kind::Float));
            assert_eq!(f.describe(), format!("{depth}f"));
            let number = f.kit_state(true);
            assert_eq!(number, [2, 6, 14][depth as usize - 1]);
            // BOX: every slot a float to every slot an int, the boxed state of that depth.
            let boxed = (1 << depth) - 1;
            assert_eq!(
                states_of_kit(number, boxed, Kind::Float, true),
                Some((f, CacheState::boxed(depth)))
            );
            assert_eq!(CacheState::boxed(depth).kit_state(false), depth);
            assert_eq!(CacheState::boxed(depth).kit_state(true), boxed);
        }
        assert_eq!(CacheState::float(0), CacheState::EMPTY);
        assert_eq!(CacheState::EMPTY.kit_state(true), 0);
        assert_eq!(
            states_of_kit(0, 2, Kind::Float, false),
            Some((CacheState::EMPTY, CacheState::float(1)))
        );
        // A mixed state (one int, one float) is none the VM uses.
        assert_eq!(states_of_kit(4, 2, Kind::Float, false), None);
        assert_eq!(
            states_of_kit(1, 2, Kind::Scaled, false),
            Some((CacheState::scaled(1), CacheState::scaled(2)))
        );
        assert_eq!(states_of_kit(4, 0, Kind::Boxed, false), None);
    }

    #[test]
    fn a_family_with_more_states_than_the_vm_caches_is_refused() {
        assert!(check_states("f", 4, false).is_ok() && check_states("f", 15, true).is_ok());
        let e = check_states("family f", 7, false).unwrap_err();
        assert!(e.contains("family f: states 0 to 6"), "{e}");
        assert!(check_states("f", 16, true).is_err());
    }
}
