//! Operands and external symbols in every instruction position (`templates/testing/
//! positions.c`): ALU, compare, store address, call and jump. Each op runs on every stencil
//! set this process can execute (narrowed by `CPJIT_STENCILS`), with operand values on both
//! sides of every immediate and displacement limit, against its Rust reference. On x86-64
//! the ALU and compare ops put the hole in `add`/`xor`/`sub`/`and`/`cmp`/`test`/`or r,
//! [rip+G]`, which the runtime relaxes to `imm32` forms or patches as loads through GOT
//! slots (issue 16: these were rejected at `finish()`); small operands must come out as
//! immediates on every x86-64 set (ELF, Mach-O and COFF alike).

use crate::common;

use cpjit_model::StencilSet;
use cpjit_runtime::{Jit, Trace};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Operand values around every limit: 16 and 32 bits, signed `imm32`, ±2 GiB, 64 bits.
const VALUES: [u64; 9] = [
    0,
    1,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0xffff_ffff_8000_0000,
    u64::MAX,
    0x0123_4567_89ab_cdef,
];

/// `cpjit_test_cell`: the data symbol the symbol ops read and write.
static CELL: [AtomicI64; 4] = [const { AtomicI64::new(0) }; 4];

extern "C" fn mul_add(a: i64, b: i64, c: i64) -> i64 {
    cpjit_conformance::program::mul_add(a, b, c)
}

fn cell_address() -> u64 {
    CELL.as_ptr() as usize as u64
}

/// A trace `[shim, op_test_exit]`: the exit instance is the destination of the jump ops.
fn destination(set: &'static StencilSet<'static>) -> (Jit<'static>, Trace, u64) {
    let jit = Jit::new(set, |_| None).expect("jit");
    let mut b = jit.trace();
    b.push_shim().expect("shim");
    let exit = b.push_named("op_test_exit", &[], &[]).expect("exit");
    let trace = b.finish().expect("finish");
    let address = trace.entry(exit) as usize as u64;
    (jit, trace, address)
}

/// On x86-64, small operands of `op_test_operand_alu` must reach the code as immediates:
/// each of `add`, `xor`, `sub`, `and r64, [rip+G]` relaxed to `REX.W 81 /digit imm32`.
fn check_alu_relaxed(jit: &Jit<'_>) -> Result<(), String> {
    let operands = [0x1111, 0x2222, 0x3333, 0x4444];
    let (_, trace) = common::run_trace(jit, &[5], "op_test_operand_alu", &operands)?;
    let code = trace.code_bytes();
    // The `/digit` of `81`: add 0, xor 6, sub 5, and 4.
    for (value, digit) in operands.into_iter().zip([0u8, 6, 5, 4]) {
        let imm = (value as u32).to_le_bytes();
        let found = code.windows(7).any(|w| {
            w[0] & 0xf8 == 0x48 && w[1] == 0x81 && w[2] >> 3 == 0x18 | digit && w[3..] == imm
        });
        if !found {
            return Err(format!(
                "{}: operand {value:#x} of op_test_operand_alu was not relaxed to `81 /{digit} imm32`",
                jit.stencil_set().target
            ));
        }
    }
    Ok(())
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let (_dest_jit, _dest_trace, dest) = destination(set);
    let jit = Jit::new(set, move |name| match name {
        "cpjit_test_mul_add" => Some(mul_add as *const () as usize as u64),
        "cpjit_test_cell" => Some(cell_address()),
        "cpjit_test_jump_dest" => Some(dest),
        _ => None,
    })
    .map_err(|e| format!("{target}: {e}"))?;
    if set.arch == cpjit_model::Arch::X86_64 {
        check_alu_relaxed(&jit)?;
    }
    let mut checks = 0;
    let mut expect = |what: String, got: u64, want: u64| {
        common::expect_eq(&mut checks, got, want, || format!("{target}: {what}"))
    };
    let rotations = VALUES.len();
    for (i, &top) in VALUES.iter().enumerate() {
        // Four distinct operands per run, rotated so each value meets each position.
        let o: Vec<u64> = (0..4).map(|k| VALUES[(i + k) % rotations]).collect();
        let x = top.wrapping_mul(3);

        let alu = (((x.wrapping_add(o[0]).wrapping_mul(5) ^ o[1])
            .wrapping_mul(7)
            .wrapping_sub(o[2])
            .wrapping_mul(9))
            & o[3])
            .wrapping_mul(11);
        let got = common::run(&jit, &[top], "op_test_operand_alu", &o)?;
        expect(format!("operand_alu top {top:#x} {o:#x?}"), got, alu)?;

        // Equality needs an operand equal to top * 3 as well.
        for o0 in [o[0], x] {
            let ops = [o0, o[1], o[2], o[3]];
            let cmp = u64::from(x == o0)
                | u64::from(x < o[1]) << 1
                | u64::from(x & o[2] != 0) << 2
                | (x | o[3]) << 3;
            let got = common::run(&jit, &[top], "op_test_operand_compare", &ops)?;
            expect(format!("operand_compare top {top:#x} {ops:#x?}"), got, cmp)?;
        }

        let slot = AtomicU64::new(0);
        let address = slot.as_ptr() as usize as u64;
        let got = common::run(&jit, &[top], "op_test_operand_store", &[address])?;
        expect(format!("operand_store top {top:#x} (exit)"), got, top)?;
        expect(
            format!("operand_store top {top:#x}"),
            slot.load(Ordering::SeqCst),
            x,
        )?;

        let (a, b, c) = (top, o[1], o[2]);
        let helper = mul_add as *const () as usize as u64;
        let got = common::run(&jit, &[a, b, c], "op_test_operand_call", &[helper])?;
        let want = mul_add(a as i64, b as i64, c as i64) as u64;
        expect(format!("operand_call {a:#x} {b:#x} {c:#x}"), got, want)?;

        let got = common::run(&jit, &[top], "op_test_operand_jump", &[dest])?;
        expect(format!("operand_jump top {top:#x}"), got, x)?;

        let cell = cell_address();
        let got = common::run(&jit, &[top], "op_test_symbol_alu", &[])?;
        let want = x.wrapping_add(cell).wrapping_mul(5);
        expect(format!("symbol_alu top {top:#x}"), got, want)?;

        // 3 * 0xaaaa_aaaa_aaaa_aaab = 1 (mod 2^64): this top makes top * 3 the cell's address.
        let equal = cell.wrapping_mul(0xaaaa_aaaa_aaaa_aaab);
        for t in [top, equal] {
            let want = if t.wrapping_mul(3) == cell { 7 } else { 9 };
            let got = common::run(&jit, &[t], "op_test_symbol_compare", &[])?;
            expect(format!("symbol_compare top {t:#x}"), got, want)?;
        }

        CELL[0].store(o[3] as i64, Ordering::SeqCst);
        let got = common::run(&jit, &[top], "op_test_symbol_store", &[])?;
        expect(format!("symbol_store top {top:#x} (exit)"), got, top)?;
        let stored = CELL[1].load(Ordering::SeqCst) as u64;
        expect(
            format!("symbol_store top {top:#x}"),
            stored,
            x.wrapping_add(o[3]),
        )?;

        let got = common::run(&jit, &[top], "op_test_symbol_jump", &[])?;
        expect(format!("symbol_jump top {top:#x}"), got, x)?;
    }
    Ok(checks)
}

#[test]
fn operands_and_symbols_work_in_every_instruction_position() {
    common::check_every_executable_set("position", check);
}
