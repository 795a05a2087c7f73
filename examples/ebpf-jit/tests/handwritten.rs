//! Hand-written programs for every opcode rbpf 0.4 accepts and its edges, each run through
//! rbpf's interpreter, the JIT and this crate's interpreter (tests/common).

mod common;

use common::*;
use ebpf_jit::{decode, AluOp, Cond, ErrorKind, Kind, Width};

/// Prints how many programs the test ran through all three VMs (see with --nocapture).
struct Count(&'static str);

impl Drop for Count {
    fn drop(&mut self) {
        println!("{}: {} programs checked", self.0, CHECKED.with(|c| c.get()));
    }
}

fn ok(o: &Outcome) -> u64 {
    o.result
        .unwrap_or_else(|e| panic!("expected r0, got {e:?}"))
}

fn err(o: &Outcome) -> ErrorKind {
    o.result.expect_err("expected an error").0
}

#[test]
fn alu_every_op_width_and_source_on_edge_values() {
    let _count = Count("alu_every_op_width_and_source_on_edge_values");
    let mut cases = 0;
    for op in ALU_OPS {
        for wide in [true, false] {
            for &a in &EDGE64 {
                for &b in &EDGE64 {
                    // Register source: r2 op= r3.
                    let mut p = Asm::new();
                    p.lddw(2, a).lddw(3, b).alu(op, wide, 2, Src::Reg(3));
                    p.mov64(0, Src::Reg(2)).exit();
                    check(&p.bytes(), &[], None);
                    cases += 1;
                }
                for &imm in &EDGE32 {
                    let mut p = Asm::new();
                    p.lddw(2, a).alu(op, wide, 2, Src::Imm(imm));
                    p.mov64(0, Src::Reg(2)).exit();
                    check(&p.bytes(), &[], None);
                    cases += 1;
                }
                // dst == src.
                let mut p = Asm::new();
                p.lddw(4, a)
                    .alu(op, wide, 4, Src::Reg(4))
                    .mov64(0, Src::Reg(4))
                    .exit();
                check(&p.bytes(), &[], None);
            }
        }
    }
    assert!(cases > 10_000);
}

#[test]
fn division_and_modulo_by_zero_follow_rbpf() {
    let _count = Count("division_and_modulo_by_zero_follow_rbpf");
    let v = 0xdead_beef_1234_5678u64;
    let run = |op, wide, src: Src| {
        let mut p = Asm::new();
        p.lddw(2, v).mov64(3, Src::Imm(0)).alu(op, wide, 2, src);
        p.mov64(0, Src::Reg(2)).exit();
        ok(&check(&p.bytes(), &[], None))
    };
    for src in [Src::Imm(0), Src::Reg(3)] {
        assert_eq!(run(AluOp::Div, true, src), 0);
        assert_eq!(run(AluOp::Div, false, src), 0);
        assert_eq!(run(AluOp::Mod, true, src), v);
        // MOD32 by zero keeps all 64 bits.
        assert_eq!(run(AluOp::Mod, false, src), v);
    }
    // A register whose low half is zero is a zero divisor for the 32-bit forms only.
    let mut p = Asm::new();
    p.lddw(2, 100)
        .lddw(3, 0x5_0000_0000)
        .alu(AluOp::Div, false, 2, Src::Reg(3));
    p.mov64(0, Src::Reg(2)).exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 0);
    // DIV64 by imm -1 divides by u64::MAX (the immediate is sign-extended).
    let mut p = Asm::new();
    p.lddw(2, u64::MAX)
        .alu(AluOp::Div, true, 2, Src::Imm(-1))
        .mov64(0, Src::Reg(2))
        .exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 1);
}

