//! Hot/cold layout at the IR level: in every stencil, a conditional branch between a path
//! that reaches the continuation (`<prefix>CONTINUE`) and one that cannot (a side exit, a
//! jump target, an error return) gets branch weights marking the latter unlikely.
//!
//! The blocks that cannot reach the continuation are also moved to the end of the function.
//! Why: each exit then becomes one conditional branch (`jcc`/`b.cond` to the hole) instead of
//! a branch over an unconditional jump, and the continuation path is laid out last, so its
//! tail call is the stencil's final jump — which the object reader strips, making it a
//! fall-through into the next instance. CPython gets the same effect with a
//! regex pass over assembly; here it is a property of the IR. Branches that already carry
//! weights (e.g. from `__builtin_expect`) are left alone.
//!
//! Where the target splits cold code ([`splits_cold`]: x86-64, AArch64 and riscv64 ELF),
//! every function also gets an entry
//! count, and LLVM's machine function splitter (`-enable-split-machine-functions`, set once
//! per process by [`enable_splitting`]) moves the blocks whose count the weights make 0
//! into `<op>.cold` in `.text.split.<op>`: the object reader makes that the stencil's cold
//! part, which the runtime lays after the trace's hot code, so the hot path ends with the
//! continuation jump (elided: a fall-through) even when a cold block would follow it.
//! The splitter uses basic-block sections, which LLVM 19 supports on ELF only (COFF and
//! Mach-O crash its printer). A function without an entry count is never split.
//!
//! On COFF and Mach-O ([`moves_cold_tail`]) functions get the same weights but no entry
//! count: the cold blocks are laid after the hot path's last continuation jump, and the
//! object reader moves that tail into the stencil's cold part (`object/assemble/tail.rs`;
//! on x86-64 after lengthening the branches into it to `rel32`).
//!
//! The pass is a heuristic, and on some stencils the code generator's answer to it is worse
//! than the set's own layout (measured before this check: an x86-64 binary op grew from 155
//! to 175 B and lost its fall-through). So wherever the pass changed a unit, the pipeline
//! also emits the unit with the set's own layout and keeps, per stencil, the kit's only if
//! it is no worse ([`no_worse`]): the result never has a larger hot part, nor loses a
//! fall-through, against what the set's flags alone give.

use crate::stencil::StencilBuf;
use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use inkwell::llvm_sys::LLVMOpcode;
use inkwell::module::Module;
use inkwell::values::AsValueRef;
use std::collections::HashMap;

/// Weight of the likely successor (as `__builtin_expect`, whose likely weight is 2000).
const LIKELY: u64 = 2000;
const UNLIKELY: u64 = 1;

/// Part of the object cache key: bump when the transformation changes.
pub const VERSION: &str = "layout=favour-continuation-v3,direct-hole-calls-v1";

/// Part of the object cache key of the targets that [`splits_cold`] (only theirs: the
/// others' objects are what they were).
pub const SPLIT_VERSION: &str = "split-cold-v2";

/// Part of the object cache key of the targets whose cold tails the reader moves
/// ([`moves_cold_tail`]): their functions are weighted as a splitting target's are.
pub const TAIL_VERSION: &str = "cold-tail-v1";

/// The likely weight where the target splits: a block the splitter moves must have a count
/// of 0 (it splits below a count of 1), and an exit block reached from several guards adds
/// up their cold edges (with `LIKELY`, the VM's guards that share one exit block kept a
/// count of 1 or more), so cold edges weigh 2^-20 of the entry there.
const LIKELY_SPLIT: u64 = 1 << 20;

/// The entry count given to every stencil function of a splitting target: a block behind
/// `n` cold edges counts `n * ENTRY_COUNT / 2^20`, 0 for any plausible `n`, while a block
/// behind ten ordinary (50/50) branches still counts ~1 and stays hot. Branches weighted
/// by `__builtin_expect` (2000:1) are cold too: `ENTRY_COUNT / 2001` is 0.
const ENTRY_COUNT: u64 = 1000;

