//! `xs[i] = xs[i] + e` (or `- e`) on floats in one op. Where an item store's expression is
//! the item it stores into, read on the list and index the trace proved
//! (`GETITEM_LOCALS_KNOWN xs i`, or `GETITEM_FLOAT_LOCALS_KNOWN`, which checked the item),
//! then e, a pure expression proved a float, then the item's float guard (none after a read
//! that checked it) and `ADD_FLOAT` (`SUB_FLOAT`), those micro-ops become e's alone and the
//! store `ADD_FLOAT_TO_ITEM xs i` (`SUB_FLOAT_FROM_ITEM`), which reads the list, its length,
//! the index and the item once and checks the item a float where it loads it. nbody.vm's six velocity
//! updates in its inner loop were 23 x86-64 instructions each past e (an item read of 9, a
//! guard of 4 moving the item out of its FP register, the sub, a store of 9), now 13.

use super::idioms::ItemStore;
use super::Projector;
use crate::ops::{self, op};

/// The op storing `s`: the fused one where [`float_update`] fuses, else `SETITEM_LOCALS`,
/// `_NEXT` for `xs[i + 1]`, each `_KNOWN` where the list and the index are proved (`known`).
pub(super) fn store_op(p: &mut Projector<'_>, s: ItemStore, known: bool) -> u32 {
    float_update(p, s, known).unwrap_or(match (s.next, known) {
        (false, false) => op::SETITEM_LOCALS,
        (false, true) => op::SETITEM_LOCALS_KNOWN,
        (true, false) => op::SETITEM_LOCALS_NEXT,
        (true, true) => op::SETITEM_LOCALS_NEXT_KNOWN,
    })
}

/// The op storing `s` (`xs[i] = e'`, not `xs[i + 1]`), if e' is `xs[i] + e` or `xs[i] - e` as
/// above (the micro-ops it emitted, the last ones): they are then rewritten to e's alone (the
/// read, the guard and the add or sub removed, with their exits) and the fused op is
/// returned. `known`: the list and the index are proved (the plain store would be
/// `SETITEM_LOCALS_KNOWN`).
fn float_update(p: &mut Projector<'_>, s: ItemStore, known: bool) -> Option<u32> {
    let n = p.uops.len();
    if s.next || !known || n < p.fusion_floor + 3 {
        return None;
    }
    let update = match p.uops[n - 1].op {
        op::ADD_FLOAT => op::ADD_FLOAT_TO_ITEM,
        op::SUB_FLOAT => op::SUB_FLOAT_FROM_ITEM,
        _ => return None,
    };
    // The item's guard alone (e was proved a float before: the fused op checks the item
    // only), or none where the read checked the item (a guard of e's stays where it is).
    let guard = (p.uops[n - 2].op == op::GUARD_FLOAT_NOS).then_some(n - 2);
    let read = pusher_of(p, guard.unwrap_or(n - 1), 1)?;
    let r = p.uops[read];
    let read_op = match guard {
        Some(_) => op::GETITEM_LOCALS_KNOWN,
        None => op::GETITEM_FLOAT_LOCALS_KNOWN,
    };
    if r.op != read_op || (r.arg0, r.arg1) != (s.list, s.index) {
        return None;
    }
    match guard {
        Some(g) => remove_uops(p, &[n - 1, g, read]),
        None => remove_uops(p, &[n - 1, read]),
    }
    Some(update)
}

/// The micro-op before `end` (from the fusion floor on) that pushed the value `depth` below
/// the top where `end` starts, if it pushes that one value only and popped nothing (a load
/// or an item read), and no micro-op between it and `end` pops it.
fn pusher_of(p: &Projector<'_>, end: usize, depth: usize) -> Option<usize> {
    let mut want = depth;
    for k in (p.fusion_floor..end).rev() {
        let u = p.uops[k];
        let info = ops::info(u.op);
        let pop = info.pop.count([u.arg0, u.arg1]) as usize;
        let push = info.push.count([u.arg0, u.arg1]) as usize;
        if want < push {
            // Micro-op k left the value there (a guard pops and pushes it again).
            return (want == 0 && pop == 0 && push == 1).then_some(k);
        }
        want = want - push + pop;
    }
    None
}

