//! Recognisers of the statements a `load` may start, tried in order by [`super::pass`]:
//! each looks at the recorded path from the `load` on and at the types the projector has
//! proved, and either emits its micro-ops (returning how many records it consumed) or
//! declines without touching the projector.
//!
//! - `i = i + c`: [`increment_local`] (`INCREMENT_LOCAL_INT`)
//! - `s = s + e`, e pure: [`accumulation_statement`], closed by [`close_accumulation`]
//!   (`ADD_TO_LOCAL_INT`, every exit of e resuming at the statement); on float locals also
//!   `s = s * e` (`ADD_FLOAT_LOCAL` or `MUL_FLOAT_LOCAL`, then `STORE`)
//! - `xs[i] = e` and `xs[i + 1] = e`, e pure: [`item_store_statement`], closed by
//!   [`close_item_store`] (`SETITEM_LOCALS`, `SETITEM_LOCALS_NEXT`)
//! - `s = t + s` on int locals: [`add_local_to_local`] (`LOAD_INT; ADD_TO_LOCAL_INT`)
//! - `load xs; load i; getitem`: [`item_load`] (`GETITEM_LOCALS`)
//!
//! and otherwise [`plain_load`].

use super::{Path, Projector, Slot, Ty};
use crate::abi::{Inst, Record, TYPE_FLOAT, TYPE_INT, TYPE_LIST};
use crate::ops::{self, op};
use crate::value::Value;

/// What a recogniser recognised: how many records it consumed, and the statement it opened
/// (whose end a later record closes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Recognised {
    pub records: usize,
    pub opens: Option<Statement>,
}

impl Recognised {
    /// `records` records consumed, nothing left open.
    fn consumed(records: usize) -> Recognised {
        Recognised {
            records,
            opens: None,
        }
    }
}

/// A statement whose expression is being projected with every exit resuming at its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Statement {
    /// `s = s + e`: s, the statement's pc, the add's pc, the micro-op that adds into s
    /// ([`Accumulation`]).
    Accumulation {
        local: u64,
        start: u32,
        add_at: u32,
        adds: u32,
    },
    /// `xs[i] = e` or `xs[i + 1] = e`.
    ItemStore(ItemStore),
}

/// `xs[i] = e`: xs, i, the statement's pc, the setitem's pc; `next`: `xs[i + 1] = e`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ItemStore {
    pub list: u64,
    pub index: u64,
    pub start: u32,
    pub setitem_at: u32,
    pub next: bool,
}

/// A recogniser of a statement starting with the `load` at record `i`.
pub(super) type LoadRecogniser = fn(&mut Projector<'_>, &Path<'_>, usize) -> Option<Recognised>;

/// The recognisers, in the order they are tried (the first that recognises wins).
pub(super) const LOAD_RECOGNISERS: [LoadRecogniser; 5] = [
    increment_local,
    accumulation_statement,
    item_store_statement,
    add_local_to_local,
    item_load,
];

/// Whether the records after `i` (`count` of them) follow it at consecutive pcs.
fn consecutive(path: &Path<'_>, i: usize, count: usize) -> bool {
    let pc = path.pc(i);
    path.records.get(i + 1..i + 1 + count).is_some_and(|rs| {
        rs.iter()
            .enumerate()
            .all(|(k, r)| r.pc as u32 == pc + 1 + k as u32)
    })
}

/// The pc of record `i` and the code, when the three records after it follow it at
/// consecutive pcs (a four-bytecode statement such as `load; const; add; store`).
fn statement_of_four<'a>(path: &Path<'a>, i: usize) -> Option<(usize, &'a [Inst])> {
    consecutive(path, i, 3).then(|| (path.pc(i) as usize, path.code))
}

/// `i = i + c` (or `i = i - c`, as `i + (-c)`) with an int constant: one micro-op updating
/// the local in place.
pub(super) fn increment_local(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
) -> Option<Recognised> {
    let (pc, code) = statement_of_four(path, i)?;
    let local = code[pc].arg0;
    let c = increment_constant(code[pc + 1], code[pc + 2].op)?;
    let pattern = code[pc + 3].op == op::STORE
        && code[pc + 3].arg0 == local
        && path.records[i + 2].types[1] == TYPE_INT;
    if !pattern {
        return None;
    }
    // The tag check is left out where the trace has proved the local an int; the constant
    // is passed scaled (`OperandKind::ScaledInt`).
    let known = p.locals[local as usize] == Ty::Int;
    p.emit_exiting(
        if known {
            op::INCREMENT_LOCAL_INT_KNOWN
        } else {
            op::INCREMENT_LOCAL_INT
        },
        local,
        (c << 16) as u64,
        pc as u32,
    );
    p.store_local(local, Ty::Int);
    Some(Recognised::consumed(4))
}

