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