#[test]
fn neg_shifts_and_sign_extension() {
    let _count = Count("neg_shifts_and_sign_extension");
    for &a in &EDGE64 {
        for wide in [true, false] {
            let mut p = Asm::new();
            p.lddw(5, a).kind(
                Kind::Alu {
                    op: AluOp::Neg,
                    wide,
                    reg: false,
                },
                5,
                0,
                0,
                0,
            );
            p.mov64(0, Src::Reg(5)).exit();
            check(&p.bytes(), &[], None);
        }
    }
    // Shift amounts are masked (63 / 31), immediates and registers alike.
    for amount in [0i32, 1, 31, 32, 33, 63, 64, 65, -1, 1000] {
        for op in [AluOp::Lsh, AluOp::Rsh, AluOp::Arsh] {
            for wide in [true, false] {
                let mut p = Asm::new();
                p.lddw(2, 0x8765_4321_fedc_ba98)
                    .alu(op, wide, 2, Src::Imm(amount));
                p.mov64(0, Src::Reg(2)).exit();
                check(&p.bytes(), &[], None);
            }
        }
    }
    // MOV32 zero-extends, MOV64 imm sign-extends.
    let mut p = Asm::new();
    p.alu(AluOp::Mov, false, 0, Src::Imm(-1)).exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 0xffff_ffff);
    let mut p = Asm::new();
    p.mov64(0, Src::Imm(-1)).exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), u64::MAX);
}

#[test]
fn byte_swaps() {
    let _count = Count("byte_swaps");
    for to_be in [false, true] {
        for width in [16, 32, 64] {
            let mut p = Asm::new();
            p.lddw(3, 0x0102_0304_0506_0708)
                .kind(Kind::End { to_be }, 3, 0, 0, width);
            p.mov64(0, Src::Reg(3)).exit();
            let r0 = ok(&check(&p.bytes(), &[], None));
            let want = match (to_be, width) {
                (false, 16) => 0x0708,
                (false, 32) => 0x0506_0708,
                (false, _) => 0x0102_0304_0506_0708,
                (true, 16) => 0x0807,
                (true, 32) => 0x0807_0605,
                (true, _) => 0x0807_0605_0403_0201,
            };
            assert_eq!(r0, want);
        }
    }
}

#[test]
fn lddw_values_and_into_r10() {
    let _count = Count("lddw_values_and_into_r10");
    for &v in &EDGE64 {
        let mut p = Asm::new();
        p.lddw(0, v).exit();
        assert_eq!(ok(&check(&p.bytes(), &[], None)), v);
    }
    // rbpf's verifier lets LD_DW write r10 (a store, to its register check).
    let mut p = Asm::new();
    p.lddw(10, 77).mov64(0, Src::Reg(10)).exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 77);
}

#[test]
fn every_jump_condition_on_edge_values() {
    let _count = Count("every_jump_condition_on_edge_values");
    let values = [
        0u64,
        1,
        2,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0x1_0000_0001,
        u64::MAX - 1,
        u64::MAX,
        0x8000_0000_0000_0000,
        0x7fff_ffff_ffff_ffff,
    ];
    let imms = [0i32, 1, 2, -1, -2, 0x7fff_ffff, i32::MIN];
    for cond in CONDS {
        for wide in [true, false] {
            for &a in &values {
                let mut srcs: Vec<(Src, Option<u64>)> =
                    values.iter().map(|&b| (Src::Reg(3), Some(b))).collect();
                srcs.extend(imms.iter().map(|&i| (Src::Imm(i), None)));
                for (src, b) in srcs {
                    let mut p = Asm::new();
                    p.lddw(2, a).lddw(3, b.unwrap_or(0)).mov64(0, Src::Imm(0));
                    p.jmp(cond, wide, 2, src, 1).mov64(0, Src::Imm(1)).exit();
                    check(&p.bytes(), &[], None);
                }
                // A register compared with itself (src/canon.rs folds it).
                let mut p = Asm::new();
                p.lddw(2, a).mov64(0, Src::Imm(0));
                p.jmp(cond, wide, 2, Src::Reg(2), 1)
                    .mov64(0, Src::Imm(1))
                    .exit();
                check(&p.bytes(), &[], None);
            }
        }
    }
    // JA forward, and backward over an EXIT.
    let mut p = Asm::new();
    p.mov64(0, Src::Imm(5)).ja(2).exit().exit().ja(-2);
    // #0 mov, #1 ja +2 -> #4 ja -2 -> #3 exit.
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 5);
}

#[test]
fn loops_run_backward_jumps() {
    let _count = Count("loops_run_backward_jumps");
    // r0 = sum of 1..=100 by a loop.
    let mut p = Asm::new();
    p.mov64(0, Src::Imm(0)).mov64(1, Src::Imm(100));
    p.alu(AluOp::Add, true, 0, Src::Reg(1));
    p.alu(AluOp::Sub, true, 1, Src::Imm(1));
    p.jmp(Cond::Ne, true, 1, Src::Imm(0), -3).exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 5050);
}