/// Whether the toolchain splits cold code out of `target`'s stencils with LLVM's splitter:
/// ELF only (see the module docs).
pub fn splits_cold(target: &crate::target::Target) -> bool {
    target.format == cpjit_model::ObjectFormat::Elf
}

/// Whether the object reader moves the cold tail of `target`'s stencils into their cold
/// part (`object/assemble/tail.rs`): AArch64 and x86-64 COFF and Mach-O, where the splitter
/// cannot run; the branches across the split are decoded by `cpjit_isa` (on x86-64 after
/// lengthening them to `rel32`, `object/assemble/lengthen.rs`).
pub fn moves_cold_tail(target: &crate::target::Target) -> bool {
    use cpjit_model::Arch;
    !splits_cold(target) && matches!(target.arch, Arch::Aarch64 | Arch::X86_64)
}

/// Where a stencil's cold blocks go: the layout pass's part of it ([`favour_continuation`]).
#[derive(Clone, Copy)]
pub enum Cold<'a> {
    /// Where the weights put them, inside the function (x86-64 folds an exit branch into a
    /// conditional tail call; elsewhere the pass leaves the function alone).
    Inline,
    /// Split off by LLVM's splitter ([`splits_cold`]); the functions the predicate names
    /// (the stencils) get an entry count.
    Split(&'a dyn Fn(&str) -> bool),
    /// Laid last in the function, for the object reader to move ([`moves_cold_tail`]).
    Tail,
}

/// Turns on LLVM's machine function splitter for this process (a command-line option of
/// the LLVM library, parsed once): it only splits functions with an entry count, which
/// [`favour_continuation`] gives the functions of splitting targets only.
///
/// AArch64's branch relaxation is turned off with it: it counts any branch to another
/// section as out of range and relaxes each conditional branch into the cold part into a
/// `b.cond` to a trampoline (`b <cold>`) placed after the hot part's continuation jump, which
/// then is no longer the last instruction (measured: 556 of the VM set's 1,121 continuing
/// stencils fell through). Unrelaxed, such a branch keeps its relocation (`CONDBR19`,
/// `TSTBR14`) and becomes a [`HoleValue::Cold`](cpjit_model::HoleValue::Cold) hole that the
/// runtime patches and range-checks. A stencil is far smaller than the ±32 KiB a `tbz`
/// reaches, so no branch within one function needs relaxing (the assembler would refuse
/// one that did, naming the fixup).
pub fn enable_splitting() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let args = [
            c"cpjit".as_ptr(),
            c"-enable-split-machine-functions".as_ptr(),
            c"-aarch64-enable-branch-relax=false".as_ptr(),
        ];
        // SAFETY: two NUL-terminated strings that outlive the call; the overview may be
        // null. Called once, before any code generation reads the option.
        unsafe {
            inkwell::llvm_sys::support::LLVMParseCommandLineOptions(
                args.len() as i32,
                args.as_ptr(),
                std::ptr::null(),
            )
        };
    });
}

/// Makes calls to jump holes (continuation, jump targets) direct calls again under `-fno-plt`, which marks every declared
/// function `nonlazybind` so that calls go through the GOT (`jmp *GOT(%rip)`): a hole is
/// patched in the stencil, never resolved by a dynamic linker, and a continuation jump
/// through a GOT slot could not be elided (the next instance would no longer fall
/// through). Returns how many declarations changed.
pub fn direct_hole_calls(module: &Module, is_jump_hole: impl Fn(&str) -> bool) -> usize {
    let kind_name = "nonlazybind";
    let mut changed = 0;
    // SAFETY: the functions of a live module; the attribute name outlives the calls.
    unsafe {
        let kind = LLVMGetEnumAttributeKindForName(kind_name.as_ptr().cast(), kind_name.len());
        // Data-declared jump holes called through their address: with `RtLibUseGOT` (set by
        // -fno-plt) the x86-64 back end calls any non-function callee through the GOT
        // unless it is known to be local, which hidden visibility says.
        let no_plt = !LLVMGetModuleFlag(module.as_mut_ptr(), c"RtLibUseGOT".as_ptr(), 11).is_null();
        let mut g = LLVMGetFirstGlobal(module.as_mut_ptr());
        while no_plt && !g.is_null() {
            if LLVMIsDeclaration(g) != 0
                && is_jump_hole(&crate::llvm::value_name(g))
                && is_callee(g)
            {
                LLVMSetVisibility(g, inkwell::llvm_sys::LLVMVisibility::LLVMHiddenVisibility);
                changed += 1;
            }
            g = LLVMGetNextGlobal(g);
        }
        for f in module.get_functions() {
            let f = f.as_value_ref();
            if LLVMIsDeclaration(f) == 0 || !is_jump_hole(&crate::llvm::value_name(f)) {
                continue;
            }
            let index = inkwell::llvm_sys::LLVMAttributeFunctionIndex;
            if !LLVMGetEnumAttributeAtIndex(f, index, kind).is_null() {
                LLVMRemoveEnumAttributeAtIndex(f, index, kind);
                changed += 1;
            }
        }
    }
    changed
}

