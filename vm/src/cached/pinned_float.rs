//! The members on pinned float registers (families with `PINNED_FLOAT`:
//! vm/templates/cached/pinned_float.h, [`crate::pinning::float`]): by op, float register,
//! member kind and entry state, and each register's `PIN_FLOAT` and `UNPIN_FLOAT`.

use super::{pinned_op, runs_with_nothing_cached, ByKind, CacheState, CachedOps, Kind, STATES};
use crate::pinning::{float::float_pinnable, FLOAT_PIN_REGS};

/// By pinned float register: a member table.
type ByFloatRegister = [ByKind; FLOAT_PIN_REGS];

/// The members on pinned float registers of one set.
#[derive(Clone, Debug, Default)]
pub(super) struct FloatPinned {
    /// By op id: its members on each pinned float register (boxed: few ops have any).
    members: Vec<Option<Box<ByFloatRegister>>>,
    /// By pinned float register: the `PIN_FLOAT` and `UNPIN_FLOAT` stencils.
    pins: [Option<usize>; FLOAT_PIN_REGS],
    unpins: [Option<usize>; FLOAT_PIN_REGS],
}

impl CachedOps {
    /// Records one member of a family with `PINNED_FLOAT` (pinned float register `q`).
    pub(super) fn add_pinned_float(
        &mut self,
        at: &str,
        element: &str,
        stencil: usize,
        (entry, exit): (CacheState, CacheState),
        kind: Kind,
        q: usize,
    ) -> Result<(), String> {
        self.facts[stencil].states = Some((entry, exit));
        let copies = match element {
            "PIN_FLOAT" => Some(&mut self.float_pinned.pins),
            "UNPIN_FLOAT" => Some(&mut self.float_pinned.unpins),
            _ => None,
        };
        if let Some(table) = copies {
            runs_with_nothing_cached(at, element, (entry, exit))?;
            table[q] = Some(stencil);
            return Ok(());
        }
        let op = pinned_op(at, element, 0)?;
        if !float_pinnable(op) {
            return Err(format!(
                "{at}: {element} on a pinned float register, which the VM does not lower \
                 (vm/src/pinning/float.rs, `float_pinnable`)"
            ));
        }
        let members = &mut self.float_pinned.members;
        if members.len() <= op as usize {
            members.resize(op as usize + 1, None);
        }
        let table = members[op as usize]
            .get_or_insert_with(|| Box::new([[[None; STATES]; Kind::COUNT]; FLOAT_PIN_REGS]));
        table[q][kind.index()][entry.index()] = Some((stencil, exit));
        self.facts[stencil].float_pinned = Some(q);
        self.facts[stencil].op = Some(op);
        Ok(())
    }

    /// The member of op `op` on the local in pinned float register `q`, entered in state
    /// `entry` with registers of kind `kind` (as for [`CachedOps::member_as`]).
    pub fn float_pinned_member(
        &self,
        op: u32,
        q: usize,
        entry: CacheState,
        kind: Kind,
    ) -> Option<(usize, CacheState)> {
        if !entry.fits(kind) {
            return None;
        }
        let table = self.float_pinned.members.get(op as usize)?.as_deref()?;
        table.get(q)?[kind.index()][entry.index()]
    }

    /// Whether op `op` has members on a pinned float register at all.
    pub fn has_float_pinned(&self, op: u32) -> bool {
        self.float_pinned
            .members
            .get(op as usize)
            .is_some_and(Option::is_some)
    }

    /// The stencil that loads pinned float register `q` from its local.
    pub fn pin_float(&self, q: usize) -> Option<usize> {
        *self.float_pinned.pins.get(q)?
    }

    /// The stencil that writes pinned float register `q` back to its local.
    pub fn unpin_float(&self, q: usize) -> Option<usize> {
        *self.float_pinned.unpins.get(q)?
    }

    /// The pinned float register of a `PIN_FLOAT` stencil.
    pub fn pin_float_register_of(&self, stencil: usize) -> Option<usize> {
        self.float_pinned
            .pins
            .iter()
            .position(|&s| s == Some(stencil))
    }

    /// The pinned float register of an `UNPIN_FLOAT` stencil.
    pub fn unpin_float_register_of(&self, stencil: usize) -> Option<usize> {
        self.float_pinned
            .unpins
            .iter()
            .position(|&s| s == Some(stencil))
    }

    /// The pinned float register a member on a pinned float local runs on.
    pub fn float_pinned_register_of(&self, stencil: usize) -> Option<usize> {
        self.facts.get(stencil)?.float_pinned
    }
}

#[cfg(test)]
mod tests {
    use crate::cached::{CacheState, CachedOps, Kind};
    use crate::jit::selected_set;
    use crate::ops::op;
    use crate::pinning::FLOAT_PIN_REGS;

    /// The host's set has, for every pinned float register, its copies and the members a
    /// float loop runs (mandelbrot's): a load and a store on float slots and on boxed
    /// registers, and the float ops on a local; each member says which register it runs on.
    #[test]
    fn every_pinned_float_register_has_its_copies_and_members() {
        let set = selected_set().expect("the host's set");
        let cached = CachedOps::of_set(set).expect("the set's cached ops");
        let float1 = CacheState::float(1);
        for q in 0..FLOAT_PIN_REGS {
            let pin = cached.pin_float(q).expect("PIN_FLOAT");
            let unpin = cached.unpin_float(q).expect("UNPIN_FLOAT");
            assert_eq!(cached.pin_float_register_of(pin), Some(q));
            assert_eq!(cached.unpin_float_register_of(unpin), Some(q));
            let members = [
                (op::LOAD, CacheState::EMPTY, Kind::Float),
                (op::LOAD, CacheState::EMPTY, Kind::Boxed),
                (op::STORE, float1, Kind::Float),
                (op::STORE, CacheState::boxed(1), Kind::Boxed),
                (op::ADD_FLOAT_LOCAL, float1, Kind::Float),
                (op::SUB_FLOAT_LOCAL, float1, Kind::Float),
                (op::MUL_FLOAT_LOCAL, float1, Kind::Float),
            ];
            for (o, entry, kind) in members {
                let (stencil, _) = cached
                    .float_pinned_member(o, q, entry, kind)
                    .unwrap_or_else(|| panic!("op {o} on q{q} from {entry} ({kind:?})"));
                assert_eq!(cached.float_pinned_register_of(stencil), Some(q));
                assert_eq!(cached.op_of(stencil), Some(o));
            }
            assert!(cached.has_float_pinned(op::LOAD));
            assert!(!cached.has_float_pinned(op::LOAD_INT));
        }
    }
}
