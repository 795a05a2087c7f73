//! The stitcher's per-hole fast forms (x86-64: a range-checked rel32 store; an `imm32`
//! store into an instruction prepared once in its immediate form) and its full path give
//! exactly the bytes of a reference stitcher built from the public patch functions alone,
//! for every hole kind the host's architecture has here and for values at the edges of
//! each form (fits, one past), near and far from the arena (far: every external value is
//! out of direct reach, so the full path's GOT slots and veneers are taken).
//!
//! The halves of an operand (`OperandHigh`/`OperandLow`: its high and low 32 bits) take
//! every form an operand takes (immediates, relaxed and plain GOT loads).
//!
//! On AArch64 and RISC-V every hole takes the full path; the same comparison runs there.

use crate::common;
use common::SET;
use cpjit_runtime::model::{Arch, Hole, HoleKind, HoleValue, Section, Stencil, StencilSet};
use cpjit_runtime::patch::{
    self, in_range, relax_aarch64_got_pair, relax_x86_got_load, relax_x86_got_load_constant,
};
use cpjit_runtime::{Jit, JitOptions, Target, Trace};

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

/// The two symbols of the test set: one in this binary (near the arena by default), one
/// 2^44 bytes away from it (never in direct reach). A static, whose address is unique (a
/// function's address may differ between codegen units of a release build).
static NEAR_SYMBOL: u8 = 0;
fn near_symbol() -> u64 {
    &NEAR_SYMBOL as *const u8 as usize as u64
}
fn far_symbol() -> u64 {
    near_symbol() ^ (1 << 44)
}
fn resolve(name: &str) -> Option<u64> {
    match name {
        "near" => Some(near_symbol()),
        "far" => Some(far_symbol()),
        _ => None,
    }
}

const NEAR: u16 = 0;
const FAR: u16 = 1;
const INIT_DATA: [u8; 24] = [0xa5; 24];

/// A case: one instruction (or pair) with its holes, and the operands and targets each
/// pushed instance gets.
struct Case {
    name: &'static str,
    code: Vec<u8>,
    holes: Vec<Hole>,
    /// Per instance: operands and targets.
    instances: Vec<(Vec<u64>, Vec<Target>)>,
}

/// A hole in the case's code.
fn hole(offset: u32, kind: HoleKind, value: HoleValue, addend: i64) -> Hole {
    common::hole(Section::Code, offset, kind, value, addend)
}

/// Operand values at the edges of a sign-extended `imm32` (x86), of `movz`/`movk`
/// (AArch64: 16 and 32 bits) and of nothing (RISC-V GOT loads), and addresses near this
/// binary (a direct reference reaches them) and far from it.
fn operand_values() -> Vec<u64> {
    let here = near_symbol();
    vec![
        0,
        1,
        0xffff,
        0x1_0000,
        i32::MAX as u64,
        1 << 31,
        u32::MAX as u64,
        1 << 32,
        i32::MIN as i64 as u64,
        (i32::MIN as i64 - 1) as u64,
        u64::MAX,
        here,
        here.wrapping_add(0x1000),
        far_symbol(),
        0x7654_3210_fedc_ba98,
        // Halves at their edges (bit 31 of a half set: sign-extension traps).
        0x8000_0000_0000_0000,
        0x7fff_ffff_8000_0000,
        0x0000_0001_ffff_ffff,
        0x1234_5678_9abc_def0,
    ]
}

/// Each operand value as its own instance (one operand).
fn each_operand() -> Vec<(Vec<u64>, Vec<Target>)> {
    operand_values()
        .into_iter()
        .map(|v| (vec![v], vec![]))
        .collect()
}

/// [`each_operand`] with the values in `min..=max` (as signed), and `max` itself.
fn operands_in(min: i64, max: i64) -> Vec<(Vec<u64>, Vec<Target>)> {
    let mut v: Vec<_> = each_operand()
        .into_iter()
        .filter(|(o, _)| (min..=max).contains(&(o[0] as i64)))
        .collect();
    v.push((vec![max as u64], vec![]));
    v
}

