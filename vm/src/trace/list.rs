//! List reads typed by their use: an item read whose value the trace then guards an int
//! checks the item itself (`GETITEM_INT_LOCALS_KNOWN`), so that a register-cached member can
//! leave it scaled and the int op after it needs no tag check (`xs[j] > v` in an insertion
//! sort's shift compares the item with a pinned scaled `v` without boxing either).

use super::{Projector, Ty};
use crate::ops::op;

/// Whether micro-op `op` pushes one value and cannot leave the trace: what may stand between
/// an item read and the guard of the read's value, so that moving the guard into the read
/// skips no exit.
fn plain_push(op: u32) -> bool {
    matches!(op, op::LOAD | op::LOAD_INT | op::CONST | op::CONST_INT)
}

/// Takes an int guard of stack slot `depth` into the item read that pushed it, if that read
/// is on a list and an index the trace has proved (`GETITEM_LOCALS_KNOWN`) and only
/// `depth` plain pushes follow it: the read then checks the item
/// (`GETITEM_INT_LOCALS_KNOWN`), leaving, as for its bounds, where its statement starts,
/// before anything after the read has run. Whether it did (the slot is then an int).
pub(super) fn typed_item_read(p: &mut Projector<'_>, depth: usize) -> bool {
    let n = p.uops.len();
    let Some(at) = n.checked_sub(depth + 1).filter(|&at| at >= p.fusion_floor) else {
        return false;
    };
    let read = p.uops[at].op == op::GETITEM_LOCALS_KNOWN
        && p.uops[at + 1..].iter().all(|u| plain_push(u.op));
    let slot = *p.slot(depth);
    if !read || slot.ty != Ty::Unknown || slot.local.is_some() {
        return false;
    }
    p.uops[at].op = op::GETITEM_INT_LOCALS_KNOWN;
    p.refine(depth, Ty::Int);
    true
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, project, records};
    use super::super::Ty;
    use crate::abi::{TYPE_FLOAT, TYPE_INT, TYPE_LIST, TYPE_NONE as N};

    const PROVED: [(&str, Ty); 3] = [("xs", Ty::List), ("j", Ty::Int), ("v", Ty::Int)];

    #[test]
    fn an_item_compared_as_an_int_is_checked_by_its_read() {
        let prog = function("xs j v", "  load xs; load j; getitem; load v; gt; pop");
        let f = &prog.functions[prog.main];
        let rs = records(
            0..6,
            &[(2, [TYPE_INT, TYPE_LIST, N]), (4, [TYPE_INT, TYPE_INT, N])],
        );
        let ops = project(f, &rs, &PROVED);
        assert_eq!(
            ops,
            ["GETITEM_INT_LOCALS_KNOWN", "LOAD_INT", "GT_INT", "POP"]
        );
        // On the top of the stack (`v < xs[j]`) as below it.
        let prog = function("xs j v", "  load v; load xs; load j; getitem; lt; pop");
        let f = &prog.functions[prog.main];
        let rs = records(
            0..6,
            &[(3, [TYPE_INT, TYPE_LIST, N]), (4, [TYPE_INT, TYPE_INT, N])],
        );
        let ops = project(f, &rs, &PROVED);
        assert_eq!(
            ops,
            ["LOAD_INT", "GETITEM_INT_LOCALS_KNOWN", "LT_INT", "POP"]
        );
    }

    #[test]
    fn an_item_read_keeps_its_guard_where_moving_it_could_skip_an_exit_or_a_check() {
        // Unproved list and index: the read checks them, the guard the item.
        let prog = function("xs j v", "  load xs; load j; getitem; load v; gt; pop");
        let f = &prog.functions[prog.main];
        let rs = records(
            0..6,
            &[(2, [TYPE_INT, TYPE_LIST, N]), (4, [TYPE_INT, TYPE_INT, N])],
        );
        let ops = project(f, &rs, &[("v", Ty::Int)]);
        assert_eq!(
            ops,
            [
                "GETITEM_LOCALS",
                "LOAD_INT",
                "GUARD_INT_NOS",
                "GT_INT",
                "POP"
            ]
        );
        // An add (which may leave the trace) between the read and the compare.
        let prog = function(
            "xs j v w",
            "  load xs; load j; getitem; load v; load w; add; gt; pop",
        );
        let f = &prog.functions[prog.main];
        let rs = records(
            0..8,
            &[
                (2, [TYPE_INT, TYPE_LIST, N]),
                (5, [TYPE_INT, TYPE_INT, N]),
                (6, [TYPE_INT, TYPE_INT, N]),
            ],
        );
        let ops = project(f, &rs, &[PROVED[0], PROVED[1], PROVED[2], ("w", Ty::Int)]);
        assert_eq!(
            ops,
            [
                "GETITEM_LOCALS_KNOWN",
                "LOAD_INT",
                "LOAD_INT",
                "ADD_INT",
                "GUARD_INT_NOS",
                "GT_INT",
                "POP"
            ]
        );
        // A float item keeps the read untyped.
        let prog = function("xs j", "  load xs; load j; getitem; const 1.5; add; pop");
        let f = &prog.functions[prog.main];
        let rs = records(
            0..6,
            &[
                (2, [TYPE_INT, TYPE_LIST, N]),
                (4, [TYPE_FLOAT, TYPE_FLOAT, N]),
            ],
        );
        let ops = project(f, &rs, &PROVED[..2]);
        assert_eq!(ops[0], "GETITEM_LOCALS_KNOWN");
    }
}
