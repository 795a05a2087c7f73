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
//! On AArch64 COFF and Mach-O ([`moves_cold_tail`]) functions get the same weights but no
//! entry count: the cold blocks are laid after the hot path's last continuation jump, and
//! the object reader moves that tail into the stencil's cold part
//! (`object/assemble/tail.rs`).
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
/// part (`object/assemble/tail.rs`): AArch64 COFF and Mach-O, where the splitter cannot run
/// and the instructions are words the kit decodes (`cpjit_isa::aarch64`).
pub fn moves_cold_tail(target: &crate::target::Target) -> bool {
    !splits_cold(target) && target.arch == cpjit_model::Arch::Aarch64
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
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    use crate::target::test_target;
    use cpjit_model::{Arch, HoleValue, ObjectFormat};

    /// A module for `TRIPLE` (replaced by a target file's LLVM triple).
    const IR_FOR: &str = r#"
target triple = "TRIPLE"

declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr)
declare preserve_nonecc i64 @_JIT_EXIT_TARGET(ptr, ptr)

define preserve_nonecc i64 @op_guard(ptr %f, ptr %sp) {
entry:
  %v = load i64, ptr %sp
  %c = icmp eq i64 %v, 0
  br i1 %c, label %exit, label %next
exit:
  %r = musttail call preserve_nonecc i64 @_JIT_EXIT_TARGET(ptr %f, ptr %sp)
  ret i64 %r
next:
  %s = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}

define preserve_nonecc i64 @op_expect(ptr %f, ptr %sp) {
entry:
  %v = load i64, ptr %sp
  %c = icmp eq i64 %v, 0
  br i1 %c, label %exit, label %next, !prof !0
exit:
  ret i64 7
next:
  %s = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}

define preserve_nonecc i64 @op_both_continue(ptr %f, ptr %sp) {
entry:
  %v = load i64, ptr %sp
  %c = icmp eq i64 %v, 0
  br i1 %c, label %a, label %b
a:
  store i64 1, ptr %sp
  br label %b
b:
  %s = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}