/// [`each_operand`] without the far symbol's own address, for cases that also load that
/// symbol through the GOT: the runtime gives a symbol and an operand of one value a slot
/// each, and the reference finds slots by value.
fn each_operand_but_far() -> Vec<(Vec<u64>, Vec<Target>)> {
    each_operand()
        .into_iter()
        .filter(|(o, _)| o[0] != far_symbol())
        .collect()
}

/// Each instance jumps to another address: this binary, one past the end of a rel32 /
/// branch26 reach from it, far away.
fn each_target() -> Vec<(Vec<u64>, Vec<Target>)> {
    let here = near_symbol();
    [
        here,
        here.wrapping_add(1 << 31),
        here.wrapping_sub(1 << 27),
        far_symbol(),
    ]
    .into_iter()
    .map(|a| (vec![], vec![Target::Address(a)]))
    .collect()
}

fn once() -> Vec<(Vec<u64>, Vec<Target>)> {
    vec![(vec![], vec![]); 3]
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A case named `name`: `code` with `holes`, pushed once per entry of `instances`.
fn case(
    name: &'static str,
    code: Vec<u8>,
    holes: Vec<Hole>,
    instances: Vec<(Vec<u64>, Vec<Target>)>,
) -> Case {
    Case {
        name,
        code,
        holes,
        instances,
    }
}

/// The cases of `arch`: each of its hole forms, with values at their edges.
fn cases(arch: Arch) -> Vec<Case> {
    match arch {
        Arch::X86_64 => [x86_64_reference_cases(), x86_64_operand_cases()]
            .into_iter()
            .flatten()
            .collect(),
        Arch::Aarch64 => aarch64_cases(),
        Arch::Riscv64 => riscv64_cases(),
    }
}

/// x86-64: rel32 references to data, symbols and targets, and GOT loads of operands.
fn x86_64_reference_cases() -> Vec<Case> {
    use HoleKind as K;
    use HoleValue::{Data, Operand, Symbol, Target as To};
    vec![
        // lea rax, [rip + data + 8]: fast rel32, an address inside the trace.
        case(
            "pc32 data",
            vec![0x48, 0x8d, 0x05, 0, 0, 0, 0],
            vec![hole(3, K::X86Pc32, Data, 8 - 4)],
            once(),
        ),
        // call rel32 to a symbol (fast when in reach, a veneer when not), and to
        // jump targets near and far.
        case(
            "branch32 symbols",
            vec![0xe8, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0],
            vec![
                hole(1, K::X86Branch32, Symbol(NEAR), -4),
                hole(6, K::X86Branch32, Symbol(FAR), -4),
            ],
            once(),
        ),
        case(
            "branch32 targets",
            vec![0x0f, 0x85, 0, 0, 0, 0],
            vec![hole(2, K::X86Branch32, To(0), -4)],
            each_target(),
        ),
        // mov rax, [rip + G]: imm32 prepared; `lea` or a GOT slot past the edges.
        case(
            "mov r64 got operand",
            vec![0x48, 0x8b, 0x05, 0, 0, 0, 0],
            vec![hole(3, K::X86RexGotPc32Relaxable, Operand(0), -4)],
            each_operand(),
        ),
        // add r13, [rip + G] and test [rip + G], rcx: imm32 forms of other uses (no
        // direct form: past the edge, a GOT slot).
        case(
            "alu r64 got operand",
            vec![0x4c, 0x03, 0x2d, 0, 0, 0, 0, 0x48, 0x85, 0x0d, 0, 0, 0, 0],
            vec![
                hole(3, K::X86RexGotPc32Relaxable, Operand(0), -4),
                hole(10, K::X86RexGotPc32Relaxable, Operand(0), -4),
            ],
            each_operand(),
        ),
        // mov eax, [rip + G] (no REX.W: no immediate form) of an operand: full path.
        case(
            "mov r32 got operand",
            vec![0x8b, 0x05, 0, 0, 0, 0],
            vec![hole(2, K::X86GotPc32Relaxable, Operand(0), -4)],
            each_operand(),
        ),
        // call [rip + G] of symbols (direct form prepared: `addr32 call`), and
        // mov rax, [rip + G] of the trace's data (`lea`) and of a symbol (full path:
        // it may take the immediate form).
        case(
            "got direct forms",
            vec![
                0xff, 0x15, 0, 0, 0, 0, 0xff, 0x15, 0, 0, 0, 0, 0x48, 0x8b, 0x05, 0, 0, 0, 0, 0x48,
                0x8b, 0x05, 0, 0, 0, 0,
            ],
            vec![
                hole(2, K::X86GotPc32Relaxable, Symbol(NEAR), -4),
                hole(8, K::X86GotPc32Relaxable, Symbol(FAR), -4),
                hole(15, K::X86RexGotPc32Relaxable, Data, -4),
                hole(22, K::X86RexGotPc32Relaxable, Symbol(NEAR), -4),
            ],
            once(),
        ),
        // jmp [rip + G] of a symbol: the direct form moves the field, full path.
        case(
            "jmp got symbol",
            vec![0xff, 0x25, 0, 0, 0, 0],
            vec![hole(2, K::X86GotPc32Relaxable, Symbol(FAR), -4)],
            once(),
        ),
    ]
}

/// x86-64: operands and their halves in `imm32` fields, range checks and GOT loads.
fn x86_64_operand_cases() -> Vec<Case> {
    use HoleKind as K;
    use HoleValue::{Operand, OperandHigh as Hi, OperandLow as Lo};
    vec![
        // mov eax, imm32; mov ecx, imm32: the halves of one operand (X86Abs32).
        case(
            "abs32 halves",
            vec![0xb8, 0, 0, 0, 0, 0xb9, 0, 0, 0, 0],
            vec![
                hole(1, K::X86Abs32, Hi(0), 0),
                hole(6, K::X86Abs32, Lo(0), 0),
            ],
            each_operand(),
        ),
        // mov eax, imm32 of a whole operand (a store when it fits i32::MIN..=u32::MAX),
        // and the same with the operand's u16 range check (a compare): the fast forms
        // of a client's local offsets and small constants. Out of range: refused, below.
        case(
            "abs32 operand",
            vec![0xb8, 0, 0, 0, 0],
            vec![hole(1, K::X86Abs32, Operand(0), 0)],
            operands_in(i32::MIN as i64, u32::MAX as i64),
        ),
        case(
            "abs32 operand u16 checked",
            vec![0xb8, 0, 0, 0, 0],
            vec![
                hole(0, K::OperandU16, Operand(0), 0),
                hole(1, K::X86Abs32, Operand(0), 0),
            ],
            operands_in(0, u16::MAX as i64),
        ),
        // mov rax, [rip + G] of each half and of the whole operand: imm32 prepared, a
        // half of 2^31 or more (not a sign-extended imm32) through its own GOT slot.
        case(
            "mov r64 got halves",
            vec![
                0x48, 0x8b, 0x05, 0, 0, 0, 0, 0x48, 0x8b, 0x0d, 0, 0, 0, 0, 0x48, 0x8b, 0x15, 0, 0,
                0, 0,
            ],
            vec![
                hole(3, K::X86RexGotPc32Relaxable, Hi(0), -4),
                hole(10, K::X86RexGotPc32Relaxable, Lo(0), -4),
                hole(17, K::X86RexGotPc32Relaxable, Operand(0), -4),
            ],
            each_operand(),
        ),
        // add rax, [rip + G] through a GOT that is never relaxed (GOTPCREL).
        case(
            "gotpc32 operand",
            vec![0x48, 0x03, 0x05, 0, 0, 0, 0],
            vec![hole(3, K::X86GotPc32, Operand(0), -4)],
            each_operand(),
        ),
    ]
}

/// AArch64: page-relative pairs, branches, GOT pairs (adjacent, interleaved, clobbered)
/// and `movz`/`movk` halves.
fn aarch64_cases() -> Vec<Case> {
    use HoleKind as K;
    use HoleValue::{Data, Operand, OperandHigh as Hi, OperandLow as Lo, Symbol, Target as To};
    vec![
        // adrp x0, data; add x0, x0, :lo12:data
        case(
            "adrp add data",
            words(&[0x9000_0000, 0x9100_0000]),
            vec![
                hole(0, K::Aarch64AdrPage21, Data, 8),
                hole(4, K::Aarch64AddLo12, Data, 8),
            ],
            once(),
        ),
        // bl symbol (veneer when far), b.ne / b to targets.
        case(
            "branch26 symbols",
            words(&[0x9400_0000, 0x9400_0000]),
            vec![
                hole(0, K::Aarch64Branch26, Symbol(NEAR), 0),
                hole(4, K::Aarch64Branch26, Symbol(FAR), 0),
            ],
            once(),
        ),
        case(
            "branch26 targets",
            words(&[0x1400_0000]),
            vec![hole(0, K::Aarch64Branch26, To(0), 0)],
            each_target(),
        ),
        // adrp x8, :got:v; ldr x8, [x8, :got_lo12:v]: movz/movk, adrp+add or the GOT.
        case(
            "got pair operand",
            words(&[0x9000_0008, 0xf940_0108]),
            vec![
                hole(0, K::Aarch64AdrGotPage21, Operand(0), 0),
                hole(4, K::Aarch64Ld64GotLo12, Operand(0), 0),
            ],
            each_operand(),
        ),
        // movz w0, #:abs_g1_nc:hi; movk w0, #:abs_g0_nc:hi; the same of the low half.
        case(
            "movw halves",
            words(&[0x52a0_0000, 0x7280_0000, 0x52a0_0001, 0x7280_0001]),
            vec![
                hole(0, K::Aarch64MovwG1, Hi(0), 0),
                hole(4, K::Aarch64MovwG0, Hi(0), 0),
                hole(8, K::Aarch64MovwG1, Lo(0), 0),
                hole(12, K::Aarch64MovwG0, Lo(0), 0),
            ],
            each_operand(),
        ),
        // GOT pairs of each half (Mach-O and COFF): always relaxed to movz/movk.
        case(
            "got pair halves",
            words(&[0x9000_0008, 0xf940_0108, 0x9000_0009, 0xf940_0129]),
            vec![
                hole(0, K::Aarch64AdrGotPage21, Hi(0), 0),
                hole(4, K::Aarch64Ld64GotLo12, Hi(0), 0),
                hole(8, K::Aarch64AdrGotPage21, Lo(0), 0),
                hole(12, K::Aarch64Ld64GotLo12, Lo(0), 0),
            ],
            each_operand(),
        ),
        // Interleaved GOT loads (the COFF halves: adrp x8; adrp x9; ldr x8; ldr x9),
        // each relaxed on its own; with a far symbol's load (a GOT slot) in between.
        case(
            "got pairs interleaved",
            words(&[0x9000_0008, 0x9000_0009, 0xf940_0108, 0xf940_0129]),
            vec![
                hole(0, K::Aarch64AdrGotPage21, Hi(0), 0),
                hole(4, K::Aarch64AdrGotPage21, Lo(0), 0),
                hole(8, K::Aarch64Ld64GotLo12, Hi(0), 0),
                hole(12, K::Aarch64Ld64GotLo12, Lo(0), 0),
            ],
            each_operand(),
        ),
        case(
            "got pairs around a symbol",
            words(&[0x9000_0008, 0x9000_0009, 0xf940_0129, 0xf940_0108]),
            vec![
                hole(0, K::Aarch64AdrGotPage21, Operand(0), 0),
                hole(4, K::Aarch64AdrGotPage21, Symbol(FAR), 0),
                hole(8, K::Aarch64Ld64GotLo12, Symbol(FAR), 0),
                hole(12, K::Aarch64Ld64GotLo12, Operand(0), 0),
            ],
            each_operand_but_far(),
        ),
        // adrp x8; adrp x8 (the same register in between): not a relaxable pair.
        case(
            "got pair clobbered",
            words(&[0x9000_0008, 0x9000_0008, 0xf940_0108, 0xf940_0108]),
            vec![
                hole(0, K::Aarch64AdrGotPage21, Operand(0), 0),
                hole(4, K::Aarch64AdrGotPage21, Symbol(FAR), 0),
                hole(8, K::Aarch64Ld64GotLo12, Operand(0), 0),
                hole(12, K::Aarch64Ld64GotLo12, Symbol(FAR), 0),
            ],
            each_operand_but_far(),
        ),
        case(
            "got pair symbol",
            words(&[0x9000_0008, 0xf940_0108, 0x9000_0009, 0xf940_0129]),
            vec![
                hole(0, K::Aarch64AdrGotPage21, Symbol(NEAR), 0),
                hole(4, K::Aarch64Ld64GotLo12, Symbol(NEAR), 0),
                hole(8, K::Aarch64AdrGotPage21, Symbol(FAR), 0),
                hole(12, K::Aarch64Ld64GotLo12, Symbol(FAR), 0),
            ],
            once(),
        ),
    ]
}

/// RISC-V: `auipc` pairs, calls, `lui` halves and GOT loads.
fn riscv64_cases() -> Vec<Case> {
    use HoleKind as K;
    use HoleValue::{Data, Operand, OperandHigh as Hi, OperandLow as Lo, Symbol, Target as To};
    vec![
        // auipc a0, %pcrel_hi(data); addi a0, a0, %pcrel_lo
        case(
            "pcrel data",
            words(&[0x0000_0517, 0x0005_0513]),
            vec![
                hole(0, K::RiscvPcrelHi20, Data, 8),
                hole(4, K::RiscvPcrelLo12I, Data, 8 + 4),
            ],
            once(),
        ),
        // auipc ra; jalr ra: calls to symbols (veneer when far) and targets.
        case(
            "call symbols",
            words(&[0x0000_0097, 0x0000_80e7, 0x0000_0097, 0x0000_80e7]),
            vec![
                hole(0, K::RiscvCall, Symbol(NEAR), 0),
                hole(8, K::RiscvCall, Symbol(FAR), 0),
            ],
            once(),
        ),
        case(
            "call targets",
            words(&[0x0000_0097, 0x0000_80e7]),
            vec![hole(0, K::RiscvCall, To(0), 0)],
            each_target(),
        ),
        // lui a0, %hi(hi); addiw a0, a0, %lo(hi); the same of the low half into a1.
        case(
            "hi20 lo12 halves",
            words(&[0x0000_0537, 0x0005_051b, 0x0000_05b7, 0x0005_859b]),
            vec![
                hole(0, K::RiscvHi20, Hi(0), 0),
                hole(4, K::RiscvLo12I, Hi(0), 0),
                hole(8, K::RiscvHi20, Lo(0), 0),
                hole(12, K::RiscvLo12I, Lo(0), 0),
            ],
            each_operand(),
        ),
        // A GOT load of a half: a slot holding the half.
        case(
            "got half",
            words(&[0x0000_0597, 0x0005_b583]),
            vec![
                hole(0, K::RiscvGotHi20, Lo(0), 0),
                hole(4, K::RiscvGotLo12I, Lo(0), 4),
            ],
            each_operand(),
        ),
        // auipc a1, %got_pcrel_hi(v); ld a1, %pcrel_lo(a1): always a GOT slot.
        case(
            "got operand",
            words(&[0x0000_0597, 0x0005_b583]),
            vec![
                hole(0, K::RiscvGotHi20, Operand(0), 0),
                hole(4, K::RiscvGotLo12I, Operand(0), 4),
            ],
            each_operand(),
        ),
    ]
}

/// The host's set with every case appended as a stencil (with 24 bytes of data, 16-byte
/// aligned, so that data references have something to point at); its symbols are
/// `near` and `far`.
fn set_with(cases: &[Case]) -> (&'static StencilSet<'static>, usize) {
    let mut stencils = SET.stencils.to_vec();
    let first = stencils.len();
    for c in cases {
        let operands = c.instances[0].0.len();
        let targets = c.instances[0].1.len();
        stencils.push(Stencil {
            name: leak(format!("fast case {}", c.name)).as_str(),
            code: Box::leak(c.code.clone().into_boxed_slice()),
            init_data: &INIT_DATA,
            data_len: 24,
            data_align: 16,
            holes: Box::leak(c.holes.clone().into_boxed_slice()),
            operands: &["V"][..operands],
            targets: &["T"][..targets],
            falls_through: false,
            ..common::hand_written(if SET.arch == Arch::X86_64 { 1 } else { 4 })
        });
    }
    let set = leak(StencilSet {
        stencils: Box::leak(stencils.into_boxed_slice()),
        symbols: &["near", "far"],
        ..*SET
    });
    (set, first)
}

/// The trace's memory as the reference reads it.
struct Memory<'t> {
    trace: &'t Trace,
    data: &'t [u8],
}

