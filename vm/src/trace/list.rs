//! List reads typed by their use: an item read whose value the trace then guards an int
//! checks the item itself (`GETITEM_INT_LOCALS_KNOWN`), so that a register-cached member can
//! leave it scaled and the int op after it needs no tag check (`xs[j] > v` in an insertion
//! sort's shift compares the item with a pinned scaled `v` without boxing either), and one
//! guarded a float likewise (`GETITEM_FLOAT_LOCALS_KNOWN`: the tag compared in memory, the
//! item loaded straight into its FP register; nbody.vm's `xs[i] - xs[j]`); and that shift's
//! compare and copy in one op (`COPY_ITEM_TO_NEXT_IF_GT`, [`compare_and_copy`]).

use super::{Projector, Ty};
use crate::abi::Inst;
use crate::ops::op;

/// Whether micro-op `op` pushes one value and cannot leave the trace: what may stand between
/// an item read and the guard of the read's value, so that moving the guard into the read
/// skips no exit.
fn plain_push(op: u32) -> bool {
    matches!(op, op::LOAD | op::LOAD_INT | op::CONST | op::CONST_INT)
}

/// Whether micro-op `op` may stand between a float item's read and its guard: a plain push
/// ([`plain_push`]) or another item read on proved locals, which cannot fail but at its
/// bounds or tag, where it leaves for its own statement (so leaving at the earlier read's
/// instead, before it ran, skips nothing: reads only read). Both operands of
/// `xs[i] - xs[j]` are then checked by their reads.
fn pure_push_before_float_guard(op: u32) -> bool {
    plain_push(op)
        || matches!(
            op,
            op::GETITEM_LOCALS_KNOWN | op::GETITEM_FLOAT_LOCALS_KNOWN
        )
}

/// Takes an int (float) guard of stack slot `depth` into the item read that pushed it, if
/// that read is on a list and an index the trace has proved (`GETITEM_LOCALS_KNOWN`) and
/// only `depth` plain pushes (for a float, also item reads:
/// [`pure_push_before_float_guard`]) follow it: the read then checks the item
/// (`GETITEM_INT_LOCALS_KNOWN`, `GETITEM_FLOAT_LOCALS_KNOWN`), leaving, as for its bounds,
/// where its statement starts, before anything after the read has run. Whether it did (the
/// slot is then of that type).
pub(super) fn typed_item_read(p: &mut Projector<'_>, depth: usize, ty: Ty) -> bool {
    let (typed, between): (u32, fn(u32) -> bool) = match ty {
        Ty::Int => (op::GETITEM_INT_LOCALS_KNOWN, plain_push),
        Ty::Float => (op::GETITEM_FLOAT_LOCALS_KNOWN, pure_push_before_float_guard),
        _ => return false,
    };
    let n = p.uops.len();
    let Some(at) = n.checked_sub(depth + 1).filter(|&at| at >= p.fusion_floor) else {
        return false;
    };
    let read =
        p.uops[at].op == op::GETITEM_LOCALS_KNOWN && p.uops[at + 1..].iter().all(|u| between(u.op));
    let slot = *p.slot(depth);
    if !read || slot.ty != Ty::Unknown || slot.local.is_some() {
        return false;
    }
    p.uops[at].op = typed;
    p.refine(depth, ty);
    true
}

/// `xs[j] > v` then `xs[j + 1] = xs[j]` (an insertion sort's shift): where the copy
/// (`COPY_ITEM_TO_NEXT xs j`, about to be emitted) follows the compare's three micro-ops,
/// `GETITEM_INT_LOCALS_KNOWN xs j; LOAD_INT v; GT_INT_GUARD_TRUE`, the last emitted, they
/// become `LOAD_INT v; COPY_ITEM_TO_NEXT_IF_GT xs j`: one read of the list, its length and
/// the item where the copy read them all again. The fused op leaves through the read's exit
/// (the compare's statement, which the interpreter runs again), the compare's false
/// included: that exit moves from the branch's target to the statement before it, where a
/// side trace records the compare once more. Whether it did (the copy is then emitted).
pub(super) fn compare_and_copy(p: &mut Projector<'_>, list: u64, index: u64) -> bool {
    let n = p.uops.len();
    let Some(at) = n.checked_sub(3).filter(|&at| at >= p.fusion_floor) else {
        return false;
    };
    let [read, load, compare] = [p.uops[at], p.uops[at + 1], p.uops[at + 2]];
    let shape = read.op == op::GETITEM_INT_LOCALS_KNOWN
        && (read.arg0, read.arg1) == (list, index)
        && load.op == op::LOAD_INT
        && compare.op == op::GT_INT_GUARD_TRUE;
    let m = p.exit_uses.len();
    let exits = m >= 2 && p.exit_uses[m - 2].0 == at && p.exit_uses[m - 1].0 == at + 2;
    if !(shape && exits) {
        return false;
    }
    p.exit_uses.pop();
    p.exit_types.pop();
    p.exit_uses[m - 2].0 = at + 1;
    p.uops.truncate(at);
    p.uops.push(load);
    p.uops.push(Inst {
        op: op::COPY_ITEM_TO_NEXT_IF_GT,
        target: 0,
        arg0: list,
        arg1: index,
    });
    true
}

