//! [`check`]: proves that a lowering keeps the pinned-register protocol, from the stencils it
//! chose alone (see the parent module's documentation).

use super::{exit_pins, merged_block, pinned_local, Held, FLOAT_PIN_REGS, PIN_REGS};
use crate::jit::{CachedOps, LoweredId, LoweredInstance, Lowering};
use crate::ops;
use crate::trace::Trace;

/// Which pinned registers hold a local, which, and how: `live[k] = Some((local, held))`,
/// general registers first, then the float ones (held boxed: their locals' bits).
type Live = [Option<(u64, Held)>; REGS];

/// The pinned registers, general and float.
const REGS: usize = PIN_REGS + FLOAT_PIN_REGS;

/// Checks that `lowering` of `trace` keeps the pinned-register protocol, from the stencils
/// it chose alone: a pinned member or `UNPIN` of register k runs only where k holds its
/// local (after a `PIN k` on the fall-through path, or at the start of a stub every exit
/// into which comes from where k is live); every exit from where registers are live enters
/// a stub that begins by writing back exactly those registers, and no other exit does; a
/// back edge enters an instance where the same registers are live; no uncached stencil runs
/// while a register is live.
pub fn check(trace: &Trace, lowering: &Lowering, cached: &CachedOps) -> Result<(), String> {
    let n = lowering.instances.len();
    let fail = |k: usize, what: String| Err(format!("lowered instance {}: {what}", LoweredId(k)));
    let all_pinned = all_pinned(lowering);
    // Liveness along fall-through edges; stubs are entered by exits only.
    let mut live_at: Vec<Live> = vec![[None; REGS]; n];
    let mut live: Live = [None; REGS];
    for (k, inst) in lowering.instances.iter().enumerate() {
        let falls_in = k > 0 && falls_through_instance(trace, &lowering.instances[k - 1]);
        if !falls_in {
            // A stub's leading UNPINs (after its LINK) hold what the exits into it say, a
            // merged branch every pinned register; checked below.
            live = match inst.uop {
                Some(i) if merged_block(trace, i) => all_pinned,
                _ => written_back(lowering, k, cached),
            };
        }
        live_at[k] = live;
        let whole = cached.is_exit_pinned(inst.stencil);
        if whole && Some(lowering.exit_pins) != exit_pins(&lowering.pinned, &lowering.pinned_held) {
            return fail(
                k,
                format!(
                    "a whole exit stub whose operand {:#x} is not the pinning's",
                    lowering.exit_pins
                ),
            );
        }
        if (whole || cached.is_link(inst.stencil)) && live != all_pinned {
            return fail(
                k,
                format!(
                    "a LINK (entering code with every pinned register live) where they hold                      {live:?}, not {all_pinned:?}"
                ),
            );
        }
        if let Some((r, held)) = pin_of(inst, cached) {
            live[r] = Some(held);
        }
        if let Some((r, held)) = unpin_of(inst, cached) {
            if live[r] != Some(held) {
                return fail(
                    k,
                    format!(
                        "UNPIN of register {r} (local {}, held {:?}) where it does not hold \
                         that local so",
                        held.0, held.1
                    ),
                );
            }
            // Written back: from here on the frame holds the local again.
            live[r] = None;
        }
        let on_register = cached
            .pinned_register_and_held_of(inst.stencil)
            .or_else(|| {
                let q = cached.float_pinned_register_of(inst.stencil)?;
                Some((PIN_REGS + q, Held::Boxed))
            });
        if let Some((r, held)) = on_register {
            let u = inst.uop.map(|u| trace.uops[u]);
            let local = u.as_ref().and_then(pinned_local);
            if local.is_none_or(|l| live[r] != Some((l, held))) {
                return fail(k, format!("a member on pinned register {r} (held {held:?}) where it does not hold the micro-op's local so"));
            }
        }
        if live_at[k].iter().any(Option::is_some) && !cached.is_cached(inst.stencil) {
            return fail(
                k,
                "an uncached stencil while locals are pinned (it loses the pinned registers)"
                    .into(),
            );
        }
        if !falls_through_instance(trace, inst) {
            live = [None; REGS];
        }
    }
    for (k, inst) in lowering.instances.iter().enumerate() {
        let Some(i) = inst.uop else { continue };
        let u = &trace.uops[i];
        let info = ops::info(u.op);
        let here = live_at[k];
        if info.exits && !merged_block(trace, u.target as usize) {
            let t = lowering.exit_instance(u.target as usize).index();
            let written = written_back(lowering, t, cached);
            if written != here {
                return fail(k, format!("exits with pinned registers {here:?} into a stub that writes back {written:?}"));
            }
        }
        if info.jumps || (info.exits && merged_block(trace, u.target as usize)) {
            let t = lowering.instance_of_uop[u.target as usize].index();
            if live_at[t] != here {
                return fail(
                    k,
                    format!(
                        "jumps with pinned registers {here:?} to an instance entered with {:?}",
                        live_at[t]
                    ),
                );
            }
        }
    }
    Ok(())
}