!0 = !{!"branch_weights", i32 5, i32 6}
"#;

    /// The test module for an x86-64 target.
    fn ir() -> String {
        IR_FOR.replace(
            "TRIPLE",
            test_target(Arch::X86_64, ObjectFormat::Elf).llvm_triple(),
        )
    }

    fn printed(name: &str) -> String {
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir().as_bytes(), "t.ll");
        let module = context.create_module_from_ir(buffer).unwrap();
        let favoured = favour_continuation(&module, "_JIT_CONTINUE", Cold::Inline);
        // op_guard's branch; op_guard's and op_expect's exit blocks.
        assert_eq!(
            (favoured.weighted, favoured.moved, favoured.counted),
            (1, 2, 0)
        );
        module.verify().unwrap();
        let text = module.print_to_string().to_string();
        let start = text.find(&format!("@{name}(")).unwrap();
        let end = text[start..].find("\n}").unwrap() + start;
        format!(
            "{}\n{}",
            &text[start..end],
            &text[text.find("\n!").unwrap_or(0)..]
        )
    }

    #[test]
    fn no_plt_declarations_of_holes_become_direct() {
        let ir = ir().replace(
            "declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr)",
            "declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr) #0\ndeclare i64 @helper(ptr) #0\nattributes #0 = { nonlazybind }",
        );
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let module = context.create_module_from_ir(buffer).unwrap();
        let jump = |name: &str| name == "_JIT_CONTINUE";
        assert_eq!(direct_hole_calls(&module, jump), 1);
        let text = module.print_to_string().to_string();
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_string();
        assert!(
            !line("declare preserve_nonecc i64 @_JIT_CONTINUE").contains('#'),
            "{text}"
        );
        assert!(
            line("declare i64 @helper").contains('#'),
            "helpers keep -fno-plt: {text}"
        );
        assert_eq!(direct_hole_calls(&module, jump), 0);
    }

    #[test]
    fn the_exit_side_of_a_guard_is_unlikely() {
        let f = printed("op_guard");
        // true → exit (cold), false → continuation (hot)
        assert!(
            f.contains("br i1 %c, label %exit, label %next, !prof"),
            "{f}"
        );
        assert!(f.contains("!{!\"branch_weights\", i32 1, i32 2000}"), "{f}");
        // ... and laid out after the continuation path.
        assert!(
            f.find("\nnext:").unwrap() < f.find("\nexit:").unwrap(),
            "{f}"
        );
    }

    /// A stencil of `len` bytes, the last `cold` of them its cold part.
    fn sized(name: &str, len: usize, cold: u32, falls_through: bool) -> StencilBuf {
        StencilBuf {
            name: name.into(),
            code: vec![0x90; len],
            code_align: 16,
            init_data: Vec::new(),
            data_len: 0,
            data_align: 1,
            zero_fill: Vec::new(),
            holes: Vec::new(),
            operands: Vec::new(),
            targets: Vec::new(),
            symbols: Vec::new(),
            elided_continue: falls_through,
            cold_len: cold,
            pieces: Vec::new(),
            frame: None,
        }
    }

    #[test]
    fn the_kit_layout_is_worse_when_it_loses_the_fall_through_or_grows_for_nothing() {
        let own = sized("op", 155, 0, true);
        // Issue 43's binary op: larger and no fall-through.
        assert_eq!(
            worse(&sized("op", 175, 0, false), &own),
            Some(Worse::LostFallThrough)
        );
        assert_eq!(
            worse(&sized("op", 150, 0, false), &own),
            Some(Worse::LostFallThrough)
        );
        assert_eq!(worse(&sized("op", 160, 0, true), &own), Some(Worse::Larger));
        // A hot part split smaller is kept though the cold part adds bytes in all.
        assert_eq!(worse(&sized("op", 170, 40, true), &own), None);
        assert_eq!(worse(&sized("op", 154, 4, true), &own), None);
        // As large a hot part and more bytes in all: a cost without a gain.
        assert_eq!(
            worse(&sized("op", 165, 10, true), &own),
            Some(Worse::Larger)
        );
        // A fall-through gained at no size cost, and a smaller guard.
        let own_jumps = sized("op", 33, 0, false);
        assert_eq!(worse(&sized("op", 33, 0, true), &own_jumps), None);
        assert_eq!(worse(&sized("op", 28, 0, false), &own_jumps), None);
        assert_eq!(worse(&sized("op", 33, 0, false), &own_jumps), None);
    }

    #[test]
    fn no_worse_keeps_the_kit_layout_per_stencil_unless_it_is_worse() {
        let kit = vec![sized("a", 28, 0, true), sized("b", 175, 0, false)];
        let own = vec![sized("b", 155, 0, true), sized("a", 33, 0, false)];
        let (chosen, kept) = no_worse(kit, own).unwrap();
        assert_eq!(
            chosen,
            vec![sized("a", 28, 0, true), sized("b", 155, 0, true)]
        );
        assert_eq!(kept, vec![("b".to_string(), Worse::LostFallThrough)]);
        let mismatch = no_worse(vec![sized("a", 1, 0, true)], vec![sized("c", 1, 0, true)]);
        assert!(mismatch
            .unwrap_err()
            .contains("stencil a has no counterpart"));
        let extra = no_worse(Vec::new(), vec![sized("c", 1, 0, true)]);
        assert!(extra
            .unwrap_err()
            .contains("stencil c of the set's own layout"));
    }

    #[test]
    fn other_architectures_and_frame_pointers_are_left_alone() {
        let context = Context::create();
        let aarch64 = IR_FOR.replace(
            "TRIPLE",
            test_target(Arch::Aarch64, ObjectFormat::Elf).llvm_triple(),
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(aarch64.as_bytes(), "a.ll");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert!(!favour_continuation(&module, "_JIT_CONTINUE", Cold::Inline).changed());
        let fp = ir().replace(
            "define preserve_nonecc i64 @op_guard(ptr %f, ptr %sp) {",
            "define preserve_nonecc i64 @op_guard(ptr %f, ptr %sp) #0 {",
        ) + "attributes #0 = { \"frame-pointer\"=\"all\" }\n";
        let buffer = MemoryBuffer::create_from_memory_range_copy(fp.as_bytes(), "f.ll");
        let module = context.create_module_from_ir(buffer).unwrap();
        let favoured = favour_continuation(&module, "_JIT_CONTINUE", Cold::Inline);
        // op_guard is left alone; op_expect (no frame pointer) has its exit moved.
        assert_eq!((favoured.weighted, favoured.moved), (0, 1));
    }

    /// An op of the style "helper call, conditional exit, continue" (the exit path does
    /// work of its own, so it is no conditional tail call): on each splitting target, and
    /// on AArch64 COFF and Mach-O (whose cold tail the reader moves), its exit path becomes
    /// the stencil's cold part, and its hot path falls through.
    #[test]
    fn a_guarded_helper_call_splits_and_falls_through() {
        const IR: &str = r#"
target triple = "TRIPLE"
declare CC i64 @_JIT_CONTINUE(ptr, ptr)
declare CC i64 @_JIT_EXIT_TARGET(ptr, ptr)
declare i64 @helper(ptr)
define CC i64 @op_call_guard(ptr %f, ptr %sp) ATTRS {
entry:
  %h = call i64 @helper(ptr %f)
  %c = icmp eq i64 %h, 0
  br i1 %c, label %exit, label %next
exit:
  store i64 7, ptr %sp
  %r = musttail call CC i64 @_JIT_EXIT_TARGET(ptr %f, ptr %sp)
  ret i64 %r
next:
  store i64 %h, ptr %sp
  %s = musttail call CC i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}
"#;
        crate::llvm::initialize();
        // RISC-V has no preserve_none (its ops use the C convention).
        for (arch, cc) in [
            (Arch::X86_64, "preserve_nonecc "),
            (Arch::Aarch64, "preserve_nonecc "),
            (Arch::Riscv64, ""),
        ] {
            let target = test_target(arch, ObjectFormat::Elf);
            let ir = IR
                .replace("TRIPLE", target.llvm_triple())
                .replace("CC ", cc)
                .replace("ATTRS", "uwtable");
            split_and_read(&target, &ir);
        }
        for format in [ObjectFormat::Coff, ObjectFormat::MachO] {
            let target = test_target(Arch::Aarch64, format);
            assert!(!splits_cold(&target) && moves_cold_tail(&target));
            // Built without unwind tables, as the pipeline builds these formats.
            let ir = IR
                .replace("TRIPLE", target.llvm_triple())
                .replace("CC ", "preserve_nonecc ")
                .replace("ATTRS", "nounwind");
            split_and_read(&target, &ir);
        }
    }

    /// Compiles `ir` (one stencil function) for `target` as the pipeline does, and checks
    /// that its exit is in its cold part and its hot part falls through.
    fn split_and_read(target: &crate::target::Target, ir: &str) {
        let split = splits_cold(target);
        assert!(split || moves_cold_tail(target));
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "s.ll");
        let module = context.create_module_from_ir(buffer).unwrap();
        let is_stencil = |name: &str| name.starts_with("op_");
        let (cold, sections) = if split {
            (
                Cold::Split(&is_stencil),
                Some(&is_stencil as &dyn Fn(&str) -> bool),
            )
        } else {
            (Cold::Tail, None)
        };
        favour_continuation(&module, "_JIT_CONTINUE", cold);
        crate::llvm::function_sections(&module, target, sections);
        let object =
            crate::llvm::emit_object(&module, target, inkwell::OptimizationLevel::Default).unwrap();
        let select = |name: &str| !name.ends_with(".cold") && is_stencil(name);
        let limits = crate::manifest::Limits::default();
        let options = crate::object::ReadOptions {
            target: &target.triple,
            arch: target.arch,
            format: target.format,
            template: "s.ll",
            hole_prefix: "_JIT_",
            target_suffix: "_TARGET",
            select: &select,
            limits: &limits,
            move_cold_tail: !split,
        };
        let mut stencils = crate::object::read_stencils(&object, &options).unwrap();
        crate::frame::derive(target, &object, &mut stencils).unwrap();
        let [s] = &stencils[..] else {
            panic!("{stencils:?}")
        };
        // Split, both parts have a frame layout (on AArch64 the cold part's call-frame
        // program continues the hot part's, see `frame::eh_frame`). The formats whose tails
        // are moved have no layouts read.
        match &s.frame {
            Some(crate::frame::DerivedFrame::Functions(parts)) if split => {
                assert_eq!(parts.len(), 2, "{parts:?}")
            }
            Some(crate::frame::DerivedFrame::Unknown(_)) if !split => {}
            other => panic!("{other:?}"),
        }
        assert!(s.cold_len > 0, "{}", s.to_text());
        assert!(s.elided_continue, "{}", s.to_text());
        let hot_len = (s.code.len() - s.cold_len as usize) as u32;
        // The hot part branches into the cold part, which holds the exit.
        let cold_branch = s.holes.iter().find(|h| h.value == HoleValue::Cold);
        assert!(
            cold_branch.is_some_and(|h| h.offset < hot_len),
            "{}",
            s.to_text()
        );
        let exit = s
            .holes
            .iter()
            .find(|h| matches!(h.value, HoleValue::Target(_)));
        assert!(exit.is_some_and(|h| h.offset >= hot_len), "{}", s.to_text());
    }

    #[test]
    fn existing_weights_and_all_hot_branches_are_left_alone() {
        let f = printed("op_expect");
        assert!(f.contains("i32 5, i32 6"), "{f}");
        let g = printed("op_both_continue");
        assert!(g.contains("br i1 %c, label %a, label %b\n"), "{g}");
    }
}
