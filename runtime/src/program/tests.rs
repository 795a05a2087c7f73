//! Unit tests of the per-stencil patch programs.

use super::code_hole as hole;
use super::*;

#[test]
fn steps_pair_got_loads_and_count_slots_and_far_branches() {
    let holes = [
        hole(0, HoleKind::Aarch64AdrGotPage21, HoleValue::Operand(0), 0),
        hole(4, HoleKind::Aarch64Ld64GotLo12, HoleValue::Operand(0), 0),
        hole(8, HoleKind::Aarch64Branch26, HoleValue::Symbol(0), 0),
        hole(12, HoleKind::Aarch64AdrGotPage21, HoleValue::Operand(1), 0),
        hole(20, HoleKind::Aarch64Ld64GotLo12, HoleValue::Operand(1), 0),
        hole(24, HoleKind::Aarch64Branch26, HoleValue::Code, 0),
    ];
    let stencil = Stencil {
        name: "op",
        code: &[0; 28],
        code_align: 4,
        holes: &holes,
        operands: &["A", "B"],
        ..Stencil::EMPTY
    };
    let p = Program::alone(&stencil, false, 0);
    let actions: Vec<Action> = p.steps.iter().map(|s| s.action).collect();
    assert_eq!(
        actions,
        [
            Action::GotPair {
                ldr_hole: 1,
                ldr_offset: 4
            },
            Action::Branch,
            Action::Got, // not adjacent: each hole on its own
            Action::Got,
            Action::Branch,
        ]
    );
    // The code is zeros, not an `adrp`: the pair does not relax, so it always needs a
    // slot; the branch to the instance's own code never needs a veneer. Operand 1's two
    // lone GOT loads share its slot: one need.
    let needs: Vec<(bool, Bound)> = p.needs.iter().map(|n| (n.got, n.bound)).collect();
    assert_eq!(
        needs,
        [
            (true, Bound::Always),
            (false, Bound::Always),
            (true, Bound::Always),
        ]
    );
    assert_eq!(p.steps[1].hole, 2);
}

/// Interleaved GOT loads (`adrp x8; adrp x9; ldr x8; ldr x9`, as clang emits for two
/// loads at once on COFF) pair up by register; a pair with its register written in
/// between (`adrp x8; adrp x8; ldr x8`) does not.
#[test]
fn interleaved_got_loads_pair_by_register() {
    let words = |ws: &[u32]| -> Vec<u8> { ws.iter().flat_map(|w| w.to_le_bytes()).collect() };
    let holes = [
        hole(
            0,
            HoleKind::Aarch64AdrGotPage21,
            HoleValue::OperandHigh(0),
            0,
        ),
        hole(
            4,
            HoleKind::Aarch64AdrGotPage21,
            HoleValue::OperandLow(0),
            0,
        ),
        hole(
            8,
            HoleKind::Aarch64Ld64GotLo12,
            HoleValue::OperandHigh(0),
            0,
        ),
        hole(
            12,
            HoleKind::Aarch64Ld64GotLo12,
            HoleValue::OperandLow(0),
            0,
        ),
    ];
    let pair = |code: &[u8]| {
        let stencil = Stencil {
            name: "op",
            code,
            code_align: 4,
            holes: &holes,
            operands: &["V"],
            ..Stencil::EMPTY
        };
        let p = Program::alone(&stencil, false, 0);
        let steps: Vec<(u16, Action)> = p.steps.iter().map(|s| (s.hole, s.action)).collect();
        let needs: Vec<Bound> = p.needs.iter().map(|n| n.bound).collect();
        (steps, needs)
    };
    let (steps, needs) = pair(&words(&[
        0x9000_0008,
        0x9000_0009,
        0xf940_0108,
        0xf940_0129,
    ]));
    let got_pair = |ldr_hole: u16, ldr_offset: u32| Action::GotPair {
        ldr_hole,
        ldr_offset,
    };
    assert_eq!(steps, [(0, got_pair(2, 8)), (1, got_pair(3, 12))]);
    // A half always relaxes into movz/movk: it never needs a slot counted.
    for need in needs {
        assert!(matches!(
            need,
            Bound::OperandAbove {
                operand: 0,
                part: OperandPart::High | OperandPart::Low,
                signed32: false
            }
        ));
    }
    let (steps, _) = pair(&words(&[
        0x9000_0008,
        0x9000_0008,
        0xf940_0108,
        0xf940_0108,
    ]));
    let actions: Vec<Action> = steps.iter().map(|s| s.1).collect();
    assert_eq!(actions, [Action::Got; 4]);
}

