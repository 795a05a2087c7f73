//! Range, alignment, instruction-class and bounds checks of every hole kind: values just
//! inside and just outside both ends of each encoding, and the error each failure reports.

use cpjit_runtime::model::HoleKind;
use cpjit_runtime::patch::{
    in_range, patch, relax_aarch64_got_pair, relax_x86_got_load, relax_x86_got_load_constant,
    PatchError, Problem,
};

const PLACE: u64 = 0x7f12_3456_7000;

/// A minimal instance of the instruction each kind patches, and the hole's offset in it.
fn sample(kind: HoleKind) -> (Vec<u8>, usize) {
    let word = |w: u32| (w.to_le_bytes().to_vec(), 0);
    match kind {
        HoleKind::Abs64 => (vec![0; 8], 0),
        HoleKind::X86Pc32 | HoleKind::X86GotPc32 => (vec![0x48, 0x8d, 0x05, 0, 0, 0, 0], 3),
        HoleKind::X86GotPc32Relaxable | HoleKind::X86RexGotPc32Relaxable => {
            (vec![0x48, 0x8b, 0x05, 0, 0, 0, 0], 3)
        }
        HoleKind::X86Branch32 => (vec![0xe8, 0, 0, 0, 0], 1),
        HoleKind::X86Abs32 => (vec![0xb9, 0, 0, 0, 0], 1), // mov ecx, imm32
        HoleKind::X86Imm64 => (vec![0x49, 0xbd, 0, 0, 0, 0, 0, 0, 0, 0], 2), // movabs r13, imm64
        // Check holes and markers patch nothing: empty at the end of any code.
        HoleKind::EntryParameters
        | HoleKind::OperandU8
        | HoleKind::OperandS8
        | HoleKind::OperandU16
        | HoleKind::OperandS16
        | HoleKind::OperandU32
        | HoleKind::OperandS32 => (vec![0x90], 1),
        HoleKind::Aarch64Branch26 => word(0x9400_0000), // bl
        HoleKind::Aarch64Branch19 => word(0x5400_0001), // b.ne
        HoleKind::Aarch64Branch14 => word(0x3600_0005), // tbz w5, #0
        HoleKind::Aarch64AdrPage21 => word(0x9000_0000), // adrp x0
        HoleKind::Aarch64AdrGotPage21 => word(0x9000_0008), // adrp x8
        HoleKind::Aarch64AddLo12 => word(0x9100_0000),  // add x0, x0, #0
        HoleKind::Aarch64LdSt8Lo12 => word(0x3940_0001), // ldrb w1, [x0]
        HoleKind::Aarch64LdSt16Lo12 => word(0x7900_0001), // strh w1, [x0]
        HoleKind::Aarch64LdSt32Lo12 => word(0xb940_0001), // ldr w1, [x0]
        HoleKind::Aarch64LdSt64Lo12 => word(0xf940_0001), // ldr x1, [x0]
        HoleKind::Aarch64LdSt128Lo12 => word(0x3dc0_0001), // ldr q1, [x0]
        HoleKind::Aarch64Ld64GotLo12 => word(0xf940_0108), // ldr x8, [x8]
        HoleKind::Aarch64MovwG0 => word(0xf280_0009),   // movk x9, #0
        HoleKind::Aarch64MovwG1 => word(0xf2a0_0009),   // movk x9, #0, lsl #16
        HoleKind::Aarch64MovwG2 => word(0xf2c0_0009),   // movk x9, #0, lsl #32
        HoleKind::Aarch64MovwG3 => word(0xd2e0_0009),   // movz x9, #0, lsl #48
        HoleKind::RiscvCall => ([0x97, 0, 0, 0, 0xe7, 0x80, 0, 0].to_vec(), 0), // auipc ra; jalr ra
        HoleKind::RiscvPcrelHi20 => word(0x0000_0517),  // auipc a0, 0
        HoleKind::RiscvPcrelLo12I => word(0x0005_0513), // addi a0, a0, 0
        HoleKind::RiscvPcrelLo12S => word(0x00b5_3023), // sd a1, 0(a0)
        HoleKind::RiscvGotHi20 => word(0x0000_0597),    // auipc a1, 0
        HoleKind::RiscvGotLo12I => word(0x0005_b583),   // ld a1, 0(a1)
        HoleKind::RiscvJal => word(0x0000_00ef),        // jal ra, 0
        HoleKind::RiscvBranch => word(0x00b5_0063),     // beq a0, a1, 0
        HoleKind::RiscvHi20 => word(0x0000_0537),       // lui a0, 0
        HoleKind::RiscvLo12I => word(0x0005_051b),      // addiw a0, a0, 0
    }
}

