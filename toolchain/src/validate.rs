//! Validation of the LLVM IR of each stencil before code generation:
//!
//! - a call to a hole symbol (`_JIT_CONTINUE`, `_JIT_<NAME>_TARGET`) must be a `musttail`
//!   call, so it compiles to a jump (the entry shim is exempt: it calls its continuation);
//!   any other path ends in `ret` (back through the shim) or `unreachable`;
//! - no exception-handling control flow (`invoke`, `callbr`, `resume`, ...);
//! - no thread-local globals, no stack-protector attributes;
//! - every referenced symbol is a hole, defined in the same module, or allowed by the
//!   manifest's `allowed_symbols`.
//!
//! Errors name the target, template, stencil and offending instruction or symbol. The walk
//! uses llvm-sys directly because inkwell does not expose constant-expression operands.

use crate::error::Error;
use crate::manifest::Manifest;
use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::LLVMValueRef;
use inkwell::llvm_sys::{LLVMOpcode, LLVMTailCallKind};
use inkwell::module::Module;
use std::collections::{BTreeSet, HashSet};
use std::ffi::CStr;

/// What validation learned about the stencils of one module.
#[derive(Debug, Default, Clone)]
pub struct IrFacts {
    /// Stencils that tail-call `<prefix>CONTINUE` somewhere.
    pub continues: BTreeSet<String>,
    /// Names of the stencil functions defined in the module.
    pub stencils: BTreeSet<String>,
}

/// Where errors happened: `"<target>: <template>"`.
pub struct Site<'a> {
    pub target: &'a str,
    pub template: &'a str,
}

/// Checks every stencil function of `module`; returns all errors found.
pub fn validate(module: &Module, manifest: &Manifest, site: &Site) -> Result<IrFacts, Vec<Error>> {
    let mut v = Validator {
        manifest,
        site,
        errors: Vec::new(),
        facts: IrFacts::default(),
        stencil: String::new(),
        visited: HashSet::new(),
    };
    let module_ref = module.as_mut_ptr();
    // SAFETY: every pointer below comes from this live module and is only read.
    unsafe {
        let mut f = LLVMGetFirstFunction(module_ref);
        while !f.is_null() {
            if LLVMIsDeclaration(f) == 0 {
                let name = value_name(f);
                if manifest.is_stencil_symbol(&name) {
                    v.stencil = name.clone();
                    v.facts.stencils.insert(name.clone());
                    v.visited.clear();
                    v.function(f, manifest.shim.as_deref() == Some(name.as_str()));
                }
            }
            f = LLVMGetNextFunction(f);
        }
        let mut g = LLVMGetFirstGlobal(module_ref);
        while !g.is_null() {
            if LLVMIsThreadLocal(g) != 0 {
                let name = value_name(g);
                v.stencil = String::from("(module)");
                v.error(format!(
                    "thread-local global `{name}` (stencils cannot use thread-local storage)"
                ));
            }
            g = LLVMGetNextGlobal(g);
        }
    }
    if v.errors.is_empty() {
        Ok(v.facts)
    } else {
        Err(v.errors)
    }
}

struct Validator<'a> {
    manifest: &'a Manifest,
    site: &'a Site<'a>,
    errors: Vec<Error>,
    facts: IrFacts,
    stencil: String,
    /// Functions and globals already walked for the current stencil.
    visited: HashSet<usize>,
}