#[test]
fn x86_holes_get_their_fast_forms_and_the_code_its_prepared_instructions() {
    use HoleKind::X86RexGotPc32Relaxable as RexGot;
    use HoleKind::{X86Branch32, X86GotPc32, X86GotPc32Relaxable, X86Pc32};
    use HoleValue::{Data, Operand, Symbol};
    #[rustfmt::skip]
    let code: &[u8] = &[
        0x48, 0x8d, 0x05, 0, 0, 0, 0, //  0: lea rax, [rip + data]
        0xe8, 0, 0, 0, 0, //              7: call helper
        0x48, 0x8b, 0x05, 0, 0, 0, 0, // 12: mov rax, [rip + G(operand)]
        0x4c, 0x03, 0x2d, 0, 0, 0, 0, // 19: add r13, [rip + G(operand)]
        0x8b, 0x05, 0, 0, 0, 0, //       26: mov eax, [rip + G(operand)]
        0xff, 0x15, 0, 0, 0, 0, //       32: call [rip + G(helper)]
        0xff, 0x25, 0, 0, 0, 0, //       38: jmp [rip + G(helper)]
        0x48, 0x8b, 0x05, 0, 0, 0, 0, // 44: mov rax, [rip + G(helper)]
        0x48, 0x8b, 0x0d, 0, 0, 0, 0, // 51: mov rcx, [rip + G(data)]
        0x48, 0x03, 0x05, 0, 0, 0, 0, // 58: add rax, [rip + GOTPCREL(operand)]
        0xc3, //                         65: ret
    ];
    let holes = [
        hole(3, X86Pc32, Data, -4),
        hole(8, X86Branch32, Symbol(0), -4),
        hole(15, RexGot, Operand(0), -4),
        hole(22, RexGot, Operand(0), -4),
        hole(28, X86GotPc32Relaxable, Operand(0), -4),
        hole(34, X86GotPc32Relaxable, Symbol(0), -4),
        hole(40, X86GotPc32Relaxable, Symbol(0), -4),
        hole(47, RexGot, Symbol(0), -4),
        hole(54, RexGot, Data, -4),
        hole(61, X86GotPc32, Operand(0), -4),
    ];
    let stencil = Stencil {
        name: "op",
        code,
        init_data: &[1, 2],
        data_len: 8,
        data_align: 8,
        holes: &holes,
        operands: &["V"],
        symbols: &[0],
        falls_through: false,
        ..Stencil::EMPTY
    };
    let p = Program::alone(&stencil, false, 0xcc);
    let fast: Vec<Fast> = p.steps.iter().map(|s| s.fast).collect();
    assert_eq!(
        fast,
        [
            Fast::Rel32,
            Fast::Rel32,
            Fast::Imm32 {
                operand: 0,
                part: OperandPart::Whole
            },
            Fast::Imm32 {
                operand: 0,
                part: OperandPart::Whole
            },
            Fast::Full, // no REX.W: no immediate form
            Fast::Direct,
            Fast::Full, // `jmp` moves its field
            Fast::Full, // a symbol may take the immediate form
            Fast::Direct,
            // GOTPCREL is never relaxed: the operand's GOT slot
            Fast::Got {
                operand: 0,
                part: OperandPart::Whole
            },
        ]
    );
    // Prepared once: `mov rax, imm32`, `add r13, imm32`, `addr32 call`, `lea rcx`;
    // padded with traps to 80 bytes; everything else as the stencil has it.
    let mut expected = code.to_vec();
    expected[12..15].copy_from_slice(&[0x48, 0xc7, 0xc0]);
    expected[19..22].copy_from_slice(&[0x49, 0x81, 0xc5]);
    expected[32..34].copy_from_slice(&[0x67, 0xe8]);
    expected[52] = 0x8d;
    expected.resize(80, 0xcc);
    assert_eq!(&p.code[..], &expected[..]);
    // The `imm32` forms keep the stencil's REX, opcode and ModRM for a wider operand.
    let before: Vec<[u8; 3]> = p.steps[2..4].iter().map(|s| s.before).collect();
    assert_eq!(before, [[0x48, 0x8b, 0x05], [0x4c, 0x03, 0x2d]]);
    assert_eq!(
        &p.data[..],
        &[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    // The helper's call and loads count one GOT slot and one veneer by its id; the
    // operand loads share one slot: one need (the internal load's is its own).
    let keys: Vec<(bool, Key)> = p.needs.iter().map(|n| (n.got, n.key)).collect();
    let operand = Key::Operand {
        operand: 0,
        part: OperandPart::Whole,
        bias: 0,
    };
    assert_eq!(
        keys,
        [
            (false, Key::Symbol(0)),
            (true, operand),
            (true, Key::Symbol(0)),
            (true, Key::Unknown),
        ]
    );
}

/// Needs that name one slot or veneer merge into the one that counts when either did;
/// others (an unknown key, another operand, part or kind, an incomparable bound) stay.
#[test]
fn needs_of_one_slot_merge_into_one() {
    let operand = |operand| Key::Operand {
        operand,
        part: OperandPart::Whole,
        bias: 0,
    };
    let above = |operand, signed32| Bound::OperandAbove {
        operand,
        part: OperandPart::Whole,
        signed32,
    };
    let need = |got, bound, key| Need { got, bound, key };
    let mut needs = vec![
        need(true, above(0, true), operand(0)),
        need(true, above(0, true), operand(0)),
        need(true, above(0, false), operand(0)),
        need(true, above(1, true), operand(1)),
        need(false, Bound::Always, operand(1)),
        need(true, Bound::Always, operand(1)),
        need(true, Bound::Always, Key::Symbol(3)),
        need(true, Bound::Always, Key::Symbol(3)),
        need(false, Bound::Target(0), Key::Unknown),
        need(false, Bound::Target(0), Key::Unknown),
        need(true, Bound::Internal, Key::Unknown),
    ];
    need::merge_shared(&mut needs);
    let merged: Vec<(bool, Bound, Key)> = needs.iter().map(|n| (n.got, n.bound, n.key)).collect();
    assert_eq!(
        merged,
        [
            (true, above(0, true), operand(0)),
            (true, above(0, false), operand(0)),
            (true, Bound::Always, operand(1)),
            (false, Bound::Always, operand(1)),
            (true, Bound::Always, Key::Symbol(3)),
            (false, Bound::Target(0), Key::Unknown),
            (false, Bound::Target(0), Key::Unknown),
            (true, Bound::Internal, Key::Unknown),
        ]
    );
}

/// What a program holds, for comparing two compilations of one stencil.
fn summary(p: &Program) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {} {} {:?}",
        p.code,
        p.data,
        p.steps,
        p.needs,
        p.filter,
        p.continue_needs,
        p.continues,
        p.cold.as_deref().map(summary)
    )
}