/// The increment of `const c; add` (c) or `const c; sub` (-c) when c is an int whose
/// negation is one too (the tagged range is not symmetric: -(-2**47) is not).
fn increment_constant(c: Inst, arith: u32) -> Option<i64> {
    let c = (c.op == op::CONST).then(|| Value(c.arg0).as_int())??;
    let c = match arith {
        op::ADD => c,
        op::SUB => -c,
        _ => return None,
    };
    Value::int(c).map(|_| c)
}

/// Opens a statement at `pc`: every exit until it closes resumes there, with the value
/// stack cut back to its depth.
fn open_statement(p: &mut Projector<'_>, pc: u32) {
    let depth = p.func.depths.get(pc as usize).copied().unwrap_or(0);
    p.inline_exits.insert(pc, depth);
    p.inlined_at = Some(pc);
    p.statement_exits = true;
}

/// Closes the statement opened by [`open_statement`].
fn close_statement(p: &mut Projector<'_>) {
    p.inlined_at = None;
    p.statement_exits = false;
}

/// `s = s + e` for a pure expression e (see [`accumulation`]): e is projected as usual but
/// every exit in it resumes here, then one micro-op adds its value into s in place
/// ([`close_accumulation`]). Consumes the `load s`, which pushes nothing.
pub(super) fn accumulation_statement(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
) -> Option<Recognised> {
    let inlinable = |f: u64| p.inlinable(f).is_some();
    let (add_at, adds) = accumulation(path.code, path.records, i, &p.locals, inlinable)?;
    let pc = path.pc(i);
    open_statement(p, pc);
    Some(Recognised {
        records: 1,
        opens: Some(Statement::Accumulation {
            local: path.code[pc as usize].arg0,
            start: pc,
            add_at,
            adds,
        }),
    })
}

/// The `add; store s` closing an [`accumulation_statement`], at its add: e's value is on
/// the stack; s was never pushed. An int add (`ADD_TO_LOCAL_INT`) leaves where the
/// statement starts, with e's value dropped again; a float one (`adds` is
/// `ADD_FLOAT_LOCAL` or `MUL_FLOAT_LOCAL`) cannot fail and reads s where it lives, then
/// `STORE` puts the result there. (A guard on a local's value proves the local too, so a
/// peeled body needs none.) Consumes the add and the store.
pub(super) fn close_accumulation(
    p: &mut Projector<'_>,
    local: u64,
    start: u32,
    adds: u32,
) -> usize {
    if adds == op::ADD_TO_LOCAL_INT {
        p.guard(start, &[(0, Ty::Int)]);
        p.emit_exiting(op::ADD_TO_LOCAL_INT, local, 0, start);
        p.pop();
        p.store_local(local, Ty::Int);
    } else {
        p.guard(start, &[(0, Ty::Float)]);
        p.emit(adds, local, 0);
        p.emit(op::STORE, local, 0);
        p.pop();
        p.store_local(local, Ty::Float);
    }
    close_statement(p);
    2
}

/// `xs[i] = e` (or `xs[i + 1] = e`) for a pure expression e (see [`item_store`]): like
/// [`accumulation_statement`], then one micro-op stores e's value into the item
/// ([`close_item_store`]). Consumes `load xs; load i` (and `const 1; add`), which push
/// nothing.
pub(super) fn item_store_statement(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
) -> Option<Recognised> {
    let inlinable = |f: u64| p.inlinable(f).is_some();
    let (setitem_at, next) = item_store(path.code, path.records, i, inlinable)?;
    let pc = path.pc(i);
    open_statement(p, pc);
    Some(Recognised {
        records: if next { 4 } else { 2 },
        opens: Some(Statement::ItemStore(ItemStore {
            list: path.code[pc as usize].arg0,
            index: path.code[pc as usize + 1].arg0,
            start: pc,
            setitem_at,
            next,
        })),
    })
}

