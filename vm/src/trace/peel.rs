//! Loop peeling: a loop trace's body projected a second time from the types its first
//! iteration proved, so that guards which hold around the loop run once per entry.

use super::{LoopBody, Projector, Slot, Ty};

/// Loop peeling. A loop trace's first iteration (the preamble) is projected knowing nothing
/// of the locals; the loop then jumps back to a second copy projected from the types the
/// first one leaves in them, so that what the preamble's guards proved is not guarded again
/// on every iteration. The second copy's assumptions must hold where the loop jumps back: a
/// local assumed to have a type must have it at the copy's end too (a local that does not
/// is dropped from the assumptions and the copy projected again). Returns where the loop
/// body starts and the locals' types it assumes, or `None` (no peeling) when the copy would
/// not be shorter than the preamble.
pub(super) fn peel<'a>(
    p: &mut Projector<'a>,
    pass: &mut impl FnMut(&mut Projector<'a>) -> Result<(), String>,
) -> Result<Option<LoopBody>, String> {
    let preamble = (p.uops.len(), p.exit_uses.len(), p.calls.len());
    let (end_stack, end_locals) = (p.stack.clone(), p.locals.clone());
    let (inlined_calls, depth_checked) = (p.inlined_calls, p.depth_checked);
    let restore = |p: &mut Projector<'a>| {
        p.uops.truncate(preamble.0);
        p.exit_uses.truncate(preamble.1);
        p.exit_types.truncate(preamble.1);
        p.calls.truncate(preamble.2);
        p.inlined_calls = inlined_calls;
        p.depth_checked = depth_checked;
        p.stack.clone_from(&end_stack);
        p.locals.clone_from(&end_locals);
    };
    let mut assumed = end_locals.clone();
    p.fusion_floor = preamble.0;
    while assumed.iter().any(|&t| t != Ty::Unknown) {
        p.locals.clone_from(&assumed);
        for slot in &mut p.stack {
            *slot = Slot::UNKNOWN;
        }
        pass(p)?;
        let unstable: Vec<usize> = (0..assumed.len())
            .filter(|&l| assumed[l] != Ty::Unknown && p.locals[l] != assumed[l])
            .collect();
        if unstable.is_empty() {
            if p.uops.len() - preamble.0 < preamble.0 {
                return Ok(Some(LoopBody {
                    at: preamble.0,
                    assumed,
                }));
            }
            break;
        }
        restore(p);
        for l in unstable {
            assumed[l] = Ty::Unknown;
        }
    }
    restore(p);
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, op_names, records};
    use super::super::{project, End};
    use crate::abi::{TYPE_INT, TYPE_NONE};

    #[test]
    fn a_peeled_loop_guards_in_its_preamble_only() {
        let body = "loop:\n  load i; load n; lt; jump_if_false done\n  load i; const 1; add; store i\n  jump loop\ndone:";
        let prog = function("i n", body);
        let f = &prog.functions[prog.main];
        let ints = [TYPE_INT, TYPE_INT, TYPE_NONE];
        let rs = records(0..9, &[(2, ints), (6, ints)]);
        let trace = project(f, &f.code, &rs, End::JumpTop, &[], None, None).unwrap();
        assert_eq!(
            op_names(&trace.uops[..trace.body_len]),
            [
                "LOAD",
                "LOAD",
                "GUARD_INT_BOTH",
                "LT_INT_GUARD_TRUE",
                "INCREMENT_LOCAL_INT_KNOWN",
                "LOAD_INT",
                "LOAD_INT",
                "LT_INT_GUARD_TRUE",
                "INCREMENT_LOCAL_INT_KNOWN",
                "JUMP_TOP"
            ]
        );
        assert_eq!(trace.loop_body_start(), Some(5));
        assert!(trace.loop_body_proves_int(0) && trace.loop_body_proves_int(1));
    }
}