fn mem16() -> Vec<u8> {
    (0..16).map(|i| 0x10 + i as u8).collect()
}

#[test]
fn loads_and_stores_at_the_edges_of_mem_and_stack() {
    let _count = Count("loads_and_stores_at_the_edges_of_mem_and_stack");
    let mem = mem16();
    for w in WIDTHS {
        let n = w.bytes() as i16;
        // mem through r1: the last fitting offset and one past it, and below the start.
        for off in [
            -1,
            0,
            1,
            16 - n - 1,
            16 - n,
            16 - n + 1,
            16,
            i16::MIN,
            i16::MAX,
        ] {
            let mut p = Asm::new();
            p.ldx(w, 0, 1, off).exit();
            check(&p.bytes(), &mem, None);
            let mut p = Asm::new();
            p.lddw(2, 0xa1a2_a3a4_a5a6_a7a8)
                .stx(w, 1, 2, off)
                .mov64(0, Src::Imm(3))
                .exit();
            check(&p.bytes(), &mem, None);
            let mut p = Asm::new();
            p.st(w, 1, off, -0x5a5a_5a5b).mov64(0, Src::Imm(4)).exit();
            check(&p.bytes(), &mem, None);
        }
        // The stack through r10: [-512, 0).
        for off in [-513, -512, -511, -n - 1, -n, -n + 1, 0] {
            let mut p = Asm::new();
            p.lddw(2, 0xb1b2_b3b4_b5b6_b7b8)
                .stx(w, 10, 2, off)
                .ldx(w, 0, 10, off)
                .exit();
            check(&p.bytes(), &mem, None);
            let mut p = Asm::new();
            p.st(w, 10, off, -7).ldx(w, 0, 10, off).exit();
            check(&p.bytes(), &mem, None);
        }
    }
    // Every width round-trips through mem, and what is stored stays.
    let mut p = Asm::new();
    p.lddw(2, 0x1122_3344_5566_7788)
        .stx(Width::Dw, 1, 2, 8)
        .st(Width::B, 1, 0, 0x99);
    p.st(Width::H, 1, 2, 0x1234_aabb)
        .st(Width::W, 1, 4, -2)
        .ldx(Width::Dw, 0, 1, 0)
        .exit();
    let o = check(&p.bytes(), &mem, None);
    assert_eq!(o.mem[8..16], 0x1122_3344_5566_7788u64.to_le_bytes());
    // An address whose end overflows is refused, not wrapped.
    let mut p = Asm::new();
    p.lddw(2, u64::MAX - 2).ldx(Width::W, 0, 2, 0).exit();
    assert_eq!(
        err(&check(&p.bytes(), &mem, None)),
        ErrorKind::OutOfBoundsLoad
    );
    // A null base (no memory at all).
    let mut p = Asm::new();
    p.st(Width::W, 1, 0, 1).exit();
    assert_eq!(
        err(&check(&p.bytes(), &[], None)),
        ErrorKind::OutOfBoundsStore
    );
}

#[test]
fn mbuff_mem_and_ld_abs_ind() {
    let _count = Count("mbuff_mem_and_ld_abs_ind");
    let mem = mem16();
    let mbuff: Vec<u8> = (0..12).map(|i| 0xc0 + i as u8).collect();
    for w in WIDTHS {
        // r1 is the mbuff; loads and stores at its edges.
        for off in [-1i16, 0, 12 - w.bytes() as i16, 13 - w.bytes() as i16] {
            let mut p = Asm::new();
            p.ldx(w, 0, 1, off).exit();
            check(&p.bytes(), &mem, Some(&mbuff));
            let mut p = Asm::new();
            p.st(w, 1, off, 0x3c3c_3c3c).mov64(0, Src::Imm(0)).exit();
            check(&p.bytes(), &mem, Some(&mbuff));
        }
        // LD_ABS / LD_IND read mem (rbpf checks 8 bytes whatever the width).
        for imm in [0, 1, 7, 8, 9, 15, 16, -1] {
            let mut p = Asm::new();
            p.kind(Kind::LdAbs(w), 0, 0, 0, imm).exit();
            check(&p.bytes(), &mem, Some(&mbuff));
            check(&p.bytes(), &mem, None);
            let mut p = Asm::new();
            p.mov64(4, Src::Imm(3))
                .kind(Kind::LdInd(w), 0, 4, 0, imm)
                .exit();
            check(&p.bytes(), &mem, Some(&mbuff));
        }
    }
    // An empty mbuff: r1 is mem again.
    let mut p = Asm::new();
    p.ldx(Width::B, 0, 1, 3).exit();
    assert_eq!(ok(&check(&p.bytes(), &mem, Some(&[]))), 0x13);
}

