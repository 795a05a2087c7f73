//! x86-64: the instruction forms around a 32-bit displacement field (branch, RIP-relative
//! operand, GOT reference), the GOT relaxations into direct and immediate forms (as lld's
//! `relaxGot` and `relaxGotNoPic` in `lld/ELF/Arch/X86_64.cpp` do them), padding, the
//! `jmp rel32` of continuations and the veneer; and the direct `jmp`/`jcc` in their `rel8`
//! and `rel32` forms, decoded and re-encoded whole (the toolchain lengthens the branches
//! into a moved cold tail).
//!
//! A rel32 field holds no other bits, so everything is decided from the bytes *before* it:
//! the opcode and the ModRM byte of a RIP-relative operand (mod 00, r/m 101: `[rip +
//! disp32]`, which has no SIB byte, so the ModRM is always the byte just before the field).
//! Whether a REX prefix precedes the opcode cannot be seen in the bytes — the byte before an
//! opcode may end the previous instruction — so callers say so, from the relocation type.

/// One-byte `nop`.
pub const NOP: u8 = 0x90;

/// `int3`: what unused code space is filled with.
pub const INT3: u8 = 0xcc;

/// `jmp rel32` with a zero displacement.
pub const JMP_REL32_ZERO: [u8; 5] = encode_jmp_rel32(0);

/// `jmp rel32` (`E9`): `rel` is the distance from the end of the 5-byte instruction.
pub const fn encode_jmp_rel32(rel: i32) -> [u8; 5] {
    let r = rel.to_le_bytes();
    [0xe9, r[0], r[1], r[2], r[3]]
}

/// ModRM with mod = 00 and r/m = 101: `[rip + disp32]` in 64-bit mode.
pub const fn is_rip_relative_modrm(modrm: u8) -> bool {
    modrm & 0xc7 == 0x05
}

/// `code[offset - back]`, if it exists.
fn before(code: &[u8], offset: usize, back: usize) -> Option<u8> {
    offset.checked_sub(back).and_then(|i| code.get(i)).copied()
}

/// The field at `offset` belongs to `call rel32` (`E8`), `jmp rel32` (`E9`) or `jcc rel32`
/// (`0F 80..8F`).
pub fn is_branch_rel32(code: &[u8], offset: usize) -> bool {
    matches!(
        (before(code, offset, 2), before(code, offset, 1)),
        (_, Some(0xe8 | 0xe9)) | (Some(0x0f), Some(0x80..=0x8f))
    )
}

/// The field at `offset` is the displacement of a RIP-relative memory operand.
pub fn is_rip_relative_field(code: &[u8], offset: usize) -> bool {
    before(code, offset, 1).is_some_and(is_rip_relative_modrm)
}

/// The 8-byte field at `offset` is the immediate of `movabs r64, imm64` (`REX.W B8+r`):
/// the opcode byte `B8..BF` just before it, and before that a REX prefix with `W` set
/// (`48..4F`). An `R_X86_64_64` in code sits there under the medium and large code
/// models; a `B8+r` without `REX.W` takes a 4-byte immediate, so the 8-byte relocation
/// type rules out reading the prefix byte as the end of another instruction.
pub fn is_movabs_imm64(code: &[u8], offset: usize) -> bool {
    offset.checked_add(8).is_some_and(|end| end <= code.len())
        && matches!(
            (before(code, offset, 2), before(code, offset, 1)),
            (Some(0x48..=0x4f), Some(0xb8..=0xbf))
        )
}

/// What instruction a rel32 field belongs to, for formats whose relocation type does not
/// say (COFF `REL32`, Mach-O `SIGNED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rel32Form {
    /// `call rel32`, `jmp rel32` or `jcc rel32`.
    Branch,
    /// `mov r, [rip + disp32]` (`8B /r`): a load that may be relaxed to `lea`.
    MovLoad,
    /// `call [rip + disp32]` (`FF 15`) or `jmp [rip + disp32]` (`FF 25`).
    IndirectBranch,
    /// Any other instruction with a RIP-relative memory operand.
    RipOperand,
}