impl Memory<'_> {
    /// The address of the GOT slot that holds `value` (after the instances' data).
    fn got(&self, value: u64, instance_data_end: usize) -> u64 {
        let start = instance_data_end.next_multiple_of(8);
        (start..self.data.len())
            .step_by(8)
            .find(|&at| self.data[at..at + 8] == value.to_le_bytes())
            .map(|at| self.trace.data_range().start as u64 + at as u64)
            .unwrap_or_else(|| panic!("no GOT slot holds {value:#x}"))
    }

    /// The address of the veneer that jumps to `destination` (after the instances).
    fn veneer(&self, arch: Arch, destination: u64, code_end: usize) -> u64 {
        let bytes: Vec<u8> = match arch {
            Arch::X86_64 => patch::x86_64_veneer(destination).to_vec(),
            Arch::Aarch64 => patch::aarch64_veneer(destination).to_vec(),
            Arch::Riscv64 => patch::riscv64_veneer(destination).to_vec(),
        };
        let code = self.trace.code_bytes();
        let size = patch::veneer_size(arch);
        (code_end.next_multiple_of(16)..code.len())
            .step_by(size)
            .find(|&at| code.get(at..at + size) == Some(&bytes[..]))
            .map(|at| self.trace.code_range().start as u64 + at as u64)
            .unwrap_or_else(|| {
                panic!(
                    "no veneer jumps to {destination:#x} in {:02x?} (instances end at {code_end})",
                    code
                )
            })
    }
}

