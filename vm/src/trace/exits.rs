//! The end of a projection: the path's end (a jump back, an exit or a return), then one
//! exit stub per distinct resume point after the body, with what each exit has proved.

use super::{End, LoopBody, Path, Projector, Trace, Ty};
use crate::abi::Inst;
use crate::ops::op;
use crate::value::Value;
use std::collections::BTreeMap;

/// The `EXIT_TRACE` operand for resume pc `pc` and exit index `exit`: `pc << 32 |
/// executor << 16 | exit`, where the executor's index is filled in when it is attached.
fn exit_operand(pc: u32, exit: usize) -> u64 {
    assert!(exit <= 0xffff, "more than 65536 exits in one trace");
    ((pc as u64) << 32) | exit as u64
}

/// Ends the projected body as `path` ends and appends the exit stubs: the trace.
pub(super) fn finish(
    mut p: Projector<'_>,
    path: &Path<'_>,
    loop_body: Option<LoopBody>,
) -> Result<Trace, String> {
    let loop_start = loop_body.as_ref().map_or(0, |b| b.at);
    let mut end_exit = None;
    match path.end {
        End::JumpTop => {
            p.emit(op::JUMP_TOP, 0, 0);
            p.uops.last_mut().expect("just emitted").target = loop_start as u32;
        }
        End::Exit(pc) => {
            end_exit = Some(p.uops.len());
            p.emit(op::EXIT_TRACE, pc as u64, 0);
        }
        End::Return => {
            let last = path.records.last().expect("a recording is never empty");
            if path.code[last.pc as usize].op != op::RETURN {
                return Err("recording ended without RETURN".into());
            }
        }
    }
    let body_len = p.uops.len();
    let (mut exit_pcs, mut exit_locals) = exit_stubs(&mut p, loop_start);
    // The end of the path is an exit of its own (not shared with guards): it may be linked
    // to a trace that starts where it goes.
    let end_exit = end_exit.map(|at| {
        let pc = p.uops[at].arg0 as u32;
        exit_pcs.push(pc);
        exit_locals.push(p.locals.clone());
        p.uops[at].arg0 = exit_operand(pc, exit_pcs.len() - 1);
        exit_pcs.len() - 1
    });
    // Int constants as CONST_INT, passed boxed and scaled (after the fusions, which look
    // for CONST).
    for u in &mut p.uops {
        if let (op::CONST, Some(c)) = (u.op, Value(u.arg0).as_int()) {
            u.op = op::CONST_INT;
            u.arg1 = (c << 16) as u64;
        }
    }
    Ok(Trace {
        uops: p.uops,
        body_len,
        exit_pcs,
        end_exit,
        deps: p.deps,
        calls: p.calls,
        exit_locals,
        inlined_calls: p.inlined_calls,
        inherited_pins: None,
        loop_body,
        depth_checked: p.depth_checked,
        depth_needed: p.depth_needed,
    })
}

