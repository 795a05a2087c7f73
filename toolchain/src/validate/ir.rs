//! Reading LLVM IR for the validator's checks and messages: type and value text, calling
//! convention names, a module's symbols, undefined values, indirect tail calls.

use super::{C_CC, PRESERVE_NONE_CC};
use crate::llvm;
use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::LLVMTailCallKind;
use std::ffi::CStr;

/// A type as LLVM prints it (`i64 (ptr, ptr)`).
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
pub(super) unsafe fn function_type_text(ty: LLVMTypeRef) -> String {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let raw = LLVMPrintTypeToString(ty);
        let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
        LLVMDisposeMessage(raw);
        text
    }
}

pub(super) fn shorten(text: &str) -> String {
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

pub(super) fn calling_convention_name(cc: u32) -> String {
    match cc {
        C_CC => "the C calling convention".into(),
        PRESERVE_NONE_CC => "preserve_none".into(),
        8 => "fastcc".into(),
        9 => "coldcc".into(),
        14 => "preserve_most".into(),
        15 => "preserve_all".into(),
        64 => "x86_stdcallcc".into(),
        78 => "x86_64_sysvcc".into(),
        79 => "win64cc".into(),
        other => format!("LLVM calling convention {other}"),
    }
}

/// The names of the module's functions and global variables.
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
pub(super) unsafe fn module_symbols(module: LLVMModuleRef) -> Vec<String> {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut names = Vec::new();
        let mut f = LLVMGetFirstFunction(module);
        while !f.is_null() {
            names.push(llvm::value_name(f));
            f = LLVMGetNextFunction(f);
        }
        let mut g = LLVMGetFirstGlobal(module);
        while !g.is_null() {
            names.push(llvm::value_name(g));
            g = LLVMGetNextGlobal(g);
        }
        names
    }
}

/// Whether `v` carries no value: `undef`, `poison`, or a `freeze` of one.
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
pub(super) unsafe fn is_no_value(v: LLVMValueRef) -> bool {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        if !LLVMIsAUndefValue(v).is_null() || !LLVMIsAPoisonValue(v).is_null() {
            return true;
        }
        !LLVMIsAFreezeInst(v).is_null() && is_no_value(LLVMGetOperand(v, 0))
    }
}

/// Whether `inst` is a musttail call through a pointer (not of a named function or hole).
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
pub(super) unsafe fn is_indirect_musttail(inst: LLVMValueRef) -> bool {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        if LLVMIsACallInst(inst).is_null()
            || LLVMGetTailCallKind(inst) != LLVMTailCallKind::LLVMTailCallKindMustTail
        {
            return false;
        }
        let callee = LLVMGetCalledValue(inst);
        !callee.is_null() && LLVMIsAGlobalValue(callee).is_null()
    }
}

/// Why function `f` of a module for `triple` cannot take `double` arguments in FP
/// registers, if it cannot: a float cache slot would then be passed in general registers
/// or on the stack (x86-64 without SSE2, AArch64 without FP, RISC-V with an ABI other than
/// LP64D, whose `double` arguments go in integer registers).
///
/// # Safety
/// `f` is a function of a live module of the calling thread's context.
pub(super) unsafe fn no_fp_arguments(f: LLVMValueRef, triple: &str) -> Option<String> {
    // SAFETY: the caller passes a function of a live module (this function's # Safety).
    unsafe {
        let key = "target-features";
        let attr = LLVMGetStringAttributeAtIndex(
            f,
            inkwell::llvm_sys::LLVMAttributeFunctionIndex,
            key.as_ptr().cast(),
            key.len() as u32,
        );
        let features = match attr.is_null() {
            true => String::new(),
            false => {
                let mut len = 0;
                let text = LLVMGetStringAttributeValue(attr, &mut len);
                String::from_utf8_lossy(std::slice::from_raw_parts(text.cast(), len as usize))
                    .into_owned()
            }
        };
        let off = |feature: &str| features.split(',').any(|f| f == feature);
        if triple.starts_with("x86_64") && off("-sse2") {
            return Some("SSE2 is off (-sse2 in its target features; drop -mno-sse*)".into());
        }
        if triple.starts_with("aarch64") && off("-fp-armv8") {
            return Some("FP is off (-fp-armv8; drop -mgeneral-regs-only)".into());
        }
        if triple.starts_with("riscv64") {
            let abi = module_flag_text(LLVMGetGlobalParent(f), "target-abi");
            if abi.as_deref() != Some("lp64d") {
                return Some(format!(
                    "its ABI is {} (doubles are passed in FP registers only under lp64d: \
                     -march=rv64gc -mabi=lp64d)",
                    abi.unwrap_or_else(|| "not stated".into())
                ));
            }
        }
        None
    }
}

/// A module flag's string value (`!{i32 1, !"target-abi", !"lp64d"}`).
///
/// # Safety
/// `module` is a live module of the calling thread's context.
unsafe fn module_flag_text(module: LLVMModuleRef, key: &str) -> Option<String> {
    // SAFETY: the caller passes a live module (this function's # Safety).
    unsafe {
        let flag = LLVMGetModuleFlag(module, key.as_ptr().cast(), key.len());
        if flag.is_null() {
            return None;
        }
        let value = LLVMMetadataAsValue(LLVMGetModuleContext(module), flag);
        let mut len = 0;
        let text = LLVMGetMDString(value, &mut len);
        (!text.is_null()).then(|| {
            String::from_utf8_lossy(std::slice::from_raw_parts(text.cast(), len as usize))
                .into_owned()
        })
    }
}