/// Classifies the rel32 field at `offset` of `code` (which must hold the whole field), or
/// `None` if the bytes before it are none of the forms.
pub fn classify_rel32(code: &[u8], offset: u64) -> Option<Rel32Form> {
    let o = usize::try_from(offset).ok()?;
    if o.checked_add(4)? > code.len() || o == 0 {
        return None;
    }
    if is_branch_rel32(code, o) {
        return Some(Rel32Form::Branch);
    }
    if !is_rip_relative_field(code, o) {
        return None;
    }
    Some(match (before(code, o, 2), code[o - 1]) {
        (Some(0xff), 0x15 | 0x25) => Rel32Form::IndirectBranch,
        (Some(0x8b), _) => Rel32Form::MovLoad,
        _ => Rel32Form::RipOperand,
    })
}

/// The length of one padding instruction at the start of `bytes`: `nop` (`90`), `int3`
/// (`CC`), `xchg ax, ax` (`66 90`) or a multi-byte `nop` (`[66]* [2E] 0F 1F /0`, as LLVM
/// emits for code alignment).
pub fn padding_len(bytes: &[u8]) -> Option<usize> {
    match *bytes.first()? {
        NOP | INT3 => return Some(1),
        _ => {}
    }
    let mut i = 0;
    while bytes.get(i) == Some(&0x66) {
        i += 1;
    }
    if i > 0 && bytes.get(i) == Some(&NOP) {
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

/// Whether `bytes` is exactly one `nop` instruction: `90`, `66 90` or a multi-byte `nop`
/// (`[66]* [2E] 0F 1F /0`); `int3` pads but is no `nop`.
pub fn is_nop(bytes: &[u8]) -> bool {
    bytes != [INT3] && padding_len(bytes) == Some(bytes.len())
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

/// How an instruction uses the GOT slot its RIP-relative operand addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GotUse {
    /// `mov r, [rip + G]` (`8B /r`).
    Mov,
    /// `call [rip + G]` (`FF /2`).
    Call,
    /// `jmp [rip + G]` (`FF /4`).
    Jmp,
    /// `test [rip + G], r` (`85 /r`).
    Test,
    /// `op r, [rip + G]` for the eight ALU operations `03 0B 13 1B 23 2B 33 3B` (`add`,
    /// `or`, `adc`, `sbb`, `and`, `sub`, `xor`, `cmp`), with the operation's number (the
    /// `/digit` of its `81 /digit imm32` form).
    Alu(u8),
    /// Any other instruction: it can only go on loading through the slot.
    Other,
}

/// A decoded GOT reference: the use, the ModRM byte, and the REX prefix if the relocation
/// type says there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GotSite {
    pub usage: GotUse,
    pub modrm: u8,
    pub rex: Option<u8>,
}

/// Decodes the instruction around the GOT displacement field at `offset`. `has_rex` comes
/// from the relocation type (`R_X86_64_REX_GOTPCRELX`, `X86_64_RELOC_GOT_LOAD`), never
/// from the bytes. `Err` says what the bytes should have been: a RIP-relative operand
/// (with the whole field inside `code`), and a REX byte (`40..4F`) where the relocation
/// type promises one.
pub fn decode_got_site(code: &[u8], offset: usize, has_rex: bool) -> Result<GotSite, &'static str> {
    let field_fits = offset.checked_add(4).is_some_and(|end| end <= code.len());
    let (Some(modrm), true) = (before(code, offset, 1), field_fits) else {
        return Err("a RIP-relative ModRM byte (mod=00, r/m=101) followed by a 4-byte field");
    };
    let opcode = before(code, offset, 2);
    if !is_rip_relative_modrm(modrm) || opcode.is_none() {
        return Err("a RIP-relative ModRM byte (mod=00, r/m=101) after an opcode");
    }
    let rex = if has_rex {
        match before(code, offset, 3) {
            Some(rex @ 0x40..=0x4f) => Some(rex),
            _ => {
                return Err("a REX prefix (40..4f) before the opcode, as the relocation type says")
            }
        }
    } else {
        None
    };
    let usage = match (opcode.unwrap_or(0), modrm) {
        (0x8b, _) => GotUse::Mov,
        (0xff, 0x15) => GotUse::Call,
        (0xff, 0x25) => GotUse::Jmp,
        (0x85, _) => GotUse::Test,
        (op, _) if op & 0xc7 == 0x03 => GotUse::Alu(op >> 3 & 7),
        _ => GotUse::Other,
    };
    Ok(GotSite { usage, modrm, rex })
}