/// What every register holds while `lowering`'s pinning is live.
fn all_pinned(lowering: &Lowering) -> Live {
    let mut all = general_pinned(lowering);
    let floats = lowering.pinned_floats.locals().iter();
    for (q, &local) in floats.enumerate().take(FLOAT_PIN_REGS) {
        all[PIN_REGS + q] = Some((local, Held::Boxed));
    }
    all
}

/// What the general registers hold while `lowering`'s pinning is live (what a whole exit
/// stub writes back).
fn general_pinned(lowering: &Lowering) -> Live {
    let mut all: Live = [None; REGS];
    for (r, &local) in lowering.pinned.iter().enumerate().take(PIN_REGS) {
        all[r] = Some((
            local,
            lowering.pinned_held.get(r).copied().unwrap_or_default(),
        ));
    }
    all
}

/// The registers the stub starting at instance `k` (0-based) writes back: its `UNPIN`s,
/// after its `LINK` if it has one; every pinned register for a whole stub
/// (`CachedOps::exit_pinned`, which writes back what [`Lowering::exit_pins`] says: the
/// lowering's pinning).
fn written_back(lowering: &Lowering, k: usize, cached: &CachedOps) -> Live {
    let mut written: Live = [None; REGS];
    let whole = lowering.instances.get(k);
    if whole.is_some_and(|i| cached.is_exit_pinned(i.stencil)) {
        return general_pinned(lowering);
    }
    let mut j = k;
    if lowering
        .instances
        .get(j)
        .is_some_and(|i| cached.is_link(i.stencil))
    {
        j += 1;
    }
    while let Some((r, held)) = lowering.instances.get(j).and_then(|i| unpin_of(i, cached)) {
        written[r] = Some(held);
        j += 1;
    }
    written
}

/// Whether control goes on from `inst` to the next instance.
fn falls_through_instance(trace: &Trace, inst: &LoweredInstance) -> bool {
    inst.uop
        .is_none_or(|u| crate::jit::falls_through(trace.uops[u].op))
}

fn pin_of(inst: &LoweredInstance, cached: &CachedOps) -> Option<(usize, (u64, Held))> {
    let (r, held) = cached.pin_register_of(inst.stencil).or_else(|| {
        let q = cached.pin_float_register_of(inst.stencil)?;
        Some((PIN_REGS + q, Held::Boxed))
    })?;
    Some((r, (inst.local?, held)))
}

fn unpin_of(inst: &LoweredInstance, cached: &CachedOps) -> Option<(usize, (u64, Held))> {
    let (r, held) = cached.unpin_register_of(inst.stencil).or_else(|| {
        let q = cached.unpin_float_register_of(inst.stencil)?;
        Some((PIN_REGS + q, Held::Boxed))
    })?;
    Some((r, (inst.local?, held)))
}