/// What [`favour_continuation`] changed in a module.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Favoured {
    /// Conditional branches given weights.
    pub weighted: usize,
    /// Blocks moved to the end of their function.
    pub moved: usize,
    /// Functions given an entry count (to be split).
    pub counted: usize,
}

impl Favoured {
    /// Whether the module may now give other code than the set's own layout.
    pub fn changed(&self) -> bool {
        self.weighted + self.moved + self.counted > 0
    }
}

/// Adds branch weights in every function defined in `module` and moves its cold blocks
/// last; returns what it changed. Unless `cold` is [`Cold::Inline`], every function gets
/// weights (frame pointer or not, on every architecture); with [`Cold::Split`], every stencil function
/// also gets an entry count, so that the splitter moves its cold blocks out. (The splitter
/// leaves alone a function with an explicit section, so `llvm::function_sections` gives
/// stencil functions none there.)
pub fn favour_continuation(module: &Module, continuation: &str, cold: Cold<'_>) -> Favoured {
    let split = match cold {
        Cold::Split(is_stencil) => Some(is_stencil),
        Cold::Inline | Cold::Tail => None,
    };
    let inline = matches!(cold, Cold::Inline);
    // Only x86-64 folds a branch to a lone tail call into a conditional tail call; on
    // AArch64 (no conditional tail calls) and with frame pointers (Darwin: `pop rbp` before
    // every exit) moving the exits only separates the continuation from the end of the
    // stencil, so the transformation is skipped there (measured: more code and holes),
    // unless the cold blocks leave the stencil's hot part.
    let triple = module.get_triple();
    let mut favoured = Favoured::default();
    if inline && !triple.as_str().to_string_lossy().starts_with("x86_64") {
        return favoured;
    }
    for f in module.get_functions() {
        if f.count_basic_blocks() > 0 && (!inline || !uses_frame_pointer(f.as_value_ref())) {
            let likely = if inline { LIKELY } else { LIKELY_SPLIT };
            // SAFETY: `f` is a function with a body in a live module.
            let (weighted, moved) =
                unsafe { weight_function(f.as_value_ref(), continuation, likely) };
            favoured.weighted += weighted;
            favoured.moved += moved;
            if split.is_some_and(|is_stencil| is_stencil(&f.get_name().to_string_lossy())) {
                // SAFETY: as above.
                unsafe { set_entry_count(f.as_value_ref(), ENTRY_COUNT) };
                favoured.counted += 1;
            }
        }
    }
    favoured
}

/// Why the set's own layout of a stencil is kept rather than the kit's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    /// The own layout falls through into the next instance; the kit's does not.
    LostFallThrough,
    /// The kit's hot part is larger, or as large with more bytes in all and no fall-through
    /// gained (a cost without a gain).
    Larger,
}

/// The bytes of `s` a trace lays out in sequence (its code less the cold part, which the
/// runtime lays after the trace's hot code).
pub fn hot_len(s: &StencilBuf) -> usize {
    s.code.len() - s.cold_len as usize
}