/// Whether the instruction that starts at `instruction_start` and holds the rel32 field at
/// `field_offset` has a REX prefix just before its one-byte opcode (`REX op ModRM disp32`),
/// for formats whose relocation type does not say (COFF `REL32`). The instruction start must
/// come from a decoder that walked the code from a known boundary (the function start):
/// then a byte `40..4F` at `field_offset - 3` inside the instruction can only be its REX
/// prefix, since in 64-bit mode nothing else before a ModRM byte takes those values.
pub fn has_rex_prefix(code: &[u8], field_offset: usize, instruction_start: usize) -> bool {
    let Some(rex_at) = field_offset.checked_sub(3) else {
        return false;
    };
    instruction_start <= rex_at && matches!(code.get(rex_at), Some(0x40..=0x4f))
}

/// Rewrites the GOT reference `site` at `offset` (run-time address `place`) into a direct
/// reference to `direct` (`S + A`, with the usual `A = -4`), as lld does for a symbol that
/// is not preemptible:
/// - `mov r, [rip + G]` → `lea r, [rip + S]` (`8D`);
/// - `call [rip + G]` → `addr32 call S` (`67 E8`): one instruction of the same length;
/// - `jmp [rip + G]` → `jmp S` (`E9`, one byte earlier) + `nop`.
///
/// `false`, bytes untouched, for any other use, or if the distance does not fit 32 bits.
pub fn relax_got_to_direct(
    code: &mut [u8],
    offset: usize,
    site: GotSite,
    place: u64,
    direct: u64,
) -> bool {
    // The `jmp` moves one byte earlier, so its displacement grows by one.
    let bias = u64::from(site.usage == GotUse::Jmp);
    let Some(rel) = crate::rel32(place, direct.wrapping_add(bias)) else {
        return false;
    };
    let Some(window) = instruction_bytes(code, offset, 2) else {
        return false;
    };
    let rel = rel.to_le_bytes();
    match site.usage {
        GotUse::Mov => {
            window[0] = 0x8d;
            window[2..].copy_from_slice(&rel);
        }
        GotUse::Call => {
            window[..2].copy_from_slice(&[0x67, 0xe8]);
            window[2..].copy_from_slice(&rel);
        }
        GotUse::Jmp => {
            window[0] = 0xe9;
            window[1..5].copy_from_slice(&rel);
            window[5] = NOP;
        }
        GotUse::Test | GotUse::Alu(_) | GotUse::Other => return false,
    }
    true
}

