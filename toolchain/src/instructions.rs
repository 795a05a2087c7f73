//! Facts about a stencil's instructions that its relocation types do not record and that
//! need instruction boundaries, which only a decoder walking the code from the function
//! start knows (LLVM's disassembler, [`crate::disasm`]); the facts themselves are
//! `cpjit_isa`'s.
//!
//! COFF's x86-64 `REL32` does not say whether a GOT load (through an `__imp_` slot) has a
//! REX prefix, as ELF's `R_X86_64_REX_GOTPCRELX` does. The object reader therefore maps it to
//! [`HoleKind::X86GotPc32Relaxable`]; here, where the instruction's start is known, a hole
//! whose instruction does carry the prefix becomes [`HoleKind::X86RexGotPc32Relaxable`], so
//! the runtime may turn it into an `imm32` form. Nothing is inferred from the bytes alone.

use cpjit_isa::x86_64::has_rex_prefix;
use cpjit_model::{HoleKind, Section};

use crate::disasm;
use crate::error::Result;
use crate::stencil::StencilBuf;

/// Upgrades the relaxable x86-64 GOT holes of `stencils` whose instruction has a REX prefix
/// (by the disassembly of `triple`) to [`HoleKind::X86RexGotPc32Relaxable`].
pub fn mark_rex_prefixes(triple: &str, stencils: &mut [StencilBuf]) -> Result<()> {
    for s in stencils {
        let candidate = |kind: HoleKind| kind == HoleKind::X86GotPc32Relaxable;
        if !s
            .holes
            .iter()
            .any(|h| h.section == Section::Code && candidate(h.kind))
        {
            continue;
        }
        let instructions = disasm::disassemble(triple, &s.code)?;
        for hole in &mut s.holes {
            if hole.section != Section::Code || !candidate(hole.kind) {
                continue;
            }
            let field = hole.offset as usize;
            let start = instructions
                .iter()
                .find(|i| (i.offset..i.offset + i.len).contains(&hole.offset))
                .map(|i| i.offset as usize);
            if start.is_some_and(|start| has_rex_prefix(&s.code, field, start)) {
                hole.kind = HoleKind::X86RexGotPc32Relaxable;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpjit_model::{Hole, HoleValue};

    fn hole(offset: u32) -> Hole {
        Hole {
            section: Section::Code,
            offset,
            kind: HoleKind::X86GotPc32Relaxable,
            value: HoleValue::Operand(0),
            addend: -4,
        }
    }

    #[test]
    fn only_instructions_that_carry_a_rex_prefix_are_marked() {
        // add al, 0x4c; mov eax, [rip+G]; mov rax, [rip+G]; call [rip+G]; ret
        let code = vec![
            0x04, 0x4c, 0x8b, 0x05, 0, 0, 0, 0, // 0: add al, 0x4c; 2: mov eax
            0x48, 0x8b, 0x05, 0, 0, 0, 0, // 8: mov rax
            0xff, 0x15, 0, 0, 0, 0, // 15: call
            0xc3,
        ];
        let mut stencils = [StencilBuf {
            name: "op_x".into(),
            code,
            code_align: 1,
            data: vec![],
            data_align: 1,
            holes: vec![hole(4), hole(11), hole(17)],
            operands: vec!["X".into()],
            targets: vec![],
            symbols: vec![],
            elided_continue: false,
        }];
        mark_rex_prefixes("x86_64-pc-windows-msvc", &mut stencils).unwrap();
        let kinds: Vec<HoleKind> = stencils[0].holes.iter().map(|h| h.kind).collect();
        assert_eq!(
            kinds,
            [
                HoleKind::X86GotPc32Relaxable,
                HoleKind::X86RexGotPc32Relaxable,
                HoleKind::X86GotPc32Relaxable,
            ]
        );
    }
}
