//! In-process LLVM (inkwell, LLVM 19): target initialisation, bitcode parsing and object
//! emission into memory. The target machine gets the target file's code and relocation
//! models explicitly, because it ignores the IR's `"Code Model"` module flag.

use crate::error::{Error, Result};
use crate::target::Target;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::targets::{FileType, InitializationConfig, Target as LlvmTarget, TargetTriple};
use inkwell::OptimizationLevel;
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
        "{} code_model={} reloc_model={} opt={level:?} {} {FUNCTION_SECTIONS_VERSION}",
        target.triple,
        target.code_model,
        target.reloc_model,
        crate::layout::VERSION
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
pub fn function_sections(module: &Module, target: &Target) {
    if target.format != cpjit_model::ObjectFormat::Elf {
        return;
    }
    let mut f = module.get_first_function();
    while let Some(function) = f {
        let is_defined = function.count_basic_blocks() > 0;
        if is_defined && function.get_section().is_none() {
            let name = function.get_name().to_string_lossy().into_owned();
            function.set_section(Some(&format!(".text.{name}")));
        }
        f = function.get_next_function();
    }
}

/// Emits `module` as an object file for `target`, into memory.
pub fn emit_object(module: &Module, target: &Target, level: OptimizationLevel) -> Result<Vec<u8>> {
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
    let mut len = 0usize;
    let ptr = inkwell::llvm_sys::core::LLVMGetValueName2(value, &mut len);
    if ptr.is_null() {
        return String::new();
    }
    String::from_utf8_lossy(std::slice::from_raw_parts(ptr.cast::<u8>(), len)).into_owned()
}
