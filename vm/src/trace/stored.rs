//! A value stored into a local and loaded back a few moves later stays on the stack: in
//! `store t; load b; store a; load t` (fib.vm's `t = a + b; a = b; b = t`) the store becomes
//! `DUP; STORE t` and the load goes, so the copy waits under the moves between, which leave
//! the stack as they found it. A local the loop does not pin went through the frame there:
//! box, store, load (forwarded from the store, about five cycles), unbox, on the chain that
//! carries fib's `b` from one iteration to the next, which that round trip made about
//! twice as long as the loop's instructions take to issue.

use super::{Projector, Slot};
use crate::abi::Inst;
use crate::ops::op;

/// The most micro-ops between the store and the load (the moves of a swap or two).
const MAX_BETWEEN: usize = 6;

/// `load local` where a `STORE local` was emitted one to [`MAX_BETWEEN`] micro-ops before
/// (inside the part a fusion may replace), and every micro-op since is a load, or a store
/// into another local, none leaving the trace, together leaving the stack as deep as they
/// found it and never taking from below it: the store becomes `DUP; STORE local` and the
/// top the local's value, as the load would have left it. `false` (nothing touched)
/// otherwise, and inside a statement whose exits resume at its start (see
/// [`super::reuse::load_of_stored_float`]).
pub(super) fn load_of_stored(p: &mut Projector<'_>, local: u64) -> bool {
    if p.statement_exits {
        return false;
    }
    let Some(store_at) = store_before_moves(&p.uops[p.fusion_floor.min(p.uops.len())..], local)
        .map(|k| p.fusion_floor + k)
    else {
        return false;
    };
    // No exit leaves from the micro-ops after the store (checked), so no exit use moves; a
    // constant is not among them either, but an index at or past the store would move.
    debug_assert!(p.exit_uses.iter().all(|&(at, _)| at < store_at));
    if p.last_const.is_some_and(|(at, _)| at >= store_at) {
        return false;
    }
    p.uops.insert(
        store_at,
        Inst {
            op: op::DUP,
            target: 0,
            arg0: 0,
            arg1: 0,
        },
    );
    let ty = p.locals[local as usize];
    p.stack.push(Slot::of_local(ty, local));
    true
}

/// Where in `uops` the `STORE local` is that only stack-neutral moves follow (see
/// [`load_of_stored`]).
fn store_before_moves(uops: &[Inst], local: u64) -> Option<usize> {
    let first = uops.len().saturating_sub(MAX_BETWEEN + 1);
    let at = (first..uops.len())
        .rev()
        .find(|&k| uops[k].op == op::STORE && uops[k].arg0 == local)?;
    // Depth relative to the store's: a load pushes, a store into another local pops.
    let mut depth = 0i32;
    for u in &uops[at + 1..] {
        match u.op {
            op::LOAD | op::LOAD_INT => depth += 1,
            op::STORE if u.arg0 != local && depth > 0 => depth -= 1,
            _ => return None,
        }
    }
    // Straight back (nothing between) is super::reuse's, for floats only.
    (depth == 0 && at + 1 < uops.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, project, records};
    use super::super::Ty;
    use super::store_before_moves;
    use crate::abi::{Inst, TYPE_INT, TYPE_NONE};
    use crate::ops::op;

    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, TYPE_NONE];

    fn uop(op: u32, arg0: u64) -> Inst {
        Inst {
            op,
            target: 0,
            arg0,
            arg1: 0,
        }
    }

    #[test]
    fn a_swap_through_a_temporary_keeps_the_temporary_on_the_stack() {
        // t = a + b; a = b; b = t, on ints.
        let prog = function(
            "a b t",
            "  load a; load b; add; store t; load b; store a; load t; store b",
        );
        let f = &prog.functions[prog.main];
        let ops = project(
            f,
            &records(0..8, &[(2, INTS)]),
            &[("a", Ty::Int), ("b", Ty::Int)],
        );
        assert_eq!(
            ops,
            ["LOAD_INT", "LOAD_INT", "ADD_INT", "DUP", "STORE", "LOAD_INT", "STORE", "STORE"]
        );
    }

    #[test]
    fn an_int_stored_and_loaded_straight_back_is_loaded_as_before() {
        // (A float is kept: super::reuse.)
        let prog = function("a x", "  load a; store x; load x; store a");
        let f = &prog.functions[prog.main];
        let ops = project(f, &records(0..4, &[]), &[("a", Ty::Int)]);
        assert_eq!(ops, ["LOAD_INT", "STORE", "LOAD_INT", "STORE"]);
    }

    #[test]
    fn only_moves_that_leave_the_stack_as_they_found_it_may_come_between() {
        let (t, a, b) = (2, 0, 1);
        let store_t = uop(op::STORE, t);
        let swap = [store_t, uop(op::LOAD_INT, b), uop(op::STORE, a)];
        assert_eq!(store_before_moves(&swap, t), Some(0));
        // The last store into the local is the one the load reads: straight back, nothing
        // to keep.
        let again = [store_t, uop(op::LOAD_INT, b), uop(op::STORE, t)];
        assert_eq!(store_before_moves(&again, t), None);
        assert_eq!(store_before_moves(&swap, b), None, "no store into b");
        // A store taking from below, an op that is not a move, a push left on the stack,
        // a store too far back: the load stays.
        let pair = [uop(op::LOAD_INT, b), uop(op::STORE, a)];
        let far: Vec<Inst> = std::iter::once(store_t)
            .chain(pair.iter().copied().cycle().take(8))
            .collect();
        let cases: [&[Inst]; 4] = [
            &[store_t, uop(op::STORE, a), uop(op::LOAD_INT, b)],
            &[
                store_t,
                uop(op::LOAD_INT, b),
                uop(op::GUARD_INT_TOS, 0),
                uop(op::STORE, a),
            ],
            &[store_t, uop(op::LOAD_INT, b)],
            &far,
        ];
        for uops in cases {
            assert_eq!(store_before_moves(uops, t), None, "{uops:?}");
        }
    }
}