/// The `setitem` closing an [`item_store_statement`]: e's value is on the stack; xs and i
/// were never pushed. A failed check leaves where the statement starts, with e's value
/// dropped again. Consumes the setitem.
pub(super) fn close_item_store(p: &mut Projector<'_>, s: ItemStore) -> usize {
    let ItemStore {
        list, index, start, ..
    } = s;
    let known = p.locals[list as usize] == Ty::List && p.locals[index as usize] == Ty::Int;
    let store = if copies_to_next(p, s) {
        // e's read is dropped: the copy reads the item itself (the stack model still has
        // e's value, which the store pops below).
        p.uops.pop();
        p.exit_uses.pop();
        p.exit_types.pop();
        // After `xs[i] > v`'s branch, the compare takes the copy in (and its exit).
        (!super::list::compare_and_copy(p, list, index)).then_some(op::COPY_ITEM_TO_NEXT)
    } else {
        Some(super::item_update::store_op(p, s, known))
    };
    if let Some(store) = store {
        p.emit_exiting(store, list, index, start);
    }
    p.pop();
    p.locals[list as usize] = Ty::List;
    p.locals[index as usize] = Ty::Int;
    close_statement(p);
    1
}

/// Whether the statement `s` is `xs[i + 1] = xs[i]` (`load xs; load i; const 1; add; load
/// xs; load i; getitem; setitem`) whose e is the one micro-op `GETITEM_LOCALS_KNOWN xs i`,
/// the last emitted (its exit the last, at the statement): [`close_item_store`] replaces
/// both with `COPY_ITEM_TO_NEXT`.
fn copies_to_next(p: &Projector<'_>, s: ItemStore) -> bool {
    let n = p.uops.len();
    let read = |u: &Inst| u.op == op::GETITEM_LOCALS_KNOWN && u.arg0 == s.list && u.arg1 == s.index;
    s.next
        && s.setitem_at == s.start + 7
        && p.uops.last().is_some_and(read)
        && p.exit_uses.last().is_some_and(|&(at, _)| at + 1 == n)
}

/// `s = t + s` on locals proved ints: push t, then the same in-place add as
/// [`close_accumulation`], which leaves at this `load` if the sum overflows.
pub(super) fn add_local_to_local(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
) -> Option<Recognised> {
    let (pc, code) = statement_of_four(path, i)?;
    let (second, add, store) = (code[pc + 1], code[pc + 2], code[pc + 3]);
    let (addend, target) = (code[pc].arg0, second.arg0);
    let int = |l: u64| p.locals[l as usize] == Ty::Int;
    let shape = second.op == op::LOAD
        && add.op == op::ADD
        && store.op == op::STORE
        && int(addend)
        && int(target);
    if !(shape && store.arg0 == target && addend != target) {
        return None;
    }
    // The addend is pushed for the add alone: the exit resumes before it, so the model's
    // stack does not hold it.
    p.emit(op::LOAD_INT, addend, 0);
    p.emit_exiting(op::ADD_TO_LOCAL_INT, target, 0, pc as u32);
    p.store_local(target, Ty::Int);
    Some(Recognised::consumed(4))
}

/// `load list; load index; getitem` on a list and an int: one micro-op.
pub(super) fn item_load(p: &mut Projector<'_>, path: &Path<'_>, i: usize) -> Option<Recognised> {
    let (pc, code) = (path.pc(i) as usize, path.code);
    let item = path.records.get(i + 1..i + 3).is_some_and(|rs| {
        rs[0].pc as usize == pc + 1
            && rs[1].pc as usize == pc + 2
            && code[pc + 1].op == op::LOAD
            && code[pc + 2].op == op::GETITEM
            && rs[1].types[1] == TYPE_LIST
            && rs[1].types[0] == TYPE_INT
    });
    if !item {
        return None;
    }
    let (list, index) = (code[pc].arg0, code[pc + 1].arg0);
    // The type checks are left out where the trace has proved both.
    let known = p.locals[list as usize] == Ty::List && p.locals[index as usize] == Ty::Int;
    p.emit_exiting(
        if known {
            op::GETITEM_LOCALS_KNOWN
        } else {
            op::GETITEM_LOCALS
        },
        list,
        index,
        pc as u32,
    );
    p.locals[list as usize] = Ty::List;
    p.locals[index as usize] = Ty::Int;
    p.push(Ty::Unknown);
    Some(Recognised::consumed(3))
}

