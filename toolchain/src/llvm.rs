//! In-process LLVM (inkwell, LLVM 19): target initialisation, bitcode parsing and object
//! emission into memory. The target machine gets the target file's code and relocation
//! models explicitly, because it ignores the IR's `"Code Model"` module flag. Also reads
//! the `annotate` attributes `cpjit.h` marks globals with (`llvm.global.annotations`).

use crate::error::{Error, Result};
use crate::target::Target;
use inkwell::context::Context;
use inkwell::llvm_sys::core::{
    LLVMGetAsString, LLVMGetInitializer, LLVMGetNamedGlobal, LLVMGetNumOperands, LLVMGetOperand,
    LLVMIsAConstantDataSequential, LLVMIsAGlobalVariable,
};
use inkwell::llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::targets::{FileType, InitializationConfig, Target as LlvmTarget, TargetTriple};
use inkwell::OptimizationLevel;
use std::collections::{HashMap, HashSet};
use std::sync::Once;

/// Initialises the X86, AArch64 and RISC-V back ends, including their disassemblers (once).
pub fn initialize() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let config = InitializationConfig {
            asm_parser: true,
            asm_printer: true,
            base: true,
            disassembler: true,
            info: true,
            machine_code: true,
        };
        LlvmTarget::initialize_x86(&config);
        LlvmTarget::initialize_aarch64(&config);
        LlvmTarget::initialize_riscv(&config);
    });
}

/// `"LLVM 19.1.7"`: the linked LLVM's version (part of the digest and the object cache key).
pub fn version() -> Result<String> {
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    // SAFETY: plain out-parameters.
    unsafe { inkwell::llvm_sys::core::LLVMGetVersion(&mut major, &mut minor, &mut patch) };
    if major != 19 {
        return Err(Error(format!(
            "the toolchain is linked against LLVM {major}.{minor}.{patch}, but LLVM 19 is required \
             (set LLVM_SYS_191_PREFIX=/usr/lib/llvm-19 and rebuild)"
        )));
    }
    Ok(format!("LLVM {major}.{minor}.{patch}"))
}

/// Parses bitcode into a module of `context`.
pub fn parse_bitcode<'ctx>(
    context: &'ctx Context,
    bitcode: &[u8],
    name: &str,
) -> Result<Module<'ctx>> {
    let buffer = MemoryBuffer::create_from_memory_range_copy(bitcode, name);
    Module::parse_bitcode_from_buffer(&buffer, context).map_err(|e| {
        Error(format!(
            "cannot parse the bitcode clang produced: {}",
            e.to_string_lossy()
        ))
    })
}

/// The code generator's optimisation level for a set of clang flags (the last `-O` wins,
/// as in clang: `-O0` → none, `-O1` → less, `-O2`/`-Os`/`-Oz` → default, `-O3` → aggressive).
pub fn opt_level(flags: &[String]) -> OptimizationLevel {
    let last = flags
        .iter()
        .rev()
        .find(|f| f.starts_with("-O"))
        .map(String::as_str);
    match last {
        None | Some("-O0") => OptimizationLevel::None,
        Some("-O1") => OptimizationLevel::Less,
        Some("-O3") | Some("-Ofast") => OptimizationLevel::Aggressive,
        Some(_) => OptimizationLevel::Default,
    }
}

/// A short, stable description of the target machine settings (part of the object cache key).
pub fn machine_key(target: &Target, level: OptimizationLevel) -> String {
    format!(
        "{} code_model={} reloc_model={} opt={level:?} {}{} {FUNCTION_SECTIONS_VERSION}",
        target.triple,
        target.code_model,
        target.reloc_model,
        crate::layout::VERSION,
        if crate::layout::splits_cold(target) {
            format!(",{}", crate::layout::SPLIT_VERSION)
        } else if crate::layout::moves_cold_tail(target) {
            format!(",{}", crate::layout::TAIL_VERSION)
        } else {
            String::new()
        }
    )
}

