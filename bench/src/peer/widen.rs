//! One signature for every instance of a trace that mixes register-cached members with
//! uncached ops. A cached member takes the frame, `sp`, the cache registers and the pinned
//! ones (`cpjit_cached_op`); an uncached op only the frame and `sp`. Stitched code passes
//! the registers through an uncached op untouched (`cpjit.h`: "cached and uncached ops mix
//! freely"), but in one LLVM module a call whose signature is not its callee's is never
//! inlined, and `musttail` needs caller and callee to agree. So in a lowered trace every
//! uncached op is widened to the members' signature, passing its extra parameters on
//! unchanged, and every narrower call to an instance (the shim's, an uncached op's) is made
//! with the wide signature.
//!
//! The templates pass `undef` for the registers past an op's exit state, to parameters
//! clang marks `noundef`; harmless where each op is compiled alone, but undefined behaviour
//! once LLVM sees both sides, so the attribute is dropped from instances' parameters and
//! the calls between them.

use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::{LLVMAttributeFunctionIndex, LLVMOpcode, LLVMTailCallKind};
use inkwell::module::Module;
use inkwell::types::{AsTypeRef, FunctionType};
use inkwell::values::{AsValueRef, FunctionValue};

/// Makes the instances in `module` agree on `wide`: `own` (the instance's function; `None`
/// for the shim, whose C signature stays) widened if narrower, then every call to a function `is_instance` names given `wide`'s
/// signature, and `noundef` dropped from instances' parameters and those calls' arguments.
pub fn agree<'ctx>(
    module: &Module<'ctx>,
    own: Option<FunctionValue<'ctx>>,
    wide: FunctionType<'ctx>,
    is_instance: impl Fn(&str) -> bool,
) {
    let wide = wide.as_type_ref();
    // SAFETY: `own` is a function of `module`, a live module of this thread's context, as
    // is `wide`; every value below comes from them.
    unsafe {
        if let Some(own) = own.map(|f| f.as_value_ref()) {
            let own = if LLVMCountParams(own) < LLVMCountParamTypes(wide) {
                widen(own, wide)
            } else {
                own
            };
            drop_noundef_params(own);
        }
        for f in module.get_functions() {
            let f = f.as_value_ref();
            // A widened op's `musttail` calls must be wide too, the indirect ones (a jump
            // through a link slot) included.
            let wide_caller = LLVMCountParams(f) == LLVMCountParamTypes(wide);
            for (call, to_instance) in calls(f, &is_instance) {
                let narrower = LLVMCountParamTypes(LLVMGetCalledFunctionType(call))
                    < LLVMCountParamTypes(wide);
                let musttail =
                    LLVMGetTailCallKind(call) == LLVMTailCallKind::LLVMTailCallKindMustTail;
                if !(to_instance || musttail && wide_caller) {
                    continue;
                }
                let call = if narrower {
                    rewiden_call(call, f, wide)
                } else {
                    call
                };
                if to_instance {
                    drop_noundef_args(call);
                }
            }
        }
    }
}

/// The `noundef` attribute's kind.
fn noundef() -> u32 {
    let name = "noundef";
    // SAFETY: the name outlives the call.
    unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) }
}

/// # Safety
/// `f` is a function of a live module.
unsafe fn drop_noundef_params(f: LLVMValueRef) {
    // SAFETY: as the caller says; attribute index i + 1 is parameter i.
    unsafe {
        for i in 0..LLVMCountParams(f) {
            LLVMRemoveEnumAttributeAtIndex(f, i + 1, noundef());
        }
    }
}

/// # Safety
/// `call` is a call instruction of a live module.
unsafe fn drop_noundef_args(call: LLVMValueRef) {
    // SAFETY: as the caller says; attribute index i + 1 is argument i.
    unsafe {
        for i in 0..LLVMGetNumArgOperands(call) {
            LLVMRemoveCallSiteEnumAttribute(call, i + 1, noundef());
        }
    }
}

/// The calls in `f`, each with whether its callee is a function `is_instance` names.
///
/// # Safety
/// `f` is a function of a live module.
unsafe fn calls(f: LLVMValueRef, is_instance: &impl Fn(&str) -> bool) -> Vec<(LLVMValueRef, bool)> {
    let mut calls = Vec::new();
    // SAFETY: walking the blocks and instructions of a live function.
    unsafe {
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                if LLVMGetInstructionOpcode(inst) == LLVMOpcode::LLVMCall {
                    let callee = LLVMGetCalledValue(inst);
                    let to_instance =
                        !LLVMIsAFunction(callee).is_null() && is_instance(&value_name(callee));
                    calls.push((inst, to_instance));
                }
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
    }
    calls
}