#[test]
fn helper_calls() {
    let _count = Count("helper_calls");
    for (id, _) in HELPERS {
        let mut p = Asm::new();
        p.lddw(2, 0x1234_5678_9abc)
            .mov64(3, Src::Imm(-5))
            .mov64(4, Src::Imm(7));
        p.mov64(5, Src::Imm(11)).call(id).exit();
        check(&p.bytes(), &[], None);
    }
    // Registers r1..r5 keep their values across a call (rbpf does not clobber them).
    let mut p = Asm::new();
    p.mov64(2, Src::Imm(40))
        .call(2)
        .alu(AluOp::Add, true, 0, Src::Reg(2))
        .exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 1002 + 40);
    // An unknown helper fails when it is called, not before.
    let mut p = Asm::new();
    p.mov64(0, Src::Imm(1))
        .jmp(Cond::Eq, true, 0, Src::Imm(1), 1);
    p.call(UNKNOWN_HELPER).exit();
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 1);
    let mut p = Asm::new();
    p.call(UNKNOWN_HELPER).exit();
    assert_eq!(err(&check(&p.bytes(), &[], None)), ErrorKind::UnknownHelper);
}

#[test]
fn local_calls_save_registers_and_move_the_stack() {
    let _count = Count("local_calls_save_registers_and_move_the_stack");
    // main: r6 = 6; call f; r0 += r6 + what f stored 256 bytes lower. f: r6 = 100,
    // stores 9 below its r10, r0 = 1000.
    let mut p = Asm::new();
    p.mov64(6, Src::Imm(6)) // #0
        .call_local(4) // #1 -> #6
        .alu(AluOp::Add, true, 0, Src::Reg(6)) // #2
        .ldx(Width::Dw, 7, 10, -264) // #3: f's slot, 256 lower
        .alu(AluOp::Add, true, 0, Src::Reg(7)) // #4
        .exit() // #5
        .mov64(6, Src::Imm(100)) // #6: f
        .st(Width::Dw, 10, -8, 9) // #7
        .mov64(0, Src::Imm(1000)) // #8
        .exit(); // #9
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 1000 + 6 + 9);
    // Eight nested calls are fine, the ninth fails.
    for depth in [8, 9] {
        // f_k calls f_{k+1}; the last returns 42.
        let mut p = Asm::new();
        for _ in 0..depth {
            p.call_local(1).exit();
        }
        p.mov64(0, Src::Imm(42)).exit();
        let o = check(&p.bytes(), &[], None);
        if depth == 8 {
            assert_eq!(ok(&o), 42);
        } else {
            assert_eq!(err(&o), ErrorKind::CallDepth);
        }
    }
    // Unbounded recursion.
    let mut p = Asm::new();
    p.call_local(-1).exit();
    assert_eq!(err(&check(&p.bytes(), &[], None)), ErrorKind::CallDepth);
    // The stack moves with the depth: at depth 2 r10 is the stack's start.
    let mut p = Asm::new();
    p.call_local(1)
        .exit()
        .call_local(1)
        .exit()
        .st(Width::B, 10, -1, 1)
        .exit();
    assert_eq!(
        err(&check(&p.bytes(), &[], None)),
        ErrorKind::OutOfBoundsStore
    );
    // A call as the last instruction returns past the end.
    let mut p = Asm::new();
    p.ja(1).exit().call_local(-2);
    assert_eq!(err(&check_ours(&p.bytes(), &[])), ErrorKind::FellOffEnd);
}