/// Version of [`function_sections`] (part of the object cache key).
const FUNCTION_SECTIONS_VERSION: &str = "function-sections 1";

/// Gives every defined function without an explicit section its own ELF section
/// `.text.<name>`, as clang's `-ffunction-sections` does. That flag only reaches clang's own
/// code generator; this toolchain emits objects in-process, so the equivalent is applied to
/// the module. Without it, the assembler resolves calls between functions of one `.text`
/// without relocations, and static helpers (called directly or through a table of function
/// pointers) could not be followed into the stencil. COFF and Mach-O keep a relocation for
/// every such call (COMDAT sections, `subsections_via_symbols`), so they need nothing.
///
/// With `split` (see `layout::splits_cold`), the functions it names keep no explicit section:
/// the machine function splitter skips a function that has one, and gives each function it
/// splits its own section anyway (basic-block sections are unique per function).
pub fn function_sections(module: &Module, target: &Target, split: Option<&dyn Fn(&str) -> bool>) {
    if target.format != cpjit_model::ObjectFormat::Elf {
        return;
    }
    let mut f = module.get_first_function();
    while let Some(function) = f {
        let is_defined = function.count_basic_blocks() > 0;
        let name = function.get_name().to_string_lossy().into_owned();
        let splits = split.is_some_and(|is_stencil| is_stencil(&name));
        if is_defined && function.get_section().is_none() && !splits {
            function.set_section(Some(&format!(".text.{name}")));
        }
        f = function.get_next_function();
    }
}

/// Emits `module` as an object file for `target`, into memory.
pub fn emit_object(module: &Module, target: &Target, level: OptimizationLevel) -> Result<Vec<u8>> {
    // Only functions given an entry count are split (`layout`), so this is safe to turn on
    // for every target.
    crate::layout::enable_splitting();
    let triple = TargetTriple::create(target.llvm_triple());
    let llvm_target = LlvmTarget::from_triple(&triple).map_err(|e| {
        Error(format!(
            "LLVM has no back end for `{}`: {}",
            target.triple,
            e.to_string_lossy()
        ))
    })?;
    // CPU and features come from each function's "target-cpu"/"target-features" attributes.
    let machine = llvm_target
        .create_target_machine(
            &triple,
            "",
            "",
            level,
            target.llvm_reloc_mode(),
            target.llvm_code_model(),
        )
        .ok_or_else(|| {
            Error(format!(
                "LLVM cannot create a target machine for `{}`",
                target.triple
            ))
        })?;
    let buffer = machine
        .write_to_memory_buffer(module, FileType::Object)
        .map_err(|e| {
            Error(format!(
                "LLVM code generation failed: {}",
                e.to_string_lossy()
            ))
        })?;
    Ok(buffer.as_slice().to_vec())
}

/// The name of an IR value (function, global, ...), empty for an unnamed one. LLVM names are
/// byte strings with an explicit length, not necessarily NUL-free.
///
/// # Safety
/// `value` must be a live value of a live module.
pub unsafe fn value_name(value: inkwell::llvm_sys::prelude::LLVMValueRef) -> String {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut len = 0usize;
        let ptr = inkwell::llvm_sys::core::LLVMGetValueName2(value, &mut len);
        if ptr.is_null() {
            return String::new();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len)).into_owned()
    }
}

/// An inline-asm value's template and constraint string, as the IR spells them (the
/// validator admits `cpjit.h`'s forms by them: `narrow.rs`, `validate/opaque.rs`).
///
/// # Safety
/// `asm` must be an inline-asm value of a live module.
pub unsafe fn inline_asm_strings(asm: LLVMValueRef) -> (String, String) {
    // SAFETY: the caller passes an inline-asm value of a live module (this function's # Safety).
    unsafe {
        let text =
            |get: unsafe extern "C" fn(LLVMValueRef, *mut usize) -> *const std::ffi::c_char| {
                let mut len = 0usize;
                let ptr = get(asm, &mut len);
                if ptr.is_null() {
                    return String::new();
                }
                String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len))
                    .into_owned()
            };
        (
            text(inkwell::llvm_sys::core::LLVMGetInlineAsmAsmString),
            text(inkwell::llvm_sys::core::LLVMGetInlineAsmConstraintString),
        )
    }
}