/// Whether the kit's layout of a stencil (`kit`) is worse than the set's own (`own`): it
/// lost the fall-through, or is [`Worse::Larger`].
pub fn worse(kit: &StencilBuf, own: &StencilBuf) -> Option<Worse> {
    if own.elided_continue && !kit.elided_continue {
        return Some(Worse::LostFallThrough);
    }
    let (kit_hot, own_hot) = (hot_len(kit), hot_len(own));
    let gains = kit_hot < own_hot || kit.elided_continue && !own.elided_continue;
    (kit_hot > own_hot || !gains && kit.code.len() > own.code.len()).then_some(Worse::Larger)
}

/// Stencils of one unit that keep the set's own layout, and why (see [`no_worse`]).
pub type OwnKept = Vec<(String, Worse)>;

/// Per stencil of one unit, the kit's layout (`kit`) unless it is [`worse`] than the set's
/// own (`own`, the same unit emitted without the pass): the chosen stencils, in `kit`'s
/// order, and those that kept the own layout. Both lists come from one module, so they
/// name the same stencils; `Err` names the difference otherwise.
pub fn no_worse(
    kit: Vec<StencilBuf>,
    own: Vec<StencilBuf>,
) -> Result<(Vec<StencilBuf>, OwnKept), String> {
    let mut own: HashMap<String, StencilBuf> =
        own.into_iter().map(|s| (s.name.clone(), s)).collect();
    let mut kept = Vec::new();
    let mut chosen = Vec::with_capacity(kit.len());
    for k in kit {
        let Some(o) = own.remove(&k.name) else {
            return Err(format!(
                "stencil {} has no counterpart in the unit emitted with the set's own layout",
                k.name
            ));
        };
        match worse(&k, &o) {
            Some(why) => {
                kept.push((o.name.clone(), why));
                chosen.push(o);
            }
            None => chosen.push(k),
        }
    }
    if let Some(name) = own.keys().min() {
        return Err(format!(
            "stencil {name} of the set's own layout has no counterpart in the kit's"
        ));
    }
    Ok((chosen, kept))
}

/// Sets `!prof !{!"function_entry_count", i64 count}` on `function`.
///
/// # Safety
/// `function` is a function of a live module of the calling thread's context.
unsafe fn set_entry_count(function: LLVMValueRef, count: u64) {
    // SAFETY: the caller passes a function of a live module (this function's # Safety).
    unsafe {
        let context = LLVMGetModuleContext(LLVMGetGlobalParent(function));
        let kind = LLVMGetMDKindIDInContext(context, c"prof".as_ptr(), 4);
        let name = "function_entry_count";
        let mut operands = [
            LLVMMDStringInContext2(context, name.as_ptr().cast(), name.len()),
            LLVMValueAsMetadata(LLVMConstInt(LLVMInt64TypeInContext(context), count, 0)),
        ];
        let node = LLVMMDNodeInContext2(context, operands.as_mut_ptr(), operands.len());
        LLVMGlobalSetMetadata(function, kind, node);
    }
}

/// The function's `"frame-pointer"` attribute asks for one (`"all"` or `"non-leaf"`).
fn uses_frame_pointer(function: LLVMValueRef) -> bool {
    let key = "frame-pointer";
    // SAFETY: a function of a live module; the key outlives the call.
    unsafe {
        let attr = LLVMGetStringAttributeAtIndex(
            function,
            inkwell::llvm_sys::LLVMAttributeFunctionIndex,
            key.as_ptr().cast(),
            key.len() as u32,
        );
        if attr.is_null() {
            return false;
        }
        let mut len = 0;
        let value = LLVMGetStringAttributeValue(attr, &mut len);
        let value = std::slice::from_raw_parts(value.cast::<u8>(), len as usize);
        value != b"none"
    }
}

/// Whether some call instruction calls `global` (rather than only taking its address).
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
unsafe fn is_callee(global: LLVMValueRef) -> bool {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut using = LLVMGetFirstUse(global);
        while !using.is_null() {
            let user = LLVMGetUser(using);
            if !LLVMIsACallInst(user).is_null() && LLVMGetCalledValue(user) == global {
                return true;
            }
            using = LLVMGetNextUse(using);
        }
        false
    }
}