#[test]
fn running_off_the_end_and_into_an_lddw_fail_cleanly() {
    let _count = Count("running_off_the_end_and_into_an_lddw_fail_cleanly");
    // rbpf's interpreter panics on both; ours report them.
    let mut p = Asm::new();
    p.mov64(0, Src::Imm(0))
        .jmp(Cond::Eq, true, 0, Src::Imm(1), -2);
    assert_eq!(err(&check_ours(&p.bytes(), &[])), ErrorKind::FellOffEnd);
    let mut p = Asm::new();
    p.call_local(1).exit().lddw(0, 1).exit();
    // #0 call -> #2 lddw: fine (returns 1). Now into its second half:
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 1);
    let mut p = Asm::new();
    p.call_local(2).exit().lddw(0, 1).exit();
    assert_eq!(
        err(&check_ours(&p.bytes(), &[])),
        ErrorKind::InvalidInstruction
    );
}

#[test]
fn the_verifier_refuses_what_rbpf_refuses() {
    let _count = Count("the_verifier_refuses_what_rbpf_refuses");
    let exit = raw(0x95, 0, 0, 0, 0);
    let refused: Vec<Vec<u8>> = vec![
        vec![],                                   // empty
        vec![0x95, 0, 0, 0],                      // not a multiple of 8
        Asm::new().mov64(0, Src::Imm(0)).bytes(), // does not end in JMP class
        {
            let mut p = Asm::new();
            p.raw(0x06 | 0x10, 0, 0, 0, 0).insns.clear();
            p.raw(0xb7, 0, 0, 0, 0).raw(0x16, 0, 0, 0, 0);
            p.bytes()
        }, // ends in JMP32
        Asm::new().raw(0x00, 0, 0, 0, 0).exit().bytes(), // unknown opcode 0
        Asm::new().raw(0xc3, 1, 2, 0, 0).exit().bytes(), // XADD W
        Asm::new().raw(0xdb, 1, 2, 0, 0).exit().bytes(), // XADD DW
        Asm::new().raw(0x8d, 0, 0, 0, 0).exit().bytes(), // TAIL_CALL
        Asm::new().raw(0xd4, 1, 0, 0, 8).exit().bytes(), // LE 8
        Asm::new().raw(0xdc, 1, 0, 0, 0).exit().bytes(), // BE 0
        Asm::new().raw(0x18, 0, 0, 0, 1).exit().bytes(), // incomplete LD_DW
        Asm::new().ja(-1).exit().bytes(),         // infinite loop
        Asm::new().ja(5).exit().bytes(),          // out of the program
        Asm::new().ja(-2).exit().bytes(),         // before the program
        Asm::new().ja(1).lddw(0, 5).exit().bytes(), // into an LD_DW
        Asm::new().call_local(7).exit().bytes(),  // call out
        Asm::new().call_local(-2).exit().bytes(), // call before the start
        Asm::new().raw(0x85, 0, 2, 0, 1).exit().bytes(), // call type 2
        Asm::new().raw(0xbf, 0, 11, 0, 0).exit().bytes(), // src r11
        Asm::new().raw(0xb7, 10, 0, 0, 0).exit().bytes(), // write r10
        Asm::new().raw(0xb7, 11, 0, 0, 0).exit().bytes(), // dst r11
        Asm::new().raw(0x61, 10, 1, 0, 0).exit().bytes(), // load into r10
        Asm::new().raw(0x95, 10, 0, 0, 0).bytes(), // EXIT with dst r10
        Asm::new().raw(0x8c, 1, 2, 0, 0).exit().bytes(), // NEG32 with X
        Asm::new().raw(0xd7, 1, 0, 0, 16).exit().bytes(), // END in ALU64
        Asm::new().raw(0x0e, 1, 2, 0, 0).exit().bytes(), // JMP32 class, op 0
        Asm::new()
            .raw(0x00, 0, 0, 0, 0)
            .raw(0x95, 0, 0, 0, 0)
            .bytes(), // a lone second half
        Asm::new().raw(0x60, 0, 0, 0, 0).exit().bytes(), // LD class, MEM mode
    ];
    for prog in &refused {
        let o = check(prog, &[], None);
        assert_eq!(err(&o), ErrorKind::Verifier, "{}", disasm(prog));
    }
    // Accepted edges: stores through r10, a last instruction that is a jump.
    let mut p = Asm::new();
    p.st(Width::W, 10, -4, 3)
        .ldx(Width::W, 0, 10, -4)
        .ja(0)
        .insns
        .push(exit);
    assert_eq!(ok(&check(&p.bytes(), &[], None)), 3);
    // Every opcode byte: refused here exactly when rbpf refuses it.
    let mut accepted = 0;
    for opc in 0..=255u8 {
        let mut p = Asm::new();
        // (CALL with src 2 is an unsupported call type, refused.)
        p.raw(opc, 1, if opc == 0x85 { 0 } else { 2 }, 0, 16);
        if opc == 0x18 {
            p.raw(0, 0, 0, 0, 0);
        }
        p.exit();
        let reference = run_rbpf(&p.bytes(), &[0; 64], None);
        let ours = ebpf_jit::verify(&p.bytes());
        let refused = matches!(reference.result, Err((ErrorKind::Verifier, _)));
        assert_eq!(refused, ours.is_err(), "opcode {opc:#04x}");
        assert_eq!(
            ours.is_ok(),
            decode(opc).is_some_and(|k| !matches!(k, Kind::Xadd | Kind::TailCall))
        );
        accepted += usize::from(ours.is_ok());
    }
    // 13 ALU ops x 2 sources x 2 classes - NEG with X x 2 + LE + BE, 11 conditions x 2 x 2 + JA
    // + CALL + EXIT, 4 LDX + 4 ST + 4 STX + 4 LD_ABS + 4 LD_IND + LD_DW.
    assert_eq!(accepted, (13 * 2 * 2 - 2 + 2) + (11 * 2 * 2 + 3) + 21);
}

