//! The register-cached members of the VM's ops in one stencil set, and the cache states they
//! are entered and left in.
//!
//! A cache state says how many top-of-stack values are in registers (0 to 3, cpjit.h's
//! `CPJIT_CACHE_REGS`) and whether those registers hold boxed values or *scaled ints* (an
//! int times 2**16: vm/templates/cached/ops.c, "Scaled ints"). It is one byte, [`state`]:
//! the depth, plus 4 when the registers are scaled; with nothing cached there is one state,
//! 0, whatever the registers would hold.
//!
//! The members come from the set's families whose name starts with `vm_`
//! (vm/templates/manifest.toml): parameters `IN` and `OUT` (the depths on entry and exit),
//! optionally `SCALED` (the registers are scaled), `PINNED` (the op runs on the local in
//! that pinned register, [`crate::pinning`]), `PINNED_SCALED` (that register holds its
//! local scaled), `PINNED_OPERAND` (which of the op's locals it is, checked against
//! [`crate::pinning::pinned_operand`]) and `DEPTH` (a `COPY` compiled for that depth operand only); elements are ops of `ops.def`, or `SPILL` (store every cached value),
//! `BOX` (turn scaled registers into boxed ones in place), `PIN`, `UNPIN` and `LINK` (enter
//! an exit's pinned link with the pinned registers live, [`crate::pinning`]). A member that
//! pushes, entered with nothing cached, leaves its value scaled or boxed as its `SCALED`
//! says; so an op may have two members entered in state 0, and [`CachedOps::member_as`]
//! takes which one.

use crate::ops;
use crate::pinning::{self, PIN_REGS};
use cpjit_model::StencilSet;
use std::collections::HashMap;

/// Cache states ([`state`]): depths 0 to 3, boxed or scaled (4 and 0 are the same state).
pub const STATES: usize = 8;

/// The cache state of `depth` cached values, scaled ints or boxed.
pub fn state(depth: u8, scaled: bool) -> u8 {
    if depth == 0 {
        0
    } else {
        depth | if scaled { 4 } else { 0 }
    }
}

/// How many values state `s` caches.
pub fn depth(s: u8) -> u8 {
    s & 3
}

/// Whether state `s`'s registers hold scaled ints.
pub fn is_scaled(s: u8) -> bool {
    s & 4 != 0
}

/// Whether a member whose registers are scaled (or not) can be entered in state `entry`: any
/// with nothing cached, else one whose registers hold what `entry`'s do.
fn registers_fit(entry: u8, scaled: bool) -> bool {
    depth(entry) == 0 || scaled == is_scaled(entry)
}

/// A state as text: `2` (two boxed values), `2s` (two scaled ints).
pub fn describe(s: u8) -> String {
    format!("{}{}", depth(s), if is_scaled(s) { "s" } else { "" })
}

/// By entry state: a member's stencil index and exit state.
type ByEntryState = [Option<(usize, u8)>; STATES];

/// By member kind (boxed, scaled), then by entry state.
type ByKind = [ByEntryState; 2];

/// The register-cached members of the VM's ops in one set (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct CachedOps {
    /// By op id: its members.
    members: Vec<ByKind>,
    /// By op id, by pinned register, by whether it holds its local scaled: the members on a
    /// pinned local.
    pinned: Vec<[[ByKind; 2]; PIN_REGS]>,
    /// By entry state: the stencil that spills every cached value.
    spills: [Option<usize>; STATES],
    /// By entry state (scaled): the stencil that boxes the registers, and its exit state.
    boxes: ByEntryState,
    /// By pinned register, by scaled: the `PIN` and `UNPIN` stencils.
    pins: [[Option<usize>; 2]; PIN_REGS],
    unpins: [[Option<usize>; 2]; PIN_REGS],
    /// The `LINK` stencil: enters an exit's pinned link with the pinned registers live.
    link: Option<usize>,
    /// By (op, scaled, entry state, depth operand): the members compiled for one depth of
    /// `COPY`.
    at_depth: HashMap<(u32, bool, u8, u64), (usize, u8)>,
    /// By stencil index (every stencil of the set): what a cached member is.
    facts: Vec<MemberFacts>,
}