/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
unsafe fn successors(block: LLVMBasicBlockRef) -> Vec<LLVMBasicBlockRef> {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let term = LLVMGetBasicBlockTerminator(block);
        if term.is_null() {
            return Vec::new();
        }
        (0..LLVMGetNumSuccessors(term))
            .map(|i| LLVMGetSuccessor(term, i))
            .collect()
    }
}

/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
unsafe fn calls(block: LLVMBasicBlockRef, callee_name: &str) -> bool {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut inst = LLVMGetFirstInstruction(block);
        while !inst.is_null() {
            if LLVMGetInstructionOpcode(inst) == LLVMOpcode::LLVMCall {
                let callee = LLVMGetCalledValue(inst);
                if !callee.is_null() && crate::llvm::value_name(callee) == callee_name {
                    return true;
                }
            }
            inst = LLVMGetNextInstruction(inst);
        }
        false
    }
}

/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
unsafe fn weight_function(
    function: LLVMValueRef,
    continuation: &str,
    likely: u64,
) -> (usize, usize) {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut blocks = Vec::new();
        let mut block = LLVMGetFirstBasicBlock(function);
        while !block.is_null() {
            blocks.push(block);
            block = LLVMGetNextBasicBlock(block);
        }
        let index: HashMap<LLVMBasicBlockRef, usize> =
            blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let succ: Vec<Vec<usize>> = blocks
            .iter()
            .map(|&b| successors(b).iter().map(|s| index[s]).collect())
            .collect();
        // Which blocks can reach a call of the continuation (a fixpoint over the CFG).
        let mut reaches: Vec<bool> = blocks.iter().map(|&b| calls(b, continuation)).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..blocks.len() {
                if !reaches[i] && succ[i].iter().any(|&s| reaches[s]) {
                    reaches[i] = true;
                    changed = true;
                }
            }
        }
        // Cold blocks go to the end of the function, in their original order: the code
        // generator's first branch folding (before block placement) then sees each guard as a
        // conditional branch *to* a block holding only the exit's tail call and folds the two
        // into one conditional tail call (`jcc`/`b.cond` to the hole). Weights alone would only
        // take effect in block placement, after that folding has run.
        let mut moved = 0;
        if let Some(&last) = blocks.last() {
            let mut tail = last;
            for (i, &b) in blocks.iter().enumerate().skip(1) {
                if !reaches[i] && b != tail {
                    LLVMMoveBasicBlockAfter(b, tail);
                    tail = b;
                    moved += 1;
                }
            }
        }
        let context = LLVMGetModuleContext(LLVMGetGlobalParent(function));
        let prof_kind = LLVMGetMDKindIDInContext(context, c"prof".as_ptr(), 4);
        let i32t = LLVMInt32TypeInContext(context);
        let mut weighted = 0;
        for (i, &b) in blocks.iter().enumerate() {
            let term = LLVMGetBasicBlockTerminator(b);
            let opcode = LLVMGetInstructionOpcode(term);
            let conditional = match opcode {
                LLVMOpcode::LLVMBr => LLVMIsConditional(term) != 0,
                LLVMOpcode::LLVMSwitch => true,
                _ => false,
            };
            if !conditional || !LLVMGetMetadata(term, prof_kind).is_null() {
                continue;
            }
            let hot: Vec<bool> = succ[i].iter().map(|&s| reaches[s]).collect();
            if hot.iter().all(|&h| h) || hot.iter().all(|&h| !h) {
                continue;
            }
            // `!{!"branch_weights", i32 w0, i32 w1, ...}`, one weight per successor in order
            // (for `br`: true, false; for `switch`: default, then the cases).
            let mut operands = vec![LLVMMDStringInContext2(
                context,
                c"branch_weights".as_ptr(),
                "branch_weights".len(),
            )];
            for h in hot {
                let w = if h { likely } else { UNLIKELY };
                operands.push(LLVMValueAsMetadata(LLVMConstInt(i32t, w, 0)));
            }
            let node = LLVMMDNodeInContext2(context, operands.as_mut_ptr(), operands.len());
            LLVMSetMetadata(term, prof_kind, LLVMMetadataAsValue(context, node));
            weighted += 1;
        }
        (weighted, moved)
    }
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