/// The `ldr` hole that pairs with the AArch64 GOT `adrp` hole `i`: the next hole of its
/// value, when every instruction in between is another GOT load's `adrp` or `ldr` hole that
/// touches none of the pair's register (registers read straight from the words: `Rd` in
/// bits 0..5, an `ldr`'s base in bits 5..10).
fn got_pair(stencil: &Stencil<'_>, i: usize) -> Option<usize> {
    let adrp = stencil.holes[i];
    if adrp.kind != HoleKind::Aarch64AdrGotPage21 {
        return None;
    }
    let word = |h: &Hole| {
        let o = h.offset as usize;
        u32::from_le_bytes(stencil.code[o..o + 4].try_into().unwrap())
    };
    let reg = word(&adrp) & 31;
    for (j, h) in stencil.holes.iter().enumerate().skip(i + 1) {
        if h.offset != adrp.offset + 4 * (j - i) as u32 {
            return None;
        }
        match h.kind {
            HoleKind::Aarch64Ld64GotLo12 if h.value == adrp.value => return Some(j),
            HoleKind::Aarch64Ld64GotLo12 if word(h) & 31 != reg && word(h) >> 5 & 31 != reg => {}
            HoleKind::Aarch64AdrGotPage21 if word(h) & 31 != reg => {}
            _ => return None,
        }
    }
    None
}

