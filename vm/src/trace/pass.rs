//! One pass over the recorded path: each record goes to the recogniser of its bytecode (a
//! `load` to the statement recognisers of [`super::idioms`], a typed binary op to those of
//! [`super::fusion`]), which emits its micro-ops and says how many records it consumed.

use super::idioms::{self, ItemStore, Statement, LOAD_RECOGNISERS};
use super::{convert, fusion, recorded, specialisations, ty_of, Path, Projector, TraceCall, Ty};
use crate::abi::{Inst, TYPE_BIGINT, TYPE_FLOAT, TYPE_INT, TYPE_LIST};
use crate::ops::{self, op};
use crate::value::Value;

/// The statements open while their expressions are projected (see [`idioms`]).
#[derive(Default)]
struct Open {
    /// `s = s + e`: s, the statement's pc, the add's pc, the micro-op adding into s.
    accumulation: Option<(u64, u32, u32, u32)>,
    /// `xs[i] = e` (or `xs[i + 1] = e`).
    item_store: Option<ItemStore>,
}

impl Open {
    fn open(&mut self, statement: Statement) {
        match statement {
            Statement::Accumulation {
                local,
                start,
                add_at,
                adds,
            } => self.accumulation = Some((local, start, add_at, adds)),
            Statement::ItemStore(s) => self.item_store = Some(s),
        }
    }

    /// At `pc`, the end of an open statement: closes it (the records consumed).
    fn close(&mut self, p: &mut Projector<'_>, path: &Path<'_>, pc: u32) -> Option<usize> {
        if let Some((local, start, add_at, adds)) = self.accumulation.filter(|a| a.2 == pc) {
            self.accumulation = None;
            debug_assert_eq!(path.code[add_at as usize + 1].op, op::STORE);
            return Some(idioms::close_accumulation(p, local, start, adds));
        }
        if let Some(s) = self.item_store.filter(|s| s.setitem_at == pc) {
            self.item_store = None;
            return Some(idioms::close_item_store(p, s));
        }
        None
    }
}

/// Projects the whole recorded path from the projector's current types.
pub(super) fn pass(p: &mut Projector<'_>, path: &Path<'_>) -> Result<(), String> {
    let mut open = Open::default();
    let mut i = 0;
    while i < path.records.len() {
        i += step(p, path, i, &mut open)?;
    }
    Ok(())
}

/// Projects record `i` (and the records after it an idiom takes): the records consumed.
fn step(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
    open: &mut Open,
) -> Result<usize, String> {
    let rec = path.records[i];
    let pc = rec.pc as u32;
    if let Some(consumed) = open.close(p, path, pc) {
        return Ok(consumed);
    }
    let inst = path.code[pc as usize];
    let types = rec.types;
    let last = i + 1 == path.records.len();
    match inst.op {
        op::NOP | op::JUMP => {}
        op::JUMP_BACKWARD | op::ENTER_EXECUTOR if !last => {
            return Err(format!("back-edge at pc {pc} in the middle of a recording"));
        }
        op::JUMP_BACKWARD | op::ENTER_EXECUTOR => {}
        op::CONST => {
            p.last_const = Some((p.uops.len(), pc));
            p.emit(op::CONST, inst.arg0, 0);
            p.push(ty_of(Value(inst.arg0)));
        }
        op::LOAD => {
            for recognise in LOAD_RECOGNISERS {
                if let Some(r) = recognise(p, path, i) {
                    if let Some(statement) = r.opens {
                        open.open(statement);
                    }
                    return Ok(r.records);
                }
            }
            idioms::plain_load(p, inst.arg0);
        }
        op::STORE => {
            p.emit(op::STORE, inst.arg0, 0);
            let s = p.pop();
            p.store_local(inst.arg0, s.ty);
        }
        op::LOAD_GLOBAL => p.load_global(inst.arg0, pc),
        op::STORE_GLOBAL => {
            p.emit_exiting(op::STORE_GLOBAL, inst.arg0, 0, pc);
            p.pop();
        }
        op::POP | op::DUP | op::SWAP => p.shuffle(inst.op),
        op::JUMP_IF_FALSE | op::JUMP_IF_TRUE => {
            let taken = path.next_pc(i) == Some(inst.target);
            let truthy = taken == (inst.op == op::JUMP_IF_TRUE);
            let other = if taken { pc + 1 } else { inst.target };
            let guard = if truthy {
                op::GUARD_TRUE
            } else {
                op::GUARD_FALSE
            };
            p.emit_exiting(guard, 0, 0, other);
            p.pop();
        }
        op::CALL if p.inlinable(inst.arg0).is_some() => {
            p.inline_call(inst, pc, Some(types))?;
        }
        op::CALL => call(p, inst, pc),
        op::RETURN => {
            p.emit(op::RETURN, 0, 0);
            if !last {
                return Err(format!("RETURN at pc {pc} in the middle of a recording"));
            }
        }
        op::GETITEM if types[1] == TYPE_LIST && types[0] == TYPE_INT => {
            p.guard(pc, &[(1, Ty::List), (0, Ty::Int)]);
            p.emit_exiting(op::GETITEM_LIST_INT, 0, 0, pc);
            p.pop();
            p.pop();
            p.push(Ty::Unknown);
        }
        op::SQRT if types[0] == TYPE_FLOAT => {
            // On a float: no helper call (so no failure a loop must keep its registers
            // for); a negative argument leaves and the interpreter raises.
            p.guard(pc, &[(0, Ty::Float)]);
            p.emit_exiting(op::SQRT_FLOAT, 0, 0, pc);
            p.pop();
            p.push(Ty::Float);
        }
        op::FLOAT if types[0] == TYPE_INT && convert::float_of_int_local(p) => {}
        op::SETITEM if types[2] == TYPE_LIST && types[1] == TYPE_INT => {
            p.guard(pc, &[(2, Ty::List), (1, Ty::Int)]);
            p.emit_exiting(op::SETITEM_LIST_INT, 0, 0, pc);
            for _ in 0..3 {
                p.pop();
            }
        }
        _ => return binary(p, path, i, inst),
    }
    Ok(1)
}