/// A load or store outside the regions leaves the trace from its cold part, which recomputes the
/// address from the base register: the JIT's error names the same instruction, address,
/// width and direction as the interpreter's, with the base pinned (in every slot) or in the
/// frame and with a negative offset.
#[test]
fn faults_name_the_instruction_address_and_width() {
    let _count = Count("faults_name_the_instruction_address_and_width");
    // One buffer for every run: the errors name absolute addresses.
    let mut mem = [0u8; 16];
    let no_helpers = std::collections::HashMap::new();
    let pin_sets: [&[u8]; 7] = [
        &[],
        &[3],
        &[0, 3],
        &[0, 1, 3],
        &[0, 1, 2, 3],
        &[0, 1, 2, 4, 3],
        &[3, 0, 1, 2, 4],
    ];
    for w in [Width::B, Width::H, Width::W, Width::Dw] {
        // (The offset's extremes too: a faulting access recomputes its address from it.)
        for off in [16 - w.bytes() as i16 + 1, -1, i16::MIN, i16::MAX] {
            for access in 0..3 {
                let mut p = Asm::new();
                p.mov64(3, Src::Reg(1)).mov64(4, Src::Imm(5));
                match access {
                    0 => p.ldx(w, 0, 3, off),
                    1 => p.st(w, 3, off, 7),
                    _ => p.stx(w, 3, 4, off),
                };
                p.exit();
                let prog = p.bytes();
                let vm = ebpf_jit::EbpfVm::new(&prog).unwrap();
                let expected = format!("{:?}", vm.interpret(&mut mem).unwrap_err());
                assert!(expected.contains("OutOfBounds"), "{expected}");
                for pins in pin_sets {
                    let compiled = compiler().compile_pinned(&prog, &no_helpers, pins).unwrap();
                    let got = compiled.run(&mut mem, &mut []).unwrap_err();
                    assert_eq!(
                        format!("{got:?}"),
                        expected,
                        "pins {pins:?}\n{}",
                        disasm(&prog)
                    );
                }
                CHECKED.with(|c| c.set(c.get() + 1));
            }
        }
    }
}