/// `compile` reuses its buffers from stencil to stencil: every program it compiles for the
/// generated sets is the one the stencil compiled alone gives (nothing of the previous
/// stencil leaks), and each program and cold part has the flat form (`Quick::Operands`,
/// `Quick::Mixed`) it has alone, its range of the flat array holding its own operand steps.
#[test]
fn a_set_compiles_as_its_stencils_alone() {
    for set in cpjit_stencils::all() {
        let (programs, flat) = compile(set);
        let trap = ArchFacts::of(set.arch).trap;
        for (i, (p, s)) in programs.iter().zip(set.stencils).enumerate().rev() {
            let alone = Program::alone(s, set.shim == Some(i as u16), trap);
            assert_eq!(summary(p), summary(&alone), "{} {}", set.target, s.name);
            let cold = p.cold.as_deref().zip(alone.cold.as_deref());
            for (p, alone, cold) in [(p, &*alone, false)]
                .into_iter()
                .chain(cold.map(|(p, a)| (p, a, true)))
            {
                // The stencil's program alone, its flat forms worked out on a flat array
                // of its own: the same form, and the same operand steps.
                let (mut own, mut scratch) = (Vec::new(), Vec::new());
                let expected = flat_quick(alone, cold, &mut own, &mut scratch);
                let (quick, range) = match (p.quick, expected) {
                    (Quick::Operands { from, len }, Quick::Operands { len: l, .. }) => {
                        (Quick::Operands { from: 0, len }, from..from + l)
                    }
                    (
                        Quick::Mixed {
                            from,
                            len,
                            count,
                            sites,
                        },
                        Quick::Mixed { len: l, .. },
                    ) => (
                        Quick::Mixed {
                            from: 0,
                            len,
                            count,
                            sites,
                        },
                        from..from + l as u32,
                    ),
                    (quick, _) => (quick, 0..0),
                };
                let what = format!("{} {} (cold part: {cold})", set.target, s.name);
                assert_eq!(quick, expected, "{what}");
                let range = range.start as usize..range.end as usize;
                assert_eq!(&flat[range], &own[..], "{what}");
            }
        }
        assert_eq!(programs.len(), set.stencils.len());
    }
}