/// What a stitcher must write for one instance: the stencil's code patched hole by hole
/// with the patch functions, in the order of preference the runtime documents (an
/// immediate, a direct reference, a GOT slot; a direct branch, a veneer).
#[allow(clippy::too_many_arguments)]
fn reference(
    arch: Arch,
    stencil: &Stencil<'_>,
    mem: &Memory<'_>,
    code_at: usize,
    data_at: usize,
    (operands, targets): &(Vec<u64>, Vec<Target>),
    instance_data_end: usize,
    code_end: usize,
) -> Vec<u8> {
    let code_base = mem.trace.code_range().start as u64;
    let data_base = mem.trace.data_range().start as u64;
    let mut out = stencil.code.to_vec();
    let mut paired = Vec::new();
    let mut i = 0;
    while i < stencil.holes.len() {
        let h = stencil.holes[i];
        let offset = h.offset as usize;
        let place = code_base + (code_at + offset) as u64;
        let (value, outside) = match h.value {
            HoleValue::Operand(k) | HoleValue::OperandHigh(k) | HoleValue::OperandLow(k) => {
                let (_, part) = h.value.operand().unwrap();
                (part.of(operands[k as usize]), true)
            }
            HoleValue::Target(k) => match targets[k as usize] {
                Target::Address(a) => (a, true),
                Target::Instance(_) | Target::Label(_) => {
                    unreachable!("the cases jump to addresses")
                }
            },
            HoleValue::Symbol(s) => (
                if s == NEAR {
                    near_symbol()
                } else {
                    far_symbol()
                },
                true,
            ),
            HoleValue::Data => (data_base + data_at as u64, false),
            HoleValue::Code => (code_base + code_at as u64, false),
            HoleValue::Continue => unreachable!("the cases do not continue"),
            HoleValue::Cold => unreachable!("the cases have no cold part"),
        };
        let target = value.wrapping_add(h.addend as u64);
        let got = |out: &mut Vec<u8>, h: Hole| {
            let place = code_base + (code_at + h.offset as usize) as u64;
            let slot = mem.got(value, instance_data_end);
            patch::patch(
                h.kind,
                out,
                h.offset as usize,
                place,
                slot.wrapping_add(h.addend as u64),
            )
            .unwrap();
        };
        if paired.contains(&i) {
            i += 1;
            continue;
        }
        if let Some(j) = got_pair(stencil, i) {
            let ldr = stencil.holes[j];
            paired.push(j);
            if !relax_aarch64_got_pair(&mut out, offset, ldr.offset as usize, place, value).unwrap()
            {
                got(&mut out, h);
                got(&mut out, ldr);
            }
            i += 1;
            continue;
        }
        if h.kind.is_relaxable_x86_got() && h.addend == -4 {
            let done = (outside
                && relax_x86_got_load_constant(h.kind, &mut out, offset, value).unwrap())
                || relax_x86_got_load(&mut out, offset, place, target).unwrap();
            if !done {
                got(&mut out, h);
            }
        } else if h.kind.uses_got() {
            got(&mut out, h);
        } else if h.kind.is_branch() {
            let bias = u64::from(h.kind == HoleKind::X86Branch32) * 4;
            let to = if !outside || in_range(h.kind, place, target) {
                target
            } else {
                mem.veneer(arch, target.wrapping_add(bias), code_end)
                    .wrapping_sub(bias)
            };
            patch::patch(h.kind, &mut out, offset, place, to).unwrap();
        } else {
            patch::patch(h.kind, &mut out, offset, place, target).unwrap();
        }
        i += 1;
    }
    out
}