/// Patches a fresh sample; on error, checks that nothing was written and that `in_range`
/// agrees on range/alignment failures.
fn try_patch(kind: HoleKind, value: u64) -> Result<Vec<u8>, Problem> {
    let (mut code, offset) = sample(kind);
    let before = code.clone();
    let place = PLACE + offset as u64;
    let result = patch(kind, &mut code, offset, place, value);
    match result {
        Ok(()) => {
            assert!(in_range(kind, place, value), "{kind} {value:#x}");
            Ok(code)
        }
        Err(e) => {
            assert_eq!(
                code, before,
                "{kind}: an error must leave the bytes untouched"
            );
            assert_eq!(
                (e.kind, e.offset, e.place, e.value),
                (kind, offset, place, value)
            );
            if matches!(
                e.problem,
                Problem::OutOfRange { .. } | Problem::Misaligned { .. }
            ) {
                assert!(!in_range(kind, place, value), "{kind} {value:#x}");
            }
            assert!(!e.to_string().is_empty());
            Err(e.problem)
        }
    }
}

fn out_of_range(min: i64, max: i64, actual: i64) -> Result<Vec<u8>, Problem> {
    Err(Problem::OutOfRange { min, max, actual })
}

/// PC-relative kinds: (kind, min, max, alignment) of `value - place`.
const PC_RELATIVE: [(HoleKind, i64, i64, i64); 8] = [
    (HoleKind::X86Pc32, -(1 << 31), (1 << 31) - 1, 1),
    (HoleKind::X86Branch32, -(1 << 31), (1 << 31) - 1, 1),
    (HoleKind::X86GotPc32, -(1 << 31), (1 << 31) - 1, 1),
    (HoleKind::X86GotPc32Relaxable, -(1 << 31), (1 << 31) - 1, 1),
    (
        HoleKind::X86RexGotPc32Relaxable,
        -(1 << 31),
        (1 << 31) - 1,
        1,
    ),
    (HoleKind::Aarch64Branch26, -(1 << 27), (1 << 27) - 4, 4),
    (HoleKind::Aarch64Branch19, -(1 << 20), (1 << 20) - 4, 4),
    (HoleKind::Aarch64Branch14, -(1 << 15), (1 << 15) - 4, 4),
];

/// `kind` patched with the value `at(d)` for a displacement `d` accepts `min` and `max`,
/// refuses one step (`align`) beyond each as out of range, and refuses far beyond in both
/// directions, including across the top of the address space.
fn check_range_edges(kind: HoleKind, at: impl Fn(i64) -> u64, (min, max, align): (i64, i64, i64)) {
    assert!(try_patch(kind, at(min)).is_ok(), "{kind} min");
    assert!(try_patch(kind, at(max)).is_ok(), "{kind} max");
    assert_eq!(
        try_patch(kind, at(min - align)),
        out_of_range(min, max, min - align)
    );
    assert_eq!(
        try_patch(kind, at(max + align)),
        out_of_range(min, max, max + align)
    );
    assert!(try_patch(kind, at(i64::MAX)).is_err(), "{kind}");
    assert!(try_patch(kind, at(i64::MIN)).is_err(), "{kind}");
}

#[test]
fn pc_relative_kinds_accept_both_ends_and_reject_one_step_beyond() {
    for (kind, min, max, align) in PC_RELATIVE {
        let offset = sample(kind).1 as u64;
        let at = |d: i64| (PLACE + offset).wrapping_add(d as u64);
        assert!(try_patch(kind, at(0)).is_ok(), "{kind} 0");
        check_range_edges(kind, at, (min, max, align));
        if align > 1 {
            for d in [1, 2, 3, max - 1, min + 2] {
                assert_eq!(
                    try_patch(kind, at(d)),
                    Err(Problem::Misaligned { align: 4 })
                );
            }
        }
    }
}