/// What a cached stencil is (all `None` for an uncached one).
#[derive(Clone, Copy, Debug, Default)]
struct MemberFacts {
    /// (entry, exit) state.
    states: Option<(u8, u8)>,
    /// The op it runs (none for `SPILL`, `BOX`, `PIN`, `UNPIN`, `LINK`).
    op: Option<u32>,
    /// The pinned register a member on a pinned local runs on, and whether that register
    /// holds its local scaled.
    pinned: Option<(usize, bool)>,
    /// The depth operand a member compiled for one depth takes.
    depth: Option<u64>,
}

/// A pinned family member's register: which, whether it holds its local scaled, and which
/// of the op's operands is that local (`PINNED_OPERAND`, 0 unless the family says).
#[derive(Clone, Copy, Debug)]
struct PinnedRegister {
    register: usize,
    scaled: bool,
    operand: usize,
}

/// A family's parameter indices, by name.
struct Params {
    entry: usize,
    exit: usize,
    pinned: Option<usize>,
    scaled: Option<usize>,
    pinned_scaled: Option<usize>,
    depth: Option<usize>,
    pinned_operand: Option<usize>,
}

impl Params {
    fn of(family: &cpjit_model::Family<'_>, at: &str) -> Result<Params, String> {
        let names: Vec<&str> = family.params.iter().map(|p| p.name).collect();
        let find = |name: &str| names.iter().position(|&n| n == name);
        let known = [
            "IN",
            "OUT",
            "PINNED",
            "SCALED",
            "PINNED_SCALED",
            "DEPTH",
            "PINNED_OPERAND",
        ];
        if let Some(other) = names.iter().find(|n| !known.contains(n)) {
            return Err(format!(
                "{at}: parameter `{other}` is none of the cache-state parameters {known:?}"
            ));
        }
        let (Some(entry), Some(exit)) = (find("IN"), find("OUT")) else {
            return Err(format!(
                "{at}: parameters {names:?}, expected the cache states \"IN\" and \"OUT\""
            ));
        };
        Ok(Params {
            entry,
            exit,
            pinned: find("PINNED"),
            scaled: find("SCALED"),
            pinned_scaled: find("PINNED_SCALED"),
            depth: find("DEPTH"),
            pinned_operand: find("PINNED_OPERAND"),
        })
    }
}

