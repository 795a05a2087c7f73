//! Unit tests of the layout: a `plain` program is placed as the general rule places it;
//! each stencil's [`NeedFilter`] says what can count, and counting through the filters
//! equals counting every need.

use super::{Counted, Layout};
use crate::program::{code_hole, Alone, NeedFilter, Program};
use crate::trace::{InstanceId, Target};
use cpjit_model::{Hole, HoleKind, HoleValue, Stencil};

/// An x86-64 rel32 hole (addend −4).
const fn hole(offset: u32, kind: HoleKind, value: HoleValue) -> Hole {
    code_hole(offset, kind, value, -4)
}

/// x86-64 stencils with every kind of need: operand loads that relax to an `imm32`, a
/// GOTPCREL load that never does, calls and loads of symbols, a jump target, a load of
/// the instance's own data.
fn programs() -> Vec<Alone> {
    use HoleKind::{X86Branch32, X86GotPc32, X86RexGotPc32Relaxable as RexGot};
    use HoleValue::{Data, Operand, Symbol, Target};
    #[rustfmt::skip]
    const CODE: &[u8] = &[
        0x48, 0x8b, 0x05, 0, 0, 0, 0, //  0: mov rax, [rip + G(operand)]
        0xe8, 0, 0, 0, 0, //              7: call symbol
        0xe9, 0, 0, 0, 0, //             12: jmp target
        0x48, 0x8b, 0x0d, 0, 0, 0, 0, // 17: mov rcx, [rip + G(symbol)]
        0x48, 0x03, 0x05, 0, 0, 0, 0, // 24: add rax, [rip + GOTPCREL(operand)]
        0x48, 0x8b, 0x15, 0, 0, 0, 0, // 31: mov rdx, [rip + G(data)]
        0xc3,
    ];
    let stencils: [&[Hole]; 6] = [
        // Operands only: filtered by their width.
        &[hole(3, RexGot, Operand(0)), hole(20, RexGot, Operand(1))],
        // Symbols only: filtered once counted.
        &[hole(8, X86Branch32, Symbol(0)), hole(20, RexGot, Symbol(1))],
        // A jump target: filtered unless it is an address.
        &[hole(13, X86Branch32, Target(0))],
        // A GOTPCREL load of an operand: always counted.
        &[hole(27, X86GotPc32, Operand(0))],
        // A GOT load of the instance's data (internal): always counted.
        &[hole(34, RexGot, Data)],
        // All of them.
        &[
            hole(3, RexGot, Operand(1)),
            hole(8, X86Branch32, Symbol(1)),
            hole(13, X86Branch32, Target(0)),
            hole(20, RexGot, Symbol(0)),
        ],
    ];
    stencils
        .iter()
        .map(|holes| {
            let stencil = Stencil {
                name: "op",
                code: CODE,
                data_len: 8,
                data_align: 8,
                holes,
                operands: &["A", "B"],
                targets: &["T"],
                symbols: &[0, 1],
                ..Stencil::EMPTY
            };
            Program::alone(&stencil, false, 0xcc)
        })
        .collect()
}

#[test]
fn need_filters_say_what_can_count() {
    let p = programs();
    let filters: Vec<(u8, u64, u64)> = p
        .iter()
        .map(|p| (p.filter.flags, p.filter.operand_bias, p.filter.symbols))
        .collect();
    let (o, t, a, s) = (
        NeedFilter::OPERANDS,
        NeedFilter::TARGETS,
        NeedFilter::ALWAYS,
        NeedFilter::SYMBOLS,
    );
    let veneer0 = 1 << 32;
    assert_eq!(
        filters,
        [
            (o, 1 << 31, 0),
            (s, 0, veneer0 | 0b10),
            (t, 0, 0),
            (a, 0, 0),
            (a, 0, 0),
            (o | t | s, 1 << 31, (1 << 33) | 0b01),
        ]
    );
}

/// The filter only skips instances none of whose needs count: the GOT and veneer bounds
/// after each push are those of counting every need of every instance.
#[test]
fn filtered_counts_equal_counting_every_need() {
    let programs = programs();
    let values = [
        0u64,
        7,
        (1 << 31) - 1,
        1 << 31,
        -(1i64 << 31) as u64,
        -(1i64 << 31) as u64 - 1,
        1 << 40,
        u64::MAX,
    ];
    let (mut filtered, mut every) = (Layout::default(), Layout::default());
    let (mut counted, mut counted_every) = (Counted::default(), Counted::default());
    counted.reset();
    counted_every.reset();
    // A fixed pseudo-random sequence (xorshift), reproducible without a dependency.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for i in 0..5_000 {
        if i % 500 == 0 {
            // A new trace: everything counted so far is forgotten.
            (filtered, every) = (Layout::default(), Layout::default());
            counted.reset();
            counted_every.reset();
        }
        let p = &programs[next(programs.len())];
        let operands = [values[next(values.len())], values[next(values.len())]];
        let targets = [if next(4) == 0 {
            Target::Address(0x1000 * next(3) as u64)
        } else {
            Target::Instance(InstanceId::from_index(next(8)))
        }];
        filtered.place(p);
        every.place(p);
        let wide = operands
            .iter()
            .fold(0, |w, &o| w | o.wrapping_add(p.filter.operand_bias));
        let far = matches!(targets[0], Target::Address(_));
        filtered.count(p, (wide >> 32 != 0, far), &operands, &targets, &mut counted);
        every.count_each(p, &operands, &targets, &mut counted_every);
        assert_eq!(
            (filtered.got_bound, filtered.veneer_bound, filtered.internal),
            (every.got_bound, every.veneer_bound, every.internal),
            "push {i}"
        );
    }
    // The sequence reached every kind of count.
    assert!(every.got_bound > 0 && every.veneer_bound > 0 && every.internal > 0);
}

/// `Program::plain` is exactly code alignment 1, no data and no cold part, and `place`'s
/// shortcut for it gives what the general placement gives (code offset, code, data and
/// cold lengths), after instances that leave the code at every offset up to 40.
#[test]
fn plain_programs_are_placed_as_the_general_rule_places_them() {
    let (code, data) = ([0x90u8; 6], [7u8; 3]);
    let base = Stencil {
        code: &code,
        ..Stencil::EMPTY
    };
    let cases = [
        ("plain", base, true),
        (
            "aligned",
            Stencil {
                code_align: 16,
                ..base
            },
            false,
        ),
        (
            "with data",
            Stencil {
                init_data: &data,
                data_len: 3,
                ..base
            },
            false,
        ),
        (
            "with a cold part",
            Stencil {
                cold_len: 2,
                ..base
            },
            false,
        ),
    ];
    for (what, stencil, plain) in cases {
        let mut p = Program::alone(&stencil, false, 0xcc);
        assert_eq!(p.plain, plain, "{what}");
        for before in 0..=40u64 {
            let start = Layout {
                code_len: before,
                data_len: 5,
                cold_len: 3,
                ..Layout::default()
            };
            let (mut shortcut, mut general) = (start, start);
            let at = shortcut.place(&p);
            p.plain = false;
            let expected = general.place(&p);
            p.plain = plain;
            assert_eq!(at, expected, "{what}, after {before} bytes");
            let lengths = |l: &Layout| (l.code_len, l.data_len, l.cold_len);
            assert_eq!(
                lengths(&shortcut),
                lengths(&general),
                "{what}, after {before} bytes"
            );
        }
    }
}