/// Stitches every case (one trace per case, one instance per operand/target set) in a JIT
/// with `options` and compares each instance's code and data with the reference.
fn compare_with_reference(options: JitOptions) {
    let arch = SET.arch;
    let cases = cases(arch);
    let (set, first) = set_with(&cases);
    let jit = Jit::with_options(set, resolve, options).unwrap();
    for (c, case) in cases.iter().enumerate() {
        let stencil = &set.stencils[first + c];
        let mut t = jit.trace();
        for (operands, targets) in &case.instances {
            t.push(first + c, operands, targets).unwrap();
        }
        let trace = t.finish().unwrap_or_else(|e| panic!("{}: {e}", case.name));
        // SAFETY: the trace's data is mapped readable while the trace lives.
        let data = unsafe {
            std::slice::from_raw_parts(
                trace.data_range().start as *const u8,
                trace.data_range().len(),
            )
        };
        let mem = Memory {
            trace: &trace,
            data,
        };
        let n = case.instances.len();
        let instance_data_end = 32 * (n - 1) + 24;
        let code_end = trace.instance_offsets()[n - 1] as usize + stencil.code.len();
        let code = trace.code_bytes();
        for (i, instance) in case.instances.iter().enumerate() {
            let at = trace.instance_offsets()[i] as usize;
            let expected = reference(
                arch,
                stencil,
                &mem,
                at,
                32 * i,
                instance,
                instance_data_end,
                code_end,
            );
            assert_eq!(
                &code[at..at + expected.len()],
                &expected[..],
                "{}, instance {i} ({:#x?}), near {:?}",
                case.name,
                instance,
                options.near
            );
            assert_eq!(&data[32 * i..32 * i + 24], &INIT_DATA, "{} data", case.name);
        }
    }
}