/// A call the trace does not inline: it enters the callee's compiled code directly when it
/// has some, and leaves after the call if the callee invalidated executors.
fn call(p: &mut Projector<'_>, inst: Inst, pc: u32) {
    let call = p.calls.len() as u64;
    p.calls.push(TraceCall::of(inst, pc));
    p.emit_exiting(op::CALL_JIT, call, inst.arg1, pc + 1);
    for _ in 0..inst.arg1 {
        p.pop();
    }
    p.push(Ty::Unknown);
}

/// Any other bytecode at record `i`: a binary op specialised on the types recorded for its
/// operands (after guarding them), fused where [`fusion`] recognises more, or the generic
/// op. The records consumed.
fn binary(p: &mut Projector<'_>, path: &Path<'_>, i: usize, inst: Inst) -> Result<usize, String> {
    let pc = path.pc(i);
    let types = path.records[i].types;
    let info = ops::info(inst.op);
    if !info.bytecode {
        return Err(format!(
            "micro-op {} recorded as a bytecode at pc {pc}",
            info.name
        ));
    }
    // A result the recording saw beyond the tagged range (a big int, the next record's top):
    // the typed op would leave the trace every time; the generic op takes the slow path.
    let big = path
        .records
        .get(i + 1)
        .is_some_and(|r| r.types[0] == TYPE_BIGINT);
    let specialised = specialisations(inst.op).and_then(|(int_op, float_op, cmp)| {
        match (recorded(types[1]), recorded(types[0])) {
            (Ty::Int, Ty::Int) if !big => int_op.map(|o| (o, Ty::Int, cmp)),
            (Ty::Float, Ty::Float) => float_op.map(|o| (o, Ty::Float, cmp)),
            _ => None,
        }
    });
    let Some((uop, ty, cmp)) = specialised else {
        p.generic(inst, pc);
        return Ok(1);
    };
    if fusion::divide_by_constant(p, uop) || super::multiply::multiply_by_constant(p, uop) {
        return Ok(1);
    }
    let top = *p.slot(0);
    let before_guards = p.uops.len();
    p.guard(pc, &[(1, ty), (0, ty)]);
    p.pop();
    p.pop();
    if fusion::float_op_on_local(p, path, i, uop, top, before_guards) {
        return Ok(1);
    }
    if fusion::compare_and_branch(p, path, i, uop, cmp) {
        return Ok(2);
    }
    p.emit_exiting(uop, 0, 0, pc);
    p.push(if cmp { Ty::Bool } else { ty });
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{
        function, inlined_call, names, op_names, path, project, projector, records,
    };
    use crate::abi::{TYPE_BIGINT, TYPE_FLOAT, TYPE_INT, TYPE_LIST, TYPE_NONE};

    const N: u8 = TYPE_NONE;

    #[test]
    fn a_branch_is_a_guard_on_the_way_recorded_leaving_for_the_other() {
        let prog = function("b", "  load b; jump_if_false done\n  load b; pop\ndone:");
        let f = &prog.functions[prog.main];
        let mut p = projector(f, &[]);
        let going_on = records(0..2, &[]);
        super::pass(&mut p, &path(f, &going_on)).unwrap();
        assert_eq!(names(&p), ["LOAD", "GUARD_TRUE"]);
        assert_eq!(p.exit_uses, [(1, 4)], "leaves for the jump's target");
        let mut jumping = records(0..2, &[]);
        jumping.extend(records(4..5, &[]));
        assert_eq!(project(f, &jumping, &[]), ["LOAD", "GUARD_FALSE", "CONST"]);
    }

    #[test]
    fn typed_item_ops_and_square_roots_are_guarded_once() {
        let prog = function(
            "xs y",
            "  load xs; const 0; getitem; load y; sqrt; pop; pop",
        );
        let f = &prog.functions[prog.main];
        let rs = records(
            0..7,
            &[(2, [TYPE_INT, TYPE_LIST, N]), (4, [TYPE_FLOAT, N, N])],
        );
        let ops = project(f, &rs, &[]);
        assert_eq!(
            ops,
            [
                "LOAD",
                "CONST",
                "GUARD_LIST_NOS",
                "GETITEM_LIST_INT",
                "LOAD",
                "GUARD_FLOAT_TOS",
                "SQRT_FLOAT",
                "POP",
                "POP"
            ]
        );
        // The guard proved the list's local: a second item load needs none.
        let text = "  load xs; const 0; getitem; load xs; const 1; getitem; pop; pop";
        let prog = function("xs", text);
        let f = &prog.functions[prog.main];
        let typed = [TYPE_INT, TYPE_LIST, N];
        let ops = project(f, &records(0..8, &[(2, typed), (5, typed)]), &[]);
        assert_eq!(ops.iter().filter(|&&o| o == "GUARD_LIST_NOS").count(), 1);
    }

    #[test]
    fn a_call_not_inlined_enters_compiled_code_and_an_inlined_one_is_projected_in_place() {
        let text = "func twice(a)\n  load a; load a; add; return\nend\n\
                    func main()\n  locals x\n  load x; call twice; pop\n  const none; return\nend\n";
        let prog = crate::parser::parse(text).unwrap();
        let f = &prog.functions[prog.main];
        let rs = records(0..3, &[(1, [TYPE_INT, N, N])]);
        // Not inlined: the call, which leaves after it if the callee invalidated executors.
        let ops = project(f, &rs, &[]);
        assert_eq!(ops, ["LOAD", "CALL_JIT", "POP"]);
        // Inlined (the same program): the argument guarded, the body on it, the result in
        // its place.
        let trace = inlined_call();
        assert_eq!(
            op_names(&trace.uops[..trace.body_len]),
            [
                "LOAD",
                "GUARD_CALL_DEPTH",
                "GUARD_INT_TOS",
                "DUP",
                "COPY_INT",
                "ADD_INT",
                "NIP",
                "POP",
                "EXIT_TRACE"
            ]
        );
        assert_eq!(trace.inlined_calls, 1);
    }

    #[test]
    fn an_int_op_whose_recorded_result_was_a_big_int_stays_generic() {
        let prog = function("a b", "  load a; load b; mul; pop");
        let f = &prog.functions[prog.main];
        let ints = [TYPE_INT, TYPE_INT, N];
        let tagged = records(0..4, &[(2, ints), (3, [TYPE_INT, N, N])]);
        assert!(project(f, &tagged, &[]).contains(&"MUL_INT"));
        // The product was beyond the tagged range: MUL_INT would leave every time.
        let big = records(0..4, &[(2, ints), (3, [TYPE_BIGINT, N, N])]);
        assert_eq!(project(f, &big, &[]), ["LOAD", "LOAD", "MUL", "POP"]);
    }
}