impl CachedOps {
    /// Reads the families of `set`; a set without them has no cached ops (every trace then
    /// stays in state 0).
    pub fn of_set(set: &'static StencilSet<'static>) -> Result<CachedOps, String> {
        let mut out = CachedOps {
            members: vec![[[None; STATES]; 2]; ops::OPS.len()],
            pinned: vec![[[[[None; STATES]; 2]; 2]; PIN_REGS]; ops::OPS.len()],
            facts: vec![MemberFacts::default(); set.stencils.len()],
            ..CachedOps::default()
        };
        for family in cpjit_vm_stencils::families(set)
            .iter()
            .filter(|f| f.name.starts_with("vm_"))
        {
            let at = format!("stencil set {}: family {}", set.target, family.name);
            let p = Params::of(family, &at)?;
            let number = |param: usize, v: usize, limit: usize| -> Result<usize, String> {
                let text = family.params[param].values[v];
                text.parse::<usize>()
                    .ok()
                    .filter(|&n| n < limit)
                    .ok_or_else(|| {
                        format!(
                            "{at}: {} `{text}` is not 0 to {}",
                            family.params[param].name,
                            limit - 1
                        )
                    })
            };
            // Every combination of the optional parameters' values, then every entry depth:
            // the one exit depth with a member.
            let optional = [
                p.pinned,
                p.pinned_scaled,
                p.scaled,
                p.depth,
                p.pinned_operand,
            ];
            let mut combos: Vec<[usize; 5]> = vec![[0; 5]];
            for (k, param) in optional.iter().enumerate() {
                let n = param.map_or(1, |i| family.params[i].values.len());
                combos = combos
                    .iter()
                    .flat_map(|c| {
                        (0..n).map(move |v| {
                            let mut c = *c;
                            c[k] = v;
                            c
                        })
                    })
                    .collect();
            }
            let flag = |param: Option<usize>, v: usize| -> Result<bool, String> {
                param.map_or(Ok(false), |param| Ok(number(param, v, 2)? == 1))
            };
            let mut values = vec![0; family.params.len()];
            for (e, element) in family.elements.iter().enumerate() {
                for combo in &combos {
                    for i in 0..family.params[p.entry].values.len() {
                        values[p.entry] = i;
                        for (param, &v) in optional.iter().zip(combo) {
                            if let Some(param) = param {
                                values[*param] = v;
                            }
                        }
                        let mut found = None;
                        for o in 0..family.params[p.exit].values.len() {
                            values[p.exit] = o;
                            if let Some(stencil) = family.stencil(e, &values) {
                                if found.is_some() {
                                    return Err(format!(
                                        "{at}: {element} has more than one member entered in one \
                                         state (one exit state per entry state)"
                                    ));
                                }
                                found = Some((stencil, o));
                            }
                        }
                        let Some((stencil, o)) = found else { continue };
                        let [r, ps, sc, d, po] = *combo;
                        let scaled = flag(p.scaled, sc)?;
                        let entry = state(number(p.entry, i, 4)? as u8, scaled);
                        let exit = state(number(p.exit, o, 4)? as u8, scaled && *element != "BOX");
                        let register = match p.pinned {
                            Some(param) => Some(PinnedRegister {
                                register: number(param, r, PIN_REGS)?,
                                scaled: flag(p.pinned_scaled, ps)?,
                                operand: match p.pinned_operand {
                                    Some(param) => number(param, po, 2)?,
                                    None => 0,
                                },
                            }),
                            None if p.pinned_operand.is_some() => {
                                return Err(format!(
                                    "{at}: PINNED_OPERAND without PINNED (which register?)"
                                ))
                            }
                            None => None,
                        };
                        let states = (entry, exit);
                        match p.depth {
                            Some(param) => {
                                let depth = number(param, d, 1 << 16)? as u64;
                                out.add_at_depth(&at, element, stencil, states, scaled, depth)?
                            }
                            None => out.add(&at, element, stencil, states, scaled, register)?,
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Records a member compiled for one value of its op's first operand, a depth (`COPY`).
    fn add_at_depth(
        &mut self,
        at: &str,
        element: &str,
        stencil: usize,
        (entry, exit): (u8, u8),
        scaled: bool,
        depth: u64,
    ) -> Result<(), String> {
        let op = ops::by_name(element)
            .filter(|&op| ops::info(op).operands.first() == Some(&ops::OperandKind::Count))
            .ok_or_else(|| format!("{at}: element {element} has no depth operand"))?;
        self.facts[stencil] = MemberFacts {
            states: Some((entry, exit)),
            op: Some(op),
            depth: Some(depth),
            ..MemberFacts::default()
        };
        self.at_depth
            .insert((op, scaled, entry, depth), (stencil, exit));
        Ok(())
    }

    /// Records one member (see [`CachedOps::of_set`]).
    fn add(
        &mut self,
        at: &str,
        element: &str,
        stencil: usize,
        (entry, exit): (u8, u8),
        scaled: bool,
        register: Option<PinnedRegister>,
    ) -> Result<(), String> {
        self.facts[stencil].states = Some((entry, exit));
        match (element, register) {
            (
                "PIN" | "UNPIN",
                Some(PinnedRegister {
                    register: r,
                    scaled: ps,
                    operand: 0,
                }),
            ) => {
                if (entry, exit) != (0, 0) {
                    return Err(format!(
                        "{at}: {element} of register {r} from state {} (PIN and UNPIN run with \
                         nothing cached)",
                        describe(entry)
                    ));
                }
                let table = if element == "PIN" {
                    &mut self.pins
                } else {
                    &mut self.unpins
                };
                table[r][ps as usize] = Some(stencil);
            }
            ("LINK", None) => {
                if (entry, exit) != (0, 0) {
                    return Err(format!(
                        "{at}: LINK from state {} (it runs with nothing cached)",
                        describe(entry)
                    ));
                }
                self.link = Some(stencil);
            }
            ("SPILL", None) => {
                if exit != 0 {
                    return Err(format!(
                        "{at}: SPILL from {} ends in {}, not 0",
                        describe(entry),
                        describe(exit)
                    ));
                }
                self.spills[entry as usize] = Some(stencil);
            }
            ("BOX", None) => {
                if !is_scaled(entry) || depth(exit) != depth(entry) {
                    return Err(format!(
                        "{at}: BOX from {} to {} (it boxes scaled registers in place)",
                        describe(entry),
                        describe(exit)
                    ));
                }
                self.boxes[entry as usize] = Some((stencil, exit));
            }
            (
                _,
                Some(PinnedRegister {
                    register: r,
                    scaled: ps,
                    operand,
                }),
            ) => {
                let op = pinned_op(at, element, operand)?;
                self.pinned[op as usize][r][ps as usize][scaled as usize][entry as usize] =
                    Some((stencil, exit));
                self.facts[stencil].pinned = Some((r, ps));
                self.facts[stencil].op = Some(op);
            }
            (_, None) => {
                let op = ops::by_name(element)
                    .ok_or_else(|| format!("{at}: element {element} is not a VM op"))?;
                self.members[op as usize][scaled as usize][entry as usize] = Some((stencil, exit));
                self.facts[stencil].op = Some(op);
            }
        }
        Ok(())
    }

    /// The member of op `op` entered in state `entry` that keeps its registers as `entry`
    /// does (boxed from state 0): its stencil and exit state.
    pub fn member(&self, op: u32, entry: u8) -> Option<(usize, u8)> {
        self.member_as(op, entry, is_scaled(entry))
    }

    /// The member of op `op` entered in state `entry` whose registers are scaled or not:
    /// `scaled` must be `entry`'s unless nothing is cached on entry.
    pub fn member_as(&self, op: u32, entry: u8, scaled: bool) -> Option<(usize, u8)> {
        if !registers_fit(entry, scaled) {
            return None;
        }
        self.members.get(op as usize)?[scaled as usize][entry as usize]
    }

    /// The member of op `op` compiled for operand `depth`, entered in state `entry` with
    /// registers scaled or not (as for [`CachedOps::member_as`]).
    pub fn member_at_depth(
        &self,
        op: u32,
        entry: u8,
        scaled: bool,
        operand: u64,
    ) -> Option<(usize, u8)> {
        if !registers_fit(entry, scaled) {
            return None;
        }
        self.at_depth.get(&(op, scaled, entry, operand)).copied()
    }

    /// The operand a member compiled for one depth takes (`None`: any).
    pub fn depth_of(&self, stencil: usize) -> Option<u64> {
        self.facts.get(stencil)?.depth
    }

    /// The (entry, exit) state of stencil `stencil`: (0, 0) for an uncached one.
    pub fn states_of(&self, stencil: usize) -> (u8, u8) {
        self.facts
            .get(stencil)
            .and_then(|f| f.states)
            .unwrap_or((0, 0))
    }

    /// Whether `stencil` is a register-cached member (it passes the pinned registers on).
    pub fn is_cached(&self, stencil: usize) -> bool {
        self.facts.get(stencil).is_some_and(|f| f.states.is_some())
    }

    /// The op a cached member runs (none for `SPILL`, `BOX`, `PIN`, `UNPIN`, `LINK`).
    pub fn op_of(&self, stencil: usize) -> Option<u32> {
        self.facts.get(stencil)?.op
    }

    /// The member of op `op` on the local in pinned register `register` (holding it scaled
    /// if `pinned_scaled`), entered in state `entry` with registers scaled or not (as for
    /// [`CachedOps::member_as`]): its stencil and exit state.
    pub fn pinned_member(
        &self,
        op: u32,
        register: usize,
        pinned_scaled: bool,
        entry: u8,
        scaled: bool,
    ) -> Option<(usize, u8)> {
        if !registers_fit(entry, scaled) {
            return None;
        }
        self.pinned.get(op as usize)?.get(register)?[pinned_scaled as usize][scaled as usize]
            [entry as usize]
    }

    /// The pinned register a member on a pinned local runs on.
    pub fn pinned_register_of(&self, stencil: usize) -> Option<usize> {
        self.facts.get(stencil)?.pinned.map(|(r, _)| r)
    }

    /// The pinned register a member on a pinned local runs on, and whether it takes the local
    /// scaled.
    pub fn pinned_register_and_scaled_of(&self, stencil: usize) -> Option<(usize, bool)> {
        self.facts.get(stencil)?.pinned
    }

    /// The stencil that spills every cached value from state `entry`.
    pub fn spill(&self, entry: u8) -> Option<usize> {
        *self.spills.get(entry as usize)?
    }

    /// The stencil that boxes the scaled registers of state `entry`, and its exit state.
    pub fn boxing(&self, entry: u8) -> Option<(usize, u8)> {
        *self.boxes.get(entry as usize)?
    }

    /// The stencil that loads pinned register `register` from its local (scaling it if
    /// `scaled`).
    pub fn pin(&self, register: usize, scaled: bool) -> Option<usize> {
        self.pins.get(register)?[scaled as usize]
    }

    /// The stencil that writes pinned register `register` back to its local (boxing it if
    /// `scaled`).
    pub fn unpin(&self, register: usize, scaled: bool) -> Option<usize> {
        self.unpins.get(register)?[scaled as usize]
    }

    /// The stencil that enters an exit's pinned link slot (its operand) with the pinned
    /// registers live, or goes on if the slot is empty.
    pub fn link(&self) -> Option<usize> {
        self.link
    }

    /// Whether `stencil` is the `LINK` stencil.
    pub fn is_link(&self, stencil: usize) -> bool {
        self.link == Some(stencil)
    }

    /// The pinned register, its local's representation, of a `PIN` stencil.
    pub fn pin_register_of(&self, stencil: usize) -> Option<(usize, bool)> {
        find_register(&self.pins, stencil)
    }

    /// The pinned register, its local's representation, of an `UNPIN` stencil.
    pub fn unpin_register_of(&self, stencil: usize) -> Option<(usize, bool)> {
        find_register(&self.unpins, stencil)
    }
}

/// The op of a family element compiled with its operand `operand` in a pinned register: an
/// error unless the VM runs that op on a pinned local and takes the same operand from the
/// register (the template reads the register for the operand the family names, the
/// lowering for the one [`pinning::pinned_operand`] says: they must be the same).
fn pinned_op(at: &str, element: &str, operand: usize) -> Result<u32, String> {
    let (op, known) = ops::by_name(element)
        .and_then(|op| Some((op, pinning::pinned_operand(op)?)))
        .ok_or_else(|| {
            format!("{at}: element {element} is not a VM op that runs on a pinned local")
        })?;
    if operand != known {
        return Err(format!(
            "{at}: {element} is compiled with its operand {operand} pinned (PINNED_OPERAND), \
             but the VM pins its operand {known} (vm/src/pinning.rs, `pinned_operand`)"
        ));
    }
    Ok(op)
}

fn find_register(table: &[[Option<usize>; 2]; PIN_REGS], stencil: usize) -> Option<(usize, bool)> {
    (0..PIN_REGS).find_map(|r| {
        (0..2)
            .find(|&s| table[r][s] == Some(stencil))
            .map(|s| (r, s == 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_pinning_another_operand_than_the_vm_is_refused() {
        let at = "stencil set t: family f";
        assert_eq!(pinned_op(at, "LOAD", 0), Ok(ops::op::LOAD));
        assert_eq!(
            pinned_op(at, "SETITEM_LOCALS_KNOWN", 1),
            Ok(ops::op::SETITEM_LOCALS_KNOWN)
        );
        let e = pinned_op(at, "GETITEM_LOCALS", 0).unwrap_err();
        assert!(
            e.contains("family f: GETITEM_LOCALS is compiled with its operand 0"),
            "{e}"
        );
        assert!(e.contains("pins its operand 1"), "{e}");
        let e = pinned_op(at, "ADD_INT", 0).unwrap_err();
        assert!(
            e.contains("ADD_INT is not a VM op that runs on a pinned local"),
            "{e}"
        );
    }
}