#[test]
fn every_hole_form_matches_the_reference_near_the_arena() {
    compare_with_reference(JitOptions::default());
}

/// The fast forms of an operand's abs32 field and range check refuse what the full path
/// refuses: a value one past either edge fails `finish`, naming the range.
#[test]
fn abs32_and_checked_operands_out_of_range_are_refused() {
    if SET.arch != Arch::X86_64 {
        return;
    }
    use HoleKind as K;
    let case = |name, holes, value: u64| Case {
        name,
        code: vec![0xb8, 0, 0, 0, 0],
        holes,
        instances: vec![(vec![0], vec![]), (vec![value], vec![])],
    };
    let abs32 = || vec![hole(1, K::X86Abs32, HoleValue::Operand(0), 0)];
    let checked = || {
        vec![
            hole(0, K::OperandU16, HoleValue::Operand(0), 0),
            hole(1, K::X86Abs32, HoleValue::Operand(0), 0),
        ]
    };
    let cases = vec![
        case("abs32 past u32", abs32(), 1 << 32),
        case("abs32 below i32", abs32(), (i32::MIN as i64 - 1) as u64),
        case("u16 past", checked(), 0x1_0000),
        case("u16 below", checked(), u64::MAX),
    ];
    let (set, first) = set_with(&cases);
    let jit = Jit::with_options(set, resolve, JitOptions::default()).unwrap();
    for (c, case) in cases.iter().enumerate() {
        let mut t = jit.trace();
        for (operands, targets) in &case.instances {
            t.push(first + c, operands, targets).unwrap();
        }
        let e = t
            .finish()
            .err()
            .unwrap_or_else(|| panic!("{}: stitched", case.name));
        let text = e.to_string();
        assert!(text.contains("does not fit"), "{}: {text}", case.name);
    }
}