/// A `load` no recogniser took. A local the trace has proved an int is loaded by
/// `LOAD_INT`, which a run of scaled ints can push without a tag check (vm/src/jit.rs); a
/// value just stored there is copied instead ([`super::reuse`], [`super::stored`]).
pub(super) fn plain_load(p: &mut Projector<'_>, local: u64) {
    if super::reuse::load_of_stored_float(p, local) || super::stored::load_of_stored(p, local) {
        return;
    }
    let ty = p.locals[local as usize];
    p.emit(
        if ty == Ty::Int {
            op::LOAD_INT
        } else {
            op::LOAD
        },
        local,
        0,
    );
    p.stack.push(Slot::of_local(ty, local));
}

/// Whether the recording at `i` (a `load s`) is the statement `s = s + e` with `e` a pure
/// expression ([`pure_expression`]) followed by `add; store s`, where s is proved an int and
/// both of the add's operands were ints when recorded, or `add` or `mul` with s proved a
/// float and both operands floats. Running e again from the statement's start is then
/// indistinguishable from resuming it in the middle, so every exit in it (and the int add's
/// overflow) resumes at the `load`, with the stack cut back to where it was. The pc of the
/// `add` and the micro-op adding into s: `ADD_TO_LOCAL_INT`, or for floats `ADD_FLOAT_LOCAL`
/// (`MUL_FLOAT_LOCAL`), which computes e + s where the program says s + e: IEEE 754's sum
/// and product are commutative, and a NaN, whichever payload it keeps, prints as `nan`.
/// On floats it is what keeps a loop-carried sum off the value stack, where e's values would
/// push it into memory: `integrate.vm`'s `s = s + f(x)` spilled s and reloaded it every
/// iteration.
fn accumulation(
    code: &[Inst],
    records: &[Record],
    i: usize,
    locals: &[Ty],
    inlinable: impl Fn(u64) -> bool,
) -> Option<(u32, u32)> {
    let start = records[i].pc as usize;
    let local = code[start].arg0;
    let (ty, recorded) = match locals.get(local as usize) {
        Some(Ty::Int) => (Ty::Int, TYPE_INT),
        Some(Ty::Float) => (Ty::Float, TYPE_FLOAT),
        _ => return None,
    };
    pure_expression(code, records, i, i + 1, inlinable, |k, rec, inst| {
        let adds = match (ty, inst.op) {
            (Ty::Int, op::ADD) => op::ADD_TO_LOCAL_INT,
            (Ty::Float, op::ADD) => op::ADD_FLOAT_LOCAL,
            (Ty::Float, op::MUL) => op::MUL_FLOAT_LOCAL,
            _ => return None,
        };
        let add_store = code
            .get(rec.pc as usize + 1)
            .is_some_and(|s| s.op == op::STORE && s.arg0 == local)
            && records.get(k + 1).is_some_and(|r| r.pc == rec.pc + 1);
        add_store.then(|| {
            let typed = rec.types[0] == recorded && rec.types[1] == recorded;
            (typed && k > i + 1).then_some((rec.pc as u32, adds))
        })
    })
}

/// The pc of the `setitem`, and whether the index is `i + 1`, if the recording at `i` (a
/// `load xs`) is the statement `xs[i] = e`: `load xs; load i` (or `load xs; load i; const 1;
/// add`, recorded on ints), then a pure expression e as [`accumulation`] takes them, then
/// `setitem`, recorded on a list and an int. Its value is stored by one micro-op reading xs
/// and i from the frame (or i from a pinned register), and every exit in e, or the store's
/// own, resumes at the `load xs` (e runs again; it only reads).
fn item_store(
    code: &[Inst],
    records: &[Record],
    i: usize,
    inlinable: impl Fn(u64) -> bool,
) -> Option<(u32, bool)> {
    let start = records[i].pc as usize;
    let index_load = records.get(i + 1)?;
    if index_load.pc as usize != start + 1 || code.get(start + 1)?.op != op::LOAD {
        return None;
    }
    let next = next_index(code, records, i);
    let first = if next { i + 4 } else { i + 2 };
    let setitem_at = pure_expression(code, records, i, first, inlinable, |k, rec, inst| {
        (inst.op == op::SETITEM).then(|| {
            let typed = rec.types[2] == TYPE_LIST && rec.types[1] == TYPE_INT;
            (typed && k > first).then_some(rec.pc as u32)
        })
    })?;
    Some((setitem_at, next))
}