/// RISC-V PC-relative kinds: (kind, min, max, alignment) of `value - place`.
const RISCV_PC_RELATIVE: [(HoleKind, i64, i64, i64); 5] = [
    (
        HoleKind::RiscvCall,
        -(1 << 31) - 0x800,
        (1 << 31) - 0x801,
        1,
    ),
    (
        HoleKind::RiscvPcrelHi20,
        -(1 << 31) - 0x800,
        (1 << 31) - 0x801,
        1,
    ),
    (
        HoleKind::RiscvGotHi20,
        -(1 << 31) - 0x800,
        (1 << 31) - 0x801,
        1,
    ),
    (HoleKind::RiscvJal, -(1 << 20), (1 << 20) - 2, 2),
    (HoleKind::RiscvBranch, -(1 << 12), (1 << 12) - 2, 2),
];

#[test]
fn riscv_kinds_accept_both_ends_and_reject_one_step_beyond() {
    for (kind, min, max, align) in RISCV_PC_RELATIVE {
        let at = |d: i64| PLACE.wrapping_add(d as u64);
        check_range_edges(kind, at, (min, max, align));
        if align > 1 {
            assert_eq!(
                try_patch(kind, at(1)),
                Err(Problem::Misaligned { align: 2 })
            );
        }
    }
    // The lo12 halves carry no range of their own (their HI20 does).
    for kind in [
        HoleKind::RiscvPcrelLo12I,
        HoleKind::RiscvPcrelLo12S,
        HoleKind::RiscvGotLo12I,
    ] {
        for value in [0, 1, 0xfff, 0x8000_0000_0000_0000, u64::MAX] {
            assert!(try_patch(kind, value).is_ok(), "{kind} {value:#x}");
        }
    }
}

#[test]
fn riscv_call_pairs_must_go_through_the_auipc_register() {
    // auipc ra; jalr ra, 0(t1): the jalr does not use the auipc's result.
    let mut code = [0x97, 0, 0, 0, 0xe7, 0x00, 0x03, 0];
    let err = patch(HoleKind::RiscvCall, &mut code, 0, PLACE, PLACE + 8).unwrap_err();
    assert!(
        matches!(err.problem, Problem::UnexpectedInstruction { .. }),
        "{err}"
    );
    // The extreme call: hi20 0x7ffff, lo12 0x7ff.
    let max = try_patch(HoleKind::RiscvCall, PLACE + (1 << 31) - 0x801).unwrap();
    assert_eq!(max[..4], 0x7fff_f097u32.to_le_bytes());
    assert_eq!(max[4..], 0x7ff0_80e7u32.to_le_bytes());
}

#[test]
fn branch_ends_encode_the_extreme_immediates() {
    // bl to PLACE + max: imm26 = 0x1ffffff; to PLACE + min: imm26 = 0x2000000.
    let kind = HoleKind::Aarch64Branch26;
    let max = try_patch(kind, PLACE + (1 << 27) - 4).unwrap();
    assert_eq!(max, 0x95ff_ffffu32.to_le_bytes());
    let min = try_patch(kind, PLACE - (1 << 27)).unwrap();
    assert_eq!(min, 0x9600_0000u32.to_le_bytes());
    let x86 = try_patch(HoleKind::X86Branch32, PLACE + 1 - (1 << 31)).unwrap();
    assert_eq!(x86, [0xe8, 0x00, 0x00, 0x00, 0x80]);
}

#[test]
fn adrp_reaches_four_gib_of_pages_either_way() {
    for kind in [HoleKind::Aarch64AdrPage21, HoleKind::Aarch64AdrGotPage21] {
        let (min, max) = (-(1i64 << 32), (1i64 << 32) - 0x1000);
        // Only the page counts: any offset within the last reachable page is fine.
        assert!(try_patch(kind, PLACE + max as u64 + 0xfff).is_ok());
        assert!(try_patch(kind, PLACE - (1 << 32)).is_ok());
        assert_eq!(
            try_patch(kind, PLACE + max as u64 + 0x1000),
            out_of_range(min, max, max + 0x1000)
        );
        assert_eq!(
            try_patch(kind, PLACE - (1 << 32) - 1),
            out_of_range(min, max, min - 0x1000)
        );
        let top = try_patch(kind, PLACE + max as u64).unwrap();
        // immlo = 3, immhi = 0x3ffff: page delta 0xfffff.
        assert_eq!(
            u32::from_le_bytes(top[..4].try_into().unwrap()) & 0x60ff_ffe0,
            0x607f_ffe0
        );
    }
}