/// Rewrites the 64-bit GOT load `site` at `offset` whose slot holds `constant` into the
/// instruction's immediate form, when `constant` fits a sign-extended `imm32`: one memory
/// load less, same length (REX, opcode, ModRM, 4 bytes):
/// - `mov r64, [rip + G]` → `mov r64, imm32` (`REX.W C7 /0`);
/// - `test [rip + G], r64` → `test r64, imm32` (`REX.W F7 /0`);
/// - `op r64, [rip + G]` → `op r64, imm32` (`REX.W 81 /op`) for the eight ALU operations.
///
/// The register moves from ModRM.reg to ModRM.rm, so REX.R moves to REX.B. `false`, bytes
/// untouched, for a constant that does not fit, for any other use, and unless the site has
/// a REX prefix with `W` set (the relocation type must promise the prefix: the byte before
/// the opcode is never guessed to be one).
pub fn relax_got_to_immediate(
    code: &mut [u8],
    offset: usize,
    site: GotSite,
    constant: u64,
) -> bool {
    let Some(rex) = site.rex.filter(|rex| rex & 0x08 != 0) else {
        return false;
    };
    let (opcode, digit) = match site.usage {
        GotUse::Mov => (0xc7, 0),
        GotUse::Test => (0xf7, 0),
        GotUse::Alu(op) => (0x81, op),
        GotUse::Call | GotUse::Jmp | GotUse::Other => return false,
    };
    let Ok(imm) = i32::try_from(constant as i64) else {
        return false;
    };
    let Some(window) = instruction_bytes(code, offset, 3) else {
        return false;
    };
    let reg = site.modrm >> 3 & 7;
    window[0] = (rex & !0x04) | (rex & 0x04) >> 2;
    window[1] = opcode;
    window[2] = 0xc0 | digit << 3 | reg;
    window[3..].copy_from_slice(&imm.to_le_bytes());
    true
}

/// `code[offset - before .. offset + 4]`: an instruction's bytes up to the end of its rel32
/// field at `offset`, if they lie within `code`.
fn instruction_bytes(code: &mut [u8], offset: usize, before: usize) -> Option<&mut [u8]> {
    let start = offset.checked_sub(before)?;
    code.get_mut(start..offset.checked_add(4)?)
}

/// A direct `jmp` or `jcc` (Intel SDM Vol. 2: `EB cb`, `70+cc cb`, `E9 cd`, `0F 80+cc cd`),
/// the only relative branches the toolchain re-encodes when it lengthens a function's
/// branches (`object/assemble/lengthen.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectBranch {
    /// The condition code (`0..=15`) of a `jcc`; `None` for `jmp`.
    pub condition: Option<u8>,
    /// Whether the displacement is 8 bits wide (else 32).
    pub short: bool,
    /// The displacement, from the end of the instruction.
    pub displacement: i32,
}

impl DirectBranch {
    /// The instruction's length: 2 (rel8), 5 (`jmp rel32`) or 6 (`jcc rel32`).
    pub const fn encoded_len(&self) -> usize {
        match (self.short, self.condition) {
            (true, _) => 2,
            (false, None) => 5,
            (false, Some(_)) => 6,
        }
    }
}

/// Decodes `insn`, which must be exactly one whole instruction, as a [`DirectBranch`];
/// `None` for anything else (including a direct branch with a prefix).
pub fn decode_direct_branch(insn: &[u8]) -> Option<DirectBranch> {
    let (condition, short, displacement) = match *insn {
        [0xeb, d] => (None, true, i32::from(d as i8)),
        [op @ 0x70..=0x7f, d] => (Some(op & 0xf), true, i32::from(d as i8)),
        [0xe9, a, b, c, d] => (None, false, i32::from_le_bytes([a, b, c, d])),
        [0x0f, op @ 0x80..=0x8f, a, b, c, d] => {
            (Some(op & 0xf), false, i32::from_le_bytes([a, b, c, d]))
        }
        _ => return None,
    };
    Some(DirectBranch {
        condition,
        short,
        displacement,
    })
}

