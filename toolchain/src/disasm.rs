//! In-process disassembly with LLVM's disassembler (llvm-sys `LLVMCreateDisasm`), used for
//! the reserved-register check and for listings (`stencils show`, generated-crate comments).

use crate::error::{Error, Result};
use inkwell::llvm_sys::disassembler::*;
use std::ffi::{CStr, CString};

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub offset: u32,
    pub len: u32,
    /// Normalised text: mnemonic and operands separated by single spaces.
    pub text: String,
}

/// Disassembles `code` for `triple`. Bytes that do not decode become a `.byte` line
/// (one byte for x86, four for AArch64, two for RISC-V), so a listing always covers every byte.
pub fn disassemble(triple: &str, code: &[u8]) -> Result<Vec<Instruction>> {
    crate::llvm::initialize();
    let c_triple = CString::new(triple).map_err(|_| Error(format!("bad triple `{triple}`")))?;
    // SAFETY: the context is created, used on this thread only and disposed below; the
    // buffers passed to LLVM outlive each call.
    unsafe {
        // LLVM's RISC-V disassembler decodes only the base ISA unless told the extensions:
        // every standard one a riscv64 target may compile for (G and C), so no stencil
        // instruction is left undecoded (and unchecked for reserved registers).
        let dc = if triple.starts_with("riscv") {
            LLVMCreateDisasmCPUFeatures(
                c_triple.as_ptr(),
                c"generic-rv64".as_ptr(),
                c"+m,+a,+f,+d,+c,+zicsr,+zifencei".as_ptr(),
                std::ptr::null_mut(),
                0,
                None,
                None,
            )
        } else {
            LLVMCreateDisasm(c_triple.as_ptr(), std::ptr::null_mut(), 0, None, None)
        };
        if dc.is_null() {
            return Err(Error(format!("LLVM has no disassembler for `{triple}`")));
        }
        LLVMSetDisasmOptions(dc, LLVMDisassembler_Option_PrintImmHex);
        let step_on_failure = if triple.starts_with("aarch64") {
            4
        } else if triple.starts_with("riscv") {
            2
        } else {
            1
        };
        let mut out = Vec::new();
        let mut offset = 0usize;
        let mut text = [0 as std::ffi::c_char; 256];
        while offset < code.len() {
            let rest = &code[offset..];
            let n = LLVMDisasmInstruction(
                dc,
                rest.as_ptr() as *mut u8,
                rest.len() as u64,
                offset as u64,
                text.as_mut_ptr(),
                text.len(),
            );
            let (len, line) = if n == 0 {
                let len = step_on_failure.min(rest.len());
                let bytes: Vec<String> = rest[..len].iter().map(|b| format!("0x{b:02x}")).collect();
                (len, format!(".byte {}", bytes.join(", ")))
            } else {
                let raw = CStr::from_ptr(text.as_ptr()).to_string_lossy();
                (n, raw.split_whitespace().collect::<Vec<_>>().join(" "))
            };
            out.push(Instruction {
                offset: offset as u32,
                len: len as u32,
                text: line,
            });
            offset += len;
        }
        LLVMDisasmDispose(dc);
        Ok(out)
    }
}

/// Whether the instruction text mentions register `reg` as a whole token (so `x18` does
/// not match `x1` or `0x18`).
pub fn uses_register(text: &str, reg: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|token| token == reg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::test_target;
    use cpjit_model::{Arch, ObjectFormat};

    #[test]
    fn decodes_x86_and_aarch64() {
        let x86 = test_target(Arch::X86_64, ObjectFormat::Elf);
        let x86 = disassemble(x86.llvm_triple(), &[0x48, 0x89, 0xc8, 0xc3]).unwrap();
        assert_eq!(x86.len(), 2);
        assert_eq!((x86[1].offset, x86[1].text.as_str()), (3, "retq"));
        // mov x18, #1 ; ret
        let a64 = disassemble(
            test_target(Arch::Aarch64, ObjectFormat::MachO).llvm_triple(),
            &[0x32, 0x00, 0x80, 0xd2, 0xc0, 0x03, 0x5f, 0xd6],
        )
        .unwrap();
        assert_eq!(a64.len(), 2);
        assert!(uses_register(&a64[0].text, "x18"), "{}", a64[0].text);
        assert!(!uses_register(&a64[1].text, "x18"));
    }

    #[test]
    fn undecodable_bytes_are_listed() {
        let a64 = test_target(Arch::Aarch64, ObjectFormat::Elf);
        let out = disassemble(a64.llvm_triple(), &[0, 0, 0, 0]).unwrap();
        assert_eq!(out[0].len, 4);
        assert!(
            out[0].text.starts_with(".byte") || out[0].text.starts_with("udf"),
            "{}",
            out[0].text
        );
    }

    #[test]
    fn register_tokens() {
        assert!(uses_register("mov w18, #0x1", "w18"));
        assert!(!uses_register("mov x1, #0x18", "x18"));
        assert!(!uses_register("ldr x180", "x18"));
    }
}