/// For tests of the inline-asm checks: `judge(call, callee)` of each call in the first block
/// of function `f` of the IR text `ir`, in order.
#[cfg(test)]
pub fn call_verdicts(ir: &str, judge: impl Fn(LLVMValueRef, LLVMValueRef) -> bool) -> Vec<bool> {
    use inkwell::values::{AsValueRef, InstructionOpcode};
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t.ll");
    let module = context.create_module_from_ir(buffer).unwrap();
    let function = module.get_function("f").unwrap();
    let block = function.get_first_basic_block().unwrap();
    block
        .get_instructions()
        .filter(|i| i.get_opcode() == InstructionOpcode::Call)
        .map(|call| {
            // SAFETY: `call` is a call instruction of `module`, alive for the test.
            let callee =
                unsafe { inkwell::llvm_sys::core::LLVMGetCalledValue(call.as_value_ref()) };
            judge(call.as_value_ref(), callee)
        })
        .collect()
}

/// The globals annotated `__attribute__((annotate("<prefix>...")))`, with the text after
/// the prefix (the last such annotation of each).
///
/// # Safety
///
/// `module` must be a live module that no other thread changes meanwhile.
pub unsafe fn annotation_texts(module: LLVMModuleRef, prefix: &str) -> HashMap<usize, String> {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut out = HashMap::new();
        each_annotation(module, |global, text| {
            if let Some(rest) = text.strip_prefix(prefix.as_bytes()) {
                out.insert(global as usize, String::from_utf8_lossy(rest).into_owned());
            }
        });
        out
    }
}

/// The globals that `__attribute__((annotate(annotation)))` marks, from the module's
/// `llvm.global.annotations` table (entries `{ ptr global, ptr string, ... }`).
///
/// # Safety
///
/// `module` must be a live module that no other thread changes meanwhile.
pub unsafe fn annotated_globals(module: LLVMModuleRef, annotation: &str) -> HashSet<usize> {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let mut out = HashSet::new();
        each_annotation(module, |global, text| {
            if text == annotation.as_bytes() {
                out.insert(global as usize);
            }
        });
        out
    }
}

/// Calls `each(global, text)` for every entry of the module's `llvm.global.annotations`
/// table (entries `{ ptr global, ptr string, ... }`), the text without its NUL.
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
unsafe fn each_annotation(module: LLVMModuleRef, mut each: impl FnMut(LLVMValueRef, &[u8])) {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let table = LLVMGetNamedGlobal(module, c"llvm.global.annotations".as_ptr());
        if table.is_null() {
            return;
        }
        let init = LLVMGetInitializer(table);
        if init.is_null() {
            return;
        }
        for i in 0..LLVMGetNumOperands(init).max(0) as u32 {
            let entry = LLVMGetOperand(init, i);
            if entry.is_null() || LLVMGetNumOperands(entry) < 2 {
                continue;
            }
            let global = LLVMGetOperand(entry, 0);
            let text_var = LLVMGetOperand(entry, 1);
            if global.is_null() || text_var.is_null() || LLVMIsAGlobalVariable(text_var).is_null() {
                continue;
            }
            let text = LLVMGetInitializer(text_var);
            if text.is_null() || LLVMIsAConstantDataSequential(text).is_null() {
                continue;
            }
            let mut len = 0usize;
            let ptr = LLVMGetAsString(text, &mut len);
            if ptr.is_null() {
                continue;
            }
            let bytes = std::slice::from_raw_parts(ptr.cast::<u8>(), len);
            each(global, bytes.strip_suffix(b"\0").unwrap_or(bytes));
        }
    }
}
