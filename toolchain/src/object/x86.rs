//! x86-64 instruction forms around a 32-bit PC-relative field: formats whose relocation
//! type does not say whether it is a branch or a RIP-relative operand (COFF `REL32`, Mach-O
//! `SIGNED`) are classified from the bytes before the field, and padding after a final jump
//! is recognised so that the jump can be elided.

/// What instruction a rel32 field at some offset belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rel32Form {
    /// `call rel32` (`E8`), `jmp rel32` (`E9`) or `jcc rel32` (`0F 80..8F`).
    Branch,
    /// `mov r64, [rip + disp32]` (`REX.W 8B /r`, mod 00 rm 101): a load that may be relaxed.
    MovLoad,
    /// `call [rip + disp32]` (`FF 15`) or `jmp [rip + disp32]` (`FF 25`).
    IndirectBranch,
    /// Any other instruction with a RIP-relative memory operand (ModRM mod 00, rm 101).
    RipOperand,
}

/// Classifies the rel32 field at `offset` of `code`, or `None` if the bytes before it are
/// not one of the known forms.
pub fn classify_rel32(code: &[u8], offset: u64) -> Option<Rel32Form> {
    let o = usize::try_from(offset).ok()?;
    if o.checked_add(4)? > code.len() || o == 0 {
        return None;
    }
    let b1 = code[o - 1];
    let b2 = o.checked_sub(2).map(|i| code[i]);
    let b3 = o.checked_sub(3).map(|i| code[i]);
    if b1 == 0xe8 || b1 == 0xe9 || (b2 == Some(0x0f) && (0x80..=0x8f).contains(&b1)) {
        return Some(Rel32Form::Branch);
    }
    if b1 & 0xc7 != 0x05 {
        return None;
    }
    if b2 == Some(0xff) && (b1 == 0x15 || b1 == 0x25) {
        return Some(Rel32Form::IndirectBranch);
    }
    if b2 == Some(0x8b) && b3.is_some_and(|rex| rex & 0xf8 == 0x48) {
        return Some(Rel32Form::MovLoad);
    }
    Some(Rel32Form::RipOperand)
}

/// The length of one padding instruction at the start of `bytes`: `nop` (`90`), `int3`
/// (`CC`), `xchg ax, ax` (`66 90`) or a multi-byte `nop` (`[66]* [2E] 0F 1F /0`, as LLVM
/// emits for code alignment).
pub fn padding_len(bytes: &[u8]) -> Option<usize> {
    match bytes.first()? {
        0x90 | 0xcc => return Some(1),
        _ => {}
    }
    let mut i = 0;
    while bytes.get(i) == Some(&0x66) {
        i += 1;
    }
    if i > 0 && bytes.get(i) == Some(&0x90) {
        return Some(i + 1);
    }
    if bytes.get(i) == Some(&0x2e) {
        i += 1;
    }
    if bytes.get(i) != Some(&0x0f) || bytes.get(i + 1) != Some(&0x1f) {
        return None;
    }
    let modrm = *bytes.get(i + 2)?;
    if modrm & 0x38 != 0 {
        return None; // only /0 is the nop
    }
    let (md, rm) = (modrm >> 6, modrm & 7);
    let sib = usize::from(md != 3 && rm == 4);
    let disp = match (md, rm) {
        (0, 5) => 4,
        (1, _) => 1,
        (2, _) => 4,
        _ => 0,
    };
    let len = i + 3 + sib + disp;
    (len <= bytes.len()).then_some(len)
}

/// All of `bytes` is a sequence of padding instructions.
pub fn is_padding(mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        match padding_len(bytes) {
            Some(n) => bytes = &bytes[n..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_rel32_forms() {
        let call = [0xe8, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&call, 1), Some(Rel32Form::Branch));
        let jne = [0x0f, 0x85, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&jne, 2), Some(Rel32Form::Branch));
        let mov = [0x48, 0x8b, 0x05, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&mov, 3), Some(Rel32Form::MovLoad));
        let mov_r12 = [0x4c, 0x8b, 0x25, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&mov_r12, 3), Some(Rel32Form::MovLoad));
        let call_mem = [0xff, 0x15, 0, 0, 0, 0];
        assert_eq!(
            classify_rel32(&call_mem, 2),
            Some(Rel32Form::IndirectBranch)
        );
        let lea = [0x48, 0x8d, 0x05, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&lea, 3), Some(Rel32Form::RipOperand));
        let add = [0x4c, 0x03, 0x2d, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&add, 3), Some(Rel32Form::RipOperand));
        let imm = [0x48, 0xc7, 0xc0, 0, 0, 0, 0]; // mov rax, imm32: not rip-relative
        assert_eq!(classify_rel32(&imm, 3), None);
        assert_eq!(classify_rel32(&call, 2), None, "field past the end");
        assert_eq!(classify_rel32(&call, 0), None, "no opcode before the field");
    }

    #[test]
    fn recognises_llvm_padding() {
        assert!(is_padding(&[0x90, 0xcc, 0x66, 0x90]));
        assert!(is_padding(&[0x0f, 0x1f, 0x00])); // nopl (%rax)
        assert!(is_padding(&[0x0f, 0x1f, 0x40, 0x00])); // nopl 0(%rax)
        assert!(is_padding(&[0x0f, 0x1f, 0x44, 0x00, 0x00])); // nopl 0(%rax,%rax)
        assert!(is_padding(&[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0])); // 10-byte nop
        assert!(is_padding(&[
            0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0
        ]));
        assert!(!is_padding(&[0xc3]));
        assert!(!is_padding(&[0x0f, 0x1f, 0x44, 0x00])); // cut short
        assert!(!is_padding(&[0x0f, 0x1f, 0x48, 0x00])); // /1 is not a nop
    }
}