#[cfg(test)]
mod tests {
    use super::super::pass;
    use super::super::testing::{function, names, path, project, projector, records};
    use super::super::Ty;
    use crate::abi::{TYPE_FLOAT, TYPE_INT, TYPE_LIST, TYPE_NONE as N};

    const PROVED: [(&str, Ty); 3] = [("xs", Ty::List), ("j", Ty::Int), ("v", Ty::Int)];

    /// An insertion sort's shift: `if xs[j] CMP v: xs[K + 1] = xs[K]` (pcs 0 to 13, the
    /// branch not taken), the program and its records.
    fn shift(cmp: &str, k: &str) -> (crate::parser::Program, Vec<crate::abi::Record>) {
        let body = format!(
            "  load xs; load j; getitem; load v; {cmp}; jump_if_false out\n\
             \x20 load xs; load {k}; const 1; add; load xs; load {k}; getitem; setitem\nout:"
        );
        let prog = function("xs j v k", &body);
        let rs = records(
            0..14,
            &[
                (2, [TYPE_INT, TYPE_LIST, N]),
                (4, [TYPE_INT, TYPE_INT, N]),
                (9, [TYPE_INT, TYPE_INT, N]),
                (12, [TYPE_INT, TYPE_LIST, N]),
                (13, [N, TYPE_INT, TYPE_LIST]),
            ],
        );
        (prog, rs)
    }

    #[test]
    fn a_shift_compares_and_copies_in_one_op_leaving_at_the_compare() {
        let (prog, rs) = shift("gt", "j");
        let f = &prog.functions[prog.main];
        let mut p = projector(f, &PROVED);
        pass::pass(&mut p, &path(f, &rs)).unwrap();
        assert_eq!(names(&p), ["LOAD_INT", "COPY_ITEM_TO_NEXT_IF_GT"]);
        // One exit, at the compare's statement (not the branch's target, 14, nor the
        // copy's statement, 6), before which nothing was pushed.
        assert_eq!(p.exit_uses, [(1, 0)]);
        assert_eq!(p.exit_types.len(), 1);
        assert_eq!((p.uops[1].arg0, p.uops[1].arg1), (0, 1), "xs and j");
    }

    #[test]
    fn a_shift_keeps_its_ops_where_the_compare_or_the_copy_differs() {
        // Another compare, a copy of another index, or a read not proved.
        for (cmp, k, proved) in [("lt", "j", &PROVED[..]), ("gt", "k", &PROVED[..])] {
            let (prog, rs) = shift(cmp, k);
            let f = &prog.functions[prog.main];
            let mut proved = proved.to_vec();
            proved.push(("k", Ty::Int));
            let ops = project(f, &rs, &proved);
            assert_eq!(ops.last(), Some(&"COPY_ITEM_TO_NEXT"), "{cmp} {k}");
            assert!(ops.contains(&"GETITEM_INT_LOCALS_KNOWN"), "{ops:?}");
        }
        let (prog, rs) = shift("gt", "j");
        let f = &prog.functions[prog.main];
        let ops = project(f, &rs, &[("v", Ty::Int)]);
        assert_eq!(ops[0], "GETITEM_LOCALS");
        assert!(!ops.contains(&"COPY_ITEM_TO_NEXT_IF_GT"), "{ops:?}");
    }

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
        // A float item is checked a float by its read.
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
        assert_eq!(
            ops,
            ["GETITEM_FLOAT_LOCALS_KNOWN", "CONST", "ADD_FLOAT", "POP"]
        );
    }

    #[test]
    fn two_float_items_are_each_checked_by_their_read() {
        // `xs[i] - xs[j]`: the second read stands between the first and the guard.
        let prog = function(
            "xs i j",
            "  load xs; load i; getitem; load xs; load j; getitem; sub; pop",
        );
        let f = &prog.functions[prog.main];
        let item = [TYPE_INT, TYPE_LIST, N];
        let rs = records(
            0..8,
            &[(2, item), (5, item), (6, [TYPE_FLOAT, TYPE_FLOAT, N])],
        );
        let proved = [("xs", Ty::List), ("i", Ty::Int), ("j", Ty::Int)];
        let ops = project(f, &rs, &proved);
        assert_eq!(
            ops,
            [
                "GETITEM_FLOAT_LOCALS_KNOWN",
                "GETITEM_FLOAT_LOCALS_KNOWN",
                "SUB_FLOAT",
                "POP"
            ]
        );
        // An int and a float item: the sub stays generic, neither read is typed.
        let rs = records(
            0..8,
            &[(2, item), (5, item), (6, [TYPE_FLOAT, TYPE_INT, N])],
        );
        let ops = project(f, &rs, &proved);
        assert!(!ops.contains(&"GETITEM_FLOAT_LOCALS_KNOWN"), "{ops:?}");
        // Unproved list and index: the reads check them, a guard the items.
        let ops = project(
            f,
            &records(
                0..8,
                &[(2, item), (5, item), (6, [TYPE_FLOAT, TYPE_FLOAT, N])],
            ),
            &[],
        );
        assert!(ops.contains(&"GUARD_FLOAT_BOTH"), "{ops:?}");
    }
}