/// 80 TiB away from this binary: symbols, jump targets and address operands are out of
/// every direct reach, so branches take veneers and address loads GOT slots.
#[test]
fn every_hole_form_matches_the_reference_far_from_the_arena() {
    compare_with_reference(JitOptions {
        near: Some(0x5000_0000_0000),
        ..JitOptions::default()
    });
}

/// The edges of the x86-64 `imm32` form, literally: a 64-bit `mov` of a value that fits a
/// sign-extended 32-bit immediate is `mov r64, imm32`; one past either edge is not.
#[test]
fn imm32_fast_form_edges() {
    if SET.arch != Arch::X86_64 {
        return;
    }
    let cases = vec![Case {
        name: "mov",
        code: vec![0x48, 0x8b, 0x05, 0, 0, 0, 0],
        holes: vec![hole(
            3,
            HoleKind::X86RexGotPc32Relaxable,
            HoleValue::Operand(0),
            -4,
        )],
        instances: vec![(vec![0], vec![])],
    }];
    let (set, first) = set_with(&cases);
    let jit = Jit::with_options(
        set,
        resolve,
        JitOptions {
            near: Some(0x5000_0000_0000),
            ..JitOptions::default()
        },
    )
    .unwrap();
    let stitched = |v: u64| {
        let mut t = jit.trace();
        t.push(first, &[v], &[]).unwrap();
        let trace = t.finish().unwrap();
        (trace.code_bytes()[..7].to_vec(), trace.got_slots())
    };
    for (v, imm) in [
        (i32::MAX as u64, [0xff, 0xff, 0xff, 0x7f]),
        (i32::MIN as i64 as u64, [0x00, 0x00, 0x00, 0x80]),
        (u64::MAX, [0xff, 0xff, 0xff, 0xff]),
        (0, [0, 0, 0, 0]),
    ] {
        let (code, slots) = stitched(v);
        assert_eq!(code[..3], [0x48, 0xc7, 0xc0], "mov rax, imm32 for {v:#x}");
        assert_eq!(code[3..], imm, "{v:#x}");
        assert_eq!(slots, 0);
    }
    for v in [1u64 << 31, (i32::MIN as i64 - 1) as u64] {
        let (code, slots) = stitched(v);
        assert_eq!(
            code[..3],
            [0x48, 0x8b, 0x05],
            "mov rax, [rip + G] for {v:#x}"
        );
        assert_eq!(slots, 1, "{v:#x}");
    }
}