#[test]
fn scaled_loads_and_stores_need_aligned_addresses() {
    let sizes = [
        (HoleKind::Aarch64LdSt8Lo12, 1),
        (HoleKind::Aarch64LdSt16Lo12, 2),
        (HoleKind::Aarch64LdSt32Lo12, 4),
        (HoleKind::Aarch64LdSt64Lo12, 8),
        (HoleKind::Aarch64LdSt128Lo12, 16),
        (HoleKind::Aarch64Ld64GotLo12, 8),
    ];
    for (kind, size) in sizes {
        let base = 0x1234_5000u64;
        let code = try_patch(kind, base + 0x1000 - size).unwrap();
        let imm12 = u32::from_le_bytes(code[..4].try_into().unwrap()) >> 10 & 0xfff;
        assert_eq!(u64::from(imm12), (0x1000 - size) / size, "{kind}");
        for misaligned in 1..size {
            assert_eq!(
                try_patch(kind, base + misaligned),
                Err(Problem::Misaligned { align: size }),
                "{kind}"
            );
        }
    }
}

#[test]
fn absolute_kinds_take_every_value() {
    for kind in [
        HoleKind::Abs64,
        HoleKind::X86Imm64,
        HoleKind::Aarch64AddLo12,
        HoleKind::Aarch64MovwG0,
        HoleKind::Aarch64MovwG1,
        HoleKind::Aarch64MovwG2,
        HoleKind::Aarch64MovwG3,
    ] {
        for value in [0, 1, 0xfff, 0x8000_0000_0000_0000, u64::MAX] {
            assert!(try_patch(kind, value).is_ok(), "{kind} {value:#x}");
        }
    }
    assert_eq!(
        try_patch(HoleKind::Abs64, 0x0102_0304_0506_0708).unwrap(),
        [8, 7, 6, 5, 4, 3, 2, 1]
    );
    assert_eq!(
        try_patch(HoleKind::X86Imm64, 0x0102_0304_0506_0708).unwrap(),
        [0x49, 0xbd, 8, 7, 6, 5, 4, 3, 2, 1]
    );
}

