//! `cpjit.h`'s opaque-value barrier, `CPJIT_OPAQUE(x)`: `__asm__("" : "+r"(x))`, an empty
//! template whose one operand is read and written in the same register. It emits no
//! instruction and changes no value; it only hides from the compiler what it knew of `x`
//! (so that, told `d == x` by a compare, LLVM cannot pass the constant `x` in `d`'s register
//! on the taken path, which costs a `mov` in a cold stub). The IR check refuses inline
//! assembly in stencils, except `cpjit.h`'s narrow-operand reads (`narrow.rs`) and exactly
//! this form ([`is_opaque_asm`]): the template is empty, so no instruction of it escapes the
//! checks of the code LLVM generates around it.

use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::{LLVMInlineAsmDialect, LLVMTypeKind};

/// The constraints clang gives `"+r"(x)`: the result in a register, tied to operand 0;
/// on x86 with the clobbers clang adds to every x86 inline assembly (it cannot know that
/// an empty template touches no flags).
const OPAQUE_CONSTRAINTS: [&str; 2] = ["=r,0", "=r,0,~{dirflag},~{fpsr},~{flags}"];

/// Whether `call`, a call of the inline assembly `asm`, is `CPJIT_OPAQUE(x)`: the empty
/// template, the constraints of [`OPAQUE_CONSTRAINTS`], not volatile, no aligned stack, no
/// unwinding, AT&T dialect, and one operand of the result's type, an integer of at most 64
/// bits or a pointer.
///
/// # Safety
/// `call` must be a call instruction whose called value is `asm`, an inline-asm value.
pub unsafe fn is_opaque_asm(call: LLVMValueRef, asm: LLVMValueRef) -> bool {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let (template, constraints) = crate::llvm::inline_asm_strings(asm);
        if !template.is_empty()
            || !OPAQUE_CONSTRAINTS.contains(&constraints.as_str())
            || LLVMGetInlineAsmHasSideEffects(asm) != 0
            || LLVMGetInlineAsmNeedsAlignedStack(asm) != 0
            || LLVMGetInlineAsmCanUnwind(asm) != 0
            || LLVMGetInlineAsmDialect(asm) != LLVMInlineAsmDialect::LLVMInlineAsmDialectATT
            || LLVMGetNumArgOperands(call) != 1
        {
            return false;
        }
        let ty = LLVMGetInlineAsmFunctionType(asm);
        if LLVMCountParamTypes(ty) != 1 || LLVMIsFunctionVarArg(ty) != 0 {
            return false;
        }
        let mut param: LLVMTypeRef = std::ptr::null_mut();
        LLVMGetParamTypes(ty, &mut param);
        let result = LLVMGetReturnType(ty);
        result == param && register_sized(result)
    }
}

/// An integer of at most 64 bits or a pointer: what one general register holds on every
/// target.
///
/// # Safety
/// `ty` belongs to a live context of the calling thread.
unsafe fn register_sized(ty: LLVMTypeRef) -> bool {
    // SAFETY: the caller passes a live type (this function's # Safety).
    unsafe {
        match LLVMGetTypeKind(ty) {
            LLVMTypeKind::LLVMIntegerTypeKind => LLVMGetIntTypeWidth(ty) <= 64,
            LLVMTypeKind::LLVMPointerTypeKind => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each form's verdict: `CPJIT_OPAQUE`'s (the last as clang emits it on x86) only.
    #[test]
    fn only_the_empty_tied_register_form_is_opaque() {
        let forms: [(&str, bool); 17] = [
            (r#"i64 asm "", "=r,0"(i64 %a)"#, true),
            (
                r#"i32 asm "", "=r,0,~{dirflag},~{fpsr},~{flags}"(i32 %b)"#,
                true,
            ),
            (
                r#"ptr asm "", "=r,0,~{dirflag},~{fpsr},~{flags}"(ptr %p)"#,
                true,
            ),
            (r#"i8 asm "", "=r,0"(i8 %c)"#, true),
            // Not empty, volatile, another constraint or clobber, another type or dialect.
            (r#"i64 asm "ret", "=r,0"(i64 %a)"#, false),
            (r#"i64 asm " ", "=r,0"(i64 %a)"#, false),
            (r#"i64 asm sideeffect "", "=r,0"(i64 %a)"#, false),
            (r#"i64 asm "", "=r,0,~{memory}"(i64 %a)"#, false),
            (r#"i64 asm "", "=r,0,~{x20}"(i64 %a)"#, false),
            (r#"i64 asm "", "=r,r"(i64 %a)"#, false),
            (r#"i64 asm "", "=m,0"(i64 %a)"#, false),
            (r#"double asm "", "=r,0"(double %d)"#, false),
            (r#"i128 asm "", "=r,0"(i128 %w)"#, false),
            (r#"i64 asm alignstack "", "=r,0"(i64 %a)"#, false),
            (r#"i64 asm inteldialect "", "=r,0"(i64 %a)"#, false),
            (r#"i64 asm "", "=r,0,~{dirflag},~{fpsr}"(i64 %a)"#, false),
            (
                r#"i64 asm "", "=r,0,~{dirflag},~{fpsr},~{flags}"(i64 %a) #0, !srcloc !0"#,
                true,
            ),
        ];
        let calls: String = forms
            .iter()
            .enumerate()
            .map(|(k, (form, _))| format!("  %{} = tail call {form}\n", k + 1))
            .collect();
        let ir = format!(
            "define i64 @f(i64 %a, i32 %b, ptr %p, i8 %c, double %d, i128 %w) {{\n{calls}  ret i64 0\n}}\n\
             attributes #0 = {{ nounwind memory(none) }}\n!0 = !{{i64 1}}\n"
        );
        let verdicts = crate::llvm::call_verdicts(&ir, |call, callee| {
            // SAFETY: `call` is a call of the inline assembly `callee`, in a live module.
            unsafe { is_opaque_asm(call, callee) }
        });
        let want: Vec<bool> = forms.iter().map(|(_, admitted)| *admitted).collect();
        assert_eq!(verdicts, want);
    }
}