impl Validator<'_> {
    fn error(&mut self, what: String) {
        let msg = format!(
            "{}: {}: stencil `{}`: {what}",
            self.site.target, self.site.template, self.stencil
        );
        if !self.errors.iter().any(|e| e.0 == msg) {
            self.errors.push(Error(msg));
        }
    }

    /// Walks one defined function: `is_entry` is the stencil itself (as opposed to a local
    /// helper it calls); `exempt` relaxes the musttail rule (the entry shim).
    unsafe fn function(&mut self, f: LLVMValueRef, exempt: bool) {
        if !self.visited.insert(f as usize) {
            return;
        }
        for attr in ["ssp", "sspstrong", "sspreq"] {
            let kind = LLVMGetEnumAttributeKindForName(attr.as_ptr().cast(), attr.len());
            if !LLVMGetEnumAttributeAtIndex(f, u32::MAX, kind).is_null() {
                let name = value_name(f);
                self.error(format!(
                    "function `{name}` has the stack-protector attribute `{attr}` (remove -fstack-protector*)"
                ));
            }
        }
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                self.instruction(inst, exempt);
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
    }

    unsafe fn instruction(&mut self, inst: LLVMValueRef, exempt: bool) {
        let opcode = LLVMGetInstructionOpcode(inst);
        match opcode {
            LLVMOpcode::LLVMInvoke
            | LLVMOpcode::LLVMCallBr
            | LLVMOpcode::LLVMResume
            | LLVMOpcode::LLVMCatchSwitch
            | LLVMOpcode::LLVMCatchRet
            | LLVMOpcode::LLVMCleanupRet
            | LLVMOpcode::LLVMLandingPad => {
                self.error(format!("unsupported control flow: `{}`", print(inst)));
                return;
            }
            LLVMOpcode::LLVMCall => self.call(inst, exempt),
            _ => {}
        }
        for i in 0..LLVMGetNumOperands(inst).max(0) as u32 {
            let op = LLVMGetOperand(inst, i);
            if !op.is_null() {
                self.value(op, inst);
            }
        }
    }

    unsafe fn call(&mut self, inst: LLVMValueRef, exempt: bool) {
        let callee = LLVMGetCalledValue(inst);
        if callee.is_null() || LLVMIsAFunction(callee).is_null() {
            return; // Indirect call or inline asm: no symbol involved.
        }
        let name = value_name(callee);
        let prefix = &self.manifest.hole_prefix;
        if !name.starts_with(prefix.as_str()) {
            return; // Checked as a symbol reference with the other operands.
        }
        if name[prefix.len()..] == *"CONTINUE" {
            self.facts.continues.insert(self.stencil.clone());
        }
        let musttail = LLVMGetTailCallKind(inst) == LLVMTailCallKind::LLVMTailCallKindMustTail;
        if !musttail && !exempt {
            self.error(format!(
                "calls hole `{name}` without musttail (use CPJIT_CONTINUE/CPJIT_JUMP): `{}`",
                print(inst)
            ));
        }
    }

    /// Checks a value used by `user` (an instruction): globals are classified, constant
    /// expressions and aggregates are walked, defined globals' initializers too.
    unsafe fn value(&mut self, v: LLVMValueRef, user: LLVMValueRef) {
        if !LLVMIsAGlobalValue(v).is_null() {
            self.global(v, user);
        } else if !LLVMIsAConstant(v).is_null() {
            if !self.visited.insert(v as usize) {
                return;
            }
            for i in 0..LLVMGetNumOperands(v).max(0) as u32 {
                let op = LLVMGetOperand(v, i);
                if !op.is_null() {
                    self.value(op, user);
                }
            }
        }
    }

    unsafe fn global(&mut self, g: LLVMValueRef, user: LLVMValueRef) {
        let name = value_name(g);
        if !LLVMIsAGlobalVariable(g).is_null() && LLVMIsThreadLocal(g) != 0 {
            self.error(format!(
                "uses thread-local global `{name}`: `{}`",
                print(user)
            ));
            return;
        }
        if LLVMIsDeclaration(g) != 0 {
            if name.starts_with("llvm.") && !LLVMIsAFunction(g).is_null() {
                return; // Intrinsics; anything they lower to is checked in the object.
            }
            if !name.starts_with(self.manifest.hole_prefix.as_str())
                && !self.manifest.is_allowed_symbol(&name)
            {
                self.error(format!(
                    "references `{name}`, which is neither a hole (`{}*`), defined in the template, \
                     nor in allowed_symbols: `{}`",
                    self.manifest.hole_prefix,
                    print(user)
                ));
            }
            return;
        }
        if !LLVMIsAFunction(g).is_null() {
            // A local helper that was not inlined: its body ends up next to the stencil.
            if !self.manifest.is_stencil_symbol(&name) {
                self.function(g, false);
            }
        } else if !LLVMIsAGlobalVariable(g).is_null() && self.visited.insert(g as usize) {
            let init = LLVMGetInitializer(g);
            if !init.is_null() {
                self.value(init, user);
            }
        }
    }
}

unsafe fn value_name(v: LLVMValueRef) -> String {
    let mut len = 0usize;
    let ptr = LLVMGetValueName2(v, &mut len);
    if ptr.is_null() {
        return String::new();
    }
    String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len)).into_owned()
}

/// The instruction as LLVM prints it, trimmed and shortened for messages.
unsafe fn print(v: LLVMValueRef) -> String {
    let raw = LLVMPrintValueToString(v);
    let text = CStr::from_ptr(raw).to_string_lossy().trim().to_string();
    LLVMDisposeMessage(raw);
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}
