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