#[test]
fn x86_imm64_patches_only_the_immediate_of_a_movabs() {
    // Every register: REX.W (48) or REX.WB (49) with b8+r.
    for (rex, reg) in [0x48u8, 0x49]
        .into_iter()
        .flat_map(|p| (0xb8u8..=0xbf).map(move |r| (p, r)))
    {
        let mut code = [rex, reg, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        patch(HoleKind::X86Imm64, &mut code, 2, PLACE, 0x1122_3344).unwrap();
        assert_eq!(code, [rex, reg, 0x44, 0x33, 0x22, 0x11, 0, 0, 0, 0]);
    }
    // mov r32, imm32 (b8+r without REX.W) takes 4 bytes; lea and a bare b8 are no movabs.
    for bytes in [
        [0x40u8, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0],
        [0x48, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0],
        [0x90, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        let mut code = bytes;
        let err = patch(HoleKind::X86Imm64, &mut code, 2, PLACE, 1).unwrap_err();
        assert!(
            matches!(err.problem, Problem::UnexpectedBytes { .. }) && code == bytes,
            "{bytes:x?}: {err}"
        );
        assert!(err.to_string().contains("movabs"), "{err}");
    }
    let mut at_start = [0xb8, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(patch(HoleKind::X86Imm64, &mut at_start, 1, PLACE, 1).is_err());
}

#[test]
fn the_entry_parameters_marker_writes_nothing() {
    for value in [0, PLACE, u64::MAX] {
        assert_eq!(try_patch(HoleKind::EntryParameters, value).unwrap(), [0x90]);
    }
}

#[test]
fn x86_abs32_takes_both_32_bit_ranges_and_rejects_one_beyond() {
    let k = HoleKind::X86Abs32;
    for (value, bytes) in [
        (0u64, [0xb9, 0, 0, 0, 0]),
        (u32::MAX as u64, [0xb9, 0xff, 0xff, 0xff, 0xff]),
        (i32::MIN as i64 as u64, [0xb9, 0, 0, 0, 0x80]),
        (-1i64 as u64, [0xb9, 0xff, 0xff, 0xff, 0xff]),
    ] {
        assert_eq!(try_patch(k, value).unwrap(), bytes, "{value:#x}");
    }
    for value in [1u64 << 32, (i32::MIN as i64 - 1) as u64, u64::MAX / 2] {
        let err = try_patch(k, value).unwrap_err();
        assert_eq!(
            err,
            Problem::ValueOutOfRange {
                min: i32::MIN as i64,
                max: u32::MAX as i64
            },
            "{value:#x}"
        );
    }
}

#[test]
fn riscv_absolute_halves_give_the_low_32_bits_and_reject_one_beyond() {
    // lui a0 + addiw a0, a0 patched for `value`, then executed: the pair's result.
    let pair = |value: u64| {
        let hi = u32::from_le_bytes(
            try_patch(HoleKind::RiscvHi20, value).unwrap()[..4]
                .try_into()
                .unwrap(),
        );
        let lo = u32::from_le_bytes(
            try_patch(HoleKind::RiscvLo12I, value).unwrap()[..4]
                .try_into()
                .unwrap(),
        );
        assert_eq!(
            (hi & 0xfff, lo & 0xf_ffff),
            (0x537, 0x5_051b),
            "{value:#x}: fields only"
        );
        ((hi & 0xffff_f000) as i32).wrapping_add(lo as i32 >> 20) as i64
    };
    for value in [
        0u64,
        0xff,
        0x7ff,
        0x800,
        0xffff,
        0x7fff_f7ff,
        0x7fff_f800, // beyond ld.lld's HI20 range: exact modulo 2^32 (with addiw)
        0x7fff_ffff,
        0x8000_0000,
        u32::MAX as u64,
        -1i64 as u64,
        -0x800i64 as u64,
        i32::MIN as i64 as u64,
    ] {
        assert_eq!(pair(value), value as i32 as i64, "{value:#x}");
    }
    for kind in [HoleKind::RiscvHi20, HoleKind::RiscvLo12I] {
        for value in [1u64 << 32, (i32::MIN as i64 - 1) as u64, u64::MAX / 2] {
            assert_eq!(
                try_patch(kind, value),
                Err(Problem::ValueOutOfRange {
                    min: i32::MIN as i64,
                    max: u32::MAX as i64
                }),
                "{kind} {value:#x}"
            );
        }
    }
    // `addi rd, zero, lo12` alone: the signed 12-bit values.
    for value in [0u64, 0xff, 0x7ff, -0x800i64 as u64, -0x80i64 as u64] {
        let mut code = 0x0000_0513u32.to_le_bytes(); // addi a0, zero, 0
        patch(HoleKind::RiscvLo12I, &mut code, 0, PLACE, value).unwrap();
        assert_eq!((u32::from_le_bytes(code) as i32 >> 20) as i64, value as i64);
    }
    // Only lui takes the hi20, only addi/addiw the lo12 (not auipc, slti, ld).
    for (kind, word) in [
        (HoleKind::RiscvHi20, 0x0000_0517u32),
        (HoleKind::RiscvLo12I, 0x0005_2513),
        (HoleKind::RiscvLo12I, 0x0005_3503),
    ] {
        let mut code = word.to_le_bytes();
        let err = patch(kind, &mut code, 0, PLACE, 1).unwrap_err();
        assert!(
            matches!(err.problem, Problem::UnexpectedInstruction { .. }),
            "{kind}: {err}"
        );
    }
}

#[test]
fn operand_checks_accept_their_declared_range_only_and_write_nothing() {
    use cpjit_runtime::model::OperandRange;
    for range in OperandRange::ALL {
        let kind = range.check_kind();
        let (lo, hi) = range.bounds();
        for v in [lo, hi, 0] {
            assert_eq!(try_patch(kind, v as u64).unwrap(), [0x90], "{kind} {v}");
            assert!(
                patch(kind, &mut [0x90], 2, PLACE, v as u64).is_err(),
                "past the end"
            );
        }
        for v in [lo - 1, hi + 1] {
            let err = patch(kind, &mut [0x90], 0, PLACE, v as u64).unwrap_err();
            assert_eq!(err.problem, Problem::ValueOutOfRange { min: lo, max: hi });
            let text = err.to_string();
            assert!(
                text.contains(range.name()) && text.contains(&v.to_string()),
                "{text}"
            );
        }
    }
}

#[test]
fn every_kind_rejects_the_wrong_instruction() {
    let nop = 0xd503_201fu32.to_le_bytes();
    for kind in HoleKind::ALL {
        let (mut code, offset) = match kind.arch() {
            // An absolute immediate or displacement ends many instruction forms: no class.
            None => continue,
            Some(_) if kind == HoleKind::X86Abs32 => continue,
            Some(cpjit_runtime::model::Arch::X86_64) => {
                (vec![0x90, 0x90, 0x90, 0, 0, 0, 0, 0, 0, 0, 0], 3)
            }
            Some(cpjit_runtime::model::Arch::Aarch64) => (nop.to_vec(), 0),
            // An AArch64 `nop` word has RISC-V major opcode 0x1f: none of the patched forms.
            Some(cpjit_runtime::model::Arch::Riscv64) => ([nop, nop].concat(), 0),
        };
        let err = patch(kind, &mut code, offset, PLACE, PLACE).unwrap_err();
        assert!(
            matches!(
                err.problem,
                Problem::UnexpectedInstruction { .. } | Problem::UnexpectedBytes { .. }
            ),
            "{kind}: {err}"
        );
    }
}

#[test]
fn instruction_classes_are_told_apart() {
    let rejects = |kind: HoleKind, word: u32| {
        let mut code = word.to_le_bytes();
        patch(kind, &mut code, 0, PLACE, PLACE).is_err()
    };
    // Loads/stores must match the relocation's access size.
    assert!(rejects(HoleKind::Aarch64LdSt64Lo12, 0xb940_0001)); // ldr w1 (4 bytes)
    assert!(rejects(HoleKind::Aarch64LdSt32Lo12, 0x3dc0_0001)); // ldr q1 (16 bytes)
    assert!(rejects(HoleKind::Aarch64LdSt128Lo12, 0xfd40_0001)); // ldr d1 (8 bytes)
    assert!(rejects(HoleKind::Aarch64Ld64GotLo12, 0xfd40_0001)); // ldr d1: not an x load
    assert!(!rejects(HoleKind::Aarch64LdSt64Lo12, 0xfd40_0001)); // ldr d1 is 8 bytes
                                                                 // movz/movk with the wrong shift, movn, and a 32-bit move with a 64-bit shift.
    assert!(rejects(HoleKind::Aarch64MovwG0, 0xf2a0_0009)); // lsl #16
    assert!(rejects(HoleKind::Aarch64MovwG1, 0x92a0_0009)); // movn
    assert!(rejects(HoleKind::Aarch64MovwG2, 0x72c0_0009)); // 32-bit, hw = 2
                                                            // add with `lsl #12`; adr (not adrp); b.cond is not b; cbz is not tbz.
    assert!(rejects(HoleKind::Aarch64AddLo12, 0x9140_0000));
    assert!(rejects(HoleKind::Aarch64AdrPage21, 0x1000_0000));
    assert!(rejects(HoleKind::Aarch64Branch26, 0x5400_0001));
    assert!(rejects(HoleKind::Aarch64Branch14, 0xb400_0003));
    // x86: jcc needs its 0f escape; a non-RIP-relative ModRM is not a PC32 operand.
    let mut jcc = [0x90, 0x85, 0, 0, 0, 0];
    assert!(patch(HoleKind::X86Branch32, &mut jcc, 2, PLACE, PLACE).is_err());
    let mut mov = [0x48, 0x8b, 0x45, 0, 0, 0, 0]; // mov rax, [rbp + disp8]
    assert!(patch(HoleKind::X86Pc32, &mut mov, 3, PLACE, PLACE).is_err());
    assert!(patch(HoleKind::X86GotPc32Relaxable, &mut mov, 3, PLACE, PLACE).is_err());
}

#[test]
fn short_slices_and_huge_offsets_are_out_of_bounds() {
    for kind in HoleKind::ALL {
        let (code, offset) = sample(kind);
        for cut in 0..code.len() {
            let mut short = code[..cut].to_vec();
            let err = patch(kind, &mut short, offset, PLACE, PLACE).unwrap_err();
            assert!(
                matches!(
                    err.problem,
                    Problem::OutOfBounds { .. } | Problem::UnexpectedBytes { .. }
                ),
                "{kind}: {err}"
            );
            assert_eq!(short, code[..cut], "{kind}");
        }
        let mut full = code.clone();
        let err = patch(kind, &mut full, usize::MAX - 2, PLACE, PLACE).unwrap_err();
        assert!(
            matches!(err.problem, Problem::OutOfBounds { .. }),
            "{kind}: {err}"
        );
    }
}

#[test]
fn errors_name_kind_offset_value_and_range() {
    let mut code = 0x9400_0000u32.to_le_bytes();
    let err: PatchError = patch(
        HoleKind::Aarch64Branch26,
        &mut code,
        0,
        0x1000,
        0x7f00_0000_1000,
    )
    .unwrap_err();
    let text = err.to_string();
    for needle in [
        "Aarch64Branch26",
        "offset 0x0",
        "0x7f0000001000",
        "0x1000",
        "±128 MiB",
    ] {
        assert!(text.contains(needle), "{text:?} lacks {needle:?}");
    }
    let mut x86 = [0x90, 0x90, 0, 0, 0, 0];
    let text = patch(HoleKind::X86Branch32, &mut x86, 2, 0, 0)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("[90 90]") && text.contains("e8/e9"),
        "{text:?}"
    );
    let mut short = [0u8; 3];
    let text = patch(HoleKind::Abs64, &mut short, 1, 0, 0)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("0x1..0x9") && text.contains("0x3 bytes long"),
        "{text:?}"
    );
}

#[test]
fn x86_got_relaxation_falls_back_when_out_of_range() {
    let mov = [0x48, 0x8b, 0x05, 0, 0, 0, 0];
    let call = [0xff, 0x15, 0, 0, 0, 0];
    let jmp = [0xff, 0x25, 0, 0, 0, 0];
    let max = i32::MAX as u64;
    for (form, bias) in [(&mov[..], 0), (&call[..], 0), (&jmp[..], 1)] {
        let offset = form.len() - 4;
        let place = PLACE + offset as u64;
        let mut code = form.to_vec();
        // The jmp moves one byte earlier, so its reach ends one byte sooner.
        assert_eq!(
            relax_x86_got_load(&mut code, offset, place, place + max + 1 - bias),
            Ok(false)
        );
        assert_eq!(code, form);
        let min = place.wrapping_sub(1 << 31).wrapping_sub(bias);
        assert_eq!(
            relax_x86_got_load(&mut code, offset, place, min - 1),
            Ok(false)
        );
        assert_eq!(code, form);
        assert_eq!(
            relax_x86_got_load(&mut code, offset, place, place + max - bias),
            Ok(true)
        );
        assert_ne!(code, form);
        let mut code = form.to_vec();
        assert_eq!(relax_x86_got_load(&mut code, offset, place, min), Ok(true));
    }
    // Any other RIP-relative instruction keeps loading through the slot (issue 16: `add r13,
    // [rip+G]` = 4c 03 2d is patched, not rejected); a non-RIP-relative one is an error.
    use HoleKind::{X86GotPc32Relaxable as Got, X86RexGotPc32Relaxable as RexGot};
    for kind in [Got, RexGot] {
        let mut imul = [0x48, 0x0f, 0xaf, 0x05, 0, 0, 0, 0]; // imul rax, [rip+G]
        let rex = kind == RexGot;
        assert_eq!(relax_x86_got_load(&mut imul, 4, PLACE, PLACE), Ok(false));
        // The byte before imul's 0f af is not a REX prefix, so a REX kind rejects it.
        assert_eq!(
            relax_x86_got_load_constant(kind, &mut imul, 4, 1).is_err(),
            rex
        );
        assert_eq!(patch(kind, &mut imul, 4, PLACE, PLACE).is_err(), rex);
        let mut add = [0x4c, 0x03, 0x2d, 0, 0, 0, 0];
        assert_eq!(relax_x86_got_load(&mut add, 3, PLACE, PLACE), Ok(false));
        assert_eq!(relax_x86_got_load_constant(kind, &mut add, 3, 7), Ok(rex));
        let mut add = [0x4c, 0x03, 0x2d, 0, 0, 0, 0];
        assert_eq!(patch(kind, &mut add, 3, PLACE, PLACE + 0x10), Ok(()));
        assert_eq!(add, [0x4c, 0x03, 0x2d, 0x10, 0, 0, 0]);
        let mut not_rip = [0x48, 0x03, 0x45, 0, 0, 0, 0]; // add rax, [rbp + disp8]
        assert!(relax_x86_got_load(&mut not_rip, 3, PLACE, PLACE).is_err());
        assert!(relax_x86_got_load_constant(kind, &mut not_rip, 3, 1).is_err());
    }
    // A mov without REX.W loads 32 bits: not turned into a 64-bit immediate.
    let mut movl = [0x40, 0x8b, 0x05, 0, 0, 0, 0];
    assert_eq!(
        relax_x86_got_load_constant(RexGot, &mut movl, 3, 1),
        Ok(false)
    );
    // Issue 15: `add al, 0x4c; mov eax, [rip+G]`. The 4c is the add's immediate, and a
    // GOTPCRELX relocation promises no REX prefix: the bytes stay as they are.
    let before = [0x04, 0x4c, 0x8b, 0x05, 0, 0, 0, 0];
    let mut code = before;
    assert_eq!(relax_x86_got_load_constant(Got, &mut code, 4, 1), Ok(false));
    assert_eq!(code, before);
    // Not an x86 GOT kind at all: nothing to relax.
    assert_eq!(
        relax_x86_got_load_constant(HoleKind::X86Pc32, &mut code, 4, 1),
        Ok(false)
    );
}

#[test]
fn aarch64_got_pair_relaxation_checks_registers_and_range() {
    let pair = |adrp_reg: u32, ldr_rt: u32, ldr_rn: u32| {
        let mut v = (0x9000_0000 | adrp_reg).to_le_bytes().to_vec();
        v.extend((0xf940_0000 | ldr_rn << 5 | ldr_rt).to_le_bytes());
        v
    };
    let far = PLACE + (1 << 32); // page out of reach; above 2^32
    let near = PLACE + (1 << 32) - 0x1000;
    let mut code = pair(3, 3, 3);
    assert_eq!(
        relax_aarch64_got_pair(&mut code, 0, 4, PLACE, far),
        Ok(false)
    );
    assert_eq!(code, pair(3, 3, 3));
    let below = PLACE - (1 << 32) - 1;
    assert_eq!(
        relax_aarch64_got_pair(&mut code, 0, 4, PLACE, below),
        Ok(false)
    );
    assert_eq!(
        relax_aarch64_got_pair(&mut code, 0, 4, PLACE, near),
        Ok(true)
    );
    for (a, t, n) in [(3, 4, 3), (3, 3, 4), (31, 31, 31)] {
        let mut code = pair(a, t, n);
        assert_eq!(relax_aarch64_got_pair(&mut code, 0, 4, PLACE, 1), Ok(false));
    }
    let mut code = pair(3, 3, 3);
    code.swap(3, 7); // neither is its class any more
    assert!(relax_aarch64_got_pair(&mut code, 0, 4, PLACE, 1).is_err());
    let mut code = pair(3, 3, 3);
    assert!(relax_aarch64_got_pair(&mut code, 0, 2, PLACE, 1).is_err());
    assert!(relax_aarch64_got_pair(&mut code, 0, 8, PLACE, 1).is_err());
    assert_eq!(code, pair(3, 3, 3));
}
