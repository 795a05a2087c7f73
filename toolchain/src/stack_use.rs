//! A cached op's use of the value stack in memory, read from its IR, and the check of a
//! family's declared stack effects (`cached.pop`/`push`, `[family.cached.effects]`)
//! against it.
//!
//! cpjit.h's cached ops take the value-stack pointer `sp` as their second parameter and
//! pass it on as the second argument of every continuation and jump; the stack holds
//! `uint64_t` slots. A member entered with `IN` values cached that leaves `OUT` with the
//! stack pointer moved by `D` slots has the net effect `push - pop = D - IN + OUT` (the
//! logical stack is memory plus the cached values). A member entered and left with nothing
//! cached (`IN = OUT = 0`) also bounds `pop`: it pops from memory and spills what it
//! pushes, so it touches, or leaves `sp` at, slot `-pop`; it may read deeper (a guard
//! peeking at values it leaves, declared `[0, 0]`), so only a declared pop deeper than every
//! slot it touches is refused (it would make the tables fill values the stack may not
//! hold). Where the IR does not say (the pointer escapes into a call, an offset is not a
//! constant, exits disagree, the op only returns), nothing is checked.

use crate::error::{Error, Result};
use crate::family::{Family, Member};
use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::LLVMValueRef;
use inkwell::llvm_sys::target::{LLVMABISizeOfType, LLVMGetModuleDataLayout};

/// Bytes per value-stack slot (`uint64_t`).
const SLOT: i64 = 8;

/// What a member's IR shows of its memory stack, in slots relative to `sp` on entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackUse {
    /// Where every continuation and jump (but to a spilled target) leaves `sp`; `None` if
    /// they disagree, the op never continues, or `sp` is not a constant offset there.
    pub moved: Option<i64>,
    /// The deepest slot loaded or stored (0 if none); `None` if `sp` escapes (passed to a
    /// call, stored, compared, offset by a variable), so that memory below it may be
    /// touched unseen.
    pub deepest: Option<i64>,
}

/// Reads the stack use of cached op `f` (cpjit.h's signature: `sp` is parameter 1).
/// `exit` tells for a call whether it is a continuation or jump (`Some(true)`), one to a
/// spilled target (`Some(false)`: it leaves with everything spilled, not the op's effect),
/// or no jump at all (`None`).
///
/// # Safety
/// `f` is a function of a live module of the calling thread's context.
pub unsafe fn read(f: LLVMValueRef, exit: impl Fn(LLVMValueRef) -> Option<bool>) -> StackUse {
    // SAFETY: `f` and every value reached from it belong to a live module (# Safety).
    unsafe {
        let layout = LLVMGetModuleDataLayout(LLVMGetGlobalParent(f));
        let sp = LLVMGetParam(f, 1);
        let (mut moved, mut agree) = (None, true);
        let (mut deepest, mut escaped) = (0i64, false);
        let mut work = vec![(sp, 0i64)];
        while let Some((pointer, at)) = work.pop() {
            let mut u = LLVMGetFirstUse(pointer);
            while !u.is_null() {
                let user = LLVMGetUser(u);
                u = LLVMGetNextUse(u);
                if !LLVMIsAGetElementPtrInst(user).is_null()
                    && LLVMGetOperand(user, 0) == pointer
                    && LLVMGetNumOperands(user) == 2
                {
                    let index = LLVMGetOperand(user, 1);
                    if LLVMIsAConstantInt(index).is_null() {
                        escaped = true;
                        continue;
                    }
                    let size = LLVMABISizeOfType(layout, LLVMGetGEPSourceElementType(user));
                    let bytes = LLVMConstIntGetSExtValue(index) * size as i64;
                    work.push((user, at + bytes));
                } else if !LLVMIsALoadInst(user).is_null() {
                    deepest = deepest.min(at.div_euclid(SLOT));
                } else if !LLVMIsAStoreInst(user).is_null() && LLVMGetOperand(user, 1) == pointer {
                    // Stored *to*: a slot; stored *as a value*: the pointer escapes (below).
                    if LLVMGetOperand(user, 0) == pointer {
                        escaped = true;
                    }
                    deepest = deepest.min(at.div_euclid(SLOT));
                } else if let Some(counts) = exit(user) {
                    let args = LLVMGetNumArgOperands(user);
                    let only_sp =
                        (0..args).all(|i| (LLVMGetOperand(user, i) == pointer) == (i == 1));
                    if !only_sp || at % SLOT != 0 {
                        escaped = true;
                    } else if counts {
                        let slots = at / SLOT;
                        agree &= moved.is_none() || moved == Some(slots);
                        moved = Some(slots);
                    }
                } else {
                    escaped = true;
                }
            }
        }
        StackUse {
            moved: moved.filter(|_| agree),
            deepest: (!escaped).then_some(deepest),
        }
    }
}

/// Checks `member`'s stack use (`seen`, by its name) against the stack effect its family
/// declares for its element, if any: the net effect on every member whose IR shows where
/// it leaves `sp`, and that `pop` reaches no deeper than the member entered and left with
/// nothing cached does.
pub fn check(
    family: &Family,
    member: &Member,
    seen: Option<&StackUse>,
    triple: &str,
) -> Result<()> {
    let (Some(c), Some(seen)) = (family.cached, seen) else {
        return Ok(());
    };
    let Some((entry, exit)) = family.member_cache_state(member) else {
        return Ok(());
    };
    // With float slots a state is a number; what moves `sp` is its count of values.
    let (entry, exit) = (c.count(entry), c.count(exit));
    let element = member.element.as_deref();
    let declared = match element.and_then(|e| family.effects.get(e)) {
        Some(e) => *e,
        None => match c.effect {
            Some(e) => e,
            None => return Ok(()),
        },
    };
    let Some(moved) = seen.moved else {
        return Ok(());
    };
    let (pop, push) = (i64::from(declared.pop), i64::from(declared.push));
    let net = moved - entry as i64 + exit as i64;
    // How deep the plain member reaches: it may read deeper than it pops (a guard peeking at
    // values it leaves), so only a declared pop deeper than that is refused.
    let depth = (entry == 0 && exit == 0)
        .then_some(seen.deepest)
        .flatten()
        .map(|deepest| -deepest.min(moved).min(0));
    let wrong_net = net != push - pop;
    let too_deep = depth.filter(|&d| pop > d);
    if !wrong_net && too_deep.is_none() {
        return Ok(());
    }
    let op = element.unwrap_or(&family.name);
    let (found, how) = match too_deep {
        Some(d) if !wrong_net => (
            format!("[{d}, {}] at most", d + net),
            format!(
                "it moves `sp` by {moved:+} slot(s) with nothing cached on entry or exit and \
                 touches no slot below the top {d}"
            ),
        ),
        _ => (
            format!("a net change of {net:+} (push - pop), not {:+}", push - pop),
            format!(
                "entered with {entry} cached value(s) and leaving {exit}, it moves `sp` by \
                 {moved:+} slot(s)"
            ),
        ),
    };
    Err(Error(format!(
        "{}: [[family]] `{}`: op `{op}` declares the stack effect [{pop}, {push}] ([pop, push] \
         in `[family.cached.effects]` or `cached.pop`/`push`), but its member `{}` on \
         {triple} does {found}: {how}; fix the declared effect (a wrong one makes the \
         selection tables pick exits that fill values the stack may not hold)",
        family.manifest, family.name, member.stencil
    )))
}