/// A helper call's stencil is chosen by the places of r0 (its result) and r1 (its first
/// argument): r0 pinned in any slot or in the frame, r1 pinned (the compiler moves it to
/// slot 3, where a C call passes it) or in the frame, in a loop that feeds r0 back into r1,
/// with a helper that reads all five arguments; r1..r5 must survive it.
#[test]
fn helper_calls_with_r0_and_r1_in_every_place() {
    fn all_args(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
        a.wrapping_mul(0x9e37_79b9) ^ b.rotate_left(13) ^ c.wrapping_mul(3) ^ d.rotate_left(29) ^ e
    }
    let mut p = Asm::new();
    for (r, v) in [(0, 7), (1, 11), (2, 22), (3, 33), (4, 44), (5, 55), (6, 3)] {
        p.mov64(r, Src::Imm(v));
    }
    p.call(1)
        .alu(AluOp::Add, true, 1, Src::Reg(0))
        .alu(AluOp::Sub, true, 6, Src::Imm(1))
        .jmp(Cond::Ne, true, 6, Src::Imm(0), -4);
    for r in 1..=5 {
        p.alu(AluOp::Mul, true, 0, Src::Imm(31))
            .alu(AluOp::Xor, true, 0, Src::Reg(r));
    }
    p.exit();
    let prog = p.bytes();
    let mut vm = ebpf_jit::EbpfVm::new(&prog).unwrap();
    vm.register_helper(1, all_args);
    let expected = vm.interpret(&mut []).unwrap();
    let helpers = [(1u32, ebpf_jit::Helper::new(all_args))]
        .into_iter()
        .collect();
    // The rank whose register goes to slot k (the inverse of src/jit.rs's SLOT_OF_RANK).
    const RANK_OF_SLOT: [usize; 5] = [0, 1, 4, 2, 3];
    let mut combinations = 0;
    for d in 0..=5 {
        for s in (0..=5).filter(|&s| s == 5 || s != d) {
            let mut pins: [Option<u8>; 5] = [None; 5];
            if d < 5 {
                pins[RANK_OF_SLOT[d]] = Some(0);
            }
            if s < 5 {
                pins[RANK_OF_SLOT[s]] = Some(1);
            }
            let mut fillers = [2u8, 3, 4, 5, 6].into_iter();
            let pins: Vec<u8> = pins
                .iter()
                .map(|p| p.unwrap_or_else(|| fillers.next().unwrap()))
                .collect();
            let compiled = compiler().compile_pinned(&prog, &helpers, &pins).unwrap();
            let got = compiled.run(&mut [], &mut []).unwrap();
            assert_eq!(
                got, expected,
                "r0 in place {d}, r1 in place {s} (pins {pins:?})"
            );
            combinations += 1;
        }
    }
    assert_eq!(combinations, 31);
}