/// Removes micro-ops `gone` (in decreasing order) and their exits, renumbering the exits and
/// the last constant after them.
fn remove_uops(p: &mut Projector<'_>, gone: &[usize]) {
    for &at in gone {
        debug_assert!(gone.iter().filter(|&&g| g == at).count() == 1);
        p.uops.remove(at);
        let mut k = 0;
        while k < p.exit_uses.len() {
            if p.exit_uses[k].0 == at {
                p.exit_uses.remove(k);
                p.exit_types.remove(k);
                continue;
            }
            if p.exit_uses[k].0 > at {
                p.exit_uses[k].0 -= 1;
            }
            k += 1;
        }
        p.last_const = match p.last_const {
            Some((c, _)) if c == at => None,
            Some((c, pc)) if c > at => Some((c - 1, pc)),
            other => other,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::pass;
    use super::super::testing::{function, names, path, projector, records};
    use super::super::Ty;
    use crate::abi::{Record, TYPE_FLOAT, TYPE_INT, TYPE_LIST, TYPE_NONE as N};

    const FLOATS: [u8; 3] = [TYPE_FLOAT, TYPE_FLOAT, N];
    const ITEM: [u8; 3] = [TYPE_INT, TYPE_LIST, N];
    const STORE: [u8; 3] = [TYPE_FLOAT, TYPE_INT, TYPE_LIST];
    const PROVED: [(&str, Ty); 5] = [
        ("xs", Ty::List),
        ("i", Ty::Int),
        ("j", Ty::Int),
        ("a", Ty::Float),
        ("b", Ty::Float),
    ];

    /// The statement `xs[K] = LEFT OP RIGHT`, each operand `xs[k]` (an index local k: `load
    /// xs; load k; getitem`) or `a * b` (`load a; load b; mul`), recorded on a list, ints and
    /// floats: its text and records.
    fn statement(k: &str, left: &str, arith: &str, right: &str) -> (String, Vec<Record>) {
        let operand = |o: &str| match o {
            "ab" => "load a; load b; mul".to_string(),
            index => format!("load xs; load {index}; getitem"),
        };
        let body = format!(
            "  load xs; load {k}; {}; {}; {arith}; setitem",
            operand(left),
            operand(right)
        );
        // Both operands take three bytecodes: the getitem or mul at pcs 4 and 7.
        let typed = |o: &str| if o == "ab" { FLOATS } else { ITEM };
        let types = [(4, typed(left)), (7, typed(right)), (8, FLOATS), (9, STORE)];
        (body, records(0..10, &types))
    }

    /// Projects `body` over `rs` from the types in `proved`: the micro-ops by name, the
    /// exits (index, pc) and how many locals' types the exits keep.
    fn project(
        body: &str,
        rs: &[Record],
        proved: &[(&str, Ty)],
    ) -> (Vec<&'static str>, Vec<(usize, u32)>, usize) {
        let prog = function("xs i j a b c", body);
        let f = &prog.functions[prog.main];
        let mut p = projector(f, proved);
        pass::pass(&mut p, &path(f, rs)).expect("projects");
        (names(&p), p.exit_uses.clone(), p.exit_types.len())
    }

    #[test]
    fn an_item_updated_by_a_float_is_read_checked_and_stored_by_one_op() {
        for (arith, fused) in [("sub", "SUB_FLOAT_FROM_ITEM"), ("add", "ADD_FLOAT_TO_ITEM")] {
            let (body, rs) = statement("i", "i", arith, "ab");
            let (ops, exits, types) = project(&body, &rs, &PROVED);
            assert_eq!(ops, ["LOAD", "MUL_FLOAT_LOCAL", fused], "{arith}");
            // The fused op's exit, at the statement (pc 0), is the only one left.
            assert_eq!(exits, [(2, 0)], "{arith}");
            assert_eq!(types, 1);
        }
    }

    #[test]
    fn an_update_of_another_item_or_of_unproved_values_keeps_its_ops() {
        let stored = |ops: &[&str], store: &str| {
            assert_eq!(ops.last(), Some(&store), "{ops:?}");
            assert!(!ops.iter().any(|o| o.ends_with("_ITEM")), "{ops:?}");
        };
        // Another item read than the one stored into.
        let (body, rs) = statement("i", "j", "sub", "ab");
        let (ops, exits, types) = project(&body, &rs, &PROVED);
        stored(&ops, "SETITEM_LOCALS_KNOWN");
        assert!(ops.contains(&"GETITEM_LOCALS_KNOWN"), "{ops:?}");
        assert_eq!(exits.len(), types);
        // The item on the right: `a * b - xs[i]` is not `xs[i] - e`.
        let (body, rs) = statement("i", "ab", "sub", "i");
        stored(&project(&body, &rs, &PROVED).0, "SETITEM_LOCALS_KNOWN");
        // An item of an unproved list and index: the read checks them (and proves them for
        // the store), the fused op would not.
        let (body, rs) = statement("i", "i", "sub", "ab");
        let (ops, _, _) = project(&body, &rs, &PROVED[2..]);
        stored(&ops, "SETITEM_LOCALS_KNOWN");
        assert_eq!(ops[0], "GETITEM_LOCALS");
    }

    #[test]
    fn an_item_its_read_checked_a_float_is_updated_by_one_op_too() {
        // `xs[i] = xs[i] + xs[j]`: both reads check their items, no guard is left.
        let (body, rs) = statement("i", "i", "add", "j");
        let (ops, exits, types) = project(&body, &rs, &PROVED);
        assert_eq!(
            ops,
            ["GETITEM_FLOAT_LOCALS_KNOWN", "ADD_FLOAT_TO_ITEM"],
            "xs[j] is read, then xs[i] updated"
        );
        assert_eq!(exits, [(0, 0), (1, 0)]);
        assert_eq!(types, 2);
        // e an unproved local: its guard stays, before the update.
        let body = "  load xs; load i; load xs; load i; getitem; load c; add; setitem";
        let rs = records(0..8, &[(4, ITEM), (6, FLOATS), (7, STORE)]);
        let (ops, exits, _) = project(body, &rs, &PROVED);
        assert_eq!(ops, ["LOAD", "GUARD_FLOAT_TOS", "ADD_FLOAT_TO_ITEM"]);
        assert_eq!(exits, [(1, 0), (2, 0)]);
    }
}
