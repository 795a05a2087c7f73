//! Facts about a stencil's instructions that its relocation types do not record and that
//! need instruction boundaries, which only a decoder walking the code from the function
//! start knows (LLVM's disassembler, [`crate::disasm`]); the facts themselves are
//! `cpjit_isa`'s.
//!
//! Which x86-64 GOT references the runtime may rewrite: ELF says it in the relocation type
//! (`R_X86_64_REX_GOTPCRELX` on any `mov`, `test` or ALU operation with a REX prefix), but
//! COFF's `REL32` against an `__imp_` slot says nothing, and Mach-O's `GOT_LOAD` covers only
//! `movq` while its `GOT` covers every other use. Here, where each instruction's start is
//! known, a GOT hole becomes [`HoleKind::X86RexGotPc32Relaxable`] when its instruction has a
//! REX prefix and is a `mov`, `test` or ALU use of the slot (the forms with an `imm32`
//! rewrite), and a plain [`HoleKind::X86GotPc32`] on `mov`/`call`/`jmp` becomes
//! [`HoleKind::X86GotPc32Relaxable`]. Nothing is inferred from the bytes alone.

use cpjit_isa::x86_64::{decode_got_site, has_rex_prefix, GotUse};
use cpjit_model::{Hole, HoleKind, Section};

use crate::disasm;
use crate::error::Result;
use crate::stencil::StencilBuf;

/// Gives every x86-64 GOT hole of `stencils` the most rewritable kind its instruction (by
/// the disassembly of `triple`) allows.
pub fn mark_relaxable_got_uses(triple: &str, stencils: &mut [StencilBuf]) -> Result<()> {
    let candidate = |h: &Hole| {
        h.section == Section::Code
            && matches!(h.kind, HoleKind::X86GotPc32 | HoleKind::X86GotPc32Relaxable)
    };
    for s in stencils {
        if !s.holes.iter().any(candidate) {
            continue;
        }
        let instructions = disasm::disassemble(triple, &s.code)?;
        for hole in s.holes.iter_mut().filter(|h| candidate(h)) {
            let start = instructions
                .iter()
                .find(|i| (i.offset..i.offset + i.len).contains(&hole.offset))
                .map(|i| i.offset as usize);
            if let Some(start) = start {
                hole.kind = relaxable_kind(&s.code, hole.offset as usize, start, hole.kind);
            }
        }
    }
    Ok(())
}

/// The kind for a GOT hole of kind `kind` at `field` in the instruction starting at `start`.
fn relaxable_kind(code: &[u8], field: usize, start: usize, kind: HoleKind) -> HoleKind {
    let rex = has_rex_prefix(code, field, start);
    let Ok(site) = decode_got_site(code, field, rex) else {
        return kind;
    };
    match site.usage {
        GotUse::Mov | GotUse::Test | GotUse::Alu(_) if rex => HoleKind::X86RexGotPc32Relaxable,
        GotUse::Mov | GotUse::Call | GotUse::Jmp => HoleKind::X86GotPc32Relaxable,
        GotUse::Test | GotUse::Alu(_) | GotUse::Other => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpjit_model::{Arch, HoleValue, ObjectFormat};

    fn hole(offset: u32, kind: HoleKind) -> Hole {
        Hole {
            section: Section::Code,
            offset,
            kind,
            value: HoleValue::Operand(0),
            addend: -4,
        }
    }

    #[test]
    fn kinds_follow_the_decoded_instruction() {
        use HoleKind::X86RexGotPc32Relaxable as RexRelax;
        use HoleKind::{X86GotPc32 as Got, X86GotPc32Relaxable as Relax};
        let code = vec![
            0x04, 0x4c, 0x8b, 0x05, 0, 0, 0, 0, // 0: add al, 0x4c; 2: mov eax, [rip+G]
            0x48, 0x8b, 0x05, 0, 0, 0, 0, // 8: mov rax, [rip+G]
            0xff, 0x15, 0, 0, 0, 0, // 15: call [rip+G]
            0x4c, 0x03, 0x2d, 0, 0, 0, 0, // 21: add r13, [rip+G]
            0x48, 0x0f, 0xaf, 0x05, 0, 0, 0, 0, // 28: imul rax, [rip+G]
            0x8b, 0x05, 0, 0, 0, 0, // 36: mov eax, [rip+G]
            0xc3,
        ];
        let holes = [
            (4, Relax),
            (11, Relax),
            (17, Relax),
            (24, Got),
            (32, Got),
            (38, Got),
        ];
        let mut stencils = [StencilBuf {
            holes: holes.iter().map(|&(at, kind)| hole(at, kind)).collect(),
            operands: vec!["X".into()],
            ..StencilBuf::plain("op_x", code)
        }];
        let coff = crate::target::test_target(Arch::X86_64, ObjectFormat::Coff);
        mark_relaxable_got_uses(coff.llvm_triple(), &mut stencils).unwrap();
        let kinds: Vec<HoleKind> = stencils[0].holes.iter().map(|h| h.kind).collect();
        // The `mov eax` after `add al, 0x4c` has no REX prefix: its 4c is the add's.
        assert_eq!(kinds, [Relax, RexRelax, Relax, RexRelax, Got, Relax]);
    }
}