/// A helper call whose arguments r2..r5 live in the frame or in the slots of their x86-64
/// argument registers (r2 in slot 4, r3 in slot 2) and after which the registers in the slots
/// a C call clobbers (2, 3, 4) are dead (written before they are read on every path) takes a
/// lean member, which stores and loads nothing: in the bench's helper loop (r2 = r6; call;
/// r1 = r0; r6 -= 1) and one that also passes r3, the result is the interpreter's with
/// either member, and the compiler takes the lean one, with the right ARGS, exactly where it
/// may (pins by rank; the rank's slot is src/jit.rs's SLOT_OF_RANK, [0, 1, 3, 4, 2]).
#[test]
fn lean_helper_calls_keep_only_what_is_read_after_them() {
    fn mix(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
        a.wrapping_mul(0x9e37_79b9) ^ b ^ c.rotate_left(7) ^ d.rotate_left(17) ^ e
    }
    // r3 is set once (read by every call) or per iteration (dead after each call).
    let program = |r3_per_iteration: bool| {
        let mut p = Asm::new();
        p.mov64(6, Src::Imm(40))
            .mov64(1, Src::Imm(5))
            .mov64(3, Src::Imm(33));
        p.mov64(2, Src::Reg(6));
        if r3_per_iteration {
            p.mov64(3, Src::Reg(6))
                .alu(AluOp::Xor, true, 3, Src::Imm(7));
        }
        let back = if r3_per_iteration { -7 } else { -5 };
        p.call(1)
            .mov64(1, Src::Reg(0))
            .alu(AluOp::Sub, true, 6, Src::Imm(1))
            .jmp(Cond::Ne, true, 6, Src::Imm(0), back)
            .exit();
        p.bytes()
    };
    let helpers = [(1u32, ebpf_jit::Helper::new(mix))].into_iter().collect();
    let options = cpjit_runtime::JitOptions {
        listing: true,
        ..ebpf_jit::Compiler::default_options()
    };
    let listed = ebpf_jit::Compiler::with_options(ebpf_jit::HOST_SET, options).unwrap();
    // Pinned r1, r2 and r3 move to slots 3, 4 and 2 (src/emit.rs, natural_arguments) from
    // the slots their ranks give (0, 1, 3, 4, 2), swapping with what is there.
    let cases: [(bool, &[u8], Option<u8>); 13] = [
        // Slots 2..4 hold r7 (never read), r1 and r2 (written first) or r0 (the result); r2
        // in slot 4, r3 in the frame or slot 2.
        (false, &[6, 0, 1, 2, 7], Some(1)),
        (false, &[6, 0, 1, 2], Some(1)),
        (false, &[6, 0, 1], Some(0)),
        (false, &[], Some(0)),
        (true, &[6, 0, 1, 2, 3], Some(3)),
        (true, &[6, 0, 7, 1, 3], Some(2)),
        // The same after the moves: r1, r2 (and r0) from slots 4, 2 (and 3); r6 from slot 3;
        // r3 from slot 3.
        (false, &[6, 7, 0, 1, 2], Some(1)),
        (false, &[1, 0, 6, 2], Some(1)),
        (true, &[6, 0, 3, 1], Some(2)),
        // r3 (read by the next call) or r6 (read by the SUB) in slots 2..4.
        (false, &[3, 6, 0, 1, 2], None),
        (false, &[6, 0, 1, 2, 3], None),
        (false, &[0, 1, 2, 6, 3], None),
        (false, &[0, 7, 6, 1, 2], None),
    ];
    for (r3_per_iteration, pins, lean) in cases {
        let prog = program(r3_per_iteration);
        let mut vm = ebpf_jit::EbpfVm::new(&prog).unwrap();
        vm.register_helper(1, mix);
        let expected = vm.interpret(&mut []).unwrap();
        let compiled = listed.compile_pinned(&prog, &helpers, pins).unwrap();
        let r0 = compiled.run(&mut [], &mut []).unwrap();
        assert_eq!(r0, expected, "pins {pins:?}");
        let listing = compiled.listing().unwrap();
        let args = (0..4u8).find(|a| listing.contains(&format!("_args{a} ")));
        assert_eq!(args, lean, "pins {pins:?}:\n{listing}");
    }
}

/// Helpers of every kind the API takes run the same in the JIT and the interpreter: a `fn`
/// item and a closure that captures nothing (zero-sized: no allocation), a `fn` pointer and a
/// closure with state (kept alive by the compiled program after the VM's own copy is
/// replaced).
#[test]
fn helpers_of_every_kind() {
    fn add(a: u64, b: u64, _: u64, _: u64, _: u64) -> u64 {
        a.wrapping_add(b)
    }
    let mut p = Asm::new();
    p.mov64(1, Src::Imm(3)).mov64(2, Src::Imm(4)).call(1).exit();
    let prog = p.bytes();
    let offset = std::sync::Arc::new(1000u64);
    let with_state = {
        let offset = offset.clone();
        move |a: u64, b: u64, _: u64, _: u64, _: u64| a * b + *offset
    };
    let pointer: HelperFn = add;
    let run = |register: &dyn Fn(&mut ebpf_jit::EbpfVm), expected: u64| {
        let mut vm = ebpf_jit::EbpfVm::new(&prog).unwrap();
        register(&mut vm);
        assert_eq!(vm.interpret(&mut []).unwrap(), expected);
        vm.jit_compile_with(compiler()).unwrap();
        // The trace keeps what it calls: replacing the VM's helper frees nothing it needs.
        vm.register_helper(1, add);
        assert_eq!(vm.execute_jit(&mut []).unwrap(), expected);
        std::sync::Arc::strong_count(&offset)
    };
    run(&|vm| vm.register_helper(1, add), 7);
    run(&|vm| vm.register_helper(1, |a, b, _, _, _| a * b), 12);
    run(&|vm| vm.register_helper(1, pointer), 7);
    // `offset`, `with_state` and the copy the trace holds.
    assert_eq!(
        run(&|vm| vm.register_helper(1, with_state.clone()), 1012),
        3
    );
    assert_eq!(std::sync::Arc::strong_count(&offset), 2);
}