/// # Safety
/// `v` is a value of a live module.
unsafe fn value_name(v: LLVMValueRef) -> String {
    let mut len = 0;
    // SAFETY: the name is valid for `len` bytes while `v` lives.
    unsafe {
        let p = LLVMGetValueName2(v, &mut len);
        String::from_utf8_lossy(std::slice::from_raw_parts(p.cast(), len)).into_owned()
    }
}

/// A function like `f` of type `wide` (its extra parameters unused) with `f`'s body,
/// name, linkage, calling convention and attributes, in place of `f`.
///
/// # Safety
/// `f` is a defined function of a live module whose parameters are a prefix of `wide`'s.
unsafe fn widen(f: LLVMValueRef, wide: LLVMTypeRef) -> LLVMValueRef {
    // SAFETY: as the caller says; the blocks move from `f` to the new function, `f` is
    // deleted once nothing uses it.
    unsafe {
        let name = value_name(f);
        let module = LLVMGetGlobalParent(f);
        let nf = LLVMAddFunction(module, c"cpjit_widened".as_ptr(), wide);
        LLVMSetFunctionCallConv(nf, LLVMGetFunctionCallConv(f));
        LLVMSetLinkage(nf, LLVMGetLinkage(f));
        let n = LLVMGetAttributeCountAtIndex(f, LLVMAttributeFunctionIndex);
        let mut attrs = vec![std::ptr::null_mut(); n as usize];
        LLVMGetAttributesAtIndex(f, LLVMAttributeFunctionIndex, attrs.as_mut_ptr());
        for a in attrs {
            LLVMAddAttributeAtIndex(nf, LLVMAttributeFunctionIndex, a);
        }
        loop {
            let bb = LLVMGetFirstBasicBlock(f);
            if bb.is_null() {
                break;
            }
            LLVMRemoveBasicBlockFromParent(bb);
            LLVMAppendExistingBasicBlock(nf, bb);
        }
        for i in 0..LLVMCountParams(f) {
            LLVMReplaceAllUsesWith(LLVMGetParam(f, i), LLVMGetParam(nf, i));
        }
        LLVMReplaceAllUsesWith(f, nf);
        LLVMDeleteFunction(f);
        LLVMSetValueName2(nf, name.as_ptr().cast(), name.len());
        nf
    }
}

/// `call` made again with signature `wide`: its arguments, then `caller`'s own parameters
/// in the missing positions where `caller` has them (an uncached op passes the registers
/// on), else `poison` (the shim: nothing is cached yet). Keeps the calling convention and
/// the tail-call kind (`musttail` stays valid: caller and callee are both wide, or the
/// call was not `musttail`).
///
/// # Safety
/// `call` is a call instruction in `caller`, a function of a live module, of the same
/// context as `wide`.
unsafe fn rewiden_call(
    call: LLVMValueRef,
    caller: LLVMValueRef,
    wide: LLVMTypeRef,
) -> LLVMValueRef {
    // SAFETY: as the caller says; the new call replaces the old one, which is then erased.
    unsafe {
        let n = LLVMCountParamTypes(wide) as usize;
        let mut types = vec![std::ptr::null_mut(); n];
        LLVMGetParamTypes(wide, types.as_mut_ptr());
        let given = LLVMGetNumArgOperands(call) as usize;
        let caller_params = LLVMCountParams(caller) as usize;
        let args: Vec<LLVMValueRef> = (0..n)
            .map(|i| {
                if i < given {
                    LLVMGetOperand(call, i as u32)
                } else if i < caller_params
                    && LLVMTypeOf(LLVMGetParam(caller, i as u32)) == types[i]
                {
                    LLVMGetParam(caller, i as u32)
                } else {
                    LLVMGetPoison(types[i])
                }
            })
            .collect();
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(wide));
        LLVMPositionBuilderBefore(builder, call);
        let mut args = args;
        let new = LLVMBuildCall2(
            builder,
            wide,
            LLVMGetCalledValue(call),
            args.as_mut_ptr(),
            n as u32,
            c"".as_ptr(),
        );
        LLVMDisposeBuilder(builder);
        LLVMSetInstructionCallConv(new, LLVMGetInstructionCallConv(call));
        LLVMSetTailCallKind(new, LLVMGetTailCallKind(call));
        LLVMReplaceAllUsesWith(call, new);
        LLVMInstructionEraseFromParent(call);
        new
    }
}

/// The signature every instance of a trace whose stencils' functions have `types` must take:
/// the widest, if any is narrower (else nothing to do).
pub fn widest<'ctx>(types: impl Iterator<Item = FunctionType<'ctx>>) -> Option<FunctionType<'ctx>> {
    let types: Vec<FunctionType<'ctx>> = types.collect();
    let wide = *types.iter().max_by_key(|t| t.count_param_types())?;
    types
        .iter()
        .any(|t| t.count_param_types() < wide.count_param_types())
        .then_some(wide)
}