/// Appends one exit stub per distinct resume pc (and part of a peeled loop, whose body
/// starts at `loop_start`) after the body and points every exiting micro-op at its stub:
/// the exits' resume pcs and the locals' types each has proved.
fn exit_stubs(p: &mut Projector<'_>, loop_start: usize) -> (Vec<u32>, Vec<Vec<Ty>>) {
    let body_len = p.uops.len();
    // A peeled loop's preamble and body leave through exits of their own, even to the same
    // pc: the body's have proved more (a side trace grown from one starts from what it
    // proved, and may re-enter the loop past its preamble: `loop_body_entry`).
    let key = |at: usize, pc: u32| (pc, loop_start > 0 && at >= loop_start);
    let mut exits: BTreeMap<(u32, bool), usize> = BTreeMap::new();
    let mut exit_pcs = Vec::new();
    for &(at, pc) in &p.exit_uses {
        exits.entry(key(at, pc)).or_insert_with(|| {
            exit_pcs.push(pc);
            exit_pcs.len() - 1
        });
    }
    // A stub resuming at an inlined call first cuts the value stack back to the call's
    // depth (its arguments on top): one micro-op more.
    let mut stub_at = Vec::with_capacity(exit_pcs.len());
    let mut at = body_len;
    for pc in &exit_pcs {
        stub_at.push(at);
        at += 1 + usize::from(p.inline_exits.contains_key(pc));
    }
    for &(at, pc) in &p.exit_uses {
        p.uops[at].target = stub_at[exits[&key(at, pc)]] as u32;
    }
    // What every use of an exit has proved.
    let mut exit_locals: Vec<Option<Vec<Ty>>> = vec![None; exit_pcs.len()];
    for (&(at, pc), types) in p.exit_uses.iter().zip(&p.exit_types) {
        let known = &mut exit_locals[exits[&key(at, pc)]];
        match known {
            None => *known = Some(types.clone()),
            Some(k) => {
                for (a, &b) in k.iter_mut().zip(types) {
                    if *a != b {
                        *a = Ty::Unknown;
                    }
                }
            }
        }
    }
    let exit_locals: Vec<Vec<Ty>> = exit_locals
        .into_iter()
        .map(|k| k.unwrap_or_default())
        .collect();
    for (e, &pc) in exit_pcs.iter().enumerate() {
        if let Some(&depth) = p.inline_exits.get(&pc) {
            p.emit(op::RESET_STACK, u64::from(depth), 0);
        }
        debug_assert_eq!(p.uops.len() + 1, stub_at.get(e + 1).copied().unwrap_or(at));
        p.uops.push(Inst {
            op: op::EXIT_TRACE,
            target: 0,
            arg0: exit_operand(pc, e),
            arg1: 0,
        });
    }
    (exit_pcs, exit_locals)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, inlined_call, op_names, records};
    use super::super::{project, End};
    use crate::abi::{TYPE_INT, TYPE_NONE};
    use crate::ops::{self, op};

    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, TYPE_NONE];

    #[test]
    fn exits_to_one_pc_share_a_stub_and_the_path_end_has_its_own() {
        let prog = function("a b", "  load a; load b; add; pop");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, INTS)]);
        let trace = project(f, &f.code, &rs, End::Exit(4), &[], None, None).unwrap();
        assert_eq!(
            op_names(&trace.uops),
            [
                "LOAD",
                "LOAD",
                "GUARD_INT_BOTH",
                "ADD_INT",
                "POP",
                "EXIT_TRACE",
                "EXIT_TRACE"
            ]
        );
        assert_eq!(trace.body_len, 6);
        // The guard and the add resume at the add: one stub, exit 0; the end is exit 1.
        assert_eq!((trace.uops[2].target, trace.uops[3].target), (6, 6));
        assert_eq!(trace.exit_pcs, [2, 4]);
        assert_eq!(trace.end_exit, Some(1));
        assert_eq!(trace.uops[6].arg0, 2 << 32);
        assert_eq!(trace.uops[5].arg0, (4 << 32) | 1);
    }

    #[test]
    fn a_peeled_loop_leaves_its_preamble_and_its_body_through_stubs_of_their_own() {
        let body = "loop:\n  load i; load n; lt; jump_if_false done\n  jump loop\ndone:";
        let prog = function("i n", body);
        let f = &prog.functions[prog.main];
        let rs = records(0..5, &[(2, INTS)]);
        let trace = project(f, &f.code, &rs, End::JumpTop, &[], None, None).unwrap();
        assert_eq!(trace.loop_body_start(), Some(4));
        // The preamble's guards (both to the compare) and its branch (to `done`), then the
        // body's branch, to `done` too but through a stub of its own.
        assert_eq!(trace.exit_pcs, [2, 5, 5]);
        let stubs = &trace.uops[trace.body_len..];
        assert!(stubs.iter().all(|u| u.op == op::EXIT_TRACE));
        assert_eq!(stubs.len(), 3);
    }

    #[test]
    fn a_stub_resuming_at_an_inlined_call_first_cuts_the_stack_back() {
        let trace = inlined_call();
        let stubs: Vec<_> = trace.uops[trace.body_len..]
            .iter()
            .map(|u| (ops::info(u.op).name, u.arg0))
            .collect();
        // Every exit of the body resumes at the call (pc 1), one value deep.
        assert_eq!(stubs, [("RESET_STACK", 1), ("EXIT_TRACE", 1 << 32)]);
    }
}