/// Encodes `branch` into the first [`DirectBranch::encoded_len`] bytes of the result; `None` if a
/// short branch's displacement does not fit 8 bits or the condition is not `0..=15`.
pub fn encode_direct_branch(branch: DirectBranch) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let d = branch.displacement.to_le_bytes();
    match (branch.short, branch.condition) {
        (_, Some(16..)) => return None,
        (true, c) => {
            out[0] = c.map_or(0xeb, |c| 0x70 | c);
            out[1] = i8::try_from(branch.displacement).ok()? as u8;
        }
        (false, None) => {
            out[0] = 0xe9;
            out[1..5].copy_from_slice(&d);
        }
        (false, Some(c)) => {
            out[..2].copy_from_slice(&[0x0f, 0x80 | c]);
            out[2..6].copy_from_slice(&d);
        }
    }
    Some(out)
}

/// A veneer reaching any 64-bit address: `jmp [rip + 0]` (`FF 25 00 00 00 00`), the 8-byte
/// target, then two `int3` as padding. It needs no register at all.
pub fn veneer(target: u64) -> [u8; crate::VENEER_SIZE] {
    let mut v = [INT3; crate::VENEER_SIZE];
    v[..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    v[6..14].copy_from_slice(&target.to_le_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes from `llvm-mc-19 -triple=x86_64 -filetype=obj` (relaxed by the assembler, read
    /// back with `llvm-objdump-19 -d`): `jmp .+0x81`, `jne .-0x7e`, `jo .+0x12`,
    /// `jmp .+0x1234a`, `jle .-0xfa`, `jg .+0x1006`.
    const LLVM_MC_BRANCHES: [(&[u8], Option<u8>, i32); 6] = [
        (&[0xeb, 0x7f], None, 0x7f),
        (&[0x75, 0x80], Some(5), -0x80),
        (&[0x70, 0x10], Some(0), 0x10),
        (&[0xe9, 0x45, 0x23, 0x01, 0x00], None, 0x12345),
        (&[0x0f, 0x8e, 0x00, 0xff, 0xff, 0xff], Some(0xe), -0x100),
        (&[0x0f, 0x8f, 0x00, 0x10, 0x00, 0x00], Some(0xf), 0x1000),
    ];

    #[test]
    fn direct_branches_decode_and_encode_as_llvm_mc_does() {
        for (bytes, condition, displacement) in LLVM_MC_BRANCHES {
            let b = decode_direct_branch(bytes).unwrap();
            assert_eq!(
                (b.condition, b.displacement, b.encoded_len()),
                (condition, displacement, bytes.len())
            );
            assert_eq!(&encode_direct_branch(b).unwrap()[..b.encoded_len()], bytes);
        }
        // The rel32 forms, as llvm-mc encodes `{disp32} jne .-0x7e` and `{disp32} jmp .+0x81`.
        let long = |b: DirectBranch, d| DirectBranch {
            short: false,
            displacement: d,
            ..b
        };
        let jne = decode_direct_branch(&[0x75, 0x80]).unwrap();
        assert_eq!(
            encode_direct_branch(long(jne, -0x84)).unwrap(),
            [0x0f, 0x85, 0x7c, 0xff, 0xff, 0xff]
        );
        let jmp = decode_direct_branch(&[0xeb, 0x7f]).unwrap();
        assert_eq!(
            &encode_direct_branch(long(jmp, 0x7c)).unwrap()[..5],
            [0xe9, 0x7c, 0, 0, 0]
        );
    }

    #[test]
    fn only_whole_unprefixed_jumps_are_direct_branches() {
        assert_eq!(
            decode_direct_branch(&[0x3e, 0x74, 0x00]),
            None,
            "branch hint prefix"
        );
        assert_eq!(decode_direct_branch(&[0xe8, 0, 0, 0, 0]), None, "call");
        assert_eq!(
            decode_direct_branch(&[0xe3, 0x10]),
            None,
            "jrcxz has no long form"
        );
        assert_eq!(decode_direct_branch(&[0xeb]), None, "truncated");
        assert_eq!(
            decode_direct_branch(&[0x74, 0, 0x90]),
            None,
            "more than one instruction"
        );
        let short = DirectBranch {
            condition: None,
            short: true,
            displacement: 0x80,
        };
        assert_eq!(encode_direct_branch(short), None, "0x80 does not fit rel8");
        let bad = DirectBranch {
            condition: Some(16),
            ..short
        };
        assert_eq!(encode_direct_branch(bad), None);
    }

    #[test]
    fn classifies_rel32_forms() {
        let call = [0xe8, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&call, 1), Some(Rel32Form::Branch));
        let jne = [0x0f, 0x85, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&jne, 2), Some(Rel32Form::Branch));
        let mov = [0x48, 0x8b, 0x05, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&mov, 3), Some(Rel32Form::MovLoad));
        let mov32 = [0x8b, 0x05, 0, 0, 0, 0];
        assert_eq!(classify_rel32(&mov32, 2), Some(Rel32Form::MovLoad));
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
    fn recognises_movabs_imm64() {
        // movabs rax, imm64 / movabs r13, imm64
        let rax = [0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(is_movabs_imm64(&rax, 2));
        let r13 = [0x49, 0xbd, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(is_movabs_imm64(&r13, 2));
        let no_rex_w = [0x40, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(!is_movabs_imm64(&no_rex_w, 2), "mov r32, imm32");
        let lea = [0x48, 0x8d, 0x05, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(!is_movabs_imm64(&lea, 3));
        assert!(!is_movabs_imm64(&rax[..9], 2), "field past the end");
        assert!(!is_movabs_imm64(&rax, 1), "no prefix before the opcode");
    }

    #[test]
    fn recognises_llvm_padding() {
        assert!(is_padding(&[0x90, 0xcc, 0x66, 0x90]));
        assert!(is_padding(&[0x0f, 0x1f, 0x00])); // nopl (%rax)
        assert!(is_padding(&[0x0f, 0x1f, 0x40, 0x00])); // nopl 0(%rax)
        assert!(is_padding(&[0x0f, 0x1f, 0x44, 0x00, 0x00])); // nopl 0(%rax,%rax)
        assert!(is_padding(&[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0]));
        assert!(is_padding(&[
            0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0
        ]));
        assert!(!is_padding(&[0xc3]));
        assert!(!is_padding(&[0x0f, 0x1f, 0x44, 0x00])); // cut short
        assert!(!is_padding(&[0x0f, 0x1f, 0x48, 0x00])); // /1 is not a nop
    }

    #[test]
    fn decodes_got_uses() {
        let site = |bytes: &[u8], rex| decode_got_site(bytes, bytes.len() - 4, rex);
        let add_r13 = [0x4c, 0x03, 0x2d, 0, 0, 0, 0];
        assert_eq!(
            site(&add_r13, true),
            Ok(GotSite {
                usage: GotUse::Alu(0),
                modrm: 0x2d,
                rex: Some(0x4c)
            })
        );
        assert_eq!(
            site(&[0x48, 0x3b, 0x05, 0, 0, 0, 0], true).unwrap().usage,
            GotUse::Alu(7)
        );
        assert_eq!(
            site(&[0x48, 0x85, 0x05, 0, 0, 0, 0], true).unwrap().usage,
            GotUse::Test
        );
        assert_eq!(
            site(&[0xff, 0x25, 0, 0, 0, 0], false).unwrap().usage,
            GotUse::Jmp
        );
        assert_eq!(
            site(&[0x48, 0x0f, 0xaf, 0x05, 0, 0, 0, 0], false)
                .unwrap()
                .usage,
            GotUse::Other
        );
        // `add al, 0x4c; mov eax, [rip + G]`: a GOTPCRELX (no REX) site keeps its
        // neighbour's byte out of the instruction; a REX_GOTPCRELX claim must hold.
        let no_rex = [0x04, 0x4c, 0x8b, 0x05, 0, 0, 0, 0];
        assert_eq!(site(&no_rex, false).unwrap().rex, None);
        assert!(site(&[0x90, 0x8b, 0x05, 0, 0, 0, 0], true).is_err());
        assert!(
            site(&[0x48, 0x8b, 0xc0, 0, 0, 0, 0], false).is_err(),
            "not RIP-relative"
        );
        assert!(site(&[0x05, 0, 0, 0, 0], false).is_err(), "no opcode");
        assert!(
            decode_got_site(&add_r13, 4, true).is_err(),
            "field past the end"
        );
    }

    #[test]
    fn rex_prefixes_are_read_from_instruction_boundaries() {
        // add al, 0x4c; mov eax, [rip+G]: the mov starts at 2, the 4c is the add's.
        let code = [0x04, 0x4c, 0x8b, 0x05, 0, 0, 0, 0];
        assert!(!has_rex_prefix(&code, 4, 2));
        // The same bytes as one instruction from 1 (were the add not there): a REX prefix.
        assert!(has_rex_prefix(&code, 4, 1));
        // operand-size prefix, then REX: 66 48 8b 05.
        assert!(has_rex_prefix(&[0x66, 0x48, 0x8b, 0x05, 0, 0, 0, 0], 4, 0));
        assert!(!has_rex_prefix(&[0x48, 0x0f, 0xaf, 0x05, 0, 0, 0, 0], 4, 0)); // imul
        assert!(!has_rex_prefix(&[0x8b, 0x05, 0, 0, 0, 0], 2, 0));
    }

    #[test]
    fn immediate_forms_need_a_promised_rex_w() {
        // add r13, [rip+G] → add r13, 0x1234 (49 81 c5 imm32), as lld relaxes it.
        let mut add = [0x4c, 0x03, 0x2d, 0, 0, 0, 0];
        let s = decode_got_site(&add, 3, true).unwrap();
        assert!(relax_got_to_immediate(&mut add, 3, s, 0x1234));
        assert_eq!(add, [0x49, 0x81, 0xc5, 0x34, 0x12, 0, 0]);
        // test [rip+G], rcx → test rcx, -1 (48 f7 c1 ff ff ff ff).
        let mut test = [0x48, 0x85, 0x0d, 0, 0, 0, 0];
        let s = decode_got_site(&test, 3, true).unwrap();
        assert!(relax_got_to_immediate(&mut test, 3, s, u64::MAX));
        assert_eq!(test, [0x48, 0xf7, 0xc1, 0xff, 0xff, 0xff, 0xff]);
        // Without REX.W, without a promised REX, or out of range: untouched.
        for (bytes, rex, value) in [
            ([0x44, 0x03, 0x2d, 0, 0, 0, 0], true, 1), // add r13d: 32 bits
            ([0x4c, 0x03, 0x2d, 0, 0, 0, 0], false, 1),
            ([0x4c, 0x03, 0x2d, 0, 0, 0, 0], true, 0x8000_0000),
        ] {
            let mut copy = bytes;
            let s = decode_got_site(&copy, 3, rex).unwrap();
            assert!(!relax_got_to_immediate(&mut copy, 3, s, value));
            assert_eq!(copy, bytes);
        }
    }

    #[test]
    fn direct_forms_follow_lld() {
        let mut jmp = [0xff, 0x25, 0, 0, 0, 0];
        let s = decode_got_site(&jmp, 2, false).unwrap();
        assert!(relax_got_to_direct(&mut jmp, 2, s, 0x1002, 0x2000 - 4));
        // jmp at 0x1000, 5 bytes: 0x2000 - 0x1005 = 0xffb.
        assert_eq!(jmp, [0xe9, 0xfb, 0x0f, 0, 0, 0x90]);
        let mut add = [0x48, 0x03, 0x05, 0, 0, 0, 0];
        let s = decode_got_site(&add, 3, true).unwrap();
        assert!(!relax_got_to_direct(&mut add, 3, s, 0, 0));
        assert_eq!(encode_jmp_rel32(-5), [0xe9, 0xfb, 0xff, 0xff, 0xff]);
    }
}