/// Whether the `load i` at record `i + 1` is followed by `const 1; add`, recorded on ints at
/// consecutive pcs: the index `i + 1`.
fn next_index(code: &[Inst], records: &[Record], i: usize) -> bool {
    let start = records[i].pc as usize;
    let one = Value::int(1).map(|v| v.0);
    records.get(i + 2..i + 4).is_some_and(|rs| {
        rs[0].pc as usize == start + 2
            && rs[1].pc as usize == start + 3
            && code[start + 2].op == op::CONST
            && Some(code[start + 2].arg0) == one
            && code[start + 3].op == op::ADD
            && rs[1].types[0] == TYPE_INT
            && rs[1].types[1] == TYPE_INT
    })
}

/// The walk [`accumulation`] and [`item_store`] share: from `records[first]` on, at pcs
/// consecutive with `records[i]`'s, a pure expression (at most 12 bytecodes, each reading
/// only locals, globals, list items and constants or calling a function the trace inlines:
/// pure by [`crate::inline`]'s rules; no other call, store, jump or output), then the
/// statement's end. At each bytecode reached with exactly one value above the stack the
/// expression started on, `end` says whether the statement ends there (`Some`, with what to
/// return) or the expression goes on (`None`).
fn pure_expression<T>(
    code: &[Inst],
    records: &[Record],
    i: usize,
    first: usize,
    inlinable: impl Fn(u64) -> bool,
    end: impl Fn(usize, &Record, Inst) -> Option<Option<T>>,
) -> Option<T> {
    /// The longest expression taken: long ones repeat more work when they leave.
    const LONGEST: usize = 12;
    let start = records[i].pc as usize;
    let mut depth = 0i64;
    for (k, rec) in records.iter().enumerate().skip(first).take(LONGEST + 1) {
        let pc = rec.pc as usize;
        if pc != start + (k - i) {
            return None;
        }
        let inst = code[pc];
        if depth == 1 {
            if let Some(result) = end(k, rec, inst) {
                return result;
            }
        }
        let pure =
            crate::inline::reads_only(inst.op) || (inst.op == op::CALL && inlinable(inst.arg0));
        if !pure {
            return None;
        }
        let info = ops::info(inst.op);
        depth -= info.pop.count([inst.arg0, inst.arg1]) as i64;
        if depth < 0 {
            return None;
        }
        depth += info.push.count([inst.arg0, inst.arg1]) as i64;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, names, path, project, projector, records};
    use super::*;
    use crate::abi::{TYPE_FLOAT, TYPE_INT, TYPE_LIST, TYPE_NONE};

    const N: u8 = TYPE_NONE;
    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, N];

    #[test]
    fn an_increment_updates_the_local_in_place_without_a_tag_check_once_proved() {
        let prog = function("i", "  load i; const 3; add; store i");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, INTS)]);
        for (proved, op) in [
            (Ty::Unknown, "INCREMENT_LOCAL_INT"),
            (Ty::Int, "INCREMENT_LOCAL_INT_KNOWN"),
        ] {
            let mut p = projector(f, &[("i", proved)]);
            let r = increment_local(&mut p, &path(f, &rs), 0);
            assert_eq!(r, Some(Recognised::consumed(4)));
            assert_eq!(names(&p), [op]);
            assert_eq!(p.uops[0].arg1, 3 << 16, "the constant is passed scaled");
            assert_eq!(
                p.locals[0],
                Ty::Int,
                "the increment proves the local an int"
            );
            assert_eq!(p.exit_uses, [(0, 0)], "an overflow resumes at the load");
        }
    }

    #[test]
    fn a_decrement_is_an_increment_by_the_negated_constant() {
        let prog = function("i", "  load i; const 3; sub; store i");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, INTS)]);
        let mut p = projector(f, &[("i", Ty::Int)]);
        let r = increment_local(&mut p, &path(f, &rs), 0);
        assert_eq!(r, Some(Recognised::consumed(4)));
        assert_eq!(names(&p), ["INCREMENT_LOCAL_INT_KNOWN"]);
        assert_eq!(p.uops[0].arg1, (-3i64 << 16) as u64, "-3, scaled");
        // -(-2**47) leaves the tagged range, and `mul` is no increment: both declined.
        for body in [
            "  load i; const -140737488355328; sub; store i",
            "  load i; const 3; mul; store i",
        ] {
            let prog = function("i", body);
            let f = &prog.functions[prog.main];
            let mut p = projector(f, &[("i", Ty::Int)]);
            assert_eq!(increment_local(&mut p, &path(f, &rs), 0), None, "{body}");
        }
    }

    #[test]
    fn an_increment_of_another_local_or_a_float_is_declined() {
        let prog = function("i j", "  load i; const 3; add; store j");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, INTS)]);
        let mut p = projector(f, &[]);
        assert_eq!(increment_local(&mut p, &path(f, &rs), 0), None);
        let prog = function("i", "  load i; const 3; add; store i");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, [TYPE_INT, TYPE_FLOAT, N])]);
        let mut p = projector(f, &[]);
        assert_eq!(increment_local(&mut p, &path(f, &rs), 0), None);
        assert!(
            p.uops.is_empty(),
            "a recogniser that declines emits nothing"
        );
    }

    #[test]
    fn an_accumulation_of_a_pure_expression_adds_into_the_local_at_its_end() {
        let prog = function("s i", "  load s; load i; load i; mul; add; store s");
        let f = &prog.functions[prog.main];
        let rs = records(0..6, &[(3, INTS), (4, INTS)]);
        let mut p = projector(f, &[("s", Ty::Int), ("i", Ty::Int)]);
        let r = accumulation_statement(&mut p, &path(f, &rs), 0);
        let opened = Statement::Accumulation {
            local: 0,
            start: 0,
            add_at: 4,
            adds: op::ADD_TO_LOCAL_INT,
        };
        assert_eq!(
            r,
            Some(Recognised {
                records: 1,
                opens: Some(opened)
            })
        );
        assert!(p.uops.is_empty() && p.statement_exits && p.inlined_at == Some(0));
        // The whole statement: e, then the add into s; every exit resumes at the load.
        let ops = project(f, &rs, &[("s", Ty::Int), ("i", Ty::Int)]);
        assert_eq!(ops, ["LOAD_INT", "LOAD_INT", "MUL_INT", "ADD_TO_LOCAL_INT"]);
    }

    #[test]
    fn a_float_accumulation_adds_or_multiplies_into_the_local_where_it_lives() {
        const FLOATS: [u8; 3] = [TYPE_FLOAT, TYPE_FLOAT, N];
        let proved = [("s", Ty::Float), ("x", Ty::Float)];
        for (bytecode, fused) in [("add", "ADD_FLOAT_LOCAL"), ("mul", "MUL_FLOAT_LOCAL")] {
            let body = format!("  load s; load x; load x; mul; {bytecode}; store s");
            let prog = function("s x", &body);
            let f = &prog.functions[prog.main];
            let rs = records(0..6, &[(3, FLOATS), (4, FLOATS)]);
            let mut p = projector(f, &proved);
            let r = accumulation_statement(&mut p, &path(f, &rs), 0);
            let adds = ops::info(r.and_then(|r| r.opens).map_or(op::NOP, |s| match s {
                Statement::Accumulation { adds, .. } => adds,
                Statement::ItemStore(_) => op::NOP,
            }));
            assert_eq!(adds.name, fused, "s = s {bytecode} x * x");
            // s is never pushed: e, then s read in place and stored.
            let ops = project(f, &rs, &proved);
            assert_eq!(ops, ["LOAD", "MUL_FLOAT_LOCAL", fused, "STORE"]);
        }
    }

    #[test]
    fn a_float_accumulation_by_sub_or_on_unproved_or_int_operands_is_declined() {
        const FLOATS: [u8; 3] = [TYPE_FLOAT, TYPE_FLOAT, N];
        let sub = function("s x", "  load s; load x; load x; mul; sub; store s");
        let f = &sub.functions[sub.main];
        let rs = records(0..6, &[(3, FLOATS), (4, FLOATS)]);
        let proved = [("s", Ty::Float), ("x", Ty::Float)];
        assert_eq!(
            accumulation_statement(&mut projector(f, &proved), &path(f, &rs), 0),
            None
        );
        let add = function("s x", "  load s; load x; load x; mul; add; store s");
        let f = &add.functions[add.main];
        // s not proved a float where the statement starts.
        let mut p = projector(f, &[("x", Ty::Float)]);
        assert_eq!(accumulation_statement(&mut p, &path(f, &rs), 0), None);
        // An int added to a float local: the add was recorded on an int and a float.
        let mixed = records(0..6, &[(3, FLOATS), (4, [TYPE_INT, TYPE_FLOAT, N])]);
        let mut p = projector(f, &proved);
        assert_eq!(accumulation_statement(&mut p, &path(f, &mixed), 0), None);
        assert!(p.uops.is_empty() && !p.statement_exits);
    }

    #[test]
    fn an_accumulation_into_a_local_not_proved_an_int_is_declined() {
        let prog = function("s i", "  load s; load i; load i; mul; add; store s");
        let f = &prog.functions[prog.main];
        let rs = records(0..6, &[(3, INTS), (4, INTS)]);
        let mut p = projector(f, &[("i", Ty::Int)]);
        assert_eq!(accumulation_statement(&mut p, &path(f, &rs), 0), None);
        assert!(!p.statement_exits);
    }

    #[test]
    fn an_item_store_of_a_pure_expression_stores_through_the_locals() {
        let prog = function("xs i x", "  load xs; load i; load x; load x; add; setitem");
        let f = &prog.functions[prog.main];
        let rs = records(0..6, &[(5, [N, TYPE_INT, TYPE_LIST])]);
        let mut p = projector(f, &[]);
        let r = item_store_statement(&mut p, &path(f, &rs), 0);
        assert_eq!(r.map(|r| r.records), Some(2));
        // Without the types proved, the store checks them (and then knows them).
        let ops = project(f, &rs, &[]);
        assert_eq!(ops, ["LOAD", "LOAD", "ADD", "SETITEM_LOCALS"]);
        let known = project(f, &rs, &[("xs", Ty::List), ("i", Ty::Int)]);
        assert_eq!(known.last(), Some(&"SETITEM_LOCALS_KNOWN"));
    }

    #[test]
    fn a_store_into_the_next_item_indexes_with_the_local_plus_one() {
        // `xs[j + 1] = xs[j]`, the shift of an insertion sort.
        let prog = function(
            "xs j",
            "  load xs; load j; const 1; add; load xs; load j; getitem; setitem",
        );
        let f = &prog.functions[prog.main];
        let typed = [
            (3, INTS),
            (6, [TYPE_INT, TYPE_LIST, N]),
            (7, [N, TYPE_INT, TYPE_LIST]),
        ];
        let rs = records(0..8, &typed);
        let mut p = projector(f, &[]);
        let r = item_store_statement(&mut p, &path(f, &rs), 0);
        assert_eq!(
            r.map(|r| r.records),
            Some(4),
            "the index's `const 1; add` is taken"
        );
        // The item read proves xs a list and j an int before the store.
        let ops = project(f, &rs, &[]);
        assert_eq!(ops, ["GETITEM_LOCALS", "SETITEM_LOCALS_NEXT_KNOWN"]);
        // Proved before, the read and the store are one copy.
        let known = project(f, &rs, &[("xs", Ty::List), ("j", Ty::Int)]);
        assert_eq!(known, ["COPY_ITEM_TO_NEXT"]);
        // `xs[j + 1] = v` checks them itself.
        let prog = function("xs j v", "  load xs; load j; const 1; add; load v; setitem");
        let f = &prog.functions[prog.main];
        let rs = records(0..6, &[(3, INTS), (5, [N, TYPE_INT, TYPE_LIST])]);
        assert_eq!(project(f, &rs, &[]), ["LOAD", "SETITEM_LOCALS_NEXT"]);
        // `+ 2`, or an add not recorded on ints, is no next item: the index is computed on
        // the stack and the plain store declines (its e would pop the index).
        for (body, types) in [
            (
                "  load xs; load j; const 2; add; load xs; load j; getitem; setitem",
                &typed[..],
            ),
            (
                "  load xs; load j; const 1; add; load xs; load j; getitem; setitem",
                &typed[1..],
            ),
        ] {
            let prog = function("xs j", body);
            let f = &prog.functions[prog.main];
            let rs = records(0..8, types);
            let mut p = projector(f, &[]);
            assert_eq!(
                item_store_statement(&mut p, &path(f, &rs), 0),
                None,
                "{body}"
            );
        }
    }

    #[test]
    fn an_item_store_not_recorded_on_a_list_and_an_int_is_declined() {
        let prog = function("xs i x", "  load xs; load i; load x; setitem");
        let f = &prog.functions[prog.main];
        let on_list = records(0..4, &[(3, [N, TYPE_INT, TYPE_LIST])]);
        let mut p = projector(f, &[]);
        // e is one load: still a statement (e has one bytecode).
        assert!(item_store_statement(&mut p, &path(f, &on_list), 0).is_some());
        let untyped = records(0..4, &[]);
        let mut p = projector(f, &[]);
        assert_eq!(item_store_statement(&mut p, &path(f, &untyped), 0), None);
    }

    #[test]
    fn a_local_added_into_another_int_local_is_one_in_place_add() {
        let prog = function("t s", "  load t; load s; add; store s");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, INTS)]);
        let mut p = projector(f, &[("t", Ty::Int), ("s", Ty::Int)]);
        let r = add_local_to_local(&mut p, &path(f, &rs), 0);
        assert_eq!(r, Some(Recognised::consumed(4)));
        assert_eq!(names(&p), ["LOAD_INT", "ADD_TO_LOCAL_INT"]);
        assert_eq!((p.uops[0].arg0, p.uops[1].arg0), (0, 1));
        // Not proved ints: declined (an accumulation does not apply either: s unknown).
        let mut p = projector(f, &[("t", Ty::Int)]);
        assert_eq!(add_local_to_local(&mut p, &path(f, &rs), 0), None);
        // Into the local added: declined.
        let prog = function("s", "  load s; load s; add; store s");
        let f = &prog.functions[prog.main];
        let mut p = projector(f, &[("s", Ty::Int)]);
        assert_eq!(add_local_to_local(&mut p, &path(f, &rs), 0), None);
    }

    #[test]
    fn an_item_load_on_a_list_and_an_int_reads_both_locals() {
        let prog = function("xs i", "  load xs; load i; getitem; pop");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, [TYPE_INT, TYPE_LIST, N])]);
        for (proved, op) in [
            (Ty::Unknown, "GETITEM_LOCALS"),
            (Ty::List, "GETITEM_LOCALS_KNOWN"),
        ] {
            let mut p = projector(f, &[("xs", proved), ("i", Ty::Int)]);
            assert_eq!(
                item_load(&mut p, &path(f, &rs), 0),
                Some(Recognised::consumed(3))
            );
            assert_eq!(names(&p), [op]);
            assert_eq!((p.locals[0], p.locals[1]), (Ty::List, Ty::Int));
            assert_eq!(p.stack.len(), 1);
        }
        let floats = records(0..4, &[(2, [TYPE_FLOAT, TYPE_LIST, N])]);
        let mut p = projector(f, &[]);
        assert_eq!(item_load(&mut p, &path(f, &floats), 0), None);
    }

    #[test]
    fn a_plain_load_of_a_proved_int_is_load_int_and_remembers_its_local() {
        let prog = function("a b", "  load a; load b; pop; pop");
        let f = &prog.functions[prog.main];
        let mut p = projector(f, &[("b", Ty::Int)]);
        plain_load(&mut p, 0);
        plain_load(&mut p, 1);
        assert_eq!(names(&p), ["LOAD", "LOAD_INT"]);
        assert_eq!(p.stack[1].local, Some(1));
        assert_eq!(p.stack[1].ty, Ty::Int);
    }

    #[test]
    fn the_first_recogniser_that_applies_wins() {
        // `i = i + 1` on a proved int is an accumulation of `const 1` too: the increment,
        // tried first, takes it.
        let prog = function("i", "  load i; const 1; add; store i");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, INTS)]);
        let mut p = projector(f, &[("i", Ty::Int)]);
        assert!(accumulation_statement(&mut p, &path(f, &rs), 0).is_some());
        assert_eq!(
            project(f, &rs, &[("i", Ty::Int)]),
            ["INCREMENT_LOCAL_INT_KNOWN"]
        );
    }
}
